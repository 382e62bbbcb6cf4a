//! The autoscaler's options: upstream cluster-autoscaler's flags (names, syntax, defaults and
//! what ours does with each), the `ClusterAutoscaler` resource of `--config`, and a scenario's
//! `options:`, read in layers into one validated [`RunOptions`] that `run`, `plan` and the
//! simulator share. It also holds the bounded reading of the files those options name.
//!
//! It decides what each flag and config field means and whether a value is acceptable, naming
//! the flag or the field when not. It never starts anything (no client, no logging, no
//! runtime), never panics on any input, and reads a file only within its size limit.
#![warn(missing_docs)]

mod bounded_file;
mod cli_error;
mod config;
mod flags;
mod landing;
mod options;
mod yaml;

pub use bounded_file::{
    CERTIFICATE_LIMIT, CONFIG_LIMIT, FileError, KUBECONFIG_LIMIT, SCENARIO_LIMIT, SNAPSHOT_LIMIT,
    TOKEN_LIMIT, read_bounded, read_bounded_text, size as file_size,
};
pub use cli_error::CliError;
pub use config::{
    API_VERSION as CONFIG_API_VERSION, CLUSTER_SOURCE as CONFIG_CLUSTER_SOURCE,
    ClusterAutoscalerResource, ConfigFileError, FileSettings, GpuSpec, KIND as CONFIG_KIND, Mode,
    RangeSpec, ResourceLimitsSpec, ScaleDownSpec, ScaleUpSpec, Spec,
    from_cluster as config_from_cluster, load as load_config, parse as parse_config,
};
pub use flags::{
    CompatArgs, FLAGS, Kind as FlagKind, Source as FlagSource, Status as FlagStatus, Unsupported,
    UpstreamFlag, markdown as flags_markdown, with_table_defaults,
};
pub use options::{
    AutoscalingArgs, CLUSTERAPI_PROVIDER, DEFAULT_VERBOSITY, LogFormat, ManagementCluster,
    OPENSHIFT_PROVIDER, OptionsError, RunArgs, RunOptions, SettingError, is_setting,
    normalize_args, parse_address, setting_names,
};
pub use yaml::from_str as yaml_from_str;

//! The flags of `run` (upstream cluster-autoscaler's names, syntax and defaults) and their
//! conversion into one validated [`RunOptions`]: defaults, then the `--config` file, then (for
//! `simulate`) the scenario's `options:`, then the flags given on the command line, then one
//! validation of the whole. `run`, `plan` and `simulate` take the same flags; a scenario's
//! `options:` are the [`AutoscalingArgs`] named as the flags, read by the flags' own parsers.
//!
//! It decides what each flag means and whether a value is acceptable; it never starts anything
//! (no client, no logging, no runtime) and never panics on any input: every rejected value comes
//! back as an [`OptionsError`] naming the flag (or the config field) and the value.
//!
//! Syntax follows Go's `flag` package as upstream's binary accepts it: `--flag=value`,
//! `--flag value`, `-flag` (see [`normalize_args`]), bare booleans (`--leader-elect`) and
//! `--flag=false`; `--flag false` does not consume `false`. Durations are Go durations (`10s`,
//! `1m30s`).

use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use autoscaler_clusterapi::ClusterApiConfig;
use autoscaler_core::AutoscalerOptions;
use autoscaler_core::ExpanderChain;
use autoscaler_kube::ControllerConfig;
use autoscaler_model::Range;
use autoscaler_model::parse_duration;

use crate::config::{self, ConfigFileError};

/// Go's boolean syntax (`strconv.ParseBool`).
pub(crate) fn go_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("{text:?} is not a boolean (true or false)")),
    }
}

/// A Go duration.
fn go_duration(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|e| e.to_string())
}

/// A ratio in [0, 1].
fn fraction(text: &str) -> Result<f64, String> {
    let v: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if !(0.0..=1.0).contains(&v) {
        return Err(format!("{text} is not between 0 and 1"));
    }
    Ok(v)
}

/// A finite number >= 0.
fn non_negative(text: &str) -> Result<f64, String> {
    let v: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("{text} is not a finite number >= 0"));
    }
    Ok(v)
}

/// A percentage in [0, 100].
fn percentage(text: &str) -> Result<f64, String> {
    let v = non_negative(text)?;
    if v > 100.0 {
        return Err(format!("{text} is above 100"));
    }
    Ok(v)
}

/// Flags of `run`. Every flag is optional here: an absent flag leaves the value of the config
/// file, else upstream's default (the flag table's, [`crate::FLAGS`], shown in the help).
#[derive(Clone, Debug, Default, clap::Args)]
#[command(next_help_heading = "General")]
pub struct RunArgs {
    /// A `ClusterAutoscaler` resource (`autoscaling.openshift.io/v1`, YAML); flags given on the
    /// command line win over it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Path to a kubeconfig file (default: in-cluster config, else `KUBECONFIG` / ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Cluster API: kubeconfig of the management cluster, where the Machines, MachineSets,
    /// MachineDeployments and MachinePools live (nodes and pods are read through
    /// `--kubeconfig`) [default: the cluster of `--kubeconfig`, see
    /// `--clusterapi-cloud-config-authoritative`].
    #[arg(long, value_name = "FILE")]
    pub cloud_config: Option<String>,
    /// Cluster API: without `--cloud-config`, the management cluster is the one the
    /// autoscaler runs in (in-cluster configuration), never `--kubeconfig`'s.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    pub clusterapi_cloud_config_authoritative: Option<bool>,
    /// Namespace of the leader Lease, the status ConfigMap and the priority-expander ConfigMap.
    #[arg(long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Cloud provider: `clusterapi`, or `openshift` (OpenShift's Machine API MachineSets of
    /// openshift-machine-api plus Cluster API, in one process) [default: clusterapi].
    #[arg(long, value_name = "NAME")]
    pub cloud_provider: Option<String>,
    /// Node-group auto-discovery: `clusterapi:namespace=NS,clusterName=NAME,<label>=<value>`;
    /// repeatable (ORed).
    #[arg(long, value_name = "SPEC")]
    pub node_group_auto_discovery: Vec<String>,
    /// Address of `/metrics` and `/health-check`.
    #[arg(long, value_name = "HOST:PORT")]
    pub address: Option<String>,
    /// Log verbosity, 0 to 10 [default: 1]: 0-1 decisions and changes
    /// (info), 2-4 also why (debug), 5-7 everything of the autoscaler (trace), 8 also the HTTP
    /// client's requests, 9-10 every library's traces.
    #[arg(long = "v", value_name = "LEVEL", value_parser = clap::value_parser!(u8).range(0..=10))]
    pub verbosity: Option<u8>,
    /// Log format: `text` (one line per record) or `json` (one JSON object per line).
    #[arg(long, value_name = "FORMAT", value_enum)]
    pub logging_format: Option<LogFormat>,
    /// Elect a leader on a Lease before acting.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    pub leader_elect: Option<bool>,
    /// Lease duration.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub leader_elect_lease_duration: Option<Duration>,
    /// How long the leader tries to renew before giving up.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub leader_elect_renew_deadline: Option<Duration>,
    /// Wait between attempts to acquire or renew the Lease.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub leader_elect_retry_period: Option<Duration>,
    /// Name of the Lease.
    #[arg(long, value_name = "NAME")]
    pub leader_elect_resource_name: Option<String>,
    /// Write the status ConfigMap.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    pub write_status_configmap: Option<bool>,
    /// Name of the status ConfigMap.
    #[arg(long, value_name = "NAME")]
    pub status_config_map_name: Option<String>,
    /// `/health-check` fails when no loop ran for this long.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub max_inactivity: Option<Duration>,
    /// `/health-check` fails when loops kept failing for this long.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub max_failing_time: Option<Duration>,
    /// The settings of the decision, the loop and the drain (those `simulate` honours).
    #[command(flatten)]
    pub autoscaling: AutoscalingArgs,
    /// `/health-check` fails when no loop succeeded this long after this replica started
    /// running loops.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub max_startup_time: Option<Duration>,
    /// Expose the per-node-group gauges (`node_group_min_count`, `node_group_max_count`,
    /// `node_group_target_count`, `node_group_healthiness`, `node_group_backoff_status`).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    pub emit_per_nodegroup_metrics: Option<bool>,
    /// Serve the last loop's plan (the document `plan --output json` prints) at `/explain` on
    /// `--address`, when this replica leads. Ours, not upstream's [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    pub enable_explain_endpoint: Option<bool>,
    /// Put a `NoScaleDown` event on each node a loop does not remove, saying why (the reason
    /// class and the detail `plan` prints); again when the reason changes, else at most every
    /// 5 minutes per node. Ours, not upstream's [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    pub emit_unremovable_node_events: Option<bool>,
    /// The other upstream flags this autoscaler does not implement (see [`crate::flags`]).
    #[command(flatten)]
    pub compat: crate::flags::CompatArgs,
}

/// The flags that set how the autoscaler decides and acts, rather than how the live process
/// talks to its cluster: the loop interval, the drain deadline, scale-up, scale-down and
/// cluster state. A scenario's `options:` holds exactly these, named as the flags are (see
/// [`AutoscalingArgs::from_settings`]), so a flag added here works in `run`, `plan`,
/// `simulate` and scenario files alike.
#[derive(Clone, Debug, Default, clap::Args)]
#[command(next_help_heading = "General")]
pub struct AutoscalingArgs {
    /// How often the cluster is re-evaluated (in `simulate`, in virtual time).
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub scan_interval: Option<Duration>,
    /// How long a drain retries an eviction refused by a PodDisruptionBudget.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub max_pod_eviction_time: Option<Duration>,
    /// Scale-up flags.
    #[command(flatten)]
    pub scale_up: ScaleUpArgs,
    /// Scale-down flags.
    #[command(flatten)]
    pub scale_down: ScaleDownArgs,
    /// Cluster-state flags.
    #[command(flatten)]
    pub cluster_state: ClusterStateArgs,
}

/// Scale-up flags.
#[derive(Clone, Debug, Default, clap::Args)]
#[command(next_help_heading = "Scale-up")]
pub struct ScaleUpArgs {
    /// Expander chain, comma-separated: random, most-pods, least-waste, least-nodes, price,
    /// priority, and unit-price (ours, not upstream's: the lowest price per unit of what the
    /// pods need; docs/decision-quality.md).
    #[arg(long, value_name = "NAMES")]
    pub expander: Option<String>,
    /// Pods with a priority below this never cause a scale-up.
    #[arg(long, value_name = "INT", allow_negative_numbers = true)]
    pub expendable_pods_priority_cutoff: Option<i32>,
    /// Pods younger than this are not acted on yet.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub new_pod_scale_up_delay: Option<Duration>,
    /// Most nodes added in one scale-up.
    #[arg(long = "max-nodes-per-scaleup", value_name = "INT")]
    pub max_nodes_per_scaleup: Option<usize>,
    /// Grow node groups below their min size.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    pub enforce_node_group_min_size: Option<bool>,
    /// Balance the sizes of similar node groups.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    pub balance_similar_node_groups: Option<bool>,
    /// A label ignored when comparing node groups; repeatable.
    #[arg(long, value_name = "LABEL")]
    pub balancing_ignore_label: Vec<String>,
    /// A label that alone decides similarity of node groups; repeatable.
    #[arg(long, value_name = "LABEL")]
    pub balancing_label: Vec<String>,
    /// Largest relative difference of allocatable between similar groups.
    #[arg(long, value_name = "RATIO", value_parser = non_negative)]
    pub max_allocatable_difference_ratio: Option<f64>,
    /// Largest relative difference of free resources between similar groups.
    #[arg(long, value_name = "RATIO", value_parser = non_negative)]
    pub max_free_difference_ratio: Option<f64>,
    /// Largest relative difference of memory capacity between similar groups.
    #[arg(long, value_name = "RATIO", value_parser = non_negative)]
    pub memory_difference_ratio: Option<f64>,
    /// A taint key of a node still starting: while a node carries it the node counts as not
    /// ready, and templates leave it out; repeatable.
    #[arg(long, value_name = "KEY")]
    pub startup_taint: Vec<String>,
    /// Deprecated name of `--startup-taint`; repeatable.
    #[arg(long, value_name = "KEY")]
    pub ignore_taint: Vec<String>,
    /// Most nodes in the cluster, 0 for no limit.
    #[arg(long, value_name = "INT")]
    pub max_nodes_total: Option<usize>,
    /// Cores in the cluster, `min:max`.
    #[arg(long, value_name = "MIN:MAX")]
    pub cores_total: Option<String>,
    /// Memory in the cluster in GiB, `min:max`.
    #[arg(long, value_name = "MIN:MAX")]
    pub memory_total: Option<String>,
    /// GPUs of one type in the cluster, `type:min:max`; repeatable.
    #[arg(long, value_name = "TYPE:MIN:MAX")]
    pub gpu_total: Vec<String>,
    /// A taint key that only reports a node's status: templates leave it out, the node still
    /// counts as ready; repeatable.
    #[arg(long, value_name = "KEY")]
    pub status_taint: Vec<String>,
    /// Only pending pods of these schedulers (`spec.schedulerName`) are acted on, comma-separated
    /// or repeated [default: every scheduler].
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub allowed_scheduler_names: Vec<String>,
    /// Pending pods of these schedulers count as unschedulable before the scheduler has marked
    /// them, and scale-up does not wait for more new pods; comma-separated or repeated.
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub bypassed_scheduler_names: Vec<String>,
}

/// Scale-down flags.
#[derive(Clone, Debug, Default, clap::Args)]
#[command(next_help_heading = "Scale-down")]
pub struct ScaleDownArgs {
    /// Scale the cluster down.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    pub scale_down_enabled: Option<bool>,
    /// Wait after a scale-up before scale-down resumes.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub scale_down_delay_after_add: Option<Duration>,
    /// Wait after a node deletion before scale-down resumes.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub scale_down_delay_after_delete: Option<Duration>,
    /// Wait after a failed scale-down before scale-down resumes.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub scale_down_delay_after_failure: Option<Duration>,
    /// How long a node must be unneeded before removal.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub scale_down_unneeded_time: Option<Duration>,
    /// How long an unready node must be unneeded before removal.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub scale_down_unready_time: Option<Duration>,
    /// Utilization below which a node may be removed, 0 to 1.
    #[arg(long, value_name = "RATIO", value_parser = fraction)]
    pub scale_down_utilization_threshold: Option<f64>,
    /// GPU utilization below which a GPU node may be removed, 0 to 1.
    #[arg(long, value_name = "RATIO", value_parser = fraction)]
    pub scale_down_gpu_utilization_threshold: Option<f64>,
    /// Non-empty nodes found removable per pass; 0 or less: no limit.
    #[arg(long, value_name = "INT", allow_negative_numbers = true)]
    pub scale_down_non_empty_candidates_count: Option<i64>,
    /// Share of nodes tried as extra candidates when some fail, 0 to 1.
    #[arg(long, value_name = "RATIO", value_parser = fraction)]
    pub scale_down_candidates_pool_ratio: Option<f64>,
    /// At least this many extra candidates.
    #[arg(long, value_name = "INT")]
    pub scale_down_candidates_pool_min_count: Option<usize>,
    /// Longest grace period given to an evicted pod, seconds.
    #[arg(long, value_name = "SECONDS")]
    pub max_graceful_termination_sec: Option<u64>,
    /// Nodes soft-tainted or untainted per pass.
    #[arg(long, value_name = "INT")]
    pub max_bulk_soft_taint_count: Option<usize>,
    /// Nodes deleted at once, drained ones included, at least 1.
    #[arg(long, value_name = "INT")]
    pub max_scale_down_parallelism: Option<usize>,
    /// Non-empty nodes drained at once, at least 1.
    #[arg(long, value_name = "INT")]
    pub max_drain_parallelism: Option<usize>,
    /// DaemonSet pods do not count toward utilization.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    pub ignore_daemonsets_utilization: Option<bool>,
    /// Mirror (static) pods do not count toward utilization.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    pub ignore_mirror_pods_utilization: Option<bool>,
    /// Nodes with kube-system pods (not DaemonSet or mirror pods) without a PDB are kept.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    pub skip_nodes_with_system_pods: Option<bool>,
    /// Nodes with pods using local storage are kept.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    pub skip_nodes_with_local_storage: Option<bool>,
    /// Nodes with pods of custom controllers are kept.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    pub skip_nodes_with_custom_controller_pods: Option<bool>,
    /// Pods of ReplicaSets with fewer replicas block removal.
    #[arg(long, value_name = "INT", allow_negative_numbers = true)]
    pub min_replica_count: Option<i32>,
    /// Evict DaemonSet pods from empty nodes.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    pub daemonset_eviction_for_empty_nodes: Option<bool>,
    /// Evict DaemonSet pods from drained nodes.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    pub daemonset_eviction_for_occupied_nodes: Option<bool>,
    /// Cordon a node with its deletion taint (uncordoned if the deletion fails).
    #[arg(long = "cordon-node-before-terminating", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = go_bool)]
    pub cordon_node_before_terminating: Option<bool>,
    /// Longest wait for a node's delay-deletion.cluster-autoscaler.kubernetes.io/* annotations
    /// to go before it is deleted anyway; 0s: no wait.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub node_deletion_delay_timeout: Option<Duration>,
    /// Wait between the deletion taint and a node's deletion or drain.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub node_delete_delay_after_taint: Option<Duration>,
    /// Deprecated: sets --max-scale-down-parallelism when that is not given, as upstream.
    #[arg(long, value_name = "INT")]
    pub max_empty_bulk_delete: Option<usize>,
    /// Scale down unready nodes (after --scale-down-unready-time).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    pub scale_down_unready_enabled: Option<bool>,
    /// How long after its creation a kube-system pod without a PDB blocks its node's removal
    /// (with --skip-nodes-with-system-pods; the spelling is upstream's).
    #[arg(long = "blocking-system-pod-distruption-timeout", value_name = "DURATION",
          value_parser = go_duration)]
    pub blocking_system_pod_distruption_timeout: Option<Duration>,
    /// The --scale-down-delay-after-* delays hold only the node group concerned.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    pub scale_down_delay_type_local: Option<bool>,
    /// Consolidation: `off`, `delete` (remove nodes whose pods fit on the others, whatever
    /// their utilization) or `replace` (also replace nodes by one cheaper node of any group).
    /// Ours, not upstream's; see docs/consolidation.md [default: off].
    #[arg(long, value_name = "MODE", value_parser = consolidation_mode)]
    pub consolidation: Option<autoscaler_core::ConsolidationMode>,
    /// How long a node's pods must stay unchanged before consolidation considers it. Ours, not
    /// upstream's [default: 1m].
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub consolidate_after: Option<Duration>,
    /// `priority:seconds` couples separated by commas (e.g. `10000:20,1000:100,0:60`): drains
    /// evict pods by priority, lowest couple first, each couple waited for before the next,
    /// each eviction's grace capped by its couple's seconds; DaemonSet pods are staged by their
    /// priority too. Not with --max-graceful-termination-sec. Empty: all pods at once.
    #[arg(long, value_name = "PRIORITY:SECONDS,...", value_parser = drain_priority_config)]
    pub drain_priority_config: Option<String>,
}

/// `--drain-priority-config`: checked by its parser (empty: not given, as upstream).
fn drain_priority_config(text: &str) -> Result<String, String> {
    if !text.is_empty() {
        text.parse::<autoscaler_core::DrainPriorityConfig>()
            .map_err(|e| e.to_string())?;
    }
    Ok(text.to_string())
}

fn consolidation_mode(text: &str) -> Result<autoscaler_core::ConsolidationMode, String> {
    text.parse()
}

/// Cluster-state flags.
#[derive(Clone, Debug, Default, clap::Args)]
#[command(next_help_heading = "Cluster state and backoff")]
pub struct ClusterStateArgs {
    /// How long a new node may take to register.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub max_node_provision_time: Option<Duration>,
    /// How long a registered node may take to become Ready.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub max_node_startup_time: Option<Duration>,
    /// Unready nodes allowed regardless of the percentage.
    #[arg(long, value_name = "INT")]
    pub ok_total_unready_count: Option<usize>,
    /// Percentage of unready nodes above which the autoscaler halts, 0 to 100.
    #[arg(long, value_name = "PERCENT", value_parser = percentage)]
    pub max_total_unready_percentage: Option<f64>,
    /// First backoff of a node group after a failed scale-up.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub initial_node_group_backoff_duration: Option<Duration>,
    /// Longest backoff of a node group.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub max_node_group_backoff_duration: Option<Duration>,
    /// Time without failure after which a group's backoff starts over.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub node_group_backoff_reset_timeout: Option<Duration>,
}

/// `--logging-format`, upstream's values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line (time, level, target, message and fields).
    Json,
}

/// `--cloud-provider=clusterapi`: Cluster API (`CAPI_GROUP`, default `cluster.x-k8s.io`).
pub const CLUSTERAPI_PROVIDER: &str = "clusterapi";
/// `--cloud-provider=openshift`: OpenShift's Machine API MachineSets of
/// `openshift-machine-api` plus Cluster API, as OpenShift's operator runs its autoscaler.
pub const OPENSHIFT_PROVIDER: &str = "openshift";

/// Default log verbosity (klog's usual production level).
pub const DEFAULT_VERBOSITY: u8 = 1;

/// Where the Cluster API objects are read and changed: upstream's rule, from `--cloud-config`
/// and `--clusterapi-cloud-config-authoritative`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ManagementCluster {
    /// The workload cluster (`--kubeconfig`, else in-cluster): no `--cloud-config`.
    Workload,
    /// The cluster of this kubeconfig (`--cloud-config`).
    Kubeconfig(PathBuf),
    /// The cluster the autoscaler runs in: `--clusterapi-cloud-config-authoritative` without
    /// `--cloud-config`.
    InCluster,
}

impl ManagementCluster {
    /// Upstream's rule: `--cloud-config` when given (an empty value counts as not given); else
    /// in-cluster when authoritative; else the workload cluster.
    pub fn from_flags(cloud_config: Option<&str>, authoritative: bool) -> ManagementCluster {
        match cloud_config.filter(|p| !p.trim().is_empty()) {
            Some(path) => ManagementCluster::Kubeconfig(PathBuf::from(path)),
            None if authoritative => ManagementCluster::InCluster,
            None => ManagementCluster::Workload,
        }
    }
}

/// Everything `run` needs, validated: the controller's configuration plus what only the binary
/// uses (kubeconfig path, log verbosity, flags to warn about).
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The controller's configuration (core options, Cluster API options, loop, lease, server).
    pub controller: ControllerConfig,
    /// `--kubeconfig`, if given.
    pub kubeconfig: Option<PathBuf>,
    /// The management cluster (`--cloud-config`, `--clusterapi-cloud-config-authoritative`).
    pub management: ManagementCluster,
    /// `--v` (or the config file's `logVerbosity`), 0 to 10.
    pub verbosity: u8,
    /// `--logging-format`.
    pub logging_format: LogFormat,
    /// Flags given that have no effect (logged as warnings once logging is up).
    pub ignored_flags: Vec<&'static str>,
    /// Flags given with a value asking for a feature this autoscaler does not have (said at
    /// start and in the status ConfigMap).
    pub unsupported: Vec<crate::flags::Unsupported>,
    /// Fields of the `ClusterAutoscaler` resource accepted without effect, one message each
    /// (logged as warnings once logging is up).
    pub config_warnings: Vec<String>,
}

/// Why the options were rejected.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    /// A flag's value is invalid.
    #[error("invalid value {value:?} for --{flag}: {why}")]
    Flag {
        /// The flag, without dashes.
        flag: &'static str,
        /// The value given.
        value: String,
        /// What is wrong.
        why: String,
    },
    /// The `--config` file is unreadable or invalid.
    #[error(transparent)]
    ConfigFile(#[from] ConfigFileError),
}

fn flag_err(flag: &'static str, value: impl ToString, why: impl ToString) -> OptionsError {
    OptionsError::Flag {
        flag,
        value: value.to_string(),
        why: why.to_string(),
    }
}

/// Parses `--address`: `:PORT` (all interfaces), `IP:PORT`, `[IPv6]:PORT` or `localhost:PORT`.
pub fn parse_address(text: &str) -> Result<SocketAddr, String> {
    if let Some(port) = text.strip_prefix(':') {
        let port: u16 = port
            .parse()
            .map_err(|_| format!("port {port:?} is not a number from 0 to 65535"))?;
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port));
    }
    if let Some(port) = text.strip_prefix("localhost:") {
        let port: u16 = port
            .parse()
            .map_err(|_| format!("port {port:?} is not a number from 0 to 65535"))?;
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    text.parse()
        .map_err(|_| "expected :PORT, IP:PORT, [IPv6]:PORT or localhost:PORT".to_string())
}

/// Whether `name` is a DNS-1123 label (namespaces, object names used here).
fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Whether `name` is a DNS-1123 subdomain (ConfigMap and Lease names).
fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns_label)
}

/// The Lease holder identity: `POD_NAME` as it is (a pod's name is unique in its namespace,
/// where the Lease is), else the host name (`HOSTNAME`, else the kernel's) followed by `_` and a
/// random suffix drawn once per process. Upstream uses the bare host name, so two replicas on
/// hosts of the same name (host networking, or outside a pod) both think they hold the Lease;
/// the suffix is the deviation kube-controller-manager and kube-scheduler make (`_` and a UUID).
fn identity(env: &dyn Fn(&str) -> Option<String>) -> String {
    if let Some(pod) = env("POD_NAME").filter(|s| !s.trim().is_empty()) {
        return pod;
    }
    let host = env("HOSTNAME")
        .filter(|s| !s.trim().is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| "cluster-autoscaler".to_string());
    format!("{host}_{}", random_suffix())
}

/// 32 random hexadecimal digits (128 bits, as many as a UUID's), from the thread's generator
/// (seeded by the operating system).
fn random_suffix() -> String {
    let bits: u128 = rand::random();
    format!("{bits:032x}")
}

impl RunOptions {
    /// Builds the options from the flags: upstream defaults, then the `--config` file (read from
    /// disk), then the flags given. `env` reads environment variables (`CAPI_GROUP`, `CAPI_VERSION`,
    /// `CAPI_SCALE_ZERO_DEFAULT_ARCH`, `POD_NAME`, `HOSTNAME`).
    pub fn from_args(
        args: &RunArgs,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<RunOptions, OptionsError> {
        let file = match &args.config {
            Some(path) => Some(config::load(path)?),
            None => None,
        };
        RunOptions::build(args, file.as_ref(), env)
    }

    /// [`RunOptions::from_args`] with the config resource already read.
    pub fn build(
        args: &RunArgs,
        file: Option<&config::ClusterAutoscalerResource>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<RunOptions, OptionsError> {
        RunOptions::build_layers(args, None, file, env)
    }

    /// The options of a scenario run: upstream defaults, then the `--config` file, then the
    /// scenario's `options:`, then the flags given, then one validation of the whole.
    pub fn build_for_scenario(
        args: &RunArgs,
        scenario: &AutoscalingArgs,
        file: Option<&config::ClusterAutoscalerResource>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<RunOptions, OptionsError> {
        RunOptions::build_layers(args, Some(scenario), file, env)
    }

    /// Defaults < `file` < `scenario` < `args`, then [`validate`].
    fn build_layers(
        args: &RunArgs,
        scenario: Option<&AutoscalingArgs>,
        file: Option<&config::ClusterAutoscalerResource>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<RunOptions, OptionsError> {
        let mut c = ControllerConfig::default();
        let mut verbosity = DEFAULT_VERBOSITY;
        let mut config_warnings = Vec::new();
        if let Some(file) = file {
            let settings = file.settings()?;
            apply_autoscaling(&settings.args, &mut c).map_err(|e| settings.blame(e))?;
            set(&mut verbosity, settings.verbosity);
            config_warnings = settings.unsupported;
        }
        set(&mut verbosity, args.verbosity);

        // Provider.
        let provider = args
            .cloud_provider
            .as_deref()
            .unwrap_or(CLUSTERAPI_PROVIDER);
        if provider != CLUSTERAPI_PROVIDER && provider != OPENSHIFT_PROVIDER {
            return Err(flag_err(
                "cloud-provider",
                provider,
                "only clusterapi and openshift are supported",
            ));
        }
        let mut capi = ClusterApiConfig::from_env_and_flag(None, env("CAPI_GROUP").as_deref())
            .map_err(|e| flag_err("cloud-provider", provider, format!("CAPI_GROUP: {e}")))?;
        if let Some(version) = env("CAPI_VERSION").filter(|v| !v.trim().is_empty()) {
            let version = version.trim();
            if !is_api_version(version) {
                return Err(flag_err(
                    "cloud-provider",
                    provider,
                    format!("CAPI_VERSION {version:?} is not an API version such as v1beta1"),
                ));
            }
            capi.api_version = Some(version.to_string());
        }
        capi.openshift = provider == OPENSHIFT_PROVIDER;
        if let Some(arch) = env("CAPI_SCALE_ZERO_DEFAULT_ARCH").filter(|a| !a.trim().is_empty()) {
            capi.default_arch = arch.trim().to_string();
        }
        for spec in &args.node_group_auto_discovery {
            capi = capi
                .with_auto_discovery(std::slice::from_ref(spec))
                .map_err(|e| flag_err("node-group-auto-discovery", spec, e))?;
        }
        c.clusterapi = capi;

        // Lease, server, status.
        if let Some(ns) = &args.namespace {
            c.namespace = ns.clone();
        }
        set(&mut c.leader_elect, args.leader_elect);
        set(&mut c.lease_duration, args.leader_elect_lease_duration);
        set(&mut c.renew_deadline, args.leader_elect_renew_deadline);
        set(&mut c.retry_period, args.leader_elect_retry_period);
        if let Some(n) = &args.leader_elect_resource_name {
            c.lease_name = n.clone();
        }
        if let Some(a) = &args.address {
            c.address = parse_address(a).map_err(|why| flag_err("address", a, why))?;
        }
        set(&mut c.write_status_configmap, args.write_status_configmap);
        if let Some(n) = &args.status_config_map_name {
            c.status_config_map_name = n.clone();
        }
        set(&mut c.max_inactivity, args.max_inactivity);
        set(&mut c.max_failing_time, args.max_failing_time);
        set(&mut c.max_startup_time, args.max_startup_time);
        set(
            &mut c.emit_per_nodegroup_metrics,
            args.emit_per_nodegroup_metrics,
        );
        set(&mut c.enable_explain_endpoint, args.enable_explain_endpoint);
        set(
            &mut c.emit_unremovable_node_events,
            args.emit_unremovable_node_events,
        );
        c.identity = identity(env);

        if let Some(scenario) = scenario {
            apply_autoscaling(scenario, &mut c)?;
        }
        apply_autoscaling(&args.autoscaling, &mut c)?;
        validate(&c)?;

        let ignored_flags = args.compat.no_effect_given();
        let unsupported = args.compat.unsupported();
        c.unsupported_settings = unsupported.iter().map(ToString::to_string).collect();
        // Capacity on request is decided by `plan` only (the controller does not act on it
        // yet, so the flags stay gaps there): their values switch it on for `plan`.
        let on = |flag: &str| {
            unsupported
                .iter()
                .any(|u| u.flag == flag && go_bool(&u.value) == Ok(true))
        };
        let capacity = &mut c.autoscaler.capacity;
        capacity.requests.enabled = on("enable-provisioning-requests");
        capacity.buffer_controller = on("capacity-buffer-controller-enabled");
        capacity.buffer_pods = on("capacity-buffer-pod-injection-enabled");
        Ok(RunOptions {
            controller: c,
            kubeconfig: args.kubeconfig.clone(),
            management: ManagementCluster::from_flags(
                args.cloud_config.as_deref(),
                args.clusterapi_cloud_config_authoritative.unwrap_or(false),
            ),
            verbosity,
            logging_format: args.logging_format.unwrap_or_default(),
            ignored_flags,
            unsupported,
            config_warnings,
        })
    }
}

/// Whether `v` looks like a Kubernetes API version (`v1`, `v1beta1`, `v1alpha4`).
fn is_api_version(v: &str) -> bool {
    v.len() <= 63
        && v.strip_prefix('v').is_some_and(|rest| {
            rest.starts_with(|c: char| c.is_ascii_digit())
                && rest
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}

/// Sets the settings given in `a` (each one only when given, so layers stack).
fn apply_autoscaling(a: &AutoscalingArgs, c: &mut ControllerConfig) -> Result<(), OptionsError> {
    set(&mut c.scan_interval, a.scan_interval);
    set(&mut c.max_pod_eviction_time, a.max_pod_eviction_time);
    apply_scale_up(&a.scale_up, c)?;
    apply_scale_down(&a.scale_down, c);
    apply_cluster_state(&a.cluster_state, c);
    Ok(())
}

fn apply_scale_up(a: &ScaleUpArgs, c: &mut ControllerConfig) -> Result<(), OptionsError> {
    let up = &mut c.autoscaler.scale_up;
    if let Some(e) = &a.expander {
        up.expander = ExpanderChain::parse(e).map_err(|why| flag_err("expander", e, why))?;
    }
    set(
        &mut up.pending.expendable_pods_priority_cutoff,
        a.expendable_pods_priority_cutoff,
    );
    // One flag for both halves: expendable pods cause no scale-up and block no scale-down.
    set(
        &mut c
            .autoscaler
            .scale_down
            .drain
            .expendable_pods_priority_cutoff,
        a.expendable_pods_priority_cutoff,
    );
    set(
        &mut up.pending.new_pod_scale_up_delay,
        a.new_pod_scale_up_delay,
    );
    if !a.allowed_scheduler_names.is_empty() {
        up.pending.allowed_schedulers = names_of(&a.allowed_scheduler_names);
    }
    if !a.bypassed_scheduler_names.is_empty() {
        up.pending.bypassed_schedulers = names_of(&a.bypassed_scheduler_names);
    }
    set(
        &mut up.scale_up.max_nodes_per_scale_up,
        a.max_nodes_per_scaleup,
    );
    set(
        &mut up.scale_up.enforce_node_group_min_size,
        a.enforce_node_group_min_size,
    );
    set(
        &mut up.scale_up.balance_similar_node_groups,
        a.balance_similar_node_groups,
    );
    let bal = &mut up.scale_up.balancing;
    if !a.balancing_ignore_label.is_empty() {
        bal.ignored_labels = a.balancing_ignore_label.clone();
    }
    if !a.balancing_label.is_empty() {
        bal.balancing_labels = a.balancing_label.clone();
    }
    set(
        &mut bal.max_allocatable_difference_ratio,
        a.max_allocatable_difference_ratio,
    );
    set(
        &mut bal.max_free_difference_ratio,
        a.max_free_difference_ratio,
    );
    set(&mut bal.memory_difference_ratio, a.memory_difference_ratio);
    if !a.startup_taint.is_empty() || !a.ignore_taint.is_empty() {
        up.template.taints.startup = a
            .ignore_taint
            .iter()
            .chain(&a.startup_taint)
            .cloned()
            .collect();
    }
    if !a.status_taint.is_empty() {
        up.template.taints.status = a.status_taint.clone();
    }
    let lim = &mut up.limits;
    set(&mut lim.max_nodes_total, a.max_nodes_total);
    if let Some(t) = &a.cores_total {
        lim.cpu = Range::parse_cores(t).map_err(|why| flag_err("cores-total", t, why))?;
    }
    if let Some(t) = &a.memory_total {
        lim.memory = Range::parse_memory_gib(t).map_err(|why| flag_err("memory-total", t, why))?;
    }
    if !a.gpu_total.is_empty() {
        lim.gpus.clear();
        for t in &a.gpu_total {
            let (name, range) = autoscaler_model::parse_gpu_limit(t)
                .map_err(|why| flag_err("gpu-total", t, why))?;
            lim.gpus.push((name, range));
        }
    }
    // Readiness in the cluster state reads the same taints as the templates.
    c.autoscaler.cluster_state.taints = c.autoscaler.scale_up.template.taints.clone();
    Ok(())
}

/// The names of a comma-separated list flag, trimmed, without empty items (`--x=a,,b` or
/// `--x=` as pflag's string slices read them).
fn names_of(values: &[String]) -> Vec<String> {
    values
        .iter()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect()
}

fn apply_scale_down(a: &ScaleDownArgs, c: &mut ControllerConfig) {
    let d = &mut c.autoscaler.scale_down;
    set(&mut d.enabled, a.scale_down_enabled);
    set(&mut d.delay_after_add, a.scale_down_delay_after_add);
    set(&mut d.delay_after_delete, a.scale_down_delay_after_delete);
    set(&mut d.delay_after_failure, a.scale_down_delay_after_failure);
    set(&mut d.unneeded_time, a.scale_down_unneeded_time);
    set(&mut d.unready_time, a.scale_down_unready_time);
    set(
        &mut d.utilization_threshold,
        a.scale_down_utilization_threshold,
    );
    set(
        &mut d.gpu_utilization_threshold,
        a.scale_down_gpu_utilization_threshold,
    );
    if let Some(n) = a.scale_down_non_empty_candidates_count {
        // Upstream: a non-positive value turns the limit off.
        d.non_empty_candidates_count = usize::try_from(n)
            .ok()
            .filter(|&n| n > 0)
            .unwrap_or(usize::MAX);
    }
    set(
        &mut d.candidates_pool_ratio,
        a.scale_down_candidates_pool_ratio,
    );
    set(
        &mut d.candidates_pool_min_count,
        a.scale_down_candidates_pool_min_count,
    );
    set(
        &mut d.max_graceful_termination_sec,
        a.max_graceful_termination_sec,
    );
    set(
        &mut d.max_bulk_soft_taint_count,
        a.max_bulk_soft_taint_count,
    );
    // Upstream: --max-empty-bulk-delete alone stands for --max-scale-down-parallelism (its
    // actuator caps empty and drained deletions together); with both, the latter rules.
    set(
        &mut d.max_scale_down_parallelism,
        a.max_scale_down_parallelism.or(a.max_empty_bulk_delete),
    );
    set(&mut d.unready_enabled, a.scale_down_unready_enabled);
    set(&mut d.delay_type_local, a.scale_down_delay_type_local);
    if let Some(t) = a.blocking_system_pod_distruption_timeout {
        d.drain.blocking_system_pod_disruption_timeout_ms =
            i64::try_from(t.as_millis()).unwrap_or(i64::MAX);
    }
    set(&mut d.max_drain_parallelism, a.max_drain_parallelism);
    set(
        &mut d.utilization.ignore_daemonsets,
        a.ignore_daemonsets_utilization,
    );
    set(
        &mut d.utilization.ignore_mirror_pods,
        a.ignore_mirror_pods_utilization,
    );
    let dr = &mut d.drain;
    set(
        &mut dr.skip_nodes_with_system_pods,
        a.skip_nodes_with_system_pods,
    );
    set(
        &mut dr.skip_nodes_with_local_storage,
        a.skip_nodes_with_local_storage,
    );
    set(
        &mut dr.skip_nodes_with_custom_controller_pods,
        a.skip_nodes_with_custom_controller_pods,
    );
    set(&mut dr.min_replica_count, a.min_replica_count);
    set(
        &mut dr.daemonset_eviction_for_empty_nodes,
        a.daemonset_eviction_for_empty_nodes,
    );
    set(
        &mut dr.daemonset_eviction_for_occupied_nodes,
        a.daemonset_eviction_for_occupied_nodes,
    );
    set(
        &mut c.cordon_node_before_terminating,
        a.cordon_node_before_terminating,
    );
    set(
        &mut c.node_deletion_delay_timeout,
        a.node_deletion_delay_timeout,
    );
    set(
        &mut c.node_delete_delay_after_taint,
        a.node_delete_delay_after_taint,
    );
    let k = &mut c.autoscaler.consolidation;
    set(&mut k.mode, a.consolidation);
    set(&mut k.consolidate_after, a.consolidate_after);
    if let Some(text) = &a.drain_priority_config {
        // Checked by the flag's parser; empty stands for not given.
        c.autoscaler.scale_down.drain_priority = text.parse().ok();
    }
}

fn apply_cluster_state(a: &ClusterStateArgs, c: &mut ControllerConfig) {
    let s = &mut c.autoscaler.cluster_state;
    set(&mut s.max_node_provision_time, a.max_node_provision_time);
    set(&mut s.max_node_startup_time, a.max_node_startup_time);
    set(&mut s.ok_total_unready_count, a.ok_total_unready_count);
    set(
        &mut s.max_total_unready_percentage,
        a.max_total_unready_percentage,
    );
    set(
        &mut s.backoff.initial,
        a.initial_node_group_backoff_duration,
    );
    set(&mut s.backoff.max, a.max_node_group_backoff_duration);
    set(
        &mut s.backoff.reset_timeout,
        a.node_group_backoff_reset_timeout,
    );
}

fn fmt_d(d: Duration) -> String {
    autoscaler_model::format_duration(d)
}

/// Checks what single-value parsing cannot: positive intervals, orderings between values, names.
/// Values coming from the config file are named by their flag (the file was mapped onto them).
fn validate(c: &ControllerConfig) -> Result<(), OptionsError> {
    validate_autoscaler(&c.autoscaler, c.scan_interval)?;
    let positive = [
        ("max-inactivity", c.max_inactivity),
        ("max-failing-time", c.max_failing_time),
        ("max-startup-time", c.max_startup_time),
        ("max-pod-eviction-time", c.max_pod_eviction_time),
        ("leader-elect-lease-duration", c.lease_duration),
        ("leader-elect-renew-deadline", c.renew_deadline),
        ("leader-elect-retry-period", c.retry_period),
    ];
    for (flag, d) in positive {
        if d.is_zero() {
            return Err(flag_err(flag, fmt_d(d), "must be greater than 0"));
        }
    }
    if c.leader_elect {
        validate_lease(c)?;
    }
    validate_names(c)
}

/// The rules on the decision's options and the loop interval. Errors name the flag.
fn validate_autoscaler(a: &AutoscalerOptions, scan_interval: Duration) -> Result<(), OptionsError> {
    let cs = &a.cluster_state;
    let positive = [
        ("scan-interval", scan_interval),
        ("max-node-provision-time", cs.max_node_provision_time),
        ("max-node-startup-time", cs.max_node_startup_time),
        ("initial-node-group-backoff-duration", cs.backoff.initial),
        ("node-group-backoff-reset-timeout", cs.backoff.reset_timeout),
    ];
    for (flag, d) in positive {
        if d.is_zero() {
            return Err(flag_err(flag, fmt_d(d), "must be greater than 0"));
        }
    }
    let b = &cs.backoff;
    if b.max < b.initial {
        return Err(flag_err(
            "max-node-group-backoff-duration",
            fmt_d(b.max),
            format!(
                "must not be shorter than --initial-node-group-backoff-duration ({})",
                fmt_d(b.initial)
            ),
        ));
    }
    let sd = &a.scale_down;
    for (flag, v, max) in [
        (
            "scale-down-utilization-threshold",
            sd.utilization_threshold,
            1.0,
        ),
        (
            "scale-down-gpu-utilization-threshold",
            sd.gpu_utilization_threshold,
            1.0,
        ),
        (
            "max-total-unready-percentage",
            cs.max_total_unready_percentage,
            100.0,
        ),
    ] {
        if !(0.0..=max).contains(&v) {
            return Err(flag_err(flag, v, format!("must be between 0 and {max}")));
        }
    }
    for (flag, v) in [
        ("max-scale-down-parallelism", sd.max_scale_down_parallelism),
        ("max-drain-parallelism", sd.max_drain_parallelism),
        (
            "max-nodes-per-scaleup",
            a.scale_up.scale_up.max_nodes_per_scale_up,
        ),
    ] {
        if v == 0 {
            return Err(flag_err(flag, v, "must be at least 1"));
        }
    }
    // Upstream refuses the two together: the couples' seconds replace the one cap.
    if let Some(p) = &sd.drain_priority
        && sd.max_graceful_termination_sec
            != autoscaler_core::ScaleDownOptions::default().max_graceful_termination_sec
    {
        return Err(flag_err(
            "drain-priority-config",
            p,
            "could not use --drain-priority-config together with --max-graceful-termination-sec",
        ));
    }
    if sd.drain.min_replica_count < 0 {
        return Err(flag_err(
            "min-replica-count",
            sd.drain.min_replica_count,
            "must not be negative",
        ));
    }
    let bal = &a.scale_up.scale_up.balancing;
    if let Err(e) = bal.validate() {
        let value = bal.balancing_labels.join(",");
        return Err(flag_err("balancing-label", value, e));
    }
    Ok(())
}

/// Leader election's orderings (client-go's rules).
fn validate_lease(c: &ControllerConfig) -> Result<(), OptionsError> {
    if c.renew_deadline >= c.lease_duration {
        return Err(flag_err(
            "leader-elect-renew-deadline",
            fmt_d(c.renew_deadline),
            format!(
                "must be shorter than --leader-elect-lease-duration ({})",
                fmt_d(c.lease_duration)
            ),
        ));
    }
    // client-go's rule: the renew deadline must leave room for a jittered retry (1.2x).
    if c.renew_deadline.as_secs_f64() <= 1.2 * c.retry_period.as_secs_f64() {
        return Err(flag_err(
            "leader-elect-retry-period",
            fmt_d(c.retry_period),
            format!(
                "must be shorter than --leader-elect-renew-deadline ({}) / 1.2",
                fmt_d(c.renew_deadline)
            ),
        ));
    }
    Ok(())
}

/// Namespace and object names.
fn validate_names(c: &ControllerConfig) -> Result<(), OptionsError> {
    if !is_dns_label(&c.namespace) {
        return Err(flag_err(
            "namespace",
            &c.namespace,
            "not a valid namespace name (DNS-1123 label)",
        ));
    }
    for (flag, name) in [
        ("leader-elect-resource-name", &c.lease_name),
        ("status-config-map-name", &c.status_config_map_name),
    ] {
        if !is_dns_subdomain(name) {
            return Err(flag_err(
                flag,
                name,
                "not a valid object name (DNS-1123 subdomain)",
            ));
        }
    }
    Ok(())
}

/// Why a setting given by name (a scenario's `options:`) was refused.
#[derive(Debug, thiserror::Error)]
#[error("{why}")]
pub struct SettingError {
    /// The setting, named as its flag without dashes (`scale-down-unneeded-time`).
    pub name: String,
    /// What is wrong, with the value.
    pub why: String,
}

/// The settings alone, read as the command line reads them.
#[derive(Debug, clap::Parser)]
#[command(
    no_binary_name = true,
    disable_help_flag = true,
    disable_version_flag = true,
    color = clap::ColorChoice::Never
)]
struct SettingsCli {
    #[command(flatten)]
    settings: AutoscalingArgs,
}

/// The names of the settings: the flags of [`AutoscalingArgs`], without dashes.
pub fn setting_names() -> Vec<String> {
    use clap::CommandFactory;
    SettingsCli::command()
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect()
}

/// Whether `name` (a flag without dashes) is a setting: a flag of [`AutoscalingArgs`].
pub fn is_setting(name: &str) -> bool {
    use clap::CommandFactory;
    SettingsCli::command()
        .get_arguments()
        .any(|a| a.get_long() == Some(name))
}

/// Every flag, to tell a flag that is not a setting from a name that is no flag at all.
#[derive(Debug, clap::Parser)]
#[command(no_binary_name = true, disable_help_flag = true)]
struct AllFlagsCli {
    #[command(flatten)]
    run: RunArgs,
}

impl AutoscalingArgs {
    /// Reads settings given by name (the flag's, without dashes) with text values (several for
    /// a repeatable flag), each through the flag's own parser, so a scenario's `options:`
    /// means exactly what the same flags mean on the command line. A setting given twice keeps
    /// the last; an error names the setting.
    pub fn from_settings<'a>(
        settings: impl IntoIterator<Item = (&'a str, &'a [String])>,
    ) -> Result<AutoscalingArgs, SettingError> {
        use clap::{CommandFactory, FromArgMatches};
        let mut cmd = SettingsCli::command();
        let mut out = AutoscalingArgs::default();
        for (name, values) in settings {
            let err = |why: String| SettingError {
                name: name.to_string(),
                why,
            };
            let is_name = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !name.starts_with('-');
            if !is_name {
                return Err(err(unknown_setting(name, None)));
            }
            let argv = values.iter().map(|v| format!("--{name}={v}"));
            let m = cmd
                .try_get_matches_from_mut(argv)
                .map_err(|e| err(setting_why(name, &e)))?;
            out.update_from_arg_matches(&m)
                .map_err(|e| err(setting_why(name, &e)))?;
        }
        Ok(out)
    }
}

/// The reason of a refused setting, in the setting's terms rather than the command line's.
fn setting_why(name: &str, e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    match e.kind() {
        ErrorKind::UnknownArgument => {
            let tip = match e.get(ContextKind::SuggestedArg) {
                Some(ContextValue::String(s)) => Some(s.trim_start_matches('-').to_string()),
                _ => None,
            };
            unknown_setting(name, tip)
        }
        ErrorKind::ArgumentConflict => {
            "takes one value (only repeatable flags take a list)".to_string()
        }
        _ => {
            let text = e.to_string();
            let line = text.lines().next().unwrap_or_default();
            line.strip_prefix("error: ").unwrap_or(line).to_string()
        }
    }
}

/// Why `name` is not a setting: a flag of the live process only, or no flag at all.
fn unknown_setting(name: &str, tip: Option<String>) -> String {
    use clap::CommandFactory;
    let is_flag = AllFlagsCli::command()
        .get_arguments()
        .any(|a| a.get_long() == Some(name));
    if is_flag {
        return format!(
            "--{name} is a flag of the live process, not a setting of the decision, the loop \
             or the drain; give it on the command line if at all"
        );
    }
    let mut why = "unknown setting (the settings are the flags of the decision, the loop and \
                   the drain, named without dashes: scale-down-unneeded-time)"
        .to_string();
    if let Some(tip) = tip {
        why.push_str(&format!("; did you mean {tip}?"));
    }
    why
}

/// Rewrites the command line the way upstream's binary reads it, before clap sees it:
/// no argument, or flags only (first argument starts with `-`, other than help and version),
/// mean `run`; in `run` Go's single-dash long flags (`-v=4`, `-scan-interval=10s`) become
/// double-dash ones and `_` in a flag's name becomes `-` (`--log_dir`), as pflag normalizes
/// them. Everything after a lone `--` is left alone.
pub fn normalize_args(args: Vec<OsString>) -> Vec<OsString> {
    let mut out = args;
    // No argument at all starts `run`, as upstream's binary does.
    if out.len() == 1 {
        out.push(OsString::from("run"));
    }
    let first = out.get(1).and_then(|a| a.to_str()).map(str::to_owned);
    if let Some(first) = first
        && first.starts_with('-')
        && !matches!(first.as_str(), "-h" | "--help" | "-V" | "--version")
    {
        out.insert(1, OsString::from("run"));
    }
    if out.get(1).and_then(|a| a.to_str()) != Some("run") {
        return out;
    }
    for arg in out.iter_mut().skip(2) {
        let Some(s) = arg.to_str() else { continue };
        if s == "--" {
            break;
        }
        let single_dash_long = s.starts_with('-')
            && !s.starts_with("--")
            && s[1..].starts_with(|c: char| c.is_ascii_alphabetic())
            && !matches!(s, "-h" | "-V");
        let s = if single_dash_long {
            format!("-{s}")
        } else {
            s.to_string()
        };
        *arg = OsString::from(dashes_for_underscores(&s));
    }
    out
}

/// pflag's word-separator normalization, as upstream's binary applies it: `--log_dir=x` is
/// `--log-dir=x`. Only the name of a `--flag` changes, never a value.
fn dashes_for_underscores(arg: &str) -> String {
    let Some(rest) = arg.strip_prefix("--") else {
        return arg.to_string();
    };
    let (name, value) = match rest.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (rest, None),
    };
    let name = name.replace('_', "-");
    match value {
        Some(v) => format!("--{name}={v}"),
        None => format!("--{name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct TestCli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
        let argv: Vec<OsString> = ["cluster-autoscaler", "run"]
            .iter()
            .chain(args)
            .map(OsString::from)
            .collect();
        let mut argv = normalize_args(argv);
        argv.remove(1);
        TestCli::try_parse_from(argv).map(|c| c.run)
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn build(args: &[&str]) -> Result<RunOptions, OptionsError> {
        let a = parse(args).expect("flags parse");
        RunOptions::build(&a, None, &no_env)
    }

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    /// The OpenShift operator's provider and auto-discovery.
    #[test]
    fn cloud_provider_openshift_reads_both_api_groups() {
        let o = build(&[
            "--cloud-provider=openshift",
            "--node-group-auto-discovery=clusterapi:namespace=openshift-cluster-api",
        ])
        .unwrap();
        let c = &o.controller.clusterapi;
        assert!(c.openshift);
        assert_eq!(c.groups(), ["machine.openshift.io", "cluster.x-k8s.io"]);
        assert_eq!(
            c.auto_discovery[0].namespace.as_deref(),
            Some("openshift-cluster-api")
        );
        let plain = build(&["--cloud-provider=clusterapi"]).unwrap();
        assert!(!plain.controller.clusterapi.openshift);
        assert_eq!(plain.controller.clusterapi.groups(), ["cluster.x-k8s.io"]);
        assert!(!build(&[]).unwrap().controller.clusterapi.openshift);
    }

    #[test]
    fn logging_format_is_text_or_json() {
        assert_eq!(build(&[]).unwrap().logging_format, LogFormat::Text);
        let o = build(&["--logging-format=json"]).unwrap();
        assert_eq!(o.logging_format, LogFormat::Json);
        assert_eq!(
            build(&["--logging-format", "text"]).unwrap().logging_format,
            LogFormat::Text
        );
        assert!(parse(&["--logging-format=yaml"]).is_err());
    }

    #[test]
    fn no_flags_give_upstreams_defaults_field_by_field() {
        let o = build(&[]).unwrap();
        let c = &o.controller;
        assert_eq!(o.verbosity, 1);
        assert_eq!(o.kubeconfig, None);
        assert!(o.ignored_flags.is_empty());
        assert_eq!(c.scan_interval, s(10));
        assert_eq!(c.namespace, "kube-system");
        assert!(c.leader_elect);
        assert_eq!(c.lease_duration, s(15));
        assert_eq!(c.renew_deadline, s(10));
        assert_eq!(c.retry_period, s(2));
        assert_eq!(c.lease_name, "cluster-autoscaler");
        assert_eq!(c.address, "0.0.0.0:8085".parse::<SocketAddr>().unwrap());
        assert!(c.write_status_configmap);
        assert_eq!(c.status_config_map_name, "cluster-autoscaler-status");
        assert_eq!(c.max_inactivity, s(600));
        assert_eq!(c.max_failing_time, s(900));
        assert_eq!(c.max_pod_eviction_time, s(120));
        assert_eq!(c.clusterapi.api_group, "cluster.x-k8s.io");
        assert!(c.clusterapi.auto_discovery.is_empty());
        assert_eq!(c.clusterapi.default_arch, "amd64");

        let up = &c.autoscaler.scale_up;
        assert_eq!(up.pending.expendable_pods_priority_cutoff, -10);
        assert_eq!(up.pending.new_pod_scale_up_delay, Duration::ZERO);
        assert_eq!(up.scale_up.max_nodes_per_scale_up, 1000);
        assert!(!up.scale_up.balance_similar_node_groups);
        assert!(!up.scale_up.enforce_node_group_min_size);
        assert_eq!(up.scale_up.balancing.max_allocatable_difference_ratio, 0.05);
        assert_eq!(up.scale_up.balancing.max_free_difference_ratio, 0.05);
        assert_eq!(up.scale_up.balancing.memory_difference_ratio, 0.015);
        assert!(up.scale_up.balancing.ignored_labels.is_empty());
        assert!(up.scale_up.balancing.balancing_labels.is_empty());
        assert!(up.template.taints.startup.is_empty());
        assert_eq!(up.expander.to_string(), "least-waste");
        assert_eq!(up.limits.max_nodes_total, 0);
        assert_eq!(up.limits.cpu, Range::new(0, 320_000_000).unwrap());
        assert_eq!(
            up.limits.memory,
            Range::new(0, 6_400_000 * (1 << 30)).unwrap()
        );
        assert!(up.limits.gpus.is_empty());

        let d = &c.autoscaler.scale_down;
        assert!(d.enabled);
        assert_eq!(d.utilization_threshold, 0.5);
        assert_eq!(d.gpu_utilization_threshold, 0.5);
        assert_eq!(d.unneeded_time, s(600));
        assert_eq!(d.unready_time, s(1200));
        assert_eq!(d.delay_after_add, s(600));
        assert_eq!(d.delay_after_delete, Duration::ZERO);
        assert_eq!(d.delay_after_failure, s(180));
        assert_eq!(d.max_scale_down_parallelism, 10);
        assert_eq!(d.max_drain_parallelism, 1);
        assert_eq!(d.non_empty_candidates_count, 30);
        assert_eq!(d.candidates_pool_ratio, 0.1);
        assert_eq!(d.candidates_pool_min_count, 50);
        assert_eq!(d.max_graceful_termination_sec, 600);
        assert_eq!(d.max_bulk_soft_taint_count, 10);
        assert!(!d.utilization.ignore_daemonsets);
        assert!(!d.utilization.ignore_mirror_pods);
        assert!(d.drain.skip_nodes_with_system_pods);
        assert!(d.drain.skip_nodes_with_local_storage);
        assert!(d.drain.skip_nodes_with_custom_controller_pods);
        assert_eq!(d.drain.min_replica_count, 0);
        assert!(!d.drain.daemonset_eviction_for_empty_nodes);
        assert!(d.drain.daemonset_eviction_for_occupied_nodes);

        let cs = &c.autoscaler.cluster_state;
        assert_eq!(cs.max_node_provision_time, s(900));
        assert_eq!(cs.max_node_startup_time, s(900));
        assert_eq!(cs.ok_total_unready_count, 3);
        assert_eq!(cs.max_total_unready_percentage, 45.0);
        assert_eq!(cs.backoff.initial, s(300));
        assert_eq!(cs.backoff.max, s(1800));
        assert_eq!(cs.backoff.reset_timeout, s(3 * 3600));
    }

    /// Startup, ignore and status taints reach templates and readiness alike; scheduler lists
    /// read pflag's comma-separated syntax, repeated or not.
    #[test]
    fn taint_and_scheduler_flags_reach_templates_readiness_and_pending_pods() {
        let o = build(&[
            "--startup-taint=a",
            "--ignore-taint=b",
            "--status-taint=c",
            "--status-taint",
            "d",
            "--allowed-scheduler-names=default-scheduler, volcano",
            "--allowed-scheduler-names=kueue",
            "--bypassed-scheduler-names=volcano,",
        ])
        .unwrap();
        let a = &o.controller.autoscaler;
        let taints = &a.scale_up.template.taints;
        assert_eq!(taints.startup, ["b", "a"]);
        assert_eq!(taints.status, ["c", "d"]);
        assert_eq!(&a.cluster_state.taints, taints);
        let p = &a.scale_up.pending;
        assert_eq!(
            p.allowed_schedulers,
            ["default-scheduler", "volcano", "kueue"]
        );
        assert_eq!(p.bypassed_schedulers, ["volcano"]);
        let d = build(&[]).unwrap().controller.autoscaler;
        assert!(d.scale_up.pending.allowed_schedulers.is_empty());
        assert!(d.scale_up.pending.bypassed_schedulers.is_empty());
        assert_eq!(d.cluster_state.taints, Default::default());
    }

    #[test]
    fn health_and_metrics_flags_reach_the_controller() {
        let d = build(&[]).unwrap().controller;
        assert_eq!(d.max_startup_time, s(1200));
        assert!(!d.emit_per_nodegroup_metrics);
        let c = build(&["--max-startup-time=30m", "--emit-per-nodegroup-metrics"])
            .unwrap()
            .controller;
        assert_eq!(c.max_startup_time, s(1800));
        assert!(c.emit_per_nodegroup_metrics);
        let c = build(&["--emit-per-nodegroup-metrics=false"])
            .unwrap()
            .controller;
        assert!(!c.emit_per_nodegroup_metrics);
        let e = build(&["--max-startup-time=0s"]).unwrap_err().to_string();
        assert!(e.contains("--max-startup-time"), "{e}");
    }

    #[test]
    fn the_drain_and_deletion_flags_reach_their_fields() {
        let o = build(&[]).expect("defaults");
        let c = &o.controller;
        assert!(c.cordon_node_before_terminating);
        assert_eq!(c.node_delete_delay_after_taint, s(5));
        assert_eq!(c.node_deletion_delay_timeout, s(120));
        assert!(c.autoscaler.scale_down.unready_enabled);
        assert!(!c.autoscaler.scale_down.delay_type_local);
        let drain = &c.autoscaler.scale_down.drain;
        assert_eq!(drain.blocking_system_pod_disruption_timeout_ms, 3_600_000);
        let o = build(&[
            "--cordon-node-before-terminating",
            "--node-delete-delay-after-taint=0s",
            "--node-deletion-delay-timeout=30s",
            "--scale-down-unready-enabled=false",
            "--blocking-system-pod-distruption-timeout=10m",
            "--scale-down-delay-type-local",
        ])
        .expect("valid");
        let c = &o.controller;
        assert!(c.cordon_node_before_terminating);
        assert_eq!(c.node_delete_delay_after_taint, s(0));
        assert_eq!(c.node_deletion_delay_timeout, s(30));
        assert!(!c.autoscaler.scale_down.unready_enabled);
        assert!(c.autoscaler.scale_down.delay_type_local);
        let drain = &c.autoscaler.scale_down.drain;
        assert_eq!(drain.blocking_system_pod_disruption_timeout_ms, 600_000);
        assert_eq!(c.actuation_options(), {
            use autoscaler_actuation::ActuationOptions;
            ActuationOptions::new(s(120))
                .cordon_node_before_terminating(true)
                .node_delete_delay_after_taint(s(0))
                .node_deletion_delay_timeout(s(30))
        });
    }

    #[test]
    fn max_empty_bulk_delete_stands_for_the_parallelism_only_alone() {
        let parallelism = |args: &[&str]| {
            let o = build(args).expect("valid");
            o.controller
                .autoscaler
                .scale_down
                .max_scale_down_parallelism
        };
        assert_eq!(parallelism(&["--max-empty-bulk-delete=4"]), 4);
        assert_eq!(
            parallelism(&[
                "--max-empty-bulk-delete=4",
                "--max-scale-down-parallelism=7"
            ]),
            7
        );
        assert_eq!(parallelism(&["--max-scale-down-parallelism=7"]), 7);
    }

    #[test]
    fn every_flag_reaches_its_field() {
        let o = build(&[
            "--scan-interval=1m30s",
            "--namespace",
            "autoscaling",
            "--cloud-provider=clusterapi",
            "--node-group-auto-discovery=clusterapi:namespace=a",
            "--node-group-auto-discovery",
            "clusterapi:clusterName=c1",
            "--kubeconfig=/tmp/kc",
            "--leader-elect=false",
            "--leader-elect-lease-duration=30s",
            "--leader-elect-renew-deadline=20s",
            "--leader-elect-retry-period=5s",
            "--leader-elect-resource-name=ca-lease",
            "--address=127.0.0.1:9000",
            "--write-status-configmap=false",
            "--status-config-map-name=ca-status",
            "--max-inactivity=20m",
            "--max-failing-time=30m",
            "--max-pod-eviction-time=5m",
            "-v=4",
            "--expander=priority,least-waste",
            "--expendable-pods-priority-cutoff",
            "-5",
            "--new-pod-scale-up-delay=30s",
            "--max-nodes-per-scaleup=50",
            "--enforce-node-group-min-size",
            "--balance-similar-node-groups",
            "--balancing-ignore-label=zone",
            "--balancing-ignore-label=rack",
            "--max-allocatable-difference-ratio=0.1",
            "--max-free-difference-ratio=0.2",
            "--memory-difference-ratio=0.03",
            "--startup-taint=a",
            "--ignore-taint=b",
            "--max-nodes-total=24",
            "--cores-total=8:128",
            "--memory-total=4:256",
            "--gpu-total=nvidia.com/gpu:0:16",
            "--gpu-total=amd.com/gpu:1:4",
            "--scale-down-enabled=false",
            "--scale-down-delay-after-add=1m",
            "--scale-down-delay-after-delete=2m",
            "--scale-down-delay-after-failure=4m",
            "--scale-down-unneeded-time=5m",
            "--scale-down-unready-time=6m",
            "--scale-down-utilization-threshold=0.4",
            "--scale-down-gpu-utilization-threshold=0.3",
            "--scale-down-non-empty-candidates-count=0",
            "--scale-down-candidates-pool-ratio=1",
            "--scale-down-candidates-pool-min-count=7",
            "--max-graceful-termination-sec=60",
            "--max-bulk-soft-taint-count=0",
            "--max-scale-down-parallelism=3",
            "--max-drain-parallelism=2",
            "--ignore-daemonsets-utilization",
            "--ignore-mirror-pods-utilization=true",
            "--skip-nodes-with-system-pods=false",
            "--skip-nodes-with-local-storage=f",
            "--skip-nodes-with-custom-controller-pods=0",
            "--min-replica-count=2",
            "--daemonset-eviction-for-empty-nodes",
            "--daemonset-eviction-for-occupied-nodes=false",
            "--max-node-provision-time=20m",
            "--max-node-startup-time=25m",
            "--ok-total-unready-count=5",
            "--max-total-unready-percentage=30",
            "--initial-node-group-backoff-duration=1m",
            "--max-node-group-backoff-duration=10m",
            "--node-group-backoff-reset-timeout=1h",
            "--cloud-config=/etc/cloud",
            "--logtostderr",
        ])
        .unwrap();
        let c = &o.controller;
        assert_eq!(o.verbosity, 4);
        assert_eq!(o.kubeconfig, Some(PathBuf::from("/tmp/kc")));
        assert_eq!(o.ignored_flags, ["logtostderr"]);
        assert_eq!(
            o.management,
            ManagementCluster::Kubeconfig(PathBuf::from("/etc/cloud"))
        );
        assert_eq!(c.scan_interval, s(90));
        assert_eq!(c.namespace, "autoscaling");
        assert_eq!(c.clusterapi.auto_discovery.len(), 2);
        assert_eq!(
            c.clusterapi.auto_discovery[1].cluster_name.as_deref(),
            Some("c1")
        );
        assert!(!c.leader_elect);
        assert_eq!(
            (c.lease_duration, c.renew_deadline, c.retry_period),
            (s(30), s(20), s(5))
        );
        assert_eq!(c.lease_name, "ca-lease");
        assert_eq!(c.address, "127.0.0.1:9000".parse::<SocketAddr>().unwrap());
        assert!(!c.write_status_configmap);
        assert_eq!(c.status_config_map_name, "ca-status");
        assert_eq!(
            (
                c.max_inactivity,
                c.max_failing_time,
                c.max_pod_eviction_time
            ),
            (s(1200), s(1800), s(300))
        );
        let up = &c.autoscaler.scale_up;
        assert_eq!(up.expander.to_string(), "priority,least-waste");
        assert_eq!(up.pending.expendable_pods_priority_cutoff, -5);
        assert_eq!(
            c.autoscaler
                .scale_down
                .drain
                .expendable_pods_priority_cutoff,
            -5
        );
        assert_eq!(up.pending.new_pod_scale_up_delay, s(30));
        assert_eq!(up.scale_up.max_nodes_per_scale_up, 50);
        assert!(up.scale_up.enforce_node_group_min_size);
        assert!(up.scale_up.balance_similar_node_groups);
        assert_eq!(up.scale_up.balancing.ignored_labels, ["zone", "rack"]);
        assert_eq!(up.scale_up.balancing.max_allocatable_difference_ratio, 0.1);
        assert_eq!(up.scale_up.balancing.max_free_difference_ratio, 0.2);
        assert_eq!(up.scale_up.balancing.memory_difference_ratio, 0.03);
        assert_eq!(up.template.taints.startup, ["b", "a"]);
        assert_eq!(up.limits.max_nodes_total, 24);
        assert_eq!(up.limits.cpu, Range::new(8000, 128_000).unwrap());
        assert_eq!(up.limits.memory, Range::new(4 << 30, 256 << 30).unwrap());
        assert_eq!(up.limits.gpus.len(), 2);
        assert_eq!(up.limits.gpus[0].0.to_string(), "nvidia.com/gpu");
        assert_eq!(up.limits.gpus[0].1, Range::new(0, 16).unwrap());
        assert_eq!(up.limits.gpus[1].1, Range::new(1, 4).unwrap());
        let d = &c.autoscaler.scale_down;
        assert!(!d.enabled);
        assert_eq!(
            (
                d.delay_after_add,
                d.delay_after_delete,
                d.delay_after_failure,
                d.unneeded_time,
                d.unready_time
            ),
            (s(60), s(120), s(240), s(300), s(360))
        );
        assert_eq!(d.utilization_threshold, 0.4);
        assert_eq!(d.gpu_utilization_threshold, 0.3);
        assert_eq!(d.non_empty_candidates_count, usize::MAX);
        assert_eq!(d.candidates_pool_ratio, 1.0);
        assert_eq!(d.candidates_pool_min_count, 7);
        assert_eq!(d.max_graceful_termination_sec, 60);
        assert_eq!(d.max_bulk_soft_taint_count, 0);
        assert_eq!(d.max_scale_down_parallelism, 3);
        assert_eq!(d.max_drain_parallelism, 2);
        assert!(d.utilization.ignore_daemonsets && d.utilization.ignore_mirror_pods);
        assert!(!d.drain.skip_nodes_with_system_pods);
        assert!(!d.drain.skip_nodes_with_local_storage);
        assert!(!d.drain.skip_nodes_with_custom_controller_pods);
        assert_eq!(d.drain.min_replica_count, 2);
        assert!(d.drain.daemonset_eviction_for_empty_nodes);
        assert!(!d.drain.daemonset_eviction_for_occupied_nodes);
        let cs = &c.autoscaler.cluster_state;
        assert_eq!(cs.max_node_provision_time, s(1200));
        assert_eq!(cs.max_node_startup_time, s(1500));
        assert_eq!(cs.ok_total_unready_count, 5);
        assert_eq!(cs.max_total_unready_percentage, 30.0);
        assert_eq!(
            (cs.backoff.initial, cs.backoff.max, cs.backoff.reset_timeout),
            (s(60), s(600), s(3600))
        );
    }

    #[test]
    fn gap_flags_asking_for_a_missing_feature_are_said() {
        let o = build(&[
            "--enable-provisioning-requests=true",
            "--profiling",
            "--parallel-scale-up=false",
            "--estimator=binpacking",
            "--predicate-parallelism=8",
            "--feature-gates=ContextualLogging=true",
        ])
        .unwrap();
        let flags: Vec<&str> = o.unsupported.iter().map(|u| u.flag).collect();
        // In registry order.
        assert_eq!(flags, ["profiling", "enable-provisioning-requests"]);
        assert_eq!(o.unsupported[0].value, "true");
        assert_eq!(o.ignored_flags, ["predicate-parallelism", "feature-gates"]);
        assert_eq!(o.controller.unsupported_settings.len(), 2);
        assert!(
            o.controller.unsupported_settings[1]
                .starts_with("--enable-provisioning-requests=true: ProvisioningRequest"),
            "{:?}",
            o.controller.unsupported_settings
        );
        let o = build(&["--enable-provisioning-requests=false"]).unwrap();
        assert!(o.unsupported.is_empty() && o.ignored_flags.is_empty());
    }

    #[test]
    fn upstream_flags_keep_upstream_syntax_and_reject_bad_values() {
        let a = parse(&[
            "--log_dir=/var/log/ca",
            "-kube_client_qps=20",
            "--nodes=1:10:ng-a",
            "--nodes",
            "2:5:ng-b",
            "--stderrthreshold=info",
            "--max-binpacking-time=1m",
            "--scale-down-simulation-timeout",
            "45s",
        ])
        .unwrap();
        let given: Vec<(&str, Vec<String>)> = a
            .compat
            .given
            .iter()
            .map(|(f, v)| (f.name, v.clone()))
            .collect();
        assert!(given.contains(&("log-dir", vec!["/var/log/ca".to_string()])));
        assert!(given.contains(&("nodes", vec!["1:10:ng-a".into(), "2:5:ng-b".into()])));
        assert!(given.contains(&("kube-client-qps", vec!["20".to_string()])));
        for (args, name) in [
            (
                &["--predicate-parallelism=many"][..],
                "--predicate-parallelism",
            ),
            (&["--feature-gates=Foo"], "--feature-gates"),
            (&["--log-flush-frequency=5x"], "--log-flush-frequency"),
            (&["--profiling=maybe"], "--profiling"),
            (&["--stderrthreshold=loud"], "--stderrthreshold"),
            (&["--max-binpacking-time=abc"], "--max-binpacking-time"),
            (&["--kube-client-burst=1.5"], "--kube-client-burst"),
        ] {
            let e = parse(args).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{args:?}");
            assert!(e.to_string().contains(name), "{args:?}: {e}");
        }
    }

    #[test]
    fn underscores_in_flag_names_become_dashes_but_values_stay() {
        assert_eq!(dashes_for_underscores("--log_file=/a_b"), "--log-file=/a_b");
        assert_eq!(dashes_for_underscores("--skip_headers"), "--skip-headers");
        assert_eq!(dashes_for_underscores("a_b"), "a_b");
    }

    #[test]
    fn go_flag_syntax_is_accepted() {
        // Space-separated values, single-dash long flags, bare booleans.
        let a = parse(&["-scan-interval", "20s", "-v", "3", "--leader-elect"]).unwrap();
        assert_eq!(a.autoscaling.scan_interval, Some(s(20)));
        assert_eq!(a.verbosity, Some(3));
        assert_eq!(a.leader_elect, Some(true));
        // `--flag false` does not consume `false`: it is an unexpected argument.
        let e = parse(&["--leader-elect", "false"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("false"), "{e}");
        for (text, v) in [("T", true), ("0", false), ("False", false)] {
            let a = parse(&[&format!("--scale-down-enabled={text}")]).unwrap();
            assert_eq!(a.autoscaling.scale_down.scale_down_enabled, Some(v));
        }
    }

    #[test]
    fn leading_flags_mean_run_and_help_does_not() {
        let n = |v: &[&str]| -> Vec<String> {
            normalize_args(v.iter().map(OsString::from).collect())
                .into_iter()
                .map(|s| s.into_string().unwrap())
                .collect()
        };
        assert_eq!(n(&["ca", "--v=4"]), ["ca", "run", "--v=4"]);
        assert_eq!(n(&["ca", "-v=4"]), ["ca", "run", "--v=4"]);
        assert_eq!(n(&["ca", "--help"]), ["ca", "--help"]);
        assert_eq!(n(&["ca", "plan", "-x"]), ["ca", "plan", "-x"]);
        assert_eq!(n(&["ca"]), ["ca", "run"]);
        assert_eq!(
            n(&["ca", "run", "-h", "--", "-x"]),
            ["ca", "run", "-h", "--", "-x"]
        );
        assert_eq!(
            n(&["ca", "run", "--min-replica-count", "-1"]),
            ["ca", "run", "--min-replica-count", "-1"]
        );
    }

    /// `--drain-priority-config` as upstream: couples parsed and sorted, empty means not given,
    /// a malformed value refused by its parser (exit 2), and refused with a
    /// `--max-graceful-termination-sec` other than its default.
    #[test]
    fn drain_priority_config_reaches_scale_down_and_refuses_the_grace_flag() {
        let o = build(&["--drain-priority-config=10000:20,1000:100,0:60"]).unwrap();
        let p = o.controller.autoscaler.scale_down.drain_priority.as_ref();
        assert_eq!(
            p.map(|p| p.to_string()).as_deref(),
            Some("0:60,1000:100,10000:20")
        );
        let none = build(&["--drain-priority-config="]).unwrap();
        assert!(
            none.controller
                .autoscaler
                .scale_down
                .drain_priority
                .is_none()
        );
        for bad in [
            "--drain-priority-config=10000",
            "--drain-priority-config=a:1",
        ] {
            let e = parse(&[bad]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            assert!(e.to_string().contains("--drain-priority-config"), "{e}");
        }
        let Err(e) = build(&[
            "--drain-priority-config=0:60",
            "--max-graceful-termination-sec=60",
        ]) else {
            panic!("refused together");
        };
        assert!(
            e.to_string().contains("--max-graceful-termination-sec"),
            "{e}"
        );
        // The default value given explicitly is not told apart from the default (upstream's
        // current check compares with the default).
        assert!(
            build(&[
                "--drain-priority-config=0:60",
                "--max-graceful-termination-sec=600",
            ])
            .is_ok()
        );
    }

    /// Each invalid value is rejected with the flag's name and the value.
    #[test]
    fn invalid_values_are_rejected_with_their_name() {
        let parse_errors: &[(&[&str], &str)] = &[
            (&["--scan-interval=10x"], "--scan-interval"),
            (&["--scan-interval=-1s"], "--scan-interval"),
            (
                &["--scale-down-utilization-threshold=1.5"],
                "--scale-down-utilization-threshold",
            ),
            (
                &["--scale-down-utilization-threshold=abc"],
                "--scale-down-utilization-threshold",
            ),
            (
                &["--scale-down-gpu-utilization-threshold=-0.1"],
                "--scale-down-gpu-utilization-threshold",
            ),
            (
                &["--scale-down-candidates-pool-ratio=2"],
                "--scale-down-candidates-pool-ratio",
            ),
            (
                &["--max-total-unready-percentage=101"],
                "--max-total-unready-percentage",
            ),
            (
                &["--memory-difference-ratio=-1"],
                "--memory-difference-ratio",
            ),
            (&["--v=11"], "--v"),
            (&["--leader-elect=maybe"], "--leader-elect"),
            (&["--max-nodes-total=-1"], "--max-nodes-total"),
            (&["--ok-total-unready-count=x"], "--ok-total-unready-count"),
            (&["--no-such-flag"], "--no-such-flag"),
        ];
        for (args, name) in parse_errors {
            let e = parse(args).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{args:?}");
            assert!(e.to_string().contains(name), "{args:?}: {e}");
        }
        let build_errors: &[(&[&str], &str, &str)] = &[
            (&["--cloud-provider=aws"], "cloud-provider", "aws"),
            (
                &["--node-group-auto-discovery=asg:tag=x"],
                "node-group-auto-discovery",
                "asg:tag=x",
            ),
            (&["--address=8085"], "address", "8085"),
            (&["--address=:99999"], "address", ":99999"),
            (&["--expander=cheapest"], "expander", "cheapest"),
            (&["--expander=random,price"], "expander", "random,price"),
            (&["--cores-total=10:5"], "cores-total", "10:5"),
            (&["--memory-total=abc"], "memory-total", "abc"),
            (
                &["--gpu-total=nvidia.com/gpu:4"],
                "gpu-total",
                "nvidia.com/gpu:4",
            ),
            (&["--scan-interval=0s"], "scan-interval", "0s"),
            (&["--max-inactivity=0"], "max-inactivity", "0s"),
            (
                &["--max-node-provision-time=0s"],
                "max-node-provision-time",
                "0s",
            ),
            (
                &["--leader-elect-renew-deadline=20s"],
                "leader-elect-renew-deadline",
                "20s",
            ),
            (
                &["--leader-elect-retry-period=9s"],
                "leader-elect-retry-period",
                "9s",
            ),
            (
                &["--initial-node-group-backoff-duration=1h"],
                "max-node-group-backoff-duration",
                "30m0s",
            ),
            (&["--namespace=Kube_System"], "namespace", "Kube_System"),
            (&["--status-config-map-name="], "status-config-map-name", ""),
            (
                &["--leader-elect-resource-name=a b"],
                "leader-elect-resource-name",
                "a b",
            ),
            (
                &["--max-scale-down-parallelism=0"],
                "max-scale-down-parallelism",
                "0",
            ),
            (&["--max-drain-parallelism=0"], "max-drain-parallelism", "0"),
            (&["--max-nodes-per-scaleup=0"], "max-nodes-per-scaleup", "0"),
            (&["--min-replica-count=-1"], "min-replica-count", "-1"),
            (
                &["--balancing-label=a", "--balancing-ignore-label=b"],
                "balancing-label",
                "a",
            ),
        ];
        for (args, flag, value) in build_errors {
            let e = build(args).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(&format!("--{flag}")), "{args:?}: {text}");
            assert!(text.contains(&format!("{value:?}")), "{args:?}: {text}");
        }
        // Without leader election the lease timings are not checked against each other.
        assert!(build(&["--leader-elect=false", "--leader-elect-renew-deadline=20s"]).is_ok());
    }

    #[test]
    fn environment_sets_the_api_group_arch_and_identity() {
        let env = |k: &str| match k {
            "CAPI_GROUP" => Some("machine.openshift.io".to_string()),
            "CAPI_SCALE_ZERO_DEFAULT_ARCH" => Some("arm64".to_string()),
            "POD_NAME" => Some("ca-7d9f".to_string()),
            _ => None,
        };
        let o = RunOptions::build(&parse(&[]).unwrap(), None, &env).unwrap();
        assert_eq!(o.controller.clusterapi.api_group, "machine.openshift.io");
        assert_eq!(o.controller.clusterapi.default_arch, "arm64");
        assert_eq!(o.controller.identity, "ca-7d9f");
        assert_eq!(o.controller.clusterapi.api_version, None);
        let bad = |k: &str| (k == "CAPI_GROUP").then(|| "Not A Group".to_string());
        let e = RunOptions::build(&parse(&[]).unwrap(), None, &bad).unwrap_err();
        assert!(e.to_string().contains("CAPI_GROUP"), "{e}");
    }

    #[test]
    fn without_pod_name_two_processes_on_hosts_of_the_same_name_have_distinct_identities() {
        let host = |k: &str| (k == "HOSTNAME").then(|| "node-a".to_string());
        let built = || {
            RunOptions::build(&parse(&[]).unwrap(), None, &host)
                .unwrap()
                .controller
                .identity
        };
        let (a, b) = (built(), built());
        assert_ne!(a, b, "two replicas would both hold the Lease");
        for id in [&a, &b] {
            let suffix = id.strip_prefix("node-a_").unwrap_or_else(|| panic!("{id}"));
            assert_eq!(suffix.len(), 32, "{id}");
            assert!(suffix.bytes().all(|c| c.is_ascii_hexdigit()), "{id}");
        }
        // An empty POD_NAME is no name: the host name and a suffix.
        let empty = |k: &str| match k {
            "POD_NAME" => Some(String::new()),
            "HOSTNAME" => Some("node-a".to_string()),
            _ => None,
        };
        let o = RunOptions::build(&parse(&[]).unwrap(), None, &empty).unwrap();
        assert!(
            o.controller.identity.starts_with("node-a_"),
            "{}",
            o.controller.identity
        );
    }

    #[test]
    fn capi_version_pins_the_api_version() {
        let pinned = |k: &str| (k == "CAPI_VERSION").then(|| "v1alpha4".to_string());
        let o = RunOptions::build(&parse(&[]).unwrap(), None, &pinned).unwrap();
        assert_eq!(
            o.controller.clusterapi.api_version.as_deref(),
            Some("v1alpha4")
        );
        for bad in ["1beta1", "v", "V1", "v1/beta", "cluster.x-k8s.io/v1beta1"] {
            let env = |k: &str| (k == "CAPI_VERSION").then(|| bad.to_string());
            let e = RunOptions::build(&parse(&[]).unwrap(), None, &env).unwrap_err();
            assert!(e.to_string().contains("CAPI_VERSION"), "{bad}: {e}");
        }
    }

    #[test]
    fn cloud_config_names_the_management_cluster_as_upstream_does() {
        let m = |args: &[&str]| build(args).unwrap().management;
        assert_eq!(m(&[]), ManagementCluster::Workload);
        assert_eq!(m(&["--kubeconfig=/w"]), ManagementCluster::Workload);
        assert_eq!(
            m(&["--cloud-config=/m", "--kubeconfig=/w"]),
            ManagementCluster::Kubeconfig(PathBuf::from("/m"))
        );
        assert_eq!(
            m(&[
                "--cloud-config=/m",
                "--clusterapi-cloud-config-authoritative"
            ]),
            ManagementCluster::Kubeconfig(PathBuf::from("/m"))
        );
        assert_eq!(
            m(&["--kubeconfig=/w", "--clusterapi-cloud-config-authoritative"]),
            ManagementCluster::InCluster
        );
        assert_eq!(
            m(&[
                "--cloud-config=",
                "--clusterapi-cloud-config-authoritative=false"
            ]),
            ManagementCluster::Workload
        );
        // Neither flag is reported as having no effect any more.
        let o = build(&[
            "--cloud-config=/m",
            "--clusterapi-cloud-config-authoritative",
        ])
        .unwrap();
        assert!(o.ignored_flags.is_empty(), "{:?}", o.ignored_flags);
    }

    #[test]
    fn addresses_parse_like_go_listen_addresses() {
        assert_eq!(parse_address(":8085").unwrap().to_string(), "0.0.0.0:8085");
        assert_eq!(
            parse_address("localhost:1").unwrap().to_string(),
            "127.0.0.1:1"
        );
        assert_eq!(parse_address("[::]:80").unwrap().to_string(), "[::]:80");
        assert!(parse_address("example.com:80").is_err());
        assert!(parse_address(":").is_err());
    }
}

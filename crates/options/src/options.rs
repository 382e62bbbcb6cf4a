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
use autoscaler_kube::ControllerConfig;
use autoscaler_model::parse_duration;

use crate::config::{self, ConfigFileError};
use crate::landing::{Draft, Layer};

/// Go's boolean syntax (`strconv.ParseBool`).
pub(crate) fn go_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("{text:?} is not a boolean (true or false)")),
    }
}

/// A Go duration.
pub(crate) fn go_duration(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|e| e.to_string())
}

/// A ratio in [0, 1].
pub(crate) fn fraction(text: &str) -> Result<f64, String> {
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
pub(crate) fn non_negative(text: &str) -> Result<f64, String> {
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
pub(crate) fn percentage(text: &str) -> Result<f64, String> {
    let v = non_negative(text)?;
    if v > 100.0 {
        return Err(format!("{text} is above 100"));
    }
    Ok(v)
}

/// Flags of `run`, read from the flag table ([`crate::FLAGS`]): the values given on the command
/// line, per flag. Every flag is optional here: an absent flag leaves the value of the config
/// file, else the table's default (shown in the help).
#[derive(Clone, Debug, Default)]
pub struct RunArgs {
    given: Layer,
    /// The other upstream flags this autoscaler does not implement (see [`crate::flags`]).
    pub compat: crate::flags::CompatArgs,
}

impl RunArgs {
    /// `--config`, if given.
    pub fn config(&self) -> Option<PathBuf> {
        (self.given.values("config"))
            .and_then(|v| v.last())
            .map(PathBuf::from)
    }

    /// Whether the implemented flag `name` (without dashes) is given.
    pub fn is_given(&self, name: &str) -> bool {
        self.given.gives(name)
    }

    /// The texts given for the implemented flag `name` (without dashes), none when absent.
    pub fn values(&self, name: &str) -> Vec<String> {
        self.given.texts(name)
    }
}

impl clap::FromArgMatches for RunArgs {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut out = RunArgs::default();
        out.update_from_arg_matches(m)?;
        Ok(out)
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.given
            .merge(Layer::from_matches(crate::flags::FLAGS, false, m));
        self.compat.update_from_arg_matches(m)
    }
}

impl clap::Args for RunArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        let cmd = crate::landing::augment(cmd, crate::flags::FLAGS, false);
        <crate::flags::CompatArgs as clap::Args>::augment_args(cmd)
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// The settings one layer gives (a scenario's `options:`, the `--config` file's fields): the
/// flags that set how the autoscaler decides and acts rather than how the live process talks
/// to its cluster (the table's rows marked as settings), named as the flags are and read by
/// their parsers (see [`AutoscalingArgs::from_settings`]).
#[derive(Clone, Debug, Default)]
pub struct AutoscalingArgs {
    given: Layer,
}

impl AutoscalingArgs {
    /// Whether the setting `name` (the flag's name without dashes) is given.
    pub fn is_given(&self, name: &str) -> bool {
        self.given.gives(name)
    }
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

pub(crate) fn flag_err(
    flag: &'static str,
    value: impl ToString,
    why: impl ToString,
) -> OptionsError {
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
        let file = match args.config() {
            Some(path) => Some(config::load(&path)?),
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
        let mut d = Draft::default();
        let mut config_warnings = Vec::new();
        if let Some(file) = file {
            let settings = file.settings()?;
            d.apply(&settings.args.given)
                .map_err(|e| settings.blame(e))?;
            if let Some(v) = settings.verbosity {
                d.verbosity = v;
            }
            config_warnings = settings.unsupported;
        }
        if let Some(scenario) = scenario {
            d.apply(&scenario.given)?;
        }
        d.apply(&args.given)?;
        let mut c = d.c;
        // Readiness in the cluster state reads the same taints as the templates.
        *c.autoscaler.cluster_state.taints_mut() = c.autoscaler.scale_up.template.taints().clone();

        // Provider.
        let provider = d.provider.as_deref().unwrap_or(CLUSTERAPI_PROVIDER);
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
        for spec in &d.auto_discovery {
            capi = capi
                .with_auto_discovery(std::slice::from_ref(spec))
                .map_err(|e| flag_err("node-group-auto-discovery", spec, e))?;
        }
        c.clusterapi = capi;
        c.identity = identity(env);
        validate(&c)?;

        let ignored_flags = args.compat.no_effect_given();
        let unsupported = args.compat.unsupported();
        c.unsupported_settings = unsupported.iter().map(ToString::to_string).collect();
        Ok(RunOptions {
            controller: c,
            kubeconfig: d.kubeconfig,
            management: ManagementCluster::from_flags(d.cloud_config.as_deref(), d.authoritative),
            verbosity: d.verbosity,
            logging_format: d.logging_format,
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

/// The names of a comma-separated list flag, trimmed, without empty items (`--x=a,,b` or
/// `--x=` as pflag's string slices read them).
pub(crate) fn names_of(values: &[String]) -> Vec<String> {
    values
        .iter()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect()
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
    // The provision and startup times' rules were checked by their setters as each flag landed.
    if scan_interval.is_zero() {
        return Err(flag_err(
            "scan-interval",
            fmt_d(scan_interval),
            "must be greater than 0",
        ));
    }
    let b = cs.backoff();
    if b.max() < b.initial() {
        return Err(flag_err(
            "max-node-group-backoff-duration",
            fmt_d(b.max()),
            format!(
                "must not be shorter than --initial-node-group-backoff-duration ({})",
                fmt_d(b.initial())
            ),
        ));
    }
    // The scale-down and scale-up options' own rules (thresholds, parallelism) were checked
    // by their setters as each flag landed.
    let sd = &a.scale_down;
    // Upstream refuses the two together: the couples' seconds replace the one cap.
    if let Some(p) = sd.drain_priority()
        && sd.max_graceful_termination_sec()
            != autoscaler_core::ScaleDownOptions::default().max_graceful_termination_sec()
    {
        return Err(flag_err(
            "drain-priority-config",
            p,
            "could not use --drain-priority-config together with --max-graceful-termination-sec",
        ));
    }
    // `--min-replica-count` was checked by its setter as the flag landed.
    let bal = a.scale_up.scale_up.balancing();
    if let Err(e) = bal.validate() {
        let value = bal.balancing_labels().join(",");
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

/// The settings of `table` alone, read as the command line reads them.
fn settings_command(table: &'static [crate::flags::UpstreamFlag]) -> clap::Command {
    let cmd = clap::Command::new("settings")
        .no_binary_name(true)
        .disable_help_flag(true)
        .disable_version_flag(true)
        .color(clap::ColorChoice::Never);
    crate::landing::augment(cmd, table, true)
}

/// The names of the settings: the flags of the table's rows marked as settings, without
/// dashes, in `--help` order.
pub fn setting_names() -> Vec<String> {
    (crate::landing::implemented(crate::flags::FLAGS, true).into_iter())
        .map(|(f, _)| f.name.to_string())
        .collect()
}

/// Whether `name` (a flag without dashes) is a setting.
pub fn is_setting(name: &str) -> bool {
    (crate::flags::FLAGS.iter()).any(|f| f.name == name && f.how().is_some_and(|u| u.setting))
}

impl AutoscalingArgs {
    /// Reads settings given by name (the flag's, without dashes) with text values (several for
    /// a repeatable flag), each through the flag's own parser, so a scenario's `options:`
    /// means exactly what the same flags mean on the command line. A setting given twice keeps
    /// the last; an error names the setting.
    pub fn from_settings<'a>(
        settings: impl IntoIterator<Item = (&'a str, &'a [String])>,
    ) -> Result<AutoscalingArgs, SettingError> {
        settings_of(crate::flags::FLAGS, settings).map(|given| AutoscalingArgs { given })
    }
}

/// [`AutoscalingArgs::from_settings`] with the settings of `table`.
pub(crate) fn settings_of<'a>(
    table: &'static [crate::flags::UpstreamFlag],
    settings: impl IntoIterator<Item = (&'a str, &'a [String])>,
) -> Result<Layer, SettingError> {
    let mut cmd = settings_command(table);
    let mut out = Layer::default();
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
            return Err(err(unknown_setting(table, name, None)));
        }
        let argv = values.iter().map(|v| format!("--{name}={v}"));
        let m = cmd
            .try_get_matches_from_mut(argv)
            .map_err(|e| err(setting_why(table, name, &e)))?;
        out.merge(Layer::from_matches(table, true, &m));
    }
    Ok(out)
}

/// The reason of a refused setting, in the setting's terms rather than the command line's.
fn setting_why(
    table: &'static [crate::flags::UpstreamFlag],
    name: &str,
    e: &clap::Error,
) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    match e.kind() {
        ErrorKind::UnknownArgument => {
            let tip = match e.get(ContextKind::SuggestedArg) {
                Some(ContextValue::String(s)) => Some(s.trim_start_matches('-').to_string()),
                _ => None,
            };
            unknown_setting(table, name, tip)
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
fn unknown_setting(
    table: &'static [crate::flags::UpstreamFlag],
    name: &str,
    tip: Option<String>,
) -> String {
    if table.iter().any(|f| f.name == name) {
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
    use autoscaler_model::Range;
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
        assert_eq!(up.pending.expendable_pods_priority_cutoff(), -10);
        assert_eq!(up.pending.new_pod_scale_up_delay(), Duration::ZERO);
        assert_eq!(up.scale_up.max_nodes_per_scale_up(), 1000);
        assert!(!up.scale_up.balance_similar_node_groups());
        assert!(!up.scale_up.enforce_node_group_min_size());
        assert_eq!(
            up.scale_up.balancing().max_allocatable_difference_ratio(),
            0.05
        );
        assert_eq!(up.scale_up.balancing().max_free_difference_ratio(), 0.05);
        assert_eq!(up.scale_up.balancing().memory_difference_ratio(), 0.015);
        assert!(up.scale_up.balancing().ignored_labels().is_empty());
        assert!(up.scale_up.balancing().balancing_labels().is_empty());
        assert!(up.template.taints().startup().is_empty());
        assert_eq!(up.expander.to_string(), "least-waste");
        assert_eq!(up.limits.max_nodes_total, 0);
        assert_eq!(up.limits.cpu, Range::new(0, 320_000_000).unwrap());
        assert_eq!(
            up.limits.memory,
            Range::new(0, 6_400_000 * (1 << 30)).unwrap()
        );
        assert!(up.limits.gpus.is_empty());

        let d = &c.autoscaler.scale_down;
        assert!(d.enabled());
        assert_eq!(d.utilization_threshold(), 0.5);
        assert_eq!(d.gpu_utilization_threshold(), 0.5);
        assert_eq!(d.unneeded_time(), s(600));
        assert_eq!(d.unready_time(), s(1200));
        assert_eq!(d.delay_after_add(), s(600));
        assert_eq!(d.delay_after_delete(), Duration::ZERO);
        assert_eq!(d.delay_after_failure(), s(180));
        assert_eq!(d.max_scale_down_parallelism(), 10);
        assert_eq!(d.max_drain_parallelism(), 1);
        assert_eq!(d.non_empty_candidates_count(), 30);
        assert_eq!(d.candidates_pool_ratio(), 0.1);
        assert_eq!(d.candidates_pool_min_count(), 50);
        assert_eq!(d.max_graceful_termination_sec(), 600);
        assert_eq!(d.max_bulk_soft_taint_count(), 10);
        assert!(!d.utilization().ignore_daemonsets());
        assert!(!d.utilization().ignore_mirror_pods());
        assert!(d.drain().skip_nodes_with_system_pods());
        assert!(d.drain().skip_nodes_with_local_storage());
        assert!(d.drain().skip_nodes_with_custom_controller_pods());
        assert_eq!(d.drain().min_replica_count(), 0);
        assert!(!d.drain().daemonset_eviction_for_empty_nodes());
        assert!(d.drain().daemonset_eviction_for_occupied_nodes());

        let cs = &c.autoscaler.cluster_state;
        assert_eq!(cs.max_node_provision_time(), s(900));
        assert_eq!(cs.max_node_startup_time(), s(900));
        assert_eq!(cs.ok_total_unready_count(), 3);
        assert_eq!(cs.max_total_unready_percentage(), 45.0);
        assert_eq!(cs.backoff().initial(), s(300));
        assert_eq!(cs.backoff().max(), s(1800));
        assert_eq!(cs.backoff().reset_timeout(), s(3 * 3600));
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
        let taints = a.scale_up.template.taints();
        assert_eq!(taints.startup(), ["b", "a"]);
        assert_eq!(taints.status(), ["c", "d"]);
        assert_eq!(a.cluster_state.taints(), taints);
        let p = &a.scale_up.pending;
        assert_eq!(
            p.allowed_schedulers(),
            ["default-scheduler", "volcano", "kueue"]
        );
        assert_eq!(p.bypassed_schedulers(), ["volcano"]);
        let d = build(&[]).unwrap().controller.autoscaler;
        assert!(d.scale_up.pending.allowed_schedulers().is_empty());
        assert!(d.scale_up.pending.bypassed_schedulers().is_empty());
        assert_eq!(d.cluster_state.taints(), &Default::default());
    }

    /// A taint key the API would refuse could never match a node's taint: the flag is refused,
    /// naming it and the key.
    #[test]
    fn a_taint_flag_whose_key_is_not_a_qualified_name_is_refused() {
        for flag in ["startup-taint", "ignore-taint", "status-taint"] {
            let e = build(&[
                &format!("--{flag}=example.com/ok"),
                &format!("--{flag}=not a key"),
            ])
            .unwrap_err()
            .to_string();
            assert!(
                e.starts_with(&format!("invalid value \"not a key\" for --{flag}: ")),
                "{e}"
            );
            assert!(e.contains("not a qualified name"), "{e}");
        }
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
        assert!(c.autoscaler.scale_down.unready_enabled());
        assert!(!c.autoscaler.scale_down.delay_type_local());
        let drain = c.autoscaler.scale_down.drain();
        assert_eq!(drain.blocking_system_pod_disruption_timeout_ms(), 3_600_000);
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
        assert!(!c.autoscaler.scale_down.unready_enabled());
        assert!(c.autoscaler.scale_down.delay_type_local());
        let drain = c.autoscaler.scale_down.drain();
        assert_eq!(drain.blocking_system_pod_disruption_timeout_ms(), 600_000);
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
                .max_scale_down_parallelism()
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
        assert_eq!(up.pending.expendable_pods_priority_cutoff(), -5);
        assert_eq!(
            c.autoscaler
                .scale_down
                .drain()
                .expendable_pods_priority_cutoff(),
            -5
        );
        assert_eq!(up.pending.new_pod_scale_up_delay(), s(30));
        assert_eq!(up.scale_up.max_nodes_per_scale_up(), 50);
        assert!(up.scale_up.enforce_node_group_min_size());
        assert!(up.scale_up.balance_similar_node_groups());
        assert_eq!(up.scale_up.balancing().ignored_labels(), ["zone", "rack"]);
        assert_eq!(
            up.scale_up.balancing().max_allocatable_difference_ratio(),
            0.1
        );
        assert_eq!(up.scale_up.balancing().max_free_difference_ratio(), 0.2);
        assert_eq!(up.scale_up.balancing().memory_difference_ratio(), 0.03);
        assert_eq!(up.template.taints().startup(), ["b", "a"]);
        assert_eq!(up.limits.max_nodes_total, 24);
        assert_eq!(up.limits.cpu, Range::new(8000, 128_000).unwrap());
        assert_eq!(up.limits.memory, Range::new(4 << 30, 256 << 30).unwrap());
        assert_eq!(up.limits.gpus.len(), 2);
        assert_eq!(up.limits.gpus[0].0.to_string(), "nvidia.com/gpu");
        assert_eq!(up.limits.gpus[0].1, Range::new(0, 16).unwrap());
        assert_eq!(up.limits.gpus[1].1, Range::new(1, 4).unwrap());
        let d = &c.autoscaler.scale_down;
        assert!(!d.enabled());
        assert_eq!(
            (
                d.delay_after_add(),
                d.delay_after_delete(),
                d.delay_after_failure(),
                d.unneeded_time(),
                d.unready_time()
            ),
            (s(60), s(120), s(240), s(300), s(360))
        );
        assert_eq!(d.utilization_threshold(), 0.4);
        assert_eq!(d.gpu_utilization_threshold(), 0.3);
        assert_eq!(d.non_empty_candidates_count(), usize::MAX);
        assert_eq!(d.candidates_pool_ratio(), 1.0);
        assert_eq!(d.candidates_pool_min_count(), 7);
        assert_eq!(d.max_graceful_termination_sec(), 60);
        assert_eq!(d.max_bulk_soft_taint_count(), 0);
        assert_eq!(d.max_scale_down_parallelism(), 3);
        assert_eq!(d.max_drain_parallelism(), 2);
        assert!(d.utilization().ignore_daemonsets() && d.utilization().ignore_mirror_pods());
        assert!(!d.drain().skip_nodes_with_system_pods());
        assert!(!d.drain().skip_nodes_with_local_storage());
        assert!(!d.drain().skip_nodes_with_custom_controller_pods());
        assert_eq!(d.drain().min_replica_count(), 2);
        assert!(d.drain().daemonset_eviction_for_empty_nodes());
        assert!(!d.drain().daemonset_eviction_for_occupied_nodes());
        let cs = &c.autoscaler.cluster_state;
        assert_eq!(cs.max_node_provision_time(), s(1200));
        assert_eq!(cs.max_node_startup_time(), s(1500));
        assert_eq!(cs.ok_total_unready_count(), 5);
        assert_eq!(cs.max_total_unready_percentage(), 30.0);
        assert_eq!(
            (
                cs.backoff().initial(),
                cs.backoff().max(),
                cs.backoff().reset_timeout()
            ),
            (s(60), s(600), s(3600))
        );
    }

    #[test]
    fn gap_flags_asking_for_a_missing_feature_are_said() {
        let o = build(&[
            "--scale-up-from-zero=false",
            "--profiling",
            "--parallel-scale-up=false",
            "--estimator=binpacking",
            "--predicate-parallelism=8",
            "--feature-gates=ContextualLogging=true",
        ])
        .unwrap();
        let flags: Vec<&str> = o.unsupported.iter().map(|u| u.flag).collect();
        // In registry order.
        assert_eq!(flags, ["scale-up-from-zero", "profiling"]);
        assert_eq!(o.unsupported[0].value, "false");
        assert_eq!(o.ignored_flags, ["predicate-parallelism", "feature-gates"]);
        assert_eq!(o.controller.unsupported_settings.len(), 2);
        assert!(
            o.controller.unsupported_settings[0]
                .starts_with("--scale-up-from-zero=false: scale-up always runs"),
            "{:?}",
            o.controller.unsupported_settings
        );
        let o = build(&["--scale-up-from-zero=true"]).unwrap();
        assert!(o.unsupported.is_empty() && o.ignored_flags.is_empty());
    }

    #[test]
    fn the_capacity_on_request_flags_land_in_the_core_options_and_are_no_gap() {
        let o = build(&[]).unwrap();
        assert_eq!(
            o.controller.autoscaler.capacity,
            autoscaler_core::CapacityOptions::default()
        );
        let o = build(&[
            "--enable-provisioning-requests",
            "--provisioning-request-initial-backoff-time=30s",
            "--provisioning-request-max-backoff-time=5m",
            "--provisioning-request-max-backoff-cache-size=50",
            "--check-capacity-processor-instance=east",
            "--capacity-buffer-controller-enabled=true",
            "--capacity-buffer-pod-injection-enabled=true",
        ])
        .unwrap();
        assert!(o.unsupported.is_empty(), "{:?}", o.unsupported);
        let c = &o.controller.autoscaler.capacity;
        assert!(c.requests().enabled() && c.buffer_controller() && c.buffer_pods());
        assert_eq!(c.requests().initial_backoff_ms(), 30_000);
        assert_eq!(c.requests().max_backoff_ms(), 300_000);
        assert_eq!(c.requests().max_backoff_cache_size(), 50);
        assert_eq!(c.requests().check_capacity_processor_instance(), "east");
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
        let a = parse(&[
            "-scan-interval",
            "20s",
            "-v",
            "3",
            "--leader-elect=false",
            "--leader-elect",
        ]);
        assert!(a.is_err(), "a single-valued flag is given once");
        let a = parse(&["-scan-interval", "20s", "-v", "3", "--leader-elect"]).unwrap();
        assert_eq!(a.values("scan-interval"), ["20s"]);
        assert_eq!(a.values("v"), ["3"]);
        assert_eq!(a.values("leader-elect"), ["true"]);
        let o = RunOptions::build(&a, None, &no_env).unwrap();
        assert_eq!(o.controller.scan_interval, s(20));
        assert_eq!(o.verbosity, 3);
        assert!(o.controller.leader_elect);
        // `--flag false` does not consume `false`: it is an unexpected argument.
        let e = parse(&["--leader-elect", "false"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("false"), "{e}");
        for (text, v) in [("T", true), ("0", false), ("False", false)] {
            let o = build(&[&format!("--scale-down-enabled={text}")]).unwrap();
            assert_eq!(o.controller.autoscaler.scale_down.enabled(), v);
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
        let p = o.controller.autoscaler.scale_down.drain_priority();
        assert_eq!(
            p.map(|p| p.to_string()).as_deref(),
            Some("0:60,1000:100,10000:20")
        );
        let none = build(&["--drain-priority-config="]).unwrap();
        assert!(
            none.controller
                .autoscaler
                .scale_down
                .drain_priority()
                .is_none()
        );
        for bad in [
            "--drain-priority-config=10000",
            "--drain-priority-config=a:1",
        ] {
            let Err(e) = build(&[bad]) else {
                panic!("{bad} refused");
            };
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
                &["--max-node-startup-time=0s"],
                "max-node-startup-time",
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
            (
                &["--initial-node-group-backoff-duration=0s"],
                "initial-node-group-backoff-duration",
                "0s",
            ),
            (
                &["--node-group-backoff-reset-timeout=0s"],
                "node-group-backoff-reset-timeout",
                "0s",
            ),
            (
                &["--consolidation-horizon=0s"],
                "consolidation-horizon",
                "0s",
            ),
            // The deprecated flag lands through the same validated setter, and is named.
            (&["--max-empty-bulk-delete=0"], "max-empty-bulk-delete", "0"),
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

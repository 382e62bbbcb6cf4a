//! The registry of upstream cluster-autoscaler's flags: every flag of upstream's binary (the
//! autoscaling flags, leader election, klog and component-base logging, feature gates, and a
//! few removed flags that manifests still carry), with upstream's default and what this
//! autoscaler does with it: implemented, accepted without effect (and why), or accepted but a
//! feature we do not have (a gap, said at start and in the status ConfigMap when asked for).
//!
//! It is the flag table: each flag's name, kind, upstream default (written nowhere else: the
//! help shows it from here, [`with_table_defaults`], and a test checks the core's `Default`s
//! equal it) and status. It decides which flags exist and how a no-effect or gap flag is
//! parsed and judged; the typed flags of [`crate::options`] carry the implemented ones, their
//! help and where their value lands. Adding a flag is a row here plus, when implemented, its
//! typed field and the line that applies it. It never reads the environment or logs anything,
//! and `docs/flags.md` is generated from it ([`markdown`]).

use std::fmt;
use std::time::Duration;

use autoscaler_model::parse_duration;
use clap::builder::ValueParser;
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};

/// How upstream parses a flag's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Go boolean (`--flag`, `--flag=false`).
    Bool,
    /// Go duration (`10s`, `1m30s`).
    Duration,
    /// Integer.
    Int,
    /// Floating-point number.
    Float,
    /// Free text.
    Text,
    /// Repeatable text (each occurrence adds a value).
    List,
    /// `Key=true,Other=false` (component-base feature gates).
    Gates,
    /// klog severity: `INFO`, `WARNING`, `ERROR`, `FATAL` or 0 to 3.
    Severity,
}

/// What this autoscaler does with a flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Implemented with upstream's meaning; the flag's typed definition carries its help, the
    /// one text of what it does (`--help` and `docs/flags.md` both show it).
    Implemented,
    /// Accepted and validated; it changes nothing here, for the reason given.
    NoEffect(&'static str),
    /// Accepted; asks for a feature this autoscaler does not have when given a value other than
    /// `ours` (the value at which ours behaves as upstream; empty: any value asks).
    Gap {
        /// What is missing.
        why: &'static str,
        /// The value that asks for nothing missing.
        ours: &'static str,
    },
}

/// Where upstream defines a flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The autoscaling flags (`pkg/config/flags/flags.go`).
    Autoscaling,
    /// Leader election (component-base's `BindLeaderElectionFlags`).
    LeaderElection,
    /// Logging (klog and component-base `logs`).
    Logging,
    /// Kubernetes feature gates (component-base).
    FeatureGates,
    /// Removed from current upstream releases; still found in manifests.
    Removed,
}

/// One upstream flag.
#[derive(Clone, Copy, Debug)]
pub struct UpstreamFlag {
    /// The name, without dashes.
    pub name: &'static str,
    /// Upstream's default, as upstream's help prints it.
    pub default: &'static str,
    /// How its value is parsed.
    pub kind: Kind,
    /// What ours does with it.
    pub status: Status,
    /// Where upstream defines it.
    pub source: Source,
}

const fn f(
    name: &'static str,
    default: &'static str,
    kind: Kind,
    status: Status,
    source: Source,
) -> UpstreamFlag {
    UpstreamFlag {
        name,
        default,
        kind,
        status,
        source,
    }
}

use Kind::{Bool, Duration as Dur, Float, Gates, Int, List, Severity, Text};
use Source::{Autoscaling as A, FeatureGates as FG, LeaderElection as LE, Logging as L, Removed};

const IMPL: Status = Status::Implemented;
const fn none(why: &'static str) -> Status {
    Status::NoEffect(why)
}
const fn gap(why: &'static str, ours: &'static str) -> Status {
    Status::Gap { why, ours }
}

const OTHER_PROVIDER: &str = "a setting of another cloud provider";
const GO_TUNING: &str = "tunes upstream's Go implementation; ours has no such knob";
const PROV_REQ: &str = "tunes ProvisioningRequest handling, which this autoscaler does not have \
                        (see --enable-provisioning-requests)";
const KLOG_FORMAT: &str = "klog output formatting; ours writes its own text or JSON lines";

/// Every upstream flag, in upstream's order within each source.
#[rustfmt::skip]
pub const FLAGS: &[UpstreamFlag] = &[
    // pkg/config/flags/flags.go
    f("cluster-name", "", Text, none("used by other cloud providers; Cluster API names the cluster in --node-group-auto-discovery (clusterName=)"), A),
    f("address", ":8085", Text, IMPL, A),
    f("kubernetes", "", Text, gap("an API server URL overriding the kubeconfig's is not supported; use --kubeconfig", ""), A),
    f("kubeconfig", "", Text, IMPL, A),
    f("kube-api-content-type", "application/vnd.kubernetes.protobuf", Text, none("requests are always JSON"), A),
    f("kube-client-burst", "10", Int, none("the client has no client-side rate limit"), A),
    f("kube-client-qps", "5", Float, none("the client has no client-side rate limit"), A),
    f("cloud-config", "", Text, IMPL, A),
    f("cloud-provider", "build-dependent (clusterapi here)", Text, IMPL, A),
    f("namespace", "kube-system", Text, IMPL, A),
    f("enforce-node-group-min-size", "false", Bool, IMPL, A),
    f("scale-down-unready-enabled", "true", Bool, IMPL, A),
    f("scale-down-delay-after-add", "10m0s", Dur, IMPL, A),
    f("scale-down-delay-type-local", "false", Bool, IMPL, A),
    f("scale-down-delay-after-delete", "0s", Dur, IMPL, A),
    f("scale-down-delay-after-failure", "3m0s", Dur, IMPL, A),
    f("scale-down-unneeded-time", "10m0s", Dur, IMPL, A),
    f("scale-down-unready-time", "20m0s", Dur, IMPL, A),
    f("scale-down-utilization-threshold", "0.5", Float, IMPL, A),
    f("scale-down-gpu-utilization-threshold", "0.5", Float, IMPL, A),
    f("scale-down-non-empty-candidates-count", "30", Int, IMPL, A),
    f("scale-down-candidates-pool-ratio", "0.1", Float, IMPL, A),
    f("scale-down-candidates-pool-min-count", "50", Int, IMPL, A),
    f("node-deletion-delay-timeout", "2m0s", Dur, IMPL, A),
    f("node-deletion-batcher-interval", "0s", Dur, gap("deletions are not batched over time; each loop deletes what it decided", "0s"), A),
    f("scan-interval", "10s", Dur, IMPL, A),
    f("max-nodes-total", "0", Int, IMPL, A),
    f("max-bulk-soft-taint-count", "10", Int, IMPL, A),
    f("max-bulk-soft-taint-time", "3s", Dur, none("soft taints are applied within the loop without a separate time bound; --max-bulk-soft-taint-count bounds them"), A),
    f("max-total-unready-percentage", "45", Float, IMPL, A),
    f("ok-total-unready-count", "3", Int, IMPL, A),
    f("scale-up-from-zero", "true", Bool, gap("scale-up always runs when no node is ready; turning it off is not supported", "true"), A),
    f("parallel-scale-up", "false", Bool, gap("the node groups one loop grows (several when pending pods need different kinds of nodes, and the similar groups of --balance-similar-node-groups) are resized one after another, not concurrently", "false"), A),
    f("max-node-provision-time", "15m0s", Dur, IMPL, A),
    f("max-node-startup-time", "15m0s", Dur, IMPL, A),
    f("max-pod-eviction-time", "2m0s", Dur, IMPL, A),
    f("estimator", "binpacking", Text, gap("binpacking is the only estimator", "binpacking"), A),
    f("expander", "least-waste", Text, IMPL, A),
    f("grpc-expander-cert", "", Text, gap("the grpc expander is not supported", ""), A),
    f("grpc-expander-url", "", Text, gap("the grpc expander is not supported", ""), A),
    f("ignore-daemonsets-utilization", "false", Bool, IMPL, A),
    f("ignore-mirror-pods-utilization", "false", Bool, IMPL, A),
    f("write-status-configmap", "true", Bool, IMPL, A),
    f("status-config-map-name", "cluster-autoscaler-status", Text, IMPL, A),
    f("max-inactivity", "10m0s", Dur, IMPL, A),
    f("max-binpacking-time", "5m0s", Dur, none("bin-packing is not cut short by time; it is bounded by --max-nodes-per-scaleup"), A),
    f("max-failing-time", "15m0s", Dur, IMPL, A),
    f("max-startup-time", "20m0s", Dur, IMPL, A),
    f("balance-similar-node-groups", "false", Bool, IMPL, A),
    f("unremovable-node-recheck-timeout", "5m0s", Dur, none("every node is re-evaluated each loop"), A),
    f("expendable-pods-priority-cutoff", "-10", Int, IMPL, A),
    f("regional", "false", Bool, none(OTHER_PROVIDER), A),
    f("new-pod-scale-up-delay", "0s", Dur, IMPL, A),
    f("scale-from-unschedulable", "false", Bool, gap("a node template's .spec.unschedulable is always honoured", "false"), A),
    f("profiling", "false", Bool, gap("there is no /debug/pprof endpoint", "false"), A),
    f("clusterapi-cloud-config-authoritative", "false", Bool, IMPL, A),
    f("cordon-node-before-terminating", "true", Bool, IMPL, A),
    f("daemonset-eviction-for-empty-nodes", "false", Bool, IMPL, A),
    f("daemonset-eviction-for-occupied-nodes", "true", Bool, IMPL, A),
    f("user-agent", "cluster-autoscaler", Text, gap("the client sends its own User-Agent", "cluster-autoscaler"), A),
    f("emit-per-nodegroup-metrics", "false", Bool, IMPL, A),
    f("debugging-snapshot-enabled", "false", Bool, gap("there is no debugging snapshot endpoint", "false"), A),
    f("node-info-cache-expire-time", "87600h0m0s", Dur, none("node templates are computed each loop; there is no node-info cache"), A),
    f("initial-node-group-backoff-duration", "5m0s", Dur, IMPL, A),
    f("max-node-group-backoff-duration", "30m0s", Dur, IMPL, A),
    f("node-group-backoff-reset-timeout", "3h0m0s", Dur, IMPL, A),
    f("max-scale-down-parallelism", "10", Int, IMPL, A),
    f("max-drain-parallelism", "1", Int, IMPL, A),
    f("record-duplicated-events", "false", Bool, none("events are aggregated as client-go's correlator does; duplicates within its window are folded either way"), A),
    f("max-nodes-per-scaleup", "1000", Int, IMPL, A),
    f("max-nodegroup-binpacking-duration", "10s", Dur, none("bin-packing is not cut short by time; it is bounded by --max-nodes-per-scaleup"), A),
    f("fastpath-binpacking-enabled", "false", Bool, none(GO_TUNING), A),
    f("skip-nodes-with-system-pods", "true", Bool, IMPL, A),
    f("skip-nodes-with-local-storage", "true", Bool, IMPL, A),
    f("skip-nodes-with-custom-controller-pods", "true", Bool, IMPL, A),
    f("min-replica-count", "0", Int, IMPL, A),
    f("blocking-system-pod-distruption-timeout", "1h0m0s", Dur, IMPL, A),
    f("node-delete-delay-after-taint", "5s", Dur, IMPL, A),
    f("scale-down-simulation-timeout", "30s", Dur, none("the scale-down simulation is not cut short by time; --scale-down-non-empty-candidates-count bounds it"), A),
    f("memory-difference-ratio", "0.015", Float, IMPL, A),
    f("max-free-difference-ratio", "0.05", Float, IMPL, A),
    f("max-allocatable-difference-ratio", "0.05", Float, IMPL, A),
    f("force-ds", "false", Bool, gap("scale-up does not block node groups too small for all DaemonSet pods", "false"), A),
    f("dynamic-node-delete-delay-after-taint-enabled", "false", Bool, gap("the delay after tainting is fixed (--node-delete-delay-after-taint)", "false"), A),
    f("enable-provisioning-requests", "false", Bool, gap("ProvisioningRequest objects are decided by `plan` only; `run` does not act on them yet", "false"), A),
    f("provisioning-request-initial-backoff-time", "1m0s", Dur, none(PROV_REQ), A),
    f("provisioning-request-max-backoff-time", "10m0s", Dur, none(PROV_REQ), A),
    f("provisioning-request-max-backoff-cache-size", "1000", Int, none(PROV_REQ), A),
    f("frequent-loops-enabled", "true", Bool, gap("a loop always runs early when new unschedulable pods appear", "true"), A),
    f("async-node-groups", "false", Bool, gap("node groups are never created or deleted", "false"), A),
    f("enable-proactive-scaleup", "false", Bool, gap("proactive scale-up (for pods not created yet) is not supported", "false"), A),
    f("salvo-scale-up", "false", Bool, none("scale-up always serves several options per loop, in rounds that see the nodes of the earlier ones, as upstream does with --salvo-scale-up=true"), A),
    f("salvo-scale-up-budget", "1m0s", Dur, none("scale-up's rounds have no time budget: they end when no pod or no group is left, within --max-nodes-per-scaleup"), A),
    f("scaleup-simulation-for-skipped-node-groups-enabled", "false", Bool, gap("node groups skipped for scale-up are not simulated", "false"), A),
    f("bulk-mig-instances-listing-enabled", "false", Bool, none(OTHER_PROVIDER), A),
    f("gce-concurrent-refreshes", "1", Int, none(OTHER_PROVIDER), A),
    f("gce-mig-instances-min-refresh-wait-time", "5s", Dur, none(OTHER_PROVIDER), A),
    f("aws-use-static-instance-list", "false", Bool, none(OTHER_PROVIDER), A),
    f("balancing-ignore-label", "[]", List, IMPL, A),
    f("balancing-label", "[]", List, IMPL, A),
    f("startup-taint-prefix", "[]", List, gap("startup taints are matched by exact key (--startup-taint), not by prefix", ""), A),
    f("pod-injection-limit", "5000", Int, none("no fake pods are injected"), A),
    f("check-capacity-batch-processing", "false", Bool, none(PROV_REQ), A),
    f("check-capacity-provisioning-request-max-batch-size", "10", Int, none(PROV_REQ), A),
    f("check-capacity-provisioning-request-batch-timebox", "10s", Dur, none(PROV_REQ), A),
    f("force-delete-unregistered-nodes", "false", Bool, gap("long-unregistered nodes are deleted only down to the node group's min size", "false"), A),
    f("force-delete-failed-nodes", "false", Bool, gap("failed nodes are deleted only down to the node group's min size", "false"), A),
    f("enable-csi-node-aware-scheduling", "false", Bool, none("the volume filters always honour CSINode attach limits, as upstream does only when this is true"), A),
    f("predicate-parallelism", "4", Int, none(GO_TUNING), A),
    f("check-capacity-processor-instance", "", Text, none(PROV_REQ), A),
    f("node-deletion-candidate-ttl", "0s", Dur, gap("unneeded-node markings are not kept across restarts", "0s"), A),
    f("capacity-buffer-controller-enabled", "false", Bool, gap("CapacityBuffer objects are decided by `plan` only; `run` does not act on them yet", "false"), A),
    f("capacity-buffer-pod-injection-enabled", "false", Bool, gap("CapacityBuffer objects are decided by `plan` only; `run` does not act on them yet", "false"), A),
    f("capacity-buffer-pod-dry-run-enabled", "true", Bool, none("tunes CapacityBuffer handling, which this autoscaler does not have"), A),
    f("capacity-buffer-ready-replicas-enabled", "false", Bool, none("tunes CapacityBuffer handling, which this autoscaler does not have"), A),
    f("node-removal-latency-tracking-enabled", "false", Bool, gap("node removal latency is not tracked", "false"), A),
    f("max-node-skip-eval-time-tracker-enabled", "false", Bool, gap("the time a node is skipped in scale-down is not tracked", "false"), A),
    f("capacity-quotas-enabled", "false", Bool, gap("CapacityQuota objects are not handled", "false"), A),
    f("pending-pods-batching-timeout", "4m0s", Dur, none("the pending-pod simulation is not cut short by time"), A),
    f("enable-graceful-degradation", "false", Bool, gap("scheduling simulations are never stopped early", "false"), A),
    f("enable-inter-pod-affinity-hostname-fast-path", "false", Bool, none(GO_TUNING), A),
    f("ignore-taint", "[]", List, IMPL, A),
    f("enable-dynamic-resource-allocation", "true", Bool, gap("Dynamic Resource Allocation objects (ResourceClaims) are not read", "false"), A),
    f("cluster-snapshot-parallelism", "16", Int, none(GO_TUNING), A),
    f("scale-down-enabled", "true", Bool, IMPL, A),
    f("nodes", "[]", List, none("Cluster API finds node groups by their annotations and --node-group-auto-discovery, as upstream's Cluster API provider does"), A),
    f("node-group-auto-discovery", "[]", List, IMPL, A),
    f("scheduler-config-file", "", Text, gap("a custom kube-scheduler configuration is not supported; the default plugins' filters are used", ""), A),
    f("cores-total", "0:320000", Text, IMPL, A),
    f("memory-total", "0:6400000", Text, IMPL, A),
    f("max-graceful-termination-sec", "600", Int, IMPL, A),
    f("gpu-total", "[]", List, IMPL, A),
    f("startup-taint", "[]", List, IMPL, A),
    f("status-taint", "[]", List, IMPL, A),
    f("bypassed-scheduler-names", "[]", List, IMPL, A),
    f("allowed-scheduler-names", "[]", List, IMPL, A),
    f("drain-priority-config", "", Text, gap("pods are evicted all at once, not in priority groups", ""), A),
    f("scheduler-verbosity", "0", Int, none("there is no embedded kube-scheduler to log"), A),
    // component-base: BindLeaderElectionFlags
    f("leader-elect", "true", Bool, IMPL, LE),
    f("leader-elect-lease-duration", "15s", Dur, IMPL, LE),
    f("leader-elect-renew-deadline", "10s", Dur, IMPL, LE),
    f("leader-elect-retry-period", "2s", Dur, IMPL, LE),
    f("leader-elect-resource-lock", "leases", Text, none("a Lease is always used"), LE),
    f("leader-elect-resource-name", "cluster-autoscaler", Text, IMPL, LE),
    f("leader-elect-resource-namespace", "", Text, none("the Lease is in --namespace"), LE),
    // klog and component-base logs
    f("v", "0", Int, IMPL, L),
    f("vmodule", "", Text, gap("per-file verbosity is not supported; RUST_LOG sets per-module levels", ""), L),
    f("logging-format", "text", Text, IMPL, L),
    f("log-flush-frequency", "5s", Dur, none("log lines are written unbuffered"), L),
    f("log-json-info-buffer-size", "0", Text, none("log lines are written unbuffered"), L),
    f("log-json-split-stream", "false", Bool, gap("all log lines go to standard error", "false"), L),
    f("log-text-info-buffer-size", "0", Text, none("log lines are written unbuffered"), L),
    f("log-text-split-stream", "false", Bool, gap("all log lines go to standard error", "false"), L),
    f("logtostderr", "true", Bool, none("logs always go to standard error"), L),
    f("alsologtostderr", "false", Bool, none("logs always go to standard error"), L),
    f("stderrthreshold", "2", Severity, none("every log line goes to standard error"), L),
    f("log-dir", "", Text, gap("logs go to standard error only, never to files", ""), L),
    f("log-file", "", Text, gap("logs go to standard error only, never to files", ""), L),
    f("log-file-max-size", "1800", Int, none("logs are never written to files"), L),
    f("add-dir-header", "false", Bool, none(KLOG_FORMAT), L),
    f("skip-headers", "false", Bool, none(KLOG_FORMAT), L),
    f("skip-log-headers", "false", Bool, none(KLOG_FORMAT), L),
    f("one-output", "false", Bool, none(KLOG_FORMAT), L),
    f("log-backtrace-at", ":0", Text, none(KLOG_FORMAT), L),
    f("legacy-stderr-threshold-behavior", "true", Bool, none(KLOG_FORMAT), L),
    f("feature-gates", "", Gates, none("the Kubernetes feature gates of the logging library; nothing here depends on them"), FG),
    // Removed upstream, still in manifests.
    f("max-empty-bulk-delete", "10", Int, IMPL, Removed),
];

/// The flags defined from the registry rather than by a typed field.
fn registry_defined() -> impl Iterator<Item = &'static UpstreamFlag> {
    FLAGS
        .iter()
        .filter(|f| !matches!(f.status, Status::Implemented))
}

// Value checks, one per kind: a bad value stops the binary with exit 2 naming the flag.

fn check_bool(s: &str) -> Result<String, String> {
    crate::options::go_bool(s).map(|_| s.to_string())
}

/// A Go duration.
pub fn check_duration(s: &str) -> Result<String, String> {
    parse_duration(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// An integer.
pub fn check_int(s: &str) -> Result<String, String> {
    s.trim()
        .parse::<i64>()
        .map(|_| s.to_string())
        .map_err(|_| format!("{s:?} is not an integer"))
}

/// A finite number.
pub fn check_float(s: &str) -> Result<String, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(s.to_string()),
        _ => Err(format!("{s:?} is not a number")),
    }
}

/// component-base's `--feature-gates`: comma-separated `Name=bool`.
pub fn check_gates(s: &str) -> Result<String, String> {
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("{pair:?} is not Name=true|false"))?;
        if name.trim().is_empty() {
            return Err(format!("{pair:?} has no feature name"));
        }
        crate::options::go_bool(value.trim()).map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(s.to_string())
}

/// klog's `--stderrthreshold`: a severity name or number.
pub fn check_severity(s: &str) -> Result<String, String> {
    let ok = matches!(
        s.trim().to_ascii_uppercase().as_str(),
        "INFO" | "WARNING" | "ERROR" | "FATAL" | "0" | "1" | "2" | "3"
    );
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} is not a severity (INFO, WARNING, ERROR, FATAL or 0 to 3)"
        ))
    }
}

fn text(s: &str) -> Result<String, String> {
    Ok(s.to_string())
}

fn parser(kind: Kind) -> ValueParser {
    match kind {
        Kind::Bool => ValueParser::new(check_bool),
        Kind::Duration => ValueParser::new(check_duration),
        Kind::Int => ValueParser::new(check_int),
        Kind::Float => ValueParser::new(check_float),
        Kind::Gates => ValueParser::new(check_gates),
        Kind::Severity => ValueParser::new(check_severity),
        Kind::Text | Kind::List => ValueParser::new(text),
    }
}

fn value_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Bool => "BOOL",
        Kind::Duration => "DURATION",
        Kind::Int => "INT",
        Kind::Float => "FLOAT",
        Kind::Gates => "NAME=BOOL,...",
        Kind::Severity => "SEVERITY",
        Kind::Text | Kind::List => "VALUE",
    }
}

const NO_EFFECT_HEADING: &str = "Accepted without effect (upstream compatibility)";
const GAP_HEADING: &str = "Accepted, not supported (said at start and in the status ConfigMap)";

/// The clap argument of a registry-defined flag, with upstream's syntax.
fn arg(flag: &'static UpstreamFlag) -> Arg {
    let (heading, why) = match flag.status {
        Status::Gap { why, .. } => (GAP_HEADING, why),
        Status::NoEffect(why) => (NO_EFFECT_HEADING, why),
        // Never: an implemented flag has a typed definition (see `registry_defined`).
        Status::Implemented => (NO_EFFECT_HEADING, ""),
    };
    let mut a = Arg::new(flag.name)
        .long(flag.name)
        .value_name(value_name(flag.kind))
        .value_parser(parser(flag.kind))
        .help(format!("{why} [upstream default: {}]", flag.default))
        .help_heading(heading)
        .hide_short_help(true);
    a = match flag.kind {
        Kind::Bool => a
            .num_args(0..=1)
            .require_equals(true)
            .default_missing_value("true")
            .action(ArgAction::Set),
        Kind::List => a.action(ArgAction::Append),
        Kind::Int | Kind::Float => a.allow_negative_numbers(true).action(ArgAction::Set),
        _ => a.action(ArgAction::Set),
    };
    a
}

/// The upstream flags that are not implemented and not typed elsewhere, parsed from the
/// registry: the values given on the command line, by flag, already validated.
#[derive(Clone, Debug, Default)]
pub struct CompatArgs {
    /// Each flag given, with its values (several for a repeatable flag), in registry order.
    pub given: Vec<(&'static UpstreamFlag, Vec<String>)>,
}

impl clap::FromArgMatches for CompatArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut out = CompatArgs::default();
        out.update_from_arg_matches(m)?;
        Ok(out)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        for flag in registry_defined() {
            if m.value_source(flag.name) != Some(ValueSource::CommandLine) {
                continue;
            }
            let values: Vec<String> = m
                .try_get_many::<String>(flag.name)
                .ok()
                .flatten()
                .map(|v| v.cloned().collect())
                .unwrap_or_default();
            self.given.retain(|(f, _)| f.name != flag.name);
            self.given.push((flag, values));
        }
        Ok(())
    }
}

impl clap::Args for CompatArgs {
    fn augment_args(cmd: Command) -> Command {
        registry_defined().fold(cmd, |cmd, flag| cmd.arg(arg(flag)))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// A gap flag given with a value that asks for a feature this autoscaler does not have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported {
    /// The flag, without dashes.
    pub flag: &'static str,
    /// The value given (the last one of a repeatable flag).
    pub value: String,
    /// What is missing.
    pub why: &'static str,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--{}={}: {}", self.flag, self.value, self.why)
    }
}

/// Whether `given` (a validated value of a flag of `kind`) differs from `ours`.
fn differs(kind: Kind, given: &str, ours: &str) -> bool {
    if ours.is_empty() {
        return !given.trim().is_empty();
    }
    match kind {
        Kind::Bool => crate::options::go_bool(given).ok() != crate::options::go_bool(ours).ok(),
        Kind::Duration => {
            let d = |s: &str| parse_duration(s).unwrap_or(Duration::MAX);
            d(given) != d(ours)
        }
        Kind::Int | Kind::Float => given.trim().parse::<f64>().ok() != ours.parse::<f64>().ok(),
        _ => given.trim() != ours,
    }
}

impl CompatArgs {
    /// The no-effect flags given, by name.
    pub fn no_effect_given(&self) -> Vec<&'static str> {
        self.given
            .iter()
            .filter(|(f, _)| matches!(f.status, Status::NoEffect(_)))
            .map(|(f, _)| f.name)
            .collect()
    }

    /// The gap flags given with a value that asks for what is missing.
    pub fn unsupported(&self) -> Vec<Unsupported> {
        let mut out = Vec::new();
        for (flag, values) in &self.given {
            let Status::Gap { why, ours } = flag.status else {
                continue;
            };
            if let Some(v) = values.iter().rev().find(|v| differs(flag.kind, v, ours)) {
                out.push(Unsupported {
                    flag: flag.name,
                    value: v.clone(),
                    why,
                });
            }
        }
        out
    }
}

/// The status column of `docs/flags.md`.
fn status_word(s: Status) -> &'static str {
    match s {
        Status::Implemented => "implemented",
        Status::NoEffect(_) => "accepted, no effect",
        Status::Gap { .. } => "accepted, not supported",
    }
}

/// One line of a flag's help: its first paragraph, on one line, without clap's default note.
fn first_paragraph(help: &str) -> String {
    let para = help.split("\n\n").next().unwrap_or_default();
    para.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// The registry's entry for `name` (without dashes).
fn lookup(name: &str) -> Option<&'static UpstreamFlag> {
    FLAGS.iter().find(|f| f.name == name)
}

/// `cmd` with each implemented flag's default taken from the registry into its help
/// (`[default: 10m0s]`, upstream's spelling), so a default is written once, in [`FLAGS`]. A
/// help that states a default of its own (ours differs from upstream's, e.g. `--v`) keeps it;
/// an argument with a clap default (a subcommand's own flag of the same name) shows clap's.
pub fn with_table_defaults(cmd: Command) -> Command {
    cmd.mut_args(|a| {
        let Some(flag) = a.get_long().and_then(lookup) else {
            return a;
        };
        let shown = !matches!(flag.status, Status::Implemented)
            || flag.default.is_empty()
            || flag.default == "[]"
            || !a.get_default_values().is_empty();
        let help = a.get_help().map(ToString::to_string).unwrap_or_default();
        if shown || help.is_empty() || help.contains("[default:") {
            return a;
        }
        // clap drops a one-paragraph help's final period; the default ends the sentence.
        let text = help.trim_end().trim_end_matches('.');
        a.help(format!("{text} [default: {}]", flag.default))
    })
}

/// The `run` command's flags, with their help as `--help` shows it.
fn run_command() -> Command {
    use clap::Args;
    with_table_defaults(crate::options::RunArgs::augment_args(Command::new("run")))
}

/// `docs/flags.md`: every upstream flag, its default, its status and what ours does, from the
/// registry and (for implemented flags) the help of `run`'s flags.
pub fn markdown() -> String {
    let cmd = run_command();
    let fields = crate::config::field_flags();
    let mut out = String::from(
        "# Flags\n\n\
         <!-- Generated from crates/options/src/flags.rs; regenerate with\n     \
         UPDATE_FLAGS_DOC=1 cargo test -p autoscaler-options flags_doc_is_current -->\n\n\
         Every flag of upstream cluster-autoscaler is accepted with upstream's name, syntax \
         and default, also as `-flag` and with `_` for `-`. Each one is **implemented**, \
         **accepted, no effect** (it changes nothing here, for the reason given), or \
         **accepted, not supported** (a feature this autoscaler does not have: given a value \
         that asks for it, it is accepted and said at start and under `unsupportedSettings` \
         in the status ConfigMap). A bad value stops the binary with exit code 2, naming the \
         flag. The last column says where else a flag is given: the field of the \
         `ClusterAutoscaler` resource of `--config` that stands for it (flags given on the \
         command line win over it), and whether a scenario's `options:` takes it \
         (docs/scenarios.md).\n\n\
         Flags of this autoscaler only: `--config FILE` (a `ClusterAutoscaler` resource), \
         `--enable-explain-endpoint` (serve the last loop's plan at `/explain` on `--address`, \
         the JSON document `plan --output json` prints) and `--emit-unremovable-node-events` \
         (a `NoScaleDown` event on each node not removed, with why; again when the reason \
         changes, else at most every 5 minutes per node); both off by default. See \
         docs/troubleshooting.md. Consolidation, `--consolidation=off|delete|replace` and \
         `--consolidate-after` (ours, off by default): see docs/consolidation.md.\n",
    );
    let sections = [
        (Source::Autoscaling, "Autoscaling"),
        (Source::LeaderElection, "Leader election"),
        (Source::Logging, "Logging (klog and component-base)"),
        (Source::FeatureGates, "Feature gates"),
        (Source::Removed, "Removed upstream, still accepted"),
    ];
    for (source, title) in sections {
        out.push_str(&format!(
            "\n## {title}\n\n| Flag | Upstream default | Status | What this autoscaler does | \
             Also given as |\n|---|---|---|---|---|\n"
        ));
        for flag in FLAGS.iter().filter(|f| f.source == source) {
            let what = match flag.status {
                Status::Implemented => cmd
                    .get_arguments()
                    .find(|a| a.get_long() == Some(flag.name))
                    .and_then(|a| a.get_help())
                    .map(|h| first_paragraph(&h.to_string()))
                    .unwrap_or_default(),
                Status::NoEffect(why) => format!("No effect: {why}."),
                Status::Gap { why, .. } => format!("Not supported: {why}."),
            };
            let default = if flag.default.is_empty() {
                "\"\"".to_string()
            } else {
                format!("`{}`", flag.default)
            };
            let mut also: Vec<String> = (fields.iter())
                .filter(|(f, _)| *f == flag.name)
                .map(|(_, field)| format!("`--config` `{field}`"))
                .collect();
            if crate::options::is_setting(flag.name) {
                also.push("scenario `options:`".to_string());
            }
            out.push_str(&format!(
                "| `--{}` | {} | {} | {} | {} |\n",
                flag.name,
                cell(&default),
                status_word(flag.status),
                cell(&what),
                also.join(", ")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    /// Flags of this autoscaler that upstream does not have.
    const OURS: &[&str] = &[
        "config",
        "enable-explain-endpoint",
        "emit-unremovable-node-events",
        "consolidation",
        "consolidate-after",
    ];

    #[derive(Debug, Parser)]
    struct TestCli {
        #[command(flatten)]
        run: crate::options::RunArgs,
    }

    fn accepted() -> Vec<String> {
        let cmd = TestCli::command();
        cmd.get_arguments()
            .filter_map(|a| a.get_long().map(str::to_string))
            .filter(|l| l != "help")
            .collect()
    }

    #[test]
    fn every_accepted_flag_is_in_the_registry_and_every_upstream_flag_is_accepted() {
        TestCli::command().debug_assert();
        let accepted = accepted();
        for long in &accepted {
            assert!(
                FLAGS.iter().any(|f| f.name == long) || OURS.contains(&long.as_str()),
                "--{long} is accepted but not in the registry"
            );
        }
        for flag in FLAGS {
            assert!(
                accepted.iter().any(|l| l == flag.name),
                "upstream's --{} is not accepted",
                flag.name
            );
        }
    }

    /// Each flag given its upstream default, in upstream's `--name=value` syntax, parses and
    /// validates: the typed flags accept upstream's spelling of their defaults (`10m0s`,
    /// `0:320000`, `-10`), and a default never asks for a missing feature.
    #[test]
    fn every_flag_accepts_its_upstream_default() {
        let no_env = |_: &str| None;
        for flag in FLAGS {
            let skip =
                flag.default.is_empty() || flag.kind == Kind::List || flag.name == "cloud-provider";
            if skip {
                continue;
            }
            let arg = format!("--{}={}", flag.name, flag.default);
            let parsed = TestCli::try_parse_from(["ca", arg.as_str()])
                .unwrap_or_else(|e| panic!("{arg}: {e}"));
            let opts = crate::options::RunOptions::build(&parsed.run, None, &no_env)
                .unwrap_or_else(|e| panic!("{arg}: {e}"));
            let asks_for_nothing =
                opts.unsupported.is_empty() || flag.name == "enable-dynamic-resource-allocation";
            assert!(asks_for_nothing, "{arg}: {:?}", opts.unsupported);
        }
    }

    /// The core's and the controller's `Default`s are the registry's defaults: each
    /// implemented flag given its registry default builds the same options as no flag at all.
    #[test]
    fn the_defaults_of_the_core_are_the_registrys() {
        // Ours, not upstream's: `--v` (1, klog's usual production level) and the provider
        // (upstream's depends on the build).
        const OURS_DIFFER: &[&str] = &["v", "cloud-provider"];
        let env = |k: &str| (k == "POD_NAME").then(|| "ca-0".to_string());
        let build = |arg: Option<&str>| {
            let parsed = TestCli::try_parse_from(["ca"].into_iter().chain(arg))
                .unwrap_or_else(|e| panic!("{arg:?}: {e}"));
            let o = crate::options::RunOptions::build(&parsed.run, None, &env)
                .unwrap_or_else(|e| panic!("{arg:?}: {e}"));
            format!(
                "{:?}",
                (o.controller, o.management, o.verbosity, o.logging_format)
            )
        };
        let none = build(None);
        let mut checked = 0;
        for flag in FLAGS {
            let skip = !matches!(flag.status, Status::Implemented)
                || flag.default.is_empty()
                || flag.default == "[]"
                || OURS_DIFFER.contains(&flag.name);
            if skip {
                continue;
            }
            let arg = format!("--{}={}", flag.name, flag.default);
            assert_eq!(
                build(Some(&arg)),
                none,
                "{arg}: the registry's default is not the core's"
            );
            checked += 1;
        }
        assert!(checked > 60, "only {checked} defaults checked");
    }

    /// A typed flag reads its value as its registry row says: a Go boolean (`--flag`,
    /// `--flag=false`), a Go duration, or a repeatable list.
    #[test]
    fn typed_flags_parse_as_their_registry_kind() {
        let cmd = TestCli::command();
        for a in cmd.get_arguments() {
            let Some(flag) = a.get_long().and_then(lookup) else {
                continue;
            };
            let names: Vec<String> = (a.get_value_names().unwrap_or_default().iter())
                .map(ToString::to_string)
                .collect();
            let named = |n: &str| names.iter().any(|v| v == n);
            let bool_syntax = named("BOOL") && a.is_require_equals_set();
            let list = matches!(a.get_action(), ArgAction::Append);
            assert_eq!(flag.kind == Kind::Bool, bool_syntax, "--{}", flag.name);
            assert_eq!(
                flag.kind == Kind::Duration,
                named("DURATION"),
                "--{}",
                flag.name
            );
            assert_eq!(flag.kind == Kind::List, list, "--{}", flag.name);
        }
    }

    #[test]
    fn implemented_flags_without_a_text_have_help() {
        let cmd = TestCli::command();
        for flag in FLAGS {
            if flag.status == IMPL {
                let help = cmd
                    .get_arguments()
                    .find(|a| a.get_long() == Some(flag.name))
                    .and_then(|a| a.get_help());
                assert!(help.is_some(), "--{} has no help", flag.name);
            }
        }
    }

    /// docs/flags.md is generated from the registry; it fails when stale. Regenerate with
    /// `UPDATE_FLAGS_DOC=1 cargo test -p autoscaler-options flags_doc_is_current`.
    #[test]
    fn flags_doc_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/flags.md");
        let generated = markdown();
        if std::env::var_os("UPDATE_FLAGS_DOC").is_some() {
            std::fs::write(&path, &generated).expect("write docs/flags.md");
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == generated,
            "docs/flags.md is stale: run UPDATE_FLAGS_DOC=1 cargo test -p autoscaler-options \
             flags_doc_is_current"
        );
        assert!(!generated.to_lowercase().contains("unknown"));
    }

    /// A default is written once, in the registry: the help of an implemented flag shows the
    /// registry's, and a help written in the code states a default only where ours differs
    /// from upstream's (`--v`, `--cloud-provider`).
    #[test]
    fn help_shows_the_registrys_default_and_repeats_none() {
        let raw = TestCli::command();
        let shown = with_table_defaults(TestCli::command());
        for flag in FLAGS
            .iter()
            .filter(|f| matches!(f.status, Status::Implemented))
        {
            let help = |cmd: &Command| {
                cmd.get_arguments()
                    .find(|a| a.get_long() == Some(flag.name))
                    .and_then(|a| a.get_help())
                    .map(|h| h.to_string())
                    .unwrap_or_default()
            };
            let (written, shown) = (help(&raw), help(&shown));
            if let Some(own) = written.split("[default: ").nth(1) {
                let own = own.split([']', ',']).next().unwrap_or_default();
                assert!(
                    !same_value(flag.kind, own, flag.default),
                    "--{}: the help repeats the registry's default {own:?}; drop it from the help",
                    flag.name
                );
            } else if !flag.default.is_empty() && flag.default != "[]" {
                let expected = format!("[default: {}]", flag.default);
                assert!(shown.ends_with(&expected), "--{}: {shown:?}", flag.name);
            }
        }
    }

    /// Whether two texts of a flag of `kind` are the same value (`10m` and `10m0s`).
    fn same_value(kind: Kind, a: &str, b: &str) -> bool {
        a == b || (kind == Kind::Duration && !differs(kind, a, b))
    }

    #[test]
    fn names_are_unique_and_dashed() {
        let mut names: Vec<&str> = FLAGS.iter().map(|f| f.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "a flag is listed twice");
        for n in names {
            assert!(
                n.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "{n}"
            );
        }
    }

    #[test]
    fn defaults_parse_with_their_kind() {
        for flag in FLAGS {
            let ok = match flag.kind {
                Kind::Bool => check_bool(flag.default).is_ok(),
                Kind::Duration => check_duration(flag.default).is_ok(),
                Kind::Int => check_int(flag.default).is_ok(),
                Kind::Float => check_float(flag.default).is_ok(),
                Kind::Severity => check_severity(flag.default).is_ok(),
                _ => true,
            };
            assert!(ok, "--{} default {:?}", flag.name, flag.default);
            if let Status::Gap { ours, .. } = flag.status
                && !ours.is_empty()
            {
                assert!(
                    !differs(flag.kind, ours, ours),
                    "--{}: {ours:?} differs from itself",
                    flag.name
                );
            }
        }
    }

    #[test]
    fn a_gap_is_asked_for_only_by_a_value_other_than_ours() {
        let asks = |kind, given, ours| differs(kind, given, ours);
        assert!(asks(Kind::Bool, "true", "false"));
        assert!(!asks(Kind::Bool, "F", "false"));
        assert!(!asks(Kind::Duration, "0", "0s"));
        assert!(asks(Kind::Duration, "1s", "0s"));
        assert!(!asks(Kind::Text, "binpacking", "binpacking"));
        assert!(asks(Kind::Text, "/x", ""));
        assert!(!asks(Kind::Text, "", ""));
        assert!(!asks(Kind::Int, "10", "10"));
    }

    #[test]
    fn feature_gates_and_severities_use_upstream_syntax() {
        assert!(check_gates("A=true,B=false").is_ok());
        assert!(check_gates("").is_ok());
        assert!(check_gates("A").is_err());
        assert!(check_gates("A=maybe").is_err());
        assert!(check_gates("=true").is_err());
        for ok in ["info", "WARNING", "error", "FATAL", "0", "3"] {
            assert!(check_severity(ok).is_ok(), "{ok}");
        }
        assert!(check_severity("debug").is_err());
    }
}

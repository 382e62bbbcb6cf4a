//! The flag table: every flag of upstream's binary (the autoscaling flags, leader election,
//! klog and component-base logging, feature gates, and a few removed flags that manifests still
//! carry) and ours, each declared once in [`FLAGS`] with its name, kind, default (written
//! nowhere else: the help shows it from here, [`with_table_defaults`], and a test checks the
//! core's `Default`s equal it) and what this autoscaler does with it: implemented, accepted
//! without effect (and why), or accepted but a feature we do not have (a gap, said at start and
//! in the status ConfigMap when asked for). An implemented row also carries its help, its place
//! in `--help`, whether it is a setting (a scenario's `options:` key, what a `--config` field may
//! stand for) and where its value lands; clap's arguments, the settings and `docs/flags.md`
//! ([`markdown`]) are all made from the rows. It never reads the environment or logs anything.
//!
//! Adding a flag is one row here plus its use. Not implemented: `f(name, default, Kind,
//! none(why) | gap(why, ours), Source)`. Implemented: `imp(name, default, Kind, Source,
//! setting|run(place in --help, Heading, "VALUE", "help", Lands::Type(|d, v| d.c.field = v)))`
//! (`setting`: a scenario's `options:` takes it too; `.file("spec.x")` after it: a `--config`
//! field stands for it). Then regenerate docs/flags.md (see `flags_doc_is_current`).

use std::fmt;
use std::time::Duration;

use autoscaler_core::{ExpanderChain, InvalidOption};
use autoscaler_model::{InvalidTaintKey, Range, parse_duration, parse_gpu_limit};
use clap::builder::ValueParser;
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};

use crate::landing::{Draft, Heading, Lands, Refused, Use};
use crate::options::{CLUSTERAPI_PROVIDER, OPENSHIFT_PROVIDER, names_of, parse_address};

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
    /// Implemented with upstream's meaning (ours: as its help says); the row carries its help,
    /// the one text of what it does (`--help` and `docs/flags.md` both show it), and where its
    /// value lands.
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
    /// Ours, not upstream's (its default is ours).
    Ours,
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
    /// An implemented flag's help, place and setter.
    how: Option<Use>,
}

impl UpstreamFlag {
    /// How an implemented flag is shown and where its value lands.
    pub(crate) fn how(&self) -> Option<&Use> {
        self.how.as_ref()
    }

    /// The implemented row, also given by `field` of the `ClusterAutoscaler` resource of
    /// `--config` (the path of the field, `spec.scaleDown.unneededTime`; a list's field without
    /// an index).
    const fn file(mut self, field: &'static str) -> UpstreamFlag {
        if let Some(u) = &mut self.how {
            u.file = Some(field);
        }
        self
    }

    /// The field of the `ClusterAutoscaler` resource of `--config` that gives this flag.
    pub(crate) fn file_field(&self) -> Option<&'static str> {
        self.how.as_ref().and_then(|u| u.file)
    }
}

/// The flag a field of the `ClusterAutoscaler` resource stands for (`spec.resourceLimits.gpus[1]`:
/// `gpu-total`).
pub(crate) fn flag_of_field(field: &str) -> Option<&'static str> {
    let key = field.split('[').next().unwrap_or_default();
    (FLAGS.iter())
        .find(|f| f.file_field() == Some(key))
        .map(|f| f.name)
}

/// A row of a flag that is not implemented.
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
        how: None,
    }
}

/// A row of an implemented flag.
pub(crate) const fn imp(
    name: &'static str,
    default: &'static str,
    kind: Kind,
    source: Source,
    how: Use,
) -> UpstreamFlag {
    UpstreamFlag {
        name,
        default,
        kind,
        status: Status::Implemented,
        source,
        how: Some(how),
    }
}

/// An implemented flag of the live process (not a setting).
pub(crate) const fn run(
    position: u16,
    heading: Heading,
    value_name: &'static str,
    help: &'static str,
    lands: Lands,
) -> Use {
    Use {
        position,
        heading,
        value_name,
        help,
        setting: false,
        lands,
        file: None,
    }
}

/// An implemented flag that is also a setting: a scenario's `options:` takes it, and a
/// `--config` field may stand for it.
pub(crate) const fn setting(
    position: u16,
    heading: Heading,
    value_name: &'static str,
    help: &'static str,
    lands: Lands,
) -> Use {
    Use {
        setting: true,
        ..run(position, heading, value_name, help, lands)
    }
}

use Heading::{CapacityOnRequest, ClusterState, General, ScaleDown, ScaleUp};
use Kind::{Bool, Duration as Dur, Float, Gates, Int, List, Severity, Text};
use Source::{
    Autoscaling as A, FeatureGates as FG, LeaderElection as LE, Logging as L, Ours, Removed,
};
const fn none(why: &'static str) -> Status {
    Status::NoEffect(why)
}
const fn gap(why: &'static str, ours: &'static str) -> Status {
    Status::Gap { why, ours }
}

const OTHER_PROVIDER: &str = "a setting of another cloud provider";
const GO_TUNING: &str = "tunes upstream's Go implementation; ours has no such knob";
const PROV_REQ: &str = "tunes upstream's batch processing of check-capacity ProvisioningRequests; \
                        ours takes one request per loop (see --enable-provisioning-requests)";
const KLOG_FORMAT: &str = "klog output formatting; ours writes its own text or JSON lines";

// The setters that do more than store a value.

/// `--cloud-provider`: the providers this build has.
fn cloud_provider(d: &mut Draft, v: &str) -> Result<(), String> {
    if v != CLUSTERAPI_PROVIDER && v != OPENSHIFT_PROVIDER {
        return Err("only clusterapi and openshift are supported".to_string());
    }
    d.provider = Some(v.to_string());
    Ok(())
}

/// One flag for both halves: expendable pods cause no scale-up and block no scale-down.
fn expendable_pods_priority_cutoff(d: &mut Draft, v: i32) {
    d.c.autoscaler
        .scale_up
        .pending
        .set_expendable_pods_priority_cutoff(v);
    d.c.autoscaler
        .scale_down
        .drain_mut()
        .set_expendable_pods_priority_cutoff(v);
}

/// `--startup-taint` and its deprecated name `--ignore-taint`: the keys of both, as one layer
/// gives them (a layer giving either replaces both).
fn startup_taints(d: &mut Draft, _: &[String]) -> Result<(), Refused> {
    let mut keys = d.layer.texts("ignore-taint");
    keys.extend(d.layer.texts("startup-taint"));
    d.c.autoscaler
        .scale_up
        .template
        .taints_mut()
        .set_startup(keys)
        .map_err(refused_key)
}

/// A taint key refused by the taint configuration: the key, and why.
fn refused_key(e: InvalidTaintKey) -> Refused {
    (e.key().to_string(), e.reason().to_string())
}

/// `--gpu-total`, each `type:min:max`.
/// `--drain-priority-config`: empty stands for not given, as upstream.
fn drain_priority_config(d: &mut Draft, text: &str) -> Result<(), String> {
    let config = if text.is_empty() {
        None
    } else {
        Some(
            text.parse()
                .map_err(|e: autoscaler_core::DrainPriorityError| e.to_string())?,
        )
    };
    d.c.autoscaler.scale_down.set_drain_priority(config);
    Ok(())
}

fn gpu_total(d: &mut Draft, v: &[String]) -> Result<(), Refused> {
    let mut gpus = Vec::with_capacity(v.len());
    for t in v {
        gpus.push(parse_gpu_limit(t).map_err(|why| (t.clone(), why.to_string()))?);
    }
    d.c.autoscaler.scale_up.limits.gpus = gpus;
    Ok(())
}

/// Upstream: a non-positive value turns the limit off.
fn non_empty_candidates_count(d: &mut Draft, v: i64) {
    d.c.autoscaler.scale_down.set_non_empty_candidates_count(
        usize::try_from(v)
            .ok()
            .filter(|&n| n > 0)
            .unwrap_or(usize::MAX),
    );
}

/// Upstream: --max-empty-bulk-delete alone stands for --max-scale-down-parallelism (its
/// actuator caps empty and drained deletions together); with both, the latter rules.
fn max_empty_bulk_delete(d: &mut Draft, v: usize) -> Result<(), InvalidOption> {
    if !d.layer.gives("max-scale-down-parallelism") {
        d.c.autoscaler
            .scale_down
            .set_max_scale_down_parallelism(v)?;
    }
    Ok(())
}

/// Every flag: upstream's, in upstream's order within each source, then ours.
#[rustfmt::skip]
pub const FLAGS: &[UpstreamFlag] = &[
    // pkg/config/flags/flags.go
    f("cluster-name", "", Text, none("used by other cloud providers; Cluster API names the cluster in --node-group-auto-discovery (clusterName=)"), A),
    imp("address", ":8085", Text, A, run(80, General, "HOST:PORT", "Address of `/metrics` and `/health-check`", Lands::Text(|d, v| { d.c.address = parse_address(v)?; Ok(()) }))),
    f("kubernetes", "", Text, gap("an API server URL overriding the kubeconfig's is not supported; use --kubeconfig", ""), A),
    imp("kubeconfig", "", Text, A, run(20, General, "FILE", "Path to a kubeconfig file (default: in-cluster config, else `KUBECONFIG` / ~/.kube/config)", Lands::Path(|d, p| d.kubeconfig = Some(p)))),
    f("kube-api-content-type", "application/vnd.kubernetes.protobuf", Text, none("requests are always JSON"), A),
    f("kube-client-burst", "10", Int, none("the client has no client-side rate limit"), A),
    f("kube-client-qps", "5", Float, none("the client has no client-side rate limit"), A),
    imp("cloud-config", "", Text, A, run(30, General, "FILE", "Cluster API: kubeconfig of the management cluster, where the Machines, MachineSets, MachineDeployments and MachinePools live (nodes and pods are read through `--kubeconfig`) [default: the cluster of `--kubeconfig`, see `--clusterapi-cloud-config-authoritative`]", Lands::Text(|d, v| { d.cloud_config = Some(v.to_string()); Ok(()) }))),
    imp("cloud-provider", "build-dependent (clusterapi here)", Text, A, run(60, General, "NAME", "Cloud provider: `clusterapi`, or `openshift` (OpenShift's Machine API MachineSets of openshift-machine-api plus Cluster API, in one process) [default: clusterapi]", Lands::Text(cloud_provider))),
    imp("namespace", "kube-system", Text, A, run(50, General, "NAMESPACE", "Namespace of the leader Lease, the status ConfigMap and the priority-expander ConfigMap", Lands::Text(|d, v| { d.c.namespace = v.to_string(); Ok(()) }))),
    imp("enforce-node-group-min-size", "false", Bool, A, setting(260, ScaleUp, "BOOL", "Grow node groups below their min size", Lands::Bool(|d, v| d.c.autoscaler.scale_up.scale_up.set_enforce_node_group_min_size(v)))).file("spec.enforceNodeGroupMinSize"),
    imp("scale-down-unready-enabled", "true", Bool, A, setting(690, ScaleDown, "BOOL", "Scale down unready nodes (after --scale-down-unready-time)", Lands::Bool(|d, v| d.c.autoscaler.scale_down.set_unready_enabled(v)))),
    imp("scale-down-delay-after-add", "10m0s", Dur, A, setting(430, ScaleDown, "DURATION", "Wait after a scale-up before scale-down resumes", Lands::Duration(|d, v| d.c.autoscaler.scale_down.set_delay_after_add(v)))).file("spec.scaleDown.delayAfterAdd"),
    imp("scale-down-delay-type-local", "false", Bool, A, setting(710, ScaleDown, "BOOL", "The --scale-down-delay-after-* delays hold only the node group concerned", Lands::Bool(|d, v| d.c.autoscaler.scale_down.set_delay_type_local(v)))),
    imp("scale-down-delay-after-delete", "0s", Dur, A, setting(440, ScaleDown, "DURATION", "Wait after a node deletion before scale-down resumes", Lands::Duration(|d, v| d.c.autoscaler.scale_down.set_delay_after_delete(v)))).file("spec.scaleDown.delayAfterDelete"),
    imp("scale-down-delay-after-failure", "3m0s", Dur, A, setting(450, ScaleDown, "DURATION", "Wait after a failed scale-down before scale-down resumes", Lands::Duration(|d, v| d.c.autoscaler.scale_down.set_delay_after_failure(v)))).file("spec.scaleDown.delayAfterFailure"),
    imp("scale-down-unneeded-time", "10m0s", Dur, A, setting(460, ScaleDown, "DURATION", "How long a node must be unneeded before removal", Lands::Duration(|d, v| d.c.autoscaler.scale_down.set_unneeded_time(v)))).file("spec.scaleDown.unneededTime"),
    imp("scale-down-unready-time", "20m0s", Dur, A, setting(470, ScaleDown, "DURATION", "How long an unready node must be unneeded before removal", Lands::Duration(|d, v| d.c.autoscaler.scale_down.set_unready_time(v)))),
    imp("scale-down-utilization-threshold", "0.5", Float, A, setting(480, ScaleDown, "RATIO", "Utilization below which a node may be removed, 0 to 1", Lands::Fraction(|d, v| d.c.autoscaler.scale_down.set_utilization_threshold(v)))).file("spec.scaleDown.utilizationThreshold"),
    imp("scale-down-gpu-utilization-threshold", "0.5", Float, A, setting(490, ScaleDown, "RATIO", "GPU utilization below which a GPU node may be removed, 0 to 1", Lands::Fraction(|d, v| d.c.autoscaler.scale_down.set_gpu_utilization_threshold(v)))),
    imp("scale-down-non-empty-candidates-count", "30", Int, A, setting(500, ScaleDown, "INT", "Non-empty nodes found removable per pass; 0 or less: no limit", Lands::Long(non_empty_candidates_count))),
    imp("scale-down-candidates-pool-ratio", "0.1", Float, A, setting(510, ScaleDown, "RATIO", "Share of nodes tried as extra candidates when some fail, 0 to 1", Lands::Fraction(|d, v| d.c.autoscaler.scale_down.set_candidates_pool_ratio(v)))),
    imp("scale-down-candidates-pool-min-count", "50", Int, A, setting(520, ScaleDown, "INT", "At least this many extra candidates", Lands::Count(|d, v| d.c.autoscaler.scale_down.set_candidates_pool_min_count(v)))),
    imp("node-deletion-delay-timeout", "2m0s", Dur, A, setting(660, ScaleDown, "DURATION", "Longest wait for a node's delay-deletion.cluster-autoscaler.kubernetes.io/* annotations to go before it is deleted anyway; 0s: no wait", Lands::Duration(|d, v| d.c.node_deletion_delay_timeout = v))),
    f("node-deletion-batcher-interval", "0s", Dur, gap("deletions are not batched over time; each loop deletes what it decided", "0s"), A),
    imp("scan-interval", "10s", Dur, A, setting(200, General, "DURATION", "How often the cluster is re-evaluated (in `simulate`, in virtual time)", Lands::Duration(|d, v| d.c.scan_interval = v))),
    imp("max-nodes-total", "0", Int, A, setting(350, ScaleUp, "INT", "Most nodes in the cluster, 0 for no limit", Lands::Count(|d, v| d.c.autoscaler.scale_up.limits.max_nodes_total = v))).file("spec.resourceLimits.maxNodesTotal"),
    imp("max-bulk-soft-taint-count", "10", Int, A, setting(540, ScaleDown, "INT", "Nodes soft-tainted or untainted per pass", Lands::Count(|d, v| d.c.autoscaler.scale_down.set_max_bulk_soft_taint_count(v)))),
    f("max-bulk-soft-taint-time", "3s", Dur, none("soft taints are applied within the loop without a separate time bound; --max-bulk-soft-taint-count bounds them"), A),
    imp("max-total-unready-percentage", "45", Float, A, setting(770, ClusterState, "PERCENT", "Percentage of unready nodes above which the autoscaler halts, 0 to 100", Lands::Percent(|d, v| d.c.autoscaler.cluster_state.set_max_total_unready_percentage(v)))),
    imp("ok-total-unready-count", "3", Int, A, setting(760, ClusterState, "INT", "Unready nodes allowed regardless of the percentage", Lands::Count(|d, v| d.c.autoscaler.cluster_state.set_ok_total_unready_count(v)))),
    f("scale-up-from-zero", "true", Bool, gap("scale-up always runs when no node is ready; turning it off is not supported", "true"), A),
    f("parallel-scale-up", "false", Bool, gap("the node groups one loop grows (several when pending pods need different kinds of nodes, and the similar groups of --balance-similar-node-groups) are resized one after another, not concurrently", "false"), A),
    imp("max-node-provision-time", "15m0s", Dur, A, setting(740, ClusterState, "DURATION", "How long a new node may take to register", Lands::CheckedDuration(|d, v| d.c.autoscaler.cluster_state.set_max_node_provision_time(v)))).file("spec.maxNodeProvisionTime"),
    imp("max-node-startup-time", "15m0s", Dur, A, setting(750, ClusterState, "DURATION", "How long a registered node may take to become Ready", Lands::CheckedDuration(|d, v| d.c.autoscaler.cluster_state.set_max_node_startup_time(v)))),
    imp("max-pod-eviction-time", "2m0s", Dur, A, setting(210, General, "DURATION", "How long a drain retries an eviction refused by a PodDisruptionBudget", Lands::Duration(|d, v| d.c.max_pod_eviction_time = v))),
    f("estimator", "binpacking", Text, gap("binpacking is the only estimator", "binpacking"), A),
    imp("expander", "least-waste", Text, A, setting(220, ScaleUp, "NAMES", "Expander chain, comma-separated: random, most-pods, least-waste, least-nodes, price, priority, and unit-price (ours, not upstream's: the lowest price per unit of what the pods need; docs/decision-quality.md)", Lands::Text(|d, v| { d.c.autoscaler.scale_up.expander = ExpanderChain::parse(v).map_err(|e| e.to_string())?; Ok(()) }))).file("spec.expanders"),
    f("grpc-expander-cert", "", Text, gap("the grpc expander is not supported", ""), A),
    f("grpc-expander-url", "", Text, gap("the grpc expander is not supported", ""), A),
    imp("ignore-daemonsets-utilization", "false", Bool, A, setting(570, ScaleDown, "BOOL", "DaemonSet pods do not count toward utilization", Lands::Bool(|d, v| d.c.autoscaler.scale_down.utilization_mut().set_ignore_daemonsets(v)))).file("spec.ignoreDaemonsetsUtilization"),
    imp("ignore-mirror-pods-utilization", "false", Bool, A, setting(580, ScaleDown, "BOOL", "Mirror (static) pods do not count toward utilization", Lands::Bool(|d, v| d.c.autoscaler.scale_down.utilization_mut().set_ignore_mirror_pods(v)))),
    imp("write-status-configmap", "true", Bool, A, run(160, General, "BOOL", "Write the status ConfigMap", Lands::Bool(|d, v| d.c.write_status_configmap = v))),
    imp("status-config-map-name", "cluster-autoscaler-status", Text, A, run(170, General, "NAME", "Name of the status ConfigMap", Lands::Text(|d, v| { d.c.status_config_map_name = v.to_string(); Ok(()) }))),
    imp("max-inactivity", "10m0s", Dur, A, run(180, General, "DURATION", "`/health-check` fails when no loop ran for this long", Lands::Duration(|d, v| d.c.max_inactivity = v))),
    f("max-binpacking-time", "5m0s", Dur, none("bin-packing is not cut short by time; it is bounded by --max-nodes-per-scaleup"), A),
    imp("max-failing-time", "15m0s", Dur, A, run(190, General, "DURATION", "`/health-check` fails when loops kept failing for this long", Lands::Duration(|d, v| d.c.max_failing_time = v))),
    imp("max-startup-time", "20m0s", Dur, A, run(810, ClusterState, "DURATION", "`/health-check` fails when no loop succeeded this long after this replica started running loops", Lands::Duration(|d, v| d.c.max_startup_time = v))),
    imp("balance-similar-node-groups", "false", Bool, A, setting(270, ScaleUp, "BOOL", "Balance the sizes of similar node groups", Lands::Bool(|d, v| d.c.autoscaler.scale_up.scale_up.set_balance_similar_node_groups(v)))).file("spec.balanceSimilarNodeGroups"),
    f("unremovable-node-recheck-timeout", "5m0s", Dur, none("every node is re-evaluated each loop"), A),
    imp("expendable-pods-priority-cutoff", "-10", Int, A, setting(230, ScaleUp, "INT", "Pods with a priority below this never cause a scale-up", Lands::Int(expendable_pods_priority_cutoff))).file("spec.podPriorityThreshold"),
    f("regional", "false", Bool, none(OTHER_PROVIDER), A),
    imp("new-pod-scale-up-delay", "0s", Dur, A, setting(240, ScaleUp, "DURATION", "Pods younger than this are not acted on yet", Lands::Duration(|d, v| d.c.autoscaler.scale_up.pending.set_new_pod_scale_up_delay(v)))).file("spec.scaleUp.newPodScaleUpDelay"),
    f("scale-from-unschedulable", "false", Bool, gap("a node template's .spec.unschedulable is always honoured", "false"), A),
    f("profiling", "false", Bool, gap("there is no /debug/pprof endpoint", "false"), A),
    imp("clusterapi-cloud-config-authoritative", "false", Bool, A, run(40, General, "BOOL", "Cluster API: without `--cloud-config`, the management cluster is the one the autoscaler runs in (in-cluster configuration), never `--kubeconfig`'s", Lands::Bool(|d, v| d.authoritative = v))),
    imp("cordon-node-before-terminating", "true", Bool, A, setting(650, ScaleDown, "BOOL", "Cordon a node with its deletion taint (uncordoned if the deletion fails)", Lands::Bool(|d, v| d.c.cordon_node_before_terminating = v))).file("spec.scaleDown.cordonNodeBeforeTerminating"),
    imp("daemonset-eviction-for-empty-nodes", "false", Bool, A, setting(630, ScaleDown, "BOOL", "Evict DaemonSet pods from empty nodes", Lands::Bool(|d, v| d.c.autoscaler.scale_down.drain_mut().set_daemonset_eviction_for_empty_nodes(v)))),
    imp("daemonset-eviction-for-occupied-nodes", "true", Bool, A, setting(640, ScaleDown, "BOOL", "Evict DaemonSet pods from drained nodes", Lands::Bool(|d, v| d.c.autoscaler.scale_down.drain_mut().set_daemonset_eviction_for_occupied_nodes(v)))),
    f("user-agent", "cluster-autoscaler", Text, gap("the client sends its own User-Agent", "cluster-autoscaler"), A),
    imp("emit-per-nodegroup-metrics", "false", Bool, A, run(820, ClusterState, "BOOL", "Expose the per-node-group gauges (`node_group_min_count`, `node_group_max_count`, `node_group_target_count`, `node_group_healthiness`, `node_group_backoff_status`)", Lands::Bool(|d, v| d.c.emit_per_nodegroup_metrics = v))),
    f("debugging-snapshot-enabled", "false", Bool, gap("there is no debugging snapshot endpoint", "false"), A),
    f("node-info-cache-expire-time", "87600h0m0s", Dur, none("node templates are computed each loop; there is no node-info cache"), A),
    imp("initial-node-group-backoff-duration", "5m0s", Dur, A, setting(780, ClusterState, "DURATION", "First backoff of a node group after a failed scale-up", Lands::CheckedDuration(|d, v| d.c.autoscaler.cluster_state.backoff_mut().set_initial(v)))),
    imp("max-node-group-backoff-duration", "30m0s", Dur, A, setting(790, ClusterState, "DURATION", "Longest backoff of a node group", Lands::Duration(|d, v| d.c.autoscaler.cluster_state.backoff_mut().set_max(v)))),
    imp("node-group-backoff-reset-timeout", "3h0m0s", Dur, A, setting(800, ClusterState, "DURATION", "Time without failure after which a group's backoff starts over", Lands::CheckedDuration(|d, v| d.c.autoscaler.cluster_state.backoff_mut().set_reset_timeout(v)))),
    imp("max-scale-down-parallelism", "10", Int, A, setting(550, ScaleDown, "INT", "Nodes deleted at once, drained ones included, at least 1", Lands::CheckedCount(|d, v| d.c.autoscaler.scale_down.set_max_scale_down_parallelism(v)))),
    imp("max-drain-parallelism", "1", Int, A, setting(560, ScaleDown, "INT", "Non-empty nodes drained at once, at least 1", Lands::CheckedCount(|d, v| d.c.autoscaler.scale_down.set_max_drain_parallelism(v)))),
    f("record-duplicated-events", "false", Bool, none("events are aggregated as client-go's correlator does; duplicates within its window are folded either way"), A),
    imp("max-nodes-per-scaleup", "1000", Int, A, setting(250, ScaleUp, "INT", "Most nodes added in one scale-up", Lands::CheckedCount(|d, v| d.c.autoscaler.scale_up.scale_up.set_max_nodes_per_scale_up(v)))),
    f("max-nodegroup-binpacking-duration", "10s", Dur, none("bin-packing is not cut short by time; it is bounded by --max-nodes-per-scaleup"), A),
    f("fastpath-binpacking-enabled", "false", Bool, none(GO_TUNING), A),
    imp("skip-nodes-with-system-pods", "true", Bool, A, setting(590, ScaleDown, "BOOL", "Nodes with kube-system pods (not DaemonSet or mirror pods) without a PDB are kept", Lands::Bool(|d, v| d.c.autoscaler.scale_down.drain_mut().set_skip_nodes_with_system_pods(v)))),
    imp("skip-nodes-with-local-storage", "true", Bool, A, setting(600, ScaleDown, "BOOL", "Nodes with pods using local storage are kept", Lands::Bool(|d, v| d.c.autoscaler.scale_down.drain_mut().set_skip_nodes_with_local_storage(v)))).file("spec.skipNodesWithLocalStorage"),
    imp("skip-nodes-with-custom-controller-pods", "true", Bool, A, setting(610, ScaleDown, "BOOL", "Nodes with pods of custom controllers are kept", Lands::Bool(|d, v| d.c.autoscaler.scale_down.drain_mut().set_skip_nodes_with_custom_controller_pods(v)))),
    imp("min-replica-count", "0", Int, A, setting(620, ScaleDown, "INT", "Pods of ReplicaSets with fewer replicas block removal", Lands::CheckedInt(|d, v| d.c.autoscaler.scale_down.drain_mut().set_min_replica_count(v)))),
    imp("blocking-system-pod-distruption-timeout", "1h0m0s", Dur, A, setting(700, ScaleDown, "DURATION", "How long after its creation a kube-system pod without a PDB blocks its node's removal (with --skip-nodes-with-system-pods; the spelling is upstream's)", Lands::Duration(|d, v| d.c.autoscaler.scale_down.drain_mut().set_blocking_system_pod_disruption_timeout_ms(i64::try_from(v.as_millis()).unwrap_or(i64::MAX))))),
    imp("node-delete-delay-after-taint", "5s", Dur, A, setting(670, ScaleDown, "DURATION", "Wait between the deletion taint and a node's deletion or drain", Lands::Duration(|d, v| d.c.node_delete_delay_after_taint = v))),
    f("scale-down-simulation-timeout", "30s", Dur, none("the scale-down simulation is not cut short by time; --scale-down-non-empty-candidates-count bounds it"), A),
    imp("memory-difference-ratio", "0.015", Float, A, setting(320, ScaleUp, "RATIO", "Largest relative difference of memory capacity between similar groups", Lands::Ratio(|d, v| d.c.autoscaler.scale_up.scale_up.balancing_mut().set_memory_difference_ratio(v)))),
    imp("max-free-difference-ratio", "0.05", Float, A, setting(310, ScaleUp, "RATIO", "Largest relative difference of free resources between similar groups", Lands::Ratio(|d, v| d.c.autoscaler.scale_up.scale_up.balancing_mut().set_max_free_difference_ratio(v)))),
    imp("max-allocatable-difference-ratio", "0.05", Float, A, setting(300, ScaleUp, "RATIO", "Largest relative difference of allocatable between similar groups", Lands::Ratio(|d, v| d.c.autoscaler.scale_up.scale_up.balancing_mut().set_max_allocatable_difference_ratio(v)))),
    f("force-ds", "false", Bool, gap("scale-up does not block node groups too small for all DaemonSet pods", "false"), A),
    f("dynamic-node-delete-delay-after-taint-enabled", "false", Bool, gap("the delay after tainting is fixed (--node-delete-delay-after-taint)", "false"), A),
    imp("enable-provisioning-requests", "false", Bool, A, setting(850, CapacityOnRequest, "BOOL", "Act on ProvisioningRequests (`autoscaling.x-k8s.io/v1`): check-capacity and best-effort-atomic-scale-up classes, conditions written through the status subresource", Lands::Bool(|d, v| d.c.autoscaler.capacity.requests_mut().set_enabled(v)))),
    imp("provisioning-request-initial-backoff-time", "1m0s", Dur, A, setting(851, CapacityOnRequest, "DURATION", "First wait before a ProvisioningRequest whose capacity was not found is tried again", Lands::CheckedDuration(|d, v| d.c.autoscaler.capacity.requests_mut().set_initial_backoff_ms(i64::try_from(v.as_millis()).unwrap_or(i64::MAX))))),
    imp("provisioning-request-max-backoff-time", "10m0s", Dur, A, setting(852, CapacityOnRequest, "DURATION", "Longest wait between tries of a ProvisioningRequest (the wait doubles up to it)", Lands::CheckedDuration(|d, v| d.c.autoscaler.capacity.requests_mut().set_max_backoff_ms(i64::try_from(v.as_millis()).unwrap_or(i64::MAX))))),
    imp("provisioning-request-max-backoff-cache-size", "1000", Int, A, setting(853, CapacityOnRequest, "INT", "ProvisioningRequests whose retry backoff is remembered (the least recently tried is forgotten first)", Lands::Count(|d, v| d.c.autoscaler.capacity.requests_mut().set_max_backoff_cache_size(v)))),
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
    imp("balancing-ignore-label", "[]", List, A, setting(280, ScaleUp, "LABEL", "A label ignored when comparing node groups; repeatable", Lands::Texts(|d, v| { d.c.autoscaler.scale_up.scale_up.balancing_mut().set_ignored_labels(v.to_vec()); Ok(()) }))).file("spec.balancingIgnoredLabels"),
    imp("balancing-label", "[]", List, A, setting(290, ScaleUp, "LABEL", "A label that alone decides similarity of node groups; repeatable", Lands::Texts(|d, v| { d.c.autoscaler.scale_up.scale_up.balancing_mut().set_balancing_labels(v.to_vec()); Ok(()) }))),
    f("startup-taint-prefix", "[]", List, gap("startup taints are matched by exact key (--startup-taint), not by prefix", ""), A),
    f("pod-injection-limit", "5000", Int, none("caps the fake pods of upstream's proactive scale-up (--enable-proactive-scaleup), which this autoscaler does not have; CapacityBuffer pods are not capped by it, upstream's neither"), A),
    f("check-capacity-batch-processing", "false", Bool, none(PROV_REQ), A),
    f("check-capacity-provisioning-request-max-batch-size", "10", Int, none(PROV_REQ), A),
    f("check-capacity-provisioning-request-batch-timebox", "10s", Dur, none(PROV_REQ), A),
    f("force-delete-unregistered-nodes", "false", Bool, gap("long-unregistered nodes are deleted only down to the node group's min size", "false"), A),
    f("force-delete-failed-nodes", "false", Bool, gap("failed nodes are deleted only down to the node group's min size", "false"), A),
    f("enable-csi-node-aware-scheduling", "false", Bool, none("the volume filters always honour CSINode attach limits, as upstream does only when this is true"), A),
    f("predicate-parallelism", "4", Int, none(GO_TUNING), A),
    imp("check-capacity-processor-instance", "", Text, A, setting(854, CapacityOnRequest, "NAME", "The check-capacity ProvisioningRequests this instance serves: those whose `processorInstance` parameter names it (empty: those without the parameter)", Lands::Text(|d, v| { d.c.autoscaler.capacity.requests_mut().set_check_capacity_processor_instance(v.to_string()); Ok(()) }))),
    f("node-deletion-candidate-ttl", "0s", Dur, gap("unneeded-node markings are not kept across restarts", "0s"), A),
    imp("capacity-buffer-controller-enabled", "false", Bool, A, setting(855, CapacityOnRequest, "BOOL", "Resolve CapacityBuffers into pods and write their status", Lands::Bool(|d, v| d.c.autoscaler.capacity.set_buffer_controller(v)))),
    imp("capacity-buffer-pod-injection-enabled", "false", Bool, A, setting(856, CapacityOnRequest, "BOOL", "Add the ready CapacityBuffers' virtual pods to the loop's pending pods", Lands::Bool(|d, v| d.c.autoscaler.capacity.set_buffer_pods(v)))),
    f("capacity-buffer-pod-dry-run-enabled", "true", Bool, none("buffer pods are made from the PodTemplate or the workload's pod template as written: no managed PodTemplate is built, so no server dry run (no webhook defaulting) is asked for"), A),
    f("capacity-buffer-ready-replicas-enabled", "false", Bool, none("a CapacityBuffer's status.readyReplicas is never written"), A),
    f("node-removal-latency-tracking-enabled", "false", Bool, gap("node removal latency is not tracked", "false"), A),
    f("max-node-skip-eval-time-tracker-enabled", "false", Bool, gap("the time a node is skipped in scale-down is not tracked", "false"), A),
    f("capacity-quotas-enabled", "false", Bool, gap("CapacityQuota objects are not handled", "false"), A),
    f("pending-pods-batching-timeout", "4m0s", Dur, none("the pending-pod simulation is not cut short by time"), A),
    f("enable-graceful-degradation", "false", Bool, gap("scheduling simulations are never stopped early", "false"), A),
    f("enable-inter-pod-affinity-hostname-fast-path", "false", Bool, none(GO_TUNING), A),
    imp("ignore-taint", "[]", List, A, setting(340, ScaleUp, "KEY", "Deprecated name of `--startup-taint`; repeatable", Lands::Texts(startup_taints))),
    f("enable-dynamic-resource-allocation", "true", Bool, gap("Dynamic Resource Allocation objects (ResourceClaims) are not read", "false"), A),
    f("cluster-snapshot-parallelism", "16", Int, none(GO_TUNING), A),
    imp("scale-down-enabled", "true", Bool, A, setting(420, ScaleDown, "BOOL", "Scale the cluster down", Lands::Bool(|d, v| d.c.autoscaler.scale_down.set_enabled(v)))).file("spec.scaleDown.enabled"),
    f("nodes", "[]", List, none("Cluster API finds node groups by their annotations and --node-group-auto-discovery, as upstream's Cluster API provider does"), A),
    imp("node-group-auto-discovery", "[]", List, A, run(70, General, "SPEC", "Node-group auto-discovery: `clusterapi:namespace=NS,clusterName=NAME,<label>=<value>`; repeatable (ORed)", Lands::Texts(|d, v| { d.auto_discovery = v.to_vec(); Ok(()) }))),
    f("scheduler-config-file", "", Text, gap("a custom kube-scheduler configuration is not supported; the default plugins' filters are used", ""), A),
    imp("cores-total", "0:320000", Text, A, setting(360, ScaleUp, "MIN:MAX", "Cores in the cluster, `min:max`", Lands::Text(|d, v| { d.c.autoscaler.scale_up.limits.cpu = Range::parse_cores(v).map_err(|e| e.to_string())?; Ok(()) }))).file("spec.resourceLimits.cores"),
    imp("memory-total", "0:6400000", Text, A, setting(370, ScaleUp, "MIN:MAX", "Memory in the cluster in GiB, `min:max`", Lands::Text(|d, v| { d.c.autoscaler.scale_up.limits.memory = Range::parse_memory_gib(v).map_err(|e| e.to_string())?; Ok(()) }))).file("spec.resourceLimits.memory"),
    imp("max-graceful-termination-sec", "600", Int, A, setting(530, ScaleDown, "SECONDS", "Longest grace period given to an evicted pod, seconds", Lands::Seconds(|d, v| d.c.autoscaler.scale_down.set_max_graceful_termination_sec(v)))).file("spec.maxPodGracePeriod"),
    imp("gpu-total", "[]", List, A, setting(380, ScaleUp, "TYPE:MIN:MAX", "GPUs of one type in the cluster, `type:min:max`; repeatable", Lands::Texts(gpu_total))).file("spec.resourceLimits.gpus"),
    imp("startup-taint", "[]", List, A, setting(330, ScaleUp, "KEY", "A taint key of a node still starting: while a node carries it the node counts as not ready, and templates leave it out; repeatable", Lands::Texts(startup_taints))).file("spec.startupTaints"),
    imp("status-taint", "[]", List, A, setting(390, ScaleUp, "KEY", "A taint key that only reports a node's status: templates leave it out, the node still counts as ready; repeatable", Lands::Texts(|d, v| d.c.autoscaler.scale_up.template.taints_mut().set_status(v.to_vec()).map_err(refused_key)))),
    imp("bypassed-scheduler-names", "[]", List, A, setting(410, ScaleUp, "NAMES", "Pending pods of these schedulers count as unschedulable before the scheduler has marked them, and scale-up does not wait for more new pods; comma-separated or repeated", Lands::Names(|d, v| d.c.autoscaler.scale_up.pending.set_bypassed_schedulers(names_of(v))))),
    imp("allowed-scheduler-names", "[]", List, A, setting(400, ScaleUp, "NAMES", "Only pending pods of these schedulers (`spec.schedulerName`) are acted on, comma-separated or repeated [default: every scheduler]", Lands::Names(|d, v| d.c.autoscaler.scale_up.pending.set_allowed_schedulers(names_of(v))))),
    imp("drain-priority-config", "", Text, A, setting(535, ScaleDown, "PRIORITY:SECONDS,...", "`priority:seconds` couples separated by commas (e.g. `10000:20,1000:100,0:60`): drains evict pods by priority, lowest couple first, each couple waited for before the next, each eviction's grace capped by its couple's seconds; DaemonSet pods are staged by their priority too. Not with --max-graceful-termination-sec. Empty: all pods at once", Lands::Text(drain_priority_config))),
    f("scheduler-verbosity", "0", Int, none("there is no embedded kube-scheduler to log"), A),
    // component-base: BindLeaderElectionFlags
    imp("leader-elect", "true", Bool, LE, run(110, General, "BOOL", "Elect a leader on a Lease before acting", Lands::Bool(|d, v| d.c.leader_elect = v))),
    imp("leader-elect-lease-duration", "15s", Dur, LE, run(120, General, "DURATION", "Lease duration", Lands::Duration(|d, v| d.c.lease_duration = v))),
    imp("leader-elect-renew-deadline", "10s", Dur, LE, run(130, General, "DURATION", "How long the leader tries to renew before giving up", Lands::Duration(|d, v| d.c.renew_deadline = v))),
    imp("leader-elect-retry-period", "2s", Dur, LE, run(140, General, "DURATION", "Wait between attempts to acquire or renew the Lease", Lands::Duration(|d, v| d.c.retry_period = v))),
    f("leader-elect-resource-lock", "leases", Text, none("a Lease is always used"), LE),
    imp("leader-elect-resource-name", "cluster-autoscaler", Text, LE, run(150, General, "NAME", "Name of the Lease", Lands::Text(|d, v| { d.c.lease_name = v.to_string(); Ok(()) }))),
    f("leader-elect-resource-namespace", "", Text, none("the Lease is in --namespace"), LE),
    // klog and component-base logs
    imp("v", "0", Int, L, run(90, General, "LEVEL", "Log verbosity, 0 to 10 [default: 1]: 0-1 decisions and changes (info), 2-4 also why (debug), 5-7 everything of the autoscaler (trace), 8 also the HTTP client's requests, 9-10 every library's traces", Lands::Level(|d, v| d.verbosity = v))).file("spec.logVerbosity"),
    f("vmodule", "", Text, gap("per-file verbosity is not supported; RUST_LOG sets per-module levels", ""), L),
    imp("logging-format", "text", Text, L, run(100, General, "FORMAT", "Log format: `text` (one line per record) or `json` (one JSON object per line)", Lands::LogFormat(|d, v| d.logging_format = v))),
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
    imp("max-empty-bulk-delete", "10", Int, Removed, setting(680, ScaleDown, "INT", "Deprecated: sets --max-scale-down-parallelism when that is not given, as upstream", Lands::CheckedCount(max_empty_bulk_delete))),
    // Ours, not upstream's (not in docs/flags.md's tables; its introduction names them).
    imp("config", "", Text, Ours, run(10, General, "FILE", "A `ClusterAutoscaler` resource (`autoscaling.openshift.io/v1`, YAML); flags given on the command line win over it", Lands::ConfigFile)),
    imp("enable-explain-endpoint", "false", Bool, Ours, run(830, ClusterState, "BOOL", "Serve the last loop's plan (the document `plan --output json` prints) at `/explain` on `--address`, when this replica leads. Ours, not upstream's", Lands::Bool(|d, v| d.c.enable_explain_endpoint = v))),
    imp("emit-unremovable-node-events", "false", Bool, Ours, run(840, ClusterState, "BOOL", "Put a `NoScaleDown` event on each node a loop does not remove, saying why (the reason class and the detail `plan` prints); again when the reason changes, else at most every 5 minutes per node. Ours, not upstream's", Lands::Bool(|d, v| d.c.emit_unremovable_node_events = v))),
    imp("consolidation", "off", Text, Ours, setting(720, ScaleDown, "MODE", "Consolidation: `off`, `delete` (remove nodes whose pods fit on the others, whatever their utilization) or `replace` (also replace nodes by one cheaper node of any group). Ours, not upstream's; see docs/consolidation.md", Lands::Consolidation(|d, v| d.c.autoscaler.consolidation.set_mode(v)))),
    imp("consolidate-after", "1m", Dur, Ours, setting(730, ScaleDown, "DURATION", "How long a node's pods must stay unchanged before consolidation considers it. Ours, not upstream's", Lands::Duration(|d, v| d.c.autoscaler.consolidation.set_consolidate_after(v)))),
    imp("consolidation-horizon", "10m", Dur, Ours, setting(735, ScaleDown, "DURATION", "The least time consolidation counts a saving and a Job pod's lost run for, and the least age of a node holding pods before it is consolidated; above 0. Ours, not upstream's; see docs/consolidation.md", Lands::CheckedDuration(|d, v| d.c.autoscaler.consolidation.set_horizon(v)))),
];

/// The flags not implemented: parsed and judged by their kind and status alone.
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
        // Never: an implemented flag is defined from its `Use` (see `registry_defined`).
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

/// The upstream flags that are not implemented, parsed from the
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
         docs/troubleshooting.md. Consolidation, `--consolidation=off|delete|replace`, \
         `--consolidate-after` and `--consolidation-horizon` (ours, off by default): see \
         docs/consolidation.md.\n",
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
            let mut also: Vec<String> = (flag.file_field().into_iter())
                .map(|field| format!("`--config` `{field}`"))
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
        "consolidation-horizon",
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
    /// validates: the implemented flags accept upstream's spelling of their defaults (`10m0s`,
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

    /// An implemented flag reads its value as its registry row says: a Go boolean (`--flag`,
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
            if flag.status == Status::Implemented {
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

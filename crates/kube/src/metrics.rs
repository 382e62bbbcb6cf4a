//! Prometheus metrics with upstream cluster-autoscaler's names, types, labels and meaning
//! (`cluster_autoscaler_*`), encoded as text for `/metrics`.
//!
//! Gauges are set from each loop's [`LoopOutcome`] and the [`ClusterView`] it was decided on;
//! counters, durations and activity times are recorded by the controller after it acts. This
//! module only records what it is told: it never decides, never performs I/O and never reads a
//! clock (callers pass times and durations).
//!
//! Counters are exposed the OpenMetrics way (`# TYPE x counter`, sample `x_total`), which gives
//! upstream's series names for every counter whose upstream name ends in `_total`. The two
//! upstream counters whose names end in `_count` (`old_unregistered_nodes_removed_count`,
//! `skipped_scale_events_count`) are exposed as gauges holding the running total, so their
//! series names stay upstream's (OpenMetrics requires a counter's samples to end in `_total`).

use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use autoscaler_core::{ClusterStatus, ClusterView, LoopOutcome};
use autoscaler_core::{SetAside, is_unschedulable};
use autoscaler_core::{Unremovable, Waiting};
use autoscaler_model::Node;
use autoscaler_model::TO_BE_DELETED_TAINT;
use autoscaler_model::{ClusterTotals, ResourceLimits};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The prefix of every metric.
pub const PREFIX: &str = "cluster_autoscaler";

/// Content type of [`Metrics::encode`]'s output (OpenMetrics text, which Prometheus scrapes).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A label set: (name, value) pairs.
type Labels = Vec<(&'static str, String)>;

/// A histogram constructor (a plain function, so the family type is nameable).
type HistogramFn = fn() -> Histogram;

/// Upstream's buckets for `function_duration_seconds`: 0.01 s growing by 1.5x, 30 buckets.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 1.5, 30))
}

/// Upstream's buckets for `node_removal_latency_seconds`: 1 s growing by 1.5x, 19 buckets
/// (about 25 minutes).
fn removal_latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 1.5, 19))
}

/// Why nodes were removed (`scaled_down_nodes_total{reason}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleDownReason {
    /// An empty node.
    Empty,
    /// A node below the utilization threshold, drained.
    Underutilized,
    /// An unready node.
    Unready,
}

impl ScaleDownReason {
    /// Upstream's label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ScaleDownReason::Empty => "empty",
            ScaleDownReason::Underutilized => "underutilized",
            ScaleDownReason::Unready => "unready",
        }
    }

    /// The reason of a node deletion: unready first (as upstream counts it), then empty or not.
    pub fn of(empty: bool, ready: bool) -> ScaleDownReason {
        if !ready {
            ScaleDownReason::Unready
        } else if empty {
            ScaleDownReason::Empty
        } else {
            ScaleDownReason::Underutilized
        }
    }
}

/// Why a scale-up failed (`failed_scale_ups_total{reason}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailedScaleUpReason {
    /// The provider refused or failed the increase, or its instances failed.
    CloudProviderError,
    /// A Kubernetes API call failed.
    ApiCallError,
    /// The new nodes did not register within the provision time.
    Timeout,
}

impl FailedScaleUpReason {
    /// Upstream's label value.
    pub fn as_str(self) -> &'static str {
        match self {
            FailedScaleUpReason::CloudProviderError => "cloudProviderError",
            FailedScaleUpReason::ApiCallError => "apiCallError",
            FailedScaleUpReason::Timeout => "timeout",
        }
    }
}

/// Upstream's `unremovable_nodes_count{reason}` label for a core reason (also the reason class
/// of the status ConfigMap's counts and of the `NoScaleDown` node events).
pub fn unremovable_label(u: &Unremovable) -> &'static str {
    match u {
        Unremovable::NotAutoscaled => "NotAutoscaled",
        // Upstream sees such a node as unready (its copy), kept until the unready time.
        Unremovable::NotStarted => "NotUnreadyLongEnough",
        Unremovable::ScaleDownDisabledAnnotation => "ScaleDownDisabledAnnotation",
        Unremovable::BeingDeleted => "CurrentlyBeingDeleted",
        Unremovable::MinSizeReached => "NodeGroupMinSizeReached",
        Unremovable::AtomicGroup => "AtomicScaleDownFailed",
        Unremovable::UnreadyDisabled => "ScaleDownUnreadyDisabled",
        // Upstream drops such nodes before the unremovable reasons are counted.
        Unremovable::RollingOut => "NotUnneededOtherReason",
        Unremovable::NotUnderutilized { .. } => "NotUnderutilized",
        Unremovable::PodBlocks(_) => "BlockedByPod",
        Unremovable::NoPlaceToMovePods(_) => "NoPlaceToMovePods",
        Unremovable::MinimalResourceLimit(_) => "MinimalResourceLimitExceeded",
        Unremovable::NotConsidered(_) => "NotUnneededOtherReason",
    }
}

/// The reason of every node a loop does not remove, as upstream counts them: the unremovable
/// nodes, and the unneeded nodes it keeps (not unneeded long enough, min size, limits,
/// parallelism), which upstream counts under their reason too; not those kept by the cool-down,
/// when upstream looks at no single node.
pub fn unremovable_reasons<'a>(
    view: &ClusterView<'a>,
    plan: &'a autoscaler_core::ScaleDownPlan,
) -> impl Iterator<Item = (autoscaler_model::Sym, &'static str)> + 'a {
    let ready: rustc_hash::FxHashMap<autoscaler_model::Sym, bool> = if plan.waiting.is_empty() {
        Default::default()
    } else {
        view.nodes.iter().map(|n| (n.name, n.is_ready())).collect()
    };
    (plan.unremovable.iter())
        .map(|(n, why)| (*n, unremovable_label(why)))
        .chain(
            (plan.waiting.iter())
                .filter(|(_, w)| !matches!(w, Waiting::Cooldown(_)))
                .map(move |(n, w)| {
                    let r = ready.get(n).copied().unwrap_or(true);
                    (*n, crate::events::waiting_class(w, r))
                }),
        )
}

/// The autoscaler's metrics in one registry. Every method takes `&self` (atomics), so one
/// `Arc<Metrics>` is shared by the loop and the HTTP server.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    cluster_safe_to_autoscale: Gauge,
    nodes_count: Family<Labels, Gauge>,
    node_groups_count: Family<Labels, Gauge>,
    unschedulable_pods_count: Family<Labels, Gauge>,
    max_nodes_count: Gauge,
    cluster_cpu_current_cores: Gauge,
    cluster_memory_current_bytes: Gauge,
    node_group_min_count: Family<Labels, Gauge>,
    node_group_max_count: Family<Labels, Gauge>,
    node_group_target_count: Family<Labels, Gauge>,
    node_group_healthiness: Family<Labels, Gauge>,
    node_group_backoff_status: Family<Labels, Gauge>,
    last_activity: Family<Labels, Gauge<f64, AtomicU64>>,
    function_duration_seconds: Family<Labels, Histogram, HistogramFn>,
    errors_total: Family<Labels, Counter>,
    scaled_up_nodes_total: Counter,
    scaled_up_gpu_nodes_total: Family<Labels, Counter>,
    failed_scale_ups_total: Family<Labels, Counter>,
    failed_gpu_scale_ups_total: Family<Labels, Counter>,
    scaled_down_nodes_total: Family<Labels, Counter>,
    scaled_down_gpu_nodes_total: Family<Labels, Counter>,
    evicted_pods_total: Family<Labels, Counter>,
    unneeded_nodes_count: Gauge,
    unremovable_nodes_count: Family<Labels, Gauge>,
    scale_down_in_cooldown: Gauge,
    old_unregistered_nodes_removed_count: Gauge,
    skipped_scale_events_count: Family<Labels, Gauge>,
    events_dropped_total: Family<Labels, Counter>,
    cpu_limits_cores: Family<Labels, Gauge>,
    memory_limits_bytes: Family<Labels, Gauge>,
    pending_node_deletions: Gauge,
    skipped_pods_count: Family<Labels, Gauge>,
    node_removal_latency_seconds: Family<Labels, Histogram, HistogramFn>,
    /// The unneeded nodes of the last loop and since when (ms), for
    /// `node_removal_latency_seconds`.
    unneeded_since: Mutex<rustc_hash::FxHashMap<String, i64>>,
    skipped_objects_total: Family<Labels, Counter>,
    /// `--emit-per-nodegroup-metrics`: the per-group gauges are registered and set.
    per_node_group: bool,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// The GPU of a node or node group as upstream's GPU counters label it: the resource name
/// (`nvidia.com/gpu`) and the GPU type (`gpu_name`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuLabels {
    /// `gpu_resource_name`.
    pub resource_name: String,
    /// `gpu_name`.
    pub gpu_name: String,
}

impl GpuLabels {
    /// The GPU `node` offers (its capacity, else its allocatable), if any: the first GPU
    /// resource, and as type the value of the provider's GPU label (`gpu_label`) or upstream's
    /// `generic` when the node has none.
    pub fn of_node(node: &Node, gpu_label: Option<&str>) -> Option<GpuLabels> {
        let (resource, _) = (node.capacity.iter())
            .chain(node.allocatable.iter())
            .find(|(r, v)| r.is_gpu() && *v > 0)?;
        let gpu_name = gpu_label
            .and_then(|l| node.labels.get_str(l))
            .filter(|v| !v.is_empty())
            .unwrap_or("generic");
        Some(GpuLabels {
            resource_name: resource.as_str().to_string(),
            gpu_name: gpu_name.to_string(),
        })
    }

    fn with(&self, mut labels: Labels) -> Labels {
        labels.push(("gpu_resource_name", self.resource_name.clone()));
        labels.push(("gpu_name", self.gpu_name.clone()));
        labels
    }
}

fn label(name: &'static str, value: &str) -> Labels {
    vec![(name, value.to_string())]
}

/// `skipped_pods_count`'s `reason` values (ours: upstream's label values are not published).
const SKIPPED_REASONS: [&str; 3] = ["expendable", "too_young", "nominated"];

fn skipped_index(why: &SetAside) -> usize {
    match why {
        SetAside::Expendable { .. } => 0,
        SetAside::TooYoung { .. } => 1,
        SetAside::Nominated { .. } => 2,
    }
}

/// Whether a node is on its way out: deleted, or tainted for deletion by the autoscaler.
fn being_deleted(n: &Node) -> bool {
    n.deletion_ms.is_some()
        || n.taints
            .iter()
            .any(|t| t.key.as_str() == TO_BE_DELETED_TAINT)
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Metrics {
    /// Every metric registered under [`PREFIX`], all zero, without the per-node-group gauges
    /// (upstream's default).
    pub fn new() -> Metrics {
        Metrics::with_per_node_group(false)
    }

    /// [`Metrics::new`], with the per-node-group gauges (`node_group_min_count`,
    /// `node_group_max_count`, `node_group_target_count`, `node_group_healthiness`,
    /// `node_group_backoff_status`) when `per_node_group` (`--emit-per-nodegroup-metrics`).
    pub fn with_per_node_group(per_node_group: bool) -> Metrics {
        let mut registry = Registry::with_prefix(PREFIX);
        let m = Metrics {
            cluster_safe_to_autoscale: Gauge::default(),
            nodes_count: Family::default(),
            node_groups_count: Family::default(),
            unschedulable_pods_count: Family::default(),
            max_nodes_count: Gauge::default(),
            cluster_cpu_current_cores: Gauge::default(),
            cluster_memory_current_bytes: Gauge::default(),
            node_group_min_count: Family::default(),
            node_group_max_count: Family::default(),
            node_group_target_count: Family::default(),
            node_group_healthiness: Family::default(),
            node_group_backoff_status: Family::default(),
            last_activity: Family::default(),
            function_duration_seconds: Family::new_with_constructor(
                duration_histogram as HistogramFn,
            ),
            errors_total: Family::default(),
            scaled_up_nodes_total: Counter::default(),
            scaled_up_gpu_nodes_total: Family::default(),
            failed_scale_ups_total: Family::default(),
            failed_gpu_scale_ups_total: Family::default(),
            scaled_down_nodes_total: Family::default(),
            scaled_down_gpu_nodes_total: Family::default(),
            evicted_pods_total: Family::default(),
            unneeded_nodes_count: Gauge::default(),
            unremovable_nodes_count: Family::default(),
            scale_down_in_cooldown: Gauge::default(),
            old_unregistered_nodes_removed_count: Gauge::default(),
            skipped_scale_events_count: Family::default(),
            events_dropped_total: Family::default(),
            cpu_limits_cores: Family::default(),
            memory_limits_bytes: Family::default(),
            pending_node_deletions: Gauge::default(),
            skipped_pods_count: Family::default(),
            node_removal_latency_seconds: Family::new_with_constructor(
                removal_latency_histogram as HistogramFn,
            ),
            unneeded_since: Mutex::default(),
            skipped_objects_total: Family::default(),
            per_node_group,
            registry: Registry::default(),
        };
        let r = &mut registry;
        r.register(
            "cluster_safe_to_autoscale",
            "Whether or not cluster is healthy enough for autoscaling. 1 if it is, 0 otherwise",
            m.cluster_safe_to_autoscale.clone(),
        );
        r.register(
            "nodes_count",
            "Number of nodes in cluster",
            m.nodes_count.clone(),
        );
        r.register(
            "node_groups_count",
            "Number of node groups managed by CA",
            m.node_groups_count.clone(),
        );
        r.register(
            "unschedulable_pods_count",
            "Number of unschedulable pods in the cluster",
            m.unschedulable_pods_count.clone(),
        );
        r.register(
            "max_nodes_count",
            "Maximum number of nodes in all node groups",
            m.max_nodes_count.clone(),
        );
        r.register(
            "cluster_cpu_current_cores",
            "Current number of cores in the cluster, minus deleting nodes",
            m.cluster_cpu_current_cores.clone(),
        );
        r.register(
            "cluster_memory_current_bytes",
            "Current number of bytes of memory in the cluster, minus deleting nodes",
            m.cluster_memory_current_bytes.clone(),
        );
        r.register(
            "cpu_limits_cores",
            "Minimum and maximum number of cores in the cluster",
            m.cpu_limits_cores.clone(),
        );
        r.register(
            "memory_limits_bytes",
            "Minimum and maximum number of bytes of memory in cluster",
            m.memory_limits_bytes.clone(),
        );
        if per_node_group {
            m.register_per_node_group(r);
        }
        r.register(
            "last_activity",
            "Last time certain part of CA logic executed",
            m.last_activity.clone(),
        );
        r.register(
            "function_duration_seconds",
            "Time taken by various parts of CA main loop",
            m.function_duration_seconds.clone(),
        );
        r.register(
            "errors",
            "The number of CA loops failed due to an error",
            m.errors_total.clone(),
        );
        r.register(
            "scaled_up_nodes",
            "Number of nodes added by CA",
            m.scaled_up_nodes_total.clone(),
        );
        r.register(
            "scaled_up_gpu_nodes",
            "Number of GPU nodes added by CA, by GPU name",
            m.scaled_up_gpu_nodes_total.clone(),
        );
        r.register(
            "failed_scale_ups",
            "Number of times scale-up operation has failed",
            m.failed_scale_ups_total.clone(),
        );
        r.register(
            "failed_gpu_scale_ups",
            "Number of times scale-up operation has failed",
            m.failed_gpu_scale_ups_total.clone(),
        );
        r.register(
            "scaled_down_nodes",
            "Number of nodes removed by CA",
            m.scaled_down_nodes_total.clone(),
        );
        r.register(
            "scaled_down_gpu_nodes",
            "Number of GPU nodes removed by CA, by reason and GPU name",
            m.scaled_down_gpu_nodes_total.clone(),
        );
        r.register(
            "evicted_pods",
            "Number of pods evicted by CA",
            m.evicted_pods_total.clone(),
        );
        r.register(
            "unneeded_nodes_count",
            "Number of nodes currently considered unneeded by CA",
            m.unneeded_nodes_count.clone(),
        );
        r.register(
            "unremovable_nodes_count",
            "Number of nodes currently considered unremovable by CA",
            m.unremovable_nodes_count.clone(),
        );
        r.register(
            "scale_down_in_cooldown",
            "Whether or not the scale down is in cooldown. 1 if its, 0 otherwise",
            m.scale_down_in_cooldown.clone(),
        );
        r.register(
            "old_unregistered_nodes_removed_count",
            "Number of unregistered nodes removed by CA",
            m.old_unregistered_nodes_removed_count.clone(),
        );
        r.register(
            "skipped_scale_events_count",
            "Count of scaling events that the CA has chosen to skip",
            m.skipped_scale_events_count.clone(),
        );
        r.register(
            "pending_node_deletions",
            "Number of nodes that haven't been removed or aborted after finished scale-down phase",
            m.pending_node_deletions.clone(),
        );
        r.register(
            "skipped_pods_count",
            "Number of pending pods left out of the loop's scale-up simulation, by reason",
            m.skipped_pods_count.clone(),
        );
        r.register(
            "node_removal_latency_seconds",
            "Latency from when an unneeded node is eligible for scale down until it is removed \
             (deleted=true) or it became needed again (deleted=false)",
            m.node_removal_latency_seconds.clone(),
        );
        // Not upstream's: upstream's recorder drops silently.
        r.register(
            "events_dropped",
            "Number of Kubernetes events not published, by cause (spam_filter, rate_limit)",
            m.events_dropped_total.clone(),
        );
        // Not upstream's: upstream's informers cannot leave one object out (a list holding an
        // object that does not decode fails as a whole).
        r.register(
            "skipped_objects",
            "Number of watched objects left out of the view because they do not decode or convert, by kind (counted once per object version warned about)",
            m.skipped_objects_total.clone(),
        );
        // Series that always exist upstream, so dashboards see zeros rather than nothing.
        for result in ["succeeded", "failed"] {
            m.evicted_pods_total
                .get_or_create(&label("eviction_result", result))
                .inc_by(0);
        }
        Metrics { registry, ..m }
    }

    /// Registers the five per-node-group gauges.
    fn register_per_node_group(&self, r: &mut Registry) {
        let gauges = [
            (
                "node_group_min_count",
                "Minimum number of nodes in the node group",
                &self.node_group_min_count,
            ),
            (
                "node_group_max_count",
                "Maximum number of nodes in the node group",
                &self.node_group_max_count,
            ),
            (
                "node_group_target_count",
                "Target number of nodes in the node group by CA",
                &self.node_group_target_count,
            ),
            (
                "node_group_healthiness",
                "Whether or not node group is healthy enough for autoscaling. 1 if it is, 0 otherwise",
                &self.node_group_healthiness,
            ),
            (
                "node_group_backoff_status",
                "Whether or not node group is backoff for not autoscaling. 1 if it is, 0 otherwise",
                &self.node_group_backoff_status,
            ),
        ];
        for (name, help, family) in gauges {
            r.register(name, help, family.clone());
        }
    }

    /// The metrics in OpenMetrics text format (ends with `# EOF`); see [`CONTENT_TYPE`].
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail; an encoder error would only truncate the page.
        if encode(&mut out, &self.registry).is_err() {
            tracing::warn!("metrics encoding failed");
        }
        out
    }

    /// Sets the gauges from one loop's outcome and the view it was decided on.
    pub fn observe_outcome(&self, view: &ClusterView<'_>, outcome: &LoopOutcome) {
        let status = &outcome.status;
        self.cluster_safe_to_autoscale
            .set(i64::from(status.healthy));

        let (mut unregistered, mut long_unregistered) = (0, 0);
        for g in &status.groups {
            unregistered += g.readiness.unregistered + g.readiness.failed;
            long_unregistered += g.readiness.long_unregistered;
        }
        for (state, n) in [
            ("ready", status.ready),
            ("unready", status.unready),
            ("notStarted", status.not_started),
            ("longUnregistered", long_unregistered),
            ("unregistered", unregistered),
        ] {
            self.nodes_count
                .get_or_create(&label("state", state))
                .set(count(n));
        }

        let groups = view.provider.node_groups();
        self.node_groups_count
            .get_or_create(&label("node_group_type", "autoscaled"))
            .set(count(groups.len()));
        self.node_groups_count
            .get_or_create(&label("node_group_type", "autoprovisioned"))
            .set(0);

        let unschedulable = view.pods.iter().filter(|p| is_unschedulable(p)).count();
        self.unschedulable_pods_count
            .get_or_create(&label("type", "unschedulable"))
            .set(count(unschedulable));
        // Set by `scheduler_unprocessed` when schedulers are bypassed.
        self.scheduler_unprocessed(0);

        self.max_nodes_count
            .set(count(groups.iter().map(|g| g.max_size()).sum()));
        let totals = ClusterTotals::from_nodes(view.nodes.iter().map(|n| &**n).filter(|n| {
            n.deletion_ms.is_none()
                && !n
                    .taints
                    .iter()
                    .any(|t| t.key.as_str() == TO_BE_DELETED_TAINT)
        }));
        self.cluster_cpu_current_cores.set(totals.cpu / 1000);
        self.cluster_memory_current_bytes.set(totals.memory);

        if self.per_node_group {
            self.observe_groups(status);
        }

        let plan = &outcome.scale_down;
        self.unneeded_nodes_count.set(count(plan.unneeded.len()));
        self.unremovable_nodes_count.clear();
        for (_, reason) in unremovable_reasons(view, plan) {
            self.unremovable_nodes_count
                .get_or_create(&label("reason", reason))
                .inc();
        }
        let cooldown = plan
            .waiting
            .iter()
            .any(|(_, w)| matches!(w, Waiting::Cooldown(_)));
        self.scale_down_in_cooldown.set(i64::from(cooldown));
        self.pending_node_deletions.set(count(status.being_deleted));

        let mut skipped = [0usize; 3];
        for (_, why) in &outcome.scale_up.set_aside {
            skipped[skipped_index(why)] += 1;
        }
        for (reason, n) in SKIPPED_REASONS.iter().zip(skipped) {
            self.skipped_pods_count
                .get_or_create(&label("reason", reason))
                .set(count(n));
        }
    }

    /// Sets `cpu_limits_cores` and `memory_limits_bytes` (`direction` `minimum` / `maximum`)
    /// from the cluster-wide limits the loop decides with (`--cores-total`, `--memory-total`).
    pub fn observe_limits(&self, limits: &ResourceLimits) {
        for (direction, cores, bytes) in [
            ("minimum", limits.cpu.min(), limits.memory.min()),
            ("maximum", limits.cpu.max(), limits.memory.max()),
        ] {
            self.cpu_limits_cores
                .get_or_create(&label("direction", direction))
                .set(cores / 1000);
            self.memory_limits_bytes
                .get_or_create(&label("direction", direction))
                .set(bytes);
        }
    }

    /// Observes `node_removal_latency_seconds` for the nodes that were unneeded in the previous
    /// loop and are not any more: `deleted="true"` when the node is gone or being deleted,
    /// `"false"` when it became needed again; the time since it became unneeded. `now_ms` is the
    /// loop's decision time.
    pub fn observe_removals(&self, view: &ClusterView<'_>, outcome: &LoopOutcome, now_ms: i64) {
        let now: rustc_hash::FxHashMap<String, i64> = outcome
            .scale_down
            .unneeded
            .iter()
            .map(|(n, since)| (n.as_str().to_string(), *since))
            .collect();
        let mut previous = self
            .unneeded_since
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let gone: Vec<(&String, i64)> = previous
            .iter()
            .filter(|(n, _)| !now.contains_key(*n))
            .map(|(n, since)| (n, *since))
            .collect();
        if !gone.is_empty() {
            let live: rustc_hash::FxHashMap<&str, &Node> =
                view.nodes.iter().map(|n| (n.name.as_str(), &**n)).collect();
            for (name, since) in gone {
                let deleted = live.get(name.as_str()).is_none_or(|n| being_deleted(n));
                let secs = now_ms.saturating_sub(since).max(0) as f64 / 1000.0;
                self.node_removal_latency_seconds
                    .get_or_create(&label("deleted", if deleted { "true" } else { "false" }))
                    .observe(secs);
            }
        }
        *previous = now;
    }

    /// Sets the per-group gauges. The families are rebuilt so groups that disappeared and
    /// backoffs that ended leave no stale series behind.
    fn observe_groups(&self, status: &ClusterStatus) {
        for family in [
            &self.node_group_min_count,
            &self.node_group_max_count,
            &self.node_group_target_count,
            &self.node_group_healthiness,
            &self.node_group_backoff_status,
        ] {
            family.clear();
        }
        for g in &status.groups {
            let l = label("node_group", g.id.as_str());
            self.node_group_min_count
                .get_or_create(&l)
                .set(count(g.min_size));
            self.node_group_max_count
                .get_or_create(&l)
                .set(count(g.max_size));
            self.node_group_target_count
                .get_or_create(&l)
                .set(count(g.target_size));
            self.node_group_healthiness
                .get_or_create(&l)
                .set(i64::from(g.unhealthy.is_none()));
            let (reason, on) = match &g.backoff {
                Some(b) => (b.reason.code.clone(), 1),
                None => (String::new(), 0),
            };
            self.node_group_backoff_status
                .get_or_create(&vec![
                    ("node_group", g.id.as_str().to_string()),
                    ("reason", reason),
                ])
                .set(on);
        }
    }

    /// Sets `unschedulable_pods_count{type="scheduler_unprocessed"}`: pending pods of a
    /// bypassed scheduler it has not processed yet (`--bypassed-scheduler-names`).
    pub fn scheduler_unprocessed(&self, pods: usize) {
        self.unschedulable_pods_count
            .get_or_create(&label("type", "scheduler_unprocessed"))
            .set(count(pods));
    }

    /// Counts `nodes` added by a scale-up that the provider accepted.
    pub fn scaled_up(&self, nodes: u64) {
        self.scaled_up_nodes_total.inc_by(nodes);
    }

    /// Counts `nodes` GPU nodes added (besides [`Metrics::scaled_up`]), by GPU resource and type.
    pub fn scaled_up_gpu(&self, nodes: u64, gpu: &GpuLabels) {
        self.scaled_up_gpu_nodes_total
            .get_or_create(&gpu.with(Vec::new()))
            .inc_by(nodes);
    }

    /// Counts one failed scale-up, and in `failed_gpu_scale_ups_total` too when the group's
    /// nodes have a GPU.
    pub fn failed_scale_up(&self, reason: FailedScaleUpReason, gpu: Option<&GpuLabels>) {
        let l = label("reason", reason.as_str());
        self.failed_scale_ups_total.get_or_create(&l).inc();
        if let Some(gpu) = gpu {
            self.failed_gpu_scale_ups_total
                .get_or_create(&gpu.with(l))
                .inc();
        }
    }

    /// Counts `nodes` removed for `reason`.
    pub fn scaled_down(&self, nodes: u64, reason: ScaleDownReason) {
        self.scaled_down_nodes_total
            .get_or_create(&label("reason", reason.as_str()))
            .inc_by(nodes);
    }

    /// Counts `nodes` GPU nodes removed for `reason` (besides [`Metrics::scaled_down`]), by GPU
    /// resource and type.
    pub fn scaled_down_gpu(&self, nodes: u64, reason: ScaleDownReason, gpu: &GpuLabels) {
        self.scaled_down_gpu_nodes_total
            .get_or_create(&gpu.with(label("reason", reason.as_str())))
            .inc_by(nodes);
    }

    /// Counts one eviction attempt: `ok` when the Eviction was created.
    pub fn evicted(&self, ok: bool) {
        let result = if ok { "succeeded" } else { "failed" };
        self.evicted_pods_total
            .get_or_create(&label("eviction_result", result))
            .inc();
    }

    /// Counts one failed loop or failed step, by error type (upstream uses `cloudProviderError`,
    /// `apiCallError`, `internalError`, `transientError`, ...).
    pub fn error(&self, kind: &str) {
        self.errors_total.get_or_create(&label("type", kind)).inc();
    }

    /// Records `n` events dropped for `cause` (`spam_filter`, `rate_limit`).
    pub fn events_dropped(&self, cause: &str, n: u64) {
        if n > 0 {
            self.events_dropped_total
                .get_or_create(&label("reason", cause))
                .inc_by(n);
        }
    }

    /// Counts one object of `kind` left out of the view (see [`crate::skipped`]).
    pub fn skipped_object(&self, kind: &str) {
        self.skipped_objects_total
            .get_or_create(&label("kind", kind))
            .inc();
    }

    /// Records that `function` (`main`, `scaleUp`, `scaleDown`, `findUnneeded`,
    /// `updateClusterState`, ...) took `seconds`.
    pub fn function_duration(&self, function: &str, seconds: f64) {
        self.function_duration_seconds
            .get_or_create(&label("function", function))
            .observe(seconds);
    }

    /// Records that `activity` (`main`, `autoscaling`, `scaleUp`, `scaleDown`) last ran at
    /// `unix_secs`.
    pub fn last_activity(&self, activity: &str, unix_secs: i64) {
        // Unix seconds are exact in an f64 for the next few million years.
        self.last_activity
            .get_or_create(&label("activity", activity))
            .set(unix_secs as f64);
    }

    /// Counts `n` long-unregistered instances removed.
    pub fn old_unregistered_removed(&self, n: u64) {
        self.old_unregistered_nodes_removed_count
            .inc_by(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Counts one scaling event skipped; `direction` is `up` or `down`, `reason` e.g.
    /// `CpuResourceLimit` or `MemoryResourceLimit`.
    pub fn skipped_scale_event(&self, direction: &str, reason: &str) {
        self.skipped_scale_events_count
            .get_or_create(&vec![
                ("direction", direction.to_string()),
                ("reason", reason.to_string()),
            ])
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_cluster::Cluster;
    use std::collections::BTreeMap;

    use autoscaler_core::{Autoscaler, AutoscalerOptions};

    use autoscaler_model::testing::GI;

    /// One parsed exposition: samples by `name{sorted labels}`, and each family's type.
    #[derive(Debug, Default)]
    struct Parsed {
        samples: BTreeMap<String, f64>,
        types: BTreeMap<String, String>,
    }

    fn is_name(s: &str) -> bool {
        let mut chars = s.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    }

    /// Parses `k="v",k2="v2"` (values with `\\`, `\"`, `\n` escapes); returns them sorted.
    fn parse_labels(s: &str) -> Result<Vec<(String, String)>, String> {
        let mut out = Vec::new();
        let mut rest = s;
        while !rest.is_empty() {
            let eq = rest.find('=').ok_or(format!("no '=' in labels {s}"))?;
            let key = &rest[..eq];
            if !is_name(key) {
                return Err(format!("bad label name {key:?}"));
            }
            let mut chars = rest[eq + 1..].char_indices();
            if chars.next().map(|c| c.1) != Some('"') {
                return Err(format!("label value not quoted in {s}"));
            }
            let mut value = String::new();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => match chars.next().map(|c| c.1) {
                        Some('\\') => value.push('\\'),
                        Some('"') => value.push('"'),
                        Some('n') => value.push('\n'),
                        other => return Err(format!("bad escape {other:?}")),
                    },
                    '"' => {
                        end = Some(eq + 1 + i + 1);
                        break;
                    }
                    c => value.push(c),
                }
            }
            let end = end.ok_or(format!("unterminated value in {s}"))?;
            out.push((key.to_string(), value));
            rest = &rest[end..];
            if let Some(r) = rest.strip_prefix(',') {
                rest = r;
            } else if !rest.is_empty() {
                return Err(format!("junk after label value: {rest:?}"));
            }
        }
        out.sort();
        Ok(out)
    }

    /// A strict parser of the text exposition: every line is `# HELP`, `# TYPE`, `# UNIT`, a
    /// sample of a declared family (name, or name with a suffix its type allows), or the final
    /// `# EOF`.
    fn parse(text: &str) -> Result<Parsed, String> {
        let mut p = Parsed::default();
        let mut lines: Vec<&str> = text.split('\n').collect();
        if lines.pop() != Some("") {
            return Err("no final newline".into());
        }
        if lines.pop() != Some("# EOF") {
            return Err("no # EOF".into());
        }
        let mut current: Option<(String, String)> = None;
        for line in lines {
            if let Some(rest) = line.strip_prefix("# ") {
                let mut parts = rest.splitn(3, ' ');
                let kind = parts.next().unwrap_or("");
                let name = parts.next().ok_or(format!("bad line {line}"))?;
                let arg = parts.next().ok_or(format!("bad line {line}"))?;
                if !is_name(name) {
                    return Err(format!("bad name in {line}"));
                }
                match kind {
                    "HELP" | "UNIT" => {}
                    "TYPE" => {
                        if !["counter", "gauge", "histogram", "unknown", "info"].contains(&arg) {
                            return Err(format!("bad type in {line}"));
                        }
                        if p.types.insert(name.into(), arg.into()).is_some() {
                            return Err(format!("family declared twice: {line}"));
                        }
                        current = Some((name.into(), arg.into()));
                    }
                    _ => return Err(format!("bad comment {line}")),
                }
                continue;
            }
            let (series, value) = line.rsplit_once(' ').ok_or(format!("bad sample {line}"))?;
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v.parse().map_err(|e| format!("bad value in {line}: {e}"))?,
            };
            let (name, labels) = match series.split_once('{') {
                Some((n, l)) => (
                    n,
                    parse_labels(l.strip_suffix('}').ok_or(format!("bad labels {line}"))?)?,
                ),
                None => (series, Vec::new()),
            };
            let (family, ty) = current
                .as_ref()
                .ok_or(format!("sample before TYPE: {line}"))?;
            let suffix = name
                .strip_prefix(family.as_str())
                .ok_or(format!("sample {name} outside its family {family}"))?;
            let allowed: &[&str] = match ty.as_str() {
                "counter" => &["_total", "_created"],
                "histogram" => &["_bucket", "_sum", "_count", "_created"],
                _ => &[""],
            };
            if !allowed.contains(&suffix) {
                return Err(format!("suffix {suffix:?} not allowed for a {ty}: {line}"));
            }
            let key = format!(
                "{name}{{{}}}",
                labels
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            );
            if p.samples.insert(key, value).is_some() {
                return Err(format!("duplicate sample {line}"));
            }
        }
        Ok(p)
    }

    /// The shared test cluster with three pending pods: the loop grows `ng` by 2.
    fn scaled_up_loop() -> (Cluster, LoopOutcome) {
        let c = Cluster::new(10, 3);
        let outcome = c.run(&mut Autoscaler::new(AutoscalerOptions::default()), 0);
        (c, outcome)
    }

    #[test]
    fn the_exposition_parses_and_carries_upstream_names_and_values() {
        let (c, outcome) = scaled_up_loop();
        assert_eq!(outcome.scale_up.result.total_nodes(), 2);
        let view = c.view();
        let m = Metrics::with_per_node_group(true);
        m.observe_outcome(&view, &outcome);
        m.scaled_up(2);
        let t4 = GpuLabels {
            resource_name: "nvidia.com/gpu".into(),
            gpu_name: "nvidia-tesla-t4".into(),
        };
        m.scaled_up_gpu(1, &t4);
        m.failed_scale_up(FailedScaleUpReason::Timeout, None);
        m.failed_scale_up(FailedScaleUpReason::CloudProviderError, Some(&t4));
        m.scaled_down(1, ScaleDownReason::Empty);
        m.scaled_down_gpu(1, ScaleDownReason::Empty, &t4);
        m.scaled_down(2, ScaleDownReason::Underutilized);
        m.evicted(true);
        m.evicted(true);
        m.evicted(false);
        m.error("apiCallError");
        m.function_duration("main", 0.02);
        m.function_duration("main", 3.0);
        m.function_duration("scaleUp", 0.001);
        m.last_activity("main", 1_700_000_000);
        m.old_unregistered_removed(3);
        m.skipped_scale_event("up", "CpuResourceLimit");

        let text = m.encode();
        let p = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let get = |k: &str| {
            *p.samples
                .get(k)
                .unwrap_or_else(|| panic!("no sample {k} in\n{text}"))
        };
        let c = "cluster_autoscaler_";
        let expect = [
            ("cluster_safe_to_autoscale{}", 1.0),
            ("nodes_count{state=ready}", 2.0),
            ("nodes_count{state=unready}", 0.0),
            ("nodes_count{state=notStarted}", 0.0),
            ("nodes_count{state=longUnregistered}", 0.0),
            ("nodes_count{state=unregistered}", 0.0),
            ("node_groups_count{node_group_type=autoscaled}", 1.0),
            ("node_groups_count{node_group_type=autoprovisioned}", 0.0),
            ("unschedulable_pods_count{type=unschedulable}", 3.0),
            ("unschedulable_pods_count{type=scheduler_unprocessed}", 0.0),
            ("max_nodes_count{}", 10.0),
            ("cluster_cpu_current_cores{}", 8.0),
            ("cluster_memory_current_bytes{}", (32 * GI) as f64),
            ("node_group_min_count{node_group=ng}", 1.0),
            ("node_group_max_count{node_group=ng}", 10.0),
            ("node_group_target_count{node_group=ng}", 2.0),
            ("node_group_healthiness{node_group=ng}", 1.0),
            ("node_group_backoff_status{node_group=ng,reason=}", 0.0),
            ("last_activity{activity=main}", 1.7e9),
            ("function_duration_seconds_count{function=main}", 2.0),
            ("function_duration_seconds_sum{function=main}", 3.02),
            (
                "function_duration_seconds_bucket{function=main,le=0.01}",
                0.0,
            ),
            (
                "function_duration_seconds_bucket{function=main,le=0.0225}",
                1.0,
            ),
            (
                "function_duration_seconds_bucket{function=main,le=+Inf}",
                2.0,
            ),
            ("function_duration_seconds_count{function=scaleUp}", 1.0),
            ("errors_total{type=apiCallError}", 1.0),
            ("scaled_up_nodes_total{}", 2.0),
            (
                "scaled_up_gpu_nodes_total{gpu_name=nvidia-tesla-t4,gpu_resource_name=nvidia.com/gpu}",
                1.0,
            ),
            ("failed_scale_ups_total{reason=timeout}", 1.0),
            ("failed_scale_ups_total{reason=cloudProviderError}", 1.0),
            (
                "failed_gpu_scale_ups_total{gpu_name=nvidia-tesla-t4,gpu_resource_name=nvidia.com/gpu,reason=cloudProviderError}",
                1.0,
            ),
            ("scaled_down_nodes_total{reason=empty}", 1.0),
            (
                "scaled_down_gpu_nodes_total{gpu_name=nvidia-tesla-t4,gpu_resource_name=nvidia.com/gpu,reason=empty}",
                1.0,
            ),
            ("scaled_down_nodes_total{reason=underutilized}", 2.0),
            ("evicted_pods_total{eviction_result=succeeded}", 2.0),
            ("evicted_pods_total{eviction_result=failed}", 1.0),
            ("unneeded_nodes_count{}", 0.0),
            ("scale_down_in_cooldown{}", 0.0),
            ("old_unregistered_nodes_removed_count{}", 3.0),
            (
                "skipped_scale_events_count{direction=up,reason=CpuResourceLimit}",
                1.0,
            ),
        ];
        for (k, v) in expect {
            let got = get(&format!("{c}{k}"));
            assert!((got - v).abs() < 1e-9, "{k}: {got} != {v}");
        }
        // Upstream's types: counters for the *_total series, a histogram for durations.
        for (family, ty) in [
            ("scaled_up_nodes", "counter"),
            ("errors", "counter"),
            ("evicted_pods", "counter"),
            ("function_duration_seconds", "histogram"),
            ("nodes_count", "gauge"),
        ] {
            assert_eq!(
                p.types.get(&format!("{c}{family}")).map(String::as_str),
                Some(ty)
            );
        }
    }

    #[test]
    fn a_backed_off_unhealthy_group_shows_in_its_gauges_and_stale_series_go() {
        let (c, mut outcome) = scaled_up_loop();
        let view = c.view();
        let m = Metrics::with_per_node_group(true);
        m.observe_outcome(&view, &outcome);
        let g = &mut outcome.status.groups[0];
        g.unhealthy = Some("no nodes".into());
        g.backoff = Some(autoscaler_core::BackoffStatus {
            until_ms: 1,
            failures: 1,
            reason: autoscaler_core::FailureReason {
                class: autoscaler_model::InstanceErrorClass::OutOfResources,
                code: "QUOTA_EXCEEDED".into(),
                message: "quota".into(),
            },
        });
        outcome.status.healthy = false;
        m.observe_outcome(&view, &outcome);
        let p = parse(&m.encode()).expect("parses");
        let c = "cluster_autoscaler_";
        assert_eq!(p.samples[&format!("{c}cluster_safe_to_autoscale{{}}")], 0.0);
        assert_eq!(
            p.samples[&format!("{c}node_group_healthiness{{node_group=ng}}")],
            0.0
        );
        assert_eq!(
            p.samples
                [&format!("{c}node_group_backoff_status{{node_group=ng,reason=QUOTA_EXCEEDED}}")],
            1.0
        );
        assert!(
            !p.samples.contains_key(&format!(
                "{c}node_group_backoff_status{{node_group=ng,reason=}}"
            )),
            "the series of the previous loop is gone"
        );
    }

    /// Without `--emit-per-nodegroup-metrics` (upstream's default) the five per-group gauges
    /// are not exposed at all; the cluster-wide ones are.
    #[test]
    fn per_node_group_gauges_only_with_the_flag() {
        let (c, outcome) = scaled_up_loop();
        let view = c.view();
        let m = Metrics::new();
        m.observe_outcome(&view, &outcome);
        let text = m.encode();
        let p = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        for family in [
            "node_group_min_count",
            "node_group_max_count",
            "node_group_target_count",
            "node_group_healthiness",
            "node_group_backoff_status",
        ] {
            assert!(
                !text.contains(&format!("{PREFIX}_{family}")),
                "{family} in\n{text}"
            );
        }
        assert_eq!(p.samples[&format!("{PREFIX}_max_nodes_count{{}}")], 10.0);
    }

    #[test]
    fn gpu_labels_come_from_the_gpu_resource_and_the_provider_label() {
        use autoscaler_model::testing::NodeBuilder;
        let label = Some("cluster-api/accelerator");
        let plain = NodeBuilder::new("n", 4000, GI).build();
        assert_eq!(GpuLabels::of_node(&plain, label), None);
        let t4 = NodeBuilder::new("g", 4000, GI)
            .resource("nvidia.com/gpu", 2)
            .label("cluster-api/accelerator", "nvidia-t4")
            .build();
        let got = GpuLabels::of_node(&t4, label).expect("a GPU node");
        assert_eq!(
            (got.resource_name.as_str(), got.gpu_name.as_str()),
            ("nvidia.com/gpu", "nvidia-t4")
        );
        let unlabelled = GpuLabels::of_node(&t4, None).expect("a GPU node");
        assert_eq!(unlabelled.gpu_name, "generic");
    }

    #[test]
    fn the_parser_rejects_malformed_text() {
        assert!(parse("x 1\n# EOF\n").is_err(), "sample before TYPE");
        assert!(parse("# TYPE x gauge\nx 1\n").is_err(), "no EOF");
        assert!(parse("# TYPE x gauge\nx{a=\"1} 1\n# EOF\n").is_err());
        assert!(
            parse("# TYPE x counter\nx 1\n# EOF\n").is_err(),
            "no _total"
        );
        assert!(parse("# TYPE x gauge\nx{a=\"1\"} 1\n# EOF\n").is_ok());
    }

    #[test]
    fn dropped_events_are_counted_by_cause() {
        let m = Metrics::new();
        m.events_dropped("spam_filter", 3);
        m.events_dropped("spam_filter", 2);
        m.events_dropped("rate_limit", 0);
        let text = m.encode();
        let p = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let c = format!("{PREFIX}_");
        assert_eq!(
            p.samples
                .get(&format!("{c}events_dropped_total{{reason=spam_filter}}"))
                .copied(),
            Some(5.0),
            "{text}"
        );
        assert!(!text.contains("reason=\"rate_limit\""), "{text}");
    }

    /// Upstream's `cpu_limits_cores`, `memory_limits_bytes`, `pending_node_deletions` and
    /// `skipped_pods_count`: exposed with upstream's names, labels and units, and set from the
    /// limits and the loop.
    #[test]
    fn limits_pending_deletions_and_skipped_pods_are_exposed_and_move() {
        let (c, mut outcome) = scaled_up_loop();
        let view = c.view();
        let m = Metrics::new();
        m.observe_limits(&ResourceLimits::default());
        outcome.status.being_deleted = 2;
        let pod = c.pods[1].clone();
        outcome.scale_up.set_aside = vec![
            (pod.clone(), SetAside::TooYoung { eligible_at_ms: 5 }),
            (pod.clone(), SetAside::TooYoung { eligible_at_ms: 6 }),
            (
                pod,
                SetAside::Expendable {
                    priority: -20,
                    cutoff: -10,
                },
            ),
        ];
        m.observe_outcome(&view, &outcome);
        let text = m.encode();
        let p = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let c = "cluster_autoscaler_";
        for (k, v) in [
            ("cpu_limits_cores{direction=minimum}", 0.0),
            ("cpu_limits_cores{direction=maximum}", 320_000.0),
            ("memory_limits_bytes{direction=minimum}", 0.0),
            (
                "memory_limits_bytes{direction=maximum}",
                (6_400_000 * GI) as f64,
            ),
            ("pending_node_deletions{}", 2.0),
            ("skipped_pods_count{reason=too_young}", 2.0),
            ("skipped_pods_count{reason=expendable}", 1.0),
            ("skipped_pods_count{reason=nominated}", 0.0),
        ] {
            let key = format!("{c}{k}");
            assert_eq!(p.samples.get(&key).copied(), Some(v), "{key} in\n{text}");
        }
        for family in [
            "cpu_limits_cores",
            "memory_limits_bytes",
            "pending_node_deletions",
            "skipped_pods_count",
        ] {
            assert_eq!(
                p.types.get(&format!("{c}{family}")).map(String::as_str),
                Some("gauge")
            );
        }
        // The next loop: nothing set aside, nothing being deleted.
        outcome.scale_up.set_aside.clear();
        outcome.status.being_deleted = 0;
        m.observe_outcome(&view, &outcome);
        let p = parse(&m.encode()).expect("parses");
        assert_eq!(p.samples[&format!("{c}pending_node_deletions{{}}")], 0.0);
        assert_eq!(
            p.samples[&format!("{c}skipped_pods_count{{reason=too_young}}")],
            0.0
        );
    }

    /// `unremovable_nodes_count{reason}` counts, as upstream does, the unneeded nodes a loop
    /// keeps under their reason (`NotUnneededLongEnough`, `NodeGroupMinSizeReached`, ...) besides
    /// the unremovable ones; not those kept by the cool-down.
    #[test]
    fn unneeded_nodes_kept_are_counted_as_unremovable_by_their_reason() {
        use autoscaler_core::Unremovable;
        let (c, mut outcome) = scaled_up_loop();
        let (n1, n2) = (c.nodes[0].name, c.nodes[1].name);
        let plan = &mut outcome.scale_down;
        plan.unremovable = vec![(n1, Unremovable::MinSizeReached)];
        plan.waiting = vec![(n2, Waiting::UnneededTime { deletable_at_ms: 1 })];
        let m = Metrics::new();
        m.observe_outcome(&c.view(), &outcome);
        let s = parse(&m.encode()).expect("parses").samples;
        let c = "cluster_autoscaler_unremovable_nodes_count";
        assert_eq!(s[&format!("{c}{{reason=NodeGroupMinSizeReached}}")], 1.0);
        assert_eq!(s[&format!("{c}{{reason=NotUnneededLongEnough}}")], 1.0);
        outcome.scale_down.waiting = vec![(n2, Waiting::Cooldown("after a scale-up".into()))];
        m.observe_outcome(&scaled_up_loop().0.view(), &outcome);
        let s = parse(&m.encode()).expect("parses").samples;
        assert!(!s.contains_key(&format!("{c}{{reason=NotUnneededLongEnough}}")));
        assert_eq!(s[&format!("{c}{{reason=NodeGroupMinSizeReached}}")], 1.0);
    }

    /// `node_removal_latency_seconds{deleted}`: a node unneeded in one loop and gone (or tainted
    /// for deletion) in the next is observed as deleted, one that became needed again as not,
    /// each with the time since it became unneeded.
    #[test]
    fn removal_latency_is_observed_when_a_node_stops_being_unneeded() {
        let (mut c, mut outcome) = scaled_up_loop();
        let m = Metrics::new();
        let (n1, n2) = (c.nodes[0].name, c.nodes[1].name);
        outcome.scale_down.unneeded = vec![(n1, 1_000), (n2, 2_000)];
        m.observe_removals(&c.view(), &outcome, 5_000);
        let hist = |m: &Metrics| parse(&m.encode()).expect("parses").samples;
        assert!(
            !hist(&m)
                .keys()
                .any(|k| k.starts_with("cluster_autoscaler_node_removal_latency_seconds_count")),
            "nothing observed while both stay unneeded"
        );
        // n1 is removed, n2 stays and is needed again.
        c.nodes.remove(0);
        outcome.scale_down.unneeded.clear();
        m.observe_removals(&c.view(), &outcome, 31_000);
        let s = hist(&m);
        let c = "cluster_autoscaler_node_removal_latency_seconds";
        assert_eq!(s[&format!("{c}_count{{deleted=true}}")], 1.0);
        assert_eq!(s[&format!("{c}_sum{{deleted=true}}")], 30.0);
        assert_eq!(s[&format!("{c}_count{{deleted=false}}")], 1.0);
        assert_eq!(s[&format!("{c}_sum{{deleted=false}}")], 29.0);
        // Upstream's buckets: 1 s growing by 1.5x.
        assert_eq!(
            s[&format!("{c}_bucket{{deleted=true,le=25.62890625}}")],
            0.0
        );
        assert_eq!(
            s[&format!("{c}_bucket{{deleted=true,le=38.443359375}}")],
            1.0
        );
        // Observed once: the next loop has nothing more to say about them.
        m.observe_removals(&view_without_nodes(), &outcome, 60_000);
        assert_eq!(hist(&m)[&format!("{c}_count{{deleted=true}}")], 1.0);
    }

    fn view_without_nodes() -> ClusterView<'static> {
        static PROVIDER: std::sync::LazyLock<autoscaler_model::StaticProvider> =
            std::sync::LazyLock::new(|| autoscaler_model::StaticProvider::new(Vec::new()));
        ClusterView {
            nodes: &[],
            pods: &[],
            daemonsets: &[],
            namespaces: &[],
            provider: &*PROVIDER,
            pdbs: &[],
            storage: autoscaler_model::Storage::none(),
        }
    }

    #[test]
    fn scale_down_reasons_follow_readiness_then_emptiness() {
        assert_eq!(ScaleDownReason::of(true, false), ScaleDownReason::Unready);
        assert_eq!(ScaleDownReason::of(true, true), ScaleDownReason::Empty);
        assert_eq!(
            ScaleDownReason::of(false, true),
            ScaleDownReason::Underutilized
        );
    }
}

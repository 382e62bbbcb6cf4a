//! Balancing of similar node groups (seed 001): which groups count as "the same machine in another
//! zone", and how a scale-up of `K` nodes is split between such groups so their sizes stay as
//! even as possible.
//!
//! Everything here is a pure function of shapes and sizes built by the caller (from a group's
//! template node and the DaemonSet pods that would run on it). This module decides similarity and
//! the split; it must never pick which pods fit where (the caller keeps only the similar groups on
//! which every pod of the chosen expansion option schedules), never read a provider and never
//! resize anything.
//!
//! # Similarity (upstream `--balance-similar-node-groups` behaviour)
//!
//! Two groups are similar when all of these hold, checked in this order:
//! 1. **Capacity** is equal for every resource, except memory, which may differ by
//!    [`BalancingOptions::memory_difference_ratio`] (kernels reserve slightly different amounts of
//!    memory in different zones).
//! 2. **Allocatable** is within [`BalancingOptions::max_allocatable_difference_ratio`] for every
//!    resource (cpu, memory, ephemeral storage, pods and every extended resource).
//! 3. **Free** (allocatable minus DaemonSet requests) is within
//!    [`BalancingOptions::max_free_difference_ratio`] for every resource. Pod slots are not
//!    consumed by requests here (as upstream, where the requested-resources vector never counts
//!    pods), so free pods equal allocatable pods.
//! 4. **Labels** are equal (same keys, same values) except the ignored ones: [`BASIC_IGNORED_LABELS`]
//!    (zone, region, hostname and a few more), [`CLUSTER_API_IGNORED_LABELS`] (per-provider zone
//!    and pool labels, as upstream's Cluster API comparator) and
//!    [`BalancingOptions::ignored_labels`].
//!
//! A resource absent from one side counts as zero, so a group with a GPU is never similar to one
//! without. A template's DRA GPUs ([`autoscaler_model::is_dra_gpu`]) count as a capacity and an
//! allocatable named after their driver (`gpu.nvidia.com`), so a group of 8-GPU nodes is not
//! similar to one of 4-GPU nodes whether the GPUs are extended resources or DRA devices (ours:
//! upstream's comparator reads the node's capacity and allocatable only, and so would balance
//! such DRA groups). Tolerances use [`within_ratio`]: `|a − b| ≤ ratio × max(a, b)`, i.e. the difference
//! is measured against the *larger* value, as upstream's comparator does (its flag help text says
//! "ratio of the smaller", but the code compares against the larger; we follow the code).
//!
//! If [`BalancingOptions::balancing_labels`] is non-empty it replaces all of the above: two groups
//! are similar exactly when each of those labels is present on both with equal values (upstream
//! `--balancing-label`); resources are not compared.
//!
//! # Split
//!
//! [`split`] hands out nodes one at a time to the smallest group that is below its maximum, ties
//! going to the lower index, skipping full groups; what does not fit is `unplaced`. It computes
//! the same result by water-filling in `O(groups × log(max size))`, independent of the number of
//! nodes.

use autoscaler_model::Labels;
use autoscaler_model::Sym;
use autoscaler_model::{Node, ResourceName, Resources, template_dra_gpus};

/// Labels never compared: they differ between zones or between instances of the same machine
/// type. Upstream's basic set: hostname, both zone and region labels (stable and legacy beta),
/// the fluentd DaemonSet migration label and kops' instance group name.
pub const BASIC_IGNORED_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/fluentd-ds-ready",
    "kops.k8s.io/instancegroup",
];

/// Infrastructure-specific labels also ignored for Cluster API node groups (upstream's Cluster API
/// comparator): CSI topology zones, cloud node pool names and instance ids of the usual
/// infrastructure providers, which differ between otherwise identical MachineDeployments.
pub const CLUSTER_API_IGNORED_LABELS: &[&str] = &[
    "topology.diskplugin.csi.alibabacloud.com/zone",
    "alpha.eksctl.io/instance-id",
    "alpha.eksctl.io/nodegroup-name",
    "eks.amazonaws.com/nodegroup",
    "k8s.amazonaws.com/eniConfig",
    "lifecycle",
    "topology.ebs.csi.aws.com/zone",
    "topology.disk.csi.azure.com/zone",
    "agentpool",
    "kubernetes.azure.com/agentpool",
    "topology.gke.io/zone",
    "ibm-cloud.kubernetes.io/worker-id",
    "vpc-block-csi-driver-labels",
    "ibm-cloud.kubernetes.io/vpc-instance-id",
];

/// How node groups are compared (upstream flags `--max-allocatable-difference-ratio`,
/// `--max-free-difference-ratio`, `--memory-difference-ratio`, `--balancing-ignore-label`,
/// `--balancing-label`).
#[derive(Clone, Debug, PartialEq)]
pub struct BalancingOptions {
    /// Largest relative difference of allocatable, per resource (default 0.05).
    pub(crate) max_allocatable_difference_ratio: f64,
    /// Largest relative difference of free resources (allocatable minus DaemonSet requests), per
    /// resource (default 0.05).
    pub(crate) max_free_difference_ratio: f64,
    /// Largest relative difference of memory capacity (default 0.015). Every other capacity must
    /// be equal.
    pub(crate) memory_difference_ratio: f64,
    /// Labels ignored in addition to [`BASIC_IGNORED_LABELS`] and [`CLUSTER_API_IGNORED_LABELS`].
    pub(crate) ignored_labels: Vec<String>,
    /// If non-empty, groups are similar exactly when these labels are present on both with equal
    /// values; nothing else is compared.
    pub(crate) balancing_labels: Vec<String>,
}

impl Default for BalancingOptions {
    fn default() -> Self {
        BalancingOptions {
            max_allocatable_difference_ratio: 0.05,
            max_free_difference_ratio: 0.05,
            memory_difference_ratio: 0.015,
            ignored_labels: Vec::new(),
            balancing_labels: Vec::new(),
        }
    }
}

/// Why a [`BalancingOptions`] is invalid.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BalancingOptionsError {
    /// A ratio is negative, NaN or infinite.
    #[error("{name} must be a finite number >= 0, got {value}")]
    BadRatio {
        /// Option name.
        name: &'static str,
        /// The value given.
        value: f64,
    },
    /// `balancing_labels` replaces the whole comparison, so extra ignored labels would be silently
    /// meaningless (upstream rejects the combination too).
    #[error("balancing labels cannot be combined with ignored labels")]
    LabelsAndIgnoredLabels,
}

impl BalancingOptions {
    /// Checks the options: ratios finite and non-negative, and `balancing_labels` not combined
    /// with `ignored_labels`.
    pub fn validate(&self) -> Result<(), BalancingOptionsError> {
        for (name, value) in [
            (
                "max-allocatable-difference-ratio",
                self.max_allocatable_difference_ratio,
            ),
            ("max-free-difference-ratio", self.max_free_difference_ratio),
            ("memory-difference-ratio", self.memory_difference_ratio),
        ] {
            if !value.is_finite() || value < 0.0 {
                return Err(BalancingOptionsError::BadRatio { name, value });
            }
        }
        if !self.balancing_labels.is_empty() && !self.ignored_labels.is_empty() {
            return Err(BalancingOptionsError::LabelsAndIgnoredLabels);
        }
        Ok(())
    }

    /// Whether the label `key` is left out of the label comparison.
    pub fn is_ignored_label(&self, key: &str) -> bool {
        BASIC_IGNORED_LABELS.contains(&key)
            || CLUSTER_API_IGNORED_LABELS.contains(&key)
            || self.ignored_labels.iter().any(|l| l == key)
    }
}

/// What a node of a group looks like, for the similarity check: built by the caller from the
/// group's template node and the DaemonSet pods that would run on it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupShape {
    /// The node's `status.capacity`.
    pub capacity: Resources,
    /// The node's `status.allocatable`.
    pub allocatable: Resources,
    /// Sum of the requests of the DaemonSet (and other per-node system) pods on the node.
    pub daemonset_requests: Resources,
    /// The node's labels.
    pub labels: Labels,
}

impl GroupShape {
    /// The shape of `node` (a group's template) with `daemonset_requests`: its capacity and
    /// allocatable, plus its DRA GPUs under their driver's name.
    pub fn of_template(node: &Node, daemonset_requests: Resources) -> GroupShape {
        let mut capacity = node.capacity.clone();
        let mut allocatable = node.allocatable.clone();
        for (driver, n) in template_dra_gpus(node) {
            let name = ResourceName::Extended(driver);
            capacity.set(name, capacity.get(name).saturating_add(n));
            allocatable.set(name, allocatable.get(name).saturating_add(n));
        }
        GroupShape {
            capacity,
            allocatable,
            daemonset_requests,
            labels: node.labels.clone(),
        }
    }

    /// Free resources: allocatable minus DaemonSet requests (may be negative), with pod slots
    /// left at allocatable (requests do not consume pod slots in this comparison).
    pub fn free(&self) -> Resources {
        let mut free = self.allocatable.clone();
        free.sub(&self.daemonset_requests);
        free.pods = self.allocatable.pods;
        free
    }
}

/// Why two groups are not similar (for `plan` explanations). `a` is the first argument of
/// [`similar`], `b` the second.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Dissimilarity {
    /// A capacity other than memory differs.
    #[error("capacity of {resource} differs ({a} vs {b})")]
    Capacity {
        /// Resource.
        resource: ResourceName,
        /// Capacity of the first group.
        a: i64,
        /// Capacity of the second group.
        b: i64,
    },
    /// Memory capacity differs by more than the allowed ratio.
    #[error("memory capacity differs by more than {max_ratio} ({a} vs {b})")]
    MemoryCapacity {
        /// Memory capacity of the first group, bytes.
        a: i64,
        /// Memory capacity of the second group, bytes.
        b: i64,
        /// The allowed ratio.
        max_ratio: f64,
    },
    /// Allocatable of a resource differs by more than the allowed ratio.
    #[error("allocatable {resource} differs by more than {max_ratio} ({a} vs {b})")]
    Allocatable {
        /// Resource.
        resource: ResourceName,
        /// Allocatable of the first group.
        a: i64,
        /// Allocatable of the second group.
        b: i64,
        /// The allowed ratio.
        max_ratio: f64,
    },
    /// Free amount (allocatable minus DaemonSet requests) of a resource differs by more than the
    /// allowed ratio.
    #[error("free {resource} differs by more than {max_ratio} ({a} vs {b})")]
    Free {
        /// Resource.
        resource: ResourceName,
        /// Free amount on the first group.
        a: i64,
        /// Free amount on the second group.
        b: i64,
        /// The allowed ratio.
        max_ratio: f64,
    },
    /// A compared label is missing on one side or has different values.
    #[error("label {key} differs ({} vs {})", show(*.a), show(*.b))]
    Label {
        /// Label key.
        key: Sym,
        /// Value on the first group (`None`: absent).
        a: Option<Sym>,
        /// Value on the second group (`None`: absent).
        b: Option<Sym>,
    },
    /// A balancing label is missing on either side or has different values.
    #[error("balancing label {key} differs ({} vs {})", show(*.a), show(*.b))]
    BalancingLabel {
        /// Label key.
        key: String,
        /// Value on the first group (`None`: absent).
        a: Option<Sym>,
        /// Value on the second group (`None`: absent).
        b: Option<Sym>,
    },
}

fn show(v: Option<Sym>) -> &'static str {
    v.map_or("<absent>", Sym::as_str)
}

/// Whether `a` and `b` are within `ratio` of each other: `|a − b| ≤ ratio × max(a, b)`. Equal
/// values always are; otherwise a NaN ratio or a non-positive larger value never is.
pub fn within_ratio(a: i64, b: i64, ratio: f64) -> bool {
    if a == b {
        return true;
    }
    let (larger, smaller) = if a > b { (a, b) } else { (b, a) };
    let diff = (i128::from(larger) - i128::from(smaller)) as f64;
    diff <= larger as f64 * ratio
}

/// Every resource named in any of `rs`, in a fixed order: cpu, memory, ephemeral storage, pods,
/// then extended resources by symbol.
fn resource_names(rs: &[&Resources]) -> Vec<ResourceName> {
    let mut extended: Vec<Sym> = rs
        .iter()
        .flat_map(|r| r.extended.iter().map(|(k, _)| *k))
        .collect();
    extended.sort_unstable();
    extended.dedup();
    [
        ResourceName::Cpu,
        ResourceName::Memory,
        ResourceName::EphemeralStorage,
        ResourceName::Pods,
    ]
    .into_iter()
    .chain(extended.into_iter().map(ResourceName::Extended))
    .collect()
}

/// Options resolved once for many comparisons: label keys as symbols.
struct Comparator<'o> {
    opts: &'o BalancingOptions,
    /// Symbols of every ignored label that was ever interned (one never interned is on no node).
    ignored: Vec<Sym>,
    /// Balancing labels with their symbol, if interned.
    balancing: Vec<(&'o str, Option<Sym>)>,
}

impl<'o> Comparator<'o> {
    fn new(opts: &'o BalancingOptions) -> Self {
        let mut ignored: Vec<Sym> = BASIC_IGNORED_LABELS
            .iter()
            .chain(CLUSTER_API_IGNORED_LABELS)
            .copied()
            .chain(opts.ignored_labels.iter().map(String::as_str))
            .filter_map(Sym::lookup)
            .collect();
        ignored.sort_unstable();
        ignored.dedup();
        let balancing = opts
            .balancing_labels
            .iter()
            .map(|l| (l.as_str(), Sym::lookup(l)))
            .collect();
        Comparator {
            opts,
            ignored,
            balancing,
        }
    }

    fn similar(&self, a: &GroupShape, b: &GroupShape) -> Result<(), Dissimilarity> {
        if !self.balancing.is_empty() {
            return self.balancing_labels(a, b);
        }
        self.resources(a, b)?;
        self.labels(a, b)
    }

    fn balancing_labels(&self, a: &GroupShape, b: &GroupShape) -> Result<(), Dissimilarity> {
        for (key, sym) in &self.balancing {
            let va = sym.and_then(|k| a.labels.get(k));
            let vb = sym.and_then(|k| b.labels.get(k));
            if va.is_none() || va != vb {
                return Err(Dissimilarity::BalancingLabel {
                    key: (*key).to_string(),
                    a: va,
                    b: vb,
                });
            }
        }
        Ok(())
    }

    fn resources(&self, a: &GroupShape, b: &GroupShape) -> Result<(), Dissimilarity> {
        let opts = self.opts;
        for resource in resource_names(&[&a.capacity, &b.capacity]) {
            let (ca, cb) = (a.capacity.get(resource), b.capacity.get(resource));
            if resource == ResourceName::Memory {
                if !within_ratio(ca, cb, opts.memory_difference_ratio) {
                    return Err(Dissimilarity::MemoryCapacity {
                        a: ca,
                        b: cb,
                        max_ratio: opts.memory_difference_ratio,
                    });
                }
            } else if ca != cb {
                return Err(Dissimilarity::Capacity {
                    resource,
                    a: ca,
                    b: cb,
                });
            }
        }
        for resource in resource_names(&[&a.allocatable, &b.allocatable]) {
            let (va, vb) = (a.allocatable.get(resource), b.allocatable.get(resource));
            if !within_ratio(va, vb, opts.max_allocatable_difference_ratio) {
                return Err(Dissimilarity::Allocatable {
                    resource,
                    a: va,
                    b: vb,
                    max_ratio: opts.max_allocatable_difference_ratio,
                });
            }
        }
        let (fa, fb) = (a.free(), b.free());
        for resource in resource_names(&[&fa, &fb]) {
            let (va, vb) = (fa.get(resource), fb.get(resource));
            if !within_ratio(va, vb, opts.max_free_difference_ratio) {
                return Err(Dissimilarity::Free {
                    resource,
                    a: va,
                    b: vb,
                    max_ratio: opts.max_free_difference_ratio,
                });
            }
        }
        Ok(())
    }

    fn is_ignored(&self, key: Sym) -> bool {
        self.ignored.binary_search(&key).is_ok()
    }

    /// Walks both sorted label sets at once; the first compared key that differs is reported.
    fn labels(&self, a: &GroupShape, b: &GroupShape) -> Result<(), Dissimilarity> {
        let mut ia = a.labels.iter().peekable();
        let mut ib = b.labels.iter().peekable();
        loop {
            let (key, va, vb) = match (ia.peek().copied(), ib.peek().copied()) {
                (None, None) => return Ok(()),
                (Some((ka, va)), Some((kb, vb))) if ka == kb => {
                    ia.next();
                    ib.next();
                    (ka, Some(va), Some(vb))
                }
                (Some((ka, va)), Some((kb, _))) if ka < kb => {
                    ia.next();
                    (ka, Some(va), None)
                }
                (Some((ka, va)), None) => {
                    ia.next();
                    (ka, Some(va), None)
                }
                (_, Some((kb, vb))) => {
                    ib.next();
                    (kb, None, Some(vb))
                }
            };
            if va != vb && !self.is_ignored(key) {
                return Err(Dissimilarity::Label { key, a: va, b: vb });
            }
        }
    }
}

/// Whether groups shaped `a` and `b` are similar enough to be balanced against each other; if
/// not, the first reason found (see the module docs for the rules and their order).
pub fn similar(
    a: &GroupShape,
    b: &GroupShape,
    opts: &BalancingOptions,
) -> Result<(), Dissimilarity> {
    Comparator::new(opts).similar(a, b)
}

/// Indices of the groups similar to `shapes[chosen]`, in index order, `chosen` itself excluded
/// (empty if `chosen` is out of range). The caller adds `chosen` back, after keeping only the
/// groups on which every pod of the scale-up schedules.
pub fn find_similar(chosen: usize, shapes: &[GroupShape], opts: &BalancingOptions) -> Vec<usize> {
    let Some(base) = shapes.get(chosen) else {
        return Vec::new();
    };
    let cmp = Comparator::new(opts);
    shapes
        .iter()
        .enumerate()
        .filter(|(i, s)| *i != chosen && cmp.similar(base, s).is_ok())
        .map(|(i, _)| i)
        .collect()
}

/// Current and maximum size of one group taking part in a split.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BalanceTarget {
    /// Current (target) size.
    pub current: usize,
    /// Maximum size. A group at or above it gets nothing.
    pub max: usize,
}

/// Result of [`split`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SplitResult {
    /// New nodes for each group, in the order of the input (0 for groups that get none).
    pub per_group: Vec<usize>,
    /// Nodes that did not fit because every group reached its maximum.
    pub unplaced: usize,
}

/// Splits `new_nodes` between `groups` so their sizes become as equal as possible: the result of
/// giving each node in turn to the smallest group below its maximum (ties to the lower index),
/// skipping groups at their maximum; whatever no group can take is `unplaced`.
///
/// Computed by water-filling rather than node by node: find the highest level `L` such that
/// raising every open group to `min(L, max)` uses at most `new_nodes`, then give one more node to
/// the first remaining groups (by index) that sit at `L` below their maximum. Runs in
/// `O(groups × log(max size))` whatever `new_nodes` is.
pub fn split(groups: &[BalanceTarget], new_nodes: usize) -> SplitResult {
    let headroom = |t: &BalanceTarget| t.max.saturating_sub(t.current);
    let total: u128 = groups.iter().map(|t| headroom(t) as u128).sum();
    if total <= new_nodes as u128 {
        // Everything fits: fill every group to its max. `total <= new_nodes` so it fits a usize.
        let per_group: Vec<usize> = groups.iter().map(headroom).collect();
        return SplitResult {
            per_group,
            unplaced: new_nodes - total as usize,
        };
    }
    // Here 0 <= new_nodes < total, so at least one group is open (current < max).
    let open = || groups.iter().filter(|t| t.current < t.max);
    // Nodes a group receives when raised to `level` (capped at its max).
    let given = |t: &BalanceTarget, level: usize| -> usize {
        if t.current >= t.max {
            0
        } else {
            level.clamp(t.current, t.max) - t.current
        }
    };
    let fill = |level: usize| -> u128 { groups.iter().map(|t| given(t, level) as u128).sum() };
    let n = new_nodes as u128;
    // fill(lo) == 0 <= n and fill(hi) == total > n; find the largest level with fill <= n.
    let mut lo = open().map(|t| t.current).min().unwrap_or(0);
    let mut hi = open().map(|t| t.max).max().unwrap_or(0);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fill(mid) <= n {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let level = lo;
    let mut per_group: Vec<usize> = groups.iter().map(|t| given(t, level)).collect();
    // Fewer than the number of groups sitting at `level` below their max (else `level + 1` fits).
    let mut rest = (n - fill(level)) as usize;
    for (t, out) in groups.iter().zip(per_group.iter_mut()) {
        if rest == 0 {
            break;
        }
        if t.current <= level && level < t.max {
            *out += 1;
            rest -= 1;
        }
    }
    SplitResult {
        per_group,
        unplaced: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GI: i64 = 1 << 30;

    fn res(cpu: i64, memory: i64, pods: i64) -> Resources {
        Resources {
            cpu,
            memory,
            pods,
            ..Resources::default()
        }
    }

    /// A 4-cpu 16Gi m5.xlarge-like node in `zone` with kube-proxy-ish DaemonSets.
    fn shape(zone: &str) -> GroupShape {
        GroupShape {
            capacity: res(4000, 16 * GI, 110),
            allocatable: res(3920, 15 * GI, 110),
            daemonset_requests: res(200, GI / 2, 3),
            labels: Labels::from_pairs([
                ("node.kubernetes.io/instance-type", "m5.xlarge"),
                ("kubernetes.io/arch", "amd64"),
                ("topology.kubernetes.io/zone", zone),
                ("topology.kubernetes.io/region", "eu-west-1"),
                ("kubernetes.io/hostname", zone),
            ]),
        }
    }

    fn with_label(mut s: GroupShape, k: &str, v: &str) -> GroupShape {
        s.labels.insert(Sym::new(k), Sym::new(v));
        s
    }

    fn opts() -> BalancingOptions {
        BalancingOptions::default()
    }

    fn t(current: usize, max: usize) -> BalanceTarget {
        BalanceTarget { current, max }
    }

    #[test]
    fn seed_example_one_node_goes_to_the_smallest_group() {
        let groups = [t(1, 100), t(3, 100), t(6, 100)];
        assert_eq!(
            split(&groups, 1),
            SplitResult {
                per_group: vec![1, 0, 0],
                unplaced: 0
            }
        );
    }

    #[test]
    fn seed_example_four_nodes_go_three_to_a_one_to_b() {
        let groups = [t(1, 100), t(3, 100), t(6, 100)];
        assert_eq!(
            split(&groups, 4),
            SplitResult {
                per_group: vec![3, 1, 0],
                unplaced: 0
            }
        );
    }

    #[test]
    fn split_skips_groups_at_their_max() {
        // A can take one node only; the rest goes to B (the next smallest), not C.
        let groups = [t(1, 2), t(3, 100), t(6, 100)];
        assert_eq!(split(&groups, 4).per_group, vec![1, 3, 0]);
        // A group already at (or above) its max gets nothing even when it is the smallest.
        let groups = [t(1, 1), t(3, 100), t(9, 5)];
        assert_eq!(split(&groups, 2).per_group, vec![0, 2, 0]);
    }

    #[test]
    fn split_reports_what_does_not_fit() {
        let groups = [t(1, 3), t(3, 4), t(6, 6)];
        assert_eq!(
            split(&groups, 10),
            SplitResult {
                per_group: vec![2, 1, 0],
                unplaced: 7
            }
        );
        assert_eq!(
            split(&[t(5, 5)], 3),
            SplitResult {
                per_group: vec![0],
                unplaced: 3
            }
        );
        assert_eq!(
            split(&[], 3),
            SplitResult {
                per_group: vec![],
                unplaced: 3
            }
        );
    }

    #[test]
    fn split_breaks_ties_by_index() {
        let groups = [t(2, 10), t(2, 10), t(2, 10)];
        assert_eq!(split(&groups, 2).per_group, vec![1, 1, 0]);
        assert_eq!(split(&groups, 4).per_group, vec![2, 1, 1]);
        assert_eq!(split(&groups, 0).per_group, vec![0, 0, 0]);
    }

    #[test]
    fn split_handles_large_counts_quickly() {
        let groups: Vec<BalanceTarget> = (0..10).map(|i| t(i * 7, 10_000)).collect();
        let r = split(&groups, 1000);
        assert_eq!(r.per_group.iter().sum::<usize>(), 1000);
        let sizes: Vec<usize> = groups
            .iter()
            .zip(&r.per_group)
            .map(|(g, d)| g.current + d)
            .collect();
        let (min, max) = (sizes.iter().min(), sizes.iter().max());
        assert!(max.zip(min).is_some_and(|(a, b)| a - b <= 1), "{sizes:?}");

        // Sizes near usize::MAX neither overflow nor take long.
        let groups = [t(0, usize::MAX), t(5, usize::MAX), t(0, usize::MAX / 2)];
        let r = split(&groups, usize::MAX);
        assert_eq!(
            r.per_group.iter().map(|x| *x as u128).sum::<u128>(),
            usize::MAX as u128
        );
        assert_eq!(r.unplaced, 0);
    }

    #[test]
    fn zone_only_difference_with_3_percent_less_allocatable_memory_is_similar() {
        let a = shape("eu-west-1a");
        let mut b = shape("eu-west-1b");
        b.allocatable.memory = a.allocatable.memory * 97 / 100;
        assert_eq!(similar(&a, &b, &opts()), Ok(()));
        assert_eq!(similar(&b, &a, &opts()), Ok(()));
        // 6% less is too much.
        b.allocatable.memory = a.allocatable.memory * 94 / 100;
        assert!(matches!(
            similar(&a, &b, &opts()),
            Err(Dissimilarity::Allocatable {
                resource: ResourceName::Memory,
                ..
            })
        ));
    }

    #[test]
    fn different_instance_type_label_is_not_similar() {
        let a = shape("eu-west-1a");
        let b = with_label(
            shape("eu-west-1b"),
            "node.kubernetes.io/instance-type",
            "m5a.xlarge",
        );
        let err = similar(&a, &b, &opts());
        assert_eq!(
            err,
            Err(Dissimilarity::Label {
                key: Sym::new("node.kubernetes.io/instance-type"),
                a: Some(Sym::new("m5.xlarge")),
                b: Some(Sym::new("m5a.xlarge")),
            })
        );
        // A custom label present on one side only also separates groups (the FAQ's opt-out).
        let c = with_label(shape("eu-west-1c"), "example.com/team", "a");
        assert!(matches!(
            similar(&a, &c, &opts()),
            Err(Dissimilarity::Label { a: None, .. })
        ));
        assert!(matches!(
            similar(&c, &a, &opts()),
            Err(Dissimilarity::Label { b: None, .. })
        ));
    }

    #[test]
    fn different_cpu_capacity_is_not_similar() {
        let a = shape("eu-west-1a");
        let mut b = shape("eu-west-1b");
        b.capacity.cpu = 4001;
        assert_eq!(
            similar(&a, &b, &opts()),
            Err(Dissimilarity::Capacity {
                resource: ResourceName::Cpu,
                a: 4000,
                b: 4001
            })
        );
    }

    #[test]
    fn gpu_on_one_side_only_is_not_similar() {
        let a = shape("eu-west-1a");
        let mut b = shape("eu-west-1b");
        let gpu = ResourceName::parse("nvidia.com/gpu");
        b.capacity.set(gpu, 1);
        b.allocatable.set(gpu, 1);
        assert_eq!(
            similar(&a, &b, &opts()),
            Err(Dissimilarity::Capacity {
                resource: gpu,
                a: 0,
                b: 1
            })
        );
    }

    #[test]
    fn memory_capacity_may_differ_within_its_ratio() {
        let a = shape("eu-west-1a");
        let mut b = shape("eu-west-1b");
        // 1% less memory capacity: within 1.5%.
        b.capacity.memory = a.capacity.memory * 99 / 100;
        assert_eq!(similar(&a, &b, &opts()), Ok(()));
        // 2% less: outside 1.5%.
        b.capacity.memory = a.capacity.memory * 98 / 100;
        assert!(matches!(
            similar(&a, &b, &opts()),
            Err(Dissimilarity::MemoryCapacity { .. })
        ));
    }

    #[test]
    fn free_resources_are_compared_after_daemonsets() {
        let a = shape("eu-west-1a");
        let mut b = shape("eu-west-1b");
        // Same allocatable, but a heavy extra DaemonSet in one group.
        b.daemonset_requests.cpu = 1000;
        assert!(matches!(
            similar(&a, &b, &opts()),
            Err(Dissimilarity::Free {
                resource: ResourceName::Cpu,
                ..
            })
        ));
        // Pod slots are not consumed by DaemonSet requests in the comparison.
        let mut c = shape("eu-west-1c");
        c.daemonset_requests.pods = 60;
        assert_eq!(similar(&a, &c, &opts()), Ok(()));
    }

    #[test]
    fn basic_and_cluster_api_labels_are_ignored() {
        let mut a = shape("eu-west-1a");
        let mut b = shape("eu-west-1b");
        for (k, va, vb) in [
            ("failure-domain.beta.kubernetes.io/zone", "a", "b"),
            ("failure-domain.beta.kubernetes.io/region", "r1", "r2"),
            ("kops.k8s.io/instancegroup", "nodes-a", "nodes-b"),
            ("topology.ebs.csi.aws.com/zone", "a", "b"),
        ] {
            a = with_label(a, k, va);
            b = with_label(b, k, vb);
        }
        // Present on one side only is ignored too.
        a = with_label(a, "beta.kubernetes.io/fluentd-ds-ready", "true");
        assert_eq!(similar(&a, &b, &opts()), Ok(()));
    }

    #[test]
    fn ignored_labels_option_works() {
        let a = with_label(shape("eu-west-1a"), "example.com/pool", "pool-a");
        let b = with_label(shape("eu-west-1b"), "example.com/pool", "pool-b");
        assert!(similar(&a, &b, &opts()).is_err());
        let o = BalancingOptions {
            ignored_labels: vec!["example.com/pool".to_string()],
            ..opts()
        };
        assert_eq!(similar(&a, &b, &o), Ok(()));
        assert!(o.is_ignored_label("example.com/pool"));
        assert!(o.is_ignored_label("topology.kubernetes.io/zone"));
        assert!(!o.is_ignored_label("node.kubernetes.io/instance-type"));
    }

    #[test]
    fn balancing_labels_restrict_the_comparison() {
        let o = BalancingOptions {
            balancing_labels: vec!["example.com/balance".to_string()],
            ..opts()
        };
        // Different instance type and cpu, same balancing label: similar.
        let a = with_label(shape("eu-west-1a"), "example.com/balance", "web");
        let mut b = with_label(
            with_label(shape("eu-west-1b"), "example.com/balance", "web"),
            "node.kubernetes.io/instance-type",
            "c5.4xlarge",
        );
        b.capacity.cpu = 16_000;
        assert!(similar(&a, &b, &opts()).is_err());
        assert_eq!(similar(&a, &b, &o), Ok(()));
        // Different value: not similar.
        let c = with_label(shape("eu-west-1c"), "example.com/balance", "batch");
        assert!(matches!(
            similar(&a, &c, &o),
            Err(Dissimilarity::BalancingLabel { .. })
        ));
        // Absent on both: not similar (the label must be present).
        let (d, e) = (shape("eu-west-1a"), shape("eu-west-1b"));
        assert_eq!(
            similar(&d, &e, &o),
            Err(Dissimilarity::BalancingLabel {
                key: "example.com/balance".to_string(),
                a: None,
                b: None
            })
        );
        // A label never interned anywhere is absent, not a panic.
        let o2 = BalancingOptions {
            balancing_labels: vec!["never-seen.example/\u{1F600}".to_string()],
            ..opts()
        };
        assert!(similar(&a, &b, &o2).is_err());
    }

    #[test]
    fn find_similar_excludes_the_chosen_group_and_keeps_index_order() {
        let shapes = vec![
            shape("eu-west-1a"),
            with_label(
                shape("eu-west-1b"),
                "node.kubernetes.io/instance-type",
                "m5.2xlarge",
            ),
            shape("eu-west-1b"),
            shape("eu-west-1c"),
        ];
        assert_eq!(find_similar(0, &shapes, &opts()), vec![2, 3]);
        assert_eq!(find_similar(3, &shapes, &opts()), vec![0, 2]);
        assert_eq!(find_similar(1, &shapes, &opts()), Vec::<usize>::new());
        assert_eq!(find_similar(9, &shapes, &opts()), Vec::<usize>::new());
    }

    #[test]
    fn within_ratio_measures_against_the_larger_value() {
        assert!(within_ratio(1000, 950, 0.05));
        assert!(within_ratio(950, 1000, 0.05));
        assert!(!within_ratio(1000, 949, 0.05));
        assert!(within_ratio(0, 0, 0.0));
        assert!(!within_ratio(0, 1, 0.05));
        assert!(!within_ratio(-10, -11, 0.5));
        assert!(!within_ratio(10, 11, f64::NAN));
        assert!(within_ratio(i64::MAX, i64::MIN, 2.0));
    }

    #[test]
    fn dissimilarity_explains_itself() {
        let d = Dissimilarity::Label {
            key: Sym::new("node.kubernetes.io/instance-type"),
            a: Some(Sym::new("m5.xlarge")),
            b: None,
        };
        assert_eq!(
            d.to_string(),
            "label node.kubernetes.io/instance-type differs (m5.xlarge vs <absent>)"
        );
    }

    #[test]
    fn options_validate() {
        assert_eq!(opts().validate(), Ok(()));
        let bad = BalancingOptions {
            max_free_difference_ratio: -0.1,
            ..opts()
        };
        assert!(matches!(
            bad.validate(),
            Err(BalancingOptionsError::BadRatio { .. })
        ));
        let both = BalancingOptions {
            ignored_labels: vec!["a".into()],
            balancing_labels: vec!["b".into()],
            ..opts()
        };
        assert_eq!(
            both.validate(),
            Err(BalancingOptionsError::LabelsAndIgnoredLabels)
        );
    }

    /// The definition: one node at a time to the smallest open group, ties to the lower index.
    fn split_naive(groups: &[BalanceTarget], new_nodes: usize) -> SplitResult {
        let mut per_group = vec![0usize; groups.len()];
        let mut unplaced = 0;
        for _ in 0..new_nodes {
            let best = groups
                .iter()
                .enumerate()
                .filter(|(i, g)| g.current + per_group[*i] < g.max)
                .min_by_key(|(i, g)| (g.current + per_group[*i], *i))
                .map(|(i, _)| i);
            match best {
                Some(i) => per_group[i] += 1,
                None => unplaced += 1,
            }
        }
        SplitResult {
            per_group,
            unplaced,
        }
    }

    fn targets() -> impl Strategy<Value = Vec<BalanceTarget>> {
        prop::collection::vec((0usize..40, 0usize..60), 0..8)
            .prop_map(|v| v.into_iter().map(|(c, m)| t(c, m)).collect())
    }

    proptest! {
        #[test]
        fn split_is_capped_bounded_and_balanced(groups in targets(), new_nodes in 0usize..300) {
            let r = split(&groups, new_nodes);
            let headroom: usize = groups.iter().map(|g| g.max.saturating_sub(g.current)).sum();
            let given: usize = r.per_group.iter().sum();
            prop_assert_eq!(r.per_group.len(), groups.len());
            prop_assert_eq!(given, new_nodes.min(headroom));
            prop_assert_eq!(given + r.unplaced, new_nodes);
            let sizes: Vec<usize> = groups.iter().zip(&r.per_group).map(|(g, d)| g.current + d).collect();
            for (i, g) in groups.iter().enumerate() {
                // Never beyond max; a group at or over its max gets nothing.
                prop_assert!(r.per_group[i] == 0 || sizes[i] <= g.max);
                // Balanced: moving a node from a group that received one (j) to any group still
                // below its max (i) would not even the sizes out.
                for (j, dj) in r.per_group.iter().enumerate() {
                    if *dj > 0 && sizes[i] < g.max {
                        prop_assert!(sizes[j] <= sizes[i] + 1, "{:?} {:?}", groups, r);
                    }
                }
            }
        }

        #[test]
        fn split_equals_one_node_at_a_time(groups in targets(), new_nodes in 0usize..300) {
            prop_assert_eq!(split(&groups, new_nodes), split_naive(&groups, new_nodes));
        }
    }
}

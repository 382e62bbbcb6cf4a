//! kube-scheduler's filters over a [`ClusterSnapshot`]: whether a pod may be placed on a node.
//!
//! Modelled filter plugins, in the scheduler's default order: NodeUnschedulable, NodeName,
//! TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, VolumeRestrictions,
//! NodeVolumeLimits, VolumeBinding, VolumeZone (see [`crate::scheduling::volumes`]; a pod
//! without claim or CSI volumes skips them with one test), DynamicResources (see
//! [`crate::scheduling::dra`]; likewise skipped by a pod without ResourceClaims), PodTopologySpread (hard
//! constraints only) and InterPodAffinity (required terms only). Scores and soft constraints are
//! never evaluated.
//!
//! As in the scheduler, the work is split in two: [`ClusterSnapshot::prepare`] (PreFilter)
//! computes per-pod state once (topology counts for affinity, anti-affinity and spread, and the
//! topology domains that existing pods' anti-affinity forbids), and [`ClusterSnapshot::check`]
//! (Filter) answers for one node with a few comparisons. For a pod without inter-pod or spread
//! constraints in a cluster where no pod has anti-affinity, preparing is O(1) and the prepared
//! state is empty. Preparing a term or spread constraint with `matchLabels` visits only the pods
//! carrying its rarest label (the snapshot's label index).
//!
//! [`ClusterSnapshot::refresh`] keeps prepared state current incrementally: it replays the
//! snapshot's change journal since the prepared version into the counts, and must always end in
//! exactly the state a fresh `prepare` computes (a property test checks this). This module only
//! reads the snapshot; it never mutates it and never panics.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, LazyLock};

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::scheduling::snapshot::{Change, ClusterSnapshot, NodeId, NodeInfo};
use autoscaler_model::Node;
use autoscaler_model::ResourceName;
use autoscaler_model::Sym;
use autoscaler_model::{HostPort, Pod};
use autoscaler_model::{
    InclusionPolicy, NodeSelector, NodeSelectorOp, NodeSelectorRequirement, NodeSelectorTerm,
    PodAffinityTerm, TopologySpreadConstraint, WhenUnsatisfiable,
};
use autoscaler_model::{LabelSelector, Labels};
use autoscaler_model::{Taint, TaintEffect, first_untolerated};

/// Why a pod does not fit a node (one variant per filter reason, Display = kube-scheduler text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unfit {
    /// NodeUnschedulable: the node is cordoned and the pod does not tolerate that.
    Unschedulable,
    /// NodeName: the pod names another node.
    NodeName,
    /// TaintToleration: a `NoSchedule`/`NoExecute` taint the pod does not tolerate.
    UntoleratedTaint {
        /// Taint key.
        key: Sym,
        /// Taint value (empty when absent).
        value: Sym,
    },
    /// NodeAffinity: `nodeSelector` or required node affinity does not match.
    NodeAffinity,
    /// NodePorts: a requested host port is taken.
    NodePorts,
    /// NodeResourcesFit: every resource that does not fit (`pods` first, as the scheduler
    /// reports them). Never empty.
    Insufficient(SmallVec<[ResourceName; 2]>),
    /// PodTopologySpread: the node lacks a constraint's topology key.
    SpreadMissingLabel,
    /// PodTopologySpread: placing the pod here would exceed a constraint's `maxSkew`.
    Spread,
    /// InterPodAffinity: the pod's required affinity is not satisfied.
    PodAffinity,
    /// InterPodAffinity: the pod's required anti-affinity is violated.
    PodAntiAffinity,
    /// InterPodAffinity: an existing pod's required anti-affinity is violated.
    ExistingAntiAffinity,
    /// VolumeBinding (PreFilter): a claim the pod uses does not exist.
    ClaimNotFound(Arc<str>),
    /// VolumeBinding (PreFilter): a claim the pod uses is being deleted.
    ClaimDeleting(Arc<str>),
    /// VolumeBinding (PreFilter): the class of an unbound claim does not exist.
    ClassNotFound(Arc<str>),
    /// VolumeBinding (PreFilter): an unbound claim binds immediately (no class, or an
    /// `Immediate` class): the pod waits for the binder, not for a node.
    UnboundImmediateClaims,
    /// VolumeBinding: a bound claim's volume does not exist.
    VolumeNotFound,
    /// VolumeBinding: a bound volume's node affinity excludes the node.
    VolumeNodeAffinity,
    /// VolumeBinding: an unbound claim finds no volume to bind and none can be provisioned
    /// here (class topology, no provisioner, or another node selected).
    VolumeBindConflict,
    /// VolumeBinding: the class tracks capacity and none is left for the node's topology.
    VolumeNoSpace,
    /// VolumeZone: a bound volume's zone or region labels exclude the node.
    VolumeZone,
    /// NodeVolumeLimits: the node's CSI attach limit for a driver would be exceeded.
    MaxVolumeCount,
    /// VolumeRestrictions: a `ReadWriteOncePod` claim of the pod is in use by another pod.
    ReadWriteOncePodConflict,
    /// DynamicResources: the pod's ResourceClaims (see [`crate::scheduling::dra`]).
    Dra(crate::scheduling::dra::DraUnfit),
}

impl Unfit {
    /// The scheduler's reason strings (several for [`Unfit::Insufficient`]).
    pub fn reasons(&self) -> Vec<String> {
        match self {
            Unfit::Insufficient(rs) => rs.iter().map(|r| insufficient_text(*r)).collect(),
            other => vec![other.to_string()],
        }
    }

    /// The filter plugin that reports this reason.
    pub fn plugin(&self) -> &'static str {
        match self {
            Unfit::Unschedulable => "NodeUnschedulable",
            Unfit::NodeName => "NodeName",
            Unfit::UntoleratedTaint { .. } => "TaintToleration",
            Unfit::NodeAffinity => "NodeAffinity",
            Unfit::NodePorts => "NodePorts",
            Unfit::Insufficient(_) => "NodeResourcesFit",
            Unfit::SpreadMissingLabel | Unfit::Spread => "PodTopologySpread",
            Unfit::PodAffinity | Unfit::PodAntiAffinity | Unfit::ExistingAntiAffinity => {
                "InterPodAffinity"
            }
            Unfit::ClaimNotFound(_)
            | Unfit::ClaimDeleting(_)
            | Unfit::ClassNotFound(_)
            | Unfit::UnboundImmediateClaims
            | Unfit::VolumeNotFound
            | Unfit::VolumeNodeAffinity
            | Unfit::VolumeBindConflict
            | Unfit::VolumeNoSpace => "VolumeBinding",
            Unfit::VolumeZone => "VolumeZone",
            Unfit::MaxVolumeCount => "NodeVolumeLimits",
            Unfit::ReadWriteOncePodConflict => "VolumeRestrictions",
            Unfit::Dra(_) => "DynamicResources",
        }
    }

    /// Whether the pod was rejected before any node was looked at (kube-scheduler's PreFilter):
    /// every node gives the same answer, and the scheduler reports it once, without a count.
    pub fn is_pre_filter(&self) -> bool {
        if let Unfit::Dra(d) = self {
            return d.is_pre_filter();
        }
        matches!(
            self,
            Unfit::ClaimNotFound(_)
                | Unfit::ClaimDeleting(_)
                | Unfit::ClassNotFound(_)
                | Unfit::UnboundImmediateClaims
        )
    }

    /// Whether only a change of the node itself (not removing pods from it) could make the pod
    /// fit: the scheduler's `UnschedulableAndUnresolvable`.
    pub fn is_unresolvable(&self) -> bool {
        if let Unfit::Dra(d) = self {
            return d.is_unresolvable();
        }
        matches!(
            self,
            Unfit::Unschedulable
                | Unfit::NodeName
                | Unfit::UntoleratedTaint { .. }
                | Unfit::NodeAffinity
                | Unfit::SpreadMissingLabel
                | Unfit::PodAffinity
                | Unfit::ClaimNotFound(_)
                | Unfit::ClaimDeleting(_)
                | Unfit::ClassNotFound(_)
                | Unfit::UnboundImmediateClaims
                | Unfit::VolumeNotFound
                | Unfit::VolumeNodeAffinity
                | Unfit::VolumeBindConflict
                | Unfit::VolumeNoSpace
                | Unfit::VolumeZone
        )
    }
}

fn insufficient_text(r: ResourceName) -> String {
    match r {
        ResourceName::Pods => "Too many pods".to_string(),
        other => format!("Insufficient {other}"),
    }
}

impl fmt::Display for Unfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unfit::Unschedulable => f.write_str("node(s) were unschedulable"),
            Unfit::NodeName => f.write_str("node(s) didn't match the requested node name"),
            Unfit::UntoleratedTaint { key, value } => {
                write!(f, "node(s) had untolerated taint {{{key}: {value}}}")
            }
            Unfit::NodeAffinity => f.write_str("node(s) didn't match Pod's node affinity/selector"),
            Unfit::NodePorts => {
                f.write_str("node(s) didn't have free ports for the requested pod ports")
            }
            Unfit::Insufficient(rs) => {
                for (i, r) in rs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    f.write_str(&insufficient_text(*r))?;
                }
                Ok(())
            }
            Unfit::SpreadMissingLabel => f.write_str(
                "node(s) didn't match pod topology spread constraints (missing required label)",
            ),
            Unfit::Spread => f.write_str("node(s) didn't match pod topology spread constraints"),
            Unfit::PodAffinity => f.write_str("node(s) didn't match pod affinity rules"),
            Unfit::PodAntiAffinity => f.write_str("node(s) didn't match pod anti-affinity rules"),
            Unfit::ExistingAntiAffinity => {
                f.write_str("node(s) didn't satisfy existing pods anti-affinity rules")
            }
            Unfit::ClaimNotFound(c) => write!(f, "persistentvolumeclaim \"{c}\" not found"),
            Unfit::ClaimDeleting(c) => write!(f, "persistentvolumeclaim \"{c}\" is being deleted"),
            Unfit::ClassNotFound(c) => write!(f, "storageclass.storage.k8s.io \"{c}\" not found"),
            Unfit::UnboundImmediateClaims => {
                f.write_str("pod has unbound immediate PersistentVolumeClaims")
            }
            Unfit::VolumeNotFound => f.write_str(
                "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)",
            ),
            Unfit::VolumeNodeAffinity => f.write_str("node(s) had volume node affinity conflict"),
            Unfit::VolumeBindConflict => {
                f.write_str("node(s) didn't find available persistent volumes to bind")
            }
            Unfit::VolumeNoSpace => f.write_str("node(s) did not have enough free storage"),
            Unfit::VolumeZone => f.write_str("node(s) had no available volume zone"),
            Unfit::MaxVolumeCount => f.write_str("node(s) exceed max volume count"),
            Unfit::ReadWriteOncePodConflict => f.write_str(
                "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode",
            ),
            Unfit::Dra(d) => d.fmt(f),
        }
    }
}

/// The wildcard host IP.
static ANY_IP: LazyLock<Sym> = LazyLock::new(|| Sym::new("0.0.0.0"));
/// The taint a cordoned node is treated as having.
static CORDON_TAINT: LazyLock<Taint> = LazyLock::new(|| Taint {
    key: Sym::new("node.kubernetes.io/unschedulable"),
    value: Sym::new(""),
    effect: TaintEffect::NoSchedule,
});

/// A (topology key, value) pair.
type Pair = (Sym, Sym);

/// Adds `delta` to `map[key]`, keeping only positive counts; returns whether the key was
/// `(absent before, absent after)`.
fn bump_count<K: std::hash::Hash + Eq>(
    map: &mut FxHashMap<K, u32>,
    key: K,
    delta: i32,
) -> (bool, bool) {
    let old = map.get(&key).copied().unwrap_or(0);
    let new = old.saturating_add_signed(delta);
    if new == 0 {
        map.remove(&key);
    } else {
        map.insert(key, new);
    }
    (old == 0, new == 0)
}

/// Per hard spread constraint: matching pods per eligible domain and the effective minimum.
#[derive(Clone, Debug, PartialEq)]
struct SpreadState {
    /// Topology key.
    key: Sym,
    /// `maxSkew`.
    max_skew: i64,
    /// `minDomains` (at least 1).
    min_domains: i64,
    /// Matching pods per eligible domain value (domains without pods are present with 0).
    counts: FxHashMap<Sym, i64>,
    /// Eligible nodes per domain value: a domain exists while it has at least one.
    nodes: FxHashMap<Sym, u32>,
    /// How many domains have each count, to keep the minimum without a scan.
    hist: BTreeMap<i64, u32>,
    /// The global minimum to subtract: 0 when there are fewer eligible domains than
    /// `minDomains`, otherwise the smallest count.
    min: i64,
    /// Whether the incoming pod matches its own selector (adds 1 to the node's domain).
    self_match: i64,
}

impl SpreadState {
    fn hist_add(&mut self, count: i64, delta: i32) {
        let e = self.hist.entry(count).or_insert(0);
        *e = e.saturating_add_signed(delta);
        if *e == 0 {
            self.hist.remove(&count);
        }
    }

    /// One more (`delta` 1) or one fewer (-1) eligible node in domain `v`.
    fn node_delta(&mut self, v: Sym, delta: i32) {
        let (was_absent, is_absent) = bump_count(&mut self.nodes, v, delta);
        if was_absent && !is_absent {
            self.counts.insert(v, 0);
            self.hist_add(0, 1);
        } else if is_absent && let Some(c) = self.counts.remove(&v) {
            self.hist_add(c, -1);
        }
    }

    /// One more or one fewer matching pod in domain `v` (which must have an eligible node).
    fn pod_delta(&mut self, v: Sym, delta: i32) {
        let Some(c) = self.counts.get_mut(&v) else {
            return;
        };
        let old = *c;
        *c = old + i64::from(delta);
        let new = *c;
        self.hist_add(old, -1);
        self.hist_add(new, 1);
    }

    fn update_min(&mut self) {
        self.min = if (self.counts.len() as i64) < self.min_domains {
            0
        } else {
            self.hist.keys().next().copied().unwrap_or(0)
        };
    }
}

/// The non-trivial part of a prepared pod. Every count map holds only positive counts, so the
/// state reached by replaying changes is identical to the one computed from scratch.
#[derive(Clone, Debug, Default, PartialEq)]
struct Heavy {
    /// Topology pairs where existing pods' anti-affinity terms match the incoming pod, with how
    /// many (pod, term) contribute.
    existing_anti: FxHashMap<Pair, u32>,
    /// The topology keys of `existing_anti`, with how many pairs have each.
    existing_anti_keys: SmallVec<[(Sym, u32); 2]>,
    /// The pod's required affinity terms: (topology key) per term.
    affinity_keys: Vec<Sym>,
    /// Pods matching all affinity terms, per topology pair of each term.
    affinity_counts: FxHashMap<Pair, u32>,
    /// Whether the pod matches all of its own affinity terms (first pod of a series).
    affinity_self_match: bool,
    /// The pod's required anti-affinity terms' topology keys.
    anti_keys: Vec<Sym>,
    /// Pods matching each anti-affinity term, per topology pair of that term.
    anti_counts: FxHashMap<Pair, u32>,
    /// Hard spread constraints.
    spread: Vec<SpreadState>,
}

impl Heavy {
    fn is_empty(&self) -> bool {
        self.existing_anti.is_empty()
            && self.affinity_keys.is_empty()
            && self.anti_keys.is_empty()
            && self.spread.is_empty()
    }

    fn existing_anti_delta(&mut self, pair: Pair, delta: i32) {
        let (was_absent, is_absent) = bump_count(&mut self.existing_anti, pair, delta);
        let key_delta = match (was_absent, is_absent) {
            (true, false) => 1,
            (false, true) => -1,
            _ => return,
        };
        let keys = &mut self.existing_anti_keys;
        match keys.iter().position(|(k, _)| *k == pair.0) {
            Some(i) => {
                keys[i].1 = keys[i].1.saturating_add_signed(key_delta);
                if keys[i].1 == 0 {
                    keys.remove(i);
                }
            }
            None if key_delta > 0 => {
                let at = keys.partition_point(|(k, _)| *k < pair.0);
                keys.insert(at, (pair.0, 1));
            }
            None => {}
        }
    }
}

/// Per-pod state computed against a snapshot version (kube-scheduler's PreFilter): affinity
/// and spread counts per topology domain, existing pods' anti-affinity against this pod. Kept
/// current by [`ClusterSnapshot::refresh`], which replays the snapshot's changes since.
#[derive(Clone, Debug, Default)]
pub struct Prepared {
    /// Whether this came from `prepare` (a default value is recomputed on first refresh).
    valid: bool,
    version: u64,
    anti_epoch: u64,
    heavy: Option<Box<Heavy>>,
}

impl Prepared {
    /// The snapshot version this state was computed against.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Whether no inter-pod or spread check applies (only the node-local filters run).
    pub fn is_trivial(&self) -> bool {
        self.heavy.is_none()
    }
}

/// Whether the pod has anything that needs cluster-wide state: inter-pod terms or hard spread.
fn needs_cluster_state(pod: &Pod) -> bool {
    pod.has_pod_affinity()
        || pod
            .spread
            .iter()
            .any(|c| c.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
}

/// The pod's hard spread constraints, in order.
type Hard<'a> = SmallVec<[&'a TopologySpreadConstraint; 2]>;

/// What replaying a change needs to know about the incoming pod.
struct Incoming<'a> {
    pod: &'a Pod,
    hard: Hard<'a>,
    /// Whether the pod has no inter-pod or spread constraint (only existing anti-affinity).
    plain: bool,
}

fn hard_spread(pod: &Pod) -> Hard<'_> {
    pod.spread
        .iter()
        .filter(|c| c.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
        .collect()
}

/// Per hard constraint, the domain `node` counts in for `pod` (`None` when the node is not
/// eligible for that constraint); `None` overall when the node lacks one of the constraints'
/// keys (it then counts for no constraint).
fn spread_domains(pod: &Pod, hard: &Hard<'_>, node: &Node) -> Option<SmallVec<[Option<Sym>; 2]>> {
    let labels = &node.labels;
    if !hard.iter().all(|c| labels.contains_key(c.topology_key)) {
        return None;
    }
    let per = hard
        .iter()
        .map(|c| {
            let eligible = (c.node_affinity_policy == InclusionPolicy::Ignore
                || node_affinity_matches(pod, node))
                && (c.node_taints_policy == InclusionPolicy::Ignore
                    || first_untolerated(&node.taints, &pod.tolerations).is_none());
            if eligible {
                labels.get(c.topology_key)
            } else {
                None
            }
        })
        .collect();
    Some(per)
}

/// Whether `existing` counts for `pod`'s spread constraints at all (same namespace, not
/// terminating).
fn counts_for_spread(pod: &Pod, existing: &Pod) -> bool {
    existing.namespace == pod.namespace && existing.deletion_ms.is_none()
}

/// Counts (`delta` 1) or uncounts (-1) `existing` in the spread states, `per` being the domains
/// of its node.
fn spread_pod_delta(
    hard: &Hard<'_>,
    h: &mut Heavy,
    per: &[Option<Sym>],
    existing: &Pod,
    delta: i32,
) {
    for ((c, st), d) in hard.iter().zip(h.spread.iter_mut()).zip(per.iter()) {
        if let Some(v) = d
            && c.label_selector
                .as_ref()
                .is_some_and(|s| s.matches(&existing.labels))
        {
            st.pod_delta(*v, delta);
        }
    }
}

/// Adds (`delta` 1) or removes (-1) an eligible node to the spread states' domains.
fn spread_node_delta(h: &mut Heavy, per: &[Option<Sym>], delta: i32) {
    for (st, d) in h.spread.iter_mut().zip(per.iter()) {
        if let Some(v) = d {
            st.node_delta(*v, delta);
        }
    }
}

impl ClusterSnapshot {
    /// PreFilter: O(1) for a pod without affinity, anti-affinity or spread constraints when no
    /// existing pod has anti-affinity.
    pub fn prepare(&self, pod: &Pod) -> Prepared {
        let heavy = if !needs_cluster_state(pod) && self.anti_affinity_pod_count() == 0 {
            None
        } else {
            let h = self.compute_heavy(pod);
            (!h.is_empty()).then(|| Box::new(h))
        };
        Prepared {
            valid: true,
            version: self.version(),
            anti_epoch: self.anti_epoch(),
            heavy,
        }
    }

    /// Makes `prepared` (from [`ClusterSnapshot::prepare`] for this pod, or an equivalent one)
    /// current after snapshot mutations, answering exactly like a fresh `prepare`.
    ///
    /// Incremental: the changes since the prepared version are replayed into the state. For a
    /// pod without inter-pod or spread constraints this is O(1) unless a pod with anti-affinity
    /// terms came or went, and then O(1) per change that is not such a pod. State older than a
    /// revert, a namespace-label change or the journal's reach is recomputed in full.
    pub fn refresh(&self, pod: &Pod, prepared: &mut Prepared) {
        let version = self.version();
        if !prepared.valid {
            *prepared = self.prepare(pod);
            return;
        }
        if prepared.version == version {
            return;
        }
        let plain = !needs_cluster_state(pod);
        if plain {
            // Only existing pods' anti-affinity matters, and it did not change, or is gone.
            let unchanged = prepared.anti_epoch == self.anti_epoch();
            if unchanged || self.anti_affinity_pod_count() == 0 {
                if !unchanged {
                    prepared.heavy = None;
                }
                prepared.version = version;
                prepared.anti_epoch = self.anti_epoch();
                return;
            }
        }
        // Replaying more changes than a full scan would visit is not worth it.
        let worth = self.pod_count() + self.len();
        let changes = match self.changes_since(prepared.version) {
            Some(c) if c.len() <= worth && (plain || prepared.heavy.is_some()) => c,
            _ => {
                *prepared = self.prepare(pod);
                return;
            }
        };
        let inc = Incoming {
            pod,
            hard: hard_spread(pod),
            plain,
        };
        let h = prepared.heavy.get_or_insert_with(Box::default);
        for change in changes {
            self.replay(&inc, h, change);
        }
        for st in &mut h.spread {
            st.update_min();
        }
        if h.is_empty() {
            prepared.heavy = None;
        }
        prepared.version = version;
        prepared.anti_epoch = self.anti_epoch();
    }

    /// Filter: all predicates of `pod` on `node`, first failure returned. `prepared` must come
    /// from [`ClusterSnapshot::prepare`] for this pod and be current (see
    /// [`ClusterSnapshot::refresh`]). An unknown node is reported as [`Unfit::NodeName`].
    #[inline]
    pub fn check(&self, pod: &Pod, prepared: &Prepared, node: NodeId) -> Result<(), Unfit> {
        let Some(info) = self.node(node) else {
            return Err(Unfit::NodeName);
        };
        let volumes = !pod.volume_refs.is_empty();
        if volumes {
            self.check_claims(pod)?;
        }
        check_node_static(pod, &info.node)?;
        check_ports(pod, info)?;
        check_resources(pod, info)?;
        if volumes {
            self.check_volumes(pod, info)?;
        }
        if !pod.resource_claims.is_empty() {
            self.check_dra(pod, node, info)?;
        }
        match &prepared.heavy {
            None => Ok(()),
            Some(h) => check_heavy(h, &info.node.labels),
        }
    }

    /// prepare + check, for one-off questions.
    pub fn check_pod(&self, pod: &Pod, node: NodeId) -> Result<(), Unfit> {
        let prepared = self.prepare(pod);
        self.check(pod, &prepared, node)
    }

    /// Whether `term` (declared by a pod whose namespaces were resolved into the term) selects
    /// `pod`: namespace listed or selected, and labels selected.
    fn term_selects(&self, term: &PodAffinityTerm, pod: &Pod) -> bool {
        let ns_ok = term.namespaces.contains(&pod.namespace)
            || term
                .namespace_selector
                .as_ref()
                .is_some_and(|s| s.matches(self.namespace_labels(pod.namespace)));
        ns_ok
            && term
                .label_selector
                .as_ref()
                .is_some_and(|s| s.matches(&pod.labels))
    }

    /// Calls `f` with every pod of `namespaces` (all namespaces when `None`) that `selector`
    /// could match, with its node: through the label index when the selector has `matchLabels`
    /// (the pair with the fewest pods), else every pod of those namespaces. Callers still match
    /// each pod; a `None` selector matches nothing.
    fn for_selectable(
        &self,
        namespaces: Option<&[Sym]>,
        selector: Option<&LabelSelector>,
        mut f: impl FnMut(NodeId, &NodeInfo, &Pod),
    ) {
        let Some(selector) = selector else { return };
        let mut nss: SmallVec<[Sym; 4]> = match namespaces {
            Some(list) => list.iter().copied().collect(),
            None => self.namespaces().collect(),
        };
        nss.sort_unstable();
        nss.dedup();
        let mut visit = |n: NodeId, p: &Pod| {
            if let Some(info) = self.node(n) {
                f(n, info, p);
            }
        };
        let best = selector
            .match_labels
            .iter()
            .map(|(k, v)| {
                let n: usize = nss
                    .iter()
                    .map(|ns| self.pods_with_label_count(*ns, k, v))
                    .sum();
                (n, k, v)
            })
            .min_by_key(|(n, _, _)| *n);
        match best {
            Some((_, k, v)) => {
                for ns in nss {
                    for (n, p) in self.pods_with_label(ns, k, v) {
                        visit(n, p);
                    }
                }
            }
            None => {
                for ns in nss {
                    for (n, p) in self.pods_in_namespace(ns) {
                        visit(n, p);
                    }
                }
            }
        }
    }

    /// Calls `f` with every pod `term` could select, with its node.
    fn for_term_candidates(&self, term: &PodAffinityTerm, f: impl FnMut(NodeId, &NodeInfo, &Pod)) {
        let namespaces = term
            .namespace_selector
            .is_none()
            .then_some(term.namespaces.as_slice());
        self.for_selectable(namespaces, term.label_selector.as_ref(), f);
    }

    /// Counts (`delta` 1) or uncounts (-1) the anti-affinity terms of `existing`, on `node`,
    /// that select the incoming `pod`.
    fn existing_anti_delta(
        &self,
        pod: &Pod,
        h: &mut Heavy,
        node: &Node,
        existing: &Pod,
        delta: i32,
    ) {
        for term in &existing.anti_affinity {
            if let Some(v) = node.labels.get(term.topology_key)
                && self.term_selects(term, pod)
            {
                h.existing_anti_delta((term.topology_key, v), delta);
            }
        }
    }

    /// Counts or uncounts `existing`, on `node`, for the incoming pod's own affinity terms (it
    /// counts when all of them select it).
    fn affinity_delta(&self, pod: &Pod, h: &mut Heavy, node: &Node, existing: &Pod, delta: i32) {
        if !pod.affinity.is_empty() && pod.affinity.iter().all(|t| self.term_selects(t, existing)) {
            for t in &pod.affinity {
                if let Some(v) = node.labels.get(t.topology_key) {
                    bump_count(&mut h.affinity_counts, (t.topology_key, v), delta);
                }
            }
        }
    }

    /// Counts or uncounts `existing`, on `node`, for one of the incoming pod's anti-affinity
    /// terms.
    fn anti_term_delta(
        &self,
        term: &PodAffinityTerm,
        h: &mut Heavy,
        node: &Node,
        existing: &Pod,
        delta: i32,
    ) {
        if let Some(v) = node.labels.get(term.topology_key)
            && self.term_selects(term, existing)
        {
            bump_count(&mut h.anti_counts, (term.topology_key, v), delta);
        }
    }

    /// Counts or uncounts one pod added to or removed from `node`, in every part of the state.
    fn pod_delta(
        &self,
        inc: &Incoming<'_>,
        h: &mut Heavy,
        node: &Node,
        existing: &Pod,
        delta: i32,
    ) {
        let (pod, hard) = (inc.pod, &inc.hard);
        if !existing.anti_affinity.is_empty() {
            self.existing_anti_delta(pod, h, node, existing, delta);
        }
        if inc.plain {
            return;
        }
        if pod.has_pod_affinity() {
            self.affinity_delta(pod, h, node, existing, delta);
            for t in &pod.anti_affinity {
                self.anti_term_delta(t, h, node, existing, delta);
            }
        }
        if !hard.is_empty()
            && counts_for_spread(pod, existing)
            && let Some(per) = spread_domains(pod, hard, node)
        {
            spread_pod_delta(hard, h, &per, existing, delta);
        }
    }

    /// Replays one snapshot change into `h`.
    fn replay(&self, inc: &Incoming<'_>, h: &mut Heavy, change: &Change) {
        let (pod, hard) = (inc.pod, &inc.hard);
        match change {
            Change::AddedPod(node, existing) => self.pod_delta(inc, h, node, existing, 1),
            Change::RemovedPod(node, existing) => self.pod_delta(inc, h, node, existing, -1),
            Change::AddedNode(node) => {
                if !hard.is_empty()
                    && let Some(per) = spread_domains(pod, hard, node)
                {
                    spread_node_delta(h, &per, 1);
                }
            }
            Change::RemovedNode(node, pods) => {
                for existing in pods {
                    self.pod_delta(inc, h, node, existing, -1);
                }
                if !hard.is_empty()
                    && let Some(per) = spread_domains(pod, hard, node)
                {
                    spread_node_delta(h, &per, -1);
                }
            }
        }
    }

    /// The full PreFilter computation.
    fn compute_heavy(&self, pod: &Pod) -> Heavy {
        let hard = hard_spread(pod);
        let mut h = Heavy {
            affinity_keys: pod.affinity.iter().map(|t| t.topology_key).collect(),
            anti_keys: pod.anti_affinity.iter().map(|t| t.topology_key).collect(),
            affinity_self_match: !pod.affinity.is_empty()
                && pod.affinity.iter().all(|t| self.term_selects(t, pod)),
            spread: hard
                .iter()
                .map(|c| SpreadState {
                    key: c.topology_key,
                    max_skew: i64::from(c.max_skew),
                    min_domains: i64::from(c.min_domains.unwrap_or(1).max(1)),
                    self_match: i64::from(
                        c.label_selector
                            .as_ref()
                            .is_some_and(|s| s.matches(&pod.labels)),
                    ),
                    counts: FxHashMap::default(),
                    nodes: FxHashMap::default(),
                    hist: BTreeMap::new(),
                    min: 0,
                })
                .collect(),
            ..Heavy::default()
        };

        // Existing pods' anti-affinity against the incoming pod.
        for (n, existing) in self.pods_with_anti_affinity() {
            if let Some(info) = self.node(n) {
                self.existing_anti_delta(pod, &mut h, &info.node, existing, 1);
            }
        }

        // The incoming pod's own affinity (candidates: what its first term selects) and
        // anti-affinity (per term).
        if let Some(first) = pod.affinity.first() {
            self.for_term_candidates(first, |_, info, existing| {
                self.affinity_delta(pod, &mut h, &info.node, existing, 1);
            });
        }
        for t in &pod.anti_affinity {
            self.for_term_candidates(t, |_, info, existing| {
                self.anti_term_delta(t, &mut h, &info.node, existing, 1);
            });
        }

        // Hard topology spread constraints: eligible domains, then matching pods.
        if !hard.is_empty() {
            // Per node id: the domains, when the node has every key.
            let mut domain: Vec<Option<SmallVec<[Option<Sym>; 2]>>> = Vec::new();
            for (id, info) in self.nodes() {
                let at = id.0 as usize;
                if domain.len() <= at {
                    domain.resize(at + 1, None);
                }
                let per = spread_domains(pod, &hard, &info.node);
                if let Some(per) = &per {
                    for (st, d) in h.spread.iter_mut().zip(per.iter()) {
                        if let Some(v) = d {
                            *st.nodes.entry(*v).or_insert(0) += 1;
                            st.counts.entry(*v).or_insert(0);
                        }
                    }
                }
                domain[at] = per;
            }
            for (i, c) in hard.iter().enumerate() {
                let Some(st) = h.spread.get_mut(i) else {
                    continue;
                };
                let selector = c.label_selector.as_ref();
                self.for_selectable(Some(&[pod.namespace]), selector, |n, _, existing| {
                    if let Some(Some(per)) = domain.get(n.0 as usize)
                        && let Some(Some(v)) = per.get(i)
                        && counts_for_spread(pod, existing)
                        && selector.is_some_and(|s| s.matches(&existing.labels))
                        && let Some(count) = st.counts.get_mut(v)
                    {
                        *count += 1;
                    }
                });
            }
            for st in &mut h.spread {
                for &count in st.counts.values() {
                    *st.hist.entry(count).or_insert(0) += 1;
                }
                st.update_min();
            }
        }
        h
    }
}

/// The cluster-wide filters, in the scheduler's order: spread, then inter-pod affinity.
fn check_heavy(h: &Heavy, labels: &Labels) -> Result<(), Unfit> {
    for st in &h.spread {
        let Some(v) = labels.get(st.key) else {
            return Err(Unfit::SpreadMissingLabel);
        };
        let here = h_count(&st.counts, v);
        if here + st.self_match - st.min > st.max_skew {
            return Err(Unfit::Spread);
        }
    }
    if !h.affinity_keys.is_empty() {
        let mut all_exist = true;
        for k in &h.affinity_keys {
            let Some(v) = labels.get(*k) else {
                return Err(Unfit::PodAffinity);
            };
            if h.affinity_counts.get(&(*k, v)).copied().unwrap_or(0) == 0 {
                all_exist = false;
            }
        }
        // First pod of a series: nothing matches anywhere yet, and the pod matches itself.
        let first_of_series = h.affinity_counts.is_empty() && h.affinity_self_match;
        if !all_exist && !first_of_series {
            return Err(Unfit::PodAffinity);
        }
    }
    for k in &h.anti_keys {
        if let Some(v) = labels.get(*k)
            && h.anti_counts.get(&(*k, v)).copied().unwrap_or(0) > 0
        {
            return Err(Unfit::PodAntiAffinity);
        }
    }
    for (k, _) in &h.existing_anti_keys {
        if let Some(v) = labels.get(*k)
            && h.existing_anti.contains_key(&(*k, v))
        {
            return Err(Unfit::ExistingAntiAffinity);
        }
    }
    Ok(())
}

fn h_count(counts: &FxHashMap<Sym, i64>, v: Sym) -> i64 {
    counts.get(&v).copied().unwrap_or(0)
}

/// NodeResourcesFit: every requested resource, and the pod count.
#[inline]
fn check_resources(pod: &Pod, info: &NodeInfo) -> Result<(), Unfit> {
    let alloc = &info.node.allocatable;
    if pod.requests.fits(&info.requested, alloc) {
        return Ok(());
    }
    let mut missing = pod.requests.insufficient(&info.requested, alloc);
    // The scheduler always counts the pod itself against the pod slots.
    if pod.requests.pods <= 0
        && info.requested.pods >= alloc.pods
        && !missing.contains(&ResourceName::Pods)
    {
        missing.insert(0, ResourceName::Pods);
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Unfit::Insufficient(missing))
    }
}

/// NodePorts: a wanted port conflicts with a used one of the same protocol and number when the
/// addresses are equal or either is the wildcard.
fn check_ports(pod: &Pod, info: &NodeInfo) -> Result<(), Unfit> {
    if pod.host_ports.is_empty() || info.used_ports().is_empty() {
        return Ok(());
    }
    let any = *ANY_IP;
    let used = info.used_ports();
    for want in &pod.host_ports {
        let start = used.partition_point(|u| u.port < want.port);
        let conflict = used[start..]
            .iter()
            .take_while(|u| u.port == want.port)
            .any(|u: &HostPort| {
                u.protocol == want.protocol && (u.ip == want.ip || u.ip == any || want.ip == any)
            });
        if conflict {
            return Err(Unfit::NodePorts);
        }
    }
    Ok(())
}

/// Whether `node` passes the pod's `nodeSelector` and required node affinity.
pub fn node_affinity_matches(pod: &Pod, node: &Node) -> bool {
    node.labels.contains_all(&pod.node_selector)
        && pod
            .required_node_affinity
            .as_ref()
            .is_none_or(|sel| sel.terms.iter().any(|t| term_matches_node(t, node)))
}

/// Whether `node` matches a required node selector (any of its terms), as a volume's node
/// affinity or a class's allowed topologies are matched.
pub(crate) fn node_selector_matches(sel: &NodeSelector, node: &Node) -> bool {
    sel.terms.iter().any(|t| term_matches_node(t, node))
}

fn term_matches_node(term: &NodeSelectorTerm, node: &Node) -> bool {
    if term.match_expressions.is_empty() && term.match_fields.is_empty() {
        return false;
    }
    term.match_expressions
        .iter()
        .all(|r| label_requirement_matches(r, &node.labels))
        && term
            .match_fields
            .iter()
            .all(|r| field_requirement_matches(r, node))
}

fn parse_int(s: Sym) -> Option<i64> {
    s.as_str().parse::<i64>().ok()
}

fn label_requirement_matches(r: &NodeSelectorRequirement, labels: &Labels) -> bool {
    let v = labels.get(r.key);
    match r.op {
        NodeSelectorOp::In => v.is_some_and(|v| r.values.contains(&v)),
        NodeSelectorOp::NotIn => !r.values.is_empty() && v.is_none_or(|v| !r.values.contains(&v)),
        NodeSelectorOp::Exists => r.values.is_empty() && v.is_some(),
        NodeSelectorOp::DoesNotExist => r.values.is_empty() && v.is_none(),
        NodeSelectorOp::Gt | NodeSelectorOp::Lt => {
            let [bound] = r.values.as_slice() else {
                return false;
            };
            let (Some(bound), Some(have)) = (parse_int(*bound), v.and_then(parse_int)) else {
                return false;
            };
            if r.op == NodeSelectorOp::Gt {
                have > bound
            } else {
                have < bound
            }
        }
    }
}

fn field_requirement_matches(r: &NodeSelectorRequirement, node: &Node) -> bool {
    if r.key.as_str() != "metadata.name" {
        return false;
    }
    let [value] = r.values.as_slice() else {
        return false;
    };
    match r.op {
        NodeSelectorOp::In => node.name == *value,
        NodeSelectorOp::NotIn => node.name != *value,
        _ => false,
    }
}

/// Node-only predicates (no snapshot needed): unschedulable, node name, node affinity/selector,
/// taints. Used for templates before they are in a snapshot.
#[inline]
pub fn check_node_static(pod: &Pod, node: &Node) -> Result<(), Unfit> {
    if node.unschedulable {
        let cordon: &Taint = &CORDON_TAINT;
        if !pod.tolerations.iter().any(|t| t.tolerates(cordon)) {
            return Err(Unfit::Unschedulable);
        }
    }
    if pod.node_name.is_some_and(|n| n != node.name) {
        return Err(Unfit::NodeName);
    }
    if !node.taints.is_empty()
        && let Some(t) = first_untolerated(&node.taints, &pod.tolerations)
    {
        return Err(Unfit::UntoleratedTaint {
            key: t.key,
            value: t.value,
        });
    }
    if (!pod.node_selector.is_empty() || pod.required_node_affinity.is_some())
        && !node_affinity_matches(pod, node)
    {
        return Err(Unfit::NodeAffinity);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use autoscaler_model::LabelSelector;
    use autoscaler_model::TolerationOp;
    use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};
    use autoscaler_model::{NamespaceLabels, NodeSelector, NodeSelectorTerm};

    fn one_node(node: Node) -> (ClusterSnapshot, NodeId) {
        let mut s = ClusterSnapshot::new();
        let id = s.add_node(Arc::new(node)).expect("fresh snapshot");
        (s, id)
    }

    fn node() -> NodeBuilder {
        NodeBuilder::new("n1", 2000, 4 * GI)
    }

    #[test]
    fn static_filters() {
        use NodeSelectorOp::*;
        let tol_exists_all = |b: PodBuilder| b.toleration(None, TolerationOp::Exists, "", None);
        let cases: Vec<(&str, Node, Pod, Result<(), Unfit>)> = vec![
            (
                "plain fits",
                node().build(),
                PodBuilder::new("p", 100, GI).build(),
                Ok(()),
            ),
            (
                "cordoned",
                node().unschedulable().build(),
                PodBuilder::new("p", 1, 1).build(),
                Err(Unfit::Unschedulable),
            ),
            (
                "cordoned but tolerated",
                node().unschedulable().build(),
                PodBuilder::new("p", 1, 1)
                    .toleration(
                        Some("node.kubernetes.io/unschedulable"),
                        TolerationOp::Exists,
                        "",
                        Some(TaintEffect::NoSchedule),
                    )
                    .build(),
                Ok(()),
            ),
            (
                "other node name",
                node().build(),
                PodBuilder::new("p", 1, 1).node_name("n2").build(),
                Err(Unfit::NodeName),
            ),
            (
                "own node name",
                node().build(),
                PodBuilder::new("p", 1, 1).node_name("n1").build(),
                Ok(()),
            ),
            (
                "NoSchedule taint",
                node().taint("gpu", "true", TaintEffect::NoSchedule).build(),
                PodBuilder::new("p", 1, 1).build(),
                Err(Unfit::UntoleratedTaint {
                    key: Sym::new("gpu"),
                    value: Sym::new("true"),
                }),
            ),
            (
                "NoExecute taint",
                node().taint("x", "", TaintEffect::NoExecute).build(),
                PodBuilder::new("p", 1, 1).build(),
                Err(Unfit::UntoleratedTaint {
                    key: Sym::new("x"),
                    value: Sym::new(""),
                }),
            ),
            (
                "PreferNoSchedule ignored",
                node().taint("x", "", TaintEffect::PreferNoSchedule).build(),
                PodBuilder::new("p", 1, 1).build(),
                Ok(()),
            ),
            (
                "Exists with empty key tolerates every taint",
                node()
                    .taint("a", "1", TaintEffect::NoSchedule)
                    .taint("b", "2", TaintEffect::NoExecute)
                    .build(),
                tol_exists_all(PodBuilder::new("p", 1, 1)).build(),
                Ok(()),
            ),
            (
                "Equal toleration with other value",
                node().taint("gpu", "true", TaintEffect::NoSchedule).build(),
                PodBuilder::new("p", 1, 1)
                    .toleration(Some("gpu"), TolerationOp::Equal, "false", None)
                    .build(),
                Err(Unfit::UntoleratedTaint {
                    key: Sym::new("gpu"),
                    value: Sym::new("true"),
                }),
            ),
            (
                "node selector matches",
                node().label("disk", "ssd").build(),
                PodBuilder::new("p", 1, 1)
                    .node_selector("disk", "ssd")
                    .build(),
                Ok(()),
            ),
            (
                "node selector mismatch",
                node().label("disk", "hdd").build(),
                PodBuilder::new("p", 1, 1)
                    .node_selector("disk", "ssd")
                    .build(),
                Err(Unfit::NodeAffinity),
            ),
            (
                "selector and affinity are ANDed",
                node().label("disk", "ssd").build(),
                PodBuilder::new("p", 1, 1)
                    .node_selector("disk", "ssd")
                    .node_affinity("zone", In, &["a"])
                    .build(),
                Err(Unfit::NodeAffinity),
            ),
            (
                "affinity terms are ORed",
                node().label("zone", "b").build(),
                PodBuilder::new("p", 1, 1)
                    .node_affinity("zone", In, &["a"])
                    .node_affinity("zone", In, &["b"])
                    .build(),
                Ok(()),
            ),
            (
                "NotIn matches a missing label",
                node().build(),
                PodBuilder::new("p", 1, 1)
                    .node_affinity("zone", NotIn, &["a"])
                    .build(),
                Ok(()),
            ),
            (
                "DoesNotExist",
                node().label("zone", "a").build(),
                PodBuilder::new("p", 1, 1)
                    .node_affinity("zone", DoesNotExist, &[])
                    .build(),
                Err(Unfit::NodeAffinity),
            ),
            (
                "Exists",
                node().label("zone", "a").build(),
                PodBuilder::new("p", 1, 1)
                    .node_affinity("zone", Exists, &[])
                    .build(),
                Ok(()),
            ),
            (
                "Gt on integers",
                node().label("cores", "16").build(),
                PodBuilder::new("p", 1, 1)
                    .node_affinity("cores", Gt, &["8"])
                    .build(),
                Ok(()),
            ),
            (
                "Lt on integers",
                node().label("cores", "16").build(),
                PodBuilder::new("p", 1, 1)
                    .node_affinity("cores", Lt, &["8"])
                    .build(),
                Err(Unfit::NodeAffinity),
            ),
            (
                "Gt on a non-number label never matches",
                node().label("cores", "many").build(),
                PodBuilder::new("p", 1, 1)
                    .node_affinity("cores", Gt, &["8"])
                    .build(),
                Err(Unfit::NodeAffinity),
            ),
            (
                "Lt with a non-number value never matches",
                node().label("cores", "4").build(),
                PodBuilder::new("p", 1, 1)
                    .node_affinity("cores", Lt, &["eight"])
                    .build(),
                Err(Unfit::NodeAffinity),
            ),
            (
                "Gt on a missing label",
                node().build(),
                PodBuilder::new("p", 1, 1)
                    .node_affinity("cores", Gt, &["1"])
                    .build(),
                Err(Unfit::NodeAffinity),
            ),
            (
                "matchFields metadata.name In",
                node().build(),
                PodBuilder::new("p", 1, 1)
                    .with(|p| field_term(p, In, "n1"))
                    .build(),
                Ok(()),
            ),
            (
                "matchFields metadata.name In other",
                node().build(),
                PodBuilder::new("p", 1, 1)
                    .with(|p| field_term(p, In, "n2"))
                    .build(),
                Err(Unfit::NodeAffinity),
            ),
            (
                "matchFields metadata.name NotIn",
                node().build(),
                PodBuilder::new("p", 1, 1)
                    .with(|p| field_term(p, NotIn, "n1"))
                    .build(),
                Err(Unfit::NodeAffinity),
            ),
            (
                "empty term matches nothing",
                node().build(),
                PodBuilder::new("p", 1, 1)
                    .with(|p| {
                        p.required_node_affinity = Some(NodeSelector {
                            terms: vec![NodeSelectorTerm::default()],
                        })
                    })
                    .build(),
                Err(Unfit::NodeAffinity),
            ),
            (
                "cordon checked before taints",
                node()
                    .unschedulable()
                    .taint("a", "", TaintEffect::NoSchedule)
                    .build(),
                PodBuilder::new("p", 1, 1).build(),
                Err(Unfit::Unschedulable),
            ),
        ];
        for (name, n, pod, want) in cases {
            assert_eq!(check_node_static(&pod, &n), want, "{name}");
            let (s, id) = one_node(n);
            assert_eq!(s.check_pod(&pod, id), want, "{name} (snapshot)");
        }
    }

    fn field_term(p: &mut Pod, op: NodeSelectorOp, name: &str) {
        let term = NodeSelectorTerm {
            match_expressions: vec![],
            match_fields: vec![NodeSelectorRequirement {
                key: Sym::new("metadata.name"),
                op,
                values: vec![Sym::new(name)],
            }],
        };
        p.required_node_affinity
            .get_or_insert_with(NodeSelector::default)
            .terms
            .push(term);
    }

    #[test]
    fn resources_report_every_shortage() {
        let n = NodeBuilder::new("n1", 1000, GI)
            .pods(2)
            .resource("nvidia.com/gpu", 1)
            .build();
        let (mut s, id) = one_node(n);
        s.add_pod(PodBuilder::new("a", 600, GI / 2).arc(), id)
            .unwrap();
        let gpu = ResourceName::parse("nvidia.com/gpu");
        let cases: Vec<(&str, Pod, Result<(), Unfit>)> = vec![
            ("fits", PodBuilder::new("p", 400, GI / 2).build(), Ok(())),
            (
                "cpu",
                PodBuilder::new("p", 401, 1).build(),
                Err(Unfit::Insufficient(SmallVec::from_slice(&[
                    ResourceName::Cpu,
                ]))),
            ),
            (
                "cpu and memory",
                PodBuilder::new("p", 500, GI).build(),
                Err(Unfit::Insufficient(SmallVec::from_slice(&[
                    ResourceName::Cpu,
                    ResourceName::Memory,
                ]))),
            ),
            (
                "extended",
                PodBuilder::new("p", 1, 1)
                    .resource("nvidia.com/gpu", 2)
                    .build(),
                Err(Unfit::Insufficient(SmallVec::from_slice(&[gpu]))),
            ),
            (
                "unknown extended",
                PodBuilder::new("p", 1, 1)
                    .resource("example.com/foo", 1)
                    .build(),
                Err(Unfit::Insufficient(SmallVec::from_slice(&[
                    ResourceName::parse("example.com/foo"),
                ]))),
            ),
        ];
        for (name, pod, want) in cases {
            assert_eq!(s.check_pod(&pod, id), want, "{name}");
        }
        s.add_pod(PodBuilder::new("b", 0, 0).arc(), id).unwrap();
        let err = s
            .check_pod(&PodBuilder::new("p", 500, 1).build(), id)
            .unwrap_err();
        assert_eq!(err.to_string(), "Too many pods, Insufficient cpu");
        assert_eq!(
            err.reasons(),
            vec!["Too many pods".to_string(), "Insufficient cpu".into()]
        );
    }

    const ZONE: &str = "topology.kubernetes.io/zone";
    const HOST: &str = "kubernetes.io/hostname";

    fn hp(ip: &str, proto: &str, port: u16) -> HostPort {
        HostPort {
            ip: Sym::new(ip),
            protocol: Sym::new(proto),
            port,
        }
    }

    #[test]
    fn host_ports() {
        let cases: Vec<(&str, HostPort, HostPort, bool)> = vec![
            (
                "same wildcard",
                hp("0.0.0.0", "TCP", 80),
                hp("0.0.0.0", "TCP", 80),
                false,
            ),
            (
                "wildcard vs specific",
                hp("0.0.0.0", "TCP", 80),
                hp("10.0.0.1", "TCP", 80),
                false,
            ),
            (
                "specific vs wildcard",
                hp("10.0.0.1", "TCP", 80),
                hp("0.0.0.0", "TCP", 80),
                false,
            ),
            (
                "same specific",
                hp("10.0.0.1", "TCP", 80),
                hp("10.0.0.1", "TCP", 80),
                false,
            ),
            (
                "different ips",
                hp("10.0.0.1", "TCP", 80),
                hp("10.0.0.2", "TCP", 80),
                true,
            ),
            (
                "different protocols",
                hp("0.0.0.0", "TCP", 80),
                hp("0.0.0.0", "UDP", 80),
                true,
            ),
            (
                "different ports",
                hp("0.0.0.0", "TCP", 80),
                hp("0.0.0.0", "TCP", 81),
                true,
            ),
        ];
        for (name, used, want, fits) in cases {
            let (mut s, id) = one_node(node().build());
            let existing = PodBuilder::new("e", 1, 1)
                .with(|p| p.host_ports.push(used))
                .arc();
            s.add_pod(existing, id).unwrap();
            let pod = PodBuilder::new("p", 1, 1)
                .with(|p| p.host_ports.push(want))
                .build();
            let got = s.check_pod(&pod, id);
            if fits {
                assert_eq!(got, Ok(()), "{name}");
            } else {
                assert_eq!(got, Err(Unfit::NodePorts), "{name}");
            }
        }
    }

    /// Three zones a, b, c with two nodes each (`a1`, `a2`, ...), 10 cpu each.
    fn zoned() -> ClusterSnapshot {
        let mut s = ClusterSnapshot::new();
        for z in ["a", "b", "c"] {
            for i in 1..=2 {
                s.add_node(
                    NodeBuilder::new(&format!("{z}{i}"), 10_000, 16 * GI)
                        .zone(z)
                        .arc(),
                )
                .unwrap();
            }
        }
        s
    }

    fn id(s: &ClusterSnapshot, name: &str) -> NodeId {
        s.node_id(Sym::new(name)).expect("node exists")
    }

    fn place(s: &mut ClusterSnapshot, node: &str, pod: PodBuilder) {
        let n = id(s, node);
        s.add_pod(pod.arc(), n).unwrap();
    }

    fn web(name: &str) -> PodBuilder {
        PodBuilder::new(name, 10, 10).label("app", "web")
    }

    #[test]
    fn pod_affinity() {
        let mut s = zoned();
        place(&mut s, "a1", web("w1"));
        let pod = PodBuilder::new("p", 1, 1)
            .affinity("app", "web", ZONE)
            .build();
        assert_eq!(s.check_pod(&pod, id(&s, "a2")), Ok(()), "same zone");
        assert_eq!(
            s.check_pod(&pod, id(&s, "b1")),
            Err(Unfit::PodAffinity),
            "other zone"
        );
        let host = PodBuilder::new("p", 1, 1)
            .affinity("app", "web", HOST)
            .build();
        assert_eq!(s.check_pod(&host, id(&s, "a1")), Ok(()));
        assert_eq!(s.check_pod(&host, id(&s, "a2")), Err(Unfit::PodAffinity));
        // Other namespace does not count.
        let other_ns = PodBuilder::new("p", 1, 1)
            .namespace("other")
            .affinity("app", "web", ZONE)
            .build();
        assert_eq!(
            s.check_pod(&other_ns, id(&s, "a2")),
            Err(Unfit::PodAffinity)
        );
        // A node lacking the topology key fails.
        let nolabel = s
            .add_node(NodeBuilder::new("bare", 10_000, GI).arc())
            .unwrap();
        assert_eq!(s.check_pod(&pod, nolabel), Err(Unfit::PodAffinity));
    }

    #[test]
    fn pod_affinity_first_of_series() {
        let mut s = zoned();
        let bare = s
            .add_node(NodeBuilder::new("bare", 10_000, GI).arc())
            .unwrap();
        // Matches its own term, nothing else matches: allowed anywhere with the key.
        let selfish = web("p").affinity("app", "web", ZONE).build();
        assert_eq!(s.check_pod(&selfish, id(&s, "b1")), Ok(()));
        assert_eq!(
            s.check_pod(&selfish, bare),
            Err(Unfit::PodAffinity),
            "key still required"
        );
        // Does not match its own term: refused.
        let other = PodBuilder::new("p", 1, 1)
            .affinity("app", "web", ZONE)
            .build();
        assert_eq!(s.check_pod(&other, id(&s, "b1")), Err(Unfit::PodAffinity));
        // Once a matching pod exists, the exception no longer applies.
        place(&mut s, "a1", web("w1"));
        assert_eq!(s.check_pod(&selfish, id(&s, "b1")), Err(Unfit::PodAffinity));
        assert_eq!(s.check_pod(&selfish, id(&s, "a2")), Ok(()));
    }

    #[test]
    fn pod_affinity_needs_all_terms_matched_by_one_pod() {
        let mut s = zoned();
        place(&mut s, "a1", web("w1"));
        place(&mut s, "a1", PodBuilder::new("db", 1, 1).label("app", "db"));
        let pod = PodBuilder::new("p", 1, 1)
            .affinity("app", "web", ZONE)
            .affinity("app", "db", ZONE)
            .build();
        // No single pod matches both terms.
        assert_eq!(s.check_pod(&pod, id(&s, "a2")), Err(Unfit::PodAffinity));
    }

    #[test]
    fn pod_anti_affinity() {
        let mut s = zoned();
        place(&mut s, "a1", web("w1"));
        let pod = PodBuilder::new("p", 1, 1)
            .anti_affinity("app", "web", ZONE)
            .build();
        assert_eq!(s.check_pod(&pod, id(&s, "a2")), Err(Unfit::PodAntiAffinity));
        assert_eq!(s.check_pod(&pod, id(&s, "b1")), Ok(()));
        // A node without the key is not in any domain: allowed.
        let bare = s
            .add_node(NodeBuilder::new("bare", 10_000, GI).arc())
            .unwrap();
        assert_eq!(s.check_pod(&pod, bare), Ok(()));
    }

    #[test]
    fn existing_pods_anti_affinity() {
        let mut s = zoned();
        // Only the existing pod declares anti-affinity, against app=web.
        place(
            &mut s,
            "a1",
            PodBuilder::new("lonely", 1, 1).anti_affinity("app", "web", ZONE),
        );
        let pod = web("w").build();
        let p = s.prepare(&pod);
        assert!(!p.is_trivial());
        assert_eq!(
            s.check(&pod, &p, id(&s, "a2")),
            Err(Unfit::ExistingAntiAffinity)
        );
        assert_eq!(s.check(&pod, &p, id(&s, "c1")), Ok(()));
        // A pod it does not select is unaffected and stays trivial.
        let plain = PodBuilder::new("q", 1, 1).build();
        assert!(s.prepare(&plain).is_trivial());
        assert_eq!(s.check_pod(&plain, id(&s, "a2")), Ok(()));
        // Other namespace: the term only looks at its own namespace.
        let other = web("w").namespace("other").build();
        assert_eq!(s.check_pod(&other, id(&s, "a2")), Ok(()));
    }

    #[test]
    fn namespace_selector() {
        let mut s = zoned();
        s.set_namespace_labels(vec![
            NamespaceLabels {
                name: Sym::new("prod"),
                labels: Labels::from_pairs([("env", "prod")]),
            },
            NamespaceLabels {
                name: Sym::new("dev"),
                labels: Labels::from_pairs([("env", "dev")]),
            },
        ]);
        place(&mut s, "a1", web("w-prod").namespace("prod"));
        place(&mut s, "b1", web("w-dev").namespace("dev"));
        let with_sel = |sel: Option<LabelSelector>| {
            PodBuilder::new("p", 1, 1)
                .anti_affinity("app", "web", ZONE)
                .with(|p| {
                    p.anti_affinity[0].namespaces.clear();
                    p.anti_affinity[0].namespace_selector = sel;
                })
                .build()
        };
        let prod = with_sel(Some(LabelSelector {
            match_labels: Labels::from_pairs([("env", "prod")]),
            match_expressions: vec![],
        }));
        assert_eq!(
            s.check_pod(&prod, id(&s, "a2")),
            Err(Unfit::PodAntiAffinity)
        );
        assert_eq!(s.check_pod(&prod, id(&s, "b2")), Ok(()));
        let all = with_sel(Some(LabelSelector::default()));
        assert_eq!(s.check_pod(&all, id(&s, "a2")), Err(Unfit::PodAntiAffinity));
        assert_eq!(s.check_pod(&all, id(&s, "b2")), Err(Unfit::PodAntiAffinity));
        assert_eq!(s.check_pod(&all, id(&s, "c1")), Ok(()));
        // Existing pod's term with a namespace selector selecting the incoming pod's namespace.
        place(
            &mut s,
            "c1",
            PodBuilder::new("guard", 1, 1)
                .anti_affinity("app", "db", ZONE)
                .with(|p| {
                    p.anti_affinity[0].namespace_selector = Some(LabelSelector {
                        match_labels: Labels::from_pairs([("env", "dev")]),
                        match_expressions: vec![],
                    });
                }),
        );
        let db_dev = PodBuilder::new("db", 1, 1)
            .namespace("dev")
            .label("app", "db")
            .build();
        assert_eq!(
            s.check_pod(&db_dev, id(&s, "c2")),
            Err(Unfit::ExistingAntiAffinity)
        );
        let db_prod = PodBuilder::new("db", 1, 1)
            .namespace("prod")
            .label("app", "db")
            .build();
        assert_eq!(s.check_pod(&db_prod, id(&s, "c2")), Ok(()));
    }

    #[test]
    fn topology_spread() {
        let mut s = zoned();
        place(&mut s, "a1", web("w1"));
        place(&mut s, "a2", web("w2"));
        place(&mut s, "b1", web("w3"));
        let pod = web("p").spread("app", "web", ZONE, 1, None).build();
        // counts a=2, b=1, c=0: min 0.
        assert_eq!(s.check_pod(&pod, id(&s, "a1")), Err(Unfit::Spread));
        assert_eq!(s.check_pod(&pod, id(&s, "b1")), Err(Unfit::Spread));
        assert_eq!(s.check_pod(&pod, id(&s, "c1")), Ok(()));
        let skew2 = web("p").spread("app", "web", ZONE, 2, None).build();
        assert_eq!(s.check_pod(&skew2, id(&s, "b2")), Ok(()));
        // Not matching its own selector: no +1 for itself.
        let outsider = PodBuilder::new("p", 1, 1)
            .spread("app", "web", ZONE, 1, None)
            .build();
        assert_eq!(s.check_pod(&outsider, id(&s, "b1")), Ok(()));
        assert_eq!(s.check_pod(&outsider, id(&s, "a1")), Err(Unfit::Spread));
        // Missing key.
        let bare = s
            .add_node(NodeBuilder::new("bare", 10_000, GI).arc())
            .unwrap();
        assert_eq!(s.check_pod(&pod, bare), Err(Unfit::SpreadMissingLabel));
        assert_eq!(
            Unfit::SpreadMissingLabel.to_string(),
            "node(s) didn't match pod topology spread constraints (missing required label)"
        );
        // Terminating pods and other namespaces are not counted.
        let n = id(&s, "c1");
        s.add_pod(web("dying").with(|p| p.deletion_ms = Some(1)).arc(), n)
            .unwrap();
        s.add_pod(web("elsewhere").namespace("other").arc(), n)
            .unwrap();
        assert_eq!(s.check_pod(&pod, id(&s, "c2")), Ok(()));
        // Soft constraints are ignored.
        let soft = web("p")
            .spread("app", "web", ZONE, 1, None)
            .with(|p| p.spread[0].when_unsatisfiable = WhenUnsatisfiable::ScheduleAnyway)
            .build();
        assert!(s.prepare(&soft).is_trivial());
        assert_eq!(s.check_pod(&soft, id(&s, "a1")), Ok(()));
    }

    #[test]
    fn spread_min_domains() {
        let mut s = ClusterSnapshot::new();
        for z in ["a", "b"] {
            s.add_node(NodeBuilder::new(z, 10_000, GI).zone(z).arc())
                .unwrap();
        }
        place(&mut s, "a", web("w1"));
        place(&mut s, "b", web("w2"));
        // counts a=1, b=1: global min 1, skew 1 everywhere.
        let pod = web("p").spread("app", "web", ZONE, 1, None).build();
        assert_eq!(s.check_pod(&pod, id(&s, "a")), Ok(()));
        // minDomains 3 > 2 eligible domains: min is 0, skew 2 > 1.
        let md = web("p").spread("app", "web", ZONE, 1, Some(3)).build();
        assert_eq!(s.check_pod(&md, id(&s, "a")), Err(Unfit::Spread));
        let md_ok = web("p").spread("app", "web", ZONE, 1, Some(2)).build();
        assert_eq!(s.check_pod(&md_ok, id(&s, "a")), Ok(()));
    }

    #[test]
    fn spread_inclusion_policies() {
        let mut s = ClusterSnapshot::new();
        s.add_node(
            NodeBuilder::new("a", 10_000, GI)
                .zone("a")
                .label("pool", "x")
                .arc(),
        )
        .unwrap();
        s.add_node(
            NodeBuilder::new("b", 10_000, GI)
                .zone("b")
                .label("pool", "x")
                .arc(),
        )
        .unwrap();
        s.add_node(
            NodeBuilder::new("c", 10_000, GI)
                .zone("c")
                .label("pool", "y")
                .taint("t", "", TaintEffect::NoSchedule)
                .arc(),
        )
        .unwrap();
        place(&mut s, "a", web("w1"));
        place(&mut s, "b", web("w2"));
        let base = || web("p").spread("app", "web", ZONE, 1, None);
        // Honor node affinity (default): zone c excluded, min 1, skew 1 on a.
        let honor = base().node_selector("pool", "x").build();
        assert_eq!(s.check_pod(&honor, id(&s, "a")), Ok(()));
        // Ignore node affinity: zone c (0 pods) counts, skew 2 on a.
        let ignore = base()
            .node_selector("pool", "x")
            .with(|p| p.spread[0].node_affinity_policy = InclusionPolicy::Ignore)
            .build();
        assert_eq!(s.check_pod(&ignore, id(&s, "a")), Err(Unfit::Spread));
        // Taints ignored (default): c counts.
        let taints_ignored = base().build();
        assert_eq!(
            s.check_pod(&taints_ignored, id(&s, "a")),
            Err(Unfit::Spread)
        );
        // Taints honored: the tainted zone c is excluded.
        let taints_honored = base()
            .with(|p| p.spread[0].node_taints_policy = InclusionPolicy::Honor)
            .build();
        assert_eq!(s.check_pod(&taints_honored, id(&s, "a")), Ok(()));
    }

    #[test]
    fn prepare_is_trivial_and_refresh_tracks_changes() {
        let mut s = zoned();
        let plain = PodBuilder::new("p", 1, 1).build();
        let mut p = s.prepare(&plain);
        assert!(p.is_trivial());
        assert_eq!(p.version(), s.version());
        // An anti-affinity pod appears: refresh must pick it up.
        place(
            &mut s,
            "a1",
            PodBuilder::new("guard", 1, 1).anti_affinity("app", "web", ZONE),
        );
        let w = web("w").build();
        let mut pw = Prepared::default();
        s.refresh(&w, &mut pw);
        assert_eq!(
            s.check(&w, &pw, id(&s, "a2")),
            Err(Unfit::ExistingAntiAffinity)
        );
        s.refresh(&plain, &mut p);
        assert!(p.is_trivial(), "the guard does not select plain pods");
        assert_eq!(p.version(), s.version());
        // Spread counts follow placements after refresh.
        let spread = web("s").spread("app", "web", ZONE, 1, None).build();
        let mut ps = s.prepare(&spread);
        assert_eq!(s.check(&spread, &ps, id(&s, "b1")), Ok(()));
        s.fork();
        place(&mut s, "a2", web("x0"));
        place(&mut s, "b1", web("x1"));
        place(&mut s, "c1", web("x2"));
        s.refresh(&spread, &mut ps);
        assert_eq!(s.check(&spread, &ps, id(&s, "b1")), Ok(()));
        place(&mut s, "b2", web("x3"));
        s.refresh(&spread, &mut ps);
        assert_eq!(s.check(&spread, &ps, id(&s, "b1")), Err(Unfit::Spread));
        s.revert().unwrap();
        s.refresh(&spread, &mut ps);
        assert_eq!(s.check(&spread, &ps, id(&s, "b1")), Ok(()));
    }

    #[test]
    fn filter_order_and_messages() {
        // Resources are checked before inter-pod rules.
        let mut s = zoned();
        place(&mut s, "a1", web("w1"));
        let pod = PodBuilder::new("p", 20_000, 1)
            .anti_affinity("app", "web", ZONE)
            .build();
        assert!(matches!(
            s.check_pod(&pod, id(&s, "a1")),
            Err(Unfit::Insufficient(_))
        ));
        let texts = [
            (Unfit::Unschedulable, "node(s) were unschedulable"),
            (
                Unfit::NodeName,
                "node(s) didn't match the requested node name",
            ),
            (
                Unfit::UntoleratedTaint {
                    key: Sym::new("k"),
                    value: Sym::new("v"),
                },
                "node(s) had untolerated taint {k: v}",
            ),
            (
                Unfit::NodeAffinity,
                "node(s) didn't match Pod's node affinity/selector",
            ),
            (
                Unfit::NodePorts,
                "node(s) didn't have free ports for the requested pod ports",
            ),
            (
                Unfit::Insufficient(SmallVec::from_slice(&[ResourceName::Cpu])),
                "Insufficient cpu",
            ),
            (
                Unfit::Spread,
                "node(s) didn't match pod topology spread constraints",
            ),
            (
                Unfit::PodAffinity,
                "node(s) didn't match pod affinity rules",
            ),
            (
                Unfit::PodAntiAffinity,
                "node(s) didn't match pod anti-affinity rules",
            ),
            (
                Unfit::ExistingAntiAffinity,
                "node(s) didn't satisfy existing pods anti-affinity rules",
            ),
        ];
        for (u, t) in texts {
            assert_eq!(u.to_string(), t);
        }
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Op {
            /// Pod name, node index (modulo the live nodes), kind.
            Add(u8, u8, u8),
            Remove(u8),
            /// Node name, kind.
            AddNode(u8, u8),
            /// Node index (modulo the live nodes).
            RemoveNode(u8),
            /// Whether the default namespace is labelled env=prod.
            NamespaceLabels(bool),
            Fork,
            Revert,
            Commit,
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                6 => (0u8..16, any::<u8>(), 0u8..8).prop_map(|(p, n, k)| Op::Add(p, n, k)),
                3 => (0u8..16).prop_map(Op::Remove),
                2 => (0u8..6, 0u8..6).prop_map(|(n, k)| Op::AddNode(n, k)),
                1 => any::<u8>().prop_map(Op::RemoveNode),
                1 => any::<bool>().prop_map(Op::NamespaceLabels),
                1 => Just(Op::Fork),
                1 => Just(Op::Revert),
                1 => Just(Op::Commit),
            ]
        }

        fn existing(p: u8, kind: u8) -> Arc<Pod> {
            let b = PodBuilder::new(&format!("e{p}"), 10, 10);
            match kind {
                0 => b.label("app", "web"),
                1 => b.label("app", "db"),
                2 => b.label("app", "web").anti_affinity("app", "web", HOST),
                3 => b.anti_affinity("app", "db", ZONE),
                4 => web("x").with(|p| p.deletion_ms = Some(1)),
                5 => web("x").namespace("other"),
                // Anti-affinity towards web pods of namespaces labelled env=prod.
                6 => b
                    .label("app", "guard")
                    .anti_affinity("app", "web", ZONE)
                    .with(|p| {
                        p.anti_affinity[0].namespaces.clear();
                        p.anti_affinity[0].namespace_selector = Some(LabelSelector {
                            match_labels: Labels::from_pairs([("env", "prod")]),
                            match_expressions: vec![],
                        });
                    }),
                _ => b,
            }
            .with(|x| x.name = format!("e{p}").into())
            .arc()
        }

        fn extra_node(n: u8, kind: u8) -> Arc<Node> {
            let b = NodeBuilder::new(&format!("n{n}"), 10_000, 16 * GI);
            match kind {
                0 => b.zone("a"),
                1 => b.zone("d"),
                2 => b,
                3 => b.zone("b").taint("t", "", TaintEffect::NoSchedule),
                4 => b.zone("e").label("pool", "x"),
                _ => b.zone("c").label("pool", "x"),
            }
            .arc()
        }

        fn probes() -> Vec<Pod> {
            vec![
                PodBuilder::new("plain", 1, 1).build(),
                web("w").build(),
                PodBuilder::new("db", 1, 1).label("app", "db").build(),
                web("s").spread("app", "web", ZONE, 1, None).build(),
                web("s4").spread("app", "web", ZONE, 1, Some(4)).build(),
                web("sh").spread("app", "web", HOST, 1, None).build(),
                web("sp")
                    .spread("app", "web", ZONE, 1, None)
                    .spread("app", "db", HOST, 2, Some(2))
                    .node_selector("pool", "x")
                    .with(|p| p.spread[1].node_taints_policy = InclusionPolicy::Honor)
                    .build(),
                web("a").affinity("app", "web", ZONE).build(),
                PodBuilder::new("x", 1, 1)
                    .anti_affinity("app", "web", ZONE)
                    .build(),
                PodBuilder::new("ax", 1, 1)
                    .label("app", "db")
                    .affinity("app", "db", HOST)
                    .anti_affinity("app", "web", HOST)
                    .build(),
                PodBuilder::new("nsel", 1, 1)
                    .anti_affinity("app", "web", ZONE)
                    .with(|p| {
                        p.anti_affinity[0].namespaces.clear();
                        p.anti_affinity[0].namespace_selector = Some(LabelSelector::default());
                    })
                    .build(),
            ]
        }

        proptest! {
            /// Prepared state kept current with `refresh` answers exactly like a fresh
            /// `prepare`, for trivial and non-trivial pods, across pod and node changes,
            /// namespace labels, forks, commits and reverts; refreshed after every change or
            /// only every few changes (longer replays). The state itself equals the fresh one.
            #[test]
            fn refreshed_equals_fresh(ops in proptest::collection::vec(op(), 1..60)) {
                let mut s = zoned();
                let probes = probes();
                let mut eager: Vec<Prepared> = probes.iter().map(|p| s.prepare(p)).collect();
                let mut lazy = eager.clone();
                for (step, op) in ops.into_iter().enumerate() {
                    let ids: Vec<NodeId> = s.node_ids().collect();
                    let pick = |i: u8| (!ids.is_empty()).then(|| ids[usize::from(i) % ids.len()]);
                    match op {
                        Op::Add(p, n, k) => {
                            if let Some(n) = pick(n) {
                                let _ = s.add_pod(existing(p, k), n);
                            }
                        }
                        Op::Remove(p) => {
                            let name = format!("e{p}");
                            for ns in ["default", "other"] {
                                let ns = Sym::new(ns);
                                if let Some((n, _)) = s.pod(ns, &name) {
                                    s.remove_pod(n, ns, &name).unwrap();
                                }
                            }
                        }
                        Op::AddNode(n, k) => {
                            let _ = s.add_node(extra_node(n, k));
                        }
                        Op::RemoveNode(n) => {
                            if let Some(n) = pick(n) {
                                s.remove_node(n).unwrap();
                            }
                        }
                        Op::NamespaceLabels(prod) => {
                            let labels = if prod {
                                Labels::from_pairs([("env", "prod")])
                            } else {
                                Labels::new()
                            };
                            s.set_namespace_labels(vec![NamespaceLabels {
                                name: Sym::new("default"),
                                labels,
                            }]);
                        }
                        Op::Fork => s.fork(),
                        Op::Revert => {
                            let _ = s.revert();
                        }
                        Op::Commit => {
                            let _ = s.commit();
                        }
                    }
                    let ids: Vec<NodeId> = s.node_ids().collect();
                    for (i, probe) in probes.iter().enumerate() {
                        let fresh = s.prepare(probe);
                        let mut states = vec![&mut eager[i]];
                        if step % 3 == 2 {
                            states.push(&mut lazy[i]);
                        }
                        for prep in states {
                            s.refresh(probe, prep);
                            prop_assert_eq!(prep.version(), s.version());
                            prop_assert_eq!(prep.is_trivial(), fresh.is_trivial());
                            prop_assert_eq!(&prep.heavy, &fresh.heavy, "probe {}", probe.name);
                            for &n in &ids {
                                prop_assert_eq!(s.check(probe, prep, n), s.check(probe, &fresh, n));
                            }
                        }
                    }
                }
            }
        }
    }
}

//! kube-scheduler's filters over a [`ClusterSnapshot`]: whether a pod may be placed on a node.
//!
//! Modelled filter plugins, in the scheduler's default order: NodeUnschedulable, NodeName,
//! TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, PodTopologySpread (hard
//! constraints only) and InterPodAffinity (required terms only). Scores and soft constraints are
//! never evaluated.
//!
//! As in the scheduler, the work is split in two: [`ClusterSnapshot::prepare`] (PreFilter)
//! computes per-pod state once (topology counts for affinity, anti-affinity and spread, and the
//! topology domains that existing pods' anti-affinity forbids), and [`ClusterSnapshot::check`]
//! (Filter) answers for one node with a few comparisons. For a pod without inter-pod or spread
//! constraints in a cluster where no pod has anti-affinity, preparing is O(1) and the prepared
//! state is empty. This module only reads the snapshot; it never mutates it and never panics.

use std::fmt;

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::affinity::{
    InclusionPolicy, NodeSelectorOp, NodeSelectorRequirement, NodeSelectorTerm, PodAffinityTerm,
    WhenUnsatisfiable,
};
use crate::intern::Sym;
use crate::labels::Labels;
use crate::node::Node;
use crate::pod::{HostPort, Pod};
use crate::resources::ResourceName;
use crate::snapshot::{ClusterSnapshot, NodeId, NodeInfo};
use crate::taints::{Taint, TaintEffect, first_untolerated};

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
        }
    }

    /// Whether only a change of the node itself (not removing pods from it) could make the pod
    /// fit: the scheduler's `UnschedulableAndUnresolvable`.
    pub fn is_unresolvable(&self) -> bool {
        matches!(
            self,
            Unfit::Unschedulable
                | Unfit::NodeName
                | Unfit::UntoleratedTaint { .. }
                | Unfit::NodeAffinity
                | Unfit::SpreadMissingLabel
                | Unfit::PodAffinity
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
        }
    }
}

/// A (topology key, value) pair.
type Pair = (Sym, Sym);

/// Per hard spread constraint: matching pods per eligible domain and the effective minimum.
#[derive(Clone, Debug)]
struct SpreadState {
    /// Topology key.
    key: Sym,
    /// `maxSkew`.
    max_skew: i64,
    /// Matching pods per eligible domain value (domains without pods are present with 0).
    counts: FxHashMap<Sym, i64>,
    /// The global minimum to subtract: 0 when there are fewer eligible domains than
    /// `minDomains`, otherwise the smallest count.
    min: i64,
    /// Whether the incoming pod matches its own selector (adds 1 to the node's domain).
    self_match: i64,
}

/// The non-trivial part of a prepared pod.
#[derive(Clone, Debug, Default)]
struct Heavy {
    /// Topology pairs where an existing pod's anti-affinity term matches the incoming pod.
    existing_anti: Vec<Pair>,
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

/// Per-pod state computed once against a snapshot version (kube-scheduler's PreFilter): affinity
/// and spread counts per topology domain, existing pods' anti-affinity against this pod.
#[derive(Clone, Debug, Default)]
pub struct Prepared {
    version: u64,
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

impl ClusterSnapshot {
    /// PreFilter: O(1) for a pod without affinity, anti-affinity or spread constraints when no
    /// existing pod has anti-affinity.
    pub fn prepare(&self, pod: &Pod) -> Prepared {
        let heavy = if !needs_cluster_state(pod) && self.anti_affinity_pod_count() == 0 {
            None
        } else {
            let h = self.compute_heavy(pod);
            let empty = h.existing_anti.is_empty()
                && h.affinity_keys.is_empty()
                && h.anti_keys.is_empty()
                && h.spread.is_empty();
            (!empty).then(|| Box::new(h))
        };
        Prepared {
            version: self.version(),
            heavy,
        }
    }

    /// Makes `prepared` current after snapshot mutations (no-op when not stale or trivial).
    pub fn refresh(&self, pod: &Pod, prepared: &mut Prepared) {
        if prepared.version == self.version() {
            return;
        }
        if !needs_cluster_state(pod) && self.anti_affinity_pod_count() == 0 {
            prepared.heavy = None;
            prepared.version = self.version();
            return;
        }
        *prepared = self.prepare(pod);
    }

    /// Filter: all predicates of `pod` on `node`, first failure returned. `prepared` must come
    /// from [`ClusterSnapshot::prepare`] for this pod and be current (see
    /// [`ClusterSnapshot::refresh`]). An unknown node is reported as [`Unfit::NodeName`].
    #[inline]
    pub fn check(&self, pod: &Pod, prepared: &Prepared, node: NodeId) -> Result<(), Unfit> {
        let Some(info) = self.node(node) else {
            return Err(Unfit::NodeName);
        };
        check_node_static(pod, &info.node)?;
        check_ports(pod, info)?;
        check_resources(pod, info)?;
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

    /// Calls `f` with every pod that any of `terms` could select (by namespace), with its node.
    fn for_candidates<'a>(
        &'a self,
        terms: impl Iterator<Item = &'a PodAffinityTerm> + Clone,
        mut f: impl FnMut(&NodeInfo, &Pod),
    ) {
        let mut visit = |n: NodeId, p: &Pod| {
            if let Some(info) = self.node(n) {
                f(info, p);
            }
        };
        if terms.clone().any(|t| t.namespace_selector.is_some()) {
            for (n, p) in self.all_pods() {
                visit(n, p);
            }
        } else {
            let mut namespaces: SmallVec<[Sym; 4]> =
                terms.flat_map(|t| t.namespaces.iter().copied()).collect();
            namespaces.sort_unstable();
            namespaces.dedup();
            for ns in namespaces {
                for (n, p) in self.pods_in_namespace(ns) {
                    visit(n, p);
                }
            }
        }
    }

    fn compute_heavy(&self, pod: &Pod) -> Heavy {
        let mut h = Heavy::default();

        // Existing pods' anti-affinity against the incoming pod.
        for (n, existing) in self.pods_with_anti_affinity() {
            let Some(info) = self.node(n) else { continue };
            for term in &existing.anti_affinity {
                if let Some(v) = info.node.labels.get(term.topology_key)
                    && self.term_selects(term, pod)
                {
                    h.existing_anti.push((term.topology_key, v));
                }
            }
        }
        h.existing_anti.sort_unstable();
        h.existing_anti.dedup();

        // The incoming pod's own affinity and anti-affinity.
        if pod.has_pod_affinity() {
            h.affinity_keys = pod.affinity.iter().map(|t| t.topology_key).collect();
            h.anti_keys = pod.anti_affinity.iter().map(|t| t.topology_key).collect();
            h.affinity_self_match =
                !pod.affinity.is_empty() && pod.affinity.iter().all(|t| self.term_selects(t, pod));
            let terms = pod.affinity.iter().chain(pod.anti_affinity.iter());
            let mut aff = FxHashMap::default();
            let mut anti = FxHashMap::default();
            self.for_candidates(terms, |info, existing| {
                let labels = &info.node.labels;
                if !pod.affinity.is_empty()
                    && pod.affinity.iter().all(|t| self.term_selects(t, existing))
                {
                    for t in &pod.affinity {
                        if let Some(v) = labels.get(t.topology_key) {
                            *aff.entry((t.topology_key, v)).or_insert(0u32) += 1;
                        }
                    }
                }
                for t in &pod.anti_affinity {
                    if let Some(v) = labels.get(t.topology_key)
                        && self.term_selects(t, existing)
                    {
                        *anti.entry((t.topology_key, v)).or_insert(0u32) += 1;
                    }
                }
            });
            h.affinity_counts = aff;
            h.anti_counts = anti;
        }

        // Hard topology spread constraints.
        let hard: SmallVec<[_; 2]> = pod
            .spread
            .iter()
            .filter(|c| c.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
            .collect();
        if !hard.is_empty() {
            let mut states: Vec<SpreadState> = hard
                .iter()
                .map(|c| SpreadState {
                    key: c.topology_key,
                    max_skew: i64::from(c.max_skew),
                    self_match: i64::from(
                        c.label_selector
                            .as_ref()
                            .is_some_and(|s| s.matches(&pod.labels)),
                    ),
                    counts: FxHashMap::default(),
                    min: 0,
                })
                .collect();
            // Per node and constraint: the domain, when the node is eligible.
            let mut domain: FxHashMap<NodeId, SmallVec<[Option<Sym>; 2]>> = FxHashMap::default();
            for (id, info) in self.nodes() {
                let labels = &info.node.labels;
                if !hard.iter().all(|c| labels.contains_key(c.topology_key)) {
                    continue;
                }
                let mut per: SmallVec<[Option<Sym>; 2]> = SmallVec::new();
                for (c, st) in hard.iter().zip(states.iter_mut()) {
                    let eligible = (c.node_affinity_policy == InclusionPolicy::Ignore
                        || node_affinity_matches(pod, &info.node))
                        && (c.node_taints_policy == InclusionPolicy::Ignore
                            || first_untolerated(&info.node.taints, &pod.tolerations).is_none());
                    let d = if eligible {
                        labels.get(c.topology_key)
                    } else {
                        None
                    };
                    if let Some(v) = d {
                        st.counts.entry(v).or_insert(0);
                    }
                    per.push(d);
                }
                domain.insert(id, per);
            }
            for (n, existing) in self.pods_in_namespace(pod.namespace) {
                if existing.deletion_ms.is_some() {
                    continue;
                }
                let Some(per) = domain.get(&n) else { continue };
                for ((c, st), d) in hard.iter().zip(states.iter_mut()).zip(per.iter()) {
                    if let Some(v) = d
                        && c.label_selector
                            .as_ref()
                            .is_some_and(|s| s.matches(&existing.labels))
                    {
                        *st.counts.entry(*v).or_insert(0) += 1;
                    }
                }
            }
            for (c, st) in hard.iter().zip(states.iter_mut()) {
                let min_domains = i64::from(c.min_domains.unwrap_or(1).max(1));
                st.min = if (st.counts.len() as i64) < min_domains {
                    0
                } else {
                    st.counts.values().copied().min().unwrap_or(0)
                };
            }
            h.spread = states;
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
    for (k, v) in &h.existing_anti {
        if labels.get(*k) == Some(*v) {
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
    let any = Sym::new("0.0.0.0");
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
        let cordon = Taint {
            key: Sym::new("node.kubernetes.io/unschedulable"),
            value: Sym::new(""),
            effect: TaintEffect::NoSchedule,
        };
        if !pod.tolerations.iter().any(|t| t.tolerates(&cordon)) {
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
    use crate::affinity::{NodeSelector, NodeSelectorTerm};
    use crate::taints::TolerationOp;
    use crate::testing::{GI, NodeBuilder, PodBuilder};

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
}

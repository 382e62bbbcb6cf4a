//! How the world's scheduler ranks the feasible nodes of a pod, as kube-scheduler's default
//! profile does: resource fit (`LeastAllocated`, or `MostAllocated` as bin-packing clusters
//! configure it) and balanced allocation over cpu and memory (weight 1 each), and the default
//! pod topology spreading of a controller's pods (`ScheduleAnyway`, hostname max skew 3, zone
//! max skew 5; weight 2), and the taint toleration score: nodes with fewer `PreferNoSchedule`
//! taints the pod does not tolerate first (weight 3; the autoscaler's soft
//! `DeletionCandidateOfClusterAutoscaler` taint steers new pods away from the nodes it means
//! to remove this way). It also says how many feasible nodes to look for (adaptive
//! `percentageOfNodesToScore`) and in which order nodes are visited (zones interleaved).
//!
//! It decides scores only: it never filters (the core's predicates do), never binds and never
//! draws randomness (the caller breaks ties with the world's seeded generator).
//!
//! Simplifications, stated: the spreading counts the pods of the same controller (what the
//! default selector of a ReplicaSet, StatefulSet or ReplicationController selects when
//! selectors do not overlap; Services are not modelled) on all nodes; other score plugins
//! (inter-pod affinity, preferred node affinity, image locality) are not scored.

use autoscaler_core::{ClusterSnapshot, NodeId, NodeInfo};
use autoscaler_model::OwnerRef;
use autoscaler_model::Pod;
use autoscaler_model::Sym;
use autoscaler_model::intolerable_preferences;
use rustc_hash::FxHashMap;
use serde::Deserialize;

/// The resource-fit scoring strategy (kube-scheduler's `NodeResourcesFit` `scoringStrategy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum Scoring {
    /// Prefer the emptiest nodes (kube-scheduler's default): spreads load.
    #[default]
    LeastAllocated,
    /// Prefer the fullest nodes that fit: packs pods, leaving other nodes empty.
    MostAllocated,
}

/// The highest score a plugin gives a node.
const MAX_SCORE: i64 = 100;
/// Weight of the taint toleration score in the default profile.
const TAINT_WEIGHT: i64 = 3;
/// Weight of the topology spreading score in the default profile.
const SPREAD_WEIGHT: i64 = 2;
/// Max skew of the default hostname and zone constraints.
const HOSTNAME_SKEW: i64 = 3;
const ZONE_SKEW: i64 = 5;
/// The zone label of the default zone constraint.
pub(crate) const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// Requests assumed for scoring a pod that declares none (kube-scheduler's non-zero
/// defaults: 100m cpu, 200 MiB memory).
const DEFAULT_CPU_MILLI: i64 = 100;
const DEFAULT_MEMORY: i64 = 200 * 1024 * 1024;

/// How many feasible nodes kube-scheduler looks for before scoring, with the adaptive
/// `percentageOfNodesToScore` (unset): every node below 100 nodes; else a share falling from
/// 50% by one point per 125 nodes, never under 5%, and never fewer than 100 nodes.
pub(crate) fn feasible_nodes_to_find(nodes: usize) -> usize {
    const MIN: usize = 100;
    if nodes < MIN {
        return nodes;
    }
    let percent = 50usize.saturating_sub(nodes / 125).max(5);
    (nodes * percent / 100).max(MIN)
}

/// The zone of each node (by `NodeId`), as a small index, and the zones by index.
#[derive(Debug, Default)]
pub(crate) struct Zones {
    of: Vec<Option<u32>>,
    count: usize,
}

impl Zones {
    /// Reads the zone label of `nodes`.
    pub(crate) fn of_nodes(snapshot: &ClusterSnapshot, nodes: &[NodeId]) -> Zones {
        let label = Sym::new(ZONE_LABEL);
        let mut names: Vec<Sym> = nodes
            .iter()
            .filter_map(|&id| snapshot.node(id).and_then(|n| n.node.labels.get(label)))
            .collect();
        names.sort_by_key(|s| s.as_str());
        names.dedup();
        let len = nodes.iter().map(|n| n.0 as usize + 1).max().unwrap_or(0);
        let mut of = vec![None; len];
        for &id in nodes {
            let z = snapshot.node(id).and_then(|n| n.node.labels.get(label));
            of[id.0 as usize] = z
                .and_then(|z| names.iter().position(|x| *x == z))
                .map(|i| i as u32);
        }
        Zones {
            of,
            count: names.len(),
        }
    }

    /// No node has a zone.
    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    fn zone(&self, id: NodeId) -> Option<usize> {
        self.of
            .get(id.0 as usize)
            .copied()
            .flatten()
            .map(|z| z as usize)
    }

    /// `nodes` in the order kube-scheduler's node tree lists them: one node of each zone in
    /// turn (zones sorted, nodes without a zone after them), keeping the given order within a
    /// zone, so a search that stops early samples every zone.
    pub(crate) fn interleave(&self, nodes: &[NodeId]) -> Vec<NodeId> {
        if self.count == 0 {
            return nodes.to_vec();
        }
        let mut by_zone: Vec<Vec<NodeId>> = vec![Vec::new(); self.count + 1];
        for &id in nodes {
            by_zone[self.zone(id).unwrap_or(self.count)].push(id);
        }
        let longest = by_zone.iter().map(Vec::len).max().unwrap_or(0);
        (0..longest)
            .flat_map(|i| by_zone.iter().filter_map(move |z| z.get(i).copied()))
            .collect()
    }
}

/// Resource fit plus balanced allocation of `pod` on `node` (0..=200).
pub(crate) fn resource_score(scoring: Scoring, node: &NodeInfo, pod: &Pod) -> i64 {
    let req = |own: i64, default: i64| if own == 0 { default } else { own };
    let cpu = (
        node.requested.cpu + req(pod.requests.cpu, DEFAULT_CPU_MILLI),
        node.node.allocatable.cpu,
    );
    let mem = (
        node.requested.memory + req(pod.requests.memory, DEFAULT_MEMORY),
        node.node.allocatable.memory,
    );
    let fit = |(requested, allocatable): (i64, i64)| -> i64 {
        if allocatable <= 0 {
            return 0;
        }
        let requested = requested.clamp(0, allocatable) as i128;
        let a = allocatable as i128;
        let s = match scoring {
            Scoring::LeastAllocated => (a - requested) * MAX_SCORE as i128 / a,
            Scoring::MostAllocated => requested * MAX_SCORE as i128 / a,
        };
        s as i64
    };
    let fit_score = (fit(cpu) + fit(mem)) / 2;
    fit_score + balanced_score(cpu, mem)
}

/// Balanced allocation: 100 × (1 − the standard deviation of the cpu and memory fractions).
fn balanced_score(cpu: (i64, i64), mem: (i64, i64)) -> i64 {
    let fraction = |(requested, allocatable): (i64, i64)| {
        if allocatable <= 0 {
            1.0
        } else {
            (requested as f64 / allocatable as f64).min(1.0)
        }
    };
    let std = (fraction(cpu) - fraction(mem)).abs() / 2.0;
    ((1.0 - std) * MAX_SCORE as f64) as i64
}

/// The controller whose pods the default spreading constraints select: a ReplicaSet,
/// StatefulSet or ReplicationController controlling a pod without constraints of its own.
pub(crate) fn spread_key(pod: &Pod) -> Option<SpreadKey> {
    if !pod.spread.is_empty() {
        return None;
    }
    let o = pod.owner.as_ref().filter(|o| o.controller)?;
    matches!(
        o.kind.as_str(),
        "ReplicaSet" | "StatefulSet" | "ReplicationController"
    )
    .then(|| SpreadKey {
        namespace: pod.namespace,
        kind: o.kind,
        name: o.name.clone(),
    })
}

/// A controller, by namespace, kind and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SpreadKey {
    namespace: Sym,
    kind: Sym,
    name: std::sync::Arc<str>,
}

impl SpreadKey {
    fn owns(&self, pod: &Pod) -> bool {
        pod.namespace == self.namespace
            && pod.owner.as_ref().is_some_and(|o: &OwnerRef| {
                o.controller && o.kind == self.kind && o.name == self.name
            })
    }
}

/// Per controller, how many of its pods each node runs, each count kept with the node's stamp
/// (see `Cluster::touch_node`) and recounted only when the node changed.
#[derive(Debug, Default)]
pub(crate) struct SpreadCounts {
    by_key: FxHashMap<SpreadKey, NodeCounts>,
}

#[derive(Debug, Default)]
struct NodeCounts {
    /// Indexed by `NodeId`: the stamp the count was taken at, and the count.
    at: Vec<Option<u64>>,
    count: Vec<u32>,
    /// Used in the current pass.
    used: bool,
}

impl SpreadCounts {
    /// Brings `key`'s counts on `nodes` up to date and returns them, indexed by `NodeId`.
    pub(crate) fn refresh(
        &mut self,
        key: &SpreadKey,
        snapshot: &ClusterSnapshot,
        stamps: &[u64],
        nodes: &[NodeId],
    ) -> &[u32] {
        let e = self.by_key.entry(key.clone()).or_default();
        e.used = true;
        let len = nodes.iter().map(|n| n.0 as usize + 1).max().unwrap_or(0);
        if e.at.len() < len {
            e.at.resize(len, None);
            e.count.resize(len, 0);
        }
        for &nid in nodes {
            let i = nid.0 as usize;
            let stamp = stamps.get(i).copied().unwrap_or(0);
            if e.at[i] == Some(stamp) {
                continue;
            }
            e.count[i] = snapshot
                .node(nid)
                .map_or(0, |n| n.pods.iter().filter(|p| key.owns(p)).count() as u32);
            e.at[i] = Some(stamp);
        }
        &e.count
    }

    /// Forgets the controllers not used since the last call.
    pub(crate) fn end_pass(&mut self) {
        self.by_key.retain(|_, e| std::mem::take(&mut e.used));
    }
}

/// The weighted spreading scores (0..=100 × weight) of `candidates`, given the controller's
/// pod count (`counts`, by `NodeId`) on the candidates and, when nodes have zones, on every
/// node of `all`, and the zones of the nodes in `all`.
pub(crate) fn spread_scores(
    zones: &Zones,
    all: &[NodeId],
    candidates: &[NodeId],
    counts: &[u32],
) -> Vec<i64> {
    let count = |id: NodeId| i64::from(counts.get(id.0 as usize).copied().unwrap_or(0));
    let mut per_zone = vec![0i64; zones.count];
    for &id in all {
        if let Some(z) = zones.zone(id) {
            per_zone[z] += count(id);
        }
    }
    let mut seen = vec![false; zones.count];
    for &id in candidates {
        if let Some(z) = zones.zone(id) {
            seen[z] = true;
        }
    }
    let candidate_zones = seen.iter().filter(|s| **s).count();
    // A domain count weighs less the fewer domains a constraint has (log(domains + 2)).
    let host_weight = ((candidates.len() + 2) as f64).ln();
    let zone_weight = ((candidate_zones + 2) as f64).ln();
    let raw: Vec<i64> = candidates
        .iter()
        .map(|&id| {
            let mut s = count(id) as f64 * host_weight + (HOSTNAME_SKEW - 1) as f64;
            if let Some(z) = zones.zone(id) {
                s += per_zone[z] as f64 * zone_weight + (ZONE_SKEW - 1) as f64;
            }
            s.round() as i64
        })
        .collect();
    normalize_inverted(&raw)
        .into_iter()
        .map(|s| s * SPREAD_WEIGHT)
        .collect()
}

/// The weighted taint toleration scores (0..=100 × weight) of `candidates` for `pod`: the
/// count of `PreferNoSchedule` taints it does not tolerate, inverted over the candidates
/// (`100 − 100 × count / max`). `None` when no candidate has one: every node then scores the
/// same, which changes no ranking.
pub(crate) fn taint_scores(
    snapshot: &ClusterSnapshot,
    pod: &Pod,
    candidates: &[NodeId],
) -> Option<Vec<i64>> {
    let count = |id: NodeId| {
        snapshot.node(id).map_or(0, |n| {
            intolerable_preferences(&n.node.taints, &pod.tolerations) as i64
        })
    };
    // Most nodes carry no taint: no score vector unless one counts (the world's hot path).
    let max = candidates.iter().map(|&id| count(id)).max().unwrap_or(0);
    (max > 0).then(|| {
        candidates
            .iter()
            .map(|&id| (MAX_SCORE - MAX_SCORE * count(id) / max) * TAINT_WEIGHT)
            .collect()
    })
}

/// Fewer matching pods score higher: `100 × (max + min − s) / max` (all 100 when `max` is 0).
fn normalize_inverted(raw: &[i64]) -> Vec<i64> {
    let max = raw.iter().copied().max().unwrap_or(0);
    let min = raw.iter().copied().min().unwrap_or(0);
    raw.iter()
        .map(|&s| {
            if max == 0 {
                MAX_SCORE
            } else {
                MAX_SCORE * (max + min - s) / max
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feasible_nodes_to_find_follows_the_adaptive_percentage() {
        assert_eq!(feasible_nodes_to_find(0), 0);
        assert_eq!(feasible_nodes_to_find(99), 99);
        // 100..=199 nodes: 50% of them is under 100, so 100.
        assert_eq!(feasible_nodes_to_find(150), 100);
        assert_eq!(feasible_nodes_to_find(500), 230, "46% of 500");
        assert_eq!(feasible_nodes_to_find(5_000), 500, "10% of 5000");
        assert_eq!(feasible_nodes_to_find(15_000), 750, "never under 5%");
    }

    #[test]
    fn balanced_allocation_prefers_equal_fractions() {
        let gib = 1 << 30;
        assert_eq!(balanced_score((2_000, 4_000), (8 * gib, 16 * gib)), 100);
        assert_eq!(balanced_score((4_000, 4_000), (0, 16 * gib)), 50);
    }

    #[test]
    fn intolerable_preferences_score_against_a_node() {
        use autoscaler_model::{Taint, TaintEffect};
        let mut s = ClusterSnapshot::default();
        let soft = Taint {
            key: Sym::new(autoscaler_model::DELETION_CANDIDATE_TAINT),
            value: Sym::new("1"),
            effect: TaintEffect::PreferNoSchedule,
        };
        let mut ids = Vec::new();
        for (name, taints) in [("a", vec![]), ("b", vec![soft])] {
            let mut n = autoscaler_model::Node::new(name);
            n.taints = taints;
            ids.push(s.add_node(std::sync::Arc::new(n)).unwrap());
        }
        let pod = Pod::new("default", "p");
        assert_eq!(taint_scores(&s, &pod, &ids), Some(vec![300, 0]));
        assert_eq!(taint_scores(&s, &pod, &ids[..1]), None, "none tainted");
    }

    #[test]
    fn inverted_normalization_puts_the_fewest_pods_on_top() {
        assert_eq!(normalize_inverted(&[0, 0]), vec![100, 100]);
        assert_eq!(normalize_inverted(&[2, 6, 10]), vec![100, 60, 20]);
    }
}

//! The world's kube-scheduler: on each tick, pending pods in queue order (priority, then age)
//! are filtered with the core's predicates and bound to the best-scoring feasible node, as
//! kube-scheduler's default profile scores them ([`crate::scoring`]); those that fit nowhere
//! get `PodScheduled=False, reason=Unschedulable` with kube-scheduler's message.
//!
//! Like kube-scheduler it stops looking once it has found enough feasible nodes (adaptive
//! `percentageOfNodesToScore`), resumes the next search where the last one stopped, visits
//! zones in turn, and breaks ties among the best nodes at random, from its own generator
//! seeded by the world's seed (a seed replays identically).
//!
//! It decides placement only, and owns what it keeps between passes (the epoch of its last idle
//! pass, failure verdicts per equivalence class, spreading counts, where the next search
//! starts). It never preempts, never creates or deletes a pod and never writes a condition
//! that did not change.

use std::collections::BTreeMap;

use autoscaler_core::NodeId;
use autoscaler_core::{Prepared, Unfit};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashMap;
use serde_json::json;

use crate::cluster::Cluster;
use crate::objects::key;
use crate::queue::NsName;
use crate::scoring::{self, Scoring, SpreadCounts, Zones};

/// The scheduler's own state.
#[derive(Debug)]
pub(crate) struct Scheduler {
    /// The scheduling epoch at which a pass changed nothing: until the epoch moves, another
    /// pass would decide exactly the same and is skipped.
    idle_at: Option<u64>,
    /// Filter verdicts kept between passes, per equivalence class and node.
    verdicts: Verdicts,
    /// How resource fit is scored.
    scoring: Scoring,
    /// Per controller, its pods per node (default topology spreading).
    spread: SpreadCounts,
    /// The nodes in search order, kept while no node was added, removed or replaced.
    order: NodeOrder,
    /// Where in the node list the next search for feasible nodes starts.
    next_start: usize,
    /// Breaks ties among equally scored nodes.
    rng: ChaCha8Rng,
    /// Whether verdicts are reused (within a pass per class, across passes per class and
    /// node stamp); off only in tests, as the plain model the reuse must match.
    reuse: bool,
}

impl Scheduler {
    /// A scheduler scoring with `scoring`, its tie-breaks drawn from `seed`.
    pub(crate) fn new(seed: u64, scoring: Scoring) -> Scheduler {
        Scheduler {
            idle_at: None,
            verdicts: Verdicts::default(),
            scoring,
            spread: SpreadCounts::default(),
            order: NodeOrder::default(),
            next_start: 0,
            // Its own stream: placements do not shift the world's other draws (names, delays).
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5c4e_d01e_5eed_0001),
            reuse: true,
        }
    }

    /// A scheduler that checks every pod on every node it visits, reusing nothing.
    #[cfg(test)]
    fn plain(seed: u64, scoring: Scoring) -> Scheduler {
        Scheduler {
            reuse: false,
            ..Scheduler::new(seed, scoring)
        }
    }

    /// One scheduler pass over every pending pod.
    pub(crate) fn schedule_pending(&mut self, c: &mut Cluster) {
        // Nothing changed since a pass that changed nothing: this one would decide the same.
        if c.pending.is_empty() || self.idle_at == Some(c.sched_epoch) {
            return;
        }
        let epoch = c.sched_epoch;
        let queue: Vec<(i32, u64, NsName)> = c.pending.iter().cloned().collect();
        let order = std::mem::take(&mut self.order).refreshed(c);
        let (zones, node_ids) = (&order.zones, &order.interleaved);
        // For pods whose fit can only get worse as pods are added (no inter-pod affinity, no
        // spread), a node rejected for one pod of an equivalence class rejects the rest of the
        // class during this pass: it is not checked again, and a failure message is reused.
        // While no pod has anti-affinity, a node that took one pod of a class takes the next
        // one too if it has not changed since (same stamp): not checked again either.
        let mut known: FxHashMap<u64, Known> = FxHashMap::default();
        let mut failed: FxHashMap<u64, String> = FxHashMap::default();
        for (_, _, id) in queue {
            let Some(view) = c.pods.get(&id).map(|p| p.view.clone()) else {
                continue;
            };
            // (The plain model, in tests, treats no pod as monotone: nothing is reused.)
            let monotone = self.reuse && view.affinity.is_empty() && view.spread.is_empty();
            // Anti-affinity is the last filter: while any pod has it, pods placed since a
            // failure may make an earlier filter the one a node fails first, so the message is
            // worked out afresh.
            let same_message = monotone
                && view.anti_affinity.is_empty()
                && c.snapshot.anti_affinity_pod_count() == 0;
            if same_message && let Some(msg) = failed.get(&view.equivalence) {
                mark_unschedulable(c, &id, msg);
                continue;
            }
            let known = monotone.then(|| {
                known
                    .entry(view.equivalence)
                    .or_insert_with(|| Known::new(node_ids.len()))
            });
            let feasible = self.feasible(c, &view, node_ids, known);
            match self.best(c, &view, (node_ids, zones), &feasible) {
                Some(nid) => {
                    let name = c
                        .snapshot
                        .node(nid)
                        .map(|n| n.node.name.as_str().to_string());
                    // PreBind: the pod binds only once its claims are bound (see storage).
                    // Then its DRA claims are allocated and reserved for it (see dra_driver).
                    if let Some(name) = name
                        && crate::storage::pre_bind(c, &id, &name).is_ok()
                        && crate::dra_driver::reserve(c, &id, &name).is_ok()
                    {
                        c.bind(&id, &name);
                    }
                }
                None => {
                    let msg = if same_message {
                        cached_failure_message(c, &view, node_ids, &mut self.verdicts)
                    } else {
                        failure_message(c, &view, node_ids)
                    };
                    mark_unschedulable(c, &id, &msg);
                    if same_message {
                        failed.insert(view.equivalence, msg);
                    }
                }
            }
        }
        self.order = order;
        self.idle_at = (c.sched_epoch == epoch).then_some(epoch);
        self.spread.end_pass();
        self.verdicts.end_pass();
    }

    /// Feasible nodes for `pod`, searched from where the last search stopped until enough are
    /// found; `known` holds (and gains) what is known of the nodes for the pod's class.
    fn feasible(
        &mut self,
        c: &Cluster,
        pod: &autoscaler_model::Pod,
        nodes: &[NodeId],
        mut known: Option<&mut Known>,
    ) -> Vec<NodeId> {
        let n = nodes.len();
        let want = scoring::feasible_nodes_to_find(n);
        let mut found = Vec::new();
        if n == 0 {
            return found;
        }
        // A fit depends on the node and its pods only while no pod, placed or this one, has
        // anti-affinity: otherwise pods bound elsewhere in the topology domain change it without
        // touching the node's stamp.
        let reuse_fits = c.snapshot.anti_affinity_pod_count() == 0 && pod.anti_affinity.is_empty();
        // A verdict on a node whose stamp is unchanged since an earlier pass is that pass's:
        // it depends on the class, the node and its pods only (no anti-affinity as above, the
        // pod has no inter-pod terms, and no claims whose state lives outside the node).
        let across_passes = known.is_some() && reuse_fits && pod.volume_refs.is_empty();
        let mut verdicts = across_passes.then(|| self.verdicts.class(pod.equivalence));
        let mut prepared = None;
        let start = self.next_start % n;
        let mut processed = 0;
        for k in 0..n {
            let i = (start + k) % n;
            processed += 1;
            let nid = nodes[i];
            let stamp = c.node_stamps.get(nid.0 as usize).copied().unwrap_or(0);
            let fits = match (known.as_deref(), verdicts.as_mut()) {
                (Some(kn), _) if kn.rejected[i] => false,
                (Some(kn), _) if reuse_fits && kn.fits_at[i] == Some(stamp) => true,
                (_, Some((class, unfits))) => class
                    .verdict(unfits, (c, pod), &mut prepared, nid, stamp)
                    .is_none(),
                _ => {
                    let p = prepared.get_or_insert_with(|| c.snapshot.prepare(pod));
                    c.snapshot.check(pod, p, nid).is_ok()
                }
            };
            if let Some(kn) = known.as_deref_mut() {
                if fits {
                    kn.fits_at[i] = Some(stamp);
                } else {
                    kn.rejected[i] = true;
                }
            }
            if fits {
                found.push(nid);
                if found.len() >= want {
                    break;
                }
            }
        }
        self.next_start = (start + processed) % n;
        found
    }

    /// The best-scoring of `feasible`, ties broken at random.
    fn best(
        &mut self,
        c: &Cluster,
        pod: &autoscaler_model::Pod,
        (all, zones): (&[NodeId], &Zones),
        feasible: &[NodeId],
    ) -> Option<NodeId> {
        if feasible.len() <= 1 {
            return feasible.first().copied();
        }
        let mut scores: Vec<i64> = feasible
            .iter()
            .map(|&id| {
                c.snapshot
                    .node(id)
                    .map_or(0, |n| scoring::resource_score(self.scoring, n, pod))
            })
            .collect();
        if let Some(taint) = scoring::taint_scores(&c.snapshot, pod, feasible) {
            for (s, x) in scores.iter_mut().zip(taint) {
                *s += x;
            }
        }
        if let Some(key) = scoring::spread_key(pod) {
            // Without zones only the candidates' own counts enter their scores: the other
            // nodes are counted when they are candidates (and only if changed by then).
            let counted = if zones.is_empty() { feasible } else { all };
            let counts = self
                .spread
                .refresh(&key, &c.snapshot, &c.node_stamps, counted);
            let spread = scoring::spread_scores(zones, all, feasible, counts);
            for (s, x) in scores.iter_mut().zip(spread) {
                *s += x;
            }
        }
        // Reservoir sampling over the nodes with the top score.
        let mut best: Option<(i64, NodeId)> = None;
        let mut ties = 0u32;
        for (&id, &s) in feasible.iter().zip(&scores) {
            match best {
                Some((b, _)) if s < b => {}
                Some((b, _)) if s == b => {
                    ties += 1;
                    if self.rng.random_range(0..ties) == 0 {
                        best = Some((s, id));
                    }
                }
                _ => {
                    best = Some((s, id));
                    ties = 1;
                }
            }
        }
        best.map(|b| b.1)
    }
}

/// The nodes in the order a search visits them (zones interleaved, see [`Zones::interleave`]),
/// kept while the cluster's node generation stays the same: reading every node's zone label
/// again each pass cost more than the rest of a pass while nodes stay the same.
#[derive(Debug, Default)]
struct NodeOrder {
    /// The `Cluster::node_gen` this order was derived at (`None`: never derived).
    derived_at: Option<u64>,
    zones: Zones,
    interleaved: Vec<NodeId>,
}

impl NodeOrder {
    /// This order if no node was added, removed or replaced since it was derived, else a new one.
    fn refreshed(self, c: &Cluster) -> NodeOrder {
        if self.derived_at == Some(c.node_gen) {
            return self;
        }
        let ids: Vec<NodeId> = c.nodes.values().map(|s| s.id).collect();
        let zones = Zones::of_nodes(&c.snapshot, &ids);
        let interleaved = zones.interleave(&ids);
        NodeOrder {
            derived_at: Some(c.node_gen),
            zones,
            interleaved,
        }
    }
}

/// What one pass learnt of the nodes (by position in its node list) for one equivalence class.
struct Known {
    /// The node rejected a pod of the class: it rejects the rest.
    rejected: Vec<bool>,
    /// The node's stamp when it was found to fit a pod of the class.
    fits_at: Vec<Option<u64>>,
}

impl Known {
    fn new(n: usize) -> Known {
        Known {
            rejected: vec![false; n],
            fits_at: vec![None; n],
        }
    }
}

/// [`failure_message`] for a pod whose verdict on a node depends only on that node
/// and its pods (no inter-pod affinity or spread of its own, no existing pod with
/// anti-affinity): the verdicts kept per equivalence class and node (see [`Verdicts`]) are
/// counted, nodes checked again only where changed since; the message itself is reused while
/// no node changed. Gives exactly [`failure_message`]'s text.
fn cached_failure_message(
    c: &Cluster,
    pod: &autoscaler_model::Pod,
    nodes: &[NodeId],
    cache: &mut Verdicts,
) -> String {
    let msg = cached_failure_message_inner(c, pod, nodes, cache);
    debug_assert_eq!(msg, failure_message(c, pod, nodes));
    msg
}

fn cached_failure_message_inner(
    c: &Cluster,
    pod: &autoscaler_model::Pod,
    nodes: &[NodeId],
    cache: &mut Verdicts,
) -> String {
    if nodes.is_empty() {
        return "no nodes available to schedule pods".to_string();
    }
    let seen = (c.node_gen, c.last_stamp());
    let (class, unfits) = cache.class(pod.equivalence);
    if let Some((at, msg)) = &class.message
        && *at == seen
    {
        return msg.clone();
    }
    let mut prepared = None;
    // While the node list is the same, only the nodes changed since the last count can have
    // another verdict: the count is brought up to date from them.
    let caught_up = class.tally.take().and_then(|t| {
        let (node_gen, stamp) = t.at?;
        let touched = c.touched_since(stamp).filter(|_| node_gen == c.node_gen)?;
        let changed: Vec<NodeId> = touched.collect();
        Some((t, changed))
    });
    let (mut tally, changed) = caught_up.unwrap_or_else(|| (Tally::default(), nodes.to_vec()));
    for nid in changed {
        let stamp = c.node_stamps.get(nid.0 as usize).copied().unwrap_or(0);
        let verdict = class.verdict(unfits, (c, pod), &mut prepared, nid, stamp);
        tally.count(nid, verdict.map_or(0, |u| u as u32 + 1));
    }
    tally.at = Some(seen);
    let mut hist: BTreeMap<String, usize> = BTreeMap::new();
    for (u, &n) in tally.counts.iter().enumerate().filter(|(_, n)| **n > 0) {
        for r in unfits[u].reasons() {
            *hist.entry(r).or_default() += n;
        }
    }
    let msg = fit_error(nodes.len(), hist);
    class.message = Some((seen, msg.clone()));
    class.tally = Some(tally);
    msg
}

/// The verdicts one class's failure message counted, per node, and how many nodes gave each
/// rejection.
#[derive(Debug, Default)]
struct Tally {
    /// The `(Cluster::node_gen, Cluster::last_stamp)` counted at (`None`: nothing counted).
    at: Option<(u64, u64)>,
    /// By `NodeId`: 0 fits (or not counted), `u + 1` rejected for `unfits[u]`.
    per_node: Vec<u32>,
    /// By rejection index.
    counts: Vec<usize>,
}

impl Tally {
    /// Counts node `nid`'s verdict `v` (as in `per_node`) instead of the one counted before.
    fn count(&mut self, nid: NodeId, v: u32) {
        let i = nid.0 as usize;
        if self.per_node.len() <= i {
            self.per_node.resize(i + 1, 0);
        }
        let old = std::mem::replace(&mut self.per_node[i], v);
        if old == v {
            return;
        }
        if old > 0 {
            self.counts[old as usize - 1] -= 1;
        }
        if v > 0 {
            let u = v as usize - 1;
            if self.counts.len() <= u {
                self.counts.resize(u + 1, 0);
            }
            self.counts[u] += 1;
        }
    }
}

/// kube-scheduler's FitError text: `0/N nodes are available: <count> <reason>, ....`,
/// reasons counted per node and sorted as strings.
fn failure_message(c: &Cluster, pod: &autoscaler_model::Pod, nodes: &[NodeId]) -> String {
    if nodes.is_empty() {
        return "no nodes available to schedule pods".to_string();
    }
    let prepared = c.snapshot.prepare(pod);
    let mut hist: BTreeMap<String, usize> = BTreeMap::new();
    for nid in nodes {
        if let Err(unfit) = c.snapshot.check(pod, &prepared, *nid) {
            for r in unfit.reasons() {
                *hist.entry(r).or_default() += 1;
            }
        }
    }
    fit_error(nodes.len(), hist)
}

/// `0/<nodes> nodes are available: <count> <reason>, ....` from the count of each reason,
/// the parts sorted as strings.
fn fit_error(nodes: usize, hist: BTreeMap<String, usize>) -> String {
    let mut parts: Vec<String> = hist.into_iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    format!("0/{nodes} nodes are available: {}.", parts.join(", "))
}

/// Writes `PodScheduled=False, reason=Unschedulable` with `msg` on a pending pod whose last
/// message differs, editing the stored object in place (no copy while the store alone holds
/// it; a write that changes nothing is skipped, as a `put` of the same object would be).
fn mark_unschedulable(c: &mut Cluster, id: &NsName, msg: &str) {
    let Some(st) = c.pods.get_mut(id) else {
        return;
    };
    if st.unschedulable.as_deref() == Some(msg) {
        return;
    }
    let conditions = json!([{
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": msg,
        "lastProbeTime": null,
        "lastTransitionTime": c.store.timestamp(c.now),
    }]);
    st.unschedulable = Some(msg.to_string());
    let k = key("", "Pod", &id.0, &id.1);
    c.store.edit(&k, c.now, |obj| {
        let status = &obj["status"];
        let changed = status["phase"] != "Pending" || status["conditions"] != conditions;
        obj["status"]["phase"] = json!("Pending");
        obj["status"]["conditions"] = conditions;
        changed
    });
}

/// Filter verdicts per equivalence class and node, kept between scheduler passes: a verdict
/// holds while the node's stamp (see `Cluster::touch_node`) is the one it was taken at, for
/// classes whose verdict on a node depends on that node and its pods only (the caller's
/// condition). Rejections are kept as indexes into a table of the distinct ones met.
#[derive(Debug, Default)]
pub(crate) struct Verdicts {
    /// Per equivalence class.
    classes: FxHashMap<u64, ClassVerdicts>,
    /// Classes used in the current pass.
    used: rustc_hash::FxHashSet<u64>,
    /// The distinct rejections met.
    unfits: Vec<Unfit>,
}

/// One class's verdicts, and its failure message with the `(Cluster::node_gen,
/// Cluster::last_stamp)` it was counted at.
#[derive(Debug, Default)]
struct ClassVerdicts {
    /// By `NodeId`: the stamp the verdict was taken at (0: none) and the verdict (0: fits;
    /// `u + 1`: rejected for `unfits[u]`).
    at: Vec<(u64, u32)>,
    message: Option<((u64, u64), String)>,
    /// What `message` counted, kept to count again from the nodes changed since.
    tally: Option<Tally>,
}

impl ClassVerdicts {
    /// The verdict of `pod` (of this class) on node `nid`, whose stamp is `stamp`: `None` if
    /// it fits, else the index of its rejection in `unfits`. Checked (and kept) unless known
    /// at `stamp`.
    fn verdict(
        &mut self,
        unfits: &mut Vec<Unfit>,
        (c, pod): (&Cluster, &autoscaler_model::Pod),
        prepared: &mut Option<Prepared>,
        nid: NodeId,
        stamp: u64,
    ) -> Option<usize> {
        let i = nid.0 as usize;
        if let Some(&(at, v)) = self.at.get(i)
            && at == stamp
            && stamp != 0
        {
            return (v as usize).checked_sub(1);
        }
        let p = prepared.get_or_insert_with(|| c.snapshot.prepare(pod));
        let found = match c.snapshot.check(pod, p, nid) {
            Ok(()) => None,
            Err(unfit) => Some(match unfits.iter().position(|u| *u == unfit) {
                Some(u) => u,
                None => {
                    unfits.push(unfit);
                    unfits.len() - 1
                }
            }),
        };
        if self.at.len() <= i {
            self.at.resize(i + 1, (0, 0));
        }
        self.at[i] = (stamp, found.map_or(0, |u| u as u32 + 1));
        found
    }
}

/// More distinct rejections than this and the table starts over (claims' names make them
/// unbounded in theory).
const MAX_UNFITS: usize = 4096;

impl Verdicts {
    /// The verdicts of the class `equivalence` (marked used in this pass) and the table of
    /// rejections they refer to.
    fn class(&mut self, equivalence: u64) -> (&mut ClassVerdicts, &mut Vec<Unfit>) {
        self.used.insert(equivalence);
        (
            self.classes.entry(equivalence).or_default(),
            &mut self.unfits,
        )
    }

    /// Forgets the classes not used in the pass that ends, and everything once the table of
    /// rejections grew too long.
    fn end_pass(&mut self) {
        let used = std::mem::take(&mut self.used);
        self.classes.retain(|k, _| used.contains(k));
        if self.unfits.len() > MAX_UNFITS {
            self.classes.clear();
            self.unfits.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Owner;
    use serde_json::Value;

    fn pod(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1500m"}}}]}})
    }

    #[test]
    fn a_pass_binds_what_fits_marks_the_rest_and_an_unchanged_cluster_is_not_rescanned() {
        let mut c = Cluster::new(0, 0);
        c.register_node(
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                "status": {"capacity": {"cpu": "2", "memory": "4Gi", "pods": "10"},
                    "conditions": [{"type": "Ready", "status": "True"}]}}),
            None,
        )
        .unwrap();
        let a = c.create_pod(pod("a"), Owner::None, None).unwrap();
        let b = c.create_pod(pod("b"), Owner::None, None).unwrap();
        let mut s = Scheduler::new(0, Scoring::default());
        s.schedule_pending(&mut c);
        assert_eq!(c.pods[&a].node.as_deref(), Some("n1"));
        assert_eq!(
            c.pods[&b].unschedulable.as_deref(),
            Some("0/1 nodes are available: 1 Insufficient cpu.")
        );
        assert_eq!(s.idle_at, None, "the pass bound a pod");
        s.schedule_pending(&mut c);
        assert_eq!(s.idle_at, Some(c.sched_epoch), "nothing moved");
        let rv = c.store.resource_version();
        s.schedule_pending(&mut c);
        assert_eq!(
            c.store.resource_version(),
            rv,
            "an idle pass writes nothing"
        );
        c.remove_pod(&a, None);
        s.schedule_pending(&mut c);
        assert_eq!(c.pods[&b].node.as_deref(), Some("n1"));
        assert!(c.pending.is_empty());
    }
    fn zonal_node(c: &mut Cluster, name: &str, zone: &str) {
        c.register_node(
            json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}},
                "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}]}}),
            None,
        )
        .unwrap();
    }

    fn owned_pod(name: &str, cpu: &str, owner: Option<&str>) -> Value {
        let mut p = pod(name);
        p["spec"]["containers"][0]["resources"]["requests"] = json!({"cpu": cpu, "memory": "1Gi"});
        if let Some(rs) = owner {
            p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": rs, "uid": "u-rs", "controller": true}]);
        }
        p
    }

    #[test]
    fn the_search_order_is_kept_while_nodes_stay_and_renewed_when_one_changes() {
        let mut c = Cluster::new(0, 0);
        for (n, z) in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")] {
            zonal_node(&mut c, n, z);
        }
        let ids = |c: &Cluster, names: &[&str]| -> Vec<NodeId> {
            names.iter().map(|n| c.nodes[*n].id).collect()
        };
        let order = NodeOrder::default().refreshed(&c);
        assert_eq!(order.interleaved, ids(&c, &["a1", "b1", "a2", "b2"]));
        let kept = order.interleaved.as_ptr();
        let order = order.refreshed(&c);
        assert_eq!(order.interleaved.as_ptr(), kept, "same nodes: kept as is");
        c.edit_node("a2", |n| {
            n["metadata"]["labels"][scoring::ZONE_LABEL] = json!("b");
        })
        .unwrap();
        let order = order.refreshed(&c);
        assert_eq!(order.interleaved, ids(&c, &["a1", "a2", "b1", "b2"]));
        c.remove_node("b2").unwrap();
        let order = order.refreshed(&c);
        assert_eq!(order.interleaved, ids(&c, &["a1", "a2", "b1"]));
    }

    /// Pods per node after one pass placing `pods` on a1, a2 (zone a), b1 and c1.
    fn placed(scoring: Scoring, seed: u64, pods: &[Value]) -> BTreeMap<String, usize> {
        let mut c = Cluster::new(seed, 0);
        for (n, z) in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("c1", "c")] {
            zonal_node(&mut c, n, z);
        }
        let ids: Vec<NsName> = pods
            .iter()
            .map(|p| c.create_pod(p.clone(), Owner::None, None).unwrap())
            .collect();
        Scheduler::new(seed, scoring).schedule_pending(&mut c);
        let mut out = BTreeMap::new();
        for id in ids {
            *out.entry(c.pods[&id].node.clone().unwrap()).or_default() += 1;
        }
        out
    }

    #[test]
    fn a_replica_sets_pods_spread_over_zones_before_nodes() {
        let pods: Vec<Value> = (0..6)
            .map(|i| owned_pod(&format!("web-{i}"), "500m", Some("web")))
            .collect();
        for seed in 0..5 {
            let p = placed(Scoring::LeastAllocated, seed, &pods);
            let zone_a = p.get("a1").unwrap_or(&0) + p.get("a2").unwrap_or(&0);
            assert_eq!(
                (zone_a, p.get("b1"), p.get("c1")),
                (2, Some(&2), Some(&2)),
                "seed {seed}: {p:?}"
            );
        }
    }

    /// Registers a Ready node `name` of 4 cpu and 16 GiB, without a zone.
    fn ready_node(c: &mut Cluster, name: &str) {
        c.register_node(
            json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}]}}),
            None,
        )
        .unwrap();
    }

    #[test]
    fn without_zones_a_replica_sets_pods_spread_over_nodes_even_when_packing() {
        let mut c = Cluster::new(3, 0);
        for n in ["n1", "n2", "n3", "n4"] {
            ready_node(&mut c, n);
        }
        let mut s = Scheduler::new(3, Scoring::MostAllocated);
        let mut nodes = BTreeMap::<String, usize>::new();
        // One pod per pass: each pass counts the pods the last one placed.
        for i in 0..8 {
            let id = c
                .create_pod(
                    owned_pod(&format!("web-{i}"), "500m", Some("web")),
                    Owner::None,
                    None,
                )
                .unwrap();
            s.schedule_pending(&mut c);
            *nodes.entry(c.pods[&id].node.clone().unwrap()).or_default() += 1;
        }
        assert_eq!(
            nodes.values().copied().collect::<Vec<_>>(),
            [2, 2, 2, 2],
            "{nodes:?}"
        );
    }

    #[test]
    fn new_pods_keep_off_a_soft_tainted_node_while_others_fit() {
        let mut c = Cluster::new(5, 0);
        for n in ["n1", "n2"] {
            ready_node(&mut c, n);
        }
        c.taint_node(
            "n1",
            autoscaler_model::DELETION_CANDIDATE_TAINT,
            "1",
            "PreferNoSchedule",
        )
        .unwrap();
        let mut s = Scheduler::new(5, Scoring::LeastAllocated);
        let mut on = BTreeMap::<String, usize>::new();
        // LeastAllocated alone would alternate the nodes; the soft taint outweighs it until
        // the untainted node is full (4 pods of 1 cpu), then the tainted one takes the rest.
        for i in 0..6 {
            let id = c
                .create_pod(owned_pod(&format!("p-{i}"), "1", None), Owner::None, None)
                .unwrap();
            s.schedule_pending(&mut c);
            *on.entry(c.pods[&id].node.clone().unwrap()).or_default() += 1;
        }
        assert_eq!(on.get("n2"), Some(&4), "{on:?}");
        assert_eq!(on.get("n1"), Some(&2), "{on:?}");
    }

    #[test]
    fn least_allocated_spreads_bare_pods_and_most_allocated_packs_them() {
        let pods: Vec<Value> = (0..4)
            .map(|i| owned_pod(&format!("p-{i}"), "1", None))
            .collect();
        let spread = placed(Scoring::LeastAllocated, 1, &pods);
        assert_eq!(spread.len(), 4, "one pod per node: {spread:?}");
        let packed = placed(Scoring::MostAllocated, 1, &pods);
        assert_eq!(
            packed.values().max(),
            Some(&4),
            "all on one node: {packed:?}"
        );
    }

    /// One random change between passes: pods come and go, nodes come, go, are tainted or
    /// cordoned.
    fn churn(c: &mut Cluster, rng: &mut ChaCha8Rng, step: usize) {
        for i in 0..rng.random_range(0..6) {
            let cpu = ["500m", "1", "1500m", "3", "5"][rng.random_range(0..5)];
            let owner = [None, Some("web"), Some("api")][rng.random_range(0..3)];
            let mut p = owned_pod(&format!("p{step}-{i}"), cpu, owner);
            if rng.random_bool(0.2) {
                p["spec"]["tolerations"] =
                    json!([{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]);
            }
            // Pods labelled db, and pods that keep away from db pods in their zone (the db pods
            // themselves have no terms: a fit then depends on pods on other nodes).
            match rng.random_range(0..6) {
                0 => p["metadata"]["labels"] = json!({"app": "db"}),
                1 => {
                    p["spec"]["affinity"] = json!({"podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [{
                            "labelSelector": {"matchLabels": {"app": "db"}},
                            "topologyKey": "topology.kubernetes.io/zone"}]}})
                }
                _ => {}
            }
            c.create_pod(p, Owner::None, None).unwrap();
        }
        let live: Vec<NsName> = {
            let mut v: Vec<NsName> = c.pods.keys().cloned().collect();
            v.sort();
            v
        };
        for id in live {
            if rng.random_bool(0.08) {
                c.remove_pod(&id, None);
            }
        }
        let names: Vec<String> = c.nodes.keys().cloned().collect();
        match rng.random_range(0..10) {
            0 => zonal_node(c, &format!("n{step}"), ["a", "b", "c"][step % 3]),
            1 if names.len() > 2 => c.remove_node(&names[step % names.len()]).unwrap(),
            2 if !names.is_empty() => {
                let n = &names[step % names.len()];
                c.taint_node(n, "dedicated", "x", "NoSchedule").unwrap();
            }
            3 if !names.is_empty() => {
                let n = &names[step % names.len()];
                c.set_unschedulable(n, step.is_multiple_of(2)).unwrap();
            }
            _ => {}
        }
    }

    /// Where each pod is and what its condition says, and the store's version (same writes).
    type Outcome = (Vec<(NsName, Option<String>, Option<String>)>, u64);

    fn outcome(c: &Cluster) -> Outcome {
        let mut pods: Vec<_> = c
            .pods
            .iter()
            .map(|(id, st)| (id.clone(), st.node.clone(), st.unschedulable.clone()))
            .collect();
        pods.sort();
        (pods, c.store.resource_version())
    }

    #[test]
    fn reused_verdicts_place_and_mark_pods_exactly_as_the_plain_model() {
        for seed in 0..12 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let build = || {
                let mut c = Cluster::new(seed, 0);
                for (n, z) in [
                    ("a1", "a"),
                    ("a2", "a"),
                    ("b1", "b"),
                    ("c1", "c"),
                    ("c2", "c"),
                ] {
                    zonal_node(&mut c, n, z);
                }
                c
            };
            let (mut fast, mut plain) = (build(), build());
            let scoring = [Scoring::LeastAllocated, Scoring::MostAllocated][seed as usize % 2];
            let mut s_fast = Scheduler::new(seed, scoring);
            let mut s_plain = Scheduler::plain(seed, scoring);
            let mut bound = 0;
            for step in 0..60 {
                let draw = rng.random::<u64>();
                churn(&mut fast, &mut ChaCha8Rng::seed_from_u64(draw), step);
                churn(&mut plain, &mut ChaCha8Rng::seed_from_u64(draw), step);
                s_fast.schedule_pending(&mut fast);
                s_plain.schedule_pending(&mut plain);
                let (a, b) = (outcome(&fast), outcome(&plain));
                assert_eq!(a, b, "seed {seed}, pass {step}");
                bound += a.0.iter().filter(|p| p.1.is_some()).count();
            }
            assert!(bound > 0, "seed {seed}: some pods were placed");
        }
    }

    #[test]
    fn equal_scores_are_broken_by_the_seed_and_a_seed_replays() {
        let pods = [owned_pod("only", "1", None)];
        let pick = |seed| placed(Scoring::LeastAllocated, seed, &pods);
        let picks: std::collections::BTreeSet<String> = (0..16)
            .map(|seed| pick(seed).into_keys().next().unwrap())
            .collect();
        assert!(
            picks.len() >= 3,
            "ties go to different nodes by seed: {picks:?}"
        );
        assert_eq!(pick(7), pick(7));
    }
}

#[cfg(test)]
mod scenario_tests {
    //! Scenarios through the world that exercise this controller.
    use crate::testkit::*;

    #[test]
    fn pending_pods_are_unschedulable_then_bind_when_nodes_appear() {
        let mut w = world(2);
        w.add_node_group(&group("workers", 0)).unwrap();
        w.add_replica_set(rs("web", 6, "1500m")).unwrap();
        w.advance(1_000);
        assert_eq!(w.pending_count(), 6);
        let pods: Vec<Value> = w
            .objects()
            .list("", "Pod")
            .map(|(_, v)| (**v).clone())
            .collect();
        for p in &pods {
            let c = &p["status"]["conditions"][0];
            assert_eq!(c["type"], "PodScheduled");
            assert_eq!(c["status"], "False");
            assert_eq!(c["reason"], "Unschedulable");
            assert_eq!(c["message"], "no nodes available to schedule pods");
        }
        w.set_replicas("capi", "workers", 1).unwrap();
        w.advance(61_000);
        // One 4-cpu node takes two 1.5-cpu pods.
        assert_eq!(w.pending_count(), 4);
        let msg = w
            .objects()
            .list("", "Pod")
            .filter_map(|(_, p)| {
                p["status"]["conditions"][0]["message"]
                    .as_str()
                    .map(str::to_string)
            })
            .find(|m| m.starts_with("0/"))
            .unwrap();
        assert_eq!(msg, "0/1 nodes are available: 1 Insufficient cpu.");
        w.set_replicas("capi", "workers", 3).unwrap();
        w.advance(61_000);
        assert_eq!(w.pending_count(), 0);
        let bound = w.live_pods().iter().filter(|p| p.2.is_some()).count();
        assert_eq!(bound, 6);
        let p = w.objects().list("", "Pod").next().unwrap().1.clone();
        assert_eq!(p["status"]["phase"], "Running");
        assert_eq!(p["status"]["conditions"][0]["status"], "True");
        assert_eq!(w.metrics().waits.len(), 6);
        assert!(w.metrics().waits.iter().all(|wt| wt.wait_ms() > 30_000));
        let deployment = get(&w, "apps", "Deployment", "default", "web").unwrap();
        assert_eq!(deployment["status"]["readyReplicas"], 6);
    }

    #[test]
    fn taints_are_honoured_by_the_scheduler() {
        let mut w = world(3);
        let mut g = group("workers", 1);
        g.taints = vec![("dedicated".into(), "gpu".into(), "NoSchedule".into())];
        w.add_node_group(&g).unwrap();
        w.add_replica_set(rs("web", 1, "100m")).unwrap();
        w.advance(61_000);
        assert_eq!(w.pending_count(), 1);
        let p = w.objects().list("", "Pod").next().unwrap().1.clone();
        assert_eq!(
            p["status"]["conditions"][0]["message"],
            "0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}."
        );
        let node = w.node_names()[0].clone();
        w.untaint_node(&node, "dedicated").unwrap();
        w.advance(1_000);
        assert_eq!(w.pending_count(), 0);
        w.taint_node(&node, "ToBeDeletedByClusterAutoscaler", "1", "NoSchedule")
            .unwrap();
        w.scale_replica_set("default", "web", 2).unwrap();
        w.advance(1_000);
        assert_eq!(
            w.pending_count(),
            1,
            "the new pod does not tolerate the taint"
        );
    }

    #[test]
    fn five_thousand_pods_onto_two_hundred_nodes_quickly() {
        let mut w = World::new(WorldConfig {
            default_delay: ProvisioningDelay {
                min_ms: 1_000,
                max_ms: 1_000,
            },
            ..WorldConfig::default()
        });
        let mut g = group("big", 200);
        g.cpu = "26".into();
        g.memory = "64Gi".into();
        w.add_node_group(&g).unwrap();
        w.advance(1_000);
        assert_eq!(w.node_names().len(), 200);
        // The thread's CPU time, not the wall clock: a loaded machine lengthens the latter.
        let cpu = || rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        let start = cpu();
        for i in 0..10 {
            w.add_replica_set(rs(&format!("app{i}"), 500, "1")).unwrap();
        }
        w.advance(1_000);
        let end = cpu();
        let took = std::time::Duration::from_secs_f64(
            (end.tv_sec - start.tv_sec) as f64 + (end.tv_nsec - start.tv_nsec) as f64 * 1e-9,
        );
        assert_eq!(w.pending_count(), 0);
        assert_eq!(w.live_pods().len(), 5_000);
        // Debug builds are slow, and every pod is checked against up to 100 nodes and scored
        // as kube-scheduler does; the bound still catches quadratic behaviour.
        assert!(took.as_secs_f64() < 10.0, "took {took:?}");
        eprintln!("scheduled 5000 pods in {took:?}");
    }

    #[test]
    fn applied_objects_and_priority_order() {
        let mut w = world(11);
        w.apply(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "static-1", "labels": {"kubernetes.io/hostname": "static-1"}},
            "status": {"capacity": {"cpu": "2", "memory": "4Gi", "pods": "10"},
                       "conditions": [{"type": "Ready", "status": "True"}]},
        }))
        .unwrap();
        // Pre-bound pod takes one cpu at once.
        w.add_pod(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pinned", "namespace": "default"},
               "spec": {"nodeName": "static-1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}),
        None,
    )
    .unwrap();
        assert_eq!(w.pending_count(), 0);
        let mk = |name: &str, prio: i32| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
               "spec": {"priority": prio, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}})
        };
        w.add_pod(mk("low", 0), None).unwrap();
        w.add_pod(mk("high", 1000), None).unwrap();
        w.advance(1_000);
        let pods = w.live_pods();
        let node_of = |n: &str| pods.iter().find(|p| p.1 == n).and_then(|p| p.2.clone());
        assert_eq!(node_of("high").as_deref(), Some("static-1"));
        assert_eq!(node_of("low"), None, "the higher priority pod goes first");
        assert!(matches!(
            w.add_pod(mk("low", 0), None),
            Err(WorldError::AlreadyExists(_))
        ));
    }
}

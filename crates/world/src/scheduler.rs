//! The world's kube-scheduler: on each tick, pending pods in queue order (priority, then age)
//! are bound first-fit to the nodes of the scheduling snapshot using the core's predicates;
//! those that fit nowhere get `PodScheduled=False, reason=Unschedulable` with kube-scheduler's
//! message.
//!
//! It decides placement only, and owns what it keeps between passes (the epoch of its last idle
//! pass, failure verdicts per equivalence class). It never scores nodes (first fit in snapshot
//! order), never preempts, never creates or deletes a pod and never writes a condition that did
//! not change.

use std::collections::BTreeMap;

use autoscaler_core::snapshot::NodeId;
use rustc_hash::FxHashMap;
use serde_json::json;

use crate::cluster::Cluster;
use crate::objects::key;
use crate::queue::NsName;

/// The scheduler's own state.
#[derive(Debug, Default)]
pub(crate) struct Scheduler {
    /// The scheduling epoch at which a pass changed nothing: until the epoch moves, another
    /// pass would decide exactly the same and is skipped.
    idle_at: Option<u64>,
    /// kube-scheduler failure verdicts kept between passes, per equivalence class.
    failures: FailureCache,
}

impl Scheduler {
    /// One scheduler pass over every pending pod.
    pub(crate) fn schedule_pending(&mut self, c: &mut Cluster) {
        // Nothing changed since a pass that changed nothing: this one would decide the same.
        if c.pending.is_empty() || self.idle_at == Some(c.sched_epoch) {
            return;
        }
        let epoch = c.sched_epoch;
        let queue: Vec<(i32, u64, NsName)> = c.pending.iter().cloned().collect();
        // Oldest-registered first is not tracked; name order (the map's) is deterministic.
        let node_ids: Vec<NodeId> = c.nodes.values().map(|s| s.id).collect();
        // For pods whose fit can only get worse as pods are added (no inter-pod affinity, no
        // spread), a node rejected for one pod of an equivalence class rejects the rest of the
        // class during this pass: resume from there, and reuse a failure message.
        let mut cursor: FxHashMap<u64, usize> = FxHashMap::default();
        let mut failed: FxHashMap<u64, String> = FxHashMap::default();
        let cache = &mut self.failures;
        cache.used.clear();
        for (_, _, id) in queue {
            let Some(view) = c.pods.get(&id).map(|p| p.view.clone()) else {
                continue;
            };
            let monotone = view.affinity.is_empty() && view.spread.is_empty();
            if monotone && let Some(msg) = failed.get(&view.equivalence).cloned() {
                mark_unschedulable(c, &id, msg);
                continue;
            }
            let prepared = c.snapshot.prepare(&view);
            let start = if monotone {
                cursor.get(&view.equivalence).copied().unwrap_or(0)
            } else {
                0
            };
            let mut chosen = None;
            for (i, nid) in node_ids.iter().enumerate().skip(start) {
                if c.snapshot.check(&view, &prepared, *nid).is_ok() {
                    chosen = Some(i);
                    break;
                }
            }
            match chosen {
                Some(i) => {
                    if monotone {
                        cursor.insert(view.equivalence, i);
                    }
                    let name = c
                        .snapshot
                        .node(node_ids[i])
                        .map(|n| n.node.name.as_str().to_string());
                    if let Some(name) = name {
                        c.bind(&id, &name);
                    }
                }
                None => {
                    let msg = if monotone && c.snapshot.anti_affinity_pod_count() == 0 {
                        cached_failure_message(c, &view, &node_ids, cache)
                    } else {
                        failure_message(c, &view, &node_ids)
                    };
                    if monotone {
                        failed.insert(view.equivalence, msg.clone());
                    }
                    mark_unschedulable(c, &id, msg);
                }
            }
        }
        self.idle_at = (c.sched_epoch == epoch).then_some(epoch);
        // Classes that did not fail in this pass are forgotten.
        let used = std::mem::take(&mut cache.used);
        cache.classes.retain(|k, _| used.contains(k));
        cache.used = used;
    }
}

/// [`failure_message`] for a pod whose verdict on a node depends only on that node
/// and its pods (no inter-pod affinity or spread of its own, no existing pod with
/// anti-affinity): per-node reasons are kept per equivalence class with the node's stamp
/// and recomputed only for nodes changed since; the message itself is reused while no node
/// changed. Gives exactly [`failure_message`]'s text.
fn cached_failure_message(
    c: &Cluster,
    pod: &autoscaler_core::pod::Pod,
    nodes: &[NodeId],
    cache: &mut FailureCache,
) -> String {
    let msg = cached_failure_message_inner(c, pod, nodes, cache);
    debug_assert_eq!(msg, failure_message(c, pod, nodes));
    msg
}

fn cached_failure_message_inner(
    c: &Cluster,
    pod: &autoscaler_core::pod::Pod,
    nodes: &[NodeId],
    cache: &mut FailureCache,
) -> String {
    if nodes.is_empty() {
        return "no nodes available to schedule pods".to_string();
    }
    cache.used.insert(pod.equivalence);
    let class = cache.classes.entry(pod.equivalence).or_default();
    if class.ids != nodes {
        *class = ClassFailures {
            ids: nodes.to_vec(),
            entries: vec![(None, Vec::new()); nodes.len()],
            ..ClassFailures::default()
        };
    }
    let mut prepared = None;
    let mut changed = false;
    for (&nid, entry) in nodes.iter().zip(class.entries.iter_mut()) {
        let st = c.node_stamps.get(nid.0 as usize).copied().unwrap_or(0);
        if entry.0 == Some(st) {
            continue;
        }
        changed = true;
        let prepared = prepared.get_or_insert_with(|| c.snapshot.prepare(pod));
        let reasons = match c.snapshot.check(pod, prepared, nid) {
            Ok(()) => Vec::new(),
            Err(unfit) => unfit.reasons(),
        };
        for r in &entry.1 {
            if let Some(n) = class.counts.get_mut(r) {
                *n -= 1;
                if *n == 0 {
                    class.counts.remove(r);
                }
            }
        }
        for r in &reasons {
            *class.counts.entry(r.clone()).or_default() += 1;
        }
        *entry = (Some(st), reasons);
    }
    if !changed && let Some(msg) = &class.message {
        return msg.clone();
    }
    let mut parts: Vec<String> = class
        .counts
        .iter()
        .map(|(r, n)| format!("{n} {r}"))
        .collect();
    parts.sort();
    let msg = format!(
        "0/{} nodes are available: {}.",
        nodes.len(),
        parts.join(", ")
    );
    class.message = Some(msg.clone());
    msg
}

/// kube-scheduler's FitError text: `0/N nodes are available: <count> <reason>, ....`,
/// reasons counted per node and sorted as strings.
fn failure_message(c: &Cluster, pod: &autoscaler_core::pod::Pod, nodes: &[NodeId]) -> String {
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
    let mut parts: Vec<String> = hist.into_iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    format!(
        "0/{} nodes are available: {}.",
        nodes.len(),
        parts.join(", ")
    )
}

fn mark_unschedulable(c: &mut Cluster, id: &NsName, msg: String) {
    let Some(st) = c.pods.get_mut(id) else {
        return;
    };
    if st.unschedulable.as_deref() == Some(msg.as_str()) {
        return;
    }
    st.unschedulable = Some(msg.clone());
    let k = key("", "Pod", &id.0, &id.1);
    let ts = c.timestamp();
    if let Some(mut obj) = c.get_owned(&k) {
        obj["status"]["phase"] = json!("Pending");
        obj["status"]["conditions"] = json!([{
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": msg,
            "lastProbeTime": null,
            "lastTransitionTime": ts,
        }]);
        let _ = c.put(obj);
    }
}

/// Failure verdicts of equivalence classes, kept between scheduler passes.
#[derive(Debug, Default)]
pub(crate) struct FailureCache {
    /// Per equivalence class.
    classes: FxHashMap<u64, ClassFailures>,
    /// Classes that failed in the current pass.
    used: rustc_hash::FxHashSet<u64>,
}

/// One class's verdicts on the nodes `ids` (in scheduling order): per node the stamp its
/// reasons were computed at (`None`: not yet) and the reasons, the count of each reason over
/// the nodes, and the message of those counts.
#[derive(Debug, Default)]
struct ClassFailures {
    ids: Vec<NodeId>,
    entries: Vec<(Option<u64>, Vec<String>)>,
    counts: BTreeMap<String, usize>,
    message: Option<String>,
}

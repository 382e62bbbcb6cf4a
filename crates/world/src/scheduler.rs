//! The world's kube-scheduler: on each tick, pending pods in queue order (priority, then age)
//! are bound first-fit to the nodes of the scheduling snapshot using the core's predicates;
//! those that fit nowhere get `PodScheduled=False, reason=Unschedulable` with kube-scheduler's
//! message.
//!
//! It decides placement only. It never scores nodes (first fit in snapshot order), never
//! preempts and never writes a condition that did not change.

use std::collections::BTreeMap;

use autoscaler_core::snapshot::NodeId;
use rustc_hash::FxHashMap;
use serde_json::json;

use crate::objects::key;
use crate::world::{NsName, World};

impl World {
    /// One scheduler pass over every pending pod.
    pub(crate) fn schedule_pending(&mut self) {
        // Nothing changed since a pass that changed nothing: this one would decide the same.
        if self.pending.is_empty() || self.sched_idle_at == Some(self.sched_epoch) {
            return;
        }
        let epoch = self.sched_epoch;
        let queue: Vec<(i32, u64, NsName)> = self.pending.iter().cloned().collect();
        // Oldest-registered first is not tracked; name order (the map's) is deterministic.
        let node_ids: Vec<NodeId> = self.nodes.values().map(|s| s.id).collect();
        // For pods whose fit can only get worse as pods are added (no inter-pod affinity, no
        // spread), a node rejected for one pod of an equivalence class rejects the rest of the
        // class during this pass: resume from there, and reuse a failure message.
        let mut cursor: FxHashMap<u64, usize> = FxHashMap::default();
        let mut failed: FxHashMap<u64, String> = FxHashMap::default();
        let mut cache = std::mem::take(&mut self.failures);
        cache.used.clear();
        for (_, _, id) in queue {
            let Some(view) = self.pods.get(&id).map(|p| p.view.clone()) else {
                continue;
            };
            let monotone = view.affinity.is_empty() && view.spread.is_empty();
            if monotone && let Some(msg) = failed.get(&view.equivalence).cloned() {
                self.mark_unschedulable(&id, msg);
                continue;
            }
            let prepared = self.snapshot.prepare(&view);
            let start = if monotone {
                cursor.get(&view.equivalence).copied().unwrap_or(0)
            } else {
                0
            };
            let mut chosen = None;
            for (i, nid) in node_ids.iter().enumerate().skip(start) {
                if self.snapshot.check(&view, &prepared, *nid).is_ok() {
                    chosen = Some(i);
                    break;
                }
            }
            match chosen {
                Some(i) => {
                    if monotone {
                        cursor.insert(view.equivalence, i);
                    }
                    let name = self
                        .snapshot
                        .node(node_ids[i])
                        .map(|n| n.node.name.as_str().to_string());
                    if let Some(name) = name {
                        self.bind(&id, &name);
                    }
                }
                None => {
                    let msg = if monotone && self.snapshot.anti_affinity_pod_count() == 0 {
                        self.cached_failure_message(&view, &node_ids, &mut cache)
                    } else {
                        self.failure_message(&view, &node_ids)
                    };
                    if monotone {
                        failed.insert(view.equivalence, msg.clone());
                    }
                    self.mark_unschedulable(&id, msg);
                }
            }
        }
        self.sched_idle_at = (self.sched_epoch == epoch).then_some(epoch);
        // Classes that did not fail in this pass are forgotten.
        let used = std::mem::take(&mut cache.used);
        cache.classes.retain(|k, _| used.contains(k));
        cache.used = used;
        self.failures = cache;
    }

    /// [`World::failure_message`] for a pod whose verdict on a node depends only on that node
    /// and its pods (no inter-pod affinity or spread of its own, no existing pod with
    /// anti-affinity): per-node reasons are kept per equivalence class with the node's stamp
    /// and recomputed only for nodes changed since; the message itself is reused while no node
    /// changed. Gives exactly [`World::failure_message`]'s text.
    fn cached_failure_message(
        &self,
        pod: &autoscaler_core::pod::Pod,
        nodes: &[NodeId],
        cache: &mut FailureCache,
    ) -> String {
        let msg = self.cached_failure_message_inner(pod, nodes, cache);
        debug_assert_eq!(msg, self.failure_message(pod, nodes));
        msg
    }

    fn cached_failure_message_inner(
        &self,
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
            let st = self.node_stamps.get(nid.0 as usize).copied().unwrap_or(0);
            if entry.0 == Some(st) {
                continue;
            }
            changed = true;
            let prepared = prepared.get_or_insert_with(|| self.snapshot.prepare(pod));
            let reasons = match self.snapshot.check(pod, prepared, nid) {
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
    fn failure_message(&self, pod: &autoscaler_core::pod::Pod, nodes: &[NodeId]) -> String {
        if nodes.is_empty() {
            return "no nodes available to schedule pods".to_string();
        }
        let prepared = self.snapshot.prepare(pod);
        let mut hist: BTreeMap<String, usize> = BTreeMap::new();
        for nid in nodes {
            if let Err(unfit) = self.snapshot.check(pod, &prepared, *nid) {
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

    fn mark_unschedulable(&mut self, id: &NsName, msg: String) {
        let Some(st) = self.pods.get_mut(id) else {
            return;
        };
        if st.unschedulable.as_deref() == Some(msg.as_str()) {
            return;
        }
        st.unschedulable = Some(msg.clone());
        let k = key("", "Pod", &id.0, &id.1);
        let ts = self.store.timestamp(self.now);
        if let Some(mut obj) = self.get_owned(&k) {
            obj["status"]["phase"] = json!("Pending");
            obj["status"]["conditions"] = json!([{
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": msg,
                "lastProbeTime": null,
                "lastTransitionTime": ts,
            }]);
            let _ = self.put(obj);
        }
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

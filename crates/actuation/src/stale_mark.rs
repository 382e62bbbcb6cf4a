//! Which of this autoscaler's delete-machine marks have gone stale and are due for removal.
//!
//! A node deletion marks the node's Machine and lowers its owner's replicas. A MachineSet ranks
//! an unhealthy Machine or one without a node as high as a marked one and breaks ties by name,
//! so it may delete another Machine instead; the marked Machine then keeps its mark and its
//! node its `ToBeDeletedByClusterAutoscaler` taint for good (upstream clears such taints only
//! when it restarts, and never the mark). The mark is worse than the taint: at the set's next
//! decrease it deletes that Machine, whichever node was drained for that decrease.
//!
//! A mark counts as stale once [`ScalableResource::stale_marks`] has listed it continuously for
//! [`STALE_MARK_GRACE_MS`] while nothing of its group is in flight: the Machine's annotation
//! and the lowered replicas are written one after the other and watched separately, so for a
//! moment a fresh mark looks stale. It decides nothing else and never touches a mark a user
//! wrote (only those with this autoscaler's value), nor one whose Machine is being deleted.
//!
//! [`ScalableResource::stale_marks`]: autoscaler_clusterapi::ScalableResource::stale_marks

use autoscaler_clusterapi::ClusterApiProvider;
use autoscaler_model::ObjectKey;
use autoscaler_model::{CloudProvider, NodeGroupId, Sym};
use rustc_hash::FxHashMap;

/// How long a mark must look stale before it is removed: far longer than the watch lag between
/// a Machine and its owner, and shorter than `--scale-down-unneeded-time`'s default, so a node
/// freed this way is not held out of scale-up for long.
pub const STALE_MARK_GRACE_MS: i64 = 60_000;

/// A stale mark to remove now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DueMark {
    /// The group of the Machine.
    pub(crate) group: NodeGroupId,
    /// The Machine.
    pub(crate) machine: ObjectKey,
    /// Its node, if it has one.
    pub(crate) node: Option<Sym>,
}

/// When each mark was first seen stale, for as long as it stays so.
#[derive(Clone, Debug, Default)]
pub(crate) struct StaleMarks {
    since_ms: FxHashMap<ObjectKey, i64>,
}

impl StaleMarks {
    /// The marks stale for the grace period at `now_ms`; `busy` says whether a group has
    /// anything in flight (its marks start over). A mark returned is forgotten: if its removal
    /// fails, it is found stale again and waits another grace period.
    pub(crate) fn due(
        &mut self,
        provider: &ClusterApiProvider,
        busy: &dyn Fn(&str) -> bool,
        now_ms: i64,
    ) -> Vec<DueMark> {
        let mut seen: FxHashMap<ObjectKey, i64> = FxHashMap::default();
        let mut due = Vec::new();
        let groups = provider.node_groups().iter();
        for (group, resource) in groups.zip(provider.resources()) {
            if busy(group.id().as_str()) {
                continue;
            }
            for m in resource.stale_marks() {
                let Some(key) = &m.key else { continue };
                let since = self.since_ms.get(key).copied().unwrap_or(now_ms);
                if now_ms.saturating_sub(since) >= STALE_MARK_GRACE_MS {
                    due.push(DueMark {
                        group: group.id().clone(),
                        machine: key.clone(),
                        node: m.node_name.as_deref().map(Sym::new),
                    });
                } else {
                    seen.insert(key.clone(), since);
                }
            }
        }
        self.since_ms = seen;
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_clusterapi::ClusterApiConfig;
    use autoscaler_model::ObjectStore;
    use serde_json::json;

    const MD: &str = "MachineDeployment/default/md";

    /// A MachineSet `md-s` of `replicas` owned by MachineDeployment `md` (also `replicas`),
    /// with one Machine per entry of `machines`: (name, delete-machine value, deleting).
    fn store(replicas: i64, machines: &[(&str, Option<&str>, bool)]) -> ObjectStore {
        let mut s = ObjectStore::new();
        let labels = json!({"cluster.x-k8s.io/cluster-name": "c",
                            "cluster.x-k8s.io/deployment-name": "md"});
        let ann = json!({
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "0",
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "10"});
        let md = json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
            "metadata": {"name": "md", "namespace": "default", "uid": "md-uid", "annotations": ann},
            "spec": {"clusterName": "c", "replicas": replicas,
                     "selector": {"matchLabels": labels.clone()},
                     "template": {"metadata": {"labels": labels.clone()}}}});
        let ms = json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineSet",
            "metadata": {"name": "md-s", "namespace": "default", "uid": "ms-uid",
                         "labels": labels.clone(),
                         "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta1",
                            "kind": "MachineDeployment", "name": "md", "uid": "md-uid"}]},
            "spec": {"clusterName": "c", "replicas": replicas,
                     "selector": {"matchLabels": labels.clone()}}});
        s.insert(md, "t").unwrap();
        s.insert(ms, "t").unwrap();
        for (name, mark, deleting) in machines {
            let mut meta = json!({"name": name, "namespace": "default", "labels": labels.clone(),
                "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta1",
                    "kind": "MachineSet", "name": "md-s", "uid": "ms-uid"}]});
            if let Some(v) = mark {
                meta["annotations"] = json!({"cluster.x-k8s.io/delete-machine": v});
            }
            if *deleting {
                meta["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            }
            let m = json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
                "metadata": meta,
                "spec": {"clusterName": "c", "providerID": format!("test:///{name}")},
                "status": {"nodeRef": {"name": name}}});
            s.insert(m, "t").unwrap();
        }
        s
    }

    fn provider(s: &ObjectStore) -> ClusterApiProvider {
        // A group whose Machines are all marked has no template: a warning, not a refusal.
        let (p, _) = ClusterApiProvider::discover(s, &ClusterApiConfig::default());
        assert_eq!(p.node_groups().len(), 1, "one group discovered");
        p
    }

    fn names(due: &[DueMark]) -> Vec<&str> {
        due.iter().map(|d| d.machine.name.as_str()).collect()
    }

    const OURS: Option<&str> = Some(autoscaler_clusterapi::DELETE_MACHINE_VALUE);

    #[test]
    fn a_mark_the_set_will_not_act_on_is_due_after_the_grace_period() {
        // The set deleted "a" (deleting) instead of the marked "b": two Machines without a
        // deletion timestamp for two replicas.
        let s = store(
            2,
            &[("a", None, true), ("b", OURS, false), ("c", None, false)],
        );
        let p = provider(&s);
        let mut marks = StaleMarks::default();
        assert!(marks.due(&p, &|_| false, 0).is_empty(), "seen, not due yet");
        assert!(
            marks
                .due(&p, &|_| false, STALE_MARK_GRACE_MS - 1)
                .is_empty()
        );
        let due = marks.due(&p, &|_| false, STALE_MARK_GRACE_MS);
        assert_eq!(names(&due), ["b"]);
        assert_eq!(due[0].group.as_str(), MD);
        assert_eq!(
            due[0].node.map(|n| n.as_str().to_string()),
            Some("b".into())
        );
        assert!(
            marks
                .due(&p, &|_| false, STALE_MARK_GRACE_MS + 1)
                .is_empty(),
            "forgotten"
        );
    }

    #[test]
    fn marks_the_set_still_has_to_act_on_are_never_due() {
        // Replicas lowered to 2, three Machines without a deletion timestamp: the set will
        // still delete one, the marked one first.
        let pending = store(
            2,
            &[("a", None, false), ("b", OURS, false), ("c", None, false)],
        );
        // A Machine being deleted keeps its mark: its deletion is under way.
        let deleting = store(1, &[("a", None, false), ("b", OURS, true)]);
        for s in [pending, deleting] {
            let p = provider(&s);
            let mut marks = StaleMarks::default();
            for t in [0, STALE_MARK_GRACE_MS, 10 * STALE_MARK_GRACE_MS] {
                assert!(marks.due(&p, &|_| false, t).is_empty());
            }
        }
    }

    #[test]
    fn a_users_mark_is_never_touched() {
        let s = store(2, &[("a", Some("yes"), false), ("b", Some(""), false)]);
        let p = provider(&s);
        let mut marks = StaleMarks::default();
        for t in [0, STALE_MARK_GRACE_MS, 10 * STALE_MARK_GRACE_MS] {
            assert!(marks.due(&p, &|_| false, t).is_empty());
        }
    }

    #[test]
    fn anything_in_flight_for_the_group_restarts_the_grace_period() {
        let s = store(2, &[("b", OURS, false), ("c", None, false)]);
        let p = provider(&s);
        let mut marks = StaleMarks::default();
        assert!(marks.due(&p, &|_| false, 0).is_empty());
        assert!(marks.due(&p, &|g| g == MD, STALE_MARK_GRACE_MS).is_empty());
        assert!(
            marks
                .due(&p, &|_| false, STALE_MARK_GRACE_MS + 1)
                .is_empty()
        );
        let due = marks.due(&p, &|_| false, 2 * STALE_MARK_GRACE_MS + 1);
        assert_eq!(names(&due), ["b"]);
    }

    #[test]
    fn a_mark_that_stops_looking_stale_starts_over() {
        let stale = store(2, &[("b", OURS, false), ("c", None, false)]);
        let lowered = store(1, &[("b", OURS, false), ("c", None, false)]);
        let mut marks = StaleMarks::default();
        assert!(marks.due(&provider(&stale), &|_| false, 0).is_empty());
        // The lowered replicas arrive: the set will act on the mark.
        assert!(
            marks
                .due(&provider(&lowered), &|_| false, 30_000)
                .is_empty()
        );
        assert!(marks.due(&provider(&stale), &|_| false, 60_000).is_empty());
        let due = marks.due(&provider(&stale), &|_| false, 120_000);
        assert_eq!(names(&due), ["b"]);
    }
}

//! The Eviction API and the disruption controller: budgets' `status.disruptionsAllowed` is kept
//! current from the pods their selectors match, and an eviction is refused when a covering
//! budget allows no more disruptions.
//!
//! It decides whether an eviction may proceed, and owns only whether budgets need recomputing
//! (a budget was written, or pods changed since it last looked). An evicted bound pod is deleted
//! gracefully: it terminates over its grace period, holding its node, and neither its budget nor
//! its controller counts it meanwhile (the controller replaces it at once). Simplifications: the
//! expected pod count is the number of live pods the selector matches that are not terminating
//! (not the controllers' scale); a pod is healthy when bound, running and not terminating; a
//! budget with neither `minAvailable` nor `maxUnavailable` allows nothing. It never deletes a pod
//! a budget protects and never replaces an evicted pod (its workload controller does).

use autoscaler_model::IntOrPercent;
use autoscaler_model::PodDisruptionBudget;
use k8s_openapi::api::policy::v1 as policy;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::cluster::{Cluster, Owner};
use crate::metrics::LostRun;
use crate::queue::NsName;
use crate::time::SimTime;

/// Why an eviction was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvictionError {
    /// No such live pod.
    #[error("pod {0} not found")]
    NotFound(String),
    /// A budget covering the pod allows no more disruptions.
    #[error(
        "cannot evict pod {pod} as it would violate the pod's disruption budget {pdb}: {message}"
    )]
    PdbViolation {
        /// The pod.
        pod: String,
        /// The budget, `namespace/name`.
        pdb: String,
        /// Its state.
        message: String,
    },
    /// More than one budget covers the pod (the API server refuses these).
    #[error("pod {pod} is covered by more than one PodDisruptionBudget: {pdbs:?}")]
    MultiplePdbs {
        /// The pod.
        pod: String,
        /// The budgets.
        pdbs: Vec<String>,
    },
}

/// A budget's computed status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Budget {
    expected: i64,
    healthy: i64,
    desired: i64,
    allowed: i64,
}

fn scaled(v: IntOrPercent, total: i64) -> i64 {
    match v {
        IntOrPercent::Int(n) => i64::from(n),
        // Percentages round up, as the disruption controller does.
        IntOrPercent::Percent(p) => (i64::from(p) * total + 99) / 100,
    }
}

/// The disruption controller's own state.
#[derive(Debug, Default)]
pub(crate) struct Disruption {
    /// A budget was written since the last refresh.
    dirty: bool,
    /// The pod generation the budgets were last computed at.
    seen_pods: u64,
}

/// The budgets stored, with their views.
fn budgets(c: &Cluster) -> Vec<(NsName, Value, PodDisruptionBudget)> {
    c.store
        .objects()
        .list("policy", "PodDisruptionBudget")
        .filter_map(|(k, v)| {
            let typed = policy::PodDisruptionBudget::deserialize(&**v).ok()?;
            let view = PodDisruptionBudget::from_k8s(&typed).ok()?;
            Some(((k.namespace.clone(), k.name.clone()), (**v).clone(), view))
        })
        .collect()
}

fn budget_of(c: &Cluster, pdb: &PodDisruptionBudget) -> Budget {
    let (mut expected, mut healthy) = (0i64, 0i64);
    for p in c.pods.values() {
        if p.terminating.is_none() && pdb.matches(&p.view) {
            expected += 1;
            if p.node.is_some() {
                healthy += 1;
            }
        }
    }
    let desired = match (pdb.min_available, pdb.max_unavailable) {
        (Some(m), _) => scaled(m, expected),
        (None, Some(m)) => (expected - scaled(m, expected)).max(0),
        (None, None) => expected,
    };
    Budget {
        expected,
        healthy,
        desired,
        allowed: (healthy - desired).max(0),
    }
}

impl Disruption {
    /// A budget was created, changed or deleted: the next refresh rewrites the statuses.
    pub(crate) fn budget_written(&mut self) {
        self.dirty = true;
    }

    /// Rewrites every budget's status if pods or budgets changed since the last refresh.
    pub(crate) fn refresh(&mut self, c: &mut Cluster) {
        if !self.dirty && self.seen_pods == c.pod_generation() {
            return;
        }
        self.dirty = false;
        self.seen_pods = c.pod_generation();
        for (_, mut obj, view) in budgets(c) {
            let b = budget_of(c, &view);
            obj["status"] = json!({
                "currentHealthy": b.healthy,
                "desiredHealthy": b.desired,
                "disruptionsAllowed": b.allowed,
                "expectedPods": b.expected,
                "observedGeneration": obj.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
            });
            let _ = c.put(obj);
        }
    }

    /// Evicts a pod as the Eviction API does: pending pods go at once; a running pod is
    /// deleted gracefully (see [`Cluster::delete_pod_gracefully`], `grace_sec` being the
    /// request's `deleteOptions.gracePeriodSeconds`) only if the one budget covering it (if any)
    /// allows a disruption; a pod already terminating needs no budget and is left as it is. Its
    /// controller recreates it.
    pub(crate) fn evict(
        &mut self,
        c: &mut Cluster,
        namespace: &str,
        name: &str,
        grace_sec: Option<u64>,
    ) -> Result<(), EvictionError> {
        let id = (namespace.to_string(), name.to_string());
        let pod_key = format!("{namespace}/{name}");
        let Some(st) = c.pods.get(&id) else {
            return Err(EvictionError::NotFound(pod_key));
        };
        if st.terminating.is_some() {
            return Ok(());
        }
        if st.node.is_some() {
            let view = st.view.clone();
            let covering: Vec<_> = budgets(c)
                .into_iter()
                .filter(|(_, _, b)| b.matches(&view))
                .collect();
            if covering.len() > 1 {
                return Err(EvictionError::MultiplePdbs {
                    pod: pod_key,
                    pdbs: covering.iter().map(|(_, _, b)| b.key()).collect(),
                });
            }
            if let Some((_, _, pdb)) = covering.first() {
                let b = budget_of(c, pdb);
                if b.allowed <= 0 {
                    return Err(EvictionError::PdbViolation {
                        pod: pod_key,
                        pdb: pdb.key(),
                        message: format!(
                            "{} healthy of {} desired, 0 disruptions allowed",
                            b.healthy, b.desired
                        ),
                    });
                }
            }
        }
        let timed = c.pods.get(&id).is_some_and(crate::timed_work::is_timed);
        let lost = lost_run_start(c, &id);
        c.delete_pod_gracefully(&id, grace_sec);
        if let Some((requests, from_ms)) = lost {
            let to_ms = c
                .pods
                .get(&id)
                .and_then(|st| st.terminating)
                .unwrap_or(c.now);
            c.metrics.lost_runs.push(LostRun {
                pod: pod_key,
                requests,
                from_ms,
                to_ms,
                timed,
            });
        }
        self.refresh(c);
        Ok(())
    }
}

/// A bound pod's requests and the start of its lost time, as it is evicted now: its whole run
/// for a Job's pod; else from now (its termination; a replayed task's redone part was recorded
/// when it started, and ends here, and the task's progress is remembered for its next run).
/// `None` for an unbound pod or a DaemonSet's.
fn lost_run_start(c: &mut Cluster, id: &NsName) -> Option<(autoscaler_model::Resources, SimTime)> {
    let st = c.pods.get(id)?;
    st.node.as_ref()?;
    let started = st.started.unwrap_or(c.now);
    let from = match st.owner {
        Owner::DaemonSet(..) => return None,
        // A Job's new pod is not linked to this one: its whole run counts as lost.
        Owner::Job(_) => started,
        _ => c.now,
    };
    let requests = st.view.requests.clone();
    if let Some(task) = crate::workloads::task_of(st, id) {
        let now = c.now;
        c.metrics.task_evicted(&task, started, now);
    }
    Some((requests, from))
}

/// A budget's state as the disruption controller computes it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetStatus {
    /// `namespace/name`.
    pub pdb: String,
    /// Pods the selector matches that are bound, running and not terminating.
    pub healthy: i64,
    /// Pods that must stay healthy.
    pub desired: i64,
}

/// Every budget's current healthy and desired counts, sorted by budget.
pub(crate) fn budget_statuses(c: &Cluster) -> Vec<BudgetStatus> {
    let mut v: Vec<BudgetStatus> = budgets(c)
        .into_iter()
        .map(|((ns, n), _, view)| {
            let b = budget_of(c, &view);
            BudgetStatus {
                pdb: format!("{ns}/{n}"),
                healthy: b.healthy,
                desired: b.desired,
            }
        })
        .collect();
    v.sort_by(|a, b| a.pdb.cmp(&b.pdb));
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Owner;
    use crate::objects::key;

    #[test]
    fn budgets_are_recomputed_when_pods_or_budgets_change_and_only_then() {
        let mut c = Cluster::new(0, 0);
        let mut d = Disruption::default();
        c.put(
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}),
        )
        .unwrap();
        d.budget_written();
        d.refresh(&mut c);
        let k = key("policy", "PodDisruptionBudget", "default", "web");
        let status = |c: &Cluster| c.store.get(&k).unwrap()["status"].clone();
        assert_eq!(status(&c)["expectedPods"], 0);
        let rv = c.store.resource_version();
        d.refresh(&mut c);
        assert_eq!(
            c.store.resource_version(),
            rv,
            "nothing changed, nothing written"
        );
        c.create_pod(
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "default", "labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]}}),
            Owner::None,
            None,
        )
        .unwrap();
        d.refresh(&mut c);
        assert_eq!(status(&c)["expectedPods"], 1);
        assert_eq!(status(&c)["disruptionsAllowed"], 0);
        assert!(
            d.evict(&mut c, "default", "p", None).is_ok(),
            "a pending pod goes at once"
        );
        assert_eq!(status(&c)["expectedPods"], 0);
        assert!(matches!(
            d.evict(&mut c, "default", "p", None),
            Err(EvictionError::NotFound(_))
        ));
    }
}

#[cfg(test)]
mod scenario_tests {
    //! Scenarios through the world that exercise this controller.
    use crate::testkit::*;

    #[test]
    fn eviction_honours_budgets_and_the_replica_set_recreates_the_pod() {
        let mut w = world(7);
        w.add_node_group(&group("workers", 2)).unwrap();
        w.add_replica_set(rs("web", 2, "100m")).unwrap();
        w.apply(pdb("web", "web", 2)).unwrap();
        w.advance(61_000);
        assert_eq!(w.pending_count(), 0);
        let status =
            get(&w, "policy", "PodDisruptionBudget", "default", "web").unwrap()["status"].clone();
        assert_eq!(status["disruptionsAllowed"], 0);
        assert_eq!(status["currentHealthy"], 2);
        let (ns, name, _) = w.live_pods()[0].clone();
        let err = w.evict(&ns, &name, None).unwrap_err();
        assert!(matches!(err, EvictionError::PdbViolation { ref pdb, .. } if pdb == "default/web"));
        assert!(
            w.live_pods().iter().any(|p| p.1 == name),
            "refused: pod stays"
        );

        w.apply(pdb("web", "web", 1)).unwrap();
        let status =
            get(&w, "policy", "PodDisruptionBudget", "default", "web").unwrap()["status"].clone();
        assert_eq!(status["disruptionsAllowed"], 1);
        w.evict(&ns, &name, None).unwrap();
        let pods = w.live_pods();
        assert_eq!(
            pods.len(),
            3,
            "the ReplicaSet replaced it while it terminates"
        );
        assert!(w.terminating_until(&ns, &name).is_some());
        assert_eq!(pods.iter().filter(|p| p.2.is_none()).count(), 1);
        // A second eviction before the replacement runs is refused: the terminating pod is
        // not healthy any more.
        let other = pods
            .iter()
            .find(|p| p.2.is_some() && p.1 != name)
            .unwrap()
            .1
            .clone();
        assert!(matches!(
            w.evict("default", &other, None),
            Err(EvictionError::PdbViolation { .. })
        ));
        w.advance(1_000);
        assert_eq!(w.pending_count(), 0);
        w.advance(30_000);
        assert!(!w.live_pods().iter().any(|p| p.1 == name), "gone after 30s");
        assert_eq!(w.live_pods().len(), 2);
        assert_eq!(
            w.evict("default", "nope", None),
            Err(EvictionError::NotFound("default/nope".into()))
        );
    }
}

#[cfg(test)]
mod termination_tests {
    //! An evicted bound pod terminates over its grace period, as on a real cluster.
    use crate::testkit::*;

    /// One ready 4-CPU worker.
    fn one_node(seed: u64) -> (World, String) {
        let mut w = world(seed);
        w.add_node_group(&group("workers", 1)).unwrap();
        w.advance(61_000);
        let node = w.node_names()[0].clone();
        (w, node)
    }

    fn bare_pod(name: &str, node: Option<&str>, grace: Option<u64>) -> Value {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "x"}]}});
        if let Some(n) = node {
            p["spec"]["nodeName"] = json!(n);
        }
        if let Some(g) = grace {
            p["spec"]["terminationGracePeriodSeconds"] = json!(g);
        }
        p
    }

    fn pods_of(w: &World, app: &str) -> Vec<(String, Option<String>)> {
        w.objects()
            .list("", "Pod")
            .filter(|(_, p)| p.pointer("/metadata/labels/app").and_then(Value::as_str) == Some(app))
            .map(|(k, p)| {
                let node = p.pointer("/spec/nodeName").and_then(Value::as_str);
                (k.name.clone(), node.map(str::to_string))
            })
            .collect()
    }

    #[test]
    fn the_replacement_is_created_at_once_while_the_evicted_pod_keeps_its_resources() {
        let (mut w, node) = one_node(21);
        w.add_replica_set(rs("big", 1, "3")).unwrap();
        w.advance(2_000);
        let (old, _) = pods_of(&w, "big").pop().unwrap();
        let t0 = w.now();
        w.evict("default", &old, None).unwrap();
        let obj = get(&w, "", "Pod", "default", &old).unwrap();
        assert_eq!(obj["metadata"]["deletionGracePeriodSeconds"], 30);
        assert_eq!(
            obj["metadata"]["deletionTimestamp"],
            json!(crate::time::rfc3339(
                w.config().epoch_ms + (t0 + 30_000) as i64
            ))
        );
        assert_eq!(obj["spec"]["nodeName"], json!(node), "still bound");
        assert_eq!(pods_of(&w, "big").len(), 2, "replacement created at once");
        let rs_status = get(&w, "apps", "ReplicaSet", "default", "big").unwrap()["status"].clone();
        assert_eq!(
            rs_status["replicas"], 1,
            "the terminating pod is not counted"
        );
        // The old pod still holds 3 of the node's 4 CPUs: the replacement cannot fit yet.
        w.advance(29_000);
        assert_eq!(w.pending_count(), 1);
        assert!(w.terminating_until("default", &old).is_some());
        w.advance(1_000);
        assert!(
            get(&w, "", "Pod", "default", &old).is_none(),
            "gone after 30 s"
        );
        w.advance(1_000);
        assert_eq!(
            w.pending_count(),
            0,
            "the replacement runs once the room is free"
        );
    }

    #[test]
    fn budgets_count_terminating_pods_neither_healthy_nor_expected() {
        let (mut w, _) = one_node(22);
        w.add_replica_set(rs("web", 3, "100m")).unwrap();
        w.apply(pdb("web", "web", 2)).unwrap();
        w.advance(2_000);
        let status = |w: &World| {
            get(w, "policy", "PodDisruptionBudget", "default", "web").unwrap()["status"].clone()
        };
        assert_eq!(status(&w)["disruptionsAllowed"], 1);
        let (victim, _) = pods_of(&w, "web").remove(0);
        w.evict("default", &victim, None).unwrap();
        let s = status(&w);
        assert_eq!(
            s["expectedPods"], 2,
            "the evicted pod is no longer expected"
        );
        assert_eq!(s["currentHealthy"], 2);
        assert_eq!(s["disruptionsAllowed"], 0);
        w.advance(2_000);
        // The replacement runs while the evicted pod still terminates: three healthy again.
        assert!(w.terminating_until("default", &victim).is_some());
        assert_eq!(status(&w)["currentHealthy"], 3);
        assert_eq!(
            status(&w)["expectedPods"],
            3,
            "not 4: the terminating pod is left out"
        );
    }

    #[test]
    fn evicting_a_terminating_pod_succeeds_and_changes_nothing() {
        let (mut w, node) = one_node(23);
        w.add_replica_set(rs("web", 1, "100m")).unwrap();
        w.apply(pdb("web", "web", 1)).unwrap();
        w.advance(2_000);
        w.apply(pdb("web", "web", 0)).unwrap();
        let (victim, _) = pods_of(&w, "web").remove(0);
        w.evict("default", &victim, Some(20)).unwrap();
        let until = w.terminating_until("default", &victim);
        w.apply(pdb("web", "web", 1)).unwrap();
        let rv = w.resource_version();
        // No budget is asked, no new grace is set, nothing is written.
        assert_eq!(w.evict("default", &victim, Some(5)), Ok(()));
        assert_eq!(w.evict("default", &victim, None), Ok(()));
        assert_eq!(w.resource_version(), rv);
        assert_eq!(w.terminating_until("default", &victim), until);
        assert_eq!(pods_of(&w, "web").len(), 2, "one replacement only");
        assert_eq!(
            w.non_daemon_pods_on(&node),
            1,
            "the terminating pod still runs there"
        );
    }

    #[test]
    fn deleting_the_node_removes_terminating_pods_at_once() {
        let (mut w, node) = one_node(24);
        w.add_replica_set(rs("web", 2, "100m")).unwrap();
        w.advance(2_000);
        let (victim, _) = pods_of(&w, "web").remove(0);
        w.evict("default", &victim, None).unwrap();
        w.delete_node(&node).unwrap();
        assert!(get(&w, "", "Pod", "default", &victim).is_none());
        assert!(w.terminating_until("default", &victim).is_none());
        // The owner was told once: it keeps two replicas, not three.
        assert_eq!(pods_of(&w, "web").len(), 2);
        w.advance(60_000);
        assert_eq!(pods_of(&w, "web").len(), 2);
    }

    #[test]
    fn the_grace_comes_from_the_request_else_the_pod_else_thirty_seconds() {
        let (mut w, node) = one_node(25);
        // (pod, its own grace, the request's grace, deletionGracePeriodSeconds, gone after)
        let cases = [
            ("default-grace", None, None, 30, 30_000),
            ("own-grace", Some(45), None, 45, 45_000),
            ("shorter-request", Some(60), Some(10), 10, 10_000),
            // Allowed 600 s, the pod needs only its own 30 s to stop.
            ("longer-request", None, Some(600), 600, 30_000),
        ];
        for (name, own, _, _, _) in cases {
            w.add_pod(bare_pod(name, Some(&node), own), None).unwrap();
        }
        let t0 = w.now();
        for (name, _, request, grace, gone_after) in cases {
            w.evict("default", name, request).unwrap();
            let obj = get(&w, "", "Pod", "default", name).unwrap();
            assert_eq!(
                obj["metadata"]["deletionGracePeriodSeconds"], grace,
                "{name}"
            );
            assert_eq!(
                w.terminating_until("default", name),
                Some(t0 + gone_after),
                "{name}"
            );
        }
        w.advance(60_000);
        assert!(w.live_pods().is_empty());
    }

    #[test]
    fn unbound_pods_and_a_zero_grace_go_at_once() {
        let (mut w, node) = one_node(26);
        w.add_pod(bare_pod("bound", Some(&node), None), None)
            .unwrap();
        w.taint_node(&node, "k", "v", "NoSchedule").unwrap();
        w.add_pod(bare_pod("pending", None, None), None).unwrap();
        w.advance(2_000);
        assert_eq!(w.pending_count(), 1);
        w.evict("default", "pending", None).unwrap();
        assert!(get(&w, "", "Pod", "default", "pending").is_none());
        w.evict("default", "bound", Some(0)).unwrap();
        assert!(get(&w, "", "Pod", "default", "bound").is_none());
        assert!(w.live_pods().is_empty());
    }

    #[test]
    fn a_replica_set_scaling_in_lets_its_bound_pods_terminate_on_their_node() {
        let (mut w, node) = one_node(28);
        w.add_replica_set(rs("web", 2, "100m")).unwrap();
        w.advance(2_000);
        w.scale_replica_set("default", "web", 1).unwrap();
        let terminating: Vec<String> = pods_of(&w, "web")
            .into_iter()
            .filter(|(n, _)| w.terminating_until("default", n).is_some())
            .map(|(n, _)| n)
            .collect();
        assert_eq!(terminating.len(), 1);
        assert_eq!(w.non_daemon_pods_on(&node), 2, "still on its node");
        let status = get(&w, "apps", "ReplicaSet", "default", "web").unwrap()["status"].clone();
        assert_eq!(status["replicas"], 1);
        w.advance(30_000);
        assert_eq!(w.non_daemon_pods_on(&node), 1);
        assert_eq!(pods_of(&w, "web").len(), 1, "gone, not replaced");
    }

    #[test]
    fn an_evicted_job_pod_is_replaced_at_once_and_never_counted_as_succeeded() {
        let (mut w, _) = one_node(27);
        w.add_job(JobSpec {
            namespace: "default".into(),
            name: "batch".into(),
            template: PodTemplate::new().requests("100m", "64Mi"),
            completions: 1,
            parallelism: 1,
            // Ends while it terminates.
            duration_ms: 12_000,
        })
        .unwrap();
        w.advance(2_000);
        let (_, first, _) = w.live_pods().remove(0);
        w.evict("default", &first, None).unwrap();
        assert_eq!(w.live_pods().len(), 2, "the Job replaced it at once");
        let job = |w: &World| get(w, "batch", "Job", "default", "batch").unwrap()["status"].clone();
        assert_eq!(job(&w)["active"], 1);
        w.advance(11_000);
        // The evicted pod's lifetime ended while it was terminating: just removed.
        assert!(get(&w, "", "Pod", "default", &first).is_none());
        assert_eq!(job(&w)["succeeded"], 0);
        w.advance(13_000);
        assert_eq!(job(&w)["succeeded"], 1, "only the replacement completes");
    }

    #[test]
    fn a_replayed_pod_is_replaced_when_evicted_a_jobs_rerunning_a_replica_sets_resuming() {
        use crate::Restart;
        for (restart, left_ms) in [(Restart::Rerun, 60_000), (Restart::Resume, 50_000)] {
            let (mut w, _) = one_node(29);
            let mut p = bare_pod("vm-1", None, Some(0));
            p["metadata"]["labels"] = json!({"app": "trace"});
            p["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job",
                "name": "trace", "uid": "u", "controller": true}]);
            w.add_replayed_pod(p, 60_000, restart).unwrap();
            w.advance(1_000);
            assert!(pods_of(&w, "trace")[0].1.is_some(), "bound");
            w.advance(10_000);
            w.evict("default", "vm-1", None).unwrap();
            let pods = pods_of(&w, "trace");
            assert_eq!(
                pods.len(),
                1,
                "{restart:?}: the grace is 0, only the replacement: {pods:?}"
            );
            let name = pods[0].0.clone();
            assert!(name.starts_with("vm-1-"), "{name}");
            let obj = get(&w, "", "Pod", "default", &name).unwrap();
            assert_eq!(obj["metadata"]["ownerReferences"][0]["kind"], "Job");
            assert_eq!(
                obj["metadata"]["annotations"]["simulate.cluster-autoscaler/replay-of"],
                "vm-1"
            );
            w.advance(1_000);
            let started = w.now();
            assert!(pods_of(&w, "trace")[0].1.is_some(), "the replacement runs");
            w.advance(left_ms - 1_000);
            assert_eq!(pods_of(&w, "trace").len(), 1, "{restart:?}: still running");
            w.advance(2_000);
            let done = get(&w, "", "Pod", "default", &name).unwrap();
            assert_eq!(
                done["status"]["phase"],
                "Succeeded",
                "{restart:?} after {} ms",
                w.now() - started
            );
            assert!(w.live_pods().is_empty(), "a finished pod is not replaced");
        }
    }

    #[test]
    fn samples_count_empty_nodes_and_those_never_used() {
        let (mut w, _) = one_node(33);
        w.sample_metrics();
        w.add_pod(bare_pod("p", None, Some(0)), Some(20_000))
            .unwrap();
        w.advance(5_000);
        w.sample_metrics();
        w.advance(30_000);
        w.sample_metrics();
        let m = w.take_metrics();
        // The samples taken here (the world also samples every 10 s).
        let last: Vec<(usize, usize)> = [61_000, 66_000, 96_000]
            .iter()
            .filter_map(|&t| m.samples.iter().rfind(|s| s.at_ms == t))
            .map(|s| (s.empty_per_group.values().sum(), s.empty_fresh))
            .collect();
        // Empty and never used; holding the pod; empty after it ended.
        assert_eq!(last, vec![(1, 1), (0, 0), (1, 0)]);
    }

    #[test]
    fn a_task_that_starts_over_loses_only_the_work_it_does_again() {
        use crate::Restart;
        use crate::time::SimTime;
        let (mut w, _) = one_node(31);
        let mut p = bare_pod("vm-1", None, Some(0));
        p["metadata"]["labels"] = json!({"app": "trace"});
        p["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job",
            "name": "trace", "uid": "u", "controller": true}]);
        w.add_replayed_pod(p, 60_000, Restart::Rerun).unwrap();
        let evict_after = |w: &mut World, ms: SimTime| {
            w.advance(1_000);
            let (name, node) = pods_of(w, "trace").remove(0);
            assert!(node.is_some(), "{name} bound");
            w.advance(ms);
            w.evict("default", &name, None).unwrap();
        };
        // The first run gets 10-11 s far; the second is evicted after 5-6 s, all of it work
        // done before; the third does the first run's 10-11 s again.
        evict_after(&mut w, 10_000);
        evict_after(&mut w, 5_000);
        w.advance(1_000);
        assert!(pods_of(&w, "trace")[0].1.is_some(), "the third run");
        let runs: Vec<(SimTime, SimTime)> = (w.take_metrics().lost_runs.iter())
            .filter(|r| r.to_ms > r.from_ms)
            .map(|r| (r.from_ms, r.to_ms))
            .collect();
        assert_eq!(runs.len(), 2, "{runs:?}");
        let (second, third) = (runs[0].1 - runs[0].0, runs[1].1 - runs[1].0);
        assert!((5_000..=6_000).contains(&second), "{runs:?}");
        assert!((10_000..=11_000).contains(&third), "{runs:?}");
        assert!(runs[1].0 >= runs[0].1, "{runs:?}");
    }
}

//! The Eviction API and the disruption controller: budgets' `status.disruptionsAllowed` is kept
//! current from the pods their selectors match, and an eviction is refused when a covering
//! budget allows no more disruptions.
//!
//! It decides whether an eviction may proceed, and owns only whether budgets need recomputing
//! (a budget was written, or pods changed since it last looked). Simplifications: the expected pod count is the
//! number of live pods the selector matches (not the controllers' scale); a pod is healthy when
//! bound and running; a budget with neither `minAvailable` nor `maxUnavailable` allows nothing.
//! It never deletes a pod a budget protects and never replaces an evicted pod (its
//! workload controller does).

use autoscaler_core::PodDisruptionBudget;
use autoscaler_core::model::pdb::IntOrPercent;
use k8s_openapi::api::policy::v1 as policy;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::queue::NsName;

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
        if pdb.matches(&p.view) {
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

    /// Evicts a pod as the Eviction API does: pending pods go at once; a running pod goes only
    /// if the one budget covering it (if any) allows a disruption. The pod is deleted; its
    /// controller recreates it.
    pub(crate) fn evict(
        &mut self,
        c: &mut Cluster,
        namespace: &str,
        name: &str,
    ) -> Result<(), EvictionError> {
        let id = (namespace.to_string(), name.to_string());
        let pod_key = format!("{namespace}/{name}");
        let Some(st) = c.pods.get(&id) else {
            return Err(EvictionError::NotFound(pod_key));
        };
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
        c.remove_pod(&id, None);
        self.refresh(c);
        Ok(())
    }
}

/// A budget's state as the disruption controller computes it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetStatus {
    /// `namespace/name`.
    pub pdb: String,
    /// Pods the selector matches that are bound and running.
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
            d.evict(&mut c, "default", "p").is_ok(),
            "a pending pod goes at once"
        );
        assert_eq!(status(&c)["expectedPods"], 0);
        assert!(matches!(
            d.evict(&mut c, "default", "p"),
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
        let err = w.evict(&ns, &name).unwrap_err();
        assert!(matches!(err, EvictionError::PdbViolation { ref pdb, .. } if pdb == "default/web"));
        assert!(
            w.live_pods().iter().any(|p| p.1 == name),
            "refused: pod stays"
        );

        w.apply(pdb("web", "web", 1)).unwrap();
        let status =
            get(&w, "policy", "PodDisruptionBudget", "default", "web").unwrap()["status"].clone();
        assert_eq!(status["disruptionsAllowed"], 1);
        w.evict(&ns, &name).unwrap();
        let pods = w.live_pods();
        assert_eq!(pods.len(), 2, "the ReplicaSet replaced it");
        assert!(!pods.iter().any(|p| p.1 == name));
        assert_eq!(pods.iter().filter(|p| p.2.is_none()).count(), 1);
        // A second eviction before the replacement runs is refused.
        let other = pods.iter().find(|p| p.2.is_some()).unwrap().1.clone();
        assert!(matches!(
            w.evict("default", &other),
            Err(EvictionError::PdbViolation { .. })
        ));
        w.advance(1_000);
        assert_eq!(w.pending_count(), 0);
        assert_eq!(
            w.evict("default", "nope"),
            Err(EvictionError::NotFound("default/nope".into()))
        );
    }
}

//! The actions a decision asks the shell to carry out, in order, and how each is done.
//!
//! Decisions (scale-up, scale-down) are plain data; this module turns them into the concrete
//! list the three shells (live cluster, `plan` report, simulated world) apply or print, so they
//! all perform the same steps. It decides nothing new and never performs an action itself.

use std::sync::Arc;

use crate::scale_down::ScaleDownPlan;
use crate::scale_down::drain::eviction_grace_sec;
use crate::scale_up::ScaleUpResult;
use autoscaler_model::NodeGroupId;
use autoscaler_model::Sym;
use autoscaler_model::{DELETION_CANDIDATE_TAINT, TO_BE_DELETED_TAINT};
use autoscaler_model::{Taint, TaintEffect};

/// A pod to evict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRef {
    /// Namespace.
    pub namespace: Sym,
    /// Name.
    pub name: Arc<str>,
}

/// A pod to evict and the grace period its eviction gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodEviction {
    /// The pod.
    pub pod: PodRef,
    /// Grace period, seconds: the pod's own `terminationGracePeriodSeconds` (30 s when unset),
    /// at most `--max-graceful-termination-sec` (with `--drain-priority-config`: at most its
    /// couple's seconds).
    pub grace_period_sec: u64,
    /// Drain stage (`--drain-priority-config`): a drain evicts stage 0's pods, waits until they
    /// are gone, then the next stage's; 0 for every pod without the flag.
    pub stage: u32,
}

/// One group's part of an [`Action::AtomicIncreaseSize`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Increase {
    /// Group.
    pub group: NodeGroupId,
    /// Nodes to add.
    pub delta: usize,
    /// Target size after the increase.
    pub new_target: usize,
}

/// One step for the shell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Grow a node group by `delta` nodes (to `new_target`).
    IncreaseSize {
        /// Group.
        group: NodeGroupId,
        /// Nodes to add.
        delta: usize,
        /// Target size after the increase.
        new_target: usize,
    },
    /// Grow several node groups for one best-effort-atomic ProvisioningRequest, all of them or
    /// none (upstream's `AtomicIncreaseSize`): the groups grow one after the other, and when one
    /// change fails the ones already made are set back.
    AtomicIncreaseSize {
        /// The request, `namespace/name`.
        request: String,
        /// The groups' increases, in the order they are made.
        increases: Vec<Increase>,
    },
    /// Lower a group's target by `delta` without removing any registered node (target-size
    /// correction, or the unfulfilled part of a timed-out scale-up): only instances that have no
    /// node yet go.
    DecreaseTargetSize {
        /// Group.
        group: NodeGroupId,
        /// How much to lower the target.
        delta: usize,
    },
    /// Remove broken instances of a group (failed, or never registered within the provision
    /// time), by instance id; the provider lowers the target by as many, or replaces them when
    /// the group is at its min size.
    DeleteInstances {
        /// Group.
        group: NodeGroupId,
        /// Instance ids as the provider reports them.
        instances: Vec<Arc<str>>,
        /// Why (`ScaleUpFailed`, `DeleteUnregistered`), for events.
        reason: &'static str,
    },
    /// Add a taint to a node (idempotent: replace a taint with the same key and effect).
    AddTaint {
        /// Node.
        node: Sym,
        /// The taint.
        taint: Taint,
    },
    /// Remove the taint with this key from a node.
    RemoveTaint {
        /// Node.
        node: Sym,
        /// Taint key.
        key: Sym,
    },
    /// Delete empty nodes of one group through the provider (after tainting them
    /// `ToBeDeletedByClusterAutoscaler`, which the preceding `AddTaint` actions do).
    DeleteEmptyNodes {
        /// Group.
        group: NodeGroupId,
        /// Nodes.
        nodes: Vec<Sym>,
    },
    /// Drain a node and delete it: evict every pod with the Eviction API (each with its own
    /// grace period; one at a time, waiting for the PodDisruptionBudget, when `sequential`), wait
    /// until they are gone, then delete the node through the provider. The node is already
    /// tainted by the preceding `AddTaint`. On any failure: remove that taint and report the
    /// failure (which starts `--scale-down-delay-after-failure`).
    DrainAndDelete {
        /// Group.
        group: NodeGroupId,
        /// Node.
        node: Sym,
        /// Pods to evict, each with its grace period.
        evict: Vec<PodEviction>,
        /// Evict one at a time, each waiting for its budget.
        sequential: bool,
    },
}

/// The hard taint of a node being deleted: `ToBeDeletedByClusterAutoscaler=<unix seconds>:NoSchedule`.
pub fn to_be_deleted_taint(now_ms: i64) -> Taint {
    Taint {
        key: Sym::new(TO_BE_DELETED_TAINT),
        value: Sym::new(&now_ms.div_euclid(1000).to_string()),
        effect: TaintEffect::NoSchedule,
    }
}

impl Action {
    /// The group increases this action asks for (`IncreaseSize`, or each group of an
    /// `AtomicIncreaseSize`), for checks that judge every growth alike.
    pub fn increases(&self) -> Vec<Increase> {
        match self {
            Action::IncreaseSize {
                group,
                delta,
                new_target,
            } => vec![Increase {
                group: group.clone(),
                delta: *delta,
                new_target: *new_target,
            }],
            Action::AtomicIncreaseSize { increases, .. } => increases.clone(),
            _ => Vec::new(),
        }
    }
}

/// The soft taint of an unneeded node: `DeletionCandidateOfClusterAutoscaler=<unix seconds>:PreferNoSchedule`.
pub fn deletion_candidate_taint(now_ms: i64) -> Taint {
    Taint {
        key: Sym::new(DELETION_CANDIDATE_TAINT),
        value: Sym::new(&now_ms.div_euclid(1000).to_string()),
        effect: TaintEffect::PreferNoSchedule,
    }
}

/// The actions of a scale-up: one increase per group.
pub fn scale_up_actions(result: &ScaleUpResult) -> Vec<Action> {
    result
        .increases
        .iter()
        .map(|i| Action::IncreaseSize {
            group: i.group.clone(),
            delta: i.delta,
            new_target: i.new_target,
        })
        .collect()
}

/// The action of a best-effort-atomic scale-up for `request`: all its increases in one
/// [`Action::AtomicIncreaseSize`] (none when nothing grows).
pub fn atomic_scale_up_action(request: &str, result: &ScaleUpResult) -> Option<Action> {
    (!result.increases.is_empty()).then(|| Action::AtomicIncreaseSize {
        request: request.to_string(),
        increases: result
            .increases
            .iter()
            .map(|i| Increase {
                group: i.group.clone(),
                delta: i.delta,
                new_target: i.new_target,
            })
            .collect(),
    })
}

/// The actions of a scale-down plan at `now_ms`: soft taints and their removal, then for each
/// deletion the hard taint, then empty nodes deleted in bulk per group, then drains.
pub fn scale_down_actions(plan: &ScaleDownPlan, now_ms: i64) -> Vec<Action> {
    let mut out = Vec::new();
    for &node in &plan.soft_untaint {
        out.push(Action::RemoveTaint {
            node,
            key: Sym::new(DELETION_CANDIDATE_TAINT),
        });
    }
    for &node in &plan.soft_taint {
        out.push(Action::AddTaint {
            node,
            taint: deletion_candidate_taint(now_ms),
        });
    }
    for d in &plan.deletions {
        out.push(Action::AddTaint {
            node: d.node,
            taint: to_be_deleted_taint(now_ms),
        });
    }
    let mut empty: Vec<(NodeGroupId, Vec<Sym>)> = Vec::new();
    for d in plan.deletions.iter().filter(|d| d.empty) {
        match empty.iter_mut().find(|(g, _)| *g == d.group) {
            Some((_, nodes)) => nodes.push(d.node),
            None => empty.push((d.group.clone(), vec![d.node])),
        }
    }
    // Empty nodes may still run DaemonSet pods to evict: those go through a drain.
    for d in plan
        .deletions
        .iter()
        .filter(|d| d.empty && !d.evict.is_empty())
    {
        if let Some((_, nodes)) = empty.iter_mut().find(|(g, _)| *g == d.group) {
            nodes.retain(|n| *n != d.node);
        }
    }
    for (group, nodes) in empty.into_iter().filter(|(_, n)| !n.is_empty()) {
        out.push(Action::DeleteEmptyNodes { group, nodes });
    }
    for d in plan
        .deletions
        .iter()
        .filter(|d| !d.empty || !d.evict.is_empty())
    {
        out.push(Action::DrainAndDelete {
            group: d.group.clone(),
            node: d.node,
            // A buffer's virtual pods are moved in the simulation only: nothing to evict.
            evict: d
                .evict
                .iter()
                .filter(|p| !crate::provisioning::buffer::is_buffer_pod(p))
                .map(|p| PodEviction {
                    pod: PodRef {
                        namespace: p.namespace,
                        name: p.name.as_arc().clone(),
                    },
                    grace_period_sec: eviction_grace_sec(p, d.grace_period_sec),
                    stage: 0,
                })
                .collect(),
            sequential: d.sequential_evictions,
        });
    }
    out
}

/// What undoes a failed deletion of `node`: its hard taint goes.
pub fn failed_deletion_actions(node: Sym) -> Vec<Action> {
    vec![Action::RemoveTaint {
        node,
        key: Sym::new(TO_BE_DELETED_TAINT),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale_down::NodeDeletion;
    use autoscaler_model::testing::{GI, PodBuilder};

    fn deletion(node: &str, group: &str, empty: bool, evict: usize) -> NodeDeletion {
        NodeDeletion {
            node: Sym::new(node),
            group_index: 0,
            group: NodeGroupId::from(group),
            empty,
            evict: (0..evict)
                .map(|i| PodBuilder::new(&format!("{node}-{i}"), 100, GI).arc())
                .collect(),
            destinations: Vec::new(),
            grace_period_sec: 600,
            sequential_evictions: false,
        }
    }

    #[test]
    fn deletions_are_tainted_then_deleted_in_bulk_or_drained() {
        let plan = ScaleDownPlan {
            deletions: vec![
                deletion("e1", "g1", true, 0),
                deletion("e2", "g1", true, 0),
                deletion("e3", "g2", true, 0),
                deletion("ds", "g2", true, 1),
                deletion("busy", "g1", false, 2),
            ],
            soft_taint: vec![Sym::new("later")],
            soft_untaint: vec![Sym::new("needed")],
            ..Default::default()
        };
        let actions = scale_down_actions(&plan, 1_700_000_000_500);
        assert_eq!(
            actions[0],
            Action::RemoveTaint {
                node: Sym::new("needed"),
                key: Sym::new(DELETION_CANDIDATE_TAINT)
            }
        );
        assert!(
            matches!(&actions[1], Action::AddTaint { taint, .. } if taint.effect == TaintEffect::PreferNoSchedule)
        );
        let hard: Vec<&Action> = actions.iter().filter(|a| matches!(a, Action::AddTaint { taint, .. } if taint.key.as_str() == TO_BE_DELETED_TAINT)).collect();
        assert_eq!(hard.len(), 5);
        assert!(
            matches!(hard[0], Action::AddTaint { taint, .. } if taint.value.as_str() == "1700000000" && taint.effect == TaintEffect::NoSchedule)
        );
        let bulk: Vec<&Action> = actions
            .iter()
            .filter(|a| matches!(a, Action::DeleteEmptyNodes { .. }))
            .collect();
        assert_eq!(
            bulk,
            [
                &Action::DeleteEmptyNodes {
                    group: NodeGroupId::from("g1"),
                    nodes: vec![Sym::new("e1"), Sym::new("e2")]
                },
                &Action::DeleteEmptyNodes {
                    group: NodeGroupId::from("g2"),
                    nodes: vec![Sym::new("e3")]
                },
            ]
        );
        let drains: Vec<(&str, usize)> = actions
            .iter()
            .filter_map(|a| match a {
                Action::DrainAndDelete { node, evict, .. } => Some((node.as_str(), evict.len())),
                _ => None,
            })
            .collect();
        assert_eq!(drains, [("ds", 1), ("busy", 2)]);
        // Every hard taint comes before the deletion of its node.
        let pos = |pred: &dyn Fn(&Action) -> bool| actions.iter().position(pred).unwrap();
        assert!(
            pos(
                &|a| matches!(a, Action::AddTaint { node, taint } if node.as_str() == "busy" && taint.key.as_str() == TO_BE_DELETED_TAINT)
            ) < pos(
                &|a| matches!(a, Action::DrainAndDelete { node, .. } if node.as_str() == "busy")
            )
        );
    }

    #[test]
    fn each_eviction_gets_its_pods_grace_capped_by_the_flag() {
        let mut d = deletion("busy", "g1", false, 0);
        d.grace_period_sec = 60;
        d.evict = [Some(10_000), None, Some(3_600_000)]
            .into_iter()
            .enumerate()
            .map(|(i, grace_ms)| {
                PodBuilder::new(&format!("p{i}"), 100, GI)
                    .with(|p| p.termination_grace_ms = grace_ms)
                    .arc()
            })
            .collect();
        let plan = ScaleDownPlan {
            deletions: vec![d],
            ..Default::default()
        };
        let actions = scale_down_actions(&plan, 0);
        let Some(Action::DrainAndDelete { evict, .. }) = actions.last() else {
            panic!("{actions:?}")
        };
        let graces: Vec<(&str, u64)> = evict
            .iter()
            .map(|e| (&*e.pod.name, e.grace_period_sec))
            .collect();
        assert_eq!(graces, [("p0", 10), ("p1", 30), ("p2", 60)]);
    }

    #[test]
    fn a_failed_deletion_removes_the_hard_taint() {
        assert_eq!(
            failed_deletion_actions(Sym::new("n")),
            vec![Action::RemoveTaint {
                node: Sym::new("n"),
                key: Sym::new(TO_BE_DELETED_TAINT)
            }]
        );
    }
}

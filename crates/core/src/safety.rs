//! The last check of a loop's actions before any shell carries them out: whatever the phases
//! before it decided, no action may lower a group's target below the instances that exist and
//! are not being deleted or below its min, remove an instance twice (one already on its way out,
//! or one named twice in a loop), or grow a group that is backed off or past its max.
//!
//! It decides only which actions are refused, and why; a refusal is a bug in a phase before it,
//! which the shells report and the simulator counts. It never adds or reorders an action.

use std::sync::Arc;

use rustc_hash::FxHashSet;

use crate::actions::Action;
use crate::cluster_state::ClusterStatus;
use autoscaler_model::{CloudProvider, InstanceState, NodeGroup};

/// An action the check refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The action.
    pub action: Action,
    /// Which invariant it would have broken.
    pub why: String,
}

fn live(group: &NodeGroup) -> usize {
    group
        .instances()
        .iter()
        .filter(|i| i.state != InstanceState::Deleting)
        .count()
}

/// Splits `actions` into those that keep the invariants and those refused.
pub fn enforce(
    actions: Vec<Action>,
    provider: &dyn CloudProvider,
    status: &ClusterStatus,
) -> (Vec<Action>, Vec<Refused>) {
    let groups = provider.node_groups();
    let find = |id: &autoscaler_model::NodeGroupId| groups.iter().find(|g| g.id() == id);
    let mut removed: FxHashSet<Arc<str>> = FxHashSet::default();
    let mut kept = Vec::with_capacity(actions.len());
    let mut refused = Vec::new();
    let grow = |group: &autoscaler_model::NodeGroupId, new_target: usize| {
        let backoff = status
            .groups
            .iter()
            .find(|s| s.id == *group)
            .and_then(|s| s.backoff.as_ref());
        match (find(group), backoff) {
            (_, Some(b)) => Some(format!("{group} is backed off ({})", b.reason.code)),
            (Some(g), None) if new_target > g.max_size() => {
                Some(format!("{new_target} is above the max {}", g.max_size()))
            }
            _ => None,
        }
    };
    for action in actions {
        let why = match &action {
            Action::IncreaseSize {
                group, new_target, ..
            } => grow(group, *new_target),
            // All or none: one group that must not grow refuses the whole scale-up.
            Action::AtomicIncreaseSize { increases, .. } => increases.iter().find_map(|i| {
                grow(&i.group, i.new_target).map(|why| format!("{}: {why}", i.group))
            }),
            Action::DecreaseTargetSize { group, delta } => find(group).and_then(|g| {
                let target = g.target_size().checked_sub(*delta);
                let floor = live(g).max(g.min_size());
                (target.is_none_or(|t| t < floor)).then(|| {
                    format!(
                        "target {} - {delta} is below the {} live instances or the min {}",
                        g.target_size(),
                        live(g),
                        g.min_size()
                    )
                })
            }),
            Action::DeleteInstances {
                group, instances, ..
            } => {
                let deleting = |id: &Arc<str>| {
                    find(group).is_some_and(|g| {
                        g.instances()
                            .iter()
                            .any(|i| i.id == *id && i.state == InstanceState::Deleting)
                    })
                };
                instances
                    .iter()
                    .find(|id| deleting(id) || removed.contains(*id))
                    .map(|id| format!("instance {id} is already being removed"))
            }
            _ => None,
        };
        match why {
            Some(why) => refused.push(Refused { action, why }),
            None => {
                if let Action::DeleteInstances { instances, .. } = &action {
                    removed.extend(instances.iter().cloned());
                }
                kept.push(action);
            }
        }
    }
    (kept, refused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_state::backoff::FailureReason;
    use crate::cluster_state::{BackoffStatus, GroupReadiness, GroupStatus};
    use autoscaler_model::{Instance, InstanceErrorClass, NodeGroupId, StaticProvider};

    fn provider(target: usize, states: &[InstanceState]) -> StaticProvider {
        let mut g = NodeGroup::new("ng", 1, 5, target);
        g = g.with_instances(
            states
                .iter()
                .enumerate()
                .map(|(i, s)| Instance {
                    id: Arc::from(format!("i{i}")),
                    state: *s,
                    error: None,
                })
                .collect(),
        );
        StaticProvider::new(vec![g])
    }

    fn status(backed_off: bool) -> ClusterStatus {
        ClusterStatus {
            healthy: true,
            groups: vec![GroupStatus {
                id: NodeGroupId::from("ng"),
                min_size: 1,
                max_size: 5,
                target_size: 3,
                readiness: GroupReadiness::default(),
                upcoming: 0,
                requests: Vec::new(),
                unhealthy: None,
                backoff: backed_off.then(|| BackoffStatus {
                    until_ms: 1,
                    failures: 1,
                    reason: FailureReason {
                        class: InstanceErrorClass::Other,
                        code: "timeout".into(),
                        message: String::new(),
                    },
                }),
            }],
            ..ClusterStatus::default()
        }
    }

    #[test]
    fn decreases_below_live_instances_or_min_are_refused() {
        use InstanceState::*;
        let p = provider(3, &[Running, Creating, Deleting]);
        let dec = |delta| Action::DecreaseTargetSize {
            group: "ng".into(),
            delta,
        };
        let (kept, refused) = enforce(vec![dec(1), dec(2)], &p, &status(false));
        assert_eq!(kept, vec![dec(1)], "3 - 1 keeps the two live instances");
        assert_eq!(refused.len(), 1);
        let p = provider(1, &[]);
        assert_eq!(
            enforce(vec![dec(1)], &p, &status(false)).1.len(),
            1,
            "min 1"
        );
    }

    #[test]
    fn growth_in_backoff_or_past_max_and_double_removals_are_refused() {
        use InstanceState::*;
        let p = provider(3, &[Running, Creating, Deleting]);
        let up = |to| Action::IncreaseSize {
            group: "ng".into(),
            delta: to - 3,
            new_target: to,
        };
        assert_eq!(enforce(vec![up(4)], &p, &status(false)).0, vec![up(4)]);
        assert_eq!(enforce(vec![up(4)], &p, &status(true)).1.len(), 1);
        assert_eq!(enforce(vec![up(6)], &p, &status(false)).1.len(), 1);
        let del = |id: &str| Action::DeleteInstances {
            group: "ng".into(),
            instances: vec![Arc::from(id)],
            reason: "DeleteUnregistered",
        };
        let (kept, refused) = enforce(vec![del("i1"), del("i1"), del("i2")], &p, &status(false));
        assert_eq!(kept, vec![del("i1")]);
        assert_eq!(refused.len(), 2, "named twice, and already deleting");
    }

    #[test]
    fn an_atomic_scale_up_with_one_group_past_its_max_is_refused_whole() {
        let mut a = NodeGroup::new("a", 0, 5, 3);
        a = a.with_instances(Vec::new());
        let b = NodeGroup::new("b", 0, 2, 1);
        let p = StaticProvider::new(vec![a, b]);
        let inc = |g: &str, delta, new_target| crate::actions::Increase {
            group: g.into(),
            delta,
            new_target,
        };
        let atomic = |second| Action::AtomicIncreaseSize {
            request: "batch/train".into(),
            increases: vec![inc("a", 2, 5), second],
        };
        let ok = atomic(inc("b", 1, 2));
        assert_eq!(
            enforce(vec![ok.clone()], &p, &ClusterStatus::default()).0,
            vec![ok]
        );
        let (kept, refused) = enforce(vec![atomic(inc("b", 2, 3))], &p, &ClusterStatus::default());
        assert!(kept.is_empty(), "{kept:?}");
        assert_eq!(refused.len(), 1);
        assert!(
            refused[0].why.starts_with("b: 3 is above the max 2"),
            "{}",
            refused[0].why
        );
    }
}

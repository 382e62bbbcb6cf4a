//! A best-effort-atomic scale-up carried out all or none (`Action::AtomicIncreaseSize`): the
//! groups grow one after the other, each through one replicas change with the version it was
//! decided from as precondition; when a change fails (a conflict left after the rebase, a 5xx,
//! a webhook's refusal), the changes already made for the same request are set back.
//!
//! Upstream's executor stops at the first failed group and leaves the groups grown before it
//! grown (its `AtomicIncreaseSize` is only atomic within one group). Here a revert follows:
//! each grown group's replicas go back to the count they had, written on the condition that
//! the group still has the count this scale-up wrote (a `409` reads the resource again; a count
//! someone else changed is never lowered). A revert that fails is reported
//! ([`Correction::RevertIncrease`], logged at error level by the shells) and not retried: the
//! grown target is then an ordinary scale-up in flight, which the cluster state follows as any
//! other (its nodes come and, unneeded, are scaled down; if they never come, the provision
//! timeout lowers the target). The failed group is backed off as any failed scale-up; the
//! request is decided again in a later loop.
//!
//! It decides nothing about what to grow and performs nothing: it turns the action into
//! effects, one at a time, and the replies into the next effect and reports.

use std::collections::VecDeque;

use autoscaler_clusterapi::{ClusterApiProvider, ObjectChange, ReplicasBase};
use autoscaler_core::Increase;
use autoscaler_model::NodeGroupId;

use crate::effect::{Correction, Effect, EffectKind, Purpose, Report, provider_error};
use crate::inflight::{Actuation, Waiting};
use crate::informer::ClusterLookup;

/// One group's increase of an atomic scale-up, with the changes that make it.
#[derive(Clone, Debug)]
pub(crate) struct Step {
    group: NodeGroupId,
    delta: usize,
    changes: Vec<ObjectChange>,
}

/// An atomic scale-up under way: the step whose reply is awaited, the ones done before it and
/// the ones still to send.
#[derive(Clone, Debug)]
pub(crate) struct AtomicRun {
    request: String,
    current: Step,
    done: Vec<Step>,
    todo: VecDeque<Step>,
}

impl Actuation {
    /// The first effect of an atomic scale-up: every group's changes are asked of the provider
    /// first, so a refusal (a max, an unknown group) sends nothing at all.
    pub(crate) fn start_atomic(
        &mut self,
        request: String,
        increases: Vec<Increase>,
        lookup: &mut dyn ClusterLookup,
    ) -> Vec<Effect> {
        let provider = lookup.provider();
        let mut steps = VecDeque::with_capacity(increases.len());
        for Increase { group, delta, .. } in increases {
            match provider.increase_size(group.as_str(), delta) {
                Ok(changes) => steps.push_back(Step {
                    group,
                    delta,
                    changes,
                }),
                Err(e) => {
                    self.report(Report::ScaleUpFailed {
                        group,
                        delta,
                        error: provider_error(&e),
                        by_provider: true,
                    });
                    return Vec::new();
                }
            }
        }
        let Some(current) = steps.pop_front() else {
            return Vec::new();
        };
        let run = AtomicRun {
            request,
            current,
            done: Vec::new(),
            todo: steps,
        };
        vec![self.send(run)]
    }

    /// The effect of `run`'s current step.
    fn send(&mut self, run: AtomicRun) -> Effect {
        let Step {
            group,
            delta,
            changes,
        } = run.current.clone();
        let purpose = Purpose::ScaleUp { group, delta };
        let kind = EffectKind::Changes { changes, purpose };
        self.effect(Waiting::Atomic(Box::new(run)), kind)
    }

    /// Feeds in the reply to `run`'s current step: done, the next step is sent; failed, every
    /// step done before is reverted (the steps not sent yet are dropped).
    pub(crate) fn atomic_replied(
        &mut self,
        mut run: AtomicRun,
        error: Option<autoscaler_core::ActionError>,
        lookup: &mut dyn ClusterLookup,
    ) -> Vec<Effect> {
        let Step { group, delta, .. } = run.current.clone();
        match error {
            None => {
                self.report(Report::ScaledUp { group, delta });
                let Some(next) = run.todo.pop_front() else {
                    return Vec::new();
                };
                let done = std::mem::replace(&mut run.current, next);
                run.done.push(done);
                vec![self.send(run)]
            }
            Some(error) => {
                self.report(Report::ScaleUpFailed {
                    group,
                    delta,
                    error,
                    by_provider: false,
                });
                let provider = lookup.provider();
                let mut out = Vec::new();
                // The last grown first: the reverse of the order they were made in.
                for step in run.done.into_iter().rev() {
                    let correction = Correction::RevertIncrease {
                        delta: step.delta,
                        request: run.request.clone(),
                    };
                    let changes = revert_changes(&step.changes, &provider);
                    let purpose = Purpose::Correction {
                        group: step.group.clone(),
                        correction: correction.clone(),
                    };
                    let w = Waiting::Correction {
                        group: step.group,
                        correction,
                    };
                    out.push(self.effect(w, EffectKind::Changes { changes, purpose }));
                }
                out
            }
        }
    }
}

/// The changes that set back what `increase` wrote: each replicas change written in reverse,
/// from the count it wrote to the count it found, on the condition that the resource still has
/// the count it wrote. The precondition's version is the one `provider` shows when it already
/// shows that count (the write came back through the watch); else the version the increase was
/// decided from, which the write moved: the writer then gets a conflict, reads the resource
/// again and writes only if the count is still the one written ([`ReplicasBase::rebase`]
/// refuses a decrease on any other count).
pub(crate) fn revert_changes(
    increase: &[ObjectChange],
    provider: &ClusterApiProvider,
) -> Vec<ObjectChange> {
    increase
        .iter()
        .filter_map(|c| match c {
            ObjectChange::SetReplicas {
                key,
                api_version,
                replicas,
                base,
            } => {
                let seen = provider.resources().iter().find(|r| r.key == *key);
                let resource_version = match seen {
                    Some(r) if r.replicas == *replicas => r.resource_version.clone(),
                    _ => base.resource_version.clone(),
                };
                Some(ObjectChange::SetReplicas {
                    key: key.clone(),
                    api_version: api_version.clone(),
                    replicas: base.replicas,
                    base: ReplicasBase {
                        resource_version,
                        replicas: *replicas,
                        min: base.min,
                        max: base.max,
                    },
                })
            }
            _ => None,
        })
        .collect()
}

impl AtomicRun {
    /// Whether any step of the run is of `group`.
    pub(crate) fn touches(&self, group: &str) -> bool {
        std::iter::once(&self.current)
            .chain(&self.done)
            .chain(&self.todo)
            .any(|s| s.group.as_str() == group)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::effect::Reply;
    use crate::inflight::ActuationOptions;
    use crate::informer::{Informer, InformerLookup};
    use autoscaler_clusterapi::ClusterApiConfig;
    use autoscaler_core::{Action, ActionError, ErrorClass, Outcome};
    use autoscaler_model::ObjectStore;

    const SNAPSHOT: &str = include_str!("../../cluster-autoscaler/examples/snapshot.yaml");
    const GENERAL: &str = "MachineDeployment/default/general";
    const GPU: &str = "MachineDeployment/default/gpu";

    /// The example snapshot (general: 2 replicas, max 5; gpu: 1, max 3), each
    /// MachineDeployment at resourceVersion 10.
    fn informer() -> Informer {
        let text = SNAPSHOT.replace(
            "    name: general\n    namespace: default\n",
            "    name: general\n    namespace: default\n    resourceVersion: \"10\"\n",
        );
        let text = text.replace(
            "    name: gpu\n    namespace: default\n",
            "    name: gpu\n    namespace: default\n    resourceVersion: \"10\"\n",
        );
        let mut store = ObjectStore::new();
        store.load_yaml(&text).expect("example snapshot loads");
        Informer::from_store(&store)
    }

    fn atomic(increases: &[(&str, usize, usize)]) -> Action {
        Action::AtomicIncreaseSize {
            request: "batch/train".into(),
            increases: increases
                .iter()
                .map(|&(g, delta, new_target)| Increase {
                    group: NodeGroupId::from(g),
                    delta,
                    new_target,
                })
                .collect(),
        }
    }

    /// `(key name, replicas written, precondition version, replicas the precondition expects)`.
    type Set = (String, i64, Option<String>, i64);

    /// Each replicas change of `effect`, and its purpose.
    fn replicas(effect: &Effect) -> (Vec<Set>, Purpose) {
        let EffectKind::Changes { changes, purpose } = effect.kind() else {
            panic!("not a change: {effect:?}");
        };
        let sets = changes
            .iter()
            .filter_map(|c| match c {
                ObjectChange::SetReplicas {
                    key,
                    replicas,
                    base,
                    ..
                } => Some((
                    key.name.clone(),
                    *replicas,
                    base.resource_version.clone(),
                    base.replicas,
                )),
                _ => None,
            })
            .collect();
        (sets, purpose.clone())
    }

    fn failed() -> Reply {
        Reply::Failed(ActionError::new(
            ErrorClass::Unavailable,
            "503: the scale subresource is unavailable",
        ))
    }

    #[test]
    fn a_failure_on_the_second_group_sets_the_first_back_with_a_precondition() {
        let config = ClusterApiConfig::default();
        let mut inf = informer();
        let mut a = Actuation::new(ActuationOptions::default());
        let mut lookup = InformerLookup::new(&mut inf, &config);

        // One group at a time: general's change first, nothing of gpu's yet.
        let first = a.start(atomic(&[(GENERAL, 2, 4), (GPU, 1, 2)]), &mut lookup, 0);
        assert_eq!(first.len(), 1);
        let (sets, _) = replicas(&first[0]);
        assert_eq!(sets, [("general".into(), 4, Some("10".into()), 2)]);

        // general grew; then gpu's change.
        let second = a.reply(first[0].ticket(), Reply::Done, &mut lookup, 0);
        assert_eq!(second.len(), 1);
        let (sets, _) = replicas(&second[0]);
        assert_eq!(sets, [("gpu".into(), 2, Some("10".into()), 1)]);

        // gpu's change fails: general is set back from 4 to 2, on the condition that it still
        // has the 4 this scale-up wrote (its new version is not seen yet: the version it was
        // decided from, which the write moved, makes the writer read it again).
        let revert = a.reply(second[0].ticket(), failed(), &mut lookup, 0);
        assert_eq!(revert.len(), 1, "{revert:?}");
        let (sets, purpose) = replicas(&revert[0]);
        assert_eq!(sets, [("general".into(), 2, Some("10".into()), 4)]);
        let correction = Correction::RevertIncrease {
            delta: 2,
            request: "batch/train".into(),
        };
        assert_eq!(
            purpose,
            Purpose::Correction {
                group: NodeGroupId::from(GENERAL),
                correction: correction.clone(),
            }
        );
        assert!(
            a.reply(revert[0].ticket(), Reply::Done, &mut lookup, 0)
                .is_empty()
        );

        let reports = a.take_reports();
        assert_eq!(reports.len(), 3, "{reports:?}");
        assert_eq!(
            reports[0],
            Report::ScaledUp {
                group: NodeGroupId::from(GENERAL),
                delta: 2
            }
        );
        // The failed group is backed off, as any failed scale-up; the reverted one is not.
        assert!(matches!(
            reports[1].outcomes().as_slice(),
            [Outcome::ScaleUpFailed { group, .. }] if group.as_str() == GPU
        ));
        assert_eq!(
            reports[2],
            Report::Corrected {
                group: NodeGroupId::from(GENERAL),
                correction,
            }
        );
        assert!(reports[2].outcomes().is_empty());
    }

    #[test]
    fn a_revert_uses_the_version_that_shows_the_written_count() {
        let config = ClusterApiConfig::default();
        let mut inf = informer();
        let mut a = Actuation::new(ActuationOptions::default());
        let first = {
            let mut lookup = InformerLookup::new(&mut inf, &config);
            a.start(atomic(&[(GENERAL, 2, 4), (GPU, 1, 2)]), &mut lookup, 0)
        };
        let second = {
            let mut lookup = InformerLookup::new(&mut inf, &config);
            a.reply(first[0].ticket(), Reply::Done, &mut lookup, 0)
        };
        // The watch brings general's write in: 4 replicas at version 11.
        let key = autoscaler_model::ObjectKey {
            group: "cluster.x-k8s.io".into(),
            kind: "MachineDeployment".into(),
            namespace: "default".into(),
            name: "general".into(),
        };
        let mut md = (**inf.store().get(&key).expect("general")).clone();
        md["spec"]["replicas"] = 4.into();
        md["metadata"]["resourceVersion"] = "11".into();
        inf.apply(key, Some(Arc::new(md)));
        let mut lookup = InformerLookup::new(&mut inf, &config);
        let revert = a.reply(second[0].ticket(), failed(), &mut lookup, 0);
        let (sets, _) = replicas(&revert[0]);
        assert_eq!(sets, [("general".into(), 2, Some("11".into()), 4)]);
    }

    #[test]
    fn a_failure_on_the_first_group_sends_nothing_more() {
        let config = ClusterApiConfig::default();
        let mut inf = informer();
        let mut a = Actuation::new(ActuationOptions::default());
        let mut lookup = InformerLookup::new(&mut inf, &config);
        let first = a.start(atomic(&[(GENERAL, 2, 4), (GPU, 1, 2)]), &mut lookup, 0);
        assert!(
            a.reply(first[0].ticket(), failed(), &mut lookup, 0)
                .is_empty()
        );
        let reports = a.take_reports();
        assert!(
            matches!(reports.as_slice(), [Report::ScaleUpFailed { group, by_provider: false, .. }] if group.as_str() == GENERAL),
            "{reports:?}"
        );
    }

    #[test]
    fn a_provider_refusal_of_any_group_sends_nothing_at_all() {
        let config = ClusterApiConfig::default();
        let mut inf = informer();
        let mut a = Actuation::new(ActuationOptions::default());
        let mut lookup = InformerLookup::new(&mut inf, &config);
        // gpu's max is 3: +5 is refused before general's change is sent.
        let effects = a.start(atomic(&[(GENERAL, 2, 4), (GPU, 5, 6)]), &mut lookup, 0);
        assert!(effects.is_empty(), "{effects:?}");
        let reports = a.take_reports();
        assert!(
            matches!(reports.as_slice(), [Report::ScaleUpFailed { group, by_provider: true, .. }] if group.as_str() == GPU),
            "{reports:?}"
        );
    }

    #[test]
    fn all_groups_grow_when_every_change_is_done() {
        let config = ClusterApiConfig::default();
        let mut inf = informer();
        let mut a = Actuation::new(ActuationOptions::default());
        let mut lookup = InformerLookup::new(&mut inf, &config);
        let first = a.start(atomic(&[(GENERAL, 2, 4), (GPU, 1, 2)]), &mut lookup, 0);
        let second = a.reply(first[0].ticket(), Reply::Done, &mut lookup, 0);
        assert!(
            a.reply(second[0].ticket(), Reply::Done, &mut lookup, 0)
                .is_empty()
        );
        let grown: Vec<(String, usize)> = a
            .take_reports()
            .iter()
            .map(|r| match r {
                Report::ScaledUp { group, delta } => (group.to_string(), *delta),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(grown, [(GENERAL.into(), 2), (GPU.into(), 1)]);
    }
}

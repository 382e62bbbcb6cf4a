//! The loop's consolidation step (ours, off by default): after scale-up and scale-down, on the
//! same fork of the snapshot, asks [`plan_consolidation`] for one command and turns it into the
//! loop's actions and events.
//!
//! It runs only when the loop is otherwise quiet: no scale-up decided, no scale-down deletion
//! planned, no node on its way (except the replacement it waits for). Its deletions join the
//! scale-down plan, so the shells taint, drain and delete them as any other, and the scale-down
//! state records their outcomes. A replacement first grows its group (recorded as a scale-up, so
//! the cluster state reverts it if it never comes); its nodes are drained only once it is Ready.
//! A command's nodes beyond the free drain slots (this loop's scale-down deletions counted) wait
//! their turn in the consolidation state and are drained in later loops.
//! It never decides anything itself.

use crate::actions::Action;
use crate::cluster_state::{ClusterStatus, Event};
use crate::scale_down::consolidation::{
    CONSOLIDATION_EVENT, CommandKind, ConsolidationInput, ConsolidationPlan, ReplacementShape,
    plan_consolidation, record_deletions,
};
use crate::scale_down::disruption_budget::GroupRules;
use crate::scale_down::{InFlight, ScaleDownPlan};
use crate::scale_up::estimator::Budget;
use autoscaler_model::ClusterTotals;
use autoscaler_model::ControllerLookup;
use autoscaler_model::DisruptionBudgets;
use autoscaler_model::Node;

use super::{Autoscaler, ClusterView, GroupMembers, HideGroups, ScaleUpDecision, group_templates};

impl Autoscaler {
    /// The loop's consolidation on the open fork of the kept snapshot: its deletions are added
    /// to `down`, a replacement's scale-up to `actions`, and an event explains each command.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn consolidate(
        &mut self,
        view: &ClusterView<'_>,
        controllers: &dyn ControllerLookup,
        mut in_flight: InFlight,
        status: &ClusterStatus,
        up: &ScaleUpDecision,
        down: &mut ScaleDownPlan,
        now_ms: i64,
        budget: &mut dyn Budget,
        actions: &mut Vec<Action>,
        events: &mut Vec<Event>,
    ) -> ConsolidationPlan {
        // A replacement that has not come within the provision time is given up, as the cluster
        // state gives up (and reverts) the scale-up that asked for it.
        let mut opts = self.options.consolidation.clone();
        opts.replacement_timeout = self.options.cluster_state.max_node_provision_time;
        let hidden: Vec<bool> = status
            .groups
            .iter()
            .map(|g| g.unhealthy.is_some())
            .collect();
        // The nodes scale-down leaves alone are left alone here too (see `decide_scale_down`).
        let cs = &self.options.cluster_state;
        let startup_ms = crate::cluster_state::backoff::ms(cs.max_node_startup_time);
        let not_started = |n: &Node| {
            !cs.taints.is_started_ready(n.is_ready(), &n.taints)
                && n.creation_ms
                    .is_some_and(|c| now_ms < c.saturating_add(startup_ms))
        };
        let taints = &self.options.scale_up.template.taints;
        let provider = HideGroups {
            inner: view.provider,
            hidden: &hidden,
            not_started: &not_started,
        };
        let upcoming: usize = status.groups.iter().map(|g| g.upcoming).sum();
        let waiting =
            self.consolidation.pending.is_some() || self.consolidation.waiting_turn.is_some();
        // Anything else under way: keep the timers only (the pending replacement is upcoming).
        let hold = !up.result.increases.is_empty()
            || !down.deletions.is_empty()
            || (upcoming > 0 && !waiting);
        let replace = GroupRules::any_replace(view.provider, opts.mode);
        let shapes: Vec<ReplacementShape> = if replace && !hold {
            let groups = view.provider.node_groups();
            let members = GroupMembers::of(view, groups.len(), now_ms, taints);
            let snapshot = &self.cache.snapshot;
            group_templates(snapshot, view, &members, &self.options.scale_up.template)
                .into_iter()
                .enumerate()
                // A backed-off or unhealthy group cannot grow: the safety check would refuse it.
                .filter(|(g, _)| {
                    status
                        .groups
                        .get(*g)
                        .is_some_and(|s| s.blocked_reason().is_none())
                })
                .filter_map(|(g, t)| {
                    t.ok().map(|t| ReplacementShape {
                        group: g,
                        template: t.template,
                    })
                })
                .collect()
        } else {
            Vec::new()
        };
        // This loop's scale-down deletions take their slots too: a node waiting its turn is
        // drained only within what they leave of `--max-drain-parallelism`; one that scale-down
        // deletes leaves the command (never drained twice).
        let deleting: Vec<_> = down.deletions.iter().map(|d| d.node).collect();
        self.consolidation.forget(&deleting);
        for d in &down.deletions {
            if d.empty {
                in_flight.empty += 1;
            } else {
                in_flight.drains += 1;
            }
            if in_flight.per_group.len() <= d.group_index {
                in_flight.per_group.resize(d.group_index + 1, 0);
            }
            in_flight.per_group[d.group_index] += 1;
        }
        let sd = &self.options.scale_down;
        let input = ConsolidationInput {
            provider: &provider,
            budgets: DisruptionBudgets::new(view.pdbs.to_vec()),
            controllers,
            drain: &sd.drain,
            limits: &self.options.scale_up.limits,
            totals: ClusterTotals::from_nodes_and_devices(
                view.nodes.iter().map(|n| &**n),
                view.storage.dra(),
            ),
            in_flight,
            max_drain_parallelism: sd.max_drain_parallelism,
            max_scale_down_parallelism: sd.max_scale_down_parallelism,
            max_graceful_termination_sec: sd.max_graceful_termination_sec,
            shapes: &shapes,
            hold,
            last_scale_up_ms: self.scale_down.last_scale_up_ms,
        };
        let plan = plan_consolidation(
            &mut self.cache.snapshot,
            &mut self.consolidation,
            input,
            &opts,
            now_ms,
            budget,
        );
        let max = self.options.scale_down.max_bulk_soft_taint_count;
        crate::scale_down::soft_taint::keep(&self.cache.snapshot, &plan.attrition, max, down);
        if let Some(why) = &plan.gave_up {
            events.push(Event {
                reason: CONSOLIDATION_EVENT,
                object: String::from("cluster"),
                message: format!("Consolidation: {why}"),
                warning: true,
            });
        }
        let Some(cmd) = &plan.command else {
            return plan;
        };
        events.push(Event {
            reason: CONSOLIDATION_EVENT,
            object: String::from("cluster"),
            message: format!("Consolidation: {}", cmd.explanation),
            warning: false,
        });
        match &cmd.kind {
            CommandKind::Replace { group_index, group } => {
                let target = view.provider.node_groups()[*group_index].target_size();
                actions.push(Action::IncreaseSize {
                    group: group.clone(),
                    delta: 1,
                    new_target: target + 1,
                });
                self.cluster_state.record_scale_up(group, 1, now_ms);
            }
            CommandKind::Delete | CommandKind::ReplacementReady | CommandKind::Turn => {
                record_deletions(&mut self.scale_down, &cmd.deletions);
                down.deletions.extend(cmd.deletions.iter().cloned());
            }
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use crate::scale_down::consolidation::{ConsolidationMode, ConsolidationOptions};
    use crate::{Action, AutoscalerOptions, InFlight, LoopInput, LoopOutcome, Node, Pod};
    use autoscaler_model::Storage;
    use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};
    use autoscaler_model::{Instance, InstanceState, NodeGroup, StaticProvider};

    use super::*;

    /// Four nodes of 1000m, each 55% full with two pods of 275m: above upstream's threshold,
    /// so upstream's scale-down keeps them all, though one node's pods fit on the others.
    fn cluster() -> (Vec<Arc<Node>>, Vec<Arc<Pod>>, StaticProvider) {
        let mut group = NodeGroup::new("ng", 0, 10, 4);
        let mut nodes = Vec::new();
        let mut pods = Vec::new();
        for n in ["n1", "n2", "n3", "n4"] {
            let id = format!("test:///{n}");
            nodes.push(
                NodeBuilder::new(n, 1000, 16 * GI)
                    .with_provider_id(&id)
                    .arc(),
            );
            group.push_instance(Instance {
                id: Arc::from(id.as_str()),
                state: InstanceState::Running,
                error: None,
            });
            for i in 0..2 {
                pods.push(
                    PodBuilder::new(&format!("{n}-p{i}"), 275, GI)
                        .owner("ReplicaSet", "rs")
                        .node_name(n)
                        .arc(),
                );
            }
        }
        (nodes, pods, StaticProvider::new(vec![group]))
    }

    fn run(a: &mut Autoscaler, now_ms: i64) -> LoopOutcome {
        let (nodes, pods, provider) = cluster();
        let view = ClusterView {
            nodes: &nodes,
            pods: &pods,
            daemonsets: &[],
            namespaces: &[],
            provider: &provider,
            pdbs: &[],
            storage: Storage::none(),
        };
        a.run_once(LoopInput::new(&view, now_ms))
    }

    fn autoscaler(mode: ConsolidationMode) -> Autoscaler {
        Autoscaler::new(AutoscalerOptions {
            consolidation: ConsolidationOptions {
                mode,
                ..ConsolidationOptions::default()
            },
            ..AutoscalerOptions::default()
        })
    }

    fn drained(out: &LoopOutcome) -> Vec<String> {
        (out.actions.iter())
            .filter_map(|a| match a {
                Action::DrainAndDelete { node, .. } => Some(node.to_string()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_loop_consolidates_nodes_above_the_threshold_after_consolidate_after() {
        let t0 = 1_000_000_000;
        let later = t0 + 20 * 60_000;
        let mut off = autoscaler(ConsolidationMode::Off);
        assert!(drained(&run(&mut off, t0)).is_empty());
        assert!(
            drained(&run(&mut off, later)).is_empty(),
            "upstream's scale-down keeps nodes at 55%"
        );
        let mut on = autoscaler(ConsolidationMode::Delete);
        let first = run(&mut on, t0);
        assert!(drained(&first).is_empty(), "not quiet for a minute yet");
        assert!(first.consolidation.command.is_none());
        assert!(
            drained(&run(&mut on, t0 + 59_000)).is_empty(),
            "59s of quiet is not enough"
        );
        let out = run(&mut on, t0 + 60_000);
        let cmd = out.consolidation.command.as_ref().expect("a command");
        assert_eq!(drained(&out), ["n1"], "{}", cmd.explanation);
        assert!(out.actions.iter().any(|a| matches!(
            a,
            Action::AddTaint { node, .. } if node.as_str() == "n1"
        )));
        let ev = (out.events.iter())
            .find(|e| e.reason == CONSOLIDATION_EVENT)
            .expect("an event explains it");
        assert!(
            ev.message
                .starts_with("Consolidation: single-node consolidation of 1 node(s) [n1]"),
            "{}",
            ev.message
        );
        assert_eq!(out.scale_down.deletions.len(), 1);
    }

    #[test]
    fn consolidation_waits_while_a_deletion_is_in_flight() {
        let t0 = 1_000_000_000;
        let mut a = Autoscaler::new(AutoscalerOptions {
            consolidation: ConsolidationOptions {
                mode: ConsolidationMode::Delete,
                consolidate_after: Duration::ZERO,
                ..ConsolidationOptions::default()
            },
            ..AutoscalerOptions::default()
        });
        let (nodes, pods, provider) = cluster();
        let view = ClusterView {
            nodes: &nodes,
            pods: &pods,
            daemonsets: &[],
            namespaces: &[],
            provider: &provider,
            pdbs: &[],
            storage: Storage::none(),
        };
        let busy = InFlight {
            per_group: vec![1],
            empty: 0,
            drains: 1,
        };
        let out = a.run_once(LoopInput::new(&view, t0).in_flight(busy));
        assert!(
            drained(&out).is_empty(),
            "--max-drain-parallelism=1 is used up"
        );
        let out = a.run_once(LoopInput::new(&view, t0));
        assert_eq!(drained(&out), ["n1"]);
    }
}

//! Node lifetime (ours, Karpenter's `expireAfter`): a node of a group annotated with a maximum
//! age is replaced once it is that old.
//!
//! One pass proposes at most one expiry, before consolidation's own search: the oldest expired
//! node whose pods may all be evicted (the drain rules, `safe-to-evict`, the
//! PodDisruptionBudgets) and whose group's disruption budget has room. If its pods fit on the
//! other nodes and its group stays above its min size, it is deleted; otherwise a node of its
//! own group is added first (a replacement, followed as consolidation's are: the old node is
//! drained once the new one is Ready and its pods still fit). Expiry does not wait for
//! `--consolidate-after` and does not depend on the group's consolidation mode, but it keeps to
//! the same budgets, `--max-drain-parallelism` and the group's max size. It only decides; it
//! never reads a clock and leaves the snapshot as found.

use std::sync::Arc;

use super::consolidation::{
    CommandKind, ConsolidationCommand, ConsolidationInput, ReplacementShape,
};
use super::disruption_budget::GroupRules;
use super::drain::drain_node;
use super::removal::{Hints, try_remove};
use super::{NodeDeletion, ms};
use crate::scheduling::snapshot::{ClusterSnapshot, NodeId};
use autoscaler_model::{Pod, Sym, TO_BE_DELETED_TAINT};

/// An expired node that may go.
struct Expired {
    id: NodeId,
    name: Sym,
    group: usize,
    age_ms: i64,
    to_move: Vec<Arc<Pod>>,
    evict: Vec<Arc<Pod>>,
}

/// The expiry command of this pass, if any (see the module doc). `pods_left` bounds the pod
/// placements simulated and is lowered by those done.
pub(crate) fn expiry(
    snapshot: &mut ClusterSnapshot,
    input: &ConsolidationInput<'_>,
    rules: &GroupRules,
    now_ms: i64,
    pods_left: &mut usize,
) -> Option<ConsolidationCommand> {
    let groups = input.provider.node_groups();
    if groups
        .iter()
        .all(|g| g.options().disruption().expire_after.is_none())
    {
        return None;
    }
    let f = &input.in_flight;
    let drains_left = input.max_drain_parallelism.saturating_sub(f.drains);
    let all_left = input
        .max_scale_down_parallelism
        .saturating_sub(f.empty + f.drains);
    let mut expired = expired(snapshot, input, rules, now_ms);
    // Oldest first; ties by name, for a stable order.
    expired.sort_by(|a, b| {
        b.age_ms
            .cmp(&a.age_ms)
            .then_with(|| a.name.as_str().cmp(b.name.as_str()))
    });
    for e in expired {
        if all_left == 0 || (!e.to_move.is_empty() && drains_left == 0) {
            return None;
        }
        if e.to_move.len() > *pods_left {
            return None;
        }
        *pods_left -= e.to_move.len();
        let group = &groups[e.group];
        let in_flight = f.per_group.get(e.group).copied().unwrap_or(0);
        if group.target_size().saturating_sub(in_flight) > group.min_size()
            && let Some(dest) = snapshot.forked(|s| place(s, &e, None))
        {
            return Some(command(input, e, dest, CommandKind::Delete));
        }
        // The new node comes first: the group's max size and the cluster-wide maximums
        // (`--max-nodes-total`, `--cores-total`...) are counted before the old node goes.
        let shape = input.shapes.iter().find(|s| s.group == e.group);
        let may_grow = |sh: &&ReplacementShape| {
            group.target_size() < group.max_size()
                && !group.options().zero_or_max_scaling()
                && (input.limits)
                    .max_new_nodes(&input.totals, &sh.template.node, 1)
                    .0
                    >= 1
        };
        if let Some(shape) = shape.filter(may_grow) {
            if e.to_move.len() > *pods_left {
                return None;
            }
            *pods_left -= e.to_move.len();
            if let Some(dest) = snapshot.forked(|s| place(s, &e, Some(shape))) {
                let kind = CommandKind::Replace {
                    group_index: e.group,
                    group: group.id().clone(),
                };
                return Some(command(input, e, dest, kind));
            }
        }
    }
    None
}

/// Every node past its group's maximum age that may be drained now.
fn expired(
    snapshot: &ClusterSnapshot,
    input: &ConsolidationInput<'_>,
    rules: &GroupRules,
    now_ms: i64,
) -> Vec<Expired> {
    let to_be_deleted = Sym::new(TO_BE_DELETED_TAINT);
    let ctx = input.drain_context(now_ms);
    let mut out = Vec::new();
    for (id, info, g, group) in input.grouped_nodes(snapshot) {
        let node = &info.node;
        let Some(max_age) = group.options().disruption().expire_after else {
            continue;
        };
        let Some(age_ms) = node.creation_ms.map(|c| now_ms.saturating_sub(c)) else {
            continue;
        };
        if age_ms < ms(max_age)
            || !node.is_ready()
            || node.deletion_ms.is_some()
            || node.taints.iter().any(|t| t.key == to_be_deleted)
            || group.options().zero_or_max_scaling()
            || group.rolling_out()
            || !rules.has_room(g, 0)
        {
            continue;
        }
        let Ok(drained) = drain_node(&info.pods, &ctx) else {
            continue;
        };
        let evict: Vec<Arc<Pod>> = (drained.to_move.iter())
            .chain(&drained.to_evict_only)
            .cloned()
            .collect();
        let refs: Vec<&Pod> = evict.iter().map(|p| &**p).collect();
        if input.budgets.can_evict(&refs).is_err() {
            continue;
        }
        out.push(Expired {
            id,
            name: node.name,
            group: g,
            age_ms,
            to_move: drained.to_move,
            evict,
        });
    }
    out
}

/// Places `e`'s pods on the other nodes (and a new node of `shape`, tried first), all or
/// nothing; the caller reverts the fork.
fn place(
    s: &mut ClusterSnapshot,
    e: &Expired,
    shape: Option<&ReplacementShape>,
) -> Option<Vec<(Arc<Pod>, Sym)>> {
    let mut order: Vec<NodeId> = Vec::new();
    if let Some(sh) = shape {
        let mut node = sh.template.node.clone();
        node.name = Sym::new(&format!("expiry-replacement-{}", sh.group));
        let id = s.add_node(Arc::new(node)).ok()?;
        for p in &sh.template.daemonset_pods {
            let _ = s.add_pod(p.clone(), id);
        }
        order.push(id);
    }
    let first = order.first().copied();
    order.extend(s.node_ids().filter(|&id| id != e.id && Some(id) != first));
    let mut start = 0;
    let moves = try_remove(
        s,
        e.id,
        &e.to_move,
        (&order, &mut start),
        &mut Hints::default(),
    )
    .ok()?;
    Some(
        moves
            .into_iter()
            .filter_map(|(p, d)| s.node(d).map(|i| (p, i.node.name)))
            .collect(),
    )
}

fn command(
    input: &ConsolidationInput<'_>,
    e: Expired,
    destinations: Vec<(Arc<Pod>, Sym)>,
    kind: CommandKind,
) -> ConsolidationCommand {
    let group = &input.provider.node_groups()[e.group];
    let how = match &kind {
        CommandKind::Replace { group, .. } => format!(", replaced by one node of {group}"),
        _ => String::new(),
    };
    let explanation = format!(
        "expiry of node {} (age {}s, the group's maximum {}s){how}: {} pod(s) to move",
        e.name,
        e.age_ms / 1000,
        group
            .options()
            .disruption()
            .expire_after
            .map_or(0, |d| d.as_secs()),
        e.to_move.len()
    );
    ConsolidationCommand {
        kind,
        pods_disrupted: e.to_move.len(),
        saved_per_hour: 0.0,
        explanation,
        deletions: vec![NodeDeletion {
            node: e.name,
            group_index: e.group,
            group: group.id().clone(),
            empty: e.to_move.is_empty(),
            evict: e.evict,
            destinations,
            grace_period_sec: input.max_graceful_termination_sec,
            sequential_evictions: false,
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale_down::InFlight;
    use crate::scale_down::consolidation::{
        ConsolidationMode, ConsolidationOptions, ConsolidationState, plan_consolidation,
    };
    use crate::scale_down::drain::DrainOptions;
    use crate::scale_up::estimator::NodeTemplate;
    use crate::scheduling::budget::Unlimited;
    use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};
    use autoscaler_model::{ClusterTotals, DisruptionBudgets, NoControllerLookup};
    use autoscaler_model::{GroupDisruption, Instance, InstanceState, NodeGroup};
    use autoscaler_model::{ResourceLimits, StaticProvider, parse_budgets};
    use std::time::Duration;

    const HOUR: i64 = 3_600_000;

    /// One group (min `min`) expiring nodes after 1h: `old` made at 0, `young` at 90m, each
    /// with one 300m pod on 1000m; its own shape for replacements. The command at 2h, with the
    /// group's `budgets`, with consolidation off.
    fn at_two_hours(min: usize, budgets: &str) -> Option<ConsolidationCommand> {
        at_two_hours_with(min, budgets, ResourceLimits::default())
    }

    /// [`at_two_hours`] with no budget and `--max-nodes-total` = `max_nodes`.
    fn at_two_hours_limited(min: usize, max_nodes: usize) -> Option<ConsolidationCommand> {
        let limits = ResourceLimits {
            max_nodes_total: max_nodes,
            ..ResourceLimits::default()
        };
        at_two_hours_with(min, "[]", limits)
    }

    fn at_two_hours_with(
        min: usize,
        budgets: &str,
        limits: ResourceLimits,
    ) -> Option<ConsolidationCommand> {
        let mut ng = NodeGroup::new("g", min, 10, 2);
        ng.set_options(ng.options().clone().with_disruption(GroupDisruption {
            expire_after: Some(Duration::from_secs(3600)),
            budgets: parse_budgets(budgets).unwrap(),
            ..GroupDisruption::default()
        }));
        let mut snapshot = ClusterSnapshot::new();
        let mut all = Vec::new();
        for (name, created) in [("old", 0), ("young", 90 * 60_000)] {
            let mut node = NodeBuilder::new(name, 1000, 4 * GI)
                .with_provider_id(&format!("test:///{name}"))
                .build();
            node.creation_ms = Some(created);
            let node = Arc::new(node);
            ng.push_instance(Instance {
                id: node.provider_id.clone().unwrap(),
                state: InstanceState::Running,
                error: None,
            });
            let id = snapshot.add_node(node.clone()).unwrap();
            let pod = PodBuilder::new(&format!("{name}-p"), 300, GI)
                .owner("ReplicaSet", "rs")
                .node_name(name)
                .arc();
            snapshot.add_pod(pod, id).unwrap();
            all.push(node);
        }
        let provider = StaticProvider::new(vec![ng]);
        let shapes = [ReplacementShape {
            group: 0,
            template: NodeTemplate {
                node: NodeBuilder::new("g-template", 1000, 4 * GI).build(),
                daemonset_pods: Vec::new(),
            },
        }];
        let drain = DrainOptions::default();
        let input = ConsolidationInput {
            provider: &provider,
            budgets: DisruptionBudgets::new(Vec::new()),
            controllers: &NoControllerLookup,
            drain: &drain,
            limits: &limits,
            totals: ClusterTotals::from_nodes(all.iter().map(|n| &**n)),
            in_flight: InFlight::default(),
            max_drain_parallelism: 1,
            max_scale_down_parallelism: 10,
            max_graceful_termination_sec: 600,
            shapes: &shapes,
            hold: false,
            last_scale_up_ms: None,
        };
        let opts = ConsolidationOptions {
            mode: ConsolidationMode::Off,
            ..ConsolidationOptions::default()
        };
        let mut state = ConsolidationState::default();
        let plan = plan_consolidation(
            &mut snapshot,
            &mut state,
            input,
            &opts,
            2 * HOUR,
            &mut Unlimited,
        );
        assert_eq!(
            state.pending.is_some(),
            matches!(
                plan.command,
                Some(ConsolidationCommand {
                    kind: CommandKind::Replace { .. },
                    ..
                })
            )
        );
        plan.command
    }

    /// With consolidation off, the node past its maximum age goes: deleted when its pods fit
    /// elsewhere and the group may shrink, otherwise replaced by a node of its own group first.
    #[test]
    fn an_expired_node_is_deleted_or_replaced() {
        let cmd = at_two_hours(0, "[]").expect("old expired");
        assert_eq!(cmd.kind, CommandKind::Delete);
        assert_eq!(cmd.deletions[0].node.as_str(), "old");
        assert!(
            cmd.explanation.starts_with("expiry of node old (age 7200s"),
            "{}",
            cmd.explanation
        );
        let cmd = at_two_hours(2, "[]").expect("replaced at min size");
        assert_eq!(
            cmd.kind,
            CommandKind::Replace {
                group_index: 0,
                group: autoscaler_model::NodeGroupId::from("g")
            }
        );
        assert_eq!(cmd.deletions[0].node.as_str(), "old");
    }

    /// A replacement never takes the cluster above `--max-nodes-total` (found by the safety
    /// property test: an expired node at the group's min size was replaced at the maximum).
    #[test]
    fn no_replacement_above_the_cluster_wide_maximum() {
        assert!(at_two_hours_limited(2, 2).is_none());
        assert!(at_two_hours_limited(2, 3).is_some());
    }

    /// Expiry keeps to the group's disruption budget.
    #[test]
    fn expiry_keeps_to_the_budget() {
        assert!(at_two_hours(0, r#"[{"nodes": "0"}]"#).is_none());
        assert!(at_two_hours(0, r#"[{"nodes": "50%"}]"#).is_some());
    }
}

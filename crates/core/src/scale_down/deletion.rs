//! Scale-down phase 5, the deletion plan: which unneeded nodes are deleted now, and why the
//! others wait.
//!
//! Unneeded nodes are taken in candidate order; one is deleted when no delay holds scale-down
//! (cluster-wide, or its node group's with `--scale-down-delay-type-local`), it has been unneeded (or unready) long enough, its group stays above its min
//! size counting deletions in flight and planned, the parallelism limits allow one more (empty
//! nodes in bulk, others by drain) and no cluster-wide minimum is crossed.
//!
//! It never plans a group below its min size or past the parallelism limits; it only lists
//! deletions, the shell taints, evicts and deletes.

use std::time::Duration;

use super::simulation::Removable;
use super::{NodeDeletion, Pass, ScaleDownOptions, ScaleDownPlan, ScaleDownState, Waiting, ms};
use crate::scheduling::snapshot::ClusterSnapshot;
use autoscaler_model::ClusterTotals;
use autoscaler_model::NodeGroup;

/// What deletions planned so far in this pass have used.
struct Slots<'a, 'p, 'i> {
    pass: &'a Pass<'p, 'i>,
    groups: &'a [NodeGroup],
    /// Per group: deletions planned in this pass.
    planned: Vec<usize>,
    /// Empty-node deletions, in flight and planned.
    empty: usize,
    /// Drains, in flight and planned.
    drains: usize,
    /// Cluster totals without the nodes planned for deletion.
    totals: ClusterTotals,
}

/// Moves every removable node into the plan's deletions or its waiting list.
pub(super) fn plan(
    snapshot: &ClusterSnapshot,
    state: &ScaleDownState,
    removable: Vec<Removable>,
    pass: &Pass<'_, '_>,
    plan: &mut ScaleDownPlan,
) {
    let opts = pass.opts;
    let cooldown = cooldown(state, opts, pass.now_ms);
    let groups = pass.input.provider.node_groups();
    let mut slots = Slots {
        pass,
        groups,
        planned: vec![0; groups.len()],
        empty: pass.input.in_flight.empty,
        drains: pass.input.in_flight.drains,
        totals: pass.input.totals.clone(),
    };
    for r in removable {
        let since = state.unneeded.since(r.cand.name).unwrap_or(pass.now_ms);
        let local = || {
            let delays = state.per_group.get(groups[r.cand.group].id())?;
            delayed(
                delays.last_scale_up_ms,
                delays.last_delete_ms,
                delays.last_failure_ms,
                opts,
                pass.now_ms,
            )
            .map(|why| {
                Waiting::Cooldown(format!("node group {}: {why}", groups[r.cand.group].id()))
            })
        };
        let waiting = match &cooldown {
            Some(why) => Some(Waiting::Cooldown(why.clone())),
            None if opts.delay_type_local => local().or_else(|| slots.waiting(snapshot, &r, since)),
            None => slots.waiting(snapshot, &r, since),
        };
        match waiting {
            Some(w) => plan.waiting.push((r.cand.name, w)),
            None => plan.deletions.push(slots.take(snapshot, r)),
        }
    }
}

impl Slots<'_, '_, '_> {
    /// Why the node, unneeded since `since`, may not be deleted now (global delays aside).
    fn waiting(&self, snapshot: &ClusterSnapshot, r: &Removable, since: i64) -> Option<Waiting> {
        let (c, opts) = (&r.cand, self.pass.opts);
        let group = &self.groups[c.group];
        let deletable_at_ms = since.saturating_add(ms(unneeded_wait(group, c.ready, opts)));
        let in_flight = self.pass.input.in_flight.per_group.get(c.group);
        let leaving = in_flight.copied().unwrap_or(0) + self.planned[c.group];
        let empty = c.to_move.is_empty();
        if self.pass.now_ms < deletable_at_ms {
            Some(Waiting::UnneededTime { deletable_at_ms })
        } else if group.target_size().saturating_sub(leaving) <= group.min_size() {
            Some(Waiting::MinSize)
        } else if self.empty + self.drains >= opts.max_scale_down_parallelism
            || (!empty && self.drains >= opts.max_drain_parallelism)
        {
            Some(Waiting::Parallelism)
        } else {
            let node = &snapshot.node(c.id)?.node;
            let limits = self.pass.input.limits;
            limits
                .check_removal(&self.totals, node)
                .err()
                .map(Waiting::Limit)
        }
    }

    /// Plans the node's deletion and counts it against the limits.
    fn take(&mut self, snapshot: &ClusterSnapshot, r: Removable) -> NodeDeletion {
        let c = r.cand;
        if let Some(info) = snapshot.node(c.id) {
            self.totals.remove_node(&info.node, 1);
        }
        self.planned[c.group] += 1;
        let empty = c.to_move.is_empty();
        if empty {
            self.empty += 1;
        } else {
            self.drains += 1;
        }
        NodeDeletion {
            node: c.name,
            group_index: c.group,
            group: self.groups[c.group].id().clone(),
            empty,
            evict: c.to_move.iter().chain(&c.evict_only).cloned().collect(),
            destinations: r.destinations,
            grace_period_sec: self.pass.opts.max_graceful_termination_sec,
            sequential_evictions: r.sequential,
        }
    }
}

/// How long a node must stay unneeded before deletion: the unready time for unready nodes,
/// each overridable per group.
fn unneeded_wait(group: &NodeGroup, ready: bool, opts: &ScaleDownOptions) -> Duration {
    let o = group.options();
    if ready {
        o.scale_down_unneeded_time().unwrap_or(opts.unneeded_time)
    } else {
        o.scale_down_unready_time().unwrap_or(opts.unready_time)
    }
}

/// Why deletions must wait, if they must: the global switch, and the delays cluster-wide unless
/// they apply per node group (`--scale-down-delay-type-local`).
fn cooldown(state: &ScaleDownState, opts: &ScaleDownOptions, now_ms: i64) -> Option<String> {
    if !opts.enabled {
        return Some("scale-down is disabled".into());
    }
    if opts.delay_type_local {
        return None;
    }
    let s = state;
    delayed(
        s.last_scale_up_ms,
        s.last_delete_ms,
        s.last_failure_ms,
        opts,
        now_ms,
    )
}

/// Which of the delays after a scale-up, a deletion and a failed deletion (at these times)
/// still holds at `now_ms`, said as a reason.
fn delayed(
    scale_up: Option<i64>,
    delete: Option<i64>,
    failure: Option<i64>,
    opts: &ScaleDownOptions,
    now_ms: i64,
) -> Option<String> {
    let check = |last: Option<i64>, delay: Duration, what: &str| {
        last.filter(|&t| now_ms < t.saturating_add(ms(delay)))
            .map(|t| {
                let left_ms = t.saturating_add(ms(delay)).saturating_sub(now_ms);
                format!(
                    "scale-down delayed {}s after the last {what} ({}s left)",
                    delay.as_secs(),
                    (left_ms + 999) / 1000
                )
            })
    };
    check(scale_up, opts.delay_after_add, "scale-up")
        .or_else(|| check(delete, opts.delay_after_delete, "node deletion"))
        .or_else(|| check(failure, opts.delay_after_failure, "failed scale-down"))
}

//! Scale-down phase 4, soft taints: which nodes get the `DeletionCandidateOfClusterAutoscaler`
//! taint (unneeded, not yet marked) and which lose it (needed again), at most
//! `--max-bulk-soft-taint-count` of each per pass; and, with consolidation, which nodes keep or
//! get it besides (those consolidation keeps new pods off, see [`keep`]).
//!
//! It never touches the hard `ToBeDeletedByClusterAutoscaler` taint; it only lists nodes, the
//! shell changes them.

use rustc_hash::FxHashSet;

use super::simulation::Removable;
use super::{ScaleDownOptions, ScaleDownPlan};
use crate::scheduling::snapshot::{ClusterSnapshot, NodeId};
use autoscaler_model::DELETION_CANDIDATE_TAINT;
use autoscaler_model::Node;
use autoscaler_model::Sym;

/// Fills the plan's soft taints and untaints from the nodes `ids` of `snapshot`, in order.
pub(super) fn plan(
    snapshot: &ClusterSnapshot,
    ids: &[NodeId],
    removable: &[Removable],
    opts: &ScaleDownOptions,
    plan: &mut ScaleDownPlan,
) {
    let unneeded: FxHashSet<Sym> = removable.iter().map(|r| r.cand.name).collect();
    let max = opts.max_bulk_soft_taint_count;
    for info in ids.iter().filter_map(|&id| snapshot.node(id)) {
        let has = carries(&info.node);
        let name = info.node.name;
        let wanted = unneeded.contains(&name);
        if wanted && !has && plan.soft_taint.len() < max {
            plan.soft_taint.push(name);
        } else if !wanted && has && plan.soft_untaint.len() < max {
            plan.soft_untaint.push(name);
        }
    }
}

/// Whether `node` carries the soft taint.
fn carries(node: &Node) -> bool {
    (node.taints.iter()).any(|t| t.key.as_str() == DELETION_CANDIDATE_TAINT)
}

/// The nodes `names` (consolidation keeps new pods off them) keep the soft taint the plan would
/// remove, and get it if they lack it, within the plan's `max` soft taints of the pass.
pub(crate) fn keep(
    snapshot: &ClusterSnapshot,
    names: &[Sym],
    max: usize,
    plan: &mut ScaleDownPlan,
) {
    if names.is_empty() {
        return;
    }
    let kept: FxHashSet<Sym> = names.iter().copied().collect();
    plan.soft_untaint.retain(|n| !kept.contains(n));
    for &n in names {
        if plan.soft_taint.len() >= max {
            break;
        }
        let marked = (snapshot.node_id(n).and_then(|id| snapshot.node(id)))
            .is_some_and(|i| carries(&i.node));
        if !marked && !plan.soft_taint.contains(&n) {
            plan.soft_taint.push(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nodes_kept_clear_of_keep_the_soft_taint_within_the_bulk_count() {
        let sym = Sym::new;
        let mut down = ScaleDownPlan {
            soft_taint: vec![sym("u1")],
            soft_untaint: vec![sym("d1"), sym("u2")],
            ..ScaleDownPlan::default()
        };
        let snapshot = ClusterSnapshot::default();
        keep(&snapshot, &[sym("d1"), sym("d2"), sym("d3")], 2, &mut down);
        assert_eq!(down.soft_untaint, [sym("u2")], "d1 keeps its taint");
        // One more fits under the bulk count of 2 (unknown nodes count as unmarked).
        assert_eq!(down.soft_taint, [sym("u1"), sym("d1")]);
        keep(&snapshot, &[], 2, &mut down);
        assert_eq!(down.soft_taint.len(), 2, "nothing named, nothing changed");
    }
}

//! Scale-down phase 4, soft taints: which nodes get the `DeletionCandidateOfClusterAutoscaler`
//! taint (unneeded, not yet marked) and which lose it (needed again), at most
//! `--max-bulk-soft-taint-count` of each per pass.
//!
//! It never touches the hard `ToBeDeletedByClusterAutoscaler` taint; it only lists nodes, the
//! shell changes them.

use rustc_hash::FxHashSet;

use super::simulation::Removable;
use super::{ScaleDownOptions, ScaleDownPlan};
use crate::scheduling::snapshot::{ClusterSnapshot, NodeId};
use autoscaler_model::DELETION_CANDIDATE_TAINT;
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
        let has = info
            .node
            .taints
            .iter()
            .any(|t| t.key.as_str() == DELETION_CANDIDATE_TAINT);
        let name = info.node.name;
        let wanted = unneeded.contains(&name);
        if wanted && !has && plan.soft_taint.len() < max {
            plan.soft_taint.push(name);
        } else if !wanted && has && plan.soft_untaint.len() < max {
            plan.soft_untaint.push(name);
        }
    }
}

//! Scale-down phase 1, eligibility: one verdict per node, either a reason it is unremovable or a
//! candidate for the removal simulation, and the order candidates are simulated in.
//!
//! A node is a candidate when it is in an autoscaled group that may lose a node (not at its
//! min size, not being rolled out), not disabled by annotation, not being deleted, ready unless
//! unready nodes may go, underutilized against its group's threshold, and every pod on it may
//! move or be evicted (the drain rules). It never simulates a move, never changes the
//! snapshot and never consumes a PodDisruptionBudget's allowance.

use std::sync::{Arc, LazyLock};

use super::drain::{self, DrainContext};
use super::unneeded_nodes::UnneededNodes;
use super::utilization::{Utilization, utilization};
use super::{Pass, ScaleDownState, Unremovable};
use crate::scale_down::utilization::with_devices;
use crate::scheduling::snapshot::{ClusterSnapshot, NodeId, NodeInfo};
use autoscaler_model::Node;
use autoscaler_model::NodeGroup;
use autoscaler_model::Pod;
use autoscaler_model::Sym;
use autoscaler_model::{SCALE_DOWN_DISABLED_ANNOTATION, TO_BE_DELETED_TAINT};

/// The deletion taint's key as a symbol (compared as a number on every node of every pass).
static TO_BE_DELETED: LazyLock<Sym> = LazyLock::new(|| Sym::new(TO_BE_DELETED_TAINT));

/// A node that may be removed if its pods find room elsewhere.
pub(super) struct Candidate {
    pub(super) id: NodeId,
    pub(super) name: Sym,
    pub(super) group: usize,
    pub(super) ready: bool,
    pub(super) utilization: f64,
    /// Pods that must find another node.
    pub(super) to_move: Vec<Arc<Pod>>,
    /// Pods evicted but not moved (DaemonSet pods, per the eviction flags).
    pub(super) evict_only: Vec<Arc<Pod>>,
    /// Since when the node was unneeded at the last pass, if it was.
    pub(super) previously_since: Option<i64>,
}

/// What every verdict of one pass reads.
struct Judge<'a, 'p, 'i> {
    pass: &'a Pass<'p, 'i>,
    groups: &'a [NodeGroup],
    unneeded: &'a UnneededNodes,
}

/// Judges every node of the pass: unremovable ones go to `unremovable` (in snapshot order),
/// candidates come back in simulation order.
pub(super) fn candidates(
    snapshot: &ClusterSnapshot,
    pass: &Pass<'_, '_>,
    state: &ScaleDownState,
    unremovable: &mut Vec<(Sym, Unremovable)>,
) -> Vec<Candidate> {
    let judge = Judge {
        pass,
        groups: pass.input.provider.node_groups(),
        unneeded: &state.unneeded,
    };
    let mut candidates = Vec::new();
    for &id in &pass.ids {
        let Some(info) = snapshot.node(id) else {
            continue;
        };
        match judge.verdict(id, info, snapshot) {
            Ok(c) => candidates.push(c),
            Err(why) => unremovable.push((info.node.name, why)),
        }
    }
    // Names are resolved once, not at each comparison: equal utilizations are common (nodes
    // of one shape running the same pods), so most comparisons reach the name.
    let mut keyed: Vec<(&str, Candidate)> = candidates
        .into_iter()
        .map(|c| (c.name.as_str(), c))
        .collect();
    keyed.sort_by(|(a_name, a), (b_name, b)| {
        let prev = |c: &Candidate| c.previously_since.map_or((1, 0), |s| (0, s));
        prev(a)
            .cmp(&prev(b))
            .then(a.utilization.total_cmp(&b.utilization))
            .then_with(|| a_name.cmp(b_name))
    });
    keyed.into_iter().map(|(_, c)| c).collect()
}

impl Judge<'_, '_, '_> {
    /// The node's candidate, or the first reason (in upstream's order) it is unremovable.
    fn verdict(
        &self,
        id: NodeId,
        info: &NodeInfo,
        snapshot: &ClusterSnapshot,
    ) -> Result<Candidate, Unremovable> {
        let node = &info.node;
        let g = self.group_of(node)?;
        if !self.pass.opts.unready_enabled && !node.is_ready() {
            return Err(Unremovable::UnreadyDisabled);
        }
        let util = with_devices(utilization(info, self.pass.opts.utilization), snapshot, id);
        self.check_underutilized(&self.groups[g], util)?;
        let ctx = DrainContext {
            opts: &self.pass.opts.drain,
            budgets: &self.pass.input.budgets,
            controllers: self.pass.input.controllers,
            now_ms: self.pass.now_ms,
        };
        let drained = drain::drain_node(&info.pods, &ctx).map_err(Unremovable::PodBlocks)?;
        Ok(Candidate {
            id,
            name: node.name,
            group: g,
            ready: node.is_ready(),
            utilization: util.value,
            to_move: drained.to_move,
            evict_only: drained.to_evict_only,
            previously_since: self.unneeded.since(node.name),
        })
    }

    /// The index of the node's group, when the node and its group may lose a node.
    fn group_of(&self, node: &Node) -> Result<usize, Unremovable> {
        let g = self
            .pass
            .input
            .provider
            .node_group_of(node)
            .filter(|&g| g < self.groups.len())
            .ok_or(Unremovable::NotAutoscaled)?;
        if node.annotation(SCALE_DOWN_DISABLED_ANNOTATION) == Some("true") {
            return Err(Unremovable::ScaleDownDisabledAnnotation);
        }
        let tainted = node.taints.iter().any(|t| t.key == *TO_BE_DELETED);
        if node.deletion_ms.is_some() || tainted {
            return Err(Unremovable::BeingDeleted);
        }
        let group = &self.groups[g];
        if group.options().zero_or_max_scaling() {
            return Err(Unremovable::AtomicGroup);
        }
        if group.rolling_out() {
            return Err(Unremovable::RollingOut);
        }
        let in_flight = self
            .pass
            .input
            .in_flight
            .per_group
            .get(g)
            .copied()
            .unwrap_or(0);
        if group.target_size().saturating_sub(in_flight) <= group.min_size() {
            return Err(Unremovable::MinSizeReached);
        }
        Ok(g)
    }

    /// Whether `util` is below the group's threshold (GPU nodes against the GPU one).
    fn check_underutilized(&self, group: &NodeGroup, util: Utilization) -> Result<(), Unremovable> {
        let o = group.options();
        let threshold = if util.gpu {
            o.scale_down_gpu_utilization_threshold()
                .unwrap_or(self.pass.opts.gpu_utilization_threshold)
        } else {
            o.scale_down_utilization_threshold()
                .unwrap_or(self.pass.opts.utilization_threshold)
        };
        if util.value >= threshold {
            return Err(Unremovable::NotUnderutilized {
                utilization: util.value,
                threshold,
            });
        }
        Ok(())
    }
}

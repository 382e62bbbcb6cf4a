//! The loop's capacity-on-request step: after the cluster state's update (so backed-off and
//! unhealthy groups and the upcoming nodes are known), the ProvisioningRequests and
//! CapacityBuffers are decided ([`crate::provisioning::decide`]) and the loop goes on with their
//! pods: booked room held, pending consumer pods left to their request, buffer pods after the
//! real ones.
//!
//! Requests and ordinary pods take turns for the loop's scale-up as upstream's wrapper
//! orchestrator has them: a loop that takes a request up scales up for that request only (its
//! all-or-nothing decision replaces the ordinary one), the next one for ordinary pods, unless
//! one side has nothing waiting. It decides nothing itself and never writes a status: the
//! writes are in the decision, for the shell.

use std::sync::Arc;

use crate::actions::{Action, atomic_scale_up_action, scale_up_actions};
use crate::cluster_state::ClusterStatus;
use crate::provisioning::request::Verdict;
use crate::provisioning::{CapacityDecision, decide_with};
use crate::scale_up::ScaleUpResult;
use crate::scale_up::estimator::Budget;
use crate::scale_up::pending::is_unschedulable;
use autoscaler_model::{CapacityObjects, NodeGroup, Pod, consumed_request};

use super::{Autoscaler, ClusterView};

impl Autoscaler {
    /// This loop's capacity-on-request decision on `view` (pods as the API has them), with the
    /// groups `status` blocks left out of any atomic scale-up and its upcoming nodes counted.
    pub(super) fn decide_capacity(
        &mut self,
        view: &ClusterView<'_>,
        objects: &CapacityObjects,
        status: &ClusterStatus,
        now_ms: i64,
        budget: &mut dyn Budget,
    ) -> CapacityDecision {
        let upcoming: Vec<usize> = status.groups.iter().map(|g| g.upcoming).collect();
        let blocked =
            |g: usize, _: &NodeGroup| status.groups.get(g).and_then(|s| s.blocked_reason());
        let regular_pending = view.pods.iter().any(waits_for_scale_up);
        decide_with(
            &mut self.requests,
            objects,
            view,
            &self.options.scale_up,
            &self.options.capacity,
            now_ms,
            &blocked,
            Some(&upcoming),
            Some(regular_pending),
            &mut self.rng,
            budget,
        )
    }
}

/// The loop's scale-up actions for `result`: in a loop whose scale-up is a best-effort-atomic
/// request's, one [`Action::AtomicIncreaseSize`] for all its groups (carried out all or none);
/// else one `IncreaseSize` per group.
pub(super) fn scale_up_actions_of(
    capacity: Option<&CapacityDecision>,
    result: &ScaleUpResult,
) -> Vec<Action> {
    let request = capacity
        .filter(|c| c.requests.took_turn && c.requests.scale_up.is_some())
        .and_then(|c| {
            c.requests
                .requests
                .iter()
                .find(|r| matches!(&r.verdict, Verdict::ScaledUp(g) if !g.is_empty()))
        });
    match request {
        Some(r) => atomic_scale_up_action(&r.key, result).into_iter().collect(),
        None => scale_up_actions(result),
    }
}

/// Whether `pod` is an ordinary pending pod waiting for a scale-up: unschedulable, not a
/// request's consumer (those wait for their request). Upstream counts the ones left after the
/// pods that fit are filtered out; this counts them all, so a pod that fits an existing node
/// may give the turn to ordinary pods one loop early.
fn waits_for_scale_up(pod: &Arc<Pod>) -> bool {
    pod.node_name.is_none()
        && !pod.is_terminal()
        && is_unschedulable(pod)
        && consumed_request(pod).is_none()
}

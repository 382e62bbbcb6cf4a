//! Capacity on request: what the autoscaler decides for ProvisioningRequests and
//! CapacityBuffers (the objects themselves are read by the model crate:
//! `ProvisioningRequest`, `CapacityBuffer`).
//!
//! - [`request`]: a loop's decisions on requests (expiry, bookings, one request taken up per
//!   loop by its class, check-capacity or best-effort-atomic, with its retry backoff), the
//!   conditions to write ([`conditions`]), the virtual pods that hold booked room and the atomic
//!   scale-up;
//! - [`buffer`]: a buffer resolved into virtual pods and the status to write.
//!
//! The shell feeds the result into the loop: the view's pods become
//! [`request::RequestsDecision::pods_for_loop`] plus the buffers' pods (after the real ones),
//! and the status writes go through the status subresource. Everything here is pure: time is
//! passed in, nothing is read or written.

pub mod buffer;
mod capacity_options;
pub mod conditions;
pub mod request;
mod request_options;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use rand_chacha::ChaCha8Rng;

use crate::autoscaler::ClusterView;
use crate::scheduling::budget::Budget;
use autoscaler_model::CapacityObjects;
use autoscaler_model::NodeGroup;
use autoscaler_model::Pod;
use buffer::Resolved;
use request::{Requests, RequestsDecision, RequestsInput, Verdict};

/// What the autoscaler does with capacity-on-request objects (all off by default, as upstream).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CapacityOptions {
    /// ProvisioningRequests (`--enable-provisioning-requests` and its tuning flags).
    pub(crate) requests: request::RequestOptions,
    /// `--capacity-buffer-controller-enabled` (false): resolve buffers and write their status.
    pub(crate) buffer_controller: bool,
    /// `--capacity-buffer-pod-injection-enabled` (false): the ready buffers' virtual pods join
    /// the loop's pending pods.
    pub(crate) buffer_pods: bool,
}

impl CapacityOptions {
    /// Whether anything is to be decided.
    pub fn any(&self) -> bool {
        self.requests.enabled || self.buffer_controller || self.buffer_pods
    }
}

/// One loop's capacity-on-request decisions.
#[derive(Clone, Debug, Default)]
pub struct CapacityDecision {
    /// The requests'.
    pub requests: RequestsDecision,
    /// Every buffer of the default strategy, resolved.
    pub buffers: Vec<Resolved>,
    /// Whether buffer statuses are to be written (`--capacity-buffer-controller-enabled`).
    pub write_buffer_status: bool,
    /// Whether the buffers' pods join the loop (`--capacity-buffer-pod-injection-enabled`).
    pub inject_buffer_pods: bool,
}

impl CapacityDecision {
    /// The pods the loop's view should hold: the real ones without the pending pods a request
    /// serves, the booked virtual pods, then (after every real pod, so real pods are placed
    /// first) the buffers' virtual pods.
    pub fn pods_for_loop(&self, pods: &[Arc<Pod>]) -> Vec<Arc<Pod>> {
        let mut out = self.requests.pods_for_loop(pods);
        if self.inject_buffer_pods {
            out.extend(self.buffers.iter().flat_map(|b| b.pods.iter().cloned()));
        }
        out
    }

    /// The decisions in words, one line per request and buffer (what `plan` prints).
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for r in &self.requests.requests {
            let what = match &r.verdict {
                Verdict::NotOurs => "a class this autoscaler does not serve: left alone".into(),
                Verdict::Finished => "failed or booking expired: nothing to do".into(),
                Verdict::Booked { held, wanted } => {
                    format!("booked: {held} of {wanted} pods hold their room")
                }
                Verdict::BookingExpired => "the booking time is over".into(),
                Verdict::Consumed => "every pod is scheduled: the booking is consumed".into(),
                Verdict::Expired => "never provisioned within 7 days: failed".into(),
                Verdict::Waiting => "waiting for its turn or its retry backoff".into(),
                Verdict::PodsFailed(e) => format!("its pods cannot be made: {e}"),
                Verdict::Fits => "all its pods fit the cluster".into(),
                Verdict::ScaledUp(groups) if groups.is_empty() => {
                    "the nodes on their way hold all its pods: no new scale-up".into()
                }
                Verdict::ScaledUp(groups) => {
                    let g: Vec<String> = groups.iter().map(|(g, n)| format!("{g} +{n}")).collect();
                    format!("one scale-up for all its pods: {}", g.join(", "))
                }
                Verdict::Provisioning { held, wanted } => format!(
                    "waiting for its nodes to be Ready: {held} of {wanted} pods fit Ready nodes"
                ),
                Verdict::NodesReady => "its nodes are Ready: all its pods fit".into(),
                Verdict::NotFound(why) => format!("capacity not found: {why}"),
                Verdict::CannotFit(why) => format!("can never fit: {why}"),
            };
            let mut line = format!("ProvisioningRequest {} ({}): {what}", r.key, r.class);
            if let Some(w) = self
                .requests
                .writes
                .iter()
                .find(|w| format!("{}/{}", w.namespace, w.name) == r.key)
            {
                let set: Vec<String> = w
                    .set
                    .iter()
                    .filter_map(|t| w.conditions.iter().find(|c| c.type_ == *t))
                    .map(|c| {
                        format!(
                            "{}={} ({}: {})",
                            c.type_,
                            c.status.as_str(),
                            c.reason,
                            c.message
                        )
                    })
                    .collect();
                line.push_str(&format!("; writes {}", set.join(", ")));
            }
            out.push(line);
        }
        for b in &self.buffers {
            let s = &b.status;
            let mut line = if s.ready {
                format!(
                    "CapacityBuffer {}: {} virtual pods{}",
                    b.key,
                    b.pods.len(),
                    if self.inject_buffer_pods {
                        " join the pending pods"
                    } else {
                        " (not injected: --capacity-buffer-pod-injection-enabled is false)"
                    }
                )
            } else {
                format!("CapacityBuffer {}: not ready: {}", b.key, s.message)
            };
            if self.write_buffer_status {
                line.push_str(&format!(
                    "; writes {}={} ({}: {})",
                    s.condition,
                    if s.ready { "True" } else { "False" },
                    s.reason,
                    s.message
                ));
                if let Some(r) = s.replicas {
                    line.push_str(&format!(", replicas {r}"));
                }
                // A buffer not ready gets `Provisioning=False` only if it was ready before,
                // which the cached status says, not the decision: not shown.
                if self.inject_buffer_pods && s.ready {
                    let p = &s.provisioning;
                    line.push_str(&format!(
                        ", Provisioning={} ({}{}{})",
                        if p.injected { "True" } else { "False" },
                        p.reason,
                        if p.message.is_empty() { "" } else { ": " },
                        p.message
                    ));
                }
            }
            out.push(line);
        }
        out
    }
}

/// Decides one loop for the capacity-on-request `objects` of `view`'s cluster at `now_ms`:
/// requests (with the backoff `state` keeps between loops) when enabled, then buffers.
#[allow(clippy::too_many_arguments)]
pub fn decide(
    state: &mut Requests,
    objects: &CapacityObjects,
    view: &ClusterView<'_>,
    config: &crate::autoscaler::ScaleUpConfig,
    opts: &CapacityOptions,
    now_ms: i64,
    blocked: &dyn Fn(usize, &NodeGroup) -> Option<String>,
    rng: &mut ChaCha8Rng,
    budget: &mut dyn Budget,
) -> CapacityDecision {
    decide_with(
        state, objects, view, config, opts, now_ms, blocked, None, None, rng, budget,
    )
}

/// [`decide`] as a loop of `run` or `simulate` does it: with the loop's `upcoming` nodes per
/// group index and, when `regular_pending` is given, requests and ordinary pending pods taking
/// turns for the scale-up (see [`RequestsInput::regular_pending`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn decide_with(
    state: &mut Requests,
    objects: &CapacityObjects,
    view: &ClusterView<'_>,
    config: &crate::autoscaler::ScaleUpConfig,
    opts: &CapacityOptions,
    now_ms: i64,
    blocked: &dyn Fn(usize, &NodeGroup) -> Option<String>,
    upcoming: Option<&[usize]>,
    regular_pending: Option<bool>,
    rng: &mut ChaCha8Rng,
    budget: &mut dyn Budget,
) -> CapacityDecision {
    let template = |ns: &str, n: &str| objects.template(ns, n);
    let input = RequestsInput {
        view,
        template: &template,
        config,
        blocked,
        upcoming,
        regular_pending,
    };
    let requests = state.decide(
        &objects.requests,
        &input,
        &opts.requests,
        now_ms,
        rng,
        budget,
    );
    let buffers = if opts.buffer_controller || opts.buffer_pods {
        let workload = |ns: &str, g: &str, k: &str, n: &str| objects.workload(ns, g, k, n);
        objects
            .buffers
            .iter()
            .filter_map(|b| buffer::resolve(b, &template, &workload))
            .collect()
    } else {
        Vec::new()
    };
    CapacityDecision {
        requests,
        buffers,
        write_buffer_status: opts.buffer_controller,
        inject_buffer_pods: opts.buffer_pods,
    }
}

//! One loop's decisions on ProvisioningRequests, as upstream's processors and provisioning
//! classes take them, in their order:
//!
//! 1. expiry: a booking (`Provisioned=True`) older than the booking time gets
//!    `BookingExpired=True` (`CapacityReservationTimeExpired`); a request never provisioned
//!    within the expiry time (7 days) gets `Failed=True` (`Expired`);
//! 2. booking: the pods of every live booking are placed in the snapshot (they hold their room
//!    against pending pods and, through the drain rules' custom-controller check, against
//!    scale-down), minus the request's pods already scheduled; once all are scheduled the
//!    booking ends (`BookingExpired=True`, `CapacityBookingConsumed`);
//! 3. atomic scale-ups on their way (`Provisioned=False`, `CapacityIsBeingProvisioned`, ours):
//!    once every pod fits Ready nodes, `Provisioned=True` (`CapacityIsProvisioned`) and the
//!    booking starts; meanwhile the pods that fit Ready nodes hold their room; if the nodes on
//!    their way no longer hold the rest (the scale-up failed or was reverted),
//!    `Provisioned=False` (`CapacityIsNotFound`), retried after backoff;
//! 4. one request is taken up per loop (`Accepted=True`), the first in creation order that is
//!    neither provisioned nor failed and whose retry backoff (after `Provisioned=False`) is over,
//!    in the requests' turn (requests and ordinary pods take turns for the loop's scale-up, as
//!    upstream's wrapper orchestrator has them; [`RequestsInput::regular_pending`]):
//!    - all its pods fit the snapshot as it is: they stay placed (the booking starts) and
//!      `Provisioned=True` (`CapacityIsFound`);
//!    - check-capacity, if not: `Provisioned=False` (`CapacityIsNotFound`, retried after
//!      backoff) or, with the `noRetry` parameter, `Failed=True`; never a scale-up;
//!    - best-effort-atomic, if not: one scale-up decision that must help every pod: then its
//!      increases are the loop's scale-up and `Provisioned=False` (`CapacityIsBeingProvisioned`)
//!      until step 3 sees the pods fit Ready nodes (upstream writes `Provisioned=True` at once);
//!      else no group grows at all: `Failed=True` (`CapacityCannotFit`, ours) when the groups at
//!      their max sizes could not hold the pods even with every node emptied, else
//!      `Provisioned=False` (`CapacityIsNotFound`, retried after backoff).
//!
//! Pods consuming a request (`autoscaling.x-k8s.io/consume-provisioning-request` or the legacy
//! annotation) are served by that request, never by an ordinary scale-up: while requests are
//! enabled every pending consumer is left out of it, whatever request it names (upstream's pods
//! filter), see [`RequestsDecision::serves`]; [`RequestsDecision::consumer_events`] gives the
//! events upstream puts on them. Everything here is pure: time comes in as `now_ms`,
//! the retry backoff is state the caller keeps between loops; no I/O, no clock.

use std::collections::VecDeque;
use std::sync::Arc;

use rand_chacha::ChaCha8Rng;

use super::conditions::*;
use crate::autoscaler::{
    ClusterView, ScaleUpConfig, ScaleUpDecision, build_snapshot, decide_scale_up_with_upcoming,
};
use crate::scale_up::pending::{is_unschedulable, place_on_existing};
use crate::scheduling::budget::Budget;
use crate::scheduling::snapshot::ClusterSnapshot;
use autoscaler_model::NodeGroup;
use autoscaler_model::Sym;
use autoscaler_model::{
    CLASS_BEST_EFFORT_ATOMIC, CLASS_CHECK_CAPACITY, ConditionStatus, ConditionType,
    PARAMETER_NO_RETRY, PARAMETER_PROCESSOR_INSTANCE, ProvisioningRequest,
    RequestCondition as Condition, consumed_request, pods_for_request,
};
use autoscaler_model::{MIRROR_POD_ANNOTATION, Pod, PodTemplate};

/// How long a booking lasts after `Provisioned=True` (upstream's reservation time, 10 min).
pub const BOOKING_MS: i64 = 10 * 60 * 1000;
/// How long a request may wait for `Provisioned=True` before it fails (upstream's 7 days).
pub const EXPIRY_MS: i64 = 7 * 24 * 60 * 60 * 1000;

/// Options of the ProvisioningRequest decisions (upstream's flag names in the field docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestOptions {
    /// `--enable-provisioning-requests` (false): act on ProvisioningRequests at all.
    pub(crate) enabled: bool,
    /// `--provisioning-request-initial-backoff-time` (1m), in milliseconds: the first wait
    /// before a request with `Provisioned=False` is tried again.
    pub(crate) initial_backoff_ms: i64,
    /// `--provisioning-request-max-backoff-time` (10m), in milliseconds: the wait doubles up to
    /// this.
    pub(crate) max_backoff_ms: i64,
    /// `--provisioning-request-max-backoff-cache-size` (1000): requests whose backoff is
    /// remembered (the least recently tried is forgotten first).
    pub(crate) max_backoff_cache_size: usize,
    /// `--check-capacity-processor-instance` (""): the check-capacity requests this instance
    /// serves (those whose `processorInstance` parameter names it); set, best-effort-atomic
    /// requests are left to another instance.
    pub(crate) check_capacity_processor_instance: String,
    /// The booking time ([`BOOKING_MS`]; not a flag upstream).
    pub(crate) booking_ms: i64,
    /// The expiry time ([`EXPIRY_MS`]; not a flag upstream).
    pub(crate) expiry_ms: i64,
}

impl Default for RequestOptions {
    fn default() -> Self {
        RequestOptions {
            enabled: false,
            initial_backoff_ms: 60_000,
            max_backoff_ms: 600_000,
            max_backoff_cache_size: 1000,
            check_capacity_processor_instance: String::new(),
            booking_ms: BOOKING_MS,
            expiry_ms: EXPIRY_MS,
        }
    }
}

/// Whether this instance acts on `request`'s class (upstream's `SupportedProvisioningClass`,
/// with the deprecated `<instance><class>` prefix form).
pub fn supported_class(request: &ProvisioningRequest, instance: &str) -> bool {
    let class = &*request.class;
    if class == CLASS_BEST_EFFORT_ATOMIC {
        return instance.is_empty();
    }
    let param = request
        .parameters
        .get(PARAMETER_PROCESSOR_INSTANCE)
        .map(String::as_str)
        .unwrap_or("");
    match (instance.is_empty(), param.is_empty()) {
        (true, true) => class == CLASS_CHECK_CAPACITY,
        (true, false) => false,
        (false, false) => param == instance && class == CLASS_CHECK_CAPACITY,
        (false, true) => class.strip_prefix(instance) == Some(CLASS_CHECK_CAPACITY),
    }
}

/// The retry backoff of requests left `Provisioned=False`, kept between loops: per request, the
/// wait before its next try, starting at the initial backoff and doubling up to the max.
#[derive(Clone, Debug, Default)]
pub struct RetryBackoff {
    /// (request UID or key, current wait), least recently tried first.
    waits: VecDeque<(Arc<str>, i64)>,
}

impl RetryBackoff {
    /// Whether `request` may be tried at `now_ms` (its wait after `Provisioned=False` is over).
    fn is_due(&self, request: &ProvisioningRequest, opts: &RequestOptions, now_ms: i64) -> bool {
        let Some(p) = request.condition(ConditionType::Provisioned) else {
            return true;
        };
        if p.status != ConditionStatus::False {
            return p.status != ConditionStatus::True;
        }
        let wait = self.wait_of(request).unwrap_or(opts.initial_backoff_ms);
        p.last_transition_ms.saturating_add(wait) < now_ms
    }

    /// Records that `request`, due, is tried now: after a `Provisioned=False` its next wait
    /// doubles.
    fn tried(&mut self, request: &ProvisioningRequest, opts: &RequestOptions) {
        if request
            .condition(ConditionType::Provisioned)
            .is_none_or(|p| p.status != ConditionStatus::False)
        {
            return;
        }
        let key: Arc<str> = if request.uid.is_empty() {
            request.key().into()
        } else {
            request.uid.clone()
        };
        let at = self.waits.iter().position(|(k, _)| *k == key);
        let wait = at.map_or(opts.initial_backoff_ms, |i| self.waits[i].1);
        if let Some(i) = at {
            self.waits.remove(i);
        }
        if self.waits.len() >= opts.max_backoff_cache_size.max(1) {
            self.waits.pop_front();
        }
        let next = wait.saturating_mul(2).min(opts.max_backoff_ms);
        self.waits.push_back((key, next));
    }

    /// The current wait of `request`, if remembered.
    pub fn wait_of(&self, request: &ProvisioningRequest) -> Option<i64> {
        let key = if request.uid.is_empty() {
            request.key()
        } else {
            request.uid.to_string()
        };
        self.waits
            .iter()
            .find(|(k, _)| **k == *key)
            .map(|(_, w)| *w)
    }
}

/// A status write: the request's whole new `status.conditions`, to be sent through the status
/// subresource with `resource_version` as precondition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusWrite {
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: Arc<str>,
    /// The resourceVersion the decision read.
    pub resource_version: Arc<str>,
    /// The new conditions (all of them).
    pub conditions: Vec<Condition>,
    /// The condition types this write sets, in order.
    pub set: Vec<ConditionType>,
}

/// What was decided for one request, for `plan` and the logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A class this instance does not serve: left alone.
    NotOurs,
    /// Already `Failed` or `BookingExpired`: nothing left to do.
    Finished,
    /// Booked: this many of its pods hold room (of this many not yet scheduled).
    Booked {
        /// Pods placed.
        held: usize,
        /// Pods wanted.
        wanted: usize,
    },
    /// The booking time is over.
    BookingExpired,
    /// Every pod of the request is scheduled: the booking is consumed.
    Consumed,
    /// Never provisioned within the expiry time.
    Expired,
    /// Waiting for its turn or its retry backoff.
    Waiting,
    /// Its pods could not be made.
    PodsFailed(String),
    /// check-capacity or best-effort-atomic: all pods fit the cluster as it is.
    Fits,
    /// best-effort-atomic: one scale-up for all pods (group, nodes), or none when the nodes
    /// already on their way hold them; `Provisioned=True` waits for the nodes to be Ready.
    ScaledUp(Vec<(String, usize)>),
    /// best-effort-atomic, scaled up in an earlier loop: its nodes are not all Ready yet; this
    /// many of its pods hold room on Ready nodes (of this many not yet scheduled).
    Provisioning {
        /// Pods placed on Ready nodes.
        held: usize,
        /// Pods wanted.
        wanted: usize,
    },
    /// best-effort-atomic: every pod fits Ready nodes now, `Provisioned=True`.
    NodesReady,
    /// The room is not there (why), retried after backoff (or failed with `noRetry`).
    NotFound(String),
    /// best-effort-atomic: the node groups can never hold all its pods (why): failed.
    CannotFit(String),
}

/// One request's decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestDecision {
    /// `namespace/name`.
    pub key: String,
    /// Class.
    pub class: Arc<str>,
    /// What was decided.
    pub verdict: Verdict,
}

/// One loop's decisions on every request.
#[derive(Clone, Debug, Default)]
pub struct RequestsDecision {
    /// Per request, in creation order.
    pub requests: Vec<RequestDecision>,
    /// The status writes, at most one per request.
    pub writes: Vec<StatusWrite>,
    /// The virtual pods holding booked room, bound to their nodes: the loop's view must hold
    /// them (so pending pods and scale-down see the room taken).
    pub booked: Vec<Arc<Pod>>,
    /// The best-effort-atomic scale-up, when one was decided: its increases are to be carried
    /// out together, before (and instead of) any other scale-up of the loop.
    pub scale_up: Option<ScaleUpDecision>,
    /// Whether a request was taken up this loop: the loop's scale-up is then the request's
    /// (upstream alternates the two between loops), never an ordinary one.
    pub took_turn: bool,
    /// Whether ProvisioningRequests are enabled: then every pending pod that consumes one is
    /// left out of the ordinary scale-up.
    filters_consumers: bool,
}

/// At most this many consumer pods get the event saying they triggered no scale-up, per loop
/// (upstream's `maxProvReqEvent`).
pub const MAX_CONSUMER_EVENTS: usize = 50;

impl RequestsDecision {
    /// Whether `pod` consumes a ProvisioningRequest (by either annotation) while requests are
    /// enabled: such a pending pod is left out of the ordinary scale-up whatever request it
    /// names (one this instance serves, another class's, or none that exists), as upstream's
    /// `ProvisioningRequestPodsFilter` leaves it: its request's booking or atomic scale-up
    /// serves it, never an ordinary scale-up of its own.
    pub fn serves(&self, pod: &Pod) -> bool {
        self.filters_consumers && consumed_request(pod).is_some()
    }

    /// The unschedulable pods of `pods` that [`Self::serves`] leaves out, up to
    /// [`MAX_CONSUMER_EVENTS`], each with the message of the `Normal` event upstream puts on
    /// them (with an empty reason, as upstream's filter records it).
    pub fn consumer_events<'p>(&self, pods: &'p [Arc<Pod>]) -> Vec<(&'p Arc<Pod>, String)> {
        pods.iter()
            .filter(|p| p.node_name.is_none() && !p.is_terminal() && is_unschedulable(p))
            .filter_map(|p| {
                let (_, name) = consumed_request(p).filter(|_| self.filters_consumers)?;
                Some((
                    p,
                    format!(
                        "Unschedulable pod didn't trigger scale-up, because it's consuming \
                         ProvisioningRequest {}/{name}",
                        p.namespace
                    ),
                ))
            })
            .take(MAX_CONSUMER_EVENTS)
            .collect()
    }

    /// The pods the loop's view should hold: `pods` without the pending pods this decision
    /// serves, then the booked virtual pods.
    pub fn pods_for_loop(&self, pods: &[Arc<Pod>]) -> Vec<Arc<Pod>> {
        pods.iter()
            .filter(|p| p.node_name.is_some() || !self.serves(p))
            .cloned()
            .chain(self.booked.iter().cloned())
            .collect()
    }
}

impl RequestsDecision {
    /// Says that the best-effort-atomic scale-up this decision asked for was not carried out
    /// (a group's change failed, why; the groups grown before it were set back): its request
    /// is written `Provisioned=False` (`CapacityIsNotFound`), as upstream writes it when its
    /// scale-up fails, so it is tried again after its retry backoff (the failed group is backed
    /// off meanwhile). The condition keeps the decision's time and generation.
    pub fn scale_up_failed(&mut self, why: &str) {
        let Some(r) = (self.requests.iter_mut())
            .find(|r| matches!(&r.verdict, Verdict::ScaledUp(g) if !g.is_empty()))
        else {
            return;
        };
        r.verdict = Verdict::NotFound(format!("the scale-up failed: {why}"));
        let Some(w) = (self.writes.iter_mut())
            .find(|w| r.key.split_once('/') == Some((&*w.namespace, &*w.name)))
        else {
            return;
        };
        let Some(p) = w
            .conditions
            .iter()
            .find(|c| c.type_ == ConditionType::Provisioned)
        else {
            return;
        };
        let (generation, at) = (p.observed_generation, p.last_transition_ms);
        add_or_update(
            &mut w.conditions,
            ConditionType::Provisioned,
            ConditionStatus::False,
            CAPACITY_IS_NOT_FOUND_REASON,
            CAPACITY_IS_NOT_FOUND_MSG,
            generation,
            at,
        );
    }
}

/// The decisions on ProvisioningRequests, with the retry backoff they keep between loops.
#[derive(Clone, Debug, Default)]
pub struct Requests {
    /// The retry backoff.
    pub backoff: RetryBackoff,
    /// Whether the next loop that has both a request to take up and ordinary pods waiting for
    /// a scale-up is the request's (upstream's wrapper orchestrator flips this every loop).
    pub request_turn: bool,
}

/// What one loop's request decisions read besides the requests.
pub struct RequestsInput<'a, 'v> {
    /// The cluster (pods as the API has them, no virtual pods).
    pub view: &'a ClusterView<'v>,
    /// The PodTemplate named (namespace, name), if any.
    pub template: &'a dyn Fn(&str, &str) -> Option<&'a PodTemplate>,
    /// The scale-up configuration (best-effort-atomic decides with it).
    pub config: &'a ScaleUpConfig,
    /// Why a group must not grow now (backoff, unhealthy), if it must not.
    pub blocked: &'a dyn Fn(usize, &NodeGroup) -> Option<String>,
    /// The upcoming nodes per group index, as the loop counts them (`None`: target minus
    /// started nodes).
    pub upcoming: Option<&'a [usize]>,
    /// Whether ordinary pending pods wait for a scale-up this loop: `Some` makes requests and
    /// ordinary pods take turns as upstream's loop does; `None` takes a request up whatever
    /// else waits (what `plan` shows of one loop).
    pub regular_pending: Option<bool>,
}

/// A request being decided: its conditions as they will be written.
struct Work<'r> {
    request: &'r ProvisioningRequest,
    conditions: Vec<Condition>,
    set: Vec<ConditionType>,
    verdict: Option<Verdict>,
}

impl Work<'_> {
    fn set(&mut self, t: ConditionType, s: ConditionStatus, reason: &str, msg: &str, now: i64) {
        add_or_update(
            &mut self.conditions,
            t,
            s,
            reason,
            msg,
            self.request.generation,
            now,
        );
        self.set.push(t);
    }

    fn is_true(&self, t: ConditionType) -> bool {
        self.conditions
            .iter()
            .any(|c| c.type_ == t && c.status == ConditionStatus::True)
    }
}

impl Requests {
    /// Decides this loop for `requests` at `now_ms`.
    pub fn decide(
        &mut self,
        requests: &[ProvisioningRequest],
        input: &RequestsInput<'_, '_>,
        opts: &RequestOptions,
        now_ms: i64,
        rng: &mut ChaCha8Rng,
        budget: &mut dyn Budget,
    ) -> RequestsDecision {
        let mut out = RequestsDecision::default();
        if !opts.enabled {
            return out;
        }
        out.filters_consumers = true;
        let instance = opts.check_capacity_processor_instance.as_str();
        let mut order: Vec<&ProvisioningRequest> = requests.iter().collect();
        order.sort_by(|a, b| {
            (a.creation_ms, &a.namespace, &a.name).cmp(&(b.creation_ms, &b.namespace, &b.name))
        });
        let mut work: Vec<Work<'_>> = order
            .into_iter()
            .map(|request| Work {
                request,
                conditions: request.conditions.clone(),
                set: Vec::new(),
                verdict: None,
            })
            .collect();

        // 1. Expiry.
        for w in &mut work {
            let r = w.request;
            if !supported_class(r, instance) {
                w.verdict = Some(Verdict::NotOurs);
                continue;
            }
            if w.is_true(ConditionType::BookingExpired) || w.is_true(ConditionType::Failed) {
                w.verdict = Some(Verdict::Finished);
                continue;
            }
            match r.condition(ConditionType::Provisioned) {
                Some(p) if p.status == ConditionStatus::True => {
                    if p.last_transition_ms.saturating_add(opts.booking_ms) < now_ms {
                        w.set(
                            ConditionType::BookingExpired,
                            ConditionStatus::True,
                            RESERVATION_EXPIRED_REASON,
                            RESERVATION_EXPIRED_MSG,
                            now_ms,
                        );
                        w.verdict = Some(Verdict::BookingExpired);
                    }
                }
                _ => {
                    if r.creation_ms
                        .is_some_and(|c| c.saturating_add(opts.expiry_ms) < now_ms)
                    {
                        w.set(
                            ConditionType::Failed,
                            ConditionStatus::True,
                            EXPIRED_REASON,
                            EXPIRED_MSG,
                            now_ms,
                        );
                        w.verdict = Some(Verdict::Expired);
                    }
                }
            }
        }

        let view = input.view;
        let mut warnings = Vec::new();
        let mut snapshot = build_snapshot(view, &mut warnings);

        // 2. Bookings.
        for w in &mut work {
            if w.verdict.is_some() || !w.is_true(ConditionType::Provisioned) {
                continue;
            }
            let r = w.request;
            let scheduled = view
                .pods
                .iter()
                .filter(|p| p.node_name.is_some() && !p.is_terminal())
                .filter(|p| consumed_request(p) == Some((&*r.namespace, &*r.name)))
                .count();
            let total = usize::try_from(r.pod_count()).unwrap_or(usize::MAX);
            if scheduled >= total {
                w.set(
                    ConditionType::BookingExpired,
                    ConditionStatus::True,
                    BOOKING_CONSUMED_REASON,
                    BOOKING_CONSUMED_MSG,
                    now_ms,
                );
                w.verdict = Some(Verdict::Consumed);
                continue;
            }
            match pods_for_request(r, input.template) {
                Err(e) => {
                    let msg = format!("Couldn't create pods, err: {e}");
                    w.set(
                        ConditionType::Failed,
                        ConditionStatus::True,
                        FAILED_TO_BOOK_CAPACITY_REASON,
                        &msg,
                        now_ms,
                    );
                    w.verdict = Some(Verdict::PodsFailed(msg));
                }
                Ok(mut pods) => {
                    // The scheduled pods hold their part of the room themselves.
                    pods.truncate(total - scheduled);
                    let wanted = pods.len();
                    let placed = place_on_existing(&mut snapshot, pods).placed;
                    let held = placed.len();
                    out.booked.extend(bound(&snapshot, placed));
                    w.verdict = Some(Verdict::Booked { held, wanted });
                }
            }
        }

        // 2b. Atomic scale-ups on their way: Provisioned once every pod fits Ready nodes.
        for w in &mut work {
            if w.verdict.is_some() || !being_provisioned(w.request) {
                continue;
            }
            let r = w.request;
            let scheduled = scheduled_consumers(view, r);
            let total = usize::try_from(r.pod_count()).unwrap_or(usize::MAX);
            let mut pods = match pods_for_request(r, input.template) {
                Ok(p) => p,
                Err(e) => {
                    let msg = format!("Couldn't create pods, err: {e}");
                    w.set(
                        ConditionType::Failed,
                        ConditionStatus::True,
                        FAILED_TO_CREATE_PODS_REASON,
                        &msg,
                        now_ms,
                    );
                    w.verdict = Some(Verdict::PodsFailed(msg));
                    continue;
                }
            };
            pods.truncate(total.saturating_sub(scheduled));
            let wanted = pods.len();
            let (fits, placed, _) = check_capacity(&mut snapshot, pods.clone());
            if fits {
                out.booked.extend(bound(&snapshot, placed));
                w.set(
                    ConditionType::Provisioned,
                    ConditionStatus::True,
                    CAPACITY_IS_PROVISIONED_REASON,
                    CAPACITY_IS_PROVISIONED_MSG,
                    now_ms,
                );
                w.verdict = Some(Verdict::NodesReady);
                continue;
            }
            // Still on their way if the upcoming nodes hold the rest; if they no longer do (the
            // scale-up failed, timed out or was reverted), the request is retried after backoff.
            match self::atomic(&mut snapshot, input, pods, now_ms, rng, budget) {
                Atomic::Fits(fit) => {
                    let placed = place_on_existing(&mut snapshot, fit).placed;
                    let held = placed.len();
                    out.booked.extend(bound(&snapshot, placed));
                    w.verdict = Some(Verdict::Provisioning { held, wanted });
                }
                Atomic::ScaleUp(..) | Atomic::NotFound(_) => {
                    w.set(
                        ConditionType::Provisioned,
                        ConditionStatus::False,
                        CAPACITY_IS_NOT_FOUND_REASON,
                        CAPACITY_IS_NOT_FOUND_MSG,
                        now_ms,
                    );
                    w.verdict = Some(Verdict::NotFound(
                        "the nodes asked for did not come (scale-up failed or timed out)".into(),
                    ));
                }
            }
        }

        // 3. One request taken up, in its turn.
        let take_up = match input.regular_pending {
            None | Some(false) => true,
            Some(true) => self.request_turn,
        };
        let mut had_candidate = false;
        for w in &mut work {
            if w.verdict.is_some() {
                continue;
            }
            if out.took_turn || !self.backoff.is_due(w.request, opts, now_ms) {
                w.verdict = Some(Verdict::Waiting);
                continue;
            }
            let r = w.request;
            let pods = match pods_for_request(r, input.template) {
                Ok(p) => p,
                Err(e) => {
                    w.set(
                        ConditionType::Failed,
                        ConditionStatus::True,
                        FAILED_TO_CREATE_PODS_REASON,
                        &e.to_string(),
                        now_ms,
                    );
                    w.verdict = Some(Verdict::PodsFailed(e.to_string()));
                    continue;
                }
            };
            had_candidate = true;
            if !take_up {
                w.verdict = Some(Verdict::Waiting);
                continue;
            }
            out.took_turn = true;
            self.backoff.tried(r, opts);
            w.set(
                ConditionType::Accepted,
                ConditionStatus::True,
                ACCEPTED_REASON,
                ACCEPTED_MSG,
                now_ms,
            );
            let (fits, placed, why) = check_capacity(&mut snapshot, pods.clone());
            if fits {
                // The room is there now: the booking starts in this loop.
                out.booked.extend(bound(&snapshot, placed));
                w.set(
                    ConditionType::Provisioned,
                    ConditionStatus::True,
                    CAPACITY_IS_FOUND_REASON,
                    CAPACITY_IS_FOUND_MSG,
                    now_ms,
                );
                w.verdict = Some(Verdict::Fits);
                continue;
            }
            if &*r.class == CLASS_BEST_EFFORT_ATOMIC {
                match self::atomic(&mut snapshot, input, pods.clone(), now_ms, rng, budget) {
                    Atomic::Fits(fit) => {
                        // The nodes on their way hold the rest: no new scale-up.
                        let placed = place_on_existing(&mut snapshot, fit).placed;
                        out.booked.extend(bound(&snapshot, placed));
                        w.set(
                            ConditionType::Provisioned,
                            ConditionStatus::False,
                            CAPACITY_IS_BEING_PROVISIONED_REASON,
                            CAPACITY_IS_BEING_PROVISIONED_MSG,
                            now_ms,
                        );
                        w.verdict = Some(Verdict::ScaledUp(Vec::new()));
                    }
                    Atomic::ScaleUp(d, fit) => {
                        // The pods that fit existing nodes hold that room from this loop on.
                        let placed = place_on_existing(&mut snapshot, fit).placed;
                        out.booked.extend(bound(&snapshot, placed));
                        w.set(
                            ConditionType::Provisioned,
                            ConditionStatus::False,
                            CAPACITY_IS_BEING_PROVISIONED_REASON,
                            CAPACITY_IS_BEING_PROVISIONED_MSG,
                            now_ms,
                        );
                        let groups = d
                            .result
                            .increases
                            .iter()
                            .map(|i| (i.group.as_str().to_string(), i.delta))
                            .collect();
                        w.verdict = Some(Verdict::ScaledUp(groups));
                        out.scale_up = Some(*d);
                    }
                    Atomic::NotFound(why) => {
                        if let Some(never) = never_fits(input, pods, now_ms, rng, budget) {
                            let msg = format!(
                                "The node groups cannot hold all pods even at their max sizes: {never}"
                            );
                            w.set(
                                ConditionType::Failed,
                                ConditionStatus::True,
                                CAPACITY_CANNOT_FIT_REASON,
                                &msg,
                                now_ms,
                            );
                            w.verdict = Some(Verdict::CannotFit(never));
                        } else {
                            w.set(
                                ConditionType::Provisioned,
                                ConditionStatus::False,
                                CAPACITY_IS_NOT_FOUND_REASON,
                                CAPACITY_IS_NOT_FOUND_MSG,
                                now_ms,
                            );
                            w.verdict = Some(Verdict::NotFound(why));
                        }
                    }
                }
            } else {
                if r.parameters.get(PARAMETER_NO_RETRY).map(String::as_str) == Some("true") {
                    // Failed lets Kueue retry elsewhere instead of holding its quota.
                    w.set(
                        ConditionType::Failed,
                        ConditionStatus::True,
                        CAPACITY_IS_NOT_FOUND_REASON,
                        CAPACITY_IS_NOT_FOUND_NO_RETRY_MSG,
                        now_ms,
                    );
                } else {
                    w.set(
                        ConditionType::Provisioned,
                        ConditionStatus::False,
                        CAPACITY_IS_NOT_FOUND_REASON,
                        CAPACITY_IS_NOT_FOUND_MSG,
                        now_ms,
                    );
                }
                w.verdict = Some(Verdict::NotFound(why));
            }
        }
        // The turn passes: a loop that had no request to take up gives the next one to the
        // requests (upstream's wrapper orchestrator).
        self.request_turn = !(had_candidate && take_up);

        for w in work {
            let r = w.request;
            if !w.set.is_empty() {
                out.writes.push(StatusWrite {
                    namespace: r.namespace.clone(),
                    name: r.name.clone(),
                    resource_version: r.resource_version.clone(),
                    conditions: w.conditions,
                    set: w.set,
                });
            }
            out.requests.push(RequestDecision {
                key: r.key(),
                class: r.class.clone(),
                verdict: w.verdict.unwrap_or(Verdict::Waiting),
            });
        }
        out
    }
}

/// Whether `request` is a best-effort-atomic request whose scale-up was asked for and whose
/// nodes are awaited (`Provisioned=False`, [`CAPACITY_IS_BEING_PROVISIONED_REASON`]).
fn being_provisioned(request: &ProvisioningRequest) -> bool {
    &*request.class == CLASS_BEST_EFFORT_ATOMIC
        && request
            .condition(ConditionType::Provisioned)
            .is_some_and(|p| {
                p.status == ConditionStatus::False
                    && p.reason == CAPACITY_IS_BEING_PROVISIONED_REASON
            })
}

/// How many pods consuming `request` are scheduled (they hold their room themselves).
fn scheduled_consumers(view: &ClusterView<'_>, request: &ProvisioningRequest) -> usize {
    view.pods
        .iter()
        .filter(|p| p.node_name.is_some() && !p.is_terminal())
        .filter(|p| consumed_request(p) == Some((&*request.namespace, &*request.name)))
        .count()
}

/// Whether all `pods` could never be held, with why: the same scale-up decision on the cluster
/// with every node emptied (but of its DaemonSet and mirror pods), no group blocked, each group
/// free to grow to its max size under the cluster's resource limits. A backoff, a stockout or
/// room taken by other pods passes; a max size or a limit that is too small does not.
fn never_fits(
    input: &RequestsInput<'_, '_>,
    pods: Vec<Arc<Pod>>,
    now_ms: i64,
    rng: &mut ChaCha8Rng,
    budget: &mut dyn Budget,
) -> Option<String> {
    let total = pods.len();
    let view = input.view;
    let mut all: Vec<Arc<Pod>> = view
        .pods
        .iter()
        .filter(|p| p.node_name.is_some() && !p.is_terminal())
        .filter(|p| {
            p.owner
                .as_ref()
                .is_some_and(|o| o.kind.as_str() == "DaemonSet")
                || p.annotation(MIRROR_POD_ANNOTATION).is_some()
        })
        .cloned()
        .collect();
    all.extend(pods);
    let emptied = ClusterView {
        pods: &all,
        ..*view
    };
    let mut warnings = Vec::new();
    let mut snapshot = build_snapshot(&emptied, &mut warnings);
    let d = decide_scale_up_with_upcoming(
        &mut snapshot,
        &emptied,
        input.config,
        now_ms,
        &|_, _| None,
        input.upcoming,
        rng,
        budget,
    );
    let helped = d.fit_existing.len() + d.result.triggered.len();
    if d.set_aside.is_empty() && d.result.no_scale_up.is_empty() && helped == total {
        return None;
    }
    let mut why = format!("only {helped} of {total} pods fit");
    if let Some(n) = d.result.no_scale_up.first() {
        let reasons: Vec<String> = n
            .reasons
            .iter()
            .map(|(g, r)| format!("{}: {r}", g.as_str()))
            .collect();
        if !reasons.is_empty() {
            why.push_str(&format!(" ({})", reasons.join(", ")));
        }
    }
    Some(why)
}

/// The placed pods, bound to their nodes (as the view holds scheduled pods).
fn bound(
    snapshot: &ClusterSnapshot,
    placed: Vec<(Arc<Pod>, crate::scheduling::snapshot::NodeId)>,
) -> impl Iterator<Item = Arc<Pod>> + '_ {
    placed.into_iter().filter_map(|(pod, id)| {
        let node: Sym = snapshot.node(id)?.node.name;
        let mut p = (*pod).clone();
        p.node_name = Some(node);
        p.conditions.clear();
        Some(Arc::new(p))
    })
}

/// check-capacity: whether every pod fits the snapshot as it is. If so they are left placed
/// (returned with their nodes); if not, the snapshot is left as found, with why.
pub fn check_capacity(
    snapshot: &mut ClusterSnapshot,
    pods: Vec<Arc<Pod>>,
) -> (
    bool,
    Vec<(Arc<Pod>, crate::scheduling::snapshot::NodeId)>,
    String,
) {
    let total = pods.len();
    snapshot.fork();
    let placement = place_on_existing(snapshot, pods);
    if placement.remaining.is_empty() {
        // Keep the placements: the booking starts now.
        let _ = snapshot.commit();
        (true, placement.placed, String::new())
    } else {
        let _ = snapshot.revert();
        let why = format!(
            "{} of {total} pods fit the cluster",
            total - placement.remaining.len()
        );
        (false, Vec::new(), why)
    }
}

/// What best-effort-atomic decided.
enum Atomic {
    /// All pods fit existing or upcoming nodes (these).
    Fits(Vec<Arc<Pod>>),
    /// The scale-up, and the pods that fit existing or upcoming nodes.
    ScaleUp(Box<ScaleUpDecision>, Vec<Arc<Pod>>),
    NotFound(String),
}

/// best-effort-atomic: one scale-up decision for all `pods`, kept only if it helps every one.
fn atomic(
    snapshot: &mut ClusterSnapshot,
    input: &RequestsInput<'_, '_>,
    pods: Vec<Arc<Pod>>,
    now_ms: i64,
    rng: &mut ChaCha8Rng,
    budget: &mut dyn Budget,
) -> Atomic {
    let total = pods.len();
    let view = ClusterView {
        pods: &pods,
        ..*input.view
    };
    let d = decide_scale_up_with_upcoming(
        snapshot,
        &view,
        input.config,
        now_ms,
        input.blocked,
        input.upcoming,
        rng,
        budget,
    );
    let helped = d.fit_existing.len() + d.result.triggered.len();
    if d.set_aside.is_empty() && d.result.no_scale_up.is_empty() && helped == total {
        let fit = d.fit_existing.clone();
        if d.result.increases.is_empty() {
            return Atomic::Fits(fit);
        }
        return Atomic::ScaleUp(Box::new(d), fit);
    }
    let mut why = format!("only {helped} of {total} pods could be helped");
    if let Some(n) = d.result.no_scale_up.first() {
        let reasons: Vec<String> = n
            .reasons
            .iter()
            .map(|(g, r)| format!("{}: {r}", g.as_str()))
            .collect();
        if !reasons.is_empty() {
            why.push_str(&format!(" ({})", reasons.join(", ")));
        }
    }
    for note in &d.result.notes {
        why.push_str(&format!("; {note}"));
    }
    Atomic::NotFound(why)
}

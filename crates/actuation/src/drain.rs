//! One drain in flight: evict the node's pods (one at a time or all at once, each with its own
//! grace period), wait until they are gone, then delete the node; give up (and have the taint
//! removed) when an eviction fails, when budgets still refuse at the deadline, or when evicted
//! pods outlive the longest of their grace periods and a margin. With `--drain-priority-config`
//! the pods come in stages: each stage is evicted (its own eviction deadline) and waited for
//! as a whole before the next one starts, as upstream's priority evictor does.
//!
//! It only keeps the drain's state and says what comes next ([`Next`]); tickets, provider calls
//! and reports are [`crate::Actuation`]'s. It never reads a clock (times are given) and never
//! carries anything out.

use autoscaler_core::{ActionError, ErrorClass};
use autoscaler_core::{PodEviction, PodRef};
use autoscaler_model::NodeGroupId;
use autoscaler_model::Sym;

use crate::effect::Ticket;
use crate::hold::Hold;

/// How soon a drain whose evictions were refused would like to try again (the live shell's
/// interpreter retries refusals itself until the deadline, so this only paces a step timer).
const RETRY_MS: i64 = 1000;

/// Where a drain is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Evicting: `trying` holds the evictions sent and not answered yet.
    Evicting,
    /// Every evicted pod gone; the deletion held by a delay-deletion annotation, looked at
    /// again at `check_at_ms`.
    Holding {
        /// Look again at this time.
        check_at_ms: i64,
    },
    /// Every pod evicted; waiting until they have left the node (at most until `until_ms`).
    WaitingGone {
        /// Give up after this.
        until_ms: i64,
        /// Look again at this time.
        check_at_ms: i64,
        /// How long it waits in all.
        wait_ms: i64,
    },
    /// The deletion was sent.
    Deleting,
    /// Over (deleted, failed, or the node is gone): dropped from the bookkeeping.
    Finished,
}

/// What a drain needs next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Nothing now (waiting for replies, or for the next step).
    Wait,
    /// Evict these pods.
    Evict(Vec<PodEviction>),
    /// Every pod evicted: see whether they are gone.
    CheckGone,
    /// Give up with this error.
    GiveUp(ActionError),
}

/// One eviction sent and its answer so far (`None`: not answered; `Some(None)`: evicted or
/// gone; `Some(Some(e))`: refused or failed).
type Attempt = (Ticket, PodEviction, Option<Option<(ActionError, bool)>>);

/// A drain in flight.
#[derive(Clone, Debug)]
pub(crate) struct Drain {
    pub(crate) group: NodeGroupId,
    pub(crate) node: Sym,
    /// The pods of the current stage with their grace periods (those still on the node are
    /// waited for).
    pub(crate) pods: Vec<PodEviction>,
    /// The pods of the stages to come, in stage order.
    later: Vec<PodEviction>,
    sequential: bool,
    pub(crate) deadline_ms: i64,
    /// How long each stage's evictions may be refused (`--max-pod-eviction-time`).
    eviction_window_ms: i64,
    /// Pods not evicted yet and not being tried, in order.
    left: Vec<PodEviction>,
    trying: Vec<Attempt>,
    pub(crate) evicted: usize,
    /// Pods whose eviction was refused or failed in the last round.
    pub(crate) refused: Vec<(PodRef, ActionError)>,
    /// An eviction failed (not a refusal): the drain gives up when the round is over.
    failure: Option<ActionError>,
    pub(crate) phase: Phase,
    /// When an idle drain would like to be stepped again.
    retry_at_ms: i64,
    /// What holds the drain (evictions start after the delay after the taint) and the
    /// deletion (delay-deletion annotations).
    pub(crate) hold: Hold,
}

impl Drain {
    /// A drain of `node` tainted at `now_ms`, evicting once `hold` allows, giving up on
    /// refusals at `deadline_ms`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        group: NodeGroupId,
        node: Sym,
        pods: Vec<PodEviction>,
        sequential: bool,
        now_ms: i64,
        deadline_ms: i64,
        hold: Hold,
    ) -> Drain {
        let mut pods = pods;
        let first = pods.first().map_or(0, |p| p.stage);
        let cut = pods
            .iter()
            .position(|p| p.stage != first)
            .unwrap_or(pods.len());
        let later = pods.split_off(cut);
        Drain {
            group,
            node,
            left: pods.clone(),
            pods,
            later,
            sequential,
            deadline_ms,
            eviction_window_ms: deadline_ms.saturating_sub(hold.after_taint_ms),
            trying: Vec::new(),
            evicted: 0,
            refused: Vec::new(),
            failure: None,
            phase: Phase::Evicting,
            retry_at_ms: now_ms.max(hold.after_taint_ms),
            hold,
        }
    }

    /// Pods not evicted yet.
    pub(crate) fn not_evicted(&self) -> usize {
        self.left.len() + self.trying.len() + self.later.len()
    }

    /// The current stage's pods are gone: starts the next stage at `now_ms` (its evictions get
    /// their own deadline), or says there is none.
    pub(crate) fn next_stage(&mut self, now_ms: i64) -> bool {
        let Some(stage) = self.later.first().map(|p| p.stage) else {
            return false;
        };
        let cut = (self.later.iter())
            .position(|p| p.stage != stage)
            .unwrap_or(self.later.len());
        let rest = self.later.split_off(cut);
        self.pods = std::mem::replace(&mut self.later, rest);
        self.left = self.pods.clone();
        self.phase = Phase::Evicting;
        self.deadline_ms = now_ms.saturating_add(self.eviction_window_ms);
        self.retry_at_ms = now_ms;
        true
    }

    /// Stepped: a new round of evictions when none is in flight (every pod not evicted yet is
    /// tried again, whatever the time: the caller decides how often to step).
    pub(crate) fn step(&mut self, now_ms: i64) -> Next {
        match self.phase {
            Phase::Evicting if self.trying.is_empty() => {
                if !self.hold.tainted_long_enough(now_ms) {
                    return Next::Wait;
                }
                self.refused.clear();
                if self.left.is_empty() {
                    return self.settle(now_ms);
                }
                let take = if self.sequential { 1 } else { self.left.len() };
                Next::Evict(self.left.drain(..take).collect())
            }
            Phase::WaitingGone { .. } | Phase::Holding { .. } => Next::CheckGone,
            _ => Next::Wait,
        }
    }

    /// Records an eviction sent under `ticket`.
    pub(crate) fn sent(&mut self, ticket: Ticket, pod: PodEviction) {
        self.trying.push((ticket, pod, None));
    }

    /// Whether the eviction under `ticket` is this drain's.
    pub(crate) fn is_trying(&self, ticket: Ticket) -> bool {
        self.trying.iter().any(|(t, _, _)| *t == ticket)
    }

    /// An eviction answered: `Ok` evicted (or gone), `Err((error, refused))`. When the round
    /// is over, what comes next.
    pub(crate) fn answered(
        &mut self,
        ticket: Ticket,
        result: Result<(), (ActionError, bool)>,
        now_ms: i64,
    ) -> Next {
        if let Some(a) = self.trying.iter_mut().find(|(t, _, _)| *t == ticket) {
            a.2 = Some(result.err());
        }
        if self.trying.iter().any(|(_, _, r)| r.is_none()) {
            return Next::Wait;
        }
        // The round is over: refused pods go back to the front, in order.
        let mut back = Vec::new();
        for (_, eviction, r) in std::mem::take(&mut self.trying) {
            match r.flatten() {
                None => self.evicted += 1,
                Some((e, refused)) => {
                    let pod = &eviction.pod;
                    if !refused {
                        self.failure.get_or_insert_with(|| {
                            let message =
                                format!("evicting {}/{}: {}", pod.namespace, pod.name, e.message);
                            ActionError::new(e.class, message)
                        });
                    }
                    self.refused.push((pod.clone(), e));
                    back.push(eviction);
                }
            }
        }
        let blocked = !back.is_empty();
        back.append(&mut self.left);
        self.left = back;
        if self.sequential && !blocked && !self.left.is_empty() && self.failure.is_none() {
            return Next::Evict(self.left.drain(..1).collect());
        }
        self.settle(now_ms)
    }

    /// After a round: give up on a failure, or on refusals at the deadline; wait for the next
    /// step on refusals before it; see whether the pods are gone once all are evicted.
    fn settle(&mut self, now_ms: i64) -> Next {
        if let Some(e) = self.failure.take() {
            return Next::GiveUp(e);
        }
        if self.left.is_empty() {
            return Next::CheckGone;
        }
        if now_ms >= self.deadline_ms
            && let Some((pod, e)) = self.refused.first()
        {
            let message = format!("evicting {}/{}: {}", pod.namespace, pod.name, e.message);
            return Next::GiveUp(ActionError::new(e.class, message));
        }
        self.retry_at_ms = now_ms.saturating_add(RETRY_MS);
        Next::Wait
    }

    /// The longest grace period of its evictions, milliseconds (evicted pods may take that long
    /// to leave).
    pub(crate) fn longest_grace_ms(&self) -> i64 {
        let sec = self
            .pods
            .iter()
            .map(|p| p.grace_period_sec)
            .max()
            .unwrap_or(0);
        i64::try_from(sec.saturating_mul(1000)).unwrap_or(i64::MAX)
    }

    /// Starts waiting for the evicted pods to leave, at most `wait_ms`.
    pub(crate) fn wait_gone(&mut self, now_ms: i64, wait_ms: i64) {
        if !matches!(self.phase, Phase::WaitingGone { .. }) {
            self.phase = Phase::WaitingGone {
                until_ms: now_ms.saturating_add(wait_ms),
                check_at_ms: now_ms,
                wait_ms,
            };
        }
    }

    /// Some evicted pods are still on the node at `now_ms`: the error to give up with once the
    /// wait is over, else `None` (look again after `poll_ms`).
    pub(crate) fn still_there(&mut self, now_ms: i64, poll_ms: i64) -> Option<ActionError> {
        let Phase::WaitingGone {
            until_ms, wait_ms, ..
        } = self.phase
        else {
            return None;
        };
        if now_ms >= until_ms {
            return Some(ActionError::new(
                ErrorClass::Unavailable,
                format!("evicted pods still on the node after {}s", wait_ms / 1000),
            ));
        }
        self.phase = Phase::WaitingGone {
            until_ms,
            check_at_ms: now_ms.saturating_add(poll_ms),
            wait_ms,
        };
        None
    }

    /// When this drain would like to be stepped again (`None`: it waits for replies).
    pub(crate) fn wakeup(&self) -> Option<i64> {
        match self.phase {
            Phase::Evicting if self.trying.is_empty() => Some(self.retry_at_ms),
            Phase::WaitingGone {
                until_ms,
                check_at_ms,
                ..
            } => Some(check_at_ms.min(until_ms)),
            Phase::Holding { check_at_ms } => Some(check_at_ms),
            _ => None,
        }
    }
}

//! Per-group exponential backoff after failed scale-ups.
//!
//! Decides, for each node group, whether it may be grown now: after a failure (a scale-up that
//! timed out, instances the provider reports in error, a provider call that failed) the group is
//! backed off for `--initial-node-group-backoff-duration` (5m), doubling on each failure that
//! comes after the previous backoff ended up to `--max-node-group-backoff-duration` (30m); after
//! `--node-group-backoff-reset-timeout` (3h) without a failure the group starts again at the
//! initial duration (seed 004: 5m, 10m, 20m, 30m, 30m, ...).
//!
//! It is pure bookkeeping over times the caller passes in: it never reads a clock and never
//! decides what failed; it only remembers what it is told.

use std::collections::BTreeMap;
use std::time::Duration;

use autoscaler_model::{InstanceErrorClass, NodeGroupId};

/// Backoff durations, with upstream's flag names and defaults. Other crates read and set them
/// through accessors and validated setters (`backoff_options`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackoffOptions {
    /// `--initial-node-group-backoff-duration` (5m).
    pub(crate) initial: Duration,
    /// `--max-node-group-backoff-duration` (30m).
    pub(crate) max: Duration,
    /// `--node-group-backoff-reset-timeout` (3h).
    pub(crate) reset_timeout: Duration,
}

impl Default for BackoffOptions {
    fn default() -> Self {
        BackoffOptions {
            initial: Duration::from_secs(5 * 60),
            max: Duration::from_secs(30 * 60),
            reset_timeout: Duration::from_secs(3 * 60 * 60),
        }
    }
}

/// Milliseconds of a duration, saturating (a duration beyond `i64` milliseconds is "forever").
pub(crate) fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Why a group failed, as shown in events and the status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailureReason {
    /// Error class (`OutOfResources` for stockouts and quota, `Other` otherwise).
    pub class: InstanceErrorClass,
    /// Short code: the provider's error code, `timeout` for a scale-up that timed out,
    /// `cloudProviderError` for a provider call that failed.
    pub code: String,
    /// Human-readable message.
    pub message: String,
}

/// The backoff of one group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupBackoff {
    /// Failures recorded since the last reset.
    pub failures: u32,
    /// Length of the current (or last) backoff, milliseconds.
    pub duration_ms: i64,
    /// End of the backoff, milliseconds since the Unix epoch (exclusive).
    pub until_ms: i64,
    /// Time of the last failure.
    pub last_failure_ms: i64,
    /// Why the group last failed.
    pub reason: FailureReason,
}

/// Backoff of all groups.
#[derive(Clone, Debug, Default)]
pub struct Backoff {
    /// Durations.
    pub options: BackoffOptions,
    groups: BTreeMap<NodeGroupId, GroupBackoff>,
}

impl Backoff {
    /// No group backed off.
    pub fn new(options: BackoffOptions) -> Backoff {
        Backoff {
            options,
            groups: BTreeMap::new(),
        }
    }

    /// Records a failure of `group` at `now_ms` and returns until when it is backed off. A
    /// failure while the group is still backed off (several instances of one scale-up failing)
    /// extends the backoff by the same duration without doubling it; a failure after the
    /// backoff ended doubles it up to the max; a failure more than the reset timeout after the
    /// previous one starts again at the initial duration.
    pub fn record_failure(
        &mut self,
        group: &NodeGroupId,
        reason: FailureReason,
        now_ms: i64,
    ) -> i64 {
        let initial = ms(self.options.initial);
        let max = ms(self.options.max).max(initial);
        let reset = ms(self.options.reset_timeout);
        let (duration, failures) = match self.groups.get(group) {
            Some(b) if now_ms.saturating_sub(b.last_failure_ms) > reset => (initial, 1),
            Some(b) if now_ms < b.until_ms => (b.duration_ms, b.failures.saturating_add(1)),
            Some(b) => (
                b.duration_ms.saturating_mul(2).min(max),
                b.failures.saturating_add(1),
            ),
            None => (initial, 1),
        };
        let until_ms = now_ms.saturating_add(duration);
        self.groups.insert(
            group.clone(),
            GroupBackoff {
                failures,
                duration_ms: duration,
                until_ms,
                last_failure_ms: now_ms,
                reason,
            },
        );
        until_ms
    }

    /// The backoff of `group` if it is backed off at `now_ms`.
    pub fn active(&self, group: &NodeGroupId, now_ms: i64) -> Option<&GroupBackoff> {
        self.groups.get(group).filter(|b| now_ms < b.until_ms)
    }

    /// What is remembered about `group` (backed off now or not).
    pub fn get(&self, group: &NodeGroupId) -> Option<&GroupBackoff> {
        self.groups.get(group)
    }

    /// Forgets `group` (its scale-up succeeded): the next failure starts at the initial duration.
    pub fn remove(&mut self, group: &NodeGroupId) {
        self.groups.remove(group);
    }

    /// Forgets groups whose last failure is more than the reset timeout before `now_ms`.
    pub fn remove_stale(&mut self, now_ms: i64) {
        let reset = ms(self.options.reset_timeout);
        self.groups
            .retain(|_, b| now_ms.saturating_sub(b.last_failure_ms) <= reset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    fn reason() -> FailureReason {
        FailureReason {
            class: InstanceErrorClass::OutOfResources,
            code: "STOCKOUT".into(),
            message: "no capacity".into(),
        }
    }

    #[test]
    fn backoff_doubles_to_the_max_and_resets_after_quiet_time() {
        let mut b = Backoff::default();
        let g = NodeGroupId::from("ng");
        let mut now = 0;
        let mut lengths = Vec::new();
        for _ in 0..5 {
            let until = b.record_failure(&g, reason(), now);
            lengths.push((until - now) / MIN);
            assert!(b.active(&g, now).is_some());
            assert!(b.active(&g, until - 1).is_some());
            assert!(b.active(&g, until).is_none());
            // The next failure comes right after the backoff ends.
            now = until + MIN;
        }
        assert_eq!(lengths, vec![5, 10, 20, 30, 30]);
        assert_eq!(b.get(&g).map(|x| x.failures), Some(5));
        assert_eq!(b.get(&g).map(|x| x.reason.code.as_str()), Some("STOCKOUT"));

        // Three hours and a minute without failure: back to 5 minutes.
        let last = b.get(&g).map(|x| x.last_failure_ms).unwrap_or_default();
        now = last + 3 * 60 * MIN + MIN;
        let until = b.record_failure(&g, reason(), now);
        assert_eq!((until - now) / MIN, 5);
        assert_eq!(b.get(&g).map(|x| x.failures), Some(1));
    }

    #[test]
    fn failures_during_a_backoff_extend_it_without_doubling() {
        let mut b = Backoff::default();
        let g = NodeGroupId::from("ng");
        b.record_failure(&g, reason(), 0);
        let until = b.record_failure(&g, reason(), MIN);
        assert_eq!(until, 6 * MIN);
        // After it ends, the next failure doubles.
        let until = b.record_failure(&g, reason(), 7 * MIN);
        assert_eq!(until, 17 * MIN);
    }

    #[test]
    fn success_and_staleness_forget_the_group() {
        let mut b = Backoff::default();
        let g = NodeGroupId::from("ng");
        b.record_failure(&g, reason(), 0);
        b.record_failure(&g, reason(), 6 * MIN);
        b.remove(&g);
        assert_eq!(b.record_failure(&g, reason(), 20 * MIN), 25 * MIN);
        b.remove_stale(20 * MIN + 3 * 60 * MIN);
        assert!(b.get(&g).is_some());
        b.remove_stale(20 * MIN + 3 * 60 * MIN + 1);
        assert!(b.get(&g).is_none());
    }
}

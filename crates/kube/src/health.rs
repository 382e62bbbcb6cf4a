//! Liveness of the autoscaler loop, for `/health-check`.
//!
//! Decides whether the process is healthy the way upstream does: once monitoring has started
//! (when this replica starts running loops, i.e. holds the Lease), it is unhealthy when no loop
//! has started for `--max-inactivity`, or no loop has succeeded for `--max-failing-time`; until
//! the first successful loop the bound on success is `--max-startup-time` instead (the first
//! loop waits for caches and may be slow). The start of monitoring counts as both an activity and
//! a success, so a replica that never runs a loop fails after the same bounds. Before monitoring
//! starts (a standby replica) it is healthy.
//!
//! Whatever the loop does, the process is unhealthy while the API server does not serve an API
//! it needs (told by [`Health::set_api_problem`]): restarting then runs the start-up check,
//! which names what is missing, instead of waiting for caches that can never sync.
//!
//! It only keeps times it is told (as [`tokio::time::Instant`], so tests can pause the clock);
//! it never reads the clock itself and never stops anything.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug, Clone, Copy)]
struct Times {
    /// `None` until monitoring starts.
    last_activity: Option<Instant>,
    last_success: Option<Instant>,
    /// Whether a loop has succeeded since monitoring started.
    succeeded: bool,
}

/// `--max-startup-time`'s default.
pub const DEFAULT_MAX_STARTUP_TIME: Duration = Duration::from_secs(20 * 60);

/// The loop's liveness. `Send + Sync`: the loop records, the HTTP server checks.
#[derive(Debug)]
pub struct Health {
    max_inactivity: Duration,
    max_failing_time: Duration,
    max_startup_time: Duration,
    times: Mutex<Times>,
    /// Why the API server cannot be worked with now (an API it needs is not served).
    api_problem: Mutex<Option<String>>,
    /// The last verdict given, to log changes of health once.
    last_healthy: Mutex<Option<bool>>,
}

impl Health {
    /// Not monitoring yet (healthy) with the two bounds (`--max-inactivity`,
    /// `--max-failing-time`) and `--max-startup-time`'s default.
    pub fn new(max_inactivity: Duration, max_failing_time: Duration) -> Health {
        Health {
            max_inactivity,
            max_failing_time,
            max_startup_time: DEFAULT_MAX_STARTUP_TIME,
            times: Mutex::new(Times {
                last_activity: None,
                last_success: None,
                succeeded: false,
            }),
            api_problem: Mutex::new(None),
            last_healthy: Mutex::new(None),
        }
    }

    /// With `--max-startup-time`: how long after monitoring starts the first loop may take to
    /// succeed.
    pub fn with_max_startup_time(self, max_startup_time: Duration) -> Health {
        Health {
            max_startup_time,
            ..self
        }
    }

    /// Why the API server cannot be worked with (an API it needs is not served), or `None`
    /// once it can again. True when this changed what was known.
    pub fn set_api_problem(&self, problem: Option<String>) -> bool {
        let mut p = self.api_problem.lock().unwrap_or_else(|e| e.into_inner());
        let changed = *p != problem;
        *p = problem;
        changed
    }

    fn times(&self) -> std::sync::MutexGuard<'_, Times> {
        // The data is two plain timestamps: a panic elsewhere cannot leave it inconsistent.
        self.times.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts monitoring at `now` (this replica starts running loops): from here on the bounds
    /// apply, counted from `now` until the first loop.
    pub fn start_monitoring(&self, now: Instant) {
        let mut t = self.times();
        t.last_activity = Some(now);
        t.last_success = Some(now);
        t.succeeded = false;
    }

    /// Stops monitoring (this replica stopped running loops, e.g. lost the Lease): healthy again.
    pub fn stop_monitoring(&self) {
        let mut t = self.times();
        t.last_activity = None;
        t.last_success = None;
        t.succeeded = false;
    }

    /// A loop started at `now` (starts monitoring if it had not started).
    pub fn loop_started(&self, now: Instant) {
        let mut t = self.times();
        t.last_activity = Some(now);
        t.last_success.get_or_insert(now);
    }

    /// A loop finished successfully at `now`.
    pub fn loop_succeeded(&self, now: Instant) {
        let mut t = self.times();
        t.last_activity = Some(now);
        t.last_success = Some(now);
        t.succeeded = true;
    }

    /// A loop failed at `now`: it still counts as activity, not as success.
    pub fn loop_failed(&self, now: Instant) {
        let mut t = self.times();
        t.last_activity = Some(now);
        t.last_success.get_or_insert(now);
    }

    /// `Ok` when healthy at `now`; otherwise why not. A change of health is logged once: a
    /// warning when it turns unhealthy, info when it recovers.
    pub fn check(&self, now: Instant) -> Result<(), String> {
        let verdict = self.verdict(now);
        if self.changed(verdict.is_ok()) {
            match &verdict {
                Ok(()) => tracing::info!("healthy again"),
                Err(why) => tracing::warn!(reason = %why, "unhealthy"),
            }
        }
        verdict
    }

    /// Records `healthy` as the last verdict; true when it differs from a previous one (the
    /// first verdict counts as a change only when unhealthy).
    fn changed(&self, healthy: bool) -> bool {
        let mut last = self.last_healthy.lock().unwrap_or_else(|e| e.into_inner());
        let changed = last.map_or(!healthy, |l| l != healthy);
        *last = Some(healthy);
        changed
    }

    fn verdict(&self, now: Instant) -> Result<(), String> {
        if let Some(p) = &*self.api_problem.lock().unwrap_or_else(|e| e.into_inner()) {
            return Err(p.clone());
        }
        let t = *self.times();
        if let Some(last) = t.last_activity {
            let since = now.saturating_duration_since(last);
            if since > self.max_inactivity {
                return Err(format!(
                    "last activity {}s ago, more than the max inactivity of {}s",
                    since.as_secs(),
                    self.max_inactivity.as_secs()
                ));
            }
        }
        if let Some(last) = t.last_success {
            let since = now.saturating_duration_since(last);
            if t.succeeded && since > self.max_failing_time {
                return Err(format!(
                    "last successful loop {}s ago, more than the max failing time of {}s",
                    since.as_secs(),
                    self.max_failing_time.as_secs()
                ));
            }
            if !t.succeeded && since > self.max_startup_time {
                return Err(format!(
                    "no successful loop {}s after start, more than the max startup time of {}s",
                    since.as_secs(),
                    self.max_startup_time.as_secs()
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::advance;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn changes_of_health_are_noticed_once() {
        let h = Health::new(Duration::from_secs(1), Duration::from_secs(1));
        assert!(!h.changed(true), "healthy from the start is no change");
        assert!(!h.changed(true));
        assert!(h.changed(false));
        assert!(!h.changed(false), "still unhealthy: logged once");
        assert!(h.changed(true));
    }

    fn health() -> Health {
        Health::new(10 * MIN, 15 * MIN)
    }

    #[tokio::test(start_paused = true)]
    async fn a_standby_replica_is_healthy_however_long_it_waits() {
        let h = health();
        advance(60 * MIN).await;
        assert_eq!(h.check(Instant::now()), Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_loop_flips_the_check_and_a_new_loop_recovers_it() {
        let h = health();
        h.start_monitoring(Instant::now());
        // Before the first loop the time since monitoring started counts.
        advance(10 * MIN).await;
        assert_eq!(h.check(Instant::now()), Ok(()));
        advance(Duration::from_secs(1)).await;
        let err = h.check(Instant::now()).expect_err("no loop for 10m1s");
        assert!(err.contains("max inactivity"), "{err}");

        h.loop_started(Instant::now());
        h.loop_succeeded(Instant::now());
        assert_eq!(h.check(Instant::now()), Ok(()));
        // Loops every 10s keep it healthy.
        for _ in 0..100 {
            advance(Duration::from_secs(10)).await;
            h.loop_started(Instant::now());
            h.loop_succeeded(Instant::now());
        }
        assert_eq!(h.check(Instant::now()), Ok(()));
        // The loop stalls.
        advance(11 * MIN).await;
        assert!(h.check(Instant::now()).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn failing_loops_flip_the_check_after_the_max_failing_time() {
        let h = health();
        h.loop_started(Instant::now());
        h.loop_succeeded(Instant::now());
        // Loops keep running but fail.
        for _ in 0..90 {
            advance(Duration::from_secs(10)).await;
            h.loop_started(Instant::now());
            h.loop_failed(Instant::now());
        }
        // 15 minutes since the last success: exactly the bound, still healthy.
        assert_eq!(h.check(Instant::now()), Ok(()));
        advance(Duration::from_secs(10)).await;
        h.loop_started(Instant::now());
        h.loop_failed(Instant::now());
        let err = h.check(Instant::now()).expect_err("failing for 15m10s");
        assert!(err.contains("max failing time"), "{err}");
        // One success recovers.
        h.loop_succeeded(Instant::now());
        assert_eq!(h.check(Instant::now()), Ok(()));
    }

    /// Until the first success the bound is `--max-startup-time`, after it
    /// `--max-failing-time`; a new term starts over.
    #[tokio::test(start_paused = true)]
    async fn the_first_success_may_take_the_max_startup_time() {
        let h = health().with_max_startup_time(20 * MIN);
        h.start_monitoring(Instant::now());
        // Loops run but fail for 20 minutes: still starting, healthy.
        for _ in 0..120 {
            advance(Duration::from_secs(10)).await;
            h.loop_started(Instant::now());
            h.loop_failed(Instant::now());
        }
        assert_eq!(h.check(Instant::now()), Ok(()));
        advance(Duration::from_secs(10)).await;
        h.loop_started(Instant::now());
        h.loop_failed(Instant::now());
        let err = h.check(Instant::now()).expect_err("no success for 20m10s");
        assert!(err.contains("max startup time"), "{err}");
        // One success: from now on the failing time (15m) bounds.
        h.loop_succeeded(Instant::now());
        for _ in 0..91 {
            advance(Duration::from_secs(10)).await;
            h.loop_started(Instant::now());
            h.loop_failed(Instant::now());
        }
        let err = h.check(Instant::now()).expect_err("failing for 15m10s");
        assert!(err.contains("max failing time"), "{err}");
        // A new term gets the startup time again.
        h.stop_monitoring();
        h.start_monitoring(Instant::now());
        advance(16 * MIN).await;
        h.loop_started(Instant::now());
        h.loop_failed(Instant::now());
        assert_eq!(h.check(Instant::now()), Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_monitoring_makes_it_healthy_again() {
        let h = health();
        h.start_monitoring(Instant::now());
        advance(20 * MIN).await;
        assert!(h.check(Instant::now()).is_err());
        h.stop_monitoring();
        assert_eq!(h.check(Instant::now()), Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_missing_api_fails_the_check_even_on_a_standby_replica() {
        let h = health();
        assert!(h.set_api_problem(Some("policy/v1 poddisruptionbudgets not served".into())));
        assert!(!h.set_api_problem(Some("policy/v1 poddisruptionbudgets not served".into())));
        let err = h.check(Instant::now()).expect_err("policy/v1 gone");
        assert!(err.contains("policy/v1 poddisruptionbudgets"), "{err}");
        h.start_monitoring(Instant::now());
        h.loop_started(Instant::now());
        h.loop_succeeded(Instant::now());
        assert!(h.check(Instant::now()).is_err());
        assert!(h.set_api_problem(None));
        assert_eq!(h.check(Instant::now()), Ok(()));
    }
}

//! The validated way into [`BackoffOptions`]: one accessor per field, named like it, a setter
//! per field, and a constructor that also checks the fields against each other. The initial
//! backoff and the reset timeout must not be zero (a group would never wait, or never be
//! forgiven at once); the longest backoff must not be shorter than the first.
//!
//! The setters check one value each: a shell setting both durations checks their order once
//! both are set (the loop caps the backoff at the longer of the two either way).

use std::time::Duration;

use crate::cluster_state::backoff::BackoffOptions;
use crate::invalid_option::{InvalidOption, not_shorter_than, positive};

impl BackoffOptions {
    /// Backoff durations, checked: `initial` and `reset_timeout` above zero, `max` at least
    /// `initial`.
    pub fn new(
        initial: Duration,
        max: Duration,
        reset_timeout: Duration,
    ) -> Result<BackoffOptions, InvalidOption> {
        Ok(BackoffOptions {
            initial: positive("initial", initial)?,
            max: not_shorter_than("max", max, "initial", initial)?,
            reset_timeout: positive("reset_timeout", reset_timeout)?,
        })
    }

    /// The first backoff of a group after a failed scale-up
    /// (`--initial-node-group-backoff-duration`).
    pub fn initial(&self) -> Duration {
        self.initial
    }

    /// The longest backoff of a group (`--max-node-group-backoff-duration`).
    pub fn max(&self) -> Duration {
        self.max
    }

    /// The time without failure after which a group's backoff starts over
    /// (`--node-group-backoff-reset-timeout`).
    pub fn reset_timeout(&self) -> Duration {
        self.reset_timeout
    }

    /// Sets [`Self::initial`]; it must be above zero.
    pub fn set_initial(&mut self, value: Duration) -> Result<(), InvalidOption> {
        self.initial = positive("initial", value)?;
        Ok(())
    }

    /// Sets [`Self::max`] (its order against [`Self::initial`] is the caller's to check once
    /// both are set).
    pub fn set_max(&mut self, value: Duration) {
        self.max = value;
    }

    /// Sets [`Self::reset_timeout`]; it must be above zero.
    pub fn set_reset_timeout(&mut self, value: Duration) -> Result<(), InvalidOption> {
        self.reset_timeout = positive("reset_timeout", value)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::invalid_option::OptionRule;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn the_constructor_checks_each_value_and_their_order() {
        let b = BackoffOptions::new(MIN, 10 * MIN, 60 * MIN).unwrap();
        assert_eq!(
            (b.initial(), b.max(), b.reset_timeout()),
            (MIN, 10 * MIN, 60 * MIN)
        );
        let e = BackoffOptions::new(Duration::ZERO, MIN, MIN).unwrap_err();
        assert_eq!((e.field(), e.rule()), ("initial", OptionRule::Positive));
        let e = BackoffOptions::new(MIN, MIN, Duration::ZERO).unwrap_err();
        assert_eq!(e.field(), "reset_timeout");
        let e = BackoffOptions::new(10 * MIN, MIN, MIN).unwrap_err();
        assert_eq!(e.to_string(), "max = 60s: must not be shorter than initial");
    }

    #[test]
    fn a_zero_duration_is_refused_by_the_setters_and_the_value_kept() {
        let mut b = BackoffOptions::default();
        assert!(b.set_initial(Duration::ZERO).is_err());
        assert!(b.set_reset_timeout(Duration::ZERO).is_err());
        assert_eq!(b, BackoffOptions::default());
        b.set_initial(MIN).unwrap();
        b.set_max(2 * MIN);
        b.set_reset_timeout(3 * MIN).unwrap();
        assert_eq!(
            (b.initial(), b.max(), b.reset_timeout()),
            (MIN, 2 * MIN, 3 * MIN)
        );
    }
}

//! The validated way into [`RequestOptions`]: one accessor per field, named like it, and one
//! setter per field. The times (backoffs, booking, expiry) are milliseconds and must not be
//! negative; the switch, the cache size (0 keeps one request, as 1 does) and the processor
//! instance (any name, empty for none) have no impossible value, so their setters are unchecked.
//!
//! It decides which single values a field takes; it never checks one field against another (the
//! wait is capped at the longest backoff either way) and never changes a default (`Default`
//! states them).

use crate::invalid_option::{InvalidOption, not_negative};
use crate::provisioning::request::RequestOptions;

impl RequestOptions {
    /// Whether ProvisioningRequests are acted on at all (`--enable-provisioning-requests`).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The first wait before a request whose capacity was not found is tried again, in
    /// milliseconds (`--provisioning-request-initial-backoff-time`).
    pub fn initial_backoff_ms(&self) -> i64 {
        self.initial_backoff_ms
    }

    /// The longest wait between tries of a request, in milliseconds (the wait doubles up to it)
    /// (`--provisioning-request-max-backoff-time`).
    pub fn max_backoff_ms(&self) -> i64 {
        self.max_backoff_ms
    }

    /// The requests whose backoff is remembered (`--provisioning-request-max-backoff-cache-size`).
    pub fn max_backoff_cache_size(&self) -> usize {
        self.max_backoff_cache_size
    }

    /// The check-capacity requests' `processorInstance` this instance serves; empty: those
    /// without the parameter (`--check-capacity-processor-instance`).
    pub fn check_capacity_processor_instance(&self) -> &str {
        &self.check_capacity_processor_instance
    }

    /// How long a booking holds its room, in milliseconds ([`crate::BOOKING_MS`]; not a flag
    /// upstream).
    pub fn booking_ms(&self) -> i64 {
        self.booking_ms
    }

    /// How long a request may wait for `Provisioned=True` before it fails, in milliseconds
    /// ([`crate::EXPIRY_MS`]; not a flag upstream).
    pub fn expiry_ms(&self) -> i64 {
        self.expiry_ms
    }

    /// Sets [`Self::enabled`].
    pub fn set_enabled(&mut self, value: bool) {
        self.enabled = value;
    }

    /// Sets [`Self::initial_backoff_ms`]; it must not be negative.
    pub fn set_initial_backoff_ms(&mut self, value: i64) -> Result<(), InvalidOption> {
        self.initial_backoff_ms = not_negative("initial_backoff_ms", value)?;
        Ok(())
    }

    /// Sets [`Self::max_backoff_ms`]; it must not be negative.
    pub fn set_max_backoff_ms(&mut self, value: i64) -> Result<(), InvalidOption> {
        self.max_backoff_ms = not_negative("max_backoff_ms", value)?;
        Ok(())
    }

    /// Sets [`Self::max_backoff_cache_size`].
    pub fn set_max_backoff_cache_size(&mut self, value: usize) {
        self.max_backoff_cache_size = value;
    }

    /// Sets [`Self::check_capacity_processor_instance`].
    pub fn set_check_capacity_processor_instance(&mut self, value: String) {
        self.check_capacity_processor_instance = value;
    }

    /// Sets [`Self::booking_ms`]; it must not be negative.
    pub fn set_booking_ms(&mut self, value: i64) -> Result<(), InvalidOption> {
        self.booking_ms = not_negative("booking_ms", value)?;
        Ok(())
    }

    /// Sets [`Self::expiry_ms`]; it must not be negative.
    pub fn set_expiry_ms(&mut self, value: i64) -> Result<(), InvalidOption> {
        self.expiry_ms = not_negative("expiry_ms", value)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::invalid_option::OptionRule;

    #[test]
    fn a_negative_time_is_refused_and_the_value_kept() {
        let mut o = RequestOptions::default();
        let e = o.set_initial_backoff_ms(-1).unwrap_err();
        assert_eq!(
            (e.field(), e.rule()),
            ("initial_backoff_ms", OptionRule::NotNegative)
        );
        assert_eq!(
            e.to_string(),
            "initial_backoff_ms = -1: must not be negative"
        );
        assert_eq!(
            o.set_max_backoff_ms(-1).unwrap_err().field(),
            "max_backoff_ms"
        );
        assert_eq!(o.set_booking_ms(-1).unwrap_err().field(), "booking_ms");
        assert_eq!(o.set_expiry_ms(i64::MIN).unwrap_err().field(), "expiry_ms");
        assert_eq!(o, RequestOptions::default());
    }

    #[test]
    fn the_setters_land_in_their_fields() {
        let mut o = RequestOptions::default();
        o.set_enabled(true);
        o.set_initial_backoff_ms(0).unwrap();
        o.set_max_backoff_ms(2).unwrap();
        o.set_max_backoff_cache_size(3);
        o.set_check_capacity_processor_instance("east".into());
        o.set_booking_ms(4).unwrap();
        o.set_expiry_ms(5).unwrap();
        assert!(o.enabled());
        assert_eq!(o.check_capacity_processor_instance(), "east");
        let times = [
            o.initial_backoff_ms(),
            o.max_backoff_ms(),
            o.booking_ms(),
            o.expiry_ms(),
        ];
        assert_eq!(times, [0, 2, 4, 5]);
        assert_eq!(o.max_backoff_cache_size(), 3);
    }
}

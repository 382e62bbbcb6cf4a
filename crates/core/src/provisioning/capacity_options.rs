//! The way into [`CapacityOptions`]: one accessor per field, named like it. The two buffer
//! switches have no impossible value (unchecked setters); the ProvisioningRequests' options are
//! an option group of their own, read through an accessor and changed through a `_mut` borrow
//! and its validated setters.

use crate::provisioning::CapacityOptions;
use crate::provisioning::request::RequestOptions;

impl CapacityOptions {
    /// The ProvisioningRequests' options (`--enable-provisioning-requests` and its tuning flags).
    pub fn requests(&self) -> &RequestOptions {
        &self.requests
    }

    /// [`Self::requests`], to change through its setters.
    pub fn requests_mut(&mut self) -> &mut RequestOptions {
        &mut self.requests
    }

    /// Whether buffers are resolved and their status written
    /// (`--capacity-buffer-controller-enabled`).
    pub fn buffer_controller(&self) -> bool {
        self.buffer_controller
    }

    /// Whether the ready buffers' virtual pods join the loop's pending pods
    /// (`--capacity-buffer-pod-injection-enabled`).
    pub fn buffer_pods(&self) -> bool {
        self.buffer_pods
    }

    /// Sets [`Self::buffer_controller`].
    pub fn set_buffer_controller(&mut self, value: bool) {
        self.buffer_controller = value;
    }

    /// Sets [`Self::buffer_pods`].
    pub fn set_buffer_pods(&mut self, value: bool) {
        self.buffer_pods = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switches_and_the_requests_land_and_any_sees_them() {
        let mut o = CapacityOptions::default();
        assert!(!o.any());
        o.set_buffer_pods(true);
        assert!(o.buffer_pods() && !o.buffer_controller() && o.any());
        o.set_buffer_pods(false);
        o.set_buffer_controller(true);
        assert!(o.buffer_controller() && o.any());
        o.set_buffer_controller(false);
        o.requests_mut().set_enabled(true);
        assert!(o.requests().enabled() && o.any());
        assert!(o.requests_mut().set_max_backoff_ms(-5).is_err());
        assert_eq!(o.requests().max_backoff_ms(), 600_000);
    }
}

//! Capacity on request: what the autoscaler decides for ProvisioningRequests and
//! CapacityBuffers (the objects are read in [`crate::model::provisioning_request`] and
//! [`crate::model::capacity_buffer`]).
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
pub mod conditions;
pub mod request;

#[cfg(test)]
mod tests;

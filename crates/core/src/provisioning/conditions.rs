//! The conditions the autoscaler writes on a ProvisioningRequest, with upstream's reasons and
//! messages, and how a new one joins the status (upstream's `AddOrUpdateCondition`: a condition
//! of the same type is replaced, in place; the transition time is always the decision's time).
//!
//! It decides nothing about when to write them (see [`super::request`]); it never reads a clock.

use autoscaler_model::{ConditionStatus, ConditionType, RequestCondition as Condition};

/// Reason of `Accepted=True`.
pub const ACCEPTED_REASON: &str = "Accepted";
/// Message of `Accepted=True`.
pub const ACCEPTED_MSG: &str = "ProvisioningRequest is accepted by ClusterAutoscaler";
/// Reason of `Provisioned=False` (or `Failed=True` with `noRetry`): the room is not there.
pub const CAPACITY_IS_NOT_FOUND_REASON: &str = "CapacityIsNotFound";
/// Message of `Provisioned=False` with [`CAPACITY_IS_NOT_FOUND_REASON`].
pub const CAPACITY_IS_NOT_FOUND_MSG: &str = "Capacity is not found, CA will try to find it later.";
/// Message of `Failed=True` with [`CAPACITY_IS_NOT_FOUND_REASON`] (check-capacity, `noRetry`).
pub const CAPACITY_IS_NOT_FOUND_NO_RETRY_MSG: &str = "CA could not find requested capacity";
/// Reason of `Provisioned=True` when the pods fit the cluster as it is.
pub const CAPACITY_IS_FOUND_REASON: &str = "CapacityIsFound";
/// Message of `Provisioned=True` with [`CAPACITY_IS_FOUND_REASON`].
pub const CAPACITY_IS_FOUND_MSG: &str = "Capacity is found in the cluster";
/// Reason of `Provisioned=True` when the scale-up for all pods was requested.
pub const CAPACITY_IS_PROVISIONED_REASON: &str = "CapacityIsProvisioned";
/// Message of `Provisioned=True` with [`CAPACITY_IS_PROVISIONED_REASON`] (upstream's text).
pub const CAPACITY_IS_PROVISIONED_MSG: &str = "Capacity is found in the cluster";
/// Reason of `Provisioned=False` while the nodes of a best-effort-atomic scale-up are on their
/// way (ours: upstream writes `Provisioned=True` when it asks for them; we write it once the
/// pods fit Ready nodes, so a job admitted on it starts at once).
pub const CAPACITY_IS_BEING_PROVISIONED_REASON: &str = "CapacityIsBeingProvisioned";
/// Message of `Provisioned=False` with [`CAPACITY_IS_BEING_PROVISIONED_REASON`].
pub const CAPACITY_IS_BEING_PROVISIONED_MSG: &str =
    "Scale-up for all pods is requested, CA waits for the nodes to be Ready.";
/// Reason of `Failed=True` for a best-effort-atomic request that can never fit: the node
/// groups at their max sizes (and the cluster's resource limits) cannot hold all its pods even
/// with every node empty (ours: upstream retries such a request until it expires).
pub const CAPACITY_CANNOT_FIT_REASON: &str = "CapacityCannotFit";
/// Reason of `Failed=True` when the pods could not be made from the PodTemplates.
pub const FAILED_TO_CREATE_PODS_REASON: &str = "FailedToCreatePods";
/// Reason of `Failed=True` when the pods of a booking could not be made any more.
pub const FAILED_TO_BOOK_CAPACITY_REASON: &str = "FailedToBookCapacity";
/// Reason of `BookingExpired=True` after the booking time.
pub const RESERVATION_EXPIRED_REASON: &str = "CapacityReservationTimeExpired";
/// Message of `BookingExpired=True` with [`RESERVATION_EXPIRED_REASON`].
pub const RESERVATION_EXPIRED_MSG: &str = "Capacity reservation time is expired";
/// Reason of `BookingExpired=True` once every pod of the request is scheduled.
pub const BOOKING_CONSUMED_REASON: &str = "CapacityBookingConsumed";
/// Message of `BookingExpired=True` with [`BOOKING_CONSUMED_REASON`] (upstream's
/// `CapacityBookingConsumedMsg`).
pub const BOOKING_CONSUMED_MSG: &str = "Capacity booking consumed: all pods scheduled";
/// Reason of `Failed=True` for a request never provisioned within the expiry time.
pub const EXPIRED_REASON: &str = "Expired";
/// Message of `Failed=True` with [`EXPIRED_REASON`].
pub const EXPIRED_MSG: &str = "ProvisioningRequest is expired";

/// Adds `type_` to `conditions`, or replaces the condition of that type where it stands.
pub fn add_or_update(
    conditions: &mut Vec<Condition>,
    type_: ConditionType,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    generation: i64,
    now_ms: i64,
) {
    let new = Condition {
        type_,
        status,
        reason: reason.into(),
        message: message.into(),
        last_transition_ms: now_ms,
        observed_generation: generation,
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => *c = new,
        None => conditions.push(new),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_of_the_same_type_is_replaced_where_it_stands() {
        let mut cs = Vec::new();
        add_or_update(
            &mut cs,
            ConditionType::Accepted,
            ConditionStatus::True,
            ACCEPTED_REASON,
            ACCEPTED_MSG,
            1,
            10,
        );
        add_or_update(
            &mut cs,
            ConditionType::Provisioned,
            ConditionStatus::False,
            CAPACITY_IS_NOT_FOUND_REASON,
            CAPACITY_IS_NOT_FOUND_MSG,
            1,
            10,
        );
        add_or_update(
            &mut cs,
            ConditionType::Accepted,
            ConditionStatus::True,
            ACCEPTED_REASON,
            ACCEPTED_MSG,
            2,
            20,
        );
        let types: Vec<ConditionType> = cs.iter().map(|c| c.type_).collect();
        assert_eq!(types, [ConditionType::Accepted, ConditionType::Provisioned]);
        assert_eq!(cs[0].last_transition_ms, 20);
        assert_eq!(cs[0].observed_generation, 2);
        assert_eq!(
            cs[1].message,
            "Capacity is not found, CA will try to find it later."
        );
    }
}

//! What became of the actions the core asked for, as the shells report it back: typed outcomes
//! with provider and API failures sorted into classes, so a refused permission can be told from
//! a stockout without reading a message.
//!
//! It decides nothing by itself ([`crate::autoscaler::Autoscaler::observe`] feeds an outcome
//! into the state it concerns) and never carries an action out.

use autoscaler_model::NodeGroupId;
use autoscaler_model::Sym;

/// The class of a failed provider or API call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// Not allowed (HTTP 403): a missing RBAC rule, not a lack of capacity.
    Forbidden,
    /// The object or group is not there (HTTP 404, an unknown node group).
    NotFound,
    /// The object changed meanwhile (HTTP 409), still conflicting after the retries.
    Conflict,
    /// The provider refused the change because it would remove running machines.
    RefusedBySafety,
    /// The request is invalid: outside the group's size limits, a node of another group, an
    /// object the API rejects (HTTP 400, 422).
    Invalid,
    /// The API or the provider cannot serve it now (HTTP 429 from a budget, 5xx, timeouts).
    Unavailable,
    /// Anything else.
    Other,
}

impl ErrorClass {
    /// The class of an HTTP status code of the Kubernetes API.
    pub fn of_http_status(code: u16) -> ErrorClass {
        match code {
            403 => ErrorClass::Forbidden,
            404 => ErrorClass::NotFound,
            409 => ErrorClass::Conflict,
            400 | 422 => ErrorClass::Invalid,
            429 | 500..=599 => ErrorClass::Unavailable,
            _ => ErrorClass::Other,
        }
    }

    /// A short name for logs and metrics labels (`forbidden`, `notFound`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Forbidden => "forbidden",
            ErrorClass::NotFound => "notFound",
            ErrorClass::Conflict => "conflict",
            ErrorClass::RefusedBySafety => "refusedBySafety",
            ErrorClass::Invalid => "invalid",
            ErrorClass::Unavailable => "unavailable",
            ErrorClass::Other => "other",
        }
    }
}

/// A failed call: its class, and the message for people.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ActionError {
    /// The class the shell sorted it into.
    pub class: ErrorClass,
    /// What the provider or the API said.
    pub message: String,
}

impl ActionError {
    /// An error of `class` saying `message`.
    pub fn new(class: ErrorClass, message: impl Into<String>) -> ActionError {
        ActionError {
            class,
            message: message.into(),
        }
    }
}

/// What became of an action, as far as the core's state is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Growing `group` failed: the group is backed off and a `FailedToScaleUpGroup` event
    /// comes with the next loop.
    ScaleUpFailed {
        /// The group.
        group: NodeGroupId,
        /// Why.
        error: ActionError,
    },
    /// A node was deleted: `--scale-down-delay-after-delete` starts and its unneeded timer goes.
    NodeDeleted {
        /// The node.
        node: Sym,
    },
    /// Deleting a node (or draining it) failed: `--scale-down-delay-after-failure` starts.
    NodeDeletionFailed {
        /// The node.
        node: Sym,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autoscaler::{Autoscaler, AutoscalerOptions};

    #[test]
    fn observe_backs_a_failed_group_off_and_starts_the_scale_down_delays() {
        let mut a = Autoscaler::new(AutoscalerOptions::default());
        let group = NodeGroupId::from("MachineDeployment/default/g");
        let error = ActionError::new(ErrorClass::Forbidden, "403: no rule allows it");
        a.observe(
            &Outcome::ScaleUpFailed {
                group: group.clone(),
                error,
            },
            1_000,
        );
        let backoff = a.cluster_state().backoff.get(&group).expect("backed off");
        assert_eq!(backoff.last_failure_ms, 1_000);
        // The backoff code stays upstream's, whatever the class.
        assert_eq!(backoff.reason.code, "cloudProviderError");
        assert_eq!(backoff.reason.message, "403: no rule allows it");

        a.observe(
            &Outcome::NodeDeletionFailed {
                node: Sym::new("n"),
            },
            2_000,
        );
        assert_eq!(a.scale_down_state().last_failure_ms, Some(2_000));
        a.observe(
            &Outcome::NodeDeleted {
                node: Sym::new("n"),
            },
            3_000,
        );
        assert_eq!(a.scale_down_state().last_delete_ms, Some(3_000));
    }

    #[test]
    fn http_statuses_have_classes() {
        assert_eq!(ErrorClass::of_http_status(403), ErrorClass::Forbidden);
        assert_eq!(ErrorClass::of_http_status(404), ErrorClass::NotFound);
        assert_eq!(ErrorClass::of_http_status(409), ErrorClass::Conflict);
        assert_eq!(ErrorClass::of_http_status(422), ErrorClass::Invalid);
        assert_eq!(ErrorClass::of_http_status(503), ErrorClass::Unavailable);
        assert_eq!(ErrorClass::of_http_status(418), ErrorClass::Other);
    }
}

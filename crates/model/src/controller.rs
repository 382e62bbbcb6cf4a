//! Workload controllers as the drain rules see them: what the caller knows about a pod's
//! controller object (ReplicaSet, Job, StatefulSet...), and the lookup that answers it.
//!
//! The lookup is part of the model because the caller fills it from the objects it holds
//! (see `objects`); the drain rules that read it live in the decision core. Nothing here decides
//! whether a pod may be evicted.

use crate::intern::Sym;
use crate::pod::OwnerRef;

/// What the caller knows about a pod's controller object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControllerState {
    /// Not known (the caller has no workload objects of this kind): no check is made.
    Unknown,
    /// Known not to exist.
    Missing,
    /// Exists, with `spec.replicas` where the kind has one.
    Present {
        /// Desired replicas, if the kind has the field and it is set.
        replicas: Option<i32>,
    },
}

/// Looks up pod controllers (ReplicaSets, Jobs, ...) in the caller's view of the cluster.
pub trait ControllerLookup {
    /// The state of the controller `owner` of a pod in `namespace` (controllers live in the
    /// namespace of their pods).
    fn controller(&self, namespace: Sym, owner: &OwnerRef) -> ControllerState;
}

/// A lookup that knows no controller: the existence and replica checks never block.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoControllerLookup;

impl ControllerLookup for NoControllerLookup {
    fn controller(&self, _: Sym, _: &OwnerRef) -> ControllerState {
        ControllerState::Unknown
    }
}

impl<F: Fn(Sym, &OwnerRef) -> ControllerState> ControllerLookup for F {
    fn controller(&self, namespace: Sym, owner: &OwnerRef) -> ControllerState {
        self(namespace, owner)
    }
}

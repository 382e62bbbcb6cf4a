//! The decision core of the cluster autoscaler.
//!
//! Everything here is a pure, synchronous function of a cluster view and a clock value passed in
//! by the caller: the core never performs I/O, never reads the wall clock, never spawns tasks and
//! never depends on tokio or kube. That is what lets one core serve `run`, `plan` and `simulate`.
//!
//! Layers, bottom up: [`quantity`] (exact Kubernetes quantities), [`intern`] and [`labels`]
//! (compact interned strings and selectors), [`resources`] (resource vectors), the model
//! ([`pod`], [`node`], [`taints`], [`affinity`]), the scheduling simulator ([`snapshot`],
//! [`predicates`]) and the bin-packing [`estimator`].
#![warn(missing_docs)]

pub mod actions;
pub mod autoscaler;
pub mod cluster_state;
pub mod model;
pub mod names;
pub mod safety;
pub mod scale_down;
pub mod scale_up;
pub mod scheduling;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;
pub mod yaml_depth;

// Old paths of modules that moved under their concern, kept for the shells and for imports
// inside the core; they go once those import from the new places or from the root.
pub use cluster_state::backoff;
pub use model::{
    convert, daemonset, duration, intern, labels, limits, node, node_group, objects, pdb, pod,
    quantity, resources, store, taints,
};
pub use scale_down::{drain, removal, unneeded, utilization};
pub use scale_up::{balance, estimator, expander, pending, template};
pub use scheduling::{affinity, predicates, snapshot};

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
pub mod affinity;
pub mod autoscaler;
pub mod backoff;
pub mod balance;
pub mod cluster_state;
pub mod convert;
pub mod daemonset;
pub mod duration;
pub mod estimator;
pub mod expander;
pub mod intern;
pub mod labels;
pub mod limits;
pub mod names;
pub mod node;
pub mod node_group;
pub mod objects;
pub mod pdb;
pub mod pending;
pub mod pod;
pub mod predicates;
pub mod quantity;
pub mod resources;
pub mod safety;
pub mod scale_down;
pub mod scale_up;
pub mod snapshot;
pub mod store;
pub mod taints;
pub mod template;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;
pub mod yaml_depth;

// Old paths of modules that moved under their concern, kept for the shells and for imports
// inside the core; they go once those import from the new places or from the root.
pub use scale_down::{drain, removal, unneeded, utilization};

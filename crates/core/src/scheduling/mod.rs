//! The scheduling simulator: a [`snapshot`] of nodes and pods that can be forked and reverted,
//! the scheduler's [`predicates`] (resources, taints, node and pod affinity, topology
//! spread, [`volumes`], DRA claims in [`dra`]) that say whether a pod fits a node, and the [`budget`] that bounds a simulation.
//!
//! It answers "would the scheduler place this pod here"; it never decides to scale and never
//! changes the cluster, only its own copy.

pub mod budget;
pub mod dra;
#[cfg(test)]
mod dra_property;
pub mod dra_search;
pub mod predicates;
pub mod snapshot;
pub mod volumes;

//! A simulated Kubernetes cluster in virtual time, for `cluster-autoscaler simulate`.
//!
//! The world keeps Kubernetes objects as JSON in a versioned store with a change log (watch),
//! and runs simplified controllers where the autoscaler can see the difference, each a unit
//! with its own state that reads and writes the shared cluster (clock, event queue, store): a
//! scheduler using the core's predicates and kube-scheduler's scoring ([`scheduler`],
//! [`scoring`]), a Cluster API machine controller with
//! provisioning delays and injected faults ([`machines`]), workload controllers
//! ([`workloads`]), storage (StatefulSets with claims, ephemeral volumes, a CSI-like
//! provisioner, CSINodes: [`storage`]), the disruption controller and Eviction API honouring PodDisruptionBudgets
//! ([`eviction`]) and node readiness ([`readiness`]). [`World`] owns them and the cluster and
//! hands each due event to its controller; controllers never see the world. Time only moves when the
//! caller steps it ([`World::step_until`], [`World::advance`]); every random choice comes from a
//! ChaCha generator seeded by [`WorldConfig::seed`], so a seed replays identically.
//!
//! The world must never leak into the product's `run` path, read the real clock or use
//! unseeded randomness.
#![warn(missing_docs)]

pub(crate) mod cluster;
mod device_plugin;
mod dra_driver;
mod eviction;
mod faults;
mod infrastructure;
mod machines;
mod metrics;
mod objects;
pub(crate) mod queue;
mod readiness;
mod scheduler;
mod scoring;
mod storage;
#[cfg(test)]
mod testkit;
mod time;
mod timed_work;
mod workloads;
mod world;

pub use cluster::WorldError;
pub use dra_driver::DraDriverSpec;
pub use eviction::{BudgetStatus, EvictionError};
pub use faults::{Fault, FaultKind, ProvisioningDelay};
pub use machines::{DeletePolicy, NodeGroupSpec, UnmarkedDeletion};
pub use metrics::{LostRun, Metrics, NAMED_WAITS, PodWait, Sample};
pub use objects::{WatchEvent, WatchEventKind, key as object_key};
pub use readiness::NOT_READY_TAINT;
pub use scoring::Scoring;
pub use storage::{ClaimTemplate, CsiSpec, StatefulSetSpec};
pub use time::SimTime;
pub use timed_work::TimedWork;
pub use workloads::{DaemonSetSpec, JobSpec, PodTemplate, ReplicaSetSpec, Restart};
pub use world::{World, WorldConfig};

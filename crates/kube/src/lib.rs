//! The live shell of the cluster autoscaler: it watches the Kubernetes API into an object store,
//! runs the decision core on it every scan interval (only while it holds the leader Lease), and
//! carries the core's actions out through the API (scale subresource, node taints, the Eviction
//! API, Machine annotations), publishing events, the status ConfigMap and metrics.
//!
//! It never decides what to scale: every decision comes from `autoscaler_core`. It only owns
//! effects, retries, timeouts and what happened to them.

pub mod actuator;
pub mod api_calls;
pub mod compat;
pub mod config_resource;
pub mod controller;
pub mod correlator;
pub mod events;
pub mod execute;
pub mod explain;
pub mod health;
pub mod leader;
pub mod metrics;
pub mod server;
pub mod status;
#[cfg(test)]
mod test_api;
#[cfg(test)]
mod test_cluster;
pub mod watch;

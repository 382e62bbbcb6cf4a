//! The live shell of the cluster autoscaler: it watches the Kubernetes API into an object store,
//! runs the decision core on it every scan interval (only while it holds the leader Lease), and
//! carries the core's actions out through the API (scale subresource, node taints, the Eviction
//! API, Machine annotations), publishing events, the status ConfigMap and metrics.
//!
//! It never decides what to scale: every decision comes from `autoscaler_core`. It only owns
//! effects, retries, timeouts and what happened to them.

pub mod actuator;
pub mod allocator;
pub mod api_calls;
pub mod bounded;
pub mod compat;
pub mod config_resource;
pub mod controller;
pub mod correlator;
pub mod events;
pub mod execute;
pub mod explain;
#[cfg(test)]
mod fuzz;
pub mod health;
pub mod leader;
pub mod lenient;
pub mod metrics;
pub mod plan;
pub mod server;
pub mod skipped;
pub mod slim;
pub mod status;
#[cfg(test)]
mod test_api;
#[cfg(test)]
mod test_cluster;
pub mod watch;

/// The two API clients of the management/workload split. The workload cluster holds the nodes
/// and pods (and the Lease, events and status ConfigMap); the management cluster holds the
/// Cluster API objects (Machines, MachineSets, MachineDeployments, MachinePools). Most clusters
/// are both: [`Clients::joined`].
#[derive(Clone)]
pub struct Clients {
    /// Nodes, pods, budgets, workload controllers, Lease, events, status ConfigMap.
    pub workload: kube::Client,
    /// Cluster API objects, their scale subresource and Machine annotations.
    pub management: kube::Client,
}

impl Clients {
    /// One cluster for both roles.
    pub fn joined(client: kube::Client) -> Clients {
        Clients {
            workload: client.clone(),
            management: client,
        }
    }
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clients").finish_non_exhaustive()
    }
}

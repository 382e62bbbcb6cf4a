//! The live shell of the cluster autoscaler: it watches the Kubernetes API into an object store,
//! runs the decision core on it every scan interval (only while it holds the leader Lease), and
//! carries the core's actions out through the API (scale subresource, node taints, the Eviction
//! API, Machine annotations), publishing events, the status ConfigMap and metrics.
//!
//! It never decides what to scale: every decision comes from `autoscaler_core`. It only owns
//! effects, retries, timeouts and what happened to them.

mod actuator;
mod allocator;
mod api_calls;
mod bounded;
mod capacity;
mod compat;
mod config_resource;
mod controller;
mod correlator;
mod events;
mod execute;
mod explain;
#[cfg(test)]
mod fuzz;
mod health;
mod leader;
mod lenient;
mod metrics;
mod plan;
mod server;
mod skipped;
mod slim;
mod status;
#[cfg(test)]
mod test_api;
#[cfg(test)]
mod test_cluster;
mod watch;

// The API the binary uses, flat; the modules stay private. Generic names are prefixed with what
// they are about.
pub use actuator::{ActuationError, Actuator};
pub use allocator::keep_freed_memory;
pub use api_calls::{API_CALLS, ApiCall, Classified, ClassifyError, classify, is_declared};
pub use bounded::{BoundedReadsLayer, ReadLimits, client as bounded_client};
pub use config_resource::{
    NAME as CONFIG_RESOURCE_NAME, served as config_resource_served, spawn as spawn_config_resource,
};
pub use controller::{
    ControllerConfig, ControllerError, run as run_controller,
    run_with_options as run_controller_with_options,
};
pub use events::{EventSink, EventSpec};
pub use leader::{LeaderConfig, LeaderError, Leadership};
pub use lenient::Decoded;
pub use plan::{
    Explained, describe, json as explained_json, json_text as explained_json_text,
    text as explained_text,
};
pub use slim::SlimPod;
pub use status::initializing_yaml as initializing_status_yaml;
pub use watch::{CapacityWatch, WatchConfig, start as start_watches};

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

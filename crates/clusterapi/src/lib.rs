//! The Cluster API provider (seed 003): node groups from MachineDeployments, MachineSets and
//! MachinePools that opt into autoscaling with the `<group>/cluster-api-autoscaler-node-group-
//! {min,max}-size` annotations (or an OpenShift `MachineAutoscaler`), read from an
//! [`ObjectStore`](autoscaler_model::ObjectStore) so that one code path serves a live
//! cluster, a snapshot file and the simulated world. In OpenShift mode (`--cloud-provider=
//! openshift`) one provider reads both OpenShift's Machine API (`machine.openshift.io`) and
//! Cluster API, as OpenShift's own autoscaler does.
//!
//! [`ClusterApiProvider::discover`] reads the store and returns the core's
//! [`NodeGroup`](autoscaler_model::NodeGroup) views plus warnings; resizes
//! ([`ClusterApiProvider::increase_size`], [`ClusterApiProvider::delete_nodes`],
//! [`ClusterApiProvider::decrease_target_size`]) return [`ObjectChange`]s for the shell to
//! apply. The crate never talks HTTP, never reads the environment or the clock.
#![warn(missing_docs)]

mod annotations;
mod changes;
mod config;
mod devices;
mod infrastructure;
mod provider;

pub use annotations::{ARCH_LABEL, OS_LABEL};
pub use changes::{
    ApplyError, DELETE_MACHINE_VALUE, ObjectChange, ProviderError, RebaseError, ReplicasBase, apply,
};
pub use config::{AutoDiscovery, ClusterApiConfig, ConfigError};
pub use devices::DRA_DRIVER_KEY;
pub use infrastructure::{INFRASTRUCTURE_GROUP, reference as infrastructure_reference};
pub use provider::{
    BoundsSource, ClusterApiProvider, DiscoveryCache, MachineInfo, ScalableResource, placeholder_id,
};

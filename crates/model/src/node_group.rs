//! Node groups as the core sees them, and the cloud provider view that lists them.
//!
//! A node group is a set of identical machines the provider can grow and shrink (a Cluster API
//! MachineDeployment, a cloud instance group). The core only reads these views and returns
//! actions; it never talks to a provider. Providers (Cluster API, the test provider) build the
//! views from whatever they watch.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::node::Node;

/// Identifier of a node group, e.g. `MachineDeployment/namespace/name`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeGroupId(pub Arc<str>);

impl NodeGroupId {
    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for NodeGroupId {
    fn from(s: &str) -> Self {
        NodeGroupId(Arc::from(s))
    }
}

impl fmt::Display for NodeGroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Lifecycle state of one instance (machine) of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InstanceState {
    /// Running (it may or may not have registered as a node yet).
    Running,
    /// Being created.
    Creating,
    /// Being deleted.
    Deleting,
}

/// Class of an instance error, as providers report them (seed 004).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InstanceErrorClass {
    /// The provider is out of capacity or quota (stockout): trying again soon will not help.
    OutOfResources,
    /// Any other error.
    Other,
}

/// An error an instance reports.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InstanceError {
    /// Class.
    pub class: InstanceErrorClass,
    /// Provider-specific code (e.g. a Machine's `failureReason`).
    pub code: String,
    /// Human-readable message.
    pub message: String,
}

/// One instance of a group.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Instance {
    /// Provider id; equals the Node's `spec.providerID` once it registers.
    pub id: Arc<str>,
    /// State.
    pub state: InstanceState,
    /// Error, if the instance failed.
    pub error: Option<InstanceError>,
}

/// Per-group overrides of cluster-wide options. `None` means "use the cluster-wide value".
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeGroupOptions {
    /// `--scale-down-utilization-threshold` for this group.
    pub scale_down_utilization_threshold: Option<f64>,
    /// `--scale-down-gpu-utilization-threshold` for this group.
    pub scale_down_gpu_utilization_threshold: Option<f64>,
    /// `--scale-down-unneeded-time` for this group.
    pub scale_down_unneeded_time: Option<Duration>,
    /// `--scale-down-unready-time` for this group.
    pub scale_down_unready_time: Option<Duration>,
    /// `--max-node-provision-time` for this group.
    pub max_node_provision_time: Option<Duration>,
    /// Atomic scaling: the group grows to its max or not at all, and shrinks as a whole.
    pub zero_or_max_scaling: bool,
    /// Consolidation's settings for this group (ours): mode, budgets, node lifetime.
    pub disruption: crate::disruption::GroupDisruption,
}

/// A node group view.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeGroup {
    /// Id.
    pub id: NodeGroupId,
    /// Minimum size.
    pub min_size: usize,
    /// Maximum size.
    pub max_size: usize,
    /// Target size the provider was asked for (e.g. `spec.replicas`).
    pub target_size: usize,
    /// The group's instances.
    pub instances: Vec<Instance>,
    /// The provider's template node for a group with no usable node (scale from zero): capacity,
    /// allocatable, labels and taints of a node this group would create. `None` if the provider
    /// cannot tell.
    pub template: Option<Arc<Node>>,
    /// Option overrides.
    pub options: NodeGroupOptions,
    /// Price of one node per hour, for the `price` expander (`None`: unknown).
    pub node_price_per_hour: Option<f64>,
    /// The provider is replacing the group's nodes (a MachineDeployment rolling out): scale-down
    /// leaves its nodes alone meanwhile, so it never deletes a node the rollout is about to
    /// replace or has just created.
    pub rolling_out: bool,
}

/// Why a node group view cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NodeGroupError {
    /// The id is empty: every action and event names its group by id.
    #[error("node group id is empty")]
    EmptyId,
    /// The min size is above the max size: no size satisfies both.
    #[error("node group {id}: min size {min} is above max size {max}")]
    MinAboveMax {
        /// The group.
        id: String,
        /// Min size.
        min: usize,
        /// Max size.
        max: usize,
    },
}

impl NodeGroup {
    /// A group with the given id and sizes, no instances, no template, checked: the id is not
    /// empty and `min_size <= max_size`. The target size is not bounded by them, as upstream's
    /// is not: a provider may report a target below the min (grown to it only with
    /// `--enforce-node-group-min-size`) or above the max (a user's resize; never grown further).
    pub fn try_new(
        id: &str,
        min_size: usize,
        max_size: usize,
        target_size: usize,
    ) -> Result<NodeGroup, NodeGroupError> {
        if id.is_empty() {
            return Err(NodeGroupError::EmptyId);
        }
        if min_size > max_size {
            return Err(NodeGroupError::MinAboveMax {
                id: id.to_string(),
                min: min_size,
                max: max_size,
            });
        }
        Ok(NodeGroup::new(id, min_size, max_size, target_size))
    }

    /// A group with the given id and sizes, no instances, no template. Unchecked: callers that
    /// read sizes from outside use [`NodeGroup::try_new`].
    pub fn new(id: &str, min_size: usize, max_size: usize, target_size: usize) -> NodeGroup {
        NodeGroup {
            id: NodeGroupId::from(id),
            min_size,
            max_size,
            target_size,
            instances: Vec::new(),
            template: None,
            options: NodeGroupOptions::default(),
            node_price_per_hour: None,
            rolling_out: false,
        }
    }
}

/// What the core needs from a cloud provider: the groups and which group each node is in.
pub trait CloudProvider {
    /// All autoscaled node groups.
    fn node_groups(&self) -> &[NodeGroup];
    /// Index into [`CloudProvider::node_groups`] of the group `node` belongs to, or `None` for
    /// nodes not managed by the autoscaler (control plane, static nodes).
    fn node_group_of(&self, node: &Node) -> Option<usize>;
    /// The node label naming a node's GPU type, if the provider has one (used with GPU limits).
    fn gpu_label(&self) -> Option<&str> {
        None
    }
}

/// A provider holding its groups in memory and mapping nodes by provider id: the test provider,
/// and the shape real providers fill from their objects.
#[derive(Clone, Debug, Default)]
pub struct StaticProvider {
    groups: Vec<NodeGroup>,
    by_provider_id: rustc_hash::FxHashMap<Arc<str>, usize>,
}

impl StaticProvider {
    /// A provider with `groups`; nodes map to the group whose instance id equals their
    /// `spec.providerID`.
    pub fn new(groups: Vec<NodeGroup>) -> StaticProvider {
        let mut by_provider_id = rustc_hash::FxHashMap::default();
        for (i, g) in groups.iter().enumerate() {
            for inst in &g.instances {
                by_provider_id.insert(inst.id.clone(), i);
            }
        }
        StaticProvider {
            groups,
            by_provider_id,
        }
    }

    /// Mutable access to the groups (tests change sizes between loops). Call
    /// [`StaticProvider::reindex`] after changing instances.
    pub fn groups_mut(&mut self) -> &mut Vec<NodeGroup> {
        &mut self.groups
    }

    /// Rebuilds the provider-id map after instances changed.
    pub fn reindex(&mut self) {
        *self = StaticProvider::new(std::mem::take(&mut self.groups));
    }
}

impl CloudProvider for StaticProvider {
    fn node_groups(&self) -> &[NodeGroup] {
        &self.groups
    }

    fn node_group_of(&self, node: &Node) -> Option<usize> {
        node.provider_id
            .as_ref()
            .and_then(|id| self.by_provider_id.get(id).copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_is_built_only_with_an_id_and_min_not_above_max() {
        let g = NodeGroup::try_new("ng", 1, 3, 2).expect("valid");
        assert_eq!((g.min_size, g.max_size, g.target_size), (1, 3, 2));
        assert_eq!(
            NodeGroup::try_new("", 0, 3, 0),
            Err(NodeGroupError::EmptyId)
        );
        let e = NodeGroup::try_new("ng", 4, 3, 3).unwrap_err();
        assert_eq!(
            e.to_string(),
            "node group ng: min size 4 is above max size 3"
        );
        // A target outside the bounds is a state providers report, not an error.
        assert!(NodeGroup::try_new("ng", 2, 3, 0).is_ok());
        assert!(NodeGroup::try_new("ng", 0, 3, 5).is_ok());
    }

    #[test]
    fn static_provider_maps_nodes_by_provider_id() {
        let mut g = NodeGroup::new("ng-1", 0, 10, 1);
        g.instances.push(Instance {
            id: Arc::from("test:///n1"),
            state: InstanceState::Running,
            error: None,
        });
        let p = StaticProvider::new(vec![g, NodeGroup::new("ng-2", 0, 5, 0)]);
        let mut n = Node::new("n1");
        assert_eq!(p.node_group_of(&n), None);
        n.provider_id = Some(Arc::from("test:///n1"));
        assert_eq!(p.node_group_of(&n), Some(0));
        n.provider_id = Some(Arc::from("test:///other"));
        assert_eq!(p.node_group_of(&n), None);
        assert_eq!(p.node_groups()[1].id.as_str(), "ng-2");
    }
}

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
///
/// Built with [`NodeGroupOptions::default`] and the `with_…` methods; the utilization
/// thresholds are checked to lie in `0..=1` (durations cannot be negative by type).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeGroupOptions {
    scale_down_utilization_threshold: Option<f64>,
    scale_down_gpu_utilization_threshold: Option<f64>,
    scale_down_unneeded_time: Option<Duration>,
    scale_down_unready_time: Option<Duration>,
    max_node_provision_time: Option<Duration>,
    zero_or_max_scaling: bool,
    disruption: crate::disruption::GroupDisruption,
}

/// Why a group's option override cannot be set.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum NodeGroupOptionsError {
    /// A utilization threshold outside `0..=1` (or not a number).
    #[error("{field} is {value}: not a number between 0 and 1")]
    ThresholdOutOfRange {
        /// The option (`scale_down_utilization_threshold` or
        /// `scale_down_gpu_utilization_threshold`).
        field: &'static str,
        /// The rejected value.
        value: f64,
    },
}

fn threshold(field: &'static str, value: f64) -> Result<f64, NodeGroupOptionsError> {
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(NodeGroupOptionsError::ThresholdOutOfRange { field, value })
    }
}

impl NodeGroupOptions {
    /// `--scale-down-utilization-threshold` for this group.
    pub fn scale_down_utilization_threshold(&self) -> Option<f64> {
        self.scale_down_utilization_threshold
    }

    /// `--scale-down-gpu-utilization-threshold` for this group.
    pub fn scale_down_gpu_utilization_threshold(&self) -> Option<f64> {
        self.scale_down_gpu_utilization_threshold
    }

    /// `--scale-down-unneeded-time` for this group.
    pub fn scale_down_unneeded_time(&self) -> Option<Duration> {
        self.scale_down_unneeded_time
    }

    /// `--scale-down-unready-time` for this group.
    pub fn scale_down_unready_time(&self) -> Option<Duration> {
        self.scale_down_unready_time
    }

    /// `--max-node-provision-time` for this group.
    pub fn max_node_provision_time(&self) -> Option<Duration> {
        self.max_node_provision_time
    }

    /// Atomic scaling: the group grows to its max or not at all, and shrinks as a whole.
    pub fn zero_or_max_scaling(&self) -> bool {
        self.zero_or_max_scaling
    }

    /// With the scale-down utilization threshold overridden; it must lie in `0..=1`.
    pub fn with_scale_down_utilization_threshold(
        mut self,
        value: f64,
    ) -> Result<Self, NodeGroupOptionsError> {
        self.scale_down_utilization_threshold =
            Some(threshold("scale_down_utilization_threshold", value)?);
        Ok(self)
    }

    /// With the scale-down GPU utilization threshold overridden; it must lie in `0..=1`.
    pub fn with_scale_down_gpu_utilization_threshold(
        mut self,
        value: f64,
    ) -> Result<Self, NodeGroupOptionsError> {
        self.scale_down_gpu_utilization_threshold =
            Some(threshold("scale_down_gpu_utilization_threshold", value)?);
        Ok(self)
    }

    /// With the scale-down unneeded time overridden.
    pub fn with_scale_down_unneeded_time(mut self, value: Duration) -> Self {
        self.scale_down_unneeded_time = Some(value);
        self
    }

    /// With the scale-down unready time overridden.
    pub fn with_scale_down_unready_time(mut self, value: Duration) -> Self {
        self.scale_down_unready_time = Some(value);
        self
    }

    /// With the max node provision time overridden.
    pub fn with_max_node_provision_time(mut self, value: Duration) -> Self {
        self.max_node_provision_time = Some(value);
        self
    }

    /// With atomic (zero-or-max) scaling on or off.
    pub fn with_zero_or_max_scaling(mut self, atomic: bool) -> Self {
        self.zero_or_max_scaling = atomic;
        self
    }

    /// Consolidation's settings for this group (ours): mode, budgets, node lifetime.
    pub fn disruption(&self) -> &crate::disruption::GroupDisruption {
        &self.disruption
    }

    /// With consolidation's settings for this group (ours), read from its annotations.
    pub fn with_disruption(mut self, disruption: crate::disruption::GroupDisruption) -> Self {
        self.disruption = disruption;
        self
    }
}

/// A node group view.
///
/// Built with [`NodeGroup::try_new`] (id and bounds checked) and the `with_…` methods; read
/// through accessors named like its parts. The fields are private so that every group the
/// core sees has a non-empty id, `min_size <= max_size` and a valid price. The target size is
/// deliberately not bounded by min and max (see [`NodeGroup::try_new`]).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeGroup {
    id: NodeGroupId,
    min_size: usize,
    max_size: usize,
    target_size: usize,
    instances: Vec<Instance>,
    template: Option<Arc<Node>>,
    options: NodeGroupOptions,
    node_price_per_hour: Option<f64>,
    rolling_out: bool,
}

/// Why a node group view cannot be built.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
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
    /// The price per node-hour is negative or not a finite number.
    #[error("node group {id}: node price per hour {price} is not a finite number >= 0")]
    BadPrice {
        /// The group.
        id: String,
        /// The rejected price.
        price: f64,
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
        Ok(NodeGroup {
            id: NodeGroupId::from(id),
            min_size,
            max_size,
            target_size,
            instances: Vec::new(),
            template: None,
            options: NodeGroupOptions::default(),
            node_price_per_hour: None,
            rolling_out: false,
        })
    }

    /// [`NodeGroup::try_new`] for literals in tests and benches.
    ///
    /// # Panics
    ///
    /// When `try_new` rejects the arguments. Only with `test-util`: the product builds groups
    /// from what it reads, through `try_new`.
    #[cfg(any(test, feature = "test-util"))]
    #[track_caller]
    pub fn new(id: &str, min_size: usize, max_size: usize, target_size: usize) -> NodeGroup {
        match NodeGroup::try_new(id, min_size, max_size, target_size) {
            Ok(g) => g,
            Err(e) => panic!("{e}"),
        }
    }

    /// Id.
    pub fn id(&self) -> &NodeGroupId {
        &self.id
    }

    /// Minimum size.
    pub fn min_size(&self) -> usize {
        self.min_size
    }

    /// Maximum size.
    pub fn max_size(&self) -> usize {
        self.max_size
    }

    /// Target size the provider was asked for (e.g. `spec.replicas`); may lie outside
    /// `min_size..=max_size` (see [`NodeGroup::try_new`]).
    pub fn target_size(&self) -> usize {
        self.target_size
    }

    /// The group's instances.
    pub fn instances(&self) -> &[Instance] {
        &self.instances
    }

    /// The provider's template node for a group with no usable node (scale from zero): capacity,
    /// allocatable, labels and taints of a node this group would create. `None` if the provider
    /// cannot tell.
    pub fn template(&self) -> Option<&Arc<Node>> {
        self.template.as_ref()
    }

    /// Option overrides.
    pub fn options(&self) -> &NodeGroupOptions {
        &self.options
    }

    /// Price of one node per hour, for the `price` expander (`None`: unknown).
    pub fn node_price_per_hour(&self) -> Option<f64> {
        self.node_price_per_hour
    }

    /// The provider is replacing the group's nodes (a MachineDeployment rolling out): scale-down
    /// leaves its nodes alone meanwhile, so it never deletes a node the rollout is about to
    /// replace or has just created.
    pub fn rolling_out(&self) -> bool {
        self.rolling_out
    }

    /// With these instances.
    pub fn with_instances(mut self, instances: Vec<Instance>) -> Self {
        self.instances = instances;
        self
    }

    /// With this template node (`None`: the provider cannot tell).
    pub fn with_template(mut self, template: Option<Arc<Node>>) -> Self {
        self.template = template;
        self
    }

    /// With these option overrides.
    pub fn with_options(mut self, options: NodeGroupOptions) -> Self {
        self.options = options;
        self
    }

    /// With this price per node-hour (`None`: unknown); a price must be finite and `>= 0`.
    pub fn with_node_price_per_hour(mut self, price: Option<f64>) -> Result<Self, NodeGroupError> {
        if let Some(p) = price
            && !(p.is_finite() && p >= 0.0)
        {
            return Err(NodeGroupError::BadPrice {
                id: self.id.to_string(),
                price: p,
            });
        }
        self.node_price_per_hour = price;
        Ok(self)
    }

    /// With the rollout flag set or cleared.
    pub fn with_rolling_out(mut self, rolling_out: bool) -> Self {
        self.rolling_out = rolling_out;
        self
    }

    /// Sets the target size, as a provider does when it is resized (by us or by a user). Any
    /// value is accepted: a target outside the bounds is a state real groups hold.
    pub fn set_target_size(&mut self, target_size: usize) {
        self.target_size = target_size;
    }

    /// Replaces the option overrides (a group's annotations changed).
    pub fn set_options(&mut self, options: NodeGroupOptions) {
        self.options = options;
    }

    /// Adds an instance (a machine the provider started).
    pub fn push_instance(&mut self, instance: Instance) {
        self.instances.push(instance);
    }

    /// Keeps only the instances `keep` accepts (the provider removed the others).
    pub fn retain_instances(&mut self, keep: impl FnMut(&Instance) -> bool) {
        self.instances.retain(keep);
    }

    /// The instances, to change their state or error in place.
    pub fn instances_mut(&mut self) -> &mut [Instance] {
        &mut self.instances
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
        assert_eq!((g.min_size(), g.max_size(), g.target_size()), (1, 3, 2));
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
    fn a_price_is_finite_and_not_negative() {
        let g = NodeGroup::try_new("ng", 0, 3, 0).expect("valid");
        let priced = g
            .clone()
            .with_node_price_per_hour(Some(0.5))
            .expect("valid");
        assert_eq!(priced.node_price_per_hour(), Some(0.5));
        assert!(g.clone().with_node_price_per_hour(None).is_ok());
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            let e = g.clone().with_node_price_per_hour(Some(bad)).unwrap_err();
            assert!(matches!(e, NodeGroupError::BadPrice { .. }), "{bad}: {e}");
        }
        assert_eq!(
            g.with_node_price_per_hour(Some(-2.0))
                .unwrap_err()
                .to_string(),
            "node group ng: node price per hour -2 is not a finite number >= 0"
        );
    }

    #[test]
    fn option_thresholds_lie_between_zero_and_one() {
        let o = NodeGroupOptions::default()
            .with_scale_down_utilization_threshold(0.0)
            .and_then(|o| o.with_scale_down_gpu_utilization_threshold(1.0))
            .expect("valid");
        assert_eq!(o.scale_down_utilization_threshold(), Some(0.0));
        assert_eq!(o.scale_down_gpu_utilization_threshold(), Some(1.0));
        let e = NodeGroupOptions::default()
            .with_scale_down_utilization_threshold(1.5)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "scale_down_utilization_threshold is 1.5: not a number between 0 and 1"
        );
        assert!(
            NodeGroupOptions::default()
                .with_scale_down_gpu_utilization_threshold(f64::NAN)
                .is_err()
        );
        assert!(
            NodeGroupOptions::default()
                .with_scale_down_gpu_utilization_threshold(-0.1)
                .is_err()
        );
    }

    #[test]
    fn a_target_may_be_set_outside_the_bounds() {
        let mut g = NodeGroup::try_new("ng", 1, 3, 2).expect("valid");
        g.set_target_size(0);
        assert_eq!(g.target_size(), 0);
        g.set_target_size(7);
        assert_eq!(g.target_size(), 7);
        assert_eq!((g.min_size(), g.max_size()), (1, 3));
    }

    #[test]
    fn static_provider_maps_nodes_by_provider_id() {
        let mut g = NodeGroup::new("ng-1", 0, 10, 1);
        g.push_instance(Instance {
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
        assert_eq!(p.node_groups()[1].id().as_str(), "ng-2");
    }
}

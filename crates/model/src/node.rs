//! The compact node view the simulator works on, built from a `k8s_openapi` `Node`.
//!
//! Building a view never panics: malformed fields become a [`ModelError`](crate::pod::ModelError) naming the node and the
//! field.

use std::sync::{Arc, LazyLock};

use crate::intern::Sym;
use crate::labels::Labels;
use crate::resources::Resources;
use crate::store::MAX_LIST;
use crate::taints::Taint;

/// A node condition, reduced to what the autoscaler reads.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeCondition {
    /// Condition type (`Ready`, `MemoryPressure`, ...).
    pub type_: Sym,
    /// `True`, `False` or `Unknown`.
    pub status: Sym,
    /// Last transition time, milliseconds since the Unix epoch.
    pub last_transition_ms: Option<i64>,
}

/// The compact node view.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Name (interned: pods refer to it).
    pub name: Sym,
    /// UID (empty if absent).
    pub uid: Arc<str>,
    /// Labels.
    pub labels: Labels,
    /// Annotations, sorted by key.
    pub annotations: Vec<(Arc<str>, Arc<str>)>,
    /// Taints.
    pub taints: Vec<Taint>,
    /// `status.allocatable` (falls back to `status.capacity` per resource when allocatable lacks
    /// it, as the kubelet reports both).
    pub allocatable: Resources,
    /// `status.capacity`.
    pub capacity: Resources,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// `spec.providerID`, if set.
    pub provider_id: Option<Arc<str>>,
    /// Conditions.
    pub conditions: Vec<NodeCondition>,
    /// Creation time, milliseconds since the Unix epoch.
    pub creation_ms: Option<i64>,
    /// Deletion time if being deleted, milliseconds since the Unix epoch.
    pub deletion_ms: Option<i64>,
    /// CSI drivers and attach limits carried by the node itself: set on node templates (from
    /// the group's nodes' CSINodes or the provider); `None` on nodes read from the API, whose
    /// CSINode objects are looked up by name.
    pub csi: Option<Arc<CsiNode>>,
    /// DRA devices carried by the node itself: set on node templates (copies of the group's
    /// node's ResourceSlices); `None` on nodes read from the API, whose slices are looked up by
    /// name.
    pub devices: Option<Arc<crate::dra::NodeDevices>>,
}

impl Node {
    /// Value of the annotation `key`.
    #[inline]
    pub fn annotation(&self, key: &str) -> Option<&str> {
        crate::annotations::annotation(&self.annotations, key)
    }

    /// Whether the `Ready` condition is `True`.
    pub fn is_ready(&self) -> bool {
        // Interned once: compared as symbols, not resolved to text on every call.
        static READY: LazyLock<(Sym, Sym)> =
            LazyLock::new(|| (Sym::new("Ready"), Sym::new("True")));
        let (ready, true_) = *READY;
        self.conditions
            .iter()
            .any(|c| c.type_ == ready && c.status == true_)
    }
}

impl Node {
    /// A node with the given name and nothing else: no capacity, no labels, schedulable, no
    /// conditions. Builders and the API conversion start from this.
    pub fn new(name: &str) -> Node {
        Node {
            name: Sym::new(name),
            uid: Arc::from(""),
            labels: Labels::new(),
            annotations: Vec::new(),
            taints: Vec::new(),
            allocatable: Resources::default(),
            capacity: Resources::default(),
            unschedulable: false,
            provider_id: None,
            conditions: Vec::new(),
            creation_ms: None,
            deletion_ms: None,
            csi: None,
            devices: None,
        }
    }
}

/// One driver of a CSINode.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CsiDriverLimit {
    /// Driver name.
    pub driver: Sym,
    /// `allocatable.count`: how many of its volumes the node can attach (`None`: unlimited).
    pub count: Option<u32>,
}

/// A CSINode: the CSI drivers installed on one node and their attach limits. Also what a
/// node template carries (see [`Node::csi`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CsiNode {
    /// Drivers, in the object's order.
    pub drivers: Vec<CsiDriverLimit>,
}

impl CsiNode {
    /// The attach limit of `driver`, if the node has one.
    pub fn limit(&self, driver: Sym) -> Option<u32> {
        self.drivers
            .iter()
            .find(|d| d.driver == driver)
            .and_then(|d| d.count)
    }

    /// Parses upstream's scale-from-zero annotation value
    /// (`capacity.cluster-autoscaler.kubernetes.io/csi-driver`): comma-separated
    /// `driver=count` pairs, e.g. `ebs.csi.aws.com=25,efs.csi.aws.com=100`.
    pub fn from_annotation(value: &str) -> Result<CsiNode, String> {
        let mut drivers = Vec::new();
        for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((driver, count)) = part.split_once('=') else {
                return Err(format!("{part:?} is not driver=count"));
            };
            let count: u32 = count
                .trim()
                .parse()
                .map_err(|_| format!("{part:?}: the count is not a non-negative integer"))?;
            if driver.trim().is_empty() {
                return Err(format!("{part:?}: empty driver name"));
            }
            if drivers.len() == MAX_LIST {
                return Err(format!("more than {MAX_LIST} drivers"));
            }
            drivers.push(CsiDriverLimit {
                driver: Sym::new(driver.trim()),
                count: Some(count),
            });
        }
        Ok(CsiNode { drivers })
    }
}

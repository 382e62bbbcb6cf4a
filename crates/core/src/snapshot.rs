//! CONTRACT (being implemented by the snapshot/predicates work): the cluster snapshot.
//!
//! Holds nodes and the pods on them, with nested `fork()` / `revert()` / `commit()` whose cost is
//! proportional to the changes made, and the indices the predicates need.

use std::sync::Arc;

use crate::affinity::NamespaceLabels;
use crate::intern::Sym;
use crate::node::Node;
use crate::pod::Pod;
use crate::resources::Resources;

/// Index of a node in a snapshot. Stable while the node exists; may be reused after the node is
/// removed or its fork reverted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// Errors of snapshot mutations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// A node with this name is already in the snapshot.
    #[error("node {0} is already in the snapshot")]
    DuplicateNode(String),
    /// No such node.
    #[error("node {0} is not in the snapshot")]
    UnknownNode(String),
    /// A pod with this namespace/name is already in the snapshot.
    #[error("pod {0} is already in the snapshot")]
    DuplicatePod(String),
    /// No such pod on that node.
    #[error("pod {0} is not on node {1}")]
    UnknownPod(String, String),
    /// `revert` or `commit` without a matching `fork`.
    #[error("no fork to revert or commit")]
    NoFork,
}

/// A node and the pods on it, with the sums the filters read.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    /// The node.
    pub node: Arc<Node>,
    /// Pods on it.
    pub pods: Vec<Arc<Pod>>,
    /// Sum of the pods' requests (`pods` counts them).
    pub requested: Resources,
}

/// The snapshot.
#[derive(Debug, Default)]
pub struct ClusterSnapshot {
    _todo: (),
}

#[allow(missing_docs, unused_variables)]
impl ClusterSnapshot {
    pub fn new() -> Self {
        unimplemented!()
    }
    /// Namespace labels, for `namespaceSelector` in affinity terms.
    pub fn set_namespace_labels(&mut self, namespaces: Vec<NamespaceLabels>) {
        unimplemented!()
    }
    pub fn add_node(&mut self, node: Arc<Node>) -> Result<NodeId, SnapshotError> {
        unimplemented!()
    }
    /// Removes the node and its pods.
    pub fn remove_node(&mut self, id: NodeId) -> Result<(), SnapshotError> {
        unimplemented!()
    }
    /// Places `pod` on `node` (regardless of predicates: callers check first).
    pub fn add_pod(&mut self, pod: Arc<Pod>, node: NodeId) -> Result<(), SnapshotError> {
        unimplemented!()
    }
    pub fn remove_pod(
        &mut self,
        node: NodeId,
        namespace: Sym,
        name: &str,
    ) -> Result<Arc<Pod>, SnapshotError> {
        unimplemented!()
    }
    pub fn node_id(&self, name: Sym) -> Option<NodeId> {
        unimplemented!()
    }
    pub fn node(&self, id: NodeId) -> Option<&NodeInfo> {
        unimplemented!()
    }
    /// Live nodes.
    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        std::iter::empty()
    }
    /// Number of live nodes.
    pub fn len(&self) -> usize {
        unimplemented!()
    }
    pub fn is_empty(&self) -> bool {
        unimplemented!()
    }
    pub fn fork(&mut self) {
        unimplemented!()
    }
    pub fn revert(&mut self) -> Result<(), SnapshotError> {
        unimplemented!()
    }
    pub fn commit(&mut self) -> Result<(), SnapshotError> {
        unimplemented!()
    }
    /// Number of open forks.
    pub fn depth(&self) -> usize {
        unimplemented!()
    }
    /// A counter bumped by every mutation (add/remove node or pod, revert): prepared predicate
    /// state records it to know when it is stale.
    pub fn version(&self) -> u64 {
        unimplemented!()
    }
}

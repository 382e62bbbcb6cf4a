//! CONTRACT (being implemented): kube-scheduler's filters over a [`ClusterSnapshot`].

use std::fmt;

use crate::node::Node;
use crate::pod::Pod;
use crate::snapshot::{ClusterSnapshot, NodeId};

/// Why a pod does not fit a node (one variant per filter reason, Display = kube-scheduler text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unfit {
    /// Placeholder.
    Todo,
}

impl fmt::Display for Unfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// Per-pod state computed once against a snapshot version (kube-scheduler's PreFilter): affinity
/// and spread counts per topology domain, existing pods' anti-affinity against this pod.
#[derive(Clone, Debug, Default)]
pub struct Prepared {
    _todo: (),
}

#[allow(missing_docs, unused_variables)]
impl ClusterSnapshot {
    /// PreFilter: O(1) for a pod without affinity, anti-affinity or spread constraints when no
    /// existing pod has anti-affinity.
    pub fn prepare(&self, pod: &Pod) -> Prepared {
        unimplemented!()
    }
    /// Makes `prepared` current after snapshot mutations (no-op when not stale or trivial).
    pub fn refresh(&self, pod: &Pod, prepared: &mut Prepared) {
        unimplemented!()
    }
    /// Filter: all predicates of `pod` on `node`, first failure returned.
    pub fn check(&self, pod: &Pod, prepared: &Prepared, node: NodeId) -> Result<(), Unfit> {
        unimplemented!()
    }
    /// prepare + check, for one-off questions.
    pub fn check_pod(&self, pod: &Pod, node: NodeId) -> Result<(), Unfit> {
        unimplemented!()
    }
}

/// Node-only predicates (no snapshot needed): unschedulable, node name, node affinity/selector,
/// taints. Used for templates before they are in a snapshot.
#[allow(unused_variables)]
pub fn check_node_static(pod: &Pod, node: &Node) -> Result<(), Unfit> {
    unimplemented!()
}

//! The metrics log a simulation report is built from: periodic samples of pending pods and
//! nodes per group, and each pod's wait from creation to running.
//!
//! It records only; it never decides anything and never reads the real clock.

use std::collections::BTreeMap;

use crate::cluster::Cluster;
use crate::machines::Machines;
use crate::time::SimTime;

/// One periodic sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    /// When.
    pub at_ms: SimTime,
    /// Live pods not bound to a node.
    pub pending: usize,
    /// Of those, pods marked Unschedulable.
    pub unschedulable: usize,
    /// Pods bound to a node.
    pub running: usize,
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Registered nodes per MachineDeployment (`namespace/name`).
    pub nodes_per_group: BTreeMap<String, usize>,
    /// Machines per MachineDeployment (`namespace/name`), registered or not.
    pub machines_per_group: BTreeMap<String, usize>,
}

/// How long one pod waited from creation to running.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodWait {
    /// `namespace/name`.
    pub pod: String,
    /// Creation time.
    pub created_ms: SimTime,
    /// Time it was bound and started running.
    pub running_ms: SimTime,
}

impl PodWait {
    /// The wait.
    pub fn wait_ms(&self) -> SimTime {
        self.running_ms.saturating_sub(self.created_ms)
    }
}

/// The metrics log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Metrics {
    /// Periodic samples, oldest first.
    pub samples: Vec<Sample>,
    /// Pod waits, in the order pods started.
    pub waits: Vec<PodWait>,
}

/// A sample of the cluster now: pods pending, unschedulable and running; nodes, and Machines
/// and registered Nodes per MachineDeployment.
pub(crate) fn sample(c: &Cluster, machines: &Machines) -> Sample {
    let mut s = Sample {
        at_ms: c.now,
        pending: 0,
        unschedulable: 0,
        running: 0,
        nodes: c.nodes.len(),
        nodes_per_group: BTreeMap::new(),
        machines_per_group: BTreeMap::new(),
    };
    for p in c.pods.values() {
        if p.node.is_some() {
            s.running += 1;
        } else {
            s.pending += 1;
            if p.unschedulable.is_some() {
                s.unschedulable += 1;
            }
        }
    }
    for g in machines.groups() {
        let name = format!("{}/{}", g.0, g.1);
        s.nodes_per_group.insert(name.clone(), 0);
        s.machines_per_group.insert(name, 0);
    }
    for (group, registered) in machines.members() {
        let name = format!("{}/{}", group.0, group.1);
        *s.machines_per_group.entry(name.clone()).or_default() += 1;
        if registered {
            *s.nodes_per_group.entry(name).or_default() += 1;
        }
    }
    s
}

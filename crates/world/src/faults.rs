//! What can go wrong with a node group, and how long its machines take: provisioning delays and
//! injected faults, as scenario data.
//!
//! It decides only when a fault is active and which faults change provisioning; the machine
//! controller and node readiness act on them. It never schedules anything itself.

use crate::time::SimTime;

/// A uniform distribution of provisioning delays: from Machine creation to a Ready Node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProvisioningDelay {
    /// Shortest delay, in ms.
    pub min_ms: SimTime,
    /// Longest delay, in ms (inclusive; values below `min_ms` are read as `min_ms`).
    pub max_ms: SimTime,
}

/// What an injected fault does to a node group while it is active.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// Machines created in the window fail at once with `status.failureReason = reason` and
    /// never get an instance or a Node.
    Stockout {
        /// The failure reason written on the Machine.
        reason: String,
    },
    /// Machines created in the window take exactly `delay_ms` to become Nodes.
    Slow {
        /// Provisioning delay, in ms.
        delay_ms: SimTime,
    },
    /// Machines created in the window get an instance (provider ID) but never a Node.
    NeverRegisters,
    /// `set_replicas` on the group fails during the window.
    ScaleApiError,
    /// At the start of the window the first `count` Ready nodes of the group (by name) become
    /// NotReady (Ready condition `False`, `node.kubernetes.io/not-ready` taint); at its end they
    /// are Ready again. Machines created meanwhile are not affected.
    NodesNotReady {
        /// How many nodes go down.
        count: u32,
    },
    /// At the start of the window someone else (a person with `kubectl scale`, another
    /// controller) changes the group's `spec.replicas` by `delta`, never below 0.
    ReplicasChanged {
        /// The change.
        delta: i64,
    },
    /// At the start of the window the group's MachineDeployment gets a new machine template
    /// (a new infrastructure template, as an upgrade does): Cluster API creates a MachineSet of
    /// the next revision and replaces the Machines one by one (RollingUpdate, maxSurge 1,
    /// maxUnavailable 0).
    Rollout,
}

/// A fault injected into one node group (MachineDeployment name) for `[from_ms, to_ms)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The MachineDeployment's name.
    pub group: String,
    /// Start of the window, inclusive.
    pub from_ms: SimTime,
    /// End of the window, exclusive.
    pub to_ms: SimTime,
    /// What goes wrong.
    pub kind: FaultKind,
}

impl Fault {
    pub(crate) fn active(&self, group: &str, now: SimTime) -> bool {
        self.group == group && self.from_ms <= now && now < self.to_ms
    }

    /// Whether the fault changes how new Machines of its group are provisioned.
    pub(crate) fn affects_provisioning(&self) -> bool {
        !matches!(
            self.kind,
            FaultKind::ScaleApiError
                | FaultKind::NodesNotReady { .. }
                | FaultKind::ReplicasChanged { .. }
                | FaultKind::Rollout
        )
    }
}

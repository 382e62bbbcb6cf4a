//! The effects an action turns into, the replies interpreters give for them and the typed
//! reports of what each action came to.
//!
//! It is data only: it decides nothing and never touches a cluster. Interpreters (the live
//! shell over the API, the simulator over its world) carry each [`Effect`] out and answer with
//! a [`Reply`]; [`crate::Actuation`] turns replies into follow-up effects and [`Report`]s, and
//! reports into the core's [`Outcome`]s.

use std::sync::Arc;

use autoscaler_clusterapi::{ObjectChange, ProviderError};
use autoscaler_core::PodRef;
use autoscaler_core::{ActionError, ErrorClass, Outcome};
use autoscaler_model::NodeGroupId;
use autoscaler_model::Pod;
use autoscaler_model::Sym;
use autoscaler_model::Taint;

/// Names one effect, so that its reply finds what it was for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(pub(crate) u64);

/// One thing to do to the cluster, with the ticket its reply must carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Effect {
    pub(crate) ticket: Ticket,
    pub(crate) kind: EffectKind,
}

impl Effect {
    /// The ticket to answer with.
    pub fn ticket(&self) -> Ticket {
        self.ticket
    }

    /// What to do.
    pub fn kind(&self) -> &EffectKind {
        &self.kind
    }
}

/// Why a set of provider changes is applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// Growing a group.
    ScaleUp {
        /// Group.
        group: NodeGroupId,
        /// Nodes asked for.
        delta: usize,
    },
    /// A correction of a group (target decrease, broken instances removed).
    Correction {
        /// Group.
        group: NodeGroupId,
        /// Which.
        correction: Correction,
    },
    /// Deleting nodes (empty ones, or one drained).
    DeleteNodes {
        /// Group.
        group: NodeGroupId,
        /// Nodes.
        nodes: Vec<Sym>,
        /// Whether the node was drained first (else: empty).
        drained: bool,
    },
}

/// A correction of a group's size the core asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Correction {
    /// `DecreaseTargetSize`.
    DecreaseTargetSize {
        /// By how much.
        delta: usize,
    },
    /// `DeleteInstances`.
    DeleteInstances {
        /// Instance ids.
        instances: Vec<Arc<str>>,
        /// Why (`ScaleUpFailed`, `DeleteUnregistered`).
        reason: &'static str,
    },
    /// An increase of an atomic scale-up set back because another group of the same
    /// scale-up failed to grow (replicas back to the count they had).
    RevertIncrease {
        /// Nodes the increase had added.
        delta: usize,
        /// The ProvisioningRequest the scale-up was for, `namespace/name`.
        request: String,
    },
    /// A delete-machine mark of this autoscaler removed from a Machine its owner will not
    /// delete (the owner deleted another Machine for the lowered replicas); its node is
    /// untainted once the mark is gone.
    ClearStaleMark {
        /// The Machine's name.
        machine: Arc<str>,
        /// Its node, if it has one.
        node: Option<Sym>,
    },
}

/// What an effect asks the interpreter to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EffectKind {
    /// Apply the provider's object changes, in order (one reply for them all).
    Changes {
        /// The changes.
        changes: Vec<ObjectChange>,
        /// What they are for.
        purpose: Purpose,
    },
    /// Add (or replace) a taint on a node.
    AddTaint {
        /// Node.
        node: Sym,
        /// Taint.
        taint: Taint,
    },
    /// Remove a taint from a node.
    RemoveTaint {
        /// Node.
        node: Sym,
        /// Taint key.
        key: Sym,
    },
    /// Remove the `ToBeDeletedByClusterAutoscaler` taint of a node whose deletion or drain
    /// failed. Its reply is not waited for: a failure is only logged.
    Untaint {
        /// Node.
        node: Sym,
    },
    /// Cordon (`spec.unschedulable: true`) or uncordon a node: with
    /// `--cordon-node-before-terminating`, a node is cordoned with its deletion taint and
    /// uncordoned when that taint goes after a failure.
    SetUnschedulable {
        /// Node.
        node: Sym,
        /// Cordon (else uncordon).
        unschedulable: bool,
    },
    /// Evict a pod through the Eviction API. An interpreter may retry refusals by a budget
    /// itself until `deadline_ms` (the live shell does), or answer the first refusal (the
    /// simulator does; the drain tries again at its next step).
    Evict {
        /// The pod.
        pod: PodRef,
        /// The node being drained.
        node: Sym,
        /// Grace period, seconds.
        grace_period_sec: u64,
        /// When the drain gives up, on the clock the actuation is given.
        deadline_ms: i64,
    },
    /// Read the pods bound to `nodes` from the source of truth, not from a cache (live: a
    /// pod list with the field selector `spec.nodeName=<node>`, as `kubectl drain` reads
    /// them; simulated: the world's own objects). Sent right before nodes are deleted, so that
    /// a pod bound after the decision, whose watch event has not arrived yet, keeps its node.
    /// Answered with [`Reply::Pods`] (every pod found, whatever its kind or phase: the
    /// actuation decides which block) or [`Reply::Failed`] (the deletion is then abandoned).
    ReadPods {
        /// The nodes.
        nodes: Vec<Sym>,
    },
    /// Replace the status of a ProvisioningRequest or CapacityBuffer through its `/status`
    /// subresource, with the `resourceVersion` the decision read as precondition (a `409`
    /// answers [`Reply::Failed`] of class `Conflict`; the next loop decides again).
    WriteStatus {
        /// The object to send.
        update: crate::status_write::StatusUpdate,
    },
}

/// How an effect went.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// Done.
    Done,
    /// The pods a [`EffectKind::ReadPods`] found on its nodes, converted.
    Pods(Vec<Arc<Pod>>),
    /// An eviction found the pod gone already.
    Gone,
    /// An eviction a disruption budget refused (may be tried again until the deadline).
    Refused(ActionError),
    /// Failed.
    Failed(ActionError),
}

/// What one action came to: for the core (through [`Report::outcomes`]) and for the shells'
/// metrics, events, logs and reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    /// A group was grown.
    ScaledUp {
        /// Group.
        group: NodeGroupId,
        /// Nodes asked for.
        delta: usize,
    },
    /// Growing a group failed.
    ScaleUpFailed {
        /// Group.
        group: NodeGroupId,
        /// Nodes asked for.
        delta: usize,
        /// Why.
        error: ActionError,
        /// Whether the provider refused it before anything was sent (else the API or the
        /// world failed applying its changes).
        by_provider: bool,
    },
    /// A correction was applied.
    Corrected {
        /// Group.
        group: NodeGroupId,
        /// Which.
        correction: Correction,
    },
    /// A correction failed.
    CorrectionFailed {
        /// Group.
        group: NodeGroupId,
        /// Which.
        correction: Correction,
        /// Why.
        error: ActionError,
    },
    /// Adding (`add`) or removing a taint failed.
    TaintFailed {
        /// Node.
        node: Sym,
        /// Taint key.
        key: Sym,
        /// Adding (else removing).
        add: bool,
        /// Why.
        error: ActionError,
    },
    /// Cordoning (`cordon`) or uncordoning a node failed.
    CordonFailed {
        /// Node.
        node: Sym,
        /// Cordoning (else uncordoning).
        cordon: bool,
        /// Why.
        error: ActionError,
    },
    /// Nodes still carried a `delay-deletion.cluster-autoscaler.kubernetes.io/*` annotation at
    /// `--node-deletion-delay-timeout`: their deletion goes on anyway.
    DeletionDelayTimedOut {
        /// Nodes.
        nodes: Vec<Sym>,
        /// The timeout, seconds.
        timeout_sec: u64,
    },
    /// A drain started.
    DrainStarted {
        /// Group.
        group: NodeGroupId,
        /// Node.
        node: Sym,
    },
    /// Nodes were deleted.
    Deleted {
        /// Group.
        group: NodeGroupId,
        /// Nodes.
        nodes: Vec<Sym>,
        /// Deleted empty (else drained).
        empty: bool,
        /// Whether the (drained) node was ready.
        ready: bool,
        /// Pods evicted on the way.
        evicted: usize,
    },
    /// Deleting nodes failed (their deletion taint is being removed).
    DeleteFailed {
        /// Group.
        group: NodeGroupId,
        /// Nodes.
        nodes: Vec<Sym>,
        /// Why.
        error: ActionError,
        /// Pods evicted before.
        evicted: usize,
    },
    /// A drain gave up (its deletion taint is being removed; nothing was deleted).
    DrainFailed {
        /// Group.
        group: NodeGroupId,
        /// Node.
        node: Sym,
        /// Why.
        error: ActionError,
        /// Pods evicted before it gave up.
        evicted: usize,
        /// Pods whose eviction was refused or failed.
        refused: Vec<PodRef>,
        /// Pods not evicted (refused, or not tried after a refusal).
        not_evicted: usize,
    },
    /// A status write ([`EffectKind::WriteStatus`]) was accepted.
    StatusWritten {
        /// `Kind namespace/name`.
        object: String,
    },
    /// A status write failed (a `Conflict`: the object changed; decided again next loop).
    StatusWriteFailed {
        /// `Kind namespace/name`.
        object: String,
        /// Why.
        error: ActionError,
    },
}

impl Report {
    /// What the core must learn from it (through `Autoscaler::observe`).
    pub fn outcomes(&self) -> Vec<Outcome> {
        match self {
            Report::ScaleUpFailed { group, error, .. } => vec![Outcome::ScaleUpFailed {
                group: group.clone(),
                error: error.clone(),
            }],
            Report::Deleted { nodes, .. } => nodes
                .iter()
                .map(|&node| Outcome::NodeDeleted { node })
                .collect(),
            Report::DeleteFailed { nodes, .. } => nodes
                .iter()
                .map(|&node| Outcome::NodeDeletionFailed { node })
                .collect(),
            Report::DrainFailed { node, .. } => {
                vec![Outcome::NodeDeletionFailed { node: *node }]
            }
            _ => Vec::new(),
        }
    }
}

/// The class of a provider refusal.
pub fn provider_error(e: &ProviderError) -> ActionError {
    let class = match e {
        ProviderError::UnknownGroup { .. } => ErrorClass::NotFound,
        ProviderError::WouldDeleteMachines { .. } => ErrorClass::RefusedBySafety,
        ProviderError::ZeroDelta { .. }
        | ProviderError::AboveMax { .. }
        | ProviderError::BelowMin { .. }
        | ProviderError::NotInGroup { .. } => ErrorClass::Invalid,
    };
    ActionError::new(class, e.to_string())
}

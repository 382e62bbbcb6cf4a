//! Drain rules: which pods on a node that scale-down wants to remove must be rescheduled, which
//! are only evicted, which can be ignored, and which forbid removing the node at all.
//!
//! This module decides, per pod and then per node, following the cluster autoscaler's
//! drainability rules: mirror pods, pods terminating for longer than their grace period plus a
//! margin, terminal pods and expendable pods are ignored; DaemonSet pods are evicted without
//! rescheduling or left alone according to the eviction flags and their `enable-ds-eviction`
//! annotation; every other pod must be moved unless a rule blocks it (no controller, a custom
//! controller, an unprotected kube-system pod younger than its timeout, the `safe-to-evict:
//! "false"` annotation, local storage, an exhausted PodDisruptionBudget, a missing controller or
//! one below `min_replica_count`). It never decides
//! *where* pods go (that is the removal simulation), and it must never perform I/O, read the clock
//! (the caller passes `now_ms`) or panic on any input.

use autoscaler_model::{
    DAEMONSET_POD_ANNOTATION, ENABLE_DS_EVICTION_ANNOTATION, KUBE_SYSTEM, MIRROR_POD_ANNOTATION,
    SAFE_TO_EVICT_ANNOTATION, SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION,
};
use std::fmt;
use std::sync::{Arc, LazyLock};

use autoscaler_model::Sym;
use autoscaler_model::{ControllerLookup, ControllerState};
use autoscaler_model::{DisruptionBudgets, PdbBlocked};
use autoscaler_model::{OwnerRef, Pod};

/// `terminationGracePeriodSeconds` the API server defaults to (30 s), in milliseconds: the
/// grace assumed for a pod that does not say its own.
pub const DEFAULT_TERMINATION_GRACE_MS: i64 = 30_000;
/// Margin after the grace period beyond which a terminating pod is treated as gone (30 s).
pub const LONG_TERMINATING_EXTRA_MS: i64 = 30_000;

/// The drain flags of the autoscaler (upstream flag names in the field docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrainOptions {
    /// `--skip-nodes-with-system-pods` (default true): kube-system pods that are neither
    /// DaemonSet nor mirror pods block unless a PodDisruptionBudget covers them, until
    /// [`DrainOptions::blocking_system_pod_disruption_timeout_ms`] after their creation.
    pub(crate) skip_nodes_with_system_pods: bool,
    /// `--blocking-system-pod-distruption-timeout` (upstream's spelling; default 1h), in
    /// milliseconds: how long after its creation such a kube-system pod still blocks; older,
    /// it is evicted like any other (0: never blocks). A pod without a creation time blocks.
    pub(crate) blocking_system_pod_disruption_timeout_ms: i64,
    /// `--skip-nodes-with-local-storage` (default true): pods with hostPath or on-disk emptyDir
    /// volumes block unless the `safe-to-evict-local-volumes` annotation lists every one.
    pub(crate) skip_nodes_with_local_storage: bool,
    /// `--skip-nodes-with-custom-controller-pods` (default true): only ReplicaSet,
    /// ReplicationController, Job and StatefulSet (and DaemonSet) count as controllers, and the
    /// controller existence / replica checks run.
    pub(crate) skip_nodes_with_custom_controller_pods: bool,
    /// `--min-replica-count` (default 0): pods of a ReplicaSet or ReplicationController with fewer
    /// desired replicas block. Upstream applies it only with
    /// `skip_nodes_with_custom_controller_pods`.
    pub(crate) min_replica_count: i32,
    /// `--daemonset-eviction-for-empty-nodes` (default false): evict DaemonSet pods from nodes
    /// with no pod to move.
    pub(crate) daemonset_eviction_for_empty_nodes: bool,
    /// `--daemonset-eviction-for-occupied-nodes` (default true): evict DaemonSet pods from nodes
    /// with pods to move.
    pub(crate) daemonset_eviction_for_occupied_nodes: bool,
    /// `--expendable-pods-priority-cutoff` (default -10, shared with scale-up): pods with a
    /// lower priority are expendable; they never block a removal and are not moved (they go
    /// with their node).
    pub(crate) expendable_pods_priority_cutoff: i32,
}

impl Default for DrainOptions {
    fn default() -> Self {
        DrainOptions {
            skip_nodes_with_system_pods: true,
            blocking_system_pod_disruption_timeout_ms: 3_600_000,
            skip_nodes_with_local_storage: true,
            skip_nodes_with_custom_controller_pods: true,
            min_replica_count: 0,
            daemonset_eviction_for_empty_nodes: false,
            daemonset_eviction_for_occupied_nodes: true,
            expendable_pods_priority_cutoff: -10,
        }
    }
}

/// Everything the rules read besides the pods.
#[derive(Clone, Copy)]
pub struct DrainContext<'a> {
    /// Flags.
    pub opts: &'a DrainOptions,
    /// PodDisruptionBudgets with what is left of them in this loop.
    pub budgets: &'a DisruptionBudgets,
    /// Controller lookup (use [`autoscaler_model::NoControllerLookup`] without workload objects).
    pub controllers: &'a dyn ControllerLookup,
    /// The loop's clock value, milliseconds since the Unix epoch.
    pub now_ms: i64,
}

/// Why a pod does not need to go anywhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IgnoreReason {
    /// The API mirror of a static pod: the kubelet, not the API, runs it.
    Mirror,
    /// Being deleted for longer than its grace period plus a margin: treated as gone.
    LongTerminating,
    /// `Succeeded` or `Failed`: it will not run again.
    Terminal,
    /// A DaemonSet pod left in place (it dies with the node).
    DaemonSetNotEvicted,
    /// Priority below `--expendable-pods-priority-cutoff`: it goes with the node, unmoved.
    Expendable,
}

/// Why a pod forbids removing its node. Variants follow upstream's blocking reasons.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlockReason {
    /// The pod's controller is known not to exist, so nothing would recreate the pod.
    ControllerNotFound {
        /// Controller kind.
        kind: Sym,
        /// Controller name.
        name: Arc<str>,
    },
    /// The pod's ReplicaSet / ReplicationController wants fewer replicas than
    /// `min_replica_count`.
    MinReplicasReached {
        /// Controller kind.
        kind: Sym,
        /// Controller name.
        name: Arc<str>,
        /// Its desired replicas.
        replicas: i32,
        /// The configured minimum.
        min: i32,
    },
    /// No controller owns the pod: nothing would recreate it elsewhere.
    NotReplicated,
    /// The pod's controller is of a kind the autoscaler does not trust to recreate it (upstream
    /// reports this as NotReplicated).
    CustomController {
        /// The controller's kind.
        kind: Sym,
    },
    /// A kube-system pod that is neither a DaemonSet nor a mirror pod and no budget covers.
    UnmovableKubeSystemPod,
    /// The pod is annotated `safe-to-evict: "false"`.
    NotSafeToEvictAnnotation,
    /// The pod has local storage that would be lost.
    LocalStorageRequested {
        /// The local-storage volumes not listed as safe to lose.
        volumes: Vec<Arc<str>>,
    },
    /// More than one PodDisruptionBudget covers the pod: the Eviction API refuses to evict such
    /// a pod at all, so its node cannot be drained.
    MultiplePdbs {
        /// The budgets, `namespace/name`.
        pdbs: Vec<String>,
    },
    /// A PodDisruptionBudget covering the pod allows no further disruption.
    NotEnoughPdb {
        /// The budget, `namespace/name`.
        pdb: String,
        /// Its spec and status, for the explanation.
        detail: String,
    },
}

impl BlockReason {
    /// Upstream's name of the reason (for metrics, events and status).
    pub fn code(&self) -> &'static str {
        match self {
            BlockReason::ControllerNotFound { .. } => "ControllerNotFound",
            BlockReason::MinReplicasReached { .. } => "MinReplicasReached",
            BlockReason::NotReplicated | BlockReason::CustomController { .. } => "NotReplicated",
            BlockReason::UnmovableKubeSystemPod => "UnmovableKubeSystemPod",
            BlockReason::NotSafeToEvictAnnotation => "NotSafeToEvictAnnotation",
            BlockReason::LocalStorageRequested { .. } => "LocalStorageRequested",
            BlockReason::MultiplePdbs { .. } => "MultiplePdbs",
            BlockReason::NotEnoughPdb { .. } => "NotEnoughPdb",
        }
    }
}

impl fmt::Display for BlockReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlockReason::ControllerNotFound { kind, name } => {
                write!(f, "its controller {kind} {name} does not exist")
            }
            BlockReason::MinReplicasReached {
                kind,
                name,
                replicas,
                min,
            } => write!(
                f,
                "its controller {kind} {name} has {replicas} replicas, fewer than the minimum of \
                 {min} (--min-replica-count)"
            ),
            BlockReason::NotReplicated => {
                write!(f, "no controller owns it, so nothing would recreate it")
            }
            BlockReason::CustomController { kind } => write!(
                f,
                "its controller is a {kind}, not a ReplicaSet, ReplicationController, Job or \
                 StatefulSet (--skip-nodes-with-custom-controller-pods)"
            ),
            BlockReason::UnmovableKubeSystemPod => write!(
                f,
                "it is a kube-system pod that is not a DaemonSet or mirror pod and no \
                 PodDisruptionBudget covers it, younger than \
                 --blocking-system-pod-distruption-timeout (--skip-nodes-with-system-pods)"
            ),
            BlockReason::NotSafeToEvictAnnotation => {
                write!(f, "it is annotated {SAFE_TO_EVICT_ANNOTATION}=false")
            }
            BlockReason::LocalStorageRequested { volumes } => {
                write!(f, "it has local storage that would be lost (volumes ")?;
                for (i, v) in volumes.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    f.write_str(v)?;
                }
                write!(
                    f,
                    ") not listed in {SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION} \
                     (--skip-nodes-with-local-storage)"
                )
            }
            BlockReason::MultiplePdbs { pdbs } => write!(
                f,
                "it is covered by more than one PodDisruptionBudget ({}), which the Eviction API refuses to evict",
                pdbs.join(", ")
            ),
            BlockReason::NotEnoughPdb { pdb, detail } => write!(
                f,
                "PodDisruptionBudget {pdb} allows no further disruption ({detail})"
            ),
        }
    }
}

/// What draining a node does with one pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodDrain {
    /// Nothing: the pod can be left behind.
    Ignore(IgnoreReason),
    /// Evict it and find it a place elsewhere.
    Move,
    /// Evict it without rescheduling it (a DaemonSet pod).
    Evict,
    /// The node cannot be removed because of this pod.
    Block(BlockReason),
}

/// A node that cannot be drained, with the first pod that forbids it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("pod {pod} prevents removing its node: {reason}")]
pub struct Blocked {
    /// The pod, `namespace/name`.
    pub pod: String,
    /// Why.
    pub reason: BlockReason,
}

/// What draining a node involves.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DrainPlan {
    /// Pods to evict and reschedule elsewhere (the removal simulation must place them).
    pub to_move: Vec<Arc<Pod>>,
    /// DaemonSet pods to evict without rescheduling.
    pub to_evict_only: Vec<Arc<Pod>>,
    /// Pods left alone (mirror, long-terminating, terminal, DaemonSet pods not evicted).
    pub ignored: usize,
    /// Set when every budget covering a pod to move allows at least one disruption but some
    /// budget allows fewer than this node needs at once: evictions then have to wait for
    /// replacements one by one and may outlast the drain timeout (upstream calls such a removal
    /// risky and does not block it).
    pub pdb_sequential: Option<PdbBlocked>,
}

impl DrainPlan {
    /// Whether the node has no pod to reschedule (upstream's "empty" node).
    pub fn is_empty(&self) -> bool {
        self.to_move.is_empty()
    }
}

/// The grace period an eviction gives `pod`, seconds: its own termination grace period (the
/// API's 30 s default when it has none), at most `max_sec` (`--max-graceful-termination-sec`),
/// as upstream's eviction does.
pub fn eviction_grace_sec(pod: &Pod, max_sec: u64) -> u64 {
    let own_ms = pod
        .termination_grace_ms
        .unwrap_or(DEFAULT_TERMINATION_GRACE_MS)
        .max(0);
    u64::try_from(own_ms / 1000).unwrap_or(0).min(max_sec)
}

/// Whether `pod` is expendable: its priority is below `cutoff`.
pub fn is_expendable(pod: &Pod, cutoff: i32) -> bool {
    pod.priority < cutoff
}

/// Whether `pod` is the mirror of a static pod.
pub fn is_mirror_pod(pod: &Pod) -> bool {
    pod.annotation(MIRROR_POD_ANNOTATION).is_some()
}

/// Whether `pod` is a DaemonSet pod: its controller is a DaemonSet, or it carries the
/// `daemonset-pod: "true"` annotation.
pub fn is_daemonset_pod(pod: &Pod) -> bool {
    controller_of(pod).is_some_and(|o| o.kind == *DAEMONSET)
        || pod.annotation(DAEMONSET_POD_ANNOTATION) == Some("true")
}

// Symbols compare as numbers: the drain rules read every pod of every candidate node.
static DAEMONSET: LazyLock<Sym> = LazyLock::new(|| Sym::new("DaemonSet"));
static KUBE_SYSTEM_NS: LazyLock<Sym> = LazyLock::new(|| Sym::new(KUBE_SYSTEM));

/// Whether `pod` has been terminating for longer than its grace period plus
/// [`LONG_TERMINATING_EXTRA_MS`] at `now_ms`.
pub fn is_long_terminating(pod: &Pod, now_ms: i64) -> bool {
    pod.deletion_ms.is_some_and(|d| {
        d.saturating_add(
            pod.termination_grace_ms
                .unwrap_or(DEFAULT_TERMINATION_GRACE_MS),
        )
        .saturating_add(LONG_TERMINATING_EXTRA_MS)
            < now_ms
    })
}

/// Whether `pod` has finished for good (`Succeeded` or `Failed`).
pub fn is_terminal(pod: &Pod) -> bool {
    pod.is_terminal()
}

/// The local-storage volumes of `pod` that the `safe-to-evict-local-volumes` annotation does not
/// list (names are compared exactly, as upstream does).
pub fn blocking_local_volumes(pod: &Pod) -> Vec<Arc<str>> {
    let listed = pod
        .annotation(SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION)
        .unwrap_or("");
    pod.volumes
        .iter()
        .filter(|v| v.local_storage && !listed.split(',').any(|n| n == v.name.as_ref()))
        .map(|v| v.name.clone())
        .collect()
}

/// Whether a DaemonSet pod is evicted, given the flag for this kind of node.
pub fn should_evict_daemonset_pod(pod: &Pod, evict_by_default: bool) -> bool {
    match pod.annotation(ENABLE_DS_EVICTION_ANNOTATION) {
        Some("true") => true,
        Some("false") => false,
        _ => evict_by_default,
    }
}

/// The owner reference if it is the controller (`controller: true`).
fn controller_of(pod: &Pod) -> Option<&OwnerRef> {
    pod.owner.as_ref().filter(|o| o.controller)
}

/// The API group of an `apiVersion` (`apps/v1` is `apps`, `v1` is the core group `""`).
fn api_group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

static REPLICATION_CONTROLLER: LazyLock<Sym> = LazyLock::new(|| Sym::new("ReplicationController"));
static REPLICA_SET: LazyLock<Sym> = LazyLock::new(|| Sym::new("ReplicaSet"));
static JOB: LazyLock<Sym> = LazyLock::new(|| Sym::new("Job"));
static STATEFUL_SET: LazyLock<Sym> = LazyLock::new(|| Sym::new("StatefulSet"));

/// Kinds whose pods count as replicated under `skip_nodes_with_custom_controller_pods`.
fn is_replicated_kind(kind: Sym) -> bool {
    kind == *REPLICA_SET || kind == *JOB || kind == *STATEFUL_SET || kind == *REPLICATION_CONTROLLER
}

/// The pod-level outcome before the node-level DaemonSet decision.
enum Step {
    Ignore(IgnoreReason),
    Move,
    DaemonSet,
    Block(BlockReason),
}

/// Controller existence and replica-count checks (upstream's replica-count rule): only for the
/// kinds the autoscaler knows how to look up, and only when the lookup knows the answer.
fn controller_check(pod: &Pod, ctx: &DrainContext<'_>) -> Option<BlockReason> {
    let owner = controller_of(pod)?;
    // Kinds compare as symbols; the API group is read only for the kinds that need it.
    let kind = owner.kind;
    let checks_replicas = if kind == *REPLICA_SET || kind == *REPLICATION_CONTROLLER {
        true
    } else if kind == *JOB
        || ((kind == *DAEMONSET || kind == *STATEFUL_SET)
            && api_group(owner.api_version.as_str()) == "apps")
    {
        false
    } else {
        return None;
    };
    match ctx.controllers.controller(pod.namespace, owner) {
        ControllerState::Unknown => None,
        ControllerState::Missing => Some(BlockReason::ControllerNotFound {
            kind: owner.kind,
            name: owner.name.clone(),
        }),
        ControllerState::Present {
            replicas: Some(replicas),
        } if checks_replicas && replicas < ctx.opts.min_replica_count => {
            Some(BlockReason::MinReplicasReached {
                kind: owner.kind,
                name: owner.name.clone(),
                replicas,
                min: ctx.opts.min_replica_count,
            })
        }
        ControllerState::Present { .. } => None,
    }
}

/// Whether an unprotected kube-system pod is still young enough to block its node (upstream's
/// system rule: created less than `--blocking-system-pod-distruption-timeout` ago). Without a
/// creation time it blocks, the safe side.
fn system_pod_still_blocks(pod: &Pod, ctx: &DrainContext<'_>) -> bool {
    let timeout = ctx.opts.blocking_system_pod_disruption_timeout_ms;
    pod.creation_ms
        .is_none_or(|c| ctx.now_ms < c.saturating_add(timeout))
}

/// The PodDisruptionBudget rule: every budget covering the pod must allow one more disruption.
fn pdb_check(pod: &Pod, ctx: &DrainContext<'_>) -> Option<BlockReason> {
    let covering = ctx.budgets.for_pod(pod);
    if covering.len() > 1 {
        let pdbs = covering
            .iter()
            .filter_map(|&i| ctx.budgets.pdbs().get(i))
            .map(|p| p.key())
            .collect();
        return Some(BlockReason::MultiplePdbs { pdbs });
    }
    // On the budgets already found: each pod's budgets are looked up once.
    let i = ctx.budgets.first_exhausted(&covering)?;
    let pdb = ctx.budgets.pdbs().get(i)?;
    Some(BlockReason::NotEnoughPdb {
        pdb: pdb.key(),
        detail: ctx.budgets.exhausted_detail(i),
    })
}

fn classify(pod: &Pod, ctx: &DrainContext<'_>) -> Step {
    let opts = ctx.opts;
    if is_mirror_pod(pod) {
        return Step::Ignore(IgnoreReason::Mirror);
    }
    if is_long_terminating(pod, ctx.now_ms) {
        return Step::Ignore(IgnoreReason::LongTerminating);
    }
    // Seed 002 and upstream's snapshot: expendable pods are dropped, never moved, never block.
    if is_expendable(pod, opts.expendable_pods_priority_cutoff) && !is_daemonset_pod(pod) {
        return Step::Ignore(IgnoreReason::Expendable);
    }
    // Upstream checks terminal pods after the controller checks; a finished pod needs no
    // controller to recreate it, so it is ignored first here.
    if is_terminal(pod) {
        return Step::Ignore(IgnoreReason::Terminal);
    }
    if opts.skip_nodes_with_custom_controller_pods
        && let Some(r) = controller_check(pod, ctx)
    {
        return Step::Block(r);
    }
    if is_daemonset_pod(pod) {
        return Step::DaemonSet;
    }
    let safe_to_evict = pod.annotation(SAFE_TO_EVICT_ANNOTATION);
    if safe_to_evict == Some("true") {
        return match pdb_check(pod, ctx) {
            Some(r) => Step::Block(r),
            None => Step::Move,
        };
    }
    match controller_of(pod) {
        None => return Step::Block(BlockReason::NotReplicated),
        Some(o) if opts.skip_nodes_with_custom_controller_pods && !is_replicated_kind(o.kind) => {
            return Step::Block(BlockReason::CustomController { kind: o.kind });
        }
        Some(_) => {}
    }
    if opts.skip_nodes_with_system_pods
        && pod.namespace == *KUBE_SYSTEM_NS
        && !ctx.budgets.covers(pod)
        && system_pod_still_blocks(pod, ctx)
    {
        return Step::Block(BlockReason::UnmovableKubeSystemPod);
    }
    if safe_to_evict == Some("false") {
        return Step::Block(BlockReason::NotSafeToEvictAnnotation);
    }
    if opts.skip_nodes_with_local_storage {
        let volumes = blocking_local_volumes(pod);
        if !volumes.is_empty() {
            return Step::Block(BlockReason::LocalStorageRequested { volumes });
        }
    }
    match pdb_check(pod, ctx) {
        Some(r) => Step::Block(r),
        None => Step::Move,
    }
}

/// Classifies one pod. `node_empty` says whether its node has no pod to move, which selects the
/// DaemonSet eviction flag ([`drain_node`] computes it; pass it when classifying alone).
pub fn classify_pod(pod: &Pod, node_empty: bool, ctx: &DrainContext<'_>) -> PodDrain {
    match classify(pod, ctx) {
        Step::Ignore(r) => PodDrain::Ignore(r),
        Step::Move => PodDrain::Move,
        Step::Block(r) => PodDrain::Block(r),
        Step::DaemonSet => {
            let default = if node_empty {
                ctx.opts.daemonset_eviction_for_empty_nodes
            } else {
                ctx.opts.daemonset_eviction_for_occupied_nodes
            };
            if should_evict_daemonset_pod(pod, default) {
                PodDrain::Evict
            } else {
                PodDrain::Ignore(IgnoreReason::DaemonSetNotEvicted)
            }
        }
    }
}

/// Decides what draining a node with `pods` involves, or which pod forbids it (the first
/// blocking pod in `pods` order). A node is "empty" when it has no pod to move; that selects
/// between the two DaemonSet eviction flags. The budgets are only read: commit
/// [`DrainPlan::to_move`] to them once the node is chosen for removal.
pub fn drain_node(pods: &[Arc<Pod>], ctx: &DrainContext<'_>) -> Result<DrainPlan, Blocked> {
    let mut plan = DrainPlan::default();
    let mut daemonset = Vec::new();
    for pod in pods {
        match classify(pod, ctx) {
            Step::Ignore(_) => plan.ignored += 1,
            Step::Move => plan.to_move.push(pod.clone()),
            Step::DaemonSet => daemonset.push(pod.clone()),
            Step::Block(reason) => {
                return Err(Blocked {
                    pod: pod.key(),
                    reason,
                });
            }
        }
    }
    let default = if plan.is_empty() {
        ctx.opts.daemonset_eviction_for_empty_nodes
    } else {
        ctx.opts.daemonset_eviction_for_occupied_nodes
    };
    for pod in daemonset {
        if should_evict_daemonset_pod(&pod, default) {
            plan.to_evict_only.push(pod);
        } else {
            plan.ignored += 1;
        }
    }
    let refs: Vec<&Pod> = plan.to_move.iter().map(|p| p.as_ref()).collect();
    plan.pdb_sequential = ctx.budgets.can_evict(&refs).err();
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_model::NoControllerLookup;
    use autoscaler_model::PodDisruptionBudget;
    use autoscaler_model::Volume;
    use autoscaler_model::testing::PodBuilder;
    use autoscaler_model::{LabelSelector, Labels};
    use proptest::prelude::*;

    const NOW: i64 = 1_700_000_000_000;

    fn annotate(p: &mut Pod, k: &str, v: &str) {
        match p
            .annotations
            .binary_search_by(|(key, _)| key.as_ref().cmp(k))
        {
            Ok(i) => p.annotations[i].1 = Arc::from(v),
            Err(i) => p.annotations.insert(i, (Arc::from(k), Arc::from(v))),
        }
    }

    fn rs_pod(name: &str) -> PodBuilder {
        PodBuilder::new(name, 100, 0)
            .owner("ReplicaSet", "rs")
            .label("app", "web")
    }

    fn bare_pod(name: &str) -> PodBuilder {
        PodBuilder::new(name, 100, 0).label("app", "web")
    }

    fn ann(b: PodBuilder, k: &str, v: &str) -> PodBuilder {
        let (k, v) = (k.to_string(), v.to_string());
        b.with(move |p| annotate(p, &k, &v))
    }

    fn volume(b: PodBuilder, name: &str, local: bool) -> PodBuilder {
        let name = name.to_string();
        b.with(move |p| {
            p.volumes.push(Volume {
                name: Arc::from(name.as_str()),
                local_storage: local,
            })
        })
    }

    fn pdb(ns: &str, allowed: i32) -> PodDisruptionBudget {
        PodDisruptionBudget::new(
            ns,
            "web-pdb",
            Some(LabelSelector {
                match_labels: Labels::from_pairs([("app", "web")]),
                match_expressions: Vec::new(),
            }),
            allowed,
        )
    }

    /// A lookup answering by controller name: `missing`, `few` (1 replica), anything else
    /// present with 5 replicas; `unknown` is unknown.
    fn by_name(_: Sym, o: &OwnerRef) -> ControllerState {
        match o.name.as_ref() {
            "missing" => ControllerState::Missing,
            "unknown" => ControllerState::Unknown,
            "few" => ControllerState::Present { replicas: Some(1) },
            _ => ControllerState::Present { replicas: Some(5) },
        }
    }

    fn run(
        pods: &[Arc<Pod>],
        opts: &DrainOptions,
        pdbs: Vec<PodDisruptionBudget>,
        lookup: &dyn ControllerLookup,
    ) -> Result<DrainPlan, Blocked> {
        let budgets = DisruptionBudgets::new(pdbs);
        let ctx = DrainContext {
            opts,
            budgets: &budgets,
            controllers: lookup,
            now_ms: NOW,
        };
        drain_node(pods, &ctx)
    }

    struct Case {
        name: &'static str,
        /// The pod with the rule's trigger.
        blocked: PodBuilder,
        /// Options, budgets and lookup under which `blocked` blocks.
        opts: DrainOptions,
        pdbs: Vec<PodDisruptionBudget>,
        lookup: &'static dyn ControllerLookup,
        /// Upstream reason code expected.
        code: &'static str,
        /// One flip (annotation, flag, budget or lookup) that makes the node drainable.
        flipped: Flip,
    }

    enum Flip {
        Pod(Box<PodBuilder>),
        Opts(DrainOptions),
        Pdbs(Vec<PodDisruptionBudget>),
        Lookup(&'static dyn ControllerLookup),
    }

    fn flip_pod(b: PodBuilder) -> Flip {
        Flip::Pod(Box::new(b))
    }

    #[test]
    fn every_rule_flips() {
        let d = DrainOptions::default;
        let cases = vec![
            Case {
                name: "safe-to-evict=false blocks; removing it drains",
                blocked: ann(rs_pod("p"), SAFE_TO_EVICT_ANNOTATION, "false"),
                opts: d(),
                pdbs: vec![],
                lookup: &NoControllerLookup,
                code: "NotSafeToEvictAnnotation",
                flipped: flip_pod(rs_pod("p")),
            },
            Case {
                name: "no owner blocks; safe-to-evict=true drains",
                blocked: bare_pod("p"),
                opts: d(),
                pdbs: vec![],
                lookup: &NoControllerLookup,
                code: "NotReplicated",
                flipped: flip_pod(ann(bare_pod("p"), SAFE_TO_EVICT_ANNOTATION, "true")),
            },
            Case {
                name: "a non-controller owner is no controller",
                blocked: rs_pod("p").with(|p| {
                    if let Some(o) = p.owner.as_mut() {
                        o.controller = false;
                    }
                }),
                opts: d(),
                pdbs: vec![],
                lookup: &NoControllerLookup,
                code: "NotReplicated",
                flipped: flip_pod(rs_pod("p")),
            },
            Case {
                name: "custom controller blocks under the flag",
                blocked: bare_pod("p").owner("Rollout", "r"),
                opts: d(),
                pdbs: vec![],
                lookup: &NoControllerLookup,
                code: "NotReplicated",
                flipped: Flip::Opts(DrainOptions {
                    skip_nodes_with_custom_controller_pods: false,
                    ..d()
                }),
            },
            Case {
                name: "custom controller: safe-to-evict=true drains",
                blocked: bare_pod("p").owner("Rollout", "r"),
                opts: d(),
                pdbs: vec![],
                lookup: &NoControllerLookup,
                code: "NotReplicated",
                flipped: flip_pod(ann(
                    bare_pod("p").owner("Rollout", "r"),
                    SAFE_TO_EVICT_ANNOTATION,
                    "true",
                )),
            },
            Case {
                name: "kube-system pod blocks; flag off drains",
                blocked: rs_pod("p").namespace(KUBE_SYSTEM),
                opts: d(),
                pdbs: vec![],
                lookup: &NoControllerLookup,
                code: "UnmovableKubeSystemPod",
                flipped: Flip::Opts(DrainOptions {
                    skip_nodes_with_system_pods: false,
                    ..d()
                }),
            },
            Case {
                name: "kube-system pod covered by a budget drains",
                blocked: rs_pod("p").namespace(KUBE_SYSTEM),
                opts: d(),
                pdbs: vec![pdb("default", 1)],
                lookup: &NoControllerLookup,
                code: "UnmovableKubeSystemPod",
                flipped: Flip::Pdbs(vec![pdb(KUBE_SYSTEM, 1)]),
            },
            Case {
                name: "kube-system pod: safe-to-evict=true drains",
                blocked: rs_pod("p").namespace(KUBE_SYSTEM),
                opts: d(),
                pdbs: vec![],
                lookup: &NoControllerLookup,
                code: "UnmovableKubeSystemPod",
                flipped: flip_pod(ann(
                    rs_pod("p").namespace(KUBE_SYSTEM),
                    SAFE_TO_EVICT_ANNOTATION,
                    "true",
                )),
            },
            Case {
                name: "local storage blocks; flag off drains",
                blocked: volume(rs_pod("p"), "data", true),
                opts: d(),
                pdbs: vec![],
                lookup: &NoControllerLookup,
                code: "LocalStorageRequested",
                flipped: Flip::Opts(DrainOptions {
                    skip_nodes_with_local_storage: false,
                    ..d()
                }),
            },
            Case {
                name: "local storage listed as safe drains",
                blocked: ann(
                    volume(volume(rs_pod("p"), "data", true), "cache", true),
                    SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION,
                    "data",
                ),
                opts: d(),
                pdbs: vec![],
                lookup: &NoControllerLookup,
                code: "LocalStorageRequested",
                flipped: flip_pod(ann(
                    volume(volume(rs_pod("p"), "data", true), "cache", true),
                    SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION,
                    "data,cache",
                )),
            },
            Case {
                name: "memory-backed volume is not local storage",
                blocked: volume(rs_pod("p"), "tmp", true),
                opts: d(),
                pdbs: vec![],
                lookup: &NoControllerLookup,
                code: "LocalStorageRequested",
                flipped: flip_pod(volume(rs_pod("p"), "tmp", false)),
            },
            Case {
                name: "exhausted budget blocks; one allowed drains",
                blocked: rs_pod("p"),
                opts: d(),
                pdbs: vec![pdb("default", 0)],
                lookup: &NoControllerLookup,
                code: "NotEnoughPdb",
                flipped: Flip::Pdbs(vec![pdb("default", 1)]),
            },
            Case {
                name: "safe-to-evict=true does not bypass budgets",
                blocked: ann(bare_pod("p"), SAFE_TO_EVICT_ANNOTATION, "true"),
                opts: d(),
                pdbs: vec![pdb("default", 0)],
                lookup: &NoControllerLookup,
                code: "NotEnoughPdb",
                flipped: Flip::Pdbs(vec![]),
            },
            Case {
                name: "min replicas blocks; lower minimum drains",
                blocked: bare_pod("p").owner("ReplicaSet", "few"),
                opts: DrainOptions {
                    min_replica_count: 2,
                    ..d()
                },
                pdbs: vec![],
                lookup: &by_name,
                code: "MinReplicasReached",
                flipped: Flip::Opts(DrainOptions {
                    min_replica_count: 1,
                    ..d()
                }),
            },
            Case {
                name: "min replicas: unknown controller is not checked",
                blocked: bare_pod("p").owner("ReplicationController", "few"),
                opts: DrainOptions {
                    min_replica_count: 2,
                    ..d()
                },
                pdbs: vec![],
                lookup: &by_name,
                code: "MinReplicasReached",
                flipped: Flip::Lookup(&NoControllerLookup),
            },
            Case {
                name: "min replicas only applies with the custom-controller flag (upstream)",
                blocked: bare_pod("p").owner("ReplicaSet", "few"),
                opts: DrainOptions {
                    min_replica_count: 2,
                    ..d()
                },
                pdbs: vec![],
                lookup: &by_name,
                code: "MinReplicasReached",
                flipped: Flip::Opts(DrainOptions {
                    min_replica_count: 2,
                    skip_nodes_with_custom_controller_pods: false,
                    ..d()
                }),
            },
            Case {
                name: "missing controller blocks; without lookup drains",
                blocked: bare_pod("p").owner("Job", "missing"),
                opts: d(),
                pdbs: vec![],
                lookup: &by_name,
                code: "ControllerNotFound",
                flipped: Flip::Lookup(&NoControllerLookup),
            },
            Case {
                name: "missing StatefulSet blocks; present drains",
                blocked: bare_pod("p").owner("StatefulSet", "missing"),
                opts: d(),
                pdbs: vec![],
                lookup: &by_name,
                code: "ControllerNotFound",
                flipped: flip_pod(bare_pod("p").owner("StatefulSet", "db")),
            },
            Case {
                name: "missing DaemonSet blocks even a DaemonSet pod",
                blocked: bare_pod("p").owner("DaemonSet", "missing"),
                opts: d(),
                pdbs: vec![],
                lookup: &by_name,
                code: "ControllerNotFound",
                flipped: flip_pod(bare_pod("p").owner("DaemonSet", "agent")),
            },
            Case {
                name: "mirror pods are ignored",
                blocked: bare_pod("p"),
                opts: d(),
                pdbs: vec![],
                lookup: &NoControllerLookup,
                code: "NotReplicated",
                flipped: flip_pod(ann(bare_pod("p"), MIRROR_POD_ANNOTATION, "abc")),
            },
            Case {
                name: "terminal pods are ignored",
                blocked: bare_pod("p").with(|p| p.phase = autoscaler_model::PodPhase::Running),
                opts: d(),
                pdbs: vec![],
                lookup: &NoControllerLookup,
                code: "NotReplicated",
                flipped: flip_pod(
                    bare_pod("p").with(|p| p.phase = autoscaler_model::PodPhase::Succeeded),
                ),
            },
            Case {
                name: "long-terminating pods are ignored, recently deleted ones are not",
                blocked: bare_pod("p").with(|p| p.deletion_ms = Some(NOW - 59_000)),
                opts: d(),
                pdbs: vec![],
                lookup: &NoControllerLookup,
                code: "NotReplicated",
                flipped: flip_pod(bare_pod("p").with(|p| p.deletion_ms = Some(NOW - 61_000))),
            },
            Case {
                name: "daemonset-pod annotation makes an unowned pod a DaemonSet pod",
                blocked: bare_pod("p"),
                opts: d(),
                pdbs: vec![],
                lookup: &NoControllerLookup,
                code: "NotReplicated",
                flipped: flip_pod(ann(bare_pod("p"), DAEMONSET_POD_ANNOTATION, "true")),
            },
        ];
        for c in cases {
            let other = rs_pod("other").label("app", "other").arc();
            let pods = vec![other.clone(), c.blocked.clone().arc()];
            let err = run(&pods, &c.opts, c.pdbs.clone(), c.lookup)
                .expect_err(&format!("{}: should block", c.name));
            assert_eq!(err.reason.code(), c.code, "{}: {err}", c.name);
            assert_eq!(err.pod, pods[1].key(), "{}", c.name);
            let msg = err.to_string();
            assert!(
                msg.contains(&err.pod),
                "{}: message names the pod: {msg}",
                c.name
            );
            let (opts, pdbs, lookup, pod) = match c.flipped {
                Flip::Pod(b) => (c.opts, c.pdbs, c.lookup, (*b).arc()),
                Flip::Opts(o) => (o, c.pdbs, c.lookup, pods[1].clone()),
                Flip::Pdbs(p) => (c.opts, p, c.lookup, pods[1].clone()),
                Flip::Lookup(l) => (c.opts, c.pdbs, l, pods[1].clone()),
            };
            let plan = run(&[other, pod], &opts, pdbs, lookup)
                .unwrap_or_else(|e| panic!("{}: flipped should drain, got {e}", c.name));
            assert!(
                plan.to_move.iter().any(|p| p.name.as_ref() == "other"),
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn plan_sorts_pods() {
        let pods = vec![
            rs_pod("web").arc(),
            ann(bare_pod("mirror"), MIRROR_POD_ANNOTATION, "x").arc(),
            bare_pod("done")
                .with(|p| p.phase = autoscaler_model::PodPhase::Failed)
                .arc(),
            bare_pod("agent").owner("DaemonSet", "agent").arc(),
        ];
        let plan =
            run(&pods, &DrainOptions::default(), vec![], &NoControllerLookup).expect("drainable");
        let names = |v: &[Arc<Pod>]| v.iter().map(|p| p.name.to_string()).collect::<Vec<_>>();
        assert_eq!(names(&plan.to_move), ["web"]);
        assert_eq!(
            names(&plan.to_evict_only),
            ["agent"],
            "occupied node evicts DS pods"
        );
        assert_eq!(plan.ignored, 2);
        assert!(!plan.is_empty());
    }

    #[test]
    fn daemonset_eviction_flags_and_annotation() {
        let ds = || bare_pod("agent").owner("DaemonSet", "agent");
        let web = rs_pod("web").arc();
        // (pods besides the DS pod, empty flag, occupied flag, annotation, evicted?)
        let cases: Vec<(bool, bool, bool, Option<&str>, bool)> = vec![
            (false, false, true, None, false),
            (false, true, true, None, true),
            (false, false, true, Some("true"), true),
            (true, false, true, None, true),
            (true, false, false, None, false),
            (true, false, true, Some("false"), false),
            (true, false, false, Some("true"), true),
            (true, false, true, Some("yes"), true),
        ];
        for (occupied, empty_flag, occupied_flag, annotation, evicted) in cases {
            let mut pod = ds();
            if let Some(a) = annotation {
                pod = ann(pod, ENABLE_DS_EVICTION_ANNOTATION, a);
            }
            let mut pods = vec![pod.arc()];
            if occupied {
                pods.push(web.clone());
            }
            let opts = DrainOptions {
                daemonset_eviction_for_empty_nodes: empty_flag,
                daemonset_eviction_for_occupied_nodes: occupied_flag,
                ..DrainOptions::default()
            };
            let plan = run(&pods, &opts, vec![], &NoControllerLookup).expect("drainable");
            assert_eq!(
                plan.to_evict_only.len() == 1,
                evicted,
                "occupied={occupied} flags=({empty_flag},{occupied_flag}) ann={annotation:?}"
            );
            assert_eq!(
                plan.to_move.len() + plan.to_evict_only.len() + plan.ignored,
                pods.len()
            );
            // classify_pod agrees with drain_node.
            let budgets = DisruptionBudgets::default();
            let ctx = DrainContext {
                opts: &opts,
                budgets: &budgets,
                controllers: &NoControllerLookup,
                now_ms: NOW,
            };
            let alone = classify_pod(&pods[0], !occupied, &ctx);
            assert_eq!(alone == PodDrain::Evict, evicted);
        }
    }

    #[test]
    fn budgets_across_pods_and_nodes() {
        let a = rs_pod("a").arc();
        let b = rs_pod("b").arc();
        // One disruption allowed, two covered pods on the node: not blocked (each pod may go),
        // but flagged sequential, as upstream marks such a removal risky.
        let plan = run(
            &[a.clone(), b.clone()],
            &DrainOptions::default(),
            vec![pdb("default", 1)],
            &NoControllerLookup,
        )
        .expect("each pod's budget allows one");
        let seq = plan.pdb_sequential.expect("two evictions, allowance one");
        assert_eq!(seq.pdb_key, "default/web-pdb");
        // Once a node's pod is committed, the next node with a covered pod is blocked.
        let mut budgets = DisruptionBudgets::new(vec![pdb("default", 1)]);
        let opts = DrainOptions::default();
        let first = {
            let ctx = DrainContext {
                opts: &opts,
                budgets: &budgets,
                controllers: &NoControllerLookup,
                now_ms: NOW,
            };
            drain_node(std::slice::from_ref(&a), &ctx).expect("first node drains")
        };
        assert!(first.pdb_sequential.is_none());
        let refs: Vec<&Pod> = first.to_move.iter().map(|p| p.as_ref()).collect();
        budgets.commit(&refs);
        let ctx = DrainContext {
            opts: &opts,
            budgets: &budgets,
            controllers: &NoControllerLookup,
            now_ms: NOW,
        };
        let err = drain_node(std::slice::from_ref(&b), &ctx).expect_err("allowance used");
        assert_eq!(err.reason.code(), "NotEnoughPdb");
        assert!(err.to_string().contains("default/web-pdb"), "{err}");
    }

    #[test]
    fn local_storage_message_lists_volumes() {
        let pod = volume(volume(rs_pod("p"), "data", true), "cfg", false).arc();
        let err = run(
            &[pod],
            &DrainOptions::default(),
            vec![],
            &NoControllerLookup,
        )
        .expect_err("local storage");
        assert_eq!(
            err.reason,
            BlockReason::LocalStorageRequested {
                volumes: vec![Arc::from("data")]
            }
        );
        assert!(err.to_string().contains("(volumes data)"), "{err}");
    }

    // ---------------------------------------------------------------------------------------
    // Property: drain_node against a plain per-pod reference.
    // ---------------------------------------------------------------------------------------

    #[derive(Clone, Debug)]
    struct GenPod {
        kube_system: bool,
        owner: u8,
        controller: bool,
        safe: u8,
        local: Vec<bool>,
        listed: Vec<bool>,
        phase: u8,
        mirror: bool,
        deletion: u8,
        ds_annotation: bool,
        app_a: bool,
    }

    fn gen_pod() -> impl Strategy<Value = GenPod> {
        (
            (any::<bool>(), 0u8..9, any::<bool>(), 0u8..4),
            (
                proptest::collection::vec(any::<bool>(), 0..3),
                proptest::collection::vec(any::<bool>(), 3),
            ),
            (0u8..5, any::<bool>(), 0u8..3, any::<bool>(), any::<bool>()),
        )
            .prop_map(
                |(
                    (kube_system, owner, controller, safe),
                    (local, listed),
                    (phase, mirror, deletion, ds_annotation, app_a),
                )| GenPod {
                    kube_system,
                    owner,
                    controller,
                    safe,
                    local,
                    listed,
                    phase,
                    mirror: mirror && phase == 0,
                    deletion,
                    ds_annotation,
                    app_a,
                },
            )
    }

    const OWNERS: [(&str, &str); 9] = [
        ("", ""),
        ("ReplicaSet", "rs"),
        ("ReplicaSet", "few"),
        ("ReplicationController", "missing"),
        ("Job", "job"),
        ("StatefulSet", "unknown"),
        ("DaemonSet", "agent"),
        ("DaemonSet", "missing"),
        ("Rollout", "missing"),
    ];

    fn build(i: usize, g: &GenPod) -> Pod {
        let mut b = PodBuilder::new(&format!("p{i}"), 100, 0)
            .label("app", if g.app_a { "a" } else { "b" })
            .namespace(if g.kube_system {
                KUBE_SYSTEM
            } else {
                "default"
            });
        let (kind, name) = OWNERS[usize::from(g.owner) % OWNERS.len()];
        if !kind.is_empty() {
            b = b.owner(kind, name);
        }
        let mut p = b.build();
        if let Some(o) = p.owner.as_mut() {
            o.controller = g.controller || o.kind.as_str() != "ReplicaSet";
        }
        match g.safe {
            1 => annotate(&mut p, SAFE_TO_EVICT_ANNOTATION, "true"),
            2 => annotate(&mut p, SAFE_TO_EVICT_ANNOTATION, "false"),
            3 => annotate(&mut p, SAFE_TO_EVICT_ANNOTATION, "maybe"),
            _ => {}
        }
        let mut listed = Vec::new();
        for (j, &local) in g.local.iter().enumerate() {
            p.volumes.push(Volume {
                name: Arc::from(format!("v{j}").as_str()),
                local_storage: local,
            });
            if g.listed[j] {
                listed.push(format!("v{j}"));
            }
        }
        if !listed.is_empty() {
            annotate(
                &mut p,
                SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION,
                &listed.join(","),
            );
        }
        p.phase = [
            autoscaler_model::PodPhase::Running,
            autoscaler_model::PodPhase::Pending,
            autoscaler_model::PodPhase::Succeeded,
            autoscaler_model::PodPhase::Failed,
            autoscaler_model::PodPhase::Unknown,
        ][usize::from(g.phase) % 5];
        if g.mirror {
            annotate(&mut p, MIRROR_POD_ANNOTATION, "hash");
        }
        p.deletion_ms = match g.deletion {
            1 => Some(NOW - 1_000),
            2 => Some(NOW - 3_600_000),
            _ => None,
        };
        if g.ds_annotation {
            annotate(&mut p, DAEMONSET_POD_ANNOTATION, "true");
        }
        p
    }

    /// The rules restated pod by pod, without shared helpers: does this pod block?
    fn reference_blocks(p: &Pod, o: &DrainOptions, b: &DisruptionBudgets) -> bool {
        let ann = |k: &str| {
            p.annotations
                .iter()
                .find(|(key, _)| key.as_ref() == k)
                .map(|(_, v)| v.as_ref())
        };
        let ctrl = p.owner.as_ref().filter(|o| o.controller);
        let kind = ctrl.map(|c| c.kind.as_str()).unwrap_or("");
        let ctrl_name = ctrl.map(|c| c.name.as_ref()).unwrap_or("");
        let covering: Vec<usize> = (0..b.pdbs().len())
            .filter(|&i| b.pdbs()[i].matches(p))
            .collect();
        let pdb_blocks = covering.iter().any(|&i| b.remaining(i) <= 0);
        // Exempt pods never block.
        if ann(MIRROR_POD_ANNOTATION).is_some()
            || p.deletion_ms.is_some_and(|d| NOW - d > 60_000)
            || matches!(
                p.phase,
                autoscaler_model::PodPhase::Succeeded | autoscaler_model::PodPhase::Failed
            )
        {
            return false;
        }
        // Controller lookups (by_name): only known kinds, only with the custom-controller flag.
        if o.skip_nodes_with_custom_controller_pods {
            let known = matches!(
                kind,
                "ReplicaSet" | "ReplicationController" | "Job" | "StatefulSet" | "DaemonSet"
            );
            if known && ctrl_name == "missing" {
                return true;
            }
            if matches!(kind, "ReplicaSet" | "ReplicationController")
                && ctrl_name == "few"
                && o.min_replica_count > 1
            {
                return true;
            }
        }
        if kind == "DaemonSet" || ann(DAEMONSET_POD_ANNOTATION) == Some("true") {
            return false;
        }
        if ann(SAFE_TO_EVICT_ANNOTATION) == Some("true") {
            return pdb_blocks;
        }
        let replicated = if o.skip_nodes_with_custom_controller_pods {
            matches!(
                kind,
                "ReplicaSet" | "ReplicationController" | "Job" | "StatefulSet"
            )
        } else {
            ctrl.is_some()
        };
        let system = o.skip_nodes_with_system_pods
            && p.namespace.as_str() == KUBE_SYSTEM
            && covering.is_empty();
        let listed: Vec<&str> = ann(SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION)
            .map(|s| s.split(',').collect())
            .unwrap_or_default();
        let local = o.skip_nodes_with_local_storage
            && p.volumes
                .iter()
                .any(|v| v.local_storage && !listed.contains(&v.name.as_ref()));
        !replicated
            || system
            || ann(SAFE_TO_EVICT_ANNOTATION) == Some("false")
            || local
            || pdb_blocks
    }

    proptest! {
        #[test]
        fn drain_node_matches_reference(
            gens in proptest::collection::vec(gen_pod(), 0..6),
            flags in proptest::collection::vec(any::<bool>(), 5),
            min_replicas in 0i32..3,
            allow_a in 0i32..3,
            allow_b in 0i32..3,
            ks_pdb in any::<bool>(),
        ) {
            let opts = DrainOptions {
                skip_nodes_with_system_pods: flags[0],
                blocking_system_pod_disruption_timeout_ms: 3_600_000,
                skip_nodes_with_local_storage: flags[1],
                skip_nodes_with_custom_controller_pods: flags[2],
                min_replica_count: min_replicas,
                daemonset_eviction_for_empty_nodes: flags[3],
                daemonset_eviction_for_occupied_nodes: flags[4],
                expendable_pods_priority_cutoff: -10,
            };
            let sel = |v: &str| Some(LabelSelector {
                match_labels: Labels::from_pairs([("app", v)]),
                match_expressions: Vec::new(),
            });
            let mut pdbs = vec![
                PodDisruptionBudget::new("default", "a", sel("a"), allow_a),
                PodDisruptionBudget::new("default", "b", sel("b"), allow_b),
            ];
            if ks_pdb {
                pdbs.push(PodDisruptionBudget::new(KUBE_SYSTEM, "ks", Some(LabelSelector::default()), 1));
            }
            let budgets = DisruptionBudgets::new(pdbs);
            let pods: Vec<Arc<Pod>> = gens.iter().enumerate().map(|(i, g)| Arc::new(build(i, g))).collect();
            let ctx = DrainContext { opts: &opts, budgets: &budgets, controllers: &by_name, now_ms: NOW };
            let blocking: Vec<&Arc<Pod>> = pods.iter().filter(|p| reference_blocks(p, &opts, &budgets)).collect();
            match drain_node(&pods, &ctx) {
                Ok(plan) => {
                    prop_assert!(blocking.is_empty(), "plan despite blocking pod {}", blocking[0].key());
                    for p in plan.to_move.iter().chain(&plan.to_evict_only) {
                        prop_assert!(!reference_blocks(p, &opts, &budgets));
                    }
                    prop_assert_eq!(plan.to_move.len() + plan.to_evict_only.len() + plan.ignored, pods.len());
                }
                Err(b) => {
                    prop_assert!(!blocking.is_empty(), "blocked by {} but the reference allows all", b);
                    prop_assert_eq!(b.pod, blocking[0].key(), "first blocking pod in order");
                }
            }
        }
    }
}

#[cfg(test)]
mod grace_tests {
    use super::*;
    use autoscaler_model::testing::{GI, PodBuilder};

    #[test]
    fn a_terminating_pod_is_waited_for_its_own_grace_period() {
        let deleting = |grace_ms: Option<i64>| {
            PodBuilder::new("slow", 100, GI)
                .with(|p| {
                    p.deletion_ms = Some(0);
                    p.termination_grace_ms = grace_ms;
                })
                .build()
        };
        // Default 30 s grace plus the 30 s margin.
        assert!(!is_long_terminating(&deleting(None), 60_000));
        assert!(is_long_terminating(&deleting(None), 60_001));
        // A 600 s grace period is honoured: still shutting down after a minute.
        assert!(!is_long_terminating(&deleting(Some(600_000)), 61_000));
        assert!(is_long_terminating(&deleting(Some(600_000)), 630_001));
    }
}

#[cfg(test)]
mod system_pod_tests {
    use super::*;
    use autoscaler_model::NoControllerLookup;
    use autoscaler_model::testing::{GI, PodBuilder};

    #[test]
    fn an_unprotected_kube_system_pod_blocks_only_until_the_timeout_after_its_creation() {
        let opts = DrainOptions::default();
        let budgets = DisruptionBudgets::default();
        let at = |now_ms: i64, opts: &DrainOptions| {
            let pod = PodBuilder::new("dns", 100, GI)
                .namespace(KUBE_SYSTEM)
                .owner("ReplicaSet", "dns")
                .with(|p| p.creation_ms = Some(1_000_000))
                .arc();
            let ctx = DrainContext {
                opts,
                budgets: &budgets,
                controllers: &NoControllerLookup,
                now_ms,
            };
            drain_node(&[pod], &ctx).map(|p| p.to_move.len())
        };
        let blocked = |r: Result<usize, Blocked>| matches!(r, Err(b) if b.reason == BlockReason::UnmovableKubeSystemPod);
        // Default 1h from creation.
        assert!(blocked(at(1_000_000 + 3_599_999, &opts)));
        assert_eq!(at(1_000_000 + 3_600_000, &opts), Ok(1));
        let short = DrainOptions {
            blocking_system_pod_disruption_timeout_ms: 60_000,
            ..DrainOptions::default()
        };
        assert!(blocked(at(1_000_000 + 59_999, &short)));
        assert_eq!(at(1_000_000 + 60_000, &short), Ok(1));
        // Zero: never blocks, as upstream's rule reads.
        let zero = DrainOptions {
            blocking_system_pod_disruption_timeout_ms: 0,
            ..DrainOptions::default()
        };
        assert_eq!(at(1_000_000, &zero), Ok(1));
        // The rule is off with the flag that guards it.
        let off = DrainOptions {
            skip_nodes_with_system_pods: false,
            ..DrainOptions::default()
        };
        assert_eq!(at(1_000_000, &off), Ok(1));
    }
}

#[cfg(test)]
mod eviction_tests {
    use super::*;
    use autoscaler_model::NoControllerLookup;
    use autoscaler_model::testing::{GI, PodBuilder};

    #[test]
    fn an_eviction_gives_the_pods_own_grace_up_to_the_flag() {
        let pod = |grace_ms: Option<i64>| {
            PodBuilder::new("p", 100, GI)
                .with(|p| p.termination_grace_ms = grace_ms)
                .build()
        };
        // The issue's case: a 30 s pod gets 30 s, not the flag's 600 s.
        assert_eq!(eviction_grace_sec(&pod(Some(30_000)), 600), 30);
        assert_eq!(eviction_grace_sec(&pod(Some(900_000)), 600), 600);
        assert_eq!(eviction_grace_sec(&pod(Some(0)), 600), 0);
        // Unset: the API's 30 s default, still capped by the flag.
        assert_eq!(eviction_grace_sec(&pod(None), 600), 30);
        assert_eq!(eviction_grace_sec(&pod(None), 10), 10);
        assert_eq!(eviction_grace_sec(&pod(Some(-5)), 600), 0);
    }

    #[test]
    fn expendable_pods_never_block_and_are_not_moved() {
        let opts = DrainOptions::default();
        let budgets = DisruptionBudgets::default();
        let ctx = DrainContext {
            opts: &opts,
            budgets: &budgets,
            controllers: &NoControllerLookup,
            now_ms: 0,
        };
        // A bare pod blocks (nothing recreates it) unless it is expendable.
        let bare = |priority: i32| PodBuilder::new("bare", 100, GI).priority(priority).arc();
        assert!(
            drain_node(&[bare(-10)], &ctx).is_err(),
            "the cutoff itself is not expendable"
        );
        let plan = drain_node(&[bare(-11)], &ctx).expect("an expendable pod never blocks");
        assert!(plan.is_empty() && plan.to_evict_only.is_empty());
        assert_eq!(plan.ignored, 1);
        assert_eq!(
            classify_pod(&bare(-11), false, &ctx),
            PodDrain::Ignore(IgnoreReason::Expendable)
        );
        // The cutoff is the flag's.
        let lower = DrainOptions {
            expendable_pods_priority_cutoff: -100,
            ..DrainOptions::default()
        };
        let ctx = DrainContext {
            opts: &lower,
            ..ctx
        };
        assert!(drain_node(&[bare(-11)], &ctx).is_err());
    }
}

#[cfg(test)]
mod multiple_pdb_tests {
    use super::*;
    use autoscaler_model::NoControllerLookup;
    use autoscaler_model::PodDisruptionBudget;
    use autoscaler_model::testing::{GI, PodBuilder};
    use autoscaler_model::{LabelSelector, Labels};

    fn budget(name: &str, key: &str, value: &str) -> PodDisruptionBudget {
        let selector = LabelSelector {
            match_labels: Labels::from_pairs([(key, value)]),
            match_expressions: Vec::new(),
        };
        PodDisruptionBudget::new("default", name, Some(selector), 5)
    }

    #[test]
    fn a_pod_under_two_budgets_blocks_its_node() {
        let pod = PodBuilder::new("web-1", 100, GI)
            .owner("ReplicaSet", "web")
            .label("app", "web")
            .label("tier", "fe")
            .arc();
        let opts = DrainOptions::default();
        let one = DisruptionBudgets::new(vec![budget("by-app", "app", "web")]);
        let ctx = DrainContext {
            opts: &opts,
            budgets: &one,
            controllers: &NoControllerLookup,
            now_ms: 0,
        };
        assert!(drain_node(std::slice::from_ref(&pod), &ctx).is_ok());
        let two = DisruptionBudgets::new(vec![
            budget("by-app", "app", "web"),
            budget("by-tier", "tier", "fe"),
        ]);
        let ctx = DrainContext {
            opts: &opts,
            budgets: &two,
            controllers: &NoControllerLookup,
            now_ms: 0,
        };
        let err = drain_node(std::slice::from_ref(&pod), &ctx).unwrap_err();
        assert_eq!(err.reason.code(), "MultiplePdbs");
        assert!(
            err.to_string().contains("default/by-app, default/by-tier"),
            "{err}"
        );
    }
}

//! Scale-down planning: which nodes the cluster does not need, and which of them to remove now.
//!
//! One pass: every node gets exactly one verdict. Nodes outside autoscaled groups, disabled by
//! annotation, being deleted, in a group at its min size, not underutilized, or holding a pod
//! that may not move are unremovable, with the reason. The other candidates are simulated in a
//! stable order (previously unneeded first, oldest first; then lowest utilization; then name):
//! the node is removed from a fork of the snapshot and each pod that must move is placed on
//! another node, and a success keeps those placements so later candidates see the space as
//! promised (seed 000); a later candidate holding promised pods must place them again.
//! PodDisruptionBudgets are committed node by node in the same order: a node touching a budget
//! with nothing left is blocked, one needing more than is left is drained sequentially. Removable
//! nodes become unneeded (their timers survive across loops only while they stay unneeded); those
//! unneeded for long enough are deleted, empty ones in bulk and others by drain, within the
//! parallelism limits, the global delays, the groups' min sizes (counting deletions in flight),
//! the cluster-wide minimums and the PodDisruptionBudgets.
//!
//! It never plans the removal of a node holding a pod that blocks, evictions past a PDB's
//! allowance, a group below its min size, or a move the predicates refuse. It only returns a plan;
//! the shell taints, evicts and deletes.
//!
//! [`plan_scale_down`] runs five phases in order, one file each:
//! 1. `eligibility`: a verdict per node, the drain rules ([`drain`]) and utilization
//!    ([`utilization`]) included, and the candidates' order;
//! 2. `simulation`: the removal simulation on a fork of the snapshot ([`removal`] places one
//!    node's pods), with the PodDisruptionBudgets committed node by node;
//! 3. [`unneeded`]: the timers of the removable nodes (kept in `unneeded_nodes`, which
//!    eligibility reads too) and the hints of their pods;
//! 4. `soft_taint`: which nodes get or lose the soft taint;
//! 5. `deletion`: which unneeded nodes are deleted now, and why the others wait.

pub mod consolidation;
mod consolidation_options;
#[cfg(test)]
mod consolidation_work;
mod deletion;
pub(crate) mod disruption_budget;
mod disruption_cost;
pub mod drain;
mod drain_options;
pub mod drain_priority;
mod eligibility;
mod eviction_cost;
mod node_lifetime;
mod options;
pub mod removal;
mod replacement_judgement;
pub(crate) mod replacement_taint;
mod simulation;
pub(crate) mod soft_taint;
pub mod unneeded;
mod unneeded_nodes;
pub mod utilization;
mod utilization_options;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::scale_down::drain::{Blocked, DrainOptions};
use crate::scale_down::removal::{Hints, NoPlace};
use crate::scale_down::unneeded_nodes::UnneededNodes;
use crate::scale_down::utilization::UtilizationOptions;
use crate::scheduling::budget::Budget;
use crate::scheduling::snapshot::{ClusterSnapshot, NodeId};
use autoscaler_model::ControllerLookup;
use autoscaler_model::DisruptionBudgets;
use autoscaler_model::Pod;
use autoscaler_model::Sym;
use autoscaler_model::{CloudProvider, NodeGroupId};
use autoscaler_model::{ClusterTotals, LimitReached, ResourceLimits};

/// Options of scale-down (upstream flag names in the field docs; defaults are upstream's).
/// Other crates read and set the fields through accessors and validated setters (`options`).
#[derive(Clone, Debug)]
pub struct ScaleDownOptions {
    /// `--scale-down-enabled` (true).
    pub(crate) enabled: bool,
    /// `--scale-down-utilization-threshold` (0.5).
    pub(crate) utilization_threshold: f64,
    /// `--scale-down-gpu-utilization-threshold` (0.5).
    pub(crate) gpu_utilization_threshold: f64,
    /// `--scale-down-unneeded-time` (10m).
    pub(crate) unneeded_time: Duration,
    /// `--scale-down-unready-time` (20m).
    pub(crate) unready_time: Duration,
    /// `--scale-down-delay-after-add` (10m).
    pub(crate) delay_after_add: Duration,
    /// `--scale-down-delay-after-delete` (0s).
    pub(crate) delay_after_delete: Duration,
    /// `--scale-down-delay-after-failure` (3m).
    pub(crate) delay_after_failure: Duration,
    /// `--max-scale-down-parallelism` (10): deletions at once, drains included.
    pub(crate) max_scale_down_parallelism: usize,
    /// `--max-drain-parallelism` (1): non-empty nodes drained at once.
    pub(crate) max_drain_parallelism: usize,
    /// `--scale-down-non-empty-candidates-count` (30): non-empty nodes found removable per pass.
    pub(crate) non_empty_candidates_count: usize,
    /// `--scale-down-candidates-pool-ratio` (0.1): extra non-empty candidates tried, as a share
    /// of the nodes, when some fail.
    pub(crate) candidates_pool_ratio: f64,
    /// `--scale-down-candidates-pool-min-count` (50): at least this many extra candidates.
    pub(crate) candidates_pool_min_count: usize,
    /// `--max-graceful-termination-sec` (600): the longest grace period given to an eviction.
    pub(crate) max_graceful_termination_sec: u64,
    /// `--max-bulk-soft-taint-count` (10): soft taints added or removed per pass.
    pub(crate) max_bulk_soft_taint_count: usize,
    /// What counts toward utilization.
    pub(crate) utilization: UtilizationOptions,
    /// Drain rules.
    pub(crate) drain: DrainOptions,
    /// `--scale-down-unready-enabled` (true): unready nodes may be scaled down (after
    /// `--scale-down-unready-time`); false keeps every unready node.
    pub(crate) unready_enabled: bool,
    /// `--scale-down-delay-type-local` (false): the delays after a scale-up, a deletion and a
    /// failed deletion hold only the node group concerned, not the whole cluster.
    pub(crate) delay_type_local: bool,
    /// `--drain-priority-config` (none): drains evict pods in priority stages, each with its
    /// own grace cap (see `drain_priority`); none: all at once, capped by
    /// `--max-graceful-termination-sec`.
    pub(crate) drain_priority: Option<drain_priority::DrainPriorityConfig>,
}

impl Default for ScaleDownOptions {
    fn default() -> Self {
        ScaleDownOptions {
            enabled: true,
            utilization_threshold: 0.5,
            gpu_utilization_threshold: 0.5,
            unneeded_time: Duration::from_secs(600),
            unready_time: Duration::from_secs(1200),
            delay_after_add: Duration::from_secs(600),
            delay_after_delete: Duration::ZERO,
            delay_after_failure: Duration::from_secs(180),
            max_scale_down_parallelism: 10,
            max_drain_parallelism: 1,
            non_empty_candidates_count: 30,
            candidates_pool_ratio: 0.1,
            candidates_pool_min_count: 50,
            max_graceful_termination_sec: 600,
            max_bulk_soft_taint_count: 10,
            utilization: UtilizationOptions::default(),
            drain: DrainOptions::default(),
            unready_enabled: true,
            delay_type_local: false,
            drain_priority: None,
        }
    }
}

/// What scale-down remembers between loops.
#[derive(Clone, Debug, Default)]
pub struct ScaleDownState {
    /// Unneeded timers.
    pub unneeded: UnneededNodes,
    /// Where each pod of an unneeded node would go (tried first next time).
    pub hints: Hints,
    /// Last scale-up (for `--scale-down-delay-after-add`).
    pub last_scale_up_ms: Option<i64>,
    /// Last successful deletion (for `--scale-down-delay-after-delete`).
    pub last_delete_ms: Option<i64>,
    /// Last failed deletion (for `--scale-down-delay-after-failure`).
    pub last_failure_ms: Option<i64>,
    /// The same three times per node group (for `--scale-down-delay-type-local`).
    pub per_group: BTreeMap<NodeGroupId, GroupDelays>,
    /// The group of each node whose deletion was planned, until its outcome is recorded.
    deleting: BTreeMap<Sym, NodeGroupId>,
}

/// When a node group last grew, lost a node and failed to lose one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupDelays {
    /// Last scale-up.
    pub last_scale_up_ms: Option<i64>,
    /// Last successful deletion.
    pub last_delete_ms: Option<i64>,
    /// Last failed deletion.
    pub last_failure_ms: Option<i64>,
}

impl ScaleDownState {
    /// Records a scale-up of `groups` at `now_ms` (starts `--scale-down-delay-after-add`).
    pub fn record_scale_up<'a>(
        &mut self,
        groups: impl IntoIterator<Item = &'a NodeGroupId>,
        now_ms: i64,
    ) {
        self.last_scale_up_ms = Some(now_ms);
        for g in groups {
            self.per_group
                .entry(g.clone())
                .or_default()
                .last_scale_up_ms = Some(now_ms);
        }
    }

    /// Records the outcome of a node deletion: success starts `--scale-down-delay-after-delete`
    /// and forgets the node; failure starts `--scale-down-delay-after-failure` (the shell also
    /// removes the node's `ToBeDeletedByClusterAutoscaler` taint).
    pub fn record_deletion(&mut self, node: Sym, succeeded: bool, now_ms: i64) {
        let group = self.deleting.remove(&node);
        let local = group.map(|g| self.per_group.entry(g).or_default());
        if succeeded {
            self.last_delete_ms = Some(now_ms);
            self.unneeded.remove(node);
            if let Some(l) = local {
                l.last_delete_ms = Some(now_ms);
            }
        } else {
            self.last_failure_ms = Some(now_ms);
            if let Some(l) = local {
                l.last_failure_ms = Some(now_ms);
            }
        }
    }
}

/// Deletions already in progress (started by earlier loops, not finished).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InFlight {
    /// Per group index: nodes being deleted.
    pub per_group: Vec<usize>,
    /// Empty-node deletions in progress.
    pub empty: usize,
    /// Drains in progress.
    pub drains: usize,
}

/// What scale-down needs besides the snapshot.
pub struct ScaleDownInput<'a> {
    /// The provider's groups and node mapping.
    pub provider: &'a dyn CloudProvider,
    /// PodDisruptionBudgets with their remaining allowance.
    pub budgets: DisruptionBudgets,
    /// Controller lookups for the drain rules.
    pub controllers: &'a dyn ControllerLookup,
    /// Cluster-wide limits.
    pub limits: &'a ResourceLimits,
    /// Current totals.
    pub totals: ClusterTotals,
    /// Deletions in progress.
    pub in_flight: InFlight,
}

/// Why a node is not removable (exactly one per node).
#[derive(Clone, Debug, PartialEq)]
pub enum Unremovable {
    /// Not in an autoscaled group.
    NotAutoscaled,
    /// Registered but not started yet (not Ready, a startup taint, or its accelerators not
    /// advertised, within `--max-node-startup-time`): upcoming capacity, not spare.
    NotStarted,
    /// Annotated `scale-down-disabled: "true"`.
    ScaleDownDisabledAnnotation,
    /// Already being deleted.
    BeingDeleted,
    /// Its group is at (or below) its min size.
    MinSizeReached,
    /// The group scales only as a whole (zero-or-max): removing one node would leave it
    /// part-sized, so its nodes are never removed one by one.
    AtomicGroup,
    /// Unready, and `--scale-down-unready-enabled=false`.
    UnreadyDisabled,
    /// Its group is being rolled out (a MachineDeployment replacing its Machines).
    RollingOut,
    /// Utilization at or above the threshold.
    NotUnderutilized {
        /// The utilization.
        utilization: f64,
        /// The threshold it was compared with.
        threshold: f64,
    },
    /// A pod may not move.
    PodBlocks(Blocked),
    /// A pod has nowhere to go.
    NoPlaceToMovePods(NoPlace),
    /// Removing it would cross a cluster-wide minimum.
    MinimalResourceLimit(LimitReached),
    /// Not simulated in this pass (candidate bounds or simulation time budget).
    NotConsidered(&'static str),
}

impl fmt::Display for Unremovable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unremovable::NotAutoscaled => f.write_str("node is not in an autoscaled node group"),
            Unremovable::NotStarted => f.write_str(
                "node has not started yet (upcoming capacity within --max-node-startup-time)",
            ),
            Unremovable::ScaleDownDisabledAnnotation => {
                f.write_str("scale-down disabled by annotation")
            }
            Unremovable::BeingDeleted => f.write_str("node is being deleted"),
            Unremovable::MinSizeReached => f.write_str("node group min size reached"),
            Unremovable::AtomicGroup => f.write_str(
                "node group scales only as a whole (zero-or-max); nodes are not removed one by one",
            ),
            Unremovable::RollingOut => f.write_str("node group is being rolled out"),
            Unremovable::UnreadyDisabled => f.write_str(
                "node is unready and scale-down of unready nodes is disabled \
                 (--scale-down-unready-enabled=false)",
            ),
            Unremovable::NotUnderutilized {
                utilization,
                threshold,
            } => {
                write!(
                    f,
                    "not underutilized: utilization {utilization:.3} >= threshold {threshold}"
                )
            }
            Unremovable::PodBlocks(b) => write!(f, "{b}"),
            Unremovable::NoPlaceToMovePods(n) => write!(f, "{n}"),
            Unremovable::MinimalResourceLimit(l) => {
                write!(f, "removal would go below the cluster-wide minimum: {l}")
            }
            Unremovable::NotConsidered(why) => write!(f, "not considered in this pass: {why}"),
        }
    }
}

/// A node to delete now.
#[derive(Clone, Debug)]
pub struct NodeDeletion {
    /// Node name.
    pub node: Sym,
    /// Group index.
    pub group_index: usize,
    /// Group id.
    pub group: NodeGroupId,
    /// Whether the node has no pod to move (deleted in bulk, no drain).
    pub empty: bool,
    /// Pods to evict (those to move, and DaemonSet pods per the eviction flags).
    pub evict: Vec<Arc<Pod>>,
    /// Where the simulation moved each pod to (for explanations).
    pub destinations: Vec<(Arc<Pod>, Sym)>,
    /// Grace period for evictions, seconds.
    pub grace_period_sec: u64,
    /// Evictions must be made one at a time, each waiting for the PodDisruptionBudget to allow
    /// it (when the node was chosen, after the evictions promised to the nodes chosen before it
    /// in this pass, a budget allowed at least one but fewer disruptions than it needs).
    pub sequential_evictions: bool,
}

/// Why an unneeded node is not deleted in this pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// Not unneeded long enough yet; deletable from this time (ms since epoch).
    UnneededTime {
        /// When it becomes deletable.
        deletable_at_ms: i64,
    },
    /// Deleting it would take its group below min size (deletions in flight counted).
    MinSize,
    /// Deleting it would cross a cluster-wide minimum.
    Limit(LimitReached),
    /// Parallelism limits reached for this pass.
    Parallelism,
    /// Global scale-down delay or disabled scale-down.
    Cooldown(String),
}

/// The plan of one pass.
#[derive(Clone, Debug, Default)]
pub struct ScaleDownPlan {
    /// Unneeded nodes and since when, in candidate order.
    pub unneeded: Vec<(Sym, i64)>,
    /// Unneeded nodes not deleted now, with why.
    pub waiting: Vec<(Sym, Waiting)>,
    /// Every other node, with its reason.
    pub unremovable: Vec<(Sym, Unremovable)>,
    /// Deletions to start now.
    pub deletions: Vec<NodeDeletion>,
    /// Unneeded nodes to mark with the soft `DeletionCandidateOfClusterAutoscaler` taint.
    pub soft_taint: Vec<Sym>,
    /// Nodes whose soft taint should go, because they are needed again.
    pub soft_untaint: Vec<Sym>,
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// What every phase of one pass reads.
struct Pass<'a, 'i> {
    input: ScaleDownInput<'i>,
    opts: &'a ScaleDownOptions,
    now_ms: i64,
    /// The snapshot's nodes when the pass started.
    ids: Vec<NodeId>,
}

/// Plans one scale-down pass at `now_ms` (an empty plan while scale-down is disabled). The
/// snapshot is left as found. `budget` bounds the
/// removal simulation (`--scale-down-simulation-timeout`).
pub fn plan_scale_down(
    snapshot: &mut ClusterSnapshot,
    state: &mut ScaleDownState,
    input: ScaleDownInput<'_>,
    opts: &ScaleDownOptions,
    now_ms: i64,
    budget: &mut dyn Budget,
) -> ScaleDownPlan {
    let mut plan = ScaleDownPlan::default();
    // `--scale-down-enabled=false`: no scale-down step at all, as upstream, which then neither
    // looks for unneeded nodes nor soft-taints (or untaints) any.
    if !opts.enabled {
        return plan;
    }
    let mut pass = Pass {
        ids: snapshot.node_ids().collect(),
        input,
        opts,
        now_ms,
    };
    let candidates = eligibility::candidates(snapshot, &pass, state, &mut plan.unremovable);
    let removable = snapshot.forked(|fork| {
        let hints = &mut state.hints;
        simulation::removable(
            fork,
            candidates,
            &mut pass,
            hints,
            budget,
            &mut plan.unremovable,
        )
    });
    plan.unneeded = unneeded::record(state, &removable, now_ms);
    soft_taint::plan(snapshot, &pass.ids, &removable, opts, &mut plan);
    deletion::plan(snapshot, state, removable, &pass, &mut plan);
    for d in &plan.deletions {
        state.deleting.insert(d.node, d.group.clone());
    }
    plan
}

#[cfg(test)]
mod tests;

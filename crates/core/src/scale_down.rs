//! Scale-down planning: which nodes the cluster does not need, and which of them to remove now.
//!
//! One pass: every node gets exactly one verdict. Nodes outside autoscaled groups, disabled by
//! annotation, being deleted, in a group at its min size, not underutilized, or holding a pod
//! that may not move are unremovable, with the reason. The other candidates are simulated in a
//! stable order (previously unneeded first, oldest first; then lowest utilization; then name):
//! the node is removed from a fork of the snapshot and each pod that must move is placed on
//! another node, and a success keeps those placements so later candidates see the space as
//! promised (seed 000). Removable nodes become unneeded (their timers survive across loops only
//! while they stay unneeded); those unneeded for long enough are deleted, empty ones in bulk and
//! others by drain, within the parallelism limits, the global delays, the groups' min sizes
//! (counting deletions in flight), the cluster-wide minimums and the PodDisruptionBudgets.
//!
//! It never plans the removal of a node holding a pod that blocks, evictions past a PDB's
//! allowance, a group below its min size, or a move the predicates refuse. It only returns a plan;
//! the shell taints, evicts and deletes.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::drain::{self, BlockReason, Blocked, ControllerLookup, DrainContext, DrainOptions};
use crate::estimator::Budget;
use crate::intern::Sym;
use crate::limits::{ClusterTotals, LimitReached, ResourceLimits};
use crate::node_group::{CloudProvider, NodeGroupId};
use crate::pdb::DisruptionBudgets;
use crate::pod::Pod;
use crate::removal::{Hints, NoPlace, try_remove};
use crate::snapshot::{ClusterSnapshot, NodeId};
use crate::template::{DELETION_CANDIDATE_TAINT, TO_BE_DELETED_TAINT};
use crate::unneeded::UnneededNodes;
use crate::utilization::{UtilizationOptions, utilization};

/// Annotation that keeps a node from ever being scaled down.
pub const SCALE_DOWN_DISABLED_ANNOTATION: &str =
    "cluster-autoscaler.kubernetes.io/scale-down-disabled";

/// Options of scale-down (upstream flag names in the field docs; defaults are upstream's).
#[derive(Clone, Debug)]
pub struct ScaleDownOptions {
    /// `--scale-down-enabled` (true).
    pub enabled: bool,
    /// `--scale-down-utilization-threshold` (0.5).
    pub utilization_threshold: f64,
    /// `--scale-down-gpu-utilization-threshold` (0.5).
    pub gpu_utilization_threshold: f64,
    /// `--scale-down-unneeded-time` (10m).
    pub unneeded_time: Duration,
    /// `--scale-down-unready-time` (20m).
    pub unready_time: Duration,
    /// `--scale-down-delay-after-add` (10m).
    pub delay_after_add: Duration,
    /// `--scale-down-delay-after-delete` (0s).
    pub delay_after_delete: Duration,
    /// `--scale-down-delay-after-failure` (3m).
    pub delay_after_failure: Duration,
    /// `--max-scale-down-parallelism` (10): deletions at once, drains included.
    pub max_scale_down_parallelism: usize,
    /// `--max-drain-parallelism` (1): non-empty nodes drained at once.
    pub max_drain_parallelism: usize,
    /// `--scale-down-non-empty-candidates-count` (30): non-empty nodes found removable per pass.
    pub non_empty_candidates_count: usize,
    /// `--scale-down-candidates-pool-ratio` (0.1): extra non-empty candidates tried, as a share
    /// of the nodes, when some fail.
    pub candidates_pool_ratio: f64,
    /// `--scale-down-candidates-pool-min-count` (50): at least this many extra candidates.
    pub candidates_pool_min_count: usize,
    /// `--max-graceful-termination-sec` (600): the longest grace period given to an eviction.
    pub max_graceful_termination_sec: u64,
    /// `--max-bulk-soft-taint-count` (10): soft taints added or removed per pass.
    pub max_bulk_soft_taint_count: usize,
    /// What counts toward utilization.
    pub utilization: UtilizationOptions,
    /// Drain rules.
    pub drain: DrainOptions,
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
}

impl ScaleDownState {
    /// Records a scale-up at `now_ms` (starts `--scale-down-delay-after-add`).
    pub fn record_scale_up(&mut self, now_ms: i64) {
        self.last_scale_up_ms = Some(now_ms);
    }

    /// Records the outcome of a node deletion: success starts `--scale-down-delay-after-delete`
    /// and forgets the node; failure starts `--scale-down-delay-after-failure` (the shell also
    /// removes the node's `ToBeDeletedByClusterAutoscaler` taint).
    pub fn record_deletion(&mut self, node: Sym, succeeded: bool, now_ms: i64) {
        if succeeded {
            self.last_delete_ms = Some(now_ms);
            self.unneeded.remove(node);
        } else {
            self.last_failure_ms = Some(now_ms);
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
    /// Annotated `scale-down-disabled: "true"`.
    ScaleDownDisabledAnnotation,
    /// Already being deleted.
    BeingDeleted,
    /// Its group is at (or below) its min size.
    MinSizeReached,
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
            Unremovable::ScaleDownDisabledAnnotation => {
                f.write_str("scale-down disabled by annotation")
            }
            Unremovable::BeingDeleted => f.write_str("node is being deleted"),
            Unremovable::MinSizeReached => f.write_str("node group min size reached"),
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
    /// it (the budget allows fewer disruptions than this node needs at once).
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

struct Candidate {
    id: NodeId,
    name: Sym,
    group: usize,
    ready: bool,
    utilization: f64,
    to_move: Vec<Arc<Pod>>,
    evict_only: Vec<Arc<Pod>>,
    /// A PodDisruptionBudget allows fewer evictions than this node needs at once: they must be
    /// made one at a time as replacements become ready.
    sequential: bool,
    previously_since: Option<i64>,
}

struct Removable {
    cand: Candidate,
    destinations: Vec<(Arc<Pod>, Sym)>,
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Plans one scale-down pass at `now_ms`. The snapshot is left as found. `budget` bounds the
/// removal simulation (`--scale-down-simulation-timeout`).
pub fn plan_scale_down(
    snapshot: &mut ClusterSnapshot,
    state: &mut ScaleDownState,
    mut input: ScaleDownInput<'_>,
    opts: &ScaleDownOptions,
    now_ms: i64,
    budget: &mut dyn Budget,
) -> ScaleDownPlan {
    let mut plan = ScaleDownPlan::default();
    let groups = input.provider.node_groups();
    let in_flight_of = |g: usize| input.in_flight.per_group.get(g).copied().unwrap_or(0);

    // 1. Eligibility: one verdict per node, or a candidate.
    let mut candidates = Vec::new();
    let ids: Vec<NodeId> = snapshot.node_ids().collect();
    for &id in &ids {
        let Some(info) = snapshot.node(id) else {
            continue;
        };
        let node = &info.node;
        let verdict = (|| {
            let g = input
                .provider
                .node_group_of(node)
                .filter(|&g| g < groups.len())
                .ok_or(Unremovable::NotAutoscaled)?;
            if node.annotation(SCALE_DOWN_DISABLED_ANNOTATION) == Some("true") {
                return Err(Unremovable::ScaleDownDisabledAnnotation);
            }
            if node.deletion_ms.is_some()
                || node
                    .taints
                    .iter()
                    .any(|t| t.key.as_str() == TO_BE_DELETED_TAINT)
            {
                return Err(Unremovable::BeingDeleted);
            }
            let group = &groups[g];
            if group.target_size.saturating_sub(in_flight_of(g)) <= group.min_size {
                return Err(Unremovable::MinSizeReached);
            }
            let util = utilization(info, opts.utilization);
            let threshold = if util.gpu {
                group
                    .options
                    .scale_down_gpu_utilization_threshold
                    .unwrap_or(opts.gpu_utilization_threshold)
            } else {
                group
                    .options
                    .scale_down_utilization_threshold
                    .unwrap_or(opts.utilization_threshold)
            };
            if util.value >= threshold {
                return Err(Unremovable::NotUnderutilized {
                    utilization: util.value,
                    threshold,
                });
            }
            let ctx = DrainContext {
                opts: &opts.drain,
                budgets: &input.budgets,
                controllers: input.controllers,
                now_ms,
            };
            let drained = drain::drain_node(&info.pods, &ctx).map_err(Unremovable::PodBlocks)?;
            Ok(Candidate {
                id,
                name: node.name,
                group: g,
                ready: node.is_ready(),
                utilization: util.value,
                sequential: drained.pdb_sequential.is_some(),
                to_move: drained.to_move,
                evict_only: drained.to_evict_only,
                previously_since: state.unneeded.since(node.name),
            })
        })();
        match verdict {
            Ok(c) => candidates.push(c),
            Err(why) => plan.unremovable.push((node.name, why)),
        }
    }
    candidates.sort_by(|a, b| {
        let prev = |c: &Candidate| c.previously_since.map_or((1, 0), |s| (0, s));
        prev(a)
            .cmp(&prev(b))
            .then(a.utilization.total_cmp(&b.utilization))
            .then_with(|| a.name.as_str().cmp(b.name.as_str()))
    });

    // 2. Removal simulation, in order, on a fork that keeps each success.
    let pool = opts
        .candidates_pool_min_count
        .max((opts.candidates_pool_ratio * ids.len() as f64).ceil() as usize);
    let max_tries = opts.non_empty_candidates_count.saturating_add(pool);
    let (mut found, mut tried) = (0usize, 0usize);
    let mut totals = input.totals.clone();
    let mut removable: Vec<Removable> = Vec::new();
    snapshot.fork();
    for cand in candidates {
        let node = match snapshot.node(cand.id) {
            Some(info) => info.node.clone(),
            None => continue,
        };
        if !cand.to_move.is_empty() {
            if found >= opts.non_empty_candidates_count || tried >= max_tries {
                plan.unremovable.push((
                    cand.name,
                    Unremovable::NotConsidered("non-empty candidate limit reached"),
                ));
                continue;
            }
            if budget.exhausted() {
                plan.unremovable.push((
                    cand.name,
                    Unremovable::NotConsidered("scale-down simulation timeout"),
                ));
                continue;
            }
        }
        if let Err(l) = input.limits.check_removal(&totals, &node) {
            plan.unremovable
                .push((cand.name, Unremovable::MinimalResourceLimit(l)));
            continue;
        }
        // Budgets used up by nodes chosen earlier in this pass block the later ones.
        let evicted: Vec<&Pod> = cand
            .to_move
            .iter()
            .chain(&cand.evict_only)
            .map(|p| &**p)
            .collect();
        if let Some((pod, pdb)) = evicted
            .iter()
            .find_map(|p| input.budgets.exhausted_for(p).map(|i| (p, i)))
        {
            let budget = &input.budgets.pdbs()[pdb];
            let reason = BlockReason::NotEnoughPdb {
                pdb: budget.key(),
                detail:
                    "its remaining disruptions are promised to nodes removed earlier in this pass"
                        .into(),
            };
            plan.unremovable.push((
                cand.name,
                Unremovable::PodBlocks(Blocked {
                    pod: pod.key(),
                    reason,
                }),
            ));
            continue;
        }
        let destinations = if cand.to_move.is_empty() {
            if snapshot.remove_node(cand.id).is_err() {
                continue;
            }
            Vec::new()
        } else {
            tried += 1;
            match try_remove(snapshot, cand.id, &cand.to_move, &ids, &mut state.hints) {
                Ok(moves) => {
                    found += 1;
                    moves
                        .into_iter()
                        .filter_map(|(p, dest)| snapshot.node(dest).map(|i| (p, i.node.name)))
                        .collect()
                }
                Err(np) => {
                    plan.unremovable
                        .push((cand.name, Unremovable::NoPlaceToMovePods(np)));
                    continue;
                }
            }
        };
        input.budgets.commit(&evicted);
        totals.remove_node(&node, 1);
        removable.push(Removable { cand, destinations });
    }
    let _ = snapshot.revert();

    // 3. Unneeded timers.
    state
        .unneeded
        .update(now_ms, removable.iter().map(|r| r.cand.name));
    plan.unneeded = removable
        .iter()
        .map(|r| {
            (
                r.cand.name,
                state.unneeded.since(r.cand.name).unwrap_or(now_ms),
            )
        })
        .collect();

    // 4. Soft taints: mark unneeded nodes, unmark nodes needed again.
    let unneeded_set: rustc_hash::FxHashSet<Sym> = removable.iter().map(|r| r.cand.name).collect();
    for id in &ids {
        let Some(info) = snapshot.node(*id) else {
            continue;
        };
        let has = info
            .node
            .taints
            .iter()
            .any(|t| t.key.as_str() == DELETION_CANDIDATE_TAINT);
        let name = info.node.name;
        if unneeded_set.contains(&name)
            && !has
            && plan.soft_taint.len() < opts.max_bulk_soft_taint_count
        {
            plan.soft_taint.push(name);
        } else if !unneeded_set.contains(&name)
            && has
            && plan.soft_untaint.len() < opts.max_bulk_soft_taint_count
        {
            plan.soft_untaint.push(name);
        }
    }

    // 5. Deletions.
    let cooldown = cooldown(state, opts, now_ms);
    let mut planned_per_group = vec![0usize; groups.len()];
    let (mut empty_n, mut drain_n) = (input.in_flight.empty, input.in_flight.drains);
    let mut totals = input.totals.clone();
    for r in removable {
        let c = &r.cand;
        let since = state.unneeded.since(c.name).unwrap_or(now_ms);
        let group = &groups[c.group];
        let wait = if c.ready {
            group
                .options
                .scale_down_unneeded_time
                .unwrap_or(opts.unneeded_time)
        } else {
            group
                .options
                .scale_down_unready_time
                .unwrap_or(opts.unready_time)
        };
        let deletable_at_ms = since.saturating_add(ms(wait));
        let empty = c.to_move.is_empty();
        let waiting = if let Some(why) = &cooldown {
            Some(Waiting::Cooldown(why.clone()))
        } else if now_ms < deletable_at_ms {
            Some(Waiting::UnneededTime { deletable_at_ms })
        } else if group
            .target_size
            .saturating_sub(in_flight_of(c.group) + planned_per_group[c.group])
            <= group.min_size
        {
            Some(Waiting::MinSize)
        } else if empty_n + drain_n >= opts.max_scale_down_parallelism
            || (!empty && drain_n >= opts.max_drain_parallelism)
        {
            Some(Waiting::Parallelism)
        } else {
            snapshot
                .node(c.id)
                .and_then(|info| input.limits.check_removal(&totals, &info.node).err())
                .map(Waiting::Limit)
        };
        if let Some(w) = waiting {
            plan.waiting.push((c.name, w));
            continue;
        }
        if let Some(info) = snapshot.node(c.id) {
            totals.remove_node(&info.node, 1);
        }
        planned_per_group[c.group] += 1;
        if empty {
            empty_n += 1;
        } else {
            drain_n += 1;
        }
        plan.deletions.push(NodeDeletion {
            node: c.name,
            group_index: c.group,
            group: group.id.clone(),
            empty,
            evict: c.to_move.iter().chain(&c.evict_only).cloned().collect(),
            destinations: r.destinations,
            grace_period_sec: opts.max_graceful_termination_sec,
            sequential_evictions: c.sequential,
        });
    }
    plan
}

/// Why deletions must wait, if they must (global switches and delays).
fn cooldown(state: &ScaleDownState, opts: &ScaleDownOptions, now_ms: i64) -> Option<String> {
    if !opts.enabled {
        return Some("scale-down is disabled".into());
    }
    let check = |last: Option<i64>, delay: Duration, what: &str| {
        last.filter(|&t| now_ms < t.saturating_add(ms(delay)))
            .map(|t| {
                format!(
                    "scale-down delayed until {} ms after the last {what}",
                    t.saturating_add(ms(delay))
                )
            })
    };
    check(state.last_scale_up_ms, opts.delay_after_add, "scale-up")
        .or_else(|| {
            check(
                state.last_delete_ms,
                opts.delay_after_delete,
                "node deletion",
            )
        })
        .or_else(|| {
            check(
                state.last_failure_ms,
                opts.delay_after_failure,
                "failed scale-down",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drain::NoControllerLookup;
    use crate::estimator::Unlimited;
    use crate::node::Node;
    use crate::node_group::{Instance, InstanceState, NodeGroup, StaticProvider};
    use crate::testing::{GI, NodeBuilder, PodBuilder};

    const MIN: i64 = 60_000;

    /// A cluster in one group `ng` (min `min`), built from (node name, cpu, pods' cpu).
    struct World {
        snapshot: ClusterSnapshot,
        provider: StaticProvider,
        nodes: Vec<Arc<Node>>,
    }

    fn node(name: &str, cpu: i64) -> NodeBuilder {
        NodeBuilder::new(name, cpu, 64 * GI).with_provider_id(&format!("test:///{name}"))
    }

    fn world(min: usize, spec: Vec<(NodeBuilder, Vec<PodBuilder>)>) -> World {
        let mut snapshot = ClusterSnapshot::new();
        let mut group = NodeGroup::new("ng", min, 100, spec.len());
        let mut nodes = Vec::new();
        for (nb, pods) in spec {
            let n = nb.arc();
            group.instances.push(Instance {
                id: n.provider_id.clone().unwrap(),
                state: InstanceState::Running,
                error: None,
            });
            let id = snapshot.add_node(n.clone()).unwrap();
            for p in pods {
                let p = p.node_name(n.name.as_str()).arc();
                snapshot.add_pod(p, id).unwrap();
            }
            nodes.push(n);
        }
        World {
            snapshot,
            provider: StaticProvider::new(vec![group]),
            nodes,
        }
    }

    fn rs_pod(name: &str, cpu: i64) -> PodBuilder {
        PodBuilder::new(name, cpu, GI / 4).owner("ReplicaSet", "rs")
    }

    fn plan_at(
        w: &mut World,
        state: &mut ScaleDownState,
        opts: &ScaleDownOptions,
        now_ms: i64,
    ) -> ScaleDownPlan {
        let limits = ResourceLimits::default();
        let input = ScaleDownInput {
            provider: &w.provider,
            budgets: DisruptionBudgets::new(Vec::new()),
            controllers: &NoControllerLookup,
            limits: &limits,
            totals: ClusterTotals::from_nodes(w.nodes.iter().map(|n| &**n)),
            in_flight: InFlight::default(),
        };
        let before = (w.snapshot.len(), w.snapshot.pod_count());
        let plan = plan_scale_down(&mut w.snapshot, state, input, opts, now_ms, &mut Unlimited);
        assert_eq!(
            (w.snapshot.len(), w.snapshot.pod_count()),
            before,
            "snapshot left as found"
        );
        plan
    }

    fn reason<'a>(plan: &'a ScaleDownPlan, node: &str) -> Option<&'a Unremovable> {
        plan.unremovable
            .iter()
            .find(|(n, _)| n.as_str() == node)
            .map(|(_, r)| r)
    }

    fn unneeded(plan: &ScaleDownPlan) -> Vec<&'static str> {
        plan.unneeded.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[test]
    fn utilization_threshold_and_disable_annotation() {
        let busy = vec![
            (node("sd-busy", 1000), vec![rs_pod("b", 600)]),
            (node("sd-room", 4000), vec![rs_pod("r", 2500)]),
        ];
        let mut w = world(0, busy);
        let p = plan_at(
            &mut w,
            &mut ScaleDownState::default(),
            &ScaleDownOptions::default(),
            0,
        );
        assert!(
            matches!(
                reason(&p, "sd-busy"),
                Some(Unremovable::NotUnderutilized { .. })
            ),
            "{p:?}"
        );

        let light = vec![
            (node("sd-light", 1000), vec![rs_pod("l", 100)]),
            (node("sd-room2", 4000), vec![rs_pod("r2", 2500)]),
        ];
        let mut w = world(0, light);
        let p = plan_at(
            &mut w,
            &mut ScaleDownState::default(),
            &ScaleDownOptions::default(),
            0,
        );
        assert_eq!(unneeded(&p), ["sd-light"]);

        let disabled = vec![
            (
                node("sd-off", 1000).annotation(SCALE_DOWN_DISABLED_ANNOTATION, "true"),
                vec![rs_pod("o", 100)],
            ),
            (node("sd-room3", 4000), vec![rs_pod("r3", 2500)]),
        ];
        let mut w = world(0, disabled);
        let p = plan_at(
            &mut w,
            &mut ScaleDownState::default(),
            &ScaleDownOptions::default(),
            0,
        );
        assert_eq!(
            reason(&p, "sd-off"),
            Some(&Unremovable::ScaleDownDisabledAnnotation)
        );
        assert!(p.unneeded.is_empty());
    }

    /// n1 (2000m, two pods of 300m) and n2 (1000m, one of 200m) each need the other's room;
    /// n3 (1000m, 900m) has none. Candidate order is by utilization (n2 at 0.2 before n1 at 0.3):
    /// n2 goes, n1 is left with no place for its pod.
    #[test]
    fn two_nodes_that_need_each_others_room_lose_only_one() {
        let mut w = world(
            0,
            vec![
                (
                    node("n1", 2000),
                    vec![rs_pod("n1-a", 300), rs_pod("n1-b", 300)],
                ),
                (node("n2", 1000), vec![rs_pod("n2-a", 200)]),
                (node("n3", 1000), vec![rs_pod("n3-a", 900)]),
            ],
        );
        let p = plan_at(
            &mut w,
            &mut ScaleDownState::default(),
            &ScaleDownOptions::default(),
            0,
        );
        assert_eq!(unneeded(&p), ["n2"]);
        match reason(&p, "n1") {
            Some(Unremovable::NoPlaceToMovePods(np)) => {
                assert!(np.pod.starts_with("default/n1-"), "{np}")
            }
            other => panic!("n1: {other:?}"),
        }
        assert!(matches!(
            reason(&p, "n3"),
            Some(Unremovable::NotUnderutilized { .. })
        ));
    }

    /// Seed 000: A's and B's pods can only go to X, which has room for one; C's only to Y.
    fn seed_000(x_cpu: i64) -> World {
        let to = |name: &str, cpu: i64, pool: &str| rs_pod(name, cpu).node_selector("pool", pool);
        world(
            0,
            vec![
                (node("a", 1000), vec![to("a-p", 300, "x")]),
                (node("b", 1000), vec![to("b-p", 350, "x")]),
                (node("c", 1000), vec![to("c-p", 400, "y")]),
                (
                    node("x", x_cpu).label("pool", "x"),
                    vec![rs_pod("x-p", 600)],
                ),
                (node("y", 1000).label("pool", "y"), vec![rs_pod("y-p", 500)]),
            ],
        )
    }

    #[test]
    fn seed_000_chain_and_timer_restart() {
        let opts = ScaleDownOptions::default();
        let mut state = ScaleDownState::default();
        // X has room for one of A and B: A (lower utilization) goes first.
        let p = plan_at(&mut seed_000(1000), &mut state, &opts, 0);
        assert_eq!(unneeded(&p), ["a", "c"]);
        assert!(matches!(
            reason(&p, "b"),
            Some(Unremovable::NoPlaceToMovePods(_))
        ));

        // X grows: B is unneeded too, from now.
        let p = plan_at(&mut seed_000(1300), &mut state, &opts, MIN);
        assert_eq!(
            p.unneeded
                .iter()
                .find(|(n, _)| n.as_str() == "b")
                .map(|(_, s)| *s),
            Some(MIN)
        );
        assert_eq!(state.unneeded.since(Sym::new("a")), Some(0));

        // X shrinks: A keeps its timer (previously unneeded first, then utilization), B is
        // needed again and loses its timer...
        let p = plan_at(&mut seed_000(1000), &mut state, &opts, 2 * MIN);
        assert_eq!(unneeded(&p), ["a", "c"]);
        assert_eq!(state.unneeded.since(Sym::new("b")), None);
        // ...so when it is unneeded again, its timer restarts.
        plan_at(&mut seed_000(1300), &mut state, &opts, 3 * MIN);
        assert_eq!(state.unneeded.since(Sym::new("b")), Some(3 * MIN));
        assert_eq!(state.unneeded.since(Sym::new("a")), Some(0));
    }

    fn run_two_passes(w: &mut World, opts: &ScaleDownOptions) -> ScaleDownPlan {
        let mut state = ScaleDownState::default();
        let first = plan_at(w, &mut state, opts, 0);
        assert!(
            first.deletions.is_empty(),
            "nothing is deleted before the unneeded time"
        );
        assert!(
            first
                .waiting
                .iter()
                .all(|(_, w)| matches!(w, Waiting::UnneededTime { .. }))
        );
        plan_at(w, &mut state, opts, 11 * MIN)
    }

    #[test]
    fn empty_nodes_are_deleted_in_bulk_up_to_the_parallelism() {
        let spec = (0..11)
            .map(|i| (node(&format!("empty-{i}"), 4000), vec![]))
            .collect();
        let mut w = world(0, spec);
        let p = run_two_passes(&mut w, &ScaleDownOptions::default());
        assert_eq!(p.deletions.len(), 10);
        assert!(p.deletions.iter().all(|d| d.empty && d.evict.is_empty()));
        assert_eq!(p.waiting, vec![(p.unneeded[10].0, Waiting::Parallelism)]);
    }

    #[test]
    fn non_empty_nodes_are_drained_up_to_the_drain_parallelism() {
        let mut spec: Vec<(NodeBuilder, Vec<PodBuilder>)> = (0..6)
            .map(|i| {
                (
                    node(&format!("light-{i}"), 4000),
                    vec![rs_pod(&format!("l{i}"), 500)],
                )
            })
            .collect();
        spec.extend((0..4).map(|i| {
            (
                node(&format!("dest-{i}"), 10_000),
                vec![rs_pod(&format!("d{i}"), 6000)],
            )
        }));
        let mut w = world(0, spec);
        let opts = ScaleDownOptions {
            max_drain_parallelism: 5,
            ..Default::default()
        };
        let p = run_two_passes(&mut w, &opts);
        assert_eq!(p.deletions.len(), 5);
        assert!(
            p.deletions
                .iter()
                .all(|d| !d.empty && d.evict.len() == 1 && d.destinations.len() == 1)
        );
        assert_eq!(p.waiting.len(), 1);
    }

    #[test]
    fn a_group_at_min_size_loses_none() {
        let spec = (0..3)
            .map(|i| (node(&format!("min-{i}"), 4000), vec![]))
            .collect();
        let mut w = world(3, spec);
        let p = run_two_passes(&mut w, &ScaleDownOptions::default());
        assert!(p.deletions.is_empty());
        assert!(
            p.unremovable
                .iter()
                .all(|(_, r)| *r == Unremovable::MinSizeReached)
        );
        // One above min: only one goes.
        let spec = (0..3)
            .map(|i| (node(&format!("min1-{i}"), 4000), vec![]))
            .collect();
        let mut w = world(2, spec);
        let p = run_two_passes(&mut w, &ScaleDownOptions::default());
        assert_eq!(p.deletions.len(), 1);
        assert!(p.waiting.iter().all(|(_, w)| *w == Waiting::MinSize));
    }

    #[test]
    fn delays_and_the_enable_switch_hold_deletions() {
        let spec = (0..2)
            .map(|i| (node(&format!("cool-{i}"), 4000), vec![]))
            .collect();
        let mut w = world(0, spec);
        let mut state = ScaleDownState::default();
        let opts = ScaleDownOptions::default();
        plan_at(&mut w, &mut state, &opts, 0);
        state.last_scale_up_ms = Some(5 * MIN);
        let p = plan_at(&mut w, &mut state, &opts, 11 * MIN);
        assert!(p.deletions.is_empty());
        assert!(matches!(&p.waiting[0].1, Waiting::Cooldown(why) if why.contains("scale-up")));
        let p = plan_at(&mut w, &mut state, &opts, 16 * MIN);
        assert_eq!(p.deletions.len(), 2);
        state.last_failure_ms = Some(15 * MIN);
        assert!(
            plan_at(&mut w, &mut state, &opts, 17 * MIN)
                .deletions
                .is_empty()
        );
        let off = ScaleDownOptions {
            enabled: false,
            ..Default::default()
        };
        assert!(
            plan_at(&mut w, &mut state, &off, 30 * MIN)
                .deletions
                .is_empty()
        );
    }

    #[test]
    fn soft_taints_follow_unneeded_status() {
        let mut w = world(
            0,
            vec![
                (node("soft-a", 4000), vec![]),
                (
                    node("soft-b", 4000).taint(
                        DELETION_CANDIDATE_TAINT,
                        "1",
                        crate::taints::TaintEffect::PreferNoSchedule,
                    ),
                    vec![rs_pod("busy", 3500)],
                ),
            ],
        );
        let p = plan_at(
            &mut w,
            &mut ScaleDownState::default(),
            &ScaleDownOptions::default(),
            0,
        );
        assert_eq!(p.soft_taint, vec![Sym::new("soft-a")]);
        assert_eq!(p.soft_untaint, vec![Sym::new("soft-b")]);
    }
}

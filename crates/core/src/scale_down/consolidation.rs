//! Consolidation (ours, beyond upstream; off by default): which nodes to delete, or to replace by
//! a cheaper node of any group, so that the same pods run on fewer or cheaper nodes.
//!
//! Upstream's scale-down only removes nodes below the utilization threshold; a cluster where
//! every node is a little over half full never shrinks. Consolidation, modelled on Karpenter's
//! disruption controller, ignores the thresholds and asks instead whether every pod of a set of
//! nodes would still be placeable without them (the removal simulation), or with one new node
//! of a cheaper shape in their place (the same simulation with the new node added to the fork).
//!
//! One pass proposes at most one command, as Karpenter runs one disruption at a time:
//! 1. empty nodes: every quiet, empty candidate is deleted;
//! 2. multi-node: the first [`ConsolidationOptions::max_multi_node_candidates`] candidates in
//!    rank order (at most `--max-scale-down-parallelism`), a binary search for the longest
//!    prefix that can go (or be replaced by one cheaper node), at least two nodes;
//! 3. single-node: each candidate in rank order, deleted or replaced by the cheapest shape that
//!    takes its pods and costs less.
//!
//! A command may hold more nodes than `--max-drain-parallelism` allows to drain at once: the
//! first are drained (a replacement's once its node is Ready), the others wait their turn and
//! are drained in later passes as drain slots free, each checked again first (still a
//! candidate, within min sizes and PodDisruptionBudgets, its pods placeable without it) and
//! dropped from the command, never drained, if it fails. No other command starts meanwhile.
//!
//! Candidates are ranked by what they save per pod they disrupt, each pod weighed by its
//! priority and `pod-deletion-cost` (`eviction_cost`, after Karpenter's); with `replace`, the
//! nodes of a shape that a group on offer beats per copy of the workload's mix come first, so
//! that what goes is the capacity dearest for what the pods need; those groups' nodes are also
//! named for the soft `DeletionCandidateOfClusterAutoscaler` taint (`ConsolidationPlan::attrition`),
//! so that new pods go to the cheaper shape and they empty. A node is a
//! candidate when it is in an autoscaled group that may lose a node (min size, deletions in
//! flight and planned), not annotated `scale-down-disabled`, not being deleted, Ready, its pods
//! have not changed for [`ConsolidationOptions::consolidate_after`], every pod may move (the
//! drain rules, `safe-to-evict`) and the PodDisruptionBudgets allow all its evictions at once.
//!
//! The search is bounded by work, not time: at most `max_multi_node_candidates` nodes in the
//! multi-node search (⌈log2 n⌉ + 1 simulations of at most n nodes), at most
//! [`ConsolidationOptions::max_single_node_candidates`] single-node trials, and at most
//! [`ConsolidationOptions::max_pods_simulated`] pod placements over the whole pass (each a
//! search over the nodes that the removal simulation resumes where it left off). The caller's
//! [`Budget`] (`--scale-down-simulation-timeout`) stops it too.
//!
//! It never proposes evicting a pod that blocks, past a PodDisruptionBudget's allowance, a group
//! below its min size or above its max size, crossing a cluster-wide limit, a replacement that
//! does not cost less than what it replaces, more drains at once than `--max-drain-parallelism`
//! allows, or a node drained twice. It only decides; the shell scales up, drains and deletes. The snapshot is left as
//! found.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use rustc_hash::FxHashMap;

use super::disruption_budget::GroupRules;
use super::disruption_cost::DisruptionCost;
use super::drain::{DrainContext, DrainOptions, drain_node};
use super::eviction_cost::rescheduling_cost;
use super::removal::{Hints, try_remove};
use super::replacement_judgement::WorkloadMix;
use super::{InFlight, NodeDeletion, ms};
use crate::scale_up::estimator::NodeTemplate;
use crate::scheduling::budget::Budget;
use crate::scheduling::snapshot::{ClusterSnapshot, NodeId, NodeInfo};
use autoscaler_model::ControllerLookup;
use autoscaler_model::DisruptionBudgets;
use autoscaler_model::Node;
use autoscaler_model::Pod;
use autoscaler_model::ResourceName;
use autoscaler_model::Sym;
use autoscaler_model::{CloudProvider, NodeGroup, NodeGroupId};
use autoscaler_model::{ClusterTotals, ResourceLimits};
use autoscaler_model::{SCALE_DOWN_DISABLED_ANNOTATION, TO_BE_DELETED_TAINT};

/// The reason of the events announcing a consolidation (ours: upstream has none).
pub const CONSOLIDATION_EVENT: &str = "Consolidation";

/// `--consolidation`: what consolidation may do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConsolidationMode {
    /// No consolidation (the default: upstream's behaviour).
    #[default]
    Off,
    /// Delete nodes whose pods fit on the other nodes.
    Delete,
    /// Delete, or replace nodes by one cheaper node of any group.
    Replace,
}

impl FromStr for ConsolidationMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(ConsolidationMode::Off),
            "delete" => Ok(ConsolidationMode::Delete),
            "replace" => Ok(ConsolidationMode::Replace),
            other => Err(format!(
                "unknown consolidation mode {other:?} (expected off, delete or replace)"
            )),
        }
    }
}

impl fmt::Display for ConsolidationMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConsolidationMode::Off => "off",
            ConsolidationMode::Delete => "delete",
            ConsolidationMode::Replace => "replace",
        })
    }
}

/// Options of consolidation (ours).
#[derive(Clone, Debug)]
pub struct ConsolidationOptions {
    /// `--consolidation` (off).
    pub(crate) mode: ConsolidationMode,
    /// `--consolidate-after` (1m): how long a node's pods must stay unchanged before it is
    /// consolidated (Karpenter's `consolidateAfter`).
    pub(crate) consolidate_after: Duration,
    /// Nodes the multi-node search considers (100, as Karpenter).
    pub(crate) max_multi_node_candidates: usize,
    /// Single-node trials per pass (50).
    pub(crate) max_single_node_candidates: usize,
    /// Pod placements simulated per pass, over all trials (20,000).
    pub(crate) max_pods_simulated: usize,
    /// How long a replacement may take to become Ready before consolidation gives it up
    /// (`--max-node-provision-time`, 15m; the scale-up itself is reverted by the cluster state).
    pub(crate) replacement_timeout: Duration,
    /// The least time a saving and a Job's lost run are counted for (10m, as upstream's
    /// `--scale-down-delay-after-add`), and the least age of a node holding pods before it is
    /// consolidated: see [`DisruptionCost`].
    pub(crate) horizon: Duration,
}

impl Default for ConsolidationOptions {
    fn default() -> Self {
        ConsolidationOptions {
            mode: ConsolidationMode::Off,
            consolidate_after: Duration::from_secs(60),
            max_multi_node_candidates: 100,
            max_single_node_candidates: 50,
            max_pods_simulated: 20_000,
            replacement_timeout: Duration::from_secs(15 * 60),
            horizon: Duration::from_secs(10 * 60),
        }
    }
}

/// A shape a replacement node may have: a group and its template (with its daemon pods).
#[derive(Clone, Debug)]
pub struct ReplacementShape {
    /// Index of the group in the provider's groups.
    pub group: usize,
    /// What a new node of the group looks like.
    pub template: NodeTemplate,
}

/// What consolidation needs besides the snapshot.
pub struct ConsolidationInput<'a> {
    /// The provider's groups and node mapping.
    pub provider: &'a dyn CloudProvider,
    /// PodDisruptionBudgets with their remaining allowance.
    pub budgets: DisruptionBudgets,
    /// Controller lookups for the drain rules.
    pub controllers: &'a dyn ControllerLookup,
    /// The drain rules.
    pub drain: &'a DrainOptions,
    /// Cluster-wide limits.
    pub limits: &'a ResourceLimits,
    /// Current totals.
    pub totals: ClusterTotals,
    /// Deletions in progress.
    pub in_flight: InFlight,
    /// `--max-drain-parallelism`: drains at once, consolidation's included.
    pub max_drain_parallelism: usize,
    /// `--max-scale-down-parallelism`: deletions at once.
    pub max_scale_down_parallelism: usize,
    /// `--max-graceful-termination-sec`.
    pub max_graceful_termination_sec: u64,
    /// Shapes of replacement nodes (used in [`ConsolidationMode::Replace`] only).
    pub shapes: &'a [ReplacementShape],
    /// Something else is under way (a scale-up, a deletion, nodes on their way): keep the
    /// timers and follow a pending replacement, but start nothing new.
    pub hold: bool,
    /// The loop's last scale-up for pending pods (a replacement's own scale-up does not
    /// count): when it came within the horizon after one of our deletions, no new command
    /// starts within the horizon after it, see [`plan_consolidation`].
    pub last_scale_up_ms: Option<i64>,
}

impl<'a> ConsolidationInput<'a> {
    /// The drain rules of this pass, at `now_ms`.
    pub(super) fn drain_context(&self, now_ms: i64) -> DrainContext<'_> {
        DrainContext {
            opts: self.drain,
            budgets: &self.budgets,
            controllers: self.controllers,
            now_ms,
        }
    }

    /// The snapshot's nodes of a known group, with the group's index and view (consolidation
    /// and node expiry both walk them so).
    pub(super) fn grouped_nodes<'s>(
        &'s self,
        snapshot: &'s ClusterSnapshot,
    ) -> impl Iterator<Item = (NodeId, &'s NodeInfo, usize, &'s NodeGroup)> + 's {
        let groups = self.provider.node_groups();
        snapshot.nodes().filter_map(move |(id, info)| {
            let g = self.provider.node_group_of(&info.node)?;
            groups.get(g).map(|group| (id, info, g, group))
        })
    }
}

/// A replacement asked for and not Ready yet: the nodes it replaces are drained once it is.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingReplacement {
    /// Group of the new node.
    pub group: NodeGroupId,
    /// The nodes it replaces.
    pub nodes: Vec<Sym>,
    /// The group's nodes when it was asked for (the new node is one not among them).
    pub known: Vec<Sym>,
    /// When it was asked for.
    pub requested_ms: i64,
    /// The explanation of the decision.
    pub explanation: String,
}

/// The nodes of a multi-node command still to be drained, in order, as drain slots free
/// (`--max-drain-parallelism`): each is checked again at its turn and dropped if it can no
/// longer go.
#[derive(Clone, Debug, PartialEq)]
pub struct WaitingTurn {
    /// The nodes, in the order they are drained.
    pub nodes: Vec<Sym>,
    /// The node that came to replace them (its group and name), until one of them is drained.
    came: Option<(NodeGroupId, Sym)>,
    /// Since when they wait without a drain of theirs (the command, or its last turn).
    since_ms: i64,
    /// The explanation of the decision.
    pub explanation: String,
}

/// What consolidation remembers between loops.
#[derive(Clone, Debug, Default)]
pub struct ConsolidationState {
    /// Per node: a fingerprint of its pods and since when it has not changed.
    quiet: FxHashMap<Sym, (u64, i64)>,
    /// The replacement being waited for, if any.
    pub pending: Option<PendingReplacement>,
    /// The nodes of a command waiting for a drain slot, if any: nothing new starts meanwhile.
    pub waiting_turn: Option<WaitingTurn>,
    /// When consolidation last deleted nodes (a deletion, or a replacement's drain).
    last_deletion_ms: Option<i64>,
    /// Per group: whether another group that may grow holds the workload's mix for less
    /// (as last judged; see `Search::dearer_groups`).
    dearer_groups: Vec<bool>,
}

impl ConsolidationState {
    /// The nodes consolidation holds for a command not carried out yet (a pending replacement's,
    /// or those waiting for their drain's turn): they take no new pods.
    pub fn waiting_nodes(&self) -> Vec<Sym> {
        let pending = self.pending.iter().flat_map(|p| &p.nodes);
        let turn = self.waiting_turn.iter().flat_map(|w| &w.nodes);
        pending.chain(turn).copied().collect()
    }

    /// Takes `nodes` (being deleted by something else, e.g. this loop's scale-down) out of the
    /// command waiting to be carried out, so that no node is drained twice.
    pub(crate) fn forget(&mut self, nodes: &[Sym]) {
        if let Some(p) = &mut self.pending {
            p.nodes.retain(|n| !nodes.contains(n));
        }
        if let Some(w) = &mut self.waiting_turn {
            w.nodes.retain(|n| !nodes.contains(n));
            if w.nodes.is_empty() {
                self.waiting_turn = None;
            }
        }
    }
}

/// What a command does.
#[derive(Clone, Debug, PartialEq)]
pub enum CommandKind {
    /// Delete the nodes; their pods fit elsewhere.
    Delete,
    /// Add one node of `group` first, then drain the nodes once it is Ready.
    Replace {
        /// Index of the group.
        group_index: usize,
        /// The group of the new node.
        group: NodeGroupId,
    },
    /// The replacement asked for earlier is Ready: drain the nodes it replaces (as many as
    /// drain slots allow; the others wait their turn).
    ReplacementReady,
    /// Nodes of an earlier multi-node command whose turn to be drained came.
    Turn,
}

/// One consolidation decision.
#[derive(Clone, Debug)]
pub struct ConsolidationCommand {
    /// What it does.
    pub kind: CommandKind,
    /// The nodes to drain and delete (after the replacement, for a replacement).
    pub deletions: Vec<NodeDeletion>,
    /// Cost per hour saved (the groups' prices when every group has one, otherwise a
    /// resource-weighted size: cores + memory GiB / 4 + 8 per GPU).
    pub saved_per_hour: f64,
    /// Pods to move elsewhere.
    pub pods_disrupted: usize,
    /// Why, for `plan`, events and logs.
    pub explanation: String,
}

/// The result of one consolidation pass.
#[derive(Clone, Debug, Default)]
pub struct ConsolidationPlan {
    /// The command, if any.
    pub command: Option<ConsolidationCommand>,
    /// The replacement given up (it never became Ready), with why.
    pub gave_up: Option<String>,
    /// Candidates (nodes that may be consolidated) this pass.
    pub candidates: usize,
    /// Pod placements simulated.
    pub pods_simulated: usize,
    /// Nodes new pods should keep off (the soft taint): those of a dearer group, which
    /// consolidation takes first, so that they empty as their pods end.
    pub attrition: Vec<Sym>,
}

/// A node that may be consolidated.
#[derive(Clone, Debug)]
struct Candidate {
    id: NodeId,
    name: Sym,
    group: usize,
    to_move: Vec<Arc<Pod>>,
    evict_only: Vec<Arc<Pod>>,
    cost: f64,
    /// The work its pods would lose, and how long its saving counts.
    disruption: DisruptionCost,
    /// What moving its pods weighs: their eviction costs summed (one per default pod).
    weight: f64,
}

impl Candidate {
    /// Cost saved per pod disrupted, each pod weighed by its eviction cost (empty nodes first).
    fn rank(&self) -> f64 {
        if self.to_move.is_empty() {
            f64::INFINITY
        } else {
            self.cost / self.weight
        }
    }
}

/// How to compare what nodes cost.
struct Pricing {
    priced: bool,
}

impl Pricing {
    fn of(groups: &[NodeGroup]) -> Pricing {
        Pricing {
            priced: !groups.is_empty() && groups.iter().all(|g| g.node_price_per_hour().is_some()),
        }
    }

    fn cost(&self, group: &NodeGroup, node: &Node) -> f64 {
        match group.node_price_per_hour() {
            Some(p) if self.priced => p,
            _ => size(node),
        }
    }
}

/// A node's size as a cost when prices are unknown: cores + memory GiB / 4 + 8 per GPU (the
/// usual 1 core : 4 GiB ratio of general-purpose shapes).
fn size(node: &Node) -> f64 {
    let a = &node.allocatable;
    let gpus: i64 = a.iter().filter(|(n, _)| n.is_gpu()).map(|(_, v)| v).sum();
    a.get(ResourceName::Cpu) as f64 / 1000.0
        + a.get(ResourceName::Memory) as f64 / (4.0 * (1u64 << 30) as f64)
        + 8.0 * gpus as f64
}

/// A fingerprint of a node's pods: their number and their names hashed, order-free.
fn fingerprint(pods: &[Arc<Pod>]) -> u64 {
    let mut acc: u64 = pods.len() as u64;
    for p in pods {
        let mut h = rustc_hash::FxHasher::default();
        std::hash::Hash::hash(&(p.namespace, p.name.text_hash()), &mut h);
        acc = acc.wrapping_add(std::hash::Hasher::finish(&h).rotate_left(7));
    }
    acc
}

/// The work one pass may still do.
struct Work<'b> {
    pods_left: usize,
    pods_simulated: usize,
    budget: &'b mut dyn Budget,
}

impl Work<'_> {
    fn take(&mut self, pods: usize) -> bool {
        if pods > self.pods_left || (pods > 0 && self.budget.exhausted()) {
            return false;
        }
        self.pods_left -= pods;
        self.pods_simulated += pods;
        true
    }
}

/// Plans one consolidation pass at `now_ms` on `snapshot` (left as found): updates the quiet
/// timers, follows a pending replacement, and otherwise looks for one command.
pub fn plan_consolidation(
    snapshot: &mut ClusterSnapshot,
    state: &mut ConsolidationState,
    input: ConsolidationInput<'_>,
    opts: &ConsolidationOptions,
    now_ms: i64,
    budget: &mut dyn Budget,
) -> ConsolidationPlan {
    let mut plan = ConsolidationPlan::default();
    if !GroupRules::any_on(input.provider, opts.mode) {
        state.quiet.clear();
        state.pending = None;
        state.waiting_turn = None;
        return plan;
    }
    update_quiet(snapshot, state, now_ms);
    if state.dearer_groups.contains(&true) {
        plan.attrition = input
            .grouped_nodes(snapshot)
            .filter(|(_, info, g, _)| {
                state.dearer_groups.get(*g).copied().unwrap_or(false)
                    && info.node.is_ready()
                    && info.node.deletion_ms.is_none()
            })
            .map(|(_, info, _, _)| info.node.name)
            .collect();
    }
    let mut work = Work {
        pods_left: opts.max_pods_simulated,
        pods_simulated: 0,
        budget,
    };
    if let Some(pending) = state.pending.clone() {
        follow_pending(
            snapshot, state, &pending, &input, opts, now_ms, &mut work, &mut plan,
        );
        plan.pods_simulated = work.pods_simulated;
        return plan;
    }
    if state.waiting_turn.is_some() {
        take_turn(snapshot, state, &input, opts, now_ms, &mut work, &mut plan);
        plan.pods_simulated = work.pods_simulated;
        return plan;
    }
    if input.hold {
        return plan;
    }
    // A scale-up within the horizon after our deletion: the pods arrive faster than the room
    // we left them, and the room a drain frees now would be bought back at once (drain, then
    // scale-up, the same pods restarted: short tasks' ping-pong). Wait the horizon after that
    // scale-up, as upstream's `--scale-down-delay-after-add` keeps scale-down waiting; a
    // scale-up that follows no deletion of ours (a load growing) does not hold it. Expiry
    // still runs.
    let horizon_ms = ms(opts.horizon);
    let grew = match (state.last_deletion_ms, input.last_scale_up_ms) {
        (Some(d), Some(t)) => {
            d <= t && t < d.saturating_add(horizon_ms) && now_ms < t.saturating_add(horizon_ms)
        }
        _ => false,
    };
    let groups = input.provider.node_groups();
    let pricing = Pricing::of(groups);
    let rules = GroupRules::of(
        input.provider,
        snapshot,
        opts.mode,
        &input.in_flight,
        &[],
        now_ms,
    );
    let mut candidates = candidates(
        snapshot,
        state,
        &input,
        opts,
        &pricing,
        now_ms,
        None,
        Some(&rules),
    );
    plan.candidates = candidates.len();
    let mix = WorkloadMix::of(snapshot);
    let search = Search {
        input: &input,
        opts,
        pricing: &pricing,
        rules: &rules,
        mix: &mix,
    };
    search.order(snapshot, &mut candidates);
    if !input.shapes.is_empty() {
        state.dearer_groups = search.dearer_groups(snapshot);
    }
    // Node lifetime first: an expired node is replaced whatever consolidation would save.
    let mut left = work.pods_left;
    let expiry = super::node_lifetime::expiry(snapshot, &input, &rules, now_ms, &mut left);
    work.pods_simulated += work.pods_left - left;
    work.pods_left = left;
    plan.command = expiry.or_else(|| {
        if grew {
            return None;
        }
        snapshot.forked(|s| {
            search
                .empty(s, &candidates)
                .or_else(|| search.multi(s, &candidates, &mut work))
                .or_else(|| search.single(s, &candidates, &mut work))
        })
    });
    // A multi-node deletion with more nodes than drain slots: the first go now, the others
    // wait their turn.
    if let Some(c) = &mut plan.command
        && c.kind == CommandKind::Delete
    {
        state.last_deletion_ms = Some(now_ms);
        let (_, drains) = slots(&input);
        let drained = c.deletions.iter().filter(|d| !d.empty).count();
        if drained > drains {
            let rest: Vec<NodeDeletion> = c.deletions.split_off(drains);
            let names: Vec<Sym> = rest.iter().map(|d| d.node).collect();
            c.explanation = format!(
                "{}; drained {drains} at a time (--max-drain-parallelism), [{}] wait their turn",
                c.explanation,
                joined(&names)
            );
            state.waiting_turn = Some(WaitingTurn {
                nodes: names,
                came: None,
                since_ms: now_ms,
                explanation: c.explanation.clone(),
            });
        }
    }
    if let Some(c) = &mut plan.command
        && let CommandKind::Replace { group, .. } = &c.kind
    {
        let (_, drains) = slots(&input);
        if c.deletions.len() > drains.max(1) {
            c.explanation = format!(
                "{}; once it is Ready, drained {} at a time (--max-drain-parallelism)",
                c.explanation,
                drains.max(1)
            );
        }
        let known = snapshot
            .nodes()
            .filter(|(_, i)| input.provider.node_group_of(&i.node) == Some(index_of(groups, group)))
            .map(|(_, i)| i.node.name)
            .collect();
        state.pending = Some(PendingReplacement {
            group: group.clone(),
            nodes: c.deletions.iter().map(|d| d.node).collect(),
            known,
            requested_ms: now_ms,
            explanation: c.explanation.clone(),
        });
    }
    plan.pods_simulated = work.pods_simulated;
    plan
}

/// Drains the nodes of the pending replacement once its node is Ready (if their pods still fit
/// without them), or gives the replacement up after the timeout.
#[allow(clippy::too_many_arguments)]
fn follow_pending(
    snapshot: &mut ClusterSnapshot,
    state: &mut ConsolidationState,
    pending: &PendingReplacement,
    input: &ConsolidationInput<'_>,
    opts: &ConsolidationOptions,
    now_ms: i64,
    work: &mut Work<'_>,
    plan: &mut ConsolidationPlan,
) {
    let groups = input.provider.node_groups();
    let g = index_of(groups, &pending.group);
    let names = || {
        (pending.nodes.iter())
            .map(|n| n.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let arrived = snapshot.nodes().find(|(_, i)| {
        input.provider.node_group_of(&i.node) == Some(g)
            && !pending.known.contains(&i.node.name)
            && i.node.is_ready()
    });
    let Some((_, arrived)) = arrived else {
        if now_ms
            >= pending
                .requested_ms
                .saturating_add(ms(opts.replacement_timeout))
        {
            state.pending = None;
            plan.gave_up = Some(format!(
                "replacement node of {} for [{}] not Ready after {}s: given up, nodes kept",
                pending.group,
                names(),
                opts.replacement_timeout.as_secs()
            ));
        }
        return;
    };
    state.pending = None;
    state.waiting_turn = Some(WaitingTurn {
        nodes: pending.nodes.clone(),
        came: Some((pending.group.clone(), arrived.node.name)),
        since_ms: now_ms,
        explanation: pending.explanation.clone(),
    });
    take_turn(snapshot, state, input, opts, now_ms, work, plan);
}

/// Drains the next nodes waiting their turn, as many as drain slots allow, each checked again
/// first (still a candidate, within min sizes and PodDisruptionBudgets with the others of this
/// turn, its pods placeable without it): a node that fails is dropped from the command, never
/// drained, with why in `plan.gave_up`. Without a free drain slot (or simulation work left),
/// they wait for a later pass.
#[allow(clippy::too_many_arguments)]
fn take_turn(
    snapshot: &mut ClusterSnapshot,
    state: &mut ConsolidationState,
    input: &ConsolidationInput<'_>,
    opts: &ConsolidationOptions,
    now_ms: i64,
    work: &mut Work<'_>,
    plan: &mut ConsolidationPlan,
) {
    let Some(mut turn) = state.waiting_turn.take() else {
        return;
    };
    let (_, drains) = slots(input);
    if drains == 0 {
        // Drain slots held by drains that do not end would hold consolidation for good: after
        // the provision time without a turn, the rest of the command is given up.
        if now_ms.saturating_sub(turn.since_ms) > ms(opts.replacement_timeout) {
            plan.gave_up = Some(format!(
                "[{}] waited more than {}s for a drain slot: dropped from the command, kept; \
                 decided as: {}",
                joined(&turn.nodes),
                opts.replacement_timeout.as_secs(),
                turn.explanation
            ));
        } else {
            state.waiting_turn = Some(turn);
        }
        return;
    }
    let groups = input.provider.node_groups();
    let pricing = Pricing::of(groups);
    let cands = candidates(
        snapshot,
        state,
        input,
        opts,
        &pricing,
        now_ms,
        Some(&turn.nodes),
        None,
    );
    let mut keep = Keep::unruled(input);
    let mut taken: Vec<Candidate> = Vec::new();
    let mut found: Option<Found> = None;
    let mut dropped: Vec<(Sym, &str)> = Vec::new();
    let mut rest: Vec<Sym> = Vec::new();
    for &name in &turn.nodes {
        if taken.len() >= drains || !rest.is_empty() {
            rest.push(name);
            continue;
        }
        let Some(c) = cands.iter().find(|c| c.name == name) else {
            dropped.push((
                name,
                "no longer a candidate (gone, not Ready, being deleted, its pods may not all be \
                 evicted, or its group at its min size)",
            ));
            continue;
        };
        if !keep.admit(snapshot, c) {
            dropped.push((
                name,
                "its group's min size, a cluster-wide minimum or a PodDisruptionBudget no longer \
                 allows it",
            ));
            continue;
        }
        let pods: usize = c.to_move.len() + taken.iter().map(|t| t.to_move.len()).sum::<usize>();
        if !work.take(pods) {
            // Out of simulation work this pass: it and the rest wait.
            rest.push(name);
            continue;
        }
        taken.push(c.clone());
        match snapshot.forked(|s| place(s, &taken, None)) {
            Some(f) => found = Some(f),
            None => {
                taken.pop();
                dropped.push((name, "its pods no longer fit on the other nodes"));
            }
        }
    }
    if !dropped.is_empty() {
        let why: Vec<String> = (dropped.iter())
            .map(|(n, why)| format!("{n}: {why}"))
            .collect();
        plan.gave_up = Some(format!(
            "dropped from the command, kept: {}; decided as: {}",
            why.join("; "),
            turn.explanation
        ));
    }
    if let Some(f) = found {
        let rules = GroupRules::default();
        let mix = WorkloadMix::default();
        let search = Search {
            input,
            opts,
            pricing: &pricing,
            rules: &rules,
            mix: &mix,
        };
        // What the first drained nodes save is their cost less the new node's, which came for
        // them.
        let came = turn.came.take().and_then(|(group, name)| {
            let g = index_of(groups, &group);
            let group = groups.get(g)?;
            let node = snapshot.node(snapshot.node_id(name)?)?;
            Some((group, name, pricing.cost(group, &node.node)))
        });
        let ready = came.is_some();
        let how = if ready {
            "replacement Ready,"
        } else {
            "turn of a multi-node command,"
        };
        let mut c = search.command_after(f, how, came);
        c.kind = if ready {
            CommandKind::ReplacementReady
        } else {
            CommandKind::Turn
        };
        if !rest.is_empty() {
            c.explanation = format!(
                "{}; [{}] wait their turn (--max-drain-parallelism {})",
                c.explanation,
                joined(&rest),
                input.max_drain_parallelism
            );
        }
        c.explanation = format!("{}; decided as: {}", c.explanation, turn.explanation);
        state.last_deletion_ms = Some(now_ms);
        plan.command = Some(c);
    }
    if !rest.is_empty() {
        if plan.command.is_some() {
            turn.since_ms = now_ms;
        }
        turn.nodes = rest;
        state.waiting_turn = Some(turn);
    }
}

/// Names, comma-separated.
fn joined(names: &[Sym]) -> String {
    (names.iter())
        .map(|n| n.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Deletions still allowed: (all, drains).
fn slots(input: &ConsolidationInput<'_>) -> (usize, usize) {
    let f = &input.in_flight;
    let all = input
        .max_scale_down_parallelism
        .saturating_sub(f.empty + f.drains);
    let drains = input.max_drain_parallelism.saturating_sub(f.drains);
    (all, drains.min(all))
}

/// Remembers the group of each node a command deletes, so the deletion's outcome (recorded by
/// the scale-down state) starts the right group's delays.
pub(crate) fn record_deletions(state: &mut super::ScaleDownState, deletions: &[NodeDeletion]) {
    for d in deletions {
        state.deleting.insert(d.node, d.group.clone());
    }
}

fn index_of(groups: &[NodeGroup], id: &NodeGroupId) -> usize {
    groups
        .iter()
        .position(|g| g.id() == id)
        .unwrap_or(usize::MAX)
}

/// Starts or keeps each node's quiet timer: it restarts whenever the node's pods change.
fn update_quiet(snapshot: &ClusterSnapshot, state: &mut ConsolidationState, now_ms: i64) {
    let mut next = FxHashMap::default();
    next.reserve(snapshot.len());
    for (_, info) in snapshot.nodes() {
        let f = fingerprint(&info.pods);
        let since = match state.quiet.get(&info.node.name) {
            Some(&(old, since)) if old == f => since,
            Some(_) => now_ms,
            // First sight (a start, or `plan`): the newest of the node and its pods tells when
            // its pods last changed, as far as the objects say (a pod gone leaves no trace).
            None => std::iter::once(info.node.creation_ms)
                .chain(info.pods.iter().map(|p| p.creation_ms))
                .map(|t| t.unwrap_or(now_ms))
                .max()
                .unwrap_or(now_ms)
                .min(now_ms),
        };
        next.insert(info.node.name, (f, since));
    }
    state.quiet = next;
}

/// Every node that may be consolidated now (within its group's `rules`, when given).
#[allow(clippy::too_many_arguments)]
fn candidates(
    snapshot: &ClusterSnapshot,
    state: &ConsolidationState,
    input: &ConsolidationInput<'_>,
    opts: &ConsolidationOptions,
    pricing: &Pricing,
    now_ms: i64,
    only: Option<&[Sym]>,
    rules: Option<&GroupRules>,
) -> Vec<Candidate> {
    let after = ms(opts.consolidate_after);
    let horizon_ms = ms(opts.horizon);
    let horizon_h = horizon_ms as f64 / 3_600_000.0;
    // Pods that needed a scale-up this long ago will need the room again about as soon.
    let since_scale_up_h =
        (input.last_scale_up_ms).map(|t| now_ms.saturating_sub(t).max(0) as f64 / 3_600_000.0);
    let to_be_deleted = Sym::new(TO_BE_DELETED_TAINT);
    let ctx = input.drain_context(now_ms);
    let mut out = Vec::new();
    for (id, info, g, group) in input.grouped_nodes(snapshot) {
        let node = &info.node;
        // Nodes waiting for their replacement were chosen quiet; the new node's arrival is
        // what they wait for, not more quiet time.
        let quiet = match only {
            Some(names) => names.contains(&node.name),
            None => state
                .quiet
                .get(&node.name)
                .is_some_and(|&(_, since)| now_ms >= since.saturating_add(after)),
        };
        let in_flight = input.in_flight.per_group.get(g).copied().unwrap_or(0);
        if !quiet
            || !node.is_ready()
            || node.annotation(SCALE_DOWN_DISABLED_ANNOTATION) == Some("true")
            || node.deletion_ms.is_some()
            || node.taints.iter().any(|t| t.key == to_be_deleted)
            || group.options().zero_or_max_scaling()
            || group.rolling_out()
            || group.target_size().saturating_sub(in_flight) <= group.min_size()
            || rules.is_some_and(|r| !r.admits(g, node, now_ms))
        {
            continue;
        }
        let Ok(drained) = drain_node(&info.pods, &ctx) else {
            continue;
        };
        let evicted: Vec<&Pod> = drained
            .to_move
            .iter()
            .chain(&drained.to_evict_only)
            .map(|p| &**p)
            .collect();
        if input.budgets.can_evict(&evicted).is_err() {
            continue;
        }
        let cost = pricing.cost(group, node);
        let disruption = DisruptionCost::of(evicted.iter().copied(), node, cost, now_ms, horizon_h)
            .until_room_needed(since_scale_up_h, horizon_h);
        // A node holding pods is kept for the horizon after it came (a replacement, or a node
        // bought for pods that just arrived: consolidating it at once is the ping-pong that
        // restarts the same pods again), and kept while its pods' lost work outweighs the
        // saving of deleting it (then replacing it, which saves less, cannot be worth it).
        let young = node
            .creation_ms
            .is_some_and(|c| now_ms < c.saturating_add(horizon_ms));
        if only.is_none() && !evicted.is_empty() && (young || !disruption.worth(cost)) {
            continue;
        }
        out.push(Candidate {
            id,
            name: node.name,
            group: g,
            weight: rescheduling_cost(drained.to_move.iter().map(|p| &**p)),
            to_move: drained.to_move,
            evict_only: drained.to_evict_only,
            cost,
            disruption,
        });
    }
    out
}

/// The search of one pass.
struct Search<'s, 'i> {
    input: &'s ConsolidationInput<'i>,
    opts: &'s ConsolidationOptions,
    pricing: &'s Pricing,
    /// The groups' modes and budgets.
    rules: &'s GroupRules,
    /// The workload's mix, a replacement is judged on (see [`WorkloadMix`]).
    mix: &'s WorkloadMix,
}

/// A set of nodes that can go, and where their pods would land.
struct Found {
    nodes: Vec<Candidate>,
    destinations: Vec<Vec<(Arc<Pod>, Sym)>>,
    replacement: Option<usize>,
}

impl Search<'_, '_> {
    /// Deletions still allowed: (all, drains).
    fn slots(&self) -> (usize, usize) {
        slots(self.input)
    }

    /// Orders `cands` as the searches take them: with `replace`, the nodes of a shape dearer
    /// per copy of the workload's mix than one the cluster can buy now first (see
    /// [`Self::dearer_than_on_offer`]); then the best saving per disrupted pod; ties by name,
    /// for a stable order. Without a shape on offer (`delete`, or nothing may grow) the order
    /// is by saving alone.
    fn order(&self, s: &ClusterSnapshot, cands: &mut Vec<Candidate>) {
        let offers = self.offers();
        // The answer depends only on the node's price and allocatable: one judgement per shape
        // among the candidates, not per node (15,000 nodes of 100 groups in `bench`).
        let mut memo: FxHashMap<(u64, &autoscaler_model::Resources), bool> = FxHashMap::default();
        let mut keyed: Vec<(bool, Candidate)> = Vec::with_capacity(cands.len());
        for c in std::mem::take(cands) {
            let dearer = match s.node(c.id) {
                Some(info) if !offers.is_empty() && self.rules.replaces(c.group) => *(memo
                    .entry((c.cost.to_bits(), &info.node.allocatable)))
                .or_insert_with(|| self.dearer_than_on_offer(c.cost, &info.node, &offers)),
                _ => false,
            };
            keyed.push((dearer, c));
        }
        keyed.sort_by(|(da, a), (db, b)| {
            db.cmp(da)
                .then_with(|| b.rank().total_cmp(&a.rank()))
                .then_with(|| a.name.as_str().cmp(b.name.as_str()))
        });
        cands.extend(keyed.into_iter().map(|(_, c)| c));
    }

    /// The shapes on offer, each priced once: those of the groups that may grow now.
    fn offers(&self) -> Vec<(f64, &Node)> {
        let groups = self.input.provider.node_groups();
        (self.input.shapes.iter())
            .filter(|sh| sh.group < groups.len())
            .filter(|sh| self.may_grow(&groups[sh.group], &sh.template.node))
            .map(|sh| {
                let price = self.pricing.cost(&groups[sh.group], &sh.template.node);
                (price, &sh.template.node)
            })
            .collect()
    }

    /// Per group of the provider: whether its nodes are of a shape another group on offer
    /// beats per copy of the workload's mix (judged on one of its nodes).
    fn dearer_groups(&self, s: &ClusterSnapshot) -> Vec<bool> {
        let groups = self.input.provider.node_groups();
        let offers = self.offers();
        let mut out = vec![false; groups.len()];
        if offers.is_empty() {
            return out;
        }
        let mut seen = vec![false; groups.len()];
        let mut left = groups.len();
        for (_, info, g, group) in self.input.grouped_nodes(s) {
            if left == 0 {
                break;
            }
            if seen[g] {
                continue;
            }
            seen[g] = true;
            left -= 1;
            if !self.rules.replaces(g) {
                continue;
            }
            let cost = self.pricing.cost(group, &info.node);
            out[g] = self.dearer_than_on_offer(cost, &info.node, &offers);
        }
        out
    }

    /// Whether a node at `price` (in a `replace` group) is of a shape that one of the `offers`
    /// (the groups the cluster may grow now, each with its price) holds the workload's mix for
    /// strictly less per copy (the rule replacements are judged by). Deleting such a node first
    /// leaves the capacity the pods keep needing on the cheaper shapes, and a multi-node prefix
    /// of such nodes is what one cheaper node can replace: ranked by saving per pod alone, the
    /// dearer shape's nodes (cheaper per node) come last and the cheaper shape's are deleted
    /// instead, so the cluster never moves toward the cheaper shape (on the Azure replay,
    /// `least-waste` keeps the 64-CPU group at its max while consolidation removed the 96-CPU
    /// nodes, cheaper per CPU).
    fn dearer_than_on_offer(&self, price: f64, node: &Node, offers: &[(f64, &Node)]) -> bool {
        (offers.iter()).any(|&(p, shape)| self.mix.cheaper_per_copy([(price, node)], p, shape))
    }

    /// Every quiet empty candidate, within min sizes, limits and the parallelism.
    fn empty(&self, s: &ClusterSnapshot, cands: &[Candidate]) -> Option<ConsolidationCommand> {
        let (all, _) = self.slots();
        let mut chosen: Vec<Candidate> = Vec::new();
        let mut keep = Keep::new(self.input, self.rules);
        for c in cands.iter().filter(|c| c.to_move.is_empty()) {
            if chosen.len() >= all {
                break;
            }
            if keep.admit(s, c) {
                chosen.push(c.clone());
            }
        }
        if chosen.is_empty() {
            return None;
        }
        let n = chosen.len();
        let found = Found {
            destinations: vec![Vec::new(); n],
            nodes: chosen,
            replacement: None,
        };
        Some(self.command(found, "empty"))
    }

    /// The longest prefix (at least two nodes) of the ranked candidates that can go at once.
    /// It may hold more nodes than drain slots (within the deletion slots): those wait their
    /// turn, drained one after another (see [`take_turn`]).
    fn multi(
        &self,
        s: &mut ClusterSnapshot,
        cands: &[Candidate],
        work: &mut Work<'_>,
    ) -> Option<ConsolidationCommand> {
        let (all, drains) = self.slots();
        if drains == 0 {
            return None;
        }
        let mut keep = Keep::new(self.input, self.rules);
        let prefix: Vec<Candidate> = cands
            .iter()
            .filter(|c| !c.to_move.is_empty())
            .take(self.opts.max_multi_node_candidates)
            .filter(|c| keep.admit(s, c))
            .take(all)
            .cloned()
            .collect();
        if prefix.len() < 2 {
            return None;
        }
        // Binary search on the prefix length: removing more nodes is never easier than fewer.
        let (mut lo, mut hi, mut best) = (2, prefix.len(), None);
        while lo <= hi {
            let mid = lo + (hi - lo) / 2;
            match self.try_set(s, &prefix[..mid], work) {
                Some(found) => {
                    best = Some(found);
                    lo = mid + 1;
                }
                None => hi = mid.saturating_sub(1),
            }
            if work.pods_left == 0 {
                break;
            }
        }
        best.map(|f| self.command(f, "multi-node"))
    }

    /// The first candidate, in rank order, that can go alone.
    fn single(
        &self,
        s: &mut ClusterSnapshot,
        cands: &[Candidate],
        work: &mut Work<'_>,
    ) -> Option<ConsolidationCommand> {
        let (_, drains) = self.slots();
        if drains == 0 {
            return None;
        }
        for c in cands
            .iter()
            .filter(|c| !c.to_move.is_empty())
            .take(self.opts.max_single_node_candidates)
        {
            if !Keep::new(self.input, self.rules).admit(s, c) {
                continue;
            }
            if let Some(found) = self.try_set(s, std::slice::from_ref(c), work) {
                return Some(self.command(found, "single-node"));
            }
            if work.pods_left == 0 {
                break;
            }
        }
        None
    }

    /// Whether `set` can go: deleted, or (replace mode) replaced by the cheapest shape that
    /// costs less than the set and takes what does not fit elsewhere.
    fn try_set(
        &self,
        s: &mut ClusterSnapshot,
        set: &[Candidate],
        work: &mut Work<'_>,
    ) -> Option<Found> {
        let pods: usize = set.iter().map(|c| c.to_move.len()).sum();
        if !work.take(pods) {
            return None;
        }
        if let Some(found) = s.forked(|s| place(s, set, None)) {
            return Some(found);
        }
        if !set.iter().all(|c| self.rules.replaces(c.group)) {
            return None;
        }
        let cost: f64 = set.iter().map(|c| c.cost).sum();
        let disruption = DisruptionCost::sum(set.iter().map(|c| &c.disruption));
        let groups = self.input.provider.node_groups();
        let mut shapes: Vec<(f64, usize, &ReplacementShape)> = (self.input.shapes.iter())
            .enumerate()
            .filter(|(_, sh)| sh.group < groups.len())
            .filter(|(_, sh)| self.may_grow(&groups[sh.group], &sh.template.node))
            .map(|(i, sh)| {
                (
                    self.pricing.cost(&groups[sh.group], &sh.template.node),
                    i,
                    sh,
                )
            })
            .filter(|(c, _, _)| *c < cost)
            // Cheaper per copy of the workload's mix, not only per node: a smaller shape at
            // the same price per GPU fragments the capacity the workload keeps needing.
            .filter(|(c, _, sh)| {
                let old = set
                    .iter()
                    .filter_map(|m| s.node(m.id).map(|i| (m.cost, &*i.node)));
                self.mix.cheaper_per_copy(old, *c, &sh.template.node)
            })
            // What the new node saves must outweigh the work the set's pods lose.
            .filter(|(c, _, _)| disruption.worth(cost - c))
            .collect();
        // Cheapest first: the first shape that takes the pods saves the most.
        shapes.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for (_, i, shape) in shapes {
            if !work.take(pods) {
                return None;
            }
            if let Some(found) = s.forked(|s| place(s, set, Some((i, shape)))) {
                return Some(found);
            }
        }
        None
    }

    /// Whether the group may get one more node (its max size, the cluster-wide maximums, counted
    /// before the replaced nodes go: the new node comes first).
    fn may_grow(&self, group: &NodeGroup, node: &Node) -> bool {
        if group.target_size() >= group.max_size() || group.options().zero_or_max_scaling() {
            return false;
        }
        (self.input.limits)
            .max_new_nodes(&self.input.totals, node, 1)
            .0
            >= 1
    }

    /// The command for `found`, with its explanation.
    fn command(&self, found: Found, how: &str) -> ConsolidationCommand {
        self.command_after(found, how, None)
    }

    /// [`Self::command`], or, when `came` is the node that came to replace `found`'s nodes (its
    /// group, name and cost), the command draining them once it is Ready: it saves their cost
    /// less the new node's.
    fn command_after(
        &self,
        found: Found,
        how: &str,
        came: Option<(&NodeGroup, Sym, f64)>,
    ) -> ConsolidationCommand {
        let groups = self.input.provider.node_groups();
        let mut saved: f64 = found.nodes.iter().map(|c| c.cost).sum();
        let pods: usize = found.nodes.iter().map(|c| c.to_move.len()).sum();
        let names: Vec<&str> = found.nodes.iter().map(|c| c.name.as_str()).collect();
        let (kind, replaced) = match found.replacement {
            Some(i) => {
                let sh = &self.input.shapes[i];
                let g = &groups[sh.group];
                saved -= self.pricing.cost(g, &sh.template.node);
                (
                    CommandKind::Replace {
                        group_index: sh.group,
                        group: g.id().clone(),
                    },
                    format!(", replaced by one node of {}", g.id()),
                )
            }
            None => match came {
                Some((group, node, cost)) => {
                    saved -= cost;
                    (
                        CommandKind::ReplacementReady,
                        format!(", replaced by node {node} of {}", group.id()),
                    )
                }
                None => (CommandKind::Delete, String::new()),
            },
        };
        let unit = if self.pricing.priced {
            "/h"
        } else {
            " size units"
        };
        let per_pod = if pods == 0 {
            String::new()
        } else {
            format!(", {:.3} per pod disrupted", saved / pods as f64)
        };
        let d = DisruptionCost::sum(found.nodes.iter().map(|c| &c.disruption));
        let lost = if d.restarts == 0 {
            String::new()
        } else {
            format!(
                "; {} pod(s) start over, losing {:.3}{} against {:.3} saved over {:.1}h",
                d.restarts,
                d.lost,
                if self.pricing.priced {
                    ""
                } else {
                    " size-hours"
                },
                saved * d.hours,
                d.hours
            )
        };
        let explanation = format!(
            "{how} consolidation of {} node(s) [{}]{replaced}: {pods} pod(s) fit elsewhere; \
             saves {saved:.3}{unit}{per_pod}{lost}",
            names.len(),
            names.join(", ")
        );
        let deletions = found
            .nodes
            .into_iter()
            .zip(found.destinations)
            .map(|(c, destinations)| NodeDeletion {
                node: c.name,
                group_index: c.group,
                group: groups[c.group].id().clone(),
                empty: c.to_move.is_empty(),
                evict: c.to_move.iter().chain(&c.evict_only).cloned().collect(),
                destinations,
                grace_period_sec: self.input.max_graceful_termination_sec,
                sequential_evictions: false,
            })
            .collect();
        ConsolidationCommand {
            kind,
            deletions,
            saved_per_hour: saved,
            pods_disrupted: pods,
            explanation,
        }
    }
}

/// Places every pod of `set` on the other nodes of `s` (and on a new node of shape `shape`, an
/// index into `shapes`), all or nothing; the caller reverts the fork.
fn place(
    s: &mut ClusterSnapshot,
    set: &[Candidate],
    shape: Option<(usize, &ReplacementShape)>,
) -> Option<Found> {
    let replacement = match shape {
        Some((_, sh)) => {
            let mut node = sh.template.node.clone();
            node.name = Sym::new(&format!("consolidation-replacement-{}", sh.group));
            let id = s.add_node(Arc::new(node)).ok()?;
            for p in &sh.template.daemonset_pods {
                let _ = s.add_pod(p.clone(), id);
            }
            Some(id)
        }
        None => None,
    };
    let leaving: Vec<NodeId> = set.iter().map(|c| c.id).collect();
    // The new node first: the pods that do not fit elsewhere are the reason it exists.
    let mut order: Vec<NodeId> = replacement.into_iter().collect();
    order.extend(
        s.node_ids()
            .filter(|id| !leaving.contains(id) && Some(*id) != replacement),
    );
    let mut start = 0;
    let mut hints = Hints::default();
    let mut destinations = Vec::with_capacity(set.len());
    for c in set {
        let moves = try_remove(s, c.id, &c.to_move, (&order, &mut start), &mut hints).ok()?;
        destinations.push(
            moves
                .into_iter()
                .filter_map(|(p, d)| s.node(d).map(|i| (p, i.node.name)))
                .collect(),
        );
    }
    // A replacement that took none of the pods saves nothing over a plain deletion (which
    // failed), so it cannot be right; refuse it rather than launch an empty node.
    if let (Some(r), Some((_, sh))) = (replacement, shape)
        && s.node(r)
            .is_some_and(|i| i.pods.len() == sh.template.daemonset_pods.len())
    {
        return None;
    }
    Some(Found {
        nodes: set.to_vec(),
        destinations,
        replacement: shape.map(|(i, _)| i),
    })
}

/// Min sizes, minimum limits and PodDisruptionBudgets over the nodes chosen so far in one
/// search.
struct Keep<'a, 'i> {
    input: &'a ConsolidationInput<'i>,
    /// The groups' budgets (none for the nodes of a command decided earlier).
    rules: Option<&'a GroupRules>,
    leaving: Vec<usize>,
    totals: ClusterTotals,
    budgets: DisruptionBudgets,
}

impl<'a, 'i> Keep<'a, 'i> {
    fn new(input: &'a ConsolidationInput<'i>, rules: &'a GroupRules) -> Self {
        Keep::with(input, Some(rules))
    }

    /// Without the groups' budgets: for the nodes of a command that kept to them when decided.
    fn unruled(input: &'a ConsolidationInput<'i>) -> Self {
        Keep::with(input, None)
    }

    fn with(input: &'a ConsolidationInput<'i>, rules: Option<&'a GroupRules>) -> Self {
        Keep {
            input,
            rules,
            leaving: vec![0; input.provider.node_groups().len()],
            totals: input.totals.clone(),
            budgets: input.budgets.clone(),
        }
    }

    /// Counts `c` as leaving if its group stays above its min size, the cluster above its
    /// minimums, and the budgets allow its evictions after those of the nodes chosen before.
    fn admit(&mut self, s: &ClusterSnapshot, c: &Candidate) -> bool {
        let group = &self.input.provider.node_groups()[c.group];
        let in_flight = self.input.in_flight.per_group.get(c.group).copied();
        let leaving = in_flight.unwrap_or(0) + self.leaving[c.group];
        if group.target_size().saturating_sub(leaving) <= group.min_size()
            || self
                .rules
                .is_some_and(|r| !r.has_room(c.group, self.leaving[c.group]))
        {
            return false;
        }
        let Some(info) = s.node(c.id) else {
            return false;
        };
        if self
            .input
            .limits
            .check_removal(&self.totals, &info.node)
            .is_err()
        {
            return false;
        }
        let evicted: Vec<&Pod> = c
            .to_move
            .iter()
            .chain(&c.evict_only)
            .map(|p| &**p)
            .collect();
        if self.budgets.can_evict(&evicted).is_err() {
            return false;
        }
        self.budgets.commit(&evicted);
        self.totals.remove_node(&info.node, 1);
        self.leaving[c.group] += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduling::budget::Unlimited;
    use autoscaler_model::NoControllerLookup;
    use autoscaler_model::PodDisruptionBudget;
    use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};
    use autoscaler_model::{Instance, InstanceState, StaticProvider};
    use autoscaler_model::{LabelSelector, Labels};

    const MIN: i64 = 60_000;

    /// Groups as (id, min, price, nodes as (name, cpu, pods' cpu)); an extra group per
    /// `spare` shape (id, cpu, price) with no node, for replacements.
    struct Cluster {
        snapshot: ClusterSnapshot,
        provider: StaticProvider,
        shapes: Vec<ReplacementShape>,
        pdbs: Vec<PodDisruptionBudget>,
        drain: DrainOptions,
        limits: ResourceLimits,
        nodes: Vec<Arc<Node>>,
        /// The loop's last scale-up for pending pods, as the input gives it.
        last_scale_up_ms: Option<i64>,
        /// Deletions in progress, as the input gives them.
        in_flight: InFlight,
    }

    /// Group `big` (4/h a node) of node `a` (a 1500m pod, room to spare) and node `b` (3800m):
    /// `a`'s pod fits on a smaller node, not on `b`.
    #[allow(clippy::type_complexity)]
    const BIG_A_AND_B: &[(&str, usize, f64, &[(&str, i64, &[i64])])] =
        &[("big", 0, 4.0, &[("a", 4000, &[1500]), ("b", 4000, &[3800])])];

    #[allow(clippy::type_complexity)]
    fn cluster(
        groups: &[(&str, usize, f64, &[(&str, i64, &[i64])])],
        spare: &[(&str, i64, f64)],
    ) -> Cluster {
        cluster_of(groups, spare, |b| b.owner("ReplicaSet", "rs"), |n| n)
    }

    /// [`cluster`] with each pod and node finished by `pod` and `node`.
    #[allow(clippy::type_complexity)]
    fn cluster_of(
        groups: &[(&str, usize, f64, &[(&str, i64, &[i64])])],
        spare: &[(&str, i64, f64)],
        pod: impl Fn(PodBuilder) -> PodBuilder,
        node: impl Fn(NodeBuilder) -> NodeBuilder,
    ) -> Cluster {
        let mut snapshot = ClusterSnapshot::new();
        let mut ngs = Vec::new();
        let mut shapes = Vec::new();
        let mut all = Vec::new();
        for (g, (id, min, price, nodes)) in groups.iter().enumerate() {
            let mut ng = NodeGroup::new(id, *min, 100, nodes.len());
            ng = ng
                .with_node_price_per_hour(Some(*price))
                .expect("a valid price");
            for (name, cpu, pods) in nodes.iter() {
                let n = node(NodeBuilder::new(name, *cpu, 64 * GI))
                    .with_provider_id(&format!("test:///{name}"))
                    .arc();
                ng.push_instance(Instance {
                    id: n.provider_id.clone().unwrap(),
                    state: InstanceState::Running,
                    error: None,
                });
                let nid = snapshot.add_node(n.clone()).unwrap();
                for (i, p) in pods.iter().enumerate() {
                    let pod = pod(PodBuilder::new(&format!("{name}-p{i}"), *p, GI))
                        .label("app", "web")
                        .node_name(name)
                        .arc();
                    snapshot.add_pod(pod, nid).unwrap();
                }
                all.push(n);
            }
            let _ = g;
            ngs.push(ng);
        }
        for (id, cpu, price) in spare {
            let mut ng = NodeGroup::new(id, 0, 100, 0);
            ng = ng
                .with_node_price_per_hour(Some(*price))
                .expect("a valid price");
            shapes.push(ReplacementShape {
                group: ngs.len(),
                template: NodeTemplate {
                    node: NodeBuilder::new(&format!("{id}-template"), *cpu, 64 * GI).build(),
                    daemonset_pods: Vec::new(),
                },
            });
            ngs.push(ng);
        }
        Cluster {
            snapshot,
            provider: StaticProvider::new(ngs),
            shapes,
            pdbs: Vec::new(),
            drain: DrainOptions::default(),
            limits: ResourceLimits::default(),
            nodes: all,
            last_scale_up_ms: None,
            in_flight: InFlight::default(),
        }
    }

    impl Cluster {
        fn plan(
            &mut self,
            state: &mut ConsolidationState,
            opts: &ConsolidationOptions,
            now_ms: i64,
            max_drains: usize,
        ) -> ConsolidationPlan {
            let input = ConsolidationInput {
                provider: &self.provider,
                budgets: DisruptionBudgets::new(self.pdbs.clone()),
                controllers: &NoControllerLookup,
                drain: &self.drain,
                limits: &self.limits,
                totals: ClusterTotals::from_nodes(self.nodes.iter().map(|n| &**n)),
                in_flight: self.in_flight.clone(),
                max_drain_parallelism: max_drains,
                max_scale_down_parallelism: 10,
                max_graceful_termination_sec: 600,
                shapes: &self.shapes,
                hold: false,
                last_scale_up_ms: self.last_scale_up_ms,
            };
            plan_consolidation(
                &mut self.snapshot,
                state,
                input,
                opts,
                now_ms,
                &mut Unlimited,
            )
        }

        /// The replacement node `small-1` of group 1 (`small`) comes, Running and in the snapshot.
        fn replacement_comes(&mut self) {
            let new = NodeBuilder::new("small-1", 2000, 64 * GI)
                .with_provider_id("test:///small-1")
                .arc();
            self.provider.groups_mut()[1].push_instance(Instance {
                id: Arc::from("test:///small-1"),
                state: InstanceState::Running,
                error: None,
            });
            self.provider.groups_mut()[1].set_target_size(1);
            self.provider.reindex();
            self.snapshot.add_node(new).unwrap();
        }

        /// Carries out `cmd`'s deletions as the shell would: each node's pods moved to their
        /// destinations, the node deleted and its group shrunk.
        fn carry_out(&mut self, cmd: &ConsolidationCommand) {
            for d in &cmd.deletions {
                let id = self.snapshot.node_id(d.node).expect("a node to delete");
                for (pod, dest) in &d.destinations {
                    let moved = (self.snapshot)
                        .remove_pod(id, pod.namespace, &pod.name)
                        .expect("the pod is on the node");
                    let to = self.snapshot.node_id(*dest).expect("its destination");
                    self.snapshot.add_pod(moved, to).expect("it fits");
                }
                self.snapshot.remove_node(id).expect("the node goes");
                self.nodes.retain(|n| n.name != d.node);
                let g = &mut self.provider.groups_mut()[d.group_index];
                let target = g.target_size() - 1;
                g.set_target_size(target);
            }
        }

        /// Plans twice: once to start the quiet timers, once past `--consolidate-after`.
        fn settled(&mut self, opts: &ConsolidationOptions, max_drains: usize) -> ConsolidationPlan {
            let mut state = ConsolidationState::default();
            let first = self.plan(&mut state, opts, 0, max_drains);
            assert!(first.command.is_none(), "nothing is quiet at first");
            self.plan(&mut state, opts, MIN, max_drains)
        }
    }

    fn mode(mode: ConsolidationMode) -> ConsolidationOptions {
        ConsolidationOptions {
            mode,
            ..ConsolidationOptions::default()
        }
    }

    fn nodes_of(c: &ConsolidationCommand) -> Vec<&str> {
        c.deletions.iter().map(|d| d.node.as_str()).collect()
    }

    /// Nodes that upstream's threshold would keep (a at 30%, b 30%, c 40%, d 90%) still go
    /// when their pods fit elsewhere: b's and c's pods fit on a and d, taking the nodes that save
    /// the most per pod disrupted first (b and c: one pod each; a has two).
    #[test]
    fn nodes_above_the_threshold_are_consolidated_multi_node_first() {
        let mut c = cluster(
            &[(
                "ng",
                0,
                1.0,
                &[
                    ("a", 1000, &[150, 150]),
                    ("b", 1000, &[300]),
                    ("c", 1000, &[400]),
                    ("d", 1000, &[900]),
                ],
            )],
            &[],
        );
        let plan = c.settled(&mode(ConsolidationMode::Delete), 5);
        let cmd = plan.command.expect("a command");
        assert_eq!(cmd.kind, CommandKind::Delete);
        // b saves 1/h for one pod, a and c less per pod: b first, then c (1 pod), then a.
        assert_eq!(nodes_of(&cmd), ["b", "c"], "{}", cmd.explanation);
        assert!(
            cmd.explanation
                .starts_with("multi-node consolidation of 2 node(s) [b, c]")
        );
        assert_eq!(cmd.pods_disrupted, 2);
        assert!((cmd.saved_per_hour - 2.0).abs() < 1e-9);
        assert_eq!(cmd.deletions[0].destinations.len(), 1);
    }

    #[test]
    fn off_decides_nothing_and_nothing_before_the_pods_are_quiet() {
        let spec: &[(&str, i64, &[i64])] = &[("a", 1000, &[100]), ("b", 1000, &[100])];
        let mut c = cluster(&[("ng", 0, 1.0, spec)], &[]);
        let mut state = ConsolidationState::default();
        let off = ConsolidationOptions::default();
        assert!(c.plan(&mut state, &off, 0, 5).command.is_none());
        assert!(c.plan(&mut state, &off, 10 * MIN, 5).command.is_none());
        let on = mode(ConsolidationMode::Delete);
        assert!(c.plan(&mut state, &on, 10 * MIN, 5).command.is_none());
        assert!(c.plan(&mut state, &on, 11 * MIN - 1, 5).command.is_none());
        let cmd = c.plan(&mut state, &on, 11 * MIN, 5).command;
        assert_eq!(cmd.map(|c| nodes_of(&c).len()), Some(1));
    }

    #[test]
    fn a_node_whose_pods_changed_waits_again() {
        let spec: &[(&str, i64, &[i64])] = &[("a", 1000, &[100]), ("b", 1000, &[600])];
        let mut c = cluster(&[("ng", 0, 1.0, spec)], &[]);
        let mut state = ConsolidationState::default();
        let on = mode(ConsolidationMode::Delete);
        c.plan(&mut state, &on, 0, 5);
        let a = c.snapshot.node_id(Sym::new("a")).unwrap();
        let pod = PodBuilder::new("late", 100, GI)
            .owner("ReplicaSet", "rs")
            .node_name("a")
            .arc();
        c.snapshot.add_pod(pod, a).unwrap();
        let plan = c.plan(&mut state, &on, MIN, 5);
        let cmd = plan.command.expect("b is quiet and its pod fits on a");
        assert_eq!(nodes_of(&cmd), ["b"]);
        assert_eq!(plan.candidates, 1, "a's pods changed a minute ago");
    }

    /// Four nodes of 1 CPU, each with one pod of 100m: any three of them fit on the fourth.
    const FOUR_NODES_OF_ONE_SMALL_POD: &[(&str, i64, &[i64])] = &[
        ("a", 1000, &[100]),
        ("b", 1000, &[100]),
        ("c", 1000, &[100]),
        ("d", 1000, &[100]),
    ];

    /// A drain that never ends holds the drain slot: the nodes waiting their turn are given up
    /// after the provision time (consolidation is not held for good), and kept.
    #[test]
    fn nodes_waiting_for_a_drain_slot_that_never_frees_are_given_up() {
        let spec = FOUR_NODES_OF_ONE_SMALL_POD;
        let mut c = cluster(&[("ng", 0, 1.0, spec)], &[]);
        let opts = mode(ConsolidationMode::Delete);
        let mut state = ConsolidationState::default();
        c.plan(&mut state, &opts, 0, 1);
        let cmd = (c.plan(&mut state, &opts, MIN, 1).command).expect("a command");
        assert_eq!(nodes_of(&cmd), ["a"], "{}", cmd.explanation);
        c.in_flight = InFlight {
            per_group: vec![1],
            empty: 0,
            drains: 1,
        };
        let plan = c.plan(&mut state, &opts, 15 * MIN, 1);
        assert!(plan.gave_up.is_none() && state.waiting_nodes().len() == 2);
        let plan = c.plan(&mut state, &opts, 17 * MIN, 1);
        let why = plan.gave_up.expect("given up");
        assert!(
            why.starts_with("[b, c] waited more than 900s for a drain slot"),
            "{why}"
        );
        assert!(state.waiting_nodes().is_empty() && plan.command.is_none());
    }

    /// Four nodes of one 100m pod each: three can go (the last keeps the pods). With one drain
    /// at a time (`--max-drain-parallelism=1`, upstream's default), the multi-node command is
    /// still decided: the first node is drained now, the others wait their turn, each drained
    /// once the drain before it is over; nothing new starts meanwhile.
    #[test]
    fn a_multi_node_command_is_drained_one_node_at_a_time() {
        let spec = FOUR_NODES_OF_ONE_SMALL_POD;
        let mut wide = cluster(&[("ng", 0, 1.0, spec)], &[]);
        let cmd = (wide.settled(&mode(ConsolidationMode::Delete), 10))
            .command
            .unwrap();
        assert_eq!(
            nodes_of(&cmd),
            ["a", "b", "c"],
            "the last one keeps the pods"
        );
        let mut c = cluster(&[("ng", 0, 1.0, spec)], &[]);
        let opts = mode(ConsolidationMode::Delete);
        let mut state = ConsolidationState::default();
        c.plan(&mut state, &opts, 0, 1);
        let cmd = c
            .plan(&mut state, &opts, MIN, 1)
            .command
            .expect("a command");
        assert_eq!(cmd.kind, CommandKind::Delete);
        assert_eq!(nodes_of(&cmd), ["a"], "{}", cmd.explanation);
        assert!(
            cmd.explanation
                .starts_with("multi-node consolidation of 3 node(s) [a, b, c]"),
            "{}",
            cmd.explanation
        );
        assert!(
            cmd.explanation.ends_with(
                "; drained 1 at a time (--max-drain-parallelism), [b, c] wait their turn"
            ),
            "{}",
            cmd.explanation
        );
        assert_eq!(state.waiting_nodes(), [Sym::new("b"), Sym::new("c")]);
        // While a's drain is in flight, b waits; nothing else is decided.
        c.in_flight = InFlight {
            per_group: vec![1],
            empty: 0,
            drains: 1,
        };
        let plan = c.plan(&mut state, &opts, 2 * MIN, 1);
        assert!(plan.command.is_none() && plan.gave_up.is_none());
        assert_eq!(state.waiting_nodes().len(), 2);
        // a is gone: b's turn, then c's. Each is checked again: its pod lands on d.
        c.in_flight = InFlight::default();
        c.carry_out(&cmd);
        let turn = c.plan(&mut state, &opts, 3 * MIN, 1).command.expect("b");
        assert_eq!(turn.kind, CommandKind::Turn);
        assert_eq!(nodes_of(&turn), ["b"], "{}", turn.explanation);
        assert!(
            turn.explanation.starts_with(
                "turn of a multi-node command, consolidation of 1 node(s) [b]: 1 pod(s) fit \
                 elsewhere"
            ),
            "{}",
            turn.explanation
        );
        assert!(turn.explanation.contains("[c] wait their turn"));
        c.carry_out(&turn);
        let turn = c.plan(&mut state, &opts, 4 * MIN, 1).command.expect("c");
        assert_eq!(nodes_of(&turn), ["c"], "{}", turn.explanation);
        assert_eq!(turn.deletions[0].destinations[0].1, Sym::new("d"));
        assert!(state.waiting_turn.is_none());
        c.carry_out(&turn);
        // The command is over: d keeps the pods.
        let plan = c.plan(&mut state, &opts, 5 * MIN, 1);
        assert!(plan.command.is_none());
    }

    /// A node waiting its turn that something else deletes (this loop's scale-down) leaves the
    /// command, so that it is never drained twice; the command goes on with the others.
    #[test]
    fn a_node_deleted_by_something_else_leaves_the_command() {
        let spec = FOUR_NODES_OF_ONE_SMALL_POD;
        let mut c = cluster(&[("ng", 0, 1.0, spec)], &[]);
        let opts = mode(ConsolidationMode::Delete);
        let mut state = ConsolidationState::default();
        c.plan(&mut state, &opts, 0, 1);
        let cmd = c
            .plan(&mut state, &opts, MIN, 1)
            .command
            .expect("a command");
        c.carry_out(&cmd);
        state.forget(&[Sym::new("b")]);
        assert_eq!(state.waiting_nodes(), [Sym::new("c")]);
        let turn = c.plan(&mut state, &opts, 2 * MIN, 1).command.expect("c");
        assert_eq!(nodes_of(&turn), ["c"], "{}", turn.explanation);
        state.forget(&[Sym::new("c")]);
        assert!(state.waiting_turn.is_none());
    }

    /// A node waiting its turn whose pods no longer fit when its turn comes (the others filled
    /// up meanwhile) is dropped from the command, with why, and never drained; so is one whose
    /// PodDisruptionBudget no longer allows its evictions.
    #[test]
    fn a_node_waiting_its_turn_is_checked_again_and_dropped_if_it_cannot_go() {
        let spec: &[(&str, i64, &[i64])] = &[
            ("a", 1000, &[100]),
            ("b", 1000, &[100]),
            ("c", 1000, &[300]),
        ];
        let opts = mode(ConsolidationMode::Delete);
        let start = |c: &mut Cluster, state: &mut ConsolidationState| {
            c.plan(state, &opts, 0, 1);
            let cmd = c.plan(state, &opts, MIN, 1).command.expect("a command");
            assert_eq!(nodes_of(&cmd), ["a"], "{}", cmd.explanation);
            assert_eq!(state.waiting_nodes(), [Sym::new("b")]);
            c.carry_out(&cmd);
        };
        // c fills up: b's pod fits nowhere now.
        let mut c = cluster(&[("ng", 0, 1.0, spec)], &[]);
        let mut state = ConsolidationState::default();
        start(&mut c, &mut state);
        let cid = c.snapshot.node_id(Sym::new("c")).unwrap();
        let big = PodBuilder::new("late", 600, GI)
            .owner("ReplicaSet", "rs")
            .node_name("c")
            .arc();
        c.snapshot.add_pod(big, cid).unwrap();
        let plan = c.plan(&mut state, &opts, 2 * MIN, 1);
        assert!(plan.command.is_none(), "b is never drained");
        let why = plan.gave_up.expect("why b is kept");
        assert!(
            why.starts_with("dropped from the command, kept: b: its pods no longer fit"),
            "{why}"
        );
        assert!(state.waiting_turn.is_none());
        assert!(state.waiting_nodes().is_empty(), "b loses its taint");
        // A budget that allows no eviction now: b is dropped too.
        let mut c = cluster(&[("ng", 0, 1.0, spec)], &[]);
        let mut state = ConsolidationState::default();
        start(&mut c, &mut state);
        c.pdbs.push(PodDisruptionBudget::new(
            "default",
            "web",
            Some(LabelSelector {
                match_labels: Labels::from_pairs([("app", "web")]),
                match_expressions: Vec::new(),
            }),
            0,
        ));
        let plan = c.plan(&mut state, &opts, 2 * MIN, 1);
        assert!(plan.command.is_none(), "never past a PDB");
        assert!(
            plan.gave_up
                .as_deref()
                .is_some_and(|w| w.contains("b: no longer a candidate")),
            "{:?}",
            plan.gave_up
        );
        assert!(state.waiting_turn.is_none());
    }

    /// Two big nodes (4/h each) whose pods fit on one cheaper node (2.5/h, cheaper per core):
    /// replaced by it with one drain at a time. Once it is Ready, the first is drained (saving
    /// its price less the new node's), the second waits its turn; the new node is not
    /// consolidated meanwhile.
    #[test]
    fn a_multi_node_replacement_drains_its_nodes_one_at_a_time() {
        let spec: &[(&str, i64, &[i64])] = &[
            ("a", 4000, &[1500]),
            ("b", 4000, &[1500]),
            ("c", 4000, &[3500]),
        ];
        let mut c = cluster(&[("big", 0, 4.0, spec)], &[("small", 3000, 2.5)]);
        let opts = mode(ConsolidationMode::Replace);
        let mut state = ConsolidationState::default();
        c.plan(&mut state, &opts, 0, 1);
        let cmd = c.plan(&mut state, &opts, MIN, 1).command.expect("replace");
        assert!(
            matches!(cmd.kind, CommandKind::Replace { group_index: 1, .. }),
            "{}",
            cmd.explanation
        );
        assert_eq!(nodes_of(&cmd), ["a", "b"], "{}", cmd.explanation);
        assert!(
            cmd.explanation.starts_with(
                "multi-node consolidation of 2 node(s) [a, b], replaced by one node of small"
            ),
            "{}",
            cmd.explanation
        );
        assert!(
            cmd.explanation
                .ends_with("; once it is Ready, drained 1 at a time (--max-drain-parallelism)"),
            "{}",
            cmd.explanation
        );
        assert_eq!(state.waiting_nodes(), [Sym::new("a"), Sym::new("b")]);
        // The new node comes (3000m).
        let new = NodeBuilder::new("small-1", 3000, 64 * GI)
            .with_provider_id("test:///small-1")
            .arc();
        c.provider.groups_mut()[1].push_instance(Instance {
            id: Arc::from("test:///small-1"),
            state: InstanceState::Running,
            error: None,
        });
        c.provider.groups_mut()[1].set_target_size(1);
        c.provider.reindex();
        c.snapshot.add_node(new.clone()).unwrap();
        c.nodes.push(new);
        let ready = c.plan(&mut state, &opts, 2 * MIN, 1).command.expect("a");
        assert_eq!(ready.kind, CommandKind::ReplacementReady);
        assert_eq!(nodes_of(&ready), ["a"], "{}", ready.explanation);
        assert!(
            (ready.saved_per_hour - 1.5).abs() < 1e-9,
            "4/h less the new node's 2.5/h: {}",
            ready.explanation
        );
        assert!(ready.explanation.contains("[b] wait their turn"));
        assert_eq!(state.waiting_nodes(), [Sym::new("b")]);
        c.carry_out(&ready);
        let turn = c.plan(&mut state, &opts, 3 * MIN, 1).command.expect("b");
        assert_eq!(turn.kind, CommandKind::Turn);
        assert_eq!(nodes_of(&turn), ["b"], "{}", turn.explanation);
        assert!((turn.saved_per_hour - 4.0).abs() < 1e-9);
        assert!(state.waiting_turn.is_none() && state.pending.is_none());
    }

    #[test]
    fn min_size_and_budgets_gate_it() {
        let spec: &[(&str, i64, &[i64])] = &[("a", 1000, &[100]), ("b", 1000, &[100])];
        let mut c = cluster(&[("ng", 2, 1.0, spec)], &[]);
        assert!(
            c.settled(&mode(ConsolidationMode::Delete), 5)
                .command
                .is_none()
        );
        let mut c = cluster(&[("ng", 0, 1.0, spec)], &[]);
        c.pdbs.push(PodDisruptionBudget::new(
            "default",
            "web",
            Some(LabelSelector {
                match_labels: Labels::from_pairs([("app", "web")]),
                match_expressions: Vec::new(),
            }),
            0,
        ));
        let plan = c.settled(&mode(ConsolidationMode::Delete), 5);
        assert!(plan.command.is_none());
        assert_eq!(plan.candidates, 0, "no budget left: no node may be drained");
    }

    #[test]
    fn replace_swaps_a_big_node_for_a_cheaper_one_that_takes_its_pods() {
        let mut c = cluster(BIG_A_AND_B, &[("small", 2000, 1.0), ("medium", 3000, 2.5)]);
        assert!(
            c.settled(&mode(ConsolidationMode::Delete), 5)
                .command
                .is_none(),
            "a's pod fits nowhere else"
        );
        let mut c = cluster(BIG_A_AND_B, &[("small", 2000, 1.0), ("medium", 3000, 2.5)]);
        let mut state = ConsolidationState::default();
        let opts = mode(ConsolidationMode::Replace);
        c.plan(&mut state, &opts, 0, 5);
        let cmd = c
            .plan(&mut state, &opts, MIN, 5)
            .command
            .expect("replace a");
        assert_eq!(
            cmd.kind,
            CommandKind::Replace {
                group_index: 1,
                group: NodeGroupId::from("small")
            }
        );
        assert_eq!(nodes_of(&cmd), ["a"]);
        assert!(
            (cmd.saved_per_hour - 3.0).abs() < 1e-9,
            "{}",
            cmd.explanation
        );
        let pending = state.pending.clone().expect("waits for the new node");
        assert_eq!(pending.nodes, [Sym::new("a")]);
        // Not Ready yet: nothing is drained; then the node comes and a is drained.
        assert!(c.plan(&mut state, &opts, 2 * MIN, 5).command.is_none());
        c.replacement_comes();
        let cmd = c
            .plan(&mut state, &opts, 3 * MIN, 5)
            .command
            .expect("drain a");
        assert_eq!(cmd.kind, CommandKind::ReplacementReady);
        assert_eq!(nodes_of(&cmd), ["a"]);
        assert_eq!(
            cmd.deletions[0].destinations[0].1,
            Sym::new("small-1"),
            "{}",
            cmd.explanation
        );
        assert!(state.pending.is_none());
    }

    /// With `replace`, a node of a shape dearer per copy of the workload's mix than one on offer
    /// goes before a node of the cheaper shape that saves more per pod: `d` (4000m at 4/h,
    /// 1/h per core) before `c` (6000m at 4.6/h, 0.77/h per core, as the group on offer), so
    /// the capacity left is the cheaper shape's. Ranked by saving per pod alone (and with
    /// `delete`, which has no shape on offer) `c` goes first. One deletion slot: single-node.
    #[test]
    #[allow(clippy::type_complexity)]
    fn with_replace_a_node_of_a_dearer_shape_goes_first() {
        let groups: &[(&str, usize, f64, &[(&str, i64, &[i64])])] = &[
            (
                "cheap",
                0,
                4.6,
                &[("c", 6000, &[1000]), ("e", 6000, &[5500])],
            ),
            ("dear", 0, 4.0, &[("d", 4000, &[1000])]),
        ];
        let one_slot = InFlight {
            per_group: Vec::new(),
            empty: 9,
            drains: 0,
        };
        let mut c = cluster(groups, &[("cheap-too", 6000, 4.6)]);
        c.in_flight = one_slot.clone();
        let cmd = (c.settled(&mode(ConsolidationMode::Replace), 5).command).expect("a command");
        assert_eq!(cmd.kind, CommandKind::Delete, "{}", cmd.explanation);
        assert_eq!(nodes_of(&cmd), ["d"], "{}", cmd.explanation);
        assert!((cmd.saved_per_hour - 4.0).abs() < 1e-9);
        let mut c = cluster(groups, &[("cheap-too", 6000, 4.6)]);
        c.in_flight = one_slot;
        let cmd = (c.settled(&mode(ConsolidationMode::Delete), 5).command).expect("a command");
        assert_eq!(nodes_of(&cmd), ["c"], "{}", cmd.explanation);
    }

    /// With `replace`, the nodes of the group another shape on offer beats per copy are named
    /// for the soft taint (see `Search::dearer_groups`); with `delete`, none.
    #[test]
    #[allow(clippy::type_complexity)]
    fn with_replace_the_nodes_of_a_dearer_shape_are_steered_clear_of() {
        let groups: &[(&str, usize, f64, &[(&str, i64, &[i64])])] = &[
            ("cheap", 0, 4.6, &[("c", 6000, &[1000])]),
            (
                "dear",
                0,
                4.0,
                &[("d", 4000, &[1000]), ("d2", 4000, &[3500])],
            ),
        ];
        let mut c = cluster(groups, &[("cheap-too", 6000, 4.6)]);
        let mut state = ConsolidationState::default();
        let opts = mode(ConsolidationMode::Replace);
        // The first pass judges the groups; the nodes of the dearer one are named from then on.
        assert!(c.plan(&mut state, &opts, 0, 5).attrition.is_empty());
        let plan = c.plan(&mut state, &opts, 1_000, 5);
        let mut named: Vec<&str> = plan.attrition.iter().map(|n| n.as_str()).collect();
        named.sort_unstable();
        assert_eq!(named, ["d", "d2"]);
        // With `delete` no shape is on offer: no group is dearer than one, nothing is named.
        let mut c = cluster(groups, &[("cheap-too", 6000, 4.6)]);
        let mut state = ConsolidationState::default();
        let opts = mode(ConsolidationMode::Delete);
        c.plan(&mut state, &opts, 0, 5);
        assert!(c.plan(&mut state, &opts, 1_000, 5).attrition.is_empty());
    }

    /// A Job's task that started 100 h before the plan that decides (at MIN).
    fn task_of_100_hours(b: PodBuilder) -> PodBuilder {
        b.owner("Job", "tasks").with(|p| {
            p.conditions.push(autoscaler_model::PodCondition {
                type_: Sym::new("Initialized"),
                status: Sym::new("True"),
                reason: None,
                last_transition_ms: Some(MIN - 100 * 60 * MIN),
            })
        })
    }

    /// A Job's task that has run 100 h on a quarter-and-more of a node of 4/h: replacing the
    /// node restarts it, losing 100 h × 0.375 × 4 = 150. A replacement of 3.5/h saves 0.5/h,
    /// 50 over the task's 100 h: the node stays. One of 1/h saves 3/h, 300: it is replaced.
    #[test]
    fn a_long_task_is_restarted_only_for_a_saving_worth_its_lost_work() {
        let nodes: &[(&str, i64, &[i64])] = &[("a", 4000, &[1500]), ("b", 4000, &[3800])];
        let opts = mode(ConsolidationMode::Replace);
        // A little saving (0.5/h) by a shape still cheaper per core than the big one (so that
        // only the lost work stands in the way: see `replacement_judgement`).
        let mut little = cluster_of(
            &[("big", 0, 4.0, nodes)],
            &[("small", 3800, 3.5)],
            task_of_100_hours,
            |n| n,
        );
        assert!(
            little.settled(&opts, 5).command.is_none(),
            "0.5/h does not pay for 100 h of a task"
        );
        let mut big = cluster_of(
            &[("big", 0, 4.0, nodes)],
            &[("small", 2000, 1.0)],
            task_of_100_hours,
            |n| n,
        );
        let cmd = big.settled(&opts, 5).command.expect("3/h does");
        assert_eq!(nodes_of(&cmd), ["a"]);
        assert!(
            cmd.explanation.ends_with(
                "; 1 pod(s) start over, losing 150.000 against 300.000 saved over 100.0h"
            ),
            "{}",
            cmd.explanation
        );
        // The same pods as a service's: nothing is lost, the small saving is taken.
        let mut service = cluster(&[("big", 0, 4.0, nodes)], &[("small", 3800, 3.5)]);
        let cmd = service
            .settled(&opts, 5)
            .command
            .expect("a service resumes");
        assert_eq!(nodes_of(&cmd), ["a"]);
    }

    /// Tasks of a Job that have run 100 h on nodes a (1500m) and b (2000m) of 4/h: deleting a
    /// moves its task to b, losing 100 h × 0.375 × 4 = 150 for 4/h saved. Counted over the
    /// task's 100 h, it is worth it; but pods needed a scale-up 30 minutes ago, so the room the
    /// task takes on b is expected to be bought back in about 30 minutes: 2 saved, a stays.
    #[test]
    fn a_long_task_is_not_restarted_for_room_that_arrivals_will_need() {
        let nodes: &[(&str, i64, &[i64])] = &[("a", 4000, &[1500]), ("b", 4000, &[2000])];
        let opts = mode(ConsolidationMode::Delete);
        let mut c = cluster_of(&[("big", 0, 4.0, nodes)], &[], task_of_100_hours, |n| n);
        c.last_scale_up_ms = Some(MIN - 30 * MIN);
        assert!(
            c.settled(&opts, 5).command.is_none(),
            "the room is needed again within the half hour"
        );
        // The last scale-up 200 h ago (or none): the saving counts over the task's 100 h.
        for last in [Some(MIN - 200 * 60 * MIN), None] {
            c.last_scale_up_ms = last;
            let cmd = c.settled(&opts, 5).command.expect("worth the lost work");
            assert_eq!(nodes_of(&cmd), ["a"], "{last:?}");
            assert!(
                cmd.explanation.ends_with(
                    "; 1 pod(s) start over, losing 150.000 against 400.000 saved over 100.0h"
                ),
                "{}",
                cmd.explanation
            );
        }
    }

    /// Two nodes of one 300m pod each, for the tests of a node's age.
    const TWO_NODES_OF_ONE_POD: &[(&str, i64, &[i64])] =
        &[("a", 1000, &[300]), ("b", 1000, &[300])];

    /// Node `a` was created at 0 (the others have no creation time).
    fn a_came_at_0(n: NodeBuilder) -> NodeBuilder {
        n.with(|n| {
            if n.name.as_str() == "a" {
                n.creation_ms = Some(0);
            }
        })
    }

    /// A node that came less than the horizon ago is left alone though its pods fit elsewhere:
    /// it was bought (or is a replacement) for them, and draining it at once restarts them again.
    #[test]
    fn a_node_that_just_came_is_not_consolidated() {
        let nodes = TWO_NODES_OF_ONE_POD;
        let rs = |b: PodBuilder| b.owner("ReplicaSet", "rs");
        let opts = mode(ConsolidationMode::Delete);
        // Without a creation time, a goes first (names break the tie).
        let cmd = cluster(&[("ng", 0, 1.0, nodes)], &[])
            .settled(&opts, 5)
            .command
            .expect("a goes");
        assert_eq!(nodes_of(&cmd), ["a"]);
        let mut c = cluster_of(&[("ng", 0, 1.0, nodes)], &[], rs, a_came_at_0);
        let cmd = c.settled(&opts, 5).command.expect("b goes");
        assert_eq!(nodes_of(&cmd), ["b"], "{}", cmd.explanation);
        // Past the horizon (10m), a may go.
        let mut c = cluster_of(&[("ng", 0, 1.0, nodes)], &[], rs, a_came_at_0);
        let mut state = ConsolidationState::default();
        c.plan(&mut state, &opts, 10 * MIN, 5);
        let cmd = c
            .plan(&mut state, &opts, 11 * MIN, 5)
            .command
            .expect("a goes");
        assert_eq!(nodes_of(&cmd), ["a"]);
    }

    /// `--consolidation-horizon`: a node that came a minute ago is kept under the default
    /// horizon (10m), and consolidated first (names break the tie) under one of 30s.
    #[test]
    fn a_short_horizon_lets_a_young_node_go() {
        let nodes = TWO_NODES_OF_ONE_POD;
        let rs = |b: PodBuilder| b.owner("ReplicaSet", "rs");
        let default = mode(ConsolidationMode::Delete);
        let mut c = cluster_of(&[("ng", 0, 1.0, nodes)], &[], rs, a_came_at_0);
        let cmd = c.settled(&default, 1).command.expect("b goes");
        assert_eq!(nodes_of(&cmd), ["b"], "{}", cmd.explanation);
        let mut short = mode(ConsolidationMode::Delete);
        short
            .set_horizon(Duration::from_secs(30))
            .expect("a positive horizon");
        let mut c = cluster_of(&[("ng", 0, 1.0, nodes)], &[], rs, a_came_at_0);
        let cmd = c.settled(&short, 1).command.expect("a goes");
        assert_eq!(nodes_of(&cmd), ["a"], "{}", cmd.explanation);
    }

    /// Of two nodes that save as much for as many pods, the one whose pods are cheaper to
    /// disrupt goes first: a higher priority or `pod-deletion-cost` makes a pod dearer (as
    /// Karpenter's eviction cost); a malformed annotation counts as none (names break the tie).
    #[test]
    fn the_node_whose_pods_are_cheaper_to_disrupt_goes_first() {
        /// The node consolidated first, with `on_a` applied to the pod of node a.
        fn first(on_a: &dyn Fn(&mut Pod)) -> String {
            let nodes: &[(&str, i64, &[i64])] = &[("a", 1000, &[300]), ("b", 1000, &[300])];
            let pod = |b: PodBuilder| {
                b.owner("ReplicaSet", "rs").with(|p| {
                    if p.name.starts_with("a-") {
                        on_a(p);
                    }
                })
            };
            let mut c = cluster_of(&[("ng", 0, 1.0, nodes)], &[], pod, |n| n);
            let cmd = c
                .settled(&mode(ConsolidationMode::Delete), 1)
                .command
                .expect("one node goes");
            nodes_of(&cmd)[0].to_string()
        }
        let cost = |v: &'static str| {
            move |p: &mut Pod| {
                (p.annotations).push((
                    Arc::from("controller.kubernetes.io/pod-deletion-cost"),
                    Arc::from(v),
                ))
            }
        };
        assert_eq!(first(&|_| {}), "a", "equal: by name");
        assert_eq!(first(&|p| p.priority = 1000), "b", "a's pod has priority");
        assert_eq!(first(&|p| p.priority = -1000), "a");
        assert_eq!(first(&cost("100")), "b", "a's pod costs more");
        assert_eq!(first(&cost("-100")), "a");
        for bad in ["+100", "008", "1e3", "abc", "", "2147483648"] {
            assert_eq!(first(&cost(bad)), "a", "{bad:?} is ignored");
        }
    }

    /// Once the replacement is Ready, the nodes it replaces are drained; what that saves is
    /// their price less the new node's (4/h − 1/h), not their whole price.
    #[test]
    fn a_ready_replacement_says_what_the_swap_saves() {
        let mut c = cluster(BIG_A_AND_B, &[("small", 2000, 1.0)]);
        let mut state = ConsolidationState::default();
        let opts = mode(ConsolidationMode::Replace);
        c.plan(&mut state, &opts, 0, 5);
        let asked = c
            .plan(&mut state, &opts, MIN, 5)
            .command
            .expect("replace a");
        assert!((asked.saved_per_hour - 3.0).abs() < 1e-9);
        c.replacement_comes();
        let cmd = c
            .plan(&mut state, &opts, 2 * MIN, 5)
            .command
            .expect("drain a");
        assert_eq!(cmd.kind, CommandKind::ReplacementReady);
        assert!(
            (cmd.saved_per_hour - 3.0).abs() < 1e-9,
            "{}",
            cmd.explanation
        );
        assert_eq!(
            cmd.explanation,
            format!(
                "replacement Ready, consolidation of 1 node(s) [a], replaced by node small-1 \
                 of small: 1 pod(s) fit elsewhere; saves 3.000/h, 3.000 per pod disrupted; \
                 decided as: {}",
                asked.explanation
            )
        );
    }

    #[test]
    fn a_replacement_that_never_comes_is_given_up() {
        let mut c = cluster(BIG_A_AND_B, &[("small", 2000, 1.0)]);
        let mut state = ConsolidationState::default();
        let opts = mode(ConsolidationMode::Replace);
        c.plan(&mut state, &opts, 0, 5);
        assert!(c.plan(&mut state, &opts, MIN, 5).command.is_some());
        let plan = c.plan(&mut state, &opts, MIN + 15 * MIN - 1, 5);
        assert!(plan.command.is_none() && plan.gave_up.is_none());
        let plan = c.plan(&mut state, &opts, MIN + 15 * MIN, 5);
        assert!(plan.command.is_none());
        assert!(plan.gave_up.unwrap().contains("not Ready after 900s"));
        assert!(state.pending.is_none());
    }

    #[test]
    fn a_replacement_must_cost_less() {
        let mut c = cluster(BIG_A_AND_B, &[("pricey", 2000, 4.0)]);
        assert!(
            c.settled(&mode(ConsolidationMode::Replace), 5)
                .command
                .is_none()
        );
    }

    #[test]
    fn the_work_bound_stops_the_search() {
        let spec: &[(&str, i64, &[i64])] = &[("a", 1000, &[100]), ("b", 1000, &[100])];
        let mut c = cluster(&[("ng", 0, 1.0, spec)], &[]);
        let opts = ConsolidationOptions {
            max_pods_simulated: 0,
            ..mode(ConsolidationMode::Delete)
        };
        let plan = c.settled(&opts, 5);
        assert!(plan.command.is_none());
        assert_eq!(plan.pods_simulated, 0);
        let mut c = cluster(&[("ng", 0, 1.0, spec)], &[]);
        let plan = c.settled(&mode(ConsolidationMode::Delete), 5);
        assert!(plan.pods_simulated >= 1);
    }

    #[test]
    fn empty_quiet_nodes_go_together() {
        let spec: &[(&str, i64, &[i64])] =
            &[("a", 1000, &[]), ("b", 1000, &[]), ("c", 1000, &[700])];
        let mut c = cluster(&[("ng", 0, 1.0, spec)], &[]);
        let cmd = c
            .settled(&mode(ConsolidationMode::Delete), 1)
            .command
            .unwrap();
        assert_eq!(nodes_of(&cmd), ["a", "b"]);
        assert!(cmd.deletions.iter().all(|d| d.empty));
    }

    #[test]
    fn the_snapshot_is_left_as_found() {
        let spec: &[(&str, i64, &[i64])] = &[("a", 1000, &[100]), ("b", 1000, &[100])];
        let mut c = cluster(&[("big", 0, 4.0, spec)], &[("small", 500, 1.0)]);
        let before = (c.snapshot.len(), c.snapshot.pod_count());
        c.settled(&mode(ConsolidationMode::Replace), 5);
        assert_eq!((c.snapshot.len(), c.snapshot.pod_count()), before);
    }

    /// An 8-GPU node holding one 1-GPU pod while the other is full: a 2-GPU node at the same
    /// price per GPU is cheaper per node but not per GPU, the resource the pods need; replacing
    /// by it would leave no room for the GPU pods to come (issue 38: the GPU replay's
    /// fragmentation). A 2-GPU node cheaper per GPU still replaces it.
    #[test]
    fn a_smaller_shape_at_the_same_price_per_gpu_does_not_replace() {
        let gpu = ResourceName::parse("nvidia.com/gpu");
        let run = |small_price: f64| {
            let spec: &[(&str, i64, &[i64])] =
                &[("a", 96_000, &[8_000]), ("b", 96_000, &[8_000; 8])];
            let mut c = cluster_of(
                &[("gpu-8x", 0, 24.0, spec)],
                &[("gpu-2x", 104_000, small_price)],
                |p| p.owner("ReplicaSet", "rs").resource("nvidia.com/gpu", 1),
                |n| n.resource("nvidia.com/gpu", 8),
            );
            c.shapes[0].template.node.allocatable.set(gpu, 2);
            c.settled(&mode(ConsolidationMode::Replace), 5).command
        };
        assert!(run(6.0).is_none(), "3/h per GPU either way: kept");
        let cmd = run(5.0).expect("2.5/h per GPU: replaced");
        assert_eq!(nodes_of(&cmd), ["a"]);
        assert!(matches!(
            cmd.kind,
            CommandKind::Replace { group_index: 1, .. }
        ));
    }

    /// A scale-up within the horizon after one of our deletions: pods arrive faster than the
    /// room left them, so a drain now would be followed by another scale-up (short tasks'
    /// ping-pong). Nothing starts within the horizon after that scale-up; a scale-up that
    /// follows no deletion of ours (a load growing) holds nothing.
    #[test]
    fn nothing_is_consolidated_within_the_horizon_after_a_scale_up_that_followed_a_deletion() {
        let spec: &[(&str, i64, &[i64])] = &[("a", 1000, &[100]), ("b", 1000, &[100])];
        let mut c = cluster(&[("ng", 0, 1.0, spec)], &[]);
        let opts = mode(ConsolidationMode::Delete);
        let horizon = ms(opts.horizon);
        let mut state = ConsolidationState::default();
        c.plan(&mut state, &opts, 0, 5);
        // A scale-up before any deletion of ours: no hold.
        c.last_scale_up_ms = Some(MIN / 2);
        let first = c.plan(&mut state, &opts, MIN, 5).command;
        assert_eq!(
            nodes_of(&first.expect("a growing load holds nothing")).len(),
            1
        );
        // Then a scale-up 10 s after that deletion: held for the horizon after it.
        let up = MIN + 10_000;
        c.last_scale_up_ms = Some(up);
        assert!(c.plan(&mut state, &opts, 2 * MIN, 5).command.is_none());
        assert!(
            (c.plan(&mut state, &opts, up + horizon - 1, 5).command).is_none(),
            "still within the horizon"
        );
        let cmd = c.plan(&mut state, &opts, up + horizon, 5).command;
        assert_eq!(nodes_of(&cmd.expect("after the horizon")).len(), 1);
    }

    #[test]
    fn modes_parse_and_print() {
        for m in ["off", "delete", "replace"] {
            assert_eq!(m.parse::<ConsolidationMode>().unwrap().to_string(), m);
        }
        assert!("on".parse::<ConsolidationMode>().is_err());
    }
}

//! Scale-up: from the pods that fit nowhere, decide which node groups grow and by how much, and
//! explain, per group, why every other pod causes no scale-up.
//!
//! One decision runs in rounds. In each round every group that may grow (not blocked by backoff
//! or health, below its max, inside the cluster-wide limits, with a template) gets a bin-packing
//! estimate for the remaining pods; the expander chain picks one option; with
//! `--balance-similar-node-groups` its nodes are split over similar groups on which every pod of
//! the option fits (seed 001), each share checked again against the cluster-wide limits; the
//! groups given nodes grow and the option's pods count as helped. The next
//! round considers the pods no earlier option helped, with the groups not yet grown, so one loop
//! can serve pods that need different kinds of nodes (upstream serves one option per loop and
//! leaves the rest for later loops).
//!
//! It must never propose a size above a group's max, a change that crosses a cluster-wide limit,
//! or more than `--max-nodes-per-scaleup` nodes in one decision; it only reads the snapshot
//! (estimates fork and revert it).

pub mod balance;
mod balancing_options;
pub mod estimator;
pub mod expander;
mod options;
pub mod pending;
mod pending_options;
pub mod reasons;
pub mod template;
mod template_options;

use std::sync::Arc;

use rand_chacha::ChaCha8Rng;

use crate::scale_up::balance::{BalanceTarget, BalancingOptions, GroupShape, find_similar, split};
use crate::scale_up::estimator::{
    Estimate, EstimatorLimits, LimitHit, PendingPods, estimate, estimate_pending,
};
use crate::scale_up::expander::{ExpanderChain, ExpanderContext, ExpanderName, ExpansionOption};
use crate::scale_up::reasons::{GroupReasons, Verdicts};
use crate::scale_up::template::{GroupTemplate, NoTemplate};
use crate::scheduling::budget::Budget;
use crate::scheduling::snapshot::ClusterSnapshot;
use autoscaler_model::Pod;
use autoscaler_model::Resources;
use autoscaler_model::{ClusterTotals, ResourceLimits};
use autoscaler_model::{NodeGroup, NodeGroupId};
use autoscaler_model::{claimed_dra_gpus, template_dra_gpus};

/// Options of scale-up. Other crates read and set the fields through accessors and validated
/// setters (`options`).
#[derive(Clone, Debug)]
pub struct ScaleUpOptions {
    /// `--max-nodes-per-scaleup` (1000).
    pub(crate) max_nodes_per_scale_up: usize,
    /// `--balance-similar-node-groups` (false).
    pub(crate) balance_similar_node_groups: bool,
    /// Similarity options for balancing.
    pub(crate) balancing: BalancingOptions,
    /// `--enforce-node-group-min-size` (false): grow groups below their min size.
    pub(crate) enforce_node_group_min_size: bool,
}

impl Default for ScaleUpOptions {
    fn default() -> Self {
        ScaleUpOptions {
            max_nodes_per_scale_up: 1000,
            balance_similar_node_groups: false,
            balancing: BalancingOptions::default(),
            enforce_node_group_min_size: false,
        }
    }
}

/// One group as scale-up sees it.
#[derive(Clone, Debug)]
pub struct GroupInput<'a> {
    /// The group.
    pub group: &'a NodeGroup,
    /// Its template, or why it has none.
    pub template: Result<GroupTemplate, NoTemplate>,
    /// Why the group must not grow now (backoff, unhealthy), as shown to users; `None` if free.
    pub blocked: Option<String>,
}

/// What scale-up needs besides the snapshot.
#[derive(Debug)]
pub struct ScaleUpInput<'a> {
    /// All node groups.
    pub groups: Vec<GroupInput<'a>>,
    /// Pods that fit on no existing or upcoming node (see [`crate::scale_up::pending`]).
    pub pods: Vec<Arc<Pod>>,
    /// Cluster-wide limits.
    pub limits: &'a ResourceLimits,
    /// Current totals, upcoming nodes included.
    pub totals: ClusterTotals,
    /// The expander chain.
    pub expander: &'a ExpanderChain,
}

/// Why a group grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncreaseReason {
    /// For pending pods.
    PendingPods,
    /// Balanced into this group from a similar group's option.
    Balancing,
    /// `--enforce-node-group-min-size`.
    MinSize,
}

/// One group's increase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupIncrease {
    /// Index into the input groups.
    pub index: usize,
    /// Group id.
    pub group: NodeGroupId,
    /// Nodes to add.
    pub delta: usize,
    /// Target size after the increase.
    pub new_target: usize,
    /// Why.
    pub reason: IncreaseReason,
}

/// A pod that causes no scale-up, with the reason each group gave.
#[derive(Clone, Debug)]
pub struct NoScaleUp {
    /// The pod.
    pub pod: Arc<Pod>,
    /// Per group id, why that group would not help (e.g. `Insufficient cpu`,
    /// `max node group size reached`, `in backoff after failed scale-up`).
    pub reasons: GroupReasons,
}

/// The decision.
#[derive(Clone, Debug, Default)]
pub struct ScaleUpResult {
    /// Increases, at most one per group.
    pub increases: Vec<GroupIncrease>,
    /// Pods the increases are for.
    pub triggered: Vec<Arc<Pod>>,
    /// Pods no group helps, with reasons.
    pub no_scale_up: Vec<NoScaleUp>,
    /// Things an operator should know (expander warnings, capped sizes), in order.
    pub notes: Vec<String>,
    /// Every option the expander chose among, round by round (`plan` shows each one's price).
    pub considered: Vec<ConsideredOption>,
}

/// One option the expander was offered.
#[derive(Clone, Debug, PartialEq)]
pub struct ConsideredOption {
    /// The round of the decision (0 first; one option is chosen per round).
    pub round: usize,
    /// The group it grows.
    pub group: NodeGroupId,
    /// Nodes it adds.
    pub node_count: usize,
    /// Pods it lets schedule.
    pub pods: usize,
    /// Price of one of its nodes per hour, if known.
    pub node_price_per_hour: Option<f64>,
    /// Whether the expander chose it.
    pub chosen: bool,
}

impl ScaleUpResult {
    /// Total nodes added.
    pub fn total_nodes(&self) -> usize {
        self.increases.iter().map(|i| i.delta).sum()
    }
}

/// Reason recorded for a pod left pending by a group already grown in this decision, when the
/// group gave no other reason for it.
const ALREADY_GROWN: &str = "node group already scaled up in this decision";

/// Whether a pod of a round fits a fresh node of a group, as its estimate found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fit {
    /// Placed on one of the estimate's new nodes.
    Yes,
    /// Refused by a fresh template node.
    No,
    /// Not tried: the estimate was cut short by a limit.
    Unknown,
}

/// The estimate of one group in one round.
struct GroupEstimate {
    /// Per pod of the round (index into the round's pod list), whether it fits the group.
    fits: Vec<Fit>,
}

/// The option the expander chose, for the search of similar groups.
struct Chosen<'c> {
    /// Index of its group.
    group: usize,
    /// Its pods, as indices into `round_pods`.
    pods: &'c [usize],
    /// The pods of the round.
    round_pods: &'c [Arc<Pod>],
}

/// Decides the scale-up. `budget` bounds the time spent in bin-packing across all estimates.
pub fn scale_up(
    snapshot: &mut ClusterSnapshot,
    mut input: ScaleUpInput<'_>,
    opts: &ScaleUpOptions,
    rng: &mut ChaCha8Rng,
    budget: &mut dyn Budget,
) -> ScaleUpResult {
    let pods = std::mem::take(&mut input.pods);
    let mut d = Decision {
        grown: vec![false; input.groups.len()],
        reasons: Verdicts::new(
            input.groups.iter().map(|g| g.group.id().clone()).collect(),
            pods.len(),
        ),
        remaining: (0..pods.len()).collect(),
        gathered: PendingPods::new(pods),
        input,
        opts,
        added_total: 0,
        result: ScaleUpResult::default(),
    };
    if opts.enforce_node_group_min_size {
        d.grow_to_min_sizes();
    }
    while !d.remaining.is_empty() {
        let round = d.estimate_round(snapshot, budget);
        let context = ExpanderContext {
            cluster_nodes: Some(d.input.totals.nodes),
        };
        let Some(choice) = d.input.expander.choose_in(&round.options, &context, rng) else {
            break;
        };
        d.result
            .notes
            .extend(choice.warnings.iter().map(ToString::to_string));
        d.record_options(&round.options, choice.index);
        d.grow_for(snapshot, &round, choice.index, budget);
    }
    d.finish()
}

/// One decision in progress.
struct Decision<'a, 'o> {
    input: ScaleUpInput<'a>,
    opts: &'o ScaleUpOptions,
    result: ScaleUpResult,
    /// Per group: grown in this decision (then not again).
    grown: Vec<bool>,
    /// Nodes added so far (`--max-nodes-per-scaleup` bounds them).
    added_total: usize,
    /// Per group and input pod: why the group would not help the pod.
    reasons: Verdicts,
    /// Input pods no option helped yet.
    remaining: Vec<usize>,
    /// The input pods (moved out of `input`, whose `pods` is left empty) as the estimator reads
    /// them, gathered once; each round takes its remaining ones from here.
    gathered: PendingPods<'static>,
}

/// One round's estimates and the options they give the expander.
struct Round {
    /// The pods of the round (the remaining ones), gathered once for every group's estimate.
    pending: PendingPods<'static>,
    /// Per group: its estimate, if it had one.
    estimates: Vec<Option<GroupEstimate>>,
    options: Vec<ExpansionOption>,
    /// Per option: its group.
    option_group: Vec<usize>,
}

/// What bounds a group's estimate in a round.
struct Bound<'t> {
    template: &'t GroupTemplate,
    atomic: bool,
    /// Nodes below the group's max.
    headroom: usize,
    /// New nodes allowed (max size, per-scale-up budget, cluster-wide limits).
    cap: usize,
    /// Why pods beyond the cap are skipped: the tightest of the three bounds.
    cap_reason: String,
}

impl Decision<'_, '_> {
    /// The snapshot to read the pods' DRA GPU claims from, only when an expander prices them
    /// (`unit-price`): the count hashes every placed pod's claim spec, work no other expander
    /// needs.
    fn dra_priced<'s>(&self, snapshot: &'s ClusterSnapshot) -> Option<&'s ClusterSnapshot> {
        (self.input.expander.expanders())
            .contains(&ExpanderName::UnitPrice)
            .then_some(snapshot)
    }

    /// `--enforce-node-group-min-size`: grows free groups below their min size, within the
    /// max, the per-scale-up budget and the cluster-wide limits.
    fn grow_to_min_sizes(&mut self) {
        for i in 0..self.input.groups.len() {
            let g = &self.input.groups[i];
            let group = g.group;
            if group.target_size() >= group.min_size() || g.blocked.is_some() {
                continue;
            }
            let Ok(t) = &g.template else { continue };
            let missing = group.min_size() - group.target_size();
            // Never above the max (a min above the max is bad data), nor beyond the
            // per-scale-up budget.
            let headroom = group.max_size().saturating_sub(group.target_size());
            let per_scale_up_left = self.per_scale_up_left();
            let wanted = missing.min(headroom).min(per_scale_up_left);
            let notes = &mut self.result.notes;
            if wanted < missing {
                let why = if wanted == headroom {
                    "max node group size reached"
                } else {
                    "max nodes per scale-up reached"
                };
                notes.push(format!("{}: growing to min size capped: {why}", group.id()));
            }
            let node = &t.template.node;
            let (n, why) = self
                .input
                .limits
                .max_new_nodes(&self.input.totals, node, wanted);
            if let Some(why) = why {
                notes.push(format!("{}: growing to min size capped: {why}", group.id()));
            }
            if n > 0 {
                self.grow(i, n, IncreaseReason::MinSize);
            }
        }
    }

    fn per_scale_up_left(&self) -> usize {
        self.opts
            .max_nodes_per_scale_up
            .saturating_sub(self.added_total)
    }

    /// Grows group `gi` by `delta` nodes.
    fn grow(&mut self, gi: usize, delta: usize, reason: IncreaseReason) {
        let g = &self.input.groups[gi];
        let Ok(t) = &g.template else { return };
        self.grown[gi] = true;
        self.input.totals.add_node(&t.template.node, delta);
        self.added_total += delta;
        self.result.increases.push(GroupIncrease {
            index: gi,
            group: g.group.id().clone(),
            delta,
            new_target: g.group.target_size() + delta,
            reason,
        });
    }

    /// Every group that may grow estimates the remaining pods; the others say why not.
    fn estimate_round(&mut self, snapshot: &mut ClusterSnapshot, budget: &mut dyn Budget) -> Round {
        let mut round = Round {
            pending: self.gathered.subset(&self.remaining),
            estimates: Vec::with_capacity(self.input.groups.len()),
            options: Vec::new(),
            option_group: Vec::new(),
        };
        for gi in 0..self.input.groups.len() {
            let estimate = self.estimate_group(snapshot, gi, &mut round, budget);
            round.estimates.push(estimate);
        }
        round
    }

    /// Group `gi`'s estimate for the round's pods, adding its option to the round when it
    /// needs nodes; `None` when it may not grow.
    fn estimate_group(
        &mut self,
        snapshot: &mut ClusterSnapshot,
        gi: usize,
        round: &mut Round,
        budget: &mut dyn Budget,
    ) -> Option<GroupEstimate> {
        let g = &self.input.groups[gi];
        if self.grown[gi] {
            // A pod left over keeps what this group said in an earlier round; one it never
            // judged (grown to its min size, or balanced into) still gets a reason.
            let grown = self.reasons.text(ALREADY_GROWN);
            for &p in &self.remaining {
                self.reasons.set_if_absent(gi, p, grown);
            }
            return None;
        }
        let refused = self.bound(g).and_then(|b| {
            let limits = EstimatorLimits {
                max_nodes: Some(b.cap),
                budget: || budget.exhausted(),
            };
            let est = estimate_pending(snapshot, &mut round.pending, &b.template.template, limits);
            est.map(|e| (b, e)).map_err(|e| e.to_string())
        });
        let (b, est) = match refused {
            Ok(found) => found,
            Err(why) => {
                let why = self.reasons.text(&why);
                for &p in &self.remaining {
                    self.reasons.set(gi, p, why);
                }
                return None;
            }
        };
        if est.node_count > 0 {
            round.options.push(option(
                g.group,
                &b,
                &est,
                round.pending.pods(),
                self.dra_priced(snapshot),
            ));
            round.option_group.push(gi);
        }
        Some(self.record_estimate(gi, &est, b.cap_reason, round.pending.pods().len()))
    }

    /// The group's bounds in this round, or why it may not grow at all.
    fn bound<'g>(&self, g: &'g GroupInput<'_>) -> Result<Bound<'g>, String> {
        let group = g.group;
        if let Some(why) = &g.blocked {
            return Err(why.clone());
        }
        let template = g.template.as_ref().map_err(ToString::to_string)?;
        let atomic = group.options().zero_or_max_scaling();
        if atomic && group.target_size() > 0 {
            return Err("atomic node group already scaled up".into());
        }
        let headroom = group.max_size().saturating_sub(group.target_size());
        if headroom == 0 {
            return Err("max node group size reached".into());
        }
        let wanted = headroom.min(self.per_scale_up_left());
        if wanted == 0 {
            return Err("max nodes per scale-up reached".into());
        }
        let node = &template.template.node;
        let (cap, limit_why) = self
            .input
            .limits
            .max_new_nodes(&self.input.totals, node, wanted);
        if cap == 0 || (atomic && cap < headroom) {
            return Err(limit_why.map_or_else(
                || "max nodes per scale-up reached".into(),
                |w| w.to_string(),
            ));
        }
        let cap_reason = match limit_why {
            Some(w) => w.to_string(),
            None if cap == headroom => "max node group size reached".into(),
            None => "max nodes per scale-up reached".into(),
        };
        Ok(Bound {
            template,
            atomic,
            headroom,
            cap,
            cap_reason,
        })
    }

    /// Records why the estimate left pods out, and which of the round's pods fit the group.
    fn record_estimate(
        &mut self,
        gi: usize,
        est: &Estimate,
        cap_reason: String,
        round_len: usize,
    ) -> GroupEstimate {
        let mut fits = vec![Fit::Unknown; round_len];
        for (p, unfit) in &est.unplaced {
            let why = self.reasons.unfit(unfit);
            self.reasons.set(gi, self.remaining[*p], why);
            if let Some(f) = fits.get_mut(*p) {
                *f = Fit::No;
            }
        }
        let skipped_why = match est.limit_hit {
            Some(LimitHit::TimeBudget) => self.reasons.text("bin-packing time budget exhausted"),
            _ => self.reasons.text(&cap_reason),
        };
        for &p in &est.skipped {
            self.reasons.set(gi, self.remaining[p], skipped_why);
        }
        for p in placed(est) {
            if let Some(f) = fits.get_mut(p) {
                *f = Fit::Yes;
            }
        }
        GroupEstimate { fits }
    }

    /// Grows the group of the chosen option, and with balancing its similar groups, then
    /// takes the option's pods off the remaining ones.
    fn grow_for(
        &mut self,
        snapshot: &mut ClusterSnapshot,
        round: &Round,
        choice: usize,
        budget: &mut dyn Budget,
    ) {
        let chosen = &round.options[choice];
        let chosen_group = round.option_group[choice];
        let members = self.members(snapshot, round, chosen_group, &chosen.pods, budget);
        let targets: Vec<BalanceTarget> = members
            .iter()
            .map(|&gi| {
                let g = self.input.groups[gi].group;
                BalanceTarget {
                    current: g.target_size(),
                    max: g.max_size(),
                }
            })
            .collect();
        let split = split(&targets, chosen.node_count);
        let deltas = within_limits(
            &self.input,
            &members,
            &split.per_group,
            &mut self.result.notes,
        );
        for (&gi, &delta) in members.iter().zip(&deltas) {
            // A group given nothing stays free for later rounds.
            if delta == 0 {
                continue;
            }
            let reason = if gi == chosen_group {
                IncreaseReason::PendingPods
            } else {
                IncreaseReason::Balancing
            };
            self.grow(gi, delta, reason);
        }
        if members.len() > 1 {
            let names: Vec<String> = members
                .iter()
                .map(|&gi| self.input.groups[gi].group.id().to_string())
                .collect();
            self.result.notes.push(format!(
                "balanced {} new nodes over similar groups {}",
                chosen.node_count,
                names.join(", ")
            ));
        }
        self.take_helped(&chosen.pods);
    }

    /// Groups that share the option: its own, and with balancing the similar groups on which
    /// every pod of the option fits.
    fn members(
        &self,
        snapshot: &mut ClusterSnapshot,
        round: &Round,
        chosen_group: usize,
        pods: &[usize],
        budget: &mut dyn Budget,
    ) -> Vec<usize> {
        let mut members = vec![chosen_group];
        let atomic = self.input.groups[chosen_group]
            .group
            .options()
            .zero_or_max_scaling();
        if self.opts.balance_similar_node_groups && !atomic {
            let chosen = Chosen {
                group: chosen_group,
                pods,
                round_pods: round.pending.pods(),
            };
            members.extend(similar_members(
                snapshot,
                &self.input,
                &round.estimates,
                chosen,
                &self.opts.balancing,
                &self.grown,
                budget,
            ));
        }
        members
    }

    /// The round's pods at `helped` (indices into the round) are triggered; the others remain.
    fn take_helped(&mut self, helped: &[usize]) {
        let mut h = vec![false; self.remaining.len()];
        for &p in helped {
            h[p] = true;
        }
        let mut next = Vec::with_capacity(self.remaining.len());
        for (k, &p) in self.remaining.iter().enumerate() {
            if h[k] {
                self.result.triggered.push(self.gathered.pods()[p].clone());
            } else {
                next.push(p);
            }
        }
        self.remaining = next;
    }

    /// The result, with a reason per group for every pod no option helped.
    /// Keeps the options of one round for the operator to see.
    fn record_options(&mut self, options: &[ExpansionOption], chosen: usize) {
        let round = self.result.considered.last().map_or(0, |c| c.round + 1);
        self.result
            .considered
            .extend(options.iter().enumerate().map(|(i, o)| ConsideredOption {
                round,
                group: o.group.clone(),
                node_count: o.node_count,
                pods: o.pods.len(),
                node_price_per_hour: o.node_price_per_hour,
                chosen: i == chosen,
            }));
    }

    fn finish(mut self) -> ScaleUpResult {
        let reasons = self.reasons.finish(&self.remaining);
        for (&p, reasons) in self.remaining.iter().zip(reasons) {
            self.result.no_scale_up.push(NoScaleUp {
                pod: self.gathered.pods()[p].clone(),
                reasons,
            });
        }
        self.result
    }
}

/// Indices (into the round) of the pods the estimate placed on new nodes, in opening order.
fn placed(est: &Estimate) -> impl Iterator<Item = usize> + '_ {
    est.new_nodes.iter().flat_map(|n| n.pods.iter().copied())
}

/// The expander's option for a group whose estimate needs nodes.
fn option(
    group: &NodeGroup,
    b: &Bound<'_>,
    est: &Estimate,
    pods: &[Arc<Pod>],
    dra_priced: Option<&ClusterSnapshot>,
) -> ExpansionOption {
    let placed: Vec<usize> = placed(est).collect();
    let mut requests = Resources::default();
    for &p in &placed {
        requests.add(&pods[p].requests);
    }
    let node = &b.template.template.node;
    let pods_dra_gpus = dra_priced.map_or(0, |s| {
        claimed_dra_gpus(placed.iter().map(|&p| &*pods[p]), s.storage().dra(), node)
    });
    ExpansionOption {
        group: group.id().clone(),
        // An atomic group jumps straight to its max.
        node_count: if b.atomic { b.headroom } else { est.node_count },
        pods: placed,
        pods_requests: requests,
        node_allocatable: node.allocatable.clone(),
        node_dra_gpus: template_dra_gpus(node)
            .iter()
            .fold(0, |a, (_, n)| a.saturating_add(*n)),
        pods_dra_gpus,
        node_price_per_hour: group.node_price_per_hour(),
    }
}

/// The shares of a balanced split, checked against the cluster-wide limits: similar groups may
/// differ slightly (memory within `memory_difference_ratio`), so a share computed for the chosen
/// group's shape may not fit. Each share is capped in turn with the totals including the shares
/// before it; nodes cut from one share are offered to the members, in order, that still have room
/// under their max and the limits.
fn within_limits(
    input: &ScaleUpInput<'_>,
    members: &[usize],
    shares: &[usize],
    notes: &mut Vec<String>,
) -> Vec<usize> {
    let mut totals = input.totals.clone();
    let mut deltas = vec![0usize; members.len()];
    let mut cut = 0usize;
    for (k, &gi) in members.iter().enumerate() {
        let g = &input.groups[gi];
        let share = shares.get(k).copied().unwrap_or(0);
        let Ok(t) = &g.template else {
            cut += share;
            continue;
        };
        let (n, why) = input.limits.max_new_nodes(&totals, &t.template.node, share);
        if let Some(why) = why {
            notes.push(format!(
                "{}: balanced share of {share} nodes capped to {n}: {why}",
                g.group.id()
            ));
        }
        totals.add_node(&t.template.node, n);
        deltas[k] = n;
        cut += share - n;
    }
    for (k, &gi) in members.iter().enumerate() {
        if cut == 0 {
            break;
        }
        let g = &input.groups[gi];
        let Ok(t) = &g.template else { continue };
        let room = g
            .group
            .max_size()
            .saturating_sub(g.group.target_size() + deltas[k]);
        let (n, _) = input
            .limits
            .max_new_nodes(&totals, &t.template.node, room.min(cut));
        totals.add_node(&t.template.node, n);
        deltas[k] += n;
        cut -= n;
    }
    deltas
}

/// Similar groups of the chosen group that are free to grow and on which every pod of the
/// option fits (seed 001 step 4). The test is about the predicates, not about how many nodes
/// the group could still add: a pod its own estimate did not try because a limit cut it short is
/// checked on a fresh template node here.
fn similar_members(
    snapshot: &mut ClusterSnapshot,
    input: &ScaleUpInput<'_>,
    estimates: &[Option<GroupEstimate>],
    chosen: Chosen<'_>,
    balancing: &BalancingOptions,
    grown: &[bool],
    budget: &mut dyn Budget,
) -> Vec<usize> {
    // Shapes of the groups with a template; indices mapped back to groups.
    let mut shape_group = Vec::new();
    let mut shapes = Vec::new();
    for (gi, g) in input.groups.iter().enumerate() {
        if let Ok(t) = &g.template {
            let mut ds = Resources::default();
            for p in &t.template.daemonset_pods {
                ds.add(&p.requests);
            }
            shapes.push(GroupShape::of_template(&t.template.node, ds));
            shape_group.push(gi);
        }
    }
    let Some(chosen_shape) = shape_group.iter().position(|&gi| gi == chosen.group) else {
        return Vec::new();
    };
    let candidates: Vec<usize> = find_similar(chosen_shape, &shapes, balancing)
        .into_iter()
        .map(|s| shape_group[s])
        .filter(|&gi| !grown[gi] && !input.groups[gi].group.options().zero_or_max_scaling())
        .collect();
    let mut members = Vec::new();
    for gi in candidates {
        let g = &input.groups[gi];
        let takes_part = match (&estimates[gi], &g.template) {
            (Some(e), Ok(t)) => {
                let fit = |p: usize| e.fits.get(p).copied().unwrap_or(Fit::No);
                if chosen.pods.iter().any(|&p| fit(p) == Fit::No) {
                    false
                } else {
                    let untried: Vec<Arc<Pod>> = chosen
                        .pods
                        .iter()
                        .filter(|&&p| fit(p) == Fit::Unknown)
                        .filter_map(|&p| chosen.round_pods.get(p).cloned())
                        .collect();
                    untried.is_empty() || all_fit(snapshot, &untried, &t.template, budget)
                }
            }
            // A group at its max has no estimate; it takes part (and gets nothing) as seed
            // 001's split skips it.
            _ => g.blocked.is_none() && g.group.target_size() >= g.group.max_size(),
        };
        if takes_part {
            members.push(gi);
        }
    }
    members
}

/// Whether every one of `pods` fits fresh nodes of `template` (an unbounded estimate leaves none
/// unplaced and is not cut short by the budget).
fn all_fit(
    snapshot: &mut ClusterSnapshot,
    pods: &[Arc<Pod>],
    template: &crate::scale_up::estimator::NodeTemplate,
    budget: &mut dyn Budget,
) -> bool {
    let limits = EstimatorLimits {
        max_nodes: None,
        budget: || budget.exhausted(),
    };
    match estimate(snapshot, pods, template, limits) {
        Ok(e) => e.unplaced.is_empty() && e.limit_hit.is_none(),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale_up::estimator::NodeTemplate;
    use crate::scale_up::template::TemplateSource;
    use crate::scheduling::budget::Unlimited;
    use autoscaler_model::Node;
    use autoscaler_model::Range;
    use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};
    use autoscaler_model::{TaintEffect, TolerationOp};
    use proptest::prelude::*;
    use rand::SeedableRng;

    const ZONE: &str = "topology.kubernetes.io/zone";
    const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
    const GPU: &str = "nvidia.com/gpu";

    /// A machine of `cores` cores and 4 GiB per core, of instance type `std`.
    fn machine(name: &str, cores: i64) -> NodeBuilder {
        NodeBuilder::new(name, cores * 1000, cores * 4 * GI).label(INSTANCE_TYPE, "std")
    }

    /// A machine with `gpus` GPUs, tainted so that only GPU pods land there.
    fn gpu_machine(name: &str, gpus: i64) -> Node {
        machine(name, 8)
            .label(INSTANCE_TYPE, &format!("gpu-{gpus}"))
            .resource(GPU, gpus)
            .taint(GPU, "present", TaintEffect::NoSchedule)
            .build()
    }

    fn provider_template(node: Node) -> Result<GroupTemplate, NoTemplate> {
        Ok(GroupTemplate {
            template: NodeTemplate {
                node,
                daemonset_pods: Vec::new(),
            },
            source: TemplateSource::Provider,
        })
    }

    /// One group of a test case, owned.
    struct G {
        group: NodeGroup,
        template: Result<GroupTemplate, NoTemplate>,
        blocked: Option<String>,
    }

    /// A free group `id` (min, max, target) whose new nodes look like `node`.
    fn group(id: &str, min: usize, max: usize, target: usize, node: Node) -> G {
        G {
            group: NodeGroup::new(id, min, max, target),
            template: provider_template(node),
            blocked: None,
        }
    }

    /// `n` pods `prefix-i`, each requesting `cpu_milli` and 1 GiB.
    fn pods(prefix: &str, n: usize, cpu_milli: i64) -> Vec<Arc<Pod>> {
        (0..n)
            .map(|i| PodBuilder::new(&format!("{prefix}-{i}"), cpu_milli, GI).arc())
            .collect()
    }

    /// `n` pods each asking for one GPU (and tolerating the GPU taint).
    fn gpu_pods(prefix: &str, n: usize) -> Vec<Arc<Pod>> {
        (0..n)
            .map(|i| {
                PodBuilder::new(&format!("{prefix}-{i}"), 500, GI)
                    .resource(GPU, 1)
                    .toleration(Some(GPU), TolerationOp::Exists, "", None)
                    .arc()
            })
            .collect()
    }

    /// Two existing 4-core nodes, each running one pod.
    fn existing_nodes() -> Vec<Node> {
        (0..2)
            .map(|i| machine(&format!("existing-{i}"), 4).build())
            .collect()
    }

    fn existing_cluster() -> ClusterSnapshot {
        let mut s = ClusterSnapshot::new();
        for (i, n) in existing_nodes().into_iter().enumerate() {
            let name = n.name.as_str().to_owned();
            let id = s.add_node(Arc::new(n)).expect("fresh node");
            let pod = PodBuilder::new(&format!("running-{i}"), 3000, GI)
                .node_name(&name)
                .arc();
            s.add_pod(pod, id).expect("fresh pod");
        }
        s
    }

    /// A priority chain preferring the group `id`.
    fn prefer(id: &str) -> ExpanderChain {
        ExpanderChain::parse("priority")
            .expect("valid chain")
            .with_priority_text(Some(&format!("10:\n  - ^{id}$\n")))
    }

    struct Case {
        groups: Vec<G>,
        pods: Vec<Arc<Pod>>,
        limits: ResourceLimits,
        totals: ClusterTotals,
        expander: ExpanderChain,
        opts: ScaleUpOptions,
        seed: u64,
    }

    impl Case {
        fn new(groups: Vec<G>, pods: Vec<Arc<Pod>>) -> Case {
            Case {
                groups,
                pods,
                limits: ResourceLimits::default(),
                totals: ClusterTotals::from_nodes(&existing_nodes()),
                expander: ExpanderChain::default(),
                opts: ScaleUpOptions::default(),
                seed: 7,
            }
        }

        fn balanced(mut self) -> Case {
            self.opts.balance_similar_node_groups = true;
            self
        }

        fn expander(mut self, chain: ExpanderChain) -> Case {
            self.expander = chain;
            self
        }

        /// Runs scale-up, checking what must hold for any input: the snapshot is left as found
        /// and every pod is accounted for exactly once.
        fn run(&self) -> ScaleUpResult {
            let mut snapshot = existing_cluster();
            let (len, pod_count) = (snapshot.len(), snapshot.pod_count());
            let input = ScaleUpInput {
                groups: self
                    .groups
                    .iter()
                    .map(|g| GroupInput {
                        group: &g.group,
                        template: g.template.clone(),
                        blocked: g.blocked.clone(),
                    })
                    .collect(),
                pods: self.pods.clone(),
                limits: &self.limits,
                totals: self.totals.clone(),
                expander: &self.expander,
            };
            let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
            let r = scale_up(&mut snapshot, input, &self.opts, &mut rng, &mut Unlimited);
            assert_eq!(snapshot.len(), len, "snapshot nodes changed");
            assert_eq!(snapshot.pod_count(), pod_count, "snapshot pods changed");
            if let Err(e) = check_accounting(&self.groups, &self.pods, &r) {
                panic!("{e}\n{r:#?}");
            }
            r
        }
    }

    /// Every input pod in exactly one of `triggered` / `no_scale_up`, every pod left pending
    /// with a reason from every group, and each group grown at most once.
    fn check_accounting(groups: &[G], input: &[Arc<Pod>], r: &ScaleUpResult) -> Result<(), String> {
        let mut seen: Vec<&str> = r
            .triggered
            .iter()
            .map(|p| &*p.name)
            .chain(r.no_scale_up.iter().map(|n| &*n.pod.name))
            .collect();
        seen.sort_unstable();
        let mut want: Vec<&str> = input.iter().map(|p| &*p.name).collect();
        want.sort_unstable();
        if seen != want {
            return Err(format!("pods accounted {seen:?}, input {want:?}"));
        }
        for n in &r.no_scale_up {
            for g in groups {
                if !n.reasons.contains_key(g.group.id()) {
                    return Err(format!(
                        "pod {} has no reason for {}",
                        n.pod.name,
                        g.group.id()
                    ));
                }
            }
        }
        let mut ids: Vec<&NodeGroupId> = r.increases.iter().map(|i| &i.group).collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.len() != r.increases.len() {
            return Err("a group grows twice".into());
        }
        Ok(())
    }

    /// Increases as `(group, delta)`, sorted by group.
    fn deltas(r: &ScaleUpResult) -> Vec<(String, usize)> {
        let mut v: Vec<(String, usize)> = r
            .increases
            .iter()
            .map(|i| (i.group.to_string(), i.delta))
            .collect();
        v.sort();
        v
    }

    fn d(pairs: &[(&str, usize)]) -> Vec<(String, usize)> {
        pairs.iter().map(|(g, n)| (g.to_string(), *n)).collect()
    }

    /// The reason `group` gave for the pending pod `pod`.
    fn reason<'r>(r: &'r ScaleUpResult, pod: &str, group: &str) -> &'r str {
        r.no_scale_up
            .iter()
            .find(|n| &*n.pod.name == pod)
            .unwrap_or_else(|| panic!("{pod} is not left pending"))
            .reasons
            .get(&NodeGroupId::from(group))
            .unwrap_or("<none>")
    }

    /// Seed 001's groups: A (1 node), B (3), C (6), 4-core machines differing only in zone.
    fn seed_001_groups(max_b: usize) -> Vec<G> {
        vec![
            group("A", 0, 10, 1, machine("a", 4).zone("a").build()),
            group("B", 0, max_b, 3, machine("b", 4).zone("b").build()),
            group("C", 0, 10, 6, machine("c", 4).zone("c").build()),
        ]
    }

    // ---- seed 001: balancing ----

    #[test]
    fn seed_001_one_node_goes_to_the_smallest_group() {
        for pick in ["A", "B", "C"] {
            let r = Case::new(seed_001_groups(10), pods("p", 1, 3000))
                .balanced()
                .expander(prefer(pick))
                .run();
            assert_eq!(deltas(&r), d(&[("A", 1)]), "expander picked {pick}");
            assert_eq!(r.triggered.len(), 1);
        }
    }

    #[test]
    fn seed_001_four_nodes_go_three_to_a_and_one_to_b_whatever_the_pick() {
        for pick in ["A", "B", "C"] {
            let r = Case::new(seed_001_groups(10), pods("p", 4, 3000))
                .balanced()
                .expander(prefer(pick))
                .run();
            assert_eq!(
                deltas(&r),
                d(&[("A", 3), ("B", 1)]),
                "expander picked {pick}"
            );
            assert_eq!(r.total_nodes(), 4);
            assert_eq!(r.triggered.len(), 4);
            for inc in &r.increases {
                let want = if inc.group.as_str() == pick {
                    IncreaseReason::PendingPods
                } else {
                    IncreaseReason::Balancing
                };
                assert_eq!(inc.reason, want);
            }
        }
    }

    #[test]
    fn without_balancing_every_node_goes_to_the_expanders_choice() {
        for pick in ["A", "B", "C"] {
            let r = Case::new(seed_001_groups(10), pods("p", 4, 3000))
                .expander(prefer(pick))
                .run();
            assert_eq!(deltas(&r), d(&[(pick, 4)]));
            assert_eq!(r.increases[0].reason, IncreaseReason::PendingPods);
        }
    }

    #[test]
    fn a_similar_group_at_its_max_is_skipped_in_the_split() {
        // B is full (3 of 3) and C has 3 nodes: A and C share the 4 nodes as if B were not
        // there (with B open, B would get the 4th node instead of C).
        let seed_groups = || {
            let mut groups = seed_001_groups(3);
            groups[2].group.set_target_size(3);
            groups
        };
        for pick in ["A", "C"] {
            let r = Case::new(seed_groups(), pods("p", 4, 3000))
                .balanced()
                .expander(prefer(pick))
                .run();
            assert_eq!(
                deltas(&r),
                d(&[("A", 3), ("C", 1)]),
                "expander picked {pick}"
            );
        }
    }

    #[test]
    fn a_similar_group_with_little_room_left_still_takes_its_share() {
        // B can take one more node only; its own estimate is cut short at one node, but every
        // pod of the option fits its machines, so it takes part (seed 001 step 4 is about
        // predicates, not about how many nodes the group could add).
        for pick in ["A", "C"] {
            let r = Case::new(seed_001_groups(4), pods("p", 4, 3000))
                .balanced()
                .expander(prefer(pick))
                .run();
            assert_eq!(
                deltas(&r),
                d(&[("A", 3), ("B", 1)]),
                "expander picked {pick}"
            );
        }
    }

    #[test]
    fn similarity_tolerates_small_allocatable_differences_but_not_other_machines() {
        let a = machine("a", 4).zone("a").build();
        // Same machine in zone d, with 3% less allocatable memory (capacity equal).
        let mut dz = machine("d", 4).zone("d").build();
        dz.allocatable.memory = dz.allocatable.memory / 100 * 97;
        // Same resources but another instance type: never balanced with A, though smallest.
        let x = machine("x", 4).label(INSTANCE_TYPE, "other").build();
        let groups = vec![
            group("A", 0, 10, 2, a),
            group("D", 0, 10, 2, dz),
            group("X", 0, 10, 0, x),
        ];
        let r = Case::new(groups, pods("p", 2, 3000))
            .balanced()
            .expander(prefer("A"))
            .run();
        assert_eq!(deltas(&r), d(&[("A", 1), ("D", 1)]));
    }

    #[test]
    fn balanced_shares_stay_within_the_limits() {
        // D is similar to A but has 1% more memory. Under a memory limit leaving room for
        // exactly two of A's machines, D's share would cross it: A takes both nodes.
        let mut dz = machine("d", 4).zone("d").build();
        dz.capacity.memory = dz.capacity.memory / 100 * 101;
        dz.allocatable.memory = dz.capacity.memory;
        let groups = vec![
            group("A", 0, 10, 1, machine("a", 4).zone("a").build()),
            group("D", 0, 10, 1, dz),
        ];
        let mut case = Case::new(groups, pods("p", 2, 3000))
            .balanced()
            .expander(prefer("A"));
        case.limits.memory = Range::new(0, case.totals.memory + 32 * GI).unwrap();
        let r = case.run();
        assert_eq!(deltas(&r), d(&[("A", 2)]));
        assert!(
            r.notes.iter().any(|n| n.starts_with("D: balanced share")),
            "{:?}",
            r.notes
        );

        // With room to spare, the split is even.
        case.limits.memory = Range::new(0, case.totals.memory + 64 * GI).unwrap();
        assert_eq!(deltas(&case.run()), d(&[("A", 1), ("D", 1)]));
    }

    #[test]
    fn similar_groups_on_which_the_pods_do_not_fit_take_no_part() {
        let zone_pods: Vec<Arc<Pod>> = (0..4)
            .map(|i| {
                PodBuilder::new(&format!("zc-{i}"), 3000, GI)
                    .node_selector(ZONE, "c")
                    .arc()
            })
            .collect();
        let r = Case::new(seed_001_groups(10), zone_pods)
            .balanced()
            .expander(prefer("C"))
            .run();
        assert_eq!(deltas(&r), d(&[("C", 4)]));
    }

    #[test]
    fn a_similar_group_given_no_node_stays_available_for_later_rounds() {
        // Round 1 serves the plain pod on A (B is similar but larger, so gets nothing); the pod
        // pinned to zone b must still be able to grow B in the next round.
        let mut ps = pods("p", 1, 3000);
        ps.push(
            PodBuilder::new("zb", 3000, GI)
                .node_selector(ZONE, "b")
                .arc(),
        );
        let groups = vec![
            group("A", 0, 10, 1, machine("a", 4).zone("a").build()),
            group("B", 0, 10, 3, machine("b", 4).zone("b").build()),
        ];
        let r = Case::new(groups, ps).balanced().expander(prefer("A")).run();
        assert_eq!(deltas(&r), d(&[("A", 1), ("B", 1)]));
        assert_eq!(r.triggered.len(), 2);
    }

    // ---- seed 002: cluster-wide limits ----

    #[test]
    fn seed_002_cores_limit_caps_the_scale_up() {
        let mut case = Case::new(
            vec![group("workers", 0, 100, 0, machine("w", 8).build())],
            pods("p", 6, 7000),
        );
        case.limits.cpu = Range::parse_cores("0:64").expect("valid range");
        case.totals = ClusterTotals {
            nodes: 4,
            cpu: 30_000,
            memory: 120 * GI,
            ..Default::default()
        };
        let r = case.run();
        assert_eq!(deltas(&r), d(&[("workers", 4)]));
        assert_eq!(r.increases[0].new_target, 4);
        assert_eq!(r.triggered.len(), 4);
        assert_eq!(r.no_scale_up.len(), 2);
        for n in &r.no_scale_up {
            assert_eq!(
                &n.reasons[&NodeGroupId::from("workers")],
                "exceeded quota: cluster-wide cores"
            );
        }
        // 30 + 4 × 8 = 62 cores: within 64.
        assert!(30_000 + 4 * 8000 <= case.limits.cpu.max());
    }

    #[test]
    fn max_nodes_total_leaves_the_other_pods_pending() {
        let mut case = Case::new(
            vec![group("workers", 0, 10, 0, machine("w", 4).build())],
            pods("p", 3, 3000),
        );
        case.limits.max_nodes_total = 3;
        assert_eq!(case.totals.nodes, 2);
        let r = case.run();
        assert_eq!(deltas(&r), d(&[("workers", 1)]));
        assert_eq!(r.no_scale_up.len(), 2);
        for n in &r.no_scale_up {
            assert_eq!(
                &n.reasons[&NodeGroupId::from("workers")],
                "max total nodes in cluster reached"
            );
        }
    }

    // ---- which groups are options ----

    fn small_and_big() -> Vec<G> {
        vec![
            group("small", 0, 10, 0, machine("s", 1).build()),
            group("big", 0, 10, 0, machine("b", 10).build()),
        ]
    }

    #[test]
    fn only_a_group_whose_machines_hold_the_pod_is_an_option() {
        let r = Case::new(small_and_big(), pods("mid", 1, 5000)).run();
        assert_eq!(deltas(&r), d(&[("big", 1)]));

        let r = Case::new(small_and_big(), pods("huge", 1, 20_000)).run();
        assert!(r.increases.is_empty());
        assert!(r.triggered.is_empty());
        assert_eq!(reason(&r, "huge-0", "small"), "Insufficient cpu");
        assert_eq!(reason(&r, "huge-0", "big"), "Insufficient cpu");
    }

    fn gpu_groups() -> Vec<G> {
        vec![
            group("g1", 0, 10, 0, gpu_machine("g1", 1)),
            group("g2", 0, 10, 0, gpu_machine("g2", 2)),
            group("g4", 0, 10, 0, gpu_machine("g4", 4)),
            group("cpu", 0, 10, 0, machine("c", 8).build()),
        ]
    }

    #[test]
    fn gpu_pods_need_as_many_nodes_as_the_gpus_per_node_allow() {
        let expected = [("g1", 3), ("g2", 2), ("g4", 1)];
        // Each GPU group alone (with the CPU group beside it).
        for (id, nodes) in expected {
            let groups: Vec<G> = gpu_groups()
                .into_iter()
                .filter(|g| g.group.id().as_str() == id || g.group.id().as_str() == "cpu")
                .collect();
            let r = Case::new(groups, gpu_pods("gpu", 3)).run();
            assert_eq!(deltas(&r), d(&[(id, nodes)]));
        }
        // least-nodes takes the 4-GPU machine.
        let r = Case::new(gpu_groups(), gpu_pods("gpu", 3))
            .expander(ExpanderChain::parse("least-nodes").expect("chain"))
            .run();
        assert_eq!(deltas(&r), d(&[("g4", 1)]));
        // most-pods ties them all: whichever wins, it adds its own count.
        for seed in 0..8 {
            let mut case = Case::new(gpu_groups(), gpu_pods("gpu", 3))
                .expander(ExpanderChain::parse("most-pods").expect("chain"));
            case.seed = seed;
            let r = case.run();
            let got = deltas(&r);
            assert_eq!(got.len(), 1);
            assert!(
                expected
                    .iter()
                    .any(|(id, n)| got[0] == (id.to_string(), *n)),
                "{got:?}"
            );
        }
    }

    #[test]
    fn a_cpu_group_is_no_option_for_gpu_pods() {
        let groups: Vec<G> = gpu_groups()
            .into_iter()
            .filter(|g| g.group.id().as_str() == "cpu")
            .collect();
        let r = Case::new(groups, gpu_pods("gpu", 3)).run();
        assert!(r.increases.is_empty());
        for i in 0..3 {
            assert_eq!(
                reason(&r, &format!("gpu-{i}"), "cpu"),
                "Insufficient nvidia.com/gpu"
            );
        }
    }

    // ---- groups that cannot grow ----

    fn unavailable_groups() -> Vec<G> {
        let mut blocked = group("blocked", 0, 10, 0, machine("bl", 4).build());
        blocked.blocked = Some("in backoff after failed scale-up".into());
        let full = group("full", 0, 3, 3, machine("fu", 4).build());
        let mut bare = group("bare", 0, 10, 0, machine("ba", 4).build());
        bare.template = Err(NoTemplate::Unavailable);
        vec![blocked, full, bare]
    }

    #[test]
    fn groups_that_cannot_grow_say_why() {
        let r = Case::new(unavailable_groups(), pods("p", 1, 1000)).run();
        assert!(r.increases.is_empty());
        assert_eq!(
            reason(&r, "p-0", "blocked"),
            "in backoff after failed scale-up"
        );
        assert_eq!(reason(&r, "p-0", "full"), "max node group size reached");
        assert_eq!(
            reason(&r, "p-0", "bare"),
            NoTemplate::Unavailable.to_string()
        );
    }

    #[test]
    fn a_blocked_group_is_never_grown_even_when_preferred() {
        let mut groups = unavailable_groups();
        groups.push(group("free", 0, 10, 0, machine("fr", 4).build()));
        let r = Case::new(groups, pods("p", 2, 3000))
            .balanced()
            .expander(prefer("blocked"))
            .run();
        // "blocked" is the same machine as "free" and smaller than "full": still untouched.
        assert_eq!(deltas(&r), d(&[("free", 2)]));
    }

    #[test]
    fn max_nodes_per_scale_up_caps_the_total_across_rounds() {
        let groups = vec![
            group("gpu", 0, 10, 0, gpu_machine("g", 1)),
            group("cpu", 0, 10, 0, machine("c", 4).build()),
        ];
        let mut ps = gpu_pods("gpu", 2);
        ps.extend(pods("cpu", 2, 3000));
        let mut case = Case::new(groups, ps);
        case.opts.max_nodes_per_scale_up = 3;
        let r = case.run();
        assert_eq!(r.total_nodes(), 3);
        assert_eq!(r.increases.len(), 2);
        assert_eq!(r.triggered.len(), 3);
        let left = &r.no_scale_up[0];
        let second = &r.increases[1].group;
        assert_eq!(&left.reasons[second], "max nodes per scale-up reached");
    }

    #[test]
    fn enforce_min_size_grows_groups_below_min_within_limits() {
        let mut case = Case::new(
            vec![
                group("low", 3, 10, 1, machine("l", 4).build()),
                group("ok", 1, 10, 1, machine("o", 4).build()),
            ],
            Vec::new(),
        );
        case.opts.enforce_node_group_min_size = true;
        let r = case.run();
        assert_eq!(deltas(&r), d(&[("low", 2)]));
        assert_eq!(r.increases[0].reason, IncreaseReason::MinSize);
        assert_eq!(r.increases[0].new_target, 3);

        // Only one more node fits under --max-nodes-total: capped, with a note.
        case.limits.max_nodes_total = 3;
        let r = case.run();
        assert_eq!(deltas(&r), d(&[("low", 1)]));
        assert!(
            r.notes.iter().any(|n| n.contains("max total nodes")),
            "{:?}",
            r.notes
        );

        // And under --max-nodes-per-scaleup.
        case.limits.max_nodes_total = 0;
        case.opts.max_nodes_per_scale_up = 1;
        let r = case.run();
        assert_eq!(deltas(&r), d(&[("low", 1)]));

        // Disabled: nothing.
        case.opts.enforce_node_group_min_size = false;
        assert!(case.run().increases.is_empty());
    }

    #[test]
    fn a_group_grown_to_its_min_size_still_explains_pending_pods() {
        let mut case = Case::new(
            vec![group("low", 2, 2, 0, machine("l", 4).build())],
            pods("p", 1, 3000),
        );
        case.opts.enforce_node_group_min_size = true;
        let r = case.run();
        assert_eq!(deltas(&r), d(&[("low", 2)]));
        assert_eq!(r.no_scale_up.len(), 1);
        assert_ne!(reason(&r, "p-0", "low"), "<none>");
    }

    // ---- atomic (zero-or-max) groups ----

    fn atomic(target: usize) -> G {
        let mut g = group("atomic", 0, 5, target, machine("at", 4).build());
        g.group
            .set_options(g.group.options().clone().with_zero_or_max_scaling(true));
        g
    }

    #[test]
    fn an_atomic_group_at_zero_grows_straight_to_its_max() {
        let r = Case::new(vec![atomic(0)], pods("p", 1, 1000))
            .balanced()
            .run();
        assert_eq!(deltas(&r), d(&[("atomic", 5)]));
        assert_eq!(r.increases[0].new_target, 5);
        assert_eq!(r.triggered.len(), 1);
    }

    #[test]
    fn an_atomic_group_already_scaled_is_no_option() {
        let r = Case::new(vec![atomic(2)], pods("p", 1, 1000)).run();
        assert!(r.increases.is_empty());
        assert_eq!(
            reason(&r, "p-0", "atomic"),
            "atomic node group already scaled up"
        );
    }

    #[test]
    fn an_atomic_group_is_no_option_when_limits_forbid_its_max() {
        let mut case = Case::new(vec![atomic(0)], pods("p", 1, 1000));
        case.limits.max_nodes_total = 6; // 2 existing + 4 < 5
        let r = case.run();
        assert!(r.increases.is_empty());
        assert_eq!(
            reason(&r, "p-0", "atomic"),
            "max total nodes in cluster reached"
        );

        let mut case = Case::new(vec![atomic(0)], pods("p", 1, 1000));
        case.opts.max_nodes_per_scale_up = 4;
        let r = case.run();
        assert!(r.increases.is_empty());
        assert_eq!(
            reason(&r, "p-0", "atomic"),
            "max nodes per scale-up reached"
        );
    }

    // ---- rounds ----

    #[test]
    fn gpu_and_cpu_pods_grow_both_groups_in_one_decision() {
        let groups = vec![
            group("gpu", 0, 10, 0, gpu_machine("g", 1)),
            group("cpu", 0, 10, 0, machine("c", 4).build()),
        ];
        let mut ps = gpu_pods("gpu", 2);
        ps.extend(pods("cpu", 2, 3000));
        let r = Case::new(groups, ps).run();
        assert_eq!(deltas(&r), d(&[("cpu", 2), ("gpu", 2)]));
        assert_eq!(r.triggered.len(), 4);
        assert!(r.no_scale_up.is_empty());
    }

    #[test]
    fn a_group_grown_in_one_round_is_not_grown_again() {
        // "near" is preferred but can add only 2 nodes; the other 2 pods go to "far".
        let groups = vec![
            group("near", 0, 2, 0, machine("n", 4).build()),
            group(
                "far",
                0,
                10,
                0,
                machine("f", 4).label(INSTANCE_TYPE, "other").build(),
            ),
        ];
        let r = Case::new(groups, pods("p", 4, 3000))
            .expander(prefer("near"))
            .run();
        assert_eq!(deltas(&r), d(&[("far", 2), ("near", 2)]));
        assert_eq!(r.increases[0].group.as_str(), "near");
        assert_eq!(r.triggered.len(), 4);
    }

    #[test]
    fn nothing_pending_means_nothing_to_do() {
        let r = Case::new(seed_001_groups(10), Vec::new()).balanced().run();
        assert!(r.increases.is_empty() && r.triggered.is_empty() && r.no_scale_up.is_empty());
    }

    // ---- invariants ----

    /// A random group: (cores, memory variant, min, max, target, atomic, blocked, no template,
    /// zone).
    type GroupSpec = (i64, bool, usize, usize, usize, bool, bool, bool, bool);

    fn group_spec() -> impl Strategy<Value = GroupSpec> {
        (
            1i64..=4,
            any::<bool>(),
            0usize..3,
            0usize..8,
            0usize..5,
            prop::bool::weighted(0.15),
            prop::bool::weighted(0.15),
            prop::bool::weighted(0.1),
            any::<bool>(),
        )
    }

    fn build_group(i: usize, s: &GroupSpec) -> G {
        let &(cores, mem_variant, min, max, target, atomic, blocked, bare, zone_b) = s;
        let mut node = machine(&format!("t{i}"), cores)
            .zone(if zone_b { "b" } else { "a" })
            .build();
        if mem_variant {
            // 1% less memory: still similar to the same machine without it.
            node.capacity.memory = node.capacity.memory / 100 * 99;
            node.allocatable.memory = node.capacity.memory;
        }
        // No group has its min above its max (`NodeGroup::try_new` refuses one).
        let mut g = group(&format!("g{i}"), min.min(max), max, target, node);
        g.group
            .set_options(g.group.options().clone().with_zero_or_max_scaling(atomic));
        if blocked {
            g.blocked = Some("in backoff after failed scale-up".into());
        }
        if bare {
            g.template = Err(NoTemplate::Unavailable);
        }
        g
    }

    fn within(limits: &ResourceLimits, t: &ClusterTotals) -> bool {
        (limits.max_nodes_total == 0 || t.nodes <= limits.max_nodes_total)
            && t.cpu <= limits.cpu.max()
            && t.memory <= limits.memory.max()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn decisions_respect_sizes_limits_and_account_for_every_pod(
            specs in prop::collection::vec(group_spec(), 0..5),
            pod_specs in prop::collection::vec((100i64..5000, prop::option::weighted(0.2, any::<bool>())), 0..12),
            // Each limit is absent half of the time, so that most cases do scale up.
            max_cores in prop::option::of(0i64..80),
            max_mem_gib in prop::option::of(0i64..400),
            max_nodes_total in prop::option::of(1usize..20),
            totals in (0usize..8, 0i64..40, 0i64..200),
            max_per_scale_up in prop::option::of(0usize..10),
            balance in any::<bool>(),
            enforce_min in any::<bool>(),
            seed in any::<u64>(),
        ) {
            let groups: Vec<G> = specs.iter().enumerate().map(|(i, s)| build_group(i, s)).collect();
            let ps: Vec<Arc<Pod>> = pod_specs
                .iter()
                .enumerate()
                .map(|(i, (cpu, zone))| {
                    let b = PodBuilder::new(&format!("p-{i}"), *cpu, GI);
                    match zone {
                        Some(true) => b.node_selector(ZONE, "b"),
                        Some(false) => b.node_selector(ZONE, "a"),
                        None => b,
                    }
                    .arc()
                })
                .collect();
            let mut case = Case::new(groups, ps);
            if let Some(cores) = max_cores {
                case.limits.cpu = Range::new(0, cores * 1000).unwrap();
            }
            if let Some(gib) = max_mem_gib {
                case.limits.memory = Range::new(0, gib * GI).unwrap();
            }
            case.limits.max_nodes_total = max_nodes_total.unwrap_or(0);
            case.totals = ClusterTotals {
                nodes: totals.0,
                cpu: totals.1 * 1000,
                memory: totals.2 * GI,
                ..Default::default()
            };
            if let Some(n) = max_per_scale_up {
                case.opts.max_nodes_per_scale_up = n;
            }
            case.opts.balance_similar_node_groups = balance;
            case.opts.enforce_node_group_min_size = enforce_min;
            case.seed = seed;

            let r = case.run(); // also checks the pod accounting and the snapshot
            let mut after = case.totals.clone();
            for inc in &r.increases {
                let g = &case.groups[inc.index];
                prop_assert_eq!(g.group.id(), &inc.group);
                prop_assert!(inc.delta > 0);
                prop_assert_eq!(inc.new_target, g.group.target_size() + inc.delta);
                prop_assert!(inc.new_target <= g.group.max_size(), "{:?}", inc);
                prop_assert!(g.blocked.is_none(), "blocked group grown: {:?}", inc);
                let t = g.template.as_ref().expect("a group without template never grows");
                after.add_node(&t.template.node, inc.delta);
            }
            prop_assert!(r.total_nodes() <= case.opts.max_nodes_per_scale_up);
            if within(&case.limits, &case.totals) {
                prop_assert!(within(&case.limits, &after), "limits crossed: {:?} -> {:?}", case.totals, after);
            }
        }
    }
}

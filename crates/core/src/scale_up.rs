//! Scale-up: from the pods that fit nowhere, decide which node groups grow and by how much, and
//! explain, per group, why every other pod causes no scale-up.
//!
//! One decision runs in rounds. In each round every group that may grow (not blocked by backoff
//! or health, below its max, inside the cluster-wide limits, with a template) gets a bin-packing
//! estimate for the remaining pods; the expander chain picks one option; with
//! `--balance-similar-node-groups` its nodes are split over similar groups on which every pod of
//! the option fits (seed 001); the chosen groups grow and their pods count as helped. The next
//! round considers the pods no earlier option helped, with the groups not yet grown, so one loop
//! can serve pods that need different kinds of nodes (upstream serves one option per loop and
//! leaves the rest for later loops).
//!
//! It must never propose a size above a group's max, a change that crosses a cluster-wide limit,
//! or more than `--max-nodes-per-scaleup` nodes in one decision; it only reads the snapshot
//! (estimates fork and revert it).

use std::collections::BTreeMap;
use std::sync::Arc;

use rand_chacha::ChaCha8Rng;

use crate::balance::{BalanceTarget, BalancingOptions, GroupShape, find_similar, split};
use crate::estimator::{Budget, EstimatorLimits, LimitHit, estimate};
use crate::expander::{ExpanderChain, ExpansionOption};
use crate::limits::{ClusterTotals, ResourceLimits};
use crate::node_group::{NodeGroup, NodeGroupId};
use crate::pod::Pod;
use crate::resources::Resources;
use crate::snapshot::ClusterSnapshot;
use crate::template::{GroupTemplate, NoTemplate};

/// Options of scale-up.
#[derive(Clone, Debug)]
pub struct ScaleUpOptions {
    /// `--max-nodes-per-scaleup` (1000).
    pub max_nodes_per_scale_up: usize,
    /// `--balance-similar-node-groups` (false).
    pub balance_similar_node_groups: bool,
    /// Similarity options for balancing.
    pub balancing: BalancingOptions,
    /// `--enforce-node-group-min-size` (false): grow groups below their min size.
    pub enforce_node_group_min_size: bool,
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
    /// Pods that fit on no existing or upcoming node (see [`crate::pending`]).
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
    pub reasons: BTreeMap<NodeGroupId, String>,
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
}

impl ScaleUpResult {
    /// Total nodes added.
    pub fn total_nodes(&self) -> usize {
        self.increases.iter().map(|i| i.delta).sum()
    }
}

/// The estimate of one group in one round.
struct GroupEstimate {
    /// Pods (indices into the round's pod list) the group's new nodes would hold.
    placed: Vec<usize>,
}

/// Decides the scale-up. `budget` bounds the time spent in bin-packing across all estimates.
pub fn scale_up(
    snapshot: &mut ClusterSnapshot,
    mut input: ScaleUpInput<'_>,
    opts: &ScaleUpOptions,
    rng: &mut ChaCha8Rng,
    budget: &mut dyn Budget,
) -> ScaleUpResult {
    let mut result = ScaleUpResult::default();
    let mut grown = vec![false; input.groups.len()];
    let mut added_total = 0usize;

    if opts.enforce_node_group_min_size {
        for (i, g) in input.groups.iter().enumerate() {
            let group = g.group;
            if group.target_size >= group.min_size || g.blocked.is_some() {
                continue;
            }
            let Ok(t) = &g.template else { continue };
            let wanted = group.min_size - group.target_size;
            let (n, why) = input
                .limits
                .max_new_nodes(&input.totals, &t.template.node, wanted);
            if let Some(why) = why {
                result
                    .notes
                    .push(format!("{}: growing to min size capped: {why}", group.id));
            }
            if n > 0 {
                input.totals.add_node(&t.template.node, n);
                added_total += n;
                grown[i] = true;
                result.increases.push(GroupIncrease {
                    index: i,
                    group: group.id.clone(),
                    delta: n,
                    new_target: group.target_size + n,
                    reason: IncreaseReason::MinSize,
                });
            }
        }
    }

    let mut reasons: Vec<BTreeMap<NodeGroupId, String>> = vec![BTreeMap::new(); input.pods.len()];
    let mut remaining: Vec<usize> = (0..input.pods.len()).collect();

    while !remaining.is_empty() {
        let pods: Vec<Arc<Pod>> = remaining.iter().map(|&i| input.pods[i].clone()).collect();
        let per_scale_up_left = opts.max_nodes_per_scale_up.saturating_sub(added_total);
        let mut estimates: Vec<Option<GroupEstimate>> = Vec::with_capacity(input.groups.len());
        let mut options: Vec<ExpansionOption> = Vec::new();
        let mut option_group: Vec<usize> = Vec::new();

        for (gi, g) in input.groups.iter().enumerate() {
            let group = g.group;
            let mut refuse_all = |why: String| {
                for &p in &remaining {
                    reasons[p].insert(group.id.clone(), why.clone());
                }
            };
            if grown[gi] {
                estimates.push(None);
                continue;
            }
            if let Some(why) = &g.blocked {
                refuse_all(why.clone());
                estimates.push(None);
                continue;
            }
            let template = match &g.template {
                Ok(t) => t,
                Err(e) => {
                    refuse_all(e.to_string());
                    estimates.push(None);
                    continue;
                }
            };
            let atomic = group.options.zero_or_max_scaling;
            if atomic && group.target_size > 0 {
                refuse_all("atomic node group already scaled up".into());
                estimates.push(None);
                continue;
            }
            let headroom = group.max_size.saturating_sub(group.target_size);
            if headroom == 0 {
                refuse_all("max node group size reached".into());
                estimates.push(None);
                continue;
            }
            let wanted = headroom.min(per_scale_up_left);
            if wanted == 0 {
                refuse_all("max nodes per scale-up reached".into());
                estimates.push(None);
                continue;
            }
            let (cap, limit_why) =
                input
                    .limits
                    .max_new_nodes(&input.totals, &template.template.node, wanted);
            if cap == 0 || (atomic && cap < headroom) {
                refuse_all(limit_why.map_or_else(
                    || "max nodes per scale-up reached".into(),
                    |w| w.to_string(),
                ));
                estimates.push(None);
                continue;
            }
            // Why pods beyond the cap were skipped: the tightest of the three bounds.
            let cap_reason = match limit_why {
                Some(w) => w.to_string(),
                None if cap == headroom => "max node group size reached".into(),
                None => "max nodes per scale-up reached".into(),
            };
            let limits = EstimatorLimits {
                max_nodes: Some(cap),
                budget: || budget.exhausted(),
            };
            let est = match estimate(snapshot, &pods, &template.template, limits) {
                Ok(e) => e,
                Err(e) => {
                    refuse_all(e.to_string());
                    estimates.push(None);
                    continue;
                }
            };
            for (p, unfit) in &est.unplaced {
                reasons[remaining[*p]].insert(group.id.clone(), unfit.to_string());
            }
            let skipped_why = match est.limit_hit {
                Some(LimitHit::TimeBudget) => "bin-packing time budget exhausted".to_string(),
                _ => cap_reason,
            };
            for &p in &est.skipped {
                reasons[remaining[p]].insert(group.id.clone(), skipped_why.clone());
            }
            let placed: Vec<usize> = est
                .new_nodes
                .iter()
                .flat_map(|n| n.pods.iter().copied())
                .collect();
            if est.node_count > 0 {
                let mut requests = Resources::default();
                for &p in &placed {
                    requests.add(&pods[p].requests);
                }
                options.push(ExpansionOption {
                    group: group.id.clone(),
                    // An atomic group jumps straight to its max.
                    node_count: if atomic { headroom } else { est.node_count },
                    pods: placed.clone(),
                    pods_requests: requests,
                    node_allocatable: template.template.node.allocatable.clone(),
                    node_price_per_hour: group.node_price_per_hour,
                });
                option_group.push(gi);
            }
            estimates.push(Some(GroupEstimate { placed }));
        }

        let Some(choice) = input.expander.choose(&options, rng) else {
            break;
        };
        result
            .notes
            .extend(choice.warnings.iter().map(ToString::to_string));
        let chosen = &options[choice.index];
        let chosen_group = option_group[choice.index];

        // Groups that share the option: similar shape, and every pod of the option fits there.
        let mut members = vec![chosen_group];
        let atomic = input.groups[chosen_group].group.options.zero_or_max_scaling;
        if opts.balance_similar_node_groups && !atomic {
            members.extend(similar_members(
                &input,
                &estimates,
                chosen_group,
                &chosen.pods,
                &opts.balancing,
                &grown,
            ));
        }
        let targets: Vec<BalanceTarget> = members
            .iter()
            .map(|&gi| {
                let g = input.groups[gi].group;
                BalanceTarget {
                    current: g.target_size,
                    max: g.max_size,
                }
            })
            .collect();
        let split = split(&targets, chosen.node_count);
        for (k, &gi) in members.iter().enumerate() {
            let delta = split.per_group[k];
            grown[gi] = true;
            if delta == 0 {
                continue;
            }
            let g = &input.groups[gi];
            if let Ok(t) = &g.template {
                input.totals.add_node(&t.template.node, delta);
            }
            added_total += delta;
            result.increases.push(GroupIncrease {
                index: gi,
                group: g.group.id.clone(),
                delta,
                new_target: g.group.target_size + delta,
                reason: if gi == chosen_group {
                    IncreaseReason::PendingPods
                } else {
                    IncreaseReason::Balancing
                },
            });
        }
        if members.len() > 1 {
            let names: Vec<String> = members
                .iter()
                .map(|&gi| input.groups[gi].group.id.to_string())
                .collect();
            result.notes.push(format!(
                "balanced {} new nodes over similar groups {}",
                chosen.node_count,
                names.join(", ")
            ));
        }
        let helped: Vec<bool> = {
            let mut h = vec![false; remaining.len()];
            for &p in &chosen.pods {
                h[p] = true;
            }
            h
        };
        let mut next = Vec::with_capacity(remaining.len());
        for (k, &p) in remaining.iter().enumerate() {
            if helped[k] {
                result.triggered.push(input.pods[p].clone());
            } else {
                next.push(p);
            }
        }
        remaining = next;
    }

    for p in remaining {
        result.no_scale_up.push(NoScaleUp {
            pod: input.pods[p].clone(),
            reasons: std::mem::take(&mut reasons[p]),
        });
    }
    result
}

/// Similar groups of `chosen` that are free to grow and can hold every pod of the option.
fn similar_members(
    input: &ScaleUpInput<'_>,
    estimates: &[Option<GroupEstimate>],
    chosen: usize,
    option_pods: &[usize],
    balancing: &BalancingOptions,
    grown: &[bool],
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
            shapes.push(GroupShape {
                capacity: t.template.node.capacity.clone(),
                allocatable: t.template.node.allocatable.clone(),
                daemonset_requests: ds,
                labels: t.template.node.labels.clone(),
            });
            shape_group.push(gi);
        }
    }
    let Some(chosen_shape) = shape_group.iter().position(|&gi| gi == chosen) else {
        return Vec::new();
    };
    find_similar(chosen_shape, &shapes, balancing)
        .into_iter()
        .map(|s| shape_group[s])
        .filter(|&gi| !grown[gi] && !input.groups[gi].group.options.zero_or_max_scaling)
        .filter(|&gi| match &estimates[gi] {
            // Every pod of the chosen option must fit this group's nodes. A group at its max
            // has no estimate; it takes part (and gets nothing) as seed 001's split skips it.
            Some(e) => {
                let mut fits = vec![false; e.placed.iter().max().map_or(0, |m| m + 1)];
                for &p in &e.placed {
                    fits[p] = true;
                }
                option_pods
                    .iter()
                    .all(|&p| fits.get(p).copied().unwrap_or(false))
            }
            None => {
                input.groups[gi].blocked.is_none()
                    && input.groups[gi].group.target_size >= input.groups[gi].group.max_size
            }
        })
        .collect()
}

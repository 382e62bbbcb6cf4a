//! The consolidation phase of `bench` (ours): the search for one consolidation command on the
//! generated cluster, with `--consolidation=replace`, every group's first node as its
//! replacement shape and `--max-drain-parallelism` 10, so the multi-node search runs in full.
//!
//! Each iteration starts from a fresh state: one pass starts the quiet timers, a second one
//! past `--consolidate-after` searches; only the second is timed. It changes none of the
//! generated objects and leaves the snapshot as found.

use std::time::{Duration, Instant};

use autoscaler_core::{
    AutoscalerOptions, CloudProvider, ClusterSnapshot, ClusterView, InFlight, NodeTemplate,
    Unlimited,
};
use autoscaler_core::{
    ConsolidationInput, ConsolidationMode, ConsolidationState, ReplacementShape, plan_consolidation,
};
use autoscaler_model::{ClusterTotals, DisruptionBudgets, NoControllerLookup};

use super::cluster::Cluster;
use super::phases::{NOW_MS, PhaseResult, thread_cpu};

/// Drains a consolidation command may start in the bench (the multi-node search is bounded
/// by it).
const DRAINS: usize = 10;

/// Times the consolidation search.
pub fn phase(
    cluster: &Cluster,
    view: &ClusterView<'_>,
    snapshot: &mut ClusterSnapshot,
    options: &AutoscalerOptions,
    iterations: usize,
) -> PhaseResult {
    let groups = cluster.provider.node_groups();
    let shapes: Vec<ReplacementShape> = (0..groups.len())
        .filter_map(|g| {
            let node = view
                .nodes
                .iter()
                .find(|n| cluster.provider.node_group_of(n) == Some(g))?;
            Some(ReplacementShape {
                group: g,
                template: NodeTemplate {
                    node: (**node).clone(),
                    daemonset_pods: Vec::new(),
                },
            })
        })
        .collect();
    let totals = ClusterTotals::from_nodes(view.nodes.iter().map(|n| &**n));
    let sd = &options.scale_down;
    let input = || ConsolidationInput {
        provider: &cluster.provider,
        budgets: DisruptionBudgets::new(Vec::new()),
        controllers: &NoControllerLookup,
        drain: sd.drain(),
        limits: &options.scale_up.limits,
        totals: totals.clone(),
        in_flight: InFlight::default(),
        max_drain_parallelism: DRAINS,
        max_scale_down_parallelism: sd.max_scale_down_parallelism().max(DRAINS),
        max_graceful_termination_sec: sd.max_graceful_termination_sec(),
        shapes: &shapes,
        hold: false,
        last_scale_up_ms: None,
    };
    let mut opts = options.consolidation.clone();
    opts.set_mode(ConsolidationMode::Replace);
    let after = i64::try_from(opts.consolidate_after().as_millis()).unwrap_or(i64::MAX);
    let (mut samples, mut cpu): (Vec<Duration>, Vec<Duration>) = Default::default();
    let mut last = None;
    for _ in 0..iterations.max(1) {
        let mut state = ConsolidationState::default();
        let _ = plan_consolidation(snapshot, &mut state, input(), &opts, NOW_MS, &mut Unlimited);
        let (wall0, cpu0) = (Instant::now(), thread_cpu());
        let plan = plan_consolidation(
            snapshot,
            &mut state,
            input(),
            &opts,
            NOW_MS + after,
            &mut Unlimited,
        );
        samples.push(wall0.elapsed());
        cpu.push(thread_cpu().saturating_sub(cpu0));
        last = Some(plan);
    }
    let plan = last.expect("at least one iteration");
    let decided = match &plan.command {
        Some(c) => format!(
            "{:?} of {} node(s), {} pod(s) to move",
            c.kind,
            c.deletions.len(),
            c.pods_disrupted
        ),
        None => "no command".to_string(),
    };
    PhaseResult {
        phase: "consolidation search (ours, replace)",
        samples,
        cpu,
        decisions: format!(
            "{decided}; {} candidates, {} pod placements simulated",
            plan.candidates, plan.pods_simulated
        ),
    }
}

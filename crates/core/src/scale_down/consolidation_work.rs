//! The consolidation search's work bound on a big input, counted (not timed): however many
//! candidates and pods, one pass simulates at most `max_pods_simulated` pod placements, at
//! most `max_multi_node_candidates` nodes in the multi-node search and
//! `max_single_node_candidates` single-node trials.

use std::sync::Arc;

use super::InFlight;
use super::consolidation::{
    ConsolidationInput, ConsolidationMode, ConsolidationOptions, ConsolidationPlan,
    ConsolidationState, ReplacementShape, plan_consolidation,
};
use super::drain::DrainOptions;
use crate::scale_up::estimator::NodeTemplate;
use crate::scheduling::budget::Unlimited;
use crate::scheduling::snapshot::ClusterSnapshot;
use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};
use autoscaler_model::{ClusterTotals, DisruptionBudgets, NoControllerLookup, ResourceLimits};
use autoscaler_model::{Instance, InstanceState, Node, NodeGroup, StaticProvider};

const NODES: usize = 1_000;
const PODS_PER_NODE: usize = 100;

/// 1,000 full nodes of 1 CPU (100 pods of 10m each, so no pod fits on another node), and two
/// cheaper, smaller shapes that cannot take a node's pods either: every trial fails, so the
/// search goes on until a bound stops it.
fn full_cluster() -> (
    ClusterSnapshot,
    StaticProvider,
    Vec<ReplacementShape>,
    Vec<Arc<Node>>,
) {
    let mut snapshot = ClusterSnapshot::new();
    let mut group = NodeGroup::new("full", 0, 2 * NODES, NODES)
        .with_node_price_per_hour(Some(1.0))
        .expect("a valid price");
    let mut nodes = Vec::with_capacity(NODES);
    for i in 0..NODES {
        let name = format!("n{i:04}");
        let node = NodeBuilder::new(&name, 1000, 64 * GI)
            .with_provider_id(&format!("test:///{name}"))
            .arc();
        group.push_instance(Instance {
            id: node.provider_id.clone().expect("provider id"),
            state: InstanceState::Running,
            error: None,
        });
        let id = snapshot.add_node(node.clone()).expect("a node");
        for p in 0..PODS_PER_NODE {
            let pod = PodBuilder::new(&format!("{name}-p{p}"), 10, GI / 128)
                .owner("ReplicaSet", "rs")
                .node_name(&name)
                .arc();
            snapshot.add_pod(pod, id).expect("a pod");
        }
        nodes.push(node);
    }
    let mut groups = vec![group];
    let mut shapes = Vec::new();
    // Cheaper per core than the full nodes, so that the replacement judgement lets them be tried.
    for (id, cpu, price) in [("half", 500, 0.4), ("small", 400, 0.3)] {
        groups.push(
            NodeGroup::new(id, 0, 10, 0)
                .with_node_price_per_hour(Some(price))
                .expect("a valid price"),
        );
        shapes.push(ReplacementShape {
            group: groups.len() - 1,
            template: NodeTemplate {
                node: NodeBuilder::new(&format!("{id}-template"), cpu, 64 * GI).build(),
                daemonset_pods: Vec::new(),
            },
        });
    }
    (snapshot, StaticProvider::new(groups), shapes, nodes)
}

/// One pass past `--consolidate-after` (the first starts the quiet timers).
fn settled_pass(opts: &ConsolidationOptions) -> ConsolidationPlan {
    let (mut snapshot, provider, shapes, nodes) = full_cluster();
    let drain = DrainOptions::default();
    let limits = ResourceLimits::default();
    let mut state = ConsolidationState::default();
    let mut pass = |now_ms: i64| {
        let input = ConsolidationInput {
            provider: &provider,
            budgets: DisruptionBudgets::new(Vec::new()),
            controllers: &NoControllerLookup,
            drain: &drain,
            limits: &limits,
            totals: ClusterTotals::from_nodes(nodes.iter().map(|n| &**n)),
            in_flight: InFlight::default(),
            // Drains enough for the whole multi-node prefix.
            max_drain_parallelism: NODES,
            max_scale_down_parallelism: NODES,
            max_graceful_termination_sec: 600,
            shapes: &shapes,
            hold: false,
            last_scale_up_ms: None,
        };
        plan_consolidation(
            &mut snapshot,
            &mut state,
            input,
            opts,
            now_ms,
            &mut Unlimited,
        )
    };
    let _ = pass(0);
    pass(i64::try_from(opts.consolidate_after.as_millis()).expect("a small duration"))
}

#[test]
fn one_pass_simulates_at_most_the_bound_of_pod_placements() {
    let opts = ConsolidationOptions {
        mode: ConsolidationMode::Replace,
        ..ConsolidationOptions::default()
    };
    let plan = settled_pass(&opts);
    assert!(plan.command.is_none(), "no node can go");
    assert_eq!(plan.candidates, NODES, "every node is judged");
    assert!(
        plan.pods_simulated <= opts.max_pods_simulated,
        "{} placements over the bound {}",
        plan.pods_simulated,
        opts.max_pods_simulated
    );
    // Without the placement bound the same search does more: the bound is what stopped it.
    // Its own structure still bounds it: at most 8 multi-node trials of at most 100 nodes and
    // 50 single-node trials, each tried as a deletion and on each of the 2 cheaper shapes.
    let unbounded = settled_pass(&ConsolidationOptions {
        max_pods_simulated: usize::MAX,
        ..opts.clone()
    });
    assert!(unbounded.command.is_none());
    assert!(
        unbounded.pods_simulated > opts.max_pods_simulated,
        "{} placements: the bound did not bind",
        unbounded.pods_simulated
    );
    eprintln!(
        "pod placements simulated: {} with the bound, {} without",
        plan.pods_simulated, unbounded.pods_simulated
    );
    let structural =
        3 * (8 * opts.max_multi_node_candidates + opts.max_single_node_candidates) * PODS_PER_NODE;
    assert!(
        unbounded.pods_simulated <= structural,
        "{} placements over {structural}",
        unbounded.pods_simulated
    );
}

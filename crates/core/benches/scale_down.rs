//! Benchmark of one scale-down planning pass.
//!
//! Run: `cargo bench -p autoscaler-core --features test-util --bench scale_down`. Results are kept
//! in `BENCHMARKS.md`.
//!
//! `scale_down/plan_1000_nodes_every_fifth_at_20pct`: 1,000 nodes of 16 CPU / 64 GiB in 10 groups;
//! every fifth node runs 32 ReplicaSet pods of 100m / 256 MiB (20% CPU), the others 30 pods of
//! 500m / 2 GiB (94%). One pass of `plan_scale_down` (eligibility, drain rules, removal
//! simulation of the candidates within the default candidate bounds, unneeded timers, deletion
//! plan) with default options, on a snapshot built once.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use autoscaler_core::ClusterSnapshot;
use autoscaler_core::Unlimited;
use autoscaler_core::{
    InFlight, ScaleDownInput, ScaleDownOptions, ScaleDownState, plan_scale_down,
};
use autoscaler_model::DisruptionBudgets;
use autoscaler_model::NoControllerLookup;
use autoscaler_model::Node;
use autoscaler_model::testing::{GI, MI, NodeBuilder, PodBuilder};
use autoscaler_model::{ClusterTotals, ResourceLimits};
use autoscaler_model::{Instance, InstanceState, NodeGroup, StaticProvider};
use criterion::{Criterion, criterion_group, criterion_main};

const GROUPS: usize = 10;

fn bench(c: &mut Criterion) {
    let n_nodes = 1000;
    let mut snapshot = ClusterSnapshot::new();
    let mut nodes: Vec<Arc<Node>> = Vec::new();
    let mut groups: Vec<NodeGroup> = (0..GROUPS)
        .map(|g| NodeGroup::new(&format!("ng-{g}"), 0, 1000, n_nodes / GROUPS))
        .collect();
    for n in 0..n_nodes {
        let name = format!("node-{n}");
        let node = NodeBuilder::new(&name, 16_000, 64 * GI)
            .with_provider_id(&format!("test:///{name}"))
            .arc();
        groups[n % GROUPS].push_instance(Instance {
            id: node.provider_id.clone().unwrap(),
            state: InstanceState::Running,
            error: None,
        });
        let id = snapshot.add_node(node.clone()).unwrap();
        let (count, cpu, mem) = if n % 5 == 0 {
            (32, 100, 256 * MI)
        } else {
            (30, 500, 2 * GI)
        };
        for p in 0..count {
            let pod = PodBuilder::new(&format!("p-{n}-{p}"), cpu, mem)
                .owner("ReplicaSet", &format!("rs-{}", p % 20))
                .node_name(&name)
                .arc();
            snapshot.add_pod(pod, id).unwrap();
        }
        nodes.push(node);
    }
    let provider = StaticProvider::new(groups);
    let limits = ResourceLimits::default();
    let totals = ClusterTotals::from_nodes(nodes.iter().map(|n| &**n));
    let opts = ScaleDownOptions::default();
    let mut group = c.benchmark_group("scale_down");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(6));
    group.bench_function("plan_1000_nodes_every_fifth_at_20pct", |b| {
        b.iter(|| {
            let mut state = ScaleDownState::default();
            let input = ScaleDownInput {
                provider: &provider,
                budgets: DisruptionBudgets::new(Vec::new()),
                controllers: &NoControllerLookup,
                limits: &limits,
                totals: totals.clone(),
                in_flight: InFlight::default(),
            };
            let plan = plan_scale_down(&mut snapshot, &mut state, input, &opts, 0, &mut Unlimited);
            assert_eq!(plan.unneeded.len(), opts.non_empty_candidates_count());
            black_box(plan)
        })
    });
    // The same pass with the candidate bound lifted: all 200 underutilized nodes simulated.
    let mut all = ScaleDownOptions::default();
    all.set_non_empty_candidates_count(1000);
    group.bench_function("plan_1000_nodes_every_fifth_at_20pct_all_candidates", |b| {
        b.iter(|| {
            let mut state = ScaleDownState::default();
            let input = ScaleDownInput {
                provider: &provider,
                budgets: DisruptionBudgets::new(Vec::new()),
                controllers: &NoControllerLookup,
                limits: &limits,
                totals: totals.clone(),
                in_flight: InFlight::default(),
            };
            let plan = plan_scale_down(&mut snapshot, &mut state, input, &all, 0, &mut Unlimited);
            assert!(plan.unneeded.len() > 100, "{}", plan.unneeded.len());
            black_box(plan)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

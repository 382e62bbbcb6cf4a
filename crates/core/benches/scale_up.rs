//! Benchmarks of the scale-up decision over generated clusters.
//!
//! Run: `cargo bench -p autoscaler-core --features test-util --bench scale_up`. Results are kept
//! in `BENCHMARKS.md`.
//!
//! * `scale_up/decision_2000_pending_1000_full_nodes_10_groups`: the whole decision
//!   ([`decide_scale_up`]: snapshot build, templates, upcoming nodes, pending selection, filtering
//!   pods that fit existing nodes, estimates for 10 groups, expander) for 2,000 pending pods of
//!   1 CPU / 2 GiB from 20 ReplicaSets, 1,000 existing full nodes, 10 groups of 16 CPU / 64 GiB.
//! * `scale_up/filter_12000_ownerless_pending_1000_nodes_with_room`: placing 12,000 pending pods
//!   without an owner (one equivalence group since ownerless pods with the same spec are grouped)
//!   on 1,000 nodes that have room for all of them.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use autoscaler_core::Unlimited;
use autoscaler_core::place_on_existing;
use autoscaler_core::{ClusterView, ScaleUpConfig, build_snapshot, decide_scale_up};
use autoscaler_model::Node;
use autoscaler_model::Pod;
use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};
use autoscaler_model::{Instance, InstanceState, NodeGroup, StaticProvider};
use criterion::{Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const GROUPS: usize = 10;

fn unschedulable(b: PodBuilder) -> Arc<Pod> {
    b.unschedulable().arc()
}

/// `nodes` nodes of 16 CPU / 64 GiB / 110 pods over 10 groups, each node holding
/// `pods_per_node` bound pods of `pod_cpu` millicores and 2 GiB.
fn cluster(
    nodes: usize,
    pods_per_node: usize,
    pod_cpu: i64,
) -> (Vec<Arc<Node>>, Vec<Arc<Pod>>, StaticProvider) {
    let mut all_nodes = Vec::with_capacity(nodes);
    let mut pods = Vec::with_capacity(nodes * pods_per_node);
    let mut groups: Vec<NodeGroup> = (0..GROUPS)
        .map(|g| {
            NodeGroup::new(
                &format!("MachineDeployment/default/ng-{g}"),
                0,
                4 * nodes / GROUPS + 1000,
                nodes / GROUPS,
            )
        })
        .collect();
    for n in 0..nodes {
        let name = format!("node-{n}");
        let g = n % GROUPS;
        let mut node = NodeBuilder::new(&name, 16_000, 64 * GI)
            .label("group", &format!("ng-{g}"))
            .build();
        node.provider_id = Some(Arc::from(format!("test:///{name}")));
        groups[g].push_instance(Instance {
            id: node.provider_id.clone().unwrap(),
            state: InstanceState::Running,
            error: None,
        });
        all_nodes.push(Arc::new(node));
        for p in 0..pods_per_node {
            pods.push(
                PodBuilder::new(&format!("run-{n}-{p}"), pod_cpu, 2 * GI)
                    .owner("ReplicaSet", "running")
                    .node_name(&name)
                    .arc(),
            );
        }
    }
    (all_nodes, pods, StaticProvider::new(groups))
}

fn bench_decision(c: &mut Criterion) {
    // Full nodes: 32 pods of 500m fill 16 CPU.
    let (nodes, mut pods, provider) = cluster(1000, 32, 500);
    for i in 0..2000 {
        pods.push(unschedulable(
            PodBuilder::new(&format!("pending-{i}"), 1000, 2 * GI)
                .owner("ReplicaSet", &format!("rs-{}", i % 20)),
        ));
    }
    let config = ScaleUpConfig::default();
    let view = ClusterView {
        nodes: &nodes,
        pods: &pods,
        daemonsets: &[],
        namespaces: &[],
        provider: &provider,
        pdbs: &[],
        storage: autoscaler_model::Storage::none(),
    };
    let mut group = c.benchmark_group("scale_up");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(8));
    group.bench_function("decision_2000_pending_1000_full_nodes_10_groups", |b| {
        b.iter(|| {
            let mut rng = ChaCha8Rng::seed_from_u64(7);
            let d = decide_scale_up(&view, &config, 0, &|_, _| None, &mut rng, &mut Unlimited);
            assert_eq!(d.result.triggered.len(), 2000);
            black_box(d)
        })
    });
    let mut warnings = Vec::new();
    group.bench_function("build_snapshot_1000_nodes_32000_pods", |b| {
        b.iter(|| black_box(build_snapshot(&view, &mut warnings)))
    });

    // Room for everyone: 1,000 empty nodes, 12,000 ownerless pods of 1 CPU / 2 GiB (12 per node).
    let (nodes, _, provider) = cluster(1000, 0, 0);
    let pending: Vec<Arc<Pod>> = (0..12_000)
        .map(|i| unschedulable(PodBuilder::new(&format!("lone-{i}"), 1000, 2 * GI)))
        .collect();
    let view = ClusterView {
        nodes: &nodes,
        pods: &[],
        daemonsets: &[],
        namespaces: &[],
        provider: &provider,
        pdbs: &[],
        storage: autoscaler_model::Storage::none(),
    };
    let mut snapshot = build_snapshot(&view, &mut warnings);
    group.bench_function("filter_12000_ownerless_pending_1000_nodes_with_room", |b| {
        b.iter(|| {
            let placed = snapshot.forked(|s| place_on_existing(s, pending.clone()));
            assert!(placed.remaining.is_empty());
            black_box(placed.placed.len())
        })
    });
    group.finish();
}

criterion_group!(benches, bench_decision);
criterion_main!(benches);

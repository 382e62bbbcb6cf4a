//! Benchmarks of the decision core's hot paths over generated, deterministic clusters (seeded
//! ChaCha): predicate checks per pod-node pair, snapshot fork/revert, and the estimator.
//!
//! Run: `cargo bench -p autoscaler-core --features test-util --bench core`. Results and the
//! machine they were taken on are kept in `BENCHMARKS.md`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use autoscaler_core::{ClusterSnapshot, NodeId};
use autoscaler_core::{EstimatorLimits, NodeTemplate, estimate};
use autoscaler_model::Pod;
use autoscaler_model::Sym;
use autoscaler_model::testing::{GI, MI, NodeBuilder, PodBuilder};
use criterion::{Criterion, criterion_group, criterion_main};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
const HOSTNAME: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";
/// Distinct workloads (label `app=app-<k>`, one ReplicaSet each) among the existing pods.
const APPS: u32 = 50;

/// How the existing cluster is generated.
#[derive(Clone, Copy)]
struct Shape {
    nodes: usize,
    pods_per_node: usize,
    /// Share (in percent) of existing pods carrying a hostname anti-affinity term against their
    /// own app.
    anti_affinity_percent: u32,
}

/// A cluster of `shape.nodes` 16 CPU / 64 GiB / 110-pod nodes spread over three zones, each with
/// `shape.pods_per_node` bound pods of 50-400m CPU and 64 MiB-1 GiB memory.
fn cluster(shape: Shape, seed: u64) -> ClusterSnapshot {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut snap = ClusterSnapshot::new();
    for n in 0..shape.nodes {
        let name = format!("node-{n}");
        let node = NodeBuilder::new(&name, 16_000, 64 * GI)
            .zone(ZONES[n % ZONES.len()])
            .pods(110);
        let id = snap.add_node(node.arc()).expect("unique node names");
        for p in 0..shape.pods_per_node {
            let app = format!("app-{}", rng.random_range(0..APPS));
            let mut b = PodBuilder::new(
                &format!("pod-{n}-{p}"),
                rng.random_range(50..400),
                rng.random_range(64..1024) * MI,
            )
            .owner("ReplicaSet", &app)
            .label("app", &app)
            .node_name(&name);
            if rng.random_range(0..100) < shape.anti_affinity_percent {
                b = b.anti_affinity("app", &app, HOSTNAME);
            }
            snap.add_pod(b.arc(), id).expect("unique pod names");
        }
    }
    snap
}

/// Checks `pod` against the nodes of `snap` in turn, one pair per iteration.
fn bench_check(c: &mut Criterion, name: &str, snap: &ClusterSnapshot, pod: &Pod) {
    let ids: Vec<NodeId> = snap.node_ids().collect();
    let prepared = snap.prepare(pod);
    let mut k = 0usize;
    c.bench_function(name, |b| {
        b.iter(|| {
            let id = ids[k];
            k = if k + 1 == ids.len() { 0 } else { k + 1 };
            black_box(snap.check(black_box(pod), &prepared, id))
        })
    });
}

/// (a) One predicate check per pod-node pair on 1,000-node clusters.
fn predicates(c: &mut Criterion) {
    let shape = Shape {
        nodes: 1000,
        pods_per_node: 30,
        anti_affinity_percent: 0,
    };

    {
        let plain = cluster(shape, 1);
        let pod = PodBuilder::new("incoming", 500, GI)
            .owner("ReplicaSet", "incoming")
            .build();
        bench_check(c, "check/plain/1000", &plain, &pod);

        let spread_pod = PodBuilder::new("incoming-spread", 500, GI)
            .owner("ReplicaSet", "app-5")
            .label("app", "app-5")
            .spread("app", "app-5", ZONE, 1, None)
            .build();
        bench_check(c, "check/spread_3_zones/1000", &plain, &spread_pod);
        c.bench_function("prepare/spread_3_zones/1000", |b| {
            b.iter(|| black_box(plain.prepare(black_box(&spread_pod))))
        });
    }

    let anti = cluster(
        Shape {
            anti_affinity_percent: 10,
            ..shape
        },
        2,
    );
    // Labelled like one of the existing apps, so existing anti-affinity terms apply to it too.
    let anti_pod = PodBuilder::new("incoming-anti", 500, GI)
        .owner("ReplicaSet", "app-7")
        .label("app", "app-7")
        .anti_affinity("app", "app-3", HOSTNAME)
        .build();
    bench_check(c, "check/anti_affinity/1000", &anti, &anti_pod);
    c.bench_function("prepare/anti_affinity/1000", |b| {
        b.iter(|| black_box(anti.prepare(black_box(&anti_pod))))
    });
}

/// (b) fork + a few mutations + revert: the cost must not depend on the cluster size.
fn fork_revert(c: &mut Criterion) {
    for nodes in [1000, 5000] {
        let mut snap = cluster(
            Shape {
                nodes,
                pods_per_node: 30,
                anti_affinity_percent: 0,
            },
            3,
        );
        let new_node = NodeBuilder::new("fork-node", 16_000, 64 * GI)
            .zone("zone-a")
            .arc();
        let new_pods: Vec<Arc<Pod>> = (0..3)
            .map(|i| PodBuilder::new(&format!("fork-pod-{i}"), 250, 512 * MI).arc())
            .collect();
        let existing = snap.node_id(Sym::new("node-7")).expect("generated node");
        let victim = snap
            .node(existing)
            .and_then(|info| info.pods.first().cloned())
            .expect("generated pods");
        c.bench_function(&format!("fork_revert/{nodes}"), |b| {
            b.iter(|| {
                snap.fork();
                let id = snap.add_node(Arc::clone(&new_node)).expect("fresh node");
                snap.add_pod(Arc::clone(&new_pods[0]), id)
                    .expect("fresh pod");
                snap.add_pod(Arc::clone(&new_pods[1]), id)
                    .expect("fresh pod");
                snap.add_pod(Arc::clone(&new_pods[2]), existing)
                    .expect("fresh pod");
                snap.remove_pod(existing, victim.namespace, &victim.name)
                    .expect("existing pod");
                snap.revert().expect("forked");
                black_box(snap.len())
            })
        });
    }
}

/// (c) The estimator: 2,000 pending pods of 1 CPU / 2 GiB from 20 owners onto a 16 CPU / 64 GiB
/// / 110-pod template, with 1,000 existing nodes of ~30 pods in the snapshot.
fn estimator(c: &mut Criterion) {
    let mut snap = cluster(
        Shape {
            nodes: 1000,
            pods_per_node: 30,
            anti_affinity_percent: 0,
        },
        4,
    );
    let pending: Vec<Arc<Pod>> = (0..2000)
        .map(|i| {
            let owner = format!("pending-{}", i % 20);
            PodBuilder::new(&format!("pending-pod-{i}"), 1000, 2 * GI)
                .owner("ReplicaSet", &owner)
                .label("app", &owner)
                .arc()
        })
        .collect();
    let template = NodeTemplate {
        node: NodeBuilder::new("ng-1", 16_000, 64 * GI)
            .zone("zone-a")
            .pods(110)
            .build(),
        daemonset_pods: vec![
            PodBuilder::new("kube-proxy", 100, 128 * MI)
                .owner("DaemonSet", "kube-proxy")
                .arc(),
            PodBuilder::new("node-exporter", 50, 64 * MI)
                .owner("DaemonSet", "exporter")
                .arc(),
        ],
    };
    let first = estimate(&mut snap, &pending, &template, EstimatorLimits::unlimited())
        .expect("consistent input");
    // 15 pods of 1 CPU fit next to 150m of DaemonSets on 16 CPU.
    assert_eq!(first.node_count, 2000usize.div_ceil(15));
    c.bench_function("estimate/2000_pods/1000_nodes", |b| {
        b.iter(|| {
            let e = estimate(&mut snap, &pending, &template, EstimatorLimits::unlimited())
                .expect("consistent input");
            black_box(e.node_count)
        })
    });
}

/// (c') The estimator where prepared predicate state is not trivial: 200 and 2,000 plain pending
/// pods with 10% of the existing pods carrying anti-affinity terms, and 200 pending pods with a
/// zone spread constraint.
fn estimator_constrained(c: &mut Criterion) {
    let template = NodeTemplate {
        node: NodeBuilder::new("ng-1", 16_000, 64 * GI)
            .zone("zone-a")
            .pods(110)
            .build(),
        daemonset_pods: vec![],
    };
    let pending = |n: usize, spread: bool| -> Vec<Arc<Pod>> {
        (0..n)
            .map(|i| {
                let owner = format!("pending-{}", i % 20);
                let mut b = PodBuilder::new(&format!("pending-pod-{i}"), 1000, 2 * GI)
                    .owner("ReplicaSet", &owner)
                    .label("app", &owner);
                if spread {
                    b = b.spread("app", &owner, ZONE, 1, None);
                }
                b.arc()
            })
            .collect()
    };
    let shape = Shape {
        nodes: 1000,
        pods_per_node: 30,
        anti_affinity_percent: 10,
    };
    let mut anti = cluster(shape, 5);
    let plain = pending(200, false);
    c.bench_function("estimate/200_pods/1000_nodes_10pct_anti_affinity", |b| {
        b.iter(|| {
            let e = estimate(&mut anti, &plain, &template, EstimatorLimits::unlimited())
                .expect("consistent input");
            black_box(e.node_count)
        })
    });
    let plain_2000 = pending(2000, false);
    c.bench_function("estimate/2000_pods/1000_nodes_10pct_anti_affinity", |b| {
        b.iter(|| {
            let e = estimate(
                &mut anti,
                &plain_2000,
                &template,
                EstimatorLimits::unlimited(),
            )
            .expect("consistent input");
            black_box(e.node_count)
        })
    });
    let mut snap = cluster(
        Shape {
            anti_affinity_percent: 0,
            ..shape
        },
        6,
    );
    let spread = pending(200, true);
    c.bench_function("estimate/200_spread_pods/1000_nodes", |b| {
        b.iter(|| {
            let e = estimate(&mut snap, &spread, &template, EstimatorLimits::unlimited())
                .expect("consistent input");
            black_box(e.node_count)
        })
    });
}

criterion_group! {
    name = slow;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5));
    targets = estimator_constrained
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = predicates, fork_revert, estimator
}
criterion_main!(benches, slow);

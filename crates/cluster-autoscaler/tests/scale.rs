//! At scale: the real `cluster-autoscaler run` binary against the simulated world served by
//! `autoscaler-facade`, measuring what issue 10 promises for the `run` mode:
//! - the reaction time from a pod becoming unschedulable to the scale request reaching the API
//!   (p99 ≤ 1 s at 1,000 nodes), and
//! - the peak resident memory of the process (≤ 1 GiB at 5,000 nodes and 150,000 pods), and
//! - at 15,000 nodes, 450,000 running and 50,000 pending pods (issue 20): ≤ 2 GiB peak RSS and
//!   ≤ 10 s from the start of the process to the end of its first loop.
//!
//! Both tests are `#[ignore]`d (minutes of work, gigabytes of memory): the figures are taken
//! with a release build,
//! `cargo test --release -p cluster-autoscaler --test scale -- --ignored --nocapture --test-threads=1`.
//! They print their figures and assert the targets. Knobs, for development and diagnosis:
//! `SCALE_NODES=<n>` shrinks the cluster (the targets are then asserted on the smaller one),
//! `SCALE_SAMPLES=<n>` sets the reaction samples (25), `SCALE_ARGS="--v=4"` adds flags to the
//! binary, `SCALE_WRAP="heaptrack -o /tmp/ca"` runs it under a profiler.

use std::path::Path;
use std::time::{Duration, Instant};

use autoscaler_facade::{Facade, FacadeHandle, FacadeOptions, Verb};
use autoscaler_world::{NodeGroupSpec, ProvisioningDelay, Restart, World, WorldConfig};
use serde_json::{Value, json};

mod support;
use support::Autoscaler;

/// Namespace of the MachineDeployments.
const NS: &str = "capi";
/// Pods per node of the running workload: 30 × 530m fill 15.9 of 16 CPUs, so a 31st does not
/// fit, nor does any pod asking for more than 100m.
const PODS_PER_NODE: usize = 30;
const POD_CPU: &str = "530m";
const POD_MEMORY: &str = "2Gi";

impl Autoscaler {
    /// Starts the binary against `kubeconfig` without leader election, plus `extra` flags.
    fn start(kubeconfig: &Path, extra: &[&str]) -> Autoscaler {
        // `SCALE_WRAP="heaptrack -o /tmp/ca"` runs the binary under a profiler (the memory
        // read from /proc is then the wrapper's, and killing the wrapper may leave the binary
        // running: end it by its pid).
        let wrap = std::env::var("SCALE_WRAP").unwrap_or_default();
        let wrapper: Vec<&str> = wrap.split_whitespace().collect();
        // `SCALE_ARGS="--v=4"`: more flags, for diagnosis.
        let more = std::env::var("SCALE_ARGS").unwrap_or_default();
        let mut args = vec![
            "--namespace=kube-system",
            "--leader-elect=false",
            "--scan-interval=10s",
            "--max-node-provision-time=15m",
        ];
        args.extend_from_slice(extra);
        args.extend(more.split_whitespace());
        if !more.contains("--v=") {
            args.push("--v=1");
        }
        Autoscaler::spawn("scale", "ca-scale", kubeconfig, &wrapper, &args)
    }

    /// Loops run so far.
    fn loops(&self) -> u64 {
        self.metric_where(
            "cluster_autoscaler_function_duration_seconds_count",
            "function=\"main\"",
        ) as u64
    }

    /// `function=seconds` of every function timed in the loops so far (the sums of
    /// `cluster_autoscaler_function_duration_seconds`), for saying where a loop's time went.
    fn function_seconds(&self) -> String {
        let Some((200, body)) = self.get("/metrics") else {
            return String::new();
        };
        let prefix = "cluster_autoscaler_function_duration_seconds_sum{function=\"";
        body.lines()
            .filter_map(|l| {
                let (name, rest) = l.strip_prefix(prefix)?.split_once('"')?;
                let secs: f64 = rest.rsplit(' ').next()?.parse().ok()?;
                Some(format!("{name}={secs:.3}"))
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn healthy(&self) -> bool {
        self.get("/health-check").is_some_and(|(c, _)| c == 200)
    }

    /// `(VmHWM, VmRSS)` of the process, in bytes.
    fn memory(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let kib = |field: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
                .unwrap_or(0)
                * 1024
        };
        (kib("VmHWM:"), kib("VmRSS:"))
    }
}

/// Polls `cond` every `every` until it holds or `timeout` passes; panics with `what` otherwise.
async fn wait_for(what: &str, timeout: Duration, every: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + timeout;
    loop {
        if cond() {
            return;
        }
        if Instant::now() >= end {
            panic!("timed out after {timeout:?} waiting for: {what}");
        }
        tokio::time::sleep(every).await;
    }
}

/// The cluster's node count: `SCALE_NODES` or `default`.
fn nodes_wanted(default: usize) -> usize {
    std::env::var("SCALE_NODES")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

/// A world with `groups` MachineDeployments (`md-0`, ...) sharing `nodes` Ready nodes of
/// 16 CPU / 64 GiB / 110 pods (each group may grow by `headroom` nodes), each running 30 pods
/// of a ReplicaSet, all bound and Running. New machines take `delay` virtual time.
///
/// The pods are created bound (`spec.nodeName`), as the scheduler would have left them: placing
/// them through the world's scheduler scores every node for every pod, which took 126 s at
/// 5,000 nodes and would take most of an hour at 15,000. The world does not run their
/// ReplicaSet (their owner reference names it, as a Deployment's pods do); nothing in these
/// tests deletes them.
fn full_world(nodes: usize, groups: usize, headroom: u32, delay: ProvisioningDelay) -> World {
    let mut w = World::new(WorldConfig {
        default_delay: ProvisioningDelay {
            min_ms: 1_000,
            max_ms: 1_000,
        },
        ..WorldConfig::default()
    });
    let groups = groups.clamp(1, nodes.max(1));
    for g in 0..groups {
        let n = (nodes / groups + usize::from(g < nodes % groups)) as u32;
        w.add_node_group(&NodeGroupSpec {
            namespace: NS.into(),
            name: format!("md-{g}"),
            replicas: n,
            min_size: n,
            max_size: n + headroom,
            cpu: "16".into(),
            memory: "64Gi".into(),
            max_pods: 110,
            ..Default::default()
        })
        .expect("node group");
    }
    // The machines become nodes.
    w.advance(1_500);
    let names = w.node_names();
    assert_eq!(names.len(), nodes, "every machine has its node");
    for (i, node) in names.iter().enumerate() {
        for j in 0..PODS_PER_NODE {
            // A pod's life far beyond any test: it never ends by itself.
            let forever = 100 * 365 * 24 * 3_600 * 1_000;
            w.add_replayed_pod(
                web_pod(&format!("web-{i}-{j}"), node),
                forever,
                Restart::Resume,
            )
            .expect("running pod");
        }
    }
    w.advance(1_000);
    assert_eq!(w.pending_count(), 0, "the workload is all bound");
    assert_eq!(w.live_pods().len(), nodes * PODS_PER_NODE, "every pod runs");
    for g in 0..groups {
        w.set_provisioning_delay(&format!("md-{g}"), delay);
    }
    w
}

/// A pod of the ReplicaSet `web` (owned as a Deployment's pods are), bound to `node`.
fn web_pod(name: &str, node: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "web-5d9c7b", "uid": "0b6f3c1e-web", "controller": true,
                "blockOwnerDeletion": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": POD_CPU, "memory": POD_MEMORY}}}]},
    })
}

/// A bare pod asking for 15 CPUs: it fits on no full node, and on an empty new one.
fn big_pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "big"}},
        "spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": "15", "memory": "8Gi"}}}]},
    })
}

/// Whether the pod is marked `PodScheduled=False, reason=Unschedulable` in the world.
fn unschedulable(w: &World, name: &str) -> bool {
    let k = autoscaler_world::object_key("", "Pod", "default", name);
    w.objects().get(&k).is_some_and(|p| {
        p.pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c["type"] == "PodScheduled"
                        && c["status"] == "False"
                        && c["reason"] == "Unschedulable"
                })
            })
    })
}

fn bound(w: &World, name: &str) -> bool {
    w.live_pods()
        .iter()
        .any(|(_, n, node)| n == name && node.is_some())
}

/// Scale requests to MachineDeployments (PATCH or PUT of their `scale` subresource) received
/// at or after `since`.
fn scale_requests(h: &FacadeHandle, since: Duration) -> Vec<Duration> {
    h.writes()
        .into_iter()
        .filter(|r| r.received >= since)
        .filter(|r| matches!(r.verb, Verb::Patch | Verb::Update))
        .filter(|r| r.path.contains("/machinedeployments/") && r.path.ends_with("/scale"))
        .map(|r| r.received)
        .collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    // Nearest rank.
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Reaction time at 1,000 nodes: from the world's scheduler marking a 15-CPU pod Unschedulable
/// to the facade receiving the MachineDeployment scale request, over ≥ 20 independent samples
/// (each waits for the previous pod to run on its new node). The scan interval is 10 s, so only
/// the unschedulable-pod trigger explains a faster reaction.
///
/// `cargo test --release -p cluster-autoscaler --test scale -- --ignored --nocapture --test-threads=1 reaction_time_1000_nodes`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "heavy: run with --release --ignored"]
async fn reaction_time_1000_nodes() {
    let nodes = nodes_wanted(1_000);
    let samples: usize = std::env::var("SCALE_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(25);
    let setup = Instant::now();
    // New machines take 2 virtual seconds (0.2 s real at 10×).
    let mut w = full_world(
        nodes,
        4,
        samples as u32,
        ProvisioningDelay {
            min_ms: 2_000,
            max_ms: 2_000,
        },
    );
    let rv = w.resource_version();
    w.forget_events_upto(rv);
    let world_setup = setup.elapsed();
    let h = Facade::start(
        w,
        FacadeOptions {
            speed: 10.0,
            ..FacadeOptions::default()
        },
    )
    .await
    .expect("facade");
    h.compact_watch_log();
    println!(
        "reaction_time: {nodes} nodes, {} pods; world built in {:.2?}",
        nodes * PODS_PER_NODE,
        world_setup
    );

    let mut ca = Autoscaler::start(h.kubeconfig_path(), &[]);
    wait_for(
        "the autoscaler healthy and one loop run",
        Duration::from_secs(600),
        Duration::from_millis(200),
        || ca.healthy() && ca.loops() >= 1,
    )
    .await;
    println!(
        "reaction_time: first loop done {:.2?} after start",
        ca.started.elapsed()
    );

    let mut reactions = Vec::with_capacity(samples);
    for i in 0..samples {
        assert!(ca.running(), "the autoscaler is running");
        let name = format!("big-{i}");
        h.with_world(|w| w.add_pod(big_pod(&name), None))
            .expect("add pod");
        // The moment the world marks it is observed by polling every millisecond, without
        // waking the watches.
        wait_for(
            "the pod marked Unschedulable",
            Duration::from_secs(30),
            Duration::from_millis(1),
            || h.read_world(|w| unschedulable(w, &name)),
        )
        .await;
        let marked = h.elapsed();
        let mut request = None;
        wait_for(
            "the scale request",
            Duration::from_secs(60),
            Duration::from_millis(10),
            || {
                request = scale_requests(&h, marked).first().copied();
                request.is_some()
            },
        )
        .await;
        let Some(at) = request else {
            unreachable!("waited for it")
        };
        let reaction = at - marked;
        println!("reaction_time: sample {i}: {reaction:.2?}");
        reactions.push(reaction);
        wait_for(
            "the pod running on its new node",
            Duration::from_secs(60),
            Duration::from_millis(20),
            || h.read_world(|w| bound(w, &name)),
        )
        .await;
    }
    reactions.sort();
    let (median, p99, max) = (
        percentile(&reactions, 50.0),
        percentile(&reactions, 99.0),
        reactions.last().copied().unwrap_or_default(),
    );
    println!(
        "reaction_time: {nodes} nodes, n={}: median {median:.3?}, p99 {p99:.3?}, max {max:.3?}",
        reactions.len()
    );
    assert!(
        p99 <= Duration::from_secs(1),
        "p99 reaction {p99:?} > 1 s at {nodes} nodes"
    );
}

/// What one start of the binary on a full world is held to.
struct Goals {
    /// MachineDeployments sharing the nodes.
    groups: usize,
    /// Unschedulable pods (15 CPU each, without an owner) when it starts.
    pending: usize,
    /// Most peak RSS, in bytes.
    peak_rss: u64,
    /// Longest time from the process's start to the end of its first loop (`None`: not
    /// asserted).
    first_loop: Option<Duration>,
}

/// Starts the binary on `nodes` nodes with 30 Running pods each and `goals.pending` pending
/// ones, waits for two loops and asserts the peak RSS (`VmHWM`) and the time to the first loop.
async fn start_at_scale(name: &str, nodes: usize, goals: Goals) {
    let setup = Instant::now();
    // New machines take 10 virtual minutes: none comes up while the test runs.
    let mut w = full_world(
        nodes,
        goals.groups,
        100,
        ProvisioningDelay {
            min_ms: 600_000,
            max_ms: 600_000,
        },
    );
    let built = setup.elapsed();
    for i in 0..goals.pending {
        w.add_pod(big_pod(&format!("pending-{i}")), None)
            .expect("add pod");
    }
    // Their Unschedulable conditions.
    w.advance(1_000);
    let rv = w.resource_version();
    w.forget_events_upto(rv);
    let world_setup = setup.elapsed();
    let h = Facade::start(w, FacadeOptions::default())
        .await
        .expect("facade");
    h.compact_watch_log();
    println!(
        "{name}: {nodes} nodes in {} groups, {} running pods, {} pending; world built in \
         {:.2?} (nodes and bound pods {:.2?})",
        goals.groups,
        nodes * PODS_PER_NODE,
        goals.pending,
        world_setup,
        built
    );

    let ca = Autoscaler::start(h.kubeconfig_path(), &[]);
    let mut first_loop = None;
    wait_for(
        "the autoscaler healthy and two loops run",
        Duration::from_secs(1_200),
        Duration::from_millis(100),
        || {
            let loops = ca.loops();
            if loops >= 1 && first_loop.is_none() {
                first_loop = Some(ca.started.elapsed());
                println!(
                    "{name}: after {loops} loop(s), seconds by function: {}",
                    ca.function_seconds()
                );
            }
            ca.healthy() && loops >= 2
        },
    )
    .await;
    let (hwm, rss) = ca.memory();
    if let Some(synced) = ca.log().lines().find(|l| l.contains("caches synced")) {
        println!("{name}: {synced}");
    }
    let scale_ups = scale_requests(&h, Duration::ZERO).len();
    let first_loop = first_loop.unwrap_or_default();
    println!(
        "{name}: first loop done {first_loop:.2?} after start, two loops {:.2?}; VmHWM {:.1} MiB, \
         VmRSS {:.1} MiB; {scale_ups} scale requests",
        ca.started.elapsed(),
        mib(hwm),
        mib(rss)
    );
    assert!(scale_ups >= 1, "the pending pods asked for a scale-up");
    assert!(hwm > 0, "VmHWM read from /proc");
    assert!(
        hwm <= goals.peak_rss,
        "peak RSS {:.1} MiB > {:.0} MiB at {nodes} nodes",
        mib(hwm),
        mib(goals.peak_rss)
    );
    if let Some(limit) = goals.first_loop {
        assert!(
            first_loop <= limit,
            "first loop {first_loop:.2?} after start > {limit:?} at {nodes} nodes"
        );
    }
}

/// Memory at 5,000 nodes and 150,000 Running pods (plus 300 pending ones that ask for a
/// scale-up): the process's peak RSS (`VmHWM`) after it synced and ran two loops.
///
/// `cargo test --release -p cluster-autoscaler --test scale -- --ignored --nocapture --test-threads=1 rss_5000_nodes_150000_pods`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "heavy: run with --release --ignored"]
async fn rss_5000_nodes_150000_pods() {
    let nodes = nodes_wanted(5_000);
    let goals = Goals {
        groups: 10,
        pending: (nodes / 16).clamp(1, 300),
        peak_rss: 1 << 30,
        first_loop: None,
    };
    start_at_scale("rss", nodes, goals).await;
}

/// The largest managed clusters: 15,000 nodes in 100 MachineDeployments, 450,000 Running pods
/// and 50,000 pending ones (15 CPU each: none fits, so they ask for a scale-up). Goals: peak
/// RSS ≤ 2 GiB and the first loop done ≤ 10 s after the process started (listing every object
/// from the facade included). The test process holds the world and serves it (several GiB).
///
/// `cargo test --release -p cluster-autoscaler --test scale -- --ignored --nocapture --test-threads=1 first_loop_15000_nodes_450000_pods`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "heavy: run with --release --ignored"]
async fn first_loop_15000_nodes_450000_pods() {
    let nodes = nodes_wanted(15_000);
    let goals = Goals {
        groups: 100.min(nodes),
        pending: (nodes * 10 / 3).max(1),
        peak_rss: 2 << 30,
        first_loop: Some(Duration::from_secs(10)),
    };
    start_at_scale("first_loop_15k", nodes, goals).await;
}

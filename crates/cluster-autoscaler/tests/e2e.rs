//! End to end: the real `cluster-autoscaler run` binary against the simulated world served as a
//! Kubernetes REST API by `autoscaler-facade` over loopback HTTP (real kube-rs client, watches,
//! leader election, actuation). Each test asserts on the world (replicas, nodes, pods, Lease,
//! ConfigMap, events) and on the process's `/metrics` and `/health-check`.

use std::path::Path;
use std::time::Duration;

use autoscaler_facade::{
    Facade, FacadeHandle, FacadeOptions, FaultAction, FaultRule, Malformation, Verb,
};
use autoscaler_world::{NodeGroupSpec, ProvisioningDelay, World, WorldConfig};
use serde_json::{Value, json};

mod support;
use support::{Autoscaler, free_port};

/// The MachineDeployment's namespace and name.
const NS: &str = "capi";
const MD: &str = "md-a";

impl Autoscaler {
    /// Starts the binary against `kubeconfig`, as `pod_name`, with short timings plus `extra`.
    fn start(kubeconfig: &Path, pod_name: &str, extra: &[&str]) -> Autoscaler {
        let mut args = vec![
            "--namespace=kube-system",
            "--scan-interval=1s",
            "--scale-down-unneeded-time=3s",
            "--scale-down-delay-after-add=3s",
            "--scale-down-delay-after-delete=0s",
            "--scale-down-delay-after-failure=3s",
            "--leader-elect-lease-duration=3s",
            "--leader-elect-renew-deadline=2s",
            "--leader-elect-retry-period=500ms",
            "--max-node-provision-time=2m",
        ];
        if !extra.iter().any(|a| a.starts_with("--v=")) {
            args.push("--v=1");
        }
        args.extend_from_slice(extra);
        Autoscaler::spawn("e2e", pod_name, kubeconfig, &[], &args)
    }
}

/// Polls `cond` every 100 ms until it holds or `timeout` passes; panics with `what` and the
/// autoscalers' logs otherwise.
async fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let end = tokio::time::Instant::now() + timeout;
    loop {
        if cond() {
            return;
        }
        if tokio::time::Instant::now() >= end {
            panic!("timed out after {timeout:?} waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A world with one empty MachineDeployment group (0..5 nodes of 4 CPUs), new machines taking
/// 5-10 virtual seconds, served at 10× speed.
async fn start_world() -> FacadeHandle {
    start_world_with(FacadeOptions::default()).await
}

/// [`start_world`], served with `options` (at 10× speed whatever they say).
async fn start_world_with(options: FacadeOptions) -> FacadeHandle {
    let mut w = World::new(WorldConfig {
        default_delay: ProvisioningDelay {
            min_ms: 5_000,
            max_ms: 10_000,
        },
        ..WorldConfig::default()
    });
    w.add_node_group(&NodeGroupSpec {
        namespace: NS.into(),
        name: MD.into(),
        replicas: 0,
        min_size: 0,
        max_size: 5,
        cpu: "4".into(),
        memory: "16Gi".into(),
        max_pods: 110,
        ..Default::default()
    })
    .expect("node group");
    Facade::start(
        w,
        FacadeOptions {
            speed: 10.0,
            ..options
        },
    )
    .await
    .expect("facade")
}

/// A bare pod asking for 3 CPUs (so each needs a node of its own).
fn big_pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "batch"}},
        "spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}]},
    })
}

fn add_pods(h: &FacadeHandle, prefix: &str, n: usize) {
    h.with_world(|w| {
        for i in 0..n {
            w.add_pod(big_pod(&format!("{prefix}-{i}")), None)
                .expect("add pod");
        }
    });
}

fn replicas(h: &FacadeHandle) -> i64 {
    h.with_world(|w| {
        w.objects()
            .list("cluster.x-k8s.io", "MachineDeployment")
            .find(|(k, _)| k.name == MD)
            .and_then(|(_, v)| v.pointer("/spec/replicas")?.as_i64())
            .unwrap_or(-1)
    })
}

fn machines(h: &FacadeHandle) -> usize {
    h.with_world(|w| w.machines_of(NS, MD).len())
}

fn group_nodes(h: &FacadeHandle) -> Vec<String> {
    h.with_world(|w| {
        w.node_names()
            .into_iter()
            .filter(|n| w.machine_of_node(n).is_some())
            .collect()
    })
}

/// Live pods whose name starts with `prefix`, with their node.
fn pods(h: &FacadeHandle, prefix: &str) -> Vec<(String, Option<String>)> {
    h.with_world(|w| {
        w.live_pods()
            .into_iter()
            .filter(|(_, n, _)| n.starts_with(prefix))
            .map(|(_, n, node)| (n, node))
            .collect()
    })
}

fn all_bound(h: &FacadeHandle, prefix: &str, n: usize) -> bool {
    let p = pods(h, prefix);
    p.len() == n && p.iter().all(|(_, node)| node.is_some())
}

fn object(h: &FacadeHandle, group: &str, kind: &str, ns: &str, name: &str) -> Option<Value> {
    h.with_world(|w| {
        w.objects()
            .list(group, kind)
            .find(|(k, _)| k.namespace == ns && k.name == name)
            .map(|(_, v)| (**v).clone())
    })
}

/// `data.status` of the status ConfigMap, if written.
fn status_text(h: &FacadeHandle) -> Option<String> {
    let cm = object(
        h,
        "",
        "ConfigMap",
        "kube-system",
        "cluster-autoscaler-status",
    )?;
    Some(cm.pointer("/data/status")?.as_str()?.to_string())
}

fn event_reasons(h: &FacadeHandle) -> Vec<String> {
    h.with_world(|w| {
        w.objects()
            .list("events.k8s.io", "Event")
            .chain(w.objects().list("", "Event"))
            .filter_map(|(_, v)| Some(v.get("reason")?.as_str()?.to_string()))
            .collect()
    })
}

/// Nodes that carried the `ToBeDeletedByClusterAutoscaler` taint at some point (read from the
/// world's change log, since a tainted empty node may be gone before a poll sees it).
fn ever_tainted_for_deletion(h: &FacadeHandle) -> std::collections::BTreeSet<String> {
    h.with_world(|w| {
        w.events_since(0)
            .iter()
            .filter(|e| e.key.group.is_empty() && e.key.kind == "Node")
            .filter(|e| {
                e.object
                    .pointer("/spec/taints")
                    .and_then(Value::as_array)
                    .is_some_and(|ts| {
                        ts.iter().any(|t| {
                            t.get("key").and_then(Value::as_str)
                                == Some("ToBeDeletedByClusterAutoscaler")
                        })
                    })
            })
            .map(|e| e.key.name.clone())
            .collect()
    })
}

/// Waits (up to 20 s) for the process to exit by itself; its exit code.
async fn exit_code(ca: &mut Autoscaler) -> Option<i32> {
    let mut status = None;
    wait_for("the process to exit", Duration::from_secs(20), || {
        status = ca.child.try_wait().ok().flatten();
        status.is_some()
    })
    .await;
    status.and_then(|s| s.code())
}

fn lease_holder(h: &FacadeHandle) -> Option<String> {
    object(
        h,
        "coordination.k8s.io",
        "Lease",
        "kube-system",
        "cluster-autoscaler",
    )?
    .pointer("/spec/holderIdentity")?
    .as_str()
    .map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_up_then_scale_down_end_to_end() {
    let h = start_world().await;
    // Faults the process must ride through: the first two node updates (taints) conflict, and
    // every scale subresource patch answers 700 ms late.
    let conflicts = h.add_fault(
        FaultRule::new(FaultAction::Conflict)
            .verb(Verb::Update)
            .resource("nodes")
            .at_most(2),
    );
    let delays = h.add_fault(
        FaultRule::new(FaultAction::Delay(Duration::from_millis(700)))
            .verb(Verb::Patch)
            .resource("machinedeployments/scale"),
    );
    // A flag asking for a feature this autoscaler does not have: accepted, and listed in the
    // status ConfigMap.
    let ca = Autoscaler::start(h.kubeconfig_path(), "ca-0", &["--parallel-scale-up=true"]);
    add_pods(&h, "job", 3);

    wait_for("replicas rise to 3", Duration::from_secs(30), || {
        replicas(&h) == 3
    })
    .await;
    wait_for(
        "3 nodes and all pods bound",
        Duration::from_secs(30),
        || group_nodes(&h).len() == 3 && all_bound(&h, "job", 3),
    )
    .await;
    assert_eq!(machines(&h), 3);
    wait_for("scaled_up_nodes_total > 0", Duration::from_secs(10), || {
        ca.metric("cluster_autoscaler_scaled_up_nodes_total") >= 3.0
    })
    .await;
    wait_for("status ConfigMap", Duration::from_secs(10), || {
        status_text(&h).is_some_and(|s| s.contains("autoscalerStatus"))
    })
    .await;
    let status = status_text(&h).unwrap_or_default();
    assert!(
        status.contains("unsupportedSettings:")
            && status.contains("--parallel-scale-up=true: the node groups"),
        "{status}"
    );
    wait_for("a TriggeredScaleUp event", Duration::from_secs(10), || {
        event_reasons(&h).iter().any(|r| r == "TriggeredScaleUp")
    })
    .await;
    assert_eq!(ca.get("/health-check").map(|(c, _)| c), Some(200));

    // The work is done: the nodes become idle and are removed.
    h.with_world(|w| {
        for i in 0..3 {
            w.delete_pod("default", &format!("job-{i}"))
                .expect("delete pod");
        }
    });
    let scaled = group_nodes(&h);
    wait_for(
        "replicas back to 0 and the nodes gone",
        Duration::from_secs(45),
        || replicas(&h) == 0 && machines(&h) == 0 && group_nodes(&h).is_empty(),
    )
    .await;
    let tainted = ever_tainted_for_deletion(&h);
    for n in &scaled {
        assert!(
            tainted.contains(n),
            "{n} was tainted ToBeDeletedByClusterAutoscaler before deletion ({tainted:?})"
        );
    }
    wait_for(
        "scaled_down_nodes_total > 0",
        Duration::from_secs(10),
        || ca.metric("cluster_autoscaler_scaled_down_nodes_total") >= 1.0,
    )
    .await;
    // Events and the status show the scale-down too.
    wait_for("a scale-down event", Duration::from_secs(10), || {
        event_reasons(&h)
            .iter()
            .any(|r| r == "ScaleDown" || r == "ScaleDownEmpty")
    })
    .await;
    wait_for(
        "the status shows the group back at 0",
        Duration::from_secs(10),
        || status_text(&h).is_some_and(|s| s.contains("cloudProviderTarget: 0")),
    )
    .await;
    let counts = h.fault_counts();
    assert_eq!(counts.per_rule[conflicts], 2, "{counts:?}");
    assert!(counts.per_rule[delays] >= 2, "{counts:?}");
    drop(ca);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_one_leader_and_failover() {
    let h = start_world().await;
    let mut replicas_ = [
        Autoscaler::start(h.kubeconfig_path(), "ca-a", &[]),
        Autoscaler::start(h.kubeconfig_path(), "ca-b", &[]),
    ];
    let names = ["ca-a", "ca-b"];
    wait_for("a Lease holder", Duration::from_secs(20), || {
        lease_holder(&h).is_some_and(|n| names.contains(&n.as_str()))
    })
    .await;
    let first = lease_holder(&h).expect("holder");
    let leader = names
        .iter()
        .position(|n| *n == first)
        .expect("known holder");

    add_pods(&h, "one", 2);
    wait_for("replicas rise to 2", Duration::from_secs(30), || {
        replicas(&h) == 2
    })
    .await;
    wait_for("both pods bound", Duration::from_secs(30), || {
        all_bound(&h, "one", 2)
    })
    .await;
    // A few more loops of both replicas: nobody asks for more than the one decision did.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(replicas(&h), 2, "no duplicate scale-up");
    assert_eq!(machines(&h), 2);
    assert_eq!(lease_holder(&h).as_deref(), Some(first.as_str()));
    let standby = 1 - leader;
    // The standby says who leads, once.
    let says = format!("holder={first}");
    let standby_log = replicas_[standby].log();
    assert_eq!(
        standby_log
            .lines()
            .filter(|l| l.contains("standing by") && l.contains(&says))
            .count(),
        1,
        "{standby_log}"
    );
    assert!(replicas_[leader].metric("cluster_autoscaler_scaled_up_nodes_total") >= 2.0);
    assert_eq!(
        replicas_[standby].metric("cluster_autoscaler_scaled_up_nodes_total"),
        0.0,
        "the standby did not act"
    );

    // The leader dies without releasing the Lease; the standby takes over after it expires.
    replicas_[leader].kill();
    wait_for(
        "the standby holds the Lease",
        Duration::from_secs(3 + 5),
        || lease_holder(&h).as_deref() == Some(names[standby]),
    )
    .await;
    add_pods(&h, "two", 2);
    wait_for("replicas rise to 4", Duration::from_secs(30), || {
        replicas(&h) == 4
    })
    .await;
    wait_for("the new pods bound", Duration::from_secs(30), || {
        all_bound(&h, "two", 2) && all_bound(&h, "one", 2)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(replicas(&h), 4, "no duplicate scale-up after failover");
    assert!(replicas_[standby].metric("cluster_autoscaler_scaled_up_nodes_total") >= 2.0);
    drop(replicas_);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_server_is_retried_not_fatal() {
    let kubeconfig = unreachable_kubeconfig("unreachable");
    let mut ca = Autoscaler::start(&kubeconfig, "ca-x", &[]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(ca.running(), "still running:\n{}", ca.log());
    let log = ca.log();
    assert!(log.contains("retrying"), "logs its retries:\n{log}");
    assert!(!log.contains("panicked"), "{log}");
    assert_eq!(ca.get("/health-check").map(|(c, _)| c), Some(200));
    ca.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_faults_are_survived_and_the_cluster_converges() {
    let h = start_world().await;
    // For the first 5 s the pods cannot be listed or watched, and node watches are cut every
    // second; windows are measured from the facade's start.
    let window = |from: u64, until: u64| (Duration::from_secs(from), Duration::from_secs(until));
    let (from, until) = window(0, 5);
    let list = h.add_fault(
        FaultRule::new(FaultAction::InternalError)
            .verb(Verb::List)
            .resource("pods")
            .during(from, until),
    );
    let watch = h.add_fault(
        FaultRule::new(FaultAction::InternalError)
            .verb(Verb::Watch)
            .resource("pods")
            .during(from, until),
    );
    let cut = h.add_fault(
        FaultRule::new(FaultAction::DropWatchAfter(Duration::from_secs(1)))
            .verb(Verb::Watch)
            .resource("nodes")
            .during(from, until),
    );
    add_pods(&h, "job", 2);
    let mut ca = Autoscaler::start(h.kubeconfig_path(), "ca-f", &[]);

    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(ca.running(), "survives the 500s");
    assert_eq!(replicas(&h), 0, "no decision without the pods");
    wait_for("replicas rise to 2", Duration::from_secs(30), || {
        replicas(&h) == 2
    })
    .await;
    wait_for("both pods bound", Duration::from_secs(30), || {
        all_bound(&h, "job", 2)
    })
    .await;
    let counts = h.fault_counts();
    // Pods come as a streaming list (a watch) where the server serves one, in pages otherwise.
    assert!(
        counts.per_rule[list] + counts.per_rule[watch] > 0,
        "the first pod lists were refused: {counts:?}"
    );
    assert!(counts.internal_errors > 0);
    assert!(
        counts.per_rule[cut] > 0 || counts.per_rule[watch] > 0,
        "{counts:?}"
    );
    assert!(ca.running());
    assert_eq!(ca.get("/health-check").map(|(c, _)| c), Some(200));
    let log = ca.log();
    assert!(!log.contains("panicked"), "{log}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(replicas(&h), 2, "no duplicate scale-up after the relists");
    ca.kill();
    h.shutdown().await;
}

/// Nodes carrying the `ToBeDeletedByClusterAutoscaler` taint now.
fn tainted_now(h: &FacadeHandle) -> Vec<String> {
    h.with_world(|w| {
        w.objects()
            .list("", "Node")
            .filter(|(_, n)| {
                n.pointer("/spec/taints")
                    .and_then(Value::as_array)
                    .is_some_and(|ts| {
                        ts.iter()
                            .any(|t| t["key"] == "ToBeDeletedByClusterAutoscaler")
                    })
            })
            .map(|(k, _)| k.name.clone())
            .collect()
    })
}

/// The ReplicaSet `web` of two 600m pods.
fn add_web(w: &mut autoscaler_world::World) {
    let template = autoscaler_world::PodTemplate::from_spec(
        [("app".to_string(), "web".to_string())].into(),
        json!({"containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": "600m", "memory": "128Mi"}}}]}),
    );
    w.add_replica_set(autoscaler_world::ReplicaSetSpec {
        namespace: "default".into(),
        name: "web".into(),
        template,
        replicas: 2,
        schedule: Vec::new(),
        pod_lifetime_ms: None,
        deployment: false,
    })
    .expect("replica set");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_drain_then_restarted_leaves_no_taint_and_loses_no_pod() {
    let h = start_world().await;
    // Two nodes: each holds a 3-CPU bare pod and one replica of `web` (a ReplicaSet of two
    // 600m pods, so one fits beside a big pod, with a PodDisruptionBudget allowing one
    // disruption). Without the big pods, either node's web pod fits on the other: a drain.
    h.with_world(|w| {
        add_web(w);
        w.apply(
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}}),
        )
        .expect("pdb");
    });
    add_pods(&h, "big", 2);
    let mut first = Autoscaler::start(h.kubeconfig_path(), "ca-1", &[]);
    wait_for(
        "two nodes, every pod running",
        Duration::from_secs(40),
        || group_nodes(&h).len() == 2 && all_bound(&h, "big", 2) && all_bound(&h, "web", 2),
    )
    .await;

    // From now on evictions are refused for 12 s, so a drain stalls; the big pods go, the
    // nodes become unneeded and one is picked for draining.
    let now = h.elapsed();
    let refused = h.add_fault(
        FaultRule::new(FaultAction::TooManyRequests)
            .verb(Verb::Create)
            .resource("pods/eviction")
            .during(now, now + Duration::from_secs(12)),
    );
    h.with_world(|w| {
        for p in ["big-0", "big-1"] {
            w.delete_pod("default", p).expect("delete big pod");
        }
    });
    wait_for("a drain under way", Duration::from_secs(20), || {
        !tainted_now(&h).is_empty() && h.fault_counts().per_rule[refused] > 0
    })
    .await;
    let draining = tainted_now(&h);
    first.kill();

    // The successor removes the taint its predecessor left before doing anything else.
    let second = Autoscaler::start(h.kubeconfig_path(), "ca-2", &[]);
    wait_for(
        "the predecessor's taint removed",
        Duration::from_secs(20),
        || {
            second
                .log()
                .contains("removed autoscaler taints left by a predecessor")
        },
    )
    .await;
    // Once evictions are allowed again the drain completes: one node left, untainted, both web
    // pods running (none lost), the budget never broken.
    wait_for(
        "one node left, nothing tainted",
        Duration::from_secs(60),
        || group_nodes(&h).len() == 1 && tainted_now(&h).is_empty() && all_bound(&h, "web", 2),
    )
    .await;
    assert!(draining.iter().all(|n| !tainted_now(&h).contains(n)));
    let budgets = h.with_world(|w| w.budget_statuses());
    assert!(
        budgets.iter().all(|b| b.healthy >= b.desired),
        "{budgets:?}"
    );
    assert!(!second.log().contains("panicked"));
    drop(second);
    h.shutdown().await;
}

/// The status ConfigMap and `cluster_autoscaler_node_groups_count` say there is nothing to scale
/// while the Cluster API is not installed; once its CRDs appear the process watches them and
/// scales up, without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_api_installed_after_start_becomes_node_groups() {
    let h = start_world_with(FacadeOptions {
        withheld: vec!["cluster.x-k8s.io/v1beta1".into()],
        ..FacadeOptions::default()
    })
    .await;
    let ca = Autoscaler::start(h.kubeconfig_path(), "ca-0", &[]);
    add_pods(&h, "late", 2);
    wait_for(
        "the status says there are no node groups",
        Duration::from_secs(20),
        || status_text(&h).is_some_and(|s| s.contains("No node groups")),
    )
    .await;
    let zero_groups = |ca: &Autoscaler| {
        ca.get("/metrics").is_some_and(|(_, m)| {
            m.lines().any(|l| {
                l == "cluster_autoscaler_node_groups_count{node_group_type=\"autoscaled\"} 0"
            })
        })
    };
    assert!(zero_groups(&ca), "the metric shows no node groups");
    assert_eq!(replicas(&h), 0);
    assert_eq!(ca.get("/health-check").map(|(c, _)| c), Some(200));

    h.install("cluster.x-k8s.io/v1beta1");
    wait_for("replicas rise to 2", Duration::from_secs(30), || {
        replicas(&h) == 2
    })
    .await;
    wait_for("both pods bound", Duration::from_secs(30), || {
        all_bound(&h, "late", 2)
    })
    .await;
    wait_for(
        "the status shows the group",
        Duration::from_secs(10),
        || status_text(&h).is_some_and(|s| s.contains(MD) && !s.contains("No node groups")),
    )
    .await;
    assert!(
        ca.metric_where(
            "cluster_autoscaler_node_groups_count",
            "node_group_type=\"autoscaled\""
        ) == 1.0
    );
    let log = ca.log();
    assert!(
        !log.lines()
            .any(|l| l.contains("WARN") && l.contains("not served")),
        "a group not served at start is not a warning"
    );

    // The CRDs are removed again: the group leaves the view, nothing breaks.
    h.withhold("cluster.x-k8s.io/v1beta1");
    wait_for(
        "the metric back at no node groups",
        Duration::from_secs(20),
        || zero_groups(&ca),
    )
    .await;
    wait_for("the status says so again", Duration::from_secs(10), || {
        status_text(&h).is_some_and(|s| s.contains("No node groups"))
    })
    .await;
    let mut ca = ca;
    assert!(ca.running());
    assert_eq!(ca.get("/health-check").map(|(c, _)| c), Some(200));
    drop(ca);
    h.shutdown().await;
}

/// An API the autoscaler needs that the server stops serving while it runs fails
/// `/health-check`, naming it, rather than leaving the process waiting for its cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_needed_api_removed_later_fails_the_health_check() {
    let h = start_world().await;
    let ca = Autoscaler::start(h.kubeconfig_path(), "ca-0", &[]);
    wait_for("a Lease holder", Duration::from_secs(20), || {
        lease_holder(&h).is_some()
    })
    .await;
    assert_eq!(ca.get("/health-check").map(|(c, _)| c), Some(200));
    h.withhold("policy/v1");
    let mut last = None;
    wait_for("the health check to fail", Duration::from_secs(30), || {
        last = ca.get("/health-check");
        last.as_ref().is_some_and(|(c, _)| *c == 500)
    })
    .await;
    let (_, body) = last.expect("an answer");
    assert!(body.contains("policy/v1 poddisruptionbudgets"), "{body}");
    // Served again: healthy again.
    h.install("policy/v1");
    wait_for(
        "the health check to recover",
        Duration::from_secs(60),
        || ca.get("/health-check").is_some_and(|(c, _)| c == 200),
    )
    .await;
    drop(ca);
    h.shutdown().await;
}

/// An API server too old to serve `policy/v1` stops the process at start, before it takes the
/// Lease, with exit code 2 and a message naming what is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_without_policy_v1_is_refused_with_exit_2() {
    let h = start_world_with(FacadeOptions {
        withheld: vec!["policy/v1".into()],
        version: autoscaler_facade::ServerVersion {
            major: 1,
            minor: 20,
        },
        ..FacadeOptions::default()
    })
    .await;
    let mut ca = Autoscaler::start(h.kubeconfig_path(), "ca-0", &[]);
    assert_eq!(exit_code(&mut ca).await, Some(2), "{}", ca.log());
    let log = ca.log();
    assert!(log.contains("v1.20.0"), "{log}");
    assert!(log.contains("1.22"), "{log}");
    assert!(lease_holder(&h).is_none(), "no Lease was taken");

    // A server claiming a supported version but not serving policy/v1: named.
    let h2 = start_world_with(FacadeOptions {
        withheld: vec!["policy/v1".into()],
        ..FacadeOptions::default()
    })
    .await;
    let mut ca = Autoscaler::start(h2.kubeconfig_path(), "ca-1", &[]);
    assert_eq!(exit_code(&mut ca).await, Some(2), "{}", ca.log());
    let log = ca.log();
    assert!(
        log.contains("policy/v1 poddisruptionbudgets") && log.contains("policy/v1 evictions"),
        "{log}"
    );
    assert!(lease_holder(&h2).is_none(), "no Lease was taken");
    h.shutdown().await;
    h2.shutdown().await;
}

/// Sends SIGTERM to the process and waits (up to 20 s) for it to exit; its exit status.
fn terminate(ca: &mut Autoscaler) -> std::process::ExitStatus {
    let sent = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(ca.child.id().to_string())
        .status()
        .expect("kill -TERM");
    assert!(sent.success());
    let end = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = ca.child.try_wait().expect("wait") {
            return status;
        }
        assert!(
            std::time::Instant::now() < end,
            "no exit after SIGTERM:\n{}",
            ca.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Events in the world as `reason object: message (count)` lines, oldest first.
fn event_lines(h: &FacadeHandle) -> Vec<String> {
    let mut events: Vec<(String, String)> = h.with_world(|w| {
        w.objects()
            .list("", "Event")
            .map(|(_, v)| {
                let s = |p: &str| {
                    v.pointer(p)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                };
                let count = v.pointer("/count").and_then(Value::as_i64).unwrap_or(1);
                (
                    s("/firstTimestamp"),
                    format!(
                        "{} {} {}/{}: {} (x{count})",
                        s("/type"),
                        s("/reason"),
                        s("/involvedObject/kind"),
                        s("/involvedObject/name"),
                        s("/message")
                    ),
                )
            })
            .collect()
    });
    events.sort();
    events.into_iter().map(|(_, l)| l).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_v4_decisions_are_logged_http_traces_are_not_and_sigterm_ends_with_a_line() {
    let h = start_world().await;
    // As in the drain test: two nodes, each with a big bare pod and one `web` replica; once the
    // big pods go, one node is drained (its web pod fits on the other) and deleted.
    h.with_world(|w| {
        add_web(w);
    });
    add_pods(&h, "big", 2);
    // A pod no node of the group can hold: the same NotTriggerScaleUp every loop, one Event
    // whose count grows.
    h.with_world(|w| {
        let mut pod = big_pod("huge");
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("64");
        w.add_pod(pod, None).expect("add pod");
    });
    let mut ca = Autoscaler::start(h.kubeconfig_path(), "ca-v4", &["--v=4"]);
    wait_for(
        "two nodes, every pod running",
        Duration::from_secs(40),
        || group_nodes(&h).len() == 2 && all_bound(&h, "big", 2) && all_bound(&h, "web", 2),
    )
    .await;
    h.with_world(|w| {
        for p in ["big-0", "big-1"] {
            w.delete_pod("default", p).expect("delete big pod");
        }
    });
    wait_for(
        "one node drained and deleted",
        Duration::from_secs(40),
        || {
            group_nodes(&h).len() == 1
                && all_bound(&h, "web", 2)
                && ca.log().contains("scaled down")
        },
    )
    .await;
    let status = terminate(&mut ca);
    assert!(status.success(), "{status:?}");
    let log = ca.log();
    for line in [
        "Scale-up: final plan [{MachineDeployment/capi/md-a 0->",
        "node groups considered: MachineDeployment/capi/md-a",
        "is unneeded since",
        "Scale-down: removing node ",
        "Scale-down: draining node",
        "scaled down",
        "became leader",
        "signal=\"SIGTERM\"",
    ] {
        assert!(log.contains(line), "{line:?} not logged:\n{log}");
    }
    assert!(
        log.lines()
            .last()
            .is_some_and(|l| l.contains("cluster-autoscaler stopped")),
        "final line:\n{log}"
    );
    for trace in ["kube_client", "requesting", "stream closed", "HTTP{"] {
        assert!(!log.contains(trace), "{trace:?} logged at --v=4:\n{log}");
    }
    let events = event_lines(&h);
    let repeated = events
        .iter()
        .find(|e| e.contains("NotTriggerScaleUp Pod/huge:"))
        .unwrap_or_else(|| panic!("{events:#?}"));
    let count: u32 = repeated
        .rsplit("(x")
        .next()
        .and_then(|c| c.trim_end_matches(')').parse().ok())
        .unwrap_or(0);
    assert!(count >= 3, "the repeated event is counted: {repeated}");
    assert!(
        log.contains(
            "/huge is unschedulable and triggers no scale-up: MachineDeployment/capi/md-a: "
        ),
        "{log}"
    );
    for reason in ["TriggeredScaleUp", "ScaledUpGroup", "ScaleDown "] {
        assert!(
            events.iter().any(|e| e.contains(reason)),
            "{reason}: {events:#?}"
        );
    }
    // Shown with --nocapture (the README's example output comes from here).
    println!("----- events -----\n{}", events.join("\n"));
    println!("----- log: {} -----", ca.stderr.display());
    h.shutdown().await;
}

/// A kubeconfig pointing at a loopback port nobody listens on.
fn unreachable_kubeconfig(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ca-e2e-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let kubeconfig = dir.join("kubeconfig");
    let closed = free_port();
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{closed}\n\
             contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n\
             current-context: c\nusers:\n- name: u\n  user: {{}}\n"
        ),
    )
    .expect("kubeconfig");
    kubeconfig
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_v8_the_http_client_traces_its_requests() {
    let kubeconfig = unreachable_kubeconfig("v8");
    let mut ca = Autoscaler::start(&kubeconfig, "ca-8", &["--v=8"]);
    wait_for("a retry logged", Duration::from_secs(10), || {
        ca.log().contains("retrying")
    })
    .await;
    ca.kill();
    let log = ca.log();
    assert!(log.contains("kube_client::client::builder"), "{log}");
    assert!(log.contains("requesting"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_one_line_per_failure_and_a_final_line() {
    let kubeconfig = unreachable_kubeconfig("json");
    let mut ca = Autoscaler::start(&kubeconfig, "ca-j", &["--logging-format=json", "--v=4"]);
    wait_for("a retry logged", Duration::from_secs(10), || {
        ca.log().contains("retrying")
    })
    .await;
    let status = terminate(&mut ca);
    assert!(status.success(), "{status:?}");
    let log = ca.log();
    let records: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for r in &records {
        assert!(r["timestamp"].is_string() && r["level"].is_string(), "{r}");
        assert!(r["message"].is_string() && r["target"].is_string(), "{r}");
    }
    // A failed connection is one line (ours), not also the HTTP client's.
    let failures = records
        .iter()
        .filter(|r| r["level"] == "ERROR" || r["level"] == "WARN")
        .filter(|r| {
            r["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("kube_client"))
        })
        .count();
    assert_eq!(failures, 0, "{log}");
    let last = records.last().expect("a record");
    assert_eq!(last["message"], "cluster-autoscaler stopped", "{log}");
    assert_eq!(last["level"], "INFO");
}

/// The management/workload split: the Machines live behind one API (the management cluster,
/// reachable only with a Role confined to their namespace), the nodes and pods behind another
/// (the workload cluster). The binary reads each from its own cluster (`--cloud-config` and
/// `--kubeconfig`), scales up for a pending pod and removes the node once it is unneeded.
/// The management view (only `cluster.x-k8s.io` and the infrastructure templates'
/// `infrastructure.cluster.x-k8s.io`, through a Role confined to [`NS`]) and the workload view
/// (everything else) of `h`.
async fn split_views(
    h: &FacadeHandle,
) -> (autoscaler_facade::ViewHandle, autoscaler_facade::ViewHandle) {
    use autoscaler_facade::{GroupFilter, NamespaceRole, ViewOptions};
    // The infrastructure templates live beside the Cluster API objects.
    let capi = vec![
        "cluster.x-k8s.io".to_string(),
        "infrastructure.cluster.x-k8s.io".to_string(),
    ];
    let management = h
        .open_view(ViewOptions {
            groups: GroupFilter::Only(capi.clone()),
            role: Some(NamespaceRole {
                namespace: NS.into(),
                groups: capi.clone(),
            }),
            kubeconfig_path: None,
        })
        .await
        .expect("management view");
    let workload = h
        .open_view(ViewOptions {
            groups: GroupFilter::Except(capi),
            ..ViewOptions::default()
        })
        .await
        .expect("workload view");
    (management, workload)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn management_and_workload_clusters_apart() {
    let h = start_world().await;
    let (management, workload) = split_views(&h).await;
    let cloud_config = format!("--cloud-config={}", management.kubeconfig_path().display());
    let discovery = format!("--node-group-auto-discovery=clusterapi:namespace={NS}");
    let ca = Autoscaler::start(
        workload.kubeconfig_path(),
        "ca-split",
        &[cloud_config.as_str(), discovery.as_str()],
    );
    add_pods(&h, "job", 2);
    wait_for("replicas rise to 2", Duration::from_secs(30), || {
        replicas(&h) == 2
    })
    .await;
    wait_for(
        "2 nodes and all pods bound",
        Duration::from_secs(30),
        || group_nodes(&h).len() == 2 && all_bound(&h, "job", 2),
    )
    .await;
    wait_for(
        "the status ConfigMap in the workload cluster",
        Duration::from_secs(10),
        || status_text(&h).is_some_and(|s| s.contains("autoscalerStatus")),
    )
    .await;
    assert_eq!(lease_holder(&h).as_deref(), Some("ca-split"));

    h.with_world(|w| {
        w.delete_pod("default", "job-0").expect("delete pod");
    });
    wait_for(
        "one node removed: replicas 1, one Machine, one node",
        Duration::from_secs(45),
        || replicas(&h) == 1 && machines(&h) == 1 && group_nodes(&h).len() == 1,
    )
    .await;
    assert!(all_bound(&h, "job-1", 1));
    let log = ca.log();
    assert!(!log.contains("forbidden"), "{}", support::tail(&log));
    assert!(log.contains("--cloud-config"), "{}", support::tail(&log));
    // The templates the MachineDeployment names, read in its namespace like the rest.
    assert!(
        log.contains("watching the infrastructure templates of this kind"),
        "{}",
        support::tail(&log)
    );
    drop(ca);
    drop((management, workload));
    h.shutdown().await;
}

/// The same split without a namespace in auto-discovery: the autoscaler watches the Machines
/// cluster-wide, which the namespaced Role refuses. It says so and scales nothing (the test
/// above passes because the watches are namespaced).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaced_role_refuses_cluster_wide_watches() {
    let h = start_world().await;
    let (management, workload) = split_views(&h).await;
    let cloud_config = format!("--cloud-config={}", management.kubeconfig_path().display());
    let ca = Autoscaler::start(
        workload.kubeconfig_path(),
        "ca-wide",
        &[cloud_config.as_str()],
    );
    add_pods(&h, "job", 1);
    wait_for("the refusal in the log", Duration::from_secs(20), || {
        ca.log().contains("is forbidden")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(replicas(&h), 0, "{}", support::tail(&ca.log()));
    drop(ca);
    drop((management, workload));
    h.shutdown().await;
}

/// The `ClusterAutoscaler` singleton with this `spec`, as JSON.
fn cluster_autoscaler(spec: Value) -> String {
    json!({
        "apiVersion": "autoscaling.openshift.io/v1", "kind": "ClusterAutoscaler",
        "metadata": {"name": "default"},
        "spec": spec,
    })
    .to_string()
}

/// Writes the `ClusterAutoscaler` singleton through the API (`POST` to create, `PUT` to
/// replace), as a user's `kubectl apply` would; panics unless the server accepts it.
fn write_cluster_autoscaler(h: &FacadeHandle, method: &str, spec: Value) {
    let base = "/apis/autoscaling.openshift.io/v1/clusterautoscalers";
    let path = match method {
        "POST" => base.to_string(),
        _ => format!("{base}/default"),
    };
    let answer = support::http_send(
        &h.addr().to_string(),
        method,
        &path,
        &cluster_autoscaler(spec),
    );
    assert!(
        matches!(answer, Some((200 | 201, _))),
        "{method} {path}: {answer:?}"
    );
}

/// `run` without `--config` on a cluster serving the `ClusterAutoscaler` kind follows the
/// singleton while it runs: a limit it sets holds scale-up back, raising the limit lets the
/// same process scale up, and an invalid change is refused (its field named in the log and in
/// a `ConfigRejected` event on the object) with the previous limit still in force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_resource_reconfigures_a_running_process() {
    let h = start_world().await;
    h.with_world(|w| w.set_replicas(NS, MD, 1).expect("replicas"));
    wait_for("the first node", Duration::from_secs(10), || {
        group_nodes(&h).len() == 1
    })
    .await;
    write_cluster_autoscaler(&h, "POST", json!({"resourceLimits": {"maxNodesTotal": 1}}));
    let mut ca = Autoscaler::start(h.kubeconfig_path(), "ca-0", &[]);
    let pid = ca.child.id();
    add_pods(&h, "job", 2);
    // One pod fits the node; the other needs a second node, which the limit forbids: the
    // events say so (as upstream's `MaxNodesTotalReached`).
    wait_for(
        "the limit named as the reason",
        Duration::from_secs(15),
        || {
            event_lines(&h).iter().any(|l| {
                l.contains("MaxNodesTotalReached")
                    && l.contains("Max total nodes in cluster reached: 1")
            })
        },
    )
    .await;
    assert_eq!(replicas(&h), 1, "no scale-up past maxNodesTotal");

    write_cluster_autoscaler(&h, "PUT", json!({"resourceLimits": {"maxNodesTotal": 3}}));
    wait_for("replicas rise to 2", Duration::from_secs(15), || {
        replicas(&h) == 2
    })
    .await;
    assert!(ca.running() && ca.child.id() == pid, "the same process");

    write_cluster_autoscaler(&h, "PUT", json!({"resourceLimits": {"maxNodesTotal": -1}}));
    wait_for(
        "the refusal naming the field",
        Duration::from_secs(10),
        || {
            ca.log().lines().any(|l| {
                l.contains("WARN")
                    && l.contains("change refused")
                    && l.contains("spec.resourceLimits.maxNodesTotal")
            })
        },
    )
    .await;
    // ... and on the object, where whoever changed it looks.
    wait_for("a ConfigRejected event", Duration::from_secs(10), || {
        event_lines(&h).iter().any(|l| {
            l.starts_with("Warning ConfigRejected ClusterAutoscaler/default:")
                && l.contains("spec.resourceLimits.maxNodesTotal")
        })
    })
    .await;
    // Two more pods each need a node: the limit of 3 still holds (flags alone would allow 5).
    add_pods(&h, "more", 2);
    wait_for("replicas rise to 3", Duration::from_secs(15), || {
        replicas(&h) == 3
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(replicas(&h), 3, "the previous maxNodesTotal stays in force");
    assert!(ca.running());
    drop(ca);
    h.shutdown().await;
}

/// The `spec.replicas` of MachineDeployment `md`.
fn replicas_of(h: &FacadeHandle, md: &str) -> i64 {
    h.with_world(|w| {
        w.objects()
            .list("cluster.x-k8s.io", "MachineDeployment")
            .find(|(k, _)| k.name == md)
            .and_then(|(_, v)| v.pointer("/spec/replicas")?.as_i64())
            .unwrap_or(-1)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_with_a_zonal_volume_grows_the_group_of_its_zone() {
    const ZONE: &str = "topology.kubernetes.io/zone";
    let mut w = World::new(WorldConfig {
        default_delay: ProvisioningDelay {
            min_ms: 5_000,
            max_ms: 10_000,
        },
        ..WorldConfig::default()
    });
    for (md, zone) in [("md-a", "zone-a"), ("md-b", "zone-b")] {
        let spec = NodeGroupSpec {
            namespace: NS.into(),
            name: md.into(),
            replicas: 0,
            min_size: 0,
            max_size: 3,
            cpu: "4".into(),
            memory: "16Gi".into(),
            max_pods: 110,
            labels: [(ZONE.to_string(), zone.to_string())].into(),
            ..Default::default()
        };
        // Cluster API does not carry the zone label from the template to the Node (the cloud
        // sets it): for a group at zero it is declared, as on a real cluster.
        let mut md_object = spec.to_object(&WorldConfig::default().cluster_name);
        md_object["metadata"]["annotations"]["capacity.cluster-autoscaler.kubernetes.io/labels"] =
            json!(format!("{ZONE}={zone}"));
        w.apply(md_object).expect("node group");
    }
    // A claim provisioned at once in zone b (Immediate, allowed only there): its pod may only
    // run in zone b, and `run` only knows it by watching claims, volumes and classes.
    w.apply(
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "zone-b"}, "provisioner": "disk.csi.example.com",
        "volumeBindingMode": "Immediate",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["zone-b"]}]}]}),
    )
    .expect("class");
    w.apply(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "default"},
        "spec": {"storageClassName": "zone-b", "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "10Gi"}}}}))
        .expect("claim");
    let mut pod = big_pod("db");
    pod["spec"]["volumes"] =
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]);
    w.add_pod(pod, None).expect("pod");
    let h = Facade::start(
        w,
        FacadeOptions {
            speed: 10.0,
            ..FacadeOptions::default()
        },
    )
    .await
    .expect("facade");
    let ca = Autoscaler::start(h.kubeconfig_path(), "ca-0", &[]);
    let end = tokio::time::Instant::now() + Duration::from_secs(40);
    while !all_bound(&h, "db", 1) {
        assert!(
            tokio::time::Instant::now() < end,
            "the pod does not run; md-a {}, md-b {}: {}",
            replicas_of(&h, "md-a"),
            replicas_of(&h, "md-b"),
            support::tail(&ca.log())
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let node = pods(&h, "db")[0].1.clone().expect("bound");
    let node = object(&h, "", "Node", "", &node).expect("its node");
    assert_eq!(node["metadata"]["labels"][ZONE], "zone-b");
    assert_eq!(replicas_of(&h, "md-b"), 1, "{}", ca.log());
    assert_eq!(replicas_of(&h, "md-a"), 0, "{}", ca.log());
    drop(ca);
    h.shutdown().await;
}

/// The names of the nodes of the MachineDeployment `md`.
fn nodes_of(h: &FacadeHandle, md: &str) -> Vec<String> {
    h.with_world(|w| {
        let machines = w.machines_of(NS, md);
        w.node_names()
            .into_iter()
            .filter(|n| {
                w.machine_of_node(n)
                    .is_some_and(|(_, m)| machines.contains(&m))
            })
            .collect()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_objects_are_skipped_named_and_the_rest_is_autoscaled() {
    let h = start_world().await;
    // A second group with one node too small for the jobs, whose Node will be served
    // malformed, and a third group whose MachineDeployment will be.
    h.with_world(|w| {
        for (name, replicas, cpu) in [("md-b", 1, "1"), ("md-bad", 0, "4")] {
            w.add_node_group(&NodeGroupSpec {
                namespace: NS.into(),
                name: name.into(),
                replicas,
                min_size: 0,
                max_size: 5,
                cpu: cpu.into(),
                memory: "16Gi".into(),
                max_pods: 110,
                ..Default::default()
            })
            .expect("node group");
        }
        let mut pod = big_pod("broken");
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("100m");
        w.add_pod(pod, None).expect("add pod");
    });
    wait_for("md-b's node", Duration::from_secs(30), || {
        nodes_of(&h, "md-b").len() == 1
    })
    .await;
    let node = nodes_of(&h, "md-b").remove(0);
    h.serve_malformed(Malformation {
        kind: "Node".into(),
        namespace: None,
        name: node.clone(),
        fields: json!({"status": "not an object"}),
    });
    h.serve_malformed(Malformation {
        kind: "Pod".into(),
        namespace: Some("default".into()),
        name: "broken".into(),
        fields: json!({"spec": {"containers": "x"}}),
    });
    h.serve_malformed(Malformation {
        kind: "MachineDeployment".into(),
        namespace: Some(NS.into()),
        name: "md-bad".into(),
        fields: json!({"metadata": {"name": "md-bad", "namespace": NS, "labels": "x"}}),
    });
    let ca = Autoscaler::start(h.kubeconfig_path(), "ca-0", &[]);
    add_pods(&h, "job", 2);

    // The rest is autoscaled: the pending pods get nodes of md-a.
    wait_for("md-a's replicas rise to 2", Duration::from_secs(40), || {
        replicas(&h) == 2
    })
    .await;
    wait_for("the pods bound", Duration::from_secs(30), || {
        all_bound(&h, "job", 2)
    })
    .await;
    assert_eq!(replicas_of(&h, "md-bad"), 0);
    // Each malformed object is named once in the log, with the field.
    let log = ca.log();
    for (kind, object, field) in [
        ("Node", node.as_str(), "status"),
        ("Pod", "default/broken", "spec.containers"),
        ("MachineDeployment", "capi/md-bad", "metadata.labels"),
    ] {
        let lines: Vec<&str> = (log.lines())
            .filter(|l| {
                l.contains("object skipped")
                    && l.contains(&format!("kind={kind} "))
                    && l.contains(&format!("object={object} "))
            })
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "{kind} {object}: {lines:?}\n{}",
            support::tail(&log)
        );
        assert!(lines[0].contains(field), "{}", lines[0]);
    }
    assert!(
        !log.contains("not an object\"}"),
        "no response body is logged: {}",
        support::tail(&log)
    );
    wait_for("the status names them", Duration::from_secs(10), || {
        status_text(&h).is_some_and(|s| {
            s.contains("skippedObjects:")
                && s.contains("count: 3")
                && s.contains(&format!("Node {node}: status"))
                && s.contains("Pod default/broken: spec.containers")
                && s.contains("MachineDeployment capi/md-bad: metadata.labels")
        })
    })
    .await;
    for kind in ["Node", "Pod", "MachineDeployment"] {
        let n = ca.metric_where(
            "cluster_autoscaler_skipped_objects_total",
            &format!("kind=\"{kind}\""),
        );
        assert_eq!(n, 1.0, "{kind}");
    }
    drop(ca);
    h.shutdown().await;
}

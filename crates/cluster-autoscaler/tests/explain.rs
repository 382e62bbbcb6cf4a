//! "Why", where the operator looks, end to end: the real binary against the simulated world
//! served as a Kubernetes API by `autoscaler-facade`.
//!
//! - With `--emit-unremovable-node-events`, the events the facade stores for an idle node say
//!   why it is not removed, found as `kubectl describe node` finds them (by `involvedObject`).
//! - With `--enable-explain-endpoint`, the leader serves its last loop's plan at `/explain`;
//!   `plan --kubeconfig` on the same cluster prints the same plan (but for what only a running
//!   leader remembers: since when nodes are unneeded, and the decision time), and writes
//!   nothing: no write request reaches the API while it runs.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use autoscaler_facade::{Facade, FacadeHandle, FacadeOptions};
use autoscaler_world::{NodeGroupSpec, ProvisioningDelay, World, WorldConfig};
use serde_json::{Value, json};

mod support;
use support::{Autoscaler, wait_for};

const NS: &str = "capi";
const MD: &str = "md-a";

/// Flags both the leader and `plan` run with, so they decide with the same options.
const OPTIONS: &[&str] = &[
    "--namespace=kube-system",
    "--scale-down-unneeded-time=3s",
    "--scale-down-delay-after-add=0s",
];

fn start(kubeconfig: &Path, pod_name: &str, extra: &[&str]) -> Autoscaler {
    let mut args = OPTIONS.to_vec();
    args.extend_from_slice(&[
        "--scan-interval=1s",
        "--leader-elect-lease-duration=3s",
        "--leader-elect-renew-deadline=2s",
        "--leader-elect-retry-period=500ms",
        "--v=1",
    ]);
    args.extend_from_slice(extra);
    Autoscaler::spawn("explain", pod_name, kubeconfig, &[], &args)
}

/// One group of 4-CPU nodes, min 1, max 3, one node, served at 10x speed.
async fn one_node_world() -> FacadeHandle {
    let mut w = World::new(WorldConfig {
        default_delay: ProvisioningDelay {
            min_ms: 1_000,
            max_ms: 2_000,
        },
        ..WorldConfig::default()
    });
    w.add_node_group(&NodeGroupSpec {
        namespace: NS.into(),
        name: MD.into(),
        replicas: 1,
        min_size: 1,
        max_size: 3,
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
            ..FacadeOptions::default()
        },
    )
    .await
    .expect("facade")
}

/// The group's node names.
fn group_nodes(h: &FacadeHandle) -> Vec<String> {
    h.with_world(|w| {
        w.node_names()
            .into_iter()
            .filter(|n| w.machine_of_node(n).is_some())
            .collect()
    })
}

/// The events of a node as `kubectl describe node NAME` lists them: core/v1 Events whose
/// `involvedObject` is that Node (kind, name and UID), as `reason: message` lines.
fn described_node_events(h: &FacadeHandle, node: &str) -> Vec<String> {
    h.with_world(|w| {
        let uid = w
            .objects()
            .list("", "Node")
            .find(|(k, _)| k.name == node)
            .and_then(|(_, v)| v.pointer("/metadata/uid")?.as_str().map(str::to_string))
            .unwrap_or_default();
        w.objects()
            .list("", "Event")
            .filter(|(_, e)| {
                let io = |f: &str| {
                    e.pointer(&format!("/involvedObject/{f}"))
                        .and_then(Value::as_str)
                };
                io("kind") == Some("Node")
                    && io("name") == Some(node)
                    && io("uid") == Some(uid.as_str())
            })
            .map(|(_, e)| {
                let s = |p: &str| e.pointer(p).and_then(Value::as_str).unwrap_or("");
                format!("{} {}: {}", s("/type"), s("/reason"), s("/message"))
            })
            .collect()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_node_at_min_size_says_why_it_is_not_removed_in_its_events() {
    let h = one_node_world().await;
    wait_for("the group's node", Duration::from_secs(30), || {
        group_nodes(&h).len() == 1
    })
    .await;
    let node = group_nodes(&h).remove(0);
    let ca = start(
        h.kubeconfig_path(),
        "ca-events",
        &["--emit-unremovable-node-events"],
    );
    wait_for(
        "a NoScaleDown event on the node",
        Duration::from_secs(40),
        || {
            described_node_events(&h, &node)
                .iter()
                .any(|e| e.contains("NoScaleDown"))
        },
    )
    .await;
    let events = described_node_events(&h, &node);
    let why = events
        .iter()
        .find(|e| e.contains("NoScaleDown"))
        .unwrap_or_else(|| panic!("{events:#?}"));
    // Idle, but its group is at its min size of 1.
    assert!(
        why.starts_with("Normal NoScaleDown: node is not removed: NodeGroupMinSizeReached: "),
        "{why}\n{}",
        ca.log()
    );
    // Said once, not every loop: the same reason is repeated at most every 5 minutes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let again = described_node_events(&h, &node);
    let count = h.with_world(|w| {
        w.objects()
            .list("", "Event")
            .filter(|(_, e)| e.get("reason").and_then(Value::as_str) == Some("NoScaleDown"))
            .filter_map(|(_, e)| e.get("count").and_then(Value::as_i64))
            .sum::<i64>()
    });
    assert_eq!(count, 1, "{again:#?}");
    // And the status ConfigMap counts it by reason.
    let status = h.with_world(|w| {
        w.objects()
            .list("", "ConfigMap")
            .find(|(k, _)| k.name == "cluster-autoscaler-status")
            .and_then(|(_, v)| v.pointer("/data/status")?.as_str().map(str::to_string))
            .unwrap_or_default()
    });
    println!(
        "----- kubectl describe node {node}: events -----\n{}",
        events.join("\n")
    );
    println!("----- status -----\n{status}");
    h.shutdown().await;
}

/// The plan document without what only a leader that ran earlier loops knows, or what
/// depends on the instant of the decision: the decision time, and since when (and until when)
/// nodes are unneeded.
fn comparable(mut doc: Value) -> Value {
    if let Some(o) = doc.as_object_mut() {
        o.remove("now_ms");
    }
    if let Some(unneeded) = doc
        .pointer_mut("/scale_down/unneeded")
        .and_then(Value::as_array_mut)
    {
        for u in unneeded {
            *u = json!(u["node"]);
        }
    }
    doc
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_from_the_cluster_prints_the_leaders_explain_and_writes_nothing() {
    let h = one_node_world().await;
    wait_for("the group's node", Duration::from_secs(30), || {
        group_nodes(&h).len() == 1
    })
    .await;
    // A bare 1-CPU pod on the node, and a pod no node of the group can ever hold.
    h.with_world(|w| {
        for (name, cpu) in [("small", "1"), ("huge", "64")] {
            w.add_pod(
                json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"containers": [{"name": "c", "image": "x",
                        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}),
                None,
            )
            .expect("pod");
        }
    });
    let mut ca = start(
        h.kubeconfig_path(),
        "ca-explain",
        &["--enable-explain-endpoint"],
    );
    // A few loops, so the leader's explanation is of a settled cluster.
    let mut leader: Option<Value> = None;
    wait_for(
        "/explain with the huge pod and the node",
        Duration::from_secs(40),
        || {
            leader = ca
                .get("/explain")
                .filter(|(code, _)| *code == 200)
                .and_then(|(_, body)| serde_json::from_str(&body).ok());
            leader.as_ref().is_some_and(|d| {
                d["scale_up"]["pods_without_scale_up"]
                    .as_array()
                    .is_some_and(|p| p.len() == 1)
                    && d["scale_down"]["unremovable"]
                        .as_array()
                        .is_some_and(|u| u.len() == 1)
            })
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (code, body) = ca.get("/explain").expect("explain");
    assert_eq!(code, 200, "{body}");
    let leader: Value = serde_json::from_str(&body).expect("JSON");
    // The leader's series exist with upstream's names and move: limits from the defaults.
    assert_eq!(
        ca.metric_where(
            "cluster_autoscaler_cpu_limits_cores",
            "direction=\"maximum\""
        ),
        320_000.0
    );
    assert_eq!(ca.metric("cluster_autoscaler_pending_node_deletions"), 0.0);
    ca.kill();

    let writes = h.writes().len();
    let out = Command::new(support::binary())
        .arg("plan")
        .arg(format!("--kubeconfig={}", h.kubeconfig_path().display()))
        .args(OPTIONS)
        .arg("--output=json")
        .env_remove("RUST_LOG")
        .output()
        .expect("plan runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert_eq!(
        h.writes().len(),
        writes,
        "plan wrote: {:#?}",
        &h.writes()[writes..]
    );
    let planned: Value = serde_json::from_slice(&out.stdout).expect("plan prints JSON");
    assert_eq!(
        comparable(planned.clone()),
        comparable(leader.clone()),
        "plan:\n{planned:#}\n/explain:\n{leader:#}"
    );
    let text = Command::new(support::binary())
        .arg("plan")
        .arg(format!("--kubeconfig={}", h.kubeconfig_path().display()))
        .args(OPTIONS)
        .output()
        .expect("plan runs");
    assert!(text.status.success());
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("default/huge triggers no scale-up: MachineDeployment/capi/md-a: "),
        "{text}"
    );
    assert_eq!(h.writes().len(), writes, "plan (text) wrote");
    println!("----- plan --kubeconfig -----\n{text}");
    h.shutdown().await;
}

/// Without `--snapshot`, `--kubeconfig` or `--from-cluster` there is nothing to plan on.
#[test]
fn plan_without_a_source_is_a_usage_error() {
    let out = Command::new(support::binary())
        .arg("plan")
        .env_remove("KUBECONFIG")
        .output()
        .expect("plan runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("give --snapshot FILE, or --kubeconfig FILE or --from-cluster"),
        "{stderr}"
    );
}

/// An idle node above its group's min size is unneeded, then removed: upstream's
/// `node_removal_latency_seconds{deleted="true"}` observes it once, with at least the unneeded
/// time; `pending_node_deletions` is back to 0 once it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_node_is_observed_in_the_removal_latency() {
    let mut w = World::new(WorldConfig {
        default_delay: ProvisioningDelay {
            min_ms: 1_000,
            max_ms: 2_000,
        },
        ..WorldConfig::default()
    });
    w.add_node_group(&NodeGroupSpec {
        namespace: NS.into(),
        name: MD.into(),
        replicas: 1,
        min_size: 0,
        max_size: 3,
        cpu: "4".into(),
        memory: "16Gi".into(),
        max_pods: 110,
        ..Default::default()
    })
    .expect("node group");
    let h = Facade::start(
        w,
        FacadeOptions {
            speed: 10.0,
            ..FacadeOptions::default()
        },
    )
    .await
    .expect("facade");
    wait_for("the group's node", Duration::from_secs(30), || {
        group_nodes(&h).len() == 1
    })
    .await;
    let ca = start(h.kubeconfig_path(), "ca-latency", &[]);
    let count = "cluster_autoscaler_node_removal_latency_seconds_count";
    wait_for(
        "the node removed and observed",
        Duration::from_secs(40),
        || group_nodes(&h).is_empty() && ca.metric_where(count, "deleted=\"true\"") == 1.0,
    )
    .await;
    let sum = ca.metric_where(
        "cluster_autoscaler_node_removal_latency_seconds_sum",
        "deleted=\"true\"",
    );
    assert!(sum >= 3.0, "at least --scale-down-unneeded-time: {sum}");
    assert_eq!(ca.metric_where(count, "deleted=\"false\""), 0.0);
    wait_for("no deletion pending", Duration::from_secs(10), || {
        ca.metric("cluster_autoscaler_pending_node_deletions") == 0.0
    })
    .await;
    h.shutdown().await;
}

//! End to end, capacity on request: the real `cluster-autoscaler run` binary with
//! `--enable-provisioning-requests` against the simulated world served by `autoscaler-facade`
//! with the ProvisioningRequest CRD installed (status subresource, `resourceVersion`
//! preconditions). Each test asserts the conditions the binary writes on the requests and what
//! happens to the world (replicas, nodes, pods).
//!
//! The autoscaler reads the wall clock; the world's timestamps are virtual. The requests are
//! therefore stamped with wall-clock times by the test (as an API server would stamp them).

use std::path::Path;
use std::time::Duration;

use autoscaler_facade::{CAPACITY_CRDS, Facade, FacadeHandle, FacadeOptions};
use autoscaler_world::{NodeGroupSpec, ProvisioningDelay, World, WorldConfig};
use serde_json::{Value, json};

mod support;
use support::Autoscaler;

const NS: &str = "capi";
const MD: &str = "md-a";

fn start(kubeconfig: &Path, extra: &[&str]) -> Autoscaler {
    let mut args = vec![
        "--namespace=kube-system",
        "--scan-interval=1s",
        "--scale-down-unneeded-time=3s",
        "--scale-down-delay-after-add=3s",
        "--leader-elect=false",
        "--max-node-provision-time=2m",
        "--enable-provisioning-requests",
        // A request found not to fit (the group's node not Ready yet) is tried again soon.
        "--provisioning-request-initial-backoff-time=2s",
        "--v=2",
    ];
    args.extend_from_slice(extra);
    Autoscaler::spawn("e2e-provisioning", "ca-0", kubeconfig, &[], &args)
}

async fn wait_for(ca: &Autoscaler, what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let end = tokio::time::Instant::now() + timeout;
    loop {
        if cond() {
            return;
        }
        if tokio::time::Instant::now() >= end {
            panic!(
                "timed out after {timeout:?} waiting for: {what}\n{}",
                support::tail(&ca.log())
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A world with one MachineDeployment group of `replicas` nodes (0..5 nodes of 4 CPUs), new
/// machines taking 5-10 virtual seconds, served at 10× speed, the CRDs installed.
async fn start_world(replicas: u32) -> FacadeHandle {
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
        replicas,
        min_size: 0,
        max_size: 5,
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
    for gv in CAPACITY_CRDS {
        h.install(gv);
    }
    h
}

/// An API timestamp `ago` before the wall clock (whole seconds, as the API writes them).
fn stamp(ago: Duration) -> String {
    let secs = jiff::Timestamp::now().as_second() - i64::try_from(ago.as_secs()).unwrap_or(0);
    jiff::Timestamp::from_second(secs)
        .expect("a valid time")
        .to_string()
}

/// A PodTemplate of `cpu` CPUs named `worker` in `batch`.
fn template(cpu: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": "worker", "namespace": "batch"},
        "template": {"spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}
    })
}

fn request(name: &str, class: &str, count: u32) -> Value {
    json!({
        "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": name, "namespace": "batch", "generation": 1,
                     "creationTimestamp": stamp(Duration::from_secs(60))},
        "spec": {"provisioningClassName": class,
                 "podSets": [{"podTemplateRef": {"name": "worker"}, "count": count}]},
    })
}

const REQUESTS: &str = "/apis/autoscaling.x-k8s.io/v1/namespaces/batch/provisioningrequests";

/// One request to the facade's API, as a client (Kueue, kubectl) makes it: (code, body).
async fn api(h: &FacadeHandle, method: &'static str, path: String, body: &Value) -> (u16, Value) {
    let (address, text) = (h.addr().to_string(), body.to_string());
    let (code, body) =
        tokio::task::spawn_blocking(move || support::http_send(&address, method, &path, &text))
            .await
            .expect("request task")
            .expect("the facade answers");
    (code, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// Creates `request` through the API, then, when `status` is given, writes it through
/// `/status` (as an earlier autoscaler would have).
async fn create_request(h: &FacadeHandle, request: Value, status: Option<Value>) {
    let (code, mut created) = api(h, "POST", REQUESTS.into(), &request).await;
    assert_eq!(code, 201, "{created}");
    if let Some(status) = status {
        let name = created["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        created["status"] = status;
        let (code, body) = api(h, "PUT", format!("{REQUESTS}/{name}/status"), &created).await;
        assert_eq!(code, 200, "{body}");
    }
}

/// The request's conditions: (type, status, reason).
fn conditions(h: &FacadeHandle, name: &str) -> Vec<(String, String, String)> {
    h.with_world(|w| {
        let r = w
            .objects()
            .list("autoscaling.x-k8s.io", "ProvisioningRequest")
            .find(|(k, _)| k.namespace == "batch" && k.name == name)
            .map(|(_, v)| (**v).clone())?;
        let s = |c: &Value, f: &str| c.get(f).and_then(Value::as_str).unwrap_or("").to_string();
        Some(
            r.pointer("/status/conditions")?
                .as_array()?
                .iter()
                .map(|c| (s(c, "type"), s(c, "status"), s(c, "reason")))
                .collect(),
        )
    })
    .unwrap_or_default()
}

fn has(h: &FacadeHandle, name: &str, type_: &str, status: &str, reason: &str) -> bool {
    conditions(h, name)
        .iter()
        .any(|(t, s, r)| t == type_ && s == status && r == reason)
}

/// The reasons of the events the autoscaler published.
fn event_reasons(h: &FacadeHandle) -> Vec<String> {
    h.with_world(|w| {
        w.objects()
            .list("events.k8s.io", "Event")
            .chain(w.objects().list("", "Event"))
            .filter_map(|(_, v)| Some(v.get("reason")?.as_str()?.to_string()))
            .collect()
    })
}

fn replicas(h: &FacadeHandle) -> i64 {
    h.with_world(|w| {
        w.objects()
            .list("cluster.x-k8s.io", "MachineDeployment")
            .find(|(k, _)| k.namespace == NS && k.name == MD)
            .and_then(|(_, v)| v.pointer("/spec/replicas").and_then(Value::as_i64))
            .unwrap_or(-1)
    })
}

fn ready_nodes(h: &FacadeHandle) -> usize {
    h.with_world(|w| {
        w.objects()
            .list("", "Node")
            .filter(|(_, v)| {
                v.pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
            })
            .count()
    })
}

/// A pod of 3 CPUs consuming the request `request`.
fn consumer(name: &str, request: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "batch",
            "annotations": {"autoscaling.x-k8s.io/consume-provisioning-request": request,
                "autoscaling.x-k8s.io/provisioning-class-name":
                    "best-effort-atomic-scale-up.autoscaling.x-k8s.io"}},
        "spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}]},
    })
}

fn bound(h: &FacadeHandle, prefix: &str) -> usize {
    h.with_world(|w| {
        w.live_pods()
            .into_iter()
            .filter(|(_, n, node)| n.starts_with(prefix) && node.is_some())
            .count()
    })
}

/// A check-capacity request that fits is answered in the next loop (Accepted, then
/// Provisioned=True with CapacityIsFound, through the status subresource), and no node is
/// added for it; a booking older than the booking time (10 minutes) gets BookingExpired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_capacity_request_is_answered_and_an_old_booking_expires() {
    let h = start_world(1).await;
    h.with_world(|w| w.apply(template("1")).expect("template"));
    let class = "check-capacity.autoscaling.x-k8s.io";
    create_request(&h, request("fits", class, 2), None).await;
    // Booked 11 minutes ago by an earlier autoscaler.
    let booked = json!({"conditions": [
        {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
         "lastTransitionTime": stamp(Duration::from_secs(660))},
        {"type": "Provisioned", "status": "True", "reason": "CapacityIsFound",
         "message": "", "lastTransitionTime": stamp(Duration::from_secs(660))}]});
    create_request(&h, request("old", class, 1), Some(booked)).await;
    assert!(has(&h, "old", "Provisioned", "True", "CapacityIsFound"));
    let ca = start(h.kubeconfig_path(), &[]);
    wait_for(
        &ca,
        "the node of the group",
        Duration::from_secs(30),
        || ready_nodes(&h) == 1,
    )
    .await;
    wait_for(
        &ca,
        "fits: Provisioned=True",
        Duration::from_secs(30),
        || has(&h, "fits", "Provisioned", "True", "CapacityIsFound"),
    )
    .await;
    assert!(
        has(&h, "fits", "Accepted", "True", "Accepted"),
        "{:?}",
        conditions(&h, "fits")
    );
    wait_for(
        &ca,
        "old: BookingExpired=True",
        Duration::from_secs(30),
        || {
            has(
                &h,
                "old",
                "BookingExpired",
                "True",
                "CapacityReservationTimeExpired",
            )
        },
    )
    .await;
    // check-capacity never scales up.
    assert_eq!(replicas(&h), 1);
}

/// A best-effort-atomic request for 3 pods of 3 CPUs on an empty group gets one scale-up of 3
/// and Provisioned=True (CapacityIsProvisioned); its pods, created then with the consume
/// annotation, land on those nodes without a second scale-up, and once all run the booking
/// ends (BookingExpired=True, CapacityBookingConsumed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_atomic_request_gets_one_scale_up_and_its_pods_consume_the_booking() {
    let h = start_world(0).await;
    h.with_world(|w| w.apply(template("3")).expect("template"));
    let class = "best-effort-atomic-scale-up.autoscaling.x-k8s.io";
    create_request(&h, request("train", class, 3), None).await;
    let ca = start(h.kubeconfig_path(), &[]);
    wait_for(
        &ca,
        "train: Provisioned=True",
        Duration::from_secs(30),
        || has(&h, "train", "Provisioned", "True", "CapacityIsProvisioned"),
    )
    .await;
    assert_eq!(replicas(&h), 3, "one scale-up for all three pods");
    // The request's scale-up is the loop's own, recorded as any scale-up is.
    wait_for(
        &ca,
        "a ScaledUpGroup event",
        Duration::from_secs(30),
        || event_reasons(&h).iter().any(|r| r == "ScaledUpGroup"),
    )
    .await;
    h.with_world(|w| {
        for i in 0..3 {
            w.add_pod(consumer(&format!("train-{i}"), "train"), None)
                .expect("pod");
        }
    });
    wait_for(
        &ca,
        "the three pods running",
        Duration::from_secs(60),
        || bound(&h, "train-") == 3,
    )
    .await;
    assert_eq!(replicas(&h), 3, "no second scale-up for the consumers");
    wait_for(
        &ca,
        "train: BookingExpired=True (consumed)",
        Duration::from_secs(30),
        || {
            has(
                &h,
                "train",
                "BookingExpired",
                "True",
                "CapacityBookingConsumed",
            )
        },
    )
    .await;
    assert_eq!(replicas(&h), 3);
}

/// A CapacityBuffer of 2 pods' worth of room on an empty group: with the controller flag its
/// status says `ReadyForProvisioning=True` with 2 replicas (written through `/status`); with
/// pod injection its virtual pods drive a scale-up like pending pods (2 nodes of 4 CPUs for 2
/// pods of 3 CPUs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buffer_gets_its_status_and_its_room() {
    let h = start_world(0).await;
    h.with_world(|w| w.apply(template("3")).expect("template"));
    let buffer = json!({
        "apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
        "metadata": {"name": "headroom", "namespace": "batch"},
        "spec": {"podTemplateRef": {"name": "worker"}, "replicas": 2}
    });
    let path = "/apis/autoscaling.x-k8s.io/v1beta1/namespaces/batch/capacitybuffers";
    let (code, body) = api(&h, "POST", path.into(), &buffer).await;
    assert_eq!(code, 201, "{body}");
    let ca = start(
        h.kubeconfig_path(),
        &[
            "--capacity-buffer-controller-enabled",
            "--capacity-buffer-pod-injection-enabled",
        ],
    );
    let status = || {
        h.with_world(|w| {
            w.objects()
                .list("autoscaling.x-k8s.io", "CapacityBuffer")
                .find(|(k, _)| k.name == "headroom")
                .and_then(|(_, v)| v.get("status").cloned())
        })
        .unwrap_or(Value::Null)
    };
    wait_for(&ca, "the buffer's status", Duration::from_secs(30), || {
        status()["conditions"][0]["status"] == "True"
    })
    .await;
    let s = status();
    assert_eq!(s["replicas"], 2, "{s}");
    assert_eq!(s["podTemplateRef"]["name"], "worker", "{s}");
    assert_eq!(s["conditions"][0]["type"], "ReadyForProvisioning", "{s}");
    assert_eq!(
        s["conditions"][0]["reason"], "AttributesSetSuccessfully",
        "{s}"
    );
    wait_for(
        &ca,
        "room for the buffer's pods",
        Duration::from_secs(30),
        || replicas(&h) == 2,
    )
    .await;
}

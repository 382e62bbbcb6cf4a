//! `run` against an API server below Kubernetes 1.34 (the facade withholding
//! `resource.k8s.io/v1`: absent from discovery, `404` with a Status body on every request): the
//! autoscaler starts and runs, and a pod with a ResourceClaim gets "cannot be simulated" as its
//! reason, with no scale-up, while a plain pod still grows the group.

use std::time::Duration;

use autoscaler_facade::{Facade, FacadeHandle, FacadeOptions};
use autoscaler_world::{NodeGroupSpec, ProvisioningDelay, World, WorldConfig};
use serde_json::{Value, json};

mod support;
use support::{Autoscaler, wait_for};

fn events(h: &FacadeHandle) -> Vec<String> {
    h.with_world(|w| {
        w.objects()
            .list("", "Event")
            .map(|(_, v)| {
                let s = |p: &str| {
                    v.pointer(p)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                };
                format!(
                    "{} {}/{}: {}",
                    s("/reason"),
                    s("/involvedObject/kind"),
                    s("/involvedObject/name"),
                    s("/message")
                )
            })
            .collect()
    })
}

fn replicas(h: &FacadeHandle) -> i64 {
    h.with_world(|w| {
        w.objects()
            .list("cluster.x-k8s.io", "MachineDeployment")
            .find(|(k, _)| k.name == "md-a")
            .and_then(|(_, v)| v.pointer("/spec/replicas")?.as_i64())
            .unwrap_or(-1)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn below_1_34_a_pod_with_claims_cannot_be_simulated_and_triggers_no_scale_up() {
    let mut w = World::new(WorldConfig {
        default_delay: ProvisioningDelay {
            min_ms: 5_000,
            max_ms: 10_000,
        },
        ..WorldConfig::default()
    });
    w.add_node_group(&NodeGroupSpec {
        namespace: "capi".into(),
        name: "md-a".into(),
        replicas: 0,
        min_size: 0,
        max_size: 5,
        cpu: "4".into(),
        memory: "16Gi".into(),
        max_pods: 110,
        ..Default::default()
    })
    .expect("node group");
    w.add_pod(
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "train", "namespace": "default"},
            "spec": {
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "train-gpu"}],
                "containers": [{"name": "c", "image": "x",
                    "resources": {"claims": [{"name": "gpu"}],
                        "requests": {"cpu": "1", "memory": "1Gi"}}}]},
        }),
        None,
    )
    .expect("add pod");
    let h = Facade::start(
        w,
        FacadeOptions {
            speed: 10.0,
            withheld: vec!["resource.k8s.io/v1".into()],
            ..FacadeOptions::default()
        },
    )
    .await
    .expect("facade");
    let args = [
        "--namespace=kube-system",
        "--scan-interval=1s",
        "--leader-elect-lease-duration=3s",
        "--leader-elect-renew-deadline=2s",
        "--leader-elect-retry-period=500ms",
        "--v=1",
    ];
    let mut ca = Autoscaler::spawn("dra-run", "ca-dra", h.kubeconfig_path(), &[], &args);
    wait_for(
        "the claim pod's NotTriggerScaleUp",
        Duration::from_secs(60),
        || {
            events(&h)
                .iter()
                .any(|e| e.starts_with("NotTriggerScaleUp Pod/train:"))
        },
    )
    .await;
    let all = events(&h);
    let reason = all
        .iter()
        .find(|e| e.starts_with("NotTriggerScaleUp Pod/train:"))
        .expect("the event");
    assert!(
        reason.contains("cannot be simulated"),
        "{reason}\n{}",
        ca.log()
    );
    assert_eq!(replicas(&h), 0, "no scale-up for the claim pod");
    // The rest goes on: a plain pod grows the group.
    h.with_world(|w| {
        w.add_pod(
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "plain", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "x",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
            }),
            None,
        )
        .expect("add pod");
    });
    wait_for(
        "a scale-up for the plain pod",
        Duration::from_secs(60),
        || replicas(&h) >= 1,
    )
    .await;
    assert!(
        ca.child.try_wait().expect("wait").is_none(),
        "still running"
    );
    let _ = ca.child.kill();
    h.shutdown().await;
}

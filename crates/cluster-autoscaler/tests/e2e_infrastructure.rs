//! End to end, scale from zero by the infrastructure machine template (Cluster API's contract:
//! the template's `status.capacity`, GPUs included): the real `cluster-autoscaler run` binary
//! against the simulated world served by `autoscaler-facade`, which serves
//! `DockerMachineTemplate` as the Docker provider's CRD does. The MachineDeployments carry no
//! capacity annotations, only their size bounds: what their nodes would hold comes from the
//! templates their `infrastructureRef` names, read through the API and watched.

use std::time::Duration;

use autoscaler_facade::{Facade, FacadeHandle, FacadeOptions};
use autoscaler_world::{NodeGroupSpec, ProvisioningDelay, World, WorldConfig};
use serde_json::{Value, json};

mod support;
use support::{Autoscaler, wait_for};

const NS: &str = "capi";
const INFRA: &str = "infrastructure.cluster.x-k8s.io";

/// `Reason Kind/name: message` of every event.
fn events(h: &FacadeHandle) -> Vec<String> {
    h.read_world(|w| {
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

fn replicas(h: &FacadeHandle, md: &str) -> i64 {
    h.read_world(|w| {
        w.objects()
            .list("cluster.x-k8s.io", "MachineDeployment")
            .find(|(k, _)| k.name == md)
            .and_then(|(_, v)| v.pointer("/spec/replicas")?.as_i64())
            .unwrap_or(-1)
    })
}

/// A DockerMachineTemplate whose status says what a node of its groups holds.
fn template(name: &str, capacity: Value) -> Value {
    json!({"apiVersion": format!("{INFRA}/v1beta1"), "kind": "DockerMachineTemplate",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"template": {"spec": {}}},
        "status": {"capacity": capacity,
                   "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"}}})
}

/// A MachineDeployment at zero, between 0 and 1, without capacity annotations, whose
/// template names `reference`.
fn add_group(w: &mut World, name: &str, reference: Value) {
    w.add_node_group(&NodeGroupSpec {
        namespace: NS.into(),
        name: name.into(),
        replicas: 0,
        min_size: 0,
        max_size: 1,
        cpu: "4".into(),
        memory: "16Gi".into(),
        max_pods: 110,
        ..Default::default()
    })
    .expect("node group");
    let mut md = w
        .objects()
        .list("cluster.x-k8s.io", "MachineDeployment")
        .find(|(k, _)| k.name == name)
        .map(|(_, v)| (**v).clone())
        .expect("the MachineDeployment");
    let annotations = md["metadata"]["annotations"]
        .as_object_mut()
        .expect("annotations");
    annotations.retain(|k, _| !k.starts_with("capacity.cluster-autoscaler.kubernetes.io/"));
    assert!(
        annotations
            .keys()
            .any(|k| k.ends_with("node-group-max-size")),
        "the size bounds stay: {annotations:?}"
    );
    md["spec"]["template"]["spec"]["infrastructureRef"] = reference;
    w.replace_object(md).expect("replace");
}

/// The node the pod `name` (namespace `default`) is bound to, once it is.
fn node_of_pod(h: &FacadeHandle, name: &str) -> Option<String> {
    h.read_world(|w| {
        w.objects()
            .list("", "Pod")
            .find(|(k, _)| k.namespace == "default" && k.name == name)
            .and_then(|(_, v)| Some(v.pointer("/spec/nodeName")?.as_str()?.to_string()))
    })
}

/// The names of the Nodes of the Machines of MachineDeployment `md`.
fn nodes_of_group(h: &FacadeHandle, md: &str) -> Vec<String> {
    h.read_world(|w| {
        w.machines_of(NS, md)
            .into_iter()
            .filter(|m| w.node_names().contains(m))
            .collect()
    })
}

fn gpu_pod(name: &str, gpus: u32) -> Value {
    let resources = json!({"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": gpus.to_string()});
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"requests": resources, "limits": {"nvidia.com/gpu": gpus.to_string()}}}]}})
}

/// A group whose only size information is its template's `status.capacity` scales from zero
/// for a GPU pod; a second group whose template lacks the GPUs does not, until its template's
/// status says it has them (a watched change, with no restart).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_scale_from_zero_by_their_infrastructure_template_and_follow_its_changes() {
    let mut w = World::new(WorldConfig {
        default_delay: ProvisioningDelay {
            min_ms: 5_000,
            max_ms: 10_000,
        },
        ..WorldConfig::default()
    });
    let small = json!({"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"});
    w.apply(template("one-gpu", small)).expect("template");
    w.apply(template("late", json!({"cpu": "8", "memory": "32Gi"})))
        .expect("template");
    // Cluster API v1beta1 names the template by apiVersion, v1beta2 by apiGroup.
    add_group(
        &mut w,
        "md-gpu",
        json!({"apiVersion": format!("{INFRA}/v1beta1"), "kind": "DockerMachineTemplate",
               "name": "one-gpu"}),
    );
    add_group(
        &mut w,
        "md-late",
        json!({"apiGroup": INFRA, "kind": "DockerMachineTemplate", "name": "late"}),
    );
    w.add_pod(gpu_pod("train", 1), None).expect("pod");
    let h = Facade::start(
        w,
        FacadeOptions {
            speed: 10.0,
            ..FacadeOptions::default()
        },
    )
    .await
    .expect("facade");
    let args = [
        "--namespace=kube-system",
        "--scan-interval=1s",
        "--leader-elect=false",
        "--v=1",
    ];
    let ca = Autoscaler::spawn("infra", "ca-infra", h.kubeconfig_path(), &[], &args);
    wait_for("md-gpu scaled from zero", Duration::from_secs(60), || {
        replicas(&h, "md-gpu") == 1
    })
    .await;
    assert_eq!(replicas(&h, "md-late"), 0, "{}", support::tail(&ca.log()));
    // The machine is built as its template describes, GPU included: the pod starts there.
    wait_for(
        "train started on md-gpu's node",
        Duration::from_secs(60),
        || {
            let nodes = nodes_of_group(&h, "md-gpu");
            node_of_pod(&h, "train").is_some_and(|n| nodes.contains(&n))
        },
    )
    .await;

    // Four GPUs: neither template has them yet.
    h.with_world(|w| w.add_pod(gpu_pod("big", 4), None).map(drop))
        .expect("pod");
    wait_for("NotTriggerScaleUp for big", Duration::from_secs(60), || {
        events(&h)
            .iter()
            .any(|e| e.starts_with("NotTriggerScaleUp Pod/big:"))
    })
    .await;
    assert_eq!(replicas(&h, "md-late"), 0, "{}", support::tail(&ca.log()));

    // The provider now says the late template's machines have four GPUs.
    let four = json!({"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4"});
    h.with_world(|w| {
        let mut t = w
            .objects()
            .list(INFRA, "DockerMachineTemplate")
            .find(|(k, _)| k.name == "late")
            .map(|(_, v)| (**v).clone())
            .expect("the template");
        t["status"]["capacity"] = four;
        w.replace_object(t).map(drop)
    })
    .expect("update");
    wait_for(
        "md-late scaled from zero after its template changed",
        Duration::from_secs(60),
        || replicas(&h, "md-late") == 1,
    )
    .await;
    wait_for(
        "big started on md-late's node",
        Duration::from_secs(60),
        || {
            let nodes = nodes_of_group(&h, "md-late");
            node_of_pod(&h, "big").is_some_and(|n| nodes.contains(&n))
        },
    )
    .await;
    let log = ca.log();
    assert!(
        log.contains("watching the infrastructure templates of this kind"),
        "{}",
        support::tail(&log)
    );
    drop(ca);
    h.shutdown().await;
}

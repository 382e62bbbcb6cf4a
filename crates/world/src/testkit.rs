//! Builders shared by the controllers' tests: node groups, worlds, ReplicaSets, budgets, and
//! readers of stored objects.

use std::collections::BTreeMap;

pub(crate) use serde_json::{Value, json};

pub(crate) use crate::machines::DELETE_MACHINE_ANNOTATION;
pub(crate) use crate::{
    DaemonSetSpec, DeletePolicy, EvictionError, Fault, FaultKind, JobSpec, NodeGroupSpec,
    PodTemplate, ProvisioningDelay, ReplicaSetSpec, World, WorldConfig, WorldError,
};

pub(crate) fn group(name: &str, replicas: u32) -> NodeGroupSpec {
    NodeGroupSpec {
        namespace: "capi".into(),
        name: name.into(),
        replicas,
        min_size: 0,
        max_size: 10,
        cpu: "4".into(),
        memory: "16Gi".into(),
        max_pods: 110,
        gpu: None,
        labels: BTreeMap::from([("pool".to_string(), name.to_string())]),
        taints: Vec::new(),
        delete_policy: Default::default(),
    }
}

pub(crate) fn world(seed: u64) -> World {
    let mut w = World::new(WorldConfig {
        seed,
        ..WorldConfig::default()
    });
    w.set_provisioning_delay(
        "workers",
        ProvisioningDelay {
            min_ms: 30_000,
            max_ms: 60_000,
        },
    );
    w
}

pub(crate) fn get(w: &World, group: &str, kind: &str, ns: &str, name: &str) -> Option<Value> {
    w.objects()
        .list(group, kind)
        .find(|(k, _)| k.namespace == ns && k.name == name)
        .map(|(_, v)| (**v).clone())
}

pub(crate) fn machine(w: &World, name: &str) -> Value {
    get(w, "cluster.x-k8s.io", "Machine", "capi", name).expect("machine exists")
}

pub(crate) fn rs(name: &str, replicas: u32, cpu: &str) -> ReplicaSetSpec {
    ReplicaSetSpec {
        namespace: "default".into(),
        name: name.into(),
        template: PodTemplate::new().requests(cpu, "1Gi").label("app", name),
        replicas,
        schedule: Vec::new(),
        pod_lifetime_ms: None,
        deployment: true,
    }
}

pub(crate) fn pdb(name: &str, app: &str, min_available: i64) -> Value {
    json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}},
    })
}

//! Pods decoded for the model only: [`SlimPod`] reads from a Pod's JSON exactly the fields
//! [`Pod::from_k8s`] reads and skips the rest unparsed (managed fields, images, commands,
//! environment, probes, mounts, container states, …), then hands the model conversion an
//! `api::Pod` holding only those fields, so the model built is the one the full object gives.
//! Listing 450,000 pods spends most of the watch's time decoding; what is never read need not
//! be allocated.
//!
//! It decides nothing and never drops a field the model reads: a field added to the model's
//! conversion must be added here too (the tests compare both paths on varied pods).

use std::collections::BTreeMap;

use autoscaler_model::ModelError;
use autoscaler_model::Pod;
use k8s_openapi::api::core::v1 as api;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use kube::Resource;
use serde::{Deserialize, Deserializer, de};

/// A Pod as listed or watched, with only what the model reads.
#[derive(Clone, Debug)]
pub struct SlimPod {
    metadata: meta::ObjectMeta,
    spec: Option<SlimSpec>,
    status: Option<SlimStatus>,
}

impl SlimPod {
    /// The model pod: [`Pod::from_k8s`] of the fields kept.
    pub fn into_model(self) -> Result<Pod, ModelError> {
        Pod::from_k8s(&self.into_k8s())
    }

    /// The API pod holding the fields kept (every other field at its default).
    pub fn into_k8s(self) -> api::Pod {
        api::Pod {
            metadata: self.metadata,
            spec: self.spec.map(SlimSpec::into_k8s),
            status: self.status.map(SlimStatus::into_k8s),
        }
    }
}

impl Resource for SlimPod {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "Pod".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "pods".into()
    }
    fn meta(&self) -> &meta::ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut meta::ObjectMeta {
        &mut self.metadata
    }
}

/// The JSON shape; `apiVersion` and `kind`, when present, must be a v1 Pod's (as the full
/// type checks).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    api_version: Option<String>,
    kind: Option<String>,
    metadata: Option<SlimMeta>,
    spec: Option<SlimSpec>,
    status: Option<SlimStatus>,
}

impl<'de> Deserialize<'de> for SlimPod {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Raw::deserialize(d)?;
        if let Some(v) = raw.api_version.as_deref().filter(|v| *v != "v1") {
            return Err(de::Error::invalid_value(de::Unexpected::Str(v), &"v1"));
        }
        if let Some(k) = raw.kind.as_deref().filter(|k| *k != "Pod") {
            return Err(de::Error::invalid_value(de::Unexpected::Str(k), &"Pod"));
        }
        Ok(SlimPod {
            metadata: raw.metadata.map(SlimMeta::into_k8s).unwrap_or_default(),
            spec: raw.spec,
            status: raw.status,
        })
    }
}

/// The metadata the model and the watch read (`resourceVersion`: where a watch resumes).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<meta::OwnerReference>>,
    creation_timestamp: Option<meta::Time>,
    deletion_timestamp: Option<meta::Time>,
    deletion_grace_period_seconds: Option<i64>,
}

impl SlimMeta {
    fn into_k8s(self) -> meta::ObjectMeta {
        meta::ObjectMeta {
            name: self.name,
            namespace: self.namespace,
            uid: self.uid,
            resource_version: self.resource_version,
            labels: self.labels,
            annotations: self.annotations,
            owner_references: self.owner_references,
            creation_timestamp: self.creation_timestamp,
            deletion_timestamp: self.deletion_timestamp,
            deletion_grace_period_seconds: self.deletion_grace_period_seconds,
            ..Default::default()
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimSpec {
    termination_grace_period_seconds: Option<i64>,
    node_name: Option<String>,
    scheduler_name: Option<String>,
    node_selector: Option<BTreeMap<String, String>>,
    affinity: Option<api::Affinity>,
    tolerations: Option<Vec<api::Toleration>>,
    topology_spread_constraints: Option<Vec<api::TopologySpreadConstraint>>,
    host_network: Option<bool>,
    containers: Option<Vec<SlimContainer>>,
    init_containers: Option<Vec<SlimContainer>>,
    priority: Option<i32>,
    volumes: Option<Vec<api::Volume>>,
    resources: Option<api::ResourceRequirements>,
    overhead: Option<BTreeMap<String, Quantity>>,
    resource_claims: Option<Vec<api::PodResourceClaim>>,
}

impl SlimSpec {
    fn into_k8s(self) -> api::PodSpec {
        api::PodSpec {
            termination_grace_period_seconds: self.termination_grace_period_seconds,
            node_name: self.node_name,
            scheduler_name: self.scheduler_name,
            node_selector: self.node_selector,
            affinity: self.affinity,
            tolerations: self.tolerations,
            topology_spread_constraints: self.topology_spread_constraints,
            host_network: self.host_network,
            containers: (self.containers.into_iter().flatten())
                .map(SlimContainer::into_k8s)
                .collect(),
            init_containers: (self.init_containers)
                .map(|cs| cs.into_iter().map(SlimContainer::into_k8s).collect()),
            priority: self.priority,
            volumes: self.volumes,
            resources: self.resources,
            overhead: self.overhead,
            resource_claims: self.resource_claims,
            ..Default::default()
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimContainer {
    name: Option<String>,
    resources: Option<api::ResourceRequirements>,
    ports: Option<Vec<api::ContainerPort>>,
    restart_policy: Option<String>,
}

impl SlimContainer {
    fn into_k8s(self) -> api::Container {
        api::Container {
            name: self.name.unwrap_or_default(),
            resources: self.resources,
            ports: self.ports,
            restart_policy: self.restart_policy,
            ..Default::default()
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimStatus {
    phase: Option<String>,
    nominated_node_name: Option<String>,
    conditions: Option<Vec<api::PodCondition>>,
    container_statuses: Option<Vec<SlimContainerStatus>>,
    init_container_statuses: Option<Vec<SlimContainerStatus>>,
    resource_claim_statuses: Option<Vec<api::PodResourceClaimStatus>>,
}

impl SlimStatus {
    fn into_k8s(self) -> api::PodStatus {
        let statuses = |s: Option<Vec<SlimContainerStatus>>| {
            s.map(|cs| cs.into_iter().map(SlimContainerStatus::into_k8s).collect())
        };
        api::PodStatus {
            phase: self.phase,
            nominated_node_name: self.nominated_node_name,
            conditions: self.conditions,
            container_statuses: statuses(self.container_statuses),
            init_container_statuses: statuses(self.init_container_statuses),
            resource_claim_statuses: self.resource_claim_statuses,
            ..Default::default()
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimContainerStatus {
    name: Option<String>,
    resources: Option<api::ResourceRequirements>,
    allocated_resources: Option<BTreeMap<String, Quantity>>,
}

impl SlimContainerStatus {
    fn into_k8s(self) -> api::ContainerStatus {
        api::ContainerStatus {
            name: self.name.unwrap_or_default(),
            resources: self.resources,
            allocated_resources: self.allocated_resources,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// Both paths on one JSON pod: the same model pod, or errors saying the same.
    fn same_model(pod: &Value) {
        let full: Result<api::Pod, _> = serde_json::from_value(pod.clone());
        let slim: Result<SlimPod, _> = serde_json::from_value(pod.clone());
        match (full, slim) {
            (Ok(full), Ok(slim)) => {
                let want = Pod::from_k8s(&full).map_err(|e| e.to_string());
                let got = slim.into_model().map_err(|e| e.to_string());
                assert_eq!(got, want, "pod {pod}");
            }
            (Err(_), Err(_)) => {}
            (full, slim) => panic!(
                "decoding differs for {pod}: full {:?}, slim {:?}",
                full.err(),
                slim.err()
            ),
        }
    }

    /// Fields of a Pod's metadata: read by the model, or not (those must be skipped).
    fn meta_fields() -> Vec<(&'static str, Value)> {
        vec![
            ("namespace", json!("ns")),
            ("namespace", json!("")),
            ("uid", json!("u-1")),
            ("resourceVersion", json!("42")),
            ("labels", json!({"app": "a", "tier": "web"})),
            (
                "annotations",
                json!({"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
            ),
            (
                "annotations",
                json!({"cluster-autoscaler.kubernetes.io/daemonset-pod": "true"}),
            ),
            (
                "ownerReferences",
                json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "rs", "uid": "r1", "controller": true, "blockOwnerDeletion": true}]),
            ),
            (
                "ownerReferences",
                json!([{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "x"},
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "d",
                    "controller": true}]),
            ),
            ("creationTimestamp", json!("2024-01-01T00:00:00Z")),
            ("deletionTimestamp", json!("2024-01-01T01:00:00Z")),
            ("deletionGracePeriodSeconds", json!(30)),
            (
                "managedFields",
                json!([{"manager": "kubectl", "operation": "Apply",
                "fieldsV1": {"f:spec": {}}}]),
            ),
            ("generateName", json!("p-")),
            ("finalizers", json!(["x"])),
            ("generation", json!(3)),
        ]
    }

    fn container(i: usize) -> Value {
        let variants = [
            json!({"name": "c", "image": "img", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}),
            json!({"name": "c2", "image": "img", "command": ["sh"], "args": ["-c"],
                "env": [{"name": "A", "value": "B"}], "volumeMounts": [{"name": "v", "mountPath": "/v"}],
                "livenessProbe": {"exec": {"command": ["true"]}},
                "resources": {"limits": {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "1"}}}),
            json!({"name": "p", "image": "img", "ports": [{"containerPort": 80, "hostPort": 8080},
                {"containerPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1", "hostPort": 53},
                {"containerPort": 9090, "name": "metrics"}]}),
            json!({"name": "side", "image": "img", "restartPolicy": "Always",
                "resources": {"requests": {"cpu": "100m", "ephemeral-storage": "1Gi"}}}),
            json!({"name": "bad", "image": "img", "resources": {"requests": {"cpu": "lots"}}}),
            json!({"name": "port", "image": "img", "ports": [{"containerPort": 1, "hostPort": 70000}]}),
            json!({"image": "unnamed", "resources": {"requests": {"memory": "100Mi"}}}),
        ];
        variants[i % variants.len()].clone()
    }

    fn spec_fields() -> Vec<(&'static str, Value)> {
        vec![
            ("nodeName", json!("n1")),
            ("nodeName", json!("")),
            ("schedulerName", json!("other")),
            ("nodeSelector", json!({"zone": "a"})),
            ("priority", json!(1000)),
            ("priorityClassName", json!("high")),
            ("terminationGracePeriodSeconds", json!(45)),
            ("hostNetwork", json!(true)),
            ("serviceAccountName", json!("sa")),
            ("dnsPolicy", json!("ClusterFirst")),
            (
                "tolerations",
                json!([{"key": "k", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "t", "operator": "Equal", "value": "v", "effect": "NoExecute",
                    "tolerationSeconds": 30}]),
            ),
            (
                "tolerations",
                json!([{"key": "k", "operator": "Sometimes"}]),
            ),
            (
                "affinity",
                json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In",
                    "values": ["a", "b"]}]}, {"matchFields": [{"key": "metadata.name",
                    "operator": "NotIn", "values": ["n9"]}]}]},
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1,
                    "preference": {"matchExpressions": [{"key": "x", "operator": "Exists"}]}}]}}),
            ),
            (
                "affinity",
                json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone",
                    "namespaces": ["other"]}]},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In",
                    "values": ["a"]}]}, "topologyKey": "kubernetes.io/hostname",
                    "namespaceSelector": {}}]}}),
            ),
            (
                "affinity",
                json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Bogus"}]},
                    "topologyKey": "zone"}]}}),
            ),
            (
                "topologySpreadConstraints",
                json!([{"maxSkew": 1, "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "a"}},
                "matchLabelKeys": ["app"], "minDomains": 2, "nodeTaintsPolicy": "Honor"},
                {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "ScheduleAnyway"}]),
            ),
            (
                "volumes",
                json!([{"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
                {"name": "mem", "emptyDir": {"medium": "Memory"}},
                {"name": "cfg", "configMap": {"name": "c"}},
                {"name": "host", "hostPath": {"path": "/var"}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "pvc-1"}},
                {"name": "eph", "ephemeral": {"volumeClaimTemplate": {"spec": {
                    "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}},
                {"name": "inline", "csi": {"driver": "csi.example.com"}}]),
            ),
            ("overhead", json!({"cpu": "10m", "memory": "16Mi"})),
            ("overhead", json!({"cpu": "-"})),
            (
                "resources",
                json!({"requests": {"cpu": "3"}, "limits": {"memory": "4Gi"}}),
            ),
            (
                "resourceClaims",
                json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
                {"name": "shared", "resourceClaimName": "shared-gpu"}]),
            ),
        ]
    }

    fn status_fields() -> Vec<(&'static str, Value)> {
        let cs = json!([{"name": "c", "image": "img", "imageID": "sha", "ready": true,
            "restartCount": 3, "state": {"running": {"startedAt": "2024-01-01T00:00:02Z"}},
            "allocatedResources": {"cpu": "700m", "memory": "1Gi"},
            "resources": {"requests": {"cpu": "600m", "memory": "1Gi"}}}]);
        vec![
            ("phase", json!("Running")),
            ("phase", json!("Succeeded")),
            ("phase", json!("Failed")),
            ("phase", json!("Pending")),
            ("nominatedNodeName", json!("n2")),
            ("hostIP", json!("10.0.0.1")),
            ("podIP", json!("10.1.0.1")),
            ("startTime", json!("2024-01-01T00:00:01Z")),
            ("qosClass", json!("Burstable")),
            (
                "conditions",
                json!([{"type": "PodScheduled", "status": "False",
                "reason": "Unschedulable", "message": "0/3 nodes", "lastProbeTime": null,
                "lastTransitionTime": "2024-01-01T00:00:01Z"}]),
            ),
            (
                "conditions",
                json!([{"type": "PodResizePending", "status": "True",
                "reason": "Infeasible"}, {"type": "Ready", "status": "True"}]),
            ),
            ("containerStatuses", cs.clone()),
            (
                "initContainerStatuses",
                json!([{"name": "side", "image": "i", "imageID": "",
                "ready": false, "restartCount": 0, "allocatedResources": {"cpu": "200m"}}]),
            ),
            (
                "resourceClaimStatuses",
                json!([{"name": "gpu", "resourceClaimName": "p-gpu-x7k2p"}]),
            ),
        ]
    }

    /// The fields of `pool` whose bit is set in `mask`, as one JSON object.
    fn pick(pool: &[(&'static str, Value)], mask: u64) -> Value {
        let mut out = serde_json::Map::new();
        for (i, (k, v)) in pool.iter().enumerate() {
            if mask >> (i % 64) & 1 == 1 {
                out.insert((*k).to_string(), v.clone());
            }
        }
        Value::Object(out)
    }

    fn pod_of(meta: u64, spec: u64, status: u64, containers: &[usize], init: &[usize]) -> Value {
        let mut md = pick(&meta_fields(), meta);
        if meta & (1 << 63) == 0 {
            md["name"] = json!("p");
        }
        let mut pod = json!({"metadata": md});
        if spec & (1 << 63) == 0 {
            let mut s = pick(&spec_fields(), spec);
            s["containers"] = containers.iter().map(|i| container(*i)).collect();
            if !init.is_empty() {
                s["initContainers"] = init.iter().map(|i| container(*i)).collect();
            }
            pod["spec"] = s;
        }
        if status & (1 << 63) == 0 {
            pod["status"] = pick(&status_fields(), status);
        }
        if meta & (1 << 62) != 0 {
            pod["apiVersion"] = json!("v1");
            pod["kind"] = json!("Pod");
        }
        pod
    }

    #[test]
    fn every_field_alone_and_all_together_give_the_same_model() {
        for i in 0..meta_fields().len() {
            same_model(&pod_of(1 << i, 0, 0, &[0], &[]));
        }
        for i in 0..spec_fields().len() {
            same_model(&pod_of(0, 1 << i, 0, &[0], &[]));
        }
        for i in 0..status_fields().len() {
            same_model(&pod_of(0, 0, 1 << i, &[0], &[]));
        }
        for c in 0..7 {
            same_model(&pod_of(0, 0, 0, &[c], &[]));
            same_model(&pod_of(0, 0, 0, &[0], &[c]));
        }
        // Everything the pools hold at once (later fields of one name win).
        same_model(&pod_of(
            u64::MAX >> 2 | 1 << 62,
            u64::MAX >> 1,
            u64::MAX >> 1,
            &[0, 1, 2, 3],
            &[3, 1],
        ));
    }

    #[test]
    fn bad_documents_are_errors_on_both_paths_never_panics() {
        for pod in [
            json!({"apiVersion": "v2", "kind": "Pod", "metadata": {"name": "p"}}),
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "p"}}),
            json!({"metadata": {"name": "p"}, "spec": {"containers": "x"}}),
            json!({"metadata": {"name": 7}}),
            json!({"metadata": {"name": "p"}, "status": {"conditions": [{"type": 1}]}}),
            json!({"metadata": {"name": "p"}, "spec": {"containers": null, "priority": "high"}}),
            json!([]),
            json!(null),
        ] {
            same_model(&pod);
        }
        let wrong_kind = serde_json::from_value::<SlimPod>(json!({"kind": "Node"}));
        assert!(wrong_kind.is_err(), "a Node is not taken for a Pod");
    }

    #[test]
    fn skipped_fields_are_not_kept() {
        let pod: SlimPod = serde_json::from_value(pod_of(
            u64::MAX >> 2,
            u64::MAX >> 1,
            u64::MAX >> 1,
            &[1],
            &[],
        ))
        .expect("decodes");
        let k8s = pod.into_k8s();
        assert!(k8s.metadata.managed_fields.is_none());
        let spec = k8s.spec.expect("spec");
        assert!(spec.containers[0].env.is_none());
        assert_eq!(spec.containers[0].image, None);
        assert!(spec.service_account_name.is_none());
        assert!(k8s.status.expect("status").host_ip.is_none());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn random_pods_give_the_same_model(
            meta in any::<u64>(),
            spec in any::<u64>(),
            status in any::<u64>(),
            containers in prop::collection::vec(0usize..7, 0..4),
            init in prop::collection::vec(0usize..7, 0..3),
        ) {
            same_model(&pod_of(meta, spec, status, &containers, &init));
        }
    }
}

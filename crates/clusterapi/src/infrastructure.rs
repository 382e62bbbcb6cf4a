//! The infrastructure machine template of a scalable resource: Cluster API's own way to say
//! what a node of a group looks like, for scaling from zero.
//!
//! A MachineDeployment, MachineSet or MachinePool names its infrastructure object in
//! `spec.template.spec.infrastructureRef` (`apiVersion`, `kind`, `name` in Cluster API
//! v1beta1; `apiGroup`, `kind`, `name` in v1beta2), in its own namespace. Providers that opt
//! into autoscaling from zero publish there `status.capacity` (resource quantities, GPUs
//! included) and `status.nodeInfo` (`architecture`, `operatingSystem`). As upstream's provider,
//! the capacity annotations win over the template's capacity, resource by resource, and the
//! pods a node takes come from the `maxPods` annotation (110 when absent), never from the
//! template; the node info gives the template's `kubernetes.io/arch` and `kubernetes.io/os`
//! labels unless the labels annotation gives them.
//!
//! It decides only what the template adds to the annotations. It never fails a group: a
//! reference that names nothing readable leaves the annotations alone (upstream does the same),
//! and a quantity that does not parse is left out with a warning naming the object and field.

use std::collections::BTreeMap;
use std::sync::Arc;

use autoscaler_model::{
    Labels, Node, ObjectKey, ObjectStore, ResourceName, Sym, group_of, parse_milli, parse_units,
};
use serde_json::Value;

use crate::annotations::{
    ARCH_LABEL, CPU_KEY, EPHEMERAL_DISK_KEY, MEMORY_KEY, NodeShape, OS_LABEL, string_map,
};

/// The API group of Cluster API infrastructure providers (`AWSMachineTemplate`,
/// `DockerMachineTemplate`, ...).
pub const INFRASTRUCTURE_GROUP: &str = "infrastructure.cluster.x-k8s.io";

/// What an infrastructure template says about the nodes of its group.
#[derive(Clone, Debug, PartialEq)]
pub struct InfrastructureTemplate {
    /// The object read.
    pub key: ObjectKey,
    /// `status.capacity`, the quantities that parse, by resource.
    pub capacity: Vec<(ResourceName, i64)>,
    /// `status.nodeInfo.architecture`.
    pub architecture: Option<String>,
    /// `status.nodeInfo.operatingSystem`.
    pub operating_system: Option<String>,
}

impl InfrastructureTemplate {
    /// A template `key` that says nothing yet.
    pub fn of(key: ObjectKey) -> InfrastructureTemplate {
        InfrastructureTemplate {
            key,
            capacity: Vec::new(),
            architecture: None,
            operating_system: None,
        }
    }
}

/// The key of the object `obj`'s `spec.template.spec.infrastructureRef` names, in `namespace`;
/// `None` without a complete reference.
pub fn reference(obj: &Value, namespace: &str) -> Option<ObjectKey> {
    let r = obj.pointer("/spec/template/spec/infrastructureRef")?;
    let text = |k: &str| r.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    // v1beta2 names the group; v1beta1 an apiVersion (`group/version`).
    let group = match text("apiGroup") {
        Some(g) => g.to_string(),
        None => group_of(text("apiVersion")?).to_string(),
    };
    Some(ObjectKey {
        group,
        kind: text("kind")?.to_string(),
        namespace: namespace.to_string(),
        name: text("name")?.to_string(),
    })
}

/// Reads the infrastructure template of `obj` (a scalable resource in `namespace`) from
/// `store`; `None` when it names none or the store does not hold it. Quantities that do not
/// parse go to `warnings`.
pub(crate) fn read(
    store: &ObjectStore,
    obj: &Value,
    namespace: &str,
    warnings: &mut Vec<String>,
) -> Option<InfrastructureTemplate> {
    let key = reference(obj, namespace)?;
    let infra = store.get(&key)?;
    let mut out = InfrastructureTemplate::of(key.clone());
    for (name, text) in string_map(infra.pointer("/status/capacity")) {
        let resource = ResourceName::parse(&name);
        let parsed = if resource.is_milli() {
            parse_milli(&text)
        } else {
            parse_units(&text)
        };
        match parsed {
            Ok(v) if v >= 0 => out.capacity.push((resource, v)),
            Ok(_) => warnings.push(format!(
                "{key}: status.capacity.{name} is {text:?}: negative; left out"
            )),
            Err(e) => warnings.push(format!("{key}: status.capacity.{name}: {e}; left out")),
        }
    }
    let info = string_map(infra.pointer("/status/nodeInfo"));
    out.architecture = info.get("architecture").filter(|s| !s.is_empty()).cloned();
    out.operating_system = info
        .get("operatingSystem")
        .filter(|s| !s.is_empty())
        .cloned();
    Some(out)
}

/// `ann` with the template's CPU, memory and ephemeral storage filled in where the capacity
/// annotations give none, so that a group with a template but no annotations can scale from
/// zero (the annotations win where both speak).
pub(crate) fn fill_annotations(
    ann: &BTreeMap<String, String>,
    infra: Option<&InfrastructureTemplate>,
) -> BTreeMap<String, String> {
    let mut out = ann.clone();
    let Some(infra) = infra else { return out };
    for (resource, v) in &infra.capacity {
        let key = match resource {
            ResourceName::Cpu => CPU_KEY,
            ResourceName::Memory => MEMORY_KEY,
            ResourceName::EphemeralStorage => EPHEMERAL_DISK_KEY,
            _ => continue,
        };
        let given = out.get(key).is_some_and(|t| !t.is_empty());
        if !given && *v > 0 {
            let text = if resource.is_milli() {
                format!("{v}m")
            } else {
                v.to_string()
            };
            out.insert(key.to_string(), text);
        }
    }
    out
}

/// Adds to `shape`'s capacity the template's extended resources (GPUs among them) the
/// annotations did not give. Pods stay as the annotations say (upstream's `maxPods` default
/// overrides the template's).
pub(crate) fn add_extended(shape: &mut NodeShape, infra: Option<&InfrastructureTemplate>) {
    let (Some(capacity), Some(infra)) = (shape.capacity.as_mut(), infra) else {
        return;
    };
    for (resource, v) in &infra.capacity {
        if matches!(resource, ResourceName::Extended(_)) && capacity.get(*resource) == 0 {
            capacity.set(*resource, *v);
        }
    }
}

/// The template node with the architecture and operating system labels of the template's node
/// info, where the labels annotation (in `shape`) does not set them.
pub(crate) fn with_node_info(
    node: Option<Arc<Node>>,
    shape: &NodeShape,
    infra: Option<&InfrastructureTemplate>,
) -> Option<Arc<Node>> {
    let mut node = node?;
    let Some(infra) = infra else {
        return Some(node);
    };
    let annotated = |label: &str| shape.labels.iter().any(|(k, _)| k == label);
    for (label, value) in [
        (ARCH_LABEL, &infra.architecture),
        (OS_LABEL, &infra.operating_system),
    ] {
        if let Some(v) = value
            && !annotated(label)
        {
            let n = Arc::make_mut(&mut node);
            let mut labels: Labels = n.labels.clone();
            labels.insert(Sym::new(label), Sym::new(v));
            n.labels = labels;
        }
    }
    Some(node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::{GPU_COUNT_KEY, GPU_TYPE_KEY, LABELS_KEY, MAX_PODS_KEY};
    use serde_json::json;

    fn test_key() -> ObjectKey {
        ObjectKey {
            group: INFRASTRUCTURE_GROUP.into(),
            kind: "AWSMachineTemplate".into(),
            namespace: "ns".into(),
            name: "gpu-tmpl".into(),
        }
    }

    fn store_with(template: Value) -> ObjectStore {
        let mut s = ObjectStore::new();
        s.insert(template, "test").unwrap();
        s
    }

    fn aws_template(status: Value) -> Value {
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
               "kind": "AWSMachineTemplate",
               "metadata": {"name": "gpu-tmpl", "namespace": "ns"},
               "status": status})
    }

    fn md(reference: Value) -> Value {
        json!({"spec": {"template": {"spec": {"infrastructureRef": reference}}}})
    }

    /// Cluster API v1beta1 names the template by apiVersion, v1beta2 by apiGroup; both lead to
    /// the same object, in the resource's namespace.
    #[test]
    fn the_reference_is_read_in_both_contract_versions() {
        let v1beta1 = md(
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                "kind": "AWSMachineTemplate", "name": "gpu-tmpl"}),
        );
        let v1beta2 = md(json!({"apiGroup": "infrastructure.cluster.x-k8s.io",
                                "kind": "AWSMachineTemplate", "name": "gpu-tmpl"}));
        let want = ObjectKey {
            group: INFRASTRUCTURE_GROUP.into(),
            kind: "AWSMachineTemplate".into(),
            namespace: "ns".into(),
            name: "gpu-tmpl".into(),
        };
        assert_eq!(reference(&v1beta1, "ns"), Some(want.clone()));
        assert_eq!(reference(&v1beta2, "ns"), Some(want));
        let no_kind = md(json!({"apiGroup": "g", "name": "n"}));
        assert_eq!(reference(&no_kind, "ns"), None);
        assert_eq!(reference(&json!({"spec": {}}), "ns"), None);
    }

    #[test]
    fn status_capacity_and_node_info_are_read_and_bad_quantities_left_out() {
        let store = store_with(aws_template(json!({
            "capacity": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2", "pods": "58",
                         "example.com/bad": "lots"},
            "nodeInfo": {"architecture": "arm64", "operatingSystem": "linux"}})));
        let obj = md(json!({"apiGroup": "infrastructure.cluster.x-k8s.io",
                            "kind": "AWSMachineTemplate", "name": "gpu-tmpl"}));
        let mut warnings = Vec::new();
        let t = read(&store, &obj, "ns", &mut warnings).expect("read");
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("status.capacity.example.com/bad"));
        assert!(t.capacity.contains(&(ResourceName::Cpu, 8000)));
        assert!(
            t.capacity
                .contains(&(ResourceName::parse("nvidia.com/gpu"), 2))
        );
        assert_eq!(t.architecture.as_deref(), Some("arm64"));
        // Another namespace holds no such template.
        assert!(read(&store, &obj, "other", &mut warnings).is_none());
    }

    /// Upstream: the template's capacity first, each capacity annotation overriding its
    /// resource; pods from `maxPods` (110 when absent), never from the template.
    #[test]
    fn annotations_win_over_the_template_capacity() {
        let infra = InfrastructureTemplate {
            capacity: vec![
                (ResourceName::Cpu, 8000),
                (ResourceName::Memory, 32 << 30),
                (ResourceName::Pods, 58),
                (ResourceName::parse("nvidia.com/gpu"), 2),
            ],
            ..InfrastructureTemplate::of(test_key())
        };
        let shape_of = |ann: &[(&str, &str)]| {
            let ann: BTreeMap<String, String> = ann
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let filled = fill_annotations(&ann, Some(&infra));
            let mut warnings = Vec::new();
            let mut shape =
                crate::annotations::node_shape(&json!({}), &filled, "md", &mut warnings);
            add_extended(&mut shape, Some(&infra));
            assert!(warnings.is_empty(), "{warnings:?}");
            shape.capacity.expect("a capacity")
        };
        // The template alone: scale from zero with its CPU, memory and GPUs.
        let c = shape_of(&[]);
        assert_eq!((c.cpu, c.memory, c.pods), (8000, 32 << 30, 110));
        assert_eq!(c.get(ResourceName::parse("nvidia.com/gpu")), 2);
        // Annotations override CPU and the GPU count, and set pods.
        let c = shape_of(&[
            (CPU_KEY, "4"),
            (GPU_TYPE_KEY, "nvidia.com/gpu"),
            (GPU_COUNT_KEY, "1"),
            (MAX_PODS_KEY, "30"),
        ]);
        assert_eq!((c.cpu, c.memory, c.pods), (4000, 32 << 30, 30));
        assert_eq!(c.get(ResourceName::parse("nvidia.com/gpu")), 1);
    }

    #[test]
    fn node_info_sets_arch_and_os_unless_the_labels_annotation_does() {
        let infra = InfrastructureTemplate {
            architecture: Some("arm64".into()),
            operating_system: Some("windows".into()),
            ..InfrastructureTemplate::of(test_key())
        };
        let label = |n: &Node, k: &str| n.labels.get_str(k).map(str::to_string);
        let mut ann = BTreeMap::new();
        ann.insert(CPU_KEY.to_string(), "1".to_string());
        ann.insert(MEMORY_KEY.to_string(), "1Gi".to_string());
        let shape = crate::annotations::node_shape(&json!({}), &ann, "md", &mut Vec::new());
        let node = crate::annotations::template_node("g", &shape, "amd64");
        let n = with_node_info(node, &shape, Some(&infra)).unwrap();
        assert_eq!(label(&n, ARCH_LABEL).as_deref(), Some("arm64"));
        assert_eq!(label(&n, OS_LABEL).as_deref(), Some("windows"));
        ann.insert(
            LABELS_KEY.to_string(),
            "kubernetes.io/arch=amd64".to_string(),
        );
        let shape = crate::annotations::node_shape(&json!({}), &ann, "md", &mut Vec::new());
        let node = crate::annotations::template_node("g", &shape, "amd64");
        let n = with_node_info(node, &shape, Some(&infra)).unwrap();
        assert_eq!(label(&n, ARCH_LABEL).as_deref(), Some("amd64"));
    }
}

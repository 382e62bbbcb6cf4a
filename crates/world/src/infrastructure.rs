//! The infrastructure machine template a MachineDeployment names in
//! `spec.template.spec.infrastructureRef`, as the machines the infrastructure provider builds
//! from it: its `status.capacity` (GPUs included) is what such a machine's node holds, and its
//! `status.nodeInfo` (`architecture`, `operatingSystem`) what the node's `kubernetes.io/arch`
//! and `kubernetes.io/os` labels say (Cluster API's contract for scale from zero).
//!
//! It decides only what a template describes: the group's capacity annotations still win, per
//! resource, as the autoscaler's provider reads them, and pod slots come from the `maxPods`
//! annotation (the kubelet's setting, not a property of the machine). The reference is followed
//! as Cluster API does: `apiVersion` (v1beta1) or `apiGroup` (v1beta2), `kind`, `name`, in the
//! MachineDeployment's namespace. A reference that names nothing, or a template without a
//! status, describes nothing: the node gets the defaults. It never panics on a malformed object.

use serde_json::{Map, Value};

use crate::cluster::Cluster;
use crate::objects::key;

/// What a machine built from the template holds.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct TemplateShape {
    /// `status.capacity`, resource name to quantity text.
    pub capacity: Map<String, Value>,
    /// `status.nodeInfo.architecture`.
    pub architecture: Option<String>,
    /// `status.nodeInfo.operatingSystem`.
    pub operating_system: Option<String>,
}

/// The template `md` names, if it names one the cluster holds.
pub(crate) fn template_of(c: &Cluster, md: &Value) -> Option<TemplateShape> {
    let r = md.pointer("/spec/template/spec/infrastructureRef")?;
    let text = |f: &str| r.get(f).and_then(Value::as_str);
    let group = match (text("apiGroup"), text("apiVersion")) {
        (Some(g), _) => g,
        // `group/version`; a core `v1` has no group and names no infrastructure template.
        (None, Some(v)) => v.rsplit_once('/')?.0,
        (None, None) => return None,
    };
    let namespace = md.pointer("/metadata/namespace").and_then(Value::as_str)?;
    let t = c
        .store
        .get(&key(group, text("kind")?, namespace, text("name")?))?;
    let info = |f: &str| {
        t.pointer(&format!("/status/nodeInfo/{f}"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let capacity = t
        .pointer("/status/capacity")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(_, v)| v.is_string() || v.is_number())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    Some(TemplateShape {
        capacity,
        architecture: info("architecture"),
        operating_system: info("operatingSystem"),
    })
}

impl TemplateShape {
    /// The template's quantity of `resource`, as text.
    pub(crate) fn quantity(&self, resource: &str) -> Option<String> {
        match self.capacity.get(resource)? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }

    /// The template's resources other than cpu, memory, pods and ephemeral storage (GPUs and
    /// other extended resources), by name.
    pub(crate) fn extended(&self) -> impl Iterator<Item = (&str, String)> + '_ {
        self.capacity
            .keys()
            .filter(|k| !matches!(k.as_str(), "cpu" | "memory" | "pods" | "ephemeral-storage"))
            .filter_map(|k| Some((k.as_str(), self.quantity(k)?)))
    }
}

#[cfg(test)]
mod tests {
    use crate::testkit::*;

    const INFRA: &str = "infrastructure.cluster.x-k8s.io";

    /// A group `name` at zero, its capacity annotations but `keep` removed, whose template
    /// names `reference`.
    fn group_on_template(w: &mut World, name: &str, keep: &[&str], reference: Value) {
        w.add_node_group(&group(name, 0)).unwrap();
        let mut md = get(w, "cluster.x-k8s.io", "MachineDeployment", "capi", name).unwrap();
        let annotations = md["metadata"]["annotations"].as_object_mut().unwrap();
        annotations.retain(|k, _| {
            match k.strip_prefix("capacity.cluster-autoscaler.kubernetes.io/") {
                Some(resource) => keep.contains(&resource),
                None => true,
            }
        });
        md["spec"]["template"]["spec"]["infrastructureRef"] = reference;
        w.replace_object(md).unwrap();
    }

    /// A new machine's node holds what its infrastructure template's status says (GPUs
    /// included, its OS and architecture as labels), whether the reference names the template by
    /// `apiVersion` (v1beta1) or `apiGroup` (v1beta2); a capacity annotation still wins for its
    /// resource.
    #[test]
    fn new_nodes_take_their_infrastructure_template_s_capacity() {
        let mut w = world(1);
        w.apply(
            json!({"apiVersion": format!("{INFRA}/v1beta1"), "kind": "DockerMachineTemplate",
            "metadata": {"name": "gpu-2", "namespace": "capi"},
            "spec": {"template": {"spec": {}}},
            "status": {"capacity": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"},
                       "nodeInfo": {"architecture": "arm64", "operatingSystem": "linux"}}}),
        )
        .unwrap();
        group_on_template(
            &mut w,
            "by-version",
            &["memory"],
            json!({"apiVersion": format!("{INFRA}/v1beta1"), "kind": "DockerMachineTemplate",
                   "name": "gpu-2"}),
        );
        group_on_template(
            &mut w,
            "by-group",
            &[],
            json!({"apiGroup": INFRA, "kind": "DockerMachineTemplate", "name": "gpu-2"}),
        );
        group_on_template(
            &mut w,
            "dangling",
            &[],
            json!({"apiGroup": INFRA, "kind": "DockerMachineTemplate", "name": "absent"}),
        );
        for g in ["by-version", "by-group", "dangling"] {
            w.set_replicas("capi", g, 1).unwrap();
        }
        w.step_until(600_000);
        let node_of = |g: &str| {
            let m = w.machines_of("capi", g);
            get(&w, "", "Node", "", &m[0]).expect("the machine's node")
        };
        let by_version = node_of("by-version");
        assert_eq!(by_version["status"]["capacity"]["cpu"], "8");
        assert_eq!(by_version["status"]["capacity"]["memory"], "16Gi");
        assert_eq!(by_version["status"]["allocatable"]["nvidia.com/gpu"], "2");
        assert_eq!(
            by_version["metadata"]["labels"]["kubernetes.io/arch"],
            "arm64"
        );
        let by_group = node_of("by-group");
        assert_eq!(by_group["status"]["capacity"]["memory"], "32Gi");
        assert_eq!(by_group["status"]["capacity"]["nvidia.com/gpu"], "2");
        assert_eq!(by_group["status"]["capacity"]["pods"], "110");
        // A template that does not exist describes nothing: the defaults.
        let dangling = node_of("dangling");
        assert_eq!(dangling["status"]["capacity"]["cpu"], "4");
        assert!(
            dangling["status"]["capacity"]
                .get("nvidia.com/gpu")
                .is_none()
        );
        assert_eq!(
            dangling["metadata"]["labels"]["kubernetes.io/arch"],
            "amd64"
        );
    }
}

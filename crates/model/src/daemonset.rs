//! DaemonSets, reduced to what node templates need: the pod a DaemonSet would start, with the
//! tolerations the DaemonSet controller adds to every daemon pod.
//!
//! It converts the API object only; which template nodes a daemon pod lands on (node selector,
//! required node affinity, taints) is decided by scale-up's templates. It never schedules
//! anything and never reads the API.

use std::sync::Arc;

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as api;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use crate::intern::Sym;
use crate::pod::{ModelError, OwnerRef, Pod};
use crate::taints::{TaintEffect, Toleration, TolerationOp};

/// A DaemonSet view.
#[derive(Clone, Debug, PartialEq)]
pub struct DaemonSet {
    /// Namespace.
    pub namespace: Sym,
    /// Name.
    pub name: Arc<str>,
    /// The pod it creates, owned by the DaemonSet, with the controller's default tolerations
    /// added; not bound to any node.
    pub pod: Pod,
}

/// Tolerations the DaemonSet controller adds to every daemon pod (so that daemons run on nodes
/// that are cordoned, not ready or under pressure).
fn daemon_tolerations(host_network: bool) -> Vec<Toleration> {
    let mut out = vec![
        ("node.kubernetes.io/not-ready", TaintEffect::NoExecute),
        ("node.kubernetes.io/unreachable", TaintEffect::NoExecute),
        ("node.kubernetes.io/disk-pressure", TaintEffect::NoSchedule),
        (
            "node.kubernetes.io/memory-pressure",
            TaintEffect::NoSchedule,
        ),
        ("node.kubernetes.io/pid-pressure", TaintEffect::NoSchedule),
        ("node.kubernetes.io/unschedulable", TaintEffect::NoSchedule),
    ];
    if host_network {
        out.push((
            "node.kubernetes.io/network-unavailable",
            TaintEffect::NoSchedule,
        ));
    }
    out.into_iter()
        .map(|(key, effect)| Toleration {
            key: Some(Sym::new(key)),
            op: TolerationOp::Exists,
            value: Sym::new(""),
            effect: Some(effect),
        })
        .collect()
}

impl DaemonSet {
    /// Builds the view from the API object. Errors name the DaemonSet and the field of its pod
    /// template.
    pub fn from_k8s(ds: &apps::DaemonSet) -> Result<DaemonSet, ModelError> {
        let name = ds
            .metadata
            .name
            .clone()
            .ok_or_else(|| ModelError::Missing {
                object: format!(
                    "DaemonSet {}/<unnamed>",
                    ds.metadata.namespace.as_deref().unwrap_or("default")
                ),
                field: "metadata.name".into(),
            })?;
        let namespace = ds
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let object = format!("DaemonSet {namespace}/{name}");
        let spec = ds.spec.as_ref().ok_or_else(|| ModelError::Missing {
            object: object.clone(),
            field: "spec".into(),
        })?;
        let template = &spec.template;
        let pod_spec = template.spec.clone().ok_or_else(|| ModelError::Missing {
            object: object.clone(),
            field: "spec.template.spec".into(),
        })?;
        let host_network = pod_spec.host_network.unwrap_or(false);
        let tmeta = template.metadata.clone().unwrap_or_default();
        let api_pod = api::Pod {
            metadata: meta::ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                labels: tmeta.labels,
                annotations: tmeta.annotations,
                ..Default::default()
            },
            spec: Some(pod_spec),
            status: None,
        };
        let mut pod = Pod::from_k8s(&api_pod).map_err(|e| rename_object(e, &object))?;
        pod.owner = Some(OwnerRef {
            kind: Sym::new("DaemonSet"),
            api_version: Sym::new("apps/v1"),
            name: Arc::from(name.as_str()),
            uid: Arc::from(ds.metadata.uid.as_deref().unwrap_or("")),
            controller: true,
        });
        pod.tolerations.extend(daemon_tolerations(host_network));
        pod.update_equivalence();
        Ok(DaemonSet {
            namespace: Sym::new(&namespace),
            name: Arc::from(name.as_str()),
            pod,
        })
    }
}

/// Errors from the pod template name the DaemonSet and the template's field path.
fn rename_object(e: ModelError, object: &str) -> ModelError {
    let prefix = |f: String| format!("spec.template.{f}");
    match e {
        ModelError::Quantity { field, error, .. } => ModelError::Quantity {
            object: object.into(),
            field: prefix(field),
            error,
        },
        ModelError::Invalid {
            field, value, why, ..
        } => ModelError::Invalid {
            object: object.into(),
            field: prefix(field),
            value,
            why,
        },
        ModelError::Missing { field, .. } => ModelError::Missing {
            object: object.into(),
            field: prefix(field),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ds(json: serde_json::Value) -> Result<DaemonSet, ModelError> {
        DaemonSet::from_k8s(&serde_json::from_value(json).unwrap())
    }

    fn logging() -> DaemonSet {
        ds(serde_json::json!({
            "metadata": {"name": "fluentd", "namespace": "kube-system", "uid": "u1"},
            "spec": {
                "selector": {"matchLabels": {"app": "fluentd"}},
                "template": {
                    "metadata": {"labels": {"app": "fluentd"}},
                    "spec": {
                        "nodeSelector": {"kubernetes.io/os": "linux"},
                        "containers": [{"name": "f", "resources": {"requests": {"cpu": "100m", "memory": "200Mi"}}}]
                    }
                }
            }
        }))
        .unwrap()
    }

    #[test]
    fn daemon_pod_is_owned_unbound_and_sized() {
        let pod = logging().pod;
        assert_eq!(pod.node_name, None);
        assert_eq!(pod.requests.cpu, 100);
        assert_eq!(
            pod.owner.as_ref().map(|o| o.kind.as_str()),
            Some("DaemonSet")
        );
        assert_eq!(pod.labels.get_str("app"), Some("fluentd"));
        // The controller's own tolerations are added to the template's.
        assert!(
            pod.tolerations
                .iter()
                .any(|t| t.key == Some(Sym::new("node.kubernetes.io/not-ready")))
        );
    }

    #[test]
    fn malformed_daemonsets_are_named_errors() {
        let e = ds(serde_json::json!({"metadata": {"namespace": "x"}, "spec": {"selector": {}, "template": {}}}))
            .unwrap_err();
        assert!(e.to_string().contains("metadata.name"), "{e}");
        let e = ds(serde_json::json!({
            "metadata": {"name": "d", "namespace": "x"},
            "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}}}
        }))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("DaemonSet x/d")
                && e.contains("spec.template.spec.containers[0].resources.requests.cpu"),
            "{e}"
        );
    }
}

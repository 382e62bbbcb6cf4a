//! CapacityBuffers (`autoscaling.x-k8s.io/v1beta1`, and the earlier `v1alpha1`): spare capacity
//! declared as a number of pods shaped like a PodTemplate or like the pods of a workload, which
//! the autoscaler keeps room for as if they were pending.
//!
//! A buffer names its pod shape by `podTemplateRef` (a PodTemplate in its namespace) or by
//! `scalableRef` (a Deployment, ReplicaSet, StatefulSet or Job, whose pod template and replica
//! count are read), and its size by `replicas`, `percentage` (of the workload's replicas) and
//! `limits` (a resource budget the pods must fit in). The CRD is not in `k8s-openapi`: the object
//! is read through typed serde structs here, with every value the schema refuses refused with
//! the field's path.
//!
//! Nothing here decides how many pods a buffer stands for (the core's `provisioning::buffer`
//! does); it never performs I/O and never reads a clock.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde::Deserialize;
use serde_json::Value;

use crate::pod::ModelError;
use crate::quantity::Quantity;

/// Kind of a CapacityBuffer (group [`crate::provisioning_request::GROUP`]).
pub const KIND: &str = "CapacityBuffer";
/// The API versions read: `v1beta1` (cluster-autoscaler 1.35) and `v1alpha1` (1.34).
pub const VERSIONS: [&str; 2] = ["v1beta1", "v1alpha1"];
/// The only provisioning strategy the autoscaler acts on (and the default of an empty one).
pub const ACTIVE_CAPACITY: &str = "buffer.x-k8s.io/active-capacity";
/// The status condition saying whether the buffer was resolved into pods.
pub const CONDITION_READY_FOR_PROVISIONING: &str = "ReadyForProvisioning";
/// The status condition saying whether the buffer's pods are being provisioned.
pub const CONDITION_PROVISIONING: &str = "Provisioning";
/// The reason of `ReadyForProvisioning=True`.
pub const REASON_ATTRIBUTES_SET: &str = "AttributesSetSuccessfully";

/// The workload a buffer copies its pods from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalableRef {
    /// API group (`apps`, `batch`; empty for the core group).
    pub api_group: Arc<str>,
    /// Kind (`Deployment`, `ReplicaSet`, `StatefulSet`, `Job`).
    pub kind: Arc<str>,
    /// Name, in the buffer's namespace.
    pub name: Arc<str>,
}

/// A CapacityBuffer.
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityBuffer {
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: Arc<str>,
    /// UID (empty if absent).
    pub uid: Arc<str>,
    /// `apiVersion` as the object came.
    pub api_version: Arc<str>,
    /// `metadata.generation`.
    pub generation: i64,
    /// `metadata.resourceVersion`: the precondition of a status write.
    pub resource_version: Arc<str>,
    /// `spec.provisioningStrategy`, [`ACTIVE_CAPACITY`] when empty or absent.
    pub strategy: Arc<str>,
    /// `spec.podTemplateRef.name`.
    pub pod_template: Option<Arc<str>>,
    /// `spec.scalableRef`.
    pub scalable: Option<ScalableRef>,
    /// `spec.replicas`.
    pub replicas: Option<u32>,
    /// `spec.percentage`.
    pub percentage: Option<u32>,
    /// `spec.limits`: resource name to quantity.
    pub limits: Option<BTreeMap<String, Quantity>>,
}

impl CapacityBuffer {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Reads a buffer from its JSON or YAML value, checking what the CRD's schema checks.
    pub fn from_value(value: &Value) -> Result<CapacityBuffer, ModelError> {
        let md = value.get("metadata");
        let s = |k: &str| md.and_then(|m| m.get(k)).and_then(Value::as_str);
        let object = format!(
            "{KIND} {}/{}",
            s("namespace").unwrap_or("default"),
            s("name").unwrap_or("")
        );
        let o = crate::store::typed::<Object>(value).map_err(|why| ModelError::Invalid {
            object: object.clone(),
            field: ".".into(),
            value: String::new(),
            why,
        })?;
        let invalid = |field: &str, value: String, why: &str| ModelError::Invalid {
            object: object.clone(),
            field: field.into(),
            value,
            why: why.into(),
        };
        let missing = |field: &str| ModelError::Missing {
            object: object.clone(),
            field: field.into(),
        };
        let name = o.metadata.name.unwrap_or_default();
        if name.is_empty() {
            return Err(missing("metadata.name"));
        }
        let spec = o.spec.ok_or_else(|| missing("spec"))?;
        let pod_template = match spec.pod_template_ref {
            Some(r) if r.name.is_empty() => return Err(missing("spec.podTemplateRef.name")),
            Some(r) => Some(Arc::from(r.name)),
            None => None,
        };
        let scalable = match spec.scalable_ref {
            Some(r) => {
                if r.kind.is_empty() {
                    return Err(missing("spec.scalableRef.kind"));
                }
                if r.name.is_empty() {
                    return Err(missing("spec.scalableRef.name"));
                }
                Some(ScalableRef {
                    api_group: r.api_group.into(),
                    kind: r.kind.into(),
                    name: r.name.into(),
                })
            }
            None => None,
        };
        // The schema admits exactly one of the two.
        if pod_template.is_some() == scalable.is_some() {
            return Err(invalid(
                "spec",
                String::new(),
                "exactly one of podTemplateRef and scalableRef must be set",
            ));
        }
        let non_negative = |field: &str, v: Option<i64>| -> Result<Option<u32>, ModelError> {
            v.map(|v| {
                u32::try_from(v)
                    .ok()
                    .filter(|&v| i32::try_from(v).is_ok())
                    .ok_or_else(|| invalid(field, v.to_string(), "must be 0 or more (an int32)"))
            })
            .transpose()
        };
        let replicas = non_negative("spec.replicas", spec.replicas)?;
        let percentage = non_negative("spec.percentage", spec.percentage)?;
        let limits = match spec.limits {
            None => None,
            Some(map) => {
                let mut out = BTreeMap::new();
                for (k, v) in map {
                    let q = crate::quantity::parse(&v).map_err(|e| {
                        invalid(&format!("spec.limits.{k}"), v.clone(), &e.to_string())
                    })?;
                    out.insert(k, q);
                }
                Some(out)
            }
        };
        let strategy = spec
            .provisioning_strategy
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| ACTIVE_CAPACITY.into());
        Ok(CapacityBuffer {
            namespace: o
                .metadata
                .namespace
                .unwrap_or_else(|| "default".into())
                .into(),
            name: name.into(),
            uid: o.metadata.uid.unwrap_or_default().into(),
            api_version: o.api_version.into(),
            generation: o.metadata.generation.unwrap_or(0),
            resource_version: o.metadata.resource_version.unwrap_or_default().into(),
            strategy: strategy.into(),
            pod_template,
            scalable,
            replicas,
            percentage,
            limits,
        })
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Object {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    metadata: meta::ObjectMeta,
    spec: Option<Spec>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    provisioning_strategy: Option<String>,
    pod_template_ref: Option<NameRef>,
    scalable_ref: Option<ScalableRefObject>,
    replicas: Option<i64>,
    percentage: Option<i64>,
    limits: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct NameRef {
    #[serde(default)]
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ScalableRefObject {
    #[serde(default)]
    api_group: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn buffer(spec: Value) -> Value {
        json!({
            "apiVersion": "autoscaling.x-k8s.io/v1beta1",
            "kind": "CapacityBuffer",
            "metadata": {"name": "headroom", "namespace": "web", "generation": 3,
                         "resourceVersion": "9"},
            "spec": spec,
        })
    }

    #[test]
    fn a_buffer_reads_its_template_or_workload_and_its_size() {
        let b = CapacityBuffer::from_value(&buffer(json!({
            "podTemplateRef": {"name": "web-pod"}, "replicas": 4,
            "limits": {"cpu": "10"}
        })))
        .unwrap();
        assert_eq!(b.key(), "web/headroom");
        assert_eq!(b.pod_template.as_deref(), Some("web-pod"));
        assert_eq!(b.replicas, Some(4));
        assert_eq!(
            &*b.strategy, ACTIVE_CAPACITY,
            "an absent strategy is the default"
        );
        assert_eq!(
            b.limits.unwrap()["cpu"],
            crate::quantity::parse("10").unwrap()
        );
        let b = CapacityBuffer::from_value(&buffer(json!({
            "scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "web"},
            "percentage": 20, "provisioningStrategy": ""
        })))
        .unwrap();
        assert_eq!(&*b.scalable.unwrap().kind, "Deployment");
        assert_eq!(b.percentage, Some(20));
        assert_eq!(
            &*b.strategy, ACTIVE_CAPACITY,
            "an empty strategy is the default"
        );
    }

    #[test]
    fn what_the_schema_refuses_is_refused_with_the_field_path() {
        let cases = [
            (
                json!({"replicas": 1}),
                "exactly one of podTemplateRef and scalableRef",
            ),
            (
                json!({"podTemplateRef": {"name": "t"},
                       "scalableRef": {"kind": "Deployment", "name": "w"}}),
                "exactly one of podTemplateRef and scalableRef",
            ),
            (
                json!({"podTemplateRef": {"name": "t"}, "replicas": -1}),
                "field spec.replicas: invalid value \"-1\"",
            ),
            (
                json!({"scalableRef": {"kind": "Deployment", "name": "w"}, "percentage": -5}),
                "field spec.percentage",
            ),
            (
                json!({"podTemplateRef": {"name": "t"}, "limits": {"cpu": "lots"}}),
                "field spec.limits.cpu: invalid value \"lots\"",
            ),
            (
                json!({"scalableRef": {"name": "w"}}),
                "spec.scalableRef.kind",
            ),
            (
                json!({"podTemplateRef": {"name": ""}}),
                "spec.podTemplateRef.name",
            ),
        ];
        for (spec, want) in cases {
            let text = CapacityBuffer::from_value(&buffer(spec))
                .unwrap_err()
                .to_string();
            assert!(text.starts_with("CapacityBuffer web/headroom"), "{text}");
            assert!(text.contains(want), "{text} lacks {want}");
        }
    }
}

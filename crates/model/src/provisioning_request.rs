//! ProvisioningRequests (`autoscaling.x-k8s.io/v1`, a CRD of SIG Autoscaling) and the pods they
//! stand for, reduced to what the decisions read.
//!
//! A request names a class (`check-capacity.autoscaling.x-k8s.io`, "is there room for all of
//! these pods now?", or `best-effort-atomic-scale-up.autoscaling.x-k8s.io`, "add the nodes for
//! all of them or none"), pod sets (a PodTemplate in the request's namespace and a count),
//! free-form parameters, and the conditions the autoscaler wrote so far. The CRD is not in
//! `k8s-openapi`, so the object is read through typed serde structs here, and every value the
//! API server's schema would refuse is refused with the field's path (`spec.podSets[1].count`).
//!
//! Nothing here decides what to do with a request (the core's `provisioning` does); it never
//! performs I/O and never reads a clock.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde::Deserialize;
use serde_json::Value;

use crate::pod::{ModelError, Pod};

/// API group of ProvisioningRequests (and CapacityBuffers).
pub const GROUP: &str = "autoscaling.x-k8s.io";
/// Kind of a ProvisioningRequest.
pub const KIND: &str = "ProvisioningRequest";
/// The API versions read: `v1` (served since cluster-autoscaler 1.31) and the older `v1beta1`,
/// whose schema is the same for everything read here.
pub const VERSIONS: [&str; 2] = ["v1", "v1beta1"];
/// The class asking whether all the pods fit the cluster as it is (never a scale-up).
pub const CLASS_CHECK_CAPACITY: &str = "check-capacity.autoscaling.x-k8s.io";
/// The class asking for the nodes of all the pods in one scale-up, or none.
pub const CLASS_BEST_EFFORT_ATOMIC: &str = "best-effort-atomic-scale-up.autoscaling.x-k8s.io";
/// The pod annotation naming the request (in the pod's namespace) a pod consumes.
pub const CONSUME_ANNOTATION: &str = "autoscaling.x-k8s.io/consume-provisioning-request";
/// The pod annotation naming the class of the request a pod consumes.
pub const CLASS_ANNOTATION: &str = "autoscaling.x-k8s.io/provisioning-class-name";
/// The deprecated form of [`CONSUME_ANNOTATION`], still honoured (Kueue wrote it before 0.8).
pub const LEGACY_CONSUME_ANNOTATION: &str =
    "cluster-autoscaler.kubernetes.io/consume-provisioning-request";
/// The deprecated form of [`CLASS_ANNOTATION`].
pub const LEGACY_CLASS_ANNOTATION: &str =
    "cluster-autoscaler.kubernetes.io/provisioning-class-name";
/// The parameter that, set to `"true"`, makes a check-capacity request fail instead of being
/// retried when the room is not there.
pub const PARAMETER_NO_RETRY: &str = "noRetry";
/// The parameter naming the check-capacity processor instance a request is for
/// (`--check-capacity-processor-instance`).
pub const PARAMETER_PROCESSOR_INSTANCE: &str = "processorInstance";
/// The most pod sets the CRD's schema admits.
pub const MAX_POD_SETS: usize = 32;
/// The longest parameter value the CRD's schema admits.
pub const MAX_PARAMETER_LENGTH: usize = 255;

/// The condition types of a request's status, as the API defines them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConditionType {
    /// The autoscaler took the request up.
    Accepted,
    /// The capacity is there (`True`) or not yet (`False`).
    Provisioned,
    /// The request will not be satisfied (terminal).
    Failed,
    /// The booked capacity is no longer held (terminal for the booking).
    BookingExpired,
    /// Capacity that was provisioned has been taken back.
    CapacityRevoked,
}

impl ConditionType {
    /// The type as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionType::Accepted => "Accepted",
            ConditionType::Provisioned => "Provisioned",
            ConditionType::Failed => "Failed",
            ConditionType::BookingExpired => "BookingExpired",
            ConditionType::CapacityRevoked => "CapacityRevoked",
        }
    }

    fn parse(text: &str) -> Option<ConditionType> {
        [
            ConditionType::Accepted,
            ConditionType::Provisioned,
            ConditionType::Failed,
            ConditionType::BookingExpired,
            ConditionType::CapacityRevoked,
        ]
        .into_iter()
        .find(|t| t.as_str() == text)
    }
}

impl std::fmt::Display for ConditionType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A condition status (`metav1.ConditionStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`.
    Unknown,
}

impl ConditionStatus {
    /// The status as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

/// One condition of a request's status (a `metav1.Condition`). Conditions of types the API does
/// not define are kept out (they are no autoscaler's business).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// Type.
    pub type_: ConditionType,
    /// Status.
    pub status: ConditionStatus,
    /// Machine-readable reason.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// Last transition, milliseconds since the Unix epoch.
    pub last_transition_ms: i64,
    /// The request's generation the condition was written for.
    pub observed_generation: i64,
}

/// One pod set: `count` pods shaped like the PodTemplate `template` (in the request's namespace).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodSet {
    /// The PodTemplate's name.
    pub template: Arc<str>,
    /// How many pods (at least 1).
    pub count: u32,
}

/// A ProvisioningRequest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProvisioningRequest {
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: Arc<str>,
    /// UID (empty if absent).
    pub uid: Arc<str>,
    /// `apiVersion` as the object came (`autoscaling.x-k8s.io/v1`).
    pub api_version: Arc<str>,
    /// `metadata.generation` (0 if absent).
    pub generation: i64,
    /// `metadata.resourceVersion` (empty if absent): the precondition of a status write.
    pub resource_version: Arc<str>,
    /// Creation time, milliseconds since the Unix epoch.
    pub creation_ms: Option<i64>,
    /// Deletion time if being deleted.
    pub deletion_ms: Option<i64>,
    /// `spec.provisioningClassName`.
    pub class: Arc<str>,
    /// `spec.podSets`, in order.
    pub pod_sets: Vec<PodSet>,
    /// `spec.parameters`.
    pub parameters: BTreeMap<String, String>,
    /// `status.conditions` of the types the API defines.
    pub conditions: Vec<Condition>,
}

impl ProvisioningRequest {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Total pods over the pod sets.
    pub fn pod_count(&self) -> u64 {
        self.pod_sets.iter().map(|s| u64::from(s.count)).sum()
    }

    /// The condition of `type_`, if written.
    pub fn condition(&self, type_: ConditionType) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// Whether the condition of `type_` is written and `True`.
    pub fn is_true(&self, type_: ConditionType) -> bool {
        self.condition(type_)
            .is_some_and(|c| c.status == ConditionStatus::True)
    }

    /// Reads a request from its JSON or YAML value, checking what the CRD's schema checks.
    pub fn from_value(value: &Value) -> Result<ProvisioningRequest, ModelError> {
        let object = match crate::store::typed::<Object>(value) {
            Ok(o) => o,
            Err(error) => {
                return Err(ModelError::Invalid {
                    object: object_name(value),
                    field: ".".into(),
                    value: String::new(),
                    why: error,
                });
            }
        };
        object.into_model()
    }
}

/// `ProvisioningRequest ns/name` of an object that may not parse, for error messages.
fn object_name(value: &Value) -> String {
    let md = value.get("metadata");
    let s = |k: &str| md.and_then(|m| m.get(k)).and_then(Value::as_str);
    format!(
        "{KIND} {}/{}",
        s("namespace").unwrap_or("default"),
        s("name").unwrap_or("")
    )
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Object {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    metadata: meta::ObjectMeta,
    spec: Option<Spec>,
    #[serde(default)]
    status: Status,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(default)]
    pod_sets: Vec<PodSetObject>,
    #[serde(default)]
    provisioning_class_name: String,
    #[serde(default)]
    parameters: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodSetObject {
    pod_template_ref: Option<Reference>,
    count: Option<i64>,
}

#[derive(Deserialize)]
struct Reference {
    #[serde(default)]
    name: String,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    #[serde(default)]
    conditions: Vec<ConditionObject>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConditionObject {
    #[serde(rename = "type", default)]
    type_: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    message: String,
    last_transition_time: Option<meta::Time>,
    observed_generation: Option<i64>,
}

impl Object {
    fn into_model(self) -> Result<ProvisioningRequest, ModelError> {
        let md = self.metadata;
        let namespace = md.namespace.unwrap_or_else(|| "default".into());
        let name = md.name.unwrap_or_default();
        let object = format!("{KIND} {namespace}/{name}");
        let invalid = |field: String, value: String, why: &str| ModelError::Invalid {
            object: object.clone(),
            field,
            value,
            why: why.into(),
        };
        let missing = |field: &str| ModelError::Missing {
            object: object.clone(),
            field: field.into(),
        };
        if name.is_empty() {
            return Err(missing("metadata.name"));
        }
        let spec = self.spec.ok_or_else(|| missing("spec"))?;
        if spec.provisioning_class_name.is_empty() {
            return Err(missing("spec.provisioningClassName"));
        }
        if spec.pod_sets.is_empty() {
            return Err(missing("spec.podSets"));
        }
        if spec.pod_sets.len() > MAX_POD_SETS {
            return Err(invalid(
                "spec.podSets".into(),
                spec.pod_sets.len().to_string(),
                "at most 32 pod sets",
            ));
        }
        let mut pod_sets = Vec::with_capacity(spec.pod_sets.len());
        for (i, set) in spec.pod_sets.into_iter().enumerate() {
            let template = match set.pod_template_ref {
                Some(r) if !r.name.is_empty() => r.name,
                _ => return Err(missing(&format!("spec.podSets[{i}].podTemplateRef.name"))),
            };
            let count = set
                .count
                .ok_or_else(|| missing(&format!("spec.podSets[{i}].count")))?;
            let count = u32::try_from(count)
                .ok()
                .filter(|&c| c >= 1 && i32::try_from(c).is_ok())
                .ok_or_else(|| {
                    invalid(
                        format!("spec.podSets[{i}].count"),
                        count.to_string(),
                        "must be at least 1 (an int32)",
                    )
                })?;
            pod_sets.push(PodSet {
                template: template.into(),
                count,
            });
        }
        for (k, v) in &spec.parameters {
            if v.len() > MAX_PARAMETER_LENGTH {
                return Err(invalid(
                    format!("spec.parameters.{k}"),
                    v.chars().take(32).collect::<String>() + "...",
                    "longer than 255 characters",
                ));
            }
        }
        let mut conditions = Vec::new();
        for (i, c) in self.status.conditions.into_iter().enumerate() {
            // Types the API does not define are someone else's.
            let Some(type_) = ConditionType::parse(&c.type_) else {
                continue;
            };
            let status = match c.status.as_str() {
                "True" => ConditionStatus::True,
                "False" => ConditionStatus::False,
                "Unknown" => ConditionStatus::Unknown,
                other => {
                    return Err(invalid(
                        format!("status.conditions[{i}].status"),
                        other.into(),
                        "must be True, False or Unknown",
                    ));
                }
            };
            let last_transition_ms = c
                .last_transition_time
                .map(|t| t.0.as_millisecond())
                .ok_or_else(|| missing(&format!("status.conditions[{i}].lastTransitionTime")))?;
            conditions.push(Condition {
                type_,
                status,
                reason: c.reason,
                message: c.message,
                last_transition_ms,
                observed_generation: c.observed_generation.unwrap_or(0),
            });
        }
        Ok(ProvisioningRequest {
            namespace: namespace.into(),
            name: name.into(),
            uid: md.uid.unwrap_or_default().into(),
            api_version: self.api_version.into(),
            generation: md.generation.unwrap_or(0),
            resource_version: md.resource_version.unwrap_or_default().into(),
            creation_ms: md.creation_timestamp.map(|t| t.0.as_millisecond()),
            deletion_ms: md.deletion_timestamp.map(|t| t.0.as_millisecond()),
            class: spec.provisioning_class_name.into(),
            pod_sets,
            parameters: spec.parameters,
            conditions,
        })
    }
}

/// The request a pod consumes (`namespace`, name), from [`CONSUME_ANNOTATION`] or, failing
/// that, [`LEGACY_CONSUME_ANNOTATION`]; `None` for an ordinary pod.
pub fn consumed_request(pod: &Pod) -> Option<(&str, &str)> {
    let name = pod
        .annotation(CONSUME_ANNOTATION)
        .or_else(|| pod.annotation(LEGACY_CONSUME_ANNOTATION))
        .filter(|n| !n.is_empty())?;
    Some((pod.namespace.as_str(), name))
}

/// Why the pods of a request could not be made (upstream marks the request `Failed` with
/// reason `FailedToCreatePods` and this message).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PodsError {
    /// A pod set names a PodTemplate the namespace does not hold.
    #[error("podSet {index}: PodTemplate {namespace}/{name} not found")]
    TemplateNotFound {
        /// Index of the pod set.
        index: usize,
        /// Namespace.
        namespace: String,
        /// The template's name.
        name: String,
    },
    /// The template does not make a valid pod.
    #[error("podSet {index}: {error}")]
    Invalid {
        /// Index of the pod set.
        index: usize,
        /// Why (names the template's field).
        error: ModelError,
    },
}

/// The pods a request stands for, made from its PodTemplates as upstream makes them: named
/// `<request>-<set>-<n>` in the request's namespace, owned (as controller) by the request, with
/// the consume and class annotations, pending and unschedulable (so they are selected like any
/// pending pod). `template` finds a PodTemplate by namespace and name.
pub fn pods_for_request<'t>(
    request: &ProvisioningRequest,
    template: impl Fn(&str, &str) -> Option<&'t api::PodTemplate>,
) -> Result<Vec<Arc<Pod>>, PodsError> {
    let mut out = Vec::with_capacity(usize::try_from(request.pod_count()).unwrap_or(0));
    for (index, set) in request.pod_sets.iter().enumerate() {
        let t = template(&request.namespace, &set.template).ok_or_else(|| {
            PodsError::TemplateNotFound {
                index,
                namespace: request.namespace.to_string(),
                name: set.template.to_string(),
            }
        })?;
        let owner = Owner {
            api_version: if request.api_version.is_empty() {
                format!("{GROUP}/v1")
            } else {
                request.api_version.to_string()
            },
            kind: KIND,
            name: &request.name,
            uid: &request.uid,
        };
        let annotations = [
            (CONSUME_ANNOTATION, request.name.to_string()),
            (CLASS_ANNOTATION, request.class.to_string()),
        ];
        for n in 0..set.count {
            let name = format!("{}-{index}-{n}", request.name);
            let pod = pod_from_template(
                t,
                &request.namespace,
                &name,
                &owner,
                &annotations,
                request.creation_ms,
            )
            .map_err(|error| PodsError::Invalid { index, error })?;
            out.push(Arc::new(pod));
        }
    }
    Ok(out)
}

/// The controller a virtual pod is made for.
pub struct Owner<'a> {
    /// `apiVersion` of the controller.
    pub api_version: String,
    /// Kind.
    pub kind: &'a str,
    /// Name.
    pub name: &'a str,
    /// UID.
    pub uid: &'a str,
}

/// A pending, unschedulable pod named `name` made from `template`'s pod template, as a
/// controller makes one; its UID is `namespace/name` (no API server assigned one).
pub fn pod_from_template(
    template: &api::PodTemplate,
    namespace: &str,
    name: &str,
    owner: &Owner<'_>,
    annotations: &[(&str, String)],
    creation_ms: Option<i64>,
) -> Result<Pod, ModelError> {
    let spec_template = template.template.clone().unwrap_or_default();
    let tmd = spec_template.metadata.unwrap_or_default();
    let mut all_annotations = tmd.annotations.unwrap_or_default();
    for (k, v) in annotations {
        all_annotations.insert((*k).to_string(), v.clone());
    }
    let creation = creation_ms
        .and_then(|ms| k8s_openapi::jiff::Timestamp::from_millisecond(ms).ok())
        .map(meta::Time);
    let pod = api::Pod {
        metadata: meta::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            uid: Some(format!("{namespace}/{name}")),
            labels: tmd.labels,
            annotations: Some(all_annotations),
            creation_timestamp: creation.clone(),
            owner_references: Some(vec![meta::OwnerReference {
                api_version: owner.api_version.clone(),
                kind: owner.kind.into(),
                name: owner.name.into(),
                uid: owner.uid.into(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..Default::default()
        },
        spec: spec_template.spec,
        status: Some(api::PodStatus {
            phase: Some("Pending".into()),
            conditions: Some(vec![api::PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                last_transition_time: creation,
                ..Default::default()
            }]),
            ..Default::default()
        }),
    };
    Pod::from_k8s(&pod)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(spec: Value) -> Value {
        json!({
            "apiVersion": "autoscaling.x-k8s.io/v1",
            "kind": "ProvisioningRequest",
            "metadata": {"name": "job-1", "namespace": "team-a", "uid": "u1",
                         "generation": 2, "resourceVersion": "17",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": spec,
        })
    }

    fn template(cpu: &str) -> api::PodTemplate {
        serde_json::from_value(json!({
            "metadata": {"name": "worker", "namespace": "team-a"},
            "template": {
                "metadata": {"labels": {"app": "trainer"}},
                "spec": {"containers": [{"name": "c", "image": "i",
                          "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
            }
        }))
        .unwrap()
    }

    #[test]
    fn a_request_reads_its_class_pod_sets_parameters_and_conditions() {
        let mut v = request(json!({
            "provisioningClassName": CLASS_BEST_EFFORT_ATOMIC,
            "podSets": [{"podTemplateRef": {"name": "worker"}, "count": 8}],
            "parameters": {"noRetry": "true"},
        }));
        v["status"] = json!({"conditions": [
            {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "m",
             "lastTransitionTime": "2026-01-01T00:00:10Z", "observedGeneration": 2},
            {"type": "SomeoneElses", "status": "Maybe", "reason": "", "message": "",
             "lastTransitionTime": "2026-01-01T00:00:10Z"}
        ]});
        let r = ProvisioningRequest::from_value(&v).unwrap();
        assert_eq!(r.key(), "team-a/job-1");
        assert_eq!(&*r.class, CLASS_BEST_EFFORT_ATOMIC);
        assert_eq!(r.pod_count(), 8);
        assert_eq!(&*r.resource_version, "17");
        assert_eq!(r.parameters.get(PARAMETER_NO_RETRY).unwrap(), "true");
        assert_eq!(r.conditions.len(), 1, "the unknown type is left out");
        assert!(r.is_true(ConditionType::Accepted));
        assert_eq!(r.conditions[0].last_transition_ms, 1_767_225_610_000);
    }

    #[test]
    fn what_the_schema_refuses_is_refused_with_the_field_path() {
        let cases = [
            (
                json!({"podSets": [{"podTemplateRef": {"name": "w"}, "count": 1}]}),
                "missing required field spec.provisioningClassName",
            ),
            (
                json!({"provisioningClassName": CLASS_CHECK_CAPACITY, "podSets": []}),
                "missing required field spec.podSets",
            ),
            (
                json!({"provisioningClassName": CLASS_CHECK_CAPACITY,
                    "podSets": [{"podTemplateRef": {"name": "w"}, "count": 1},
                                {"podTemplateRef": {"name": "w"}, "count": 0}]}),
                "field spec.podSets[1].count: invalid value \"0\"",
            ),
            (
                json!({"provisioningClassName": CLASS_CHECK_CAPACITY,
                    "podSets": [{"count": 1}]}),
                "missing required field spec.podSets[0].podTemplateRef.name",
            ),
            (
                json!({"provisioningClassName": CLASS_CHECK_CAPACITY,
                    "podSets": [{"podTemplateRef": {"name": "w"}, "count": "many"}]}),
                "spec.podSets[0].count",
            ),
        ];
        for (spec, want) in cases {
            let err = ProvisioningRequest::from_value(&request(spec)).unwrap_err();
            let text = err.to_string();
            assert!(text.contains("ProvisioningRequest team-a/job-1"), "{text}");
            assert!(text.contains(want), "{text} lacks {want}");
        }
        let too_many: Vec<Value> = (0..33)
            .map(|_| json!({"podTemplateRef": {"name": "w"}, "count": 1}))
            .collect();
        let err = ProvisioningRequest::from_value(&request(
            json!({"provisioningClassName": CLASS_CHECK_CAPACITY, "podSets": too_many}),
        ))
        .unwrap_err();
        assert!(err.to_string().contains("spec.podSets"), "{err}");
    }

    #[test]
    fn the_pods_of_a_request_are_named_owned_and_annotated_as_upstream_makes_them() {
        let r = ProvisioningRequest::from_value(&request(json!({
            "provisioningClassName": CLASS_CHECK_CAPACITY,
            "podSets": [{"podTemplateRef": {"name": "worker"}, "count": 2}],
        })))
        .unwrap();
        let t = template("2");
        let pods =
            pods_for_request(&r, |ns, n| (ns == "team-a" && n == "worker").then_some(&t)).unwrap();
        let names: Vec<&str> = pods.iter().map(|p| &*p.name).collect();
        assert_eq!(names, ["job-1-0-0", "job-1-0-1"]);
        let p = &pods[0];
        assert_eq!(p.namespace.as_str(), "team-a");
        assert_eq!(&*p.uid, "team-a/job-1-0-0");
        assert_eq!(p.annotation(CONSUME_ANNOTATION), Some("job-1"));
        assert_eq!(p.annotation(CLASS_ANNOTATION), Some(CLASS_CHECK_CAPACITY));
        let owner = p.owner.as_ref().unwrap();
        assert_eq!(owner.kind.as_str(), "ProvisioningRequest");
        assert!(owner.controller);
        assert!(
            p.node_name.is_none()
                && p.conditions
                    .iter()
                    .any(|c| c.type_.as_str() == "PodScheduled"
                        && c.reason.is_some_and(|r| r.as_str() == "Unschedulable"))
        );
        assert_eq!(consumed_request(p), Some(("team-a", "job-1")));

        let err = pods_for_request(&r, |_, _| None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "podSet 0: PodTemplate team-a/worker not found"
        );
    }

    #[test]
    fn the_legacy_consume_annotation_is_honoured() {
        let mut pod: api::Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns",
                         "annotations": {LEGACY_CONSUME_ANNOTATION: "req"}},
            "spec": {"containers": []}
        }))
        .unwrap();
        let p = Pod::from_k8s(&pod).unwrap();
        assert_eq!(consumed_request(&p), Some(("ns", "req")));
        pod.metadata.annotations = None;
        assert_eq!(consumed_request(&Pod::from_k8s(&pod).unwrap()), None);
    }
}

//! Status writes of the capacity-on-request objects (ProvisioningRequests, CapacityBuffers): the
//! object to send through its `/status` subresource, built from the cached object and the core's
//! decision, and the effect that carries it.
//!
//! As upstream's clients do (`UpdateStatus` of the ProvisioningRequest and CapacityBuffer
//! clients), the whole object goes with the `resourceVersion` the decision read: the API server
//! answers `409 Conflict` when the object changed meanwhile, and the next loop decides again on
//! the fresh object (a conflict is never retried blind). Only `status` is changed here; the
//! conditions of types the autoscaler does not own are kept.
//!
//! Pure: it never sends anything (interpreters carry the [`crate::EffectKind::WriteStatus`]
//! out) and never reads a clock (the decision's time is passed in).

use std::sync::Arc;

use autoscaler_core::{BufferStatus, StatusWrite};
use autoscaler_model::{
    CAPACITY_API_GROUP, CAPACITY_BUFFER_KIND, CONDITION_PROVISIONING, ConditionType, ObjectKey,
    PROVISIONING_REQUEST_KIND, RequestCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::{Map, Value, json};

use crate::effect::{Effect, EffectKind};
use crate::inflight::{Actuation, Waiting};

/// One status write: the object to `PUT` to its `/status` subresource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusUpdate {
    /// The object's identity (group, kind, namespace, name).
    pub key: ObjectKey,
    /// `apiVersion` of the object as cached (`autoscaling.x-k8s.io/v1`).
    pub api_version: String,
    /// The resource's plural (`provisioningrequests`, `capacitybuffers`).
    pub plural: &'static str,
    /// The whole object with its new status and the `resourceVersion` the decision read.
    pub object: Arc<Value>,
}

impl StatusUpdate {
    /// `Kind namespace/name`, as logs and reports name the object.
    pub fn object_name(&self) -> String {
        format!("{} {}/{}", self.key.kind, self.key.namespace, self.key.name)
    }
}

/// Why a status write is not built: the cached object is not the one decided on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StaleObject {
    /// The object left the cache since the decision.
    #[error("{0} is gone")]
    Gone(String),
    /// The object changed since the decision (another resourceVersion).
    #[error(
        "{object} changed since the decision (resourceVersion {decided} decided on, {cached} cached)"
    )]
    Changed {
        /// `Kind namespace/name`.
        object: String,
        /// The version decided on.
        decided: String,
        /// The version cached now.
        cached: String,
    },
}

/// The key of a ProvisioningRequest.
pub fn request_key(namespace: &str, name: &str) -> ObjectKey {
    ObjectKey {
        group: CAPACITY_API_GROUP.into(),
        kind: PROVISIONING_REQUEST_KIND.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

/// The key of a CapacityBuffer.
pub fn buffer_key(namespace: &str, name: &str) -> ObjectKey {
    ObjectKey {
        group: CAPACITY_API_GROUP.into(),
        kind: CAPACITY_BUFFER_KIND.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

/// A time as the API writes it (RFC 3339, seconds).
fn time_json(ms: i64) -> Value {
    k8s_openapi::jiff::Timestamp::from_millisecond(ms)
        .ok()
        .map(meta::Time)
        .and_then(|t| serde_json::to_value(t).ok())
        .unwrap_or(Value::Null)
}

fn condition_json(c: &RequestCondition) -> Value {
    json!({
        "type": c.type_.as_str(),
        "status": c.status.as_str(),
        "reason": c.reason,
        "message": c.message,
        "lastTransitionTime": time_json(c.last_transition_ms),
        "observedGeneration": c.observed_generation,
    })
}

fn resource_version(object: &Value) -> &str {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn check_version(key: &ObjectKey, cached: &Value, decided: &str) -> Result<(), StaleObject> {
    let now = resource_version(cached);
    if now == decided {
        return Ok(());
    }
    Err(StaleObject::Changed {
        object: format!("{} {}/{}", key.kind, key.namespace, key.name),
        decided: decided.into(),
        cached: now.into(),
    })
}

fn api_version_of(object: &Value, default: &str) -> String {
    object
        .get("apiVersion")
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
        .unwrap_or(default)
        .to_string()
}

/// The status object of `object`, created if absent.
fn status_of(object: &mut Value) -> &mut Map<String, Value> {
    if !object.get("status").is_some_and(Value::is_object) {
        object["status"] = Value::Object(Map::new());
    }
    object["status"]
        .as_object_mut()
        .expect("status was just made an object")
}

/// The request's object with `write`'s conditions: the conditions of the types the API defines
/// are `write`'s, in its order; conditions of other types stay as cached, after them.
pub fn request_update(cached: &Value, write: &StatusWrite) -> Result<StatusUpdate, StaleObject> {
    let key = request_key(&write.namespace, &write.name);
    check_version(&key, cached, &write.resource_version)?;
    let mut object = cached.clone();
    let others: Vec<Value> = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .filter(|c| {
                    let t = c.get("type").and_then(Value::as_str).unwrap_or("");
                    !OWN_TYPES.iter().any(|o| o.as_str() == t)
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let mut conditions: Vec<Value> = write.conditions.iter().map(condition_json).collect();
    conditions.extend(others);
    status_of(&mut object).insert("conditions".into(), Value::Array(conditions));
    Ok(StatusUpdate {
        api_version: api_version_of(cached, "autoscaling.x-k8s.io/v1"),
        key,
        plural: "provisioningrequests",
        object: Arc::new(object),
    })
}

/// The condition types a request's status holds that the autoscaler writes.
const OWN_TYPES: [ConditionType; 5] = [
    ConditionType::Accepted,
    ConditionType::Provisioned,
    ConditionType::Failed,
    ConditionType::BookingExpired,
    ConditionType::CapacityRevoked,
];

/// The buffer's object with `status` (replicas, podTemplateRef, provisioningStrategy and the
/// `ReadyForProvisioning` condition; with `provisioning`, when the buffers' pods are injected,
/// the `Provisioning` condition too, on a buffer ready now or before), each condition's transition time kept while its status
/// does not change, as `meta.SetStatusCondition` does, or `None` when the cached status says
/// the same already (nothing to write).
pub fn buffer_update(
    cached: &Value,
    status: &BufferStatus,
    provisioning: bool,
    now_ms: i64,
) -> Result<Option<StatusUpdate>, StaleObject> {
    let key = buffer_key(&status.namespace, &status.name);
    check_version(&key, cached, &status.resource_version)?;
    let generation = cached
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    // Upstream's pod injection looks only at buffers that were ready or provisioning: one never
    // ready gets no `Provisioning` condition.
    let was_ready = ["ReadyForProvisioning", CONDITION_PROVISIONING]
        .iter()
        .any(|t| condition_is_true(cached, t));
    let provisioning = provisioning && (status.ready || was_ready);
    let mut object = cached.clone();
    let s = status_of(&mut object);
    let before = Value::Object(s.clone());
    match status.replicas {
        Some(r) => s.insert("replicas".into(), Value::from(r)),
        None => s.remove("replicas"),
    };
    match &status.pod_template {
        Some(n) => s.insert("podTemplateRef".into(), json!({ "name": &**n })),
        None => s.remove("podTemplateRef"),
    };
    s.insert(
        "provisioningStrategy".into(),
        Value::from(&*status.strategy),
    );
    let mut conditions: Vec<Value> = s
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    set_condition(
        &mut conditions,
        json!({
            "type": status.condition,
            "status": if status.ready { "True" } else { "False" },
            "reason": status.reason,
            "message": status.message,
            "observedGeneration": generation,
        }),
        now_ms,
    );
    if provisioning {
        // Upstream's pod injection leaves the message empty when True, and sets no generation.
        let p = &status.provisioning;
        set_condition(
            &mut conditions,
            json!({
                "type": CONDITION_PROVISIONING,
                "status": if p.injected { "True" } else { "False" },
                "reason": p.reason,
                "message": p.message,
            }),
            now_ms,
        );
    }
    s.insert("conditions".into(), Value::Array(conditions));
    if Value::Object(s.clone()) == before {
        return Ok(None);
    }
    Ok(Some(StatusUpdate {
        api_version: api_version_of(cached, "autoscaling.x-k8s.io/v1beta1"),
        key,
        plural: "capacitybuffers",
        object: Arc::new(object),
    }))
}

/// Whether `object`'s status has the condition `type_` with status `True`.
fn condition_is_true(object: &Value, type_: &str) -> bool {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(type_)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// Puts `condition` (without its transition time) in `conditions` as `meta.SetStatusCondition`
/// does: in place of the one of its type, whose transition time is kept while the status is the
/// same, else `now_ms`; appended when there is none.
fn set_condition(conditions: &mut Vec<Value>, mut condition: Value, now_ms: i64) {
    let type_ = condition.get("type").cloned();
    let old = conditions
        .iter_mut()
        .find(|c| c.get("type") == type_.as_ref());
    let transition = match &old {
        Some(c) if c.get("status") == condition.get("status") => c
            .get("lastTransitionTime")
            .cloned()
            .unwrap_or_else(|| time_json(now_ms)),
        _ => time_json(now_ms),
    };
    if let Some(m) = condition.as_object_mut() {
        m.insert("lastTransitionTime".into(), transition);
    }
    match old {
        Some(c) => *c = condition,
        None => conditions.push(condition),
    }
}

impl Actuation {
    /// The effect that writes `update` through the status subresource; its reply becomes a
    /// [`crate::Report::StatusWritten`] or [`crate::Report::StatusWriteFailed`].
    pub fn write_status(&mut self, update: StatusUpdate) -> Effect {
        let object = update.object_name();
        self.effect(
            Waiting::Status { object },
            EffectKind::WriteStatus { update },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_core::BufferProvisioning;
    use autoscaler_model::ConditionStatus;

    fn cached_request() -> Value {
        json!({
            "apiVersion": "autoscaling.x-k8s.io/v1",
            "kind": "ProvisioningRequest",
            "metadata": {"name": "job", "namespace": "batch", "resourceVersion": "7", "generation": 1},
            "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                     "podSets": [{"podTemplateRef": {"name": "w"}, "count": 1}]},
            "status": {"conditions": [
                {"type": "KueueSomething", "status": "True", "reason": "R", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ], "provisioningClassDetails": {"a": "b"}}
        })
    }

    fn write(rv: &str) -> StatusWrite {
        StatusWrite {
            namespace: "batch".into(),
            name: "job".into(),
            resource_version: rv.into(),
            conditions: vec![RequestCondition {
                type_: ConditionType::Provisioned,
                status: ConditionStatus::True,
                reason: "CapacityIsFound".into(),
                message: "Capacity is found in the cluster".into(),
                last_transition_ms: 1_767_225_610_000,
                observed_generation: 1,
            }],
            set: vec![ConditionType::Provisioned],
        }
    }

    #[test]
    fn a_request_write_replaces_the_own_conditions_and_keeps_everything_else() {
        let u = request_update(&cached_request(), &write("7")).unwrap();
        assert_eq!(u.plural, "provisioningrequests");
        assert_eq!(u.api_version, "autoscaling.x-k8s.io/v1");
        assert_eq!(u.object_name(), "ProvisioningRequest batch/job");
        let o = &*u.object;
        assert_eq!(o["metadata"]["resourceVersion"], "7", "the precondition");
        assert_eq!(o["status"]["provisioningClassDetails"]["a"], "b");
        let cs = o["status"]["conditions"].as_array().unwrap();
        assert_eq!(cs.len(), 2);
        assert_eq!(
            cs[0],
            json!({"type": "Provisioned", "status": "True", "reason": "CapacityIsFound",
                   "message": "Capacity is found in the cluster",
                   "lastTransitionTime": "2026-01-01T00:00:10Z", "observedGeneration": 1})
        );
        assert_eq!(cs[1]["type"], "KueueSomething");
    }

    #[test]
    fn a_write_decided_on_an_older_version_is_not_built() {
        let e = request_update(&cached_request(), &write("6")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "ProvisioningRequest batch/job changed since the decision (resourceVersion 6 decided on, 7 cached)"
        );
    }

    fn buffer_status(ready: bool) -> BufferStatus {
        BufferStatus {
            namespace: "web".into(),
            name: "headroom".into(),
            resource_version: "3".into(),
            pod_template: Some("web-pod".into()),
            replicas: ready.then_some(3),
            strategy: "buffer.x-k8s.io/active-capacity".into(),
            ready,
            reason: if ready {
                "AttributesSetSuccessfully"
            } else {
                "error"
            },
            message: if ready { "ready".into() } else { "no".into() },
            condition: "ReadyForProvisioning",
            provisioning: BufferProvisioning {
                injected: ready,
                reason: if ready {
                    "FakePodsInjected"
                } else {
                    "NotReadyForProvisioning"
                },
                message: if ready {
                    String::new()
                } else {
                    "CapacityBuffer is not ready for provisioning".into()
                },
            },
        }
    }

    #[test]
    fn with_pod_injection_the_provisioning_condition_is_written_too() {
        let cached = json!({
            "apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
            "metadata": {"name": "headroom", "namespace": "web", "resourceVersion": "3",
                         "generation": 2},
            "spec": {"podTemplateRef": {"name": "web-pod"}, "replicas": 3}
        });
        let u = buffer_update(&cached, &buffer_status(true), true, 1_767_225_600_000)
            .unwrap()
            .unwrap();
        let cs = u.object["status"]["conditions"].as_array().unwrap().clone();
        assert_eq!(cs.len(), 2, "{cs:?}");
        assert_eq!(
            cs[1],
            json!({"type": "Provisioning", "status": "True", "reason": "FakePodsInjected",
                   "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"})
        );
        // Never ready: no Provisioning condition (upstream's injection does not look at it).
        let never = buffer_update(&cached, &buffer_status(false), true, 1_767_225_600_000)
            .unwrap()
            .unwrap();
        let cs = never.object["status"]["conditions"].as_array().unwrap();
        assert_eq!(cs.len(), 1, "{cs:?}");
        // Not ready any more: Provisioning turns False, with a new transition time.
        let written = (*u.object).clone();
        let u = buffer_update(&written, &buffer_status(false), true, 1_767_225_660_000)
            .unwrap()
            .unwrap();
        let p = &u.object["status"]["conditions"][1];
        assert_eq!(
            (&p["status"], &p["reason"], &p["lastTransitionTime"]),
            (
                &json!("False"),
                &json!("NotReadyForProvisioning"),
                &json!("2026-01-01T00:01:00Z")
            )
        );
    }

    #[test]
    fn a_buffer_status_is_written_once_and_its_transition_time_kept_while_unchanged() {
        let cached = json!({
            "apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
            "metadata": {"name": "headroom", "namespace": "web", "resourceVersion": "3",
                         "generation": 2},
            "spec": {"podTemplateRef": {"name": "web-pod"}, "replicas": 3}
        });
        let u = buffer_update(&cached, &buffer_status(true), false, 1_767_225_600_000)
            .unwrap()
            .unwrap();
        assert_eq!(u.plural, "capacitybuffers");
        let s = &u.object["status"];
        assert_eq!(s["replicas"], 3);
        assert_eq!(s["podTemplateRef"]["name"], "web-pod");
        assert_eq!(s["provisioningStrategy"], "buffer.x-k8s.io/active-capacity");
        assert_eq!(
            s["conditions"][0],
            json!({"type": "ReadyForProvisioning", "status": "True",
                   "reason": "AttributesSetSuccessfully", "message": "ready",
                   "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2})
        );
        // Written: the same decision a minute later writes nothing.
        let written = (*u.object).clone();
        assert_eq!(
            buffer_update(&written, &buffer_status(true), false, 1_767_225_660_000).unwrap(),
            None
        );
        // Not ready: the status changes and so does the transition time.
        let u = buffer_update(&written, &buffer_status(false), false, 1_767_225_660_000)
            .unwrap()
            .unwrap();
        let s = &u.object["status"];
        assert!(s.get("replicas").is_none(), "{s}");
        assert_eq!(s["conditions"][0]["status"], "False");
        assert_eq!(
            s["conditions"][0]["lastTransitionTime"],
            "2026-01-01T00:01:00Z"
        );
    }
}

//! CapacityBuffers resolved into virtual pods, and the status to write, as upstream's buffer
//! controller translates them:
//!
//! - `podTemplateRef`: `replicas` pods of the template (at least one; `replicas` is required);
//! - `scalableRef`: pods of the workload's pod template; `replicas` and `percentage` (of the
//!   workload's replicas, rounded down) give the count, the smaller of the two when both are set;
//! - `limits`: caps the count at what fits the resource budget (per resource, the budget over
//!   the sum of the template's container requests, rounded down; the smallest wins).
//!
//! The status says `ReadyForProvisioning=True` (reason `AttributesSetSuccessfully`, message
//! `ready`) with the replicas, or `False` (reason `error`) with why. The virtual pods are pending
//! and unschedulable, owned by the buffer: the loop receives them after the real pods, so real
//! pods of the same priority are placed first (the buffer yields), the ones that fit nowhere
//! drive scale-up like any pending pod, and the ones that fit are placed where scale-down sees
//! them (owned by a custom controller, they keep their node). Only the default provisioning
//! strategy (`buffer.x-k8s.io/active-capacity`) is acted on.
//!
//! Pure: no I/O, no clock. Unlike upstream's controller it creates no PodTemplate for a
//! `scalableRef` buffer: the pods are made from the workload's template directly.

use std::sync::Arc;

use autoscaler_model::Quantity;
use autoscaler_model::{
    ACTIVE_CAPACITY, CAPACITY_API_GROUP as GROUP, CAPACITY_BUFFER_KIND as KIND,
    CONDITION_READY_FOR_PROVISIONING, CapacityBuffer, PodOwner as Owner, REASON_ATTRIBUTES_SET,
    pod_from_template,
};
use autoscaler_model::{Pod, PodTemplate, Workload};

/// The status the buffer controller writes on a buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferStatus {
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: Arc<str>,
    /// The resourceVersion read (the precondition of the write).
    pub resource_version: Arc<str>,
    /// `status.podTemplateRef.name`.
    pub pod_template: Option<Arc<str>>,
    /// `status.replicas`.
    pub replicas: Option<u32>,
    /// `status.provisioningStrategy`.
    pub strategy: Arc<str>,
    /// `ReadyForProvisioning`: `True` or `False`.
    pub ready: bool,
    /// The condition's reason.
    pub reason: &'static str,
    /// The condition's message.
    pub message: String,
    /// The condition's type ([`CONDITION_READY_FOR_PROVISIONING`]).
    pub condition: &'static str,
}

/// A buffer's resolution.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    /// `namespace/name`.
    pub key: String,
    /// The status to write.
    pub status: BufferStatus,
    /// The virtual pods (empty when not ready).
    pub pods: Vec<Arc<Pod>>,
}

/// Resolves `buffer`: `template` finds a PodTemplate by (namespace, name), `workload` a
/// workload by (namespace, apiGroup, kind, name). `None` for a strategy other than the default.
pub fn resolve<'t>(
    buffer: &CapacityBuffer,
    template: &dyn Fn(&str, &str) -> Option<&'t PodTemplate>,
    workload: &dyn Fn(&str, &str, &str, &str) -> Option<Workload>,
) -> Option<Resolved> {
    if &*buffer.strategy != ACTIVE_CAPACITY {
        return None;
    }
    let (shape, count, pod_template): (PodTemplate, Result<u32, String>, _) = if let Some(name) =
        &buffer.pod_template
    {
        let Some(t) = template(&buffer.namespace, name) else {
            return Some(not_ready(
                buffer,
                format!("PodTemplate {}/{name} not found", buffer.namespace),
            ));
        };
        let count = buffer.replicas.map(|r| r.max(1)).ok_or_else(|| {
                format!(
                    "Failed to translate buffer {}, Replicas should have a value when PodTemplateRef is set",
                    buffer.name
                )
            });
        (t.clone(), count, Some(name.clone()))
    } else if let Some(s) = &buffer.scalable {
        let Some(w) = workload(&buffer.namespace, &s.api_group, &s.kind, &s.name) else {
            return Some(not_ready(
                buffer,
                format!(
                    "Couldn't resolve buffer {}, {}/{} {} not found",
                    buffer.name, s.api_group, s.kind, s.name
                ),
            ));
        };
        let from_pct = buffer
            .percentage
            .zip(w.replicas)
            .map(|(p, r)| u32::try_from(u64::from(p) * u64::from(r) / 100).unwrap_or(u32::MAX));
        let count = match (from_pct, buffer.replicas) {
            (Some(a), Some(b)) => Ok(a.min(b)),
            (Some(a), None) => Ok(a),
            (None, Some(b)) => Ok(b),
            (None, None) => Err(format!(
                "Couldn't get number of replicas for buffer {}, replicas and percentage are not defined",
                buffer.name
            )),
        };
        let t = PodTemplate {
            template: Some(w.template),
            ..PodTemplate::default()
        };
        (t, count, None)
    } else {
        return Some(not_ready(
            buffer,
            "no podTemplateRef nor scalableRef".into(),
        ));
    };
    let mut count = match count {
        Ok(c) => c,
        Err(e) => return Some(not_ready(buffer, e)),
    };
    if let Some(limits) = &buffer.limits {
        match pods_within_limits(&shape, limits) {
            Some(n) => count = count.min(n),
            None => {
                return Some(not_ready(
                    buffer,
                    format!(
                        "Couldn't calculate number of pods for buffer {} based on provided resource limits",
                        buffer.name
                    ),
                ));
            }
        }
    }
    let owner = Owner {
        api_version: if buffer.api_version.is_empty() {
            format!("{GROUP}/v1beta1")
        } else {
            buffer.api_version.to_string()
        },
        kind: KIND,
        name: &buffer.name,
        uid: &buffer.uid,
    };
    let mut pods = Vec::with_capacity(count as usize);
    for n in 0..count {
        let name = format!("capacitybuffer-{}-{n}", buffer.name);
        match pod_from_template(&shape, &buffer.namespace, &name, &owner, &[], None) {
            Ok(p) => pods.push(Arc::new(p)),
            Err(e) => return Some(not_ready(buffer, e.detail())),
        }
    }
    Some(Resolved {
        key: buffer.key(),
        status: BufferStatus {
            namespace: buffer.namespace.clone(),
            name: buffer.name.clone(),
            resource_version: buffer.resource_version.clone(),
            pod_template,
            replicas: Some(count),
            strategy: buffer.strategy.clone(),
            ready: true,
            reason: REASON_ATTRIBUTES_SET,
            message: "ready".into(),
            condition: CONDITION_READY_FOR_PROVISIONING,
        },
        pods,
    })
}

fn not_ready(buffer: &CapacityBuffer, message: String) -> Resolved {
    Resolved {
        key: buffer.key(),
        status: BufferStatus {
            namespace: buffer.namespace.clone(),
            name: buffer.name.clone(),
            resource_version: buffer.resource_version.clone(),
            pod_template: None,
            replicas: None,
            strategy: buffer.strategy.clone(),
            ready: false,
            reason: "error",
            message,
            condition: CONDITION_READY_FOR_PROVISIONING,
        },
        pods: Vec::new(),
    }
}

/// How many pods of `template` fit `limits`: per limited resource the template's containers
/// request (in milli-units), the budget over the request; the smallest. `None` when no limited
/// resource is requested.
fn pods_within_limits(
    template: &PodTemplate,
    limits: &std::collections::BTreeMap<String, Quantity>,
) -> Option<u32> {
    let spec = template.template.as_ref()?.spec.as_ref()?;
    let mut best: Option<u32> = None;
    for (name, limit) in limits {
        let mut per_pod: i64 = 0;
        for c in &spec.containers {
            let Some(q) = c
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref()?.get(name))
            else {
                continue;
            };
            let Ok(q) = autoscaler_model::parse_milli(&q.0) else {
                continue;
            };
            per_pod = per_pod.saturating_add(q);
        }
        if per_pod <= 0 {
            continue;
        }
        let n = (limit.to_milli_ceil().unwrap_or(i64::MAX) / per_pod).max(0);
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        best = Some(best.map_or(n, |b| b.min(n)));
    }
    best
}

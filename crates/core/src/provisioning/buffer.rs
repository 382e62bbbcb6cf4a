//! CapacityBuffers resolved into virtual pods, and the status to write, as upstream's buffer
//! controller (`ReadyForProvisioning`) and pod injection (`Provisioning`) decide them for
//! `autoscaling.x-k8s.io/v1beta1`:
//!
//! - the pods' shape: the PodTemplate of `podTemplateRef`, or the pod template of the workload
//!   of `scalableRef`;
//! - their number: the larger of `replicas` and `percentage` (of the workload's replicas,
//!   rounded up), then capped by `limits` (per resource, the budget over the sum of the
//!   template's container requests, rounded down; the smallest wins); `limits` alone give what
//!   fits them. `replicas: 0` is a buffer turned off: no pods, `Provisioning=False`
//!   (`BufferIsEmpty`).
//!
//! The status says `ReadyForProvisioning=True` (reason `AttributesSetSuccessfully`, message
//! `ready`) with the replicas, or `False` (reason `error`, message `Buffer not ready for
//! provisioning: ` and why), and `Provisioning`: `True` (`FakePodsInjected`) when pods were made,
//! else `False` with upstream's reason (the write leaves it out on a buffer never ready) (`NotReadyForProvisioning`, `BufferIsEmpty`,
//! `FailedToMakeFakePods`; upstream's `FailedToGetPodTemplate` never arises here: the template
//! is read once, and a missing one makes the buffer not ready). The virtual pods, named
//! `capacity-buffer-<name>-<i>` from 1, are pending and unschedulable, owned by the buffer and
//! annotated `podType: capacityBufferFakePod` and safe to evict (upstream forces it): the loop
//! receives them after the real pods, so real pods of the same priority are placed first (the
//! buffer yields), the ones that fit nowhere drive scale-up like any pending pod, and the ones
//! that fit are placed where scale-down sees them and may move them as it moves any pod. Only
//! the default provisioning strategy (`buffer.x-k8s.io/active-capacity`) is acted on.
//!
//! Pure: no I/O, no clock. It must never make pods for a buffer that is not ready. Unlike
//! upstream's controller it creates no managed PodTemplate (`podTemplateGeneration` stays
//! unset): the pods are made from the referenced template or the workload's directly; quota
//! (`LimitedByQuotas`) is not applied.

use std::sync::Arc;

use autoscaler_model::Quantity;
use autoscaler_model::{
    ACTIVE_CAPACITY, CAPACITY_API_GROUP as GROUP, CAPACITY_BUFFER_KIND as KIND,
    CONDITION_READY_FOR_PROVISIONING, CapacityBuffer, PodOwner as Owner, REASON_ATTRIBUTES_SET,
    SAFE_TO_EVICT_ANNOTATION, pod_from_template,
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
    /// The `Provisioning` condition: what became of the buffer's pods.
    pub provisioning: BufferProvisioning,
}

/// A buffer's `Provisioning` condition, as upstream's pod injection writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferProvisioning {
    /// `True`: the buffer's pods were made (`FakePodsInjected`).
    pub injected: bool,
    /// The condition's reason.
    pub reason: &'static str,
    /// The condition's message (empty when `True`, as upstream leaves it).
    pub message: String,
}

impl BufferProvisioning {
    fn not(reason: &'static str, message: String) -> BufferProvisioning {
        BufferProvisioning {
            injected: false,
            reason,
            message,
        }
    }
}

/// Reason of `Provisioning=True`: the buffer's pods were made.
pub const FAKE_PODS_INJECTED_REASON: &str = "FakePodsInjected";
/// Reason of `Provisioning=False` for a buffer that is not `ReadyForProvisioning`.
pub const NOT_READY_FOR_PROVISIONING_REASON: &str = "NotReadyForProvisioning";
/// Reason of `Provisioning=False` for a buffer of zero replicas.
pub const BUFFER_IS_EMPTY_REASON: &str = "BufferIsEmpty";
/// Reason of `Provisioning=False` when the pods could not be made from the template.
pub const FAILED_TO_MAKE_FAKE_PODS_REASON: &str = "FailedToMakeFakePods";
/// The annotation upstream marks its buffer pods with, and its value.
pub const FAKE_POD_ANNOTATION: &str = "podType";
/// The value of [`FAKE_POD_ANNOTATION`] on a buffer's pods.
pub const FAKE_POD_ANNOTATION_VALUE: &str = "capacityBufferFakePod";

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
    let (shape, pod_template, scalable_replicas) = if let Some(name) = &buffer.pod_template {
        let Some(t) = template(&buffer.namespace, name) else {
            return Some(not_ready(
                buffer,
                &format!(
                    "capacity buffer client can't get pod template: podtemplates \"{name}\" not found"
                ),
            ));
        };
        (t.clone(), Some(name.clone()), None)
    } else if let Some(s) = &buffer.scalable {
        let Some(w) = workload(&buffer.namespace, &s.api_group, &s.kind, &s.name) else {
            return Some(not_ready(
                buffer,
                &format!(
                    "Couldn't resolve buffer {}, {}/{} {} not found",
                    buffer.name, s.api_group, s.kind, s.name
                ),
            ));
        };
        let t = PodTemplate {
            template: Some(w.template),
            ..PodTemplate::default()
        };
        (t, None, w.replicas)
    } else {
        return Some(not_ready(buffer, "no podTemplateRef nor scalableRef"));
    };
    let count = match number_of_pods(buffer, &shape, scalable_replicas) {
        Ok(c) => c,
        Err(e) => {
            return Some(not_ready(
                buffer,
                &format!("couldn't get number of replicas for buffer: {e}"),
            ));
        }
    };
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
    let annotations = [
        (FAKE_POD_ANNOTATION, FAKE_POD_ANNOTATION_VALUE.to_string()),
        (SAFE_TO_EVICT_ANNOTATION, "true".to_string()),
    ];
    let mut pods = Vec::with_capacity(count as usize);
    let mut provisioning = if count == 0 {
        BufferProvisioning::not(
            BUFFER_IS_EMPTY_REASON,
            "CapacityBuffer has zero replicas".into(),
        )
    } else {
        BufferProvisioning {
            injected: true,
            reason: FAKE_PODS_INJECTED_REASON,
            message: String::new(),
        }
    };
    // Upstream counts its fake pods from 1.
    for n in 1..=count {
        let name = format!("capacity-buffer-{}-{n}", buffer.name);
        match pod_from_template(&shape, &buffer.namespace, &name, &owner, &annotations, None) {
            Ok(p) => pods.push(Arc::new(p)),
            Err(e) => {
                pods.clear();
                provisioning = BufferProvisioning::not(
                    FAILED_TO_MAKE_FAKE_PODS_REASON,
                    format!("failed to create fake pods with error: {}", e.detail()),
                );
                break;
            }
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
            provisioning,
        },
        pods,
    })
}

/// The number of pods `buffer` stands for, as upstream's v1beta1 counts them: the larger of
/// `replicas` and `percentage` of the workload's `scalable_replicas` (rounded up; a template
/// buffer has no workload, so no percentage), capped by what fits `limits`; `limits` alone
/// give what fits them. The error says why there is no number.
fn number_of_pods(
    buffer: &CapacityBuffer,
    shape: &PodTemplate,
    scalable_replicas: Option<u32>,
) -> Result<u32, &'static str> {
    let mut replicas = buffer.replicas;
    if let (Some(p), Some(r)) = (buffer.percentage, scalable_replicas) {
        let from_percentage =
            u32::try_from((u64::from(p) * u64::from(r)).div_ceil(100)).unwrap_or(u32::MAX);
        replicas = Some(replicas.map_or(from_percentage, |n| n.max(from_percentage)));
    }
    match &buffer.limits {
        Some(limits) => {
            let fit = pods_within_limits(shape, limits)
                .ok_or("resources in configured limits not found in the pod template")?;
            Ok(replicas.map_or(fit, |n| n.min(fit)))
        }
        None => replicas.ok_or("replicas, percentage and limits are not defined"),
    }
}

/// Whether `pod` is a CapacityBuffer's virtual pod (annotated as upstream marks them): it
/// exists only in the loop's view, so nothing is ever sent to the API for it (no eviction, no
/// event), as upstream's drain skips its buffer pods.
pub fn is_buffer_pod(pod: &Pod) -> bool {
    pod.annotation(FAKE_POD_ANNOTATION) == Some(FAKE_POD_ANNOTATION_VALUE)
}

fn not_ready(buffer: &CapacityBuffer, why: &str) -> Resolved {
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
            message: format!("Buffer not ready for provisioning: {why}"),
            condition: CONDITION_READY_FOR_PROVISIONING,
            provisioning: BufferProvisioning::not(
                NOT_READY_FOR_PROVISIONING_REASON,
                "CapacityBuffer is not ready for provisioning".into(),
            ),
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

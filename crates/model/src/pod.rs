//! The compact pod view the simulator works on, built from a `k8s_openapi` `Pod`.
//!
//! Everything the filters and the autoscaler's rules need is extracted once, interned and
//! normalised here (requests computed as kube-scheduler does, affinity terms with their namespaces
//! and label keys resolved), so that no hot path ever looks at the API object again. Building a
//! view never panics: malformed fields become a [`ModelError`] naming the pod and the field.

mod name;

use std::sync::Arc;

use smallvec::SmallVec;

pub use self::name::{PodName, text_hash};

use crate::affinity::{NodeSelector, PodAffinityTerm, TopologySpreadConstraint};
use crate::intern::Sym;
use crate::labels::Labels;
use crate::resources::Resources;
use crate::taints::Toleration;

/// A malformed Kubernetes object, with the object and the field named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// A quantity that does not parse or is out of range.
    #[error("{object}: field {field}: {error}")]
    Quantity {
        /// `Pod ns/name` or `Node name`.
        object: String,
        /// Path of the field, e.g. `spec.containers[0].resources.requests.cpu`.
        field: String,
        /// The parse error (part of the message, not a separate cause, so it prints once).
        error: crate::quantity::QuantityError,
    },
    /// A field with a value the API does not allow.
    #[error("{object}: field {field}: invalid value {value:?}: {why}")]
    Invalid {
        /// `Pod ns/name` or `Node name`.
        object: String,
        /// Path of the field.
        field: String,
        /// The offending value.
        value: String,
        /// What is wrong.
        why: String,
    },
    /// A required field is missing.
    #[error("{object}: missing required field {field}")]
    Missing {
        /// `Pod ns/name` or `Node name`.
        object: String,
        /// Path of the field.
        field: String,
    },
}

impl ModelError {
    /// The message without the object's name, for callers that name the object themselves.
    pub fn detail(&self) -> String {
        match self {
            ModelError::Quantity { field, error, .. } => format!("field {field}: {error}"),
            ModelError::Invalid {
                field, value, why, ..
            } => format!("field {field}: invalid value {value:?}: {why}"),
            ModelError::Missing { field, .. } => format!("missing required field {field}"),
        }
    }
}

/// Pod phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PodPhase {
    /// `Pending` (also used when the phase is absent).
    #[default]
    Pending,
    /// `Running`.
    Running,
    /// `Succeeded` (terminal).
    Succeeded,
    /// `Failed` (terminal).
    Failed,
    /// `Unknown`.
    Unknown,
}

/// A host port a container binds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HostPort {
    /// Host IP; `0.0.0.0` (also used for empty) binds every address.
    pub ip: Sym,
    /// Protocol (`TCP` by default, `UDP`, `SCTP`).
    pub protocol: Sym,
    /// Port number (never 0: ports without a hostPort are not recorded).
    pub port: u16,
}

/// The controller owning a pod.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnerRef {
    /// Kind (`ReplicaSet`, `DaemonSet`, `Job`, `StatefulSet`, ...).
    pub kind: Sym,
    /// API version of the owner (`apps/v1`).
    pub api_version: Sym,
    /// Name.
    pub name: Arc<str>,
    /// UID.
    pub uid: Arc<str>,
    /// Whether this reference is the controller (`controller: true`).
    pub controller: bool,
}

/// A pod condition, reduced to what the autoscaler reads.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodCondition {
    /// Condition type (`PodScheduled`, `Ready`, ...).
    pub type_: Sym,
    /// `True`, `False` or `Unknown`.
    pub status: Sym,
    /// Machine-readable reason (`Unschedulable`), if any.
    pub reason: Option<Sym>,
    /// Last transition time, milliseconds since the Unix epoch.
    pub last_transition_ms: Option<i64>,
}

/// A volume of the pod, reduced to what scale-down's local-storage rule needs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Volume {
    /// Volume name.
    pub name: Arc<str>,
    /// Whether it is node-local storage that is lost with the node (emptyDir not in memory, or
    /// hostPath).
    pub local_storage: bool,
}

/// A pod volume backed by a claim or an inline CSI driver: what the volume filters read.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum VolumeRef {
    /// A `persistentVolumeClaim` volume, or a generic `ephemeral` one (whose claim the
    /// ephemeral-volume controller names `<pod>-<volume>`).
    Claim {
        /// The claim's name (in the pod's namespace).
        claim: Arc<str>,
        /// Whether it is a generic ephemeral volume.
        ephemeral: bool,
    },
    /// An inline `csi` volume: attached through `driver`, counted per pod.
    InlineCsi {
        /// The CSI driver.
        driver: Sym,
        /// The pod volume's name.
        volume: Arc<str>,
    },
}

/// The scheduler of a pod that names none.
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// The compact pod view.
///
/// `repr(C)` keeps the fields in the order written: the ones the snapshot build reads for every
/// pod (namespace, node, phase, requests, host ports, the anti-affinity, volume and claim lists,
/// the name's hash) come first, right after the `Arc`'s reference counts, so loading a pod fetches
/// a few adjacent cache lines instead of lines scattered over its ~600 bytes.
#[derive(Clone, Debug, PartialEq)]
#[repr(C)]
pub struct Pod {
    /// Namespace.
    pub namespace: Sym,
    /// `spec.nodeName`: the node the pod is bound (or nominated by name) to.
    pub node_name: Option<Sym>,
    /// Priority (0 when absent).
    pub priority: i32,
    /// Phase.
    pub phase: PodPhase,
    /// Effective requests as kube-scheduler computes them: max(sum of app containers plus
    /// sidecars, each init container plus the sidecars started before it), plus overhead; `pods`
    /// is 1.
    pub requests: Resources,
    /// Host ports bound by any container (init containers included).
    pub host_ports: SmallVec<[HostPort; 1]>,
    /// Required pod anti-affinity terms.
    pub anti_affinity: Vec<PodAffinityTerm>,
    /// The volumes backed by claims or inline CSI drivers (empty for most pods: the volume
    /// filters then cost nothing).
    pub volume_refs: Vec<VolumeRef>,
    /// `spec.resourceClaims` with the generated names of `status.resourceClaimStatuses`: the
    /// DRA claims the pod needs allocated (empty for most pods: the DRA filter then costs
    /// nothing). A thin vector: one pointer, no allocation when empty, so that pods without
    /// claims pay 8 bytes for it rather than a `Vec`'s 24. Among the hot fields (see the
    /// layout note above): the snapshot tests every pod for claims.
    pub resource_claims: thin_vec::ThinVec<crate::dra::PodClaim>,
    /// Name, with its hash (which the snapshot's name index reads instead of the text).
    pub name: PodName,
    /// Hash of owner UID and every scheduling-relevant field: pods with equal keys are
    /// interchangeable for scheduling, so each equivalence group is checked once per node.
    pub equivalence: u64,
    /// The controller owner reference, or the first owner if none is marked controller.
    pub owner: Option<OwnerRef>,
    /// Deletion time if the pod is being deleted, milliseconds since the Unix epoch.
    pub deletion_ms: Option<i64>,
    /// UID (empty if absent).
    pub uid: Arc<str>,
    /// Labels.
    pub labels: Labels,
    /// Annotations, sorted by key.
    pub annotations: Vec<(Arc<str>, Arc<str>)>,
    /// `spec.schedulerName` (the API's default, `default-scheduler`, when absent).
    pub scheduler_name: Sym,
    /// `status.nominatedNodeName`: the node kube-scheduler preempts lower-priority pods on to
    /// make room for this pod.
    pub nominated_node_name: Option<Sym>,
    /// `spec.nodeSelector` pairs, all of which must be node labels.
    pub node_selector: Labels,
    /// Required node affinity.
    pub required_node_affinity: Option<NodeSelector>,
    /// Tolerations.
    pub tolerations: Vec<Toleration>,
    /// Required pod affinity terms.
    pub affinity: Vec<PodAffinityTerm>,
    /// Topology spread constraints (both hard and soft are kept; filters use the hard ones).
    pub spread: Vec<TopologySpreadConstraint>,
    /// Conditions.
    pub conditions: Vec<PodCondition>,
    /// Volumes.
    pub volumes: Vec<Volume>,
    /// Creation time, milliseconds since the Unix epoch.
    pub creation_ms: Option<i64>,
    /// Grace period of the pod's termination, milliseconds: `metadata.deletionGracePeriodSeconds`
    /// while it is being deleted, else `spec.terminationGracePeriodSeconds`; `None` when neither
    /// is set (the API default is 30 s).
    pub termination_grace_ms: Option<i64>,
}

impl Pod {
    /// Value of the annotation `key`.
    #[inline]
    pub fn annotation(&self, key: &str) -> Option<&str> {
        crate::annotations::annotation(&self.annotations, key)
    }

    /// Whether the pod has finished for good (`Succeeded` or `Failed`): it holds no resources
    /// and is never rescheduled.
    #[inline]
    pub fn is_terminal(&self) -> bool {
        matches!(self.phase, PodPhase::Succeeded | PodPhase::Failed)
    }

    /// Whether the pod has any inter-pod affinity or anti-affinity term.
    pub fn has_pod_affinity(&self) -> bool {
        !self.affinity.is_empty() || !self.anti_affinity.is_empty()
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

impl Pod {
    /// A pod with the given namespace and name and nothing else: no requests (but one pod slot),
    /// no constraints, phase Pending. Builders and the API conversion start from this.
    pub fn new(namespace: &str, name: &str) -> Pod {
        let mut p = Pod {
            namespace: Sym::new(namespace),
            name: PodName::from(name),
            uid: Arc::from(""),
            labels: Labels::new(),
            annotations: Vec::new(),
            requests: Resources {
                pods: 1,
                ..Resources::default()
            },
            node_name: None,
            scheduler_name: Sym::new(DEFAULT_SCHEDULER),
            nominated_node_name: None,
            node_selector: Labels::new(),
            required_node_affinity: None,
            tolerations: Vec::new(),
            affinity: Vec::new(),
            anti_affinity: Vec::new(),
            spread: Vec::new(),
            host_ports: SmallVec::new(),
            priority: 0,
            owner: None,
            phase: PodPhase::Pending,
            conditions: Vec::new(),
            volumes: Vec::new(),
            volume_refs: Vec::new(),
            creation_ms: None,
            deletion_ms: None,
            termination_grace_ms: None,
            resource_claims: thin_vec::ThinVec::new(),
            equivalence: 0,
        };
        p.update_equivalence();
        p
    }

    /// Recomputes [`Pod::equivalence`]; call after changing any scheduling-relevant field.
    ///
    /// Two pods are equivalent when they have the same controller (by UID, or both none),
    /// namespace, labels and scheduling spec: then a node that rejects one rejects the other,
    /// and the estimator checks the group once per node. The hash covers every field the
    /// predicates read, so pods without a controller but with the same spec (bare pods of a
    /// batch system) are grouped too, which upstream does not do.
    pub fn update_equivalence(&mut self) {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        self.owner.as_ref().map(|o| &o.uid).hash(&mut h);
        self.namespace.hash(&mut h);
        self.labels.hash(&mut h);
        self.requests.hash(&mut h);
        self.node_name.hash(&mut h);
        self.node_selector.hash(&mut h);
        self.required_node_affinity.hash(&mut h);
        self.tolerations.hash(&mut h);
        self.affinity.hash(&mut h);
        self.anti_affinity.hash(&mut h);
        self.spread.hash(&mut h);
        self.host_ports.hash(&mut h);
        self.priority.hash(&mut h);
        self.volume_refs.hash(&mut h);
        // A claim made from a template is the pod's own: pods of one controller stay
        // equivalent, each with its claim, when their templates are the same.
        for c in &self.resource_claims {
            c.name.hash(&mut h);
            match &c.source {
                crate::dra::PodClaimSource::Claim(n) => n.hash(&mut h),
                crate::dra::PodClaimSource::Template { template, .. } => template.hash(&mut h),
            }
        }
        self.equivalence = h.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Most pods have no DRA claim: the field costs them one pointer and no allocation (a
    /// `Vec` was 24 bytes on every pod, 10 MiB over 15,000 pods with their copies).
    #[test]
    fn a_pod_without_claims_pays_one_pointer_for_them() {
        let pod = Pod::new("default", "p");
        assert_eq!(
            std::mem::size_of_val(&pod.resource_claims),
            std::mem::size_of::<usize>()
        );
        assert_eq!(pod.resource_claims.capacity(), 0);
    }

    /// The claims are tested for every pod the snapshot loads, places or removes: they lie
    /// among the other hot fields, not past the cold ones at the end of the ~540 bytes (there
    /// they cost a cache miss a pod, +16% read misses on a snapshot build).
    #[test]
    fn the_claims_lie_among_the_hot_fields() {
        use std::mem::offset_of;
        let claims = offset_of!(Pod, resource_claims);
        assert!(claims > offset_of!(Pod, volume_refs), "{claims}");
        assert!(claims < offset_of!(Pod, name), "{claims}");
        assert!(
            claims + 8 <= 192,
            "within the first three cache lines: {claims}"
        );
    }
}

//! The model of a cluster, the ground floor of the autoscaler: what it knows about the
//! objects a cluster holds, reduced from the API objects to what the decisions read.
//!
//! Bottom up: exact Kubernetes quantities ([`Quantity`]), Go-style durations
//! ([`parse_duration`]), interned strings and labels ([`Sym`], [`Labels`], [`LabelSelector`]),
//! resource vectors ([`Resources`]), taints and tolerations, nodes, pods with their affinity
//! terms and spread constraints, PodDisruptionBudgets, DaemonSets, the storage objects the volume
//! filters read ([`Storage`]) with the DRA objects the DRA filter reads ([`Dra`]), node groups and the provider view ([`CloudProvider`],
//! [`NodeGroup`]), cluster-wide [`ResourceLimits`], the controller lookups the drain rules read
//! ([`ControllerLookup`]), the objects as the API returns them ([`ObjectStore`], keyed by
//! [`ObjectKey`]) with their conversion into the model ([`read_objects`]), the well-known names
//! (taints, labels, annotations, event reasons) and the guard on YAML text ([`check_depth`]).
//!
//! Nothing here decides what to do: the model never imports the decisions (it imports nothing
//! of ours), never performs I/O and never reads a clock. Its modules are private; everything is
//! re-exported flat at this root. The test builders ([`testing`]) exist only with `test-util`.
#![warn(missing_docs)]

mod affinity;
mod annotations;
mod capacity_buffer;
mod capacity_objects;
mod controller;
mod convert;
mod daemonset;
mod disruption;
mod dra;
mod dra_gpu;
mod duration;
mod intern;
mod labels;
mod limits;
mod names;
mod node;
mod node_group;
mod objects;
mod pdb;
mod pod;
mod provisioning_request;
mod quantity;
mod recent;
mod resources;
mod storage;
mod store;
mod taints;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;
mod yaml_depth;

pub use affinity::{
    InclusionPolicy, NamespaceLabels, NodeSelector, NodeSelectorOp, NodeSelectorRequirement,
    NodeSelectorTerm, PodAffinityTerm, TopologySpreadConstraint, WhenUnsatisfiable,
};
pub use capacity_buffer::{
    ACTIVE_CAPACITY, CONDITION_PROVISIONING, CONDITION_READY_FOR_PROVISIONING, CapacityBuffer,
    KIND as CAPACITY_BUFFER_KIND, REASON_ATTRIBUTES_SET, ScalableRef,
    VERSIONS as CAPACITY_BUFFER_VERSIONS,
};
pub use capacity_objects::{CapacityObjects, Workload, WorkloadKey};
pub use controller::{ControllerLookup, ControllerState, NoControllerLookup};
pub use daemonset::DaemonSet;
pub use disruption::{
    BudgetNodes, DisruptionAnnotations, GroupConsolidation, GroupDisruption, NodeBudget,
    group_disruption, parse_budgets,
};
pub use dra::{
    AllocatedDevice, AllocationMode, AllocationNodes, AttrValue, CelSelector, ClaimAllocation,
    ClaimKey, ClaimSpec, ClaimTemplate, DRA_GROUP, Device, DeviceClass, DeviceConstraint, DeviceId,
    DeviceRequest, Dra, MAX_DEVICE_ENTRIES, MAX_EXPRESSION_LEN, MAX_RESERVED_FOR, NodeDevices,
    PodClaim, PodClaimSource, ResourceClaim, ResourceSlice, SliceMatches, SliceReach, Subrequest,
};
pub use dra_gpu::{
    DRA_GPU_ATTRIBUTE, DRA_GPU_TYPE, claimed_dra_gpus, dra_gpus, is_dra_gpu, node_slices,
    template_dra_gpus,
};
pub use duration::{DurationError, format_duration, parse_duration};
pub use intern::Sym;
/// The API's PodTemplate, which ProvisioningRequests and CapacityBuffers name.
pub use k8s_openapi::api::core::v1::{PodTemplate, PodTemplateSpec};
pub use labels::{LabelSelector, Labels, SelectorOp, SelectorRequirement, check_qualified_name};
pub use limits::{
    ClusterTotals, GPU_TYPE_LABEL, InvalidRange, LimitParseError, LimitReached, Range,
    ResourceLimits, check_gpu_resource, check_gpu_type, gpus_of, parse_gpu_limit,
};
pub use names::{
    CLUSTER_UNHEALTHY, DAEMONSET_POD_ANNOTATION, DELAY_DELETION_ANNOTATION_PREFIX,
    DELETE_UNREGISTERED, DELETION_CANDIDATE_TAINT, ENABLE_DS_EVICTION_ANNOTATION,
    FAILED_TO_SCALE_UP_GROUP, FIX_NODE_GROUP_SIZE, HOSTNAME_LABEL, IGNORE_TAINT_PREFIX,
    KUBE_SYSTEM, MIRROR_POD_ANNOTATION, NOT_READY_FOR_AUTOSCALING, POD_SCALE_UP_DELAY_ANNOTATION,
    PRIORITY_CONFIG_KEY, PRIORITY_CONFIG_MAP_NAME, SAFE_TO_EVICT_ANNOTATION,
    SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION, SCALE_DOWN_DISABLED_ANNOTATION, SCALE_UP_FAILED,
    SCALE_UP_TIMED_OUT, SCALED_UP_GROUP, STARTUP_TAINT_PREFIX, STATUS_TAINT_PREFIX,
    TO_BE_DELETED_TAINT, TO_BE_REPLACED_TAINT,
};
pub use node::{CsiDriverLimit, CsiNode, Node, NodeCondition};
pub use node_group::{
    CloudProvider, Instance, InstanceError, InstanceErrorClass, InstanceState, NodeGroup,
    NodeGroupError, NodeGroupId, NodeGroupOptions, NodeGroupOptionsError, StaticProvider,
};
pub use objects::{ClusterObjects, StoreControllers, read_objects, read_objects_but_storage};
pub use pdb::{DisruptionBudgets, IntOrPercent, PdbBlocked, PdbIndices, PodDisruptionBudget};
pub use pod::{
    DEFAULT_SCHEDULER, HostPort, ModelError, OwnerRef, Pod, PodCondition, PodName, PodPhase,
    Volume, VolumeRef, text_hash,
};
pub use provisioning_request::{
    CLASS_ANNOTATION, CLASS_BEST_EFFORT_ATOMIC, CLASS_CHECK_CAPACITY, CONSUME_ANNOTATION,
    Condition as RequestCondition, ConditionStatus, ConditionType, GROUP as CAPACITY_API_GROUP,
    KIND as PROVISIONING_REQUEST_KIND, LEGACY_CLASS_ANNOTATION, LEGACY_CONSUME_ANNOTATION,
    MAX_PARAMETER_LENGTH, MAX_POD_SETS, Owner as PodOwner, PARAMETER_NO_RETRY,
    PARAMETER_PROCESSOR_INSTANCE, PodSet, PodsError, ProvisioningRequest,
    VERSIONS as PROVISIONING_REQUEST_VERSIONS, consumed_request, pod_from_template,
    pods_for_request,
};
pub use quantity::{Quantity, QuantityError, parse as parse_quantity, parse_milli, parse_units};
pub use resources::{ResourceName, Resources};
pub use storage::{
    AccessModes, BindingMode, Claim, CsiSource, NO_PROVISIONER, PersistentVolume,
    SELECTED_NODE_ANNOTATION, Storage, StorageCapacity, StorageClass, VOLUME_TOPOLOGY_LABELS,
    csi_of,
};
pub use store::{ObjectKey, ObjectStore, StoreError, group_of, strict_values, version_of};
pub use taints::{
    InvalidTaintKey, Taint, TaintConfig, TaintEffect, Toleration, TolerationOp, first_untolerated,
    intolerable_preferences,
};
pub use yaml_depth::{
    EXPANSION_ALLOWANCE, EXPANSION_BYTES_PER_BYTE, MAX_DEPTH, TooDeep, check_depth,
};

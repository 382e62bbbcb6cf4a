//! Well-known names, in one place: the taints, labels and annotations the autoscaler sets or
//! reads, the event reasons it emits, and the objects it looks up by name, all as upstream
//! spells them so users switch without relearning.
//!
//! It decides nothing; it only names.

// Event reasons, as upstream names them.

/// Event reason: a group was grown.
pub const SCALED_UP_GROUP: &str = "ScaledUpGroup";
/// Event reason: the provider call growing a group failed.
pub const FAILED_TO_SCALE_UP_GROUP: &str = "FailedToScaleUpGroup";
/// Event reason: a scale-up did not complete within the provision time.
pub const SCALE_UP_TIMED_OUT: &str = "ScaleUpTimedOut";
/// Event reason (and `DeleteInstances` reason): instances the provider reports in error.
pub const SCALE_UP_FAILED: &str = "ScaleUpFailed";
/// Event reason (and `DeleteInstances` reason): instances that never registered as nodes.
pub const DELETE_UNREGISTERED: &str = "DeleteUnregistered";
/// Event reason: the cluster has too many unready nodes to autoscale.
pub const CLUSTER_UNHEALTHY: &str = "ClusterUnhealthy";
/// Event reason: a target nobody asked for in this process's memory (after a restart, or set by
/// someone else) was not reached within the provision time and is lowered to what exists.
pub const FIX_NODE_GROUP_SIZE: &str = "FixNodeGroupSize";
/// Status text of an unhealthy cluster.
pub const NOT_READY_FOR_AUTOSCALING: &str = "Cluster is not ready for autoscaling";

// Pod annotations and namespaces the drain rules read.

/// Annotation: `"true"` makes a pod movable whatever the other rules say (PodDisruptionBudgets
/// still apply), `"false"` forbids evicting it.
pub const SAFE_TO_EVICT_ANNOTATION: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";
/// Annotation: comma-separated names of local-storage volumes whose loss is acceptable.
pub const SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION: &str =
    "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes";
/// Annotation on a DaemonSet pod: `"true"` / `"false"` overrides the DaemonSet eviction flags.
pub const ENABLE_DS_EVICTION_ANNOTATION: &str =
    "cluster-autoscaler.kubernetes.io/enable-ds-eviction";
/// Annotation: `"true"` makes the autoscaler treat a pod as a DaemonSet pod.
pub const DAEMONSET_POD_ANNOTATION: &str = "cluster-autoscaler.kubernetes.io/daemonset-pod";
/// Annotation the kubelet puts on the API mirror of a static pod.
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// The namespace of system pods.
pub const KUBE_SYSTEM: &str = "kube-system";

// Node labels.

/// The label every node carries with its own name, set on each new node.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

// Pod annotations of scale-up.

/// Annotation with a per-pod scale-up delay (a Go duration); honoured only when it is longer
/// than `--new-pod-scale-up-delay`, as upstream does.
pub const POD_SCALE_UP_DELAY_ANNOTATION: &str =
    "cluster-autoscaler.kubernetes.io/pod-scale-up-delay";

// Node annotations of scale-down.

/// Annotation that keeps a node from ever being scaled down.
pub const SCALE_DOWN_DISABLED_ANNOTATION: &str =
    "cluster-autoscaler.kubernetes.io/scale-down-disabled";
/// Prefix of node annotations that hold a node's deletion (after its drain) until they are
/// removed, at most `--node-deletion-delay-timeout`.
pub const DELAY_DELETION_ANNOTATION_PREFIX: &str =
    "delay-deletion.cluster-autoscaler.kubernetes.io/";

// Taints the autoscaler sets or reads.

/// Taint the autoscaler puts on nodes it is deleting.
pub const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";
/// Taint the autoscaler puts on nodes it considers unneeded (soft, PreferNoSchedule).
pub const DELETION_CANDIDATE_TAINT: &str = "DeletionCandidateOfClusterAutoscaler";
/// Taint (ours, NoSchedule) on nodes consolidation replaces, from the decision until they are
/// drained or the replacement is given up: no new pod lands on them meanwhile.
pub const TO_BE_REPLACED_TAINT: &str = "ToBeReplacedByClusterAutoscaler";
/// Prefix of taints that are expected to disappear once a node has started.
pub const STARTUP_TAINT_PREFIX: &str = "startup-taint.cluster-autoscaler.kubernetes.io/";
/// Older spelling of [`STARTUP_TAINT_PREFIX`], still honoured upstream.
pub const IGNORE_TAINT_PREFIX: &str = "ignore-taint.cluster-autoscaler.kubernetes.io/";
/// Prefix of taints that only report a node's status: left out of templates, the node still
/// counts as ready.
pub const STATUS_TAINT_PREFIX: &str = "status-taint.cluster-autoscaler.kubernetes.io/";

// The priority expander's ConfigMap.

/// Name of the ConfigMap holding the priority configuration (in the autoscaler's namespace).
pub const PRIORITY_CONFIG_MAP_NAME: &str = "cluster-autoscaler-priority-expander";
/// Data key of that ConfigMap holding the YAML text.
pub const PRIORITY_CONFIG_KEY: &str = "priorities";

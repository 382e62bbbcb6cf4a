//! The scenario file of `simulate`: what the simulated cluster looks like, what happens to it and
//! how the autoscaler is configured; parsed strictly (unknown fields are errors naming the field)
//! and validated into the world's and the core's own types.
//!
//! It decides how scenario text maps onto the world; its `options:` are the flags of `run`,
//! handed by name to the flags' own parsers and validation (`autoscaler_options`), with the
//! command line's `--config` and flags layered around them. It never runs anything and never
//! reads the clock.

mod dra;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use autoscaler_actuation::ActuationOptions;
use autoscaler_core::AutoscalerOptions;
use autoscaler_model::parse_duration;
use autoscaler_world::{
    ClaimTemplate, CsiSpec, DaemonSetSpec, DeletePolicy, DraDriverSpec, Fault, FaultKind, JobSpec,
    NodeGroupSpec, PodTemplate, ProvisioningDelay, ReplicaSetSpec, Scoring, SimTime,
    StatefulSetSpec,
};
use serde::Deserialize;
use serde_json::{Value, json};

use autoscaler_options::{
    AutoscalingArgs, ClusterAutoscalerResource, OptionsError, RunArgs, RunOptions,
};

/// The built-in scenario `simulate` runs without an argument.
pub const DEFAULT_SCENARIO: &str = include_str!("default.yaml");

/// The most nodes a group may start with, and the most pods one workload may ask for at once:
/// far beyond Kubernetes' documented limits (5,000 nodes, 150,000 pods per cluster), small
/// enough that the simulated world fits in memory.
pub const MAX_INITIAL_NODES: u32 = 10_000;
/// See [`MAX_INITIAL_NODES`].
pub const MAX_WORKLOAD_PODS: u32 = 200_000;
/// The most metric samples a run keeps (`duration / sample_interval`), so that a run's memory
/// does not grow with its virtual duration (a sample with its per-group counts is a few
/// hundred bytes).
pub const MAX_SAMPLES: u64 = 20_000;

/// The most loops a run may have (`duration / scan-interval`): 1,000 virtual hours at the
/// default 10s is 360,000; a 1ms scan interval over an hour would be 3.6 million.
pub const MAX_LOOPS: u64 = 1_000_000;

/// Checks the number of loops of a run.
pub fn check_loops(duration: SimTime, scan_interval: SimTime) -> Result<(), String> {
    if duration / scan_interval.max(1) > MAX_LOOPS {
        return Err(format!(
            "{} loops ({} / scan-interval {}) is more than the {MAX_LOOPS} a run may have",
            duration / scan_interval.max(1),
            super::report::clock(duration),
            super::report::clock(scan_interval)
        ));
    }
    Ok(())
}

/// Why a scenario cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The YAML does not parse or does not match the schema (the message names the field).
    #[error("{0}")]
    Yaml(String),
    /// A field has a value that parses but makes no sense.
    #[error("field `{field}`: {message}")]
    Invalid {
        /// Path of the field, e.g. `node_groups[1].max`.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The options are invalid once the command line's `--config` and flags are added (the
    /// message names the flag or the config file's field).
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// A trace file cannot be read.
    #[error("trace {path}: {message}")]
    Trace {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> ScenarioError {
    ScenarioError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// A scenario file as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// A name for reports.
    pub name: String,
    /// One line saying what it shows.
    #[serde(default)]
    pub description: String,
    /// Virtual duration, e.g. `3h`.
    pub duration: String,
    /// Seed of every random choice.
    #[serde(default)]
    pub seed: u64,
    /// How often metrics are sampled (default: 10s, or longer so a run keeps about 2,000
    /// samples).
    #[serde(default)]
    pub sample_interval: Option<String>,
    /// Provisioning delay of groups that give none (default 60s..120s).
    #[serde(default)]
    pub provisioning_delay: Option<DelayFile>,
    /// How late the MachineSet controller acts on a change of replicas (default 0s).
    #[serde(default)]
    pub machine_set_sync: Option<String>,
    /// How long a deleted Machine's instance takes to terminate after its drain (default 0s).
    #[serde(default)]
    pub machine_deletion: Option<String>,
    /// How long after a new node joins Ready its device plugins advertise its GPUs and other
    /// extended resources (default 0s: with the node).
    #[serde(default)]
    pub device_plugin_delay: Option<String>,
    /// The longest delay of a change on its way to the autoscaler's view (default 0s: at once).
    #[serde(default)]
    pub watch_lag: Option<String>,
    /// Autoscaler options, by flag name.
    #[serde(default)]
    pub options: OptionsFile,
    /// How the world's scheduler scores nodes.
    #[serde(default)]
    pub scheduler: SchedulerFile,
    /// Node groups (MachineDeployments).
    pub node_groups: Vec<GroupFile>,
    /// Kubernetes objects created at the start (PodDisruptionBudgets, Namespaces, Pods, ...).
    /// A key written twice in one mapping is refused, as in snapshots.
    #[serde(default, deserialize_with = "autoscaler_model::strict_values")]
    pub objects: Vec<Value>,
    /// Injected faults.
    #[serde(default)]
    pub faults: Vec<FaultFile>,
    /// Workloads.
    #[serde(default)]
    pub workloads: Vec<WorkloadFile>,
}

/// The world's scheduler profile.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerFile {
    /// kube-scheduler's `NodeResourcesFit` scoring strategy: `LeastAllocated` (default) or
    /// `MostAllocated` (bin packing).
    #[serde(default)]
    pub scoring: Scoring,
}

/// A uniform delay distribution.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelayFile {
    /// Shortest, e.g. `60s`.
    pub min: String,
    /// Longest, e.g. `2m`.
    pub max: String,
}

/// Autoscaler options as written: the flags of the decision, the loop and the drain by name
/// (`scale-down-unneeded-time: 5m`, a list for a repeatable flag), read by the flags' own
/// parsers (see [`AutoscalingArgs::from_settings`]), and [`RESTART_AT`].
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(transparent)]
pub struct OptionsFile(pub serde_yaml_ng::Mapping);

/// The one option that is no flag: virtual times at which the autoscaler process restarts (a
/// fresh `Autoscaler`, all in-memory state dropped), e.g. `[30m]`.
pub const RESTART_AT: &str = "restart-at";

/// What the command line of `simulate` adds to a scenario's options.
#[derive(Clone, Copy, Debug)]
pub struct CommandLine<'a> {
    /// The flags given; they win over the scenario's options.
    pub args: &'a RunArgs,
    /// The `--config` resource, already read; the scenario's options win over it.
    pub file: Option<&'a ClusterAutoscalerResource>,
}

/// A node group.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupFile {
    /// MachineDeployment name.
    pub name: String,
    /// Namespace (default `default`).
    #[serde(default = "default_ns")]
    pub namespace: String,
    /// Min size annotation.
    pub min: u32,
    /// Max size annotation.
    pub max: u32,
    /// Initial replicas (default: `min`).
    #[serde(default)]
    pub replicas: Option<u32>,
    /// Node CPU (quantity).
    pub cpu: String,
    /// Node memory (quantity).
    pub memory: String,
    /// Max pods per node (default 110).
    #[serde(default = "default_max_pods")]
    pub max_pods: u32,
    /// GPUs per node.
    #[serde(default)]
    pub gpu: Option<GpuFile>,
    /// Node labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Node taints, `key=value:Effect`.
    #[serde(default)]
    pub taints: Vec<String>,
    /// More MachineDeployment annotations (e.g. per-group autoscaling options).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Price of one node per hour: the cost report, and the group's price annotation for the
    /// `price` expander (0, the default: no price).
    #[serde(default)]
    pub price_per_hour: f64,
    /// Provisioning delay of this group.
    #[serde(default)]
    pub provisioning_delay: Option<DelayFile>,
    /// The MachineSet's delete policy: `Random` (default), `Newest` or `Oldest`.
    #[serde(default)]
    pub delete_policy: Option<String>,
    /// The CSI driver of the nodes (each gets a CSINode with its attach limit).
    #[serde(default)]
    pub csi: Option<CsiFile>,
    /// The DRA driver of the nodes (each publishes its devices as a ResourceSlice).
    #[serde(default)]
    pub dra: Option<DraFile>,
}

/// The DRA driver the nodes of a group run: each node publishes `devices` devices (named
/// `<prefix>-0`, `<prefix>-1`, ...) in one ResourceSlice `delay` after it joins.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DraFile {
    /// Driver name (`spec.driver` of the slices; device classes select it).
    pub driver: String,
    /// How long after a node joins Ready its slice is published (default 0s).
    #[serde(default)]
    pub delay: Option<String>,
    /// Devices per node (1 to 128, a slice's limit).
    pub devices: u32,
    /// Device name prefix (default `gpu`).
    #[serde(default)]
    pub device_prefix: Option<String>,
    /// Attributes of every device, as the API writes them (`model: {string: h100}`).
    #[serde(default)]
    pub attributes: serde_json::Map<String, Value>,
    /// Capacities of every device (`memory: 80Gi`).
    #[serde(default)]
    pub capacity: BTreeMap<String, String>,
}

/// The CSI driver the nodes of a group run.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CsiFile {
    /// Driver name (the provisioner of the StorageClasses it serves).
    pub driver: String,
    /// Volumes of the driver one node can attach (`allocatable.count`; default unlimited).
    #[serde(default)]
    pub max_volumes: Option<u32>,
}

/// GPUs of a node.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuFile {
    /// Resource name (default `nvidia.com/gpu`).
    #[serde(default = "default_gpu_resource")]
    pub resource: String,
    /// GPUs per node.
    pub count: u32,
}

/// A fault.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultFile {
    /// The node group (MachineDeployment name).
    pub group: String,
    /// Start (virtual time, e.g. `30m`).
    pub from: String,
    /// End (exclusive).
    pub to: String,
    /// `stockout`, `slow`, `never-registers`, `scale-api-error`, `nodes-not-ready` or
    /// `replicas-changed`.
    pub kind: String,
    /// Nodes a `nodes-not-ready` fault takes down.
    #[serde(default)]
    pub count: Option<u32>,
    /// Failure reason of a stockout (default `InsufficientCapacity`).
    #[serde(default)]
    pub reason: Option<String>,
    /// Delay of a `slow` fault.
    #[serde(default)]
    pub delay: Option<String>,
    /// Change of replicas of a `replicas-changed` fault.
    #[serde(default)]
    pub delta: Option<i64>,
}

/// What the pods of a workload look like.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodFile {
    /// CPU request (default `100m`).
    #[serde(default)]
    pub cpu: Option<String>,
    /// Memory request (default `128Mi`).
    #[serde(default)]
    pub memory: Option<String>,
    /// GPUs requested.
    #[serde(default)]
    pub gpu: u32,
    /// GPU resource name (default `nvidia.com/gpu`).
    #[serde(default)]
    pub gpu_resource: Option<String>,
    /// Pod labels (default `app: <workload name>`).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Priority.
    #[serde(default)]
    pub priority: Option<i32>,
    /// Node selector.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations, as in a pod spec.
    #[serde(default)]
    pub tolerations: Vec<Value>,
    /// DRA claims of the pod (`spec.resourceClaims`, each also claimed by its container).
    #[serde(default)]
    pub claims: Vec<PodClaimFile>,
    /// Any further pod spec fields (merged over the generated spec).
    #[serde(default)]
    pub spec: Option<Value>,
}

/// A DRA claim of a pod: made from a ResourceClaimTemplate for each pod, or an existing
/// ResourceClaim shared by the pods naming it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodClaimFile {
    /// The entry's name (a DNS label).
    pub name: String,
    /// `resourceClaimTemplateName`.
    #[serde(default)]
    pub template: Option<String>,
    /// `resourceClaimName`.
    #[serde(default)]
    pub claim: Option<String>,
}

/// A change of a Deployment's replicas at a time.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicasAt {
    /// When.
    pub at: String,
    /// Replicas from then on.
    pub replicas: u32,
}

/// A Deployment (with its ReplicaSet) following a replica schedule.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeploymentFile {
    /// Name.
    pub name: String,
    /// Namespace (default `default`).
    #[serde(default = "default_ns")]
    pub namespace: String,
    /// Replicas at the start.
    pub replicas: u32,
    /// Later replica counts.
    #[serde(default)]
    pub schedule: Vec<ReplicasAt>,
    /// How long each pod runs before it is replaced (default forever).
    #[serde(default)]
    pub pod_lifetime: Option<String>,
    /// The pods.
    #[serde(default)]
    pub pod: PodFile,
}

/// A Job created at `at`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobFile {
    /// Name.
    pub name: String,
    /// Namespace (default `default`).
    #[serde(default = "default_ns")]
    pub namespace: String,
    /// Creation time (default 0).
    #[serde(default)]
    pub at: Option<String>,
    /// Successful pods needed.
    pub completions: u32,
    /// Pods at once (default `completions`).
    #[serde(default)]
    pub parallelism: Option<u32>,
    /// How long each pod runs once started.
    pub duration: String,
    /// The pods.
    #[serde(default)]
    pub pod: PodFile,
}

/// A DaemonSet.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonSetFile {
    /// Name.
    pub name: String,
    /// Namespace (default `kube-system`).
    #[serde(default = "default_ds_ns")]
    pub namespace: String,
    /// The pods.
    #[serde(default)]
    pub pod: PodFile,
}

/// A claim template of a StatefulSet.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimFile {
    /// Template name (the pod's volume; claims are `<name>-<set>-<ordinal>`).
    pub name: String,
    /// StorageClass (default: the class annotated as default).
    #[serde(default)]
    pub storage_class: Option<String>,
    /// Requested size (default `1Gi`).
    #[serde(default)]
    pub size: Option<String>,
    /// Access modes (default `[ReadWriteOnce]`).
    #[serde(default)]
    pub access_modes: Vec<String>,
}

/// A StatefulSet with volume claim templates.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatefulSetFile {
    /// Name.
    pub name: String,
    /// Namespace (default `default`).
    #[serde(default = "default_ns")]
    pub namespace: String,
    /// Replicas at the start.
    pub replicas: u32,
    /// Later replica counts.
    #[serde(default)]
    pub schedule: Vec<ReplicasAt>,
    /// `OrderedReady` (default) or `Parallel`.
    #[serde(default)]
    pub pod_management_policy: Option<String>,
    /// `volumeClaimTemplates`.
    #[serde(default)]
    pub volume_claims: Vec<ClaimFile>,
    /// The pods.
    #[serde(default)]
    pub pod: PodFile,
}

/// Bare pods replayed from a trace CSV (`../shared/traces/README.md` format).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceFile {
    /// CSV path, relative to the scenario file's directory.
    pub file: String,
    /// Namespace (default `default`).
    #[serde(default = "default_ns")]
    pub namespace: String,
    /// Multiplies arrival times and durations (default 1).
    #[serde(default)]
    pub time_scale: Option<f64>,
    /// Keep every Nth row (default 1: all).
    #[serde(default)]
    pub sample: Option<usize>,
    /// Skip rows arriving before this trace time (before scaling; default 0).
    #[serde(default)]
    pub start: Option<String>,
    /// Keep at most this many rows (after sampling).
    #[serde(default)]
    pub limit: Option<usize>,
    /// GPU resource name (default `nvidia.com/gpu`).
    #[serde(default)]
    pub gpu_resource: Option<String>,
    /// Node label to select `gpu_model` with; without it the model is ignored.
    #[serde(default)]
    pub gpu_model_label: Option<String>,
    /// Tolerations given to every replayed pod.
    #[serde(default)]
    pub tolerations: Vec<Value>,
    /// Name of the controller owning the pods (default `trace`).
    #[serde(default)]
    pub name: Option<String>,
    /// Who owns the pods: `job` (default: a row is a task; evicted, it starts over),
    /// `replicaset` (a row is a long runner; evicted, it runs on elsewhere for the time it had
    /// left) or `none` (bare pods, which scale-down never moves).
    #[serde(default)]
    pub owner: TraceOwnerFile,
    /// The `cluster-autoscaler.kubernetes.io/safe-to-evict` annotation of every pod (default:
    /// none).
    #[serde(default)]
    pub safe_to_evict: Option<bool>,
}

/// A trace's pod owner kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceOwnerFile {
    /// A Job.
    #[default]
    Job,
    /// A ReplicaSet.
    ReplicaSet,
    /// Bare pods.
    None,
}

/// A workload; `kind` says which (`deployment`, `job`, `daemon-set`, `stateful-set`, `trace`).
#[derive(Clone, Debug)]
pub enum WorkloadFile {
    /// A Deployment (with its ReplicaSet) following a replica schedule.
    Deployment(DeploymentFile),
    /// A Job created at `at`.
    Job(JobFile),
    /// A DaemonSet.
    DaemonSet(DaemonSetFile),
    /// A StatefulSet with volume claim templates.
    StatefulSet(StatefulSetFile),
    /// Bare pods replayed from a trace CSV (`../shared/traces/README.md` format).
    Trace(TraceFile),
    /// A job arriving through a ProvisioningRequest, as Kueue creates it.
    ProvisioningRequest(super::arrival::RequestFile),
}

impl<'de> Deserialize<'de> for WorkloadFile {
    /// Dispatches on `kind` by hand: serde's internally tagged enums lose the path of the
    /// field at fault, and errors must name it (`workloads[2].replicas`).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<WorkloadFile, D::Error> {
        use serde::de::Error;
        let mut map = serde_yaml_ng::Mapping::deserialize(d)?;
        let kind = match map.remove("kind") {
            Some(serde_yaml_ng::Value::String(k)) => k,
            Some(_) => return Err(D::Error::custom(".kind: must be a string")),
            None => return Err(D::Error::missing_field("kind")),
        };
        let rest = serde_yaml_ng::Value::Mapping(map);
        match kind.as_str() {
            "deployment" => variant(rest).map(WorkloadFile::Deployment),
            "job" => variant(rest).map(WorkloadFile::Job),
            "daemon-set" => variant(rest).map(WorkloadFile::DaemonSet),
            "stateful-set" => variant(rest).map(WorkloadFile::StatefulSet),
            "trace" => variant(rest).map(WorkloadFile::Trace),
            "provisioning-request" => variant(rest).map(WorkloadFile::ProvisioningRequest),
            other => Err(D::Error::unknown_variant(
                other,
                &[
                    "deployment",
                    "job",
                    "daemon-set",
                    "stateful-set",
                    "trace",
                    "provisioning-request",
                ],
            )),
        }
    }
}

/// Reads one workload kind's fields; an error inside names its path, starting with `.` so the
/// caller's path joins it (see `autoscaler_options::yaml_from_str`).
fn variant<T: serde::de::DeserializeOwned, E: serde::de::Error>(
    v: serde_yaml_ng::Value,
) -> Result<T, E> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            E::custom(inner)
        } else {
            E::custom(format!(".{path}: {inner}"))
        }
    })
}

fn default_ns() -> String {
    "default".into()
}
fn default_ds_ns() -> String {
    "kube-system".into()
}
fn default_max_pods() -> u32 {
    110
}
fn default_gpu_resource() -> String {
    "nvidia.com/gpu".into()
}

/// A pod created at a virtual time.
#[derive(Clone, Debug, PartialEq)]
pub struct TimedPod {
    /// When.
    pub at: SimTime,
    /// The Pod object.
    pub object: Value,
    /// How long it runs once started.
    pub lifetime: Option<SimTime>,
}

/// A validated node group.
#[derive(Clone, Debug)]
pub struct Group {
    /// The world's spec.
    pub spec: NodeGroupSpec,
    /// Extra annotations.
    pub annotations: BTreeMap<String, String>,
    /// Price per node-hour.
    pub price_per_hour: f64,
    /// Its provisioning delay, if it has its own.
    pub delay: Option<ProvisioningDelay>,
    /// The CSI driver of its nodes.
    pub csi: Option<CsiSpec>,
    /// The DRA driver of its nodes.
    pub dra: Option<DraDriverSpec>,
}

/// A validated scenario, ready to build a world from.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Virtual duration.
    pub duration: SimTime,
    /// Seed.
    pub seed: u64,
    /// Loop interval.
    pub scan_interval: SimTime,
    /// Metrics interval.
    pub sample_interval: SimTime,
    /// Default provisioning delay.
    pub default_delay: ProvisioningDelay,
    /// How late the MachineSet controller acts on a change of replicas.
    pub machine_set_sync_ms: SimTime,
    /// How long a deleted Machine takes to terminate after its drain.
    pub machine_deletion_ms: SimTime,
    /// How long after a new node joins its extended resources are advertised.
    pub device_plugin_delay_ms: SimTime,
    /// The longest delay of a change on its way to the autoscaler's view.
    pub watch_lag_ms: SimTime,
    /// How the world's scheduler scores nodes' resource fit.
    pub scoring: Scoring,
    /// Autoscaler options.
    pub options: AutoscalerOptions,
    /// Node groups.
    pub groups: Vec<Group>,
    /// Objects created at the start.
    pub objects: Vec<Value>,
    /// Faults.
    pub faults: Vec<Fault>,
    /// Deployments.
    pub replica_sets: Vec<ReplicaSetSpec>,
    /// Jobs with their creation time.
    pub jobs: Vec<(SimTime, JobSpec)>,
    /// Jobs arriving through ProvisioningRequests, in arrival order.
    pub requests: Vec<super::arrival::RequestArrival>,
    /// DaemonSets.
    pub daemon_sets: Vec<DaemonSetSpec>,
    /// Trace replays, in workload order; their rows are read during the run.
    pub traces: Vec<super::trace::TraceSource>,
    /// StatefulSets.
    pub stateful_sets: Vec<StatefulSetSpec>,
    /// Virtual times at which the autoscaler restarts (option `restart-at`), sorted.
    pub restart_at: Vec<SimTime>,
    /// How actions are carried out, from the same flags as `run`: how long a drain retries
    /// evictions refused by a budget (`max-pod-eviction-time`, 2m), cordoning, the delays of
    /// deletions.
    pub actuation: ActuationOptions,
}

fn ms(field: &str, text: &str) -> Result<SimTime, ScenarioError> {
    parse_duration(text)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .map_err(|e| invalid(field, e.to_string()))
}

fn delay(field: &str, d: &DelayFile) -> Result<ProvisioningDelay, ScenarioError> {
    let min_ms = ms(&format!("{field}.min"), &d.min)?;
    let max_ms = ms(&format!("{field}.max"), &d.max)?;
    if max_ms < min_ms {
        return Err(invalid(format!("{field}.max"), "is below min"));
    }
    Ok(ProvisioningDelay { min_ms, max_ms })
}

impl Scenario {
    /// Parses and validates scenario text; `base` is the directory relative paths (traces) are
    /// read from.
    // Tests and fuzzing read scenarios without a command line; `simulate` uses `parse_with`.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn parse(text: &str, base: &Path) -> Result<Scenario, ScenarioError> {
        let file: ScenarioFile =
            autoscaler_options::yaml_from_str(text).map_err(ScenarioError::Yaml)?;
        Scenario::from_file(file, base, None)
    }

    /// [`Scenario::parse`] with the command line's `--config` and flags over the scenario's
    /// options (defaults < config file < scenario < flags).
    pub fn parse_with(
        text: &str,
        base: &Path,
        cli: &CommandLine,
    ) -> Result<Scenario, ScenarioError> {
        let file: ScenarioFile =
            autoscaler_options::yaml_from_str(text).map_err(ScenarioError::Yaml)?;
        Scenario::from_file(file, base, Some(cli))
    }

    fn from_file(
        f: ScenarioFile,
        base: &Path,
        cli: Option<&CommandLine>,
    ) -> Result<Scenario, ScenarioError> {
        let duration = ms("duration", &f.duration)?;
        if duration == 0 {
            return Err(invalid("duration", "must be positive"));
        }
        let run = options(&f.options, f.seed, cli)?;
        let scan_interval = scan_ms(&run, cli)?;
        check_loops(duration, scan_interval).map_err(|e| {
            let value = autoscaler_model::format_duration(run.controller.scan_interval);
            scan_interval_error(cli, value, e)
        })?;
        let sample_interval = match &f.sample_interval {
            Some(t) => ms("sample_interval", t)?.max(1),
            None => (duration / 2_000).max(10_000),
        };
        if duration / sample_interval > MAX_SAMPLES {
            return Err(invalid(
                "sample_interval",
                format!("gives more than {MAX_SAMPLES} samples over the duration; make it longer"),
            ));
        }
        let default_delay = match &f.provisioning_delay {
            Some(d) => delay("provisioning_delay", d)?,
            None => ProvisioningDelay {
                min_ms: 60_000,
                max_ms: 120_000,
            },
        };
        if f.node_groups.is_empty() {
            return Err(invalid("node_groups", "at least one node group is needed"));
        }
        for (i, o) in f.objects.iter().enumerate() {
            check_object(&format!("objects[{i}]"), o)?;
        }
        let mut groups = Vec::new();
        for (i, g) in f.node_groups.iter().enumerate() {
            groups.push(group(&format!("node_groups[{i}]"), g)?);
        }
        for (i, g) in groups.iter().enumerate() {
            if groups[..i].iter().any(|o| o.spec.name == g.spec.name) {
                return Err(invalid(
                    format!("node_groups[{i}].name"),
                    format!("{} is given twice", g.spec.name),
                ));
            }
        }
        let mut faults = Vec::new();
        for (i, x) in f.faults.iter().enumerate() {
            let field = format!("faults[{i}]");
            if !groups.iter().any(|g| g.spec.name == x.group) {
                return Err(invalid(
                    format!("{field}.group"),
                    format!("no node group {}", x.group),
                ));
            }
            let kind = match x.kind.as_str() {
                "stockout" => FaultKind::Stockout {
                    reason: x
                        .reason
                        .clone()
                        .unwrap_or_else(|| "InsufficientCapacity".into()),
                },
                "slow" => FaultKind::Slow {
                    delay_ms: match &x.delay {
                        Some(d) => ms(&format!("{field}.delay"), d)?,
                        None => {
                            return Err(invalid(format!("{field}.delay"), "slow needs a delay"));
                        }
                    },
                },
                "never-registers" => FaultKind::NeverRegisters,
                "scale-api-error" => FaultKind::ScaleApiError,
                "replicas-changed" => {
                    let delta = x.delta.ok_or_else(|| {
                        invalid(format!("{field}.delta"), "replicas-changed needs a delta")
                    })?;
                    super::cost::check_delta(&format!("{field}.delta"), delta)?;
                    FaultKind::ReplicasChanged { delta }
                }
                "rollout" => FaultKind::Rollout,
                "nodes-not-ready" => FaultKind::NodesNotReady {
                    count: x.count.ok_or_else(|| {
                        invalid(format!("{field}.count"), "nodes-not-ready needs a count")
                    })?,
                },
                other => {
                    return Err(invalid(
                        format!("{field}.kind"),
                        format!(
                            "unknown fault {other:?} (stockout, slow, never-registers, scale-api-error, nodes-not-ready, replicas-changed, rollout)"
                        ),
                    ));
                }
            };
            let from_ms = ms(&format!("{field}.from"), &x.from)?;
            let to_ms = ms(&format!("{field}.to"), &x.to)?;
            if to_ms <= from_ms {
                return Err(invalid(format!("{field}.to"), "must be after from"));
            }
            faults.push(Fault {
                group: x.group.clone(),
                from_ms,
                to_ms,
                kind,
            });
        }
        let actuation = run.controller.actuation_options();
        let mut s = Scenario {
            name: f.name,
            description: f.description,
            duration,
            seed: f.seed,
            scan_interval,
            sample_interval,
            default_delay,
            machine_set_sync_ms: match &f.machine_set_sync {
                Some(t) => ms("machine_set_sync", t)?,
                None => 0,
            },
            machine_deletion_ms: match &f.machine_deletion {
                Some(t) => ms("machine_deletion", t)?,
                None => 0,
            },
            device_plugin_delay_ms: match &f.device_plugin_delay {
                Some(t) => ms("device_plugin_delay", t)?,
                None => 0,
            },
            watch_lag_ms: match &f.watch_lag {
                // Every change waits in memory until it is due: an hour bounds that.
                Some(t) => match ms("watch_lag", t)? {
                    lag if lag > 3_600_000 => {
                        return Err(invalid("watch_lag", "must be at most 1h"));
                    }
                    lag => lag,
                },
                None => 0,
            },
            scoring: f.scheduler.scoring,
            options: run.controller.autoscaler,
            groups,
            objects: f.objects,
            faults,
            replica_sets: Vec::new(),
            jobs: Vec::new(),
            requests: Vec::new(),
            daemon_sets: Vec::new(),
            traces: Vec::new(),
            stateful_sets: Vec::new(),
            restart_at: restarts(&f.options)?,
            actuation,
        };
        for (i, w) in f.workloads.iter().enumerate() {
            s.add_workload(&format!("workloads[{i}]"), w, base)?;
        }
        dra::check_references(&f.workloads, &s.objects)?;
        super::cost::check(&s, "duration")?;
        super::cost::check_starts(&s, &f.workloads)?;
        Ok(s)
    }

    fn add_workload(
        &mut self,
        field: &str,
        w: &WorkloadFile,
        base: &Path,
    ) -> Result<(), ScenarioError> {
        let (name, namespace) = match w {
            WorkloadFile::Deployment(d) => (Some(&d.name), &d.namespace),
            WorkloadFile::Job(j) => (Some(&j.name), &j.namespace),
            WorkloadFile::DaemonSet(d) => (Some(&d.name), &d.namespace),
            WorkloadFile::StatefulSet(s) => (Some(&s.name), &s.namespace),
            WorkloadFile::Trace(t) => (t.name.as_ref(), &t.namespace),
            WorkloadFile::ProvisioningRequest(r) => (Some(&r.name), &r.namespace),
        };
        if let Some(name) = name {
            check_name(&format!("{field}.name"), name, NameRule::Subdomain)?;
        }
        check_name(&format!("{field}.namespace"), namespace, NameRule::Label)?;
        match w {
            WorkloadFile::Deployment(DeploymentFile {
                name,
                namespace,
                replicas,
                schedule,
                pod_lifetime,
                pod,
            }) => {
                pod_count(&format!("{field}.replicas"), *replicas)?;
                let mut sched = Vec::new();
                for (j, r) in schedule.iter().enumerate() {
                    pod_count(&format!("{field}.schedule[{j}].replicas"), r.replicas)?;
                    sched.push((ms(&format!("{field}.schedule[{j}].at"), &r.at)?, r.replicas));
                }
                let lifetime = pod_lifetime
                    .as_deref()
                    .map(|t| ms(&format!("{field}.pod_lifetime"), t))
                    .transpose()?;
                self.replica_sets.push(ReplicaSetSpec {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    template: template(&format!("{field}.pod"), name, pod)?,
                    replicas: *replicas,
                    schedule: sched,
                    pod_lifetime_ms: lifetime,
                    deployment: true,
                });
            }
            WorkloadFile::Job(JobFile {
                name,
                namespace,
                at,
                completions,
                parallelism,
                duration,
                pod,
            }) => {
                pod_count(&format!("{field}.completions"), *completions)?;
                let at = at
                    .as_deref()
                    .map(|t| ms(&format!("{field}.at"), t))
                    .transpose()?
                    .unwrap_or(0);
                self.jobs.push((
                    at,
                    JobSpec {
                        namespace: namespace.clone(),
                        name: name.clone(),
                        template: template(&format!("{field}.pod"), name, pod)?,
                        completions: *completions,
                        parallelism: parallelism.unwrap_or(*completions).max(1),
                        duration_ms: ms(&format!("{field}.duration"), duration)?,
                    },
                ));
            }
            WorkloadFile::ProvisioningRequest(r) => {
                pod_count(&format!("{field}.count"), r.count)?;
                let at =
                    r.at.as_deref()
                        .map(|t| ms(&format!("{field}.at"), t))
                        .transpose()?
                        .unwrap_or(0);
                let duration_ms = ms(&format!("{field}.duration"), &r.duration)?;
                let template = template(&format!("{field}.pod"), &r.name, &r.pod)?;
                let arrival = super::arrival::RequestArrival::read(r, at, duration_ms, template)
                    .map_err(|e| invalid(format!("{field}.count"), e))?;
                // Kept in arrival order (stable for equal times: the file's order).
                let i = self.requests.partition_point(|a| a.at <= at);
                self.requests.insert(i, arrival);
            }
            WorkloadFile::DaemonSet(DaemonSetFile {
                name,
                namespace,
                pod,
            }) => self.daemon_sets.push(DaemonSetSpec {
                namespace: namespace.clone(),
                name: name.clone(),
                template: template(&format!("{field}.pod"), name, pod)?,
            }),
            WorkloadFile::StatefulSet(f) => {
                let spec = stateful_set(field, f)?;
                self.stateful_sets.push(spec);
            }
            WorkloadFile::Trace(TraceFile {
                file,
                namespace,
                time_scale,
                sample,
                start,
                limit,
                gpu_resource,
                gpu_model_label,
                tolerations,
                name,
                owner,
                safe_to_evict,
            }) => {
                let scale = time_scale.unwrap_or(1.0);
                if !(scale.is_finite() && scale > 0.0) {
                    return Err(invalid(format!("{field}.time_scale"), "must be positive"));
                }
                let sample = sample.unwrap_or(1);
                if sample == 0 {
                    return Err(invalid(format!("{field}.sample"), "must be at least 1"));
                }
                let start_ms = start
                    .as_deref()
                    .map(|t| ms(&format!("{field}.start"), t))
                    .transpose()?
                    .unwrap_or(0);
                let path = base.join(file);
                let options = super::trace::ReplayOptions {
                    namespace: namespace.clone(),
                    time_scale: scale,
                    sample,
                    start_ms,
                    limit: limit.unwrap_or(usize::MAX),
                    horizon_ms: self.duration,
                    gpu_resource: gpu_resource.clone().unwrap_or_else(default_gpu_resource),
                    gpu_model_label: gpu_model_label.clone(),
                    tolerations: tolerations.clone(),
                    owner: trace_owner(*owner, name.as_deref().unwrap_or("trace")),
                    safe_to_evict: *safe_to_evict,
                };
                // Only the header is read now; rows are read as the run reaches them.
                super::trace::check(&path, &options).map_err(|message| ScenarioError::Trace {
                    path: path.clone(),
                    message,
                })?;
                if let Some(c) = trace_controller(&options.owner, namespace, options.limit)
                    && !self.objects.contains(&c)
                {
                    self.objects.push(c);
                }
                self.traces
                    .push(super::trace::TraceSource { path, options });
            }
        }
        Ok(())
    }
}

fn trace_owner(kind: TraceOwnerFile, name: &str) -> super::trace::TraceOwner {
    use super::trace::TraceOwner;
    match kind {
        TraceOwnerFile::Job => TraceOwner::Job(name.to_string()),
        TraceOwnerFile::ReplicaSet => TraceOwner::ReplicaSet(name.to_string()),
        TraceOwnerFile::None => TraceOwner::None,
    }
}

/// The Job or ReplicaSet a trace's pods name as their controller, so the drain rules find it
/// (the world does not run it: see `World::add_replayed_pod`).
/// Rows are read during the run, so the pod count is not known here: the counts are the trace's
/// `limit` (capped to what the API's int32 holds) and only `--min-replica-count` reads them.
fn trace_controller(
    owner: &super::trace::TraceOwner,
    namespace: &str,
    limit: usize,
) -> Option<Value> {
    let pods = i32::try_from(limit).unwrap_or(i32::MAX);
    use super::trace::TraceOwner;
    let template = json!({"metadata": {"labels": {"trace": "replay"}},
        "spec": {"containers": [{"name": "app", "image": "sim/trace"}]}});
    match owner {
        TraceOwner::None => None,
        TraceOwner::Job(name) => Some(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"completions": pods, "parallelism": pods, "template": template},
        })),
        TraceOwner::ReplicaSet(name) => Some(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": pods, "selector": {"matchLabels": {"trace": "replay"}},
                "template": template},
        })),
    }
}

/// A validated StatefulSet.
fn stateful_set(field: &str, f: &StatefulSetFile) -> Result<StatefulSetSpec, ScenarioError> {
    pod_count(&format!("{field}.replicas"), f.replicas)?;
    let mut schedule = Vec::new();
    for (j, r) in f.schedule.iter().enumerate() {
        pod_count(&format!("{field}.schedule[{j}].replicas"), r.replicas)?;
        schedule.push((ms(&format!("{field}.schedule[{j}].at"), &r.at)?, r.replicas));
    }
    let parallel = match f.pod_management_policy.as_deref() {
        None | Some("OrderedReady") => false,
        Some("Parallel") => true,
        Some(other) => {
            return Err(invalid(
                format!("{field}.pod_management_policy"),
                format!("{other:?} is not OrderedReady or Parallel"),
            ));
        }
    };
    let mut claims = Vec::new();
    for (j, c) in f.volume_claims.iter().enumerate() {
        let at = format!("{field}.volume_claims[{j}]");
        autoscaler_model::check_qualified_name(&c.name)
            .map_err(|e| invalid(format!("{at}.name"), e))?;
        if f.volume_claims[..j].iter().any(|o| o.name == c.name) {
            return Err(invalid(
                format!("{at}.name"),
                format!("{} is given twice", c.name),
            ));
        }
        let size = c.size.clone().unwrap_or_else(|| "1Gi".into());
        let q = autoscaler_model::parse_quantity(&size)
            .map_err(|e| invalid(format!("{at}.size"), e.to_string()))?;
        if q.as_nanos() < 0 {
            return Err(invalid(
                format!("{at}.size"),
                format!("{size:?} is negative"),
            ));
        }
        const MODES: [&str; 4] = [
            "ReadWriteOnce",
            "ReadOnlyMany",
            "ReadWriteMany",
            "ReadWriteOncePod",
        ];
        if let Some(m) = c.access_modes.iter().find(|m| !MODES.contains(&m.as_str())) {
            return Err(invalid(
                format!("{at}.access_modes"),
                format!("{m:?} is not one of {}", MODES.join(", ")),
            ));
        }
        claims.push(ClaimTemplate {
            name: c.name.clone(),
            storage_class: c.storage_class.clone(),
            size,
            access_modes: if c.access_modes.is_empty() {
                vec!["ReadWriteOnce".into()]
            } else {
                c.access_modes.clone()
            },
        });
    }
    Ok(StatefulSetSpec {
        namespace: f.namespace.clone(),
        name: f.name.clone(),
        template: template(&format!("{field}.pod"), &f.name, &f.pod)?,
        replicas: f.replicas,
        schedule,
        claims,
        parallel,
    })
}

/// A workload's pod count: at most [`MAX_WORKLOAD_PODS`].
fn pod_count(field: &str, n: u32) -> Result<(), ScenarioError> {
    if n > MAX_WORKLOAD_PODS {
        return Err(invalid(
            field,
            format!("{n} is more than the {MAX_WORKLOAD_PODS} pods a workload may have"),
        ));
    }
    Ok(())
}

/// A CPU and memory amount the model can hold (millicores and bytes in 64 bits), not negative.
fn cpu_memory(field: &str, cpu: &str, memory: &str) -> Result<(), ScenarioError> {
    let bad = |name: &str, e: String| invalid(format!("{field}.{name}"), e);
    let milli = autoscaler_model::parse_quantity(cpu)
        .and_then(|q| q.to_milli_ceil())
        .map_err(|e| bad("cpu", e.to_string()))?;
    let bytes = autoscaler_model::parse_quantity(memory)
        .and_then(|q| q.to_units_ceil())
        .map_err(|e| bad("memory", e.to_string()))?;
    if milli < 0 {
        return Err(bad("cpu", format!("{cpu:?} is negative")));
    }
    if bytes < 0 {
        return Err(bad("memory", format!("{memory:?} is negative")));
    }
    Ok(())
}

/// Which Kubernetes name rule an object's name follows.
#[derive(Clone, Copy)]
enum NameRule {
    /// A DNS-1123 subdomain, at most 253 characters (most objects' names).
    Subdomain,
    /// A DNS-1123 label, at most 63 characters (namespaces).
    Label,
    /// A DNS-1123 subdomain of at most 63 characters (CSI driver names).
    ShortSubdomain,
}

/// A name as an error shows it: a long one cut, with its length.
fn shown(name: &str) -> String {
    match name.char_indices().nth(40) {
        Some((cut, _)) => format!("{:?}... ({} bytes)", &name[..cut], name.len()),
        None => format!("{name:?}"),
    }
}

/// Checks an object name by its kind's rule, as the API server would; the error names the
/// field.
fn check_name(field: &str, name: &str, rule: NameRule) -> Result<(), ScenarioError> {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let (ok, what) = match rule {
        NameRule::Label => (
            name.len() <= 63 && label_ok(name),
            "a DNS-1123 label (at most 63 lowercase letters, digits and '-', starting and \
             ending with a letter or digit)",
        ),
        NameRule::Subdomain | NameRule::ShortSubdomain => {
            let most = if matches!(rule, NameRule::Subdomain) {
                253
            } else {
                63
            };
            (
                name.len() <= most && name.split('.').all(label_ok),
                if most == 253 {
                    "a DNS-1123 subdomain (at most 253 lowercase letters, digits, '-' and '.', \
                     each part starting and ending with a letter or digit)"
                } else {
                    "a DNS-1123 subdomain of at most 63 characters (lowercase letters, digits, \
                     '-' and '.', each part starting and ending with a letter or digit)"
                },
            )
        }
    };
    if ok {
        Ok(())
    } else {
        Err(invalid(field, format!("{} is not {what}", shown(name))))
    }
}

/// Reads `value` as the Kubernetes type `T`, naming the field at fault under `field`.
fn typed<T: serde::de::DeserializeOwned>(field: &str, value: &Value) -> Result<T, ScenarioError> {
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let at = e.path().to_string();
        let at = if at == "." {
            String::new()
        } else {
            format!(".{at}")
        };
        invalid(format!("{field}{at}"), e.into_inner().to_string())
    })
}

/// Checks an object of `objects:` as the API server would before storing it: `apiVersion` and
/// `kind` given, its name and namespace valid names, the kinds the world runs read as their
/// Kubernetes types, and a PodDisruptionBudget's counts not negative nor past 100%.
fn check_object(field: &str, o: &Value) -> Result<(), ScenarioError> {
    use k8s_openapi::api::{apps, batch, core::v1 as core, policy, scheduling, storage};
    let text = |path: &str| o.pointer(path).and_then(Value::as_str);
    let (Some(api), Some(kind)) = (text("/apiVersion"), text("/kind")) else {
        return Err(invalid(field, "apiVersion and kind must be strings"));
    };
    let Some(name) = text("/metadata/name") else {
        return Err(invalid(
            format!("{field}.metadata.name"),
            "must be a string",
        ));
    };
    let rule = if kind == "Namespace" {
        NameRule::Label
    } else {
        NameRule::Subdomain
    };
    check_name(&format!("{field}.metadata.name"), name, rule)?;
    if let Some(ns) = o.pointer("/metadata/namespace") {
        let ns = ns.as_str().unwrap_or("");
        check_name(&format!("{field}.metadata.namespace"), ns, NameRule::Label)?;
    }
    match (api, kind) {
        ("v1", "Namespace") => typed::<core::Namespace>(field, o).map(drop),
        ("v1", "Pod") => typed::<core::Pod>(field, o).map(drop),
        ("v1", "Node") => typed::<core::Node>(field, o).map(drop),
        ("v1", "ConfigMap") => typed::<core::ConfigMap>(field, o).map(drop),
        ("v1", "PersistentVolumeClaim") => typed::<core::PersistentVolumeClaim>(field, o).map(drop),
        ("v1", "PersistentVolume") => typed::<core::PersistentVolume>(field, o).map(drop),
        ("apps/v1", "ReplicaSet") => typed::<apps::v1::ReplicaSet>(field, o).map(drop),
        ("apps/v1", "StatefulSet") => typed::<apps::v1::StatefulSet>(field, o).map(drop),
        ("apps/v1", "DaemonSet") => typed::<apps::v1::DaemonSet>(field, o).map(drop),
        ("batch/v1", "Job") => typed::<batch::v1::Job>(field, o).map(drop),
        ("storage.k8s.io/v1", "StorageClass") => {
            typed::<storage::v1::StorageClass>(field, o).map(drop)
        }
        ("scheduling.k8s.io/v1", "PriorityClass") => {
            typed::<scheduling::v1::PriorityClass>(field, o).map(drop)
        }
        ("resource.k8s.io/v1", _) => dra::check_object(field, kind, o),
        ("policy/v1", "PodDisruptionBudget") => {
            let pdb = typed::<policy::v1::PodDisruptionBudget>(field, o)?;
            let spec = pdb.spec.unwrap_or_default();
            for (key, v) in [
                ("minAvailable", spec.min_available),
                ("maxUnavailable", spec.max_unavailable),
            ] {
                check_count_or_percent(&format!("{field}.spec.{key}"), v.as_ref())?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A PodDisruptionBudget's `minAvailable` or `maxUnavailable`: a count of at least 0, or a
/// percentage from 0% to 100%.
fn check_count_or_percent(
    field: &str,
    v: Option<&k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>,
) -> Result<(), ScenarioError> {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    match v {
        None => Ok(()),
        Some(IntOrString::Int(n)) if *n < 0 => Err(invalid(field, format!("{n} is negative"))),
        Some(IntOrString::Int(_)) => Ok(()),
        Some(IntOrString::String(s)) => match s.strip_suffix('%').map(str::parse::<u32>) {
            Some(Ok(p)) if p <= 100 => Ok(()),
            _ => Err(invalid(
                field,
                format!("{s:?} is not a percentage from 0% to 100%"),
            )),
        },
    }
}

/// Checks labels (keys qualified names, values label values); `field` names the map.
fn check_labels(field: &str, labels: &BTreeMap<String, String>) -> Result<(), ScenarioError> {
    for (k, v) in labels {
        autoscaler_model::check_qualified_name(k)
            .map_err(|e| invalid(format!("{field}.{k}"), e))?;
        check_label_value(&format!("{field}.{k}"), v)?;
    }
    Ok(())
}

/// A label value: at most 63 alphanumerics, '-', '_' and '.', alphanumeric at both ends, or
/// empty.
fn check_label_value(field: &str, v: &str) -> Result<(), ScenarioError> {
    let inner = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let ok = v.is_empty()
        || (v.len() <= 63
            && v.chars().all(inner)
            && v.starts_with(|c: char| c.is_ascii_alphanumeric())
            && v.ends_with(|c: char| c.is_ascii_alphanumeric()));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            field,
            format!(
                "{} is not a label value (at most 63 letters, digits, '-', '_' and '.', \
                 starting and ending with a letter or digit)",
                shown(v)
            ),
        ))
    }
}

fn group(field: &str, g: &GroupFile) -> Result<Group, ScenarioError> {
    check_name(&format!("{field}.name"), &g.name, NameRule::Subdomain)?;
    check_name(&format!("{field}.namespace"), &g.namespace, NameRule::Label)?;
    check_labels(&format!("{field}.labels"), &g.labels)?;
    for k in g.annotations.keys() {
        autoscaler_model::check_qualified_name(k)
            .map_err(|e| invalid(format!("{field}.annotations"), e))?;
    }
    if g.max == 0 || g.min > g.max {
        return Err(invalid(
            format!("{field}.max"),
            format!(
                "bounds min {} max {} (need 0 <= min <= max, max > 0)",
                g.min, g.max
            ),
        ));
    }
    if g.max > i32::MAX as u32 {
        return Err(invalid(
            format!("{field}.max"),
            format!("{} is not a valid int32", g.max),
        ));
    }
    let replicas = g.replicas.unwrap_or(g.min);
    if replicas > g.max {
        return Err(invalid(format!("{field}.replicas"), "is above max"));
    }
    if replicas > MAX_INITIAL_NODES {
        return Err(invalid(
            format!("{field}.replicas"),
            format!("{replicas} is more than the {MAX_INITIAL_NODES} nodes a group may start with"),
        ));
    }
    cpu_memory(field, &g.cpu, &g.memory)?;
    if let Some(gpu) = &g.gpu {
        autoscaler_model::check_gpu_resource(&gpu.resource)
            .map_err(|e| invalid(format!("{field}.gpu.resource"), e))?;
    }
    let mut taints = Vec::new();
    for (i, t) in g.taints.iter().enumerate() {
        let parsed = t.split_once(':').and_then(|(kv, effect)| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            let ok = matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute");
            let ok = ok && autoscaler_model::check_qualified_name(k).is_ok();
            ok.then(|| (k.to_string(), v.to_string(), effect.to_string()))
        });
        match parsed {
            Some(x) => taints.push(x),
            None => {
                return Err(invalid(
                    format!("{field}.taints[{i}]"),
                    format!("{t:?} is not key=value:NoSchedule|PreferNoSchedule|NoExecute"),
                ));
            }
        }
    }
    if !(g.price_per_hour.is_finite() && g.price_per_hour >= 0.0) {
        return Err(invalid(format!("{field}.price_per_hour"), "must be >= 0"));
    }
    Ok(Group {
        spec: NodeGroupSpec {
            namespace: g.namespace.clone(),
            name: g.name.clone(),
            replicas,
            min_size: g.min,
            max_size: g.max,
            cpu: g.cpu.clone(),
            memory: g.memory.clone(),
            max_pods: g.max_pods,
            gpu: g.gpu.as_ref().map(|x| (x.resource.clone(), x.count)),
            labels: g.labels.clone(),
            taints,
            delete_policy: match &g.delete_policy {
                None => DeletePolicy::default(),
                Some(p) => DeletePolicy::parse(p).ok_or_else(|| {
                    invalid(
                        format!("{field}.delete_policy"),
                        format!("{p:?} is not Random, Newest or Oldest"),
                    )
                })?,
            },
        },
        annotations: g.annotations.clone(),
        price_per_hour: g.price_per_hour,
        delay: g
            .provisioning_delay
            .as_ref()
            .map(|d| delay(&format!("{field}.provisioning_delay"), d))
            .transpose()?,
        csi: match &g.csi {
            None => None,
            Some(c) if check_name("", &c.driver, NameRule::ShortSubdomain).is_err() => {
                return Err(check_name(
                    &format!("{field}.csi.driver"),
                    &c.driver,
                    NameRule::ShortSubdomain,
                )
                .unwrap_err());
            }
            Some(c) => Some(CsiSpec {
                driver: c.driver.clone(),
                max_volumes: c.max_volumes,
            }),
        },
        dra: g
            .dra
            .as_ref()
            .map(|d| dra::driver(&format!("{field}.dra"), d))
            .transpose()?,
    })
}

fn template(field: &str, name: &str, p: &PodFile) -> Result<PodTemplate, ScenarioError> {
    let cpu = p.cpu.clone().unwrap_or_else(|| "100m".into());
    let memory = p.memory.clone().unwrap_or_else(|| "128Mi".into());
    cpu_memory(field, &cpu, &memory)?;
    let mut t = PodTemplate::new().requests(&cpu, &memory);
    if p.gpu > 0 {
        let res = p.gpu_resource.clone().unwrap_or_else(default_gpu_resource);
        autoscaler_model::check_gpu_resource(&res)
            .map_err(|e| invalid(format!("{field}.gpu_resource"), e))?;
        t = t.request(&res, &p.gpu.to_string());
    }
    check_labels(&format!("{field}.labels"), &p.labels)?;
    check_labels(&format!("{field}.node_selector"), &p.node_selector)?;
    if p.labels.is_empty() {
        check_label_value(&format!("{field}.labels (default app: <name>)"), name)?;
        t = t.label("app", name);
    }
    for (k, v) in &p.labels {
        t = t.label(k, v);
    }
    if let Some(pr) = p.priority {
        t = t.priority(pr);
    }
    for (k, v) in &p.node_selector {
        t = t.node_selector(k, v);
    }
    if !p.tolerations.is_empty() {
        t.spec["tolerations"] = Value::Array(p.tolerations.clone());
    }
    dra::pod_claims(&format!("{field}.claims"), &p.claims, &mut t.spec)?;
    if let Some(extra) = &p.spec {
        let Some(obj) = extra.as_object() else {
            return Err(invalid(format!("{field}.spec"), "must be a mapping"));
        };
        for (k, v) in obj {
            t.spec[k] = v.clone();
        }
    }
    // The spec must be a pod spec (`containers: "x"` is not): checked as the API server would
    // read it, naming the field.
    serde_path_to_error::deserialize::<_, k8s_openapi::api::core::v1::PodSpec>(&t.spec).map_err(
        |e| {
            let at = e.path().to_string();
            let at = if at == "." {
                String::new()
            } else {
                format!(".{at}")
            };
            // Where the user wrote it: under `spec`, or `tolerations`.
            let written = p.spec.as_ref().and_then(Value::as_object).is_some_and(|o| {
                o.keys().any(|k| {
                    at.strip_prefix('.')
                        .is_some_and(|a| a.split(['.', '[']).next() == Some(k.as_str()))
                })
            });
            let path = if written || at.is_empty() {
                format!("{field}.spec{at}")
            } else {
                format!("{field}{at}")
            };
            invalid(path, e.into_inner().to_string())
        },
    )?;
    Ok(t)
}

/// The environment a simulation sees: the default Cluster API group and architecture, and a
/// fixed identity (so that reading a scenario reads nothing of the machine it runs on).
fn no_env(name: &str) -> Option<String> {
    (name == "POD_NAME").then(|| "simulate".to_string())
}

/// The options of a run: the scenario's `options:` validated on their own (errors name
/// `options.<flag>`), then with the command line's `--config` and flags (defaults < config
/// file < scenario < flags; errors name the flag or the file's field).
fn options(
    o: &OptionsFile,
    seed: u64,
    cli: Option<&CommandLine>,
) -> Result<RunOptions, ScenarioError> {
    let texts = option_texts(o)?;
    let layer = AutoscalingArgs::from_settings(
        texts
            .iter()
            .filter(|(name, _)| name != RESTART_AT)
            .map(|(name, values)| (name.as_str(), values.as_slice())),
    )
    .map_err(|e| invalid(format!("options.{}", e.name), e.why))?;
    let alone = RunOptions::build_for_scenario(&RunArgs::default(), &layer, None, &no_env)
        .map_err(|e| match e {
            OptionsError::Flag { flag, value, why } => {
                invalid(format!("options.{flag}"), format!("{value}: {why}"))
            }
            other => invalid("options", other.to_string()),
        })?;
    let mut whole = match cli {
        None => alone,
        Some(cli) => RunOptions::build_for_scenario(cli.args, &layer, cli.file, &no_env)?,
    };
    whole.controller.autoscaler.seed = seed;
    Ok(whole)
}

/// Where the scan interval was given: `--scan-interval` when on the command line, else the
/// scenario's option.
fn scan_interval_error(cli: Option<&CommandLine>, value: String, why: String) -> ScenarioError {
    if cli.is_some_and(|c| c.args.is_given("scan-interval")) {
        ScenarioError::Options(OptionsError::Flag {
            flag: "scan-interval",
            value,
            why,
        })
    } else {
        invalid("options.scan-interval", format!("{value}: {why}"))
    }
}

/// The loop interval in virtual milliseconds (at least one, or virtual time would not pass).
fn scan_ms(o: &RunOptions, cli: Option<&CommandLine>) -> Result<SimTime, ScenarioError> {
    let d = o.controller.scan_interval;
    match u64::try_from(d.as_millis()).unwrap_or(u64::MAX) {
        0 => Err(scan_interval_error(
            cli,
            autoscaler_model::format_duration(d),
            "must be at least 1ms in a simulation (virtual time counts milliseconds)".into(),
        )),
        ms => Ok(ms),
    }
}

/// Each option as its name and its values in text, as a command line would give them: a
/// string, number or boolean, or a list of them for a repeatable flag.
fn option_texts(o: &OptionsFile) -> Result<Vec<(String, Vec<String>)>, ScenarioError> {
    use serde_yaml_ng::Value as Yaml;
    fn scalar(v: &Yaml) -> Option<String> {
        match v {
            Yaml::Bool(b) => Some(b.to_string()),
            Yaml::Number(n) => Some(n.to_string()),
            Yaml::String(s) => Some(s.clone()),
            _ => None,
        }
    }
    let mut out = Vec::with_capacity(o.0.len());
    for (key, value) in &o.0 {
        let Some(name) = key.as_str() else {
            return Err(invalid(
                "options",
                format!("key {key:?} is not a flag name"),
            ));
        };
        let field = format!("options.{name}");
        let values = match value {
            Yaml::Sequence(items) => items
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    scalar(x).ok_or_else(|| {
                        invalid(
                            format!("{field}[{i}]"),
                            "must be a string, number or boolean",
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
            other => vec![scalar(other).ok_or_else(|| {
                invalid(
                    &field,
                    "must be a string, number or boolean, or a list of them",
                )
            })?],
        };
        out.push((name.to_string(), values));
    }
    Ok(out)
}

/// The restart times of option `restart-at`, sorted.
fn restarts(o: &OptionsFile) -> Result<Vec<SimTime>, ScenarioError> {
    let texts = option_texts(o)?;
    let mut v = Vec::new();
    for (_, values) in texts.iter().filter(|(name, _)| name == RESTART_AT) {
        for (i, t) in values.iter().enumerate() {
            v.push(ms(&format!("options.{RESTART_AT}[{i}]"), t)?);
        }
    }
    v.sort_unstable();
    Ok(v)
}

/// The MachineDeployment object of a group, with its price annotation (when `price_per_hour` is
/// above 0, the default meaning "no price") and its extra annotations (which may override it).
pub fn group_object(g: &Group, cluster: &str) -> Value {
    let mut obj = g.spec.to_object(cluster);
    if g.price_per_hour > 0.0 {
        let key = autoscaler_clusterapi::ClusterApiConfig::default().price_key();
        obj["metadata"]["annotations"][key] = json!(g.price_per_hour.to_string());
    }
    for (k, v) in &g.annotations {
        obj["metadata"]["annotations"][k] = json!(v);
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_default_scenario_parses() {
        let s = Scenario::parse(DEFAULT_SCENARIO, Path::new(".")).expect("default parses");
        assert!(s.duration >= 3_600_000);
        assert_eq!(s.groups.len(), 3);
        assert!(s.groups.iter().any(|g| g.spec.gpu.is_some()));
    }

    #[test]
    fn unknown_fields_are_named() {
        let text = DEFAULT_SCENARIO.replacen("seed:", "sede: 1\nseed:", 1);
        let e = Scenario::parse(&text, Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `sede`"), "{e}");
        let text = DEFAULT_SCENARIO.replacen("options:", "options:\n  scan-intervall: 5s", 1);
        let e = Scenario::parse(&text, Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(e.contains("scan-intervall"), "{e}");
    }

    #[test]
    fn bad_values_name_the_field() {
        let text = "name: x\nduration: 1h\nnode_groups:\n- {name: a, min: 3, max: 2, cpu: '4', memory: 16Gi}\n";
        let e = Scenario::parse(text, Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("field `node_groups[0].max`"), "{e}");
        let text = "name: x\nduration: soon\nnode_groups: []\n";
        let e = Scenario::parse(text, Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("field `duration`"), "{e}");
        let text = "name: x\nduration: 1h\noptions: {expander: cheapest}\nnode_groups:\n- {name: a, min: 0, max: 2, cpu: '4', memory: 16Gi}\n";
        let e = Scenario::parse(text, Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("field `options.expander`"), "{e}");
    }

    #[test]
    fn the_scheduler_scoring_and_a_traces_owner_are_read_and_checked() {
        let groups = "node_groups:\n- {name: a, min: 0, max: 2, cpu: '4', memory: 16Gi}\n";
        let s =
            Scenario::parse(&format!("name: x\nduration: 1h\n{groups}"), Path::new(".")).unwrap();
        assert_eq!(s.scoring, Scoring::LeastAllocated);
        let text =
            format!("name: x\nduration: 1h\nscheduler: {{scoring: MostAllocated}}\n{groups}");
        let s = Scenario::parse(&text, Path::new(".")).unwrap();
        assert_eq!(s.scoring, Scoring::MostAllocated);
        let text = format!("name: x\nduration: 1h\nscheduler: {{scoring: Packed}}\n{groups}");
        let e = Scenario::parse(&text, Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("scheduler.scoring") && e.contains("Packed"),
            "{e}"
        );

        let dir = std::env::temp_dir().join(format!("ca-trace-owner-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("t.csv"),
            "name,arrival_s,duration_s,cpu_milli,memory_mib,gpu,gpu_model,priority\nvm,0,60,100,64,0,,0\n",
        )
        .unwrap();
        let trace = |extra: &str| {
            let text = format!(
                "name: x\nduration: 1h\n{groups}workloads:\n- {{kind: trace, file: t.csv{extra}}}\n"
            );
            Scenario::parse(&text, &dir)
        };
        let first_pod = |s: &Scenario| {
            let mut reader = s.traces[0].open().unwrap();
            reader.next_pod().unwrap().unwrap().object
        };
        let s = trace("").unwrap();
        assert_eq!(
            first_pod(&s)["metadata"]["ownerReferences"][0]["kind"],
            "Job"
        );
        assert_eq!(
            s.objects[0]["kind"], "Job",
            "the Job is created for the autoscaler to find"
        );
        assert_eq!(s.objects[0]["metadata"]["name"], "trace");
        let s = trace(", owner: replicaset, name: vms, safe_to_evict: true").unwrap();
        assert_eq!(s.objects[0]["kind"], "ReplicaSet");
        assert_eq!(
            s.objects[0]["spec"]["replicas"],
            i32::MAX,
            "no limit: rows are counted during the run"
        );
        assert_eq!(
            first_pod(&s)["metadata"]["ownerReferences"][0]["name"],
            "vms"
        );
        let s = trace(", owner: none").unwrap();
        assert!(s.objects.is_empty());
        assert!(first_pod(&s)["metadata"].get("ownerReferences").is_none());
        let e = trace(", owner: deployment").unwrap_err().to_string();
        assert!(e.contains("workloads[0].owner"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn options_use_the_flag_names() {
        let text = "name: x\nduration: 1h\noptions:\n  scan-interval: 5s\n  scale-down-unneeded-time: 2m\n  max-nodes-total: 7\n  cores-total: '0:64'\nnode_groups:\n- {name: a, min: 0, max: 2, cpu: '4', memory: 16Gi}\n";
        let s = Scenario::parse(text, Path::new(".")).unwrap();
        assert_eq!(s.scan_interval, 5_000);
        assert_eq!(
            s.options.scale_down.unneeded_time(),
            Duration::from_secs(120)
        );
        assert_eq!(s.options.scale_up.limits.max_nodes_total, 7);
        assert_eq!(s.options.scale_up.limits.cpu.max(), 64_000);
    }

    /// The error of a scenario with one group (`group`: more fields of its flow mapping) and
    /// `extra` top-level text.
    fn refused(group: &str, extra: &str) -> String {
        let mut fields = String::from(if group.contains(" name:") {
            "min: 0"
        } else {
            "name: a, min: 0"
        });
        for (key, default) in [
            ("max:", "max: 2"),
            ("cpu:", "cpu: '4'"),
            ("memory:", "memory: 16Gi"),
        ] {
            if !group.contains(key) {
                fields = format!("{fields}, {default}");
            }
        }
        let text = format!("name: x\nduration: 1h\n{extra}\nnode_groups:\n- {{{fields}{group}}}\n");
        match Scenario::parse(&text, Path::new(".")) {
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => e.to_string(),
        }
    }

    /// A scenario with one group and `options`.
    fn with_options(options: &str) -> String {
        format!(
            "name: x\nduration: 1h\noptions: {options}\nnode_groups:\n- {{name: a, min: 0, max: 2, cpu: '4', memory: 16Gi}}\n"
        )
    }

    #[derive(Debug, clap::Parser)]
    struct TestCli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn flags(args: &[&str]) -> RunArgs {
        use clap::Parser;
        let argv = std::iter::once("ca").chain(args.iter().copied());
        TestCli::try_parse_from(argv).expect("flags parse").run
    }

    /// What a run is configured with: the decision's options, the loop interval in virtual
    /// milliseconds and the drain deadline (Debug: the options have no equality).
    fn configured(o: &AutoscalerOptions, scan_ms: SimTime, actuation: &ActuationOptions) -> String {
        format!("{o:?} scan {scan_ms}ms actuation {actuation:?}")
    }

    fn of_scenario(s: &Scenario) -> String {
        configured(&s.options, s.scan_interval, &s.actuation)
    }

    fn of_run(o: &RunOptions) -> String {
        let c = &o.controller;
        let scan = u64::try_from(c.scan_interval.as_millis()).unwrap();
        configured(&c.autoscaler, scan, &c.actuation_options())
    }

    /// Every setting a scenario accepts, with a value other than the default: as a scenario
    /// writes it (YAML), as flags, and as the `ClusterAutoscaler` resource's spec where it has
    /// the setting.
    const SETTINGS: &[(&str, &str, &[&str], Option<&str>)] = &[
        ("scan-interval", "5s", &["--scan-interval=5s"], None),
        (
            "max-pod-eviction-time",
            "5m",
            &["--max-pod-eviction-time=5m"],
            None,
        ),
        (
            "expander",
            "'priority,least-waste'",
            &["--expander=priority,least-waste"],
            Some("expanders: [Priority, LeastWaste]"),
        ),
        (
            "expendable-pods-priority-cutoff",
            "-5",
            &["--expendable-pods-priority-cutoff=-5"],
            Some("podPriorityThreshold: -5"),
        ),
        (
            "new-pod-scale-up-delay",
            "30s",
            &["--new-pod-scale-up-delay=30s"],
            None,
        ),
        (
            "max-nodes-per-scaleup",
            "50",
            &["--max-nodes-per-scaleup=50"],
            None,
        ),
        (
            "enforce-node-group-min-size",
            "true",
            &["--enforce-node-group-min-size"],
            None,
        ),
        (
            "balance-similar-node-groups",
            "true",
            &["--balance-similar-node-groups=true"],
            Some("balanceSimilarNodeGroups: true"),
        ),
        (
            "balancing-ignore-label",
            "[zone, rack]",
            &[
                "--balancing-ignore-label=zone",
                "--balancing-ignore-label=rack",
            ],
            Some("balancingIgnoredLabels: [zone, rack]"),
        ),
        (
            "balancing-label",
            "[pool]",
            &["--balancing-label=pool"],
            None,
        ),
        (
            "max-allocatable-difference-ratio",
            "0.1",
            &["--max-allocatable-difference-ratio=0.1"],
            None,
        ),
        (
            "max-free-difference-ratio",
            "0.2",
            &["--max-free-difference-ratio=0.2"],
            None,
        ),
        (
            "memory-difference-ratio",
            "0.03",
            &["--memory-difference-ratio=0.03"],
            None,
        ),
        (
            "startup-taint",
            "[a, b]",
            &["--startup-taint=a", "--startup-taint=b"],
            None,
        ),
        ("ignore-taint", "[c]", &["--ignore-taint=c"], None),
        (
            "max-nodes-total",
            "24",
            &["--max-nodes-total=24"],
            Some("resourceLimits: {maxNodesTotal: 24}"),
        ),
        (
            "cores-total",
            "'8:128'",
            &["--cores-total=8:128"],
            Some("resourceLimits: {cores: {min: 8, max: 128}}"),
        ),
        (
            "memory-total",
            "'4:256'",
            &["--memory-total=4:256"],
            Some("resourceLimits: {memory: {min: 4, max: 256}}"),
        ),
        (
            "gpu-total",
            "['nvidia.com/gpu:0:16', 'amd.com/gpu:1:4']",
            &[
                "--gpu-total=nvidia.com/gpu:0:16",
                "--gpu-total=amd.com/gpu:1:4",
            ],
            Some(
                "resourceLimits: {gpus: [{type: nvidia.com/gpu, min: 0, max: 16}, {type: amd.com/gpu, min: 1, max: 4}]}",
            ),
        ),
        (
            "scale-down-enabled",
            "false",
            &["--scale-down-enabled=false"],
            Some("scaleDown: {enabled: false}"),
        ),
        (
            "scale-down-delay-after-add",
            "1m",
            &["--scale-down-delay-after-add=1m"],
            Some("scaleDown: {enabled: true, delayAfterAdd: 1m}"),
        ),
        (
            "scale-down-delay-after-delete",
            "2m",
            &["--scale-down-delay-after-delete=2m"],
            Some("scaleDown: {enabled: true, delayAfterDelete: 2m}"),
        ),
        (
            "scale-down-delay-after-failure",
            "4m",
            &["--scale-down-delay-after-failure=4m"],
            Some("scaleDown: {enabled: true, delayAfterFailure: 4m}"),
        ),
        (
            "scale-down-unneeded-time",
            "5m",
            &["--scale-down-unneeded-time=5m"],
            Some("scaleDown: {enabled: true, unneededTime: 5m}"),
        ),
        (
            "scale-down-unready-time",
            "6m",
            &["--scale-down-unready-time=6m"],
            None,
        ),
        (
            "scale-down-utilization-threshold",
            "0.4",
            &["--scale-down-utilization-threshold=0.4"],
            Some("scaleDown: {enabled: true, utilizationThreshold: '0.4'}"),
        ),
        (
            "scale-down-gpu-utilization-threshold",
            "0.3",
            &["--scale-down-gpu-utilization-threshold=0.3"],
            None,
        ),
        (
            "scale-down-non-empty-candidates-count",
            "0",
            &["--scale-down-non-empty-candidates-count=0"],
            None,
        ),
        (
            "scale-down-candidates-pool-ratio",
            "1",
            &["--scale-down-candidates-pool-ratio=1"],
            None,
        ),
        (
            "scale-down-candidates-pool-min-count",
            "7",
            &["--scale-down-candidates-pool-min-count=7"],
            None,
        ),
        (
            "max-graceful-termination-sec",
            "60",
            &["--max-graceful-termination-sec=60"],
            Some("maxPodGracePeriod: 60"),
        ),
        (
            "cordon-node-before-terminating",
            "false",
            &["--cordon-node-before-terminating=false"],
            Some("scaleDown: {enabled: true, cordonNodeBeforeTerminating: Disabled}"),
        ),
        (
            "node-deletion-delay-timeout",
            "30s",
            &["--node-deletion-delay-timeout=30s"],
            None,
        ),
        (
            "node-delete-delay-after-taint",
            "1s",
            &["--node-delete-delay-after-taint=1s"],
            None,
        ),
        (
            "max-empty-bulk-delete",
            "4",
            &["--max-empty-bulk-delete=4"],
            None,
        ),
        (
            "scale-down-unready-enabled",
            "false",
            &["--scale-down-unready-enabled=false"],
            None,
        ),
        (
            "scale-down-delay-type-local",
            "true",
            &["--scale-down-delay-type-local"],
            None,
        ),
        (
            "blocking-system-pod-distruption-timeout",
            "10m",
            &["--blocking-system-pod-distruption-timeout=10m"],
            None,
        ),
        (
            "max-bulk-soft-taint-count",
            "0",
            &["--max-bulk-soft-taint-count=0"],
            None,
        ),
        (
            "max-scale-down-parallelism",
            "3",
            &["--max-scale-down-parallelism=3"],
            None,
        ),
        (
            "max-drain-parallelism",
            "2",
            &["--max-drain-parallelism=2"],
            None,
        ),
        (
            "ignore-daemonsets-utilization",
            "true",
            &["--ignore-daemonsets-utilization"],
            Some("ignoreDaemonsetsUtilization: true"),
        ),
        (
            "ignore-mirror-pods-utilization",
            "true",
            &["--ignore-mirror-pods-utilization=true"],
            None,
        ),
        (
            "skip-nodes-with-system-pods",
            "false",
            &["--skip-nodes-with-system-pods=false"],
            None,
        ),
        (
            "skip-nodes-with-local-storage",
            "false",
            &["--skip-nodes-with-local-storage=false"],
            Some("skipNodesWithLocalStorage: false"),
        ),
        (
            "skip-nodes-with-custom-controller-pods",
            "false",
            &["--skip-nodes-with-custom-controller-pods=false"],
            None,
        ),
        ("min-replica-count", "2", &["--min-replica-count=2"], None),
        (
            "daemonset-eviction-for-empty-nodes",
            "true",
            &["--daemonset-eviction-for-empty-nodes"],
            None,
        ),
        (
            "daemonset-eviction-for-occupied-nodes",
            "false",
            &["--daemonset-eviction-for-occupied-nodes=false"],
            None,
        ),
        (
            "max-node-provision-time",
            "20m",
            &["--max-node-provision-time=20m"],
            Some("maxNodeProvisionTime: 20m"),
        ),
        (
            "max-node-startup-time",
            "25m",
            &["--max-node-startup-time=25m"],
            None,
        ),
        (
            "ok-total-unready-count",
            "5",
            &["--ok-total-unready-count=5"],
            None,
        ),
        (
            "max-total-unready-percentage",
            "30",
            &["--max-total-unready-percentage=30"],
            None,
        ),
        (
            "initial-node-group-backoff-duration",
            "1m",
            &["--initial-node-group-backoff-duration=1m"],
            None,
        ),
        (
            "max-node-group-backoff-duration",
            "10m",
            &["--max-node-group-backoff-duration=10m"],
            None,
        ),
        (
            "node-group-backoff-reset-timeout",
            "1h",
            &["--node-group-backoff-reset-timeout=1h"],
            None,
        ),
        ("status-taint", "[d]", &["--status-taint=d"], None),
        (
            "allowed-scheduler-names",
            "[default-scheduler, volcano]",
            &["--allowed-scheduler-names=default-scheduler,volcano"],
            None,
        ),
        (
            "bypassed-scheduler-names",
            "[volcano]",
            &["--bypassed-scheduler-names=volcano"],
            None,
        ),
        (
            "consolidation",
            "replace",
            &["--consolidation=replace"],
            None,
        ),
        ("consolidate-after", "5m", &["--consolidate-after=5m"], None),
        (
            "consolidation-horizon",
            "3m",
            &["--consolidation-horizon=3m"],
            None,
        ),
        (
            "drain-priority-config",
            "\"1000:100,0:60\"",
            &["--drain-priority-config=1000:100,0:60"],
            None,
        ),
        (
            "enable-provisioning-requests",
            "true",
            &["--enable-provisioning-requests=true"],
            None,
        ),
        (
            "provisioning-request-initial-backoff-time",
            "30s",
            &["--provisioning-request-initial-backoff-time=30s"],
            None,
        ),
        (
            "provisioning-request-max-backoff-time",
            "5m",
            &["--provisioning-request-max-backoff-time=5m"],
            None,
        ),
        (
            "provisioning-request-max-backoff-cache-size",
            "50",
            &["--provisioning-request-max-backoff-cache-size=50"],
            None,
        ),
        (
            "check-capacity-processor-instance",
            "east",
            &["--check-capacity-processor-instance=east"],
            None,
        ),
        (
            "capacity-buffer-controller-enabled",
            "true",
            &["--capacity-buffer-controller-enabled=true"],
            None,
        ),
        (
            "capacity-buffer-pod-injection-enabled",
            "true",
            &["--capacity-buffer-pod-injection-enabled=true"],
            None,
        ),
    ];

    /// The three sources give one configuration for one setting: a scenario's `options:`, the
    /// flags and the `ClusterAutoscaler` resource; and the table covers every setting, so a
    /// flag added to the settings without a row here fails.
    #[test]
    fn flags_scenario_options_and_config_file_agree_on_every_setting() {
        let mut names = autoscaler_options::setting_names();
        names.sort();
        let mut rows: Vec<String> = SETTINGS.iter().map(|r| r.0.to_string()).collect();
        rows.sort();
        assert_eq!(
            names, rows,
            "every setting has a row, and every row is a setting"
        );

        let default = of_scenario(&Scenario::parse(&with_options("{}"), Path::new(".")).unwrap());
        for (name, yaml, flag_args, spec) in SETTINGS {
            let scenario = Scenario::parse(
                &with_options(&format!("{{{name}: {yaml}}}")),
                Path::new("."),
            )
            .unwrap_or_else(|e| panic!("{name}: {e}"));
            let from_scenario = of_scenario(&scenario);
            assert_ne!(from_scenario, default, "{name}: {yaml} changes nothing");
            let run = RunOptions::build(&flags(flag_args), None, &no_env)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(from_scenario, of_run(&run), "{name}: scenario vs flags");
            if let Some(spec) = spec {
                let text = format!(
                    "apiVersion: autoscaling.openshift.io/v1\nkind: ClusterAutoscaler\nspec: {{{spec}}}\n"
                );
                let file = autoscaler_options::parse_config(&text)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                let run = RunOptions::build(&RunArgs::default(), Some(&file), &no_env)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(
                    from_scenario,
                    of_run(&run),
                    "{name}: scenario vs config file"
                );
            }
        }
    }

    /// Defaults < `--config` file < the scenario's options < flags, setting by setting (a list
    /// given at a higher level replaces the lower one's).
    #[test]
    fn flags_win_over_the_scenario_which_wins_over_the_config_file() {
        let file = autoscaler_options::parse_config(
            "apiVersion: autoscaling.openshift.io/v1\nkind: ClusterAutoscaler\nspec:\n  scaleDown: {enabled: true, unneededTime: 1m, delayAfterAdd: 7m, utilizationThreshold: '0.4'}\n  resourceLimits: {gpus: [{type: nvidia.com/gpu, min: 0, max: 8}]}\n",
        )
        .unwrap();
        let scenario = with_options(
            "{scale-down-unneeded-time: 2m, scale-down-delay-after-add: 8m, max-nodes-total: 7, gpu-total: ['nvidia.com/gpu:0:4', 'amd.com/gpu:0:2'], scan-interval: 20s}",
        );
        let args = flags(&[
            "--scale-down-unneeded-time=3m",
            "--gpu-total=amd.com/gpu:0:1",
            "--max-pod-eviction-time=30s",
        ]);
        let cli = CommandLine {
            args: &args,
            file: Some(&file),
        };
        let s = Scenario::parse_with(&scenario, Path::new("."), &cli).unwrap();
        let d = &s.options.scale_down;
        assert_eq!(d.unneeded_time(), Duration::from_secs(180), "flag over all");
        assert_eq!(
            d.delay_after_add(),
            Duration::from_secs(480),
            "scenario over file"
        );
        assert_eq!(d.utilization_threshold(), 0.4, "file over defaults");
        assert_eq!(d.unready_time(), Duration::from_secs(1200), "default");
        assert_eq!(s.options.scale_up.limits.max_nodes_total, 7);
        let gpus: Vec<String> = (s.options.scale_up.limits.gpus.iter())
            .map(|(name, r)| format!("{name}:{}:{}", r.min(), r.max()))
            .collect();
        assert_eq!(gpus, ["amd.com/gpu:0:1"], "a list given by a flag replaces");
        assert_eq!(s.scan_interval, 20_000);
        assert_eq!(
            s.actuation,
            ActuationOptions::new(Duration::from_secs(30)).cordon_node_before_terminating(true)
        );

        // Without the flags, the scenario's list replaces the file's.
        let none = RunArgs::default();
        let cli = CommandLine {
            args: &none,
            file: Some(&file),
        };
        let s = Scenario::parse_with(&scenario, Path::new("."), &cli).unwrap();
        assert_eq!(s.options.scale_up.limits.gpus.len(), 2);
        assert_eq!(
            s.options.scale_down.unneeded_time(),
            Duration::from_secs(120)
        );
        let defaults = ActuationOptions::default().cordon_node_before_terminating(true);
        assert_eq!(s.actuation, defaults, "default 2m, cordoning as upstream");
    }

    /// A bad value names where it was given: the scenario's field, the flag, or the file's
    /// field.
    #[test]
    fn bad_values_are_named_by_their_source() {
        let scenario = with_options("{max-drain-parallelism: 0}");
        let e = Scenario::parse(&scenario, Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("field `options.max-drain-parallelism`"),
            "{e}"
        );
        let ok = with_options("{scan-interval: 30s}");
        let args = flags(&["--max-drain-parallelism=0"]);
        let cli = CommandLine {
            args: &args,
            file: None,
        };
        let e = Scenario::parse_with(&ok, Path::new("."), &cli).unwrap_err();
        assert!(matches!(e, ScenarioError::Options(_)), "{e}");
        assert!(e.to_string().contains("--max-drain-parallelism"), "{e}");
        // A loop interval too short for the run is named where it was given.
        let args = flags(&["--scan-interval=1ms"]);
        let cli = CommandLine {
            args: &args,
            file: None,
        };
        let e = Scenario::parse_with(&ok, Path::new("."), &cli)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--scan-interval"), "{e}");
        let e = Scenario::parse(&with_options("{scan-interval: 500us}"), Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("field `options.scan-interval`"), "{e}");
        let mut file = autoscaler_options::parse_config(
            "apiVersion: autoscaling.openshift.io/v1\nkind: ClusterAutoscaler\nspec:\n  resourceLimits: {cores: {min: 9, max: 3}}\n",
        )
        .unwrap();
        file.path = PathBuf::from("ca.yaml");
        let none = RunArgs::default();
        let cli = CommandLine {
            args: &none,
            file: Some(&file),
        };
        let e = Scenario::parse_with(&ok, Path::new("."), &cli)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ca.yaml: spec.resourceLimits.cores"), "{e}");
        // Names that are no setting: a flag of the live process, a typo, a non-scalar.
        for (options, why) in [
            ("{leader-elect: false}", "flag of the live process"),
            (
                "{scale-down-unneded-time: 1m}",
                "did you mean scale-down-unneeded-time",
            ),
            ("{expander: {a: b}}", "must be a string, number or boolean"),
            ("{expander: [priority, random]}", "takes one value"),
            ("{help: true}", "unknown setting"),
            ("{'--scan-interval': 5s}", "unknown setting"),
        ] {
            let e = Scenario::parse(&with_options(options), Path::new("."))
                .unwrap_err()
                .to_string();
            assert!(e.contains(why), "{options}: {e}");
        }
    }

    #[test]
    fn options_are_validated_as_run_validates_its_flags() {
        for (option, flag) in [
            ("max-nodes-per-scaleup: 0", "options.max-nodes-per-scaleup"),
            (
                "max-scale-down-parallelism: 0",
                "options.max-scale-down-parallelism",
            ),
            ("max-drain-parallelism: 0", "options.max-drain-parallelism"),
            ("scan-interval: 0s", "options.scan-interval"),
            (
                "max-node-provision-time: 0s",
                "options.max-node-provision-time",
            ),
            (
                "{initial-node-group-backoff-duration: 10m, max-node-group-backoff-duration: 5m}",
                "options.max-node-group-backoff-duration",
            ),
            (
                "scale-down-unneeded-time: 2562048h",
                "options.scale-down-unneeded-time",
            ),
        ] {
            let options = if option.starts_with('{') {
                format!("options: {option}")
            } else {
                format!("options: {{{option}}}")
            };
            let e = refused("", &options);
            assert!(e.starts_with(&format!("field `{flag}`")), "{option}: {e}");
        }
    }

    #[test]
    fn stateful_sets_and_csi_drivers_are_read() {
        let s = Scenario::parse(
            r#"
name: s
duration: 10m
node_groups:
  - {name: a, min: 0, max: 2, cpu: "4", memory: 8Gi, csi: {driver: disk.csi.example.com, max_volumes: 8}}
  - {name: b, min: 0, max: 2, cpu: "4", memory: 8Gi}
workloads:
  - kind: stateful-set
    name: db
    replicas: 2
    pod_management_policy: Parallel
    schedule: [{at: 5m, replicas: 4}]
    volume_claims: [{name: data, storage_class: zonal, size: 5Gi}, {name: logs}]
    pod: {cpu: "1"}
"#,
            Path::new("."),
        )
        .expect("parses");
        assert_eq!(
            s.groups[0].csi,
            Some(CsiSpec {
                driver: "disk.csi.example.com".into(),
                max_volumes: Some(8)
            })
        );
        assert_eq!(s.groups[1].csi, None);
        let db = &s.stateful_sets[0];
        assert!(db.parallel);
        assert_eq!((db.replicas, db.schedule.clone()), (2, vec![(300_000, 4)]));
        assert_eq!(
            db.claims,
            [
                ClaimTemplate {
                    name: "data".into(),
                    storage_class: Some("zonal".into()),
                    size: "5Gi".into(),
                    access_modes: vec!["ReadWriteOnce".into()],
                },
                ClaimTemplate {
                    name: "logs".into(),
                    storage_class: None,
                    size: "1Gi".into(),
                    access_modes: vec!["ReadWriteOnce".into()],
                },
            ]
        );
        assert_eq!(db.template.labels["app"], "db");
    }

    #[test]
    fn wrong_values_are_refused_with_their_field() {
        let long = "a".repeat(1 << 20);
        let long_group = format!(", name: {long}");
        for (group, extra, field) in [
            (", cpu: '-4'", "", "node_groups[0].cpu"),
            (", memory: -16Gi", "", "node_groups[0].memory"),
            (
                "",
                "workloads: [{kind: deployment, name: d, replicas: 1, pod: {cpu: '-100m'}}]",
                "workloads[0].pod.cpu",
            ),
            (
                "",
                "workloads: [{kind: job, name: j, completions: 1, duration: 1m, pod: {memory: -1Mi}}]",
                "workloads[0].pod.memory",
            ),
            (
                "",
                "workloads: [{kind: deployment, name: d, replicas: 1, pod: {spec: {containers: x}}}]",
                "workloads[0].pod.spec.containers",
            ),
            (
                "",
                "workloads: [{kind: deployment, name: d, replicas: 1, pod: {tolerations: [{effect: 5}]}}]",
                "workloads[0].pod.tolerations[0].effect",
            ),
            (long_group.as_str(), "", "node_groups[0].name"),
            (", name: Big_Group", "", "node_groups[0].name"),
            (", namespace: a.b", "", "node_groups[0].namespace"),
            (", labels: {pool: 'a b'}", "", "node_groups[0].labels.pool"),
            (
                ", labels: {'bad key': x}",
                "",
                "node_groups[0].labels.bad key",
            ),
            (
                "",
                "workloads: [{kind: deployment, name: D, replicas: 1}]",
                "workloads[0].name",
            ),
            (
                "",
                "workloads: [{kind: daemon-set, name: ds, namespace: kube_system}]",
                "workloads[0].namespace",
            ),
            (
                "",
                "workloads: [{kind: deployment, name: d, replicas: 1, pod: {node_selector: {pool: '-x'}}}]",
                "workloads[0].pod.node_selector.pool",
            ),
            (
                ", csi: {driver: 'Disk CSI'}",
                "",
                "node_groups[0].csi.driver",
            ),
            (
                "",
                "objects: [{apiVersion: policy/v1, kind: PodDisruptionBudget, metadata: {name: b, namespace: default}, spec: {minAvailable: -3}}]",
                "objects[0].spec.minAvailable",
            ),
            (
                "",
                "objects: [{apiVersion: policy/v1, kind: PodDisruptionBudget, metadata: {name: b, namespace: default}, spec: {maxUnavailable: 200%}}]",
                "objects[0].spec.maxUnavailable",
            ),
            (
                "",
                "objects: [{apiVersion: policy/v1, kind: PodDisruptionBudget, metadata: {name: b, namespace: default}, spec: {minAvailable: [1]}}]",
                "objects[0].spec.minAvailable",
            ),
            (
                "",
                "objects: [{apiVersion: v1, kind: Namespace, metadata: {name: Bad_NS}}]",
                "objects[0].metadata.name",
            ),
            (
                "",
                "objects: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: a.b}}]",
                "objects[0].metadata.namespace",
            ),
            (
                "",
                "objects: [{apiVersion: v1, kind: Pod, metadata: {name: p, namespace: default}, spec: {containers: x}}]",
                "objects[0].spec.containers",
            ),
            ("", "objects: [{kind: ConfigMap}]", "objects[0]"),
            (
                "",
                "workloads: [{kind: stateful-set, name: s, replicas: 1, volume_claims: [{name: d, size: -1Gi}]}]",
                "workloads[0].volume_claims[0].size",
            ),
            (
                ", gpu: {resource: cpu, count: 1}",
                "",
                "node_groups[0].gpu.resource",
            ),
            (", cpu: '9223372036854775808'", "", "node_groups[0].cpu"),
            (
                ", taints: ['bad key!=x:NoSchedule']",
                "",
                "node_groups[0].taints[0]",
            ),
            (
                ", max: 4294967295, replicas: 4294967295",
                "",
                "node_groups[0].max",
            ),
            (
                ", max: 100000, replicas: 100000",
                "",
                "node_groups[0].replicas",
            ),
            (
                "",
                "faults: [{group: a, from: 2h, to: 1h, kind: stockout}]",
                "faults[0].to",
            ),
            ("", "sample_interval: 1ms", "sample_interval"),
            ("", "options: {scan-interval: 1ms}", "options.scan-interval"),
            (
                "",
                "workloads: [{kind: deployment, name: d, replicas: 4294967295}]",
                "workloads[0].replicas",
            ),
            (
                "",
                "workloads: [{kind: deployment, name: d, replicas: 1, schedule: [{at: 1m, replicas: 4294967295}]}]",
                "workloads[0].schedule[0].replicas",
            ),
            (
                "",
                "workloads: [{kind: job, name: j, completions: 4294967295, duration: 1m}]",
                "workloads[0].completions",
            ),
            (
                "",
                "workloads: [{kind: deployment, name: d, replicas: 1, pod: {gpu: 1, gpu_resource: cpu}}]",
                "workloads[0].pod.gpu_resource",
            ),
            (", csi: {driver: ''}", "", "node_groups[0].csi.driver"),
            (
                "",
                "workloads: [{kind: stateful-set, name: s, replicas: 1, pod_management_policy: Random}]",
                "workloads[0].pod_management_policy",
            ),
            (
                "",
                "workloads: [{kind: stateful-set, name: s, replicas: 4294967295}]",
                "workloads[0].replicas",
            ),
            (
                "",
                "workloads: [{kind: stateful-set, name: s, replicas: 1, volume_claims: [{name: d, size: lots}]}]",
                "workloads[0].volume_claims[0].size",
            ),
            (
                "",
                "workloads: [{kind: stateful-set, name: s, replicas: 1, volume_claims: [{name: d, access_modes: [ReadWriteSometimes]}]}]",
                "workloads[0].volume_claims[0].access_modes",
            ),
            (
                "",
                "workloads: [{kind: stateful-set, name: s, replicas: 1, volume_claims: [{name: d}, {name: d}]}]",
                "workloads[0].volume_claims[1].name",
            ),
        ] {
            let e = refused(group, extra);
            assert!(
                e.starts_with(&format!("field `{field}`")),
                "{group} {extra}: {e}"
            );
            // A 1 MiB name is named by its field and length, not printed whole.
            assert!(e.len() < 1000, "{e}");
        }
        // A key written twice in an object is refused, as in snapshots.
        let e = refused(
            "",
            "objects: [{apiVersion: v1, kind: ConfigMap, metadata: {name: a, name: b}}]",
        );
        assert!(
            e.contains("objects[0].metadata: duplicate key \"name\""),
            "{e}"
        );
    }

    #[test]
    fn schema_errors_inside_workloads_name_the_field() {
        for (workload, path) in [
            (
                "{kind: deployment, name: d, replicas: -1}",
                "workloads[0].replicas: ",
            ),
            (
                "{kind: job, name: j, completions: 2, duration: 1m, pod: {gpu: -2}}",
                "workloads[0].pod.gpu: ",
            ),
            ("{kind: jobb}", "workloads[0]: unknown variant `jobb`"),
            ("{kind: daemon-set, name: d, colour: red}", "workloads[0]"),
        ] {
            let e = refused("", &format!("workloads: [{workload}]"));
            assert!(e.starts_with(path), "{workload}: {e}");
        }
    }
}

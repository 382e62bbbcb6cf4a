//! The scenario file of `simulate`: what the simulated cluster looks like, what happens to it and
//! how the autoscaler is configured; parsed strictly (unknown fields are errors naming the field)
//! and validated into the world's and the core's own types.
//!
//! It decides how scenario text maps onto the world and the autoscaler options; it never runs
//! anything and never reads the clock.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use autoscaler_core::autoscaler::AutoscalerOptions;
use autoscaler_core::duration::parse_duration;
use autoscaler_core::expander::ExpanderChain;
use autoscaler_core::limits::{Range, parse_gpu_limit};
use autoscaler_world::{
    DaemonSetSpec, DeletePolicy, Fault, FaultKind, JobSpec, NodeGroupSpec, PodTemplate,
    ProvisioningDelay, ReplicaSetSpec, SimTime,
};
use serde::Deserialize;
use serde_json::{Value, json};

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
    /// Autoscaler options, by flag name.
    #[serde(default)]
    pub options: OptionsFile,
    /// Node groups (MachineDeployments).
    pub node_groups: Vec<GroupFile>,
    /// Kubernetes objects created at the start (PodDisruptionBudgets, Namespaces, Pods, ...).
    /// A key written twice in one mapping is refused, as in snapshots.
    #[serde(default, deserialize_with = "autoscaler_core::store::strict_values")]
    pub objects: Vec<Value>,
    /// Injected faults.
    #[serde(default)]
    pub faults: Vec<FaultFile>,
    /// Workloads.
    #[serde(default)]
    pub workloads: Vec<WorkloadFile>,
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

/// Autoscaler options, named as the flags are.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct OptionsFile {
    /// `--scan-interval` (10s): how often the loop runs, in virtual time.
    pub scan_interval: Option<String>,
    /// `--expander`.
    pub expander: Option<String>,
    /// `--balance-similar-node-groups`.
    pub balance_similar_node_groups: Option<bool>,
    /// `--max-nodes-total`.
    pub max_nodes_total: Option<usize>,
    /// `--cores-total` (`min:max`).
    pub cores_total: Option<String>,
    /// `--memory-total` (`min:max`, GiB).
    pub memory_total: Option<String>,
    /// `--gpu-total` (`type:min:max`), repeatable.
    #[serde(default)]
    pub gpu_total: Vec<String>,
    /// `--max-nodes-per-scaleup`.
    pub max_nodes_per_scaleup: Option<usize>,
    /// `--enforce-node-group-min-size`.
    pub enforce_node_group_min_size: Option<bool>,
    /// `--new-pod-scale-up-delay`.
    pub new_pod_scale_up_delay: Option<String>,
    /// `--expendable-pods-priority-cutoff`.
    pub expendable_pods_priority_cutoff: Option<i32>,
    /// `--scale-down-enabled`.
    pub scale_down_enabled: Option<bool>,
    /// `--scale-down-utilization-threshold`.
    pub scale_down_utilization_threshold: Option<f64>,
    /// `--scale-down-gpu-utilization-threshold`.
    pub scale_down_gpu_utilization_threshold: Option<f64>,
    /// `--scale-down-unneeded-time`.
    pub scale_down_unneeded_time: Option<String>,
    /// `--scale-down-unready-time`.
    pub scale_down_unready_time: Option<String>,
    /// `--scale-down-delay-after-add`.
    pub scale_down_delay_after_add: Option<String>,
    /// `--scale-down-delay-after-delete`.
    pub scale_down_delay_after_delete: Option<String>,
    /// `--scale-down-delay-after-failure`.
    pub scale_down_delay_after_failure: Option<String>,
    /// `--max-scale-down-parallelism`.
    pub max_scale_down_parallelism: Option<usize>,
    /// `--max-drain-parallelism`.
    pub max_drain_parallelism: Option<usize>,
    /// `--max-graceful-termination-sec`.
    pub max_graceful_termination_sec: Option<u64>,
    /// `--max-node-provision-time` (15m).
    pub max_node_provision_time: Option<String>,
    /// `--max-node-startup-time` (15m).
    pub max_node_startup_time: Option<String>,
    /// `--ok-total-unready-count` (3).
    pub ok_total_unready_count: Option<usize>,
    /// `--max-total-unready-percentage` (45).
    pub max_total_unready_percentage: Option<f64>,
    /// `--initial-node-group-backoff-duration` (5m).
    pub initial_node_group_backoff_duration: Option<String>,
    /// `--max-node-group-backoff-duration` (30m).
    pub max_node_group_backoff_duration: Option<String>,
    /// `--node-group-backoff-reset-timeout` (3h).
    pub node_group_backoff_reset_timeout: Option<String>,
    /// Not a flag: virtual times at which the autoscaler process restarts (a fresh `Autoscaler`,
    /// all in-memory state dropped), e.g. `[30m]`.
    #[serde(default)]
    pub restart_at: Vec<String>,
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
    /// Price of one node per hour, for the cost report.
    #[serde(default)]
    pub price_per_hour: f64,
    /// Provisioning delay of this group.
    #[serde(default)]
    pub provisioning_delay: Option<DelayFile>,
    /// The MachineSet's delete policy: `Random` (default), `Newest` or `Oldest`.
    #[serde(default)]
    pub delete_policy: Option<String>,
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
    /// Any further pod spec fields (merged over the generated spec).
    #[serde(default)]
    pub spec: Option<Value>,
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
}

/// A workload; `kind` says which (`deployment`, `job`, `daemon-set`, `trace`).
#[derive(Clone, Debug)]
pub enum WorkloadFile {
    /// A Deployment (with its ReplicaSet) following a replica schedule.
    Deployment(DeploymentFile),
    /// A Job created at `at`.
    Job(JobFile),
    /// A DaemonSet.
    DaemonSet(DaemonSetFile),
    /// Bare pods replayed from a trace CSV (`../shared/traces/README.md` format).
    Trace(TraceFile),
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
            "trace" => variant(rest).map(WorkloadFile::Trace),
            other => Err(D::Error::unknown_variant(
                other,
                &["deployment", "job", "daemon-set", "trace"],
            )),
        }
    }
}

/// Reads one workload kind's fields; an error inside names its path, starting with `.` so the
/// caller's path joins it (see `crate::yaml::from_str`).
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
    /// DaemonSets.
    pub daemon_sets: Vec<DaemonSetSpec>,
    /// Bare pods by creation time (trace replay), sorted by time.
    pub pods: Vec<TimedPod>,
    /// Virtual times at which the autoscaler restarts (option `restart-at`), sorted.
    pub restart_at: Vec<SimTime>,
    /// Upstream's `--max-pod-eviction-time` (2 minutes): how long a drain keeps trying
    /// evictions a budget refuses before it gives up and untaints the node.
    pub max_pod_eviction_time: std::time::Duration,
}

fn ms(field: &str, text: &str) -> Result<SimTime, ScenarioError> {
    parse_duration(text)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .map_err(|e| invalid(field, e.to_string()))
}

fn dur(field: &str, text: &Option<String>) -> Result<Option<Duration>, ScenarioError> {
    text.as_deref()
        .map(|t| parse_duration(t).map_err(|e| invalid(field, e.to_string())))
        .transpose()
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
    pub fn parse(text: &str, base: &Path) -> Result<Scenario, ScenarioError> {
        let file: ScenarioFile = crate::yaml::from_str(text).map_err(ScenarioError::Yaml)?;
        Scenario::from_file(file, base)
    }

    fn from_file(f: ScenarioFile, base: &Path) -> Result<Scenario, ScenarioError> {
        let duration = ms("duration", &f.duration)?;
        if duration == 0 {
            return Err(invalid("duration", "must be positive"));
        }
        let (options, scan_interval) = options(&f.options, f.seed)?;
        check_loops(duration, scan_interval).map_err(|e| invalid("options.scan-interval", e))?;
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
                "replicas-changed" => FaultKind::ReplicasChanged {
                    delta: x.delta.ok_or_else(|| {
                        invalid(format!("{field}.delta"), "replicas-changed needs a delta")
                    })?,
                },
                "nodes-not-ready" => FaultKind::NodesNotReady {
                    count: x.count.ok_or_else(|| {
                        invalid(format!("{field}.count"), "nodes-not-ready needs a count")
                    })?,
                },
                other => {
                    return Err(invalid(
                        format!("{field}.kind"),
                        format!(
                            "unknown fault {other:?} (stockout, slow, never-registers, scale-api-error, nodes-not-ready, replicas-changed)"
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
            options,
            groups,
            objects: f.objects,
            faults,
            replica_sets: Vec::new(),
            jobs: Vec::new(),
            daemon_sets: Vec::new(),
            pods: Vec::new(),
            restart_at: restarts(&f.options)?,
            max_pod_eviction_time: std::time::Duration::from_secs(120),
        };
        for (i, w) in f.workloads.iter().enumerate() {
            s.add_workload(&format!("workloads[{i}]"), w, base)?;
        }
        s.pods.sort_by_key(|p| p.at);
        Ok(s)
    }

    fn add_workload(
        &mut self,
        field: &str,
        w: &WorkloadFile,
        base: &Path,
    ) -> Result<(), ScenarioError> {
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
            WorkloadFile::DaemonSet(DaemonSetFile {
                name,
                namespace,
                pod,
            }) => self.daemon_sets.push(DaemonSetSpec {
                namespace: namespace.clone(),
                name: name.clone(),
                template: template(&format!("{field}.pod"), name, pod)?,
            }),
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
                let text = std::fs::read_to_string(&path).map_err(|e| ScenarioError::Trace {
                    path: path.clone(),
                    message: e.to_string(),
                })?;
                let opts = super::trace::ReplayOptions {
                    namespace: namespace.clone(),
                    time_scale: scale,
                    sample,
                    start_ms,
                    limit: limit.unwrap_or(usize::MAX),
                    horizon_ms: self.duration,
                    gpu_resource: gpu_resource.clone().unwrap_or_else(default_gpu_resource),
                    gpu_model_label: gpu_model_label.clone(),
                    tolerations: tolerations.clone(),
                };
                let pods =
                    super::trace::replay(&text, &opts).map_err(|message| ScenarioError::Trace {
                        path: path.clone(),
                        message,
                    })?;
                self.pods.extend(pods);
            }
        }
        Ok(())
    }
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

/// A CPU and memory amount the model can hold (millicores and bytes in 64 bits).
fn cpu_memory(field: &str, cpu: &str, memory: &str) -> Result<(), ScenarioError> {
    let bad = |name: &str, e: String| invalid(format!("{field}.{name}"), e);
    autoscaler_core::quantity::parse(cpu)
        .and_then(|q| q.to_milli_ceil())
        .map_err(|e| bad("cpu", e.to_string()))?;
    autoscaler_core::quantity::parse(memory)
        .and_then(|q| q.to_units_ceil())
        .map_err(|e| bad("memory", e.to_string()))?;
    Ok(())
}

fn group(field: &str, g: &GroupFile) -> Result<Group, ScenarioError> {
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
        autoscaler_core::limits::check_gpu_resource(&gpu.resource)
            .map_err(|e| invalid(format!("{field}.gpu.resource"), e))?;
    }
    let mut taints = Vec::new();
    for (i, t) in g.taints.iter().enumerate() {
        let parsed = t.split_once(':').and_then(|(kv, effect)| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            let ok = matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute");
            let ok = ok && autoscaler_core::labels::check_qualified_name(k).is_ok();
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
    })
}

fn template(field: &str, name: &str, p: &PodFile) -> Result<PodTemplate, ScenarioError> {
    let cpu = p.cpu.clone().unwrap_or_else(|| "100m".into());
    let memory = p.memory.clone().unwrap_or_else(|| "128Mi".into());
    cpu_memory(field, &cpu, &memory)?;
    let mut t = PodTemplate::new().requests(&cpu, &memory);
    if p.gpu > 0 {
        let res = p.gpu_resource.clone().unwrap_or_else(default_gpu_resource);
        autoscaler_core::limits::check_gpu_resource(&res)
            .map_err(|e| invalid(format!("{field}.gpu_resource"), e))?;
        t = t.request(&res, &p.gpu.to_string());
    }
    if p.labels.is_empty() {
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
    if let Some(extra) = &p.spec {
        let Some(obj) = extra.as_object() else {
            return Err(invalid(format!("{field}.spec"), "must be a mapping"));
        };
        for (k, v) in obj {
            t.spec[k] = v.clone();
        }
    }
    Ok(t)
}

fn options(o: &OptionsFile, seed: u64) -> Result<(AutoscalerOptions, SimTime), ScenarioError> {
    let mut a = AutoscalerOptions {
        seed,
        ..AutoscalerOptions::default()
    };
    let scan = match &o.scan_interval {
        Some(t) => ms("options.scan-interval", t)?,
        None => 10_000,
    };
    if let Some(e) = &o.expander {
        a.scale_up.expander =
            ExpanderChain::parse(e).map_err(|e| invalid("options.expander", e.to_string()))?;
    }
    let up = &mut a.scale_up;
    if let Some(b) = o.balance_similar_node_groups {
        up.scale_up.balance_similar_node_groups = b;
    }
    if let Some(n) = o.max_nodes_total {
        up.limits.max_nodes_total = n;
    }
    if let Some(c) = &o.cores_total {
        up.limits.cpu =
            Range::parse_cores(c).map_err(|e| invalid("options.cores-total", e.to_string()))?;
    }
    if let Some(m) = &o.memory_total {
        up.limits.memory = Range::parse_memory_gib(m)
            .map_err(|e| invalid("options.memory-total", e.to_string()))?;
    }
    for (i, g) in o.gpu_total.iter().enumerate() {
        up.limits.gpus.push(
            parse_gpu_limit(g)
                .map_err(|e| invalid(format!("options.gpu-total[{i}]"), e.to_string()))?,
        );
    }
    if let Some(n) = o.max_nodes_per_scaleup {
        up.scale_up.max_nodes_per_scale_up = n;
    }
    if let Some(b) = o.enforce_node_group_min_size {
        up.scale_up.enforce_node_group_min_size = b;
    }
    if let Some(d) = dur("options.new-pod-scale-up-delay", &o.new_pod_scale_up_delay)? {
        up.pending.new_pod_scale_up_delay = d;
    }
    if let Some(c) = o.expendable_pods_priority_cutoff {
        up.pending.expendable_pods_priority_cutoff = c;
    }
    let down = &mut a.scale_down;
    if let Some(b) = o.scale_down_enabled {
        down.enabled = b;
    }
    // Ranges are checked with the other options, by `run`'s rules.
    if let Some(v) = o.scale_down_utilization_threshold {
        down.utilization_threshold = v;
    }
    if let Some(v) = o.scale_down_gpu_utilization_threshold {
        down.gpu_utilization_threshold = v;
    }
    for (text, name, slot) in [
        (
            &o.scale_down_unneeded_time,
            "options.scale-down-unneeded-time",
            &mut down.unneeded_time,
        ),
        (
            &o.scale_down_unready_time,
            "options.scale-down-unready-time",
            &mut down.unready_time,
        ),
        (
            &o.scale_down_delay_after_add,
            "options.scale-down-delay-after-add",
            &mut down.delay_after_add,
        ),
        (
            &o.scale_down_delay_after_delete,
            "options.scale-down-delay-after-delete",
            &mut down.delay_after_delete,
        ),
        (
            &o.scale_down_delay_after_failure,
            "options.scale-down-delay-after-failure",
            &mut down.delay_after_failure,
        ),
    ] {
        if let Some(d) = dur(name, text)? {
            *slot = d;
        }
    }
    if let Some(n) = o.max_scale_down_parallelism {
        down.max_scale_down_parallelism = n;
    }
    if let Some(n) = o.max_drain_parallelism {
        down.max_drain_parallelism = n;
    }
    if let Some(n) = o.max_graceful_termination_sec {
        down.max_graceful_termination_sec = n;
    }
    cluster_state_options(o, &mut a)?;
    // The same rules `run` applies to its flags, named by the same flags.
    crate::options::validate_autoscaler(&a, Duration::from_millis(scan)).map_err(|e| match e {
        crate::options::OptionsError::Flag { flag, value, why } => {
            invalid(format!("options.{flag}"), format!("{value}: {why}"))
        }
        other => invalid("options", other.to_string()),
    })?;
    Ok((a, scan))
}

/// The cluster-state flags: provision and startup times, health thresholds, backoff.
fn cluster_state_options(o: &OptionsFile, a: &mut AutoscalerOptions) -> Result<(), ScenarioError> {
    let cs = &mut a.cluster_state;
    for (text, name, slot) in [
        (
            &o.max_node_provision_time,
            "options.max-node-provision-time",
            &mut cs.max_node_provision_time,
        ),
        (
            &o.max_node_startup_time,
            "options.max-node-startup-time",
            &mut cs.max_node_startup_time,
        ),
        (
            &o.initial_node_group_backoff_duration,
            "options.initial-node-group-backoff-duration",
            &mut cs.backoff.initial,
        ),
        (
            &o.max_node_group_backoff_duration,
            "options.max-node-group-backoff-duration",
            &mut cs.backoff.max,
        ),
        (
            &o.node_group_backoff_reset_timeout,
            "options.node-group-backoff-reset-timeout",
            &mut cs.backoff.reset_timeout,
        ),
    ] {
        if let Some(d) = dur(name, text)? {
            *slot = d;
        }
    }
    if let Some(n) = o.ok_total_unready_count {
        cs.ok_total_unready_count = n;
    }
    if let Some(p) = o.max_total_unready_percentage {
        cs.max_total_unready_percentage = p;
    }
    Ok(())
}

/// The restart times of option `restart-at`, sorted.
fn restarts(o: &OptionsFile) -> Result<Vec<SimTime>, ScenarioError> {
    let mut v = Vec::new();
    for (i, t) in o.restart_at.iter().enumerate() {
        v.push(ms(&format!("options.restart-at[{i}]"), t)?);
    }
    v.sort_unstable();
    Ok(v)
}

/// The MachineDeployment object of a group, with its extra annotations.
pub fn group_object(g: &Group, cluster: &str) -> Value {
    let mut obj = g.spec.to_object(cluster);
    for (k, v) in &g.annotations {
        obj["metadata"]["annotations"][k] = json!(v);
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn options_use_the_flag_names() {
        let text = "name: x\nduration: 1h\noptions:\n  scan-interval: 5s\n  scale-down-unneeded-time: 2m\n  max-nodes-total: 7\n  cores-total: '0:64'\nnode_groups:\n- {name: a, min: 0, max: 2, cpu: '4', memory: 16Gi}\n";
        let s = Scenario::parse(text, Path::new(".")).unwrap();
        assert_eq!(s.scan_interval, 5_000);
        assert_eq!(s.options.scale_down.unneeded_time, Duration::from_secs(120));
        assert_eq!(s.options.scale_up.limits.max_nodes_total, 7);
        assert_eq!(s.options.scale_up.limits.cpu.max, 64_000);
    }

    /// The error of a scenario with one group (`group`: more fields of its flow mapping) and
    /// `extra` top-level text.
    fn refused(group: &str, extra: &str) -> String {
        let mut fields = String::from("name: a, min: 0");
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
    fn wrong_values_are_refused_with_their_field() {
        for (group, extra, field) in [
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
        ] {
            let e = refused(group, extra);
            assert!(
                e.starts_with(&format!("field `{field}`")),
                "{group} {extra}: {e}"
            );
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

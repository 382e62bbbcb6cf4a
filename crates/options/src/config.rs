//! `--config FILE`: the `ClusterAutoscaler` resource (`autoscaling.openshift.io/v1`, seed 002)
//! read from YAML and turned into the settings of the upstream flags its fields stand for.
//!
//! It decides which flag each field of the resource stands for (each value is then read by
//! that flag's own parser, so a field means what its flag means) and rejects what it cannot
//! honour: an unknown field (the resource is versioned, a typo must not silently do nothing), a
//! wrong kind or apiVersion, or an invalid value, each named by its field path
//! (`spec.scaleDown.utilizationThreshold`). It never reads flags: the caller layers the file
//! under the flags given on the command line.

use std::path::{Path, PathBuf};

use autoscaler_core::ExpanderName;
use autoscaler_model::parse_duration;
use serde::Deserialize;

use crate::options::{AutoscalingArgs, OptionsError};

/// The API version accepted.
pub const API_VERSION: &str = "autoscaling.openshift.io/v1";
/// The kind accepted.
pub const KIND: &str = "ClusterAutoscaler";

/// How a message names where a resource came from: its file, or the resource in the cluster.
fn origin(path: &std::path::Path) -> String {
    if path == std::path::Path::new(CLUSTER_SOURCE) {
        format!("the cluster's {CLUSTER_SOURCE}")
    } else {
        format!("config file {}", path.display())
    }
}

/// Why the config file was rejected.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// The file cannot be read, or is larger than [`crate::bounded_file::CONFIG_LIMIT`] (the
    /// message names the file once and the cause once).
    #[error(transparent)]
    Read(crate::bounded_file::FileError),
    /// The file is not a `ClusterAutoscaler` resource (YAML syntax, unknown field, wrong type).
    #[error("{}: {message}", origin(path))]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message (with the field path and position).
        message: String,
    },
    /// A field has a value that cannot be used.
    #[error("{}: {field}: {why}", origin(path))]
    Field {
        /// The file.
        path: PathBuf,
        /// The field path (`spec.scaleDown.unneededTime`).
        field: String,
        /// What is wrong, with the value.
        why: String,
    },
}

/// The `ClusterAutoscaler` resource.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterAutoscalerResource {
    /// `autoscaling.openshift.io/v1`.
    pub api_version: String,
    /// `ClusterAutoscaler`.
    pub kind: String,
    /// Object metadata (not read).
    #[serde(default)]
    pub metadata: serde_json::Value,
    /// The settings.
    #[serde(default)]
    pub spec: Spec,
    /// Status (not read; accepted so a resource fetched from a cluster can be used as is).
    #[serde(default)]
    pub status: serde_json::Value,
    /// The file it was read from (empty when parsed from text), for error messages.
    #[serde(skip)]
    pub path: PathBuf,
}

/// `spec` of the resource.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Spec {
    /// `--expendable-pods-priority-cutoff`.
    pub pod_priority_threshold: Option<i32>,
    /// Cluster-wide limits.
    pub resource_limits: Option<ResourceLimitsSpec>,
    /// Scale-down settings.
    pub scale_down: Option<ScaleDownSpec>,
    /// `--max-graceful-termination-sec`.
    pub max_pod_grace_period: Option<i64>,
    /// `--max-node-provision-time` (a Go duration).
    pub max_node_provision_time: Option<String>,
    /// `--balance-similar-node-groups`.
    pub balance_similar_node_groups: Option<bool>,
    /// `--balancing-ignore-label`, each.
    pub balancing_ignored_labels: Option<Vec<String>>,
    /// `--ignore-daemonsets-utilization`.
    pub ignore_daemonsets_utilization: Option<bool>,
    /// `--skip-nodes-with-local-storage`.
    pub skip_nodes_with_local_storage: Option<bool>,
    /// `--v`, 0 to 10.
    pub log_verbosity: Option<i64>,
    /// `--expander`: OpenShift's names (`LeastWaste`, `Priority`, `Random`) or the flag's.
    pub expanders: Option<Vec<String>>,
    /// Scale-up settings.
    pub scale_up: Option<ScaleUpSpec>,
    /// `--enforce-node-group-min-size`.
    pub enforce_node_group_min_size: Option<Mode>,
    /// `--startup-taint`, each (taint keys).
    pub startup_taints: Option<Vec<String>>,
}

/// `Enabled` or `Disabled`: how the resource writes a boolean flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum Mode {
    /// The flag is `true`.
    Enabled,
    /// The flag is `false`.
    Disabled,
}

impl Mode {
    /// The flag's text.
    fn flag_value(self) -> String {
        (self == Mode::Enabled).to_string()
    }
}

/// `spec.scaleUp`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScaleUpSpec {
    /// `--new-pod-scale-up-delay`.
    pub new_pod_scale_up_delay: Option<String>,
}

/// `spec.resourceLimits`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResourceLimitsSpec {
    /// `--max-nodes-total`.
    pub max_nodes_total: Option<i64>,
    /// `--cores-total`, in cores.
    pub cores: Option<RangeSpec>,
    /// `--memory-total`, in GiB.
    pub memory: Option<RangeSpec>,
    /// `--gpu-total`, per type.
    pub gpus: Option<Vec<GpuSpec>>,
}

/// A `{min, max}` range.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RangeSpec {
    /// Minimum.
    pub min: i64,
    /// Maximum.
    pub max: i64,
}

/// One GPU limit.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    /// Resource name (`nvidia.com/gpu`).
    #[serde(rename = "type")]
    pub kind: String,
    /// Minimum.
    pub min: i64,
    /// Maximum.
    pub max: i64,
}

/// `spec.scaleDown`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScaleDownSpec {
    /// `--scale-down-enabled` (required by the resource's schema).
    pub enabled: bool,
    /// `--scale-down-delay-after-add`.
    pub delay_after_add: Option<String>,
    /// `--scale-down-delay-after-delete`.
    pub delay_after_delete: Option<String>,
    /// `--scale-down-delay-after-failure`.
    pub delay_after_failure: Option<String>,
    /// `--scale-down-unneeded-time`.
    pub unneeded_time: Option<String>,
    /// `--scale-down-utilization-threshold`, a number written as a string (`"0.4"`); the YAML
    /// reader also takes an unquoted number here.
    pub utilization_threshold: Option<String>,
    /// `--cordon-node-before-terminating`.
    pub cordon_node_before_terminating: Option<Mode>,
}

/// Reads and parses the resource in `path`.
pub fn load(path: &Path) -> Result<ClusterAutoscalerResource, ConfigFileError> {
    let text = crate::bounded_file::read_bounded_text(
        path,
        crate::bounded_file::CONFIG_LIMIT,
        "config file",
    )
    .map_err(ConfigFileError::Read)?;
    let mut r = parse(&text).map_err(|e| e.at(path))?;
    r.path = path.to_path_buf();
    Ok(r)
}

/// How a resource read from the cluster is named in messages (in place of a file).
pub const CLUSTER_SOURCE: &str = "clusterautoscalers.autoscaling.openshift.io/default";

/// The resource as the cluster serves it (JSON), checked as a file is; errors name
/// [`CLUSTER_SOURCE`].
pub fn from_cluster(obj: &serde_json::Value) -> Result<ClusterAutoscalerResource, ConfigFileError> {
    let path = Path::new(CLUSTER_SOURCE);
    // JSON is YAML: one reader, one set of messages for both ways in.
    let text = serde_json::to_string(obj).map_err(|e| ConfigFileError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let mut r = parse(&text).map_err(|e| e.at(path))?;
    r.path = path.to_path_buf();
    Ok(r)
}

/// Parses the resource from YAML text (errors carry an empty path; [`load`] fills it in).
pub fn parse(text: &str) -> Result<ClusterAutoscalerResource, ConfigFileError> {
    let r: ClusterAutoscalerResource =
        crate::yaml::from_str(text).map_err(|message| ConfigFileError::Parse {
            path: PathBuf::new(),
            message,
        })?;
    if r.api_version != API_VERSION {
        return Err(field(
            "apiVersion",
            format!("{:?} is not {API_VERSION:?}", r.api_version),
        ));
    }
    if r.kind != KIND {
        return Err(field("kind", format!("{:?} is not {KIND:?}", r.kind)));
    }
    Ok(r)
}

impl ConfigFileError {
    fn at(self, p: &Path) -> ConfigFileError {
        match self {
            ConfigFileError::Parse { message, .. } => ConfigFileError::Parse {
                path: p.to_path_buf(),
                message,
            },
            ConfigFileError::Field { field, why, .. } => ConfigFileError::Field {
                path: p.to_path_buf(),
                field,
                why,
            },
            other => other,
        }
    }
}

fn field(name: &str, why: String) -> ConfigFileError {
    ConfigFileError::Field {
        path: PathBuf::new(),
        field: name.to_string(),
        why,
    }
}

/// An expander name as OpenShift writes it (`LeastWaste`) or as the flag does (`least-waste`).
fn expander_name(text: &str) -> Option<ExpanderName> {
    let flag_form = match text {
        "LeastWaste" => "least-waste",
        "Priority" => "priority",
        "Random" => "random",
        "MostPods" => "most-pods",
        "LeastNodes" => "least-nodes",
        "Price" => "price",
        other => other,
    };
    flag_form.parse().ok()
}

/// Where a setting of the resource came from: the flag it stands for, its value as the flag
/// takes it, and the field.
#[derive(Clone, Debug)]
struct Origin {
    flag: &'static str,
    value: String,
    field: String,
}

/// The settings a resource gives, as the flags they stand for, read by the flags' parsers.
#[derive(Debug, Default)]
pub struct FileSettings {
    /// The settings, named as the flags.
    pub args: AutoscalingArgs,
    /// `spec.logVerbosity` (`--v`), 0 to 10.
    pub verbosity: Option<u8>,
    /// One warning per field whose flag this autoscaler does not have: the field is accepted
    /// (it is part of the resource's API) and the gap is said, never silently dropped.
    pub unsupported: Vec<String>,
    origins: Vec<Origin>,
    path: PathBuf,
}

impl FileSettings {
    /// `e` in the file's terms (file, field path, value) when a setting of the file is at
    /// fault; other errors unchanged.
    pub fn blame(&self, e: OptionsError) -> OptionsError {
        let OptionsError::Flag { flag, value, why } = &e else {
            return e;
        };
        let origin = (self.origins.iter())
            .find(|o| o.flag == *flag && o.value == *value)
            .or_else(|| self.origins.iter().find(|o| o.flag == *flag));
        match origin {
            Some(o) => OptionsError::ConfigFile(ConfigFileError::Field {
                path: self.path.clone(),
                field: o.field.clone(),
                why: format!("{value:?}: {why}"),
            }),
            None => e,
        }
    }
}

impl ClusterAutoscalerResource {
    /// The settings the resource gives, each as the upstream flag it stands for and read by
    /// that flag's parser (one meaning per setting, whichever way it is given). Errors name
    /// the file, the field path and the value.
    pub fn settings(&self) -> Result<FileSettings, ConfigFileError> {
        let (origins, unsupported): (Vec<Origin>, Vec<Origin>) = (self.origins())
            .map_err(|e| e.at(&self.path))?
            .into_iter()
            .partition(|o| crate::options::is_setting(o.flag));
        let mut by_flag: Vec<(&'static str, Vec<String>)> = Vec::new();
        for o in &origins {
            match by_flag.iter_mut().find(|(f, _)| *f == o.flag) {
                Some((_, values)) => values.push(o.value.clone()),
                None => by_flag.push((o.flag, vec![o.value.clone()])),
            }
        }
        let args = AutoscalingArgs::from_settings(
            by_flag.iter().map(|(f, values)| (*f, values.as_slice())),
        )
        .map_err(|e| {
            let field = (origins.iter())
                .find(|o| o.flag == e.name)
                .map_or_else(|| "spec".to_string(), |o| o.field.clone());
            field_at(&self.path, field, e.why)
        })?;
        let verbosity = self.verbosity().map_err(|e| e.at(&self.path))?;
        let unsupported = (unsupported.iter())
            .map(|o| {
                format!(
                    "{}: {} ({:?}) is accepted but has no effect: this autoscaler has no --{}",
                    self.source(),
                    o.field,
                    o.value,
                    o.flag
                )
            })
            .collect();
        Ok(FileSettings {
            args,
            verbosity,
            unsupported,
            origins,
            path: self.path.clone(),
        })
    }

    /// Where the resource came from, for messages: its file, else its name.
    fn source(&self) -> String {
        if self.path.as_os_str().is_empty() {
            let name = (self.metadata.get("name"))
                .and_then(serde_json::Value::as_str)
                .unwrap_or("");
            format!("ClusterAutoscaler {name}")
        } else {
            format!("config file {}", self.path.display())
        }
    }

    /// Each field given, as the flag it stands for (the flag table's row naming the field) and
    /// the flag's text.
    fn origins(&self) -> Result<Vec<Origin>, ConfigFileError> {
        let s = &self.spec;
        let mut texts: Vec<(String, String)> = Vec::new();
        let mut add = |field: &str, value: String| texts.push((field.to_string(), value));
        if let Some(p) = s.pod_priority_threshold {
            add("spec.podPriorityThreshold", p.to_string());
        }
        if let Some(l) = &s.resource_limits {
            let range = |r: &RangeSpec| format!("{}:{}", r.min, r.max);
            if let Some(n) = l.max_nodes_total {
                add("spec.resourceLimits.maxNodesTotal", n.to_string());
            }
            if let Some(c) = &l.cores {
                add("spec.resourceLimits.cores", range(c));
            }
            if let Some(m) = &l.memory {
                add("spec.resourceLimits.memory", range(m));
            }
            for (i, g) in l.gpus.iter().flatten().enumerate() {
                let value = format!("{}:{}:{}", g.kind, g.min, g.max);
                add(&format!("spec.resourceLimits.gpus[{i}]"), value);
            }
        }
        if let Some(d) = &s.scale_down {
            add("spec.scaleDown.enabled", d.enabled.to_string());
            let durations = [
                ("delayAfterAdd", &d.delay_after_add),
                ("delayAfterDelete", &d.delay_after_delete),
                ("delayAfterFailure", &d.delay_after_failure),
                ("unneededTime", &d.unneeded_time),
                ("utilizationThreshold", &d.utilization_threshold),
            ];
            for (name, text) in durations {
                if let Some(t) = text {
                    add(&format!("spec.scaleDown.{name}"), t.clone());
                }
            }
            if let Some(m) = d.cordon_node_before_terminating {
                add("spec.scaleDown.cordonNodeBeforeTerminating", m.flag_value());
            }
        }
        if let Some(t) = (s.scale_up.as_ref()).and_then(|u| u.new_pod_scale_up_delay.as_ref()) {
            add("spec.scaleUp.newPodScaleUpDelay", t.clone());
        }
        if let Some(m) = s.enforce_node_group_min_size {
            add("spec.enforceNodeGroupMinSize", m.flag_value());
        }
        for (i, t) in s.startup_taints.iter().flatten().enumerate() {
            add(&format!("spec.startupTaints[{i}]"), t.clone());
        }
        if let Some(g) = s.max_pod_grace_period {
            add("spec.maxPodGracePeriod", g.to_string());
        }
        if let Some(t) = &s.max_node_provision_time {
            // Named here: the flag's validation would name the flag.
            if parse_duration(t).is_ok_and(|d| d.is_zero()) {
                return Err(field(
                    "spec.maxNodeProvisionTime",
                    format!("{t:?} must be greater than 0"),
                ));
            }
            add("spec.maxNodeProvisionTime", t.clone());
        }
        let bools = [
            ("balanceSimilarNodeGroups", s.balance_similar_node_groups),
            (
                "ignoreDaemonsetsUtilization",
                s.ignore_daemonsets_utilization,
            ),
            ("skipNodesWithLocalStorage", s.skip_nodes_with_local_storage),
        ];
        for (name, b) in bools {
            if let Some(b) = b {
                add(&format!("spec.{name}"), b.to_string());
            }
        }
        for (i, l) in s.balancing_ignored_labels.iter().flatten().enumerate() {
            add(&format!("spec.balancingIgnoredLabels[{i}]"), l.clone());
        }
        if let Some(list) = &s.expanders {
            let mut names = Vec::with_capacity(list.len());
            for (i, n) in list.iter().enumerate() {
                let name = expander_name(n).ok_or_else(|| {
                    field(
                        &format!("spec.expanders[{i}]"),
                        format!("{n:?} is not an expander (LeastWaste, Priority, Random)"),
                    )
                })?;
                names.push(name.as_str());
            }
            add("spec.expanders", names.join(","));
        }
        (texts.into_iter())
            .map(
                |(field_path, value)| match crate::flags::flag_of_field(&field_path) {
                    Some(flag) => Ok(Origin {
                        flag,
                        value,
                        field: field_path,
                    }),
                    None => Err(field(
                        &field_path,
                        "no flag stands for this field".to_string(),
                    )),
                },
            )
            .collect()
    }

    /// `spec.logVerbosity`, 0 to 10.
    fn verbosity(&self) -> Result<Option<u8>, ConfigFileError> {
        match self.spec.log_verbosity {
            None => Ok(None),
            Some(v) => match u8::try_from(v).ok().filter(|v| *v <= 10) {
                Some(v) => Ok(Some(v)),
                None => Err(field(
                    "spec.logVerbosity",
                    format!("{v} is not between 0 and 10"),
                )),
            },
        }
    }
}

/// Each field of the resource with the flag it stands for (`spec.scaleDown.unneededTime`,
/// `scale-down-unneeded-time`), as [`ClusterAutoscalerResource::settings`] maps them: read
/// from a resource with every field set (the struct literals below name every field, so the
/// compiler asks for a new one here), to check the flag table names every field.
#[cfg(test)]
fn field_flags() -> Vec<(&'static str, String)> {
    let range = || Some(RangeSpec { min: 0, max: 1 });
    let text = |t: &str| Some(t.to_string());
    let every = ClusterAutoscalerResource {
        api_version: API_VERSION.to_string(),
        kind: KIND.to_string(),
        metadata: serde_json::Value::Null,
        status: serde_json::Value::Null,
        path: PathBuf::new(),
        spec: Spec {
            pod_priority_threshold: Some(0),
            resource_limits: Some(ResourceLimitsSpec {
                max_nodes_total: Some(0),
                cores: range(),
                memory: range(),
                gpus: Some(vec![GpuSpec {
                    kind: "nvidia.com/gpu".to_string(),
                    min: 0,
                    max: 1,
                }]),
            }),
            scale_down: Some(ScaleDownSpec {
                enabled: true,
                delay_after_add: text("1s"),
                delay_after_delete: text("1s"),
                delay_after_failure: text("1s"),
                unneeded_time: text("1s"),
                utilization_threshold: text("0.5"),
                cordon_node_before_terminating: Some(Mode::Enabled),
            }),
            max_pod_grace_period: Some(1),
            max_node_provision_time: text("1s"),
            balance_similar_node_groups: Some(true),
            balancing_ignored_labels: Some(vec!["a".to_string()]),
            ignore_daemonsets_utilization: Some(true),
            skip_nodes_with_local_storage: Some(true),
            log_verbosity: Some(1),
            expanders: Some(vec!["LeastWaste".to_string()]),
            scale_up: Some(ScaleUpSpec {
                new_pod_scale_up_delay: text("1s"),
            }),
            enforce_node_group_min_size: Some(Mode::Enabled),
            startup_taints: Some(vec!["a".to_string()]),
        },
    };
    let mut out: Vec<(&'static str, String)> = (every.origins().unwrap_or_default().into_iter())
        .map(|o| {
            let field = o.field.split('[').next().unwrap_or_default();
            (o.flag, field.to_string())
        })
        .collect();
    // Read apart from the flags' settings (see `verbosity`).
    out.push(("v", "spec.logVerbosity".to_string()));
    out.dedup();
    out
}

fn field_at(path: &Path, name: String, why: String) -> ConfigFileError {
    ConfigFileError::Field {
        path: path.to_path_buf(),
        field: name,
        why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_stands_for_one_upstream_flag() {
        let fields = field_flags();
        assert_eq!(fields.len(), 23, "{fields:?}");
        for (flag, field) in &fields {
            assert!(
                crate::flags::FLAGS.iter().any(|f| f.name == *flag),
                "{field}: --{flag} is no upstream flag"
            );
            assert!(field.starts_with("spec."), "{field}");
        }
        let unneeded = (
            "scale-down-unneeded-time",
            "spec.scaleDown.unneededTime".to_string(),
        );
        assert!(fields.contains(&unneeded));
        // The flag table names exactly the fields of the resource.
        let mut rows: Vec<(&str, String)> = (crate::flags::FLAGS.iter())
            .filter_map(|f| f.file_field().map(|k| (f.name, k.to_string())))
            .collect();
        let mut fields = fields;
        rows.sort();
        fields.sort();
        assert_eq!(rows, fields);
    }

    #[test]
    fn messages_name_a_file_or_the_resource_in_the_cluster() {
        let field = |path: &str| ConfigFileError::Field {
            path: PathBuf::from(path),
            field: "spec.resourceLimits.maxNodesTotal".into(),
            why: "must not be negative".into(),
        };
        assert_eq!(
            field("ca.yaml").to_string(),
            "config file ca.yaml: spec.resourceLimits.maxNodesTotal: must not be negative"
        );
        assert_eq!(
            field(CLUSTER_SOURCE).to_string(),
            "the cluster's clusterautoscalers.autoscaling.openshift.io/default: \
             spec.resourceLimits.maxNodesTotal: must not be negative"
        );
    }
    use crate::options::{RunArgs, RunOptions};
    use autoscaler_core::AutoscalerOptions;
    use autoscaler_model::Range;
    use clap::Parser;
    use std::time::Duration;

    /// Bytes in a GiB (`resourceLimits.memory` is in GiB).
    const GIB: i64 = 1 << 30;

    /// The example resource of seed 002, as published.
    const SEED_002: &str = r#"
apiVersion: "autoscaling.openshift.io/v1"
kind: "ClusterAutoscaler"
metadata:
  name: "default"
spec:
  podPriorityThreshold: -10
  resourceLimits:
    maxNodesTotal: 24
    cores:
      min: 8
      max: 128
    memory:
      min: 4
      max: 256
    gpus:
      - type: nvidia.com/gpu
        min: 0
        max: 16
      - type: amd.com/gpu
        min: 0
        max: 4
  logVerbosity: 4
  scaleDown:
    enabled: true
    delayAfterAdd: 10m
    delayAfterDelete: 5m
    delayAfterFailure: 30s
    unneededTime: 5m
    utilizationThreshold: "0.4"
"#;

    /// The options and verbosity the resource in `text` gives, over the defaults, without
    /// flags; an error as text.
    fn apply(text: &str) -> Result<(AutoscalerOptions, Option<u8>), String> {
        let r = parse(text).map_err(|e| e.to_string())?;
        let v = r.settings().map_err(|e| e.to_string())?.verbosity;
        let o = RunOptions::build(&RunArgs::default(), Some(&r), &|_| None)
            .map_err(|e| e.to_string())?;
        Ok((o.controller.autoscaler, v))
    }

    #[test]
    fn seed_002_resource_maps_field_by_field() {
        let (o, v) = apply(SEED_002).unwrap();
        assert_eq!(v, Some(4));
        assert_eq!(o.scale_up.pending.expendable_pods_priority_cutoff(), -10);
        let l = &o.scale_up.limits;
        assert_eq!(l.max_nodes_total, 24);
        assert_eq!(l.cpu, Range::new(8000, 128_000).unwrap());
        assert_eq!(l.memory, Range::new(4 * GIB, 256 * GIB).unwrap());
        assert_eq!(l.gpus.len(), 2);
        assert_eq!(l.gpus[0].0.to_string(), "nvidia.com/gpu");
        assert_eq!(l.gpus[0].1, Range::new(0, 16).unwrap());
        assert_eq!(l.gpus[1].0.to_string(), "amd.com/gpu");
        assert_eq!(l.gpus[1].1, Range::new(0, 4).unwrap());
        let sd = &o.scale_down;
        assert!(sd.enabled());
        assert_eq!(sd.delay_after_add(), Duration::from_secs(600));
        assert_eq!(sd.delay_after_delete(), Duration::from_secs(300));
        assert_eq!(sd.delay_after_failure(), Duration::from_secs(30));
        assert_eq!(sd.unneeded_time(), Duration::from_secs(300));
        assert_eq!(sd.utilization_threshold(), 0.4);
        // Fields the resource does not give keep upstream's defaults.
        assert_eq!(sd.unready_time(), Duration::from_secs(1200));
        assert_eq!(o.scale_up.expander.to_string(), "least-waste");
    }

    #[test]
    fn other_fields_of_the_resource_map_too() {
        let (o, v) = apply(
            r#"
apiVersion: autoscaling.openshift.io/v1
kind: ClusterAutoscaler
spec:
  maxPodGracePeriod: 60
  maxNodeProvisionTime: 20m
  balanceSimilarNodeGroups: true
  balancingIgnoredLabels: [zone, rack]
  ignoreDaemonsetsUtilization: true
  skipNodesWithLocalStorage: false
  expanders: [Priority, LeastWaste]
  scaleDown:
    enabled: false
  scaleUp:
    newPodScaleUpDelay: 45s
  enforceNodeGroupMinSize: Enabled
  startupTaints: [node.example.com/starting, ignore-taint.cluster-autoscaler.kubernetes.io/x]
"#,
        )
        .unwrap();
        assert_eq!(v, None);
        assert_eq!(
            o.scale_up.pending.new_pod_scale_up_delay(),
            Duration::from_secs(45)
        );
        assert!(o.scale_up.scale_up.enforce_node_group_min_size());
        assert_eq!(
            o.scale_up.template.taints().startup(),
            [
                "node.example.com/starting",
                "ignore-taint.cluster-autoscaler.kubernetes.io/x"
            ]
        );
        assert_eq!(o.scale_down.max_graceful_termination_sec(), 60);
        assert_eq!(
            o.cluster_state.max_node_provision_time(),
            Duration::from_secs(1200)
        );
        assert!(o.scale_up.scale_up.balance_similar_node_groups());
        assert_eq!(
            o.scale_up.scale_up.balancing().ignored_labels(),
            ["zone", "rack"]
        );
        assert!(o.scale_down.utilization().ignore_daemonsets());
        assert!(!o.scale_down.drain().skip_nodes_with_local_storage());
        assert_eq!(o.scale_up.expander.to_string(), "priority,least-waste");
        assert!(!o.scale_down.enabled());
    }

    /// Each invalid field is rejected with its path and value.
    #[test]
    fn invalid_fields_are_named() {
        let head = "apiVersion: autoscaling.openshift.io/v1\nkind: ClusterAutoscaler\n";
        let cases: &[(&str, &str, &str)] = &[
            (
                "spec:\n  scaleDown:\n    enabled: true\n    utilizationThreshold: \"abc\"\n",
                "spec.scaleDown.utilizationThreshold",
                "\"abc\" is not a number",
            ),
            (
                "spec:\n  scaleDown:\n    enabled: true\n    utilizationThreshold: \"1.5\"\n",
                "spec.scaleDown.utilizationThreshold",
                "1.5",
            ),
            (
                "spec:\n  scaleDown:\n    enabled: true\n    unneededTime: 5 minutes\n",
                "spec.scaleDown.unneededTime",
                "5 minutes",
            ),
            (
                "spec:\n  resourceLimits:\n    cores: {min: 10, max: 5}\n",
                "spec.resourceLimits.cores",
                "min 10",
            ),
            (
                "spec:\n  resourceLimits:\n    maxNodesTotal: -1\n",
                "spec.resourceLimits.maxNodesTotal",
                "-1",
            ),
            (
                "spec:\n  resourceLimits:\n    gpus: [{type: nvidia.com/gpu, min: 3, max: 1}]\n",
                "spec.resourceLimits.gpus[0]",
                "min 3",
            ),
            (
                "spec:\n  resourceLimits:\n    gpus: [{type: nvidia.com/gpu, min: 0, max: 1}, {type: a/b/c, min: 0, max: 1}]\n",
                "spec.resourceLimits.gpus[1]",
                "a/b/c",
            ),
            ("spec:\n  logVerbosity: 11\n", "spec.logVerbosity", "11"),
            (
                "spec:\n  maxPodGracePeriod: -5\n",
                "spec.maxPodGracePeriod",
                "-5",
            ),
            (
                "spec:\n  maxNodeProvisionTime: soon\n",
                "spec.maxNodeProvisionTime",
                "soon",
            ),
            (
                "spec:\n  expanders: [Cheapest]\n",
                "spec.expanders[0]",
                "Cheapest",
            ),
            (
                "spec:\n  scaleUp:\n    newPodScaleUpDelay: later\n",
                "spec.scaleUp.newPodScaleUpDelay",
                "later",
            ),
            (
                "spec:\n  enforceNodeGroupMinSize: Yes\n",
                "enforceNodeGroupMinSize",
                "unknown variant",
            ),
            (
                "spec:\n  scaleDown:\n    enabled: true\n    cordonNodeBeforeTerminating: true\n",
                "cordonNodeBeforeTerminating",
                "Enabled",
            ),
            (
                "spec:\n  scaleUp:\n    delay: 1s\n",
                "delay",
                "unknown field",
            ),
            // Unknown fields and wrong types: the parser names the field.
            (
                "spec:\n  scaleDwon:\n    enabled: true\n",
                "scaleDwon",
                "unknown field",
            ),
            (
                "spec:\n  scaleDown:\n    enabled: true\n    unneded: 5m\n",
                "unneded",
                "unknown field",
            ),
            (
                "spec:\n  scaleDown:\n    enabled: true\n    utilizationThreshold: [0.4]\n",
                "utilizationThreshold",
                "invalid type",
            ),
            (
                "spec:\n  scaleDown:\n    delayAfterAdd: 1m\n",
                "enabled",
                "missing field",
            ),
        ];
        for (body, name, what) in cases {
            let e = apply(&format!("{head}{body}")).unwrap_err();
            assert!(e.contains(name), "{body}: {e}");
            assert!(e.contains(what), "{body}: {e}");
        }
        let e = apply("apiVersion: v1\nkind: ClusterAutoscaler\n").unwrap_err();
        assert!(e.contains("apiVersion"), "{e}");
        let e = apply("apiVersion: autoscaling.openshift.io/v1\nkind: MachineAutoscaler\n")
            .unwrap_err();
        assert!(e.contains("kind"), "{e}");
        let e = parse("{ not yaml").unwrap_err();
        assert!(matches!(e, ConfigFileError::Parse { .. }), "{e}");
    }

    /// Every field of the operator's current `ClusterAutoscalerSpec` is accepted.
    #[test]
    fn the_operators_whole_api_is_accepted() {
        let r = parse(
            r#"
apiVersion: autoscaling.openshift.io/v1
kind: ClusterAutoscaler
metadata: {name: default}
spec:
  resourceLimits:
    maxNodesTotal: 20
    cores: {min: 0, max: 64}
    memory: {min: 0, max: 256}
    gpus: [{type: nvidia-t4, min: 0, max: 4}]
  scaleDown:
    enabled: true
    delayAfterAdd: 10m
    delayAfterDelete: 10s
    delayAfterFailure: 3m
    unneededTime: 10m
    utilizationThreshold: "0.5"
    cordonNodeBeforeTerminating: Enabled
  scaleUp: {newPodScaleUpDelay: 10s}
  maxPodGracePeriod: 600
  maxNodeProvisionTime: 15m
  podPriorityThreshold: -10
  balanceSimilarNodeGroups: true
  balancingIgnoredLabels: [topology.ebs.csi.aws.com/zone]
  ignoreDaemonsetsUtilization: false
  skipNodesWithLocalStorage: true
  logVerbosity: 1
  expanders: [LeastWaste, Random]
  enforceNodeGroupMinSize: Disabled
  startupTaints: [startup.example.com/not-ready]
status: {}
"#,
        )
        .unwrap();
        let s = r.settings().unwrap();
        // cordonNodeBeforeTerminating is applied where this build has the flag, else said.
        if crate::options::is_setting("cordon-node-before-terminating") {
            assert!(s.unsupported.is_empty(), "{:?}", s.unsupported);
        } else {
            assert_eq!(s.unsupported.len(), 1, "{:?}", s.unsupported);
            let w = &s.unsupported[0];
            assert!(
                w.contains("ClusterAutoscaler default")
                    && w.contains("spec.scaleDown.cordonNodeBeforeTerminating")
                    && w.contains("\"true\""),
                "{w}"
            );
        }
        let o = RunOptions::build(&RunArgs::default(), Some(&r), &|_| None).unwrap();
        assert_eq!(o.config_warnings, s.unsupported);
        let l = &o.controller.autoscaler.scale_up.limits;
        assert_eq!(l.gpus[0].0.to_string(), "nvidia-t4");
        assert!(
            !o.controller
                .autoscaler
                .scale_up
                .scale_up
                .enforce_node_group_min_size()
        );
    }

    #[derive(Debug, Parser)]
    struct TestCli {
        #[command(flatten)]
        run: RunArgs,
    }

    #[test]
    fn flags_win_over_the_file_and_the_file_over_defaults() {
        let file = parse(SEED_002).unwrap();
        let args = TestCli::try_parse_from([
            "ca",
            "--scale-down-unneeded-time=7m",
            "--max-nodes-total=50",
            "--v=2",
            "--scale-down-enabled=false",
            "--cores-total=0:64",
        ])
        .unwrap()
        .run;
        let o = RunOptions::build(&args, Some(&file), &|_| None).unwrap();
        let a = &o.controller.autoscaler;
        // Flags given.
        assert_eq!(a.scale_down.unneeded_time(), Duration::from_secs(420));
        assert_eq!(a.scale_up.limits.max_nodes_total, 50);
        assert_eq!(o.verbosity, 2);
        assert!(!a.scale_down.enabled());
        assert_eq!(a.scale_up.limits.cpu, Range::new(0, 64_000).unwrap());
        // From the file, where no flag was given.
        assert_eq!(a.scale_down.delay_after_delete(), Duration::from_secs(300));
        assert_eq!(a.scale_down.utilization_threshold(), 0.4);
        assert_eq!(a.scale_up.limits.memory.max(), 256 * GIB);
        // Neither: upstream's default.
        assert_eq!(a.scale_down.unready_time(), Duration::from_secs(1200));
        assert_eq!(o.controller.scan_interval, Duration::from_secs(10));

        // The file's verbosity applies when `--v` is absent.
        let args = TestCli::try_parse_from(["ca"]).unwrap().run;
        let o = RunOptions::build(&args, Some(&file), &|_| None).unwrap();
        assert_eq!(o.verbosity, 4);
    }

    #[test]
    fn load_names_the_file() {
        let e = load(Path::new("/nonexistent/ca.yaml")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/ca.yaml"), "{e}");
        let dir = std::env::temp_dir().join(format!("ca-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("bad.yaml");
        std::fs::write(&p, "apiVersion: autoscaling.openshift.io/v1\nkind: ClusterAutoscaler\nspec:\n  logVerbosity: 99\n").unwrap();
        let r = load(&p).unwrap();
        let e = r.settings().unwrap_err();
        assert!(e.to_string().contains("spec.logVerbosity"), "{e}");
        assert!(e.to_string().contains("bad.yaml"), "{e}");
        // A value the flag's parser refuses is named by the file and the field too.
        std::fs::write(&p, "apiVersion: autoscaling.openshift.io/v1\nkind: ClusterAutoscaler\nspec:\n  resourceLimits:\n    cores: {min: 9, max: 3}\n").unwrap();
        let r = load(&p).unwrap();
        let e = RunOptions::build(&RunArgs::default(), Some(&r), &|_| None).unwrap_err();
        let e = e.to_string();
        assert!(e.contains("bad.yaml: spec.resourceLimits.cores"), "{e}");
        std::fs::write(&p, "kind: [").unwrap();
        let e = load(&p).unwrap_err();
        assert!(e.to_string().contains("bad.yaml"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

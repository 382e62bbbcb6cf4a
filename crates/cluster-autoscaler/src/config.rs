//! `--config FILE`: the `ClusterAutoscaler` resource (`autoscaling.openshift.io/v1`, seed 002)
//! read from YAML and mapped onto the decision core's options.
//!
//! It decides what each field of the resource means (the same as the upstream flag it stands
//! for) and rejects what it cannot honour: an unknown field (the resource is versioned, a typo
//! must not silently do nothing), a wrong kind or apiVersion, or an invalid value, each named by
//! its field path (`spec.scaleDown.utilizationThreshold`). It never reads flags: the caller
//! applies the file first and the flags given on the command line over it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use autoscaler_core::autoscaler::AutoscalerOptions;
use autoscaler_core::duration::parse_duration;
use autoscaler_core::expander::{ExpanderChain, ExpanderName};
use autoscaler_core::limits::Range;
use autoscaler_core::resources::ResourceName;
use serde::Deserialize;

/// The API version accepted.
pub const API_VERSION: &str = "autoscaling.openshift.io/v1";
/// The kind accepted.
pub const KIND: &str = "ClusterAutoscaler";

/// Bytes in a GiB (`resourceLimits.memory` is in GiB).
const GIB: i64 = 1 << 30;

/// Why the config file was rejected.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// The file cannot be read.
    #[error("cannot read config file {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why (part of the message, not a separate cause, so it prints once).
        error: std::io::Error,
    },
    /// The file is not a `ClusterAutoscaler` resource (YAML syntax, unknown field, wrong type).
    #[error("config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message (with the field path and position).
        message: String,
    },
    /// A field has a value that cannot be used.
    #[error("config file {path}: {field}: {why}")]
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
}

/// Reads and parses the resource in `path`.
pub fn load(path: &Path) -> Result<ClusterAutoscalerResource, ConfigFileError> {
    let text = std::fs::read_to_string(path).map_err(|error| ConfigFileError::Read {
        path: path.to_path_buf(),
        error,
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

fn duration(name: &str, text: &str) -> Result<Duration, ConfigFileError> {
    parse_duration(text).map_err(|e| field(name, format!("{text:?} is not a duration: {}", e.why)))
}

fn range(name: &str, r: &RangeSpec, unit: i64) -> Result<Range, ConfigFileError> {
    if r.min < 0 || r.max < 0 {
        return Err(field(
            name,
            format!("min {} and max {} must not be negative", r.min, r.max),
        ));
    }
    if r.min > r.max {
        return Err(field(
            name,
            format!("min {} is greater than max {}", r.min, r.max),
        ));
    }
    Ok(Range {
        min: r.min.saturating_mul(unit),
        max: r.max.saturating_mul(unit),
    })
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

impl ClusterAutoscalerResource {
    /// Sets the options the resource gives onto `o`; returns the log verbosity if it gives one.
    /// Errors name the file, the field path and the value.
    pub fn apply(&self, o: &mut AutoscalerOptions) -> Result<Option<u8>, ConfigFileError> {
        self.apply_fields(o).map_err(|e| e.at(&self.path))
    }

    fn apply_fields(&self, o: &mut AutoscalerOptions) -> Result<Option<u8>, ConfigFileError> {
        let s = &self.spec;
        if let Some(p) = s.pod_priority_threshold {
            o.scale_up.pending.expendable_pods_priority_cutoff = p;
        }
        if let Some(l) = &s.resource_limits {
            let lim = &mut o.scale_up.limits;
            if let Some(n) = l.max_nodes_total {
                lim.max_nodes_total = usize::try_from(n).map_err(|_| {
                    field(
                        "spec.resourceLimits.maxNodesTotal",
                        format!("{n} must not be negative"),
                    )
                })?;
            }
            if let Some(c) = &l.cores {
                lim.cpu = range("spec.resourceLimits.cores", c, 1000)?;
            }
            if let Some(m) = &l.memory {
                lim.memory = range("spec.resourceLimits.memory", m, GIB)?;
            }
            if let Some(gpus) = &l.gpus {
                lim.gpus.clear();
                for (i, g) in gpus.iter().enumerate() {
                    if let Err(why) = autoscaler_core::limits::check_gpu_resource(g.kind.trim()) {
                        return Err(field(&format!("spec.resourceLimits.gpus[{i}].type"), why));
                    }
                    let r = range(
                        &format!("spec.resourceLimits.gpus[{i}]"),
                        &RangeSpec {
                            min: g.min,
                            max: g.max,
                        },
                        1,
                    )?;
                    lim.gpus.push((ResourceName::parse(g.kind.trim()), r));
                }
            }
        }
        if let Some(d) = &s.scale_down {
            let sd = &mut o.scale_down;
            sd.enabled = d.enabled;
            let durations = [
                ("delayAfterAdd", &d.delay_after_add, &mut sd.delay_after_add),
                (
                    "delayAfterDelete",
                    &d.delay_after_delete,
                    &mut sd.delay_after_delete,
                ),
                (
                    "delayAfterFailure",
                    &d.delay_after_failure,
                    &mut sd.delay_after_failure,
                ),
                ("unneededTime", &d.unneeded_time, &mut sd.unneeded_time),
            ];
            for (name, text, slot) in durations {
                if let Some(t) = text {
                    *slot = duration(&format!("spec.scaleDown.{name}"), t)?;
                }
            }
            if let Some(t) = &d.utilization_threshold {
                let name = "spec.scaleDown.utilizationThreshold";
                let v: f64 = t
                    .trim()
                    .parse()
                    .map_err(|_| field(name, format!("{t:?} is not a number")))?;
                if !(0.0..=1.0).contains(&v) {
                    return Err(field(name, format!("{t:?} is not between 0 and 1")));
                }
                sd.utilization_threshold = v;
            }
        }
        if let Some(g) = s.max_pod_grace_period {
            o.scale_down.max_graceful_termination_sec = u64::try_from(g).map_err(|_| {
                field(
                    "spec.maxPodGracePeriod",
                    format!("{g} must not be negative"),
                )
            })?;
        }
        if let Some(t) = &s.max_node_provision_time {
            let d = duration("spec.maxNodeProvisionTime", t)?;
            if d.is_zero() {
                return Err(field(
                    "spec.maxNodeProvisionTime",
                    format!("{t:?} must be greater than 0"),
                ));
            }
            o.cluster_state.max_node_provision_time = d;
        }
        if let Some(b) = s.balance_similar_node_groups {
            o.scale_up.scale_up.balance_similar_node_groups = b;
        }
        if let Some(l) = &s.balancing_ignored_labels {
            o.scale_up.scale_up.balancing.ignored_labels = l.clone();
        }
        if let Some(b) = s.ignore_daemonsets_utilization {
            o.scale_down.utilization.ignore_daemonsets = b;
        }
        if let Some(b) = s.skip_nodes_with_local_storage {
            o.scale_down.drain.skip_nodes_with_local_storage = b;
        }
        if let Some(list) = &s.expanders {
            let mut names = Vec::with_capacity(list.len());
            for (i, n) in list.iter().enumerate() {
                names.push(expander_name(n).ok_or_else(|| {
                    field(
                        &format!("spec.expanders[{i}]"),
                        format!("{n:?} is not an expander (LeastWaste, Priority, Random)"),
                    )
                })?);
            }
            o.scale_up.expander =
                ExpanderChain::new(names).map_err(|e| field("spec.expanders", e.to_string()))?;
        }
        match s.log_verbosity {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{RunArgs, RunOptions};
    use clap::Parser;

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

    fn apply(text: &str) -> Result<(AutoscalerOptions, Option<u8>), ConfigFileError> {
        let r = parse(text)?;
        let mut o = AutoscalerOptions::default();
        let v = r.apply(&mut o)?;
        Ok((o, v))
    }

    #[test]
    fn seed_002_resource_maps_field_by_field() {
        let (o, v) = apply(SEED_002).unwrap();
        assert_eq!(v, Some(4));
        assert_eq!(o.scale_up.pending.expendable_pods_priority_cutoff, -10);
        let l = &o.scale_up.limits;
        assert_eq!(l.max_nodes_total, 24);
        assert_eq!(
            l.cpu,
            Range {
                min: 8000,
                max: 128_000
            }
        );
        assert_eq!(
            l.memory,
            Range {
                min: 4 * GIB,
                max: 256 * GIB
            }
        );
        assert_eq!(l.gpus.len(), 2);
        assert_eq!(l.gpus[0].0.to_string(), "nvidia.com/gpu");
        assert_eq!(l.gpus[0].1, Range { min: 0, max: 16 });
        assert_eq!(l.gpus[1].0.to_string(), "amd.com/gpu");
        assert_eq!(l.gpus[1].1, Range { min: 0, max: 4 });
        let sd = &o.scale_down;
        assert!(sd.enabled);
        assert_eq!(sd.delay_after_add, Duration::from_secs(600));
        assert_eq!(sd.delay_after_delete, Duration::from_secs(300));
        assert_eq!(sd.delay_after_failure, Duration::from_secs(30));
        assert_eq!(sd.unneeded_time, Duration::from_secs(300));
        assert_eq!(sd.utilization_threshold, 0.4);
        // Fields the resource does not give keep upstream's defaults.
        assert_eq!(sd.unready_time, Duration::from_secs(1200));
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
"#,
        )
        .unwrap();
        assert_eq!(v, None);
        assert_eq!(o.scale_down.max_graceful_termination_sec, 60);
        assert_eq!(
            o.cluster_state.max_node_provision_time,
            Duration::from_secs(1200)
        );
        assert!(o.scale_up.scale_up.balance_similar_node_groups);
        assert_eq!(
            o.scale_up.scale_up.balancing.ignored_labels,
            ["zone", "rack"]
        );
        assert!(o.scale_down.utilization.ignore_daemonsets);
        assert!(!o.scale_down.drain.skip_nodes_with_local_storage);
        assert_eq!(o.scale_up.expander.to_string(), "priority,least-waste");
        assert!(!o.scale_down.enabled);
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
                "spec:\n  resourceLimits:\n    gpus: [{type: a/b/c, min: 0, max: 1}]\n",
                "spec.resourceLimits.gpus[0].type",
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
            let e = apply(&format!("{head}{body}")).unwrap_err().to_string();
            assert!(e.contains(name), "{body}: {e}");
            assert!(e.contains(what), "{body}: {e}");
        }
        let e = apply("apiVersion: v1\nkind: ClusterAutoscaler\n").unwrap_err();
        assert!(e.to_string().contains("apiVersion"), "{e}");
        let e = apply("apiVersion: autoscaling.openshift.io/v1\nkind: MachineAutoscaler\n")
            .unwrap_err();
        assert!(e.to_string().contains("kind"), "{e}");
        let e = apply("{ not yaml").unwrap_err();
        assert!(matches!(e, ConfigFileError::Parse { .. }), "{e}");
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
        assert_eq!(a.scale_down.unneeded_time, Duration::from_secs(420));
        assert_eq!(a.scale_up.limits.max_nodes_total, 50);
        assert_eq!(o.verbosity, 2);
        assert!(!a.scale_down.enabled);
        assert_eq!(
            a.scale_up.limits.cpu,
            Range {
                min: 0,
                max: 64_000
            }
        );
        // From the file, where no flag was given.
        assert_eq!(a.scale_down.delay_after_delete, Duration::from_secs(300));
        assert_eq!(a.scale_down.utilization_threshold, 0.4);
        assert_eq!(a.scale_up.limits.memory.max, 256 * GIB);
        // Neither: upstream's default.
        assert_eq!(a.scale_down.unready_time, Duration::from_secs(1200));
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
        let e = r.apply(&mut AutoscalerOptions::default()).unwrap_err();
        assert!(e.to_string().contains("spec.logVerbosity"), "{e}");
        std::fs::write(&p, "kind: [").unwrap();
        let e = load(&p).unwrap_err();
        assert!(e.to_string().contains("bad.yaml"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

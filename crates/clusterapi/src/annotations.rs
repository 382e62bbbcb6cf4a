//! Reading the autoscaler's annotations on a scalable resource: size bounds, per-group option
//! overrides, and the `capacity.cluster-autoscaler.kubernetes.io/*` annotations that describe a
//! node for scaling from zero.
//!
//! It decides whether each text is acceptable and what it means. A malformed value never
//! panics: bounds problems reject the group (with a warning naming the object and the
//! annotation), option and capacity problems drop that one value with a warning.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use autoscaler_model::CsiNode;
use autoscaler_model::HOSTNAME_LABEL;
use autoscaler_model::Labels;
use autoscaler_model::Node;
use autoscaler_model::NodeCondition;
use autoscaler_model::Sym;
use autoscaler_model::parse_duration;
use autoscaler_model::{NodeGroupOptions, NodeGroupOptionsError};
use autoscaler_model::{ResourceName, Resources};
use autoscaler_model::{Taint, TaintEffect};
use autoscaler_model::{parse_milli, parse_units};
use serde_json::Value;

/// Prefix of the scale-from-zero capacity annotations.
pub const CAPACITY_PREFIX: &str = "capacity.cluster-autoscaler.kubernetes.io/";
/// CPU of a node of the group (a quantity).
pub const CPU_KEY: &str = "capacity.cluster-autoscaler.kubernetes.io/cpu";
/// Memory of a node of the group (a quantity).
pub const MEMORY_KEY: &str = "capacity.cluster-autoscaler.kubernetes.io/memory";
/// Ephemeral storage of a node of the group (a quantity).
pub const EPHEMERAL_DISK_KEY: &str = "capacity.cluster-autoscaler.kubernetes.io/ephemeral-disk";
/// Pods a node of the group accepts (an integer; 110 when absent).
pub const MAX_PODS_KEY: &str = "capacity.cluster-autoscaler.kubernetes.io/maxPods";
/// The GPU resource name (`nvidia.com/gpu`).
pub const GPU_TYPE_KEY: &str = "capacity.cluster-autoscaler.kubernetes.io/gpu-type";
/// GPUs per node (an integer).
pub const GPU_COUNT_KEY: &str = "capacity.cluster-autoscaler.kubernetes.io/gpu-count";
/// Node labels, `k=v,k2=v2`.
pub const LABELS_KEY: &str = "capacity.cluster-autoscaler.kubernetes.io/labels";
/// Node taints, `k=v:Effect,k2:Effect`.
pub const TAINTS_KEY: &str = "capacity.cluster-autoscaler.kubernetes.io/taints";
/// Annotation: the CSI drivers of a new node and their attach limits, `driver=count` pairs
/// separated by commas (`ebs.csi.aws.com=25`).
pub const CSI_DRIVER_KEY: &str = "capacity.cluster-autoscaler.kubernetes.io/csi-driver";
/// OpenShift's CPU of a node of the MachineSet, in cores (an integer or a quantity).
pub const OPENSHIFT_CPU_KEY: &str = "machine.openshift.io/vCPU";
/// OpenShift's memory of a node of the MachineSet, in MiB (an integer).
pub const OPENSHIFT_MEMORY_KEY: &str = "machine.openshift.io/memoryMb";
/// OpenShift's GPUs per node (an integer; the GPUs are `nvidia.com/gpu`).
pub const OPENSHIFT_GPU_KEY: &str = "machine.openshift.io/GPU";
/// OpenShift's pods per node (an integer).
pub const OPENSHIFT_MAX_PODS_KEY: &str = "machine.openshift.io/maxPods";
/// The GPU resource OpenShift's `GPU` annotation counts.
pub const OPENSHIFT_GPU_TYPE: &str = "nvidia.com/gpu";
/// Pods per node when `maxPods` is not given.
pub const DEFAULT_MAX_PODS: i64 = 110;
/// `kubernetes.io/os` of templates.
pub const OS_LABEL: &str = "kubernetes.io/os";
/// `kubernetes.io/arch` of templates.
pub const ARCH_LABEL: &str = "kubernetes.io/arch";
/// The OS of templates.
pub const DEFAULT_OS: &str = "linux";

/// Label domains Cluster API propagates from a Machine to its Node.
const MANAGED_LABEL_DOMAINS: &[&str] = &["node-restriction.kubernetes.io", "node.cluster.x-k8s.io"];
/// Label prefix Cluster API propagates as is.
const NODE_ROLE_PREFIX: &str = "node-role.kubernetes.io";

/// The annotations of an object as text. Non-string values (a snapshot written by hand may
/// hold `max-size: 5`) are read as their JSON text.
pub(crate) fn annotations_of(obj: &Value) -> BTreeMap<String, String> {
    string_map(obj.pointer("/metadata/annotations"))
}

/// A JSON object of strings (labels, annotations) as text; other values become their JSON text.
pub(crate) fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(Value::Object(m)) = v {
        for (k, v) in m {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Null => continue,
                other => other.to_string(),
            };
            out.insert(k.clone(), text);
        }
    }
    out
}

/// `ann` with OpenShift's scale-from-zero annotations (`machine.openshift.io/vCPU`,
/// `memoryMb`, `GPU`, `maxPods`) read as the `capacity.cluster-autoscaler.kubernetes.io/*` ones
/// they stand for, where those are absent (the upstream key wins, as in OpenShift's own
/// autoscaler). `memoryMb` is in MiB; a value that is not an integer is dropped with a warning.
pub(crate) fn with_openshift_capacity(
    ann: &BTreeMap<String, String>,
    what: &str,
    warnings: &mut Vec<String>,
) -> BTreeMap<String, String> {
    let mut out = ann.clone();
    let given = |k: &str| ann.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
    let mut fill = |canonical: &str, value: String| {
        if given(canonical).is_none() {
            out.insert(canonical.to_string(), value);
        }
    };
    if let Some(v) = given(OPENSHIFT_CPU_KEY) {
        fill(CPU_KEY, v.to_string());
    }
    if let Some(v) = given(OPENSHIFT_MEMORY_KEY) {
        match v.parse::<i64>() {
            Ok(mib) if mib >= 0 => fill(MEMORY_KEY, format!("{mib}Mi")),
            _ => warnings.push(format!(
                "{what}: annotation {OPENSHIFT_MEMORY_KEY} is {v:?}: not a whole number of MiB; ignored"
            )),
        }
    }
    if let Some(v) = given(OPENSHIFT_GPU_KEY)
        && given(GPU_COUNT_KEY).is_none()
    {
        fill(GPU_COUNT_KEY, v.to_string());
        fill(GPU_TYPE_KEY, OPENSHIFT_GPU_TYPE.to_string());
    }
    if let Some(v) = given(OPENSHIFT_MAX_PODS_KEY) {
        fill(MAX_PODS_KEY, v.to_string());
    }
    out
}

/// Why a resource's size bounds are unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BoundsError {
    /// Only one of the two annotations is present.
    #[error("annotation {missing} is missing (both {missing} and {present} are needed)")]
    Missing {
        /// The absent key.
        missing: String,
        /// The present key.
        present: String,
    },
    /// The value is not a decimal integer.
    #[error("annotation {key} is {value:?}: not an integer")]
    NotInteger {
        /// Key.
        key: String,
        /// The value.
        value: String,
    },
    /// The value is negative.
    #[error("annotation {key} is {value}: negative")]
    Negative {
        /// Key.
        key: String,
        /// The value.
        value: i64,
    },
    /// min > max.
    #[error("min size {min} ({min_key}) is above max size {max} ({max_key})")]
    MinAboveMax {
        /// Min.
        min: usize,
        /// Max.
        max: usize,
        /// Min key.
        min_key: String,
        /// Max key.
        max_key: String,
    },
    /// max is 0: nothing to scale.
    #[error("annotation {key} is 0: the group could never have a node")]
    ZeroMax {
        /// Key.
        key: String,
    },
}

/// The `(min, max)` of a resource, `Ok(None)` when it carries neither annotation.
pub(crate) fn bounds(
    ann: &BTreeMap<String, String>,
    min_key: &str,
    max_key: &str,
) -> Result<Option<(usize, usize)>, BoundsError> {
    let (min, max) = match (ann.get(min_key), ann.get(max_key)) {
        (None, None) => return Ok(None),
        (Some(_), None) => {
            return Err(BoundsError::Missing {
                missing: max_key.into(),
                present: min_key.into(),
            });
        }
        (None, Some(_)) => {
            return Err(BoundsError::Missing {
                missing: min_key.into(),
                present: max_key.into(),
            });
        }
        (Some(a), Some(b)) => (size(min_key, a)?, size(max_key, b)?),
    };
    check_bounds(min, max, min_key, max_key).map(Some)
}

/// Checks min <= max and max > 0.
pub(crate) fn check_bounds(
    min: usize,
    max: usize,
    min_key: &str,
    max_key: &str,
) -> Result<(usize, usize), BoundsError> {
    if min > max {
        return Err(BoundsError::MinAboveMax {
            min,
            max,
            min_key: min_key.into(),
            max_key: max_key.into(),
        });
    }
    if max == 0 {
        return Err(BoundsError::ZeroMax {
            key: max_key.into(),
        });
    }
    Ok((min, max))
}

fn size(key: &str, text: &str) -> Result<usize, BoundsError> {
    let v: i64 = text.parse().map_err(|_| BoundsError::NotInteger {
        key: key.into(),
        value: text.into(),
    })?;
    usize::try_from(v).map_err(|_| BoundsError::Negative {
        key: key.into(),
        value: v,
    })
}

/// Per-group option overrides from `<prefix><name>` annotations; malformed or unknown ones are
/// reported in `warnings` (prefixed by `what`) and ignored.
pub(crate) fn options(
    ann: &BTreeMap<String, String>,
    prefix: &str,
    what: &str,
    warnings: &mut Vec<String>,
) -> NodeGroupOptions {
    let mut o = NodeGroupOptions::default();
    for (key, value) in ann.range(prefix.to_string()..) {
        let Some(name) = key.strip_prefix(prefix) else {
            break;
        };
        if name.is_empty() || value.is_empty() {
            continue;
        }
        let value = value.to_lowercase();
        // A malformed value is reported and ignored; the group keeps the cluster-wide value.
        let ratio = |o: NodeGroupOptions,
                     warnings: &mut Vec<String>,
                     set: fn(
            NodeGroupOptions,
            f64,
        ) -> Result<NodeGroupOptions, NodeGroupOptionsError>| {
            match value.trim().parse::<f64>().map(|f| set(o.clone(), f)) {
                Ok(Ok(o)) => o,
                _ => {
                    warnings.push(format!(
                        "{what}: annotation {key} is {value:?}: not a number between 0 and 1; ignored"
                    ));
                    o
                }
            }
        };
        let duration =
            |o: NodeGroupOptions,
             warnings: &mut Vec<String>,
             set: fn(NodeGroupOptions, Duration) -> NodeGroupOptions| {
                match parse_duration(&value) {
                    Ok(d) => set(o, d),
                    Err(e) => {
                        warnings.push(format!("{what}: annotation {key}: {e}; ignored"));
                        o
                    }
                }
            };
        o = match name {
            "scaledownutilizationthreshold" => ratio(
                o,
                warnings,
                NodeGroupOptions::with_scale_down_utilization_threshold,
            ),
            "scaledowngpuutilizationthreshold" => ratio(
                o,
                warnings,
                NodeGroupOptions::with_scale_down_gpu_utilization_threshold,
            ),
            "scaledownunneededtime" => {
                duration(o, warnings, NodeGroupOptions::with_scale_down_unneeded_time)
            }
            "scaledownunreadytime" => {
                duration(o, warnings, NodeGroupOptions::with_scale_down_unready_time)
            }
            "maxnodeprovisiontime" => {
                duration(o, warnings, NodeGroupOptions::with_max_node_provision_time)
            }
            _ => {
                warnings.push(format!(
                    "{what}: annotation {key} names an option this autoscaler does not support; ignored"
                ));
                o
            }
        };
    }
    o
}

/// The price of one node per hour from annotation `key`: `None` when absent or empty, and when
/// it is not a finite number >= 0 (with a warning naming `what` and the key: the group then has
/// no price, which the `price` expander reports, rather than a wrong one).
pub(crate) fn price(
    ann: &BTreeMap<String, String>,
    key: &str,
    what: &str,
    warnings: &mut Vec<String>,
) -> Option<f64> {
    let text = ann.get(key).map(|v| v.trim()).filter(|v| !v.is_empty())?;
    match text.parse::<f64>() {
        Ok(p) if p.is_finite() && p >= 0.0 => Some(p),
        _ => {
            warnings.push(format!(
                "{what}: annotation {key} is {text:?}: not a price per node-hour (a number >= 0); the group has no price"
            ));
            None
        }
    }
}

/// Consolidation's per-group settings (ours) from the `<group>/cluster-api-autoscaler-*`
/// annotations; malformed values are warned about and read on the safe side.
pub(crate) fn disruption(
    ann: &BTreeMap<String, String>,
    config: &crate::config::ClusterApiConfig,
    what: &str,
    warnings: &mut Vec<String>,
) -> autoscaler_model::GroupDisruption {
    let keys = [
        "consolidation",
        "disruption-budgets",
        "node-expire-after",
        "consolidation-min-node-age",
    ]
    .map(|s| config.disruption_key(s));
    let get = |i: usize| {
        let key: &str = &keys[i];
        ann.get(key)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
            .map(|v| (key, v))
    };
    let texts = autoscaler_model::DisruptionAnnotations {
        consolidation: get(0),
        budgets: get(1),
        expire_after: get(2),
        min_node_age: get(3),
    };
    autoscaler_model::group_disruption(texts, what, warnings)
}

/// What a scalable resource says about the nodes it creates.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct NodeShape {
    /// Labels the nodes will carry (template labels, then the `labels` annotation).
    pub labels: Vec<(String, String)>,
    /// Taints (template spec taints, overridden by the `taints` annotation per key and effect).
    pub taints: Vec<Taint>,
    /// Capacity, when both CPU and memory are given and valid.
    pub capacity: Option<Resources>,
    /// Whether any capacity annotation is present at all.
    pub has_capacity_annotations: bool,
    /// CSI drivers and attach limits (the `csi-driver` annotation), if given and valid.
    pub csi: Option<Arc<CsiNode>>,
}

/// Reads labels, taints and capacity of `obj`'s nodes; problems go to `warnings`.
pub(crate) fn node_shape(
    obj: &Value,
    ann: &BTreeMap<String, String>,
    what: &str,
    warnings: &mut Vec<String>,
) -> NodeShape {
    let mut shape = NodeShape {
        has_capacity_annotations: ann.keys().any(|k| k.starts_with(CAPACITY_PREFIX)),
        ..NodeShape::default()
    };

    // Labels: OpenShift copies the Machine spec's metadata labels to the Node; Cluster API
    // propagates only its managed domains from the Machine's own labels.
    let mut labels: BTreeMap<String, String> =
        string_map(obj.pointer("/spec/template/spec/metadata/labels"));
    for (k, v) in string_map(obj.pointer("/spec/template/metadata/labels")) {
        if is_managed_label(&k) {
            labels.insert(k, v);
        }
    }
    if let Some(text) = ann.get(LABELS_KEY) {
        for item in text.split(',').filter(|i| !i.trim().is_empty()) {
            match item.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => {
                    labels.insert(k.trim().to_string(), v.trim().to_string());
                }
                _ => warnings.push(format!(
                    "{what}: annotation {LABELS_KEY}: {item:?} is not key=value; ignored"
                )),
            }
        }
    }
    shape.labels = labels.into_iter().collect();

    // Taints: the template's spec, then the annotation replacing same key and effect.
    if let Some(list) = obj.pointer("/spec/template/spec/taints") {
        match list.as_array() {
            Some(items) => {
                for (i, t) in items.iter().enumerate() {
                    let key = t.get("key").and_then(Value::as_str).unwrap_or("");
                    let value = t.get("value").and_then(Value::as_str).unwrap_or("");
                    let effect = t
                        .get("effect")
                        .and_then(Value::as_str)
                        .and_then(TaintEffect::parse);
                    match effect {
                        Some(effect) if !key.is_empty() => shape.taints.push(Taint {
                            key: Sym::new(key),
                            value: Sym::new(value),
                            effect,
                        }),
                        _ => warnings.push(format!(
                            "{what}: spec.template.spec.taints[{i}] has no key or no valid effect; ignored"
                        )),
                    }
                }
            }
            None => warnings.push(format!(
                "{what}: spec.template.spec.taints is not a list; ignored"
            )),
        }
    }
    if let Some(text) = ann.get(TAINTS_KEY) {
        for item in text.split(',').filter(|i| !i.trim().is_empty()) {
            match parse_taint(item.trim()) {
                Some(t) => {
                    match shape
                        .taints
                        .iter_mut()
                        .find(|x| x.key == t.key && x.effect == t.effect)
                    {
                        Some(x) => *x = t,
                        None => shape.taints.push(t),
                    }
                }
                None => warnings.push(format!(
                    "{what}: annotation {TAINTS_KEY}: {item:?} is not key=value:Effect; ignored"
                )),
            }
        }
    }

    shape.capacity = capacity(ann, what, warnings);
    if let Some(text) = ann.get(CSI_DRIVER_KEY) {
        match CsiNode::from_annotation(text) {
            Ok(csi) => shape.csi = Some(Arc::new(csi)),
            Err(e) => warnings.push(format!(
                "{what}: annotation {CSI_DRIVER_KEY}: {e}; no CSI limits in the template"
            )),
        }
    }
    shape
}

fn is_managed_label(key: &str) -> bool {
    let domain = key.split('/').next().unwrap_or("");
    domain == NODE_ROLE_PREFIX
        || MANAGED_LABEL_DOMAINS
            .iter()
            .any(|d| domain == *d || domain.strip_suffix(d).is_some_and(|p| p.ends_with('.')))
}

/// `key=value:Effect` or `key:Effect`.
fn parse_taint(text: &str) -> Option<Taint> {
    let (kv, effect) = text.split_once(':')?;
    let effect = TaintEffect::parse(effect)?;
    let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
    if key.is_empty() || value.contains('=') || key.contains(char::is_whitespace) {
        return None;
    }
    Some(Taint {
        key: Sym::new(key),
        value: Sym::new(value),
        effect,
    })
}

/// The capacity the annotations describe, if CPU and memory are both present and valid.
fn capacity(
    ann: &BTreeMap<String, String>,
    what: &str,
    warnings: &mut Vec<String>,
) -> Option<Resources> {
    let get = |k: &str| ann.get(k).map(String::as_str).filter(|v| !v.is_empty());
    let mut bad = false;
    let mut quantity = |key: &str, milli: bool, warnings: &mut Vec<String>| -> i64 {
        let Some(text) = get(key) else { return 0 };
        let parsed = if milli {
            parse_milli(text)
        } else {
            parse_units(text)
        };
        match parsed {
            Ok(v) if v >= 0 => v,
            Ok(_) => {
                warnings.push(format!("{what}: annotation {key} is {text:?}: negative"));
                bad = true;
                0
            }
            Err(e) => {
                warnings.push(format!("{what}: annotation {key}: {e}"));
                bad = true;
                0
            }
        }
    };
    let cpu = quantity(CPU_KEY, true, warnings);
    let memory = quantity(MEMORY_KEY, false, warnings);
    let disk = quantity(EPHEMERAL_DISK_KEY, false, warnings);
    let mut integer = |key: &str, warnings: &mut Vec<String>| -> Option<i64> {
        let text = get(key)?;
        match text.parse::<i64>() {
            Ok(v) if v >= 0 => Some(v),
            _ => {
                warnings.push(format!(
                    "{what}: annotation {key} is {text:?}: not a non-negative integer"
                ));
                bad = true;
                None
            }
        }
    };
    let gpu_count = integer(GPU_COUNT_KEY, warnings).unwrap_or(0);
    let max_pods = integer(MAX_PODS_KEY, warnings)
        .filter(|&p| p > 0)
        .unwrap_or(DEFAULT_MAX_PODS);
    if bad {
        warnings.push(format!(
            "{what}: malformed capacity annotations: the group cannot scale from zero"
        ));
        return None;
    }
    if cpu == 0 && memory == 0 && get(EPHEMERAL_DISK_KEY).is_none() && get(GPU_COUNT_KEY).is_none()
    {
        return None;
    }
    if cpu == 0 || memory == 0 {
        warnings.push(format!(
            "{what}: scale from zero needs both {CPU_KEY} and {MEMORY_KEY}"
        ));
        return None;
    }
    let mut r = Resources {
        cpu,
        memory,
        ephemeral_storage: disk,
        pods: max_pods,
        ..Resources::default()
    };
    match (get(GPU_TYPE_KEY), gpu_count) {
        (_, 0) => {}
        (Some(t), n) => match ResourceName::parse(t) {
            name @ ResourceName::Extended(_) if !t.contains(char::is_whitespace) => r.set(name, n),
            _ => warnings.push(format!(
                "{what}: annotation {GPU_TYPE_KEY} is {t:?}: not an extended resource name; GPUs ignored"
            )),
        },
        // With a DRA driver the count describes the driver's devices, not a resource.
        (None, _) if crate::devices::names_dra_driver(ann) => {}
        (None, _) => warnings.push(format!(
            "{what}: annotation {GPU_COUNT_KEY} without {GPU_TYPE_KEY}: GPUs ignored"
        )),
    }
    Some(r)
}

/// The scale-from-zero template node of the group `group_id` built from `shape`, `None` when
/// the shape has no capacity.
pub(crate) fn template_node(group_id: &str, shape: &NodeShape, arch: &str) -> Option<Arc<Node>> {
    let capacity = shape.capacity.clone()?;
    let name = format!("template-node-for-{}", group_id.replace('/', "-"));
    let mut node = Node::new(&name);
    let mut labels: Vec<(&str, &str)> = vec![
        (ARCH_LABEL, arch),
        (OS_LABEL, DEFAULT_OS),
        (HOSTNAME_LABEL, name.as_str()),
    ];
    for (k, v) in &shape.labels {
        labels.push((k, v));
    }
    let mut l = Labels::new();
    for (k, v) in labels {
        l.insert(Sym::new(k), Sym::new(v));
    }
    node.labels = l;
    node.taints = shape.taints.clone();
    node.allocatable = capacity.clone();
    node.capacity = capacity;
    node.csi = shape.csi.clone();
    node.conditions.push(NodeCondition {
        type_: Sym::new("Ready"),
        status: Sym::new("True"),
        last_transition_ms: None,
    });
    Some(Arc::new(node))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Consolidation's group annotations (ours) reach the group's options; a malformed one is
    /// a warning naming the object and the key, read on the safe side.
    #[test]
    fn consolidation_annotations_are_read_and_bad_ones_warned_about() {
        let config = crate::config::ClusterApiConfig::default();
        let k = |s: &str| config.disruption_key(s);
        assert_eq!(
            k("consolidation"),
            "cluster.x-k8s.io/cluster-api-autoscaler-consolidation"
        );
        let (mode, budgets, age) = (
            k("consolidation"),
            k("disruption-budgets"),
            k("consolidation-min-node-age"),
        );
        let a = ann(&[
            (mode.as_str(), "replace"),
            (budgets.as_str(), r#"[{"nodes": "1"}]"#),
            (age.as_str(), "ten minutes"),
        ]);
        let mut w = Vec::new();
        let d = disruption(&a, &config, "MachineDeployment ns/md", &mut w);
        assert_eq!(
            d.consolidation,
            Some(autoscaler_model::GroupConsolidation::Replace)
        );
        assert_eq!(d.allowed(10, 0), Some(1));
        assert_eq!(d.min_node_age, Some(std::time::Duration::MAX));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with(&format!("MachineDeployment ns/md: annotation {age}")),
            "{w:?}"
        );
        let mut w = Vec::new();
        assert!(disruption(&ann(&[]), &config, "md", &mut w).is_empty());
        assert!(w.is_empty());
    }

    #[test]
    fn price_is_a_non_negative_number_or_none_with_a_warning() {
        let k = "g/price";
        let mut w = Vec::new();
        assert_eq!(price(&ann(&[]), k, "md", &mut w), None);
        assert_eq!(price(&ann(&[(k, " ")]), k, "md", &mut w), None);
        assert_eq!(price(&ann(&[(k, "0.42")]), k, "md", &mut w), Some(0.42));
        assert_eq!(price(&ann(&[(k, "0")]), k, "md", &mut w), Some(0.0));
        assert!(w.is_empty(), "{w:?}");
        for bad in ["-1", "cheap", "NaN", "inf", "1e400"] {
            assert_eq!(price(&ann(&[(k, bad)]), k, "md", &mut w), None, "{bad}");
            let last = w.pop().expect("a warning");
            assert!(
                last.starts_with("md: annotation g/price is") && last.contains("not a price"),
                "{last}"
            );
        }
    }

    #[test]
    fn bounds_reject_malformed_negative_and_inverted() {
        let (mi, ma) = ("g/min", "g/max");
        assert_eq!(bounds(&ann(&[]), mi, ma), Ok(None));
        assert_eq!(
            bounds(&ann(&[(mi, "1"), (ma, "3")]), mi, ma),
            Ok(Some((1, 3)))
        );
        assert_eq!(
            bounds(&ann(&[(mi, "2"), (ma, "2")]), mi, ma),
            Ok(Some((2, 2)))
        );
        let e = bounds(&ann(&[(mi, "x"), (ma, "3")]), mi, ma).unwrap_err();
        assert_eq!(e.to_string(), "annotation g/min is \"x\": not an integer");
        let e = bounds(&ann(&[(mi, "-1"), (ma, "3")]), mi, ma).unwrap_err();
        assert!(matches!(e, BoundsError::Negative { .. }));
        let e = bounds(&ann(&[(mi, "4"), (ma, "3")]), mi, ma).unwrap_err();
        assert_eq!(
            e.to_string(),
            "min size 4 (g/min) is above max size 3 (g/max)"
        );
        let e = bounds(&ann(&[(ma, "3")]), mi, ma).unwrap_err();
        assert!(e.to_string().contains("g/min is missing"));
        let e = bounds(&ann(&[(mi, "0"), (ma, "0")]), mi, ma).unwrap_err();
        assert!(matches!(e, BoundsError::ZeroMax { .. }));
        assert!(bounds(&ann(&[(mi, " 1"), (ma, "3")]), mi, ma).is_err());
    }

    #[test]
    fn options_override_and_malformed_ones_are_dropped_with_a_warning() {
        let p = "g/autoscaling-options-";
        let a = ann(&[
            ("g/autoscaling-options-scaledownutilizationthreshold", "0.3"),
            (
                "g/autoscaling-options-scaledowngpuutilizationthreshold",
                "7",
            ),
            ("g/autoscaling-options-scaledownunneededtime", "5M"),
            ("g/autoscaling-options-scaledownunreadytime", "nope"),
            ("g/autoscaling-options-maxnodeprovisiontime", "20m0s"),
            ("g/autoscaling-options-whatever", "1"),
            ("h/other", "1"),
        ]);
        let mut w = Vec::new();
        let o = options(&a, p, "MachineSet ns/x", &mut w);
        assert_eq!(o.scale_down_utilization_threshold(), Some(0.3));
        assert_eq!(o.scale_down_gpu_utilization_threshold(), None);
        // Values are lowercased, as upstream does.
        assert_eq!(
            o.scale_down_unneeded_time(),
            Some(std::time::Duration::from_secs(300))
        );
        assert_eq!(o.scale_down_unready_time(), None);
        assert_eq!(
            o.max_node_provision_time(),
            Some(std::time::Duration::from_secs(1200))
        );
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(
            w.iter()
                .all(|m| m.starts_with("MachineSet ns/x: annotation g/autoscaling-options-"))
        );
    }

    #[test]
    fn capacity_annotations_give_a_template() {
        let obj = json!({"spec": {"template": {
            "metadata": {"labels": {"node-role.kubernetes.io/worker": "", "cluster.x-k8s.io/deployment-name": "md"}},
            "spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}}}});
        let a = ann(&[
            (CPU_KEY, "16"),
            (MEMORY_KEY, "128G"),
            (EPHEMERAL_DISK_KEY, "100Gi"),
            (GPU_TYPE_KEY, "nvidia.com/gpu"),
            (GPU_COUNT_KEY, "2"),
            (LABELS_KEY, "a=1,b=2"),
            (TAINTS_KEY, "dedicated=override:NoSchedule,k2:NoExecute,bad"),
        ]);
        let mut w = Vec::new();
        let s = node_shape(&obj, &a, "MD", &mut w);
        assert_eq!(w.len(), 1, "{w:?}");
        let n = template_node("MachineDeployment/ns/md", &s, "arm64").unwrap();
        assert_eq!(n.capacity.cpu, 16_000);
        assert_eq!(n.capacity.memory, 128_000_000_000);
        assert_eq!(n.capacity.ephemeral_storage, 100 << 30);
        assert_eq!(n.capacity.pods, 110);
        assert_eq!(n.allocatable.get(ResourceName::parse("nvidia.com/gpu")), 2);
        assert_eq!(n.labels.get_str("a"), Some("1"));
        assert_eq!(n.labels.get_str(ARCH_LABEL), Some("arm64"));
        assert_eq!(n.labels.get_str(OS_LABEL), Some("linux"));
        assert_eq!(n.labels.get_str("node-role.kubernetes.io/worker"), Some(""));
        assert_eq!(n.labels.get_str("cluster.x-k8s.io/deployment-name"), None);
        assert_eq!(n.taints.len(), 2);
        assert_eq!(n.taints[0].value.as_str(), "override");
        assert_eq!(n.taints[1].effect, TaintEffect::NoExecute);
        assert!(n.is_ready());
        assert_eq!(n.csi, None);
    }

    #[test]
    fn csi_driver_annotation_gives_the_template_attach_limits() {
        let a = ann(&[
            (CPU_KEY, "4"),
            (MEMORY_KEY, "16Gi"),
            (CSI_DRIVER_KEY, "ebs.csi.aws.com=25"),
        ]);
        let mut w = Vec::new();
        let s = node_shape(&json!({}), &a, "MD", &mut w);
        assert!(w.is_empty(), "{w:?}");
        let n = template_node("MachineDeployment/ns/md", &s, "amd64").unwrap();
        let csi = n.csi.as_ref().unwrap();
        assert_eq!(csi.limit(Sym::new("ebs.csi.aws.com")), Some(25));
        let bad = ann(&[
            (CPU_KEY, "4"),
            (MEMORY_KEY, "16Gi"),
            (CSI_DRIVER_KEY, "ebs"),
        ]);
        let s = node_shape(&json!({}), &bad, "MD", &mut w);
        assert_eq!(s.csi, None);
        assert!(w[0].contains("csi-driver"), "{w:?}");
    }

    #[test]
    fn openshift_capacity_annotations_stand_for_the_upstream_ones() {
        let a = ann(&[
            (OPENSHIFT_CPU_KEY, "8"),
            (OPENSHIFT_MEMORY_KEY, "32768"),
            (OPENSHIFT_GPU_KEY, "1"),
            (OPENSHIFT_MAX_PODS_KEY, "250"),
        ]);
        let mut w = Vec::new();
        let a = with_openshift_capacity(&a, "MS", &mut w);
        let s = node_shape(&json!({}), &a, "MS", &mut w);
        assert!(w.is_empty(), "{w:?}");
        let n = template_node("MachineSet/ns/ms", &s, "amd64").unwrap();
        assert_eq!(n.capacity.cpu, 8_000);
        assert_eq!(n.capacity.memory, 32_768 << 20);
        assert_eq!(n.capacity.pods, 250);
        assert_eq!(n.capacity.get(ResourceName::parse("nvidia.com/gpu")), 1);

        // The upstream keys win where both are given; a bad memoryMb is named and dropped.
        let a = ann(&[
            (OPENSHIFT_CPU_KEY, "8"),
            (CPU_KEY, "4"),
            (OPENSHIFT_MEMORY_KEY, "16Gi"),
            (MEMORY_KEY, "1Gi"),
            (OPENSHIFT_GPU_KEY, "2"),
            (GPU_TYPE_KEY, "amd.com/gpu"),
            (GPU_COUNT_KEY, "1"),
        ]);
        let mut w = Vec::new();
        let a = with_openshift_capacity(&a, "MS", &mut w);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains(OPENSHIFT_MEMORY_KEY) && w[0].contains("16Gi"),
            "{w:?}"
        );
        let s = node_shape(&json!({}), &a, "MS", &mut w);
        let n = template_node("MachineSet/ns/ms", &s, "amd64").unwrap();
        assert_eq!((n.capacity.cpu, n.capacity.memory), (4_000, 1 << 30));
        assert_eq!(n.capacity.get(ResourceName::parse("amd.com/gpu")), 1);
        assert_eq!(n.capacity.get(ResourceName::parse("nvidia.com/gpu")), 0);
    }

    #[test]
    fn capacity_needs_cpu_and_memory_and_valid_values() {
        let mut w = Vec::new();
        let s = node_shape(&json!({}), &ann(&[(CPU_KEY, "2")]), "MS", &mut w);
        assert!(s.capacity.is_none() && s.has_capacity_annotations);
        assert!(w[0].contains("needs both"));
        let mut w = Vec::new();
        let s = node_shape(
            &json!({}),
            &ann(&[(CPU_KEY, "2"), (MEMORY_KEY, "lots")]),
            "MS",
            &mut w,
        );
        assert!(s.capacity.is_none());
        assert!(w[0].contains(MEMORY_KEY), "{w:?}");
        let mut w = Vec::new();
        let s = node_shape(&json!({}), &ann(&[]), "MS", &mut w);
        assert!(s.capacity.is_none() && !s.has_capacity_annotations && w.is_empty());
    }
}

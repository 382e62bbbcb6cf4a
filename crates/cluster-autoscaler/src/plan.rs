//! `plan`: load a snapshot of Kubernetes objects from YAML and explain, for every pod not bound
//! to a node, where it would fit and why it would not fit elsewhere.
//!
//! Input and output only: the answers come from the core's snapshot and predicates.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, anyhow};
use autoscaler_core::node::Node;
use autoscaler_core::pod::{Pod, PodPhase};
use autoscaler_core::snapshot::ClusterSnapshot;
use k8s_openapi::api::core::v1 as corev1;

use crate::CliError;

/// Flags of `plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// YAML file with Kubernetes objects (Nodes, Pods, Namespaces; other kinds are ignored).
    /// Documents separated by `---`; `kind: List` objects are expanded.
    #[arg(long, value_name = "FILE")]
    pub snapshot: PathBuf,
    /// How many fitting nodes to name per pod.
    #[arg(long, default_value_t = 5)]
    pub show_nodes: usize,
}

/// Objects read from a snapshot file.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Nodes.
    pub nodes: Vec<Node>,
    /// Pods.
    pub pods: Vec<Pod>,
    /// Namespaces with their labels.
    pub namespaces: Vec<autoscaler_core::affinity::NamespaceLabels>,
    /// Count of objects of kinds `plan` does not use, by kind.
    pub ignored: BTreeMap<String, usize>,
}

/// Parses a YAML text into model objects. Errors name the document and the object.
pub fn load(text: &str) -> Result<Loaded, anyhow::Error> {
    let mut loaded = Loaded::default();
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = serde_json::Value::deserialize_yaml(doc)
            .with_context(|| format!("document {} is not valid YAML", i + 1))?;
        if value.is_null() {
            continue;
        }
        add_object(&mut loaded, value, &format!("document {}", i + 1))?;
    }
    Ok(loaded)
}

trait DeserializeYaml: Sized {
    fn deserialize_yaml(doc: serde_yaml_ng::Deserializer<'_>)
    -> Result<Self, serde_yaml_ng::Error>;
}

impl DeserializeYaml for serde_json::Value {
    fn deserialize_yaml(
        doc: serde_yaml_ng::Deserializer<'_>,
    ) -> Result<Self, serde_yaml_ng::Error> {
        serde::Deserialize::deserialize(doc)
    }
}

fn add_object(loaded: &mut Loaded, value: serde_json::Value, place: &str) -> anyhow::Result<()> {
    let kind = value
        .get("kind")
        .and_then(|k| k.as_str())
        .unwrap_or("")
        .to_string();
    let name = value
        .pointer("/metadata/name")
        .and_then(|n| n.as_str())
        .unwrap_or("<unnamed>")
        .to_string();
    match kind.as_str() {
        "List" | "PodList" | "NodeList" | "NamespaceList" => {
            let items = match value.get("items") {
                Some(serde_json::Value::Array(items)) => items.clone(),
                Some(serde_json::Value::Null) | None => Vec::new(),
                Some(_) => return Err(anyhow!("{place}: {kind}: field items is not a list")),
            };
            for (j, item) in items.into_iter().enumerate() {
                add_object(loaded, item, &format!("{place}, items[{j}]"))?;
            }
        }
        "Node" => {
            let obj: corev1::Node = serde_json::from_value(value)
                .with_context(|| format!("{place}: Node {name} does not match the Node schema"))?;
            loaded
                .nodes
                .push(Node::from_k8s(&obj).with_context(|| place.to_string())?);
        }
        "Pod" => {
            let obj: corev1::Pod = serde_json::from_value(value)
                .with_context(|| format!("{place}: Pod {name} does not match the Pod schema"))?;
            loaded
                .pods
                .push(Pod::from_k8s(&obj).with_context(|| place.to_string())?);
        }
        "Namespace" => {
            let obj: corev1::Namespace = serde_json::from_value(value).with_context(|| {
                format!("{place}: Namespace {name} does not match the Namespace schema")
            })?;
            loaded.namespaces.push(
                autoscaler_core::affinity::NamespaceLabels::from_k8s(&obj)
                    .with_context(|| place.to_string())?,
            );
        }
        "" => return Err(anyhow!("{place}: object {name} has no kind")),
        other => *loaded.ignored.entry(other.to_string()).or_default() += 1,
    }
    Ok(())
}

/// The explanation for one pending pod.
#[derive(Debug, PartialEq, Eq)]
pub struct PodVerdict {
    /// `namespace/name`.
    pub pod: String,
    /// Names of nodes it fits on, in snapshot order.
    pub fits: Vec<String>,
    /// Failure reasons (kube-scheduler text) and how many nodes gave each.
    pub reasons: BTreeMap<String, usize>,
    /// Number of nodes checked.
    pub nodes: usize,
}

impl PodVerdict {
    /// kube-scheduler's `FitError` sentence: `0/3 nodes are available: 2 Insufficient cpu, ...`.
    pub fn summary(&self) -> String {
        let mut s = format!("{}/{} nodes are available", self.fits.len(), self.nodes);
        if !self.reasons.is_empty() {
            s.push_str(": ");
            // kube-scheduler sorts the formatted "count reason" strings.
            let mut parts: Vec<String> = self
                .reasons
                .iter()
                .map(|(r, n)| format!("{n} {r}"))
                .collect();
            parts.sort();
            s.push_str(&parts.join(", "));
        }
        s.push('.');
        s
    }
}

/// Builds the snapshot from loaded objects and explains every pod not bound to a node.
/// Returns the verdicts and warnings about objects that were skipped.
pub fn explain(loaded: Loaded) -> (Vec<PodVerdict>, Vec<String>) {
    let mut warnings = Vec::new();
    let mut snapshot = ClusterSnapshot::new();
    snapshot.set_namespace_labels(loaded.namespaces);
    for node in loaded.nodes {
        let name = node.name;
        if let Err(e) = snapshot.add_node(Arc::new(node)) {
            warnings.push(format!("Node {name} skipped: {e}"));
        }
    }
    let mut pending = Vec::new();
    for pod in loaded.pods {
        if matches!(pod.phase, PodPhase::Succeeded | PodPhase::Failed) {
            continue;
        }
        match pod.node_name {
            None => pending.push(pod),
            Some(node) => match snapshot.node_id(node) {
                Some(id) => {
                    let key = pod.key();
                    if let Err(e) = snapshot.add_pod(Arc::new(pod), id) {
                        warnings.push(format!("Pod {key} skipped: {e}"));
                    }
                }
                None => warnings.push(format!(
                    "Pod {} skipped: bound to node {node}, which is not in the snapshot",
                    pod.key()
                )),
            },
        }
    }
    let ids: Vec<_> = snapshot.node_ids().collect();
    let verdicts = pending
        .iter()
        .map(|pod| {
            let prepared = snapshot.prepare(pod);
            let mut verdict = PodVerdict {
                pod: pod.key(),
                fits: Vec::new(),
                reasons: BTreeMap::new(),
                nodes: ids.len(),
            };
            for &id in &ids {
                match snapshot.check(pod, &prepared, id) {
                    Ok(()) => verdict.fits.push(
                        snapshot
                            .node(id)
                            .map(|n| n.node.name.to_string())
                            .unwrap_or_default(),
                    ),
                    Err(unfit) => {
                        for reason in unfit.reasons() {
                            *verdict.reasons.entry(reason).or_default() += 1;
                        }
                    }
                }
            }
            verdict
        })
        .collect();
    (verdicts, warnings)
}

/// Runs `plan`.
pub fn run(args: &PlanArgs) -> Result<(), CliError> {
    let text = std::fs::read_to_string(&args.snapshot)
        .with_context(|| format!("cannot read snapshot file {}", args.snapshot.display()))
        .map_err(CliError::usage)?;
    let loaded = load(&text)
        .with_context(|| format!("snapshot file {}", args.snapshot.display()))
        .map_err(CliError::usage)?;
    let ignored = loaded.ignored.clone();
    let (verdicts, warnings) = explain(loaded);
    print!(
        "{}",
        render(&verdicts, &warnings, &ignored, args.show_nodes)
    );
    Ok(())
}

fn render(
    verdicts: &[PodVerdict],
    warnings: &[String],
    ignored: &BTreeMap<String, usize>,
    show_nodes: usize,
) -> String {
    let mut out = String::new();
    for w in warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    if !ignored.is_empty() {
        let kinds: Vec<String> = ignored.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let _ = writeln!(
            out,
            "note: ignored objects of other kinds: {}",
            kinds.join(", ")
        );
    }
    if verdicts.is_empty() {
        let _ = writeln!(out, "No pod is waiting for a node.");
    }
    for v in verdicts {
        let _ = write!(out, "{}: {}", v.pod, v.summary());
        if !v.fits.is_empty() {
            let shown: Vec<&str> = v.fits.iter().take(show_nodes).map(String::as_str).collect();
            let more = v.fits.len().saturating_sub(shown.len());
            let _ = write!(out, " Fits on: {}", shown.join(", "));
            if more > 0 {
                let _ = write!(out, " and {more} more");
            }
            out.push('.');
        }
        out.push('\n');
    }
    out
}

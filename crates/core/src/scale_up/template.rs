//! Node templates: what a new node of each group would look like when it registers.
//!
//! Decides the template of a group: a sanitized copy of a healthy node of the group (a fresh
//! name and hostname label, the autoscaler's own taints, startup taints and node-condition taints
//! removed, Ready, schedulable) or, for a group with no usable node, the provider's template;
//! plus the DaemonSet pods that would start on it and the static (mirror) pods the source node
//! runs. It never invents capacity: a group with neither a node nor a provider template has no
//! template, and says so.

use autoscaler_model::{DELETION_CANDIDATE_TAINT, TO_BE_DELETED_TAINT, TO_BE_REPLACED_TAINT};
use std::sync::Arc;

use crate::scale_up::estimator::NodeTemplate;
use crate::scheduling::predicates::check_node_static;
use crate::scheduling::snapshot::NodeInfo;
use autoscaler_model::DaemonSet;
use autoscaler_model::HOSTNAME_LABEL;
use autoscaler_model::NodeGroup;
use autoscaler_model::Sym;
use autoscaler_model::TaintConfig;
use autoscaler_model::{Node, NodeCondition};
use autoscaler_model::{Pod, PodName};

pub use autoscaler_model::MIRROR_POD_ANNOTATION;

/// Taints the node lifecycle controller sets from node conditions: a fresh node does not carry
/// them once it is Ready.
const CONDITION_TAINTS: &[&str] = &[
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/unschedulable",
    "node.kubernetes.io/memory-pressure",
    "node.kubernetes.io/disk-pressure",
    "node.kubernetes.io/pid-pressure",
    "node.kubernetes.io/network-unavailable",
    "node.kubernetes.io/out-of-disk",
    "node.cloudprovider.kubernetes.io/uninitialized",
];

/// The daemon pod `ds` would run on `node`, bound to it and named `<daemonset>-<node>`, or `None`
/// when the node's labels or taints keep it off (the DaemonSet controller's own check: node
/// selector, required node affinity, taints).
pub fn daemon_pod_for(ds: &DaemonSet, node: &Node) -> Option<Pod> {
    check_node_static(&ds.pod, node).ok()?;
    let mut pod = ds.pod.clone();
    pod.name = PodName::from(format!("{}-{}", ds.name, node.name));
    pod.uid = Arc::from(format!("{}-{}", ds.pod.uid, node.name));
    pod.node_name = Some(node.name);
    pod.update_equivalence();
    Some(pod)
}

/// The daemon pods `daemonsets` would run on `node`.
pub fn daemon_pods_for(daemonsets: &[DaemonSet], node: &Node) -> Vec<Arc<Pod>> {
    daemonsets
        .iter()
        .filter_map(|ds| daemon_pod_for(ds, node))
        .map(Arc::new)
        .collect()
}

/// Options of template building.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TemplateOptions {
    /// Startup taints (`--startup-taint`, the older `--ignore-taint`) and status taints
    /// (`--status-taint`): both left out of templates; a node with a startup taint is no
    /// template source (it has not started).
    pub(crate) taints: TaintConfig,
}

/// Where a template came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateSource {
    /// A sanitized copy of this node of the group.
    Node(Sym),
    /// The provider's template (scale from zero).
    Provider,
}

/// Why a group has no template.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoTemplate {
    /// No healthy node and no provider template.
    #[error("no node template: the group has no healthy node and the provider gives no template")]
    Unavailable,
}

/// A group's template and where it came from.
#[derive(Clone, Debug)]
pub struct GroupTemplate {
    /// The template (node and daemon pods).
    pub template: NodeTemplate,
    /// Its source.
    pub source: TemplateSource,
}

/// Whether a node may serve as a template: Ready without a startup taint, not being deleted, not
/// cordoned, not marked for deletion by the autoscaler.
pub fn is_healthy_template_source(node: &Node, taints: &TaintConfig) -> bool {
    taints.is_started_ready(node.is_ready(), &node.taints)
        && node.deletion_ms.is_none()
        && !node.unschedulable
        && !node
            .taints
            .iter()
            .any(|t| t.key.as_str() == TO_BE_DELETED_TAINT)
}

/// Builds the template of `group`. `group_nodes` are the group's registered nodes with their
/// pods, in a stable order (the first healthy one is used, so the choice is deterministic).
pub fn build_template(
    group: &NodeGroup,
    group_nodes: &[&NodeInfo],
    daemonsets: &[DaemonSet],
    opts: &TemplateOptions,
) -> Result<GroupTemplate, NoTemplate> {
    let name = template_name(group);
    let (node, mirror_pods, source) = match group_nodes
        .iter()
        .find(|n| is_healthy_template_source(&n.node, &opts.taints))
    {
        Some(info) => {
            let mirrors: Vec<&Arc<Pod>> = info
                .pods
                .iter()
                .filter(|p| p.annotation(MIRROR_POD_ANNOTATION).is_some())
                .collect();
            (
                sanitize(&info.node, &name, opts),
                mirrors,
                TemplateSource::Node(info.node.name),
            )
        }
        None => match group.template() {
            Some(t) => (
                sanitize(t, &name, opts),
                Vec::new(),
                TemplateSource::Provider,
            ),
            None => return Err(NoTemplate::Unavailable),
        },
    };
    let mut pods = daemon_pods_for(daemonsets, &node);
    for m in mirror_pods {
        let mut p = (**m).clone();
        p.name = PodName::from(format!("{}-{}", m.name, node.name));
        p.node_name = Some(node.name);
        p.update_equivalence();
        pods.push(Arc::new(p));
    }
    Ok(GroupTemplate {
        template: NodeTemplate {
            node,
            daemonset_pods: pods,
        },
        source,
    })
}

/// A name no real node has: `template-node-for-<group id>` with `/` replaced.
fn template_name(group: &NodeGroup) -> String {
    format!(
        "template-node-for-{}",
        group.id().as_str().replace('/', "-")
    )
}

/// A copy of `node` as a brand-new node of its group would register.
pub fn sanitize(node: &Node, name: &str, opts: &TemplateOptions) -> Node {
    let mut n = node.clone();
    n.name = Sym::new(name);
    n.uid = Arc::from("");
    n.labels.insert(Sym::new(HOSTNAME_LABEL), n.name);
    n.annotations.clear();
    n.provider_id = None;
    n.unschedulable = false;
    n.creation_ms = None;
    n.deletion_ms = None;
    n.conditions = vec![NodeCondition {
        type_: Sym::new("Ready"),
        status: Sym::new("True"),
        last_transition_ms: None,
    }];
    n.taints.retain(|t| {
        let key = t.key.as_str();
        key != TO_BE_DELETED_TAINT
            && key != DELETION_CANDIDATE_TAINT
            && key != TO_BE_REPLACED_TAINT
            && !CONDITION_TAINTS.contains(&key)
            && !opts.taints.is_startup(key)
            && !opts.taints.is_status(key)
    });
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduling::snapshot::ClusterSnapshot;
    use autoscaler_model::NodeGroup;
    use autoscaler_model::TaintEffect;
    use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};

    fn logging() -> DaemonSet {
        let ds = serde_json::json!({
            "metadata": {"name": "fluentd", "namespace": "kube-system", "uid": "u1"},
            "spec": {
                "selector": {"matchLabels": {"app": "fluentd"}},
                "template": {
                    "metadata": {"labels": {"app": "fluentd"}},
                    "spec": {
                        "nodeSelector": {"kubernetes.io/os": "linux"},
                        "containers": [{"name": "f", "resources": {"requests": {"cpu": "100m", "memory": "200Mi"}}}]
                    }
                }
            }
        });
        DaemonSet::from_k8s(&serde_json::from_value(ds).unwrap()).unwrap()
    }

    #[test]
    fn daemon_pod_is_owned_bound_and_sized() {
        let node = NodeBuilder::new("n1", 4000, 16 * GI)
            .label("kubernetes.io/os", "linux")
            .build();
        let pod = daemon_pod_for(&logging(), &node).expect("runs on a linux node");
        assert_eq!(pod.node_name, Some(Sym::new("n1")));
        assert_eq!(&*pod.name, "fluentd-n1");
        assert_eq!(pod.requests.cpu, 100);
        assert_eq!(
            pod.owner.as_ref().map(|o| o.kind.as_str()),
            Some("DaemonSet")
        );
        assert_eq!(pod.labels.get_str("app"), Some("fluentd"));
    }

    #[test]
    fn node_selector_and_taints_decide_where_daemons_run() {
        let windows = NodeBuilder::new("w", 4000, 16 * GI)
            .label("kubernetes.io/os", "windows")
            .build();
        assert!(daemon_pod_for(&logging(), &windows).is_none());
        let tainted = NodeBuilder::new("t", 4000, 16 * GI)
            .label("kubernetes.io/os", "linux")
            .taint("dedicated", "gpu", TaintEffect::NoSchedule)
            .build();
        assert!(daemon_pod_for(&logging(), &tainted).is_none());
        // The controller's own tolerations: cordoned and not-ready nodes still get daemons.
        let cordoned = NodeBuilder::new("c", 4000, 16 * GI)
            .label("kubernetes.io/os", "linux")
            .unschedulable()
            .taint("node.kubernetes.io/not-ready", "", TaintEffect::NoExecute)
            .build();
        assert!(daemon_pod_for(&logging(), &cordoned).is_some());
        let pods = daemon_pods_for(&[logging()], &cordoned);
        assert_eq!(pods.len(), 1);
    }

    fn info_of(snap: &ClusterSnapshot, name: &str) -> NodeInfo {
        snap.node_by_name(Sym::new(name)).unwrap().clone()
    }

    #[test]
    fn template_from_a_healthy_node_is_sanitized() {
        let mut snap = ClusterSnapshot::new();
        let sick = NodeBuilder::new("ng1-sick", 4000, 16 * GI)
            .unschedulable()
            .arc();
        let good = NodeBuilder::new("ng1-a", 4000, 16 * GI)
            .label("pool", "general")
            .taint(TO_BE_DELETED_TAINT, "", TaintEffect::NoSchedule)
            .arc();
        // Still starting: a startup taint makes it no template source.
        let warming = NodeBuilder::new("ng1-warming", 4000, 16 * GI)
            .label("pool", "general")
            .taint(
                "startup-taint.cluster-autoscaler.kubernetes.io/cni",
                "",
                TaintEffect::NoSchedule,
            )
            .arc();
        let good2 = NodeBuilder::new("ng1-b", 4000, 16 * GI)
            .label("pool", "general")
            .taint(DELETION_CANDIDATE_TAINT, "", TaintEffect::PreferNoSchedule)
            .taint(TO_BE_REPLACED_TAINT, "", TaintEffect::NoSchedule)
            .taint(
                "status-taint.cluster-autoscaler.kubernetes.io/gpu-degraded",
                "",
                TaintEffect::NoSchedule,
            )
            .taint("example.com/degraded", "", TaintEffect::NoSchedule)
            .taint("node.kubernetes.io/not-ready", "", TaintEffect::NoExecute)
            .taint("dedicated", "batch", TaintEffect::NoSchedule)
            .arc();
        for n in [sick, good, warming, good2] {
            snap.add_node(n).unwrap();
        }
        let ids: Vec<_> = ["ng1-sick", "ng1-a", "ng1-warming", "ng1-b"]
            .iter()
            .map(|n| info_of(&snap, n))
            .collect();
        let refs: Vec<&NodeInfo> = ids.iter().collect();
        let opts = TemplateOptions {
            taints: TaintConfig::new(
                vec!["example.com/warming".into()],
                vec!["example.com/degraded".into()],
            )
            .unwrap(),
        };
        let t = build_template(
            &NodeGroup::new("MachineDeployment/ns/ng1", 0, 5, 3),
            &refs,
            &[],
            &opts,
        )
        .unwrap();
        // ng1-sick is cordoned, ng1-a is being deleted and ng1-warming has not started: ng1-b
        // is the source, without its status taints.
        assert_eq!(t.source, TemplateSource::Node(Sym::new("ng1-b")));
        let node = &t.template.node;
        assert_eq!(
            node.name.as_str(),
            "template-node-for-MachineDeployment-ns-ng1"
        );
        assert_eq!(
            node.labels.get_str(HOSTNAME_LABEL),
            Some(node.name.as_str())
        );
        assert_eq!(node.labels.get_str("pool"), Some("general"));
        let taints: Vec<&str> = node.taints.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(taints, ["dedicated"]);
        assert!(node.is_ready() && !node.unschedulable && node.provider_id.is_none());
    }

    #[test]
    fn startup_and_status_taints_of_a_provider_template_are_left_out() {
        let mut g = NodeGroup::new("ng0", 0, 5, 0);
        g = g.with_template(Some(
            NodeBuilder::new("whatever", 8000, 32 * GI)
                .taint("example.com/warming", "", TaintEffect::NoSchedule)
                .taint(
                    "ignore-taint.cluster-autoscaler.kubernetes.io/x",
                    "",
                    TaintEffect::NoSchedule,
                )
                .taint("example.com/degraded", "", TaintEffect::NoSchedule)
                .taint("gpu", "true", TaintEffect::NoSchedule)
                .arc(),
        ));
        let opts = TemplateOptions {
            taints: TaintConfig::new(
                vec!["example.com/warming".into()],
                vec!["example.com/degraded".into()],
            )
            .unwrap(),
        };
        let t = build_template(&g, &[], &[], &opts).unwrap();
        let taints: Vec<&str> = t
            .template
            .node
            .taints
            .iter()
            .map(|t| t.key.as_str())
            .collect();
        assert_eq!(taints, ["gpu"]);
        // Without the flags only the prefixed key goes.
        let t = build_template(&g, &[], &[], &TemplateOptions::default()).unwrap();
        assert_eq!(t.template.node.taints.len(), 3);
    }

    #[test]
    fn group_at_zero_uses_the_provider_template_and_daemon_pods() {
        let ds = DaemonSet::from_k8s(
            &serde_json::from_value(serde_json::json!({
                "metadata": {"name": "proxy", "namespace": "kube-system"},
                "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "p", "resources": {"requests": {"cpu": "100m"}}}]}}}
            }))
            .unwrap(),
        )
        .unwrap();
        let mut g = NodeGroup::new("ng0", 0, 5, 0);
        assert_eq!(
            build_template(&g, &[], &[], &TemplateOptions::default()).unwrap_err(),
            NoTemplate::Unavailable
        );
        g = g.with_template(Some(NodeBuilder::new("whatever", 8000, 32 * GI).arc()));
        let t = build_template(
            &g,
            &[],
            std::slice::from_ref(&ds),
            &TemplateOptions::default(),
        )
        .unwrap();
        assert_eq!(t.source, TemplateSource::Provider);
        assert_eq!(t.template.daemonset_pods.len(), 1);
        assert_eq!(
            t.template.daemonset_pods[0].node_name,
            Some(t.template.node.name)
        );
    }

    #[test]
    fn mirror_pods_of_the_source_node_are_copied() {
        let mut snap = ClusterSnapshot::new();
        let id = snap
            .add_node(NodeBuilder::new("n1", 4000, 16 * GI).arc())
            .unwrap();
        let mirror = PodBuilder::new("kube-proxy-n1", 100, 0)
            .namespace("kube-system")
            .node_name("n1")
            .with(|p| p.annotations = vec![(Arc::from(MIRROR_POD_ANNOTATION), Arc::from("x"))])
            .arc();
        let app = PodBuilder::new("app", 1000, GI).node_name("n1").arc();
        snap.add_pod(mirror, id).unwrap();
        snap.add_pod(app, id).unwrap();
        let info = info_of(&snap, "n1");
        let t = build_template(
            &NodeGroup::new("g", 0, 3, 1),
            &[&info],
            &[],
            &TemplateOptions::default(),
        )
        .unwrap();
        assert_eq!(
            t.template.daemonset_pods.len(),
            1,
            "only the mirror pod, not the app pod"
        );
        assert_eq!(t.template.daemonset_pods[0].requests.cpu, 100);
    }
}

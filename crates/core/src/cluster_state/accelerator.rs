//! Accelerator readiness: a node whose group promises accelerators it does not advertise yet.
//!
//! A GPU node joins Ready long before its device plugin (or driver installer) has started: for a
//! minute or more its allocatable has no `nvidia.com/gpu`. Upstream's GPU custom-resources
//! processor treats such a node as not ready (it replaces the node by a copy whose `Ready`
//! condition is `False` since the node's creation), so the node counts as not started within
//! `--max-node-startup-time` (upcoming: the pods waiting for its GPUs cause no second scale-up)
//! and as unready after it. This module decides which nodes are in that state and gives the loop
//! those copies; everything downstream (cluster state, templates, scale-down, the simulation)
//! then treats them as any node that has not started.
//!
//! A node promises accelerators when it carries the provider's GPU label (upstream's rule, the
//! Cluster API provider's `cluster-api/accelerator`), or when its group's provider template (the
//! scale-from-zero capacity annotations or the infrastructure template's `status.capacity`) has
//! GPUs. It advertises them when its allocatable has a GPU resource (any `*/gpu`, or upstream's
//! `microsoft.com/directx`) above zero.
//!
//! It never changes a node that advertises its accelerators, never reads anything but the
//! view, and costs nothing on a cluster where no node qualifies (the view is used as is).

use std::sync::Arc;

use autoscaler_model::{
    CloudProvider, Node, NodeCondition, ResourceName, Resources, Sym, Taint, TaintEffect,
};

/// The taint the node lifecycle controller puts on a node whose `Ready` condition is not `True`:
/// the copy carries it too, so no simulated pod lands on a node that cannot run it yet.
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// DirectX devices, which upstream's GPU processor counts as GPUs beside `nvidia.com/gpu`.
const DIRECTX_RESOURCE: &str = "microsoft.com/directx";

/// Whether `resources` has any accelerator above zero.
pub fn has_accelerators(resources: &Resources) -> bool {
    resources
        .iter()
        .any(|(name, v)| v > 0 && is_accelerator(name))
}

fn is_accelerator(name: ResourceName) -> bool {
    name.is_gpu() || matches!(name, ResourceName::Extended(s) if s.as_str() == DIRECTX_RESOURCE)
}

/// Whether `node` promises accelerators and does not advertise them yet: it carries
/// `gpu_label` (the provider's GPU label, interned) or its group's provider template
/// (`group_template`) has accelerators, and its allocatable has none.
///
/// This is the one rule of accelerator readiness; a node waiting for other devices (a DRA
/// driver that has not published the node's ResourceSlices) joins it here.
pub fn lacks_promised_accelerators(
    node: &Node,
    gpu_label: Option<Sym>,
    group_template: Option<&Node>,
) -> bool {
    if has_accelerators(&node.allocatable) {
        return false;
    }
    let labelled = gpu_label.is_some_and(|l| node.labels.contains_key(l));
    labelled || group_template.is_some_and(|t| has_accelerators(&t.capacity))
}

/// The copy of `node` the loop sees while its accelerators are missing: its `Ready` condition
/// `False` since its creation (as upstream's copy), and the `not-ready` taint the node lifecycle
/// controller sets on such a node.
pub fn unready_copy(node: &Node) -> Node {
    let mut copy = node.clone();
    let ready = Sym::new("Ready");
    copy.conditions.retain(|c| c.type_ != ready);
    copy.conditions.insert(
        0,
        NodeCondition {
            type_: ready,
            status: Sym::new("False"),
            last_transition_ms: node.creation_ms,
        },
    );
    if !copy
        .taints
        .iter()
        .any(|t| t.key.as_str() == NOT_READY_TAINT)
    {
        copy.taints.push(Taint {
            key: Sym::new(NOT_READY_TAINT),
            value: Sym::new(""),
            effect: TaintEffect::NoSchedule,
        });
    }
    copy
}

/// The view's nodes with every node that lacks its promised accelerators replaced by its
/// [`unready_copy`], in the same order; `None` when no node qualifies (the view stands as is).
pub fn with_unready_accelerators(
    nodes: &[Arc<Node>],
    provider: &dyn CloudProvider,
) -> Option<Vec<Arc<Node>>> {
    // Looked up once: a label no object carries is not interned, and no node has it.
    let gpu_label = provider.gpu_label().and_then(Sym::lookup);
    let groups = provider.node_groups();
    // Which groups' templates promise accelerators, found once per loop.
    let promising: Vec<Option<&Node>> = groups
        .iter()
        .map(|g| {
            g.template()
                .map(|t| &**t)
                .filter(|t| has_accelerators(&t.capacity))
        })
        .collect();
    let any_template = promising.iter().any(Option::is_some);
    if gpu_label.is_none() && !any_template {
        return None;
    }
    let template_of = |node: &Node| {
        if !any_template {
            return None;
        }
        provider
            .node_group_of(node)
            .and_then(|g| promising.get(g).copied().flatten())
    };
    let lacking = |n: &Node| lacks_promised_accelerators(n, gpu_label, template_of(n));
    let first = nodes.iter().position(|n| lacking(n))?;
    let mut out = nodes.to_vec();
    for n in &mut out[first..] {
        if lacking(n) {
            *n = Arc::new(unready_copy(n));
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_model::testing::{GI, NodeBuilder};
    use autoscaler_model::{Instance, InstanceState, NodeGroup, StaticProvider};

    const LABEL: &str = "cluster-api/accelerator";

    /// A provider with one group `gpu` holding `ids`, the Cluster API GPU label, and `template`.
    struct Capi(StaticProvider);

    impl CloudProvider for Capi {
        fn node_groups(&self) -> &[NodeGroup] {
            self.0.node_groups()
        }
        fn node_group_of(&self, node: &Node) -> Option<usize> {
            self.0.node_group_of(node)
        }
        fn gpu_label(&self) -> Option<&str> {
            Some(LABEL)
        }
    }

    fn group(ids: &[&str], template: Option<Node>) -> StaticProvider {
        let mut g = NodeGroup::new("gpu", 0, 5, ids.len());
        g = g.with_instances(
            ids.iter()
                .map(|id| Instance {
                    id: Arc::from(format!("test:///{id}")),
                    state: InstanceState::Running,
                    error: None,
                })
                .collect(),
        );
        g = g.with_template(template.map(Arc::new));
        StaticProvider::new(vec![g])
    }

    fn node(name: &str) -> NodeBuilder {
        NodeBuilder::new(name, 8000, 32 * GI).with_provider_id(&format!("test:///{name}"))
    }

    /// Upstream: a node with the GPU label and no allocatable GPU (absent or zero) is not
    /// ready; with GPUs, or without the label, it is left alone.
    #[test]
    fn the_gpu_label_without_allocatable_gpus_is_unready() {
        let waiting = node("a").label(LABEL, "nvidia-t4").build();
        let zero = node("z")
            .label(LABEL, "nvidia-t4")
            .resource("nvidia.com/gpu", 0)
            .build();
        let ready = node("b")
            .label(LABEL, "nvidia-t4")
            .resource("nvidia.com/gpu", 1)
            .build();
        let directx = node("d")
            .label(LABEL, "x")
            .resource("microsoft.com/directx", 1)
            .build();
        let cpu = node("c").build();
        assert!(lacks_promised_accelerators(
            &waiting,
            Some(Sym::new(LABEL)),
            None
        ));
        assert!(lacks_promised_accelerators(
            &zero,
            Some(Sym::new(LABEL)),
            None
        ));
        assert!(!lacks_promised_accelerators(
            &ready,
            Some(Sym::new(LABEL)),
            None
        ));
        assert!(!lacks_promised_accelerators(
            &directx,
            Some(Sym::new(LABEL)),
            None
        ));
        assert!(!lacks_promised_accelerators(
            &cpu,
            Some(Sym::new(LABEL)),
            None
        ));
        // A provider without a GPU label promises nothing through labels.
        assert!(!lacks_promised_accelerators(&waiting, None, None));
    }

    /// Ours beyond upstream's label: a group whose provider template has GPUs promises them
    /// to every node of the group, labelled or not.
    #[test]
    fn a_template_with_gpus_promises_them_to_its_nodes() {
        let t = node("t").resource("nvidia.com/gpu", 2).build();
        let cpu_template = node("t").build();
        let plain = node("a").build();
        assert!(lacks_promised_accelerators(&plain, None, Some(&t)));
        assert!(!lacks_promised_accelerators(
            &plain,
            None,
            Some(&cpu_template)
        ));
    }

    /// The copy is what upstream's copy is (Ready False since creation, other conditions kept)
    /// plus the lifecycle controller's `not-ready` taint; nothing else changes.
    #[test]
    fn the_unready_copy_is_not_ready_since_creation_and_tainted() {
        let n = node("a")
            .label(LABEL, "nvidia-t4")
            .with(|n| {
                n.creation_ms = Some(5_000);
                n.conditions.push(NodeCondition {
                    type_: Sym::new("MemoryPressure"),
                    status: Sym::new("False"),
                    last_transition_ms: None,
                });
            })
            .build();
        let c = unready_copy(&n);
        assert!(n.is_ready() && !c.is_ready());
        assert_eq!(c.conditions[0].last_transition_ms, Some(5_000));
        assert_eq!(c.conditions.len(), 2);
        assert_eq!(c.taints.len(), 1);
        assert_eq!(c.taints[0].key.as_str(), NOT_READY_TAINT);
        assert_eq!(unready_copy(&c).taints.len(), 1, "tainted once");
        assert_eq!(
            (c.name, &c.labels, &c.allocatable),
            (n.name, &n.labels, &n.allocatable)
        );
    }

    #[test]
    fn only_lacking_nodes_are_replaced_and_a_plain_view_stands_as_is() {
        let nodes = vec![
            node("busy")
                .label(LABEL, "t4")
                .resource("nvidia.com/gpu", 1)
                .arc(),
            node("fresh").label(LABEL, "t4").arc(),
        ];
        let p = Capi(group(&["busy", "fresh"], None));
        let out = with_unready_accelerators(&nodes, &p).expect("one node replaced");
        assert!(Arc::ptr_eq(&out[0], &nodes[0]));
        assert!(!out[1].is_ready() && nodes[1].is_ready());
        // The same nodes under a provider with no GPU label and no GPU template: untouched.
        assert!(with_unready_accelerators(&nodes, &group(&["busy", "fresh"], None)).is_none());
        // A template with GPUs makes its group's unlabelled nodes wait too.
        let plain = vec![node("fresh").arc()];
        let t = node("t").resource("nvidia.com/gpu", 1).build();
        let out = with_unready_accelerators(&plain, &group(&["fresh"], Some(t))).unwrap();
        assert!(!out[0].is_ready());
    }

    /// The loop on the cluster: a busy GPU node, a second node of the group Ready for a
    /// minute and labelled but without `nvidia.com/gpu` yet, one pending 1-GPU pod.
    mod in_the_loop {
        use super::*;
        use crate::{Autoscaler, AutoscalerOptions, ClusterView, InFlight, LoopOutcome, Unlimited};
        use autoscaler_model::NoControllerLookup;
        use autoscaler_model::testing::PodBuilder;

        const NOW: i64 = 100 * 60 * 1000;

        fn gpu_pod(name: &str) -> PodBuilder {
            PodBuilder::new(name, 1000, GI)
                .owner("ReplicaSet", "train")
                .resource("nvidia.com/gpu", 1)
        }

        fn run(
            nodes: &[Arc<Node>],
            p: &Capi,
            pods: &[Arc<autoscaler_model::Pod>],
            now: i64,
        ) -> LoopOutcome {
            let view = ClusterView::of(nodes, pods, p);
            Autoscaler::new(AutoscalerOptions::default()).run_once(
                &view,
                &NoControllerLookup,
                InFlight::default(),
                now,
                &mut Unlimited,
            )
        }

        fn fresh(age_ms: i64) -> Arc<Node> {
            node("fresh")
                .label(LABEL, "nvidia-t4")
                .with(|n| n.creation_ms = Some(NOW - age_ms))
                .arc()
        }

        fn cluster(age_ms: i64) -> (Vec<Arc<Node>>, Vec<Arc<autoscaler_model::Pod>>) {
            let busy = node("busy")
                .label(LABEL, "nvidia-t4")
                .resource("nvidia.com/gpu", 1)
                .with(|n| n.creation_ms = Some(0))
                .arc();
            let pods = vec![
                gpu_pod("running").node_name("busy").arc(),
                gpu_pod("waiting").unschedulable().arc(),
            ];
            (vec![busy, fresh(age_ms)], pods)
        }

        /// No second scale-up, the fresh node upcoming and never unneeded.
        #[test]
        fn a_node_waiting_for_its_gpus_is_upcoming_not_unneeded() {
            let (nodes, pods) = cluster(60_000);
            let p = Capi(group(&["busy", "fresh"], None));
            let out = run(&nodes, &p, &pods, NOW);
            assert!(
                out.scale_up.result.increases.is_empty(),
                "{:?}",
                out.scale_up.result
            );
            let g = &out.status.groups[0];
            assert_eq!(
                (g.readiness.ready, g.readiness.not_started, g.upcoming),
                (1, 1, 1)
            );
            let fresh = Sym::new("fresh");
            assert!(!out.scale_down.unneeded.iter().any(|(n, _)| *n == fresh));
            assert!(!out.scale_down.soft_taint.contains(&fresh));
        }

        /// Past the startup time it is unready, as upstream counts it.
        #[test]
        fn past_the_startup_time_it_is_unready() {
            let (nodes, pods) = cluster(20 * 60 * 1000);
            let p = Capi(group(&["busy", "fresh"], None));
            let out = run(&nodes, &p, &pods, NOW);
            let g = &out.status.groups[0];
            assert_eq!((g.readiness.unready, g.readiness.not_started), (1, 0));
        }

        /// The group's only node waits for its GPUs: it is no template source, so the provider's
        /// template (with GPUs) is used; one pending pod waits for the upcoming node, the second
        /// grows the group by one (not "Insufficient nvidia.com/gpu").
        #[test]
        fn a_node_waiting_for_its_gpus_is_no_template_source() {
            let nodes = vec![fresh(60_000)];
            let pods = vec![
                gpu_pod("a").unschedulable().arc(),
                gpu_pod("b").unschedulable().arc(),
            ];
            let t = node("t").resource("nvidia.com/gpu", 1).build();
            let p = Capi(group(&["fresh"], Some(t)));
            let out = run(&nodes, &p, &pods, NOW);
            let inc = &out.scale_up.result.increases;
            assert_eq!(inc.len(), 1, "{:?}", out.scale_up.result);
            assert_eq!((inc[0].delta, inc[0].new_target), (1, 2));
        }
    }
}

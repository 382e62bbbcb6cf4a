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
//! DRA devices join the rule (upstream's DRA custom-resources processor): a node of a group whose
//! provider template carries ResourceSlices (the Cluster API `dra-driver` annotation) waits until
//! its DRA drivers have published its own: for each driver, as many complete pools as the
//! template has (upstream's DRA design: "it waits for the expected number of complete
//! ResourcePools from each driver", so a device the template names or describes otherwise than
//! the driver does not keep the node unready for good). On a server without the DRA API no
//! slice can ever appear, and the DRA part of the rule is off.
//!
//! It never changes a node that advertises its accelerators, never reads anything but the
//! view, and costs nothing on a cluster where no node qualifies (the view is used as is).

use std::sync::Arc;

use autoscaler_model::{
    CloudProvider, Dra, Node, NodeCondition, ResourceName, Resources, Sym, Taint, TaintEffect,
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

/// Whether the group's provider template (`group_template`) promises DRA devices: it carries
/// slices with a device at least.
pub fn promises_devices(group_template: &Node) -> bool {
    group_template
        .devices
        .as_ref()
        .is_some_and(|d| d.slices.iter().any(|s| !s.devices.is_empty()))
}

/// Whether `node` waits for DRA devices: its group's provider template (`group_template`)
/// carries pools of a driver of which the node has fewer complete pools yet (its own copies, or
/// those `dra` holds for its name). Always false when the server does not serve the DRA API.
pub fn lacks_promised_devices(node: &Node, dra: &Dra, group_template: Option<&Node>) -> bool {
    let Some(promised) = group_template.and_then(|t| t.devices.as_ref()) else {
        return false;
    };
    if !dra.is_available() {
        return false;
    }
    let own = match &node.devices {
        Some(d) => d.slices.as_slice(),
        None => dra.node_slices(node.name),
    };
    let (want, have) = (pools(&promised.slices), pools(own));
    want.chunk_by(|a, b| a.0 == b.0).any(|driver_pools| {
        let driver = driver_pools[0].0;
        have.iter().filter(|(d, _)| *d == driver).count() < driver_pools.len()
    })
}

/// The distinct (driver, pool) pairs of `slices` with devices (a pool may span several slices).
fn pools(slices: &[Arc<autoscaler_model::ResourceSlice>]) -> Vec<(Sym, &str)> {
    let mut pools: Vec<(Sym, &str)> = slices
        .iter()
        .filter(|s| !s.devices.is_empty())
        .map(|s| (s.driver, &*s.pool))
        .collect();
    pools.sort_unstable();
    pools.dedup();
    pools
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

/// The view's nodes with every node that lacks its promised accelerators (extended resources
/// or DRA devices, `dra` holding the published slices) replaced by its [`unready_copy`], in the
/// same order; `None` when no node qualifies (the view stands as is).
pub fn with_unready_accelerators(
    nodes: &[Arc<Node>],
    provider: &dyn CloudProvider,
    dra: &Dra,
) -> Option<Vec<Arc<Node>>> {
    // Looked up once: a label no object carries is not interned, and no node has it.
    let gpu_label = provider.gpu_label().and_then(Sym::lookup);
    let groups = provider.node_groups();
    // Which groups' templates promise accelerators or devices, found once per loop.
    let promising: Vec<Option<&Node>> = groups
        .iter()
        .map(|g| {
            g.template()
                .map(|t| &**t)
                .filter(|t| has_accelerators(&t.capacity) || promises_devices(t))
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
    let lacking = |n: &Node| {
        let t = template_of(n);
        lacks_promised_accelerators(n, gpu_label, t) || lacks_promised_devices(n, dra, t)
    };
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
        let out =
            with_unready_accelerators(&nodes, &p, &Dra::default()).expect("one node replaced");
        assert!(Arc::ptr_eq(&out[0], &nodes[0]));
        assert!(!out[1].is_ready() && nodes[1].is_ready());
        // The same nodes under a provider with no GPU label and no GPU template: untouched.
        assert!(
            with_unready_accelerators(&nodes, &group(&["busy", "fresh"], None), &Dra::default())
                .is_none()
        );
        // A template with GPUs makes its group's unlabelled nodes wait too.
        let plain = vec![node("fresh").arc()];
        let t = node("t").resource("nvidia.com/gpu", 1).build();
        let out = with_unready_accelerators(&plain, &group(&["fresh"], Some(t)), &Dra::default())
            .unwrap();
        assert!(!out[0].is_ready());
    }

    fn gpu_slice(node: &str, driver: &str) -> autoscaler_model::ResourceSlice {
        autoscaler_model::ResourceSlice {
            name: Arc::from(format!("{node}-{driver}")),
            driver: Sym::new(driver),
            pool: Arc::from(node),
            generation: 1,
            slice_count: 1,
            reach: autoscaler_model::SliceReach::Node(Sym::new(node)),
            devices: vec![autoscaler_model::Device {
                name: Arc::from("gpu-0"),
                attributes: Vec::new(),
                capacity: Vec::new(),
            }],
        }
    }

    /// A template from the Cluster API `dra-driver` annotation: one slice of `gpu.nvidia.com`.
    fn dra_template() -> Node {
        node("t")
            .with(|n| {
                n.devices = Some(Arc::new(autoscaler_model::NodeDevices {
                    slices: vec![Arc::new(gpu_slice("t", "gpu.nvidia.com"))],
                }))
            })
            .build()
    }

    fn dra_with(slices: Vec<autoscaler_model::ResourceSlice>) -> Dra {
        let mut dra = Dra::default();
        dra.set_slices(slices);
        dra
    }

    /// Upstream's DRA processor: a node whose group template has slices is not ready until its
    /// driver has published its own; a slice of another driver does not count; a template
    /// without slices promises nothing; without the DRA API the rule is off.
    #[test]
    fn a_template_with_slices_makes_a_node_wait_for_its_own() {
        let t = dra_template();
        let n = node("a").build();
        assert!(lacks_promised_devices(&n, &Dra::default(), Some(&t)));
        let published = dra_with(vec![gpu_slice("a", "gpu.nvidia.com")]);
        assert!(!lacks_promised_devices(&n, &published, Some(&t)));
        let other_node = dra_with(vec![gpu_slice("b", "gpu.nvidia.com")]);
        assert!(lacks_promised_devices(&n, &other_node, Some(&t)));
        let other_driver = dra_with(vec![gpu_slice("a", "gpu.amd.com")]);
        assert!(lacks_promised_devices(&n, &other_driver, Some(&t)));
        assert!(!lacks_promised_devices(
            &n,
            &Dra::default(),
            Some(&node("t").build())
        ));
        assert!(!lacks_promised_devices(&n, &Dra::default(), None));
        assert!(!lacks_promised_devices(&n, &Dra::unserved(), Some(&t)));
        // A node carrying its own copies (made from a template) has them.
        let copy = node("c").with(|c| c.devices = t.devices.clone()).build();
        assert!(!lacks_promised_devices(&copy, &Dra::default(), Some(&t)));
    }

    /// Upstream's design: the node waits for as many complete pools of each driver as the
    /// template has, whatever the devices are named.
    #[test]
    fn a_node_waits_for_every_pool_the_template_has() {
        let pool = |node: &str, pool: &str| autoscaler_model::ResourceSlice {
            pool: Arc::from(pool),
            name: Arc::from(format!("{node}-{pool}")),
            ..gpu_slice(node, "gpu.nvidia.com")
        };
        let t = node("t")
            .with(|n| {
                n.devices = Some(Arc::new(autoscaler_model::NodeDevices {
                    slices: vec![Arc::new(pool("t", "p0")), Arc::new(pool("t", "p1"))],
                }))
            })
            .build();
        let n = node("a").build();
        let one = dra_with(vec![pool("a", "x")]);
        assert!(lacks_promised_devices(&n, &one, Some(&t)));
        let two = dra_with(vec![pool("a", "x"), pool("a", "y")]);
        assert!(!lacks_promised_devices(&n, &two, Some(&t)));
    }

    #[test]
    fn nodes_without_their_slices_are_replaced_in_the_view() {
        let nodes = vec![node("busy").arc(), node("fresh").arc()];
        let p = group(&["busy", "fresh"], Some(dra_template()));
        let dra = dra_with(vec![gpu_slice("busy", "gpu.nvidia.com")]);
        let out = with_unready_accelerators(&nodes, &p, &dra).expect("one node replaced");
        assert!(Arc::ptr_eq(&out[0], &nodes[0]));
        assert!(!out[1].is_ready());
        let both = dra_with(vec![
            gpu_slice("busy", "gpu.nvidia.com"),
            gpu_slice("fresh", "gpu.nvidia.com"),
        ]);
        assert!(with_unready_accelerators(&nodes, &p, &both).is_none());
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

        /// The DRA flavour: the group's template has a DRA driver's slice, `busy` has published
        /// its slice and `fresh` (a minute old) has not: `fresh` is upcoming, never unneeded.
        #[test]
        fn a_node_waiting_for_its_dra_slices_is_upcoming_not_unneeded() {
            let nodes = vec![
                node("busy").with(|n| n.creation_ms = Some(0)).arc(),
                node("fresh")
                    .with(|n| n.creation_ms = Some(NOW - 60_000))
                    .arc(),
            ];
            let p = Capi(group(&["busy", "fresh"], Some(dra_template())));
            let mut storage = autoscaler_model::Storage::default();
            storage.set_dra(Arc::new(dra_with(vec![gpu_slice(
                "busy",
                "gpu.nvidia.com",
            )])));
            let storage = Arc::new(storage);
            let view = ClusterView {
                storage: &storage,
                ..ClusterView::of(&nodes, &[], &p)
            };
            let out = Autoscaler::new(AutoscalerOptions::default()).run_once(
                &view,
                &NoControllerLookup,
                InFlight::default(),
                NOW,
                &mut Unlimited,
            );
            let g = &out.status.groups[0];
            assert_eq!(
                (g.readiness.ready, g.readiness.not_started, g.upcoming),
                (1, 1, 1)
            );
            let fresh = Sym::new("fresh");
            assert!(!out.scale_down.unneeded.iter().any(|(n, _)| *n == fresh));
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

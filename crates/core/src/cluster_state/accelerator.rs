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
//! template carries ResourceSlices waits until its DRA drivers have published its own: for each
//! driver, as many pools as the template has, each with at least as many devices as the
//! template's pool it stands for. Upstream's processor asks for the same device names in each
//! pool; we ask for the count only, so devices the template names otherwise than the driver
//! does (the Cluster API annotation cannot know the driver's names) do not keep the node unready
//! for good, while a driver that has published only part of a node's devices still does. The template
//! is the group's as the loop builds it: the provider's (the Cluster API `dra-driver`
//! annotation) when it has slices, as upstream; else, ours, the one built from a Ready node of
//! the group that has published its slices (the node with the most pools), which carries copies
//! of them. Upstream asks the provider only, and the Cluster API provider gives no template to
//! a group that is not at zero and has no annotation, so there a new node counts as started the
//! moment it is Ready and its pods cause a second scale-up. On a server without the DRA API no
//! slice can ever appear, and the DRA part of the rule is off.
//!
//! GPUs as extended resources keep upstream's rule (the label, or the provider template's
//! GPUs): a node advertising `nvidia.com/gpu` promises nothing to the group's unlabelled nodes.
//! The label is the provider's word that a node will have GPUs; DRA has no such label, so a
//! group's own nodes are the only witness when its provider has no template.
//!
//! It never changes a node that advertises its accelerators, never reads anything but the
//! view, and costs nothing on a cluster where no node qualifies (the view is used as is).

use std::sync::Arc;

use autoscaler_model::{
    CloudProvider, Dra, Node, NodeCondition, ResourceName, ResourceSlice, Resources, Sym, Taint,
    TaintEffect,
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

/// Whether `node` waits for DRA devices: its group's template promises slices (`promised`) with
/// pools of a driver of which the node has fewer complete pools yet (its own copies, or those
/// `dra` holds for its name). Always false when the server does not serve the DRA API.
pub fn lacks_promised_devices(
    node: &Node,
    dra: &Dra,
    promised: Option<&[Arc<ResourceSlice>]>,
) -> bool {
    let Some(promised) = promised else {
        return false;
    };
    if !dra.is_available() {
        return false;
    }
    let (want, have) = (pools(promised), pools(own_slices(node, dra)));
    want.chunk_by(|a, b| a.0 == b.0).any(|driver_pools| {
        let driver = driver_pools[0].0;
        let mut published: Vec<usize> = (have.iter())
            .filter(|(d, _)| *d == driver)
            .map(|(_, n)| *n)
            .collect();
        !covers(
            &mut published,
            driver_pools.iter().map(|(_, n)| *n).collect(),
        )
    })
}

/// Whether every promised pool (its device count) can be matched to a distinct published pool
/// of at least as many devices: both sorted largest first, pairwise.
fn covers(published: &mut [usize], mut promised: Vec<usize>) -> bool {
    if published.len() < promised.len() {
        return false;
    }
    published.sort_unstable_by(|a, b| b.cmp(a));
    promised.sort_unstable_by(|a, b| b.cmp(a));
    promised.iter().zip(published.iter()).all(|(p, h)| h >= p)
}

/// The slices `node` has: its own copies (a node made from a template), or those `dra` holds
/// for its name.
fn own_slices<'a>(node: &'a Node, dra: &'a Dra) -> &'a [Arc<ResourceSlice>] {
    match &node.devices {
        Some(d) => d.slices.as_slice(),
        None => dra.node_slices(node.name),
    }
}

/// The device count of each distinct (driver, pool) of `slices` with devices (a pool may span
/// several slices), sorted by driver.
fn pools(slices: &[Arc<ResourceSlice>]) -> Vec<(Sym, usize)> {
    let mut pools: Vec<(Sym, &str, usize)> = slices
        .iter()
        .filter(|s| !s.devices.is_empty())
        .map(|s| (s.driver, &*s.pool, s.devices.len()))
        .collect();
    pools.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    let mut out: Vec<(Sym, usize)> = Vec::with_capacity(pools.len());
    let mut last: Option<(Sym, &str)> = None;
    for (driver, pool, n) in pools {
        match out.last_mut() {
            Some(o) if last == Some((driver, pool)) => o.1 += n,
            _ => out.push((driver, n)),
        }
        last = Some((driver, pool));
    }
    out
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

/// What a group's template promises its nodes: the provider template's accelerators, and the
/// slices of the provider template or, failing those, of the group's Ready node with the most
/// pools.
#[derive(Clone, Copy, Default)]
struct Promise<'a> {
    gpu_template: Option<&'a Node>,
    slices: Option<&'a [Arc<ResourceSlice>]>,
}

impl Promise<'_> {
    fn is_some(&self) -> bool {
        self.gpu_template.is_some() || self.slices.is_some()
    }
}

/// Each group's promise (by group index), `None` when no group promises anything.
fn promises<'a>(
    nodes: &'a [Arc<Node>],
    provider: &'a dyn CloudProvider,
    dra: &'a Dra,
) -> Option<Vec<Promise<'a>>> {
    let mut out: Vec<Promise<'a>> = provider
        .node_groups()
        .iter()
        .map(|g| {
            let t = g.template().map(|t| &**t);
            Promise {
                gpu_template: t.filter(|t| has_accelerators(&t.capacity)),
                slices: t
                    .filter(|t| promises_devices(t))
                    .and_then(|t| t.devices.as_ref())
                    .map(|d| d.slices.as_slice()),
            }
        })
        .collect();
    // The template built from a node carries its slices: the group's Ready node with the most
    // pools speaks for a group whose provider template has none. Nothing to look at on a
    // cluster without DRA objects.
    if dra.is_available() && !dra.is_empty() {
        let from_provider: Vec<bool> = out.iter().map(|p| p.slices.is_some()).collect();
        let mut most = vec![0usize; out.len()];
        for node in nodes {
            let own = dra.node_slices(node.name);
            if own.iter().all(|s| s.devices.is_empty()) || !node.is_ready() {
                continue;
            }
            let Some(g) = provider
                .node_group_of(node)
                .filter(|&g| g < out.len() && !from_provider[g])
            else {
                continue;
            };
            let n = pools(own).len();
            if n > most[g] {
                (most[g], out[g].slices) = (n, Some(own));
            }
        }
    }
    out.iter().any(Promise::is_some).then_some(out)
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
    // What each group promises, found once per loop.
    let promised = promises(nodes, provider, dra);
    if gpu_label.is_none() && promised.is_none() {
        return None;
    }
    let promise_of = |node: &Node| match &promised {
        Some(p) => provider
            .node_group_of(node)
            .and_then(|g| p.get(g).copied())
            .unwrap_or_default(),
        None => Promise::default(),
    };
    let lacking = |n: &Node| {
        let p = promise_of(n);
        lacks_promised_accelerators(n, gpu_label, p.gpu_template)
            || lacks_promised_devices(n, dra, p.slices)
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

    /// The slices a template promises.
    fn slices_of(t: &Node) -> Option<&[Arc<autoscaler_model::ResourceSlice>]> {
        t.devices.as_ref().map(|d| d.slices.as_slice())
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
        assert!(lacks_promised_devices(&n, &Dra::default(), slices_of(&t)));
        let published = dra_with(vec![gpu_slice("a", "gpu.nvidia.com")]);
        assert!(!lacks_promised_devices(&n, &published, slices_of(&t)));
        let other_node = dra_with(vec![gpu_slice("b", "gpu.nvidia.com")]);
        assert!(lacks_promised_devices(&n, &other_node, slices_of(&t)));
        let other_driver = dra_with(vec![gpu_slice("a", "gpu.amd.com")]);
        assert!(lacks_promised_devices(&n, &other_driver, slices_of(&t)));
        assert!(!lacks_promised_devices(
            &n,
            &Dra::default(),
            slices_of(&node("t").build())
        ));
        assert!(!lacks_promised_devices(&n, &Dra::default(), None));
        assert!(!lacks_promised_devices(&n, &Dra::unserved(), slices_of(&t)));
        // A node carrying its own copies (made from a template) has them.
        let copy = node("c").with(|c| c.devices = t.devices.clone()).build();
        assert!(!lacks_promised_devices(
            &copy,
            &Dra::default(),
            slices_of(&t)
        ));
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
        assert!(lacks_promised_devices(&n, &one, slices_of(&t)));
        let two = dra_with(vec![pool("a", "x"), pool("a", "y")]);
        assert!(!lacks_promised_devices(&n, &two, slices_of(&t)));
    }

    /// A pool counts only once it has as many devices as the template's pool it stands for
    /// (upstream asks for the same device names; we ask for the count); a pool's devices may
    /// be spread over several slices.
    #[test]
    fn a_pool_with_fewer_devices_than_promised_keeps_the_node_waiting() {
        let slice = |node: &str, name: &str, count: i64, devices: &[&str]| {
            autoscaler_model::ResourceSlice {
                name: Arc::from(format!("{node}-{name}")),
                slice_count: count,
                devices: (devices.iter())
                    .map(|d| autoscaler_model::Device {
                        name: Arc::from(*d),
                        attributes: Vec::new(),
                        capacity: Vec::new(),
                    })
                    .collect(),
                ..gpu_slice(node, "gpu.nvidia.com")
            }
        };
        let t = node("t")
            .with(|n| {
                n.devices = Some(Arc::new(autoscaler_model::NodeDevices {
                    slices: vec![Arc::new(slice("t", "s0", 1, &["gpu-0", "gpu-1"]))],
                }))
            })
            .build();
        let n = node("a").build();
        let part = dra_with(vec![slice("a", "s0", 1, &["gpu-0"])]);
        assert!(lacks_promised_devices(&n, &part, slices_of(&t)));
        let renamed = dra_with(vec![slice("a", "s0", 1, &["nvidia-0", "nvidia-1"])]);
        assert!(!lacks_promised_devices(&n, &renamed, slices_of(&t)));
        let spread = dra_with(vec![
            slice("a", "s0", 2, &["gpu-0"]),
            slice("a", "s1", 2, &["gpu-1"]),
        ]);
        assert!(!lacks_promised_devices(&n, &spread, slices_of(&t)));
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

    /// Ours beyond upstream's provider template (a Cluster API group that is not at zero and has
    /// no `dra-driver` annotation has none): a Ready node of the group that has published its
    /// slices promises them to the group's other nodes, as the template the loop builds from it
    /// carries them. A node of no group is left alone.
    #[test]
    fn a_ready_node_with_its_slices_promises_them_to_its_group() {
        let nodes = vec![node("busy").arc(), node("fresh").arc(), node("stray").arc()];
        let p = group(&["busy", "fresh"], None);
        let dra = dra_with(vec![gpu_slice("busy", "gpu.nvidia.com")]);
        let out = with_unready_accelerators(&nodes, &p, &dra).expect("fresh waits for its slices");
        assert!(Arc::ptr_eq(&out[0], &nodes[0]));
        assert!(!out[1].is_ready(), "fresh has not published its slices");
        assert!(Arc::ptr_eq(&out[2], &nodes[2]), "stray is in no group");
        // Once its driver has published, the view stands; without the DRA API, too.
        let both = dra_with(vec![
            gpu_slice("busy", "gpu.nvidia.com"),
            gpu_slice("fresh", "gpu.nvidia.com"),
        ]);
        assert!(with_unready_accelerators(&nodes, &p, &both).is_none());
        assert!(with_unready_accelerators(&nodes, &p, &Dra::unserved()).is_none());
        // No node of the group has slices: nothing is promised.
        let other = dra_with(vec![gpu_slice("stray", "gpu.nvidia.com")]);
        assert!(with_unready_accelerators(&nodes, &p, &other).is_none());
    }

    /// The promise is the node of the group with the most pools (a node whose driver has
    /// published part of them promises no less than a complete one), and only a Ready node
    /// promises: a node that is no template source does not speak for the group.
    #[test]
    fn the_promise_is_the_fullest_ready_node_of_the_group() {
        let pool = |node: &str, pool: &str| autoscaler_model::ResourceSlice {
            pool: Arc::from(format!("{node}-{pool}")),
            name: Arc::from(format!("{node}-{pool}")),
            ..gpu_slice(node, "gpu.nvidia.com")
        };
        let nodes = vec![node("half").arc(), node("full").arc()];
        let p = group(&["half", "full"], None);
        let dra = dra_with(vec![
            pool("half", "p0"),
            pool("full", "p0"),
            pool("full", "p1"),
        ]);
        let out = with_unready_accelerators(&nodes, &p, &dra).expect("half waits");
        assert!(!out[0].is_ready() && Arc::ptr_eq(&out[1], &nodes[1]));
        // `full` is not Ready: `half` speaks for the group, and has what it promises.
        let down = node("full").not_ready().arc();
        let nodes = vec![nodes[0].clone(), down];
        assert!(with_unready_accelerators(&nodes, &p, &dra).is_none());
    }

    /// Extended-resource GPUs keep upstream's rule (the provider's GPU label, or ours: the
    /// provider template's GPUs): a group's node advertising `nvidia.com/gpu` promises nothing
    /// to an unlabelled node of the group, which may well have no GPU.
    #[test]
    fn a_node_with_gpus_promises_no_gpus_to_its_group() {
        let nodes = vec![
            node("busy").resource("nvidia.com/gpu", 1).arc(),
            node("fresh").arc(),
        ];
        let p = group(&["busy", "fresh"], None);
        assert!(with_unready_accelerators(&nodes, &p, &Dra::default()).is_none());
    }

    /// The loop on the cluster: a busy GPU node, a second node of the group Ready for a
    /// minute and labelled but without `nvidia.com/gpu` yet, one pending 1-GPU pod.
    mod in_the_loop {
        use super::*;
        use crate::{Autoscaler, AutoscalerOptions, ClusterView, LoopInput, LoopOutcome};
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
            Autoscaler::new(AutoscalerOptions::default()).run_once(LoopInput::new(&view, now))
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
            // Said as it is: not started, not "in no autoscaled group".
            let why = (out.scale_down.unremovable.iter()).find(|(n, _)| *n == fresh);
            assert_eq!(
                why.map(|(_, w)| w),
                Some(&crate::scale_down::Unremovable::NotStarted)
            );
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
            let out =
                Autoscaler::new(AutoscalerOptions::default()).run_once(LoopInput::new(&view, NOW));
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

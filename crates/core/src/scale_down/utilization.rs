//! Node utilization, as scale-down judges it: the larger of CPU and memory requests over
//! allocatable, or for GPU nodes the GPU requests over GPU allocatable, or for nodes with DRA
//! devices of their own the highest share of allocated devices among their pools, as upstream
//! judges them ([`with_devices`]).
//!
//! Decides only the number and which resource gave it; thresholds are applied by the caller.
//! It starts from the node's running sum of requests that the snapshot keeps, so with the default
//! options it reads no pod: at 15,000 nodes reading 450,000 pods' requests cost more than the
//! rest of scale-down's verdicts together (each pod is an allocation of its own). It never
//! changes the snapshot.

use crate::scale_down::drain::{is_daemonset_pod, is_mirror_pod};
use crate::scheduling::snapshot::{ClusterSnapshot, NodeId, NodeInfo};
use autoscaler_model::ResourceName;

/// Options of the utilization computation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UtilizationOptions {
    /// `--ignore-daemonsets-utilization`: DaemonSet pods do not count.
    pub(crate) ignore_daemonsets: bool,
    /// `--ignore-mirror-pods-utilization`: mirror (static) pods do not count.
    pub(crate) ignore_mirror_pods: bool,
}

/// A node's utilization.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Utilization {
    /// The deciding ratio (0.0 for an empty node; may exceed 1.0 on an over-committed node).
    pub value: f64,
    /// The resource that gave it: `cpu`, `memory` or a GPU resource.
    pub resource: ResourceName,
    /// Whether the node has GPUs (then the GPU threshold applies).
    pub gpu: bool,
}

fn ratio(requested: i64, allocatable: i64) -> f64 {
    if allocatable <= 0 {
        0.0
    } else {
        requested as f64 / allocatable as f64
    }
}

/// Computes the utilization of `info`'s node from the requests of the pods the snapshot holds on
/// it (its running sum), less DaemonSet and mirror pods when the options leave them out (only
/// then are the pods read). The snapshot holds no terminal pods: `build_snapshot` and the kept
/// snapshot leave them out, so they hold no resources here either.
pub fn utilization(info: &NodeInfo, opts: UtilizationOptions) -> Utilization {
    let mut requested = info.requested.clone();
    if opts.ignore_daemonsets || opts.ignore_mirror_pods {
        for pod in &info.pods {
            if (opts.ignore_daemonsets && is_daemonset_pod(pod))
                || (opts.ignore_mirror_pods && is_mirror_pod(pod))
            {
                requested.sub(&pod.requests);
            }
        }
    }
    let alloc = &info.node.allocatable;
    let gpu = alloc.iter().find(|(name, v)| name.is_gpu() && *v > 0);
    if let Some((name, total)) = gpu {
        return Utilization {
            value: ratio(requested.get(name), total),
            resource: name,
            gpu: true,
        };
    }
    let cpu = ratio(requested.cpu, alloc.cpu);
    let mem = ratio(requested.memory, alloc.memory);
    if mem > cpu {
        Utilization {
            value: mem,
            resource: ResourceName::Memory,
            gpu: false,
        }
    } else {
        Utilization {
            value: cpu,
            resource: ResourceName::Cpu,
            gpu: false,
        }
    }
}

/// `util` of node `id`, or for a node with DRA devices of its own (ResourceSlices published
/// for it by name) the highest share of allocated devices among its pools, named
/// `driver/pool`, as upstream judges such a node by its devices alone. The threshold that
/// applies stays the one `util` says (GPU or not).
pub fn with_devices(util: Utilization, snapshot: &ClusterSnapshot, id: NodeId) -> Utilization {
    match snapshot.device_utilization(id) {
        Some((value, pool)) => Utilization {
            value,
            resource: ResourceName::Extended(pool),
            gpu: util.gpu,
        },
        None => util,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};
    use std::sync::Arc;

    /// The utilization follows the snapshot's changes to the node: pods added and removed count
    /// as the sum of their requests, pod by pod.
    #[test]
    fn utilization_follows_pod_changes() {
        let mut snap = ClusterSnapshot::new();
        let id = snap
            .add_node(NodeBuilder::new("n", 4000, 8 * GI).arc())
            .expect("node");
        let opts = UtilizationOptions::default();
        let pods = [
            PodBuilder::new("a", 1000, GI).node_name("n").arc(),
            PodBuilder::new("b", 500, 6 * GI).node_name("n").arc(),
        ];
        let expected = [(0.0, ResourceName::Cpu), (0.25, ResourceName::Cpu)];
        let expected = expected.into_iter().chain([
            (7.0 / 8.0, ResourceName::Memory),
            (6.0 / 8.0, ResourceName::Memory),
        ]);
        for (step, (value, resource)) in expected.enumerate() {
            match step {
                1 => snap.add_pod(pods[0].clone(), id).expect("a"),
                2 => snap.add_pod(pods[1].clone(), id).expect("b"),
                3 => {
                    snap.remove_pod(id, pods[0].namespace, "a").expect("rm");
                }
                _ => {}
            }
            let u = utilization(snap.node(id).expect("live"), opts);
            assert!((u.value - value).abs() < 1e-9, "step {step}: {u:?}");
            assert_eq!(u.resource, resource, "step {step}");
        }
    }

    /// A terminal pod bound to the node holds no resources: the snapshot of a view leaves it out,
    /// so the node's utilization does not count it.
    #[test]
    fn terminal_pods_do_not_count() {
        use crate::autoscaler::{ClusterView, build_snapshot};
        use autoscaler_model::PodPhase;
        use autoscaler_model::StaticProvider;
        let nodes = [NodeBuilder::new("n", 1000, 4 * GI).arc()];
        let done = |phase| {
            PodBuilder::new("done", 700, GI)
                .node_name("n")
                .with(|p| p.phase = phase)
                .arc()
        };
        for phase in [PodPhase::Succeeded, PodPhase::Failed] {
            let pods = [
                PodBuilder::new("a", 200, GI).node_name("n").arc(),
                done(phase),
            ];
            let provider = StaticProvider::default();
            let snap = build_snapshot(&ClusterView::of(&nodes, &pods, &provider), &mut Vec::new());
            let info = snap.node_by_name(nodes[0].name).expect("node");
            let u = utilization(info, UtilizationOptions::default());
            assert!((u.value - 0.25).abs() < 1e-9, "{phase:?}: {u:?}");
        }
    }

    fn info(node: NodeBuilder, pods: Vec<PodBuilder>) -> NodeInfo {
        let mut s = ClusterSnapshot::new();
        let id = s.add_node(node.arc()).unwrap();
        for p in pods {
            s.add_pod(p.arc(), id).unwrap();
        }
        s.node(id).unwrap().clone()
    }

    #[test]
    fn the_larger_of_cpu_and_memory_decides() {
        let i = info(
            NodeBuilder::new("n", 1000, 4 * GI),
            vec![PodBuilder::new("a", 600, GI)],
        );
        let u = utilization(&i, UtilizationOptions::default());
        assert!((u.value - 0.6).abs() < 1e-9 && u.resource == ResourceName::Cpu && !u.gpu);
        let i = info(
            NodeBuilder::new("n", 1000, 4 * GI),
            vec![PodBuilder::new("a", 100, 3 * GI)],
        );
        let u = utilization(&i, UtilizationOptions::default());
        assert!((u.value - 0.75).abs() < 1e-9 && u.resource == ResourceName::Memory);
    }

    #[test]
    fn gpu_nodes_are_judged_by_gpu() {
        let i = info(
            NodeBuilder::new("g", 8000, 32 * GI).resource("nvidia.com/gpu", 4),
            vec![PodBuilder::new("t", 7000, GI).resource("nvidia.com/gpu", 1)],
        );
        let u = utilization(&i, UtilizationOptions::default());
        assert!(u.gpu && (u.value - 0.25).abs() < 1e-9);
        assert_eq!(u.resource, ResourceName::parse("nvidia.com/gpu"));
    }

    #[test]
    fn daemonset_and_mirror_pods_can_be_ignored() {
        let ds = PodBuilder::new("ds", 500, 0).owner("DaemonSet", "logs");
        let mirror = PodBuilder::new("m", 300, 0).with(|p| {
            p.annotations = vec![(
                Arc::from(autoscaler_model::MIRROR_POD_ANNOTATION),
                Arc::from("x"),
            )]
        });
        let i = info(NodeBuilder::new("n", 1000, GI), vec![ds, mirror]);
        assert!((utilization(&i, UtilizationOptions::default()).value - 0.8).abs() < 1e-9);
        let only_mirror = UtilizationOptions {
            ignore_daemonsets: true,
            ignore_mirror_pods: false,
        };
        assert!((utilization(&i, only_mirror).value - 0.3).abs() < 1e-9);
        let none = UtilizationOptions {
            ignore_daemonsets: true,
            ignore_mirror_pods: true,
        };
        assert_eq!(utilization(&i, none).value, 0.0);
    }
}

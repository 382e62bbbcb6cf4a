//! Node utilization, as scale-down judges it: the larger of CPU and memory requests over
//! allocatable, or for GPU nodes the GPU requests over GPU allocatable.
//!
//! Decides only the number and which resource gave it; thresholds are applied by the caller.

use crate::drain::{is_daemonset_pod, is_mirror_pod};
use crate::resources::{ResourceName, Resources};
use crate::snapshot::NodeInfo;

/// Options of the utilization computation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UtilizationOptions {
    /// `--ignore-daemonsets-utilization`: DaemonSet pods do not count.
    pub ignore_daemonsets: bool,
    /// `--ignore-mirror-pods-utilization`: mirror (static) pods do not count.
    pub ignore_mirror_pods: bool,
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

/// Computes the utilization of `info`'s node from its pods' requests (terminal pods do not hold
/// resources and are skipped).
pub fn utilization(info: &NodeInfo, opts: UtilizationOptions) -> Utilization {
    let mut requested = Resources::default();
    for pod in &info.pods {
        if pod.is_terminal()
            || (opts.ignore_daemonsets && is_daemonset_pod(pod))
            || (opts.ignore_mirror_pods && is_mirror_pod(pod))
        {
            continue;
        }
        requested.add(&pod.requests);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::ClusterSnapshot;
    use crate::testing::{GI, NodeBuilder, PodBuilder};
    use std::sync::Arc;

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
                Arc::from(crate::names::MIRROR_POD_ANNOTATION),
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

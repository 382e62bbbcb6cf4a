//! Node utilization, as scale-down judges it: the larger of CPU and memory requests over
//! allocatable, or for GPU nodes the GPU requests over GPU allocatable.
//!
//! Decides only the number and which resource gave it; thresholds are applied by the caller. A
//! memo keeps each node's utilization across passes while its object and pods stay the same.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::model::intern::Sym;
use crate::model::node::Node;
use crate::model::pod::Pod;
use crate::model::resources::{ResourceName, Resources};
use crate::scale_down::drain::{is_daemonset_pod, is_mirror_pod};
use crate::scheduling::snapshot::NodeInfo;

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

/// Per node name: the node's and its pods' addresses (the memo holds the `Arc`s, so they are
/// not reused) and options the utilization was computed with, and the result.
type UtilizationEntry = (Arc<Node>, Vec<Arc<Pod>>, UtilizationOptions, Utilization);

/// Utilizations of the last pass: a node whose object and pods (the same `Arc`s, in the same
/// order) did not change keeps its utilization without reading its pods again.
#[derive(Clone, Debug, Default)]
pub(super) struct UtilizationMemo {
    last: FxHashMap<Sym, UtilizationEntry>,
    next: FxHashMap<Sym, UtilizationEntry>,
}

impl UtilizationMemo {
    /// [`utilization`] of `info`, reused when nothing it reads changed since the last pass.
    pub(super) fn get(&mut self, info: &NodeInfo, opts: UtilizationOptions) -> Utilization {
        let name = info.node.name;
        let reused = self.last.remove(&name).filter(|(n, pods, o, _)| {
            *o == opts
                && Arc::ptr_eq(n, &info.node)
                && pods.len() == info.pods.len()
                && pods.iter().zip(&info.pods).all(|(a, b)| Arc::ptr_eq(a, b))
        });
        let entry = reused.unwrap_or_else(|| {
            (
                info.node.clone(),
                info.pods.clone(),
                opts,
                utilization(info, opts),
            )
        });
        let util = entry.3;
        self.next.insert(name, entry);
        util
    }

    /// Ends a pass: nodes not seen in it are forgotten.
    pub(super) fn end_pass(&mut self) {
        self.last = std::mem::take(&mut self.next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduling::snapshot::ClusterSnapshot;
    use crate::testing::{GI, NodeBuilder, PodBuilder};
    use std::sync::Arc;

    /// The memo gives what `utilization` computes, across pod changes on the same node.
    #[test]
    fn utilization_memo_follows_pod_changes() {
        let mut snap = ClusterSnapshot::new();
        let id = snap
            .add_node(NodeBuilder::new("n", 4000, 8 * GI).arc())
            .expect("node");
        let opts = UtilizationOptions::default();
        let mut memo = UtilizationMemo::default();
        let pods = [
            PodBuilder::new("a", 1000, GI).node_name("n").arc(),
            PodBuilder::new("b", 500, 6 * GI).node_name("n").arc(),
        ];
        for step in 0..4 {
            match step {
                1 => snap.add_pod(pods[0].clone(), id).expect("a"),
                2 => snap.add_pod(pods[1].clone(), id).expect("b"),
                3 => {
                    snap.remove_pod(id, pods[0].namespace, "a").expect("rm");
                }
                _ => {}
            }
            for _ in 0..2 {
                let info = snap.node(id).expect("live");
                assert_eq!(memo.get(info, opts), utilization(info, opts), "step {step}");
                memo.end_pass();
            }
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

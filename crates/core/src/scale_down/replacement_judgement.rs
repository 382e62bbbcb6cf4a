//! Whether a replacement lowers the price of the capacity the workload needs (ours).
//!
//! A replacement judged on one node's price alone fragments capacity: on the GPU replay an
//! 8-GPU node holding one small task was swapped for a 2-GPU node of a quarter of the price,
//! and when 8-GPU tasks came back new 8-GPU nodes were bought while the 2-GPU nodes stayed up
//! holding their tasks: one node got cheaper, the cluster's node-hours and cost rose. Both
//! shapes cost the same per GPU, the resource the workload was short of, so the swap bought
//! nothing but a smaller node.
//!
//! So a replacement is judged on the workload's mix: the cluster's requests summed per
//! resource (cpu, memory, extended resources such as GPUs; not the pod count) is the mix, and a
//! node holds `min over r of allocatable(r) / mix(r)` copies of it (the resource it runs out of
//! first binds). The replacement must cost strictly less per copy than the nodes it replaces
//! (their prices summed over their copies summed). A shape cheaper only because it lacks what
//! the workload keeps needing (fewer GPUs per price, no GPUs at all while GPU pods run) is
//! refused; a shape that is cheaper per unit of the binding resource passes (on a CPU-bound
//! load, two 64-CPU nodes by one 96-CPU node of a lower price per CPU).
//!
//! It reads only the snapshot's requests and the nodes' allocatable; it never decides a
//! deletion (a deletion frees capacity only where the pods fit elsewhere) and never looks at a
//! pod's future.

use autoscaler_model::{Node, ResourceName, Resources};

use crate::scheduling::snapshot::ClusterSnapshot;

/// The cluster's requests per resource (the workload's mix), as a replacement is judged on.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct WorkloadMix {
    /// Each requested resource (the pod count left out) with its total request, all positive.
    demand: Vec<(ResourceName, f64)>,
}

impl WorkloadMix {
    /// The mix of the pods on the snapshot's nodes.
    pub(crate) fn of(snapshot: &ClusterSnapshot) -> WorkloadMix {
        let mut total = Resources::default();
        for (_, info) in snapshot.nodes() {
            total.add(&info.requested);
        }
        WorkloadMix {
            demand: total
                .iter()
                .filter(|&(name, v)| name != ResourceName::Pods && v > 0)
                .map(|(name, v)| (name, v as f64))
                .collect(),
        }
    }

    /// How many copies of the mix `node` holds (0 if it lacks a resource the mix needs;
    /// infinite when nothing is requested).
    pub(crate) fn copies(&self, node: &Node) -> f64 {
        self.demand
            .iter()
            .map(|&(name, d)| node.allocatable.get(name).max(0) as f64 / d)
            .fold(f64::INFINITY, f64::min)
    }

    /// Whether one node `new` at `new_price` holds the mix for strictly less per copy than
    /// the `old` nodes (each with its price) together. With nothing requested, any cheaper
    /// node passes (there is no mix to judge by).
    pub(crate) fn cheaper_per_copy<'n>(
        &self,
        old: impl IntoIterator<Item = (f64, &'n Node)>,
        new_price: f64,
        new: &Node,
    ) -> bool {
        if self.demand.is_empty() {
            return true;
        }
        let (mut price, mut copies) = (0.0, 0.0);
        for (p, n) in old {
            price += p;
            copies += self.copies(n);
        }
        let new_copies = self.copies(new);
        if new_copies <= 0.0 {
            return false;
        }
        if copies <= 0.0 {
            // The old nodes hold none of the mix (they lack a resource it needs): any node
            // that holds some, for less, is better.
            return true;
        }
        // Compared without dividing: new_price / new_copies < price / copies, with a
        // relative margin so that equal prices per copy (as 4 × 6 against 24) never pass.
        new_price * copies < price * new_copies * (1.0 - 1e-9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};
    use std::sync::Arc;

    fn gpu_node(name: &str, cpu: i64, mem_gi: i64, gpus: i64) -> Node {
        NodeBuilder::new(name, cpu, mem_gi * GI)
            .resource("nvidia.com/gpu", gpus)
            .build()
    }

    fn snapshot_with(requests: &[(i64, i64, i64)]) -> ClusterSnapshot {
        let mut s = ClusterSnapshot::default();
        let id = s
            .add_node(Arc::new(gpu_node("big", 1_000_000, 100_000, 1000)))
            .unwrap();
        for (i, &(cpu, mem_gi, gpus)) in requests.iter().enumerate() {
            let mut p = PodBuilder::new(&format!("p{i}"), cpu, mem_gi * GI).build();
            if gpus > 0 {
                p.requests.set(ResourceName::parse("nvidia.com/gpu"), gpus);
            }
            s.add_pod(Arc::new(p), id).unwrap();
        }
        s
    }

    #[test]
    fn a_smaller_node_at_the_same_price_per_gpu_does_not_pass() {
        // GPU tasks of 8 cores and 32 GiB per GPU: the GPUs bind on both shapes.
        let mix = WorkloadMix::of(&snapshot_with(&[(8_000, 32, 1), (16_000, 64, 2)]));
        let eight = gpu_node("g8", 96_000, 384, 8);
        let two = gpu_node("g2", 104_000, 512, 2);
        assert!((mix.copies(&eight) / mix.copies(&two) - 4.0).abs() < 1e-9);
        // 24/h for 8 GPUs against 6/h for 2: the same 3 per GPU.
        assert!(!mix.cheaper_per_copy([(24.0, &eight)], 6.0, &two));
        // Cheaper per GPU passes.
        assert!(mix.cheaper_per_copy([(24.0, &eight)], 5.0, &two));
        // A CPU-only node holds none of a mix that needs GPUs.
        let cpu = NodeBuilder::new("c", 32_000, 256 * GI).build();
        assert_eq!(mix.copies(&cpu), 0.0);
        assert!(!mix.cheaper_per_copy([(24.0, &eight)], 1.5, &cpu));
    }

    #[test]
    fn on_a_cpu_bound_load_fewer_nodes_cheaper_per_cpu_pass() {
        // 1 core : 2 GiB, the CPUs bind on both shapes.
        let mix = WorkloadMix::of(&snapshot_with(&[(4_000, 8, 0), (2_000, 4, 0)]));
        let general = NodeBuilder::new("gen", 96_000, 384 * GI).build();
        let highmem = NodeBuilder::new("hm", 64_000, 512 * GI).build();
        // One general (4.6/h, 96 cores) for two highmem (8.0/h, 128 cores): cheaper per core.
        assert!(mix.cheaper_per_copy([(4.0, &highmem), (4.0, &highmem)], 4.6, &general));
        // One highmem for one general: cheaper per node, dearer per core.
        assert!(!mix.cheaper_per_copy([(4.6, &general)], 4.0, &highmem));
    }

    #[test]
    fn with_nothing_requested_any_cheaper_node_passes() {
        let mix = WorkloadMix::of(&ClusterSnapshot::default());
        let a = NodeBuilder::new("a", 8_000, 32 * GI).build();
        let b = NodeBuilder::new("b", 4_000, 16 * GI).build();
        assert!(mix.cheaper_per_copy([(2.0, &a)], 1.0, &b));
    }
}

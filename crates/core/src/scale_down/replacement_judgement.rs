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
//! first binds). When the replaced nodes have GPUs, the mix is that of the pods requesting
//! GPUs only: those nodes exist for them, and the CPU-only pods (which have cheaper shapes of
//! their own) would otherwise make the CPUs look binding; nodes without GPUs are judged on the
//! mix of the pods requesting none (they could hold no copy of a mix that needs GPUs). On the GPU replay, whenever CPU-only
//! tasks ran, the whole cluster's mix asked more than the 12 cores per GPU of an 8-GPU node, so
//! a 2-GPU node of 104 cores looked cheaper per copy at the same price per GPU: 3,321
//! node-hours of 2-GPU nodes were bought, each holding two 1-GPU tasks, where the GPU pods
//! alone ask about 10 cores per GPU and both shapes cost the same per copy. The replacement must cost strictly less per copy than the nodes it replaces
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
    /// The same for the pods that request GPUs (empty when none does).
    gpu_demand: Vec<(ResourceName, f64)>,
    /// The same for the pods that request no GPU (empty when none does).
    other_demand: Vec<(ResourceName, f64)>,
}

/// Each requested resource of `total` but the pod count, with its total, all positive.
fn positive(total: &Resources) -> Vec<(ResourceName, f64)> {
    total
        .iter()
        .filter(|&(name, v)| name != ResourceName::Pods && v > 0)
        .map(|(name, v)| (name, v as f64))
        .collect()
}

/// Whether `r` holds some GPUs.
fn has_gpus(r: &Resources) -> bool {
    r.iter().any(|(name, v)| name.is_gpu() && v > 0)
}

impl WorkloadMix {
    /// The mix of the pods on the snapshot's nodes.
    pub(crate) fn of(snapshot: &ClusterSnapshot) -> WorkloadMix {
        let mut total = Resources::default();
        let (mut gpu, mut other) = (Resources::default(), Resources::default());
        for (_, info) in snapshot.nodes() {
            total.add(&info.requested);
            for p in &info.pods {
                let part: &mut Resources = if has_gpus(&p.requests) {
                    &mut gpu
                } else {
                    &mut other
                };
                part.add(&p.requests);
            }
        }
        WorkloadMix {
            demand: positive(&total),
            gpu_demand: positive(&gpu),
            other_demand: positive(&other),
        }
    }

    /// How many copies of the mix `node` holds (0 if it lacks a resource the mix needs;
    /// infinite when nothing is requested).
    #[cfg(test)]
    pub(crate) fn copies(&self, node: &Node) -> f64 {
        copies_of(&self.demand, node)
    }

    /// The mix the replacement of `old` is judged on: the GPU pods' when `old` has GPUs, the
    /// other pods' when it has none (the whole mix when that part is empty).
    fn judged_on(&self, old: &[(f64, &Node)]) -> &[(ResourceName, f64)] {
        let part = if old.iter().any(|(_, n)| has_gpus(&n.allocatable)) {
            &self.gpu_demand
        } else {
            &self.other_demand
        };
        if part.is_empty() { &self.demand } else { part }
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
        let old: Vec<(f64, &Node)> = old.into_iter().collect();
        let demand = self.judged_on(&old);
        let (mut price, mut copies) = (0.0, 0.0);
        for (p, n) in old {
            price += p;
            copies += copies_of(demand, n);
        }
        let new_copies = copies_of(demand, new);
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

/// How many copies of the mix `demand` a node holds.
fn copies_of(demand: &[(ResourceName, f64)], node: &Node) -> f64 {
    demand
        .iter()
        .map(|&(name, d)| node.allocatable.get(name).max(0) as f64 / d)
        .fold(f64::INFINITY, f64::min)
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
    fn gpu_nodes_are_judged_on_the_mix_of_the_gpu_pods() {
        // Two 1-GPU tasks of 8 cores, and CPU-only pods of 128 cores: the whole mix asks 72
        // cores per GPU, the GPU pods 8.
        let mix = WorkloadMix::of(&snapshot_with(&[
            (8_000, 32, 1),
            (8_000, 32, 1),
            (64_000, 64, 0),
            (64_000, 64, 0),
        ]));
        let eight = gpu_node("g8", 96_000, 384, 8);
        let two = gpu_node("g2", 104_000, 512, 2);
        // On the whole mix the cores bind both shapes and the 2-GPU node looks cheaper per
        // copy; on the GPU pods' mix the GPUs bind and both cost 3 per GPU: refused.
        assert!(mix.copies(&two) > mix.copies(&eight));
        assert!(!mix.cheaper_per_copy([(24.0, &eight)], 6.0, &two));
        assert!(mix.cheaper_per_copy([(24.0, &eight)], 5.0, &two));
        // Nodes without GPUs are judged on the CPU-only pods' mix (1 core : 1 GiB): per core.
        let cpu = NodeBuilder::new("c", 32_000, 256 * GI).build();
        let small = NodeBuilder::new("s", 16_000, 64 * GI).build();
        assert!(mix.cheaper_per_copy([(1.5, &cpu)], 0.7, &small));
        assert!(!mix.cheaper_per_copy([(1.5, &cpu)], 0.8, &small));
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

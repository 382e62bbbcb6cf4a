//! The synthetic cluster `bench` measures: nodes, running pods, pending pods and node groups
//! generated in memory from a [`Shape`], deterministically (no randomness: the same shape always
//! gives the same objects in the same order).
//!
//! It only builds objects; it never decides or measures anything.

use std::sync::Arc;

use autoscaler_core::node::Node;
use autoscaler_core::node_group::{Instance, InstanceState, NodeGroup, StaticProvider};
use autoscaler_core::pod::Pod;
use autoscaler_core::testing::{GI, MI, NodeBuilder, PodBuilder};

/// Node allocatable CPU, in millicores.
pub const NODE_CPU_MILLI: i64 = 16_000;
/// Node allocatable memory, in bytes.
pub const NODE_MEMORY: i64 = 64 * GI;
/// Node pod slots.
pub const NODE_PODS: i64 = 110;

/// What to generate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Ready nodes of 16 CPU / 64 GiB / 110 pods.
    pub nodes: usize,
    /// Node groups; node `i` belongs to group `i % groups`.
    pub groups: usize,
    /// Running pods; pod `i` runs on node `i % nodes`.
    pub pods: usize,
    /// Unschedulable pods.
    pub pending: usize,
    /// CPU request of each pending pod, in millicores.
    pub pending_cpu_milli: i64,
    /// Memory request of each pending pod, in bytes.
    pub pending_memory: i64,
    /// ReplicaSets owning the pending pods (round-robin); 0: the pods have no owner.
    pub pending_owners: usize,
}

/// The generated objects.
pub struct Cluster {
    /// Every node, in name order `node-0`, `node-1`, ...
    pub nodes: Vec<Arc<Node>>,
    /// Running pods first (bound), then pending ones (unbound, `PodScheduled=False`).
    pub pods: Vec<Arc<Pod>>,
    /// The node groups with their instances.
    pub provider: StaticProvider,
}

/// The id of group `g` (a Cluster API MachineDeployment, as the `run` provider names it).
pub fn group_id(g: usize) -> String {
    format!("MachineDeployment/default/ng-{g}")
}

/// Whether the pods of node `n` are the small ones (every fifth node: 100m / 256 MiB).
pub fn is_light_node(n: usize) -> bool {
    n.is_multiple_of(5)
}

/// Builds the cluster of `shape`. Group `g` has min 0, max `4 × nodes / groups + 1000` and a
/// target equal to its node count (every instance registered and running).
pub fn generate(shape: &Shape) -> Cluster {
    let groups_n = shape.groups.max(1);
    let max = 4 * shape.nodes / groups_n + 1000;
    let mut groups: Vec<NodeGroup> = (0..groups_n)
        .map(|g| NodeGroup::new(&group_id(g), 0, max, 0))
        .collect();
    let mut nodes = Vec::with_capacity(shape.nodes);
    for n in 0..shape.nodes {
        let name = format!("node-{n}");
        let provider_id = format!("bench:///{name}");
        let node = NodeBuilder::new(&name, NODE_CPU_MILLI, NODE_MEMORY)
            .pods(NODE_PODS)
            .label(
                "node.cluster.x-k8s.io/group",
                &format!("ng-{}", n % groups_n),
            )
            .with_provider_id(&provider_id)
            .arc();
        let group = &mut groups[n % groups_n];
        group.instances.push(Instance {
            id: Arc::from(provider_id),
            state: InstanceState::Running,
            error: None,
        });
        group.target_size += 1;
        nodes.push(node);
    }

    let mut pods = Vec::with_capacity(shape.pods + shape.pending);
    if !nodes.is_empty() {
        for i in 0..shape.pods {
            let n = i % shape.nodes;
            let (cpu, memory) = if is_light_node(n) {
                (100, 256 * MI)
            } else {
                (500, 2 * GI)
            };
            pods.push(
                PodBuilder::new(&format!("run-{i}"), cpu, memory)
                    .owner("ReplicaSet", "running")
                    .node_name(&format!("node-{n}"))
                    .arc(),
            );
        }
    }
    for i in 0..shape.pending {
        let mut pod = PodBuilder::new(
            &format!("pending-{i}"),
            shape.pending_cpu_milli,
            shape.pending_memory,
        )
        .unschedulable();
        if shape.pending_owners > 0 {
            pod = pod.owner(
                "ReplicaSet",
                &format!("pending-{}", i % shape.pending_owners),
            );
        }
        pods.push(pod.arc());
    }
    Cluster {
        nodes,
        pods,
        provider: StaticProvider::new(groups),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_core::node_group::CloudProvider;
    use autoscaler_core::pending::is_unschedulable;

    fn shape() -> Shape {
        Shape {
            nodes: 20,
            groups: 3,
            pods: 600,
            pending: 10,
            pending_cpu_milli: 1000,
            pending_memory: 2 * GI,
            pending_owners: 4,
        }
    }

    #[test]
    fn nodes_spread_round_robin_over_groups_with_upstream_bounds() {
        let c = generate(&shape());
        assert_eq!(c.nodes.len(), 20);
        let groups = c.provider.node_groups();
        assert_eq!(groups.len(), 3);
        // 20 nodes over 3 groups: 7, 7, 6.
        let targets: Vec<usize> = groups.iter().map(|g| g.target_size).collect();
        assert_eq!(targets, vec![7, 7, 6]);
        for g in groups {
            assert_eq!(g.min_size, 0);
            assert_eq!(g.max_size, 4 * 20 / 3 + 1000);
            assert_eq!(g.instances.len(), g.target_size);
        }
        for (n, node) in c.nodes.iter().enumerate() {
            assert_eq!(c.provider.node_group_of(node), Some(n % 3));
            assert!(node.is_ready());
            assert_eq!(node.allocatable.cpu, 16_000);
            assert_eq!(node.allocatable.memory, 64 * GI);
            assert_eq!(node.allocatable.pods, 110);
        }
    }

    #[test]
    fn every_fifth_node_is_lightly_loaded_the_rest_nearly_full() {
        let c = generate(&shape());
        let mut cpu = [0i64; 20];
        let mut count = [0usize; 20];
        for p in c.pods.iter().filter(|p| p.node_name.is_some()) {
            let n: usize = p.node_name.unwrap().as_str()[5..].parse().unwrap();
            cpu[n] += p.requests.cpu;
            count[n] += 1;
            assert_eq!(p.owner.as_ref().map(|o| &*o.name), Some("running"));
        }
        assert!(count.iter().all(|&c| c == 30));
        for (n, &used) in cpu.iter().enumerate() {
            let pct = used * 100 / 16_000;
            if n % 5 == 0 {
                assert_eq!(pct, 18, "node {n}: 3 CPU of 16");
            } else {
                assert_eq!(pct, 93, "node {n}: 15 CPU of 16");
            }
        }
    }

    #[test]
    fn pending_pods_are_unschedulable_and_spread_over_owners() {
        let c = generate(&shape());
        let pending: Vec<_> = c.pods.iter().filter(|p| p.node_name.is_none()).collect();
        assert_eq!(pending.len(), 10);
        assert!(pending.iter().all(|p| is_unschedulable(p)));
        let owners: std::collections::BTreeSet<_> = pending
            .iter()
            .map(|p| p.owner.as_ref().unwrap().name.to_string())
            .collect();
        assert_eq!(owners.len(), 4);
        // Same owner and spec: one equivalence group per owner.
        let classes: std::collections::BTreeSet<_> =
            pending.iter().map(|p| p.equivalence).collect();
        assert_eq!(classes.len(), 4);

        let lone = generate(&Shape {
            pending_owners: 0,
            ..shape()
        });
        assert!(
            lone.pods
                .iter()
                .filter(|p| p.node_name.is_none())
                .all(|p| p.owner.is_none())
        );
    }
}

//! A small cluster for the shell's tests: two ready 4-CPU nodes of group `ng`, one busy
//! (3.5 CPU), and a number of pending 3-CPU pods; a loop on it grows `ng`.

use std::sync::Arc;

use autoscaler_core::{Autoscaler, ClusterView, LoopInput, LoopOutcome};
use autoscaler_model::Node;
use autoscaler_model::Pod;
use autoscaler_model::StaticProvider;
use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};
use autoscaler_model::{Instance, InstanceState, NodeGroup};

/// The cluster.
pub(crate) struct Cluster {
    pub(crate) nodes: Vec<Arc<Node>>,
    pub(crate) pods: Vec<Arc<Pod>>,
    pub(crate) provider: StaticProvider,
}

impl Cluster {
    /// Group `ng` (min 1, max `max`) with the two nodes, and `pending` pods of 3 CPU.
    pub(crate) fn new(max: usize, pending: usize) -> Cluster {
        let nodes: Vec<Arc<Node>> = ["n1", "n2"]
            .iter()
            .map(|n| {
                NodeBuilder::new(n, 4000, 16 * GI)
                    .with_provider_id(&format!("test:///{n}"))
                    .arc()
            })
            .collect();
        let mut g = NodeGroup::new("ng", 1, max, 2);
        g = g.with_instances(
            nodes
                .iter()
                .filter_map(|n| n.provider_id.clone())
                .map(|id| Instance {
                    id,
                    state: InstanceState::Running,
                    error: None,
                })
                .collect(),
        );
        let mut pods = vec![
            PodBuilder::new("busy", 3500, GI)
                .owner("ReplicaSet", "a")
                .node_name("n1")
                .arc(),
        ];
        pods.extend((0..pending).map(|i| {
            PodBuilder::new(&format!("p{i}"), 3000, GI)
                .owner("ReplicaSet", "b")
                .unschedulable()
                .arc()
        }));
        Cluster {
            nodes,
            pods,
            provider: StaticProvider::new(vec![g]),
        }
    }

    /// The view of it.
    pub(crate) fn view(&self) -> ClusterView<'_> {
        ClusterView {
            nodes: &self.nodes,
            pods: &self.pods,
            daemonsets: &[],
            namespaces: &[],
            provider: &self.provider,
            pdbs: &[],
            storage: autoscaler_model::Storage::none(),
        }
    }

    /// Adds a pending pod too big for any node, which no group can help.
    pub(crate) fn with_huge_pod(mut self) -> Cluster {
        self.pods.push(
            PodBuilder::new("huge", 64_000, GI)
                .owner("ReplicaSet", "c")
                .unschedulable()
                .arc(),
        );
        self
    }

    /// The first loop of a fresh autoscaler with the default options, at time 0.
    pub(crate) fn first_loop(&self) -> LoopOutcome {
        self.run(&mut Autoscaler::new(Default::default()), 0)
    }

    /// One loop of `a` at `now`.
    pub(crate) fn run(&self, a: &mut Autoscaler, now: i64) -> LoopOutcome {
        a.run_once(LoopInput::new(&self.view(), now))
    }
}

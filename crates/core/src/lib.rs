//! The decision core of the cluster autoscaler.
//!
//! Everything here is a pure, synchronous function of a cluster view and a clock value passed in
//! by the caller: the core never performs I/O, never reads the wall clock, never spawns tasks and
//! never depends on tokio or kube (`clippy.toml` bans the clock, filesystem, network and thread
//! calls). That is what lets one core serve `run`, `plan` and `simulate`.
//!
//! # The front door
//!
//! What the shells need is re-exported here, at the root:
//! - the loop: [`Autoscaler`] with its [`AutoscalerOptions`] (and their parts
//!   [`ScaleUpConfig`], [`ScaleUpOptions`], [`ScaleDownOptions`], [`ClusterStateOptions`],
//!   [`BackoffOptions`], [`ResourceLimits`], [`ExpanderChain`]), the [`ClusterView`] it reads,
//!   the [`LoopOutcome`] it returns with its [`Action`]s (naming pods by [`PodRef`], evictions by
//!   [`PodEviction`]),
//!   [`Event`]s and [`ClusterStatus`], the [`Outcome`]s of carried-out actions fed back through
//!   `Autoscaler::observe` (with their [`ActionError`] and its [`ErrorClass`]), and
//!   what a loop is handed besides the view: the [`ControllerLookup`] of the drain rules, the
//!   deletions [`InFlight`] and the [`Budget`] that bounds its simulations ([`Unlimited`]: none);
//! - the provider view: [`CloudProvider`], [`NodeGroup`], [`NodeGroupId`], [`NodeGroupOptions`],
//!   [`Instance`], [`InstanceState`], [`InstanceError`], [`InstanceErrorClass`];
//! - the model: [`Node`], [`Pod`], [`Resources`], [`ResourceName`], [`Quantity`], [`Taint`],
//!   [`TaintEffect`], [`Toleration`], [`Labels`], [`LabelSelector`], [`Sym`],
//!   [`PodDisruptionBudget`], [`DaemonSet`], [`NamespaceLabels`], and the [`ObjectStore`] the
//!   objects come from;
//! - well-known names (taints, labels, annotations, event reasons): [`names`].
//!
//! # Modules, by concern
//!
//! - [`model`]: what the core knows about a cluster (quantities, interned strings and labels,
//!   resources, nodes, pods, taints, budgets, node groups, limits, stored objects).
//! - [`scheduling`]: the scheduling simulator (snapshot, predicates, affinity) and the budget
//!   of a simulation.
//! - [`scale_up`]: which groups grow (pending pods, templates, the bin-packing estimator, the
//!   expanders, balancing of similar groups).
//! - [`scale_down`]: which nodes go, one file per phase (eligibility with the drain rules,
//!   removal simulation, unneeded timers, soft taints, deletion plan).
//! - [`cluster_state`]: health, upcoming nodes, timeouts and backoff between loops.
//! - [`autoscaler`] (one loop), [`actions`] (what the shell carries out), [`outcome`] (what
//!   carrying them out did) and [`safety`] (the last check of those actions).
#![warn(missing_docs)]

pub mod actions;
pub mod autoscaler;
pub mod cluster_state;
pub mod model;
pub mod names;
pub mod outcome;
pub mod provisioning;
pub mod safety;
pub mod scale_down;
pub mod scale_up;
pub mod scheduling;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;
pub mod yaml_depth;

// The front door: the small API the shells use.
pub use actions::{Action, PodEviction, PodRef};
pub use autoscaler::{
    Autoscaler, AutoscalerOptions, ClusterView, LoopOutcome, Phase, PhaseClock, ScaleUpConfig,
};
pub use cluster_state::backoff::BackoffOptions;
pub use cluster_state::{ClusterStateOptions, ClusterStatus, Event};
pub use model::daemonset::DaemonSet;
pub use model::intern::Sym;
pub use model::labels::{LabelSelector, Labels};
pub use model::limits::ResourceLimits;
pub use model::node::Node;
pub use model::node_group::{
    CloudProvider, Instance, InstanceError, InstanceErrorClass, InstanceState, NodeGroup,
    NodeGroupId, NodeGroupOptions,
};
pub use model::pdb::PodDisruptionBudget;
pub use model::pod::Pod;
pub use model::quantity::Quantity;
pub use model::resources::{ResourceName, Resources};
pub use model::store::ObjectStore;
pub use model::taints::{Taint, TaintEffect, Toleration};
pub use outcome::{ActionError, ErrorClass, Outcome};
pub use scale_down::drain::ControllerLookup;
pub use scale_down::{InFlight, ScaleDownOptions};
pub use scale_up::ScaleUpOptions;
pub use scale_up::expander::ExpanderChain;
pub use scheduling::affinity::NamespaceLabels;
pub use scheduling::budget::{Budget, Unlimited};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::node_group::StaticProvider;
    use crate::scale_down::drain::NoControllerLookup;
    use crate::testing::{GI, NodeBuilder};
    use std::sync::Arc;

    /// A loop driven through the root API alone: an empty node of an autoscaled group above its
    /// min size becomes unneeded, and is not deleted before the unneeded time.
    #[test]
    fn a_loop_through_the_front_door_finds_an_empty_node_unneeded() {
        let node: Arc<Node> = NodeBuilder::new("n1", 4000, 16 * GI)
            .with_provider_id("test:///n1")
            .arc();
        let mut group = NodeGroup::new("ng", 0, 3, 1);
        group.instances.push(Instance {
            id: Arc::from("test:///n1"),
            state: InstanceState::Running,
            error: None,
        });
        let provider = StaticProvider::new(vec![group]);
        let nodes = [node];
        let view = ClusterView {
            nodes: &nodes,
            pods: &[],
            daemonsets: &[],
            namespaces: &[],
            provider: &provider,
            pdbs: &[],
            storage: crate::model::storage::Storage::none(),
        };
        let mut autoscaler = Autoscaler::new(AutoscalerOptions::default());
        let now_ms = 1_000_000;
        let outcome: LoopOutcome = autoscaler.run_once(
            &view,
            &NoControllerLookup as &dyn ControllerLookup,
            InFlight::default(),
            now_ms,
            &mut Unlimited as &mut dyn Budget,
        );
        assert!(outcome.status.healthy);
        let unneeded: Vec<&str> = outcome
            .scale_down
            .unneeded
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(unneeded, ["n1"]);
        assert!(outcome.scale_down.deletions.is_empty());
        assert!(
            !outcome.actions.iter().any(|a| matches!(
                a,
                Action::DeleteEmptyNodes { .. } | Action::DrainAndDelete { .. }
            )),
            "{:?}",
            outcome.actions
        );
    }
}

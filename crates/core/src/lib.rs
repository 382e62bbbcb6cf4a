//! The decision core of the cluster autoscaler.
//!
//! Everything here is a pure, synchronous function of a cluster view and a clock value passed in
//! by the caller: the core never performs I/O, never reads the wall clock, never spawns tasks and
//! never depends on tokio or kube (`clippy.toml` bans the clock, filesystem, network and thread
//! calls). That is what lets one core serve `run`, `plan` and `simulate`.
//!
//! # The front door
//!
//! The modules are private; what the shells use is re-exported here, at the root, flat:
//! - the loop: [`Autoscaler`] with its [`AutoscalerOptions`] (and their parts
//!   [`ScaleUpConfig`], [`ScaleUpOptions`], [`ScaleDownOptions`], [`ClusterStateOptions`],
//!   [`BackoffOptions`], [`ExpanderChain`]; a validated setter refuses a value with an
//!   [`InvalidOption`]), the [`ClusterView`] it reads, the [`LoopOutcome`] it
//!   returns with its [`Action`]s (naming pods by [`PodRef`], evictions by [`PodEviction`]),
//!   [`Event`]s and [`ClusterStatus`], the [`Outcome`]s of carried-out actions fed back through
//!   `Autoscaler::observe` (with their [`ActionError`] and its [`ErrorClass`]), and what a loop is
//!   handed besides the view: the deletions [`InFlight`] and the [`Budget`] that bounds its
//!   simulations ([`Unlimited`]: none);
//! - the parts of a loop the shells explain or replay on their own: the scheduling snapshot
//!   ([`ClusterSnapshot`], [`build_snapshot`], [`check_node_static`]), pending pods
//!   ([`is_unschedulable`]), templates and the estimator's limits ([`EstimatorLimits`]) and why
//!   nodes wait or stay ([`Waiting`], [`Unremovable`]).
//!
//! With the feature `bench` (the simulator's `bench` turns it on, to time one phase of a loop
//! at a time), the phases are entry points of their own too: `select_pending`,
//! `place_on_existing`, `group_template`, `estimate`, `decide_scale_up`,
//! `decide_scale_up_with_upcoming`, `plan_scale_down` and `plan_consolidation`. The shells
//! that decide call the loop.
//!
//! The model the decisions read (nodes, pods, quantities, node groups, the object store...) is
//! the crate `autoscaler_model`; the most used of its types are re-exported here too, so a shell
//! that needs only those and the loop imports one crate.
//!
//! # Modules, by concern
//!
//! - `scheduling`: the scheduling simulator (snapshot, predicates, volumes) and the budget of a
//!   simulation.
//! - `scale_up`: which groups grow (pending pods, templates, the bin-packing estimator, the
//!   expanders, balancing of similar groups).
//! - `scale_down`: which nodes go, one file per phase (eligibility with the drain rules,
//!   removal simulation, unneeded timers, soft taints, deletion plan).
//! - `cluster_state`: health, upcoming nodes, timeouts and backoff between loops.
//! - `autoscaler` (one loop), `actions` (what the shell carries out), `outcome` (what carrying
//!   them out did) and `safety` (the last check of those actions).
#![warn(missing_docs)]

mod actions;
mod autoscaler;
mod cluster_state;
mod invalid_option;
mod outcome;
mod provisioning;
mod safety;
mod scale_down;
mod scale_up;
mod scheduling;

// The front door: the small API the shells use.
pub use actions::{
    Action, Increase, PodEviction, PodRef, deletion_candidate_taint, failed_deletion_actions,
    to_be_deleted_taint,
};
pub use autoscaler::{
    Autoscaler, AutoscalerOptions, ClusterView, LoopInput, LoopOutcome, Phase, PhaseClock,
    ScaleUpConfig, build_snapshot,
};
pub use cluster_state::backoff::{BackoffOptions, FailureReason};
pub use cluster_state::{
    BackoffStatus, ClusterStateOptions, ClusterStatus, Event, GroupReadiness, format_time_ms,
};
pub use invalid_option::{InvalidOption, OptionRule};
pub use outcome::{ActionError, ErrorClass, Outcome};
pub use provisioning::buffer::{
    BufferProvisioning, BufferStatus, Resolved as ResolvedBuffer, is_buffer_pod,
    resolve as resolve_buffer,
};
pub use provisioning::request::{
    BOOKING_MS, EXPIRY_MS, RequestDecision, RequestOptions, Requests, RequestsDecision,
    RequestsInput, RetryBackoff, StatusWrite, Verdict, supported_class,
};
pub use provisioning::{
    CapacityDecision, CapacityOptions, conditions as request_conditions, decide as decide_capacity,
};
pub use scale_down::consolidation::{
    ConsolidationInput, ConsolidationMode, ConsolidationOptions, ConsolidationPlan,
    ConsolidationState, ReplacementShape,
};
pub use scale_down::drain::{PodDrain, classify_pod, is_expendable};
pub use scale_down::drain_priority::{DrainPriority, DrainPriorityConfig, DrainPriorityError};
pub use scale_down::{
    InFlight, ScaleDownInput, ScaleDownOptions, ScaleDownPlan, ScaleDownState, Unremovable, Waiting,
};
pub use scale_up::balance::similar;
pub use scale_up::estimator::{EstimatorLimits, NodeTemplate};
pub use scale_up::expander::{Expander, ExpanderChain, ExpanderName};
pub use scale_up::pending::{SetAside, is_unprocessed, is_unschedulable};
pub use scale_up::reasons::GroupReasons;
pub use scale_up::{
    ConsideredOption, GroupIncrease, IncreaseReason, ScaleUpOptions, ScaleUpResult,
};
pub use scheduling::budget::{Budget, Unlimited};
pub use scheduling::dra_search::{
    DevicePick, DeviceSource, MAX_SEARCH_STEPS, SearchError, allocate_devices,
};
pub use scheduling::predicates::{Prepared, Unfit, check_node_static};
pub use scheduling::snapshot::{ClusterSnapshot, NodeId, NodeInfo};

// The phases of a loop, each alone: for the simulator's `bench` and this crate's benches.
#[cfg(feature = "bench")]
pub use autoscaler::{decide_scale_up, decide_scale_up_with_upcoming, group_template};
#[cfg(feature = "bench")]
pub use scale_down::consolidation::plan_consolidation;
#[cfg(feature = "bench")]
pub use scale_down::plan_scale_down;
#[cfg(feature = "bench")]
pub use scale_up::estimator::estimate;
#[cfg(feature = "bench")]
pub use scale_up::pending::{place_on_existing, select as select_pending};

// The model's most used types, for shells that need only these beside the loop (the model
// crate is their home; new code may import them from either).
pub use autoscaler_model::{
    CloudProvider, ControllerLookup, DaemonSet, Instance, InstanceError, InstanceErrorClass,
    InstanceState, LabelSelector, Labels, NamespaceLabels, Node, NodeGroup, NodeGroupId,
    NodeGroupOptions, ObjectStore, Pod, PodDisruptionBudget, Quantity, ResourceLimits,
    ResourceName, Resources, Sym, Taint, TaintEffect, Toleration,
};

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_model::StaticProvider;
    use autoscaler_model::testing::{GI, NodeBuilder};
    use std::sync::Arc;

    /// A loop driven through the root API alone: an empty node of an autoscaled group above its
    /// min size becomes unneeded, and is not deleted before the unneeded time.
    #[test]
    fn a_loop_through_the_front_door_finds_an_empty_node_unneeded() {
        let node: Arc<Node> = NodeBuilder::new("n1", 4000, 16 * GI)
            .with_provider_id("test:///n1")
            .arc();
        let mut group = NodeGroup::new("ng", 0, 3, 1);
        group.push_instance(Instance {
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
            storage: autoscaler_model::Storage::none(),
        };
        let mut autoscaler = Autoscaler::new(AutoscalerOptions::default());
        let now_ms = 1_000_000;
        let outcome: LoopOutcome = autoscaler.run_once(LoopInput::new(&view, now_ms));
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

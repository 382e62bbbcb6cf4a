//! What one loop ([`super::Autoscaler::run_once`]) is handed besides its options and the state it
//! keeps: the view of the cluster at a time, and what a shell may add to it — the controllers
//! pods belong to, the deletions in flight, a budget bounding the simulations, the
//! capacity-on-request objects, a clock timing the phases.
//!
//! It decides nothing and reads nothing: it gathers the inputs, each one the shell does not give
//! standing for a loop without it (no controllers known, nothing in flight, no budget, no
//! capacity objects, no timing). It never reads a clock itself.

use autoscaler_model::{CapacityObjects, ControllerLookup, NoControllerLookup};

use super::{ClusterView, PhaseClock};
use crate::scale_down::InFlight;
use crate::scheduling::budget::Budget;

/// The inputs of one loop: built with [`LoopInput::new`] from the view and the time, then
/// given what the shell has.
pub struct LoopInput<'a> {
    pub(super) view: &'a ClusterView<'a>,
    pub(super) now_ms: i64,
    pub(super) controllers: &'a dyn ControllerLookup,
    pub(super) in_flight: InFlight,
    pub(super) budget: Option<&'a mut dyn Budget>,
    pub(super) capacity: Option<&'a CapacityObjects>,
    pub(super) clock: Option<&'a dyn PhaseClock>,
}

impl<'a> LoopInput<'a> {
    /// A loop over `view` at `now_ms`: no controllers known, nothing in flight, no budget, no
    /// capacity objects, no timing.
    pub fn new(view: &'a ClusterView<'a>, now_ms: i64) -> LoopInput<'a> {
        LoopInput {
            view,
            now_ms,
            controllers: &NoControllerLookup,
            in_flight: InFlight::default(),
            budget: None,
            capacity: None,
            clock: None,
        }
    }

    /// The controllers the view's pods belong to (the drain rules ask them whether a pod would
    /// come back elsewhere).
    pub fn controllers(mut self, controllers: &'a dyn ControllerLookup) -> LoopInput<'a> {
        self.controllers = controllers;
        self
    }

    /// The deletions started by earlier loops and not finished.
    pub fn in_flight(mut self, in_flight: InFlight) -> LoopInput<'a> {
        self.in_flight = in_flight;
        self
    }

    /// The budget bounding bin-packing and removal simulation together.
    pub fn budget(mut self, budget: &'a mut dyn Budget) -> LoopInput<'a> {
        self.budget = Some(budget);
        self
    }

    /// The cluster's ProvisioningRequests, CapacityBuffers and PodTemplates, decided within the
    /// loop as the options' `capacity` says (ignored while those options are all off); the
    /// decision is in [`super::LoopOutcome::capacity`].
    pub fn capacity(mut self, objects: Option<&'a CapacityObjects>) -> LoopInput<'a> {
        self.capacity = objects;
        self
    }

    /// Times the loop's phases with `clock` into [`super::LoopOutcome::phases`].
    pub fn timed(mut self, clock: &'a dyn PhaseClock) -> LoopInput<'a> {
        self.clock = Some(clock);
        self
    }
}

impl std::fmt::Debug for LoopInput<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopInput")
            .field("now_ms", &self.now_ms)
            .field("in_flight", &self.in_flight)
            .field("budget", &self.budget.is_some())
            .field("capacity", &self.capacity.is_some())
            .field("timed", &self.clock.is_some())
            .finish_non_exhaustive()
    }
}

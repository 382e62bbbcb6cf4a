//! Budgets of simulations: when an estimate or a removal simulation must stop.
//!
//! The core never reads the clock: the caller hands in a [`Budget`] (the binary checks a
//! deadline, tests count calls) and the simulations ask it between steps. It decides nothing
//! itself.

/// A time (or any other) budget for a simulation (an estimate, a removal simulation),
/// implemented by the caller so that the core never reads the clock: the binary checks an
/// `Instant` deadline, tests count calls.
///
/// Any `FnMut() -> bool` closure is a budget.
pub trait Budget {
    /// Whether the budget is used up. Asked before each pod is placed (an estimate) or each
    /// node with pods to move is simulated (scale-down); once it answers `true` the simulation
    /// stops.
    fn exhausted(&mut self) -> bool;
}

impl<F: FnMut() -> bool> Budget for F {
    fn exhausted(&mut self) -> bool {
        self()
    }
}

/// A budget that is never exhausted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unlimited;

impl Budget for Unlimited {
    fn exhausted(&mut self) -> bool {
        false
    }
}

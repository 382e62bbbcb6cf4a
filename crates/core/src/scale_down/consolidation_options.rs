//! The way into [`ConsolidationOptions`]: an accessor per field, named like it, and a setter per
//! field. Every value but the horizon's is one the planner handles (a zero limit only makes a
//! pass try nothing, a zero duration only waits for nothing), so those setters are unchecked.
//! The horizon must not be zero: it is the least time a saving is counted for, and at zero a
//! node whose pods just started would save nothing and never go.

use std::time::Duration;

use crate::invalid_option::{InvalidOption, positive};
use crate::scale_down::consolidation::{ConsolidationMode, ConsolidationOptions};

impl ConsolidationOptions {
    /// Off, delete or replace (`--consolidation`).
    pub fn mode(&self) -> ConsolidationMode {
        self.mode
    }

    /// How long a node's pods must stay unchanged before it is consolidated
    /// (`--consolidate-after`).
    pub fn consolidate_after(&self) -> Duration {
        self.consolidate_after
    }

    /// Nodes the multi-node search considers.
    pub fn max_multi_node_candidates(&self) -> usize {
        self.max_multi_node_candidates
    }

    /// Single-node trials per pass.
    pub fn max_single_node_candidates(&self) -> usize {
        self.max_single_node_candidates
    }

    /// Pod placements simulated per pass, over all trials.
    pub fn max_pods_simulated(&self) -> usize {
        self.max_pods_simulated
    }

    /// How long a replacement may take to become Ready before consolidation gives it up.
    pub fn replacement_timeout(&self) -> Duration {
        self.replacement_timeout
    }

    /// The least time a saving and a Job's lost run are counted for, and the least age of a
    /// node holding pods before it is consolidated.
    pub fn horizon(&self) -> Duration {
        self.horizon
    }

    /// Sets [`Self::mode`].
    pub fn set_mode(&mut self, value: ConsolidationMode) {
        self.mode = value;
    }

    /// Sets [`Self::consolidate_after`].
    pub fn set_consolidate_after(&mut self, value: Duration) {
        self.consolidate_after = value;
    }

    /// Sets [`Self::max_multi_node_candidates`].
    pub fn set_max_multi_node_candidates(&mut self, value: usize) {
        self.max_multi_node_candidates = value;
    }

    /// Sets [`Self::max_single_node_candidates`].
    pub fn set_max_single_node_candidates(&mut self, value: usize) {
        self.max_single_node_candidates = value;
    }

    /// Sets [`Self::max_pods_simulated`].
    pub fn set_max_pods_simulated(&mut self, value: usize) {
        self.max_pods_simulated = value;
    }

    /// Sets [`Self::replacement_timeout`].
    pub fn set_replacement_timeout(&mut self, value: Duration) {
        self.replacement_timeout = value;
    }

    /// Sets [`Self::horizon`] (`--consolidation-horizon`); it must be above zero.
    pub fn set_horizon(&mut self, value: Duration) -> Result<(), InvalidOption> {
        self.horizon = positive("horizon", value)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setters_land_their_value() {
        let mut o = ConsolidationOptions::default();
        assert_eq!(o.mode(), ConsolidationMode::Off);
        let s = Duration::from_secs;
        o.set_mode(ConsolidationMode::Replace);
        o.set_consolidate_after(s(1));
        o.set_max_multi_node_candidates(2);
        o.set_max_single_node_candidates(3);
        o.set_max_pods_simulated(4);
        o.set_replacement_timeout(s(5));
        o.set_horizon(s(6)).expect("a positive horizon");
        assert_eq!(o.mode(), ConsolidationMode::Replace);
        assert_eq!(o.consolidate_after(), s(1));
        assert_eq!(o.max_multi_node_candidates(), 2);
        assert_eq!(o.max_single_node_candidates(), 3);
        assert_eq!(o.max_pods_simulated(), 4);
        assert_eq!(o.replacement_timeout(), s(5));
        assert_eq!(o.horizon(), s(6));
    }

    #[test]
    fn a_zero_horizon_is_refused_and_the_value_kept() {
        let mut o = ConsolidationOptions::default();
        let e = o.set_horizon(Duration::ZERO).unwrap_err();
        assert_eq!((e.field(), e.value()), ("horizon", "0ns"));
        assert_eq!(e.rule(), crate::invalid_option::OptionRule::Positive);
        assert_eq!(o.horizon(), Duration::from_secs(600));
    }
}

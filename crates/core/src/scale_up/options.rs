//! The validated way into [`ScaleUpOptions`]: one accessor per field, named like it, and one
//! setter per field; the setter of `max_nodes_per_scale_up` refuses 0 (no scale-up could add a
//! node) with an [`InvalidOption`] naming the field.
//!
//! It decides which single values a field takes; it never checks one field against another and
//! never changes a default (`Default` states them).

use crate::invalid_option::{InvalidOption, at_least_one};
use crate::scale_up::ScaleUpOptions;
use crate::scale_up::balance::BalancingOptions;

impl ScaleUpOptions {
    /// The most nodes one scale-up adds (`--max-nodes-per-scaleup`).
    pub fn max_nodes_per_scale_up(&self) -> usize {
        self.max_nodes_per_scale_up
    }

    /// Whether similar node groups are grown together (`--balance-similar-node-groups`).
    pub fn balance_similar_node_groups(&self) -> bool {
        self.balance_similar_node_groups
    }

    /// Whether groups below their min size are grown to it (`--enforce-node-group-min-size`).
    pub fn enforce_node_group_min_size(&self) -> bool {
        self.enforce_node_group_min_size
    }

    /// Sets [`Self::max_nodes_per_scale_up`]; it must be at least 1.
    pub fn set_max_nodes_per_scale_up(&mut self, value: usize) -> Result<(), InvalidOption> {
        self.max_nodes_per_scale_up = at_least_one("max_nodes_per_scale_up", value)?;
        Ok(())
    }

    /// Sets [`Self::balance_similar_node_groups`].
    pub fn set_balance_similar_node_groups(&mut self, value: bool) {
        self.balance_similar_node_groups = value;
    }

    /// Sets [`Self::enforce_node_group_min_size`].
    pub fn set_enforce_node_group_min_size(&mut self, value: bool) {
        self.enforce_node_group_min_size = value;
    }

    /// What makes node groups similar for balancing (`--balancing-*`, `--*-difference-ratio`):
    /// an option group of its own, whose setters check their values.
    pub fn balancing(&self) -> &BalancingOptions {
        &self.balancing
    }

    /// [`Self::balancing`], to change through its setters.
    pub fn balancing_mut(&mut self) -> &mut BalancingOptions {
        &mut self.balancing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_nodes_per_scale_up_is_refused_and_the_value_kept() {
        let mut o = ScaleUpOptions::default();
        let e = o.set_max_nodes_per_scale_up(0).unwrap_err();
        assert_eq!(e.field(), "max_nodes_per_scale_up");
        assert_eq!(
            e.to_string(),
            "max_nodes_per_scale_up = 0: must be at least 1"
        );
        assert_eq!(o.max_nodes_per_scale_up(), 1000);
        o.set_max_nodes_per_scale_up(5).unwrap();
        assert_eq!(o.max_nodes_per_scale_up(), 5);
    }

    #[test]
    fn the_flags_land_in_their_fields() {
        let mut o = ScaleUpOptions::default();
        assert!(!o.balance_similar_node_groups() && !o.enforce_node_group_min_size());
        o.set_balance_similar_node_groups(true);
        o.set_enforce_node_group_min_size(true);
        assert!(o.balance_similar_node_groups() && o.enforce_node_group_min_size());
    }

    #[test]
    fn the_balancing_group_changes_through_its_borrow() {
        let mut o = ScaleUpOptions::default();
        o.balancing_mut().set_memory_difference_ratio(0.2).unwrap();
        assert!(o.balancing_mut().set_memory_difference_ratio(-1.0).is_err());
        assert_eq!(o.balancing().memory_difference_ratio(), 0.2);
    }
}

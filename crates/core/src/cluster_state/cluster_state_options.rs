//! The validated way into [`ClusterStateOptions`]: one accessor per field, named like it, and a
//! setter per field. The provision and startup times must not be zero (every new node would time
//! out at once); the unready percentage lies in `0..=100`. The unready count has no impossible
//! value, so its setter is unchecked.

use std::time::Duration;

use autoscaler_model::TaintConfig;

use crate::cluster_state::ClusterStateOptions;
use crate::cluster_state::backoff::BackoffOptions;
use crate::invalid_option::{InvalidOption, percentage, positive};

impl ClusterStateOptions {
    /// How long a scale-up or a new instance may take to register (`--max-node-provision-time`);
    /// groups may override it ([`autoscaler_model::NodeGroupOptions`]).
    pub fn max_node_provision_time(&self) -> Duration {
        self.max_node_provision_time
    }

    /// How long a registered node may take to become Ready before it counts as unready
    /// (`--max-node-startup-time`).
    pub fn max_node_startup_time(&self) -> Duration {
        self.max_node_startup_time
    }

    /// Unready nodes allowed regardless of the percentage (`--ok-total-unready-count`).
    pub fn ok_total_unready_count(&self) -> usize {
        self.ok_total_unready_count
    }

    /// Percentage of unready nodes above which the cluster is unhealthy
    /// (`--max-total-unready-percentage`).
    pub fn max_total_unready_percentage(&self) -> f64 {
        self.max_total_unready_percentage
    }

    /// Sets [`Self::max_node_provision_time`]; it must be above zero.
    pub fn set_max_node_provision_time(&mut self, value: Duration) -> Result<(), InvalidOption> {
        self.max_node_provision_time = positive("max_node_provision_time", value)?;
        Ok(())
    }

    /// Sets [`Self::max_node_startup_time`]; it must be above zero.
    pub fn set_max_node_startup_time(&mut self, value: Duration) -> Result<(), InvalidOption> {
        self.max_node_startup_time = positive("max_node_startup_time", value)?;
        Ok(())
    }

    /// Sets [`Self::ok_total_unready_count`].
    pub fn set_ok_total_unready_count(&mut self, value: usize) {
        self.ok_total_unready_count = value;
    }

    /// Sets [`Self::max_total_unready_percentage`]; it must lie in `0..=100`.
    pub fn set_max_total_unready_percentage(&mut self, value: f64) -> Result<(), InvalidOption> {
        self.max_total_unready_percentage = percentage("max_total_unready_percentage", value)?;
        Ok(())
    }

    /// The node groups' backoff after a failed scale-up: an option group of its own, whose
    /// constructor and setters check their values.
    pub fn backoff(&self) -> &BackoffOptions {
        &self.backoff
    }

    /// [`Self::backoff`], to change through its setters.
    pub fn backoff_mut(&mut self) -> &mut BackoffOptions {
        &mut self.backoff
    }

    /// Startup and status taints (`--startup-taint`, `--ignore-taint`, `--status-taint`): a
    /// Ready node with a startup taint has not started yet.
    pub fn taints(&self) -> &TaintConfig {
        &self.taints
    }

    /// [`Self::taints`], to change through its setters.
    pub fn taints_mut(&mut self) -> &mut TaintConfig {
        &mut self.taints
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::invalid_option::OptionRule;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn impossible_values_are_refused_by_the_setters_and_the_value_kept() {
        let mut o = ClusterStateOptions::default();
        let e = o.set_max_node_provision_time(Duration::ZERO).unwrap_err();
        assert_eq!(
            (e.field(), e.rule()),
            ("max_node_provision_time", OptionRule::Positive)
        );
        let e = o.set_max_node_startup_time(Duration::ZERO).unwrap_err();
        assert_eq!(e.field(), "max_node_startup_time");
        for bad in [-1.0, 100.5, f64::NAN] {
            let e = o.set_max_total_unready_percentage(bad).unwrap_err();
            assert_eq!(
                (e.field(), e.rule()),
                ("max_total_unready_percentage", OptionRule::Percentage)
            );
        }
        assert_eq!(o, ClusterStateOptions::default());
    }

    #[test]
    fn valid_values_land() {
        let mut o = ClusterStateOptions::default();
        o.set_max_node_provision_time(20 * MIN).unwrap();
        o.set_max_node_startup_time(25 * MIN).unwrap();
        o.set_ok_total_unready_count(0);
        o.set_max_total_unready_percentage(100.0).unwrap();
        assert_eq!(
            (
                o.max_node_provision_time(),
                o.max_node_startup_time(),
                o.ok_total_unready_count(),
                o.max_total_unready_percentage()
            ),
            (20 * MIN, 25 * MIN, 0, 100.0)
        );
        o.set_max_total_unready_percentage(0.0).unwrap();
        assert_eq!(o.max_total_unready_percentage(), 0.0);
    }

    #[test]
    fn the_option_groups_change_through_their_borrows() {
        let mut o = ClusterStateOptions::default();
        o.backoff_mut().set_initial(MIN).unwrap();
        assert!(o.backoff_mut().set_initial(Duration::ZERO).is_err());
        o.taints_mut()
            .set_status(vec!["example.com/degraded".into()])
            .unwrap();
        assert_eq!(o.backoff().initial(), MIN);
        assert!(o.taints().is_status("example.com/degraded"));
    }
}

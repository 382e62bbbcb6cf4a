//! The validated way into [`ScaleDownOptions`]: one accessor per field, named like it, and one
//! setter per field; the setters of fields with a rule (a threshold in `0..=1`, a parallelism
//! of at least 1) refuse a value that breaks it with an [`InvalidOption`] naming the field.
//!
//! It decides which single values a field takes; it never checks one field against another
//! (the shells do, once every field is set) and never changes a default (`Default` states them).

use std::time::Duration;

use crate::invalid_option::{InvalidOption, at_least_one, fraction};
use crate::scale_down::ScaleDownOptions;
use crate::scale_down::drain::DrainOptions;
use crate::scale_down::drain_priority::DrainPriorityConfig;
use crate::scale_down::utilization::UtilizationOptions;

impl ScaleDownOptions {
    /// Whether the cluster is scaled down at all (`--scale-down-enabled`).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The utilization below which a node may be removed (`--scale-down-utilization-threshold`).
    pub fn utilization_threshold(&self) -> f64 {
        self.utilization_threshold
    }

    /// The GPU utilization below which a GPU node may be removed (`--scale-down-gpu-utilization-threshold`).
    pub fn gpu_utilization_threshold(&self) -> f64 {
        self.gpu_utilization_threshold
    }

    /// How long a node must be unneeded before it is removed (`--scale-down-unneeded-time`).
    pub fn unneeded_time(&self) -> Duration {
        self.unneeded_time
    }

    /// How long an unready node must be unneeded before it is removed (`--scale-down-unready-time`).
    pub fn unready_time(&self) -> Duration {
        self.unready_time
    }

    /// The wait after a scale-up before scale-down resumes (`--scale-down-delay-after-add`).
    pub fn delay_after_add(&self) -> Duration {
        self.delay_after_add
    }

    /// The wait after a node deletion before scale-down resumes (`--scale-down-delay-after-delete`).
    pub fn delay_after_delete(&self) -> Duration {
        self.delay_after_delete
    }

    /// The wait after a failed scale-down before scale-down resumes (`--scale-down-delay-after-failure`).
    pub fn delay_after_failure(&self) -> Duration {
        self.delay_after_failure
    }

    /// The deletions at once, drains included (`--max-scale-down-parallelism`).
    pub fn max_scale_down_parallelism(&self) -> usize {
        self.max_scale_down_parallelism
    }

    /// The non-empty nodes drained at once (`--max-drain-parallelism`).
    pub fn max_drain_parallelism(&self) -> usize {
        self.max_drain_parallelism
    }

    /// The non-empty nodes found removable per pass (`usize::MAX`: no limit) (`--scale-down-non-empty-candidates-count`).
    pub fn non_empty_candidates_count(&self) -> usize {
        self.non_empty_candidates_count
    }

    /// The extra non-empty candidates tried when some fail, as a share of the nodes (`--scale-down-candidates-pool-ratio`).
    pub fn candidates_pool_ratio(&self) -> f64 {
        self.candidates_pool_ratio
    }

    /// The least number of extra candidates tried (`--scale-down-candidates-pool-min-count`).
    pub fn candidates_pool_min_count(&self) -> usize {
        self.candidates_pool_min_count
    }

    /// The longest grace period given to an eviction, in seconds (`--max-graceful-termination-sec`).
    pub fn max_graceful_termination_sec(&self) -> u64 {
        self.max_graceful_termination_sec
    }

    /// The soft taints added or removed per pass (`--max-bulk-soft-taint-count`).
    pub fn max_bulk_soft_taint_count(&self) -> usize {
        self.max_bulk_soft_taint_count
    }

    /// Whether unready nodes may be scaled down (`--scale-down-unready-enabled`).
    pub fn unready_enabled(&self) -> bool {
        self.unready_enabled
    }

    /// Whether the delays after a scale-up, a deletion and a failure hold only the group concerned (`--scale-down-delay-type-local`).
    pub fn delay_type_local(&self) -> bool {
        self.delay_type_local
    }

    /// Sets [`Self::enabled`].
    pub fn set_enabled(&mut self, value: bool) {
        self.enabled = value;
    }

    /// Sets [`Self::utilization_threshold`]; it must lie in `0..=1`.
    pub fn set_utilization_threshold(&mut self, value: f64) -> Result<(), InvalidOption> {
        self.utilization_threshold = fraction("utilization_threshold", value)?;
        Ok(())
    }

    /// Sets [`Self::gpu_utilization_threshold`]; it must lie in `0..=1`.
    pub fn set_gpu_utilization_threshold(&mut self, value: f64) -> Result<(), InvalidOption> {
        self.gpu_utilization_threshold = fraction("gpu_utilization_threshold", value)?;
        Ok(())
    }

    /// Sets [`Self::unneeded_time`].
    pub fn set_unneeded_time(&mut self, value: Duration) {
        self.unneeded_time = value;
    }

    /// Sets [`Self::unready_time`].
    pub fn set_unready_time(&mut self, value: Duration) {
        self.unready_time = value;
    }

    /// Sets [`Self::delay_after_add`].
    pub fn set_delay_after_add(&mut self, value: Duration) {
        self.delay_after_add = value;
    }

    /// Sets [`Self::delay_after_delete`].
    pub fn set_delay_after_delete(&mut self, value: Duration) {
        self.delay_after_delete = value;
    }

    /// Sets [`Self::delay_after_failure`].
    pub fn set_delay_after_failure(&mut self, value: Duration) {
        self.delay_after_failure = value;
    }

    /// Sets [`Self::max_scale_down_parallelism`]; it must be at least 1.
    pub fn set_max_scale_down_parallelism(&mut self, value: usize) -> Result<(), InvalidOption> {
        self.max_scale_down_parallelism = at_least_one("max_scale_down_parallelism", value)?;
        Ok(())
    }

    /// Sets [`Self::max_drain_parallelism`]; it must be at least 1.
    pub fn set_max_drain_parallelism(&mut self, value: usize) -> Result<(), InvalidOption> {
        self.max_drain_parallelism = at_least_one("max_drain_parallelism", value)?;
        Ok(())
    }

    /// Sets [`Self::non_empty_candidates_count`].
    pub fn set_non_empty_candidates_count(&mut self, value: usize) {
        self.non_empty_candidates_count = value;
    }

    /// Sets [`Self::candidates_pool_ratio`]; it must lie in `0..=1`.
    pub fn set_candidates_pool_ratio(&mut self, value: f64) -> Result<(), InvalidOption> {
        self.candidates_pool_ratio = fraction("candidates_pool_ratio", value)?;
        Ok(())
    }

    /// Sets [`Self::candidates_pool_min_count`].
    pub fn set_candidates_pool_min_count(&mut self, value: usize) {
        self.candidates_pool_min_count = value;
    }

    /// Sets [`Self::max_graceful_termination_sec`].
    pub fn set_max_graceful_termination_sec(&mut self, value: u64) {
        self.max_graceful_termination_sec = value;
    }

    /// Sets [`Self::max_bulk_soft_taint_count`].
    pub fn set_max_bulk_soft_taint_count(&mut self, value: usize) {
        self.max_bulk_soft_taint_count = value;
    }

    /// Sets [`Self::unready_enabled`].
    pub fn set_unready_enabled(&mut self, value: bool) {
        self.unready_enabled = value;
    }

    /// Sets [`Self::delay_type_local`].
    pub fn set_delay_type_local(&mut self, value: bool) {
        self.delay_type_local = value;
    }

    /// The drain's priority stages (`--drain-priority-config`); none: every pod at once, capped
    /// by [`Self::max_graceful_termination_sec`].
    pub fn drain_priority(&self) -> Option<&DrainPriorityConfig> {
        self.drain_priority.as_ref()
    }

    /// Sets [`Self::drain_priority`].
    pub fn set_drain_priority(&mut self, value: Option<DrainPriorityConfig>) {
        self.drain_priority = value;
    }

    /// What counts toward utilization (`--ignore-daemonsets-utilization`,
    /// `--ignore-mirror-pods-utilization`): an option group of its own, whose setters check
    /// their values.
    pub fn utilization(&self) -> &UtilizationOptions {
        &self.utilization
    }

    /// [`Self::utilization`], to change through its setters.
    pub fn utilization_mut(&mut self) -> &mut UtilizationOptions {
        &mut self.utilization
    }

    /// The drain rules (`--skip-nodes-with-*`, `--min-replica-count`, DaemonSet evictions): an
    /// option group of its own, whose setters check their values.
    pub fn drain(&self) -> &DrainOptions {
        &self.drain
    }

    /// [`Self::drain`], to change through its setters.
    pub fn drain_mut(&mut self) -> &mut DrainOptions {
        &mut self.drain
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threshold_outside_zero_to_one_is_refused_and_the_value_kept() {
        let mut o = ScaleDownOptions::default();
        for bad in [-0.1, 1.5, f64::NAN] {
            let e = o.set_utilization_threshold(bad).unwrap_err();
            assert_eq!(e.field(), "utilization_threshold");
            let e = o.set_gpu_utilization_threshold(bad).unwrap_err();
            assert_eq!(e.field(), "gpu_utilization_threshold");
            let e = o.set_candidates_pool_ratio(bad).unwrap_err();
            assert_eq!(e.field(), "candidates_pool_ratio");
        }
        assert_eq!(o.utilization_threshold(), 0.5);
        assert_eq!(o.gpu_utilization_threshold(), 0.5);
        assert_eq!(o.candidates_pool_ratio(), 0.1);
        o.set_utilization_threshold(1.0).unwrap();
        o.set_gpu_utilization_threshold(0.0).unwrap();
        assert_eq!(o.utilization_threshold(), 1.0);
        assert_eq!(o.gpu_utilization_threshold(), 0.0);
    }

    #[test]
    fn a_parallelism_of_zero_is_refused() {
        let mut o = ScaleDownOptions::default();
        let e = o.set_max_scale_down_parallelism(0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "max_scale_down_parallelism = 0: must be at least 1"
        );
        let e = o.set_max_drain_parallelism(0).unwrap_err();
        assert_eq!(e.field(), "max_drain_parallelism");
        assert_eq!(o.max_scale_down_parallelism(), 10);
        assert_eq!(o.max_drain_parallelism(), 1);
        o.set_max_scale_down_parallelism(3).unwrap();
        o.set_max_drain_parallelism(2).unwrap();
        assert_eq!(o.max_scale_down_parallelism(), 3);
        assert_eq!(o.max_drain_parallelism(), 2);
    }

    #[test]
    fn the_unchecked_setters_land_in_their_fields() {
        let mut o = ScaleDownOptions::default();
        o.set_enabled(false);
        o.set_unneeded_time(Duration::ZERO);
        o.set_unready_time(Duration::from_secs(1));
        o.set_delay_after_add(Duration::from_secs(2));
        o.set_delay_after_delete(Duration::from_secs(3));
        o.set_delay_after_failure(Duration::from_secs(4));
        o.set_non_empty_candidates_count(5);
        o.set_candidates_pool_min_count(6);
        o.set_max_graceful_termination_sec(7);
        o.set_max_bulk_soft_taint_count(8);
        o.set_unready_enabled(false);
        o.set_delay_type_local(true);
        o.set_drain_priority(Some("1000:100,0:60".parse().unwrap()));
        assert!(!o.enabled() && !o.unready_enabled() && o.delay_type_local());
        let times = [
            o.unneeded_time(),
            o.unready_time(),
            o.delay_after_add(),
            o.delay_after_delete(),
            o.delay_after_failure(),
        ];
        assert_eq!(times.map(|d| d.as_secs()), [0, 1, 2, 3, 4]);
        assert_eq!(o.non_empty_candidates_count(), 5);
        assert_eq!(o.candidates_pool_min_count(), 6);
        assert_eq!(o.max_graceful_termination_sec(), 7);
        assert_eq!(o.max_bulk_soft_taint_count(), 8);
        assert!(o.drain_priority().is_some());
    }

    #[test]
    fn the_option_groups_change_through_their_borrows() {
        let mut o = ScaleDownOptions::default();
        o.utilization_mut().set_ignore_daemonsets(true);
        o.drain_mut().set_min_replica_count(2).unwrap();
        assert!(o.drain_mut().set_min_replica_count(-1).is_err());
        assert!(o.utilization().ignore_daemonsets());
        assert_eq!(o.drain().min_replica_count(), 2);
    }
}

//! The way into [`PendingOptions`]: an accessor per field, named like it, and a setter per field.
//! Every value of each field is one upstream accepts (any priority, any delay, any scheduler
//! names), so the setters are unchecked.

use std::time::Duration;

use crate::scale_up::pending::PendingOptions;

impl PendingOptions {
    /// Pods with a lower priority never cause a scale-up (`--expendable-pods-priority-cutoff`).
    pub fn expendable_pods_priority_cutoff(&self) -> i32 {
        self.expendable_pods_priority_cutoff
    }

    /// Pods younger than this are not acted on yet (`--new-pod-scale-up-delay`).
    pub fn new_pod_scale_up_delay(&self) -> Duration {
        self.new_pod_scale_up_delay
    }

    /// When not empty, only pending pods of these schedulers are acted on
    /// (`--allowed-scheduler-names`).
    pub fn allowed_schedulers(&self) -> &[String] {
        &self.allowed_schedulers
    }

    /// Pending pods of these schedulers are acted on before the scheduler has marked them
    /// unschedulable (`--bypassed-scheduler-names`).
    pub fn bypassed_schedulers(&self) -> &[String] {
        &self.bypassed_schedulers
    }

    /// Sets [`Self::expendable_pods_priority_cutoff`].
    pub fn set_expendable_pods_priority_cutoff(&mut self, value: i32) {
        self.expendable_pods_priority_cutoff = value;
    }

    /// Sets [`Self::new_pod_scale_up_delay`].
    pub fn set_new_pod_scale_up_delay(&mut self, value: Duration) {
        self.new_pod_scale_up_delay = value;
    }

    /// Sets [`Self::allowed_schedulers`].
    pub fn set_allowed_schedulers(&mut self, value: Vec<String>) {
        self.allowed_schedulers = value;
    }

    /// Sets [`Self::bypassed_schedulers`].
    pub fn set_bypassed_schedulers(&mut self, value: Vec<String>) {
        self.bypassed_schedulers = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setters_land_their_value() {
        let mut o = PendingOptions::default();
        assert_eq!(o.expendable_pods_priority_cutoff(), -10);
        assert_eq!(o.new_pod_scale_up_delay(), Duration::ZERO);
        assert!(o.allowed_schedulers().is_empty() && o.bypassed_schedulers().is_empty());
        o.set_expendable_pods_priority_cutoff(-3);
        o.set_new_pod_scale_up_delay(Duration::from_secs(7));
        o.set_allowed_schedulers(vec!["a".into()]);
        o.set_bypassed_schedulers(vec!["b".into(), "c".into()]);
        assert_eq!(o.expendable_pods_priority_cutoff(), -3);
        assert_eq!(o.new_pod_scale_up_delay(), Duration::from_secs(7));
        assert_eq!(o.allowed_schedulers(), ["a"]);
        assert_eq!(o.bypassed_schedulers(), ["b", "c"]);
    }
}

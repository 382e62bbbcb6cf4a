//! The validated way into [`DrainOptions`]: one accessor per field, named like it, and a setter
//! per field. Only the minimum replica count can be impossible (a negative count); the other
//! fields take any value, so their setters are unchecked.

use crate::invalid_option::{InvalidOption, not_negative};
use crate::scale_down::drain::DrainOptions;

impl DrainOptions {
    /// Nodes with kube-system pods that are neither DaemonSet nor mirror pods and have no
    /// PodDisruptionBudget are kept (`--skip-nodes-with-system-pods`).
    pub fn skip_nodes_with_system_pods(&self) -> bool {
        self.skip_nodes_with_system_pods
    }

    /// How long after its creation such a kube-system pod still blocks, in milliseconds
    /// (`--blocking-system-pod-distruption-timeout`; 0: never blocks).
    pub fn blocking_system_pod_disruption_timeout_ms(&self) -> i64 {
        self.blocking_system_pod_disruption_timeout_ms
    }

    /// Nodes with pods using local storage are kept (`--skip-nodes-with-local-storage`).
    pub fn skip_nodes_with_local_storage(&self) -> bool {
        self.skip_nodes_with_local_storage
    }

    /// Nodes with pods of custom controllers are kept
    /// (`--skip-nodes-with-custom-controller-pods`).
    pub fn skip_nodes_with_custom_controller_pods(&self) -> bool {
        self.skip_nodes_with_custom_controller_pods
    }

    /// Pods of a ReplicaSet or ReplicationController with fewer desired replicas block
    /// (`--min-replica-count`).
    pub fn min_replica_count(&self) -> i32 {
        self.min_replica_count
    }

    /// Evict DaemonSet pods from nodes with no pod to move
    /// (`--daemonset-eviction-for-empty-nodes`).
    pub fn daemonset_eviction_for_empty_nodes(&self) -> bool {
        self.daemonset_eviction_for_empty_nodes
    }

    /// Evict DaemonSet pods from nodes with pods to move
    /// (`--daemonset-eviction-for-occupied-nodes`).
    pub fn daemonset_eviction_for_occupied_nodes(&self) -> bool {
        self.daemonset_eviction_for_occupied_nodes
    }

    /// Pods with a lower priority are expendable (`--expendable-pods-priority-cutoff`).
    pub fn expendable_pods_priority_cutoff(&self) -> i32 {
        self.expendable_pods_priority_cutoff
    }

    /// Sets [`Self::skip_nodes_with_system_pods`].
    pub fn set_skip_nodes_with_system_pods(&mut self, value: bool) {
        self.skip_nodes_with_system_pods = value;
    }

    /// Sets [`Self::blocking_system_pod_disruption_timeout_ms`].
    pub fn set_blocking_system_pod_disruption_timeout_ms(&mut self, value: i64) {
        self.blocking_system_pod_disruption_timeout_ms = value;
    }

    /// Sets [`Self::skip_nodes_with_local_storage`].
    pub fn set_skip_nodes_with_local_storage(&mut self, value: bool) {
        self.skip_nodes_with_local_storage = value;
    }

    /// Sets [`Self::skip_nodes_with_custom_controller_pods`].
    pub fn set_skip_nodes_with_custom_controller_pods(&mut self, value: bool) {
        self.skip_nodes_with_custom_controller_pods = value;
    }

    /// Sets [`Self::min_replica_count`]; it must not be negative.
    pub fn set_min_replica_count(&mut self, value: i32) -> Result<(), InvalidOption> {
        self.min_replica_count = not_negative("min_replica_count", value)?;
        Ok(())
    }

    /// Sets [`Self::daemonset_eviction_for_empty_nodes`].
    pub fn set_daemonset_eviction_for_empty_nodes(&mut self, value: bool) {
        self.daemonset_eviction_for_empty_nodes = value;
    }

    /// Sets [`Self::daemonset_eviction_for_occupied_nodes`].
    pub fn set_daemonset_eviction_for_occupied_nodes(&mut self, value: bool) {
        self.daemonset_eviction_for_occupied_nodes = value;
    }

    /// Sets [`Self::expendable_pods_priority_cutoff`].
    pub fn set_expendable_pods_priority_cutoff(&mut self, value: i32) {
        self.expendable_pods_priority_cutoff = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::invalid_option::OptionRule;

    #[test]
    fn a_negative_replica_count_is_refused_and_the_value_kept() {
        let mut o = DrainOptions::default();
        let e = o.set_min_replica_count(-1).unwrap_err();
        assert_eq!(
            (e.field(), e.rule()),
            ("min_replica_count", OptionRule::NotNegative)
        );
        assert_eq!(
            e.to_string(),
            "min_replica_count = -1: must not be negative"
        );
        assert_eq!(o, DrainOptions::default());
        o.set_min_replica_count(0).unwrap();
        o.set_min_replica_count(3).unwrap();
        assert_eq!(o.min_replica_count(), 3);
    }

    #[test]
    fn the_unchecked_setters_land_their_value() {
        let mut o = DrainOptions::default();
        o.set_skip_nodes_with_system_pods(false);
        o.set_blocking_system_pod_disruption_timeout_ms(600_000);
        o.set_skip_nodes_with_local_storage(false);
        o.set_skip_nodes_with_custom_controller_pods(false);
        o.set_daemonset_eviction_for_empty_nodes(true);
        o.set_daemonset_eviction_for_occupied_nodes(false);
        o.set_expendable_pods_priority_cutoff(-5);
        assert!(!o.skip_nodes_with_system_pods());
        assert_eq!(o.blocking_system_pod_disruption_timeout_ms(), 600_000);
        assert!(!o.skip_nodes_with_local_storage());
        assert!(!o.skip_nodes_with_custom_controller_pods());
        assert!(o.daemonset_eviction_for_empty_nodes());
        assert!(!o.daemonset_eviction_for_occupied_nodes());
        assert_eq!(o.expendable_pods_priority_cutoff(), -5);
    }
}

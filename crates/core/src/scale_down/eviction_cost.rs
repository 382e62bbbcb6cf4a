//! What evicting one pod weighs when consolidation ranks its candidates (ours, after
//! Karpenter's `EvictionCost`): the disruption a node's pods suffer is not their number but the
//! sum of their weights, so that of two nodes saving as much, the one whose pods matter less
//! goes first.
//!
//! A pod weighs `1 + deletion_cost / 2^27 + priority / 2^25`, clamped to `[0.1, 10]`:
//! `deletion_cost` is its `controller.kubernetes.io/pod-deletion-cost` annotation (the number
//! the ReplicaSet controller reads to pick which replica to remove, an int32), `priority` its
//! `spec.priority`. The divisors are Karpenter's: a pod-deletion-cost spans about ±16 default
//! pods, a priority about ±64 before the clamp, so ordinary values only break ties while
//! `system-*-critical` pods (priority 2·10^9) weigh the maximum. Karpenter clamps to `[-10,
//! 10]`; ours stays above zero because the rank divides the saving by the weight (a node's
//! weight of zero or less would rank it first or last for the wrong reason).
//!
//! A malformed annotation (not a decimal int32 as the ReplicaSet controller parses it: no `+`,
//! no leading zero on a positive value) counts as absent, as it does for that controller. It
//! never panics, reads nothing but the pod, and decides nothing on its own.

use autoscaler_model::Pod;

/// The annotation by which a pod says what deleting it costs (Kubernetes' `PodDeletionCost`).
pub(crate) const POD_DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";

/// The least weight of a pod: a tenth of a default pod's.
const MIN_WEIGHT: f64 = 0.1;

/// The most weight of a pod (Karpenter's upper clamp).
const MAX_WEIGHT: f64 = 10.0;

/// What evicting `pod` weighs: 1 for a pod of priority 0 without a deletion cost.
pub(crate) fn eviction_cost(pod: &Pod) -> f64 {
    let deletion_cost = pod
        .annotation(POD_DELETION_COST_ANNOTATION)
        .and_then(deletion_cost)
        .unwrap_or(0);
    let cost =
        1.0 + f64::from(deletion_cost) / 2f64.powi(27) + f64::from(pod.priority) / 2f64.powi(25);
    cost.clamp(MIN_WEIGHT, MAX_WEIGHT)
}

/// What evicting all of `pods` weighs: the sum of their [`eviction_cost`]s.
pub(crate) fn rescheduling_cost<'p>(pods: impl IntoIterator<Item = &'p Pod>) -> f64 {
    pods.into_iter().map(eviction_cost).sum()
}

/// The value of a `pod-deletion-cost` annotation, read as the ReplicaSet controller reads it: a
/// decimal int32 that starts with `-`, a digit other than 0, or is `0`; `None` otherwise.
fn deletion_cost(text: &str) -> Option<i32> {
    let first_ok = text.starts_with(|c: char| c == '-' || ('1'..='9').contains(&c)) || text == "0";
    if !first_ok {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_model::testing::{GI, PodBuilder};
    use std::sync::Arc;

    fn pod(priority: i32, deletion_cost: Option<&str>) -> Pod {
        PodBuilder::new("p", 100, GI)
            .priority(priority)
            .with(|p| {
                if let Some(v) = deletion_cost {
                    p.annotations
                        .push((Arc::from(POD_DELETION_COST_ANNOTATION), Arc::from(v)));
                }
            })
            .build()
    }

    #[test]
    fn a_default_pod_weighs_one_and_priority_and_deletion_cost_add_to_it() {
        assert_eq!(eviction_cost(&pod(0, None)), 1.0);
        assert_eq!(eviction_cost(&pod(1 << 25, None)), 2.0);
        assert_eq!(eviction_cost(&pod(-(1 << 24), None)), 0.5);
        assert_eq!(eviction_cost(&pod(0, Some("134217728"))), 2.0);
        assert_eq!(eviction_cost(&pod(1 << 25, Some("-67108864"))), 1.5);
        // Ordinary values only break ties.
        let p = eviction_cost(&pod(1000, None));
        assert!(p > 1.0 && p < 1.001, "{p}");
        let c = eviction_cost(&pod(0, Some("-100")));
        assert!(c < 1.0 && c > 0.999, "{c}");
        let both = [pod(0, None), pod(1 << 25, None)];
        assert_eq!(rescheduling_cost(&both), 3.0);
        assert_eq!(rescheduling_cost(&[]), 0.0);
    }

    #[test]
    fn the_weight_is_clamped_and_stays_positive() {
        // system-node-critical: 2,000,001,000.
        assert_eq!(eviction_cost(&pod(2_000_001_000, None)), MAX_WEIGHT);
        assert_eq!(
            eviction_cost(&pod(i32::MAX, Some("2147483647"))),
            MAX_WEIGHT
        );
        assert_eq!(eviction_cost(&pod(i32::MIN, None)), MIN_WEIGHT);
        assert_eq!(eviction_cost(&pod(0, Some("-2147483648"))), MIN_WEIGHT);
        assert_eq!(eviction_cost(&pod(-(1 << 25), None)), MIN_WEIGHT);
    }

    #[test]
    fn a_malformed_deletion_cost_counts_as_none() {
        for bad in [
            "",
            "+5",
            "008",
            "00",
            "--5",
            "-+5",
            "5 ",
            " 5",
            "1e3",
            "1.5",
            "abc",
            "-",
            "2147483648",
            "-2147483649",
            "99999999999999999999999",
            "٣",
        ] {
            assert_eq!(deletion_cost(bad), None, "{bad:?}");
            assert_eq!(eviction_cost(&pod(0, Some(bad))), 1.0, "{bad:?}");
        }
        for (good, v) in [
            ("0", 0),
            ("7", 7),
            ("-7", -7),
            ("-0", 0),
            ("-08", -8),
            ("2147483647", i32::MAX),
            ("-2147483648", i32::MIN),
        ] {
            assert_eq!(deletion_cost(good), Some(v), "{good:?}");
        }
    }
}

//! What holds a node's deletion back once it is decided: `--node-delete-delay-after-taint`
//! after the `ToBeDeletedByClusterAutoscaler` taint (so the scheduler sees the taint before the
//! node goes), then, right before the deletion, any `delay-deletion.cluster-autoscaler.
//! kubernetes.io/*` annotation on the node, for at most `--node-deletion-delay-timeout` (then the
//! deletion proceeds anyway, as upstream's does).
//!
//! It only keeps times and answers whether to go on; it never reads a clock nor the cluster
//! (the caller says whether an annotation is present).

use autoscaler_model::DELAY_DELETION_ANNOTATION_PREFIX;
use autoscaler_model::Node;

/// How often a held deletion looks at the node's annotations again (upstream polls every 5 s).
pub(crate) const POLL_MS: i64 = 5_000;

/// Whether `node` carries a delay-deletion annotation.
pub(crate) fn delays_deletion(node: &Node) -> bool {
    node.annotations
        .iter()
        .any(|(k, _)| k.starts_with(DELAY_DELETION_ANNOTATION_PREFIX))
}

/// What a held deletion does now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Release {
    /// Wait; look again at this time.
    Wait(i64),
    /// Go on (`timed_out`: an annotation was still there at the timeout).
    Go {
        /// The annotation wait ran out.
        timed_out: bool,
    },
}

/// The hold of one deletion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hold {
    /// Not before this (taint time plus `--node-delete-delay-after-taint`).
    pub(crate) after_taint_ms: i64,
    /// When the annotation wait ends, once it has started.
    annotation_until_ms: Option<i64>,
}

impl Hold {
    /// A hold of a node tainted at `now_ms`.
    pub(crate) fn new(now_ms: i64, delay_after_taint_ms: i64) -> Hold {
        Hold {
            after_taint_ms: now_ms.saturating_add(delay_after_taint_ms.max(0)),
            annotation_until_ms: None,
        }
    }

    /// Whether the delay after the taint is over at `now_ms`.
    pub(crate) fn tainted_long_enough(&self, now_ms: i64) -> bool {
        now_ms >= self.after_taint_ms
    }

    /// At `now_ms`, right before the deletion: wait while `annotated` (at most `timeout_ms`
    /// from the first time it was seen; 0 turns the wait off, as upstream).
    pub(crate) fn release(&mut self, now_ms: i64, annotated: bool, timeout_ms: i64) -> Release {
        if !self.tainted_long_enough(now_ms) {
            return Release::Wait(self.after_taint_ms);
        }
        if !annotated || timeout_ms <= 0 {
            return Release::Go { timed_out: false };
        }
        let until = *self
            .annotation_until_ms
            .get_or_insert(now_ms.saturating_add(timeout_ms));
        if now_ms >= until {
            Release::Go { timed_out: true }
        } else {
            Release::Wait(now_ms.saturating_add(POLL_MS).min(until))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_delay_after_taint_comes_first_then_annotations_up_to_the_timeout() {
        let mut h = Hold::new(1_000, 5_000);
        assert_eq!(h.release(3_000, false, 120_000), Release::Wait(6_000));
        assert_eq!(
            h.release(6_000, false, 120_000),
            Release::Go { timed_out: false }
        );
        // Annotated from 6 s: polled every 5 s, released at 6 s + 120 s however often asked.
        let mut h = Hold::new(1_000, 5_000);
        assert_eq!(h.release(6_000, true, 120_000), Release::Wait(11_000));
        assert_eq!(h.release(11_000, true, 120_000), Release::Wait(16_000));
        assert_eq!(h.release(124_000, true, 120_000), Release::Wait(126_000));
        assert_eq!(
            h.release(126_000, true, 120_000),
            Release::Go { timed_out: true }
        );
        // The annotation removed: at once.
        let mut h = Hold::new(0, 0);
        assert_eq!(h.release(0, true, 120_000), Release::Wait(5_000));
        assert_eq!(
            h.release(5_000, false, 120_000),
            Release::Go { timed_out: false }
        );
        // A zero timeout turns the annotation wait off.
        assert_eq!(
            Hold::new(0, 0).release(0, true, 0),
            Release::Go { timed_out: false }
        );
    }

    #[test]
    fn only_annotations_with_the_prefix_delay_a_deletion() {
        let node = |k: &str| {
            let mut n = Node::new("n");
            n.annotations.push((Arc::from(k), Arc::from("")));
            n
        };
        assert!(delays_deletion(&node(
            "delay-deletion.cluster-autoscaler.kubernetes.io/flush-logs"
        )));
        assert!(!delays_deletion(&node(
            "cluster-autoscaler.kubernetes.io/scale-down-disabled"
        )));
    }
}

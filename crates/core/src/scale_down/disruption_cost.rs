//! What consolidating a node costs in work, and whether what it saves is worth it (ours).
//!
//! An evicted pod of a Job starts over: the time it has run is lost, and its share of its node
//! was paid for nothing. A live autoscaler does not know how long a task will still run, only
//! how long it has run; for the heavy-tailed durations of batch work, a task that has run `E`
//! is expected to run about as long again. So:
//!
//! - the work a pod would lose is `max(E, horizon) × share × price`: its elapsed run (at least
//!   the horizon, so that a pod that just restarted is not free to move again) times its share of
//!   the node (its largest request over the node's allocatable, cpu, memory or an extended
//!   resource) times the node's price per hour. Only pods owned by a Job lose work; a
//!   ReplicaSet's or StatefulSet's replacement serves on where the old pod left off;
//! - the saving lasts `max(horizon, longest elapsed run of the pods moved)`: the nodes would
//!   otherwise be kept about as long as their pods have already run; but only **until the room
//!   is needed again**: the pods moved take room on the other nodes, and when pods arrive
//!   faster than that room is freed, the next scale-up buys the room back while the moved
//!   tasks start over. By the same reasoning as for runs, a cluster that last needed a
//!   scale-up `U` ago is expected to need the next one in about `U`: the saving is counted
//!   for at most `max(horizon, U)` (no cap when there was no scale-up). On the real-time GPU
//!   replay this is what keeps consolidation from draining nodes of long tasks while GPU tasks
//!   keep arriving (drain, scale-up, the tasks restarted: 2,839 node-hours of restarted work
//!   with `delete` before, 118 after, fewer than with consolidation off);
//! - a set of nodes is consolidated only if its saving per hour over that time exceeds the work
//!   its pods would lose. For a deletion this means the pods' shares must sum to less than one
//!   node (the room a deletion frees is what it saves); for a replacement, that the new node
//!   saves more per hour than the price share of the tasks restarted.
//!
//! It never reads a pod's future (the trace's durations) nor the arrivals to come: only its
//! conditions' times, its owner's kind, the node's price and allocatable, and when the loop
//! last scaled up for pending pods. It decides nothing on its own: the consolidation search
//! asks it.

use autoscaler_model::{Node, Pod, ResourceName};

/// The owner kind whose evicted pods start their work over.
const RESTARTS_FROM_ZERO: &str = "Job";

/// When a pod's current run started: its `Initialized=True` condition's transition, else its
/// `PodScheduled=True` one, else its creation (`None` if it says none of these).
pub(crate) fn running_since_ms(pod: &Pod) -> Option<i64> {
    let since = |type_: &str| {
        pod.conditions
            .iter()
            .find(|c| c.type_.as_str() == type_ && c.status.as_str() == "True")
            .and_then(|c| c.last_transition_ms)
    };
    since("Initialized")
        .or_else(|| since("PodScheduled"))
        .or(pod.creation_ms)
}

/// Whether an evicted pod starts its work over (a Job's pod).
pub(crate) fn restarts_from_zero(pod: &Pod) -> bool {
    pod.owner
        .as_ref()
        .is_some_and(|o| o.kind.as_str() == RESTARTS_FROM_ZERO)
}

/// The share of `node` a pod holds: its largest request over the node's allocatable, at most 1.
pub(crate) fn share(pod: &Pod, node: &Node) -> f64 {
    let a = &node.allocatable;
    let mut most: f64 = 0.0;
    for (name, v) in pod.requests.iter() {
        if name == ResourceName::Pods || v <= 0 {
            continue;
        }
        let cap = a.get(name);
        if cap > 0 {
            most = most.max(v as f64 / cap as f64);
        }
    }
    most.min(1.0)
}

/// What disrupting one node's pods weighs: the work they would lose (in the node's price
/// units, e.g. currency) and how long the saving of removing it is counted for.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct DisruptionCost {
    /// Work lost, in price × hours.
    pub lost: f64,
    /// Hours the saving is counted for: the horizon, or the longest run of its pods.
    pub hours: f64,
    /// Pods that would start over.
    pub restarts: usize,
}

impl DisruptionCost {
    /// The cost of evicting `pods` from `node`, priced `price` per hour, at `now_ms`, with
    /// `horizon_h` the least time a run or a saving is counted for (hours).
    pub(crate) fn of<'p>(
        pods: impl Iterator<Item = &'p Pod>,
        node: &Node,
        price: f64,
        now_ms: i64,
        horizon_h: f64,
    ) -> DisruptionCost {
        let mut c = DisruptionCost {
            hours: horizon_h,
            ..DisruptionCost::default()
        };
        for p in pods {
            let ran_h = running_since_ms(p).map_or(0.0, |t| {
                now_ms.saturating_sub(t).max(0) as f64 / 3_600_000.0
            });
            c.hours = c.hours.max(ran_h);
            if restarts_from_zero(p) {
                c.lost += ran_h.max(horizon_h) * share(p, node) * price;
                c.restarts += 1;
            }
        }
        c
    }

    /// This cost with its saving counted only until the room is expected to be needed again:
    /// at most `max(horizon_h, since_scale_up_h)`, `since_scale_up_h` being how long ago the
    /// cluster last scaled up for pending pods (`None`: never, no cap).
    pub(crate) fn until_room_needed(self, since_scale_up_h: Option<f64>, horizon_h: f64) -> Self {
        match since_scale_up_h {
            Some(u) => DisruptionCost {
                hours: self.hours.min(horizon_h.max(u)),
                ..self
            },
            None => self,
        }
    }

    /// The cost of several nodes' disruptions at once.
    pub(crate) fn sum<'c>(all: impl Iterator<Item = &'c DisruptionCost>) -> DisruptionCost {
        let mut out = DisruptionCost::default();
        for c in all {
            out.lost += c.lost;
            out.hours = out.hours.max(c.hours);
            out.restarts += c.restarts;
        }
        out
    }

    /// Whether saving `saved_per_hour` is worth the work lost.
    pub(crate) fn worth(&self, saved_per_hour: f64) -> bool {
        saved_per_hour > 0.0 && saved_per_hour * self.hours > self.lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_model::PodCondition;
    use autoscaler_model::Sym;
    use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};

    const H: i64 = 3_600_000;

    fn task(cpu: i64, started_ms: i64) -> Pod {
        PodBuilder::new("t", cpu, GI)
            .owner("Job", "tasks")
            .with(|p| {
                p.creation_ms = Some(0);
                p.conditions.push(PodCondition {
                    type_: Sym::new("Initialized"),
                    status: Sym::new("True"),
                    reason: None,
                    last_transition_ms: Some(started_ms),
                });
            })
            .build()
    }

    #[test]
    fn a_task_loses_its_run_times_its_share_of_the_price() {
        let node = NodeBuilder::new("n", 8000, 32 * GI).build();
        // 2 of 8 cores for 10 h on a node of 4/h: 10 × 0.25 × 4 = 10.
        let c = DisruptionCost::of([task(2000, 0)].iter(), &node, 4.0, 10 * H, 1.0);
        assert!((c.lost - 10.0).abs() < 1e-9, "{c:?}");
        assert_eq!(c.hours, 10.0);
        assert_eq!(c.restarts, 1);
        // Started just now: it counts for the horizon, not for nothing.
        let c = DisruptionCost::of([task(2000, 10 * H)].iter(), &node, 4.0, 10 * H, 1.0);
        assert!((c.lost - 1.0).abs() < 1e-9, "{c:?}");
        assert_eq!(c.hours, 1.0);
        // A service's pod resumes in its replacement: nothing lost, its run still counts.
        let web = PodBuilder::new("w", 2000, GI)
            .owner("ReplicaSet", "web")
            .with(|p| p.creation_ms = Some(0))
            .build();
        let c = DisruptionCost::of([web].iter(), &node, 4.0, 10 * H, 1.0);
        assert_eq!((c.lost, c.hours, c.restarts), (0.0, 10.0, 0));
        assert!(c.worth(0.1));
        assert!(!c.worth(0.0));
    }

    #[test]
    fn a_saving_must_outweigh_the_work_lost_over_the_longest_run() {
        let node = NodeBuilder::new("n", 8000, 32 * GI).build();
        // One task on a quarter of the node for 10 h: losing 10, saving 4/h × 10 h = 40.
        let c = DisruptionCost::of([task(2000, 0)].iter(), &node, 4.0, 10 * H, 1.0);
        assert!(c.worth(4.0));
        // Replaced by a node of 3.5/h (saving 0.5/h): 5 < 10, not worth it.
        assert!(!c.worth(0.5));
        // A full node's tasks: deleting it saves exactly what they lose, so it stays.
        let full = DisruptionCost::of(
            [task(4000, 0), task(4000, 0)].iter(),
            &node,
            4.0,
            10 * H,
            1.0,
        );
        assert!(!full.worth(4.0), "{full:?}");
        let both = DisruptionCost::sum([c, full].iter());
        assert_eq!(both.restarts, 3);
        assert!((both.lost - 50.0).abs() < 1e-9);
    }

    #[test]
    fn the_saving_counts_only_until_the_room_is_needed_again() {
        let node = NodeBuilder::new("n", 8000, 32 * GI).build();
        // A quarter of the node for 10 h on a node of 4/h: losing 10; saving 4/h for 10 h.
        let c = DisruptionCost::of([task(2000, 0)].iter(), &node, 4.0, 10 * H, 1.0);
        assert!(c.worth(4.0));
        // No scale-up yet, or the last one 20 h ago: the longest run still bounds the saving.
        assert_eq!(c.until_room_needed(None, 1.0), c);
        assert_eq!(c.until_room_needed(Some(20.0), 1.0).hours, 10.0);
        // Pods needed room 2 h ago: the room freed is expected to be bought back in about
        // 2 h, saving 8 for 10 lost: the node stays.
        let soon = c.until_room_needed(Some(2.0), 1.0);
        assert_eq!((soon.hours, soon.lost, soon.restarts), (2.0, c.lost, 1));
        assert!(!soon.worth(4.0));
        // A scale-up a minute ago still counts the horizon (1 h here): 4 against 10.
        assert_eq!(c.until_room_needed(Some(1.0 / 60.0), 1.0).hours, 1.0);
        // Pods that lose nothing move for any saving, whenever the room is needed.
        let web = PodBuilder::new("w", 2000, GI)
            .owner("ReplicaSet", "web")
            .with(|p| p.creation_ms = Some(0))
            .build();
        let w = DisruptionCost::of([web].iter(), &node, 4.0, 10 * H, 1.0);
        assert!(w.until_room_needed(Some(0.0), 1.0).worth(0.1));
    }

    #[test]
    fn the_start_is_read_from_the_conditions_then_the_creation() {
        let p = task(1000, 5 * H);
        assert_eq!(running_since_ms(&p), Some(5 * H));
        let bare = PodBuilder::new("b", 1000, GI)
            .with(|p| p.creation_ms = Some(7))
            .build();
        assert_eq!(running_since_ms(&bare), Some(7));
        assert!(!restarts_from_zero(&bare));
        let gpu_node = NodeBuilder::new("g", 96_000, 384 * GI)
            .resource("nvidia.com/gpu", 8)
            .build();
        let mut one_gpu = task(12_000, 0);
        one_gpu
            .requests
            .set(ResourceName::parse("nvidia.com/gpu"), 2);
        // cpu 12/96 = 0.125, GPUs 2/8 = 0.25: the GPUs are its share.
        assert!((share(&one_gpu, &gpu_node) - 0.25).abs() < 1e-9);
    }
}

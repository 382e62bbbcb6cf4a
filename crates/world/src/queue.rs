//! The world's discrete-event queue: what happens next, in virtual time.
//!
//! It decides only the order of events: earliest first, and events due at the same instant in
//! the order they were queued, so that a seed replays identically. It never interprets an event
//! (the world hands each to the controller it names) and never reads the real clock.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::time::SimTime;

/// Namespace and name.
pub(crate) type NsName = (String, String);

/// Something due at a virtual instant, addressed to one controller.
#[derive(Clone, Debug)]
pub(crate) enum Event {
    /// The scheduler's periodic run.
    SchedulerTick,
    /// A periodic metrics sample.
    MetricsTick,
    /// A Machine's provisioning delay has elapsed.
    MachineReady { machine: NsName, uid: String },
    /// A pod's lifetime has elapsed.
    PodDone { pod: NsName, uid: String },
    /// A terminating pod's kubelet has finished: the pod goes.
    PodTerminated { pod: NsName, uid: String },
    /// A ReplicaSet's replica schedule changes its count.
    Replicas { rs: NsName, replicas: u32 },
    /// A StatefulSet's replica schedule changes its count.
    StatefulSetReplicas { sts: NsName, replicas: u32 },
    /// Start or end of a `NodesNotReady` fault (index into the readiness controller's faults).
    Readiness { fault: usize, start: bool },
    /// The MachineSet controller acts on a change of replicas.
    SyncGroup { group: NsName },
    /// Someone else changes a group's replicas or template (a `ReplicasChanged` or `Rollout`
    /// fault, by index into the machine controller's faults).
    ExternalScale { fault: usize },
    /// Drain the Node of a Machine being deleted.
    DrainMachine { machine: NsName, uid: String },
    /// A Machine being deleted (and its Node) is gone.
    MachineGone { machine: NsName, uid: String },
    /// A node's device plugins advertise its extended resources (name and quantity).
    DevicePlugin {
        node: String,
        uid: String,
        resources: Vec<(String, String)>,
    },
    /// A node's DRA driver publishes its ResourceSlice.
    DraPublish { node: String, uid: String },
}

#[derive(Debug)]
struct Queued {
    at: SimTime,
    seq: u64,
    event: Event,
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Queued {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// Events ordered by due time, then by the order they were queued.
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Reverse<Queued>>,
    queued: u64,
}

impl EventQueue {
    /// Queues `event` for virtual time `at`.
    pub(crate) fn push(&mut self, at: SimTime, event: Event) {
        self.queued += 1;
        self.heap.push(Reverse(Queued {
            at,
            seq: self.queued,
            event,
        }));
    }

    /// Takes the next event if it is due at or before `t`, with its due time.
    pub(crate) fn pop_due(&mut self, t: SimTime) -> Option<(SimTime, Event)> {
        if self.heap.peek()?.0.at > t {
            return None;
        }
        self.heap.pop().map(|Reverse(q)| (q.at, q.event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_by_time_then_in_queueing_order() {
        let mut q = EventQueue::default();
        q.push(20, Event::MetricsTick);
        q.push(10, Event::SchedulerTick);
        q.push(10, Event::MetricsTick);
        assert!(q.pop_due(5).is_none(), "nothing is due before 10");
        let order: Vec<(SimTime, bool)> = std::iter::from_fn(|| q.pop_due(20))
            .map(|(at, e)| (at, matches!(e, Event::SchedulerTick)))
            .collect();
        assert_eq!(order, [(10, true), (10, false), (20, false)]);
    }
}

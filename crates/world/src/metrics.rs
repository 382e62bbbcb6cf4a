//! The metrics log a simulation report is built from: periodic samples of pending pods and
//! nodes per group, and each pod's wait from creation to running.
//!
//! A long replay starts millions of pods: every wait is kept as a bare number (8 bytes), and
//! only the first [`NAMED_WAITS`] with the pod's name and times.
//!
//! It records only; it never decides anything and never reads the real clock.

use std::collections::{BTreeMap, BTreeSet};

use autoscaler_model::Resources;

use crate::queue::NsName;
use crate::time::SimTime;

/// One periodic sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    /// When.
    pub at_ms: SimTime,
    /// Live pods not bound to a node.
    pub pending: usize,
    /// Of those, pods marked Unschedulable.
    pub unschedulable: usize,
    /// Pods bound to a node (terminating ones too: they still run and hold their node).
    pub running: usize,
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Registered nodes per MachineDeployment (`namespace/name`).
    pub nodes_per_group: BTreeMap<String, usize>,
    /// Machines per MachineDeployment (`namespace/name`), registered or not.
    pub machines_per_group: BTreeMap<String, usize>,
    /// Summed requests of the pods bound to a node (terminating ones too), DaemonSet pods
    /// excepted: what the nodes must hold at least, whatever their number (the report's fluid
    /// bound is built from it). The DRA devices allocated to claims count too, one unit per
    /// device under their driver's name (`gpu.example.com`).
    pub bound_requests: Resources,
    /// Of those, the requests of replayed pods (a trace's pods and their replacements): the
    /// report counts their work as the trace gives it ([`Metrics::timed_work`]) instead.
    pub timed_requests: Resources,
    /// Registered nodes per MachineDeployment (`namespace/name`) holding no pod but DaemonSet
    /// pods; groups without such a node are left out.
    pub empty_per_group: BTreeMap<String, usize>,
    /// Of the empty registered nodes, those that have held no other pod at any sample since
    /// they registered (capacity bought ahead of its use, or never used).
    pub empty_fresh: usize,
}

/// Time a pod held a node for work that is lost: from `from_ms` to `to_ms` its requests did
/// work an evicted run had done already (the first part of a replayed task's run after an
/// eviction, up to the furthest an earlier run got), a run of a Job's pod that was evicted, or
/// nothing (an evicted pod's termination).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostRun {
    /// The pod, `namespace/name`.
    pub pod: String,
    /// Its requests.
    pub requests: Resources,
    /// Start of the lost time.
    pub from_ms: SimTime,
    /// Its end (for a redone part, the furthest an earlier run got, or this run's eviction).
    pub to_ms: SimTime,
    /// Whether the pod is replayed work (counted in [`Metrics::timed_work`]).
    pub timed: bool,
}

/// How long one pod waited from creation to running.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodWait {
    /// `namespace/name`.
    pub pod: String,
    /// Creation time.
    pub created_ms: SimTime,
    /// Time it was bound and started running.
    pub running_ms: SimTime,
}

impl PodWait {
    /// The wait.
    pub fn wait_ms(&self) -> SimTime {
        self.running_ms.saturating_sub(self.created_ms)
    }
}

/// How many pod starts are kept with their pod's name and times.
pub const NAMED_WAITS: usize = 1_000;

/// The metrics log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Metrics {
    /// Periodic samples, oldest first.
    pub samples: Vec<Sample>,
    /// The first [`NAMED_WAITS`] pod waits, in the order pods started.
    pub waits: Vec<PodWait>,
    /// Every pod's wait (ms), in the order pods started.
    pub wait_ms: Vec<SimTime>,
    /// Evicted pods' lost runs, in eviction order.
    pub lost_runs: Vec<LostRun>,
    /// The replayed pods' work as the trace gives it (from arrival, for their duration).
    pub timed_work: crate::timed_work::TimedWork,
    /// Nodes seen holding a pod other than DaemonSet pods at a sample.
    pub(crate) used_nodes: BTreeSet<String>,
    /// Per replayed task that starts over when evicted (keyed by its first pod, `namespace/name`):
    /// the furthest any of its runs got, and the lost run its current run opened, if any.
    pub(crate) progress: BTreeMap<String, (SimTime, Option<usize>)>,
}

impl Metrics {
    /// Records that a pod started.
    pub(crate) fn pod_started(&mut self, wait: PodWait) {
        self.wait_ms.push(wait.wait_ms());
        if self.waits.len() < NAMED_WAITS {
            self.waits.push(wait);
        }
    }

    /// A task that starts over (`task`) started on a node at `now`: the first part of its run,
    /// up to the furthest an evicted run of it got, does that work again and is lost.
    pub(crate) fn task_started(
        &mut self,
        task: &str,
        pod: String,
        requests: &Resources,
        now: SimTime,
    ) {
        if let Some((done, open)) = self.progress.get_mut(task)
            && *done > 0
        {
            self.lost_runs.push(LostRun {
                pod,
                requests: requests.clone(),
                from_ms: now,
                to_ms: now.saturating_add(*done),
                timed: true,
            });
            *open = Some(self.lost_runs.len() - 1);
        }
    }

    /// A run of the task `task` that started at `started` is evicted at `now`: its redone part
    /// ends here at the latest, and the task's furthest progress is remembered.
    pub(crate) fn task_evicted(&mut self, task: &str, started: SimTime, now: SimTime) {
        let (done, open) = self.progress.entry(task.to_string()).or_default();
        if let Some(run) = open.take().and_then(|i| self.lost_runs.get_mut(i)) {
            run.to_ms = run.to_ms.min(now);
        }
        *done = (*done).max(now.saturating_sub(started));
    }

    /// How many pods started.
    pub fn started(&self) -> usize {
        self.wait_ms.len()
    }
}

/// A sample at `at_ms` of `nodes` nodes, of pods given as (bound, marked Unschedulable), and of
/// Machines given as (MachineDeployment, Node registered) with every MachineDeployment in
/// `groups` counted (as zero if it has no Machine).
pub(crate) fn sample<'a>(
    at_ms: SimTime,
    nodes: usize,
    pods: impl Iterator<Item = (bool, bool)>,
    groups: impl Iterator<Item = &'a NsName>,
    machines: impl Iterator<Item = (&'a NsName, bool)>,
) -> Sample {
    let mut s = Sample {
        at_ms,
        pending: 0,
        unschedulable: 0,
        running: 0,
        nodes,
        nodes_per_group: BTreeMap::new(),
        machines_per_group: BTreeMap::new(),
        bound_requests: Resources::default(),
        timed_requests: Resources::default(),
        empty_per_group: BTreeMap::new(),
        empty_fresh: 0,
    };
    for (bound, unschedulable) in pods {
        if bound {
            s.running += 1;
        } else {
            s.pending += 1;
            if unschedulable {
                s.unschedulable += 1;
            }
        }
    }
    for g in groups {
        let name = format!("{}/{}", g.0, g.1);
        s.nodes_per_group.insert(name.clone(), 0);
        s.machines_per_group.insert(name, 0);
    }
    for (group, registered) in machines {
        let name = format!("{}/{}", group.0, group.1);
        *s.machines_per_group.entry(name.clone()).or_default() += 1;
        if registered {
            *s.nodes_per_group.entry(name).or_default() += 1;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wait_is_counted_and_only_the_first_ones_are_named() {
        let mut m = Metrics::default();
        for i in 0..NAMED_WAITS as u64 + 5 {
            m.pod_started(PodWait {
                pod: format!("ns/p{i}"),
                created_ms: i,
                running_ms: 3 * i,
            });
        }
        assert_eq!(m.started(), NAMED_WAITS + 5);
        assert_eq!(m.waits.len(), NAMED_WAITS);
        assert_eq!(m.waits[7].pod, "ns/p7");
        assert_eq!(m.wait_ms[NAMED_WAITS + 4], 2 * (NAMED_WAITS as u64 + 4));
    }

    #[test]
    fn a_sample_counts_pods_and_machines_per_group_with_empty_groups_as_zero() {
        let (a, b) = (
            ("ns".to_string(), "a".to_string()),
            ("ns".to_string(), "b".to_string()),
        );
        let s = sample(
            7,
            1,
            [(true, false), (false, true), (false, false)].into_iter(),
            [&a, &b].into_iter(),
            [(&a, true), (&a, false)].into_iter(),
        );
        assert_eq!((s.at_ms, s.nodes), (7, 1));
        assert_eq!((s.running, s.pending, s.unschedulable), (1, 2, 1));
        assert_eq!(s.machines_per_group["ns/a"], 2);
        assert_eq!(s.nodes_per_group["ns/a"], 1);
        assert_eq!(s.machines_per_group["ns/b"], 0);
    }
}

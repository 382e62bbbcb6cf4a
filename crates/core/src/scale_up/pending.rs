//! Pending pods: which pods may cause a scale-up, and which of them will run without one.
//!
//! Decides, for the pods kube-scheduler could not place, whether the autoscaler should act on
//! them: expendable pods (priority below the cutoff) and pods younger than their scale-up delay
//! are set aside with a reason; pods that fit on an existing node, or on a node already being
//! provisioned, are placed there in the snapshot (so that two pods never count the same free
//! space) and need no new node. It never changes anything outside the snapshot it is given.

use crate::names::POD_SCALE_UP_DELAY_ANNOTATION;
use std::sync::Arc;
use std::time::Duration;

use rustc_hash::FxHashMap;

use crate::model::duration::parse_duration;
use crate::model::pod::Pod;
use crate::scheduling::snapshot::{ClusterSnapshot, NodeId};

/// Options of pending-pod selection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingOptions {
    /// `--expendable-pods-priority-cutoff` (seed 002's `podPriorityThreshold`): pods with a
    /// lower priority never cause a scale-up.
    pub expendable_pods_priority_cutoff: i32,
    /// `--new-pod-scale-up-delay`: pods younger than this are not acted on yet.
    pub new_pod_scale_up_delay: Duration,
}

impl Default for PendingOptions {
    fn default() -> Self {
        PendingOptions {
            expendable_pods_priority_cutoff: -10,
            new_pod_scale_up_delay: Duration::ZERO,
        }
    }
}

/// Why an unschedulable pod does not count for scale-up (yet).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetAside {
    /// Priority below the cutoff.
    Expendable {
        /// The pod's priority.
        priority: i32,
        /// The cutoff.
        cutoff: i32,
    },
    /// Younger than its scale-up delay.
    TooYoung {
        /// When it becomes eligible, milliseconds since the Unix epoch.
        eligible_at_ms: i64,
    },
}

impl std::fmt::Display for SetAside {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetAside::Expendable { priority, cutoff } => {
                write!(
                    f,
                    "expendable: priority {priority} is below the cutoff {cutoff}"
                )
            }
            SetAside::TooYoung { eligible_at_ms } => {
                write!(
                    f,
                    "younger than its scale-up delay (eligible at {eligible_at_ms} ms)"
                )
            }
        }
    }
}

/// Whether kube-scheduler marked the pod unschedulable (`PodScheduled=False`, reason
/// `Unschedulable`) and it is still waiting: not bound, not terminal, not being deleted.
pub fn is_unschedulable(pod: &Pod) -> bool {
    pod.node_name.is_none()
        && pod.deletion_ms.is_none()
        && !pod.is_terminal()
        && pod.conditions.iter().any(|c| {
            c.type_.as_str() == "PodScheduled"
                && c.status.as_str() == "False"
                && c.reason.is_some_and(|r| r.as_str() == "Unschedulable")
        })
}

/// Unschedulable pods split into those to act on and those set aside, with the reason.
#[derive(Clone, Debug, Default)]
pub struct Selected {
    /// Pods that may cause a scale-up.
    pub eligible: Vec<Arc<Pod>>,
    /// Pods set aside, with why.
    pub set_aside: Vec<(Arc<Pod>, SetAside)>,
}

/// Selects, among `pods`, the unschedulable ones and sets aside expendable and too-young pods.
/// `now_ms` is the decision time (milliseconds since the Unix epoch).
pub fn select<'a>(
    pods: impl IntoIterator<Item = &'a Arc<Pod>>,
    now_ms: i64,
    opts: &PendingOptions,
) -> Selected {
    let mut out = Selected::default();
    for pod in pods.into_iter().filter(|p| is_unschedulable(p)) {
        if pod.priority < opts.expendable_pods_priority_cutoff {
            let why = SetAside::Expendable {
                priority: pod.priority,
                cutoff: opts.expendable_pods_priority_cutoff,
            };
            out.set_aside.push((pod.clone(), why));
            continue;
        }
        let mut delay = opts.new_pod_scale_up_delay;
        if let Some(d) = pod
            .annotation(POD_SCALE_UP_DELAY_ANNOTATION)
            .and_then(|t| parse_duration(t).ok())
        {
            delay = delay.max(d);
        }
        if let Some(created) = pod.creation_ms {
            let eligible_at_ms =
                created.saturating_add(i64::try_from(delay.as_millis()).unwrap_or(i64::MAX));
            if now_ms < eligible_at_ms {
                out.set_aside
                    .push((pod.clone(), SetAside::TooYoung { eligible_at_ms }));
                continue;
            }
        }
        out.eligible.push(pod.clone());
    }
    out
}

/// The result of [`place_on_existing`].
#[derive(Clone, Debug, Default)]
pub struct Placement {
    /// Pods that fit nowhere in the snapshot: they need new nodes.
    pub remaining: Vec<Arc<Pod>>,
    /// Pods placed on an existing or upcoming node of the snapshot, with the node.
    pub placed: Vec<(Arc<Pod>, NodeId)>,
}

/// Places every pod that fits on a node of `snapshot` (existing nodes and nodes being
/// provisioned, which the caller has added) and adds it there, so that later pods see the space
/// as taken. Higher-priority pods go first. The caller forks the snapshot if it wants it back.
///
/// Speed: equivalent pods remember the nodes that refused them (exact for pods without
/// inter-pod or spread constraints, whose fit only gets harder as pods are added), and every pod
/// starts its search where the last placement succeeded, so a cluster with room places each pod
/// in a few checks.
pub fn place_on_existing(snapshot: &mut ClusterSnapshot, mut pods: Vec<Arc<Pod>>) -> Placement {
    pods.sort_by_key(|p| std::cmp::Reverse(p.priority));
    let nodes: Vec<NodeId> = snapshot.node_ids().collect();
    let mut out = Placement::default();
    if nodes.is_empty() {
        out.remaining = pods;
        return out;
    }
    // Per equivalence group: nodes known to refuse it (as a set of positions in `nodes`).
    let mut refused: FxHashMap<u64, Vec<bool>> = FxHashMap::default();
    let mut hint = 0usize;
    // The most room any node has: placements only take room, so it stays an upper bound, and a
    // pod asking for more fits nowhere without a single check. Recomputed after every pod that
    // needed a full scan to be refused (a scan costs as much).
    let mut room = Headroom::of(snapshot, &nodes);
    for pod in pods {
        if !room.admits(&pod) {
            out.remaining.push(pod);
            continue;
        }
        let mut prepared = snapshot.prepare(&pod);
        snapshot.refresh(&pod, &mut prepared);
        let memo = prepared.is_trivial();
        let mut found = None;
        for step in 0..nodes.len() {
            let i = (hint + step) % nodes.len();
            if memo && refused.get(&pod.equivalence).is_some_and(|r| r[i]) {
                continue;
            }
            if snapshot.check(&pod, &prepared, nodes[i]).is_ok() {
                found = Some(i);
                break;
            }
            if memo {
                refused
                    .entry(pod.equivalence)
                    .or_insert_with(|| vec![false; nodes.len()])[i] = true;
            }
        }
        match found {
            Some(i) => {
                hint = i;
                match snapshot.add_pod(pod.clone(), nodes[i]) {
                    Ok(()) => out.placed.push((pod, nodes[i])),
                    // A duplicate pod name: treat it as still pending rather than lose it.
                    Err(_) => out.remaining.push(pod),
                }
            }
            None => {
                out.remaining.push(pod);
                room = Headroom::of(snapshot, &nodes);
            }
        }
    }
    out
}

/// The largest free CPU, memory and pod slots over some nodes (each maximum taken separately).
struct Headroom {
    cpu: i64,
    memory: i64,
    pods: i64,
}

impl Headroom {
    fn of(snapshot: &ClusterSnapshot, nodes: &[NodeId]) -> Headroom {
        let mut room = Headroom {
            cpu: i64::MIN,
            memory: i64::MIN,
            pods: i64::MIN,
        };
        for info in nodes.iter().filter_map(|&id| snapshot.node(id)) {
            let (alloc, used) = (&info.node.allocatable, &info.requested);
            room.cpu = room.cpu.max(alloc.cpu - used.cpu);
            room.memory = room.memory.max(alloc.memory - used.memory);
            room.pods = room.pods.max(alloc.pods - used.pods);
        }
        room
    }

    /// Whether some node may have room for `pod`'s requests (as the resource filter counts:
    /// a zero request always fits).
    fn admits(&self, pod: &Pod) -> bool {
        let r = &pod.requests;
        (r.cpu <= 0 || r.cpu <= self.cpu)
            && (r.memory <= 0 || r.memory <= self.memory)
            && (r.pods <= 0 || r.pods <= self.pods)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{GI, NodeBuilder, PodBuilder};

    fn unschedulable(b: PodBuilder) -> Arc<Pod> {
        b.unschedulable().arc()
    }

    #[test]
    fn only_unschedulable_waiting_pods_are_selected() {
        let plain = PodBuilder::new("plain", 100, GI).arc();
        let marked = unschedulable(PodBuilder::new("marked", 100, GI));
        let bound = unschedulable(PodBuilder::new("bound", 100, GI).node_name("n1"));
        let deleting =
            unschedulable(PodBuilder::new("deleting", 100, GI).with(|p| p.deletion_ms = Some(1)));
        let done = unschedulable(
            PodBuilder::new("done", 100, GI)
                .with(|p| p.phase = crate::model::pod::PodPhase::Succeeded),
        );
        let s = select(
            [&plain, &marked, &bound, &deleting, &done],
            0,
            &PendingOptions::default(),
        );
        let names: Vec<&str> = s.eligible.iter().map(|p| &*p.name).collect();
        assert_eq!(names, ["marked"]);
    }

    #[test]
    fn expendable_pods_never_count() {
        let low = unschedulable(PodBuilder::new("low", 100, GI).priority(-20));
        let edge = unschedulable(PodBuilder::new("edge", 100, GI).priority(-10));
        let s = select([&low, &edge], 0, &PendingOptions::default());
        assert_eq!(s.eligible.len(), 1);
        assert_eq!(
            &*s.eligible[0].name, "edge",
            "the cutoff itself is not expendable"
        );
        assert_eq!(
            s.set_aside[0].1,
            SetAside::Expendable {
                priority: -20,
                cutoff: -10
            }
        );
    }

    #[test]
    fn young_pods_wait_for_the_longer_of_flag_and_annotation() {
        let opts = PendingOptions {
            new_pod_scale_up_delay: Duration::from_secs(30),
            ..Default::default()
        };
        let young =
            unschedulable(PodBuilder::new("young", 1, 1).with(|p| p.creation_ms = Some(100_000)));
        let s = select([&young], 120_000, &opts);
        assert_eq!(
            s.set_aside[0].1,
            SetAside::TooYoung {
                eligible_at_ms: 130_000
            }
        );
        assert_eq!(select([&young], 130_000, &opts).eligible.len(), 1);
        let annotated = unschedulable(PodBuilder::new("annotated", 1, 1).with(|p| {
            p.creation_ms = Some(0);
            p.annotations = vec![(Arc::from(POD_SCALE_UP_DELAY_ANNOTATION), Arc::from("10m"))];
        }));
        assert!(select([&annotated], 599_000, &opts).eligible.is_empty());
        assert_eq!(select([&annotated], 600_000, &opts).eligible.len(), 1);
        // Shorter than the flag: the flag wins.
        let short = unschedulable(PodBuilder::new("short", 1, 1).with(|p| {
            p.creation_ms = Some(0);
            p.annotations = vec![(Arc::from(POD_SCALE_UP_DELAY_ANNOTATION), Arc::from("1s"))];
        }));
        assert!(select([&short], 10_000, &opts).eligible.is_empty());
        // A malformed annotation is ignored, not fatal.
        let bad = unschedulable(PodBuilder::new("bad", 1, 1).with(|p| {
            p.creation_ms = Some(0);
            p.annotations = vec![(Arc::from(POD_SCALE_UP_DELAY_ANNOTATION), Arc::from("soon"))];
        }));
        assert_eq!(select([&bad], 30_000, &opts).eligible.len(), 1);
    }

    #[test]
    fn pods_that_fit_take_space_so_two_pods_never_share_it() {
        let mut snap = ClusterSnapshot::new();
        snap.add_node(NodeBuilder::new("a", 1000, 4 * GI).arc())
            .unwrap();
        snap.add_node(NodeBuilder::new("b", 600, 4 * GI).arc())
            .unwrap();
        let pods: Vec<Arc<Pod>> = (0..4)
            .map(|i| {
                PodBuilder::new(&format!("p{i}"), 500, GI)
                    .owner("ReplicaSet", "rs")
                    .arc()
            })
            .collect();
        let r = place_on_existing(&mut snap, pods);
        // a holds two, b holds one, the fourth needs a new node.
        assert_eq!(r.placed.len(), 3);
        assert_eq!(r.remaining.len(), 1);
        assert_eq!(snap.pod_count(), 3);
    }

    #[test]
    fn higher_priority_pods_take_the_space_first() {
        let mut snap = ClusterSnapshot::new();
        snap.add_node(NodeBuilder::new("a", 1000, 4 * GI).arc())
            .unwrap();
        let low = PodBuilder::new("low", 800, GI).priority(0).arc();
        let high = PodBuilder::new("high", 800, GI).priority(100).arc();
        let r = place_on_existing(&mut snap, vec![low, high]);
        assert_eq!(&*r.placed[0].0.name, "high");
        assert_eq!(&*r.remaining[0].name, "low");
    }

    #[test]
    fn affinity_pods_are_checked_against_pods_placed_earlier() {
        let mut snap = ClusterSnapshot::new();
        snap.add_node(NodeBuilder::new("a", 4000, 4 * GI).arc())
            .unwrap();
        let pods: Vec<Arc<Pod>> = (0..2)
            .map(|i| {
                PodBuilder::new(&format!("w{i}"), 100, GI)
                    .owner("ReplicaSet", "web")
                    .label("app", "web")
                    .anti_affinity("app", "web", "kubernetes.io/hostname")
                    .arc()
            })
            .collect();
        let r = place_on_existing(&mut snap, pods);
        assert_eq!((r.placed.len(), r.remaining.len()), (1, 1));
    }

    #[test]
    fn pods_bigger_than_any_free_room_are_left_without_checks() {
        let mut snap = ClusterSnapshot::new();
        for n in ["a", "b"] {
            snap.add_node(NodeBuilder::new(n, 2000, 4 * GI).arc())
                .unwrap();
        }
        let pods = vec![
            PodBuilder::new("big", 2500, GI).arc(),
            PodBuilder::new("fits", 1500, GI).arc(),
            PodBuilder::new("fits-too", 1500, GI).arc(),
            PodBuilder::new("no-room-left", 1000, GI).arc(),
            PodBuilder::new("free", 0, 0).arc(),
        ];
        let r = place_on_existing(&mut snap, pods);
        let placed: Vec<&str> = r.placed.iter().map(|(p, _)| &*p.name).collect();
        let left: Vec<&str> = r.remaining.iter().map(|p| &*p.name).collect();
        assert_eq!(placed, ["fits", "fits-too", "free"]);
        assert_eq!(left, ["big", "no-room-left"]);
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        /// First fit from the last success, every node checked: what `place_on_existing`
        /// must decide, without its memo and its room bound.
        fn reference(snap: &mut ClusterSnapshot, mut pods: Vec<Arc<Pod>>) -> Placement {
            pods.sort_by_key(|p| std::cmp::Reverse(p.priority));
            let nodes: Vec<NodeId> = snap.node_ids().collect();
            let mut out = Placement::default();
            let mut hint = 0;
            for pod in pods {
                let mut prepared = snap.prepare(&pod);
                snap.refresh(&pod, &mut prepared);
                let found = (0..nodes.len())
                    .map(|s| (hint + s) % nodes.len())
                    .find(|&i| snap.check(&pod, &prepared, nodes[i]).is_ok());
                match found {
                    Some(i) => {
                        hint = i;
                        snap.add_pod(pod.clone(), nodes[i]).unwrap();
                        out.placed.push((pod, nodes[i]));
                    }
                    None => out.remaining.push(pod),
                }
            }
            out
        }

        fn names(p: &Placement) -> (Vec<(String, u32)>, Vec<String>) {
            (
                p.placed
                    .iter()
                    .map(|(p, n)| (p.name.to_string(), n.0))
                    .collect(),
                p.remaining.iter().map(|p| p.name.to_string()).collect(),
            )
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

            /// Equivalence memo and room bound never change a placement: pods with and without
            /// owners, same and different specs, pod-slot limits, priorities, anti-affinity.
            #[test]
            fn same_placement_as_checking_every_node(
                nodes in proptest::collection::vec((1u8..5, 1u8..5, 1i64..4), 1..6),
                pods in proptest::collection::vec((0u8..4, 0u8..3, 0u8..3, 0i32..2, any::<bool>()), 0..30),
            ) {
                let build = || {
                    let mut s = ClusterSnapshot::new();
                    for (i, (cpu, mem, slots)) in nodes.iter().enumerate() {
                        let node = NodeBuilder::new(&format!("n{i}"), *cpu as i64 * 1000, *mem as i64 * GI)
                            .pods(*slots)
                            .arc();
                        s.add_node(node).unwrap();
                    }
                    s
                };
                let (mut a, mut b) = (build(), build());
                let pods: Vec<Arc<Pod>> = pods
                    .iter()
                    .enumerate()
                    .map(|(i, (cpu, mem, owner, prio, anti))| {
                        let mut p = PodBuilder::new(&format!("p{i}"), *cpu as i64 * 500, *mem as i64 * GI)
                            .priority(*prio)
                            .label("app", "x");
                        if *owner > 0 {
                            p = p.owner("ReplicaSet", &format!("rs{owner}"));
                        }
                        if *anti {
                            p = p.anti_affinity("app", "x", "kubernetes.io/hostname");
                        }
                        p.arc()
                    })
                    .collect();
                let got = place_on_existing(&mut a, pods.clone());
                let want = reference(&mut b, pods);
                prop_assert_eq!(names(&got), names(&want));
            }
        }
    }
}

//! Pending pods: which pods may cause a scale-up, and which of them will run without one.
//!
//! Decides, for the pods kube-scheduler could not place (and pods of a bypassed scheduler it has
//! not processed yet), whether the autoscaler should act on them: pods of schedulers outside
//! `--allowed-scheduler-names` are not looked at; expendable pods (priority below the cutoff),
//! pods waiting for a preemption on their nominated node and pods younger than their scale-up
//! delay are set aside with a reason; pods that fit on an existing node, or on a node already
//! being provisioned, are placed there in the snapshot (so that two pods never count the same
//! free space) and need no new node. It never changes anything outside the snapshot it is given.

use autoscaler_model::POD_SCALE_UP_DELAY_ANNOTATION;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use rustc_hash::FxHashMap;

use crate::scheduling::snapshot::{ClusterSnapshot, NodeId};
use autoscaler_model::Pod;
use autoscaler_model::Sym;
use autoscaler_model::parse_duration;

/// Options of pending-pod selection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingOptions {
    /// `--expendable-pods-priority-cutoff` (seed 002's `podPriorityThreshold`): pods with a
    /// lower priority never cause a scale-up.
    pub(crate) expendable_pods_priority_cutoff: i32,
    /// `--new-pod-scale-up-delay`: pods younger than this are not acted on yet.
    pub(crate) new_pod_scale_up_delay: Duration,
    /// `--allowed-scheduler-names`: when not empty, only pending pods of these schedulers are
    /// acted on.
    pub(crate) allowed_schedulers: Vec<String>,
    /// `--bypassed-scheduler-names`: pending pods of these schedulers are acted on before the
    /// scheduler has marked them unschedulable.
    pub(crate) bypassed_schedulers: Vec<String>,
}

impl Default for PendingOptions {
    fn default() -> Self {
        PendingOptions {
            expendable_pods_priority_cutoff: -10,
            new_pod_scale_up_delay: Duration::ZERO,
            allowed_schedulers: Vec::new(),
            bypassed_schedulers: Vec::new(),
        }
    }
}

impl PendingOptions {
    /// Whether `pod` waits for a scheduler this autoscaler acts for: marked unschedulable by
    /// kube-scheduler, or not processed yet by a bypassed scheduler; and of an allowed scheduler
    /// when the allowed list is not empty.
    pub fn is_pending(&self, pod: &Pod) -> bool {
        // The scheduler's name is only looked up when a list names schedulers.
        let allowed = self.allowed_schedulers.is_empty() || {
            let scheduler = pod.scheduler_name.as_str();
            self.allowed_schedulers.iter().any(|s| s == scheduler)
        };
        allowed && (is_unschedulable(pod) || is_unprocessed(pod, &self.bypassed_schedulers))
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
    /// kube-scheduler is preempting lower-priority pods on this node for it: it counts as
    /// placed there.
    Nominated {
        /// The nominated node.
        node: Sym,
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
            SetAside::Nominated { node } => {
                write!(f, "waiting for preemption on its nominated node {node}")
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
            // Symbols compare as numbers: no text is looked up for the thousands of pods a
            // loop reads.
            c.type_ == *POD_SCHEDULED && c.status == *FALSE && c.reason == Some(*UNSCHEDULABLE)
        })
}

static POD_SCHEDULED: LazyLock<Sym> = LazyLock::new(|| Sym::new("PodScheduled"));
static FALSE: LazyLock<Sym> = LazyLock::new(|| Sym::new("False"));
static UNSCHEDULABLE: LazyLock<Sym> = LazyLock::new(|| Sym::new("Unschedulable"));

/// Whether `pod` belongs to one of the `bypassed` schedulers and that scheduler has not processed
/// it yet: not bound, not being deleted, not terminal, and no `PodScheduled` condition, or a
/// `False` one without a reason (upstream's "scheduler unprocessed" pods).
pub fn is_unprocessed(pod: &Pod, bypassed: &[String]) -> bool {
    if bypassed.is_empty() || !bypassed.iter().any(|s| s == pod.scheduler_name.as_str()) {
        return false;
    }
    if pod.node_name.is_some() || pod.deletion_ms.is_some() || pod.is_terminal() {
        return false;
    }
    match pod.conditions.iter().find(|c| c.type_ == *POD_SCHEDULED) {
        None => true,
        Some(c) => c.status == *FALSE && c.reason.is_none(),
    }
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
/// `now_ms` is the decision time (milliseconds since the Unix epoch). A nominated node is never
/// known here: see [`select_with`]. The loop calls `select_with`; this is for tests and benches.
#[cfg(any(test, feature = "bench"))]
pub fn select<'a>(
    pods: impl IntoIterator<Item = &'a Arc<Pod>>,
    now_ms: i64,
    opts: &PendingOptions,
) -> Selected {
    select_with(pods, now_ms, opts, &|_| false)
}

/// [`select`], where a pod whose `status.nominatedNodeName` is a node for which `node_exists`
/// says yes is set aside as [`SetAside::Nominated`] (the caller places it there), as upstream
/// does; with an unknown nominated node the pod is pending like any other.
pub fn select_with<'a>(
    pods: impl IntoIterator<Item = &'a Arc<Pod>>,
    now_ms: i64,
    opts: &PendingOptions,
    node_exists: &dyn Fn(Sym) -> bool,
) -> Selected {
    let mut out = Selected::default();
    for pod in pods.into_iter().filter(|p| opts.is_pending(p)) {
        match set_aside(pod, now_ms, opts, node_exists) {
            Some(why) => out.set_aside.push((pod.clone(), why)),
            None => out.eligible.push(pod.clone()),
        }
    }
    out
}

/// Why a pending pod is not acted on now, if it is not: expendable first, then nominated, then
/// too young.
fn set_aside(
    pod: &Pod,
    now_ms: i64,
    opts: &PendingOptions,
    node_exists: &dyn Fn(Sym) -> bool,
) -> Option<SetAside> {
    if pod.priority < opts.expendable_pods_priority_cutoff {
        return Some(SetAside::Expendable {
            priority: pod.priority,
            cutoff: opts.expendable_pods_priority_cutoff,
        });
    }
    if let Some(node) = pod.nominated_node_name.filter(|&n| node_exists(n)) {
        return Some(SetAside::Nominated { node });
    }
    let mut delay = opts.new_pod_scale_up_delay;
    if let Some(d) = pod
        .annotation(POD_SCALE_UP_DELAY_ANNOTATION)
        .and_then(|t| parse_duration(t).ok())
    {
        delay = delay.max(d);
    }
    let created = pod.creation_ms?;
    let eligible_at_ms =
        created.saturating_add(i64::try_from(delay.as_millis()).unwrap_or(i64::MAX));
    (now_ms < eligible_at_ms).then_some(SetAside::TooYoung { eligible_at_ms })
}

/// Adds every pod set aside as [`SetAside::Nominated`] to its nominated node in `snapshot`,
/// without a fit check (its room is being made by preemption), so that it takes no other room
/// and scale-down sees it there. Pods whose node is gone are skipped.
pub fn place_nominated(snapshot: &mut ClusterSnapshot, set_aside: &[(Arc<Pod>, SetAside)]) {
    for (pod, why) in set_aside {
        if let SetAside::Nominated { node } = why
            && let Some(id) = snapshot.node_id(*node)
        {
            let _ = snapshot.add_pod(pod.clone(), id);
        }
    }
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
    use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};

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
                .with(|p| p.phase = autoscaler_model::PodPhase::Succeeded),
        );
        let s = select(
            [&plain, &marked, &bound, &deleting, &done],
            0,
            &PendingOptions::default(),
        );
        let names: Vec<&str> = s.eligible.iter().map(|p| &*p.name).collect();
        assert_eq!(names, ["marked"]);
    }

    fn of_scheduler(name: &str, scheduler: &str) -> PodBuilder {
        PodBuilder::new(name, 100, GI).with(|p| p.scheduler_name = Sym::new(scheduler))
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<&str> {
        pods.iter().map(|p| &*p.name).collect()
    }

    /// `--allowed-scheduler-names`: pending pods of other schedulers are not looked at.
    #[test]
    fn pods_of_schedulers_not_allowed_are_ignored() {
        let default = unschedulable(PodBuilder::new("default", 100, GI));
        let batch = unschedulable(of_scheduler("batch", "volcano"));
        let other = unschedulable(of_scheduler("other", "my-scheduler"));
        let pods = [&default, &batch, &other];
        let all = select(pods, 0, &PendingOptions::default());
        assert_eq!(names(&all.eligible), ["default", "batch", "other"]);
        let opts = PendingOptions {
            allowed_schedulers: vec!["default-scheduler".into(), "volcano".into()],
            ..Default::default()
        };
        let s = select(pods, 0, &opts);
        assert_eq!(names(&s.eligible), ["default", "batch"]);
        assert!(s.set_aside.is_empty(), "ignored, not set aside");
    }

    /// `--bypassed-scheduler-names`: a pod of a bypassed scheduler counts before the scheduler
    /// marks it, as long as the scheduler has not processed it.
    #[test]
    fn unprocessed_pods_of_bypassed_schedulers_are_pending() {
        let fresh = of_scheduler("fresh", "volcano").arc();
        let no_reason = of_scheduler("no-reason", "volcano")
            .with(|p| {
                p.conditions.push(autoscaler_model::PodCondition {
                    type_: Sym::new("PodScheduled"),
                    status: Sym::new("False"),
                    reason: None,
                    last_transition_ms: None,
                })
            })
            .arc();
        let gated = of_scheduler("gated", "volcano")
            .with(|p| {
                p.conditions.push(autoscaler_model::PodCondition {
                    type_: Sym::new("PodScheduled"),
                    status: Sym::new("False"),
                    reason: Some(Sym::new("SchedulingGated")),
                    last_transition_ms: None,
                })
            })
            .arc();
        let bound = of_scheduler("bound", "volcano").node_name("n1").arc();
        let default_fresh = PodBuilder::new("default-fresh", 100, GI).arc();
        let pods = [&fresh, &no_reason, &gated, &bound, &default_fresh];
        assert!(
            select(pods, 0, &PendingOptions::default())
                .eligible
                .is_empty()
        );
        let opts = PendingOptions {
            bypassed_schedulers: vec!["volcano".into()],
            ..Default::default()
        };
        let s = select(pods, 0, &opts);
        assert_eq!(names(&s.eligible), ["fresh", "no-reason"]);
        // Bypassing a scheduler not allowed changes nothing.
        let opts = PendingOptions {
            allowed_schedulers: vec!["default-scheduler".into()],
            ..opts
        };
        assert!(select(pods, 0, &opts).eligible.is_empty());
    }

    /// A pod with a nominated node that exists is set aside and placed there without a fit
    /// check; with an unknown node it is pending like any other; an expendable one stays
    /// expendable.
    #[test]
    fn nominated_pods_count_as_placed_on_their_node() {
        let nominated = |name: &str, node: &str, prio: i32| {
            unschedulable(
                PodBuilder::new(name, 3000, GI)
                    .priority(prio)
                    .with(|p| p.nominated_node_name = Some(Sym::new(node))),
            )
        };
        let a = nominated("a", "n1", 100);
        let gone = nominated("gone", "n9", 100);
        let low = nominated("low", "n1", -20);
        let mut snap = ClusterSnapshot::new();
        let n1 = snap
            .add_node(NodeBuilder::new("n1", 2000, 8 * GI).arc())
            .unwrap();
        let exists = |n: Sym| snap.node_id(n).is_some();
        let s = select_with([&a, &gone, &low], 0, &PendingOptions::default(), &exists);
        assert_eq!(names(&s.eligible), ["gone"]);
        let why: Vec<_> = s.set_aside.iter().map(|(p, w)| (&*p.name, w)).collect();
        assert_eq!(
            why,
            [
                (
                    "a",
                    &SetAside::Nominated {
                        node: Sym::new("n1")
                    }
                ),
                (
                    "low",
                    &SetAside::Expendable {
                        priority: -20,
                        cutoff: -10
                    }
                ),
            ]
        );
        place_nominated(&mut snap, &s.set_aside);
        let placed: Vec<&str> = snap
            .node(n1)
            .unwrap()
            .pods
            .iter()
            .map(|p| &*p.name)
            .collect();
        assert_eq!(placed, ["a"], "placed although 3 CPUs do not fit in 2");
        // Without a view of the nodes, a nominated pod is an ordinary pending pod.
        assert_eq!(
            select([&a], 0, &PendingOptions::default()).eligible.len(),
            1
        );
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

//! Tests of the scale-down pass as a whole: verdicts, the removal simulation, timers, soft
//! taints, deletions and budgets, and a property test of the plan's invariants.

use super::*;
use crate::scale_down::drain::{BlockReason, DrainContext};
use crate::scheduling::budget::Unlimited;
use autoscaler_model::NoControllerLookup;
use autoscaler_model::Node;
use autoscaler_model::PodDisruptionBudget;
use autoscaler_model::Volume;
use autoscaler_model::testing::{GI, MI, NodeBuilder, PodBuilder};
use autoscaler_model::{DELETION_CANDIDATE_TAINT, SCALE_DOWN_DISABLED_ANNOTATION};
use autoscaler_model::{Instance, InstanceState, NodeGroup, NodeGroupOptions, StaticProvider};
use autoscaler_model::{LabelSelector, Labels};

use proptest::prelude::*;

const MIN: i64 = 60_000;

/// A cluster in one group `ng` (min `min`), built from (node name, cpu, pods' cpu), with
/// its budgets, limits and deletions in flight.
struct World {
    snapshot: ClusterSnapshot,
    provider: StaticProvider,
    nodes: Vec<Arc<Node>>,
    pdbs: Vec<PodDisruptionBudget>,
    limits: ResourceLimits,
    in_flight: InFlight,
}

fn node(name: &str, cpu: i64) -> NodeBuilder {
    NodeBuilder::new(name, cpu, 64 * GI).with_provider_id(&format!("test:///{name}"))
}

fn world(min: usize, spec: Vec<(NodeBuilder, Vec<PodBuilder>)>) -> World {
    let mut snapshot = ClusterSnapshot::new();
    let mut group = NodeGroup::new("ng", min, 100, spec.len());
    let mut nodes = Vec::new();
    for (nb, pods) in spec {
        let n = nb.arc();
        group.push_instance(Instance {
            id: n.provider_id.clone().unwrap(),
            state: InstanceState::Running,
            error: None,
        });
        let id = snapshot.add_node(n.clone()).unwrap();
        for p in pods {
            let p = p.node_name(n.name.as_str()).arc();
            snapshot.add_pod(p, id).unwrap();
        }
        nodes.push(n);
    }
    World {
        snapshot,
        provider: StaticProvider::new(vec![group]),
        nodes,
        pdbs: Vec::new(),
        limits: ResourceLimits::default(),
        in_flight: InFlight::default(),
    }
}

fn rs_pod(name: &str, cpu: i64) -> PodBuilder {
    PodBuilder::new(name, cpu, GI / 4).owner("ReplicaSet", "rs")
}

fn plan_at(
    w: &mut World,
    state: &mut ScaleDownState,
    opts: &ScaleDownOptions,
    now_ms: i64,
) -> ScaleDownPlan {
    plan_with(w, state, opts, now_ms, &mut Unlimited)
}

/// Every node's name and its pods' keys, in snapshot order.
fn contents(s: &ClusterSnapshot) -> Vec<(Sym, Vec<String>)> {
    s.nodes()
        .map(|(_, i)| (i.node.name, i.pods.iter().map(|p| p.key()).collect()))
        .collect()
}

fn plan_with(
    w: &mut World,
    state: &mut ScaleDownState,
    opts: &ScaleDownOptions,
    now_ms: i64,
    budget: &mut dyn Budget,
) -> ScaleDownPlan {
    let input = ScaleDownInput {
        provider: &w.provider,
        budgets: DisruptionBudgets::new(w.pdbs.clone()),
        controllers: &NoControllerLookup,
        limits: &w.limits,
        totals: ClusterTotals::from_nodes(w.nodes.iter().map(|n| &**n)),
        in_flight: w.in_flight.clone(),
    };
    let before = (w.snapshot.len(), w.snapshot.pod_count());
    let before_contents = contents(&w.snapshot);
    let plan = plan_scale_down(&mut w.snapshot, state, input, opts, now_ms, budget);
    assert_eq!(
        (w.snapshot.len(), w.snapshot.pod_count()),
        before,
        "snapshot left as found"
    );
    assert_eq!(
        contents(&w.snapshot),
        before_contents,
        "snapshot left as found"
    );
    plan
}

fn reason<'a>(plan: &'a ScaleDownPlan, node: &str) -> Option<&'a Unremovable> {
    plan.unremovable
        .iter()
        .find(|(n, _)| n.as_str() == node)
        .map(|(_, r)| r)
}

fn unneeded(plan: &ScaleDownPlan) -> Vec<&'static str> {
    plan.unneeded.iter().map(|(n, _)| n.as_str()).collect()
}

#[test]
fn utilization_threshold_and_disable_annotation() {
    let busy = vec![
        (node("sd-busy", 1000), vec![rs_pod("b", 600)]),
        (node("sd-room", 4000), vec![rs_pod("r", 2500)]),
    ];
    let mut w = world(0, busy);
    let p = plan_at(
        &mut w,
        &mut ScaleDownState::default(),
        &ScaleDownOptions::default(),
        0,
    );
    assert!(
        matches!(
            reason(&p, "sd-busy"),
            Some(Unremovable::NotUnderutilized { .. })
        ),
        "{p:?}"
    );

    let light = vec![
        (node("sd-light", 1000), vec![rs_pod("l", 100)]),
        (node("sd-room2", 4000), vec![rs_pod("r2", 2500)]),
    ];
    let mut w = world(0, light);
    let p = plan_at(
        &mut w,
        &mut ScaleDownState::default(),
        &ScaleDownOptions::default(),
        0,
    );
    assert_eq!(unneeded(&p), ["sd-light"]);

    let disabled = vec![
        (
            node("sd-off", 1000).annotation(SCALE_DOWN_DISABLED_ANNOTATION, "true"),
            vec![rs_pod("o", 100)],
        ),
        (node("sd-room3", 4000), vec![rs_pod("r3", 2500)]),
    ];
    let mut w = world(0, disabled);
    let p = plan_at(
        &mut w,
        &mut ScaleDownState::default(),
        &ScaleDownOptions::default(),
        0,
    );
    assert_eq!(
        reason(&p, "sd-off"),
        Some(&Unremovable::ScaleDownDisabledAnnotation)
    );
    assert!(p.unneeded.is_empty());
}

/// n1 (2000m, two pods of 300m) and n2 (1000m, one of 200m) each need the other's room;
/// n3 (1000m, 900m) has none. Candidate order is by utilization (n2 at 0.2 before n1 at 0.3):
/// n2 goes, n1 is left with no place for its pod.
#[test]
fn two_nodes_that_need_each_others_room_lose_only_one() {
    let mut w = world(
        0,
        vec![
            (
                node("n1", 2000),
                vec![rs_pod("n1-a", 300), rs_pod("n1-b", 300)],
            ),
            (node("n2", 1000), vec![rs_pod("n2-a", 200)]),
            (node("n3", 1000), vec![rs_pod("n3-a", 900)]),
        ],
    );
    let p = plan_at(
        &mut w,
        &mut ScaleDownState::default(),
        &ScaleDownOptions::default(),
        0,
    );
    assert_eq!(unneeded(&p), ["n2"]);
    match reason(&p, "n1") {
        Some(Unremovable::NoPlaceToMovePods(np)) => {
            assert!(np.pod.starts_with("default/n1-"), "{np}")
        }
        other => panic!("n1: {other:?}"),
    }
    assert!(matches!(
        reason(&p, "n3"),
        Some(Unremovable::NotUnderutilized { .. })
    ));
}

/// Seed 000: A's and B's pods can only go to X, which has room for one; C's only to Y.
fn seed_000(x_cpu: i64) -> World {
    let to = |name: &str, cpu: i64, pool: &str| rs_pod(name, cpu).node_selector("pool", pool);
    world(
        0,
        vec![
            (node("a", 1000), vec![to("a-p", 300, "x")]),
            (node("b", 1000), vec![to("b-p", 350, "x")]),
            (node("c", 1000), vec![to("c-p", 400, "y")]),
            (
                node("x", x_cpu).label("pool", "x"),
                vec![rs_pod("x-p", 600)],
            ),
            (node("y", 1000).label("pool", "y"), vec![rs_pod("y-p", 500)]),
        ],
    )
}

#[test]
fn seed_000_chain_and_timer_restart() {
    let opts = ScaleDownOptions::default();
    let mut state = ScaleDownState::default();
    // X has room for one of A and B: A (lower utilization) goes first.
    let p = plan_at(&mut seed_000(1000), &mut state, &opts, 0);
    assert_eq!(unneeded(&p), ["a", "c"]);
    assert!(matches!(
        reason(&p, "b"),
        Some(Unremovable::NoPlaceToMovePods(_))
    ));

    // X grows: B is unneeded too, from now.
    let p = plan_at(&mut seed_000(1300), &mut state, &opts, MIN);
    assert_eq!(
        p.unneeded
            .iter()
            .find(|(n, _)| n.as_str() == "b")
            .map(|(_, s)| *s),
        Some(MIN)
    );
    assert_eq!(state.unneeded.since(Sym::new("a")), Some(0));

    // X shrinks: A keeps its timer (previously unneeded first, then utilization), B is
    // needed again and loses its timer...
    let p = plan_at(&mut seed_000(1000), &mut state, &opts, 2 * MIN);
    assert_eq!(unneeded(&p), ["a", "c"]);
    assert_eq!(state.unneeded.since(Sym::new("b")), None);
    // ...so when it is unneeded again, its timer restarts.
    plan_at(&mut seed_000(1300), &mut state, &opts, 3 * MIN);
    assert_eq!(state.unneeded.since(Sym::new("b")), Some(3 * MIN));
    assert_eq!(state.unneeded.since(Sym::new("a")), Some(0));
}

fn run_two_passes(w: &mut World, opts: &ScaleDownOptions) -> ScaleDownPlan {
    let mut state = ScaleDownState::default();
    let first = plan_at(w, &mut state, opts, 0);
    assert!(
        first.deletions.is_empty(),
        "nothing is deleted before the unneeded time"
    );
    assert!(
        first
            .waiting
            .iter()
            .all(|(_, w)| matches!(w, Waiting::UnneededTime { .. }))
    );
    plan_at(w, &mut state, opts, 11 * MIN)
}

#[test]
fn empty_nodes_are_deleted_in_bulk_up_to_the_parallelism() {
    let spec = (0..11)
        .map(|i| (node(&format!("empty-{i}"), 4000), vec![]))
        .collect();
    let mut w = world(0, spec);
    let p = run_two_passes(&mut w, &ScaleDownOptions::default());
    assert_eq!(p.deletions.len(), 10);
    assert!(p.deletions.iter().all(|d| d.empty && d.evict.is_empty()));
    assert_eq!(p.waiting, vec![(p.unneeded[10].0, Waiting::Parallelism)]);
}

#[test]
fn non_empty_nodes_are_drained_up_to_the_drain_parallelism() {
    let mut spec: Vec<(NodeBuilder, Vec<PodBuilder>)> = (0..6)
        .map(|i| {
            (
                node(&format!("light-{i}"), 4000),
                vec![rs_pod(&format!("l{i}"), 500)],
            )
        })
        .collect();
    spec.extend((0..4).map(|i| {
        (
            node(&format!("dest-{i}"), 10_000),
            vec![rs_pod(&format!("d{i}"), 6000)],
        )
    }));
    let mut w = world(0, spec);
    let opts = ScaleDownOptions {
        max_drain_parallelism: 5,
        ..Default::default()
    };
    let p = run_two_passes(&mut w, &opts);
    assert_eq!(p.deletions.len(), 5);
    assert!(
        p.deletions
            .iter()
            .all(|d| !d.empty && d.evict.len() == 1 && d.destinations.len() == 1)
    );
    assert_eq!(p.waiting.len(), 1);
}

#[test]
fn an_atomic_group_never_loses_a_single_node() {
    let spec = (0..3)
        .map(|i| (node(&format!("atomic-{i}"), 4000), vec![]))
        .collect();
    let mut w = world(0, spec);
    let atomic = w.provider.node_groups()[0]
        .options()
        .clone()
        .with_zero_or_max_scaling(true);
    w.provider.groups_mut()[0].set_options(atomic);
    let mut state = ScaleDownState::default();
    plan_at(&mut w, &mut state, &ScaleDownOptions::default(), 0);
    let p = plan_at(&mut w, &mut state, &ScaleDownOptions::default(), 11 * MIN);
    assert!(p.deletions.is_empty() && p.unneeded.is_empty());
    assert!(
        p.unremovable
            .iter()
            .all(|(_, r)| *r == Unremovable::AtomicGroup)
    );
}

#[test]
fn a_group_at_min_size_loses_none() {
    let spec = (0..3)
        .map(|i| (node(&format!("min-{i}"), 4000), vec![]))
        .collect();
    let mut w = world(3, spec);
    let p = run_two_passes(&mut w, &ScaleDownOptions::default());
    assert!(p.deletions.is_empty());
    assert!(
        p.unremovable
            .iter()
            .all(|(_, r)| *r == Unremovable::MinSizeReached)
    );
    // One above min: only one goes.
    let spec = (0..3)
        .map(|i| (node(&format!("min1-{i}"), 4000), vec![]))
        .collect();
    let mut w = world(2, spec);
    let p = run_two_passes(&mut w, &ScaleDownOptions::default());
    assert_eq!(p.deletions.len(), 1);
    assert!(p.waiting.iter().all(|(_, w)| *w == Waiting::MinSize));
}

#[test]
fn delays_and_the_enable_switch_hold_deletions() {
    let spec = (0..2)
        .map(|i| (node(&format!("cool-{i}"), 4000), vec![]))
        .collect();
    let mut w = world(0, spec);
    let mut state = ScaleDownState::default();
    let opts = ScaleDownOptions::default();
    plan_at(&mut w, &mut state, &opts, 0);
    state.last_scale_up_ms = Some(5 * MIN);
    let p = plan_at(&mut w, &mut state, &opts, 11 * MIN);
    assert!(p.deletions.is_empty());
    assert!(matches!(&p.waiting[0].1, Waiting::Cooldown(why) if why.contains("scale-up")));
    let p = plan_at(&mut w, &mut state, &opts, 16 * MIN);
    assert_eq!(p.deletions.len(), 2);
    state.last_failure_ms = Some(15 * MIN);
    assert!(
        plan_at(&mut w, &mut state, &opts, 17 * MIN)
            .deletions
            .is_empty()
    );
    let off = ScaleDownOptions {
        enabled: false,
        ..Default::default()
    };
    assert!(
        plan_at(&mut w, &mut state, &off, 30 * MIN)
            .deletions
            .is_empty()
    );
}

#[test]
fn scale_down_disabled_neither_finds_unneeded_nodes_nor_soft_taints() {
    let mut w = world(
        0,
        vec![
            (node("off-a", 4000), vec![]),
            (
                node("off-b", 4000).taint(
                    DELETION_CANDIDATE_TAINT,
                    "1",
                    autoscaler_model::TaintEffect::PreferNoSchedule,
                ),
                vec![rs_pod("busy", 3500)],
            ),
        ],
    );
    let off = ScaleDownOptions {
        enabled: false,
        ..Default::default()
    };
    let mut state = ScaleDownState::default();
    for now in [0, 30 * MIN] {
        let p = plan_at(&mut w, &mut state, &off, now);
        assert!(p.soft_taint.is_empty(), "{:?}", p.soft_taint);
        assert!(p.soft_untaint.is_empty(), "{:?}", p.soft_untaint);
        assert!(p.unneeded.is_empty() && p.deletions.is_empty(), "{p:?}");
    }
}

#[test]
fn soft_taints_follow_unneeded_status() {
    let mut w = world(
        0,
        vec![
            (node("soft-a", 4000), vec![]),
            (
                node("soft-b", 4000).taint(
                    DELETION_CANDIDATE_TAINT,
                    "1",
                    autoscaler_model::TaintEffect::PreferNoSchedule,
                ),
                vec![rs_pod("busy", 3500)],
            ),
        ],
    );
    let p = plan_at(
        &mut w,
        &mut ScaleDownState::default(),
        &ScaleDownOptions::default(),
        0,
    );
    assert_eq!(p.soft_taint, vec![Sym::new("soft-a")]);
    assert_eq!(p.soft_untaint, vec![Sym::new("soft-b")]);
}

// ----- Budgets, limits, readiness, overrides, bounds -----

fn web_pdb(allowed: i32) -> PodDisruptionBudget {
    PodDisruptionBudget::new(
        "default",
        "web",
        Some(LabelSelector {
            match_labels: Labels::from_pairs([("app", "web")]),
            match_expressions: Vec::new(),
        }),
        allowed,
    )
}

fn web_pod(name: &str, cpu: i64) -> PodBuilder {
    rs_pod(name, cpu).label("app", "web")
}

fn deletion<'a>(plan: &'a ScaleDownPlan, node: &str) -> Option<&'a NodeDeletion> {
    plan.deletions.iter().find(|d| d.node.as_str() == node)
}

/// A node with room for everything the light nodes hold, busy enough to stay.
fn sink(name: &str) -> (NodeBuilder, Vec<PodBuilder>) {
    (
        node(name, 16_000),
        vec![rs_pod(&format!("{name}-busy"), 9000)],
    )
}

#[test]
fn a_budget_of_one_lets_only_one_of_two_nodes_go_in_a_pass() {
    let mut w = world(
        0,
        vec![
            (node("pdb-a", 1000), vec![web_pod("w-a", 100)]),
            (node("pdb-b", 1000), vec![web_pod("w-b", 150)]),
            sink("pdb-sink"),
        ],
    );
    w.pdbs = vec![web_pdb(1)];
    let p = plan_at(
        &mut w,
        &mut ScaleDownState::default(),
        &ScaleDownOptions::default(),
        0,
    );
    assert_eq!(unneeded(&p), ["pdb-a"]);
    match reason(&p, "pdb-b") {
        Some(Unremovable::PodBlocks(Blocked {
            pod,
            reason: BlockReason::NotEnoughPdb { pdb, detail },
        })) => {
            assert_eq!(pod, "default/w-b");
            assert_eq!(pdb, "default/web");
            assert!(detail.contains("earlier in this pass"), "{detail}");
        }
        other => panic!("pdb-b: {other:?}"),
    }
    // Both go when the budget allows two.
    w.pdbs = vec![web_pdb(2)];
    let p = plan_at(
        &mut w,
        &mut ScaleDownState::default(),
        &ScaleDownOptions::default(),
        0,
    );
    assert_eq!(unneeded(&p), ["pdb-a", "pdb-b"]);
}

#[test]
fn a_node_needing_more_than_the_budget_is_drained_sequentially() {
    let mut w = world(
        0,
        vec![
            (
                node("seq", 2000),
                vec![web_pod("s-1", 100), web_pod("s-2", 100)],
            ),
            sink("seq-sink"),
        ],
    );
    w.pdbs = vec![web_pdb(1)];
    let p = run_two_passes(&mut w, &ScaleDownOptions::default());
    let d = deletion(&p, "seq").expect("seq deleted");
    assert!(d.sequential_evictions);
    assert_eq!(d.evict.len(), 2);
    // With room in the budget it is not sequential.
    w.pdbs = vec![web_pdb(2)];
    let p = run_two_passes(&mut w, &ScaleDownOptions::default());
    assert!(
        !deletion(&p, "seq")
            .expect("seq deleted")
            .sequential_evictions
    );
}

/// Regression: whether a node drains sequentially was decided against the budgets before
/// any node of the pass was chosen. With an allowance of 3, a node needing 2 leaves 1, and a
/// second node needing 2 must then drain one by one.
#[test]
fn sequential_is_judged_against_what_earlier_nodes_left() {
    let mut w = world(
        0,
        vec![
            (
                node("sq-a", 4000),
                vec![web_pod("qa-1", 100), web_pod("qa-2", 100)],
            ),
            (
                node("sq-b", 4000),
                vec![web_pod("qb-1", 150), web_pod("qb-2", 150)],
            ),
            sink("sq-sink"),
        ],
    );
    w.pdbs = vec![web_pdb(3)];
    let opts = ScaleDownOptions {
        max_drain_parallelism: 2,
        ..Default::default()
    };
    let p = run_two_passes(&mut w, &opts);
    assert!(
        !deletion(&p, "sq-a")
            .expect("a deleted")
            .sequential_evictions
    );
    assert!(
        deletion(&p, "sq-b")
            .expect("b deleted")
            .sequential_evictions
    );
}

/// Regression: a node that received pods promised by a node removed earlier in the pass was
/// removed with only its own pods moved, so the promised pods vanished with it.
#[test]
fn pods_promised_to_a_later_candidate_move_again() {
    let mut w = world(
        0,
        vec![
            (node("ch-a", 1000), vec![rs_pod("ca", 200)]),
            (node("ch-b", 1000), vec![rs_pod("cb", 300)]),
            (node("ch-c", 4000), vec![rs_pod("cc", 2500)]),
        ],
    );
    let opts = ScaleDownOptions {
        max_drain_parallelism: 2,
        ..Default::default()
    };
    let p = run_two_passes(&mut w, &opts);
    assert_eq!(p.deletions.len(), 2, "{p:?}");
    for d in &p.deletions {
        for (pod, dest) in &d.destinations {
            assert_eq!(dest.as_str(), "ch-c", "{} of {}", pod.key(), d.node);
        }
    }
    // And if C has room for only one of them, only A goes (B must keep A's pod).
    let mut w = world(
        0,
        vec![
            (node("ch2-a", 1000), vec![rs_pod("c2a", 200)]),
            (node("ch2-b", 1000), vec![rs_pod("c2b", 300)]),
            (node("ch2-c", 1000), vec![rs_pod("c2c", 600)]),
        ],
    );
    let p = plan_at(&mut w, &mut ScaleDownState::default(), &opts, 0);
    assert_eq!(unneeded(&p), ["ch2-a"]);
    assert!(matches!(
        reason(&p, "ch2-b"),
        Some(Unremovable::NoPlaceToMovePods(_))
    ));
}

#[test]
fn the_cores_minimum_stops_removal() {
    let mut w = world(
        0,
        vec![
            (node("core-a", 4000), vec![]),
            (node("core-b", 4000), vec![]),
            (node("core-c", 4000), vec![rs_pod("core-busy", 3000)]),
        ],
    );
    w.limits.cpu = autoscaler_model::Range::parse_cores("5:1000").expect("valid");
    let p = run_two_passes(&mut w, &ScaleDownOptions::default());
    assert_eq!(unneeded(&p), ["core-a"]);
    assert_eq!(p.deletions.len(), 1);
    assert_eq!(
        reason(&p, "core-b"),
        Some(&Unremovable::MinimalResourceLimit(LimitReached::Cores))
    );
}

#[test]
fn unready_nodes_wait_the_unready_time() {
    let mut w = world(
        0,
        vec![
            (node("unready", 4000).not_ready(), vec![]),
            (node("ready", 4000), vec![rs_pod("r-busy", 3000)]),
        ],
    );
    let opts = ScaleDownOptions::default();
    let mut state = ScaleDownState::default();
    plan_at(&mut w, &mut state, &opts, 0);
    let p = plan_at(&mut w, &mut state, &opts, 11 * MIN);
    assert!(p.deletions.is_empty());
    assert_eq!(
        p.waiting,
        vec![(
            Sym::new("unready"),
            Waiting::UnneededTime {
                deletable_at_ms: 20 * MIN
            }
        )]
    );
    let p = plan_at(&mut w, &mut state, &opts, 20 * MIN);
    assert_eq!(p.deletions.len(), 1);
}

#[test]
fn group_options_override_threshold_and_unneeded_time() {
    let mut w = world(
        0,
        vec![
            (node("ov-a", 1000), vec![rs_pod("ov-p", 300)]),
            sink("ov-sink"),
        ],
    );
    // Cluster-wide 0.5 would find ov-a (0.3) unneeded; the group's 0.2 does not.
    w.provider.groups_mut()[0].set_options(
        NodeGroupOptions::default()
            .with_scale_down_utilization_threshold(0.2)
            .expect("a ratio"),
    );
    let p = plan_at(
        &mut w,
        &mut ScaleDownState::default(),
        &ScaleDownOptions::default(),
        0,
    );
    assert_eq!(
        reason(&p, "ov-a"),
        Some(&Unremovable::NotUnderutilized {
            utilization: 0.3,
            threshold: 0.2
        })
    );
    // A group threshold of 0.4 and unneeded time of 2 minutes: deleted at 2 minutes.
    w.provider.groups_mut()[0].set_options(
        NodeGroupOptions::default()
            .with_scale_down_utilization_threshold(0.4)
            .expect("a ratio")
            .with_scale_down_unneeded_time(Duration::from_secs(120)),
    );
    let opts = ScaleDownOptions::default();
    let mut state = ScaleDownState::default();
    plan_at(&mut w, &mut state, &opts, 0);
    let p = plan_at(&mut w, &mut state, &opts, MIN);
    assert_eq!(
        p.waiting,
        vec![(
            Sym::new("ov-a"),
            Waiting::UnneededTime {
                deletable_at_ms: 2 * MIN
            }
        )]
    );
    let p = plan_at(&mut w, &mut state, &opts, 2 * MIN);
    assert_eq!(p.deletions.len(), 1);
}

#[test]
fn gpu_nodes_are_judged_against_the_gpu_threshold() {
    let gpu_node = |name: &str| node(name, 8000).resource("nvidia.com/gpu", 4);
    let trainer = |name: &str| rs_pod(name, 7000).resource("nvidia.com/gpu", 1);
    let spec = || {
        vec![
            // CPU at 0.875, GPU at 0.25.
            (gpu_node("gpu-a"), vec![trainer("t-a")]),
            (
                node("gpu-dest", 16_000).resource("nvidia.com/gpu", 8),
                vec![rs_pod("gd", 9000).resource("nvidia.com/gpu", 5)],
            ),
        ]
    };
    let mut w = world(0, spec());
    let p = plan_at(
        &mut w,
        &mut ScaleDownState::default(),
        &ScaleDownOptions::default(),
        0,
    );
    assert_eq!(unneeded(&p), ["gpu-a"]);
    let opts = ScaleDownOptions {
        gpu_utilization_threshold: 0.2,
        ..Default::default()
    };
    let p = plan_at(
        &mut world(0, spec()),
        &mut ScaleDownState::default(),
        &opts,
        0,
    );
    assert_eq!(
        reason(&p, "gpu-a"),
        Some(&Unremovable::NotUnderutilized {
            utilization: 0.25,
            threshold: 0.2
        })
    );
}

fn light_nodes(prefix: &str, n: usize) -> Vec<(NodeBuilder, Vec<PodBuilder>)> {
    let mut spec: Vec<_> = (0..n)
        .map(|i| {
            (
                node(&format!("{prefix}-{i}"), 4000),
                vec![rs_pod(&format!("{prefix}-p{i}"), 100 * (i as i64 + 1))],
            )
        })
        .collect();
    spec.push((node(&format!("{prefix}-empty"), 4000), vec![]));
    spec.push(sink(&format!("{prefix}-sink")));
    spec
}

#[test]
fn the_non_empty_candidate_count_bounds_the_simulation() {
    let mut w = world(0, light_nodes("nec", 3));
    let opts = ScaleDownOptions {
        non_empty_candidates_count: 1,
        ..Default::default()
    };
    let p = plan_at(&mut w, &mut ScaleDownState::default(), &opts, 0);
    assert_eq!(unneeded(&p), ["nec-empty", "nec-0"]);
    for n in ["nec-1", "nec-2"] {
        assert_eq!(
            reason(&p, n),
            Some(&Unremovable::NotConsidered(
                "non-empty candidate limit reached"
            ))
        );
    }
}

#[test]
fn an_exhausted_simulation_budget_stops_non_empty_candidates() {
    let mut w = world(0, light_nodes("tmo", 2));
    let mut asked = 0;
    let mut budget = || {
        asked += 1;
        true
    };
    let p = plan_with(
        &mut w,
        &mut ScaleDownState::default(),
        &ScaleDownOptions::default(),
        0,
        &mut budget,
    );
    assert_eq!(unneeded(&p), ["tmo-empty"]);
    for n in ["tmo-0", "tmo-1"] {
        assert_eq!(
            reason(&p, n),
            Some(&Unremovable::NotConsidered("scale-down simulation timeout"))
        );
    }
    assert_eq!(asked, 2);
}

#[test]
fn drains_in_flight_count_toward_the_drain_parallelism() {
    let mut w = world(0, light_nodes("dif", 2));
    w.in_flight.drains = 1;
    let p = run_two_passes(&mut w, &ScaleDownOptions::default());
    let names: Vec<&str> = p.deletions.iter().map(|d| d.node.as_str()).collect();
    assert_eq!(names, ["dif-empty"]);
    assert!(
        p.waiting
            .iter()
            .all(|(_, why)| *why == Waiting::Parallelism)
    );
    assert_eq!(p.waiting.len(), 2);
    // Deletions in flight count toward the group's min size too.
    let mut w = world(2, light_nodes("mif", 1));
    w.in_flight.per_group = vec![1];
    let p = run_two_passes(&mut w, &ScaleDownOptions::default());
    assert!(p.deletions.is_empty());
    assert!(
        p.unremovable
            .iter()
            .all(|(_, r)| *r == Unremovable::MinSizeReached)
    );
}

#[test]
fn daemonset_pods_of_empty_nodes_are_evicted_only_when_asked() {
    let spec = || {
        vec![
            (
                node("ds-node", 4000),
                vec![PodBuilder::new("ds-pod", 100, GI / 8).owner("DaemonSet", "logs")],
            ),
            sink("ds-sink"),
        ]
    };
    let p = run_two_passes(&mut world(0, spec()), &ScaleDownOptions::default());
    let d = deletion(&p, "ds-node").expect("deleted");
    assert!(d.empty && d.evict.is_empty());
    let opts = ScaleDownOptions {
        drain: DrainOptions {
            daemonset_eviction_for_empty_nodes: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let p = run_two_passes(&mut world(0, spec()), &opts);
    let d = deletion(&p, "ds-node").expect("deleted");
    assert!(d.empty && d.destinations.is_empty());
    let evicted: Vec<String> = d.evict.iter().map(|p| p.key()).collect();
    assert_eq!(evicted, ["default/ds-pod"]);
}

// ----- Property: invariants of a plan on random clusters -----

#[derive(Clone, Debug)]
struct PodSpec {
    /// 0..=11 ReplicaSet, 12 ownerless, 13 DaemonSet, 14..=15 kube-system ReplicaSet.
    kind: u8,
    cpu: i64,
    mem_mi: i64,
    local: bool,
    /// 8: safe-to-evict true, 9: false, else none.
    safe: u8,
    port: Option<u16>,
    pin: bool,
    /// 0..=2: label `app=a<n>`, 3: no label.
    app: u8,
}

#[derive(Clone, Debug)]
struct NodeSpec {
    cpu: i64,
    mem_gi: i64,
    /// A group index, or unmanaged when past the last group.
    group: usize,
    pool: bool,
    pods: Vec<PodSpec>,
}

#[derive(Clone, Debug)]
struct GroupSpec {
    min: usize,
    /// Target minus registered nodes.
    delta: i64,
    in_flight: usize,
}

#[derive(Clone, Debug)]
struct Spec {
    groups: Vec<GroupSpec>,
    nodes: Vec<NodeSpec>,
    /// (kube-system, app, allowed).
    pdbs: Vec<(bool, u8, i32)>,
    threshold: f64,
    parallelism: usize,
    drain_parallelism: usize,
    non_empty: usize,
    ds_empty: bool,
    skip_local: bool,
    skip_system: bool,
    in_flight_empty: usize,
    in_flight_drains: usize,
    cores_min_pct: Option<i64>,
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (
        0u8..16,
        50i64..800,
        64i64..1536,
        prop::bool::weighted(0.05),
        0u8..10,
        prop::option::weighted(0.2, prop::sample::select(vec![8080u16, 9090])),
        prop::bool::weighted(0.2),
        0u8..4,
    )
        .prop_map(|(kind, cpu, mem_mi, local, safe, port, pin, app)| PodSpec {
            kind,
            cpu,
            mem_mi,
            local,
            safe,
            port,
            pin,
            app,
        })
}

fn spec() -> impl Strategy<Value = Spec> {
    let groups = prop::collection::vec(
        (0usize..4, -1i64..3, 0usize..3).prop_map(|(min, delta, in_flight)| GroupSpec {
            min,
            delta,
            in_flight,
        }),
        1..4,
    );
    let nodes = prop::collection::vec(
        (
            prop::sample::select(vec![1000i64, 2000, 4000]),
            prop::sample::select(vec![2i64, 4, 8]),
            0usize..4,
            any::<bool>(),
            prop::collection::vec(pod_spec(), 0..5),
        )
            .prop_map(|(cpu, mem_gi, group, pool, pods)| NodeSpec {
                cpu,
                mem_gi,
                group,
                pool,
                pods,
            }),
        5..26,
    );
    let pdbs = prop::collection::vec((prop::bool::weighted(0.2), 0u8..3, 0i32..4), 0..4);
    let opts = (
        0.3f64..0.9,
        1usize..11,
        1usize..5,
        1usize..31,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        0usize..3,
        0usize..3,
        prop::option::of(0i64..100),
    );
    (groups, nodes, pdbs, opts).prop_map(|(groups, nodes, pdbs, o)| Spec {
        groups,
        nodes,
        pdbs,
        threshold: o.0,
        parallelism: o.1,
        drain_parallelism: o.2,
        non_empty: o.3,
        ds_empty: o.4,
        skip_local: o.5,
        skip_system: o.6,
        in_flight_empty: o.7,
        in_flight_drains: o.8,
        cores_min_pct: o.9,
    })
}

fn app_selector(app: u8) -> Option<LabelSelector> {
    Some(LabelSelector {
        match_labels: Labels::from_pairs([("app", format!("a{app}").as_str())]),
        match_expressions: Vec::new(),
    })
}

fn make_pod(name: &str, ps: &PodSpec, node: &str, pool: &str) -> Arc<Pod> {
    let mut b = PodBuilder::new(name, ps.cpu, ps.mem_mi * MI).node_name(node);
    b = match ps.kind {
        0..=11 => b.owner("ReplicaSet", "rs"),
        12 => b,
        13 => b.owner("DaemonSet", "ds"),
        _ => b
            .namespace(autoscaler_model::KUBE_SYSTEM)
            .owner("ReplicaSet", "sys"),
    };
    if ps.app < 3 {
        b = b.label("app", &format!("a{}", ps.app));
    }
    if ps.local {
        b = b.with(|p| {
            p.volumes.push(Volume {
                name: Arc::from("scratch"),
                local_storage: true,
            })
        });
    }
    if ps.safe >= 8 {
        let v = if ps.safe == 8 { "true" } else { "false" };
        b = b.with(|p| {
            p.annotations.push((
                Arc::from(autoscaler_model::SAFE_TO_EVICT_ANNOTATION),
                Arc::from(v),
            ))
        });
    }
    if let Some(port) = ps.port {
        b = b.host_port(port);
    }
    if ps.pin {
        b = b.node_selector("pool", pool);
    }
    b.arc()
}

fn build(spec: &Spec) -> (World, ScaleDownOptions) {
    let mut groups: Vec<NodeGroup> = spec
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| NodeGroup::new(&format!("g{i}"), g.min, 100, 0))
        .collect();
    let mut snapshot = ClusterSnapshot::new();
    let mut nodes = Vec::new();
    for (i, ns) in spec.nodes.iter().enumerate() {
        let name = format!("n{i}");
        let pool = if ns.pool { "a" } else { "b" };
        let mut nb = NodeBuilder::new(&name, ns.cpu, ns.mem_gi * GI).label("pool", pool);
        if let Some(g) = groups.get_mut(ns.group) {
            let id = format!("test:///{name}");
            nb = nb.with_provider_id(&id);
            g.push_instance(Instance {
                id: Arc::from(id.as_str()),
                state: InstanceState::Running,
                error: None,
            });
        }
        let n = nb.arc();
        let id = snapshot.add_node(n.clone()).expect("unique names");
        for (j, ps) in ns.pods.iter().enumerate() {
            let pod = make_pod(&format!("p{i}-{j}"), ps, &name, pool);
            // Only pods the scheduler could have bound there.
            if snapshot.check_pod(&pod, id).is_ok() {
                snapshot.add_pod(pod, id).expect("unique pods");
            }
        }
        nodes.push(n);
    }
    for (g, gs) in groups.iter_mut().zip(&spec.groups) {
        g.set_target_size(
            usize::try_from((g.instances().len() as i64 + gs.delta).max(0)).expect("non-negative"),
        );
    }
    let mut limits = ResourceLimits::default();
    if let Some(pct) = spec.cores_min_pct {
        let cores: i64 = nodes.iter().map(|n| n.capacity.cpu).sum::<i64>() / 1000;
        limits.cpu = autoscaler_model::Range::parse_cores(&format!("{}:100000", cores * pct / 100))
            .expect("valid range");
    }
    let pdbs = spec
        .pdbs
        .iter()
        .enumerate()
        .map(|(k, &(sys, app, allowed))| {
            let ns = if sys {
                autoscaler_model::KUBE_SYSTEM
            } else {
                "default"
            };
            PodDisruptionBudget::new(ns, &format!("pdb{k}"), app_selector(app), allowed)
        })
        .collect();
    let world = World {
        snapshot,
        provider: StaticProvider::new(groups),
        nodes,
        pdbs,
        limits,
        in_flight: InFlight {
            per_group: spec.groups.iter().map(|g| g.in_flight).collect(),
            empty: spec.in_flight_empty,
            drains: spec.in_flight_drains,
        },
    };
    let opts = ScaleDownOptions {
        utilization_threshold: spec.threshold,
        max_scale_down_parallelism: spec.parallelism,
        max_drain_parallelism: spec.drain_parallelism,
        non_empty_candidates_count: spec.non_empty,
        drain: DrainOptions {
            daemonset_eviction_for_empty_nodes: spec.ds_empty,
            skip_nodes_with_local_storage: spec.skip_local,
            skip_nodes_with_system_pods: spec.skip_system,
            ..Default::default()
        },
        ..Default::default()
    };
    (world, opts)
}

fn keys<'a>(pods: impl IntoIterator<Item = &'a Arc<Pod>>) -> Vec<String> {
    pods.into_iter().map(|p| p.key()).collect()
}

fn check_plan(
    w: &mut World,
    opts: &ScaleDownOptions,
    plan: &ScaleDownPlan,
    now_ms: i64,
) -> Result<(), TestCaseError> {
    // (f) exactly one verdict per node; deletions and waiting split the unneeded nodes.
    let mut names: Vec<Sym> = w.snapshot.nodes().map(|(_, i)| i.node.name).collect();
    for &name in &names {
        let u = plan.unneeded.iter().filter(|(n, _)| *n == name).count();
        let r = plan.unremovable.iter().filter(|(n, _)| *n == name).count();
        prop_assert_eq!(u + r, 1, "node {} has {} verdicts", name, u + r);
    }
    prop_assert_eq!(plan.unneeded.len() + plan.unremovable.len(), names.len());
    let mut split: Vec<Sym> = plan
        .deletions
        .iter()
        .map(|d| d.node)
        .chain(plan.waiting.iter().map(|(n, _)| *n))
        .collect();
    let mut un: Vec<Sym> = plan.unneeded.iter().map(|(n, _)| *n).collect();
    split.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    un.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    prop_assert_eq!(split, un, "deletions + waiting == unneeded");
    names.clear();

    let initial = DisruptionBudgets::new(w.pdbs.clone());
    let ctx = DrainContext {
        opts: &opts.drain,
        budgets: &initial,
        controllers: &NoControllerLookup,
        now_ms,
    };
    let groups = w.provider.node_groups();
    let mut per_group = vec![0usize; groups.len()];
    let mut cpu_after = ClusterTotals::from_nodes(w.nodes.iter().map(|n| &**n)).cpu;
    for d in &plan.deletions {
        let info = w
            .snapshot
            .node_by_name(d.node)
            .expect("deleted node exists");
        // (a) the drain rules allow it, and the plan evicts what they say.
        let drained = drain::drain_node(&info.pods, &ctx);
        prop_assert!(drained.is_ok(), "{} blocked: {:?}", d.node, drained);
        let drained = drained.expect("checked");
        let mut want = keys(drained.to_move.iter().chain(&drained.to_evict_only));
        let mut got = keys(&d.evict);
        want.sort();
        got.sort();
        prop_assert_eq!(got, want, "evictions of {}", d.node);
        prop_assert_eq!(d.empty, drained.to_move.is_empty());
        prop_assert_eq!(Some(d.group_index), w.provider.node_group_of(&info.node));
        per_group[d.group_index] += 1;
        cpu_after -= info.node.capacity.cpu;
    }
    // (b) budgets committed node by node: a deletion never touches an exhausted budget, and
    // one needing more than what is left is sequential.
    let mut budgets = DisruptionBudgets::new(w.pdbs.clone());
    for d in &plan.deletions {
        let ev: Vec<&Pod> = d.evict.iter().map(|p| &**p).collect();
        for p in &ev {
            prop_assert!(
                budgets.exhausted_for(p).is_none(),
                "{} evicts {} past an exhausted budget",
                d.node,
                p.key()
            );
        }
        if budgets.can_evict(&ev).is_err() {
            prop_assert!(d.sequential_evictions, "{} must be sequential", d.node);
        }
        budgets.commit(&ev);
    }
    for (k, pdb) in w.pdbs.iter().enumerate() {
        let touching: Vec<&NodeDeletion> = plan
            .deletions
            .iter()
            .filter(|d| d.evict.iter().any(|p| initial.for_pod(p).contains(&k)))
            .collect();
        let total: i64 = touching
            .iter()
            .map(|d| {
                d.evict
                    .iter()
                    .filter(|p| initial.for_pod(p).contains(&k))
                    .count() as i64
            })
            .sum();
        if total > i64::from(pdb.disruptions_allowed) {
            prop_assert!(pdb.disruptions_allowed >= 1);
            prop_assert!(touching.iter().any(|d| d.sequential_evictions));
        }
    }
    // (c) min sizes, deletions in flight counted.
    for (g, group) in groups.iter().enumerate() {
        let flight = w.in_flight.per_group.get(g).copied().unwrap_or(0);
        if per_group[g] > 0 {
            prop_assert!(
                group.target_size() >= flight + per_group[g] + group.min_size(),
                "group {} target {} in flight {} deleted {} min {}",
                g,
                group.target_size(),
                flight,
                per_group[g],
                group.min_size()
            );
        }
    }
    // (d) the cores minimum.
    if !plan.deletions.is_empty() {
        prop_assert!(cpu_after >= w.limits.cpu.min());
    }
    // (e) replaying the moves without the deleted nodes: every pod to move has a
    // destination that exists and fits it at that moment.
    w.snapshot.fork();
    for d in &plan.deletions {
        let id = w.snapshot.node_id(d.node).expect("exists");
        w.snapshot.remove_node(id).expect("exists");
    }
    for d in &plan.deletions {
        let mut must_move: Vec<String> = d
            .evict
            .iter()
            .filter(|p| !drain::is_daemonset_pod(p))
            .map(|p| p.key())
            .collect();
        let mut moved = keys(d.destinations.iter().map(|(p, _)| p));
        must_move.sort();
        moved.sort();
        prop_assert_eq!(moved, must_move, "destinations of {}", d.node);
        for (pod, dest) in &d.destinations {
            let mut pod = (**pod).clone();
            pod.node_name = None;
            let id = w.snapshot.node_id(*dest);
            prop_assert!(id.is_some(), "{} sent to deleted node {}", pod.key(), dest);
            let id = id.expect("checked");
            let fit = w.snapshot.check_pod(&pod, id);
            prop_assert!(
                fit.is_ok(),
                "{} does not fit on {}: {:?}",
                pod.key(),
                dest,
                fit
            );
            w.snapshot.add_pod(Arc::new(pod), id).expect("fits");
        }
    }
    w.snapshot.revert().expect("forked");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn plans_keep_every_invariant(spec in spec()) {
        let (mut w, opts) = build(&spec);
        let mut state = ScaleDownState::default();
        let first = plan_with(&mut w, &mut state, &opts, 0, &mut Unlimited);
        prop_assert!(first.deletions.is_empty());
        check_plan(&mut w, &opts, &first, 0)?;
        let second = plan_with(&mut w, &mut state, &opts, 11 * MIN, &mut Unlimited);
        check_plan(&mut w, &opts, &second, 11 * MIN)?;
    }
}

mod hint_tests {
    use super::*;
    use crate::scheduling::budget::Unlimited;
    use autoscaler_model::NoControllerLookup;
    use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};
    use autoscaler_model::{Instance, InstanceState, NodeGroup, StaticProvider};

    #[test]
    fn hints_are_kept_only_for_pods_of_unneeded_nodes() {
        let mut snap = ClusterSnapshot::new();
        let mut g = NodeGroup::new("ng", 0, 10, 2);
        let mut nodes = Vec::new();
        for (name, pod_cpu) in [("h-light", 100), ("h-room", 2000)] {
            let n = NodeBuilder::new(name, 4000, 16 * GI)
                .with_provider_id(&format!("test:///{name}"))
                .arc();
            g.push_instance(Instance {
                id: n.provider_id.clone().unwrap(),
                state: InstanceState::Running,
                error: None,
            });
            let id = snap.add_node(n.clone()).unwrap();
            let pod = PodBuilder::new(&format!("{name}-p"), pod_cpu, GI)
                .owner("ReplicaSet", "rs")
                .node_name(name)
                .arc();
            snap.add_pod(pod, id).unwrap();
            nodes.push(n);
        }
        let provider = StaticProvider::new(vec![g]);
        let limits = ResourceLimits::default();
        let mut state = ScaleDownState::default();
        state.hints.insert(
            (Sym::new("default"), Arc::from("long-gone")),
            Sym::new("h-room"),
        );
        let input = ScaleDownInput {
            provider: &provider,
            budgets: DisruptionBudgets::new(Vec::new()),
            controllers: &NoControllerLookup,
            limits: &limits,
            totals: ClusterTotals::from_nodes(nodes.iter().map(|n| &**n)),
            in_flight: InFlight::default(),
        };
        let plan = plan_scale_down(
            &mut snap,
            &mut state,
            input,
            &ScaleDownOptions::default(),
            0,
            &mut Unlimited,
        );
        assert_eq!(plan.unneeded.len(), 1);
        assert_eq!(state.hints.len(), 1, "{:?}", state.hints);
        assert!(
            state
                .hints
                .contains_key(&(Sym::new("default"), Arc::from("h-light-p")))
        );
    }
}

/// Seed 002: a pod below the expendable cutoff neither blocks its node (this one has no
/// controller, nor room elsewhere) nor is moved: the node is empty and goes in bulk.
#[test]
fn expendable_pods_do_not_block_and_are_dropped_not_moved() {
    let spec = |priority: i32| {
        vec![
            (
                node("low", 1000),
                vec![PodBuilder::new("batch", 300, GI / 4).priority(priority)],
            ),
            (node("full", 1000), vec![rs_pod("f", 900)]),
        ]
    };
    let opts = ScaleDownOptions {
        unneeded_time: Duration::ZERO,
        delay_after_add: Duration::ZERO,
        ..ScaleDownOptions::default()
    };
    let mut w = world(0, spec(0));
    let p = plan_at(&mut w, &mut ScaleDownState::default(), &opts, 0);
    assert!(
        matches!(reason(&p, "low"), Some(Unremovable::PodBlocks(_))),
        "{p:?}"
    );
    let mut w = world(0, spec(-11));
    let p = plan_at(&mut w, &mut ScaleDownState::default(), &opts, 0);
    let [d] = p.deletions.as_slice() else {
        panic!("{p:?}")
    };
    assert_eq!(d.node.as_str(), "low");
    assert!(d.empty && d.evict.is_empty() && d.destinations.is_empty());
}

/// `--scale-down-unready-enabled=false`: an unready node is never removed, however long it has
/// been unneeded; ready nodes are not affected.
#[test]
fn unready_nodes_stay_when_their_scale_down_is_disabled() {
    let spec = || {
        vec![
            (node("sick", 1000).not_ready(), vec![]),
            (node("idle", 1000), vec![]),
            (node("busy", 4000), vec![rs_pod("b", 3000)]),
        ]
    };
    let opts = ScaleDownOptions {
        unneeded_time: Duration::ZERO,
        unready_time: Duration::ZERO,
        delay_after_add: Duration::ZERO,
        ..ScaleDownOptions::default()
    };
    let deleted = |opts: &ScaleDownOptions| {
        let mut w = world(0, spec());
        let p = plan_at(&mut w, &mut ScaleDownState::default(), opts, 0);
        let mut names: Vec<&str> = p.deletions.iter().map(|d| d.node.as_str()).collect();
        names.sort_unstable();
        (names, reason(&p, "sick").cloned())
    };
    assert_eq!(deleted(&opts), (vec!["idle", "sick"], None));
    let off = ScaleDownOptions {
        unready_enabled: false,
        ..opts
    };
    assert_eq!(
        deleted(&off),
        (vec!["idle"], Some(Unremovable::UnreadyDisabled))
    );
}

/// A group being rolled out loses no node to scale-down, and `plan` says why.
#[test]
fn nodes_of_a_group_being_rolled_out_stay() {
    let mut w = world(0, vec![(node("idle", 1000), vec![])]);
    let opts = ScaleDownOptions {
        unneeded_time: Duration::ZERO,
        delay_after_add: Duration::ZERO,
        ..ScaleDownOptions::default()
    };
    let p = plan_at(&mut w, &mut ScaleDownState::default(), &opts, 0);
    assert_eq!(p.deletions.len(), 1);
    let mut group = w.provider.node_groups()[0].clone();
    group = group.with_rolling_out(true);
    w.provider = StaticProvider::new(vec![group]);
    let p = plan_at(&mut w, &mut ScaleDownState::default(), &opts, 0);
    assert!(p.deletions.is_empty() && p.unneeded.is_empty());
    let why = reason(&p, "idle").expect("unremovable");
    assert_eq!(why, &Unremovable::RollingOut);
    assert_eq!(why.to_string(), "node group is being rolled out");
}

/// `--scale-down-delay-type-local`: a scale-up (or deletion, or failure) holds only its own
/// node group; cluster-wide it holds every group.
#[test]
fn local_delays_hold_only_the_group_concerned() {
    let spec = || {
        (0..2)
            .map(|i| (node(&format!("cool-{i}"), 4000), vec![]))
            .collect()
    };
    let at = |opts: &ScaleDownOptions, grown: &str| {
        let mut w = world(0, spec());
        let mut state = ScaleDownState::default();
        plan_at(&mut w, &mut state, opts, 0);
        state.record_scale_up([&NodeGroupId::from(grown)], 5 * MIN);
        plan_at(&mut w, &mut state, opts, 11 * MIN)
    };
    let global = ScaleDownOptions::default();
    let local = ScaleDownOptions {
        delay_type_local: true,
        ..ScaleDownOptions::default()
    };
    assert!(at(&global, "other").deletions.is_empty());
    assert_eq!(at(&local, "other").deletions.len(), 2);
    let p = at(&local, "ng");
    assert!(p.deletions.is_empty());
    assert!(
        matches!(&p.waiting[0].1, Waiting::Cooldown(why) if why.starts_with("node group ng: ") && why.contains("scale-up")),
        "{p:?}"
    );
    // A deletion's outcome is recorded against the group of the node.
    let mut w = world(0, spec());
    let mut state = ScaleDownState::default();
    let opts = ScaleDownOptions {
        unneeded_time: Duration::ZERO,
        delay_after_add: Duration::ZERO,
        delay_after_failure: Duration::from_secs(180),
        ..local
    };
    let p = plan_at(&mut w, &mut state, &opts, 0);
    let node = p.deletions[0].node;
    state.record_deletion(node, false, MIN);
    let ng = &state.per_group[&NodeGroupId::from("ng")];
    assert_eq!(ng.last_failure_ms, Some(MIN));
    assert!(
        plan_at(&mut w, &mut state, &opts, 2 * MIN)
            .deletions
            .is_empty()
    );
    assert_eq!(
        plan_at(&mut w, &mut state, &opts, 4 * MIN).deletions.len(),
        2
    );
}

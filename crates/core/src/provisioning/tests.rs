//! Scenarios of the capacity-on-request decisions, restating upstream's facts: the classes, the
//! condition reasons and messages, the 10-minute booking, the 1m..10m retry backoff, the 7-day
//! expiry, the all-or-nothing scale-up.

use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

use super::buffer::resolve;
use super::request::*;
use crate::autoscaler::{
    Autoscaler, AutoscalerOptions, ClusterView, LoopInput, ScaleUpConfig, decide_scale_up,
};
use crate::scheduling::budget::Unlimited;
use autoscaler_model::CapacityBuffer;
use autoscaler_model::NoControllerLookup;
use autoscaler_model::Node;
use autoscaler_model::Pod;
use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};
use autoscaler_model::{
    CLASS_BEST_EFFORT_ATOMIC, CLASS_CHECK_CAPACITY, CONSUME_ANNOTATION, ConditionStatus,
    ConditionType, ProvisioningRequest,
};
use autoscaler_model::{Instance, InstanceState, NodeGroup, StaticProvider};
use autoscaler_model::{PodTemplate, Workload};

const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z
const MIN: i64 = 60_000;

fn on() -> RequestOptions {
    RequestOptions {
        enabled: true,
        ..RequestOptions::default()
    }
}

fn ts(ms: i64) -> String {
    crate::cluster_state::format_time_ms(ms)
}

fn request(name: &str, class: &str, count: u32, conditions: Value) -> ProvisioningRequest {
    ProvisioningRequest::from_value(&json!({
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": name, "namespace": "batch", "uid": format!("uid-{name}"),
                     "resourceVersion": "5", "creationTimestamp": ts(T0)},
        "spec": {"provisioningClassName": class,
                 "podSets": [{"podTemplateRef": {"name": "worker"}, "count": count}]},
        "status": {"conditions": conditions},
    }))
    .unwrap()
}

fn condition(t: &str, s: &str, at: i64) -> Value {
    json!({"type": t, "status": s, "reason": "r", "message": "m", "lastTransitionTime": ts(at)})
}

fn template(cpu: &str, gpu: Option<&str>) -> PodTemplate {
    let mut requests = json!({"cpu": cpu, "memory": "1Gi"});
    if let Some(g) = gpu {
        requests["nvidia.com/gpu"] = json!(g);
    }
    serde_json::from_value(json!({
        "metadata": {"name": "worker", "namespace": "batch"},
        "template": {"spec": {"containers": [{"name": "c", "image": "i",
            "resources": {"requests": requests.clone(), "limits": requests}}]}}
    }))
    .unwrap()
}

fn node(name: &str, cpu: i64, gpu: i64) -> Arc<Node> {
    let mut b = NodeBuilder::new(name, cpu, 16 * GI).with_provider_id(&format!("test:///{name}"));
    if gpu > 0 {
        b = b.resource("nvidia.com/gpu", gpu);
    }
    b.arc()
}

fn group(id: &str, nodes: &[&Arc<Node>], min: usize, max: usize, tmpl: Arc<Node>) -> NodeGroup {
    let mut g = NodeGroup::new(id, min, max, nodes.len());
    g = g.with_instances(
        nodes
            .iter()
            .map(|n| Instance {
                id: n.provider_id.clone().unwrap(),
                state: InstanceState::Running,
                error: None,
            })
            .collect(),
    );
    g = g.with_template(Some(tmpl));
    g
}

struct World {
    nodes: Vec<Arc<Node>>,
    pods: Vec<Arc<Pod>>,
    provider: StaticProvider,
    template: PodTemplate,
}

impl World {
    fn decide(
        &self,
        state: &mut Requests,
        requests: &[ProvisioningRequest],
        opts: &RequestOptions,
        now: i64,
    ) -> RequestsDecision {
        let view = ClusterView::of(&self.nodes, &self.pods, &self.provider);
        let t = &self.template;
        let lookup = move |ns: &str, n: &str| (ns == "batch" && n == "worker").then_some(t);
        let input = RequestsInput {
            view: &view,
            template: &lookup,
            config: &ScaleUpConfig::default(),
            blocked: &|_, _| None,
            upcoming: None,
            regular_pending: None,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        state.decide(requests, &input, opts, now, &mut rng, &mut Unlimited)
    }
}

/// Two 4-CPU nodes, one with 3 CPU taken; a group `ng` (1..10) of 4-CPU nodes.
fn cpu_world() -> World {
    let n1 = node("n1", 4000, 0);
    let n2 = node("n2", 4000, 0);
    let busy = PodBuilder::new("busy", 3000, GI)
        .owner("ReplicaSet", "web")
        .node_name("n1")
        .arc();
    let g = group("ng", &[&n1, &n2], 1, 10, node("tmpl", 4000, 0));
    World {
        nodes: vec![n1, n2],
        pods: vec![busy],
        provider: StaticProvider::new(vec![g]),
        template: template("2", None),
    }
}

fn write_for<'d>(d: &'d RequestsDecision, name: &str) -> &'d StatusWrite {
    d.writes.iter().find(|w| &*w.name == name).unwrap()
}

fn cond(w: &StatusWrite, t: ConditionType) -> &autoscaler_model::RequestCondition {
    w.conditions.iter().find(|c| c.type_ == t).unwrap()
}

#[test]
fn nothing_is_decided_unless_provisioning_requests_are_enabled() {
    let w = cpu_world();
    let r = request("job", CLASS_CHECK_CAPACITY, 1, json!([]));
    let d = w.decide(
        &mut Requests::default(),
        &[r],
        &RequestOptions::default(),
        T0,
    );
    assert!(d.writes.is_empty() && d.requests.is_empty() && d.booked.is_empty());
}

#[test]
fn check_capacity_that_fits_is_provisioned_in_the_loop_that_takes_it_up_and_booked() {
    let w = cpu_world();
    // 2 pods of 2 CPU: n2 takes both (n1 has 1 CPU left).
    let r = request("job", CLASS_CHECK_CAPACITY, 2, json!([]));
    let d = w.decide(&mut Requests::default(), &[r], &on(), T0 + 1000);
    let write = write_for(&d, "job");
    assert_eq!(
        write.set,
        [ConditionType::Accepted, ConditionType::Provisioned]
    );
    assert_eq!(&*write.resource_version, "5");
    let accepted = cond(write, ConditionType::Accepted);
    assert_eq!(accepted.reason, "Accepted");
    assert_eq!(
        accepted.message,
        "ProvisioningRequest is accepted by ClusterAutoscaler"
    );
    let p = cond(write, ConditionType::Provisioned);
    assert_eq!(p.status, ConditionStatus::True);
    assert_eq!(p.reason, "CapacityIsFound");
    assert_eq!(p.message, "Capacity is found in the cluster");
    assert_eq!(p.last_transition_ms, T0 + 1000);
    assert!(d.scale_up.is_none(), "check-capacity never scales up");
    let held: Vec<&str> = d
        .booked
        .iter()
        .map(|p| p.node_name.unwrap().as_str())
        .collect();
    assert_eq!(held, ["n2", "n2"]);
    assert_eq!(d.requests[0].verdict, Verdict::Fits);
}

#[test]
fn check_capacity_that_does_not_fit_is_retried_or_failed_with_no_retry_and_never_scales_up() {
    let w = cpu_world();
    let r = request("job", CLASS_CHECK_CAPACITY, 3, json!([]));
    let d = w.decide(
        &mut Requests::default(),
        std::slice::from_ref(&r),
        &on(),
        T0,
    );
    let p = cond(write_for(&d, "job"), ConditionType::Provisioned);
    assert_eq!(p.status, ConditionStatus::False);
    assert_eq!(p.reason, "CapacityIsNotFound");
    assert_eq!(
        p.message,
        "Capacity is not found, CA will try to find it later."
    );
    assert!(d.scale_up.is_none() && d.booked.is_empty());

    let mut r = r;
    r.parameters.insert("noRetry".into(), "true".into());
    let d = w.decide(&mut Requests::default(), &[r], &on(), T0);
    let f = cond(write_for(&d, "job"), ConditionType::Failed);
    assert_eq!(f.status, ConditionStatus::True);
    assert_eq!(f.reason, "CapacityIsNotFound");
    assert_eq!(f.message, "CA could not find requested capacity");
}

#[test]
fn a_request_left_unprovisioned_is_retried_after_a_backoff_that_doubles_up_to_ten_minutes() {
    let w = cpu_world();
    let mut state = Requests::default();
    let not_found_at = |at: i64| {
        request(
            "job",
            CLASS_CHECK_CAPACITY,
            3,
            json!([condition("Provisioned", "False", at)]),
        )
    };
    // Within the first minute: waiting.
    let d = w.decide(&mut state, &[not_found_at(T0)], &on(), T0 + 30_000);
    assert_eq!(d.requests[0].verdict, Verdict::Waiting);
    assert!(d.writes.is_empty());
    // After a minute: tried again, and the next wait is 2 minutes.
    let d = w.decide(&mut state, &[not_found_at(T0)], &on(), T0 + MIN + 1);
    assert!(matches!(d.requests[0].verdict, Verdict::NotFound(_)));
    let r = not_found_at(T0 + MIN + 1);
    assert_eq!(state.backoff.wait_of(&r), Some(2 * MIN));
    let d = w.decide(&mut state, std::slice::from_ref(&r), &on(), T0 + 2 * MIN);
    assert_eq!(d.requests[0].verdict, Verdict::Waiting);
    // The wait doubles, capped at 10 minutes.
    for _ in 0..6 {
        let wait = state.backoff.wait_of(&r).unwrap();
        let d = w.decide(
            &mut state,
            std::slice::from_ref(&r),
            &on(),
            T0 + MIN + 2 + wait,
        );
        assert!(matches!(d.requests[0].verdict, Verdict::NotFound(_)));
    }
    assert_eq!(state.backoff.wait_of(&r), Some(10 * MIN));
}

#[test]
fn a_booking_holds_its_room_against_pending_pods_and_expires_after_ten_minutes() {
    let mut w = cpu_world();
    let provisioned = request(
        "job",
        CLASS_CHECK_CAPACITY,
        2,
        json!([condition("Provisioned", "True", T0)]),
    );
    let d = w.decide(
        &mut Requests::default(),
        std::slice::from_ref(&provisioned),
        &on(),
        T0 + 5 * MIN,
    );
    assert_eq!(
        d.requests[0].verdict,
        Verdict::Booked { held: 2, wanted: 2 }
    );
    assert!(d.writes.is_empty());
    // A pending 2-CPU pod finds n2 taken by the booking: it needs a new node.
    w.pods.push(
        PodBuilder::new("late", 2000, GI)
            .owner("ReplicaSet", "web")
            .unschedulable()
            .arc(),
    );
    let pods = d.pods_for_loop(&w.pods);
    let view = ClusterView::of(&w.nodes, &pods, &w.provider);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let up = decide_scale_up(
        &view,
        &ScaleUpConfig::default(),
        T0,
        &|_, _| None,
        &mut rng,
        &mut Unlimited,
    );
    assert_eq!(up.result.total_nodes(), 1, "{:?}", up.result);
    // Without the booking it fits n2.
    let view = ClusterView::of(&w.nodes, &w.pods, &w.provider);
    let up = decide_scale_up(
        &view,
        &ScaleUpConfig::default(),
        T0,
        &|_, _| None,
        &mut rng,
        &mut Unlimited,
    );
    assert_eq!(up.result.total_nodes(), 0);

    // Ten minutes after Provisioned the booking expires.
    let d = w.decide(
        &mut Requests::default(),
        &[provisioned],
        &on(),
        T0 + 10 * MIN + 1,
    );
    let e = cond(write_for(&d, "job"), ConditionType::BookingExpired);
    assert_eq!(e.status, ConditionStatus::True);
    assert_eq!(e.reason, "CapacityReservationTimeExpired");
    assert_eq!(e.message, "Capacity reservation time is expired");
    assert!(d.booked.is_empty());
}

#[test]
fn a_booked_node_is_not_scaled_down_while_the_booking_lives() {
    // n2 is empty and its group is above its min: unneeded, unless a booking holds it.
    let w = cpu_world();
    let provisioned = request(
        "job",
        CLASS_CHECK_CAPACITY,
        2,
        json!([condition("Provisioned", "True", T0)]),
    );
    let unneeded = |pods: &[Arc<Pod>]| -> Vec<String> {
        let view = ClusterView::of(&w.nodes, pods, &w.provider);
        let mut a = Autoscaler::new(AutoscalerOptions::default());
        let out = a.run_once(LoopInput::new(&view, T0));
        out.scale_down
            .unneeded
            .iter()
            .map(|(n, _)| n.as_str().to_string())
            .collect()
    };
    assert!(unneeded(&w.pods).contains(&"n2".to_string()));
    let d = w.decide(&mut Requests::default(), &[provisioned], &on(), T0 + MIN);
    let pods = d.pods_for_loop(&w.pods);
    assert!(!unneeded(&pods).contains(&"n2".to_string()));
}

#[test]
fn a_booking_ends_once_every_pod_of_the_request_is_scheduled() {
    let mut w = cpu_world();
    for i in 0..2 {
        w.pods.push(
            PodBuilder::new(&format!("consumer-{i}"), 2000, GI)
                .namespace("batch")
                .owner("Job", "train")
                .node_name("n2")
                .with(|p| p.annotations = vec![(CONSUME_ANNOTATION.into(), "job".into())])
                .arc(),
        );
    }
    let provisioned = request(
        "job",
        CLASS_CHECK_CAPACITY,
        2,
        json!([condition("Provisioned", "True", T0)]),
    );
    let d = w.decide(&mut Requests::default(), &[provisioned], &on(), T0 + MIN);
    let e = cond(write_for(&d, "job"), ConditionType::BookingExpired);
    assert_eq!(e.reason, "CapacityBookingConsumed");
    assert_eq!(d.requests[0].verdict, Verdict::Consumed);
}

#[test]
fn pending_consumer_pods_are_served_by_their_request_not_by_an_ordinary_scale_up() {
    let mut w = cpu_world();
    let consumer = PodBuilder::new("consumer", 2000, GI)
        .namespace("batch")
        .owner("Job", "train")
        .unschedulable()
        .with(|p| p.annotations = vec![(CONSUME_ANNOTATION.into(), "job".into())])
        .arc();
    let stranger = PodBuilder::new("stranger", 2000, GI)
        .namespace("batch")
        .owner("Job", "other")
        .unschedulable()
        .with(|p| p.annotations = vec![(CONSUME_ANNOTATION.into(), "unknown".into())])
        .arc();
    w.pods.push(consumer.clone());
    w.pods.push(stranger.clone());
    let r = request(
        "job",
        CLASS_BEST_EFFORT_ATOMIC,
        1,
        json!([condition("Provisioned", "False", T0)]),
    );
    let d = w.decide(
        &mut Requests::default(),
        std::slice::from_ref(&r),
        &on(),
        T0 + 1,
    );
    assert!(d.serves(&consumer));
    // As upstream's pods filter: a consumer of a request that does not exist (yet) is left out
    // of the ordinary scale-up too.
    assert!(d.serves(&stranger));
    let pods = d.pods_for_loop(&w.pods);
    assert!(!pods.iter().any(|p| Arc::ptr_eq(p, &consumer)));
    assert!(!pods.iter().any(|p| Arc::ptr_eq(p, &stranger)));
    let events: Vec<(&str, String)> = d
        .consumer_events(&w.pods)
        .into_iter()
        .map(|(p, m)| (&*p.name, m))
        .collect();
    assert_eq!(
        events,
        [
            (
                "consumer",
                "Unschedulable pod didn't trigger scale-up, because it's consuming \
                 ProvisioningRequest batch/job"
                    .to_string()
            ),
            (
                "stranger",
                "Unschedulable pod didn't trigger scale-up, because it's consuming \
                 ProvisioningRequest batch/unknown"
                    .to_string()
            )
        ]
    );
    // Requests disabled: consumers are ordinary pending pods, and get no such event.
    let off = RequestOptions {
        enabled: false,
        ..on()
    };
    let d = w.decide(&mut Requests::default(), &[r], &off, T0 + 1);
    assert!(!d.serves(&consumer));
    assert!(d.consumer_events(&w.pods).is_empty());
}

#[test]
fn at_most_fifty_consumer_pods_get_the_event_per_loop() {
    let mut w = cpu_world();
    for i in 0..60 {
        w.pods.push(
            PodBuilder::new(&format!("c{i}"), 2000, GI)
                .namespace("batch")
                .owner("Job", "train")
                .unschedulable()
                .with(|p| p.annotations = vec![(CONSUME_ANNOTATION.into(), "job".into())])
                .arc(),
        );
    }
    let d = w.decide(&mut Requests::default(), &[], &on(), T0);
    assert_eq!(d.consumer_events(&w.pods).len(), 50);
    assert_eq!(d.pods_for_loop(&w.pods).len(), w.pods.len() - 60);
}

#[test]
fn a_request_never_provisioned_fails_after_seven_days() {
    let w = cpu_world();
    let r = request(
        "job",
        CLASS_CHECK_CAPACITY,
        3,
        json!([condition("Provisioned", "False", T0)]),
    );
    let d = w.decide(&mut Requests::default(), &[r], &on(), T0 + EXPIRY_MS + 1);
    let f = cond(write_for(&d, "job"), ConditionType::Failed);
    assert_eq!(f.reason, "Expired");
    assert_eq!(f.message, "ProvisioningRequest is expired");
    assert_eq!(d.requests[0].verdict, Verdict::Expired);
}

#[test]
fn missing_pod_templates_fail_the_request_with_failed_to_create_pods() {
    let mut w = cpu_world();
    w.template.metadata.name = Some("other".into());
    let r = ProvisioningRequest {
        pod_sets: vec![autoscaler_model::PodSet {
            template: "absent".into(),
            count: 1,
        }],
        ..request("job", CLASS_CHECK_CAPACITY, 1, json!([]))
    };
    let d = w.decide(&mut Requests::default(), &[r], &on(), T0);
    let f = cond(write_for(&d, "job"), ConditionType::Failed);
    assert_eq!(f.reason, "FailedToCreatePods");
    assert_eq!(f.message, "podSet 0: PodTemplate batch/absent not found");
}

#[test]
fn one_request_is_taken_up_per_loop_in_creation_order_and_other_classes_are_left_alone() {
    let w = cpu_world();
    let a = request("a", CLASS_CHECK_CAPACITY, 1, json!([]));
    let b = request("b", CLASS_CHECK_CAPACITY, 1, json!([]));
    let other = request("c", "queued-provisioning.gke.io", 1, json!([]));
    let d = w.decide(&mut Requests::default(), &[b, a, other], &on(), T0);
    let verdicts: Vec<(&str, &Verdict)> = d
        .requests
        .iter()
        .map(|r| (r.key.as_str(), &r.verdict))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("batch/a", &Verdict::Fits),
            ("batch/b", &Verdict::Waiting),
            ("batch/c", &Verdict::NotOurs)
        ]
    );
    assert_eq!(d.writes.len(), 1);
}

#[test]
fn the_processor_instance_selects_the_check_capacity_requests_it_serves() {
    let mut r = request("a", CLASS_CHECK_CAPACITY, 1, json!([]));
    assert!(supported_class(&r, ""));
    assert!(!supported_class(&r, "blue"));
    r.parameters
        .insert("processorInstance".into(), "blue".into());
    assert!(!supported_class(&r, ""));
    assert!(supported_class(&r, "blue"));
    assert!(!supported_class(&r, "green"));
    let atomic = request("b", CLASS_BEST_EFFORT_ATOMIC, 1, json!([]));
    assert!(supported_class(&atomic, ""));
    assert!(!supported_class(&atomic, "blue"));
    let prefixed = request("c", "bluecheck-capacity.autoscaling.x-k8s.io", 1, json!([]));
    assert!(supported_class(&prefixed, "blue"));
}

/// A GPU world: one group of 1-GPU nodes, at 0 nodes, with the given max.
fn gpu_world(max: usize) -> World {
    let g = group("gpu", &[], 0, max, node("tmpl", 8000, 1));
    World {
        nodes: vec![],
        pods: vec![],
        provider: StaticProvider::new(vec![g]),
        template: template("4", Some("1")),
    }
}

#[test]
fn an_atomic_request_for_eight_gpu_nodes_gets_one_scale_up_of_eight() {
    let w = gpu_world(10);
    let r = request("train", CLASS_BEST_EFFORT_ATOMIC, 8, json!([]));
    let d = w.decide(&mut Requests::default(), &[r], &on(), T0);
    let up = d.scale_up.as_ref().expect("a scale-up");
    assert_eq!(up.result.increases.len(), 1);
    assert_eq!(up.result.increases[0].delta, 8);
    assert_eq!(up.result.increases[0].new_target, 8);
    // Provisioned waits for the nodes to be Ready (ours; upstream writes True here).
    let p = cond(write_for(&d, "train"), ConditionType::Provisioned);
    assert_eq!(p.status, ConditionStatus::False);
    assert_eq!(p.reason, "CapacityIsBeingProvisioned");
    let a = cond(write_for(&d, "train"), ConditionType::Accepted);
    assert_eq!(a.status, ConditionStatus::True);
    assert_eq!(
        d.requests[0].verdict,
        Verdict::ScaledUp(vec![("gpu".into(), 8)])
    );
    assert!(d.took_turn);
}

#[test]
fn an_atomic_scale_up_that_failed_is_written_not_found_and_retried_after_backoff() {
    let w = gpu_world(10);
    let r = request("train", CLASS_BEST_EFFORT_ATOMIC, 8, json!([]));
    let mut d = w.decide(&mut Requests::default(), &[r], &on(), T0);
    d.scale_up_failed("gpu: 503");
    let p = cond(write_for(&d, "train"), ConditionType::Provisioned);
    assert_eq!(p.status, ConditionStatus::False);
    assert_eq!(p.reason, "CapacityIsNotFound");
    assert_eq!(
        p.message,
        "Capacity is not found, CA will try to find it later."
    );
    assert_eq!(p.last_transition_ms, T0);
    assert_eq!(
        d.requests[0].verdict,
        Verdict::NotFound("the scale-up failed: gpu: 503".into())
    );
    // Written so, the request waits for its retry backoff: not taken up a minute later.
    let mut written = request("train", CLASS_BEST_EFFORT_ATOMIC, 8, json!([]));
    written.conditions = write_for(&d, "train").conditions.clone();
    let again = w.decide(
        &mut Requests::default(),
        &[written.clone()],
        &on(),
        T0 + 30_000,
    );
    assert_eq!(again.requests[0].verdict, Verdict::Waiting);
    assert!(again.scale_up.is_none());
    let later = w.decide(&mut Requests::default(), &[written], &on(), T0 + 61_000);
    assert!(later.scale_up.is_some());
}

/// The GPU world after the scale-up of eight: the group's target is 8, with `ready` of its
/// nodes registered and Ready.
fn gpu_world_scaled(max: usize, target: usize, ready: usize) -> World {
    let nodes: Vec<Arc<Node>> = (0..ready)
        .map(|i| node(&format!("g{i}"), 8000, 1))
        .collect();
    let refs: Vec<&Arc<Node>> = nodes.iter().collect();
    let mut g = group("gpu", &refs, 0, max, node("tmpl", 8000, 1));
    g.set_target_size(target);
    for i in ready..target {
        g.push_instance(Instance {
            id: format!("test:///g{i}").into(),
            state: InstanceState::Creating,
            error: None,
        });
    }
    World {
        nodes,
        pods: vec![],
        provider: StaticProvider::new(vec![g]),
        template: template("4", Some("1")),
    }
}

#[test]
fn an_atomic_request_is_provisioned_once_its_pods_fit_ready_nodes_not_before() {
    let accepted = condition("Accepted", "True", T0);
    let being = json!({"type": "Provisioned", "status": "False",
        "reason": "CapacityIsBeingProvisioned", "message": "m", "lastTransitionTime": ts(T0)});
    let r = request(
        "train",
        CLASS_BEST_EFFORT_ATOMIC,
        8,
        json!([accepted, being]),
    );
    let mut state = Requests::default();
    // Five of eight nodes Ready, three on their way: still waiting, no write, no new scale-up;
    // the five hold their room.
    let w = gpu_world_scaled(10, 8, 5);
    let d = w.decide(&mut state, std::slice::from_ref(&r), &on(), T0 + 3 * MIN);
    assert_eq!(
        d.requests[0].verdict,
        Verdict::Provisioning { held: 5, wanted: 8 }
    );
    assert!(d.writes.is_empty(), "{:?}", d.writes);
    assert!(d.scale_up.is_none());
    assert_eq!(d.booked.len(), 5);
    // All eight Ready: Provisioned=True (upstream's reason), and the booking starts.
    let w = gpu_world_scaled(10, 8, 8);
    let d = w.decide(&mut state, std::slice::from_ref(&r), &on(), T0 + 5 * MIN);
    assert_eq!(d.requests[0].verdict, Verdict::NodesReady);
    let p = cond(write_for(&d, "train"), ConditionType::Provisioned);
    assert_eq!(p.status, ConditionStatus::True);
    assert_eq!(p.reason, "CapacityIsProvisioned");
    assert_eq!(p.last_transition_ms, T0 + 5 * MIN);
    assert_eq!(d.booked.len(), 8);
    assert!(d.scale_up.is_none());
}

#[test]
fn an_atomic_scale_up_that_never_comes_sends_the_request_back_to_retry() {
    let being = json!({"type": "Provisioned", "status": "False",
        "reason": "CapacityIsBeingProvisioned", "message": "m", "lastTransitionTime": ts(T0)});
    let r = request("train", CLASS_BEST_EFFORT_ATOMIC, 8, json!([being]));
    // The scale-up was reverted (target back to 2 of 2 Ready): the room is not coming.
    let w = gpu_world_scaled(10, 2, 2);
    let d = w.decide(&mut Requests::default(), &[r], &on(), T0 + 20 * MIN);
    let p = cond(write_for(&d, "train"), ConditionType::Provisioned);
    assert_eq!(p.status, ConditionStatus::False);
    assert_eq!(p.reason, "CapacityIsNotFound");
    assert!(d.booked.is_empty());
    assert!(d.scale_up.is_none());
}

#[test]
fn an_atomic_request_that_fits_only_six_under_the_max_fails_and_grows_nothing() {
    let w = gpu_world(6);
    let r = request("train", CLASS_BEST_EFFORT_ATOMIC, 8, json!([]));
    let d = w.decide(&mut Requests::default(), &[r], &on(), T0);
    assert!(d.scale_up.is_none(), "no partial growth: {:?}", d.scale_up);
    let f = cond(write_for(&d, "train"), ConditionType::Failed);
    assert_eq!(f.status, ConditionStatus::True);
    assert_eq!(f.reason, "CapacityCannotFit");
    assert!(f.message.contains("only 6 of 8 pods fit"), "{}", f.message);
    let Verdict::CannotFit(why) = &d.requests[0].verdict else {
        panic!("{:?}", d.requests[0].verdict)
    };
    assert!(why.starts_with("only 6 of 8 pods fit"), "{why}");
}

#[test]
fn an_atomic_request_that_does_not_fit_now_is_retried_after_backoff_not_failed() {
    // Room for all eight under the max, but the group is backed off (a stockout): not now.
    let w = gpu_world(10);
    let r = request("train", CLASS_BEST_EFFORT_ATOMIC, 8, json!([]));
    let view = ClusterView::of(&w.nodes, &w.pods, &w.provider);
    let t = &w.template;
    let lookup = move |ns: &str, n: &str| (ns == "batch" && n == "worker").then_some(t);
    let input = RequestsInput {
        view: &view,
        template: &lookup,
        config: &ScaleUpConfig::default(),
        blocked: &|_, _| Some("in backoff after failed scale-up".into()),
        upcoming: None,
        regular_pending: None,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let d = Requests::default().decide(&[r], &input, &on(), T0, &mut rng, &mut Unlimited);
    assert!(d.scale_up.is_none());
    let p = cond(write_for(&d, "train"), ConditionType::Provisioned);
    assert_eq!(p.status, ConditionStatus::False);
    assert_eq!(p.reason, "CapacityIsNotFound");
    assert!(
        !write_for(&d, "train").set.contains(&ConditionType::Failed),
        "a backoff passes: retried, not failed"
    );
    assert!(matches!(d.requests[0].verdict, Verdict::NotFound(_)));
}

#[test]
fn an_atomic_request_that_fits_the_cluster_is_provisioned_without_a_scale_up() {
    let w = cpu_world();
    let r = request("job", CLASS_BEST_EFFORT_ATOMIC, 2, json!([]));
    let d = w.decide(&mut Requests::default(), &[r], &on(), T0);
    assert!(d.scale_up.is_none());
    let p = cond(write_for(&d, "job"), ConditionType::Provisioned);
    assert_eq!(p.reason, "CapacityIsFound");
    // Its pods hold n2's room from this loop on, as check-capacity's do.
    let held: Vec<&str> = d
        .booked
        .iter()
        .map(|p| p.node_name.unwrap().as_str())
        .collect();
    assert_eq!(held, ["n2", "n2"]);
}

fn buffer(spec: Value) -> CapacityBuffer {
    CapacityBuffer::from_value(&json!({
        "apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
        "metadata": {"name": "headroom", "namespace": "batch", "resourceVersion": "3"},
        "spec": spec,
    }))
    .unwrap()
}

#[test]
fn a_buffer_resolves_to_its_replicas_capped_by_its_limits() {
    let t = template("2", None);
    let find = |_: &str, n: &str| (n == "worker").then_some(&t);
    let none = |_: &str, _: &str, _: &str, _: &str| None;
    let r = resolve(
        &buffer(json!({"podTemplateRef": {"name": "worker"}, "replicas": 3})),
        &find,
        &none,
    )
    .unwrap();
    assert_eq!(r.pods.len(), 3);
    assert!(r.status.ready);
    assert_eq!(r.status.reason, "AttributesSetSuccessfully");
    assert_eq!(r.status.message, "ready");
    assert_eq!(r.status.replicas, Some(3));
    assert_eq!(r.status.pod_template.as_deref(), Some("worker"));
    assert_eq!(
        r.status.strategy.as_ref(),
        "buffer.x-k8s.io/active-capacity"
    );
    // Named, counted and annotated as upstream's pod injection makes them: scale-down may move
    // them (safe to evict).
    let names: Vec<&str> = r.pods.iter().map(|p| &*p.name).collect();
    assert_eq!(
        names,
        [
            "capacity-buffer-headroom-1",
            "capacity-buffer-headroom-2",
            "capacity-buffer-headroom-3"
        ]
    );
    assert_eq!(
        r.pods[0].owner.as_ref().unwrap().kind.as_str(),
        "CapacityBuffer"
    );
    assert_eq!(
        r.pods[0].annotation("podType"),
        Some("capacityBufferFakePod")
    );
    assert_eq!(
        r.pods[0].annotation("cluster-autoscaler.kubernetes.io/safe-to-evict"),
        Some("true")
    );
    let p = &r.status.provisioning;
    assert!(p.injected);
    assert_eq!((p.reason, p.message.as_str()), ("FakePodsInjected", ""));
    // 5 CPU of budget over 2 CPU pods: 2.
    let r = resolve(
        &buffer(
            json!({"podTemplateRef": {"name": "worker"}, "replicas": 3, "limits": {"cpu": "5"}}),
        ),
        &find,
        &none,
    )
    .unwrap();
    assert_eq!(r.status.replicas, Some(2));
    // Neither replicas nor limits with a template: not ready, and so not provisioning.
    let r = resolve(
        &buffer(json!({"podTemplateRef": {"name": "worker"}})),
        &find,
        &none,
    )
    .unwrap();
    assert!(!r.status.ready && r.pods.is_empty());
    assert_eq!(r.status.reason, "error");
    assert_eq!(
        r.status.message,
        "Buffer not ready for provisioning: couldn't get number of replicas for buffer: \
         replicas, percentage and limits are not defined"
    );
    let p = &r.status.provisioning;
    assert!(!p.injected);
    assert_eq!(
        (p.reason, p.message.as_str()),
        (
            "NotReadyForProvisioning",
            "CapacityBuffer is not ready for provisioning"
        )
    );
    // A missing template: the API's NotFound, as upstream's client words it.
    let r = resolve(
        &buffer(json!({"podTemplateRef": {"name": "gone"}, "replicas": 1})),
        &find,
        &none,
    )
    .unwrap();
    assert_eq!(
        r.status.message,
        "Buffer not ready for provisioning: capacity buffer client can't get pod template: \
         podtemplates \"gone\" not found"
    );
    // Another strategy is not ours.
    assert!(
        resolve(
            &buffer(json!({"podTemplateRef": {"name": "worker"}, "replicas": 1,
                       "provisioningStrategy": "someone.else/strategy"})),
            &find,
            &none
        )
        .is_none()
    );
}

#[test]
fn a_workload_buffer_takes_the_larger_of_replicas_and_its_percentage_rounded_up() {
    // Upstream v1beta1: the larger of `replicas` and `percentage` of the scalable's replicas
    // (rounded up), then capped by `limits`.
    let t = template("1", None).template.unwrap();
    let none = |_: &str, _: &str| None;
    let six = |_: &str, _: &str, _: &str, _: &str| {
        Some(Workload {
            template: t.clone(),
            replicas: Some(6),
        })
    };
    let scalable = json!({"apiGroup": "apps", "kind": "Deployment", "name": "web"});
    let count = |spec: Value| resolve(&buffer(spec), &none, &six).unwrap().status;
    // 15% of 6 is 0.9: one pod, not none.
    assert_eq!(
        count(json!({"scalableRef": scalable, "percentage": 15})).replicas,
        Some(1)
    );
    // 50% of 6 is 3, more than the 1 replica asked.
    assert_eq!(
        count(json!({"scalableRef": scalable, "percentage": 50, "replicas": 1})).replicas,
        Some(3)
    );
    // 4 replicas are more than 50% of 6.
    assert_eq!(
        count(json!({"scalableRef": scalable, "percentage": 50, "replicas": 4})).replicas,
        Some(4)
    );
    // Limits cap the larger: 200% of 6 is 12, 5 CPU hold 5 one-CPU pods.
    assert_eq!(
        count(json!({"scalableRef": scalable, "percentage": 200, "limits": {"cpu": "5"}})).replicas,
        Some(5)
    );
    let s = count(json!({"scalableRef": scalable}));
    assert!(!s.ready);
    assert_eq!(
        s.message,
        "Buffer not ready for provisioning: couldn't get number of replicas for buffer: \
         replicas, percentage and limits are not defined"
    );
}

#[test]
fn a_buffer_of_zero_replicas_is_empty_and_says_so() {
    let t = template("2", None);
    let find = |_: &str, n: &str| (n == "worker").then_some(&t);
    let none = |_: &str, _: &str, _: &str, _: &str| None;
    let r = resolve(
        &buffer(json!({"podTemplateRef": {"name": "worker"}, "replicas": 0})),
        &find,
        &none,
    )
    .unwrap();
    assert!(r.pods.is_empty(), "a buffer of 0 replicas is turned off");
    assert!(r.status.ready);
    assert_eq!(r.status.replicas, Some(0));
    let p = &r.status.provisioning;
    assert!(!p.injected);
    assert_eq!(
        (p.reason, p.message.as_str()),
        ("BufferIsEmpty", "CapacityBuffer has zero replicas")
    );
}

#[test]
fn a_template_buffer_with_only_limits_gets_what_fits_the_limits() {
    // The CRD admits `podTemplateRef` with `limits` alone: as many pods as the budget holds.
    let t = template("2", None);
    let find = |_: &str, n: &str| (n == "worker").then_some(&t);
    let none = |_: &str, _: &str, _: &str, _: &str| None;
    let r = resolve(
        &buffer(json!({"podTemplateRef": {"name": "worker"}, "limits": {"cpu": "5"}})),
        &find,
        &none,
    )
    .unwrap();
    assert!(r.status.ready, "{}", r.status.message);
    assert_eq!(r.status.replicas, Some(2));
    assert_eq!(r.pods.len(), 2);
    // A limit on a resource the pods do not request limits nothing: not ready.
    let r = resolve(
        &buffer(json!({"podTemplateRef": {"name": "worker"}, "limits": {"nvidia.com/gpu": "5"}})),
        &find,
        &none,
    )
    .unwrap();
    assert!(!r.status.ready);
    assert_eq!(
        r.status.message,
        "Buffer not ready for provisioning: couldn't get number of replicas for buffer: \
         resources in configured limits not found in the pod template"
    );
}

/// Upstream makes its buffer pods safe to evict and its drain skips them: scale-down may move
/// them (a node kept only by buffer pods can go when they fit elsewhere), and no eviction is
/// ever sent for them (they exist only in the loop's view).
#[test]
fn buffer_pods_may_be_moved_by_scale_down_and_are_never_evicted() {
    use crate::actions::{Action, scale_down_actions};
    use crate::scale_down::drain::{DrainContext, DrainOptions, PodDrain, classify_pod};
    use crate::scale_down::{NodeDeletion, ScaleDownPlan};
    use autoscaler_model::{DisruptionBudgets, Sym};

    let t = template("1", None);
    let find = |_: &str, n: &str| (n == "worker").then_some(&t);
    let none = |_: &str, _: &str, _: &str, _: &str| None;
    let r = resolve(
        &buffer(json!({"podTemplateRef": {"name": "worker"}, "replicas": 1})),
        &find,
        &none,
    )
    .unwrap();
    let mut placed = (*r.pods[0]).clone();
    placed.node_name = Some(Sym::new("n1"));
    let placed = Arc::new(placed);
    let opts = DrainOptions::default();
    let budgets = DisruptionBudgets::new(Vec::new());
    let ctx = DrainContext {
        opts: &opts,
        budgets: &budgets,
        controllers: &NoControllerLookup,
        now_ms: T0,
    };
    assert_eq!(classify_pod(&placed, false, &ctx), PodDrain::Move);
    let real = PodBuilder::new("real", 100, GI)
        .owner("ReplicaSet", "web")
        .arc();
    let plan = ScaleDownPlan {
        deletions: vec![NodeDeletion {
            node: Sym::new("n1"),
            group_index: 0,
            group: "g".into(),
            empty: false,
            evict: vec![placed, real],
            destinations: Vec::new(),
            grace_period_sec: 600,
            sequential_evictions: false,
        }],
        ..Default::default()
    };
    let actions = scale_down_actions(&plan, T0);
    let Some(Action::DrainAndDelete { evict, .. }) = actions.last() else {
        panic!("{actions:?}")
    };
    let names: Vec<&str> = evict.iter().map(|e| &*e.pod.name).collect();
    assert_eq!(names, ["real"]);
}

#[test]
fn buffer_pods_drive_scale_up_and_yield_to_real_pods() {
    // n2 has 4 CPU free; a buffer of two 2-CPU pods fills it; a real 2-CPU pod arrives.
    let w = cpu_world();
    let t = template("2", None);
    let find = |_: &str, n: &str| (n == "worker").then_some(&t);
    let none = |_: &str, _: &str, _: &str, _: &str| None;
    let r = resolve(
        &buffer(json!({"podTemplateRef": {"name": "worker"}, "replicas": 2})),
        &find,
        &none,
    )
    .unwrap();
    let real = PodBuilder::new("real", 2000, GI)
        .owner("ReplicaSet", "web")
        .unschedulable()
        .arc();
    let mut pods = w.pods.clone();
    pods.push(real.clone());
    pods.extend(r.pods.iter().cloned());
    let view = ClusterView::of(&w.nodes, &pods, &w.provider);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let up = decide_scale_up(
        &view,
        &ScaleUpConfig::default(),
        T0,
        &|_, _| None,
        &mut rng,
        &mut Unlimited,
    );
    // The real pod is placed first; one buffer pod is left over and grows the group by one.
    assert!(up.fit_existing.iter().any(|p| Arc::ptr_eq(p, &real)));
    assert_eq!(up.result.total_nodes(), 1, "{:?}", up.result);
    assert_eq!(&*up.result.triggered[0].name, "capacity-buffer-headroom-2");
}

mod properties {
    //! The safety invariants with requests in random worlds: an atomic scale-up is whole or
    //! nothing and within every group's max; check-capacity never grows anything; a booking
    //! never holds its room past the booking time; the booked pods fit where they are placed.

    use super::*;
    use autoscaler_model::CloudProvider;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    struct Case {
        /// Per existing node: CPU millicores free.
        free: Vec<i64>,
        /// Group max size above its current size.
        headroom: usize,
        /// Per request: class (true: atomic), pod count, pod CPU millicores, provisioned.
        requests: Vec<(bool, u32, i64, Option<i64>)>,
        /// Decision time after T0, in minutes.
        minutes: i64,
    }

    fn arb_case() -> impl Strategy<Value = Case> {
        (
            prop::collection::vec(0i64..=4000, 0..5),
            0usize..8,
            prop::collection::vec(
                (
                    any::<bool>(),
                    1u32..10,
                    prop::sample::select(vec![500i64, 1000, 2000, 3000, 5000]),
                    prop::option::of(0i64..30),
                ),
                1..5,
            ),
            0i64..40,
        )
            .prop_map(|(free, headroom, requests, minutes)| Case {
                free,
                headroom,
                requests,
                minutes,
            })
    }

    fn world(case: &Case) -> World {
        let nodes: Vec<Arc<Node>> = (0..case.free.len())
            .map(|i| node(&format!("n{i}"), 4000, 0))
            .collect();
        let pods = case
            .free
            .iter()
            .enumerate()
            .filter(|(_, f)| **f < 4000)
            .map(|(i, f)| {
                PodBuilder::new(&format!("used-{i}"), 4000 - f, GI)
                    .owner("ReplicaSet", "web")
                    .node_name(&format!("n{i}"))
                    .arc()
            })
            .collect();
        let refs: Vec<&Arc<Node>> = nodes.iter().collect();
        let g = group(
            "ng",
            &refs,
            0,
            nodes.len() + case.headroom,
            node("tmpl", 4000, 0),
        );
        World {
            nodes,
            pods,
            provider: StaticProvider::new(vec![g]),
            template: template("1", None),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: autoscaler_model::testing::fuzz_cases(200),
            ..ProptestConfig::default()
        })]

        #[test]
        fn requests_keep_the_safety_invariants(case in arb_case()) {
            let mut w = world(&case);
            let now = T0 + case.minutes * MIN;
            let mut requests = Vec::new();
            for (i, (atomic, count, cpu, provisioned)) in case.requests.iter().enumerate() {
                let class = if *atomic { CLASS_BEST_EFFORT_ATOMIC } else { CLASS_CHECK_CAPACITY };
                let conditions = match provisioned {
                    Some(m) => json!([condition("Provisioned", "True", T0 + m * MIN)]),
                    None => json!([]),
                };
                let mut r = request(&format!("r{i}"), class, *count, conditions);
                r.pod_sets[0].template = format!("t{i}").into();
                requests.push((r, *cpu));
            }
            // One template per request, with the request's pod size.
            let templates: Vec<PodTemplate> = requests
                .iter()
                .map(|(_, cpu)| template(&format!("{cpu}m"), None))
                .collect();
            let reqs: Vec<ProvisioningRequest> = requests.iter().map(|(r, _)| r.clone()).collect();
            let view = ClusterView::of(&w.nodes, &w.pods, &w.provider);
            let lookup = |_: &str, n: &str| {
                n.strip_prefix('t')
                    .and_then(|i| i.parse::<usize>().ok())
                    .and_then(|i| templates.get(i))
            };
            let input = RequestsInput {
                view: &view,
                template: &lookup,
                config: &ScaleUpConfig::default(),
                blocked: &|_, _| None,
                upcoming: None,
                regular_pending: None,
            };
            let mut rng = ChaCha8Rng::seed_from_u64(1);
            let d = Requests::default().decide(&reqs, &input, &on(), now, &mut rng, &mut Unlimited);

            // At most one request is taken up, and only it may carry a scale-up.
            let taken = d.writes.iter().filter(|w| w.set.contains(&ConditionType::Accepted)).count();
            prop_assert!(taken <= 1);
            if let Some(up) = &d.scale_up {
                let write = d.writes.iter().find(|w| w.set.contains(&ConditionType::Accepted)).unwrap();
                let r = reqs.iter().find(|r| r.name == write.name).unwrap();
                prop_assert_eq!(&*r.class, CLASS_BEST_EFFORT_ATOMIC, "check-capacity never scales up");
                // Whole: every pod of the request is helped.
                let helped = up.fit_existing.len() + up.result.triggered.len();
                prop_assert_eq!(helped as u64, r.pod_count());
                prop_assert!(up.result.no_scale_up.is_empty());
                for inc in &up.result.increases {
                    let g = &w.provider.node_groups()[inc.index];
                    prop_assert!(inc.new_target <= g.max_size(), "{:?} beyond max {}", inc, g.max_size());
                }
                // Provisioned waits for the nodes: False, being provisioned.
                let c = write.conditions.iter().find(|c| c.type_ == ConditionType::Provisioned).unwrap();
                prop_assert_eq!(c.status, ConditionStatus::False);
                prop_assert_eq!(&*c.reason, "CapacityIsBeingProvisioned");
            }
            // A request whose capacity was not found (or never fits) this loop grew nothing.
            for wr in &d.writes {
                let p = wr.conditions.iter().find(|c| c.type_ == ConditionType::Provisioned);
                let failed = wr.set.contains(&ConditionType::Failed);
                if failed || (wr.set.contains(&ConditionType::Provisioned)
                    && p.is_some_and(|c| c.status == ConditionStatus::False
                        && &*c.reason == "CapacityIsNotFound"))
                {
                    prop_assert!(d.scale_up.is_none());
                }
            }
            // No booking outlives the booking time: a request provisioned more than 10 minutes
            // ago holds no pod and gets BookingExpired.
            for (r, _) in &requests {
                let p = r.condition(ConditionType::Provisioned);
                let expired = p.is_some_and(|c| c.last_transition_ms + BOOKING_MS < now);
                let holds = d.booked.iter().any(|b| {
                    b.annotation(CONSUME_ANNOTATION) == Some(&*r.name)
                });
                if expired {
                    prop_assert!(!holds, "{} holds room past its booking", r.name);
                    let wr = d.writes.iter().find(|w| w.name == r.name).unwrap();
                    prop_assert!(wr.set.contains(&ConditionType::BookingExpired));
                }
            }
            // The booked pods fit together where they are placed: the view with them builds
            // without a refused pod and no node is over its allocatable CPU.
            w.pods = d.pods_for_loop(&w.pods);
            let mut warnings = Vec::new();
            let view = ClusterView::of(&w.nodes, &w.pods, &w.provider);
            let snapshot = crate::autoscaler::build_snapshot(&view, &mut warnings);
            prop_assert!(warnings.is_empty(), "{:?}", warnings);
            for (_, info) in snapshot.nodes() {
                prop_assert!(info.requested.cpu <= info.node.allocatable.cpu);
            }
        }
    }
}

/// Loops of the whole autoscaler on the GPU world (empty, max 20) with an ordinary pending
/// pod and an atomic request for `count` pods, until `loops`: per loop, the increases. `timed`:
/// through the live shell's entry (phases timed), else the simulator's.
fn alternating_loops(count: u32, loops: usize, timed: bool) -> Vec<Vec<(String, usize)>> {
    let w = gpu_world(20);
    let regular = PodBuilder::new("web", 4000, GI)
        .owner("ReplicaSet", "web")
        .resource("nvidia.com/gpu", 1)
        .unschedulable()
        .arc();
    let pods = vec![regular];
    let mut objects = autoscaler_model::CapacityObjects {
        requests: vec![request("train", CLASS_BEST_EFFORT_ATOMIC, count, json!([]))],
        ..Default::default()
    };
    objects
        .templates
        .insert(("batch".into(), "worker".into()), w.template.clone());
    let mut options = AutoscalerOptions::default();
    options.capacity.requests = on();
    let mut a = Autoscaler::new(options);
    let mut out = Vec::new();
    for i in 0..loops {
        let view = ClusterView::of(&w.nodes, &pods, &w.provider);
        let now = T0 + i as i64 * 10_000;
        let o = if timed {
            let o = a.run_once(
                LoopInput::new(&view, now)
                    .capacity(Some(&objects))
                    .timed(&StoppedClock),
            );
            assert!(!o.phases.is_empty(), "the phases are timed");
            o
        } else {
            a.run_once(LoopInput::new(&view, now).capacity(Some(&objects)))
        };
        let c = o.capacity.as_ref().expect("a capacity decision");
        // The loop's scale-up is the request's whenever it took its turn.
        if c.requests.took_turn {
            let theirs: Vec<usize> = c
                .requests
                .scale_up
                .iter()
                .flat_map(|d| d.result.increases.iter().map(|i| i.delta))
                .collect();
            let ours: Vec<usize> = o
                .scale_up
                .result
                .increases
                .iter()
                .map(|i| i.delta)
                .collect();
            assert_eq!(theirs, ours);
            // ... carried out as one all-or-none action, never as separate increases.
            let grows: Vec<&crate::actions::Action> = o
                .actions
                .iter()
                .filter(|a| !a.increases().is_empty())
                .collect();
            if ours.is_empty() {
                assert!(grows.is_empty(), "{grows:?}");
            } else {
                let [crate::actions::Action::AtomicIncreaseSize { request, increases }] =
                    grows.as_slice()
                else {
                    panic!("not one atomic increase: {grows:?}");
                };
                assert_eq!(request, "batch/train");
                let deltas: Vec<usize> = increases.iter().map(|i| i.delta).collect();
                assert_eq!(deltas, ours);
            }
        } else {
            assert!(
                !(o.actions.iter())
                    .any(|a| matches!(a, crate::actions::Action::AtomicIncreaseSize { .. })),
                "{:?}",
                o.actions
            );
        }
        out.push(
            o.scale_up
                .result
                .increases
                .iter()
                .map(|i| (i.group.as_str().to_string(), i.delta))
                .collect(),
        );
        // Carry the request's writes over, as the shell's status writes would.
        for wr in &c.requests.writes {
            objects.requests[0].conditions = wr.conditions.clone();
        }
    }
    out
}

#[test]
fn requests_and_ordinary_pods_take_turns_for_the_loops_scale_up() {
    let ups = alternating_loops(8, 2, false);
    // Loop 1 is the ordinary pod's (upstream starts there): one node for it, the request waits.
    assert_eq!(ups[0], [("gpu".to_string(), 1)]);
    // Loop 2 is the request's: exactly its eight, nothing for anyone else.
    assert_eq!(ups[1], [("gpu".to_string(), 8)]);
}

/// A phase clock that never moves.
struct StoppedClock;

impl crate::autoscaler::PhaseClock for StoppedClock {
    fn elapsed(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
}

/// The live shell's timed entry decides the requests exactly as the untimed one, loop by loop;
/// without capacity objects it decides none.
#[test]
fn the_timed_loop_decides_capacity_as_the_untimed_one() {
    assert_eq!(
        alternating_loops(8, 3, true),
        alternating_loops(8, 3, false)
    );
    let w = gpu_world(20);
    let mut options = AutoscalerOptions::default();
    options.capacity.requests = on();
    let o = Autoscaler::new(options).run_once(
        LoopInput::new(&ClusterView::of(&w.nodes, &[], &w.provider), T0).timed(&StoppedClock),
    );
    assert!(o.capacity.is_none());
}

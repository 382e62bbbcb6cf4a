//! Kubernetes Events about what the autoscaler decided and did, with upstream's reasons, on the
//! objects upstream puts them on: pods (`TriggeredScaleUp`, `NotTriggerScaleUp`, `ScaleDown`),
//! nodes (`ScaleDown`, `ScaleDownFailed`) and the status ConfigMap for cluster-level events
//! (`ScaledUpGroup`, `ScaleDown`, `ScaleDownEmpty`, and every event of the core's cluster state:
//! `ScaleUpTimedOut`, `ScaleUpFailed`, `FailedToScaleUpGroup`, `DeleteUnregistered`,
//! `ClusterUnhealthy`, `FixNodeGroupSize`).
//!
//! [`events_of`] decides nothing new: it only turns one loop's outcome into event specs (pure).
//! [`RateLimiter`] (pure, the caller passes the time) keeps a thousand pending pods from
//! flooding the API: one event per (object, reason) per interval (5 minutes by default, as
//! upstream throttles `NotTriggerScaleUp`), and a global token bucket (burst 25, 5 per second
//! by default); what it drops is counted. [`EventSink`] publishes through kube's
//! [`Recorder`] (events.k8s.io/v1, reporter `cluster-autoscaler`). A failed publish is logged
//! and counted, never fatal.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use autoscaler_core::autoscaler::{ClusterView, LoopOutcome};
use autoscaler_core::pod::Pod;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Reason: a pod caused a scale-up.
pub const TRIGGERED_SCALE_UP: &str = "TriggeredScaleUp";
/// Reason: a pod caused no scale-up (with why).
pub const NOT_TRIGGER_SCALE_UP: &str = "NotTriggerScaleUp";
/// Reason: a node is removed, or a pod evicted for that.
pub const SCALE_DOWN: &str = "ScaleDown";
/// Reason: removing a node failed.
pub const SCALE_DOWN_FAILED: &str = "ScaleDownFailed";
/// Reason: an empty node is removed (on the status ConfigMap).
pub const SCALE_DOWN_EMPTY: &str = "ScaleDownEmpty";

/// The reporting controller of every event.
pub const REPORTER: &str = "cluster-autoscaler";

/// What an event is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// A pod.
    Pod {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// UID (empty if unknown).
        uid: String,
    },
    /// A node.
    Node {
        /// Name.
        name: String,
        /// UID (empty if unknown).
        uid: String,
    },
    /// The status ConfigMap (cluster-level events).
    StatusConfigMap,
}

impl Target {
    fn pod(p: &Pod) -> Target {
        Target::Pod {
            namespace: p.namespace.to_string(),
            name: p.name.to_string(),
            uid: p.uid.to_string(),
        }
    }
}

/// One event to publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventSpec {
    /// The object.
    pub target: Target,
    /// Upstream's reason.
    pub reason: &'static str,
    /// The message (truncated to the API's 1 kB limit when published).
    pub message: String,
    /// `Warning` rather than `Normal`.
    pub warning: bool,
}

impl EventSpec {
    /// `ScaleDownFailed` on a node, for the controller when a removal fails.
    pub fn scale_down_failed(node: &str, uid: &str, message: String) -> EventSpec {
        EventSpec {
            target: Target::Node {
                name: node.to_string(),
                uid: uid.to_string(),
            },
            reason: SCALE_DOWN_FAILED,
            message,
            warning: true,
        }
    }
}

/// The events of one loop: `TriggeredScaleUp` on the pods a scale-up is for,
/// `NotTriggerScaleUp` on pods no group helps (with each group's reason), `ScaleDown` on nodes
/// being removed and the pods evicted from them, and on the status ConfigMap the core's events,
/// `ScaleDownEmpty` / `ScaleDown` per removed node. `view` gives node UIDs.
pub fn events_of(view: &ClusterView<'_>, outcome: &LoopOutcome) -> Vec<EventSpec> {
    let mut out = Vec::new();
    let up = &outcome.scale_up.result;
    if !up.increases.is_empty() {
        let groups = view.provider.node_groups();
        let summary = up
            .increases
            .iter()
            .map(|i| {
                let max = groups.get(i.index).map_or(0, |g| g.max_size);
                format!(
                    "{{{} {}->{} (max: {max})}}",
                    i.group,
                    i.new_target.saturating_sub(i.delta),
                    i.new_target
                )
            })
            .collect::<Vec<_>>()
            .join(" ");
        for p in &up.triggered {
            out.push(EventSpec {
                target: Target::pod(p),
                reason: TRIGGERED_SCALE_UP,
                message: format!("pod triggered scale-up: [{summary}]"),
                warning: false,
            });
        }
    }
    for n in &up.no_scale_up {
        let reasons = n
            .reasons
            .iter()
            .map(|(g, why)| format!("{g}: {why}"))
            .collect::<Vec<_>>()
            .join("; ");
        let message = if reasons.is_empty() {
            "pod didn't trigger scale-up: no node group can be grown".to_string()
        } else {
            format!("pod didn't trigger scale-up: {reasons}")
        };
        out.push(EventSpec {
            target: Target::pod(&n.pod),
            reason: NOT_TRIGGER_SCALE_UP,
            message,
            warning: false,
        });
    }
    for e in &outcome.events {
        out.push(EventSpec {
            target: Target::StatusConfigMap,
            reason: e.reason,
            message: e.message.clone(),
            warning: e.warning,
        });
    }
    for d in &outcome.scale_down.deletions {
        let uid = view
            .nodes
            .iter()
            .find(|n| n.name == d.node)
            .map(|n| n.uid.to_string())
            .unwrap_or_default();
        out.push(EventSpec {
            target: Target::Node {
                name: d.node.to_string(),
                uid,
            },
            reason: SCALE_DOWN,
            message: "marked the node as toBeDeleted/unschedulable".into(),
            warning: false,
        });
        let (reason, message) = if d.empty {
            (
                SCALE_DOWN_EMPTY,
                format!("Scale-down: removing empty node {}", d.node),
            )
        } else {
            (
                SCALE_DOWN,
                format!(
                    "Scale-down: removing node {}, pods to reschedule: {}",
                    d.node,
                    d.evict
                        .iter()
                        .map(|p| p.key())
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            )
        };
        out.push(EventSpec {
            target: Target::StatusConfigMap,
            reason,
            message,
            warning: false,
        });
        for p in &d.evict {
            out.push(EventSpec {
                target: Target::pod(p),
                reason: SCALE_DOWN,
                message: format!("deleting pod for node scale down (node {})", d.node),
                warning: false,
            });
        }
    }
    out
}

/// Rate-limit settings.
#[derive(Clone, Debug, PartialEq)]
pub struct RateLimits {
    /// At most one event per (object, reason) per this interval.
    pub per_object_interval: Duration,
    /// Tokens of the global bucket (events that may go at once).
    pub burst: u32,
    /// Tokens added per second.
    pub per_second: f64,
}

impl Default for RateLimits {
    /// One per (object, reason) per 5 minutes; burst 25, then 5 per second.
    fn default() -> Self {
        RateLimits {
            per_object_interval: Duration::from_secs(300),
            burst: 25,
            per_second: 5.0,
        }
    }
}

/// Decides which events go: pure, the caller passes the time (milliseconds, any epoch).
#[derive(Clone, Debug)]
pub struct RateLimiter {
    limits: RateLimits,
    tokens: f64,
    last_refill_ms: Option<i64>,
    /// (object, reason) to when its last event went.
    last_sent: HashMap<(Target, &'static str), i64>,
    last_prune_ms: i64,
    dropped: u64,
}

impl RateLimiter {
    /// A full bucket.
    pub fn new(limits: RateLimits) -> RateLimiter {
        RateLimiter {
            tokens: f64::from(limits.burst),
            limits,
            last_refill_ms: None,
            last_sent: HashMap::new(),
            last_prune_ms: i64::MIN,
            dropped: 0,
        }
    }

    fn interval_ms(&self) -> i64 {
        i64::try_from(self.limits.per_object_interval.as_millis()).unwrap_or(i64::MAX)
    }

    /// Whether `event` may be published at `now_ms` (consuming a token if so); counts a drop
    /// otherwise.
    pub fn allow(&mut self, event: &EventSpec, now_ms: i64) -> bool {
        let interval = self.interval_ms();
        // Forget keys past their interval, at most once per interval (bounded memory).
        if now_ms.saturating_sub(self.last_prune_ms) >= interval {
            self.last_sent
                .retain(|_, at| now_ms.saturating_sub(*at) < interval);
            self.last_prune_ms = now_ms;
        }
        let elapsed = self
            .last_refill_ms
            .map_or(0, |t| now_ms.saturating_sub(t).max(0));
        self.last_refill_ms = Some(now_ms);
        self.tokens = (self.tokens + elapsed as f64 / 1000.0 * self.limits.per_second)
            .min(f64::from(self.limits.burst));

        let key = (event.target.clone(), event.reason);
        if self
            .last_sent
            .get(&key)
            .is_some_and(|at| now_ms.saturating_sub(*at) < interval)
            || self.tokens < 1.0
        {
            self.dropped += 1;
            return false;
        }
        self.tokens -= 1.0;
        self.last_sent.insert(key, now_ms);
        true
    }

    /// Events dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// What one [`EventSink::publish`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PublishStats {
    /// Published.
    pub published: usize,
    /// Dropped by the rate limiter.
    pub dropped: usize,
    /// Rejected by the API (logged).
    pub failed: usize,
}

/// Publishes event specs through kube's [`Recorder`], rate-limited.
pub struct EventSink {
    recorder: Recorder,
    limiter: Mutex<RateLimiter>,
    status_ref: Mutex<ObjectReference>,
    failed: AtomicU64,
}

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventSink").finish_non_exhaustive()
    }
}

/// The API's limit on an event's note.
const MAX_NOTE_BYTES: usize = 1024;

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub(3);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

impl EventSink {
    /// A sink reporting as `cluster-autoscaler` (instance `identity`), posting cluster-level
    /// events on the ConfigMap `namespace/status_name`.
    pub fn new(
        client: kube::Client,
        identity: &str,
        namespace: &str,
        status_name: &str,
        limits: RateLimits,
    ) -> EventSink {
        let reporter = Reporter {
            controller: REPORTER.into(),
            instance: Some(identity.to_string()),
        };
        EventSink {
            recorder: Recorder::new(client, reporter),
            limiter: Mutex::new(RateLimiter::new(limits)),
            status_ref: Mutex::new(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("ConfigMap".into()),
                namespace: Some(namespace.to_string()),
                name: Some(status_name.to_string()),
                ..ObjectReference::default()
            }),
            failed: AtomicU64::new(0),
        }
    }

    /// Uses the written status ConfigMap (with its UID) as the object of cluster-level events.
    pub fn set_status_object(&self, cm: &ConfigMap) {
        let mut r = self.status_ref.lock().unwrap_or_else(|e| e.into_inner());
        r.uid = cm.metadata.uid.clone();
        r.resource_version = cm.metadata.resource_version.clone();
    }

    /// Events dropped by the rate limiter so far.
    pub fn dropped(&self) -> u64 {
        self.limiter
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .dropped()
    }

    /// Events the API rejected so far.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    fn reference(&self, target: &Target) -> ObjectReference {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        match target {
            Target::Pod {
                namespace,
                name,
                uid,
            } => ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                namespace: Some(namespace.clone()),
                name: Some(name.clone()),
                uid: some(uid),
                ..ObjectReference::default()
            },
            Target::Node { name, uid } => ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(name.clone()),
                uid: some(uid),
                ..ObjectReference::default()
            },
            Target::StatusConfigMap => self
                .status_ref
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }

    /// Publishes `events` that the rate limiter lets through at `now_ms`, one after another.
    pub async fn publish(&self, events: &[EventSpec], now_ms: i64) -> PublishStats {
        let mut stats = PublishStats::default();
        let allowed: Vec<&EventSpec> = {
            let mut limiter = self.limiter.lock().unwrap_or_else(|e| e.into_inner());
            events.iter().filter(|e| limiter.allow(e, now_ms)).collect()
        };
        stats.dropped = events.len() - allowed.len();
        for e in allowed {
            let ev = Event {
                type_: if e.warning {
                    EventType::Warning
                } else {
                    EventType::Normal
                },
                reason: e.reason.to_string(),
                note: Some(truncate(&e.message, MAX_NOTE_BYTES)),
                action: e.reason.to_string(),
                secondary: None,
            };
            match self.recorder.publish(&ev, &self.reference(&e.target)).await {
                Ok(()) => stats.published += 1,
                Err(err) => {
                    stats.failed += 1;
                    self.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(reason = e.reason, error = %err, "event not published");
                }
            }
        }
        if stats.dropped > 0 {
            tracing::debug!(dropped = stats.dropped, "events rate-limited");
        }
        stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_cluster::Cluster;

    use autoscaler_core::autoscaler::{Autoscaler, AutoscalerOptions};
    use autoscaler_core::cluster_state::SCALED_UP_GROUP;
    use autoscaler_core::drain::NoControllerLookup;
    use autoscaler_core::estimator::Unlimited;

    use autoscaler_core::scale_down::InFlight;
    use autoscaler_core::testing::{GI, PodBuilder};
    use http::{Method, Request, Response, StatusCode};
    use kube::client::Body;
    use serde_json::{Value, json};

    fn pod_event(name: &str, reason: &'static str) -> EventSpec {
        EventSpec {
            target: Target::Pod {
                namespace: "default".into(),
                name: name.into(),
                uid: String::new(),
            },
            reason,
            message: "m".into(),
            warning: false,
        }
    }

    #[test]
    fn one_event_per_object_and_reason_per_interval() {
        let mut l = RateLimiter::new(RateLimits::default());
        let e = pod_event("p", NOT_TRIGGER_SCALE_UP);
        assert!(l.allow(&e, 0));
        assert!(!l.allow(&e, 10_000), "same object and reason 10s later");
        assert!(l.allow(&pod_event("p", TRIGGERED_SCALE_UP), 10_000));
        assert!(l.allow(&pod_event("q", NOT_TRIGGER_SCALE_UP), 10_000));
        assert!(!l.allow(&e, 299_999));
        assert!(l.allow(&e, 300_000), "after the interval");
        assert_eq!(l.dropped(), 2);
    }

    #[test]
    fn a_thousand_pending_pods_get_a_burst_then_the_refill_rate() {
        let mut l = RateLimiter::new(RateLimits::default());
        let pods: Vec<EventSpec> = (0..1000)
            .map(|i| pod_event(&format!("p{i}"), NOT_TRIGGER_SCALE_UP))
            .collect();
        let sent = pods.iter().filter(|e| l.allow(e, 0)).count();
        assert_eq!(sent, 25, "the burst");
        assert_eq!(l.dropped(), 975);
        // 10 seconds later: 50 new tokens, capped at the burst of 25.
        let sent = pods.iter().filter(|e| l.allow(e, 10_000)).count();
        assert_eq!(sent, 25);
        // 1 second later: 5 tokens.
        let sent = pods.iter().filter(|e| l.allow(e, 11_000)).count();
        assert_eq!(sent, 5);
        // Time going backwards refills nothing.
        assert_eq!(pods.iter().filter(|e| l.allow(e, 5_000)).count(), 0);
    }

    #[test]
    fn the_key_memory_is_pruned() {
        let mut l = RateLimiter::new(RateLimits {
            burst: 1000,
            ..RateLimits::default()
        });
        for i in 0..100 {
            assert!(l.allow(&pod_event(&format!("p{i}"), SCALE_DOWN), 0));
        }
        assert!(l.allow(&pod_event("x", SCALE_DOWN), 300_000));
        assert_eq!(l.last_sent.len(), 1);
    }

    #[test]
    fn a_loop_gives_pod_and_configmap_events_with_upstream_reasons() {
        let mut c = Cluster::new(3, 3);
        // Too big for any node: never helped.
        c.pods.push(
            PodBuilder::new("huge", 64_000, GI)
                .owner("ReplicaSet", "c")
                .unschedulable()
                .arc(),
        );
        let view = c.view();
        let outcome = Autoscaler::new(AutoscalerOptions::default()).run_once(
            &view,
            &NoControllerLookup,
            InFlight::default(),
            0,
            &mut Unlimited,
        );
        let events = events_of(&view, &outcome);
        let triggered: Vec<&EventSpec> = events
            .iter()
            .filter(|e| e.reason == TRIGGERED_SCALE_UP)
            .collect();
        assert_eq!(triggered.len(), outcome.scale_up.result.triggered.len());
        assert!(!triggered.is_empty());
        assert_eq!(
            triggered[0].message,
            "pod triggered scale-up: [{ng 2->3 (max: 3)}]"
        );
        let not: Vec<&EventSpec> = events
            .iter()
            .filter(|e| e.reason == NOT_TRIGGER_SCALE_UP)
            .collect();
        assert!(
            not.iter().any(|e| matches!(&e.target,
                Target::Pod { name, .. } if name == "huge")
                && e.message.starts_with("pod didn't trigger scale-up: ng: ")),
            "{not:?}"
        );
        assert!(events.iter().any(|e| e.reason == SCALED_UP_GROUP
            && e.target == Target::StatusConfigMap
            && e.message.contains("ng")));
    }

    type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

    #[tokio::test]
    async fn an_event_is_posted_to_the_events_api_with_its_fields() {
        let (svc, mut handle): (_, Handle) = tower_test::mock::pair();
        let client = kube::Client::new(svc, "default");
        let server = tokio::spawn(async move {
            let (req, send) = handle.next_request().await.expect("POST");
            assert_eq!(req.method(), Method::POST);
            assert_eq!(
                req.uri().to_string(),
                "/apis/events.k8s.io/v1/namespaces/web/events?"
            );
            let bytes = req.into_body().collect_bytes().await.expect("body");
            let mut body: Value = serde_json::from_slice(&bytes).expect("JSON");
            let name = body["metadata"]["name"].as_str().unwrap_or("").to_string();
            assert!(name.starts_with("p0."), "{name}");
            assert!(body["eventTime"].is_string());
            let obj = body.as_object_mut().expect("object");
            obj.remove("eventTime");
            obj.get_mut("metadata")
                .and_then(|m| m.as_object_mut())
                .map(|m| m.remove("name"));
            assert_eq!(
                body,
                json!({
                    "apiVersion": "events.k8s.io/v1", "kind": "Event",
                    "metadata": {"namespace": "web"},
                    "action": "NotTriggerScaleUp", "reason": "NotTriggerScaleUp",
                    "note": "pod didn't trigger scale-up: ng: Insufficient cpu",
                    "type": "Normal",
                    "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "web",
                        "name": "p0", "uid": "u-1"},
                    "reportingController": "cluster-autoscaler",
                    "reportingInstance": "ca-0"
                })
            );
            send.send_response(
                Response::builder()
                    .status(StatusCode::CREATED)
                    .body(Body::from(bytes.to_vec()))
                    .expect("response"),
            );
        });
        let sink = EventSink::new(
            client,
            "ca-0",
            "kube-system",
            "cluster-autoscaler-status",
            RateLimits::default(),
        );
        let e = EventSpec {
            target: Target::Pod {
                namespace: "web".into(),
                name: "p0".into(),
                uid: "u-1".into(),
            },
            reason: NOT_TRIGGER_SCALE_UP,
            message: "pod didn't trigger scale-up: ng: Insufficient cpu".into(),
            warning: false,
        };
        // The duplicate is dropped by the limiter: one request only.
        let stats = sink.publish(&[e.clone(), e], 0).await;
        assert_eq!(
            stats,
            PublishStats {
                published: 1,
                dropped: 1,
                failed: 0
            }
        );
        assert_eq!(sink.dropped(), 1);
        server.await.expect("mock server");
    }

    #[test]
    fn long_messages_are_truncated_on_a_char_boundary() {
        let s = "é".repeat(600);
        let t = truncate(&s, MAX_NOTE_BYTES);
        assert!(t.len() <= MAX_NOTE_BYTES);
        assert!(t.ends_with("..."));
    }
}

//! Kubernetes Events about what the autoscaler decided and did, with upstream's reasons, on the
//! objects upstream puts them on: pods (`TriggeredScaleUp`, `NotTriggerScaleUp`, `ScaleDown`,
//! `ScaleDownFailed`, and upstream's reason-less event on a pod that consumes a
//! ProvisioningRequest), nodes (`ScaleDown`, `ScaleDownFailed`, `ClusterAutoscalerCleanup`) and
//! the status ConfigMap for cluster-level events (`ScaledUpGroup`, `ScaleDown`,
//! `ScaleDownEmpty`, `DeleteUnregisteredFailed`, and every event of the core's cluster state:
//! `ScaleUpTimedOut`, `ScaleUpFailed`, `FailedToScaleUpGroup`, `DeleteUnregistered`,
//! `ClusterUnhealthy`, `FixNodeGroupSize`), and OpenShift's `ClusterAutoscaler` for a refused
//! change of it (`ConfigRejected`, a reason of ours: upstream never reads that resource).
//!
//! [`events_of`] decides nothing new: it only turns one loop's outcome into event specs (pure).
//! The [`Correlator`] (pure, see its module) aggregates them as client-go's recorder does
//! (identical ones counted, similar ones combined, a per-object spam filter) and [`EventSink`]
//! writes the result as core/v1 Events, the kind upstream's recorder writes. What is dropped is
//! counted; a failed write is logged and counted, never fatal.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use autoscaler_core::GroupReasons;
use autoscaler_core::Waiting;
use autoscaler_core::is_buffer_pod;
use autoscaler_core::{ClusterView, LoopOutcome};
use autoscaler_model::Pod;
use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

use crate::correlator::{Correlator, CorrelatorOptions, Decision, DropReason, Publish};

/// Reason: a pod caused a scale-up.
pub const TRIGGERED_SCALE_UP: &str = "TriggeredScaleUp";
/// Reason: a pod caused no scale-up (with why).
pub const NOT_TRIGGER_SCALE_UP: &str = "NotTriggerScaleUp";
/// Reason of the event on a pending pod left out of the scale-up because it consumes a
/// ProvisioningRequest: empty, as upstream's pods filter records it.
pub const CONSUMES_PROVISIONING_REQUEST: &str = "";
/// Reason: a node is removed, or a pod evicted for that.
pub const SCALE_DOWN: &str = "ScaleDown";
/// Reason: removing a node failed.
pub const SCALE_DOWN_FAILED: &str = "ScaleDownFailed";
/// Reason: an empty node is removed (on the status ConfigMap).
pub const SCALE_DOWN_EMPTY: &str = "ScaleDownEmpty";
/// Reason: instances that never registered could not be deleted (on the status ConfigMap).
pub const DELETE_UNREGISTERED_FAILED: &str = "DeleteUnregisteredFailed";
/// Reason: pending pods need nodes but `--max-nodes-total` is reached (on the status ConfigMap).
pub const MAX_NODES_TOTAL_REACHED: &str = "MaxNodesTotalReached";
/// Reason: a taint left by a previous instance was removed at start (on the node).
pub const CLUSTER_AUTOSCALER_CLEANUP: &str = "ClusterAutoscalerCleanup";

/// Reason: a node is not removed, with the reason class and why (on the node; ours, off by
/// default: upstream has no event per unremovable node). See [`NoScaleDownEvents`].
pub const NO_SCALE_DOWN: &str = "NoScaleDown";

/// Reason: a change of OpenShift's `ClusterAutoscaler` resource was refused (on that object).
/// Upstream never reads the resource, so it has no reason of its own for this.
pub const CONFIG_REJECTED: &str = "ConfigRejected";

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
    /// OpenShift's cluster-scoped `ClusterAutoscaler` resource (`autoscaling.openshift.io/v1`).
    ClusterAutoscaler {
        /// Name.
        name: String,
        /// UID (empty if unknown).
        uid: String,
    },
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
    /// The message (truncated to the API's 1 kB limit when published); shared, since tens of
    /// thousands of pods may get the same one in a loop.
    pub message: Arc<str>,
    /// `Warning` rather than `Normal`.
    pub warning: bool,
}

impl EventSpec {
    /// `ScaleDownFailed` on a pod whose eviction failed, with upstream's message.
    pub fn eviction_failed(namespace: &str, name: &str) -> EventSpec {
        EventSpec {
            target: Target::Pod {
                namespace: namespace.to_string(),
                name: name.to_string(),
                uid: String::new(),
            },
            reason: SCALE_DOWN_FAILED,
            message: "failed to delete pod for ScaleDown".into(),
            warning: true,
        }
    }

    /// `ConfigRejected` on the `ClusterAutoscaler` whose new version was refused, with why.
    pub fn config_rejected(name: &str, uid: &str, error: &str) -> EventSpec {
        EventSpec {
            target: Target::ClusterAutoscaler {
                name: name.to_string(),
                uid: uid.to_string(),
            },
            reason: CONFIG_REJECTED,
            message: format!("change refused, the previous configuration stays: {error}").into(),
            warning: true,
        }
    }

    /// `DeleteUnregisteredFailed` on the status ConfigMap.
    pub fn delete_unregistered_failed(group: &str, instances: &[String], error: &str) -> EventSpec {
        EventSpec {
            target: Target::StatusConfigMap,
            reason: DELETE_UNREGISTERED_FAILED,
            message: format!(
                "Failed to remove unregistered instances {} of {group}: {error}",
                instances.join(", ")
            )
            .into(),
            warning: true,
        }
    }

    /// `ClusterAutoscalerCleanup` on a node whose leftover taint was removed.
    pub fn cleaned_up(node: &str) -> EventSpec {
        EventSpec {
            target: Target::Node {
                name: node.to_string(),
                uid: String::new(),
            },
            reason: CLUSTER_AUTOSCALER_CLEANUP,
            message: format!(
                "removed autoscaler taints left by a previous instance from node {node}"
            )
            .into(),
            warning: false,
        }
    }

    /// `ScaleDownFailed` on a node, for the controller when a removal fails.
    pub fn scale_down_failed(node: &str, uid: &str, message: String) -> EventSpec {
        EventSpec {
            target: Target::Node {
                name: node.to_string(),
                uid: uid.to_string(),
            },
            reason: SCALE_DOWN_FAILED,
            message: message.into(),
            warning: true,
        }
    }
}

/// `NotTriggerScaleUp`'s message: each group's reason.
fn not_triggered_message(reasons: &GroupReasons) -> String {
    if reasons.is_empty() {
        return "pod didn't trigger scale-up: no node group can be grown".to_string();
    }
    format!("pod didn't trigger scale-up: {}", reasons_text(reasons))
}

/// Each group's reason, `group: reason` joined by `; ` (empty when no group gave one).
pub(crate) fn reasons_text(reasons: &GroupReasons) -> String {
    reasons
        .iter()
        .map(|(g, why)| format!("{g}: {why}"))
        .collect::<Vec<_>>()
        .join("; ")
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
        let summary = increases_text(&up.increases, groups, false);
        let message: Arc<str> = format!("pod triggered scale-up: [{summary}]").into();
        // A buffer's virtual pods exist only in the loop's view: no event on them (upstream's
        // status processor leaves them out too).
        for p in up.triggered.iter().filter(|p| !is_buffer_pod(p)) {
            out.push(EventSpec {
                target: Target::pod(p),
                reason: TRIGGERED_SCALE_UP,
                message: message.clone(),
                warning: false,
            });
        }
    }
    // Pods given the same reasons share them: each message is formatted once (tens of
    // thousands of pending pods times a hundred groups would otherwise be formatted one by one).
    let mut messages: rustc_hash::FxHashMap<usize, Arc<str>> = rustc_hash::FxHashMap::default();
    for n in up.no_scale_up.iter().filter(|n| !is_buffer_pod(&n.pod)) {
        let message = messages
            .entry(n.reasons.identity())
            .or_insert_with(|| not_triggered_message(&n.reasons).into());
        out.push(EventSpec {
            target: Target::pod(&n.pod),
            reason: NOT_TRIGGER_SCALE_UP,
            message: message.clone(),
            warning: false,
        });
    }
    // Pending pods consuming a ProvisioningRequest, left out of the scale-up: upstream's pods
    // filter records this `Normal` event on them with an empty reason (at most 50 a loop).
    if let Some(c) = &outcome.capacity {
        for (pod, message) in c.requests.consumer_events(view.pods) {
            out.push(EventSpec {
                target: Target::pod(pod),
                reason: CONSUMES_PROVISIONING_REQUEST,
                message: message.into(),
                warning: false,
            });
        }
    }
    for e in &outcome.events {
        out.push(EventSpec {
            target: Target::StatusConfigMap,
            reason: e.reason,
            message: e.message.clone().into(),
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
            message: message.into(),
            warning: false,
        });
        for p in d.evict.iter().filter(|p| !is_buffer_pod(p)) {
            out.push(EventSpec {
                target: Target::pod(p),
                reason: SCALE_DOWN,
                message: format!("deleting pod for node scale down (node {})", d.node).into(),
                warning: false,
            });
        }
    }
    out
}

/// `MaxNodesTotalReached` on the status ConfigMap when pods are left without a scale-up and
/// the cluster has `max_nodes_total` nodes or more (0: no limit), as upstream warns when it caps
/// a scale-up at the cluster's maximum.
pub fn max_nodes_total_event(
    view: &ClusterView<'_>,
    outcome: &LoopOutcome,
    max_nodes_total: usize,
) -> Option<EventSpec> {
    let reached = max_nodes_total > 0 && view.nodes.len() >= max_nodes_total;
    (reached && !outcome.scale_up.result.no_scale_up.is_empty()).then(|| EventSpec {
        target: Target::StatusConfigMap,
        reason: MAX_NODES_TOTAL_REACHED,
        message: format!("Max total nodes in cluster reached: {max_nodes_total}").into(),
        warning: true,
    })
}

/// How often a node that stays not removable for the same reason class gets its
/// [`NO_SCALE_DOWN`] event again: client-go's spam filter refills one event per object every
/// 5 minutes, and one every 5 minutes per node is the most a large cluster should write.
pub const NO_SCALE_DOWN_REPEAT_MS: i64 = 5 * 60 * 1000;

/// The reason class of an unneeded node that is kept (`ready`: whether the node is ready), by
/// upstream's names of unremovable reasons where upstream has one (`ScaleDownInCooldown` is
/// ours: upstream does not look at single nodes during the cool-down).
pub fn waiting_class(w: &Waiting, ready: bool) -> &'static str {
    match w {
        Waiting::UnneededTime { .. } if !ready => "NotUnreadyLongEnough",
        Waiting::UnneededTime { .. } => "NotUnneededLongEnough",
        Waiting::MinSize => "NodeGroupMinSizeReached",
        Waiting::Limit(_) => "MinimalResourceLimitExceeded",
        Waiting::Parallelism => "NodeGroupMaxDeletionCountReached",
        Waiting::Cooldown(_) => "ScaleDownInCooldown",
    }
}

/// `NoScaleDown` events on the nodes a loop does not remove, with the reason class and the
/// detail `plan` prints: one when a node's class changes, and again at most every
/// [`NO_SCALE_DOWN_REPEAT_MS`] while it stays (so 15,000 unremovable nodes do not write 15,000
/// events each loop). Pure: it remembers only what it said about which node and when.
#[derive(Debug, Default)]
pub struct NoScaleDownEvents {
    /// Node to (class, when its event was last given).
    said: rustc_hash::FxHashMap<String, (&'static str, i64)>,
}

impl NoScaleDownEvents {
    /// The events for `outcome` (decided on `view`) at `now_ms`: for each node not removable,
    /// and each unneeded node kept, whose class is new or whose last event is old enough.
    pub fn events_of(
        &mut self,
        view: &ClusterView<'_>,
        outcome: &LoopOutcome,
        now_ms: i64,
    ) -> Vec<EventSpec> {
        let down = &outcome.scale_down;
        let nodes: rustc_hash::FxHashMap<&str, &autoscaler_model::Node> =
            view.nodes.iter().map(|n| (n.name.as_str(), &**n)).collect();
        let mut seen = rustc_hash::FxHashMap::default();
        let mut out = Vec::new();
        let not_removed = down
            .unremovable
            .iter()
            .map(|(n, why)| {
                let class = crate::metrics::unremovable_label(why);
                (n.as_str(), class, format!("{class}: {why}"))
            })
            .chain(down.waiting.iter().map(|(n, w)| {
                let ready = nodes.get(n.as_str()).is_none_or(|n| n.is_ready());
                let class = waiting_class(w, ready);
                let detail = crate::plan::unneeded_status(Some(w), now_ms);
                (n.as_str(), class, format!("{class}: {detail}"))
            }));
        for (node, class, message) in not_removed {
            let due = match self.said.get(node) {
                Some((c, at)) => *c != class || now_ms - at >= NO_SCALE_DOWN_REPEAT_MS,
                None => true,
            };
            let at = if due {
                out.push(EventSpec {
                    target: Target::Node {
                        name: node.to_string(),
                        uid: nodes
                            .get(node)
                            .map(|n| n.uid.to_string())
                            .unwrap_or_default(),
                    },
                    reason: NO_SCALE_DOWN,
                    message: format!("node is not removed: {message}").into(),
                    warning: false,
                });
                now_ms
            } else {
                self.said.get(node).map_or(now_ms, |(_, at)| *at)
            };
            seen.insert(node.to_string(), (class, at));
        }
        // A node removable again (or gone) is forgotten: if it becomes unremovable later, that
        // is said at once.
        self.said = seen;
        out
    }
}

/// What one [`EventSink::publish`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PublishStats {
    /// New Events created.
    pub created: usize,
    /// Counts of Events already published raised.
    pub counted: usize,
    /// Dropped by the per-object spam filter.
    pub dropped_spam: usize,
    /// Dropped by the global rate limit.
    pub dropped_rate: usize,
    /// Rejected by the API (logged).
    pub failed: usize,
}

/// Publishes event specs as core/v1 Events (source `cluster-autoscaler`, as upstream's recorder
/// does), correlated by a [`Correlator`].
pub struct EventSink {
    events: kube::Client,
    identity: String,
    correlator: Mutex<Correlator>,
    status_ref: Mutex<ObjectReference>,
    failed: AtomicU64,
}

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventSink").finish_non_exhaustive()
    }
}

/// The API's limit on an event's message.
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

fn time_of(ms: i64) -> Time {
    Time(jiff::Timestamp::from_millisecond(ms).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
}

impl EventSink {
    /// A sink reporting as `cluster-autoscaler` (instance `identity`), posting cluster-level
    /// events on the ConfigMap `namespace/status_name`.
    pub fn new(
        client: kube::Client,
        identity: &str,
        namespace: &str,
        status_name: &str,
        options: CorrelatorOptions,
    ) -> EventSink {
        EventSink {
            events: client,
            identity: identity.to_string(),
            correlator: Mutex::new(Correlator::new(options)),
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
            Target::ClusterAutoscaler { name, uid } => ObjectReference {
                api_version: Some("autoscaling.openshift.io/v1".into()),
                kind: Some("ClusterAutoscaler".into()),
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

    /// The Event object for `spec` as `p` says to write it, at `now_ms`.
    fn event(&self, spec: &EventSpec, p: &Publish, now_ms: i64) -> CoreEvent {
        let involved = self.reference(&spec.target);
        // Events of cluster-scoped objects live in `default`, as client-go puts them.
        let namespace = involved
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into());
        CoreEvent {
            metadata: ObjectMeta {
                name: Some(p.name.clone()),
                namespace: Some(namespace),
                ..ObjectMeta::default()
            },
            involved_object: involved,
            reason: Some(spec.reason.to_string()),
            message: Some(truncate(&p.message, MAX_NOTE_BYTES)),
            type_: Some(if spec.warning { "Warning" } else { "Normal" }.into()),
            source: Some(EventSource {
                component: Some(REPORTER.into()),
                host: None,
            }),
            count: Some(i32::try_from(p.count).unwrap_or(i32::MAX)),
            first_timestamp: Some(time_of(p.first_ms)),
            last_timestamp: Some(time_of(now_ms)),
            reporting_component: Some(REPORTER.into()),
            reporting_instance: Some(self.identity.clone()),
            ..CoreEvent::default()
        }
    }

    /// Writes one correlated event: a create, or a merge patch of count, message and last
    /// time (a create again when the Event expired meanwhile).
    async fn write(&self, spec: &EventSpec, p: &Publish, now_ms: i64) -> Result<(), kube::Error> {
        let ev = self.event(spec, p, now_ms);
        let ns = ev.metadata.namespace.clone().unwrap_or_default();
        let api: Api<CoreEvent> = Api::namespaced(self.events.clone(), &ns);
        if !p.create {
            let patch = serde_json::json!({
                "count": ev.count,
                "message": ev.message,
                "lastTimestamp": ev.last_timestamp,
            });
            match api
                .patch(&p.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                r => return r.map(|_| ()),
            }
        }
        api.create(&PostParams::default(), &ev).await.map(|_| ())
    }

    /// Correlates `events` at `now_ms` and writes those that pass, one after another.
    pub async fn publish(&self, events: &[EventSpec], now_ms: i64) -> PublishStats {
        let mut stats = PublishStats::default();
        let decided: Vec<(&EventSpec, Decision)> = {
            let mut c = self.correlator.lock().unwrap_or_else(|e| e.into_inner());
            events.iter().map(|e| (e, c.correlate(e, now_ms))).collect()
        };
        for (spec, decision) in decided {
            let p = match decision {
                Decision::Drop(DropReason::SpamFilter) => {
                    stats.dropped_spam += 1;
                    continue;
                }
                Decision::Drop(DropReason::RateLimit) => {
                    stats.dropped_rate += 1;
                    continue;
                }
                Decision::Publish(p) => p,
            };
            match self.write(spec, &p, now_ms).await {
                Ok(()) if p.create => stats.created += 1,
                Ok(()) => stats.counted += 1,
                Err(err) => {
                    stats.failed += 1;
                    self.failed.fetch_add(1, Ordering::Relaxed);
                    self.correlator
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .forget(&p.key);
                    tracing::warn!(reason = spec.reason, error = %err, "event not published");
                }
            }
        }
        if stats.dropped_spam + stats.dropped_rate > 0 {
            tracing::debug!(
                spam_filter = stats.dropped_spam,
                rate_limit = stats.dropped_rate,
                "events dropped"
            );
        }
        stats
    }
}

/// The increases of a scale-up as upstream words them, `{group from->to (max: N)}` each,
/// with why the group grows when `reasons` (balancing, min size) and pending pods are not why.
pub(crate) fn increases_text(
    increases: &[autoscaler_core::GroupIncrease],
    groups: &[autoscaler_model::NodeGroup],
    reasons: bool,
) -> String {
    use autoscaler_core::IncreaseReason;
    increases
        .iter()
        .map(|i| {
            let max = groups.get(i.index).map_or(0, |g| g.max_size());
            let why = match i.reason {
                _ if !reasons => "",
                IncreaseReason::PendingPods => "",
                IncreaseReason::Balancing => " balancing",
                IncreaseReason::MinSize => " min size",
            };
            format!(
                "{{{} {}->{} (max: {max}){why}}}",
                i.group,
                i.new_target.saturating_sub(i.delta),
                i.new_target
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_cluster::Cluster;

    /// `NoScaleDown` on each node not removed, with the class and the detail `plan` prints;
    /// again only when the class changes or after the repeat interval; a node that leaves the
    /// list and comes back is said again at once.
    #[test]
    fn nodes_not_removed_get_a_no_scale_down_event_when_their_reason_changes_or_ages() {
        use autoscaler_core::Unremovable;
        let c = Cluster::new(10, 0);
        let view = c.view();
        let mut outcome = c.first_loop();
        let (n1, n2) = (c.nodes[0].name, c.nodes[1].name);
        outcome.scale_down.unneeded = vec![(n2, 0)];
        outcome.scale_down.unremovable = vec![(
            n1,
            Unremovable::NotUnderutilized {
                utilization: 0.875,
                threshold: 0.5,
            },
        )];
        outcome.scale_down.waiting = vec![(
            n2,
            Waiting::UnneededTime {
                deletable_at_ms: 600_000,
            },
        )];
        let mut e = NoScaleDownEvents::default();
        let first = e.events_of(&view, &outcome, 0);
        let lines: Vec<String> = first
            .iter()
            .map(|s| match &s.target {
                Target::Node { name, uid } => {
                    assert_eq!(
                        uid.as_str(),
                        view.nodes
                            .iter()
                            .find(|n| n.name.as_str() == name)
                            .map(|n| n.uid.as_ref())
                            .unwrap_or("?")
                    );
                    format!("{} {name}: {}", s.reason, s.message)
                }
                other => panic!("not on a node: {other:?}"),
            })
            .collect();
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(
            lines[0].starts_with("NoScaleDown n1: node is not removed: NotUnderutilized: "),
            "{lines:#?}"
        );
        assert_eq!(
            lines[1],
            "NoScaleDown n2: node is not removed: NotUnneededLongEnough: unneeded; deletable \
             after 10m0s"
        );
        // A minute later, same classes: nothing new.
        assert!(e.events_of(&view, &outcome, 60_000).is_empty());
        // n2's class changes: only n2.
        outcome.scale_down.waiting = vec![(n2, Waiting::MinSize)];
        let changed = e.events_of(&view, &outcome, 120_000);
        assert_eq!(changed.len(), 1);
        assert!(
            changed[0]
                .message
                .contains("NodeGroupMinSizeReached: unneeded; kept: node group min size"),
            "{changed:?}"
        );
        // The interval after n1's event: n1 again, n2 (said at 120 s) not yet.
        let aged = e.events_of(&view, &outcome, NO_SCALE_DOWN_REPEAT_MS);
        assert_eq!(aged.len(), 1);
        assert_eq!(
            aged[0].target,
            Target::Node {
                name: "n1".into(),
                uid: c.nodes[0].uid.to_string()
            }
        );
        // n1 removable for a loop, then not again: said at once.
        let unremovable = std::mem::take(&mut outcome.scale_down.unremovable);
        assert!(
            e.events_of(&view, &outcome, NO_SCALE_DOWN_REPEAT_MS + 1)
                .is_empty()
        );
        outcome.scale_down.unremovable = unremovable;
        assert_eq!(
            e.events_of(&view, &outcome, NO_SCALE_DOWN_REPEAT_MS + 2)
                .len(),
            1
        );
    }

    use autoscaler_model::SCALED_UP_GROUP;
    use http::{Method, Request, Response, StatusCode};
    use kube::client::Body;
    use serde_json::{Value, json};

    #[test]
    fn a_loop_gives_pod_and_configmap_events_with_upstream_reasons() {
        // Too big for any node: never helped.
        let c = Cluster::new(3, 3).with_huge_pod();
        let view = c.view();
        let outcome = c.first_loop();
        let events = events_of(&view, &outcome);
        let triggered: Vec<&EventSpec> = events
            .iter()
            .filter(|e| e.reason == TRIGGERED_SCALE_UP)
            .collect();
        assert_eq!(triggered.len(), outcome.scale_up.result.triggered.len());
        assert!(!triggered.is_empty());
        assert_eq!(
            triggered[0].message,
            "pod triggered scale-up: [{ng 2->3 (max: 3)}]".into()
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

    /// A CapacityBuffer's virtual pods exist only in the loop's view: no event names them.
    #[test]
    fn a_buffers_virtual_pods_get_no_pod_events() {
        let c = Cluster::new(3, 3).with_huge_pod();
        let view = c.view();
        let mut outcome = c.first_loop();
        let first = (outcome.scale_up.result.triggered.first().cloned()).expect("a scale-up");
        let mut fake = (*first).clone();
        fake.name = "capacity-buffer-headroom-1".into();
        fake.annotations
            .push(("podType".into(), "capacityBufferFakePod".into()));
        outcome
            .scale_up
            .result
            .triggered
            .push(std::sync::Arc::new(fake));
        let events = events_of(&view, &outcome);
        assert!(events.iter().any(|e| e.reason == TRIGGERED_SCALE_UP));
        assert!(
            !events.iter().any(|e| matches!(&e.target,
                Target::Pod { name, .. } if name == "capacity-buffer-headroom-1")),
            "{events:?}"
        );
    }

    /// Each pod's `NotTriggerScaleUp` message is its own reasons', whether formatted for it or
    /// taken from a pod given the same reasons.
    #[test]
    fn pods_sharing_reasons_get_their_own_reasons_message() {
        let mut c = Cluster::new(3, 3).with_huge_pod().with_huge_pod();
        let twin = c.pods.pop().expect("second huge pod");
        let mut renamed = (*twin).clone();
        renamed.name = "huge-2".into();
        c.pods.push(std::sync::Arc::new(renamed));
        let view = c.view();
        let outcome = c.first_loop();
        let events = events_of(&view, &outcome);
        let not = &outcome.scale_up.result.no_scale_up;
        assert!(not.len() >= 2, "{not:?}");
        for n in not {
            let e = events
                .iter()
                .find(|e| e.reason == NOT_TRIGGER_SCALE_UP && e.target == Target::pod(&n.pod))
                .expect("an event per pod");
            assert_eq!(e.message, not_triggered_message(&n.reasons).into());
        }
    }

    type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

    fn respond(send: tower_test::mock::SendResponse<Response<Body>>, code: u16, body: &Value) {
        send.send_response(
            Response::builder()
                .status(StatusCode::from_u16(code).expect("code"))
                .body(Body::from(body.to_string().into_bytes()))
                .expect("response"),
        );
    }

    async fn body_of(req: Request<Body>) -> Value {
        let bytes = req.into_body().collect_bytes().await.expect("body");
        serde_json::from_slice(&bytes).expect("JSON")
    }

    #[tokio::test]
    async fn a_repeated_event_is_created_once_then_its_count_patched() {
        let (svc, mut handle): (_, Handle) = tower_test::mock::pair();
        let client = kube::Client::new(svc, "default");
        let server = tokio::spawn(async move {
            let (req, send) = handle.next_request().await.expect("POST");
            assert_eq!(req.method(), Method::POST);
            assert_eq!(req.uri().to_string(), "/api/v1/namespaces/web/events?");
            let mut body = body_of(req).await;
            let name = body["metadata"]["name"].as_str().unwrap_or("").to_string();
            assert!(name.starts_with("p0."), "{name}");
            respond(send, 201, &body);
            body.get_mut("metadata")
                .and_then(|m| m.as_object_mut())
                .map(|m| m.remove("name"));
            assert_eq!(
                body,
                json!({
                    "apiVersion": "v1", "kind": "Event",
                    "metadata": {"namespace": "web"},
                    "reason": "NotTriggerScaleUp",
                    "message": "pod didn't trigger scale-up: ng: Insufficient cpu",
                    "type": "Normal",
                    "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": "web",
                        "name": "p0", "uid": "u-1"},
                    "source": {"component": "cluster-autoscaler"},
                    "count": 1,
                    "firstTimestamp": "2023-11-14T22:13:20Z",
                    "lastTimestamp": "2023-11-14T22:13:20Z",
                    "reportingComponent": "cluster-autoscaler",
                    "reportingInstance": "ca-0"
                })
            );
            let (req, send) = handle.next_request().await.expect("PATCH");
            assert_eq!(req.method(), Method::PATCH);
            assert_eq!(
                req.uri().to_string(),
                format!("/api/v1/namespaces/web/events/{name}?")
            );
            let patch = body_of(req).await;
            assert_eq!(
                patch,
                json!({"count": 2, "lastTimestamp": "2023-11-14T22:13:30Z",
                    "message": "pod didn't trigger scale-up: ng: Insufficient cpu"})
            );
            respond(send, 200, &patch);
            // The third occurrence finds the Event expired: it is created again, same name.
            let (req, send) = handle.next_request().await.expect("PATCH");
            assert_eq!(req.method(), Method::PATCH);
            respond(
                send,
                404,
                &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "reason": "NotFound", "code": 404}),
            );
            let (req, send) = handle.next_request().await.expect("POST");
            assert_eq!(req.method(), Method::POST);
            let body = body_of(req).await;
            assert_eq!(body["metadata"]["name"], json!(name));
            assert_eq!(body["count"], json!(3));
            respond(send, 201, &body);
        });
        let sink = EventSink::new(
            client,
            "ca-0",
            "kube-system",
            "cluster-autoscaler-status",
            CorrelatorOptions::default(),
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
        let t0 = 1_700_000_000_000;
        let first = sink.publish(std::slice::from_ref(&e), t0).await;
        assert_eq!(first.created, 1);
        let second = sink.publish(std::slice::from_ref(&e), t0 + 10_000).await;
        assert_eq!(second.counted, 1);
        let third = sink.publish(std::slice::from_ref(&e), t0 + 20_000).await;
        assert_eq!((third.counted, third.failed), (1, 0));
        server.await.expect("mock server");
    }

    #[tokio::test]
    async fn a_refused_configuration_is_an_event_on_the_cluster_scoped_resource() {
        let (svc, _handle): (_, Handle) = tower_test::mock::pair();
        let client = kube::Client::new(svc, "default");
        let sink = EventSink::new(
            client,
            "ca-0",
            "kube-system",
            "cluster-autoscaler-status",
            CorrelatorOptions::default(),
        );
        let e = EventSpec::config_rejected("default", "u-1", "spec.scaleDown.unneededTime: bad");
        let Decision::Publish(p) = Correlator::new(CorrelatorOptions::default()).correlate(&e, 0)
        else {
            panic!("the first event is published");
        };
        let ev = sink.event(&e, &p, 0);
        let o = &ev.involved_object;
        assert_eq!(
            (
                o.api_version.as_deref(),
                o.kind.as_deref(),
                o.name.as_deref()
            ),
            (
                Some("autoscaling.openshift.io/v1"),
                Some("ClusterAutoscaler"),
                Some("default")
            )
        );
        assert_eq!(
            (o.namespace.as_deref(), o.uid.as_deref()),
            (None, Some("u-1"))
        );
        // A cluster-scoped object's events live in `default`.
        assert_eq!(ev.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(ev.reason.as_deref(), Some(CONFIG_REJECTED));
        assert_eq!(ev.type_.as_deref(), Some("Warning"));
        assert!(ev.message.unwrap().contains("spec.scaleDown.unneededTime"));
    }

    #[tokio::test]
    async fn drops_are_counted_by_cause() {
        // No request may be made: every event is dropped.
        let (svc, _handle): (_, Handle) = tower_test::mock::pair();
        let client = kube::Client::new(svc, "default");
        let sink = EventSink::new(
            client,
            "ca-0",
            "kube-system",
            "cluster-autoscaler-status",
            CorrelatorOptions {
                spam_burst: 0,
                ..CorrelatorOptions::default()
            },
        );
        let e = EventSpec::scale_down_failed("n1", "", "boom".into());
        let stats = sink.publish(&[e.clone(), e], 0).await;
        assert_eq!(stats.dropped_spam, 2);
        assert_eq!(stats.created + stats.counted, 0);
    }

    #[test]
    fn max_nodes_total_is_reported_when_pods_are_left_at_the_limit() {
        // Too big for any node: never helped.
        let c = Cluster::new(3, 3).with_huge_pod();
        let view = c.view();
        let outcome = c.first_loop();
        let nodes = view.nodes.len();
        let e = max_nodes_total_event(&view, &outcome, nodes).expect("at the limit");
        assert_eq!(e.reason, MAX_NODES_TOTAL_REACHED);
        assert_eq!(e.target, Target::StatusConfigMap);
        assert_eq!(
            e.message,
            format!("Max total nodes in cluster reached: {nodes}").into()
        );
        assert!(max_nodes_total_event(&view, &outcome, nodes + 1).is_none());
        assert!(
            max_nodes_total_event(&view, &outcome, 0).is_none(),
            "no limit"
        );
    }

    #[test]
    fn long_messages_are_truncated_on_a_char_boundary() {
        let s = "é".repeat(600);
        let t = truncate(&s, MAX_NOTE_BYTES);
        assert!(t.len() <= MAX_NOTE_BYTES);
        assert!(t.ends_with("..."));
    }
}

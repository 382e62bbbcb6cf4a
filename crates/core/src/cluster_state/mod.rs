//! Cluster state between loops: readiness of nodes, upcoming nodes, scale-up requests and their
//! timeouts, failed and long-unregistered instances, backoff, and cluster and group health.
//!
//! Decides, from what the provider and the cluster show at `now` (never from memory alone), which
//! groups are healthy and may grow, how many nodes are on their way per group, which broken
//! instances must go (`DeleteInstances`), which unfulfilled scale-ups must be reverted
//! (`DecreaseTargetSize`) and which events and status lines describe all that. Memory only adds
//! ages: an instance or a target excess first seen at `T` is "since `T`", so a restart in the
//! middle of a scale-up rebuilds its requests and still corrects them within one provision time.
//!
//! It never performs an action, never reads a clock, and never removes a registered node (only
//! instances that have no node).

pub mod accelerator;
pub mod backoff;
mod backoff_options;
mod cluster_state_options;

use autoscaler_model::{
    CLUSTER_UNHEALTHY, DELETE_UNREGISTERED, FAILED_TO_SCALE_UP_GROUP, FIX_NODE_GROUP_SIZE,
    NOT_READY_FOR_AUTOSCALING, SCALE_UP_FAILED, SCALE_UP_TIMED_OUT,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::actions::Action;
use crate::cluster_state::backoff::{Backoff, BackoffOptions, FailureReason, ms};
use autoscaler_model::Node;
use autoscaler_model::TO_BE_DELETED_TAINT;
use autoscaler_model::TaintConfig;
use autoscaler_model::{
    CloudProvider, InstanceError, InstanceErrorClass, InstanceState, NodeGroup, NodeGroupId,
};

/// How long an issued deletion or target decrease is trusted to be under way before it is issued
/// again, if the provider still shows the same thing.
const REISSUE_MS: i64 = 2 * 60 * 1000;

/// Options of the cluster state, with upstream's flag names and defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterStateOptions {
    /// `--max-node-provision-time` (15m): how long a scale-up or a new instance may take to
    /// register. Groups may override it ([`autoscaler_model::NodeGroupOptions`]).
    pub(crate) max_node_provision_time: Duration,
    /// `--max-node-startup-time` (15m): how long a registered node may take to become Ready
    /// before it counts as unready.
    pub(crate) max_node_startup_time: Duration,
    /// `--ok-total-unready-count` (3).
    pub(crate) ok_total_unready_count: usize,
    /// `--max-total-unready-percentage` (45).
    pub(crate) max_total_unready_percentage: f64,
    /// Backoff durations.
    pub(crate) backoff: BackoffOptions,
    /// Startup and status taints: a Ready node with a startup taint has not started yet.
    pub(crate) taints: TaintConfig,
}

impl Default for ClusterStateOptions {
    fn default() -> Self {
        ClusterStateOptions {
            max_node_provision_time: Duration::from_secs(15 * 60),
            max_node_startup_time: Duration::from_secs(15 * 60),
            ok_total_unready_count: 3,
            max_total_unready_percentage: 45.0,
            backoff: BackoffOptions::default(),
            taints: TaintConfig::default(),
        }
    }
}

/// A Kubernetes event for the shell to publish.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Reason, as upstream names it (e.g. [`SCALE_UP_TIMED_OUT`]).
    pub reason: &'static str,
    /// The object it is about: a node group id, or `cluster` for cluster-wide events.
    pub object: String,
    /// Message.
    pub message: String,
    /// `Warning` rather than `Normal`.
    pub warning: bool,
}

/// One outstanding part of a group's target that has no node yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScaleUpRequest {
    /// Nodes still expected from it.
    pub delta: usize,
    /// When it was made, or first seen (a target excess found without a request in memory).
    pub since_ms: i64,
    /// Made by this process (false: rebuilt from what the provider shows).
    pub ours: bool,
}

/// Node and instance counts of one group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupReadiness {
    /// Ready nodes.
    pub ready: usize,
    /// Not Ready nodes past the startup time.
    pub unready: usize,
    /// Not Ready nodes within the startup time (still upcoming).
    pub not_started: usize,
    /// Nodes being deleted (deletion timestamp or `ToBeDeletedByClusterAutoscaler` taint).
    pub being_deleted: usize,
    /// Instances without a node, within the provision time.
    pub unregistered: usize,
    /// Instances without a node for longer than the provision time.
    pub long_unregistered: usize,
    /// Instances without a node that the provider reports in error.
    pub failed: usize,
    /// Target minus everything the provider and the cluster show (instances not created yet).
    pub missing: usize,
}

/// Why a group is backed off, and until when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackoffStatus {
    /// End of the backoff, milliseconds since the Unix epoch.
    pub until_ms: i64,
    /// Failures since the last reset.
    pub failures: u32,
    /// The last failure.
    pub reason: FailureReason,
}

/// One group in the status.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupStatus {
    /// Id.
    pub id: NodeGroupId,
    /// Min size.
    pub min_size: usize,
    /// Max size.
    pub max_size: usize,
    /// Target size the provider shows.
    pub target_size: usize,
    /// Counts.
    pub readiness: GroupReadiness,
    /// Nodes on their way that count as capacity for scale-up: registered but not started, and
    /// instances (created or not yet) within the provision time, minus any part being reverted.
    pub upcoming: usize,
    /// Outstanding scale-up requests, oldest first.
    pub requests: Vec<ScaleUpRequest>,
    /// Why the group is unhealthy (not scaled), if it is.
    pub unhealthy: Option<String>,
    /// The backoff, if the group is backed off now.
    pub backoff: Option<BackoffStatus>,
}

impl GroupStatus {
    /// Why the group must not grow now (unhealthy or backed off), as shown to users.
    pub fn blocked_reason(&self) -> Option<String> {
        if let Some(why) = &self.unhealthy {
            return Some(format!("node group unhealthy: {why}"));
        }
        self.backoff.as_ref().map(|b| {
            format!(
                "in backoff after failed scale-up ({}: {}) until {}",
                class_name(b.reason.class),
                b.reason.code,
                format_time_ms(b.until_ms)
            )
        })
    }
}

/// Cluster-wide status.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterStatus {
    /// Whether the cluster is healthy enough to autoscale.
    pub healthy: bool,
    /// [`NOT_READY_FOR_AUTOSCALING`] with the counts when unhealthy.
    pub message: Option<String>,
    /// Ready nodes (all nodes, managed or not).
    pub ready: usize,
    /// Unready nodes past the startup time.
    pub unready: usize,
    /// Nodes not started yet.
    pub not_started: usize,
    /// Nodes being deleted.
    pub being_deleted: usize,
    /// All registered nodes.
    pub total_nodes: usize,
    /// Per group, in the provider's order.
    pub groups: Vec<GroupStatus>,
}

/// What one update found and asks for.
#[derive(Clone, Debug, Default)]
pub struct StateUpdate {
    /// The status.
    pub status: ClusterStatus,
    /// Deletions of broken instances and reverts of unfulfilled scale-ups.
    pub actions: Vec<Action>,
    /// Events.
    pub events: Vec<Event>,
}

/// What is remembered about one group.
#[derive(Clone, Debug, Default)]
struct GroupMemory {
    requests: Vec<ScaleUpRequest>,
    /// Since when the group has a non-zero target and no node at all.
    no_nodes_since_ms: Option<i64>,
    /// A target decrease issued from this target at this time, not yet visible.
    pending_revert: Option<(usize, i64)>,
    /// Registered nodes (ready, unready or starting) at the previous update.
    last_active: Option<usize>,
}

/// What is remembered about one instance without a node.
#[derive(Clone, Debug)]
struct InstanceMemory {
    first_seen_ms: i64,
    delete_issued_ms: Option<i64>,
    failure_recorded: bool,
}

/// The cluster state kept between loops.
#[derive(Clone, Debug, Default)]
pub struct ClusterState {
    /// Options.
    pub options: ClusterStateOptions,
    /// Per-group backoff.
    pub backoff: Backoff,
    groups: BTreeMap<NodeGroupId, GroupMemory>,
    instances: FxHashMap<Arc<str>, InstanceMemory>,
    queued_events: Vec<Event>,
}

/// Where a node stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NodeKind {
    Ready,
    Unready,
    NotStarted,
    BeingDeleted,
}

/// Where `node` stands at `now_ms`. A Ready node still carrying a startup taint counts as not
/// ready, as upstream overrides its readiness: not started within the startup time (so it is
/// still upcoming and its group is not grown again for the same pods), unready after it.
fn classify(node: &Node, now_ms: i64, startup_ms: i64, taints: &TaintConfig) -> NodeKind {
    if node.deletion_ms.is_some()
        || node
            .taints
            .iter()
            .any(|t| t.key.as_str() == TO_BE_DELETED_TAINT)
    {
        NodeKind::BeingDeleted
    } else if taints.is_started_ready(node.is_ready(), &node.taints) {
        NodeKind::Ready
    } else if node
        .creation_ms
        .is_some_and(|c| now_ms < c.saturating_add(startup_ms))
    {
        NodeKind::NotStarted
    } else {
        NodeKind::Unready
    }
}

/// Whether `unready` of `total` passes both thresholds (`--ok-total-unready-count` and
/// `--max-total-unready-percentage`).
fn too_many_unready(unready: usize, total: usize, opts: &ClusterStateOptions) -> bool {
    unready > opts.ok_total_unready_count
        && unready as f64 > opts.max_total_unready_percentage / 100.0 * total as f64
}

fn class_name(class: InstanceErrorClass) -> &'static str {
    match class {
        InstanceErrorClass::OutOfResources => "OutOfResources",
        InstanceErrorClass::Other => "Other",
    }
}

/// `2024-01-02T03:04:05Z` for milliseconds since the Unix epoch (UTC, proleptic Gregorian).
pub fn format_time_ms(time_ms: i64) -> String {
    let secs = time_ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

impl ClusterState {
    /// Empty state with `options`.
    pub fn new(options: ClusterStateOptions) -> ClusterState {
        ClusterState {
            backoff: Backoff::new(options.backoff.clone()),
            options,
            ..ClusterState::default()
        }
    }

    /// Decides with `options` from now on, keeping what it remembers (requests, backoff, ages).
    pub fn set_options(&mut self, options: ClusterStateOptions) {
        self.backoff.options = options.backoff.clone();
        self.options = options;
    }

    fn provision_ms(&self, group: &NodeGroup) -> i64 {
        ms(group
            .options()
            .max_node_provision_time()
            .unwrap_or(self.options.max_node_provision_time))
    }

    /// Records an increase of `group` by `delta` made at `now_ms` (the shell applies it before
    /// the next update, or reports its failure with [`ClusterState::record_scale_up_failure`]).
    pub fn record_scale_up(&mut self, group: &NodeGroupId, delta: usize, now_ms: i64) {
        if delta == 0 {
            return;
        }
        let mem = self.groups.entry(group.clone()).or_default();
        mem.requests.push(ScaleUpRequest {
            delta,
            since_ms: now_ms,
            ours: true,
        });
    }

    /// Records that the provider call growing `group` failed at `now_ms`: the request it was
    /// for is dropped, the group is backed off at once, and a `FailedToScaleUpGroup` event is
    /// queued for the next update.
    pub fn record_scale_up_failure(&mut self, group: &NodeGroupId, now_ms: i64, message: &str) {
        if let Some(mem) = self.groups.get_mut(group)
            && let Some(i) = mem.requests.iter().rposition(|r| r.ours)
        {
            mem.requests.remove(i);
        }
        let until = self.backoff.record_failure(
            group,
            FailureReason {
                class: InstanceErrorClass::Other,
                code: "cloudProviderError".into(),
                message: message.to_string(),
            },
            now_ms,
        );
        self.queued_events.push(Event {
            reason: FAILED_TO_SCALE_UP_GROUP,
            object: group.to_string(),
            message: format!(
                "Scale-up of {group} failed: {message}; backed off until {}",
                format_time_ms(until)
            ),
            warning: true,
        });
    }

    /// Brings the state up to date with `nodes` and the provider's groups at `now_ms`, and
    /// returns the status with the actions and events it calls for. When the cluster is
    /// unhealthy only instances without a node are deleted; timeouts wait (requests keep their
    /// age and are judged once the cluster is healthy again).
    pub fn update(
        &mut self,
        nodes: &[Arc<Node>],
        provider: &dyn CloudProvider,
        now_ms: i64,
    ) -> StateUpdate {
        let mut out = StateUpdate {
            events: std::mem::take(&mut self.queued_events),
            ..StateUpdate::default()
        };
        let groups = provider.node_groups();
        self.backoff.remove_stale(now_ms);
        let startup_ms = ms(self.options.max_node_startup_time);
        let taints = &self.options.taints;
        let (per_group, registered) =
            count_nodes(nodes, provider, (now_ms, startup_ms), taints, &mut out);
        self.judge_cluster_health(&mut out);
        let mut pass = Pass {
            now_ms,
            healthy: out.status.healthy,
            registered,
            seen: FxHashSet::default(),
        };
        for (group, readiness) in groups.iter().zip(per_group) {
            self.update_group(&mut pass, group, readiness, &mut out);
        }
        // Forget what the provider no longer shows.
        self.instances.retain(|id, _| pass.seen.contains(id));
        let ids: FxHashSet<&NodeGroupId> = groups.iter().map(|g| g.id()).collect();
        self.groups.retain(|id, _| ids.contains(id));
        if !pass.healthy {
            out.actions
                .retain(|a| matches!(a, Action::DeleteInstances { .. }));
        }
        out
    }

    /// Marks the cluster unhealthy, with an event, when too many of its nodes are unready.
    fn judge_cluster_health(&self, out: &mut StateUpdate) {
        let status = &mut out.status;
        status.healthy = !too_many_unready(status.unready, status.total_nodes, &self.options);
        if status.healthy {
            return;
        }
        let msg = format!(
            "{NOT_READY_FOR_AUTOSCALING}: {} of {} nodes are unready (more than {} and more than {}%)",
            status.unready,
            status.total_nodes,
            self.options.ok_total_unready_count,
            self.options.max_total_unready_percentage
        );
        out.events.push(Event {
            reason: CLUSTER_UNHEALTHY,
            object: "cluster".into(),
            message: msg.clone(),
            warning: true,
        });
        status.message = Some(msg);
    }

    /// One group's step of an update: its requests, timeouts, broken instances and status.
    fn update_group(
        &mut self,
        pass: &mut Pass,
        group: &NodeGroup,
        readiness: GroupReadiness,
        out: &mut StateUpdate,
    ) {
        let g = self.observe_instances(pass, group, readiness);
        let mem = self.groups.entry(group.id().clone()).or_default();
        let reverting = mem.expire_revert(group, g.now_ms);
        // Capacity still expected: instances on their way and target not yet created, never
        // more than the group's max allows.
        let unfulfilled = if reverting {
            0
        } else {
            (g.readiness.unregistered + g.readiness.missing)
                .min(group.max_size().saturating_sub(g.active))
        };
        let long_pending = g
            .long
            .iter()
            .filter(|id| {
                self.instances
                    .get(*id)
                    .is_none_or(|m| m.delete_issued_ms.is_none())
            })
            .count();
        follow_requests(mem, &mut self.backoff, &g, unfulfilled + long_pending);
        mem.last_active = Some(g.active);
        let timed_out = pass.healthy
            && mem
                .requests
                .first()
                .is_some_and(|r| g.now_ms.saturating_sub(r.since_ms) > g.provision_ms);
        let reverted = if timed_out {
            time_out(mem, &mut self.backoff, &g, reverting, out)
        } else {
            0
        };
        self.back_off_failures(&g, out);
        self.delete_broken(&g, out);
        let status = self.group_status(&g, unfulfilled, reverting, reverted);
        out.status.groups.push(status);
    }

    /// Sorts the group's instances without a node into failed, long unregistered and on their
    /// way, remembering since when each has been seen, and counts what the target lacks.
    fn observe_instances<'a>(
        &mut self,
        pass: &mut Pass,
        group: &'a NodeGroup,
        mut readiness: GroupReadiness,
    ) -> GroupPass<'a> {
        let (now_ms, provision_ms) = (pass.now_ms, self.provision_ms(group));
        let (mut failed, mut long, mut without_node) = (Vec::new(), Vec::new(), 0usize);
        for inst in group.instances() {
            if pass.registered.contains(&inst.id) || inst.state == InstanceState::Deleting {
                continue;
            }
            pass.seen.insert(inst.id.clone());
            without_node += 1;
            let m = self
                .instances
                .entry(inst.id.clone())
                .or_insert(InstanceMemory {
                    first_seen_ms: now_ms,
                    delete_issued_ms: None,
                    failure_recorded: false,
                });
            if let Some(err) = &inst.error {
                failed.push((inst.id.clone(), err));
            } else if now_ms.saturating_sub(m.first_seen_ms) > provision_ms {
                long.push(inst.id.clone());
            } else {
                readiness.unregistered += 1;
            }
        }
        readiness.failed = failed.len();
        readiness.long_unregistered = long.len();
        let active = readiness.ready + readiness.unready + readiness.not_started;
        // Instances that exist and are not being deleted: a node being drained still has its
        // instance until the provider removes it, so count instances, not nodes.
        let live = group
            .instances()
            .iter()
            .filter(|i| i.state != InstanceState::Deleting)
            .count()
            .max(active + without_node);
        readiness.missing = group.target_size().saturating_sub(live);
        GroupPass {
            group,
            now_ms,
            provision_ms,
            readiness,
            active,
            failed,
            long,
        }
    }

    /// Failed instances back the group off at once, once per new batch of failures.
    fn back_off_failures(&mut self, g: &GroupPass<'_>, out: &mut StateUpdate) {
        let new_failures: Vec<&(Arc<str>, &InstanceError)> = g
            .failed
            .iter()
            .filter(|(id, _)| self.instances.get(id).is_some_and(|m| !m.failure_recorded))
            .collect();
        if let Some((_, err)) = new_failures.first() {
            let reason = FailureReason {
                class: err.class,
                code: err.code.clone(),
                message: err.message.clone(),
            };
            let until = self.backoff.record_failure(g.group.id(), reason, g.now_ms);
            out.events.push(Event {
                reason: SCALE_UP_FAILED,
                object: g.group.id().to_string(),
                message: format!(
                    "{} instance(s) of {} failed ({}: {}: {}); deleting them; backed off until {}",
                    new_failures.len(),
                    g.group.id(),
                    class_name(err.class),
                    err.code,
                    err.message,
                    format_time_ms(until)
                ),
                warning: true,
            });
        }
        for (id, _) in &new_failures {
            if let Some(m) = self.instances.get_mut(id) {
                m.failure_recorded = true;
            }
        }
    }

    /// Deletes failed and long-unregistered instances, each again only after
    /// [`REISSUE_MS`] if the provider still shows it.
    fn delete_broken(&mut self, g: &GroupPass<'_>, out: &mut StateUpdate) {
        let failed_ids: Vec<Arc<str>> = g.failed.iter().map(|(id, _)| id.clone()).collect();
        for (ids, reason) in [
            (failed_ids, SCALE_UP_FAILED),
            (g.long.clone(), DELETE_UNREGISTERED),
        ] {
            let due: Vec<Arc<str>> = ids
                .into_iter()
                .filter(|id| self.deletion_due(id, g.now_ms))
                .collect();
            if due.is_empty() {
                continue;
            }
            if reason == DELETE_UNREGISTERED {
                out.events.push(Event {
                    reason,
                    object: g.group.id().to_string(),
                    message: format!(
                        "Removing {} instance(s) of {} that did not register within {}s: {}",
                        due.len(),
                        g.group.id(),
                        g.provision_ms / 1000,
                        due.iter().map(|s| &**s).collect::<Vec<_>>().join(", ")
                    ),
                    warning: false,
                });
            }
            out.actions.push(Action::DeleteInstances {
                group: g.group.id().clone(),
                instances: due,
                reason,
            });
        }
    }

    /// Whether the instance's deletion is to be issued now (and remembers that it is).
    fn deletion_due(&mut self, id: &Arc<str>, now_ms: i64) -> bool {
        let Some(m) = self.instances.get_mut(id) else {
            return false;
        };
        let due = m
            .delete_issued_ms
            .is_none_or(|t| now_ms.saturating_sub(t) > REISSUE_MS);
        if due {
            m.delete_issued_ms = Some(now_ms);
        }
        due
    }

    /// The group's status: its health, the capacity on its way and its backoff.
    fn group_status(
        &mut self,
        g: &GroupPass<'_>,
        unfulfilled: usize,
        reverting: bool,
        reverted: usize,
    ) -> GroupStatus {
        let group = g.group;
        let mem = self.groups.entry(group.id().clone()).or_default();
        let unhealthy = unhealthy_reason(mem, g, reverted, &self.options);
        let reverting = reverting || reverted > 0;
        // A group in backoff has shown that its new instances cannot be relied on: they stop
        // counting as capacity so that pending pods can fall back to other groups.
        let backoff = self.backoff.active(group.id(), g.now_ms);
        let upcoming = g.readiness.not_started
            + if reverting || backoff.is_some() {
                0
            } else {
                unfulfilled
            };
        GroupStatus {
            id: group.id().clone(),
            min_size: group.min_size(),
            max_size: group.max_size(),
            target_size: group.target_size(),
            readiness: g.readiness.clone(),
            upcoming,
            requests: mem.requests.clone(),
            unhealthy,
            backoff: backoff.map(|b| BackoffStatus {
                until_ms: b.until_ms,
                failures: b.failures,
                reason: b.reason.clone(),
            }),
        }
    }
}

/// What one update reads and collects across groups.
struct Pass {
    now_ms: i64,
    healthy: bool,
    /// Provider ids of the registered nodes.
    registered: FxHashSet<Arc<str>>,
    /// Instances without a node the provider still shows.
    seen: FxHashSet<Arc<str>>,
}

/// One group as this update sees it.
struct GroupPass<'a> {
    group: &'a NodeGroup,
    now_ms: i64,
    provision_ms: i64,
    readiness: GroupReadiness,
    /// Registered nodes: ready, unready or starting.
    active: usize,
    /// Instances without a node that the provider reports in error.
    failed: Vec<(Arc<str>, &'a InstanceError)>,
    /// Instances without a node for longer than the provision time.
    long: Vec<Arc<str>>,
}

impl GroupMemory {
    /// Forgets a target decrease once the target moved or it is old enough to be reissued;
    /// returns whether one is still under way.
    fn expire_revert(&mut self, group: &NodeGroup, now_ms: i64) -> bool {
        if let Some((from, at)) = self.pending_revert
            && (group.target_size() != from || now_ms.saturating_sub(at) > REISSUE_MS)
        {
            self.pending_revert = None;
        }
        self.pending_revert.is_some()
    }
}

/// Counts the nodes cluster-wide (into the status) and per group; returns the per-group counts
/// and the provider ids of the registered nodes.
fn count_nodes(
    nodes: &[Arc<Node>],
    provider: &dyn CloudProvider,
    (now_ms, startup_ms): (i64, i64),
    taints: &TaintConfig,
    out: &mut StateUpdate,
) -> (Vec<GroupReadiness>, FxHashSet<Arc<str>>) {
    let groups = provider.node_groups().len();
    let mut per_group = vec![GroupReadiness::default(); groups];
    // Sized up front: grown as it fills, a 15,000-node set is rehashed a dozen times a loop.
    let mut registered: FxHashSet<Arc<str>> =
        FxHashSet::with_capacity_and_hasher(nodes.len(), Default::default());
    let status = &mut out.status;
    for node in nodes {
        let kind = classify(node, now_ms, startup_ms, taints);
        status.total_nodes += 1;
        let counts = |r: &mut GroupReadiness| match kind {
            NodeKind::Ready => r.ready += 1,
            NodeKind::Unready => r.unready += 1,
            NodeKind::NotStarted => r.not_started += 1,
            NodeKind::BeingDeleted => r.being_deleted += 1,
        };
        let mut all = GroupReadiness::default();
        counts(&mut all);
        status.ready += all.ready;
        status.unready += all.unready;
        status.not_started += all.not_started;
        status.being_deleted += all.being_deleted;
        if let Some(g) = provider.node_group_of(node).filter(|&g| g < groups) {
            counts(&mut per_group[g]);
        }
        if let Some(id) = &node.provider_id {
            registered.insert(id.clone());
        }
    }
    (per_group, registered)
}

/// Requests follow what the provider shows: arrived nodes complete the oldest ones; an excess
/// nobody remembers asking for becomes a request aged from now.
fn follow_requests(mem: &mut GroupMemory, backoff: &mut Backoff, g: &GroupPass<'_>, wanted: usize) {
    let asked: usize = mem.requests.iter().map(|r| r.delta).sum();
    if wanted > asked {
        mem.requests.push(ScaleUpRequest {
            delta: wanted - asked,
            since_ms: g.now_ms,
            ours: false,
        });
    }
    if wanted >= asked {
        return;
    }
    let completed_since = complete_oldest(&mut mem.requests, asked - wanted);
    // A scale-up completed by nodes that registered ends the backoff, unless a failure came
    // after it began. One "completed" by a lower target or by deleted instances proves nothing
    // about the group and leaves the backoff alone.
    if mem.requests.is_empty()
        && g.failed.is_empty()
        && mem.last_active.is_some_and(|before| g.active > before)
        && let Some(since) = completed_since
        && backoff
            .get(g.group.id())
            .is_some_and(|b| b.last_failure_ms <= since)
    {
        backoff.remove(g.group.id());
    }
}

/// Takes `done` nodes off the oldest requests; returns when the last one fully completed began.
fn complete_oldest(requests: &mut Vec<ScaleUpRequest>, mut done: usize) -> Option<i64> {
    let mut completed_since = None;
    while done > 0 {
        let Some(first) = requests.first_mut() else {
            break;
        };
        let take = done.min(first.delta);
        first.delta -= take;
        done -= take;
        if first.delta == 0 {
            completed_since = Some(first.since_ms);
            requests.remove(0);
        }
    }
    completed_since
}

/// The group's oldest request waited longer than the provision time: backs the group off,
/// reverts the part of the target that has no instance, and says so. Returns the revert.
fn time_out(
    mem: &mut GroupMemory,
    backoff: &mut Backoff,
    g: &GroupPass<'_>,
    reverting: bool,
    out: &mut StateUpdate,
) -> usize {
    let group = g.group;
    let ours = mem.requests.iter().any(|r| r.ours);
    let waiting: usize = mem.requests.iter().map(|r| r.delta).sum();
    mem.requests.clear();
    let reason = FailureReason {
        class: InstanceErrorClass::Other,
        code: "timeout".into(),
        message: format!(
            "{waiting} node(s) did not register within {}s",
            g.provision_ms / 1000
        ),
    };
    let until = backoff.record_failure(group.id(), reason, g.now_ms);
    // Only the part of the target that has no instance is reverted here: instances that exist
    // without a node are deleted by name once they are past their own provision time, each with
    // its own decrement. Lowering the target for them too would remove one machine twice, and
    // whichever machine the provider picks for the excess decrement may be a healthy node.
    // Never below the min: the provider refuses that, and the group's own controller will
    // create what the min asks for.
    let revert = if reverting {
        0
    } else {
        g.readiness
            .missing
            .min(group.target_size().saturating_sub(group.min_size()))
    };
    if revert > 0 {
        out.actions.push(Action::DecreaseTargetSize {
            group: group.id().clone(),
            delta: revert,
        });
        mem.pending_revert = Some((group.target_size(), g.now_ms));
    }
    let (reason, what) = if ours {
        (SCALE_UP_TIMED_OUT, "Scale-up")
    } else {
        (FIX_NODE_GROUP_SIZE, "Target size")
    };
    let fix = if revert > 0 {
        format!(
            "target lowered by {revert} to {}",
            group.target_size().saturating_sub(revert)
        )
    } else {
        "the instances that never registered are deleted".to_string()
    };
    out.events.push(Event {
        reason,
        object: group.id().to_string(),
        message: format!(
            "{what} of {} timed out: {waiting} node(s) did not register within {}s; {fix}; \
             backed off until {}",
            group.id(),
            g.provision_ms / 1000,
            format_time_ms(until)
        ),
        warning: true,
    });
    revert
}

/// Why the group is unhealthy, if it is: a target with no node for longer than the provision
/// time, or too many nodes missing or unready below what its requests justify.
fn unhealthy_reason(
    mem: &mut GroupMemory,
    g: &GroupPass<'_>,
    reverted: usize,
    opts: &ClusterStateOptions,
) -> Option<String> {
    let group = g.group;
    let all_nodes = g.active + g.readiness.being_deleted;
    if group.target_size() > 0 && all_nodes == 0 {
        let since = *mem.no_nodes_since_ms.get_or_insert(g.now_ms);
        if g.now_ms.saturating_sub(since) > g.provision_ms {
            return Some(format!(
                "target size {} but no node registered for longer than {}s",
                group.target_size(),
                g.provision_ms / 1000
            ));
        }
    } else {
        mem.no_nodes_since_ms = None;
    }
    let requested: usize = mem.requests.iter().map(|r| r.delta).sum();
    let min_acceptable = group
        .target_size()
        .saturating_sub(requested + reverted)
        .saturating_sub(g.readiness.failed + g.readiness.long_unregistered);
    let unjustified = min_acceptable.saturating_sub(g.readiness.ready);
    too_many_unready(unjustified, g.active, opts).then(|| {
        format!("{unjustified} node(s) missing or unready below the acceptable {min_acceptable}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_model::testing::{GI, NodeBuilder};
    use autoscaler_model::{Instance, StaticProvider};

    const MIN: i64 = 60_000;
    const T0: i64 = 1_700_000_000_000;

    fn node(name: &str, ready: bool) -> Arc<Node> {
        let b = NodeBuilder::new(name, 4000, 16 * GI).with_provider_id(&format!("test:///{name}"));
        if ready { b.arc() } else { b.not_ready().arc() }
    }

    fn provider(nodes: &[Arc<Node>], target: usize) -> StaticProvider {
        let mut g = NodeGroup::new("ng", 0, 20, target);
        g = g.with_instances(
            nodes
                .iter()
                .map(|n| Instance {
                    id: n.provider_id.clone().unwrap_or_else(|| Arc::from("")),
                    state: InstanceState::Running,
                    error: None,
                })
                .collect(),
        );
        StaticProvider::new(vec![g])
    }

    #[test]
    fn a_later_increase_does_not_extend_the_deadline_of_an_earlier_one() {
        let mut s = ClusterState::default();
        let id = NodeGroupId::from("ng");
        let nodes = vec![node("n1", true)];
        s.record_scale_up(&id, 1, T0);
        s.update(&nodes, &provider(&nodes, 2), T0 + MIN);
        // Ten minutes later more pods ask for another node of the same group.
        s.record_scale_up(&id, 1, T0 + 10 * MIN);
        let u = s.update(&nodes, &provider(&nodes, 3), T0 + 10 * MIN + 10_000);
        assert_eq!(u.status.groups[0].requests.len(), 2);
        assert_eq!(u.status.groups[0].upcoming, 2);
        // The first request still times out fifteen minutes after it was made.
        let u = s.update(&nodes, &provider(&nodes, 3), T0 + 15 * MIN + 1);
        assert_eq!(
            u.actions,
            vec![Action::DecreaseTargetSize {
                group: id.clone(),
                delta: 2
            }]
        );
        assert_eq!(u.events[0].reason, SCALE_UP_TIMED_OUT);
    }

    #[test]
    fn registered_nodes_complete_a_request_and_end_an_older_backoff() {
        let mut s = ClusterState::default();
        let id = NodeGroupId::from("ng");
        s.record_scale_up_failure(&id, T0, "boom");
        let mut nodes = vec![node("n1", true)];
        let u = s.update(&nodes, &provider(&nodes, 1), T0 + 10 * MIN);
        assert_eq!(u.events[0].reason, FAILED_TO_SCALE_UP_GROUP);
        // Backoff over; a new scale-up of one node registers.
        s.record_scale_up(&id, 1, T0 + 10 * MIN);
        let u = s.update(&nodes, &provider(&nodes, 2), T0 + 11 * MIN);
        assert_eq!(u.status.groups[0].upcoming, 1);
        nodes.push(node("n2", true));
        let u = s.update(&nodes, &provider(&nodes, 2), T0 + 12 * MIN);
        assert!(u.status.groups[0].requests.is_empty());
        assert_eq!(u.status.groups[0].upcoming, 0);
        assert!(s.backoff.get(&id).is_none());
    }

    /// A Ready node still carrying a startup taint has not started: it is upcoming within the
    /// startup time (no second scale-up for the same pods) and unready after it; a status
    /// taint changes nothing.
    #[test]
    fn a_ready_node_with_a_startup_taint_is_not_started_then_unready() {
        let opts = ClusterStateOptions {
            taints: TaintConfig::new(
                vec!["example.com/warming".into()],
                vec!["example.com/degraded".into()],
            )
            .unwrap(),
            ..ClusterStateOptions::default()
        };
        let tainted = |name: &str, key: &str| {
            NodeBuilder::new(name, 4000, 16 * GI)
                .with_provider_id(&format!("test:///{name}"))
                .taint(key, "", autoscaler_model::TaintEffect::NoSchedule)
                .with(|n| n.creation_ms = Some(T0))
                .arc()
        };
        let nodes = vec![
            node("n1", true),
            tainted("n2", "example.com/warming"),
            tainted("n3", "startup-taint.cluster-autoscaler.kubernetes.io/cni"),
            tainted("n4", "example.com/degraded"),
        ];
        let p = provider(&nodes, 4);
        let mut s = ClusterState::new(opts.clone());
        let u = s.update(&nodes, &p, T0 + MIN);
        let g = &u.status.groups[0];
        assert_eq!((g.readiness.ready, g.readiness.not_started), (2, 2));
        assert_eq!(g.upcoming, 2);
        assert_eq!((u.status.ready, u.status.not_started), (2, 2));
        // Past the startup time they are unready and no longer upcoming.
        let u = s.update(&nodes, &p, T0 + 16 * MIN);
        let g = &u.status.groups[0];
        assert_eq!((g.readiness.ready, g.readiness.unready), (2, 2));
        assert_eq!(g.upcoming, 0);
        // Without the flag only the prefixed key is a startup taint.
        let mut s = ClusterState::default();
        let u = s.update(&nodes, &p, T0 + MIN);
        assert_eq!(u.status.groups[0].readiness.ready, 3);
    }

    #[test]
    fn a_group_with_too_many_unready_nodes_is_unhealthy() {
        let mut s = ClusterState::default();
        let mut nodes: Vec<Arc<Node>> = (0..4).map(|i| node(&format!("u{i}"), false)).collect();
        nodes.extend((0..2).map(|i| node(&format!("r{i}"), true)));
        let p = provider(&nodes, 6);
        // Plus healthy unmanaged nodes, so the cluster as a whole stays healthy.
        let mut all = nodes.clone();
        all.extend(
            (0..10)
                .map(|i| Arc::new(NodeBuilder::new(&format!("static{i}"), 4000, 16 * GI).build())),
        );
        let u = s.update(&all, &p, T0);
        assert!(u.status.healthy);
        let g = &u.status.groups[0];
        assert_eq!(g.readiness.unready, 4);
        assert!(g.unhealthy.is_some());
        assert!(
            g.blocked_reason()
                .unwrap()
                .starts_with("node group unhealthy")
        );
    }

    /// A machine that never gets a node after a scale-up of a group with one healthy node: the
    /// target never drops below the instances that exist, the machine is removed once (by name),
    /// and the backoff holds for its full length.
    #[test]
    fn a_never_registering_instance_is_removed_once_and_never_below_the_live_ones() {
        let opts = ClusterStateOptions {
            max_node_provision_time: Duration::from_secs(60),
            ..ClusterStateOptions::default()
        };
        let mut s = ClusterState::new(opts);
        let id = NodeGroupId::from("ng");
        let nodes = vec![node("n1", true)];
        let mut p = provider(&nodes, 2);
        p.groups_mut()[0].push_instance(Instance {
            id: Arc::from("clusterapi://ns/m2"),
            state: InstanceState::Creating,
            error: None,
        });
        s.record_scale_up(&id, 1, T0);
        let mut decrements = 0;
        for step in 1..=60 {
            let now = T0 + step * 5_000;
            let u = s.update(&nodes, &p, now);
            let g = &mut p.groups_mut()[0];
            for a in &u.actions {
                match a {
                    Action::DecreaseTargetSize { delta, .. } => {
                        let live = g
                            .instances()
                            .iter()
                            .filter(|i| i.state != InstanceState::Deleting)
                            .count();
                        assert!(g.target_size() - delta >= live, "at +{}s: {a:?}", step * 5);
                        g.set_target_size(g.target_size() - delta);
                        decrements += delta;
                    }
                    Action::DeleteInstances { instances, .. } => {
                        let mut removed = 0;
                        for i in g
                            .instances_mut()
                            .iter_mut()
                            .filter(|i| instances.contains(&i.id))
                        {
                            assert_ne!(i.state, InstanceState::Deleting, "removed twice");
                            i.state = InstanceState::Deleting;
                            removed += 1;
                        }
                        g.set_target_size(g.target_size() - removed);
                        decrements += removed;
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
            assert!(
                g.target_size() >= 1,
                "at +{}s the target fell under the Ready node",
                step * 5
            );
            // Inside the backoff, the group stays blocked.
            if now < T0 + 60_000 + 5 * MIN {
                let backed_off = u.status.groups[0].backoff.is_some();
                assert!(
                    backed_off || now <= T0 + 60_000,
                    "at +{}s: no backoff",
                    step * 5
                );
            }
        }
        assert_eq!(decrements, 1);
        assert_eq!(p.groups_mut()[0].target_size(), 1);
    }

    #[test]
    fn times_are_formatted_as_rfc3339() {
        assert_eq!(format_time_ms(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_time_ms(1_700_000_000_999), "2023-11-14T22:13:20Z");
        assert_eq!(format_time_ms(951_782_400_000), "2000-02-29T00:00:00Z");
    }
}

//! The actions of the loop carried out as effects, and everything in flight between loops: which
//! nodes are draining (so they are not drained twice nor untainted by the soft-taint cleanup),
//! the [`InFlight`] counts the next loop is given, what each effect's reply means, and the
//! reports that come of it.
//!
//! It decides how an action is carried out (which provider changes, taints and evictions, in
//! what order, what to undo on failure, when a drain gives up) but never what to scale (the
//! core does), never performs an effect (interpreters do) and never reads a clock: every call
//! gets `now_ms`, on any clock that only moves forward, as long as it is the same one.

use std::time::Duration;

use autoscaler_clusterapi::{ClusterApiProvider, ObjectChange, ProviderError};
use autoscaler_core::Action;
use autoscaler_core::ActionError;
use autoscaler_core::InFlight;
use autoscaler_model::Node;
use autoscaler_model::NodeGroupId;
use autoscaler_model::Sym;
use rustc_hash::FxHashMap;

use crate::drain::{Drain, Next, Phase};
use crate::effect::{
    Correction, Effect, EffectKind, Purpose, Reply, Report, Ticket, provider_error,
};
use crate::hold::{Hold, Release, delays_deletion};
use crate::informer::{ClusterLookup, blocking_pods};
use crate::stale_mark::StaleMarks;
use autoscaler_core::PodRef;
use autoscaler_model::TO_BE_DELETED_TAINT;

/// How actions are carried out over time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActuationOptions {
    max_pod_eviction_time_ms: i64,
    pod_gone_slack_ms: i64,
    pod_gone_poll_ms: i64,
    cordon_node_before_terminating: bool,
    node_delete_delay_after_taint_ms: i64,
    node_deletion_delay_timeout_ms: i64,
    expendable_pods_priority_cutoff: i32,
}

/// Why a node is not deleted after all: a pod the decision did not see is on it.
fn not_empty(node: Sym, pod: &autoscaler_core::PodRef) -> ActionError {
    ActionError::new(
        autoscaler_core::ErrorClass::Conflict,
        format!(
            "node {node} is not deleted: pod {}/{} is on it, which the view did not show when its removal was decided",
            pod.namespace, pod.name
        ),
    )
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl ActuationOptions {
    /// `--max-pod-eviction-time`: how long a drain keeps trying evictions a budget refuses.
    /// Evicted pods are waited for up to their grace period and 30 s more, looked at every
    /// second. The delays are upstream's defaults until set; cordoning is off until set (the
    /// binary sets it from `--cordon-node-before-terminating`, whose default is upstream's `true`).
    pub fn new(max_pod_eviction_time: Duration) -> ActuationOptions {
        ActuationOptions {
            max_pod_eviction_time_ms: millis(max_pod_eviction_time),
            pod_gone_slack_ms: 30_000,
            pod_gone_poll_ms: 1_000,
            cordon_node_before_terminating: false,
            node_delete_delay_after_taint_ms: 5_000,
            node_deletion_delay_timeout_ms: 120_000,
            expendable_pods_priority_cutoff: -10,
        }
    }

    /// `--cordon-node-before-terminating`: cordon a node with its deletion taint, and
    /// uncordon it when that taint goes after a failure.
    pub fn cordon_node_before_terminating(mut self, cordon: bool) -> ActuationOptions {
        self.cordon_node_before_terminating = cordon;
        self
    }

    /// `--node-delete-delay-after-taint` (5s): how long after the deletion taint a node's
    /// deletion (or drain) starts, so that the scheduler sees the taint first.
    pub fn node_delete_delay_after_taint(mut self, delay: Duration) -> ActuationOptions {
        self.node_delete_delay_after_taint_ms = millis(delay);
        self
    }

    /// `--node-deletion-delay-timeout` (2m): the longest a deletion waits for the node's
    /// `delay-deletion.cluster-autoscaler.kubernetes.io/*` annotations to go (0: no wait).
    pub fn node_deletion_delay_timeout(mut self, timeout: Duration) -> ActuationOptions {
        self.node_deletion_delay_timeout_ms = millis(timeout);
        self
    }
}

impl ActuationOptions {
    /// `--expendable-pods-priority-cutoff` (-10): a pod with a lower priority goes with its
    /// node, so it never keeps a node whose deletion is about to be sent.
    pub fn expendable_pods_priority_cutoff(mut self, cutoff: i32) -> ActuationOptions {
        self.expendable_pods_priority_cutoff = cutoff;
        self
    }
}

impl Default for ActuationOptions {
    /// Upstream's `--max-pod-eviction-time` of 2 minutes.
    fn default() -> Self {
        ActuationOptions::new(Duration::from_secs(120))
    }
}

/// What a reply is for.
#[derive(Clone, Debug)]
pub(crate) enum Waiting {
    ScaleUp {
        group: NodeGroupId,
        delta: usize,
    },
    /// A step of an atomic scale-up (the run travels with its ticket).
    Atomic(Box<crate::atomic::AtomicRun>),
    Correction {
        group: NodeGroupId,
        correction: Correction,
    },
    Taint {
        node: Sym,
        key: Sym,
        add: bool,
    },
    Untaint,
    Cordon {
        node: Sym,
        cordon: bool,
    },
    Delete {
        group: NodeGroupId,
        nodes: Vec<Sym>,
        empty: bool,
        ready: bool,
        evicted: usize,
    },
    Evict,
    /// The fresh read of the pods on nodes about to be deleted: `drained` for a drain's node,
    /// else empty nodes.
    Read {
        group: NodeGroupId,
        nodes: Vec<Sym>,
        drained: bool,
    },
    /// A status write of the object named (`Kind namespace/name`).
    Status {
        object: String,
    },
}

/// The actuation state of one autoscaler process: drains in flight, effects awaiting replies,
/// reports not taken yet.
#[derive(Clone, Debug, Default)]
pub struct Actuation {
    options: ActuationOptions,
    next_ticket: u64,
    waiting: FxHashMap<Ticket, Waiting>,
    /// In the order they started.
    drains: Vec<Drain>,
    /// Empty-node deletions held before they are sent, in the order they were decided.
    held: Vec<HeldDeletion>,
    reports: Vec<Report>,
    stale_marks: StaleMarks,
}

/// Empty nodes of one group whose deletion waits for its [`Hold`].
#[derive(Clone, Debug)]
struct HeldDeletion {
    group: NodeGroupId,
    nodes: Vec<Sym>,
    hold: Hold,
    /// When to look again.
    check_at_ms: i64,
}

impl Actuation {
    /// Nothing in flight.
    pub fn new(options: ActuationOptions) -> Actuation {
        Actuation {
            options,
            ..Actuation::default()
        }
    }

    /// The deletions in flight, for the next loop (`provider`'s group order).
    pub fn in_flight(&self, provider: &ClusterApiProvider) -> InFlight {
        let mut in_flight = InFlight {
            per_group: vec![0; provider.resources().len()],
            empty: self.held.iter().map(|h| h.nodes.len()).sum(),
            drains: self.drains.len(),
        };
        let drains = self.drains.iter().map(|d| (&d.group, 1));
        let held = self.held.iter().map(|h| (&h.group, h.nodes.len()));
        for (group, n) in drains.chain(held) {
            if let Some(i) = provider.group_index(group.as_str()) {
                in_flight.per_group[i] += n;
            }
        }
        in_flight
    }

    /// Whether `node` has a drain in flight.
    pub fn is_draining(&self, node: &str) -> bool {
        self.drains.iter().any(|d| d.node.as_str() == node)
    }

    /// The nodes with a drain in flight, in the order they started.
    pub fn draining(&self) -> impl Iterator<Item = Sym> + '_ {
        self.drains.iter().map(|d| d.node)
    }

    /// The reports of what actions came to since the last call, in order.
    pub fn take_reports(&mut self) -> Vec<Report> {
        std::mem::take(&mut self.reports)
    }

    /// When a drain would like [`Actuation::step`] to be called (`None`: nothing to wait for
    /// but replies).
    pub fn next_wakeup(&self) -> Option<i64> {
        let held = self.held.iter().map(|h| h.check_at_ms);
        self.drains
            .iter()
            .filter_map(Drain::wakeup)
            .chain(held)
            .min()
    }

    pub(crate) fn report(&mut self, report: Report) {
        self.reports.push(report);
    }

    pub(crate) fn effect(&mut self, waiting: Waiting, kind: EffectKind) -> Effect {
        let ticket = Ticket(self.next_ticket);
        self.next_ticket += 1;
        self.waiting.insert(ticket, waiting);
        Effect { ticket, kind }
    }

    /// Removes the deletion taint of `node` (and uncordons it when it was cordoned with it).
    fn untaint(&mut self, node: Sym) -> Vec<Effect> {
        let mut out = vec![self.effect(Waiting::Untaint, EffectKind::Untaint { node })];
        out.extend(self.cordon(node, false));
        out
    }

    /// Cordons or uncordons `node` with its deletion taint, when the options say so.
    fn cordon(&mut self, node: Sym, cordon: bool) -> Option<Effect> {
        self.options.cordon_node_before_terminating.then(|| {
            let kind = EffectKind::SetUnschedulable {
                node,
                unschedulable: cordon,
            };
            self.effect(Waiting::Cordon { node, cordon }, kind)
        })
    }

    /// The first effects of `action` at `now_ms` (none when it is refused at once, is a
    /// duplicate, or is a drain: drains advance in [`Actuation::step`]).
    pub fn start(
        &mut self,
        action: Action,
        lookup: &mut dyn ClusterLookup,
        now_ms: i64,
    ) -> Vec<Effect> {
        match action {
            Action::IncreaseSize { group, delta, .. } => {
                let changes = lookup.provider().increase_size(group.as_str(), delta);
                match changes {
                    Ok(changes) => {
                        let purpose = Purpose::ScaleUp {
                            group: group.clone(),
                            delta,
                        };
                        let w = Waiting::ScaleUp { group, delta };
                        vec![self.effect(w, EffectKind::Changes { changes, purpose })]
                    }
                    Err(e) => {
                        self.reports.push(Report::ScaleUpFailed {
                            group,
                            delta,
                            error: provider_error(&e),
                            by_provider: true,
                        });
                        Vec::new()
                    }
                }
            }
            Action::AtomicIncreaseSize { request, increases } => {
                self.start_atomic(request, increases, lookup)
            }
            Action::DecreaseTargetSize { group, delta } => {
                let changes = lookup
                    .provider()
                    .decrease_target_size(group.as_str(), delta);
                self.correct(group, Correction::DecreaseTargetSize { delta }, changes)
            }
            Action::DeleteInstances {
                group,
                instances,
                reason,
            } => {
                let ids: Vec<&str> = instances.iter().map(|i| &**i).collect();
                let changes = lookup.provider().delete_instances(group.as_str(), &ids);
                let correction = Correction::DeleteInstances { instances, reason };
                self.correct(group, correction, changes)
            }
            Action::AddTaint { node, taint } => {
                let deletion = taint.key.as_str() == TO_BE_DELETED_TAINT;
                let w = Waiting::Taint {
                    node,
                    key: taint.key,
                    add: true,
                };
                let mut out = vec![self.effect(w, EffectKind::AddTaint { node, taint })];
                if deletion {
                    out.extend(self.cordon(node, true));
                }
                out
            }
            Action::RemoveTaint { node, key } => {
                // A draining node keeps its taints until the drain is over.
                if self.is_draining(node.as_str()) {
                    return Vec::new();
                }
                let w = Waiting::Taint {
                    node,
                    key,
                    add: false,
                };
                let mut out = vec![self.effect(w, EffectKind::RemoveTaint { node, key })];
                if key.as_str() == TO_BE_DELETED_TAINT {
                    out.extend(self.cordon(node, false));
                }
                out
            }
            Action::DeleteEmptyNodes { group, nodes } => {
                let hold = Hold::new(now_ms, self.options.node_delete_delay_after_taint_ms);
                let held = HeldDeletion {
                    group,
                    nodes,
                    hold,
                    check_at_ms: now_ms,
                };
                self.release(held, lookup, now_ms)
            }
            Action::DrainAndDelete {
                group,
                node,
                evict,
                sequential,
            } => {
                if self.is_draining(node.as_str()) {
                    return Vec::new();
                }
                let hold = Hold::new(now_ms, self.options.node_delete_delay_after_taint_ms);
                let deadline = hold
                    .after_taint_ms
                    .saturating_add(self.options.max_pod_eviction_time_ms);
                self.reports.push(Report::DrainStarted {
                    group: group.clone(),
                    node,
                });
                let drain = Drain::new(group, node, evict, sequential, now_ms, deadline, hold);
                self.drains.push(drain);
                Vec::new()
            }
        }
    }

    /// Sends the deletion of held empty nodes once their hold allows (the nodes already gone
    /// are left out), else keeps it held.
    fn release(
        &mut self,
        mut held: HeldDeletion,
        lookup: &mut dyn ClusterLookup,
        now_ms: i64,
    ) -> Vec<Effect> {
        let views = lookup.nodes(&held.nodes);
        let annotated = views.iter().any(|v| delays_deletion(v));
        let timeout_ms = self.options.node_deletion_delay_timeout_ms;
        match held.hold.release(now_ms, annotated, timeout_ms) {
            Release::Wait(at) => {
                held.check_at_ms = at;
                self.held.push(held);
                Vec::new()
            }
            Release::Go { timed_out } => {
                if timed_out {
                    self.delay_timed_out(held.nodes.clone());
                }
                // A pod the view did not show when the deletion was decided (watch events
                // arrive late) may be on a node: that node is not deleted.
                let mut out = Vec::new();
                let cutoff = self.options.expendable_pods_priority_cutoff;
                let left = lookup.pods_left_on(&held.nodes, cutoff);
                let mut nodes = Vec::new();
                for &name in &held.nodes {
                    match left.iter().find(|(n, _)| *n == name) {
                        Some((_, pod)) => {
                            let error = not_empty(name, pod);
                            let group = held.group.clone();
                            out.extend(self.deletion_failed(group, vec![name], error, 0));
                        }
                        None => nodes.push(name),
                    }
                }
                // Nothing is read for nodes gone already: there is nothing left to delete.
                if views.iter().any(|v| nodes.contains(&v.name)) {
                    out.push(self.read_pods(held.group, nodes, false));
                }
                out
            }
        }
    }

    /// The fresh read of the pods on `nodes` that their deletion waits for (see
    /// [`EffectKind::ReadPods`]).
    fn read_pods(&mut self, group: NodeGroupId, nodes: Vec<Sym>, drained: bool) -> Effect {
        let kind = EffectKind::ReadPods {
            nodes: nodes.clone(),
        };
        let w = Waiting::Read {
            group,
            nodes,
            drained,
        };
        self.effect(w, kind)
    }

    /// Deletes the nodes of a fresh read that no blocking pod is on; the others (and all of
    /// them when the read failed) are not deleted, and untainted, as after the view's re-check.
    fn read(
        &mut self,
        group: NodeGroupId,
        nodes: Vec<Sym>,
        drained: bool,
        found: Result<Vec<(Sym, PodRef)>, ActionError>,
        lookup: &mut dyn ClusterLookup,
    ) -> Vec<Effect> {
        let drain = self.drains.iter().position(|d| nodes.contains(&d.node));
        if drained && drain.is_none() {
            // The drain is over already (nothing else ends it while its read is out).
            return Vec::new();
        }
        let drain = drain.filter(|_| drained);
        let evicted = drain.map_or(0, |i| self.drains[i].evicted);
        let mut out = Vec::new();
        let mut free = Vec::new();
        match found {
            Err(error) => {
                let error = ActionError::new(
                    error.class,
                    format!("the pods on the node(s) could not be read before deletion: {error}"),
                );
                match drain {
                    Some(i) => self.give_up(i, error, &mut out),
                    None => out.extend(self.deletion_failed(group, nodes, error, evicted)),
                }
                return out;
            }
            Ok(left) => {
                for name in nodes {
                    match left.iter().find(|(n, _)| *n == name) {
                        Some((_, pod)) => {
                            let error = not_empty(name, pod);
                            match drain {
                                Some(i) => self.give_up(i, error, &mut out),
                                None => out.extend(self.deletion_failed(
                                    group.clone(),
                                    vec![name],
                                    error,
                                    evicted,
                                )),
                            }
                        }
                        None => free.push(name),
                    }
                }
            }
        }
        if free.is_empty() {
            return out;
        }
        let provider = lookup.provider();
        let views = lookup.nodes(&free);
        let effects = self.delete(&provider, group, free, &views, !drained, evicted);
        if let Some(i) = drain
            && !effects
                .iter()
                .any(|e| matches!(e.kind, EffectKind::Changes { .. }))
        {
            // Refused by the provider, or the node is gone already: the drain is over.
            self.drains[i].phase = Phase::Finished;
        }
        out.extend(effects);
        out
    }

    fn delay_timed_out(&mut self, nodes: Vec<Sym>) {
        let timeout_sec = u64::try_from(self.options.node_deletion_delay_timeout_ms / 1000);
        self.reports.push(Report::DeletionDelayTimedOut {
            nodes,
            timeout_sec: timeout_sec.unwrap_or(0),
        });
    }

    fn correct(
        &mut self,
        group: NodeGroupId,
        correction: Correction,
        changes: Result<Vec<ObjectChange>, ProviderError>,
    ) -> Vec<Effect> {
        match changes {
            Ok(changes) => {
                let purpose = Purpose::Correction {
                    group: group.clone(),
                    correction: correction.clone(),
                };
                let w = Waiting::Correction { group, correction };
                vec![self.effect(w, EffectKind::Changes { changes, purpose })]
            }
            Err(e) => {
                self.reports.push(Report::CorrectionFailed {
                    group,
                    correction,
                    error: provider_error(&e),
                });
                Vec::new()
            }
        }
    }

    /// Deletes `views` (the nodes `names` found) through `provider`. Nothing when none was
    /// found (they are gone already); on a refusal, the nodes are untainted.
    fn delete(
        &mut self,
        provider: &ClusterApiProvider,
        group: NodeGroupId,
        names: Vec<Sym>,
        views: &[std::sync::Arc<Node>],
        empty: bool,
        evicted: usize,
    ) -> Vec<Effect> {
        if views.is_empty() {
            return Vec::new();
        }
        let refs: Vec<&Node> = views.iter().map(|n| &**n).collect();
        match provider.delete_nodes(group.as_str(), &refs) {
            Ok(changes) => {
                let purpose = Purpose::DeleteNodes {
                    group: group.clone(),
                    nodes: names.clone(),
                    drained: !empty,
                };
                let w = Waiting::Delete {
                    group,
                    ready: empty || views.iter().all(|v| v.is_ready()),
                    nodes: names,
                    empty,
                    evicted,
                };
                vec![self.effect(w, EffectKind::Changes { changes, purpose })]
            }
            Err(e) => self.deletion_failed(group, names, provider_error(&e), evicted),
        }
    }

    fn deletion_failed(
        &mut self,
        group: NodeGroupId,
        nodes: Vec<Sym>,
        error: ActionError,
        evicted: usize,
    ) -> Vec<Effect> {
        let out = nodes.iter().flat_map(|&n| self.untaint(n)).collect();
        self.reports.push(Report::DeleteFailed {
            group,
            nodes,
            error,
            evicted,
        });
        out
    }

    /// Advances every drain not waiting for a reply: a new round of evictions for the pods not
    /// evicted yet, the look whether evicted pods are gone, the deletion, or giving up. The
    /// simulator calls it every loop; the live shell at [`Actuation::next_wakeup`] too.
    pub fn step(&mut self, lookup: &mut dyn ClusterLookup, now_ms: i64) -> Vec<Effect> {
        let mut out = Vec::new();
        for held in std::mem::take(&mut self.held) {
            out.extend(self.release(held, lookup, now_ms));
        }
        for i in 0..self.drains.len() {
            let next = self.drains[i].step(now_ms);
            self.follow(i, next, lookup, now_ms, &mut out);
        }
        self.drains.retain(|d| d.phase != Phase::Finished);
        out.extend(self.clear_stale_marks(lookup, now_ms));
        out
    }

    /// Whether anything of `group` is in flight: a drain, a held deletion, or an effect
    /// awaiting its reply.
    fn busy(&self, group: &str) -> bool {
        self.drains.iter().any(|d| d.group.as_str() == group)
            || self.held.iter().any(|h| h.group.as_str() == group)
            || self.waiting.values().any(|w| match w {
                Waiting::Atomic(run) if run.touches(group) => true,
                Waiting::ScaleUp { group: g, .. }
                | Waiting::Correction { group: g, .. }
                | Waiting::Delete { group: g, .. }
                | Waiting::Read { group: g, .. } => g.as_str() == group,
                _ => false,
            })
    }

    /// Removes the delete-machine marks that stayed stale for the grace period (see
    /// [`crate::stale_mark`]); each node is untainted once its Machine's mark is gone.
    fn clear_stale_marks(&mut self, lookup: &mut dyn ClusterLookup, now_ms: i64) -> Vec<Effect> {
        let provider = lookup.provider();
        let mut marks = std::mem::take(&mut self.stale_marks);
        let due = marks.due(&provider, &|g| self.busy(g), now_ms);
        self.stale_marks = marks;
        let mut out = Vec::new();
        for mark in due {
            let correction = Correction::ClearStaleMark {
                machine: std::sync::Arc::from(mark.machine.name.as_str()),
                node: mark.node,
            };
            let changes = provider.unmark(mark.group.as_str(), &mark.machine);
            out.extend(self.correct(mark.group, correction, changes));
        }
        out
    }

    /// Feeds the reply to an effect in; returns the effects that follow from it.
    pub fn reply(
        &mut self,
        ticket: Ticket,
        reply: Reply,
        lookup: &mut dyn ClusterLookup,
        now_ms: i64,
    ) -> Vec<Effect> {
        let Some(waiting) = self.waiting.remove(&ticket) else {
            return Vec::new();
        };
        let refused = matches!(reply, Reply::Refused(_));
        let mut pods = Vec::new();
        let error = match reply {
            Reply::Done | Reply::Gone => None,
            Reply::Pods(found) => {
                pods = found;
                None
            }
            Reply::Refused(e) | Reply::Failed(e) => Some(e),
        };
        let mut out = Vec::new();
        match waiting {
            Waiting::Read {
                group,
                nodes,
                drained,
            } => {
                let found = match error {
                    Some(e) => Err(e),
                    None => {
                        let cutoff = self.options.expendable_pods_priority_cutoff;
                        Ok(blocking_pods(pods.iter().map(|p| &**p), &nodes, cutoff))
                    }
                };
                out = self.read(group, nodes, drained, found, lookup);
            }
            Waiting::Status { object } => self.reports.push(match error {
                None => Report::StatusWritten { object },
                Some(error) => Report::StatusWriteFailed { object, error },
            }),
            Waiting::Atomic(run) => out = self.atomic_replied(*run, error, lookup),
            Waiting::ScaleUp { group, delta } => self.reports.push(match error {
                None => Report::ScaledUp { group, delta },
                Some(error) => Report::ScaleUpFailed {
                    group,
                    delta,
                    error,
                    by_provider: false,
                },
            }),
            Waiting::Correction { group, correction } => {
                if let (None, Correction::ClearStaleMark { node: Some(n), .. }) =
                    (&error, &correction)
                {
                    out.extend(self.untaint(*n));
                }
                self.reports.push(match error {
                    None => Report::Corrected { group, correction },
                    Some(error) => Report::CorrectionFailed {
                        group,
                        correction,
                        error,
                    },
                });
            }
            Waiting::Taint { node, key, add } => {
                if let Some(error) = error {
                    self.reports.push(Report::TaintFailed {
                        node,
                        key,
                        add,
                        error,
                    });
                }
            }
            Waiting::Untaint => {}
            Waiting::Cordon { node, cordon } => {
                if let Some(error) = error {
                    self.reports.push(Report::CordonFailed {
                        node,
                        cordon,
                        error,
                    });
                }
            }
            Waiting::Delete {
                group,
                nodes,
                empty,
                ready,
                evicted,
            } => {
                self.finish_drain(&nodes, empty);
                match error {
                    None => self.reports.push(Report::Deleted {
                        group,
                        nodes,
                        empty,
                        ready,
                        evicted,
                    }),
                    Some(error) => out = self.deletion_failed(group, nodes, error, evicted),
                }
            }
            Waiting::Evict => {
                if let Some(i) = self.drains.iter().position(|d| d.is_trying(ticket)) {
                    let result = match error {
                        None => Ok(()),
                        Some(e) => Err((e, refused)),
                    };
                    let next = self.drains[i].answered(ticket, result, now_ms);
                    self.follow(i, next, lookup, now_ms, &mut out);
                }
            }
        }
        self.drains.retain(|d| d.phase != Phase::Finished);
        out
    }

    fn finish_drain(&mut self, nodes: &[Sym], empty: bool) {
        if empty {
            return;
        }
        for d in &mut self.drains {
            if nodes.contains(&d.node) {
                d.phase = Phase::Finished;
            }
        }
    }

    /// Carries out what drain `i` needs next.
    fn follow(
        &mut self,
        i: usize,
        next: Next,
        lookup: &mut dyn ClusterLookup,
        now_ms: i64,
        out: &mut Vec<Effect>,
    ) {
        match next {
            Next::Wait => {}
            Next::Evict(pods) => {
                for pod in pods {
                    let d = &self.drains[i];
                    let kind = EffectKind::Evict {
                        pod: pod.pod.clone(),
                        node: d.node,
                        grace_period_sec: pod.grace_period_sec,
                        deadline_ms: d.deadline_ms,
                    };
                    let e = self.effect(Waiting::Evict, kind);
                    self.drains[i].sent(e.ticket, pod);
                    out.push(e);
                }
            }
            Next::CheckGone => self.check_gone(i, lookup, now_ms, out),
            Next::GiveUp(error) => self.give_up(i, error, out),
        }
    }

    /// Deletes drain `i`'s node once its evicted pods are gone; gives up when they outstay the
    /// wait.
    fn check_gone(
        &mut self,
        i: usize,
        lookup: &mut dyn ClusterLookup,
        now_ms: i64,
        out: &mut Vec<Effect>,
    ) {
        let o = &self.options;
        let d = &mut self.drains[i];
        d.wait_gone(
            now_ms,
            d.longest_grace_ms().saturating_add(o.pod_gone_slack_ms),
        );
        let node = d.node;
        if d.pods
            .iter()
            .any(|p| lookup.pod_on_node(&p.pod, node.as_str()))
        {
            if let Some(error) = d.still_there(now_ms, o.pod_gone_poll_ms) {
                self.give_up(i, error, out);
            }
            return;
        }
        // `--drain-priority-config`: the next stage starts once this one is gone.
        if d.next_stage(now_ms) {
            let next = d.step(now_ms);
            self.follow(i, next, lookup, now_ms, out);
            return;
        }
        let Some(view) = lookup.node(node.as_str()) else {
            // The node is gone already: nothing left to delete.
            d.phase = Phase::Finished;
            return;
        };
        let timeout_ms = o.node_deletion_delay_timeout_ms;
        match d.hold.release(now_ms, delays_deletion(&view), timeout_ms) {
            Release::Wait(at) => {
                d.phase = Phase::Holding { check_at_ms: at };
                return;
            }
            Release::Go { timed_out: true } => self.delay_timed_out(vec![node]),
            Release::Go { timed_out: false } => {}
        }
        // A pod the drain did not know of (the view did not show it when the drain started).
        let cutoff = self.options.expendable_pods_priority_cutoff;
        if let Some((_, pod)) = lookup.pods_left_on(&[node], cutoff).first() {
            self.give_up(i, not_empty(node, pod), out);
            return;
        }
        // Then the fresh read: a pod bound after the view was current (its watch event late).
        let d = &mut self.drains[i];
        d.phase = Phase::Deleting;
        let group = d.group.clone();
        out.push(self.read_pods(group, vec![node], true));
    }

    fn give_up(&mut self, i: usize, error: ActionError, out: &mut Vec<Effect>) {
        let d = &mut self.drains[i];
        d.phase = Phase::Finished;
        let report = Report::DrainFailed {
            group: d.group.clone(),
            node: d.node,
            error,
            evicted: d.evicted,
            refused: d.refused.iter().map(|(p, _)| p.clone()).collect(),
            not_evicted: d.not_evicted(),
        };
        let node = d.node;
        self.reports.push(report);
        out.extend(self.untaint(node));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::informer::{Informer, InformerLookup};
    use autoscaler_clusterapi::ClusterApiConfig;
    use autoscaler_core::{ErrorClass, Outcome};
    use autoscaler_core::{PodEviction, PodRef};
    use autoscaler_model::ObjectKey;
    use autoscaler_model::ObjectStore;
    use std::sync::Arc;

    const SNAPSHOT: &str = include_str!("../../cluster-autoscaler/examples/snapshot.yaml");
    const GENERAL: &str = "MachineDeployment/default/general";

    struct Fixture {
        informer: Informer,
        config: ClusterApiConfig,
    }

    impl Fixture {
        fn new() -> Fixture {
            let mut store = ObjectStore::new();
            store.load_yaml(SNAPSHOT).expect("example snapshot loads");
            Fixture {
                informer: Informer::from_store(&store),
                config: ClusterApiConfig::default(),
            }
        }

        fn lookup(&mut self) -> InformerLookup<'_> {
            InformerLookup::new(&mut self.informer, &self.config)
        }

        /// The pod `name` has left its node (deleted), as after an eviction.
        fn gone(&mut self, name: &str) {
            let key = ObjectKey {
                group: String::new(),
                kind: "Pod".into(),
                namespace: "default".into(),
                name: name.into(),
            };
            self.informer.apply(key, None);
        }
    }

    /// Upstream's defaults but no delay after the taint: deletions and drains start at once.
    fn immediate() -> Actuation {
        Actuation::new(ActuationOptions::default().node_delete_delay_after_taint(Duration::ZERO))
    }

    fn pod(name: &str) -> PodRef {
        PodRef {
            namespace: Sym::new("default"),
            name: Arc::from(name),
        }
    }

    fn drain(node: &str, pods: &[&str], sequential: bool) -> Action {
        Action::DrainAndDelete {
            group: NodeGroupId::from(GENERAL),
            node: Sym::new(node),
            evict: pods
                .iter()
                .map(|p| PodEviction {
                    pod: pod(p),
                    grace_period_sec: 5,
                    stage: 0,
                })
                .collect(),
            sequential,
        }
    }

    fn refused() -> Reply {
        Reply::Refused(ActionError::new(
            ErrorClass::Unavailable,
            "Cannot evict pod as it would violate the pod's disruption budget.",
        ))
    }

    fn evicts(effects: &[Effect]) -> Vec<String> {
        effects
            .iter()
            .filter_map(|e| match e.kind() {
                EffectKind::Evict { pod, .. } => Some(pod.name.to_string()),
                _ => None,
            })
            .collect()
    }

    /// Steps a drain blocked by a budget every 10 s from 0, answering every eviction with a
    /// refusal; the time at which it gave up.
    fn gives_up_at(max_pod_eviction_time: Duration) -> i64 {
        let mut f = Fixture::new();
        let mut a = Actuation::new(
            ActuationOptions::new(max_pod_eviction_time)
                .node_delete_delay_after_taint(Duration::ZERO),
        );
        assert!(
            a.start(drain("general-a", &["web-1"], true), &mut f.lookup(), 0)
                .is_empty()
        );
        for now in (0..600_000).step_by(10_000) {
            for e in a.step(&mut f.lookup(), now) {
                let follow = a.reply(e.ticket(), refused(), &mut f.lookup(), now);
                if let Some(Report::DrainFailed { error, .. }) = a.take_reports().pop() {
                    assert!(
                        error
                            .message
                            .starts_with("evicting default/web-1: Cannot evict")
                    );
                    assert!(
                        matches!(follow.as_slice(), [e] if matches!(e.kind(), EffectKind::Untaint { node } if node.as_str() == "general-a")),
                        "{follow:?}"
                    );
                    assert!(!a.is_draining("general-a"));
                    return now;
                }
            }
        }
        panic!("never gave up");
    }

    #[test]
    fn the_drain_deadline_comes_from_the_options() {
        assert_eq!(gives_up_at(Duration::from_secs(20)), 20_000);
        assert_eq!(gives_up_at(Duration::from_secs(65)), 70_000);
    }

    #[test]
    fn the_deadline_travels_with_each_eviction() {
        let mut f = Fixture::new();
        let mut a = Actuation::new(
            ActuationOptions::new(Duration::from_secs(45))
                .node_delete_delay_after_taint(Duration::ZERO),
        );
        a.start(drain("general-a", &["web-1"], true), &mut f.lookup(), 1_000);
        let effects = a.step(&mut f.lookup(), 1_000);
        assert!(
            matches!(
                effects[0].kind(),
                EffectKind::Evict {
                    deadline_ms: 46_000,
                    grace_period_sec: 5,
                    ..
                }
            ),
            "{effects:?}"
        );
    }

    #[test]
    fn a_drain_evicts_waits_until_the_pods_are_gone_then_deletes() {
        let mut f = Fixture::new();
        let mut a = immediate();
        a.start(drain("general-a", &["web-1"], true), &mut f.lookup(), 0);
        assert!(matches!(
            a.take_reports().as_slice(),
            [Report::DrainStarted { .. }]
        ));
        let e = a.step(&mut f.lookup(), 0);
        assert_eq!(evicts(&e), ["web-1"]);
        // Evicted, but the pod is still on the node: nothing is deleted yet.
        assert!(
            a.reply(e[0].ticket(), Reply::Done, &mut f.lookup(), 0)
                .is_empty()
        );
        assert_eq!(a.next_wakeup(), Some(1_000));
        assert!(a.step(&mut f.lookup(), 1_000).is_empty());
        assert!(a.is_draining("general-a"));
        f.gone("web-1");
        let e = a.step(&mut f.lookup(), 2_000);
        // The node's pods are read afresh first; still draining meanwhile.
        assert!(
            matches!(e.as_slice(), [r] if matches!(r.kind(), EffectKind::ReadPods { nodes } if nodes == &[Sym::new("general-a")])),
            "{e:?}"
        );
        assert!(a.is_draining("general-a"));
        let e = read(&mut a, &mut f, e, 2_000);
        let [delete] = e.as_slice() else {
            panic!("{e:?}")
        };
        let EffectKind::Changes { changes, purpose } = delete.kind() else {
            panic!("{delete:?}")
        };
        assert!(matches!(
            purpose,
            Purpose::DeleteNodes { drained: true, .. }
        ));
        assert!(
            matches!(&changes[0], ObjectChange::AnnotateMachine { key, .. } if key.name == "general-1-a")
        );
        assert!(matches!(
            &changes[1],
            ObjectChange::SetReplicas { replicas: 1, .. }
        ));
        // Still in flight until the deletion is answered.
        assert!(a.is_draining("general-a"));
        assert!(
            a.reply(delete.ticket(), Reply::Done, &mut f.lookup(), 3_000)
                .is_empty()
        );
        assert!(!a.is_draining("general-a"));
        let reports = a.take_reports();
        let [
            r @ Report::Deleted {
                evicted: 1,
                empty: false,
                ..
            },
        ] = reports.as_slice()
        else {
            panic!("{reports:?}")
        };
        assert_eq!(
            r.outcomes(),
            [Outcome::NodeDeleted {
                node: Sym::new("general-a")
            }]
        );
    }

    #[test]
    fn evicted_pods_that_stay_past_their_grace_period_give_the_drain_up() {
        let mut f = Fixture::new();
        let mut a = immediate();
        a.start(drain("general-a", &["web-1"], true), &mut f.lookup(), 0);
        let e = a.step(&mut f.lookup(), 0);
        a.reply(e[0].ticket(), Reply::Done, &mut f.lookup(), 0);
        assert!(a.step(&mut f.lookup(), 34_000).is_empty());
        let e = a.step(&mut f.lookup(), 35_000);
        assert!(matches!(e.as_slice(), [u] if matches!(u.kind(), EffectKind::Untaint { .. })));
        let reports = a.take_reports();
        assert!(
            matches!(reports.as_slice(), [_, Report::DrainFailed { error, evicted: 1, .. }]
                if error.message == "evicted pods still on the node after 35s"),
            "{reports:?}"
        );
    }

    #[test]
    fn each_eviction_carries_its_own_grace_and_the_wait_follows_the_longest() {
        let mut f = Fixture::new();
        let mut a = immediate();
        let evict = [("web-1", 2), ("web-9", 40)]
            .into_iter()
            .map(|(name, grace_period_sec)| PodEviction {
                pod: pod(name),
                grace_period_sec,
                stage: 0,
            })
            .collect();
        let action = Action::DrainAndDelete {
            group: NodeGroupId::from(GENERAL),
            node: Sym::new("general-a"),
            evict,
            sequential: false,
        };
        a.start(action, &mut f.lookup(), 0);
        let e = a.step(&mut f.lookup(), 0);
        let graces: Vec<u64> = e
            .iter()
            .filter_map(|e| match e.kind() {
                EffectKind::Evict {
                    grace_period_sec, ..
                } => Some(*grace_period_sec),
                _ => None,
            })
            .collect();
        assert_eq!(graces, [2, 40]);
        for e in &e {
            a.reply(e.ticket(), Reply::Done, &mut f.lookup(), 0);
        }
        // web-1 still runs: the drain waits 40 s + 30 s, not the shortest grace.
        assert!(a.step(&mut f.lookup(), 69_000).is_empty());
        assert!(a.is_draining("general-a"));
        let e = a.step(&mut f.lookup(), 70_000);
        assert!(matches!(e.as_slice(), [u] if matches!(u.kind(), EffectKind::Untaint { .. })));
        assert!(matches!(a.take_reports().last(),
            Some(Report::DrainFailed { error, .. }) if error.message.contains("after 70s")));
    }

    /// A drain of `general-a` evicting web-1 (grace 2 s) in stage 0 and web-9 (grace 40 s) in
    /// stage 1, as `--drain-priority-config` stages them.
    fn staged() -> (Fixture, Actuation) {
        let mut f = Fixture::new();
        let mut a = immediate();
        let evict = [("web-1", 2, 0), ("web-9", 40, 1)]
            .into_iter()
            .map(|(name, grace_period_sec, stage)| PodEviction {
                pod: pod(name),
                grace_period_sec,
                stage,
            })
            .collect();
        let action = Action::DrainAndDelete {
            group: NodeGroupId::from(GENERAL),
            node: Sym::new("general-a"),
            evict,
            sequential: false,
        };
        a.start(action, &mut f.lookup(), 0);
        (f, a)
    }

    /// Upstream's priority evictor: a stage is evicted, then waited for until its pods are
    /// gone, and only then is the next stage evicted.
    #[test]
    fn a_staged_drain_evicts_the_next_stage_once_the_previous_is_gone() {
        let (mut f, mut a) = staged();
        let e = a.step(&mut f.lookup(), 0);
        assert_eq!(evicts(&e), ["web-1"], "stage 0 alone");
        for e in &e {
            a.reply(e.ticket(), Reply::Done, &mut f.lookup(), 0);
        }
        // web-1 still runs: stage 1 waits.
        assert!(evicts(&a.step(&mut f.lookup(), 1_000)).is_empty());
        f.gone("web-1");
        let e = a.step(&mut f.lookup(), 6_000);
        assert_eq!(evicts(&e), ["web-9"], "{e:?}");
        assert!(matches!(
            e[0].kind(),
            EffectKind::Evict {
                grace_period_sec: 40,
                ..
            }
        ));
        assert!(a.is_draining("general-a"));
    }

    /// A stage whose pods outstay their grace and the margin fails the drain; the later stages
    /// are never evicted.
    #[test]
    fn a_stage_that_never_leaves_fails_the_drain_before_the_next() {
        let (mut f, mut a) = staged();
        let e = a.step(&mut f.lookup(), 0);
        for e in &e {
            a.reply(e.ticket(), Reply::Done, &mut f.lookup(), 0);
        }
        let mut evicted = Vec::new();
        for now in (1_000..=40_000).step_by(1_000) {
            evicted.extend(evicts(&a.step(&mut f.lookup(), now)));
        }
        assert!(evicted.is_empty(), "{evicted:?}");
        assert!(!a.is_draining("general-a"));
        assert!(matches!(a.take_reports().last(),
            Some(Report::DrainFailed { error, not_evicted: 1, .. })
                if error.message.contains("after 32s")));
    }

    /// The fixture's view, with a delay-deletion annotation on every node while `annotated`.
    struct Annotated<'a> {
        inner: InformerLookup<'a>,
        annotated: bool,
    }

    impl Annotated<'_> {
        fn annotate(&self, node: Arc<Node>) -> Arc<Node> {
            if !self.annotated {
                return node;
            }
            let mut n = (*node).clone();
            let key = "delay-deletion.cluster-autoscaler.kubernetes.io/flush";
            n.annotations.push((Arc::from(key), Arc::from("")));
            Arc::new(n)
        }
    }

    impl ClusterLookup for Annotated<'_> {
        fn provider(&mut self) -> Arc<ClusterApiProvider> {
            self.inner.provider()
        }
        fn node(&self, name: &str) -> Option<Arc<Node>> {
            self.inner.node(name).map(|n| self.annotate(n))
        }
        fn nodes(&self, names: &[Sym]) -> Vec<Arc<Node>> {
            let nodes = self.inner.nodes(names);
            nodes.into_iter().map(|n| self.annotate(n)).collect()
        }
        fn pod_on_node(&self, pod: &PodRef, node: &str) -> bool {
            self.inner.pod_on_node(pod, node)
        }
        fn pods_left_on(&self, nodes: &[Sym], cutoff: i32) -> Vec<(Sym, PodRef)> {
            self.inner.pods_left_on(nodes, cutoff)
        }
    }

    fn held(f: &mut Fixture, annotated: bool) -> Annotated<'_> {
        Annotated {
            inner: f.lookup(),
            annotated,
        }
    }

    /// Answers the fresh reads among `effects` with the fixture's pods as the truth; the other
    /// effects, and those that follow the reads, in order.
    fn read(a: &mut Actuation, f: &mut Fixture, effects: Vec<Effect>, now: i64) -> Vec<Effect> {
        let mut out = Vec::new();
        for e in effects {
            match e.kind() {
                EffectKind::ReadPods { nodes } => {
                    let pods = Reply::Pods(f.informer.pods_on(nodes));
                    out.extend(a.reply(e.ticket(), pods, &mut f.lookup(), now));
                }
                _ => out.push(e),
            }
        }
        out
    }

    fn deletes(effects: &[Effect]) -> bool {
        effects.iter().any(|e| {
            matches!(
                e.kind(),
                EffectKind::Changes {
                    purpose: Purpose::DeleteNodes { .. },
                    ..
                }
            )
        })
    }

    fn delete_empty(node: &str) -> Action {
        Action::DeleteEmptyNodes {
            group: NodeGroupId::from(GENERAL),
            nodes: vec![Sym::new(node)],
        }
    }

    #[test]
    fn an_empty_node_is_deleted_only_after_the_delay_after_its_taint() {
        let mut f = Fixture::new();
        // general-b is empty.
        f.gone("web-2");
        let mut a = Actuation::default();
        assert!(
            a.start(delete_empty("general-b"), &mut f.lookup(), 0)
                .is_empty()
        );
        // Counted in flight meanwhile, so the next loop neither repeats it nor goes below min.
        let provider = f.lookup().provider();
        let in_flight = a.in_flight(&provider);
        assert_eq!(in_flight.empty, 1);
        assert_eq!(in_flight.per_group.iter().sum::<usize>(), 1);
        assert_eq!(a.next_wakeup(), Some(5_000));
        assert!(a.step(&mut f.lookup(), 4_999).is_empty());
        let e = a.step(&mut f.lookup(), 5_000);
        assert!(deletes(&read(&mut a, &mut f, e, 5_000)));
        assert_eq!(a.in_flight(&provider).empty, 0);
        // Configured: 30 s.
        let options =
            ActuationOptions::default().node_delete_delay_after_taint(Duration::from_secs(30));
        let mut a = Actuation::new(options);
        a.start(delete_empty("general-b"), &mut f.lookup(), 0);
        assert!(a.step(&mut f.lookup(), 29_999).is_empty());
        let e = a.step(&mut f.lookup(), 30_000);
        assert!(deletes(&read(&mut a, &mut f, e, 30_000)));
    }

    #[test]
    fn a_delay_deletion_annotation_holds_the_deletion_until_removed_or_timed_out() {
        let mut f = Fixture::new();
        // general-b is empty.
        f.gone("web-2");
        let mut a = immediate();
        assert!(
            a.start(delete_empty("general-b"), &mut held(&mut f, true), 0)
                .is_empty()
        );
        assert!(a.step(&mut held(&mut f, true), 60_000).is_empty());
        // The annotation removed: deleted at the next look (every 5 s).
        assert_eq!(a.next_wakeup(), Some(65_000));
        let e = a.step(&mut held(&mut f, false), 65_000);
        assert!(deletes(&read(&mut a, &mut f, e, 65_000)));
        assert!(a.take_reports().is_empty());
        // Never removed: deleted at --node-deletion-delay-timeout, with a report.
        let options = ActuationOptions::default()
            .node_delete_delay_after_taint(Duration::ZERO)
            .node_deletion_delay_timeout(Duration::from_secs(30));
        let mut a = Actuation::new(options);
        a.start(delete_empty("general-b"), &mut held(&mut f, true), 0);
        assert!(a.step(&mut held(&mut f, true), 29_999).is_empty());
        let e = a.step(&mut held(&mut f, true), 30_000);
        assert!(deletes(&read(&mut a, &mut f, e, 30_000)));
        assert!(matches!(a.take_reports().as_slice(),
            [Report::DeletionDelayTimedOut { nodes, timeout_sec: 30 }] if nodes == &[Sym::new("general-b")]));
        // A drained node waits too, after its pods are gone.
        let mut a = immediate();
        a.start(
            drain("general-a", &["web-1"], true),
            &mut held(&mut f, true),
            0,
        );
        let e = a.step(&mut held(&mut f, true), 0);
        a.reply(e[0].ticket(), Reply::Gone, &mut held(&mut f, true), 0);
        f.gone("web-1");
        assert!(a.step(&mut held(&mut f, true), 1_000).is_empty());
        assert!(a.is_draining("general-a"));
        assert!(a.step(&mut held(&mut f, true), 50_000).is_empty());
        let e = a.step(&mut held(&mut f, false), 55_000);
        assert!(deletes(&read(&mut a, &mut f, e, 55_000)));
    }

    #[test]
    fn a_drain_starts_evicting_after_the_delay_after_the_taint() {
        let mut f = Fixture::new();
        let mut a = Actuation::default();
        a.start(drain("general-a", &["web-1"], true), &mut f.lookup(), 0);
        assert!(a.step(&mut f.lookup(), 0).is_empty());
        assert_eq!(a.next_wakeup(), Some(5_000));
        assert_eq!(evicts(&a.step(&mut f.lookup(), 5_000)), ["web-1"]);
    }

    #[test]
    fn cordoning_comes_with_the_deletion_taint_and_goes_with_it_on_failure() {
        let kinds = |effects: &[Effect]| -> Vec<String> {
            effects
                .iter()
                .map(|e| match e.kind() {
                    EffectKind::AddTaint { taint, .. } => format!("taint {}", taint.key),
                    EffectKind::Untaint { .. } => "untaint".into(),
                    EffectKind::SetUnschedulable { unschedulable, .. } => {
                        format!("unschedulable={unschedulable}")
                    }
                    other => format!("{other:?}"),
                })
                .collect()
        };
        let mut f = Fixture::new();
        // general-b is empty.
        f.gone("web-2");
        let hard = Action::AddTaint {
            node: Sym::new("general-b"),
            taint: autoscaler_core::to_be_deleted_taint(0),
        };
        let soft = Action::AddTaint {
            node: Sym::new("general-b"),
            taint: autoscaler_core::deletion_candidate_taint(0),
        };
        let options = ActuationOptions::default()
            .node_delete_delay_after_taint(Duration::ZERO)
            .cordon_node_before_terminating(true);
        let mut a = Actuation::new(options);
        assert_eq!(
            kinds(&a.start(hard.clone(), &mut f.lookup(), 0)),
            ["taint ToBeDeletedByClusterAutoscaler", "unschedulable=true"]
        );
        assert_eq!(
            kinds(&a.start(soft, &mut f.lookup(), 0)),
            ["taint DeletionCandidateOfClusterAutoscaler"]
        );
        let e = a.start(delete_empty("general-b"), &mut f.lookup(), 0);
        let failed = Reply::Failed(ActionError::new(ErrorClass::Forbidden, "403"));
        let e = a.reply(e[0].ticket(), failed, &mut f.lookup(), 0);
        assert_eq!(kinds(&e), ["untaint", "unschedulable=false"]);
        // A failed cordon is reported.
        let cordon = a.start(hard.clone(), &mut f.lookup(), 0);
        let failed = Reply::Failed(ActionError::new(ErrorClass::Forbidden, "403"));
        a.reply(cordon[1].ticket(), failed, &mut f.lookup(), 0);
        assert!(matches!(
            a.take_reports().last(),
            Some(Report::CordonFailed { cordon: true, .. })
        ));
        // Off by default.
        assert_eq!(kinds(&immediate().start(hard, &mut f.lookup(), 0)).len(), 1);
    }

    #[test]
    fn a_sequential_drain_evicts_one_at_a_time_and_a_refusal_holds_the_rest() {
        let mut f = Fixture::new();
        let mut a = immediate();
        a.start(
            drain("general-a", &["web-1", "web-9", "web-8"], true),
            &mut f.lookup(),
            0,
        );
        let e = a.step(&mut f.lookup(), 0);
        assert_eq!(evicts(&e), ["web-1"]);
        let e = a.reply(e[0].ticket(), Reply::Gone, &mut f.lookup(), 0);
        assert_eq!(evicts(&e), ["web-9"]);
        assert!(
            a.reply(e[0].ticket(), refused(), &mut f.lookup(), 0)
                .is_empty()
        );
        // The next step tries the refused pod again first, and only it.
        let e = a.step(&mut f.lookup(), 10_000);
        assert_eq!(evicts(&e), ["web-9"]);
        // In parallel, every pod is tried at once.
        let mut b = immediate();
        b.start(
            drain("general-a", &["web-1", "web-9"], false),
            &mut f.lookup(),
            0,
        );
        assert_eq!(evicts(&b.step(&mut f.lookup(), 0)), ["web-1", "web-9"]);
    }

    #[test]
    fn a_failed_eviction_gives_up_at_once() {
        let mut f = Fixture::new();
        let mut a = immediate();
        a.start(drain("general-a", &["web-1"], true), &mut f.lookup(), 0);
        let e = a.step(&mut f.lookup(), 0);
        let failed = Reply::Failed(ActionError::new(ErrorClass::Forbidden, "forbidden"));
        let e = a.reply(e[0].ticket(), failed, &mut f.lookup(), 0);
        assert!(matches!(e.as_slice(), [u] if matches!(u.kind(), EffectKind::Untaint { .. })));
        assert!(matches!(a.take_reports().last(),
            Some(Report::DrainFailed { error, refused, not_evicted: 1, .. })
                if error.class == ErrorClass::Forbidden && refused == &[pod("web-1")]));
    }

    #[test]
    fn a_pod_the_decision_did_not_see_keeps_its_node() {
        // general-b looked empty when its deletion was decided; web-2 (bound before the
        // taint, its watch event late) is there when the deletion would go.
        let mut f = Fixture::new();
        let mut a = Actuation::default();
        f.gone("web-2");
        assert!(
            a.start(delete_empty("general-b"), &mut f.lookup(), 0)
                .is_empty()
        );
        let mut late = Fixture::new();
        let e = a.step(&mut late.lookup(), 5_000);
        assert!(!deletes(&e), "{e:?}");
        assert!(
            matches!(e.as_slice(), [u] if matches!(u.kind(), EffectKind::Untaint { node } if node.as_str() == "general-b")),
            "{e:?}"
        );
        let reports = a.take_reports();
        let [r @ Report::DeleteFailed { nodes, error, .. }] = reports.as_slice() else {
            panic!("{reports:?}")
        };
        assert_eq!(nodes, &[Sym::new("general-b")]);
        assert!(error.message.contains("default/web-2"), "{}", error.message);
        assert_eq!(
            r.outcomes(),
            [Outcome::NodeDeletionFailed {
                node: Sym::new("general-b")
            }]
        );
        assert!(a.in_flight(&late.lookup().provider()).empty == 0);
        // A drain gives up on a pod it did not know of, once its own are gone.
        let mut a = immediate();
        let mut f = Fixture::new();
        a.start(drain("general-a", &["web-1"], true), &mut f.lookup(), 0);
        let e = a.step(&mut f.lookup(), 0);
        a.reply(e[0].ticket(), Reply::Gone, &mut f.lookup(), 0);
        f.gone("web-1");
        let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "late", "namespace": "default",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "web", "uid": "rs-web", "controller": true}]},
            "spec": {"nodeName": "general-a",
                "containers": [{"name": "web", "image": "nginx"}]}});
        let key = ObjectStore::key_of(&pod, "t").unwrap();
        f.informer.apply(key, Some(Arc::new(pod)));
        let e = a.step(&mut f.lookup(), 1_000);
        assert!(!deletes(&e), "{e:?}");
        assert!(!a.is_draining("general-a"));
        assert!(a.take_reports().iter().any(|r| matches!(r,
            Report::DrainFailed { error, .. } if error.message.contains("default/late"))));
    }

    /// A pod object bound to `node`, owned by `owner` (kind), in `phase`.
    fn bound_pod(name: &str, node: &str, owner: &str, phase: &str) -> Arc<autoscaler_model::Pod> {
        let mut pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": name,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner,
                    "name": "o", "uid": "o", "controller": true}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx"}]},
            "status": {"phase": phase}});
        // "Batch" pods run below the default expendable cutoff (-10).
        if owner == "Batch" {
            pod["spec"]["priority"] = serde_json::json!(-20);
            pod["metadata"]["ownerReferences"][0]["kind"] = serde_json::json!("ReplicaSet");
        }
        Arc::new(crate::informer::pod_view(&pod).expect("the pod converts"))
    }

    #[test]
    fn a_pod_only_the_fresh_read_shows_keeps_its_node() {
        // general-b is empty in the view all along; the truth has a pod the scheduler bound
        // there after the decision, whose watch event has not arrived.
        let mut f = Fixture::new();
        f.gone("web-2");
        let mut a = immediate();
        let e = a.start(delete_empty("general-b"), &mut f.lookup(), 0);
        let [r] = e.as_slice() else { panic!("{e:?}") };
        assert!(
            matches!(r.kind(), EffectKind::ReadPods { nodes } if nodes == &[Sym::new("general-b")])
        );
        // Pods that do not block: a DaemonSet's, a finished one, an expendable one.
        let harmless = vec![
            bound_pod("ds", "general-b", "DaemonSet", "Running"),
            bound_pod("done", "general-b", "ReplicaSet", "Succeeded"),
            bound_pod("batch", "general-b", "Batch", "Running"),
        ];
        let mut truth = harmless.clone();
        truth.push(bound_pod("late", "general-b", "ReplicaSet", "Running"));
        let e = a.reply(r.ticket(), Reply::Pods(truth), &mut f.lookup(), 0);
        assert!(!deletes(&e), "{e:?}");
        assert!(
            matches!(e.as_slice(), [u] if matches!(u.kind(), EffectKind::Untaint { node } if node.as_str() == "general-b")),
            "{e:?}"
        );
        let reports = a.take_reports();
        assert!(
            matches!(reports.as_slice(), [Report::DeleteFailed { nodes, error, .. }]
                if nodes == &[Sym::new("general-b")] && error.message.contains("default/late")),
            "{reports:?}"
        );
        // Only harmless pods: deleted.
        let e = a.start(delete_empty("general-b"), &mut f.lookup(), 0);
        let e = a.reply(e[0].ticket(), Reply::Pods(harmless), &mut f.lookup(), 0);
        assert!(deletes(&e), "{e:?}");
        // The read failed: not deleted either.
        let e = a.start(delete_empty("general-b"), &mut f.lookup(), 0);
        let failed = Reply::Failed(ActionError::new(ErrorClass::Unavailable, "timeout"));
        let e = a.reply(e[0].ticket(), failed, &mut f.lookup(), 0);
        assert!(!deletes(&e), "{e:?}");
        assert!(matches!(a.take_reports().last(),
            Some(Report::DeleteFailed { error, .. }) if error.class == ErrorClass::Unavailable));
        // A drain whose view shows its node empty gives up on a pod only the truth has.
        let mut a = immediate();
        a.start(drain("general-a", &["web-1"], true), &mut f.lookup(), 0);
        let e = a.step(&mut f.lookup(), 0);
        a.reply(e[0].ticket(), Reply::Gone, &mut f.lookup(), 0);
        f.gone("web-1");
        let e = a.step(&mut f.lookup(), 1_000);
        let [r] = e.as_slice() else { panic!("{e:?}") };
        let truth = vec![bound_pod("late", "general-a", "ReplicaSet", "Pending")];
        let e = a.reply(r.ticket(), Reply::Pods(truth), &mut f.lookup(), 1_000);
        assert!(!deletes(&e), "{e:?}");
        assert!(!a.is_draining("general-a"));
        assert!(a.take_reports().iter().any(|r| matches!(r,
            Report::DrainFailed { error, .. } if error.message.contains("default/late"))));
    }

    #[test]
    fn a_failed_deletion_untaints_and_is_a_failed_deletion_for_the_core() {
        let mut f = Fixture::new();
        // general-b is empty.
        f.gone("web-2");
        let mut a = immediate();
        let action = Action::DeleteEmptyNodes {
            group: NodeGroupId::from(GENERAL),
            nodes: vec![Sym::new("general-b")],
        };
        let e = a.start(action, &mut f.lookup(), 0);
        let e = read(&mut a, &mut f, e, 0);
        assert!(matches!(
            e[0].kind(),
            EffectKind::Changes {
                purpose: Purpose::DeleteNodes { drained: false, .. },
                ..
            }
        ));
        let forbidden = Reply::Failed(ActionError::new(ErrorClass::Forbidden, "403"));
        let e = a.reply(e[0].ticket(), forbidden, &mut f.lookup(), 0);
        assert!(
            matches!(e.as_slice(), [u] if matches!(u.kind(), EffectKind::Untaint { node } if node.as_str() == "general-b"))
        );
        let reports = a.take_reports();
        let [r @ Report::DeleteFailed { error, .. }] = reports.as_slice() else {
            panic!("{reports:?}")
        };
        assert_eq!(error.class, ErrorClass::Forbidden);
        assert_eq!(
            r.outcomes(),
            [Outcome::NodeDeletionFailed {
                node: Sym::new("general-b")
            }]
        );
    }

    #[test]
    fn a_draining_node_is_not_drained_twice_nor_untainted_and_counts_in_flight() {
        let mut f = Fixture::new();
        let mut a = immediate();
        a.start(drain("general-a", &["web-1"], true), &mut f.lookup(), 0);
        assert!(
            a.start(drain("general-a", &["web-1"], true), &mut f.lookup(), 0)
                .is_empty()
        );
        assert_eq!(a.take_reports().len(), 1, "one drain started");
        let untaint = |node: &str| Action::RemoveTaint {
            node: Sym::new(node),
            key: Sym::new("DeletionCandidateOfClusterAutoscaler"),
        };
        assert!(a.start(untaint("general-a"), &mut f.lookup(), 0).is_empty());
        assert_eq!(a.start(untaint("general-b"), &mut f.lookup(), 0).len(), 1);
        let provider = f.lookup().provider();
        let in_flight = a.in_flight(&provider);
        let i = provider.group_index(GENERAL).expect("general");
        assert_eq!(in_flight.drains, 1);
        assert_eq!(in_flight.per_group[i], 1);
        assert_eq!(in_flight.per_group.iter().sum::<usize>(), 1);
    }

    #[test]
    fn provider_refusals_are_typed_outcomes() {
        let mut f = Fixture::new();
        let mut a = immediate();
        let grow = |group: &str, delta| Action::IncreaseSize {
            group: NodeGroupId::from(group),
            delta,
            new_target: 0,
        };
        a.start(grow(GENERAL, 100), &mut f.lookup(), 0);
        a.start(
            grow("MachineDeployment/default/nope", 1),
            &mut f.lookup(),
            0,
        );
        let shrink = Action::DecreaseTargetSize {
            group: NodeGroupId::from(GENERAL),
            delta: 1,
        };
        assert!(a.start(shrink, &mut f.lookup(), 0).is_empty());
        let classes: Vec<ErrorClass> = a
            .take_reports()
            .iter()
            .map(|r| match r {
                Report::ScaleUpFailed {
                    error,
                    by_provider: true,
                    ..
                }
                | Report::CorrectionFailed { error, .. } => error.class,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            classes,
            [
                ErrorClass::Invalid,
                ErrorClass::NotFound,
                ErrorClass::RefusedBySafety
            ]
        );
        // A scale-up the API refused is a failure for the core, with its class.
        let e = a.start(grow(GENERAL, 1), &mut f.lookup(), 0);
        let forbidden = ActionError::new(ErrorClass::Forbidden, "403 forbidden");
        a.reply(
            e[0].ticket(),
            Reply::Failed(forbidden.clone()),
            &mut f.lookup(),
            0,
        );
        let reports = a.take_reports();
        assert_eq!(
            reports[0].outcomes(),
            [Outcome::ScaleUpFailed {
                group: NodeGroupId::from(GENERAL),
                error: forbidden
            }]
        );
    }
}

//! The simulation driver: runs the real decision core (`Autoscaler::run_once`) every scan
//! interval of virtual time against the simulated world, and applies each action to the world
//! the way the live shell would (scale subresource, taints, Eviction API, Machine annotations).
//!
//! It is the synchronous interpreter of the effects `autoscaler_actuation` turns actions into
//! (the same code the live shell interprets over the API): it carries each effect out on the
//! world at once, answers, and records what happened for the report. It never decides what to
//! scale (the core does) nor how an action is carried out (actuation does), and never reads
//! the real clock.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use autoscaler_actuation::{
    Actuation, Correction, Effect, EffectKind, InformerLookup, Purpose, Reply, Report,
};
use autoscaler_clusterapi::{ClusterApiConfig, ClusterApiProvider};
use autoscaler_clusterapi::{ObjectChange, ReplicasBase};
use autoscaler_core::Action;
use autoscaler_core::LoopOutcome;
use autoscaler_core::{ActionError, ErrorClass};
use autoscaler_core::{Autoscaler, AutoscalerOptions, ClusterView, LoopInput};
use autoscaler_model::ObjectKey;
use autoscaler_model::TO_BE_DELETED_TAINT;
use autoscaler_model::{
    CLUSTER_UNHEALTHY, FAILED_TO_SCALE_UP_GROUP, FIX_NODE_GROUP_SIZE, SCALE_UP_FAILED,
    SCALE_UP_TIMED_OUT,
};
use autoscaler_world::{FaultKind, Metrics, Restart, SimTime, World, WorldConfig, WorldError};
use serde_json::Value;

use super::informer::Informer;
use super::scenario::{Scenario, TimedPod, group_object};
use super::trace::{TraceError, TraceFeed};

mod capacity;

/// The autoscaler's namespace (upstream's `--namespace` default), where the priority
/// expander's ConfigMap is read, as the live shell reads it.
const NAMESPACE: &str = "kube-system";

/// The cluster name of the simulated Cluster API objects.
const CLUSTER: &str = "sim";

/// Why a simulation could not start.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The world refused an object of the scenario.
    #[error("scenario object {what}: {source}")]
    World {
        /// Which object.
        what: String,
        /// Why.
        source: WorldError,
    },
}

/// What happened to one node group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupLog {
    /// Scale-ups applied.
    pub scale_ups: u64,
    /// Nodes asked for by them.
    pub nodes_added: u64,
    /// Scale-ups the API refused.
    pub scale_up_errors: u64,
    /// Nodes removed by scale-down (empty or drained).
    pub nodes_removed: u64,
    /// Machines seen failed (stockouts).
    pub failed_provisionings: u64,
    /// Broken instances removed (`DeleteInstances`).
    pub instances_deleted: u64,
    /// Target decreases applied (`DecreaseTargetSize`).
    pub target_decreases: u64,
    /// Stale delete-machine marks removed (`ClearStaleMark`).
    pub stale_marks_cleared: u64,
}

/// A failure of a group and whether (and when) another group was grown after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fallback {
    /// The group that failed.
    pub group: String,
    /// When the failure was first seen.
    pub failed_at_ms: SimTime,
    /// The group grown instead, and when.
    pub fell_back: Option<(String, SimTime)>,
}

/// Everything the report is built from.
#[derive(Clone, Debug, Default)]
pub struct RunLog {
    /// The world's samples and pod waits.
    pub metrics: Metrics,
    /// Loops run.
    pub loops: u64,
    /// Per group (`namespace/name`).
    pub groups: BTreeMap<String, GroupLog>,
    /// Pods evicted.
    pub evictions: u64,
    /// Evictions refused by a budget (retried later).
    pub eviction_refusals: u64,
    /// Evictions or deletions after which a budget had fewer healthy pods than it requires
    /// while it had enough before.
    pub pdb_violations: u64,
    /// Drains started.
    pub drains: u64,
    /// Drains given up.
    pub drains_failed: u64,
    /// Failures and fallbacks.
    pub fallbacks: Vec<Fallback>,
    /// Actions that could not be applied, with why (first 50).
    pub errors: Vec<String>,
    /// How many actions could not be applied.
    pub error_count: u64,
    /// Pods never started by the end (still pending).
    pub pending_at_end: usize,
    /// Pods created in total (workload controllers and replay).
    pub pods_created: usize,
    /// Events the core emitted, with the virtual time of their loop (a `ClusterUnhealthy`
    /// repeated in consecutive loops is kept once).
    pub events: Vec<CoreEvent>,
    /// Loops in which the cluster was not ready for autoscaling.
    pub unhealthy_loops: u64,
    /// Each new backoff (or extension) of a group, as the core's status shows it.
    pub backoffs: Vec<BackoffLog>,
    /// Virtual times at which the autoscaler was restarted.
    pub restarts: Vec<SimTime>,
    /// The safety invariants checked on every loop.
    pub safety: super::safety::SafetyLog,
    /// Nodes removed by scale-down, as (virtual time, count), one entry per instant.
    pub removals: Vec<(SimTime, u64)>,
    /// The pods still pending at the end, grouped by why.
    pub never_started: Vec<NeverStarted>,
    /// The jobs that arrived through ProvisioningRequests, in arrival order.
    pub requests: Vec<super::arrival::RequestLog>,
    /// The ready CapacityBuffers (`namespace/name`) with their replicas, as last resolved.
    pub buffers: BTreeMap<String, u32>,
}

/// Pods that never started, grouped by the same reasons.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NeverStarted {
    /// The scheduler's last message on them (its Unschedulable condition), if it wrote one.
    pub scheduler: Option<String>,
    /// What the autoscaler's last loop said of them: its `NotTriggerScaleUp` message, why it
    /// set them aside, or nothing when it did not consider them.
    pub autoscaler: Option<String>,
    /// How many pods.
    pub pods: usize,
    /// The first of them (`namespace/name`).
    pub examples: Vec<String>,
}

/// How many pods of a [`NeverStarted`] group are named.
const NEVER_STARTED_EXAMPLES: usize = 3;

/// The pods pending at the end, grouped by (scheduler message, autoscaler message), largest
/// groups first; `said` holds the autoscaler's last word per pod.
fn never_started(
    pending: Vec<(String, Option<String>)>,
    said: &BTreeMap<String, String>,
) -> Vec<NeverStarted> {
    let mut by: BTreeMap<(Option<String>, Option<String>), NeverStarted> = BTreeMap::new();
    for (pod, scheduler) in pending {
        let autoscaler = said.get(&pod).cloned();
        let g = by
            .entry((scheduler.clone(), autoscaler.clone()))
            .or_insert_with(|| NeverStarted {
                scheduler,
                autoscaler,
                ..NeverStarted::default()
            });
        g.pods += 1;
        if g.examples.len() < NEVER_STARTED_EXAMPLES {
            g.examples.push(pod);
        }
    }
    let mut out: Vec<NeverStarted> = by.into_values().collect();
    out.sort_by_key(|g| std::cmp::Reverse(g.pods));
    out
}

/// The autoscaler's word on each pending pod it looked at in one loop: upstream's
/// `NotTriggerScaleUp` event message, or why the pod was set aside.
fn autoscaler_words(outcome: &LoopOutcome) -> BTreeMap<String, String> {
    let up = &outcome.scale_up;
    let mut out = BTreeMap::new();
    for n in &up.result.no_scale_up {
        let reasons: Vec<String> = n.reasons.iter().map(|(g, r)| format!("{g}: {r}")).collect();
        let message = if reasons.is_empty() {
            "pod didn't trigger scale-up: no node group can be grown".to_string()
        } else {
            format!("pod didn't trigger scale-up: {}", reasons.join("; "))
        };
        out.insert(n.pod.key().to_string(), message);
    }
    for (pod, why) in &up.set_aside {
        out.insert(pod.key().to_string(), format!("not acted on: {why}"));
    }
    out
}

/// An event of the core at a virtual time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreEvent {
    /// Virtual time of the loop.
    pub at_ms: SimTime,
    /// Reason (`ScaledUpGroup`, `ScaleUpTimedOut`, ...).
    pub reason: String,
    /// Group (`namespace/name`) or `cluster`.
    pub object: String,
    /// Message.
    pub message: String,
}

/// A backoff of a group seen in the core's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackoffLog {
    /// Virtual time of the loop that first showed it.
    pub at_ms: SimTime,
    /// Group (`namespace/name`).
    pub group: String,
    /// Failures since the last reset.
    pub failures: u32,
    /// The failure that started (or extended) it, virtual time.
    pub failed_at_ms: SimTime,
    /// End of the backoff, virtual time.
    pub until_ms: SimTime,
    /// Failure code (`timeout`, the Machine's failure reason, `cloudProviderError`).
    pub code: String,
}

/// The world's objects and the loop's decision at one instant (`simulate --snapshot-at`).
#[derive(Clone, Debug, Default)]
pub struct SnapshotTaken {
    /// Virtual time of the loop.
    pub at_ms: SimTime,
    /// The loop's clock, milliseconds since the Unix epoch (what `plan --now` is given).
    pub now_ms: i64,
    /// Every object the loop read, as multi-document YAML.
    pub yaml: String,
    /// The actions the loop decided, described as `plan` describes them.
    pub actions: Vec<String>,
}

/// The driver: a world, the autoscaler and what is in flight.
pub struct Driver<'a> {
    scenario: &'a Scenario,
    /// The most pods a run may hold at once ([`super::cost::MAX_PODS_AT_ONCE`]).
    max_pods_at_once: u64,
    world: World,
    autoscaler: Autoscaler,
    options: AutoscalerOptions,
    restarts_done: usize,
    /// Careless deletions of the world already checked.
    unmarked_seen: usize,
    last_backoff: BTreeMap<String, i64>,
    was_unhealthy: bool,
    config: ClusterApiConfig,
    /// Drains in flight and the effects of the actions being carried out.
    actuation: Actuation,
    log: RunLog,
    seen_failed: BTreeSet<String>,
    informer: Informer,
    snapshot_at: Option<SimTime>,
    snapshot: Option<SnapshotTaken>,
    /// The last loop's word on each pending pod it looked at (replaced every loop).
    said: BTreeMap<String, String>,
}

fn short(group_id: &str) -> String {
    group_id
        .strip_prefix("MachineDeployment/")
        .unwrap_or(group_id)
        .to_string()
}

impl<'a> Driver<'a> {
    /// Builds the world of `scenario` at time 0.
    pub fn new(scenario: &'a Scenario) -> Result<Driver<'a>, DriverError> {
        let mut world = World::new(WorldConfig {
            seed: scenario.seed,
            metrics_interval_ms: scenario.sample_interval,
            default_delay: scenario.default_delay,
            cluster_name: CLUSTER.into(),
            machine_set_sync_ms: scenario.machine_set_sync_ms,
            machine_deletion_ms: scenario.machine_deletion_ms,
            device_plugin_delay_ms: scenario.device_plugin_delay_ms,
            scoring: scenario.scoring,
            ..WorldConfig::default()
        });
        // The informer reads only each object's latest state, once a loop, and lets the world
        // forget what it read: versions superseded in between need not be kept.
        world.set_latest_only_log(true);
        let err = |what: String| move |source| DriverError::World { what, source };
        // Faults first: a fault from 0s applies to the Machines of the initial replicas too.
        for f in &scenario.faults {
            world.inject_fault(f.clone());
        }
        for g in &scenario.groups {
            if let Some(d) = g.delay {
                world.set_provisioning_delay(&g.spec.name, d);
            }
            if let Some(csi) = &g.csi {
                world.set_group_csi(&g.spec.name, csi.clone());
            }
            if let Some(dra) = &g.dra {
                world.set_group_dra(&g.spec.name, dra.clone());
            }
            world
                .apply(group_object(g, CLUSTER))
                .map_err(err(format!("node group {}", g.spec.name)))?;
        }
        for (i, o) in scenario.objects.iter().enumerate() {
            world
                .apply(o.clone())
                .map_err(err(format!("objects[{i}]")))?;
        }
        for d in &scenario.daemon_sets {
            world
                .add_daemon_set(d.clone())
                .map_err(err(format!("DaemonSet {}", d.name)))?;
        }
        for r in &scenario.replica_sets {
            world
                .add_replica_set(r.clone())
                .map_err(err(format!("Deployment {}", r.name)))?;
        }
        for s in &scenario.stateful_sets {
            world
                .add_stateful_set(s.clone())
                .map_err(err(format!("StatefulSet {}", s.name)))?;
        }
        let mut log = RunLog::default();
        for g in &scenario.groups {
            log.groups.insert(
                format!("{}/{}", g.spec.namespace, g.spec.name),
                GroupLog::default(),
            );
        }
        let options = scenario.options.clone();
        Ok(Driver {
            scenario,
            max_pods_at_once: super::cost::MAX_PODS_AT_ONCE,
            world,
            autoscaler: Autoscaler::new(options.clone()),
            options,
            restarts_done: 0,
            unmarked_seen: 0,
            last_backoff: BTreeMap::new(),
            was_unhealthy: false,
            config: ClusterApiConfig::default(),
            actuation: Actuation::new(scenario.actuation.clone()),
            log,
            seen_failed: BTreeSet::new(),
            informer: Informer::lagging(scenario.watch_lag_ms, scenario.seed),
            snapshot_at: None,
            snapshot: None,
            said: BTreeMap::new(),
        })
    }

    /// Asks for the world's objects and the loop's actions at the first loop at or after `at`
    /// (virtual ms), taken just before the autoscaler reads the objects.
    pub fn snapshot_at(&mut self, at: SimTime) {
        self.snapshot_at = Some(at);
    }

    /// Runs to the end of the scenario, calling `progress` with the virtual time after each loop.
    pub fn run(self, progress: &mut dyn FnMut(SimTime)) -> Result<RunLog, TraceError> {
        self.run_with_snapshot(progress).map(|(log, _)| log)
    }

    /// Runs to the end of the scenario like [`Driver::run`], also returning the snapshot asked
    /// for with [`Driver::snapshot_at`] (none if the run ended before it). Fails if a trace
    /// row read on the way is malformed or out of order.
    pub fn run_with_snapshot(
        mut self,
        progress: &mut dyn FnMut(SimTime),
    ) -> Result<(RunLog, Option<SnapshotTaken>), TraceError> {
        let s = self.scenario;
        let mut jobs = s.jobs.iter().peekable();
        let mut pods = TraceFeed::open(&s.traces)?;
        let mut t: SimTime = 0;
        loop {
            // Creations due before this loop, each at its own instant.
            loop {
                let next_job = jobs.peek().map(|j| j.0).filter(|&at| at <= t);
                let next_pod = pods.peek_at().filter(|&at| at <= t);
                match (next_job, next_pod) {
                    (Some(j), p) if p.is_none_or(|p| j <= p) => {
                        if let Some((at, spec)) = jobs.next() {
                            self.world.step_until(*at);
                            if let Err(e) = self.world.add_job(spec.clone()) {
                                self.error(format!("job {}: {e}", spec.name));
                            }
                        }
                    }
                    (_, Some(_)) => {
                        if let Some(p) = pods.next_due(t)? {
                            self.world.step_until(p.at);
                            if let Err(e) = add_trace_pod(&mut self.world, p) {
                                self.error(format!("trace pod: {e}"));
                            }
                            check_pods_at_once(&self.world, &pods, self.max_pods_at_once)?;
                        }
                    }
                    _ => break,
                }
            }
            self.create_arrivals(t);
            self.world.step_until(t);
            self.restart_if_due(t);
            self.one_loop(t);
            progress(t);
            if t >= s.duration {
                break;
            }
            t = (t + s.scan_interval).min(s.duration);
            if !pods.is_empty() {
                self.world.gc_terminal_pods();
            }
        }
        self.world.sample_metrics();
        self.log.pending_at_end = self.world.pending_count();
        self.log.never_started = never_started(self.world.pending_pods(), &self.said);
        self.log.metrics = self.world.take_metrics();
        self.log.pods_created = self.log.metrics.started() + self.log.pending_at_end;
        Ok((self.log, self.snapshot))
    }

    /// Replaces the autoscaler with a fresh one (the process restarted) when a restart time of
    /// the scenario has come; drains in flight are dropped with the process.
    fn restart_if_due(&mut self, t: SimTime) {
        let mut due = false;
        while self
            .scenario
            .restart_at
            .get(self.restarts_done)
            .is_some_and(|&r| r <= t)
        {
            self.restarts_done += 1;
            due = true;
        }
        if due {
            self.autoscaler = Autoscaler::new(self.options.clone());
            self.actuation = Actuation::new(self.scenario.actuation.clone());
            self.last_backoff.clear();
            self.log.restarts.push(t);
        }
    }

    /// Records the events and new backoffs of one loop's outcome; failures the core saw count
    /// as failures of their group for the fallback figures.
    fn record_outcome(&mut self, t: SimTime, outcome: &LoopOutcome) {
        let epoch = self.world.config().epoch_ms;
        let unhealthy = !outcome.status.healthy;
        if unhealthy {
            self.log.unhealthy_loops += 1;
        }
        for e in &outcome.events {
            if e.reason == CLUSTER_UNHEALTHY && self.was_unhealthy {
                continue;
            }
            let object = short(&e.object);
            if [
                SCALE_UP_TIMED_OUT,
                SCALE_UP_FAILED,
                FAILED_TO_SCALE_UP_GROUP,
                FIX_NODE_GROUP_SIZE,
            ]
            .contains(&e.reason)
            {
                self.failure(object.clone(), t);
            }
            self.log.events.push(CoreEvent {
                at_ms: t,
                reason: e.reason.to_string(),
                object,
                message: e.message.clone(),
            });
        }
        self.was_unhealthy = unhealthy;
        for g in &outcome.status.groups {
            let Some(b) = &g.backoff else { continue };
            let id = short(g.id.as_str());
            if self.last_backoff.get(&id) == Some(&b.until_ms) {
                continue;
            }
            self.last_backoff.insert(id.clone(), b.until_ms);
            let virtual_ms = |ms: i64| u64::try_from(ms.saturating_sub(epoch)).unwrap_or(0);
            let failed_at = self
                .autoscaler
                .cluster_state()
                .backoff
                .get(&g.id)
                .map_or(t, |x| virtual_ms(x.last_failure_ms));
            self.log.backoffs.push(BackoffLog {
                at_ms: t,
                group: id,
                failures: b.failures,
                failed_at_ms: failed_at,
                until_ms: virtual_ms(b.until_ms),
                code: b.reason.code.clone(),
            });
        }
    }

    fn error(&mut self, e: String) {
        self.log.error_count += 1;
        if self.log.errors.len() < 50 {
            self.log
                .errors
                .push(format!("{}: {e}", super::report::clock(self.world.now())));
        }
    }

    fn now_ms(&self) -> i64 {
        self.world.config().epoch_ms + self.world.now() as i64
    }

    /// The provider as discovered from the world's objects now.
    fn provider(&mut self) -> std::sync::Arc<ClusterApiProvider> {
        self.sync();
        self.informer.provider(&self.config)
    }

    /// Brings the informer up to date and lets the world forget the changes it has seen.
    fn sync(&mut self) {
        self.informer.sync(&self.world);
        self.world
            .forget_events_upto(self.informer.resource_version());
    }

    fn one_loop(&mut self, t: SimTime) {
        self.log.loops += 1;
        self.observe_failures(t);
        self.continue_drains();
        let provider = self.provider();
        let now = self.now_ms();
        let objects = self.informer.objects_without_pods();
        let capacity = self
            .options
            .capacity
            .any()
            .then(|| capacity::objects_of(self.informer.store()));
        let in_flight = self.actuation.in_flight(&provider);
        // The priority expander's ConfigMap, read before each loop as the live shell reads it.
        let priorities = self.informer.priority_text(NAMESPACE);
        self.autoscaler.set_priority_text(priorities.as_deref());
        let pods = self.informer.pods();
        let view = ClusterView::of_objects(&objects, pods, &*provider);
        let take = self.snapshot.is_none() && self.snapshot_at.is_some_and(|at| at <= t);
        if take {
            self.snapshot = Some(SnapshotTaken {
                at_ms: t,
                now_ms: now,
                yaml: objects_yaml(self.world.objects()),
                actions: Vec::new(),
            });
        }
        let mut outcome = self.autoscaler.run_once(
            LoopInput::new(&view, now)
                .controllers(&objects.controllers)
                .in_flight(in_flight)
                .capacity(capacity.as_ref().map(|(c, _)| c)),
        );
        for e in capacity.map(|(_, e)| e).unwrap_or_default() {
            self.error(format!("skipped: {e}"));
        }
        self.record_outcome(t, &outcome);
        self.said = autoscaler_words(&outcome);
        self.log.safety.checks += 1;
        let limits = &self.options.scale_up.limits;
        for v in super::safety::check_actions(&outcome, &provider, &objects.nodes, limits) {
            self.log.safety.violation(t, v);
        }
        for r in &outcome.refused {
            let what = autoscaler_kube::describe(&r.action);
            self.log.safety.violation(
                t,
                format!("refused by the core's last check: {what}: {}", r.why),
            );
        }
        if take && let Some(snap) = &mut self.snapshot {
            snap.actions = outcome
                .actions
                .iter()
                .map(autoscaler_kube::describe)
                .collect();
        }
        let mut decision = outcome.capacity.take();
        let atomic = self.atomic_replicas(decision.as_ref());
        for action in outcome.actions {
            self.apply(action);
        }
        // A failed atomic scale-up: its request is written as not found, as `run` writes it.
        if let (Some(why), Some(d)) = (self.check_atomic(t, &atomic), decision.as_mut()) {
            d.requests.scale_up_failed(&why);
        }
        if decision.is_some() {
            self.write_capacity(decision);
            self.check_bookings(t);
        }
        self.check_world(t);
    }

    /// Records the careless Machine deletions the world saw since the last check.
    fn check_world(&mut self, t: SimTime) {
        // DRA: no device allocated twice, none that its claim's node does not publish.
        if self.scenario.groups.iter().any(|g| g.dra.is_some()) {
            for v in self.world.dra_violations() {
                self.log.safety.violation(t, format!("DRA: {v}"));
            }
        }
        let all = self.world.unmarked_healthy_deletions();
        if all.len() == self.unmarked_seen {
            return;
        }
        let lowered: Vec<String> = self
            .scenario
            .faults
            .iter()
            .filter(|f| {
                f.from_ms <= self.world.now()
                    && matches!(f.kind, FaultKind::ReplicasChanged { delta } if delta < 0)
            })
            .map(|f| f.group.clone())
            .collect();
        let found = super::safety::careless(&all[self.unmarked_seen..], &lowered);
        self.unmarked_seen = all.len();
        for v in found {
            self.log.safety.violation(t, v);
        }
    }

    /// Records Machines that failed to provision since the last loop.
    fn observe_failures(&mut self, t: SimTime) {
        // Only a Machine written since the last scan can have failed since: scan those, in
        // store order.
        self.sync();
        let changed = self.informer.take_changed_machines(&self.config.api_group);
        let store = self.world.objects();
        let failed: Vec<(String, String)> = changed
            .iter()
            .filter_map(|k| store.get(k).map(|m| (k, m)))
            .filter(|(_, m)| m.pointer("/status/failureReason").is_some())
            .map(|(k, m)| {
                let group = m
                    .pointer("/metadata/labels/cluster.x-k8s.io~1deployment-name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                (
                    format!("{}/{}", k.namespace, k.name),
                    format!("{}/{group}", k.namespace),
                )
            })
            .collect();
        for (machine, group) in failed {
            if self.seen_failed.insert(machine) {
                self.log
                    .groups
                    .entry(group.clone())
                    .or_default()
                    .failed_provisionings += 1;
                self.failure(group, t);
            }
        }
    }

    fn failure(&mut self, group: String, t: SimTime) {
        let open = self
            .log
            .fallbacks
            .iter()
            .any(|f| f.group == group && f.fell_back.is_none());
        if !open {
            self.log.fallbacks.push(Fallback {
                group,
                failed_at_ms: t,
                fell_back: None,
            });
        }
    }

    fn scaled_up(&mut self, group: &str, t: SimTime) {
        for f in &mut self.log.fallbacks {
            if f.fell_back.is_none() && f.group != group {
                f.fell_back = Some((group.to_string(), t));
            }
        }
    }

    /// Sets replicas as the live actuator does: with the version they were decided from as a
    /// precondition; on a conflict the MachineDeployment is read again and the count
    /// [`ReplicasBase::rebase`] gives for it is written with the fresh version (nothing else
    /// writes in between here, so one retry settles it). A count it refuses fails with the
    /// world's conflict.
    fn set_replicas(
        &mut self,
        key: &ObjectKey,
        replicas: i64,
        base: &ReplicasBase,
    ) -> Result<(), WorldError> {
        let count = |r: i64| u32::try_from(r.max(0)).unwrap_or(u32::MAX);
        let rv = base.resource_version.as_deref();
        let conflict =
            match self
                .world
                .set_replicas_at(&key.namespace, &key.name, count(replicas), rv)
            {
                Err(e @ WorldError::Conflict { .. }) => e,
                other => return other,
            };
        let fresh = self
            .world
            .objects()
            .get(key)
            .cloned()
            .ok_or_else(|| WorldError::NotFound(key.to_string()))?;
        let now = fresh
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let Ok(target) = base.rebase(replicas, now) else {
            return Err(conflict);
        };
        let rv = fresh
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str);
        self.world
            .set_replicas_at(&key.namespace, &key.name, count(target), rv)
    }

    /// Applies provider changes to the world.
    fn apply_changes(&mut self, changes: Vec<ObjectChange>) -> Result<(), WorldError> {
        for c in changes {
            match c {
                ObjectChange::SetReplicas {
                    key,
                    replicas,
                    base,
                    ..
                } => self.set_replicas(&key, replicas, &base)?,
                ObjectChange::AnnotateMachine {
                    key,
                    annotation,
                    value,
                    ..
                } => self
                    .world
                    .annotate_machine(&key.namespace, &key.name, &annotation, &value)?,
                ObjectChange::DeleteMachine { key, .. } => {
                    self.world.remove_machine(&key.namespace, &key.name)?
                }
                ObjectChange::RemoveMachineAnnotation {
                    key, annotation, ..
                } => {
                    self.world
                        .remove_machine_annotation(&key.namespace, &key.name, &annotation)?
                }
            }
        }
        Ok(())
    }

    /// Carries `action` out through actuation; a new drain advances every drain in flight, as
    /// the loop's own step does.
    fn apply(&mut self, action: Action) {
        let drain = matches!(action, Action::DrainAndDelete { .. });
        let now = self.now_ms();
        self.sync();
        let mut lookup = InformerLookup::new(&mut self.informer, &self.config);
        let effects = self.actuation.start(action, &mut lookup, now);
        self.interpret(effects);
        if drain {
            self.continue_drains();
        }
    }

    /// Advances the drains in flight: evictions tried again, drained nodes deleted, drains past
    /// their deadline given up (untainted).
    fn continue_drains(&mut self) {
        let now = self.now_ms();
        self.sync();
        let mut lookup = InformerLookup::new(&mut self.informer, &self.config);
        let effects = self.actuation.step(&mut lookup, now);
        self.interpret(effects);
    }

    /// Carries effects out on the world, depth first: what follows from a reply is done before
    /// the next effect, as one drain finishes before the next is looked at.
    fn interpret(&mut self, effects: Vec<Effect>) {
        self.take_reports();
        let mut todo: Vec<Effect> = effects.into_iter().rev().collect();
        while let Some(effect) = todo.pop() {
            let reply = self.execute(effect.kind());
            let now = self.now_ms();
            self.sync();
            let mut lookup = InformerLookup::new(&mut self.informer, &self.config);
            let next = self
                .actuation
                .reply(effect.ticket(), reply, &mut lookup, now);
            self.take_reports();
            todo.extend(next.into_iter().rev());
        }
    }

    /// Carries one effect out on the world.
    fn execute(&mut self, effect: &EffectKind) -> Reply {
        match effect {
            EffectKind::Changes { changes, purpose } => {
                let deleting = match purpose {
                    Purpose::DeleteNodes { nodes, .. } => {
                        self.nodes_left_with_pods(nodes);
                        Some(self.world.budget_statuses())
                    }
                    _ => None,
                };
                match self.apply_changes(changes.clone()) {
                    Ok(()) => {
                        if let Some(before) = deleting {
                            self.check_budgets(&before);
                        }
                        Reply::Done
                    }
                    Err(e) => Reply::Failed(world_error(&e)),
                }
            }
            EffectKind::AddTaint { node, taint } => reply_of(self.world.taint_node(
                node.as_str(),
                taint.key.as_str(),
                taint.value.as_str(),
                taint.effect.as_str(),
            )),
            EffectKind::RemoveTaint { node, key } => {
                reply_of(self.world.untaint_node(node.as_str(), key.as_str()))
            }
            EffectKind::Untaint { node } => {
                let _ = self.world.untaint_node(node.as_str(), TO_BE_DELETED_TAINT);
                Reply::Done
            }
            EffectKind::SetUnschedulable {
                node,
                unschedulable,
            } => reply_of(self.world.set_unschedulable(node.as_str(), *unschedulable)),
            EffectKind::ReadPods { nodes } => self.read_pods(nodes),
            // The simulated world holds no ProvisioningRequests or CapacityBuffers yet, and the
            // driver asks for no status write; a write that came would find nothing.
            EffectKind::WriteStatus { update } => Reply::Failed(ActionError::new(
                ErrorClass::NotFound,
                format!("{}: not in the simulated world", update.object_name()),
            )),
            EffectKind::Evict {
                pod,
                grace_period_sec,
                ..
            } => {
                let before = self.world.budget_statuses();
                let (ns, grace) = (pod.namespace.as_str(), Some(*grace_period_sec));
                match self.world.evict(ns, &pod.name, grace) {
                    Ok(()) => {
                        self.log.evictions += 1;
                        self.check_budgets(&before);
                        Reply::Done
                    }
                    Err(autoscaler_world::EvictionError::NotFound(_)) => Reply::Gone,
                    // Every other refusal (a budget, several budgets) is tried again later.
                    Err(e) => {
                        self.log.eviction_refusals += 1;
                        Reply::Refused(ActionError::new(ErrorClass::Unavailable, e.to_string()))
                    }
                }
            }
        }
    }

    /// The pods bound to `nodes` in the world itself (not the autoscaler's view, which may
    /// lag), as a pod list by `spec.nodeName` reads them from the API server. A pod that does
    /// not convert fails the read: the deletion is then abandoned rather than decided blind.
    fn read_pods(&self, nodes: &[autoscaler_model::Sym]) -> Reply {
        let mut pods = Vec::new();
        for (key, obj) in self.world.objects().iter() {
            let on = obj.pointer("/spec/nodeName").and_then(Value::as_str);
            if !key.is_pod() || !on.is_some_and(|n| nodes.iter().any(|x| x.as_str() == n)) {
                continue;
            }
            match autoscaler_actuation::pod_view(obj) {
                Some(pod) => pods.push(std::sync::Arc::new(pod)),
                None => {
                    let message = format!("pod {key} does not convert");
                    return Reply::Failed(ActionError::new(ErrorClass::Invalid, message));
                }
            }
        }
        Reply::Pods(pods)
    }

    /// A safety violation for each node about to be deleted with pods not moved. A pod still
    /// terminating after its eviction counts: it still runs there, and deleting the node kills
    /// it before its grace is up. Upstream never does that either: its drain waits for evicted
    /// pods to be gone (up to the grace period plus headroom) and, if some remain, fails the
    /// drain ("pods remaining after timeout") and keeps the node, as the actuation here does.
    fn nodes_left_with_pods(&mut self, nodes: &[autoscaler_model::Sym]) {
        for n in nodes {
            let pods = self.world.non_daemon_pods(n.as_str());
            if pods.is_empty() {
                continue;
            }
            let terminating = pods
                .iter()
                .filter(|(ns, name)| self.world.terminating_until(ns, name).is_some())
                .count();
            let t = self.world.now();
            let left = pods.len();
            let detail = match terminating {
                0 => String::new(),
                k => format!(" ({k} still terminating)"),
            };
            self.log.safety.violation(
                t,
                format!("node {n} deleted with {left} pod(s) not moved{detail}"),
            );
        }
    }

    /// Feeds what the actions came to back into the core (the one way: `observe`) and into the
    /// run log.
    fn take_reports(&mut self) {
        for report in self.actuation.take_reports() {
            let now = self.now_ms();
            for outcome in report.outcomes() {
                self.autoscaler.observe(&outcome, now);
            }
            self.log_report(report);
        }
    }

    fn log_report(&mut self, report: Report) {
        let t = self.world.now();
        match report {
            Report::ScaledUp { group, delta } => {
                let g = short(group.as_str());
                let e = self.log.groups.entry(g.clone()).or_default();
                e.scale_ups += 1;
                e.nodes_added += delta as u64;
                self.scaled_up(&g, t);
            }
            Report::ScaleUpFailed {
                group,
                error,
                by_provider,
                ..
            } => {
                if !by_provider {
                    let g = short(group.as_str());
                    self.log
                        .groups
                        .entry(g.clone())
                        .or_default()
                        .scale_up_errors += 1;
                    self.failure(g, t);
                }
                self.error(format!("scale-up of {group}: {error}"));
            }
            Report::Corrected { group, correction } => {
                let e = self.log.groups.entry(short(group.as_str())).or_default();
                match correction {
                    Correction::DecreaseTargetSize { .. } => e.target_decreases += 1,
                    Correction::DeleteInstances { instances, .. } => {
                        e.instances_deleted += instances.len() as u64
                    }
                    Correction::ClearStaleMark { .. } => e.stale_marks_cleared += 1,
                    // An atomic scale-up's group set back: its target lowered again.
                    Correction::RevertIncrease { .. } => e.target_decreases += 1,
                }
            }
            Report::CorrectionFailed {
                group,
                correction,
                error,
            } => self.error(match correction {
                Correction::DecreaseTargetSize { .. } => {
                    format!("decrease target of {group}: {error}")
                }
                Correction::DeleteInstances { .. } => {
                    format!("delete instances of {group}: {error}")
                }
                Correction::ClearStaleMark { machine, .. } => {
                    format!("clear the stale deletion mark of {machine} in {group}: {error}")
                }
                Correction::RevertIncrease { delta, request } => format!(
                    "set back {group} by {delta} after the atomic scale-up for {request} failed: {error}"
                ),
            }),
            Report::TaintFailed {
                node, add, error, ..
            } => self.error(if add {
                format!("taint {node}: {error}")
            } else {
                format!("untaint {node}: {error}")
            }),
            Report::CordonFailed { node, error, .. } => {
                self.error(format!("cordon or uncordon {node}: {error}"))
            }
            Report::DeletionDelayTimedOut { .. } => {}
            Report::DrainStarted { .. } => self.log.drains += 1,
            Report::Deleted { group, nodes, .. } => {
                self.log
                    .groups
                    .entry(short(group.as_str()))
                    .or_default()
                    .nodes_removed += nodes.len() as u64;
                let now = self.world.now();
                match self.log.removals.last_mut() {
                    Some((at, n)) if *at == now => *n += nodes.len() as u64,
                    _ => self.log.removals.push((now, nodes.len() as u64)),
                }
            }
            Report::DeleteFailed {
                group,
                nodes,
                error,
                ..
            } => {
                let names: Vec<&str> = nodes.iter().map(|n| n.as_str()).collect();
                self.error(format!("delete nodes {names:?} of {group}: {error}"));
            }
            Report::DrainFailed {
                node, not_evicted, ..
            } => {
                self.log.drains_failed += 1;
                self.error(format!(
                    "drain of {node} gave up: {not_evicted} pod(s) could not be evicted"
                ));
            }
            Report::StatusWritten { .. } => {}
            Report::StatusWriteFailed { object, error } => {
                self.error(format!("status of {object}: {error}"))
            }
        }
    }

    /// Counts budgets that a disruption took from satisfied to violated.
    fn check_budgets(&mut self, before: &[autoscaler_world::BudgetStatus]) {
        let after = self.world.budget_statuses();
        for b in &after {
            let was_ok = before
                .iter()
                .find(|x| x.pdb == b.pdb)
                .is_none_or(|x| x.healthy >= x.desired);
            if was_ok && b.healthy < b.desired {
                self.log.pdb_violations += 1;
            }
        }
    }
}

/// Every object of `store` as multi-document YAML (`---` between documents), in store order.
pub fn objects_yaml(store: &autoscaler_model::ObjectStore) -> String {
    let mut out = String::new();
    for (_, obj) in store.iter() {
        out.push_str("---\n");
        match serde_yaml_ng::to_string(&**obj) {
            Ok(text) => out.push_str(&text),
            // A JSON value always serializes; keep the document count right regardless.
            Err(e) => out.push_str(&format!("# not serializable: {e}\n")),
        }
    }
    out
}

/// The reply to a world call.
fn reply_of(result: Result<(), WorldError>) -> Reply {
    match result {
        Ok(()) => Reply::Done,
        Err(e) => Reply::Failed(world_error(&e)),
    }
}

/// The class of a world error, as the API would answer it.
fn world_error(e: &WorldError) -> ActionError {
    let class = match e {
        WorldError::NotFound(_) => ErrorClass::NotFound,
        WorldError::AlreadyExists(_) => ErrorClass::Conflict,
        WorldError::ScaleApi { .. } => ErrorClass::Unavailable,
        WorldError::Conflict { .. } => ErrorClass::Conflict,
        WorldError::Invalid { .. } => ErrorClass::Invalid,
        _ => ErrorClass::Other,
    };
    ActionError::new(class, e.to_string())
}

/// Adds a trace pod: one naming a Job or ReplicaSet is replaced as that controller would
/// replace it when evicted (a Job's starts over, a ReplicaSet's runs the time it had left).
/// Stops a run whose traces bring more pods at once than a run may hold (a trace's rows are
/// not counted before the run: see `super::cost`), naming the trace that passed the bound.
fn check_pods_at_once(world: &World, pods: &TraceFeed, most: u64) -> Result<(), TraceError> {
    if world.live_pod_count() as u64 <= most {
        return Ok(());
    }
    Err(TraceError {
        path: pods.last_path().map(Path::to_path_buf).unwrap_or_default(),
        message: format!(
            "more than {most} pods alive at once, the most a run may hold: give the trace a \
             `limit`, a larger `sample`, or a shorter `duration`"
        ),
    })
}

fn add_trace_pod(world: &mut World, p: TimedPod) -> Result<(), WorldError> {
    let kind = p
        .object
        .pointer("/metadata/ownerReferences/0/kind")
        .and_then(Value::as_str);
    let restart = match kind {
        Some("Job") => Restart::Rerun,
        Some("ReplicaSet") => Restart::Resume,
        _ => return world.add_pod(p.object, p.lifetime),
    };
    match p.lifetime {
        Some(life) => world.add_replayed_pod(p.object, life, restart),
        None => world.add_pod(p.object, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_core::{PodEviction, PodRef};
    use autoscaler_model::Sym;

    /// Two workers and one web pod under a budget that allows no disruption: the Eviction API
    /// refuses every eviction of it.
    const BLOCKED: &str = r#"
name: blocked-drain
duration: 30m
node_groups:
  - {name: workers, min: 1, max: 3, replicas: 2, cpu: "4", memory: 16Gi}
objects:
  - apiVersion: policy/v1
    kind: PodDisruptionBudget
    metadata: {name: web, namespace: default}
    spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}
workloads:
  - {kind: deployment, name: web, replicas: 1, pod: {cpu: 500m, memory: 1Gi}}
"#;

    /// A trace's rows are not counted before the run: the run stops once its pods alive at once
    /// pass the bound, naming the trace, instead of growing until memory runs out.
    #[test]
    fn a_trace_bringing_too_many_pods_at_once_stops_the_run() {
        let dir = std::env::temp_dir().join(format!("ca-trace-{}-at-once", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut csv =
            String::from("name,arrival_s,duration_s,cpu_milli,memory_mib,gpu,gpu_model,priority\n");
        for i in 0..10 {
            csv.push_str(&format!("p{i},{i},100000,100,100,0,,0\n"));
        }
        std::fs::write(dir.join("t.csv"), csv).expect("write");
        let text = "name: t\nduration: 1m\nnode_groups: [{name: a, min: 0, max: 1, cpu: '1', \
                    memory: 1Gi}]\nworkloads: [{kind: trace, file: t.csv}]\n";
        let s = Scenario::parse(text, &dir).expect("scenario");
        let mut d = Driver::new(&s).expect("world");
        d.max_pods_at_once = 5;
        let e = d.run(&mut |_| {}).expect_err("too many pods at once");
        assert!(e.path.ends_with("t.csv"), "{e}");
        assert!(
            e.message.starts_with("more than 5 pods alive at once"),
            "{e}"
        );
        // Within the bound, the same trace runs.
        let d = Driver::new(&s).expect("world");
        assert!(d.run(&mut |_| {}).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Drains the web pod's node at 5m and steps the drains every 10 s (as the loops do): how
    /// long after the start the drain gave up.
    fn gives_up_after(flags: &[&str]) -> SimTime {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            run: autoscaler_options::RunArgs,
        }
        // No delay after the taint: the first eviction is tried at once.
        let argv = ["cluster-autoscaler", "--node-delete-delay-after-taint=0s"];
        let argv = argv.into_iter().chain(flags.iter().copied());
        let args = Cli::try_parse_from(argv).expect("flags parse").run;
        let cli = super::super::scenario::CommandLine {
            args: &args,
            file: None,
        };
        let s = Scenario::parse_with(BLOCKED, std::path::Path::new("."), &cli).expect("scenario");
        let mut d = Driver::new(&s).expect("world");
        let start: SimTime = 300_000;
        d.world.step_until(start);
        let web = drain_web(&mut d, 30);
        let node = web.node_name.expect("the web pod ran");
        assert_eq!((d.log.drains, d.log.eviction_refusals), (1, 1));
        let mut t = start;
        while d.log.drains_failed == 0 {
            assert!(t < start + 3_600_000, "the drain never gave up");
            t += 10_000;
            d.world.step_until(t);
            d.continue_drains();
        }
        assert!(!d.actuation.is_draining(node.as_str()));
        assert_eq!(d.log.evictions, 0);
        assert!(d.log.groups.values().all(|g| g.nodes_removed == 0));
        let gave_up = d.log.errors.last().expect("the give-up is logged");
        assert!(
            gave_up.ends_with(&format!(
                "drain of {node} gave up: 1 pod(s) could not be evicted"
            )),
            "{gave_up}"
        );
        // The node is schedulable again: its deletion taint is gone.
        d.sync();
        let view = d.informer.node(node.as_str()).expect("node kept");
        assert!(
            view.taints
                .iter()
                .all(|t| t.key != Sym::new(TO_BE_DELETED_TAINT))
        );
        t - start
    }

    /// The web pod of a test scenario, as the informer sees it now.
    fn web_pod(d: &mut Driver) -> autoscaler_model::Pod {
        d.sync();
        let web = d.informer.pods().iter().find(|p| p.name.starts_with("web"));
        (**web.expect("the web pod")).clone()
    }

    /// Drains the web pod's node, allowing `grace_period_sec`; returns the pod as it was.
    fn drain_web(d: &mut Driver, grace_period_sec: u64) -> autoscaler_model::Pod {
        let web = web_pod(d);
        let node = web.node_name.expect("the web pod runs");
        d.apply(Action::DrainAndDelete {
            group: "MachineDeployment/default/workers".into(),
            node,
            evict: vec![PodEviction {
                pod: PodRef {
                    namespace: web.namespace,
                    name: web.name.as_arc().clone(),
                },
                grace_period_sec,
                stage: 0,
            }],
            sequential: true,
        });
        web
    }

    /// Two workers and one web pod, nothing protecting it; `{extra}` is added to its pod.
    fn drainable(extra: &str) -> Scenario {
        let text = format!(
            r#"
name: drainable
duration: 30m
node_groups:
  - {{name: workers, min: 1, max: 3, replicas: 2, cpu: "4", memory: 16Gi}}
workloads:
  - {{kind: deployment, name: web, replicas: 1, pod: {{cpu: 500m, memory: 1Gi{extra}}}}}
"#
        );
        Scenario::parse(&text, std::path::Path::new(".")).expect("scenario")
    }

    /// Drains the web pod's node at 5m, allowing upstream's default grace (600 s), and steps the
    /// drains every second: how long after the start the node's deletion was sent.
    fn drain_takes(extra: &str) -> SimTime {
        let s = drainable(extra);
        let mut d = Driver::new(&s).expect("world");
        let start: SimTime = 300_000;
        d.world.step_until(start);
        let web = drain_web(&mut d, 600);
        // The first eviction waits `--node-delete-delay-after-taint` (5 s by default).
        let mut t = start;
        while d.log.evictions == 0 {
            assert!(t < start + 60_000, "never evicted");
            t += 1_000;
            d.world.step_until(t);
            d.continue_drains();
        }
        assert_eq!(t - start, 5_000, "evicted after the delay after the taint");
        let gone_at = d.world.terminating_until(web.namespace.as_str(), &web.name);
        let gone_at = gone_at.expect("the evicted pod terminates");
        let removed = |d: &Driver| d.log.groups.values().map(|g| g.nodes_removed).sum::<u64>();
        while removed(&d) == 0 {
            assert!(t < start + 3_600_000, "the node was never deleted");
            assert!(
                t < gone_at
                    || d.world
                        .terminating_until(web.namespace.as_str(), &web.name)
                        .is_none()
            );
            t += 1_000;
            d.world.step_until(t);
            d.continue_drains();
        }
        assert!(t >= gone_at, "deleted only once the pod is gone");
        assert_eq!(d.log.safety.count, 0, "{:?}", d.log.safety.violations);
        assert_eq!(d.log.drains_failed, 0);
        t - start
    }

    /// Whether the world's Machine `name` carries a delete-machine annotation.
    fn marked(d: &Driver, name: &str) -> bool {
        let key = autoscaler_model::ObjectKey {
            group: "cluster.x-k8s.io".into(),
            kind: "Machine".into(),
            namespace: "default".into(),
            name: name.into(),
        };
        let obj = d.world.objects().get(&key).expect("the Machine exists");
        obj.pointer("/metadata/annotations/cluster.x-k8s.io~1delete-machine")
            .is_some()
    }

    fn deletion_tainted(d: &mut Driver, node: &str) -> bool {
        d.sync();
        let view = d.informer.node(node).expect("the node exists");
        view.taints
            .iter()
            .any(|t| t.key == Sym::new(TO_BE_DELETED_TAINT))
    }

    #[test]
    fn a_mark_the_set_passed_over_is_cleared_and_its_node_untainted() {
        // Two empty workers; one turns unready, the other is deleted as empty. The set ranks
        // an unhealthy Machine as high as a marked one and breaks ties by name: marking the
        // Machine that sorts last makes it delete the unready one instead.
        let text = r#"
name: passed-over
duration: 30m
node_groups:
  - {name: workers, min: 0, max: 3, replicas: 2, cpu: "4", memory: 16Gi}
"#;
        let s = Scenario::parse(text, std::path::Path::new(".")).expect("scenario");
        let mut d = Driver::new(&s).expect("world");
        let mut t: SimTime = 300_000;
        d.world.step_until(t);
        let mut machines: Vec<(String, String)> = d
            .world
            .node_names()
            .into_iter()
            .map(|n| (d.world.machine_of_node(&n).expect("a Machine's node").1, n))
            .collect();
        machines.sort();
        let [(_, unready), (machine, node)] = <[_; 2]>::try_from(machines).expect("two nodes");
        d.world.set_node_ready(&unready, false).expect("node");
        let node_sym = Sym::new(&node);
        d.apply(Action::AddTaint {
            node: node_sym,
            taint: autoscaler_core::to_be_deleted_taint(d.now_ms()),
        });
        d.apply(Action::DeleteEmptyNodes {
            group: "MachineDeployment/default/workers".into(),
            nodes: vec![node_sym],
        });
        let mut unready_gone_at = None;
        let mut mark_seen = false;
        while unready_gone_at.is_none() || marked(&d, &machine) {
            assert!(t < 900_000, "the mark was never cleared");
            // Once sent (after the delay after the taint), the mark and the taint stay while
            // the set has not acted.
            mark_seen |= marked(&d, &machine);
            if unready_gone_at.is_none() {
                assert!(mark_seen == marked(&d, &machine) && deletion_tainted(&mut d, &node));
            }
            t += 10_000;
            d.world.step_until(t);
            d.continue_drains();
            if unready_gone_at.is_none() && !d.world.node_names().contains(&unready) {
                unready_gone_at = Some(t);
            }
        }
        let cleared_after = t - unready_gone_at.expect("the set deleted the unready node");
        let grace = SimTime::try_from(autoscaler_actuation::STALE_MARK_GRACE_MS).expect("grace");
        assert!(
            cleared_after >= grace,
            "cleared {cleared_after} ms after the set acted: not before the grace period"
        );
        assert!(
            cleared_after <= grace + 30_000,
            "cleared {cleared_after} ms after"
        );
        assert!(
            !deletion_tainted(&mut d, &node),
            "the node is untainted with its mark"
        );
        assert!(d.world.node_names().contains(&node), "and it stays");
        let g = &d.log.groups["default/workers"];
        assert_eq!(g.stale_marks_cleared, 1);
        assert_eq!(d.log.safety.count, 0, "{:?}", d.log.safety.violations);
    }

    #[test]
    fn a_drain_lasts_as_long_as_the_evicted_pod_takes_to_terminate() {
        // 5 s of delay after the taint, then the pod's own 30 s default, then its own 45 s:
        // it stops within the 600 s allowed.
        assert_eq!(drain_takes(""), 35_000);
        assert_eq!(
            drain_takes(", spec: {terminationGracePeriodSeconds: 45}"),
            50_000
        );
    }

    #[test]
    fn deleting_a_node_whose_evicted_pod_still_terminates_is_a_violation() {
        let s = drainable("");
        let mut d = Driver::new(&s).expect("world");
        d.world.step_until(300_000);
        let (ns, name, node) = d.world.live_pods().remove(0);
        let node = node.expect("bound");
        d.world.evict(&ns, &name, Some(30)).expect("evicted");
        d.world.advance(10_000);
        d.nodes_left_with_pods(&[Sym::new(&node)]);
        assert_eq!(d.log.safety.count, 1);
        let v = &d.log.safety.violations[0];
        assert!(
            v.ends_with("with 1 pod(s) not moved (1 still terminating)"),
            "{v}"
        );
        d.world.advance(20_000);
        d.nodes_left_with_pods(&[Sym::new(&node)]);
        assert_eq!(d.log.safety.count, 1, "gone: nothing left behind");
    }

    /// `--cordon-node-before-terminating` in the simulated world: the node is cordoned with its
    /// deletion taint, and uncordoned with the taint when the drain gives up.
    #[test]
    fn a_node_is_cordoned_with_its_deletion_taint_and_uncordoned_when_the_drain_fails() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            run: autoscaler_options::RunArgs,
        }
        let argv = [
            "cluster-autoscaler",
            "--cordon-node-before-terminating",
            "--max-pod-eviction-time=20s",
        ];
        let args = Cli::try_parse_from(argv).expect("flags parse").run;
        let cli = super::super::scenario::CommandLine {
            args: &args,
            file: None,
        };
        let s = Scenario::parse_with(BLOCKED, std::path::Path::new("."), &cli).expect("scenario");
        let mut d = Driver::new(&s).expect("world");
        d.world.step_until(300_000);
        let web = web_pod(&mut d);
        let node = web.node_name.expect("the web pod runs");
        let unschedulable = |d: &Driver| {
            let key = autoscaler_model::ObjectKey {
                group: String::new(),
                kind: "Node".into(),
                namespace: String::new(),
                name: node.as_str().into(),
            };
            let obj = d.world.objects().get(&key).cloned().expect("the node");
            obj.pointer("/spec/unschedulable") == Some(&serde_json::json!(true))
        };
        assert!(!unschedulable(&d));
        let now = d.now_ms();
        d.apply(Action::AddTaint {
            node,
            taint: autoscaler_core::to_be_deleted_taint(now),
        });
        assert!(unschedulable(&d), "cordoned with the taint");
        drain_web(&mut d, 30);
        let mut t = 300_000;
        while d.log.drains_failed == 0 {
            assert!(t < 3_600_000, "the drain never gave up");
            t += 10_000;
            d.world.step_until(t);
            d.continue_drains();
        }
        assert!(!unschedulable(&d), "uncordoned with the taint");
    }

    #[test]
    fn a_drain_blocked_by_a_budget_gives_up_at_max_pod_eviction_time() {
        // The deadline comes from `--max-pod-eviction-time` through the options `run` uses
        // (the live executor's test of the same flag: kube's `execute` tests).
        assert_eq!(gives_up_after(&[]), 120_000);
        assert_eq!(gives_up_after(&["--max-pod-eviction-time=40s"]), 40_000);
        // The drains are stepped every 10 s: a deadline of 1 s is seen at the next step.
        assert_eq!(gives_up_after(&["--max-pod-eviction-time=1s"]), 10_000);
    }

    #[test]
    fn never_started_pods_are_grouped_by_both_messages_largest_group_first() {
        let full = Some("0/3 nodes are available: 3 Insufficient cpu.".to_string());
        let pending: Vec<(String, Option<String>)> = (0..5)
            .map(|i| (format!("ns/big-{i}"), full.clone()))
            .chain([
                ("ns/odd".to_string(), None),
                ("ns/gpu".to_string(), full.clone()),
            ])
            .collect();
        let said = BTreeMap::from([(
            "ns/gpu".to_string(),
            "pod didn't trigger scale-up: g: Insufficient nvidia.com/gpu".to_string(),
        )]);
        let groups = never_started(pending, &said);
        assert_eq!(groups.len(), 3, "{groups:?}");
        assert_eq!(groups[0].pods, 5);
        assert_eq!(groups[0].scheduler, full);
        assert_eq!(groups[0].autoscaler, None);
        assert_eq!(groups[0].examples, ["ns/big-0", "ns/big-1", "ns/big-2"]);
        let gpu = groups
            .iter()
            .find(|g| g.examples == ["ns/gpu"])
            .expect("gpu group");
        assert_eq!(
            gpu.autoscaler.as_deref(),
            Some("pod didn't trigger scale-up: g: Insufficient nvidia.com/gpu")
        );
        assert!(groups.iter().any(|g| g.scheduler.is_none() && g.pods == 1));
    }
}

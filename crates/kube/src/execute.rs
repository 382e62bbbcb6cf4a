//! The live interpreter of actuation's effects: carries each effect out through the API
//! ([`Actuator`]) and answers with its reply. What an action turns into, when a drain gives up
//! and what to undo is decided once, in `autoscaler_actuation`, for the simulator as for here.
//!
//! Evictions take minutes (budgets, grace periods), so each runs as its own task and its reply
//! comes back through [`Executor::wait`]; every other effect is carried out before the loop
//! goes on. It never decides what to do, and reads the clock only to give actuation its `now`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use autoscaler_actuation::lock_informer as lock;
use autoscaler_actuation::{
    Actuation, ActuationOptions, ClusterLookup, Effect, EffectKind, Informer, InformerLookup,
    Reply, Report, Ticket,
};
use autoscaler_clusterapi::{ClusterApiConfig, ClusterApiProvider};
use autoscaler_core::InFlight;
use autoscaler_core::{Action, PodRef};
use autoscaler_core::{ActionError, ErrorClass};
use autoscaler_model::NodeGroupId;
use autoscaler_model::Sym;
use autoscaler_model::TO_BE_DELETED_TAINT;
use rustc_hash::FxHashMap;
use tokio::task::{Id, JoinSet};
use tokio::time::Instant;

use crate::actuator::{ActuationError, Actuator, Eviction};

/// An informer lookup whose provider is kept for a run of scale-ups (see [`Executor::apply`]).
struct Pinned<'a, 'p> {
    inner: InformerLookup<'a>,
    pinned: &'p mut Option<(Arc<ClusterApiProvider>, Vec<NodeGroupId>)>,
}

impl<'a, 'p> Pinned<'a, 'p> {
    fn new(
        inner: InformerLookup<'a>,
        pinned: &'p mut Option<(Arc<ClusterApiProvider>, Vec<NodeGroupId>)>,
    ) -> Self {
        Pinned { inner, pinned }
    }

    /// Notes that this run's action touches `group`.
    fn touch(&mut self, group: NodeGroupId) {
        let provider = self.provider();
        if let Some((_, seen)) = self.pinned.as_mut() {
            seen.push(group);
        } else {
            *self.pinned = Some((provider, vec![group]));
        }
    }
}

impl ClusterLookup for Pinned<'_, '_> {
    fn provider(&mut self) -> Arc<ClusterApiProvider> {
        match self.pinned {
            Some((p, _)) => p.clone(),
            None => {
                let p = self.inner.provider();
                *self.pinned = Some((p.clone(), Vec::new()));
                p
            }
        }
    }

    fn node(&self, name: &str) -> Option<Arc<autoscaler_model::Node>> {
        self.inner.node(name)
    }

    fn nodes(&self, names: &[Sym]) -> Vec<Arc<autoscaler_model::Node>> {
        self.inner.nodes(names)
    }

    fn pod_on_node(&self, pod: &PodRef, node: &str) -> bool {
        self.inner.pod_on_node(pod, node)
    }

    fn pods_left_on(&self, nodes: &[Sym], expendable_below: i32) -> Vec<(Sym, PodRef)> {
        self.inner.pods_left_on(nodes, expendable_below)
    }
}

/// What woke the executor up.
#[derive(Debug)]
pub enum Wake {
    /// An eviction answered.
    Reply(Ticket, Reply),
    /// A drain asked to be stepped (to look whether its evicted pods are gone).
    Timer,
}

/// Carries effects out for one leadership term; owns actuation's bookkeeping.
pub struct Executor {
    actuator: Arc<Actuator>,
    informer: Arc<Mutex<Informer>>,
    clusterapi: ClusterApiConfig,
    actuation: Actuation,
    /// Actuation's clock: milliseconds since the executor was made (monotonic).
    origin: Instant,
    evictions: JoinSet<(Ticket, Reply)>,
    /// The ticket of each eviction task, to answer for one that panicked.
    tasks: FxHashMap<Id, Ticket>,
}

impl Executor {
    /// An executor with nothing in flight, carrying actions out as `options` say.
    pub fn new(
        actuator: Arc<Actuator>,
        informer: Arc<Mutex<Informer>>,
        clusterapi: ClusterApiConfig,
        options: ActuationOptions,
    ) -> Executor {
        Executor {
            actuator,
            informer,
            clusterapi,
            actuation: Actuation::new(options),
            origin: Instant::now(),
            evictions: JoinSet::new(),
            tasks: FxHashMap::default(),
        }
    }

    fn now(&self) -> i64 {
        i64::try_from(self.origin.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// The deletions in flight, for the next loop.
    pub fn in_flight(&self, provider: &ClusterApiProvider) -> InFlight {
        self.actuation.in_flight(provider)
    }

    /// Carries the actions of one loop out, in order (evictions start as tasks), then steps the
    /// drains; returns what the actions came to so far.
    ///
    /// A run of scale-ups of distinct groups starts from one provider, discovered for the
    /// first of them, as upstream refreshes its provider once a loop: each scale request
    /// changes a MachineDeployment, and discovering the provider again before the next one
    /// (every Machine and Node read) cost about half a second of CPU per scale-up at 15,000
    /// nodes. Each scale-up only reads its own group, which no earlier action of the run
    /// touched; any other action, or a group met twice, discovers it afresh.
    pub async fn apply(&mut self, actions: Vec<Action>) -> Vec<Report> {
        let mut pinned: Option<(Arc<ClusterApiProvider>, Vec<NodeGroupId>)> = None;
        for action in actions {
            let now = self.now();
            let effects = {
                let mut inf = lock(&self.informer);
                let lookup = InformerLookup::new(&mut inf, &self.clusterapi);
                match &action {
                    Action::IncreaseSize { group, .. } => {
                        if pinned
                            .as_ref()
                            .is_some_and(|(_, seen)| seen.contains(group))
                        {
                            pinned = None;
                        }
                        let mut lookup = Pinned::new(lookup, &mut pinned);
                        lookup.touch(group.clone());
                        self.actuation.start(action, &mut lookup, now)
                    }
                    _ => {
                        pinned = None;
                        let mut lookup = lookup;
                        self.actuation.start(action, &mut lookup, now)
                    }
                }
            };
            self.run(effects).await;
        }
        self.handle(Wake::Timer).await
    }

    /// Writes the statuses of capacity-on-request objects, one effect each, in order; returns
    /// what each came to ([`Report::StatusWritten`], [`Report::StatusWriteFailed`]).
    pub async fn write_statuses(
        &mut self,
        updates: Vec<autoscaler_actuation::StatusUpdate>,
    ) -> Vec<Report> {
        let effects: Vec<Effect> = updates
            .into_iter()
            .map(|u| self.actuation.write_status(u))
            .collect();
        self.run(effects).await;
        self.actuation.take_reports()
    }

    /// Waits until an eviction answers or a drain's wakeup time comes. Cancel-safe: nothing
    /// is lost when another branch of a `select!` wins; pass what it returns to
    /// [`Executor::handle`].
    pub async fn wait(&mut self) -> Wake {
        let wakeup = self
            .actuation
            .next_wakeup()
            .map(|ms| self.origin + Duration::from_millis(u64::try_from(ms).unwrap_or(0)));
        let timer = async {
            match wakeup {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            Some(joined) = self.evictions.join_next_with_id() => match joined {
                Ok((id, (ticket, reply))) => {
                    self.tasks.remove(&id);
                    Wake::Reply(ticket, reply)
                }
                Err(e) => {
                    tracing::error!(error = %e, "an eviction task failed");
                    match self.tasks.remove(&e.id()) {
                        Some(ticket) => Wake::Reply(
                            ticket,
                            Reply::Failed(ActionError::new(ErrorClass::Other, e.to_string())),
                        ),
                        None => Wake::Timer,
                    }
                }
            },
            _ = timer => Wake::Timer,
        }
    }

    /// Feeds what woke the executor in and carries out what follows; returns the reports.
    pub async fn handle(&mut self, wake: Wake) -> Vec<Report> {
        let now = self.now();
        let effects = {
            let mut inf = lock(&self.informer);
            let mut lookup = InformerLookup::new(&mut inf, &self.clusterapi);
            match wake {
                Wake::Reply(ticket, reply) => self.actuation.reply(ticket, reply, &mut lookup, now),
                Wake::Timer => self.actuation.step(&mut lookup, now),
            }
        };
        self.run(effects).await;
        self.actuation.take_reports()
    }

    /// Carries effects out, depth first (what follows from a reply before the next effect);
    /// evictions are started as tasks.
    async fn run(&mut self, effects: Vec<Effect>) {
        let mut todo: Vec<Effect> = effects.into_iter().rev().collect();
        while let Some(effect) = todo.pop() {
            if let EffectKind::Evict { .. } = effect.kind() {
                self.spawn_eviction(effect);
                continue;
            }
            let reply = self.execute(effect.kind()).await;
            let now = self.now();
            let mut inf = lock(&self.informer);
            let mut lookup = InformerLookup::new(&mut inf, &self.clusterapi);
            let next = self
                .actuation
                .reply(effect.ticket(), reply, &mut lookup, now);
            drop(inf);
            todo.extend(next.into_iter().rev());
        }
    }

    /// Carries one effect (not an eviction) out.
    async fn execute(&self, effect: &EffectKind) -> Reply {
        let result = match effect {
            EffectKind::Changes { changes, .. } => self.actuator.apply_changes(changes).await,
            EffectKind::AddTaint { node, taint } => self
                .actuator
                .add_taint(node.as_str(), taint)
                .await
                .map(drop),
            EffectKind::RemoveTaint { node, key } => self
                .actuator
                .remove_taint(node.as_str(), key.as_str())
                .await
                .map(drop),
            EffectKind::Untaint { node } => {
                let r = self
                    .actuator
                    .remove_taint(node.as_str(), TO_BE_DELETED_TAINT)
                    .await;
                if let Err(e) = r {
                    tracing::warn!(node = %node, error = %e, "could not remove the deletion taint");
                }
                Ok(())
            }
            EffectKind::SetUnschedulable {
                node,
                unschedulable,
            } => self
                .actuator
                .set_unschedulable(node.as_str(), *unschedulable)
                .await
                .map(drop),
            EffectKind::Evict { .. } => Ok(()),
            EffectKind::WriteStatus { update } => {
                // What was written is cached at once, as upstream's client remembers it: the
                // next loop must not decide on the version before the write when the watch
                // event is late (an atomic request taken up twice would grow twice).
                self.actuator.write_status(update).await.map(|mut stored| {
                    if let Some(o) = stored.as_object_mut() {
                        o.entry("apiVersion")
                            .or_insert_with(|| update.api_version.clone().into());
                        o.entry("kind")
                            .or_insert_with(|| update.key.kind.clone().into());
                        if let Some(md) = o.get_mut("metadata").and_then(|m| m.as_object_mut()) {
                            md.remove("managedFields");
                        }
                    }
                    lock(&self.informer).apply(update.key.clone(), Some(Arc::new(stored)));
                })
            }
            EffectKind::ReadPods { nodes } => {
                return match self.actuator.pods_on_nodes(nodes).await {
                    Ok(pods) => Reply::Pods(pods),
                    Err(e) => {
                        tracing::warn!(error = %e, "could not read the pods of nodes before their deletion");
                        Reply::Failed(e.to_action_error())
                    }
                };
            }
        };
        match result {
            Ok(()) => Reply::Done,
            Err(e) => Reply::Failed(e.to_action_error()),
        }
    }

    /// Starts an eviction as a task: refusals by a budget are retried until its deadline.
    fn spawn_eviction(&mut self, effect: Effect) {
        let EffectKind::Evict {
            pod,
            grace_period_sec,
            deadline_ms,
            ..
        } = effect.kind().clone()
        else {
            return;
        };
        let ticket = effect.ticket();
        let actuator = self.actuator.clone();
        let deadline = self.origin + Duration::from_millis(u64::try_from(deadline_ms).unwrap_or(0));
        let handle = self.evictions.spawn(async move {
            let r = actuator
                .evict(
                    pod.namespace.as_str(),
                    &pod.name,
                    grace_period_sec,
                    deadline,
                )
                .await;
            let reply = match r {
                Ok(Eviction::Evicted { .. }) => Reply::Done,
                Ok(Eviction::AlreadyGone) => Reply::Gone,
                Err(e @ ActuationError::EvictionBlocked { .. }) => {
                    Reply::Refused(e.to_action_error())
                }
                Err(e) => Reply::Failed(e.to_action_error()),
            };
            (ticket, reply)
        });
        self.tasks.insert(handle.id(), ticket);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_api::{Mock, client, next, respond};
    use autoscaler_actuation::Correction;
    use autoscaler_core::{PodEviction, PodRef};
    use autoscaler_model::DELETE_UNREGISTERED;
    use autoscaler_model::ObjectKey;
    use autoscaler_model::ObjectStore;
    use autoscaler_model::Sym;
    use http::Method;
    use serde_json::{Value, json};

    const SNAPSHOT: &str = include_str!("../../cluster-autoscaler/examples/snapshot.yaml");

    type Log = Arc<Mutex<Vec<(Method, String, Value)>>>;

    /// An executor over the example snapshot with `--max-pod-eviction-time=20s`.
    fn executor(client: kube::Client) -> Executor {
        let mut store = ObjectStore::new();
        store.load_yaml(SNAPSHOT).expect("example snapshot loads");
        Executor::new(
            Arc::new(Actuator::new(client)),
            Arc::new(Mutex::new(Informer::from_store(&store))),
            ClusterApiConfig::default(),
            ActuationOptions::new(Duration::from_secs(20))
                .node_delete_delay_after_taint(Duration::ZERO),
        )
    }

    /// An API server whose evictions answer `eviction` (and remove the pod from the informer on
    /// success, as a kubelet would); everything else succeeds.
    /// The server: evictions answered with `eviction`; a pod list by node answers with the
    /// informer's pods on it and the pods of `unseen` (bound there, not in the informer yet).
    async fn serve(
        mut h: Mock,
        log: Log,
        eviction: u16,
        informer: Arc<Mutex<Informer>>,
        unseen: Vec<Value>,
    ) {
        while let Some((seen, send)) = next(&mut h).await {
            let (method, uri, body) = (seen.method, seen.uri, seen.body);
            log.lock()
                .expect("log")
                .push((method.clone(), uri.clone(), body.clone()));
            let (code, answer) = if uri.contains("/eviction") {
                if eviction == 201 {
                    let name = body["metadata"]["name"].as_str().unwrap_or("").to_string();
                    let key = ObjectKey {
                        group: String::new(),
                        kind: "Pod".into(),
                        namespace: "default".into(),
                        name,
                    };
                    informer.lock().expect("informer").apply(key, None);
                }
                (
                    eviction,
                    json!({"kind": "Status", "apiVersion": "v1", "code": eviction,
                        "status": if eviction == 201 { "Success" } else { "Failure" },
                        "reason": if eviction == 429 { "TooManyRequests" } else { "" }}),
                )
            } else if method == Method::GET && uri.starts_with("/api/v1/pods?") {
                let node = uri
                    .split("fieldSelector=spec.nodeName%3D")
                    .nth(1)
                    .and_then(|rest| rest.split('&').next())
                    .unwrap_or_default()
                    .to_string();
                let inf = informer.lock().expect("informer");
                let known = inf.store().iter().filter(|(k, _)| k.is_pod());
                let items: Vec<Value> = known
                    .map(|(_, v)| (**v).clone())
                    .chain(unseen.iter().cloned())
                    .filter(|p| p["spec"]["nodeName"] == node.as_str())
                    .collect();
                drop(inf);
                (
                    200,
                    json!({"apiVersion": "v1", "kind": "PodList",
                        "metadata": {"resourceVersion": "9"}, "items": items}),
                )
            } else if method == Method::GET && uri.starts_with("/api/v1/nodes/general-a") {
                (
                    200,
                    json!({"apiVersion": "v1", "kind": "Node",
                        "metadata": {"name": "general-a", "resourceVersion": "3"},
                        "spec": {"taints": [{"key": TO_BE_DELETED_TAINT, "value": "1",
                                             "effect": "NoSchedule"}]}}),
                )
            } else if uri.contains("/scale") {
                // The watch brings the new size in, as it would after a real scale request.
                let name = (uri.split("/machinedeployments/").nth(1))
                    .and_then(|rest| rest.split('/').next())
                    .unwrap_or_default();
                let key = ObjectKey {
                    group: "cluster.x-k8s.io".into(),
                    kind: "MachineDeployment".into(),
                    namespace: "default".into(),
                    name: name.into(),
                };
                let mut inf = informer.lock().expect("informer");
                if let Some(md) = inf.store().get(&key) {
                    let mut md = (**md).clone();
                    md["spec"]["replicas"] = body["spec"]["replicas"].clone();
                    inf.apply(key, Some(Arc::new(md)));
                }
                drop(inf);
                (
                    200,
                    json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                        "metadata": {"name": "general", "namespace": "default"},
                        "spec": {"replicas": body["spec"]["replicas"]}}),
                )
            } else if method == Method::PATCH {
                (
                    200,
                    json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
                        "metadata": {"name": "general-1-a", "namespace": "default"}}),
                )
            } else {
                (200, body)
            };
            respond(send, code, &answer);
        }
    }

    /// An executor over the example snapshot and a server answering evictions with `eviction`.
    fn running(eviction: u16) -> (Executor, Log) {
        running_with(eviction, Vec::new())
    }

    /// [`running`] with pods bound that the informer has not seen.
    fn running_with(eviction: u16, unseen: Vec<Value>) -> (Executor, Log) {
        let (client, handle) = client();
        let ex = executor(client);
        let log: Log = Arc::default();
        let informer = ex.informer.clone();
        tokio::spawn(serve(handle, log.clone(), eviction, informer, unseen));
        (ex, log)
    }

    fn drain_of_general_a() -> Action {
        Action::DrainAndDelete {
            group: "MachineDeployment/default/general".into(),
            node: Sym::new("general-a"),
            evict: vec![PodEviction {
                pod: PodRef {
                    namespace: Sym::new("default"),
                    name: Arc::from("web-1"),
                },
                grace_period_sec: 5,
                stage: 0,
            }],
            sequential: true,
        }
    }

    /// Applies `actions`, then runs the executor (as the controller does between loops) until
    /// no drain is in flight; every report on the way.
    async fn settle(ex: &mut Executor, actions: Vec<Action>) -> Vec<Report> {
        let mut reports = ex.apply(actions).await;
        while ex.actuation.draining().next().is_some() {
            let wake = ex.wait().await;
            reports.extend(ex.handle(wake).await);
        }
        reports
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_drain_evicts_waits_for_the_pods_then_deletes_the_machine() {
        let (mut ex, log) = running(201);
        let reports = settle(&mut ex, vec![drain_of_general_a()]).await;
        assert!(
            matches!(reports.as_slice(), [Report::DrainStarted { .. }, Report::Deleted { nodes, evicted: 1, empty: false, .. }]
                if nodes == &[Sym::new("general-a")]),
            "{reports:?}"
        );
        let log = log.lock().expect("log").clone();
        let calls: Vec<(Method, &str)> = log
            .iter()
            .map(|(m, u, _)| (m.clone(), u.split('?').next().unwrap_or("")))
            .collect();
        assert_eq!(
            calls,
            vec![
                (
                    Method::POST,
                    "/api/v1/namespaces/default/pods/web-1/eviction"
                ),
                (Method::GET, "/api/v1/pods"),
                (
                    Method::PATCH,
                    "/apis/cluster.x-k8s.io/v1beta1/namespaces/default/machines/general-1-a"
                ),
                (
                    Method::PATCH,
                    "/apis/cluster.x-k8s.io/v1beta1/namespaces/default/machinedeployments/general/scale"
                ),
            ]
        );
        assert_eq!(log[0].2["deleteOptions"]["gracePeriodSeconds"], 5);
        assert!(
            log[1].1.contains("fieldSelector=spec.nodeName%3Dgeneral-a"),
            "{}",
            log[1].1
        );
        assert_eq!(log[3].2, json!({"spec": {"replicas": 1}}));
    }

    /// A pod bound to the drained node whose watch event has not arrived: the pod list read
    /// right before the deletion shows it, and the node stays.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_pod_the_watch_has_not_shown_yet_keeps_its_node() {
        let late = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "late", "namespace": "default", "uid": "late",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "web", "uid": "rs-web", "controller": true}]},
            "spec": {"nodeName": "general-a",
                "containers": [{"name": "web", "image": "nginx"}]},
            "status": {"phase": "Running"}});
        let (mut ex, log) = running_with(201, vec![late]);
        let reports = settle(&mut ex, vec![drain_of_general_a()]).await;
        assert!(
            matches!(reports.last(), Some(Report::DrainFailed { evicted: 1, error, .. })
                if error.message.contains("default/late")),
            "{reports:?}"
        );
        let log = log.lock().expect("log").clone();
        assert!(
            !log.iter()
                .any(|(_, u, _)| u.contains("/scale") || u.contains("/machines/")),
            "nothing deleted: {log:?}"
        );
        let (m, u, _) = log.last().expect("the untaint");
        assert_eq!((m, u.as_str()), (&Method::PUT, "/api/v1/nodes/general-a?"));
    }

    /// The scale-ups of one loop share the provider discovered for the first of them, but a
    /// group scaled twice starts the second time from the size the first request gave it.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn scale_ups_of_one_loop_each_start_from_their_group_as_it_is_then() {
        let (mut ex, log) = running(201);
        let up = |group: &str, delta, new_target| Action::IncreaseSize {
            group: group.into(),
            delta,
            new_target,
        };
        ex.apply(vec![
            up("MachineDeployment/default/general", 1, 3),
            up("MachineDeployment/default/gpu", 2, 3),
            up("MachineDeployment/default/general", 1, 4),
        ])
        .await;
        let log = log.lock().expect("log").clone();
        let sizes: Vec<(&str, Value)> = (log.iter())
            .filter(|(m, u, _)| *m == Method::PATCH && u.contains("/scale"))
            .map(|(_, u, b)| {
                let md = u.split("/machinedeployments/").nth(1).unwrap_or_default();
                (
                    md.split('/').next().unwrap_or_default(),
                    b["spec"]["replicas"].clone(),
                )
            })
            .collect();
        assert_eq!(
            sizes,
            [
                ("general", json!(3)),
                ("gpu", json!(3)),
                ("general", json!(4))
            ]
        );
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_failed_removal_of_unregistered_instances_is_its_own_outcome() {
        let (mut ex, _log) = running(201);
        let delete = |reason: &'static str| Action::DeleteInstances {
            group: "MachineDeployment/default/nope".into(),
            instances: vec![Arc::from("example:///lost")],
            reason,
        };
        let actions = vec![
            delete(DELETE_UNREGISTERED),
            delete(autoscaler_model::SCALE_UP_FAILED),
        ];
        let reports = ex.apply(actions).await;
        let reasons: Vec<(&str, ErrorClass)> = reports
            .iter()
            .map(|r| match r {
                Report::CorrectionFailed {
                    correction: Correction::DeleteInstances { reason, .. },
                    error,
                    ..
                } => (*reason, error.class),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            reasons,
            [
                (DELETE_UNREGISTERED, ErrorClass::NotFound),
                (autoscaler_model::SCALE_UP_FAILED, ErrorClass::NotFound)
            ]
        );
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_drain_blocked_by_a_budget_gives_up_untaints_and_deletes_nothing() {
        let (mut ex, log) = running(429);
        let started = Instant::now();
        let reports = settle(&mut ex, vec![drain_of_general_a()]).await;
        assert!(
            matches!(reports.last(), Some(Report::DrainFailed { evicted: 0, refused, error, .. })
                if refused.len() == 1 && &*refused[0].name == "web-1"
                    && error.class == ErrorClass::Unavailable),
            "the refused pod is named for its ScaleDownFailed event: {reports:?}"
        );
        // It kept trying until --max-pod-eviction-time (20 s, from the options), not longer.
        let took = started.elapsed();
        assert!(
            took >= Duration::from_secs(20) && took < Duration::from_secs(22),
            "{took:?}"
        );
        let log = log.lock().expect("log").clone();
        assert!(log.len() > 3, "retried: {log:?}");
        assert!(
            !log.iter()
                .any(|(_, u, _)| u.contains("/scale") || u.contains("/machines/"))
        );
        let (m, u, b) = log.last().expect("the untaint");
        assert_eq!((m, u.as_str()), (&Method::PUT, "/api/v1/nodes/general-a?"));
        assert!(b["spec"]["taints"].is_null(), "{b}");
    }
}

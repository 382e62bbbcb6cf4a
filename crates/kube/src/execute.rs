//! Carries one loop's actions out through the API, in the core's order, and reports what
//! happened so the controller can feed it back into the core (a refused scale-up backs its group
//! off; a finished or failed deletion starts the scale-down delays).
//!
//! Drains take minutes (evictions wait for PodDisruptionBudgets and grace periods), so each runs
//! as its own task and reports when done; everything else is applied before the loop ends. It
//! never decides what to do: it only does what the actions say, and undoes its own taint when a
//! deletion fails.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use autoscaler_clusterapi::ClusterApiProvider;
use autoscaler_clusterapi::changes::{ObjectChange, ProviderError};
use autoscaler_core::actions::{Action, PodRef};
use autoscaler_core::names::DELETE_UNREGISTERED;
use autoscaler_core::names::TO_BE_DELETED_TAINT;
use autoscaler_core::node::Node;
use tokio::time::Instant;

use crate::actuator::Actuator;
use crate::metrics::ScaleDownReason;
use autoscaler_actuation::Informer;

/// How often a drain looks whether its evicted pods are gone.
const POD_GONE_POLL: Duration = Duration::from_secs(1);

/// Extra time after the grace period for a kubelet to report an evicted pod gone.
const POD_GONE_SLACK: Duration = Duration::from_secs(30);

/// What one action did, for metrics, events and the core's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Done {
    /// A group was grown.
    ScaledUp {
        /// Group id.
        group: String,
        /// Nodes asked for.
        delta: usize,
    },
    /// Growing a group failed: the core backs it off.
    ScaleUpFailed {
        /// Group id.
        group: String,
        /// Why.
        error: String,
    },
    /// Nodes were deleted (empty, or drained).
    Deleted {
        /// Group id.
        group: String,
        /// Nodes.
        nodes: Vec<String>,
        /// Upstream's scaled-down reason.
        reason: ScaleDownReason,
        /// Pods evicted on the way.
        evicted: usize,
    },
    /// A deletion failed; the node's `ToBeDeletedByClusterAutoscaler` taint was removed.
    DeleteFailed {
        /// Group id.
        group: String,
        /// Nodes.
        nodes: Vec<String>,
        /// Why.
        error: String,
        /// Pods evicted before it failed.
        evicted: usize,
        /// Pods whose eviction failed (`namespace`, `name`), for `ScaleDownFailed` on them.
        pods: Vec<(String, String)>,
    },
    /// Instances that never registered could not be deleted (`DeleteUnregisteredFailed`).
    DeleteUnregisteredFailed {
        /// Group id.
        group: String,
        /// Instance ids.
        instances: Vec<String>,
        /// Why.
        error: String,
    },
    /// Broken instances were removed, or a target was lowered.
    Corrected {
        /// Group id.
        group: String,
        /// `DeleteInstances` reason or `DecreaseTargetSize`.
        what: String,
    },
    /// Any other action failed (taints, corrections): logged and counted.
    Failed {
        /// What was being done.
        what: String,
        /// Why.
        error: String,
    },
}

/// A drain to run as a task.
#[derive(Clone, Debug)]
pub struct Drain {
    /// Group id.
    pub group: String,
    /// The node.
    pub node: Arc<Node>,
    /// Pods to evict.
    pub evict: Vec<PodRef>,
    /// Grace period per eviction.
    pub grace_period_sec: u64,
    /// One eviction at a time.
    pub sequential: bool,
}

/// Applies actions; shared by the loop and its drain tasks.
#[derive(Clone)]
pub struct Executor {
    /// The API side.
    pub actuator: Arc<Actuator>,
    /// The informer (node views for deletions, pods for drains).
    pub informer: Arc<Mutex<Informer>>,
    /// `--max-pod-eviction-time`: how long evictions refused by a budget are retried.
    pub max_pod_eviction_time: Duration,
}

impl Executor {
    /// Applies the actions of one loop except drains, which are returned to be spawned (nodes
    /// already draining are skipped). `draining` lists the nodes with a drain in flight: their
    /// taints are left alone.
    pub async fn apply(
        &self,
        provider: &ClusterApiProvider,
        actions: Vec<Action>,
        draining: &BTreeMap<String, String>,
    ) -> (Vec<Done>, Vec<Drain>) {
        let mut done = Vec::new();
        let mut drains = Vec::new();
        for action in actions {
            match action {
                Action::IncreaseSize { group, delta, .. } => {
                    let id = group.as_str().to_string();
                    let result = self.changes(provider.increase_size(&id, delta)).await;
                    done.push(match result {
                        Ok(()) => Done::ScaledUp { group: id, delta },
                        Err(error) => Done::ScaleUpFailed { group: id, error },
                    });
                }
                Action::DecreaseTargetSize { group, delta } => {
                    let id = group.as_str().to_string();
                    let result = self
                        .changes(provider.decrease_target_size(&id, delta))
                        .await;
                    done.push(self.corrected(id, "DecreaseTargetSize".into(), result));
                }
                Action::DeleteInstances {
                    group,
                    instances,
                    reason,
                } => {
                    let id = group.as_str().to_string();
                    let ids: Vec<&str> = instances.iter().map(|i| &**i).collect();
                    let result = self.changes(provider.delete_instances(&id, &ids)).await;
                    done.push(match result {
                        Err(error) if reason == DELETE_UNREGISTERED => {
                            Done::DeleteUnregisteredFailed {
                                group: id,
                                instances: ids.iter().map(|i| i.to_string()).collect(),
                                error,
                            }
                        }
                        result => self.corrected(id, reason.to_string(), result),
                    });
                }
                Action::AddTaint { node, taint } => {
                    if let Err(e) = self.actuator.add_taint(node.as_str(), &taint).await {
                        done.push(Done::Failed {
                            what: format!("taint node {node} {}", taint.key),
                            error: e.to_string(),
                        });
                    }
                }
                Action::RemoveTaint { node, key } => {
                    if draining.contains_key(node.as_str()) {
                        continue;
                    }
                    if let Err(e) = self
                        .actuator
                        .remove_taint(node.as_str(), key.as_str())
                        .await
                    {
                        done.push(Done::Failed {
                            what: format!("untaint node {node} {key}"),
                            error: e.to_string(),
                        });
                    }
                }
                Action::DeleteEmptyNodes { group, nodes } => {
                    let names: Vec<String> = nodes.iter().map(|n| n.as_str().to_string()).collect();
                    let views = self.nodes_named(&names);
                    done.push(
                        self.delete(provider, group.as_str(), &views, ScaleDownReason::Empty, 0)
                            .await,
                    );
                }
                Action::DrainAndDelete {
                    group,
                    node,
                    evict,
                    grace_period_sec,
                    sequential,
                } => {
                    if draining.contains_key(node.as_str()) {
                        continue;
                    }
                    let Some(view) = self.nodes_named(&[node.as_str().to_string()]).pop() else {
                        continue;
                    };
                    drains.push(Drain {
                        group: group.as_str().to_string(),
                        node: view,
                        evict,
                        grace_period_sec,
                        sequential,
                    });
                }
            }
        }
        (done, drains)
    }

    fn corrected(&self, group: String, what: String, result: Result<(), String>) -> Done {
        match result {
            Ok(()) => Done::Corrected { group, what },
            Err(error) => Done::Failed {
                what: format!("{what} in {group}"),
                error,
            },
        }
    }

    fn nodes_named(&self, names: &[String]) -> Vec<Arc<Node>> {
        autoscaler_actuation::informer::lock(&self.informer).nodes_named(names)
    }

    /// Applies the changes a provider call asked for, or passes its refusal on.
    async fn changes(
        &self,
        changes: Result<Vec<ObjectChange>, ProviderError>,
    ) -> Result<(), String> {
        let changes = changes.map_err(|e| e.to_string())?;
        self.actuator
            .apply_changes(&changes)
            .await
            .map_err(|e| e.to_string())
    }

    /// Deletes `nodes` of `group` through the provider; on failure removes their deletion taint.
    async fn delete(
        &self,
        provider: &ClusterApiProvider,
        group: &str,
        nodes: &[Arc<Node>],
        reason: ScaleDownReason,
        evicted: usize,
    ) -> Done {
        let names: Vec<String> = nodes.iter().map(|n| n.name.as_str().to_string()).collect();
        let refs: Vec<&Node> = nodes.iter().map(|n| &**n).collect();
        match self.changes(provider.delete_nodes(group, &refs)).await {
            Ok(()) => Done::Deleted {
                group: group.to_string(),
                nodes: names,
                reason,
                evicted,
            },
            Err(error) => {
                self.untaint(&names).await;
                Done::DeleteFailed {
                    group: group.to_string(),
                    nodes: names,
                    error,
                    evicted,
                    pods: Vec::new(),
                }
            }
        }
    }

    async fn untaint(&self, names: &[String]) {
        for n in names {
            if let Err(e) = self.actuator.remove_taint(n, TO_BE_DELETED_TAINT).await {
                tracing::warn!(node = %n, error = %e, "could not remove the deletion taint");
            }
        }
    }

    /// Runs one drain: evicts its pods (each retried while a budget refuses, up to
    /// `--max-pod-eviction-time`), waits until they are gone, then deletes the node through the
    /// provider current at that time. Any failure removes the node's deletion taint.
    pub async fn drain(
        &self,
        drain: Drain,
        provider: impl Fn() -> Arc<ClusterApiProvider>,
    ) -> Done {
        let deadline = Instant::now() + self.max_pod_eviction_time;
        let name = drain.node.name.as_str().to_string();
        let mut evicted = 0;
        let mut failure = None;
        let mut failed_pods = Vec::new();
        tracing::info!(
            node = %name,
            group = %drain.group,
            pods = drain.evict.len(),
            "Scale-down: draining node"
        );
        if drain.sequential {
            for p in &drain.evict {
                match self
                    .actuator
                    .evict(
                        p.namespace.as_str(),
                        &p.name,
                        drain.grace_period_sec,
                        deadline,
                    )
                    .await
                {
                    Ok(_) => evicted += 1,
                    Err(e) => {
                        failure = Some(format!("evicting {}/{}: {e}", p.namespace, p.name));
                        failed_pods.push((p.namespace.to_string(), p.name.to_string()));
                        break;
                    }
                }
            }
        } else {
            let results = futures::future::join_all(drain.evict.iter().map(|p| async move {
                self.actuator
                    .evict(
                        p.namespace.as_str(),
                        &p.name,
                        drain.grace_period_sec,
                        deadline,
                    )
                    .await
                    .map_err(|e| format!("evicting {}/{}: {e}", p.namespace, p.name))
            }))
            .await;
            for (r, p) in results.into_iter().zip(&drain.evict) {
                match r {
                    Ok(_) => evicted += 1,
                    Err(e) => {
                        failure.get_or_insert(e);
                        failed_pods.push((p.namespace.to_string(), p.name.to_string()));
                    }
                }
            }
        }
        if failure.is_none() {
            let wait = Duration::from_secs(drain.grace_period_sec) + POD_GONE_SLACK;
            if !self.wait_pods_gone(&name, &drain.evict, wait).await {
                failure = Some(format!(
                    "evicted pods still on the node after {}s",
                    wait.as_secs()
                ));
            }
        }
        if let Some(error) = failure {
            self.untaint(std::slice::from_ref(&name)).await;
            return Done::DeleteFailed {
                group: drain.group,
                nodes: vec![name],
                error,
                evicted,
                pods: failed_pods,
            };
        }
        let provider = provider();
        let reason = ScaleDownReason::of(false, drain.node.is_ready());
        self.delete(&provider, &drain.group, &[drain.node], reason, evicted)
            .await
    }

    /// Whether every pod of `evict` has left `node` (gone, terminal, or elsewhere) within `wait`.
    async fn wait_pods_gone(&self, node: &str, evict: &[PodRef], wait: Duration) -> bool {
        let until = Instant::now() + wait;
        loop {
            let left = {
                let inf = autoscaler_actuation::informer::lock(&self.informer);
                evict.iter().any(|p| {
                    inf.pod(p.namespace.as_str(), &p.name).is_some_and(|pod| {
                        pod.node_name.is_some_and(|n| n.as_str() == node) && !pod.is_terminal()
                    })
                })
            };
            if !left {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(POD_GONE_POLL).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_api::{Mock, client, next, respond};
    use autoscaler_clusterapi::ClusterApiConfig;
    use autoscaler_core::intern::Sym;
    use autoscaler_core::store::{ObjectKey, ObjectStore};
    use http::Method;
    use serde_json::{Value, json};

    const SNAPSHOT: &str = include_str!("../../cluster-autoscaler/examples/snapshot.yaml");

    type Log = Arc<Mutex<Vec<(Method, String, Value)>>>;

    fn executor(client: kube::Client) -> Executor {
        let mut store = ObjectStore::new();
        store.load_yaml(SNAPSHOT).expect("example snapshot loads");
        let mut inf = Informer::new();
        for (k, v) in store.iter() {
            inf.apply(k.clone(), Some(v.clone()));
        }
        Executor {
            actuator: Arc::new(Actuator::new(client)),
            informer: Arc::new(Mutex::new(inf)),
            max_pod_eviction_time: Duration::from_secs(20),
        }
    }

    /// An API server whose evictions answer `eviction` (and remove the pod from the informer on
    /// success, as a kubelet would); everything else succeeds.
    async fn serve(mut h: Mock, log: Log, eviction: u16, informer: Arc<Mutex<Informer>>) {
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
            } else if method == Method::GET && uri.starts_with("/api/v1/nodes/general-a") {
                (
                    200,
                    json!({"apiVersion": "v1", "kind": "Node",
                        "metadata": {"name": "general-a", "resourceVersion": "3"},
                        "spec": {"taints": [{"key": TO_BE_DELETED_TAINT, "value": "1",
                                             "effect": "NoSchedule"}]}}),
                )
            } else if uri.contains("/scale") {
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
        let (client, handle) = client();
        let ex = executor(client);
        let log: Log = Arc::default();
        tokio::spawn(serve(handle, log.clone(), eviction, ex.informer.clone()));
        (ex, log)
    }

    /// The provider as the executor's informer shows it at the time of the call.
    fn provider(ex: &Executor) -> impl Fn() -> Arc<ClusterApiProvider> + use<> {
        let informer = ex.informer.clone();
        move || {
            autoscaler_actuation::informer::lock(&informer).provider(&ClusterApiConfig::default())
        }
    }

    fn drain_of_general_a(ex: &Executor) -> Drain {
        let node = ex
            .nodes_named(&["general-a".to_string()])
            .pop()
            .expect("general-a in the snapshot");
        Drain {
            group: "MachineDeployment/default/general".into(),
            node,
            evict: vec![PodRef {
                namespace: Sym::new("default"),
                name: Arc::from("web-1"),
            }],
            grace_period_sec: 5,
            sequential: true,
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_drain_evicts_waits_for_the_pods_then_deletes_the_machine() {
        let (ex, log) = running(201);
        let done = ex.drain(drain_of_general_a(&ex), provider(&ex)).await;
        assert!(
            matches!(&done, Done::Deleted { nodes, evicted: 1, .. } if nodes == &["general-a"]),
            "{done:?}"
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
        assert_eq!(log[2].2, json!({"spec": {"replicas": 1}}));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_failed_removal_of_unregistered_instances_is_its_own_outcome() {
        let (ex, _log) = running(201);
        let provider = provider(&ex)();
        let delete = |reason: &'static str| Action::DeleteInstances {
            group: "MachineDeployment/default/nope".into(),
            instances: vec![Arc::from("example:///lost")],
            reason,
        };
        let actions = vec![
            delete(autoscaler_core::names::DELETE_UNREGISTERED),
            delete(autoscaler_core::names::SCALE_UP_FAILED),
        ];
        let (done, _) = ex.apply(&provider, actions, &BTreeMap::new()).await;
        assert!(
            matches!(&done[0], Done::DeleteUnregisteredFailed { group, instances, .. }
                if group == "MachineDeployment/default/nope" && instances == &["example:///lost"]),
            "{done:?}"
        );
        assert!(matches!(&done[1], Done::Failed { .. }), "{done:?}");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_drain_blocked_by_a_budget_gives_up_untaints_and_deletes_nothing() {
        let (ex, log) = running(429);
        let started = Instant::now();
        let done = ex.drain(drain_of_general_a(&ex), provider(&ex)).await;
        assert!(
            matches!(&done, Done::DeleteFailed { evicted: 0, pods, .. }
                if pods == &[("default".to_string(), "web-1".to_string())]),
            "the refused pod is named for its ScaleDownFailed event: {done:?}"
        );
        // It kept trying until --max-pod-eviction-time, not longer.
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

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
use autoscaler_clusterapi::changes::ObjectChange;
use autoscaler_core::actions::{Action, PodRef};
use autoscaler_core::node::Node;
use autoscaler_core::template::TO_BE_DELETED_TAINT;
use tokio::time::Instant;

use crate::actuator::Actuator;
use crate::informer::Informer;

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
        /// `empty` or `underutilized` (upstream's scaled-down reasons).
        reason: &'static str,
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
                    let result = match provider.increase_size(&id, delta) {
                        Ok(changes) => self.changes(&changes).await,
                        Err(e) => Err(e.to_string()),
                    };
                    done.push(match result {
                        Ok(()) => Done::ScaledUp { group: id, delta },
                        Err(error) => Done::ScaleUpFailed { group: id, error },
                    });
                }
                Action::DecreaseTargetSize { group, delta } => {
                    let id = group.as_str().to_string();
                    let result = match provider.decrease_target_size(&id, delta) {
                        Ok(changes) => self.changes(&changes).await,
                        Err(e) => Err(e.to_string()),
                    };
                    done.push(self.corrected(id, "DecreaseTargetSize".into(), result));
                }
                Action::DeleteInstances {
                    group,
                    instances,
                    reason,
                } => {
                    let id = group.as_str().to_string();
                    let ids: Vec<&str> = instances.iter().map(|i| &**i).collect();
                    let result = match provider.delete_instances(&id, &ids) {
                        Ok(changes) => self.changes(&changes).await,
                        Err(e) => Err(e.to_string()),
                    };
                    done.push(self.corrected(id, reason.to_string(), result));
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
                        self.delete(provider, group.as_str(), &views, "empty", 0)
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
        match self.informer.lock() {
            Ok(inf) => inf.nodes_named(names),
            Err(poisoned) => poisoned.into_inner().nodes_named(names),
        }
    }

    async fn changes(&self, changes: &[ObjectChange]) -> Result<(), String> {
        self.actuator
            .apply_changes(changes)
            .await
            .map_err(|e| e.to_string())
    }

    /// Deletes `nodes` of `group` through the provider; on failure removes their deletion taint.
    async fn delete(
        &self,
        provider: &ClusterApiProvider,
        group: &str,
        nodes: &[Arc<Node>],
        reason: &'static str,
        evicted: usize,
    ) -> Done {
        let names: Vec<String> = nodes.iter().map(|n| n.name.as_str().to_string()).collect();
        let refs: Vec<&Node> = nodes.iter().map(|n| &**n).collect();
        let result = match provider.delete_nodes(group, &refs) {
            Ok(changes) => self.changes(&changes).await,
            Err(e) => Err(e.to_string()),
        };
        match result {
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
            for r in results {
                match r {
                    Ok(_) => evicted += 1,
                    Err(e) => {
                        failure.get_or_insert(e);
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
            };
        }
        let provider = provider();
        self.delete(
            &provider,
            &drain.group,
            &[drain.node],
            "underutilized",
            evicted,
        )
        .await
    }

    /// Whether every pod of `evict` has left `node` (gone, terminal, or elsewhere) within `wait`.
    async fn wait_pods_gone(&self, node: &str, evict: &[PodRef], wait: Duration) -> bool {
        let until = Instant::now() + wait;
        loop {
            let left = {
                let inf = match self.informer.lock() {
                    Ok(g) => g,
                    Err(poisoned) => poisoned.into_inner(),
                };
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

//! The controller: waits for the caches to sync and for the leader Lease, then runs the core's
//! loop every scan interval (sooner, debounced, when new unschedulable pods appear), carries the
//! actions out and feeds their outcomes back into the core's state.
//!
//! It never decides what to scale (the core does) and never acts without holding the Lease.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use autoscaler_clusterapi::{ClusterApiConfig, ClusterApiProvider};
use autoscaler_core::autoscaler::{Autoscaler, AutoscalerOptions, ClusterView};
use autoscaler_core::estimator::Unlimited;
use autoscaler_core::expander::{PRIORITY_CONFIG_KEY, PRIORITY_CONFIG_MAP_NAME};
use autoscaler_core::intern::Sym;
use autoscaler_core::node_group::NodeGroupId;
use autoscaler_core::scale_down::InFlight;
use autoscaler_core::store::ObjectStore;
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::actuator::Actuator;
use crate::events::{EventSink, events_of};
use crate::execute::{Done, Executor};
use crate::health::Health;
use crate::informer::Informer;
use crate::leader::{self, LeaderConfig};
use crate::metrics::Metrics;
use crate::status::{Transitions, status_yaml, write_status};
use crate::watch::WatchConfig;

/// Everything `run` needs, validated (the binary builds it from flags and the config file).
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// The decision core's options.
    pub autoscaler: AutoscalerOptions,
    /// Cluster API provider options (API group, auto-discovery).
    pub clusterapi: ClusterApiConfig,
    /// `--scan-interval` (10s).
    pub scan_interval: Duration,
    /// How long to wait after a new unschedulable pod before running a loop early, so a burst
    /// of pods is seen in one loop.
    pub debounce: Duration,
    /// `--namespace` (kube-system): Lease, status ConfigMap, priority-expander ConfigMap.
    pub namespace: String,
    /// `--leader-elect` (true).
    pub leader_elect: bool,
    /// `--leader-elect-lease-duration` (15s).
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline` (10s).
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period` (2s).
    pub retry_period: Duration,
    /// `--leader-elect-resource-name` (cluster-autoscaler).
    pub lease_name: String,
    /// This process's identity in the Lease (pod name, else hostname).
    pub identity: String,
    /// `--address` (:8085): `/metrics` and `/health-check`.
    pub address: SocketAddr,
    /// `--write-status-configmap` (true).
    pub write_status_configmap: bool,
    /// `--status-config-map-name` (cluster-autoscaler-status).
    pub status_config_map_name: String,
    /// `--max-inactivity` (10m): `/health-check` fails when no loop ran for this long.
    pub max_inactivity: Duration,
    /// `--max-failing-time` (15m): `/health-check` fails when loops failed for this long.
    pub max_failing_time: Duration,
    /// `--max-pod-eviction-time` (2m): how long a drain retries evictions refused by a budget.
    pub max_pod_eviction_time: Duration,
}

impl Default for ControllerConfig {
    /// Upstream's defaults.
    fn default() -> Self {
        ControllerConfig {
            autoscaler: AutoscalerOptions::default(),
            clusterapi: ClusterApiConfig::default(),
            scan_interval: Duration::from_secs(10),
            debounce: Duration::from_millis(200),
            namespace: "kube-system".into(),
            leader_elect: true,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            lease_name: "cluster-autoscaler".into(),
            identity: "cluster-autoscaler".into(),
            address: SocketAddr::from(([0, 0, 0, 0], 8085)),
            write_status_configmap: true,
            status_config_map_name: "cluster-autoscaler-status".into(),
            max_inactivity: Duration::from_secs(600),
            max_failing_time: Duration::from_secs(900),
            max_pod_eviction_time: Duration::from_secs(120),
        }
    }
}

/// Why the controller stopped.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The metrics and health endpoint could not listen on `--address`.
    #[error("cannot listen on {address}: {source}")]
    Listen {
        /// The address.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The Kubernetes API could not be used at start.
    #[error("Kubernetes API: {0}")]
    Api(String),
}

/// The live parts one leadership term works with.
#[derive(Clone)]
pub struct Parts {
    /// The API.
    pub client: kube::Client,
    /// The object cache the watchers fill.
    pub informer: Arc<Mutex<Informer>>,
    /// Becomes true once every watched kind has listed (decisions wait for it).
    pub synced: watch::Receiver<bool>,
    /// Signalled when new unschedulable pods appear.
    pub unschedulable: Arc<Notify>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Health.
    pub health: Arc<Health>,
}

/// Runs the controller until the process is told to stop (SIGTERM / Ctrl-C).
pub async fn run(client: kube::Client, config: ControllerConfig) -> Result<(), ControllerError> {
    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health::new(
        config.max_inactivity,
        config.max_failing_time,
        Instant::now(),
    ));
    let listener =
        TcpListener::bind(config.address)
            .await
            .map_err(|source| ControllerError::Listen {
                address: config.address,
                source,
            })?;
    tracing::info!(address = %config.address, "serving /metrics and /health-check");
    let (stop_tx, stop_rx) = watch::channel(false);
    let server = tokio::spawn(crate::server::serve(
        listener,
        metrics.clone(),
        health.clone(),
        stopped(stop_rx.clone()),
    ));
    let watches = crate::watch::start(
        client.clone(),
        WatchConfig {
            namespace: config.namespace.clone(),
            clusterapi: config.clusterapi.clone(),
        },
    )
    .await
    .map_err(|e| ControllerError::Api(e.to_string()))?;
    let parts = Parts {
        client: client.clone(),
        informer: watches.informer(),
        synced: watches.synced(),
        unschedulable: watches.unschedulable(),
        metrics,
        health,
    };
    let leadership = config.leader_elect.then(|| {
        leader::spawn(
            client.clone(),
            LeaderConfig {
                namespace: config.namespace.clone(),
                name: config.lease_name.clone(),
                identity: config.identity.clone(),
                lease_duration: config.lease_duration,
                renew_deadline: config.renew_deadline,
                retry_period: config.retry_period,
            },
        )
    });
    let leading = match &leadership {
        Some(l) => l.subscribe(),
        None => leader::always_leader(),
    };
    tokio::select! {
        _ = shutdown_signal() => tracing::info!("stopping"),
        _ = supervise(parts, config, leading) => {}
    }
    let _ = stop_tx.send(true);
    if let Some(l) = leadership {
        l.stop().await;
    }
    drop(watches);
    let _ = server.await;
    Ok(())
}

async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Leads whenever `leading` is true: each term starts from fresh core state (another leader
/// may have acted meanwhile) and ends the moment leadership is lost, dropping every request and
/// drain in flight. Returns when the leadership channel closes.
pub async fn supervise(parts: Parts, config: ControllerConfig, mut leading: watch::Receiver<bool>) {
    loop {
        if leading.wait_for(|l| *l).await.is_err() {
            return;
        }
        tracing::info!("leading: starting a term");
        let mut lost = leading.clone();
        tokio::select! {
            r = lost.wait_for(|l| !*l) => {
                if r.is_err() {
                    return;
                }
                tracing::warn!("leadership lost: stopped acting");
            }
            _ = lead(&parts, &config) => {}
        }
    }
}

/// A drain task's answer: the node and what happened.
type DrainResult = (String, Done);

/// One leadership term: wait for the caches, clean up taints of a predecessor, then loop.
async fn lead(parts: &Parts, config: &ControllerConfig) {
    let mut synced = parts.synced.clone();
    if synced.wait_for(|s| *s).await.is_err() {
        return;
    }
    let actuator = Arc::new(Actuator::new(parts.client.clone()));
    match actuator.clean_up_taints().await {
        Ok(cleaned) if !cleaned.is_empty() => {
            tracing::info!(nodes = ?cleaned, "removed autoscaler taints left by a predecessor")
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "could not clean up autoscaler taints at start"),
    }
    let executor = Executor {
        actuator: actuator.clone(),
        informer: parts.informer.clone(),
        max_pod_eviction_time: config.max_pod_eviction_time,
    };
    let mut term = Term {
        autoscaler: Autoscaler::new(config.autoscaler.clone()),
        executor,
        events: EventSink::new(parts.client.clone()),
        transitions: Transitions::default(),
        draining: BTreeMap::new(),
        drains: JoinSet::new(),
        provider: None,
    };
    let mut next = Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = parts.unschedulable.notified() => {
                // Let a burst of pods arrive, so one loop sees them all.
                tokio::time::sleep(config.debounce).await;
            }
            Some(joined) = term.drains.join_next() => {
                match joined {
                    Ok((node, done)) => {
                        term.draining.remove(&node);
                        term.record(parts, &[done]);
                    }
                    Err(e) => tracing::error!(error = %e, "a drain task failed"),
                }
                continue;
            }
        }
        let started = Instant::now();
        parts.health.loop_started(started);
        let ok = term.one_loop(parts, config).await;
        let finished = Instant::now();
        if ok {
            parts.health.loop_succeeded(finished);
        } else {
            parts.health.loop_failed(finished);
            parts.metrics.error("loop");
        }
        parts
            .metrics
            .function_duration("main", (finished - started).as_secs_f64());
        parts.metrics.last_activity("main", unix_secs());
        next = started + config.scan_interval;
    }
}

fn unix_secs() -> f64 {
    jiff::Timestamp::now().as_millisecond() as f64 / 1000.0
}

/// State of one leadership term.
struct Term {
    autoscaler: Autoscaler,
    executor: Executor,
    events: EventSink,
    transitions: Transitions,
    /// Nodes with a drain in flight, and their group.
    draining: BTreeMap<String, String>,
    drains: JoinSet<DrainResult>,
    /// The provider of the last loop (drains delete through the latest one).
    provider: Option<Arc<ClusterApiProvider>>,
}

impl Term {
    /// One loop; false when something in it failed.
    async fn one_loop(&mut self, parts: &Parts, config: &ControllerConfig) -> bool {
        let now_ms = jiff::Timestamp::now().as_millisecond();
        let (provider, objects, pods, priorities) = {
            let mut inf = match parts.informer.lock() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
            let provider = inf.provider(&config.clusterapi);
            let objects = inf.objects_without_pods();
            let pods = inf.pods().to_vec();
            let priorities = priority_text(inf.store(), &config.namespace);
            (provider, objects, pods, priorities)
        };
        self.provider = Some(provider.clone());
        self.autoscaler
            .options
            .scale_up
            .expander
            .set_priority_text(priorities.as_deref());
        let mut in_flight = InFlight {
            per_group: vec![0; provider.resources().len()],
            empty: 0,
            drains: self.draining.len(),
        };
        for group in self.draining.values() {
            if let Some(i) = provider.group_index(group) {
                in_flight.per_group[i] += 1;
            }
        }
        let view = ClusterView {
            nodes: &objects.nodes,
            pods: &pods,
            daemonsets: &objects.daemonsets,
            namespaces: &objects.namespaces,
            provider: &*provider,
            pdbs: &objects.pdbs,
        };
        let decide = Instant::now();
        let outcome = self.autoscaler.run_once(
            &view,
            &objects.controllers,
            in_flight,
            now_ms,
            &mut Unlimited,
        );
        parts
            .metrics
            .function_duration("decide", decide.elapsed().as_secs_f64());
        parts.metrics.observe_outcome(&view, &outcome);

        let act = Instant::now();
        let (done, drains) = self
            .executor
            .apply(&provider, outcome.actions.clone(), &self.draining)
            .await;
        let ok = self.record(parts, &done);
        for d in drains {
            let node = d.node.name.as_str().to_string();
            self.draining.insert(node.clone(), d.group.clone());
            let executor = self.executor.clone();
            let informer = parts.informer.clone();
            let clusterapi = config.clusterapi.clone();
            self.drains.spawn(async move {
                let provider = move || match informer.lock() {
                    Ok(mut g) => g.provider(&clusterapi),
                    Err(p) => p.into_inner().provider(&clusterapi),
                };
                let done = executor.drain(d, provider).await;
                (node, done)
            });
        }
        parts
            .metrics
            .function_duration("act", act.elapsed().as_secs_f64());

        for e in events_of(&outcome, &config.namespace, &config.status_config_map_name) {
            self.events.publish(&e).await;
        }
        if config.write_status_configmap {
            let yaml = status_yaml(&outcome, now_ms, &mut self.transitions);
            if let Err(e) = write_status(
                &parts.client,
                &config.namespace,
                &config.status_config_map_name,
                &yaml,
            )
            .await
            {
                tracing::warn!(error = %e, "could not write the status ConfigMap");
                parts.metrics.error("apiCallError");
            }
        }
        ok
    }

    /// Feeds what the actions did back into the core and the metrics; false if any failed.
    fn record(&mut self, parts: &Parts, done: &[Done]) -> bool {
        let now_ms = jiff::Timestamp::now().as_millisecond();
        let m = &parts.metrics;
        let mut ok = true;
        for d in done {
            match d {
                Done::ScaledUp { group, delta } => {
                    tracing::info!(%group, delta, "scaled up");
                    m.scaled_up(*delta as u64);
                    m.last_activity("scaleUp", unix_secs());
                }
                Done::ScaleUpFailed { group, error } => {
                    ok = false;
                    tracing::warn!(%group, %error, "scale-up failed");
                    m.failed_scale_up("cloudProviderError");
                    m.error("cloudProviderError");
                    let id = NodeGroupId::from(group.as_str());
                    self.autoscaler.record_scale_up_failure(&id, now_ms, error);
                }
                Done::Deleted {
                    group,
                    nodes,
                    reason,
                    evicted,
                } => {
                    tracing::info!(%group, ?nodes, reason, "scaled down");
                    m.scaled_down(nodes.len() as u64, reason);
                    for _ in 0..*evicted {
                        m.evicted(true);
                    }
                    m.last_activity("scaleDown", unix_secs());
                    for n in nodes {
                        self.autoscaler
                            .scale_down
                            .record_deletion(Sym::new(n), true, now_ms);
                    }
                }
                Done::DeleteFailed {
                    group,
                    nodes,
                    error,
                    evicted,
                } => {
                    ok = false;
                    tracing::warn!(%group, ?nodes, %error, "scale-down failed");
                    m.error("scaleDownError");
                    for _ in 0..*evicted {
                        m.evicted(true);
                    }
                    for n in nodes {
                        self.autoscaler
                            .scale_down
                            .record_deletion(Sym::new(n), false, now_ms);
                    }
                }
                Done::Corrected { group, what } => {
                    tracing::info!(%group, %what, "node group corrected")
                }
                Done::Failed { what, error } => {
                    ok = false;
                    tracing::warn!(%what, %error, "action failed");
                    m.error("apiCallError");
                }
            }
        }
        ok
    }
}

/// The priority expander's configuration text from the cached ConfigMap, if any.
fn priority_text(store: &ObjectStore, namespace: &str) -> Option<String> {
    store
        .list("", "ConfigMap")
        .find(|(k, _)| k.namespace == namespace && k.name == PRIORITY_CONFIG_MAP_NAME)
        .and_then(|(_, v)| {
            v.pointer(&format!("/data/{PRIORITY_CONFIG_KEY}"))
                .and_then(|t| t.as_str())
                .map(str::to_string)
        })
}

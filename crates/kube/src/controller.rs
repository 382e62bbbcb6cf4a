//! The controller: checks that the API server is supported ([`crate::compat`]), waits for the
//! caches to sync and for the leader Lease, then runs the core's loop every scan interval
//! (sooner, debounced, when new unschedulable pods appear), carries the actions out and feeds
//! their outcomes back into the core's state.
//!
//! It never decides what to scale (the core does), never acts without holding the Lease and
//! never runs a loop on a view where a newly discovered kind has not listed yet.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use autoscaler_clusterapi::ClusterApiConfig;
use autoscaler_core::ErrorClass;
use autoscaler_core::is_unprocessed;
use autoscaler_core::{Autoscaler, AutoscalerOptions, ClusterView, LoopInput, PhaseClock};
use autoscaler_model::DELETE_UNREGISTERED;
use autoscaler_model::NodeGroupId;
use autoscaler_model::Sym;
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::Clients;
use crate::actuator::Actuator;
use crate::correlator::{CorrelatorOptions, DropReason};
use crate::events::{
    EventSink, EventSpec, NoScaleDownEvents, PublishStats, events_of, max_nodes_total_event,
};
use crate::execute::Executor;
use crate::health::Health;
use crate::leader::{self, LeaderConfig};
use crate::metrics::{FailedScaleUpReason, GpuLabels, Metrics, ScaleDownReason};
use crate::server::LastPlan;
use crate::skipped::SkippedObjects;
use crate::status::{
    Transitions, status_time, status_yaml, with_unsupported_settings, write_status,
};
use crate::watch::WatchConfig;
use autoscaler_actuation::Informer;
use autoscaler_actuation::{ActuationOptions, Correction, Report};

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
    /// `--max-startup-time` (20m): `/health-check` fails when no loop succeeded this long after
    /// this replica started running loops.
    pub max_startup_time: Duration,
    /// `--emit-per-nodegroup-metrics` (false): expose the per-node-group gauges.
    pub emit_per_nodegroup_metrics: bool,
    /// `--max-pod-eviction-time` (2m): how long a drain retries evictions refused by a budget.
    pub max_pod_eviction_time: Duration,
    /// Flags given that ask for features this autoscaler does not have (`--flag=value: why`),
    /// listed in the status ConfigMap so they are never silent.
    pub unsupported_settings: Vec<String>,
    /// `--cordon-node-before-terminating` (true): cordon a node with its deletion taint.
    pub cordon_node_before_terminating: bool,
    /// `--node-delete-delay-after-taint` (5s): wait between the deletion taint and the
    /// deletion (or drain) of a node.
    pub node_delete_delay_after_taint: Duration,
    /// `--node-deletion-delay-timeout` (2m): the longest a deletion waits for the node's
    /// `delay-deletion.cluster-autoscaler.kubernetes.io/*` annotations to go.
    pub node_deletion_delay_timeout: Duration,
    /// `--enable-explain-endpoint` (ours, false): serve the last loop's plan at `/explain`.
    pub enable_explain_endpoint: bool,
    /// `--emit-unremovable-node-events` (ours, false): `NoScaleDown` events on the nodes not
    /// removed, with why (see [`NoScaleDownEvents`]).
    pub emit_unremovable_node_events: bool,
}

impl ControllerConfig {
    /// How actions are carried out, from the flags.
    pub fn actuation_options(&self) -> ActuationOptions {
        ActuationOptions::new(self.max_pod_eviction_time)
            .cordon_node_before_terminating(self.cordon_node_before_terminating)
            .node_delete_delay_after_taint(self.node_delete_delay_after_taint)
            .node_deletion_delay_timeout(self.node_deletion_delay_timeout)
            .expendable_pods_priority_cutoff(
                self.autoscaler
                    .scale_down
                    .drain()
                    .expendable_pods_priority_cutoff(),
            )
    }
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
            max_startup_time: crate::health::DEFAULT_MAX_STARTUP_TIME,
            emit_per_nodegroup_metrics: false,
            max_pod_eviction_time: Duration::from_secs(120),
            unsupported_settings: Vec::new(),
            cordon_node_before_terminating: true,
            node_delete_delay_after_taint: Duration::from_secs(5),
            node_deletion_delay_timeout: Duration::from_secs(120),
            enable_explain_endpoint: false,
            emit_unremovable_node_events: false,
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
    /// The API server is not one this autoscaler supports (checked before leading).
    #[error("unsupported Kubernetes API server: {0}")]
    Unsupported(#[from] crate::compat::Unsupported),
}

/// The live parts one leadership term works with.
#[derive(Clone)]
pub struct Parts {
    /// The workload cluster's API (nodes, pods, Lease, events, status).
    pub client: kube::Client,
    /// The management cluster's API (Cluster API objects); the same as `client` unless split.
    pub management: kube::Client,
    /// The object cache the watchers fill.
    pub informer: Arc<Mutex<Informer>>,
    /// The watched kinds that have not listed yet (decisions wait until it is empty).
    pub unsynced: watch::Receiver<BTreeSet<String>>,
    /// Signalled when new unschedulable pods appear.
    pub unschedulable: Arc<Notify>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// The objects left out of the view (named in warnings and the status).
    pub skipped: Arc<SkippedObjects>,
    /// Health.
    pub health: Arc<Health>,
    /// The decision's options when they can change while running (the `ClusterAutoscaler`
    /// resource, watched by the binary): each loop takes the latest; `None` keeps
    /// [`ControllerConfig::autoscaler`].
    pub options: Option<watch::Receiver<AutoscalerOptions>>,
    /// Where each loop leaves its plan for `/explain` (`--enable-explain-endpoint`).
    pub explain: Option<Arc<LastPlan>>,
}

/// Runs the controller until the process is told to stop (SIGTERM / Ctrl-C). The workload
/// cluster's server is checked for support; the Cluster API kinds are discovered on the
/// management cluster.
pub async fn run(clients: Clients, config: ControllerConfig) -> Result<(), ControllerError> {
    run_with_options(clients, config, None).await
}

/// [`run`], with the decision's options taken from `options` whenever they change (see
/// [`Parts::options`]).
pub async fn run_with_options(
    clients: Clients,
    config: ControllerConfig,
    options: Option<watch::Receiver<AutoscalerOptions>>,
) -> Result<(), ControllerError> {
    let client = clients.workload.clone();
    let metrics = Arc::new(Metrics::with_per_node_group(
        config.emit_per_nodegroup_metrics,
    ));
    let health = Arc::new(
        Health::new(config.max_inactivity, config.max_failing_time)
            .with_max_startup_time(config.max_startup_time),
    );
    let listener =
        TcpListener::bind(config.address)
            .await
            .map_err(|source| ControllerError::Listen {
                address: config.address,
                source,
            })?;
    let explain = config
        .enable_explain_endpoint
        .then(|| Arc::new(LastPlan::default()));
    tracing::info!(
        address = %config.address,
        explain = explain.is_some(),
        "serving /metrics and /health-check"
    );
    let (stop_tx, stop_rx) = watch::channel(false);
    let server = tokio::spawn(crate::server::serve(
        listener,
        metrics.clone(),
        health.clone(),
        explain.clone(),
        stopped(stop_rx.clone()),
    ));
    let capacity = &config.autoscaler.capacity;
    let watch_config = WatchConfig {
        capacity: crate::watch::CapacityWatch {
            requests: capacity.requests().enabled(),
            buffers: capacity.buffer_controller() || capacity.buffer_pods(),
            ..Default::default()
        },
        rediscover_while_unserved: config.scan_interval,
        skipped: Arc::new(SkippedObjects::new(Some(metrics.clone()))),
        ..WatchConfig::new(&config.namespace, config.clusterapi.clone())
    };
    // An API server that is not reachable yet (or a discovery error) is retried, not fatal:
    // the process stays up, reports itself healthy as a standby, and logs each attempt. One
    // that answers but is not supported stops the process before it watches or leads.
    let started = tokio::select! {
        w = async {
            check_server(&client, config.leader_elect).await?;
            Ok(start_watches(&clients, &watch_config).await)
        } => Some(w),
        signal = shutdown_signal() => {
            tracing::info!(signal, "received a signal before the watches started: stopping");
            None
        }
    };
    let watches = match started {
        Some(Ok(w)) => w,
        other => {
            let _ = stop_tx.send(true);
            let _ = server.await;
            return other.map_or(Ok(()), |r| r.map(|_| ()));
        }
    };
    let api_support = tokio::spawn(watch_api_support(
        client.clone(),
        config.leader_elect,
        watches.api_not_found(),
        health.clone(),
    ));
    let parts = Parts {
        client: client.clone(),
        management: clients.management.clone(),
        informer: watches.informer().clone(),
        unsynced: watches.sync_state(),
        unschedulable: watches.new_unschedulable().clone(),
        metrics,
        skipped: watch_config.skipped.clone(),
        health,
        options,
        explain,
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
    // Without election this process always leads: the sender lives until `run` returns.
    let (_always, always_leading) = watch::channel(true);
    let leading = match &leadership {
        Some(l) => l.subscribe(),
        None => always_leading,
    };
    tokio::select! {
        signal = shutdown_signal() => {
            tracing::info!(signal, "received a signal: releasing the lease and stopping")
        }
        _ = supervise(parts, config, leading) => {}
    }
    let _ = stop_tx.send(true);
    api_support.abort();
    if let Some(l) = leadership {
        l.stop().await;
    }
    drop(watches);
    let _ = server.await;
    Ok(())
}

/// Checks the server's version and APIs ([`crate::compat::check`]), retrying discovery errors
/// with exponential backoff (1 s doubling to 60 s). Unsupported: the error naming why.
async fn check_server(
    client: &kube::Client,
    leader_elect: bool,
) -> Result<(), crate::compat::Unsupported> {
    use crate::compat::{MAX_KNOWN_MINOR, Supported, check, discover};
    let mut wait = Duration::from_secs(1);
    let found = loop {
        match discover(client, leader_elect).await {
            Ok(found) => break found,
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?wait, "cannot read the API server's version and APIs; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(60));
            }
        }
    };
    let version = found.git_version.as_deref().unwrap_or("unknown");
    match check(&found, leader_elect)? {
        Supported::Yes => tracing::info!(version, "API server supported"),
        Supported::Newer => tracing::info!(
            version,
            newest_known = %format!("1.{MAX_KNOWN_MINOR}"),
            "API server newer than this build knows; every API it needs is served"
        ),
        Supported::UnknownVersion => tracing::warn!(
            version,
            "API server version not understood; every API it needs is served"
        ),
    }
    Ok(())
}

/// How often discovery is checked again while a needed API is not served.
const API_RECHECK: Duration = Duration::from_secs(10);

/// Each time a needed kind answers `404`, checks discovery ([`crate::compat::check`]): while a
/// needed API is not served the health check fails naming it, until discovery finds it again.
async fn watch_api_support(
    client: kube::Client,
    leader_elect: bool,
    not_found: Arc<Notify>,
    health: Arc<Health>,
) {
    use crate::compat::{check, discover};
    loop {
        not_found.notified().await;
        loop {
            match discover(&client, leader_elect)
                .await
                .map(|f| check(&f, leader_elect))
            {
                Ok(Ok(_)) => {
                    if health.set_api_problem(None) {
                        tracing::info!("every API the autoscaler needs is served again");
                    }
                    break;
                }
                Ok(Err(e)) => {
                    if health.set_api_problem(Some(e.to_string())) {
                        tracing::error!(error = %e, "an API the autoscaler needs is not served; /health-check fails");
                    }
                }
                Err(e) => tracing::debug!(error = %e, "discovery failed; checked again later"),
            }
            tokio::time::sleep(API_RECHECK).await;
        }
    }
}

/// Starts the watches, retrying discovery with exponential backoff (1 s doubling to 60 s).
async fn start_watches(clients: &Clients, config: &WatchConfig) -> crate::watch::Watches {
    let mut wait = Duration::from_secs(1);
    loop {
        match crate::watch::start(clients, config.clone()).await {
            Ok(w) => return w,
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?wait, "cannot start watching the API; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(60));
            }
        }
    }
}

async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// Waits for SIGTERM or Ctrl-C (SIGINT) and says which came.
async fn shutdown_signal() -> &'static str {
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
            _ = tokio::signal::ctrl_c() => "SIGINT",
            _ = term => "SIGTERM",
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "interrupt"
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
        // A standby replica is healthy; a leader is judged by its loops from now on.
        parts.health.start_monitoring(Instant::now());
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
        parts.health.stop_monitoring();
    }
}

/// The nodes the cache shows with one of the autoscaler's own taints: what a predecessor may
/// have left. Read from the synced cache, as upstream reads its node lister, rather than by
/// listing every node again (15,000 nodes are 30 pages).
fn left_tainted(informer: &Mutex<Informer>) -> Vec<String> {
    let mut inf = autoscaler_actuation::lock_informer(informer);
    (inf.objects_without_pods().nodes.iter())
        .filter(|n| {
            (n.taints.iter()).any(|t| crate::actuator::AUTOSCALER_TAINTS.contains(&t.key.as_str()))
        })
        .map(|n| n.name.as_str().to_string())
        .collect()
}

/// Discovers the provider and reads the objects other than pods into the informer's caches.
fn prepare(parts: &Parts, config: &ControllerConfig) {
    let started = Instant::now();
    autoscaler_actuation::lock_informer(&parts.informer).prepare(&config.clusterapi);
    tracing::debug!(took = ?started.elapsed(), "provider discovered while the pods list");
}

/// One leadership term: wait for the caches, clean up taints of a predecessor, then loop.
async fn lead(parts: &Parts, config: &ControllerConfig) {
    let mut unsynced = parts.unsynced.clone();
    if !unsynced.borrow().is_empty() {
        tracing::info!(kinds = ?*unsynced.borrow(), "waiting for the caches to sync");
        let waiting = Instant::now();
        // Pods list last and longest (450,000 at 15,000 nodes): once only they are left, the
        // provider is discovered and the other objects read meanwhile, so that the first loop
        // finds them ready instead of doing that work after the sync.
        if unsynced
            .wait_for(|p| p.iter().all(|k| k == crate::watch::PODS))
            .await
            .is_err()
        {
            return;
        }
        prepare(parts, config);
        if unsynced.wait_for(|p| p.is_empty()).await.is_err() {
            return;
        }
        // Where a slow start goes (listing) is then visible next to the first loop's figures.
        tracing::info!(took = ?waiting.elapsed(), "caches synced");
    }
    let actuator = Arc::new(Actuator::split(&Clients {
        workload: parts.client.clone(),
        management: parts.management.clone(),
    }));
    let events = EventSink::new(
        parts.client.clone(),
        &config.identity,
        &config.namespace,
        &config.status_config_map_name,
        CorrelatorOptions::default(),
    );
    match actuator
        .clean_up_taints(
            &left_tainted(&parts.informer),
            config.cordon_node_before_terminating,
        )
        .await
    {
        Ok(cleaned) if !cleaned.is_empty() => {
            tracing::info!(nodes = ?cleaned, "removed autoscaler taints left by a predecessor");
            let specs: Vec<EventSpec> = cleaned.iter().map(|n| EventSpec::cleaned_up(n)).collect();
            let stats = events
                .publish(&specs, jiff::Timestamp::now().as_millisecond())
                .await;
            count_drops(parts, &stats);
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "could not clean up autoscaler taints at start"),
    }
    let executor = Executor::new(
        actuator.clone(),
        parts.informer.clone(),
        config.clusterapi.clone(),
        config.actuation_options(),
    );
    let mut options = parts.options.clone();
    let initial = match &mut options {
        Some(rx) => rx.borrow_and_update().clone(),
        None => config.autoscaler.clone(),
    };
    let mut term = Term {
        autoscaler: Autoscaler::new(initial),
        executor,
        events,
        transitions: Transitions::default(),
        gpus: Gpus::default(),
        no_scale_down: NoScaleDownEvents::default(),
    };
    let mut next = Instant::now();
    let mut first_loop = true;
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = parts.unschedulable.notified() => {
                // Let a burst of pods arrive, so one loop sees them all.
                tokio::time::sleep(config.debounce).await;
            }
            // Drains go on between loops: an eviction answered, or a look whether evicted
            // pods are gone.
            wake = term.executor.wait() => {
                let reports = term.executor.handle(wake).await;
                term.record(parts, &reports);
                term.publish_failures(parts, &reports).await;
                continue;
            }
        }
        let started = Instant::now();
        parts.health.loop_started(started);
        // A kind that appeared since the term began is still listing: deciding on half of a
        // Cluster API group (MachineDeployments without their Machines) could misjudge it.
        if !parts.unsynced.borrow().is_empty() {
            tracing::info!(kinds = ?*parts.unsynced.borrow(), "loop skipped: new kinds still listing");
            next = started + config.scan_interval;
            continue;
        }
        if let Some(rx) = &mut options
            && rx.has_changed().unwrap_or(false)
        {
            term.autoscaler.set_options(rx.borrow_and_update().clone());
            tracing::info!("options changed: this loop and the next decide with them");
        }
        let ok = term.one_loop(parts, config).await;
        let finished = Instant::now();
        if std::mem::take(&mut first_loop) {
            // What listing the caches and the first loop freed goes back to the system.
            crate::allocator::return_freed_memory();
        }
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

fn unix_secs() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// State of one leadership term.
struct Term {
    autoscaler: Autoscaler,
    /// Carries actions out; keeps the drains in flight.
    executor: Executor,
    events: EventSink,
    transitions: Transitions,
    /// The GPUs of the groups and nodes of the last loop, to label the GPU counters.
    gpus: Gpus,
    /// What `NoScaleDown` events said about which node (`--emit-unremovable-node-events`).
    no_scale_down: NoScaleDownEvents,
}

/// The GPU of each node group (from a registered node of the group, else the provider's
/// template) and of each node, as the GPU counters label them.
#[derive(Debug, Default)]
struct Gpus {
    groups: std::collections::HashMap<NodeGroupId, GpuLabels>,
    nodes: std::collections::HashMap<Sym, GpuLabels>,
}

impl Gpus {
    fn of(view: &ClusterView<'_>) -> Gpus {
        let label = view.provider.gpu_label();
        let mut gpus = Gpus::default();
        let groups = view.provider.node_groups();
        for node in view.nodes {
            let Some(gpu) = GpuLabels::of_node(node, label) else {
                continue;
            };
            if let Some(g) = view
                .provider
                .node_group_of(node)
                .and_then(|g| groups.get(g))
            {
                gpus.groups
                    .entry(g.id().clone())
                    .or_insert_with(|| gpu.clone());
            }
            gpus.nodes.insert(node.name, gpu);
        }
        for g in groups {
            if let Some(gpu) = g.template().and_then(|t| GpuLabels::of_node(t, label)) {
                gpus.groups.entry(g.id().clone()).or_insert(gpu);
            }
        }
        gpus
    }
}

/// Names the objects the provider's discovery left out (`...; not autoscaled`, listed as
/// skipped) or used in part (an annotation ignored, ...), each warning rate-limited.
fn note_provider_warnings(skipped: &SkippedObjects, warnings: &[String]) {
    let (left_out, in_part): (Vec<String>, Vec<String>) =
        (warnings.iter().cloned()).partition(|w| w.ends_with("; not autoscaled"));
    skipped.conversion_warnings("provider", &left_out);
    for w in &in_part {
        skipped.noted("provider", w);
    }
}

/// The loop's phase clock: time since the loop started.
struct LoopClock(Instant);

impl PhaseClock for LoopClock {
    fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }
}

impl Term {
    /// One loop; false when something in it failed.
    async fn one_loop(&mut self, parts: &Parts, config: &ControllerConfig) -> bool {
        let now_ms = jiff::Timestamp::now().as_millisecond();
        // ProvisioningRequests, CapacityBuffers and PodTemplates, when a flag asks for them;
        // the objects the model refuses are named as skipped by the watches.
        let capacity_on = self.autoscaler.options().capacity.any();
        let (provider, objects, pods, priorities, capacity_objects) = {
            let mut inf = autoscaler_actuation::lock_informer(&parts.informer);
            // This loop sees every pod that became unschedulable and every group that
            // appeared so far.
            inf.take_new_unschedulable();
            inf.take_new_group();
            let refresh = Instant::now();
            let provider = inf.provider(&config.clusterapi);
            parts
                .metrics
                .function_duration("cloudProviderRefresh", refresh.elapsed().as_secs_f64());
            note_provider_warnings(&parts.skipped, &inf.provider_warnings());
            let objects = inf.objects_without_pods();
            let pods = inf.pods().clone();
            let priorities = inf.priority_text(&config.namespace);
            let capacity_objects =
                capacity_on.then(|| autoscaler_model::CapacityObjects::from_store(inf.store()).0);
            (provider, objects, pods, priorities, capacity_objects)
        };
        self.autoscaler.set_priority_text(priorities.as_deref());
        let in_flight = self.executor.in_flight(&provider);
        let (outcome, status, events) = {
            let view = ClusterView::of_objects(&objects, &pods, &*provider);
            // The core decides the requests and buffers with the loop (its scale-up is the
            // request's in the requests' turn); their status writes are in `outcome.capacity`.
            let outcome = self.autoscaler.run_once(
                LoopInput::new(&view, now_ms)
                    .controllers(&objects.controllers)
                    .in_flight(in_flight)
                    .capacity(capacity_objects.as_ref())
                    .timed(&LoopClock(Instant::now())),
            );
            if let Some(d) = &outcome.capacity {
                crate::capacity::log(d);
            }
            for (phase, took) in &outcome.phases {
                parts
                    .metrics
                    .function_duration(phase.label(), took.as_secs_f64());
            }
            parts.metrics.observe_outcome(&view, &outcome);
            parts
                .metrics
                .observe_limits(&self.autoscaler.options().scale_up.limits);
            parts.metrics.observe_removals(&view, &outcome, now_ms);
            let bypassed = &config.autoscaler.scale_up.pending.bypassed_schedulers();
            if !bypassed.is_empty() {
                let unprocessed = pods.iter().filter(|p| is_unprocessed(p, bypassed)).count();
                parts.metrics.scheduler_unprocessed(unprocessed);
            }
            self.gpus = Gpus::of(&view);
            // What the status and the events say is fixed now; the view is not kept across awaits.
            let status = config
                .write_status_configmap
                .then(|| status_yaml(&view, &outcome, now_ms, &mut self.transitions))
                .map(|yaml| with_unsupported_settings(yaml, &config.unsupported_settings))
                .map(|yaml| parts.skipped.with_status_section(yaml));
            let mut events = events_of(&view, &outcome);
            let max_total = self.autoscaler.options().scale_up.limits.max_nodes_total;
            events.extend(max_nodes_total_event(&view, &outcome, max_total));
            if config.emit_unremovable_node_events {
                events.extend(self.no_scale_down.events_of(&view, &outcome, now_ms));
            }
            if let Some(last) = &parts.explain {
                // The document `plan --output json` prints for the same loop.
                last.set(crate::plan::json_text(&crate::plan::Explained {
                    view: &view,
                    outcome: &outcome,
                    provider_warnings: &[],
                    now_ms,
                    show_nodes: crate::plan::SHOW_NODES,
                }));
            }
            crate::explain::log(&crate::explain::lines_of(
                &view,
                &outcome,
                now_ms,
                tracing::level_filters::LevelFilter::current(),
            ));
            for r in &outcome.refused {
                // A refusal is a bug of the decision; the action is not carried out.
                tracing::error!(action = ?r.action, why = %r.why, "unsafe action refused");
            }
            (outcome, status, events)
        };

        let act = Instant::now();
        let reports = self.executor.apply(outcome.actions).await;
        let mut ok = self.record(parts, &reports);
        self.publish_failures(parts, &reports).await;
        if let Some(mut c) = outcome.capacity {
            // A failed atomic scale-up provisions nothing (its groups grown before the failure
            // were set back): its request is written Provisioned=False, retried after backoff.
            let failed = (c.requests.scale_up.iter())
                .flat_map(|up| up.result.increases.iter())
                .find_map(|i| {
                    reports.iter().find_map(|r| match r {
                        Report::ScaleUpFailed { group, error, .. } if *group == i.group => {
                            Some(format!("{group}: {error}"))
                        }
                        _ => None,
                    })
                });
            if let Some(why) = failed {
                c.requests.scale_up_failed(&why);
            }
            let updates = {
                let inf = autoscaler_actuation::lock_informer(&parts.informer);
                crate::capacity::status_updates(&c, inf.store(), now_ms)
            };
            let reports = self.executor.write_statuses(updates).await;
            ok &= self.record(parts, &reports);
        }
        parts
            .metrics
            .function_duration("act", act.elapsed().as_secs_f64());

        if let Some(yaml) = status {
            match write_status(
                &parts.client,
                &config.namespace,
                &config.status_config_map_name,
                &yaml,
                &status_time(now_ms),
            )
            .await
            {
                Ok(cm) => self.events.set_status_object(&cm),
                Err(e) => {
                    tracing::warn!(error = %e, "could not write the status ConfigMap");
                    parts.metrics.error("apiCallError");
                }
            }
        }
        let stats = self.events.publish(&events, now_ms).await;
        count_drops(parts, &stats);
        ok
    }

    /// Feeds what the actions came to back into the core (through `observe`) and the metrics;
    /// false if any failed.
    fn record(&mut self, parts: &Parts, reports: &[Report]) -> bool {
        let now_ms = jiff::Timestamp::now().as_millisecond();
        let mut ok = true;
        for r in reports {
            for outcome in r.outcomes() {
                self.autoscaler.observe(&outcome, now_ms);
            }
            ok &= record_metrics(&parts.metrics, r, &self.gpus);
        }
        ok
    }
}

/// Logs a report and counts it in the metrics; false if it is a failure.
fn record_metrics(m: &Metrics, r: &Report, gpus: &Gpus) -> bool {
    match r {
        Report::ScaledUp { group, delta } => {
            tracing::info!(%group, delta, "scaled up");
            m.scaled_up(*delta as u64);
            if let Some(gpu) = gpus.groups.get(group) {
                m.scaled_up_gpu(*delta as u64, gpu);
            }
            m.last_activity("scaleUp", unix_secs());
        }
        Report::ScaleUpFailed { group, error, .. } => {
            tracing::warn!(%group, %error, class = error.class.as_str(), "scale-up failed");
            m.failed_scale_up(
                FailedScaleUpReason::CloudProviderError,
                gpus.groups.get(group),
            );
            m.error("cloudProviderError");
            return false;
        }
        Report::DrainStarted { group, node } => {
            tracing::info!(%node, %group, "Scale-down: draining node")
        }
        Report::Deleted {
            group,
            nodes,
            empty,
            ready,
            evicted,
        } => {
            let reason = ScaleDownReason::of(*empty, *ready);
            tracing::info!(%group, ?nodes, reason = reason.as_str(), "scaled down");
            m.scaled_down(nodes.len() as u64, reason);
            for gpu in nodes.iter().filter_map(|n| gpus.nodes.get(n)) {
                m.scaled_down_gpu(1, reason, gpu);
            }
            for _ in 0..*evicted {
                m.evicted(true);
            }
            m.last_activity("scaleDown", unix_secs());
        }
        Report::DeleteFailed {
            group,
            nodes,
            error,
            evicted,
        } => {
            tracing::warn!(%group, ?nodes, %error, class = error.class.as_str(), "scale-down failed");
            m.error("scaleDownError");
            for _ in 0..*evicted {
                m.evicted(true);
            }
            return false;
        }
        Report::DrainFailed {
            group,
            node,
            error,
            evicted,
            ..
        } => {
            tracing::warn!(%group, %node, %error, class = error.class.as_str(), "scale-down failed");
            m.error("scaleDownError");
            for _ in 0..*evicted {
                m.evicted(true);
            }
            return false;
        }
        Report::Corrected {
            group,
            correction: Correction::ClearStaleMark { machine, node },
        } => {
            tracing::warn!(
                %group,
                %machine,
                node = node.map(|n| n.as_str()).unwrap_or(""),
                "removed a stale delete-machine mark (the set deleted another Machine for the lowered replicas) and the node's deletion taint"
            )
        }
        Report::Corrected {
            group,
            correction: Correction::RevertIncrease { delta, request },
        } => {
            tracing::warn!(%group, delta, %request, "set back a group of a failed atomic scale-up")
        }
        Report::Corrected { group, correction } => {
            tracing::info!(%group, what = correction_name(correction), "node group corrected")
        }
        Report::CorrectionFailed {
            group,
            correction: Correction::DeleteInstances { instances, reason },
            error,
        } if *reason == DELETE_UNREGISTERED => {
            tracing::warn!(%group, ?instances, %error, "could not delete unregistered instances");
            m.error("cloudProviderError");
            return false;
        }
        Report::CorrectionFailed {
            group,
            correction: Correction::RevertIncrease { delta, request },
            error,
        } => {
            // The group stays grown: an ordinary scale-up from now on, left to the cluster
            // state (unneeded nodes scaled down, or the provision timeout lowers the target).
            tracing::error!(%group, delta, %request, %error, class = error.class.as_str(), "could not set back a group of a failed atomic scale-up: it stays grown");
            m.error("cloudProviderError");
            return false;
        }
        Report::CorrectionFailed {
            group,
            correction,
            error,
        } => {
            let what = format!("{} in {group}", correction_name(correction));
            tracing::warn!(%what, %error, class = error.class.as_str(), "action failed");
            m.error("apiCallError");
            return false;
        }
        Report::CordonFailed {
            node,
            cordon,
            error,
        } => {
            let what = format!(
                "{} node {node}",
                if *cordon { "cordon" } else { "uncordon" }
            );
            tracing::warn!(%what, %error, class = error.class.as_str(), "action failed");
            m.error("apiCallError");
            return false;
        }
        Report::DeletionDelayTimedOut { nodes, timeout_sec } => {
            tracing::warn!(
                ?nodes,
                timeout_sec,
                "delay-deletion annotation not removed in time (--node-deletion-delay-timeout); deleting anyway"
            );
        }
        Report::StatusWritten { object } => tracing::debug!(%object, "status written"),
        Report::StatusWriteFailed { object, error } if error.class == ErrorClass::Conflict => {
            tracing::info!(%object, %error, "status not written: the object changed since the decision; decided again next loop");
        }
        Report::StatusWriteFailed { object, error } if error.class == ErrorClass::NotFound => {
            tracing::info!(%object, "status not written: the object is gone");
        }
        Report::StatusWriteFailed { object, error } => {
            tracing::warn!(%object, %error, class = error.class.as_str(), "status write failed");
            m.error("apiCallError");
            return false;
        }
        Report::TaintFailed {
            node,
            key,
            add,
            error,
        } => {
            let what = format!(
                "{} node {node} {key}",
                if *add { "taint" } else { "untaint" }
            );
            tracing::warn!(%what, %error, class = error.class.as_str(), "action failed");
            m.error("apiCallError");
            return false;
        }
    }
    true
}

/// `DecreaseTargetSize`, or the reason of a `DeleteInstances`.
fn correction_name(c: &Correction) -> &'static str {
    match c {
        Correction::DecreaseTargetSize { .. } => "DecreaseTargetSize",
        Correction::DeleteInstances { reason, .. } => reason,
        Correction::ClearStaleMark { .. } => "ClearStaleMark",
        Correction::RevertIncrease { .. } => "RevertIncrease",
    }
}

impl Term {
    /// `ScaleDownFailed` events on the nodes whose deletion failed and the pods whose eviction
    /// failed, `DeleteUnregisteredFailed` on the status ConfigMap.
    async fn publish_failures(&self, parts: &Parts, reports: &[Report]) {
        let specs: Vec<EventSpec> = reports.iter().flat_map(failure_events).collect();
        if !specs.is_empty() {
            let stats = self
                .events
                .publish(&specs, jiff::Timestamp::now().as_millisecond())
                .await;
            count_drops(parts, &stats);
        }
    }
}

/// The events of one failed action.
fn failure_events(r: &Report) -> Vec<EventSpec> {
    match r {
        Report::DeleteFailed { nodes, error, .. } => nodes
            .iter()
            .map(|n| EventSpec::scale_down_failed(n.as_str(), "", error.message.clone()))
            .collect(),
        Report::DrainFailed {
            node,
            error,
            refused,
            ..
        } => std::iter::once(EventSpec::scale_down_failed(
            node.as_str(),
            "",
            error.message.clone(),
        ))
        .chain(
            refused
                .iter()
                .map(|p| EventSpec::eviction_failed(p.namespace.as_str(), &p.name)),
        )
        .collect(),
        Report::CorrectionFailed {
            group,
            correction: Correction::DeleteInstances { instances, reason },
            error,
        } if *reason == DELETE_UNREGISTERED => {
            let instances: Vec<String> = instances.iter().map(|i| i.to_string()).collect();
            vec![EventSpec::delete_unregistered_failed(
                group.as_str(),
                &instances,
                &error.message,
            )]
        }
        _ => Vec::new(),
    }
}

/// Adds what the correlator dropped to `events_dropped_total`.
fn count_drops(parts: &Parts, stats: &PublishStats) {
    let m = &parts.metrics;
    m.events_dropped(DropReason::SpamFilter.as_str(), stats.dropped_spam as u64);
    m.events_dropped(DropReason::RateLimit.as_str(), stats.dropped_rate as u64);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_api::{Mock, Seen, client, next, respond};

    #[test]
    fn groups_the_provider_refuses_are_listed_as_skipped_and_partial_use_only_warned() {
        let skipped = SkippedObjects::default();
        let config = autoscaler_clusterapi::ClusterApiConfig::default();
        let mut store = ObjectStore::default();
        let md = |name: &str, min: &str, max: &str| {
            json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
                "metadata": {"name": name, "namespace": "ns", "annotations": {
                    config.min_size_key(): min, config.max_size_key(): max,
                    "capacity.cluster-autoscaler.kubernetes.io/labels": "not a label"}},
                "spec": {"replicas": 1, "clusterName": "c",
                    "selector": {"matchLabels": {"a": "b"}},
                    "template": {"spec": {"clusterName": "c"}}}})
        };
        store.insert(md("bad", "5", "2"), "test").expect("object");
        store.insert(md("good", "0", "3"), "test").expect("object");
        let (_, warnings) = autoscaler_clusterapi::ClusterApiProvider::discover(&store, &config);
        note_provider_warnings(&skipped, &warnings);
        let (count, objects) = skipped.summary();
        assert_eq!(count, 1, "{objects:?} from {warnings:?}");
        assert!(
            objects[0].starts_with("MachineDeployment ns/bad: "),
            "{objects:?}"
        );
        // Used in part (a label annotation ignored): warned, once, but not listed.
        let partial: Vec<&String> = (warnings.iter())
            .filter(|w| !w.ends_with("; not autoscaled"))
            .collect();
        assert!(!partial.is_empty(), "{warnings:?}");
        for w in partial {
            assert!(!skipped.noted("provider", w), "warned again: {w}");
        }
    }
    use autoscaler_model::ObjectStore;
    use http::Method;
    use serde_json::{Value, json};

    /// Scale-ups and removals of GPU nodes are counted in the GPU counters with the GPU's
    /// resource and type: of a registered node of the group, or of the provider's template for
    /// a group at zero; other nodes only in the plain counters.
    #[test]
    fn gpu_counters_are_labelled_from_the_group_and_the_node() {
        use autoscaler_model::testing::{GI, NodeBuilder};
        use autoscaler_model::{Instance, InstanceState, NodeGroup, StaticProvider};
        let gpu_node = |name: &str| {
            NodeBuilder::new(name, 8000, 32 * GI)
                .resource("nvidia.com/gpu", 1)
                .label("accel", "t4")
                .with_provider_id(&format!("test:///{name}"))
                .arc()
        };
        let nodes = vec![
            gpu_node("g1"),
            NodeBuilder::new("c1", 4000, 16 * GI)
                .with_provider_id("test:///c1")
                .arc(),
        ];
        let group = |id: &str, node: &str| {
            let mut g = NodeGroup::new(id, 0, 5, 1);
            g = g.with_instances(vec![Instance {
                id: Arc::from(format!("test:///{node}")),
                state: InstanceState::Running,
                error: None,
            }]);
            g
        };
        let mut zero = NodeGroup::new("a100s", 0, 5, 0);
        zero = zero.with_template(Some(
            NodeBuilder::new("t", 8000, 32 * GI)
                .resource("nvidia.com/gpu", 8)
                .label("accel", "a100")
                .arc(),
        ));
        struct Labelled(StaticProvider);
        impl autoscaler_model::CloudProvider for Labelled {
            fn node_groups(&self) -> &[NodeGroup] {
                self.0.node_groups()
            }
            fn node_group_of(&self, node: &autoscaler_model::Node) -> Option<usize> {
                self.0.node_group_of(node)
            }
            fn gpu_label(&self) -> Option<&str> {
                Some("accel")
            }
        }
        let p = Labelled(StaticProvider::new(vec![
            group("gpus", "g1"),
            group("cpus", "c1"),
            zero,
        ]));
        let view = ClusterView {
            nodes: &nodes,
            pods: &[],
            daemonsets: &[],
            namespaces: &[],
            provider: &p,
            pdbs: &[],
            storage: autoscaler_model::Storage::none(),
        };
        let gpus = Gpus::of(&view);
        let m = Metrics::new();
        for (group, delta) in [("gpus", 2), ("cpus", 1), ("a100s", 1)] {
            let r = Report::ScaledUp {
                group: NodeGroupId::from(group),
                delta,
            };
            assert!(record_metrics(&m, &r, &gpus));
        }
        let r = Report::Deleted {
            group: NodeGroupId::from("gpus"),
            nodes: vec![Sym::new("g1"), Sym::new("c1")],
            empty: true,
            ready: true,
            evicted: 0,
        };
        assert!(record_metrics(&m, &r, &gpus));
        let text = m.encode();
        for line in [
            "cluster_autoscaler_scaled_up_nodes_total 4",
            "cluster_autoscaler_scaled_up_gpu_nodes_total{gpu_resource_name=\"nvidia.com/gpu\",gpu_name=\"t4\"} 2",
            "cluster_autoscaler_scaled_up_gpu_nodes_total{gpu_resource_name=\"nvidia.com/gpu\",gpu_name=\"a100\"} 1",
            "cluster_autoscaler_scaled_down_nodes_total{reason=\"empty\"} 2",
            "cluster_autoscaler_scaled_down_gpu_nodes_total{reason=\"empty\",gpu_resource_name=\"nvidia.com/gpu\",gpu_name=\"t4\"} 1",
        ] {
            assert!(text.contains(&format!("{line}\n")), "no {line} in\n{text}");
        }
    }

    type Log = Arc<Mutex<Vec<Seen>>>;

    const SNAPSHOT: &str = include_str!("../../cluster-autoscaler/examples/snapshot.yaml");

    fn informer() -> Informer {
        let mut store = ObjectStore::new();
        store.load_yaml(SNAPSHOT).expect("example snapshot loads");
        let mut inf = Informer::new();
        for (k, v) in store.iter() {
            let mut v = (**v).clone();
            // The cache shows the taint a predecessor left, as the server does.
            if k.kind == "Node" && k.name == "general-a" {
                v["spec"]["taints"] = tainted_node()["spec"]["taints"].clone();
            }
            inf.apply(k.clone(), Some(Arc::new(v)));
        }
        inf
    }

    fn tainted_node() -> Value {
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "general-a", "resourceVersion": "5"},
            "spec": {"taints": [{"key": "ToBeDeletedByClusterAutoscaler", "value": "1700000000",
                                 "effect": "NoSchedule"}]}})
    }

    /// Plays the API server: records every request (each must be a declared call) and answers
    /// as a cluster would.
    async fn serve(mut h: Mock, log: Log) {
        while let Some((seen, send)) = next(&mut h).await {
            log.lock().expect("log").push(seen.clone());
            let Seen { method, uri, body } = seen;
            let path = uri.split('?').next().unwrap_or("").to_string();
            let (code, answer) = match (method.as_str(), path.as_str()) {
                ("GET", "/api/v1/nodes/general-a") => (200, tainted_node()),
                ("PUT", p) if p.starts_with("/api/v1/nodes/") => (200, body),
                ("PATCH", p) if p.ends_with("/scale") => (
                    200,
                    json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                        "metadata": {"name": "general", "namespace": "default"},
                        "spec": {"replicas": body["spec"]["replicas"]}, "status": {"replicas": 2}}),
                ),
                ("POST", _) => {
                    let mut b = body;
                    b["metadata"]["uid"] = json!("u-1");
                    b["metadata"]["resourceVersion"] = json!("1");
                    (201, b)
                }
                _ => (
                    404,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "reason": "NotFound", "code": 404}),
                ),
            };
            respond(send, code, &answer);
        }
    }

    fn parts(client: kube::Client) -> (Parts, watch::Sender<BTreeSet<String>>) {
        let (unsynced_tx, unsynced) = watch::channel(BTreeSet::new());
        let parts = Parts {
            management: client.clone(),
            client,
            informer: Arc::new(Mutex::new(informer())),
            unsynced,
            unschedulable: Arc::new(Notify::new()),
            metrics: Arc::new(Metrics::new()),
            skipped: Arc::new(SkippedObjects::default()),
            health: Arc::new(Health::new(
                Duration::from_secs(600),
                Duration::from_secs(900),
            )),
            options: None,
            explain: None,
        };
        (parts, unsynced_tx)
    }

    fn count(log: &Log, pred: impl Fn(&Seen) -> bool) -> usize {
        log.lock().expect("log").iter().filter(|s| pred(s)).count()
    }

    fn is_scale(s: &Seen) -> bool {
        s.method == Method::PATCH && s.uri.contains("/machinedeployments/general/scale")
    }

    /// The cleanup reads the node its cache shows tainted (it lists no nodes).
    fn is_cleanup_read(s: &Seen) -> bool {
        s.method == Method::GET && s.uri.starts_with("/api/v1/nodes/general-a")
    }

    async fn until(log: &Log, what: impl Fn(&Log) -> bool) {
        for _ in 0..600 {
            if what(log) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "condition not reached; requests: {:#?}",
            log.lock().expect("log")
        );
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_term_cleans_up_then_scales_up_and_losing_the_lease_stops_acting() {
        let (client, handle) = client();
        let log: Log = Arc::default();
        tokio::spawn(serve(handle, log.clone()));
        let (parts, _unsynced) = parts(client);
        let config = ControllerConfig::default();
        let (lead_tx, leading) = watch::channel(true);
        tokio::spawn(supervise(parts.clone(), config, leading));

        until(&log, |l| count(l, is_scale) == 1).await;
        let seen = log.lock().expect("log").clone();
        // The predecessor's taint is removed before anything else is done.
        assert!(is_cleanup_read(&seen[0]), "{:?}", seen[0]);
        assert_eq!(seen[1].method, Method::PUT);
        assert_eq!(seen[1].uri, "/api/v1/nodes/general-a?");
        assert!(seen[1].body["spec"]["taints"].is_null(), "{}", seen[1].body);
        let scale = seen.iter().find(|s| is_scale(s)).expect("a scale-up");
        assert_eq!(
            scale.uri,
            "/apis/cluster.x-k8s.io/v1beta1/namespaces/default/machinedeployments/general/scale?"
        );
        assert_eq!(scale.body, json!({"spec": {"replicas": 3}}));
        // The status ConfigMap is written and the scale-up announced.
        until(&log, |l| {
            count(l, |s| {
                s.method == Method::POST
                    && s.uri.contains("/configmaps")
                    && s.body["data"]["status"]
                        .as_str()
                        .is_some_and(|t| t.contains("autoscalerStatus"))
            }) == 1
        })
        .await;
        until(&log, |l| {
            count(l, |s| {
                s.uri.contains("/events") && s.body.to_string().contains("TriggeredScaleUp")
            }) >= 1
        })
        .await;
        assert!(parts.health.check(Instant::now()).is_ok());

        // Leadership lost: no request at all from then on, whatever the pods ask for.
        lead_tx.send_replace(false);
        tokio::task::yield_now().await;
        let before = log.lock().expect("log").len();
        parts.unschedulable.notify_one();
        tokio::time::sleep(Duration::from_secs(300)).await;
        assert_eq!(log.lock().expect("log").len(), before);

        // Leading again: a new term starts from scratch, with the cleanup first.
        lead_tx.send_replace(true);
        until(&log, |l| count(l, is_cleanup_read) == 2).await;
        let seen = log.lock().expect("log").clone();
        assert!(is_cleanup_read(&seen[before]), "{:?}", seen[before]);
    }

    /// While other kinds still list, nothing is read; once only the pods are left, the provider
    /// is discovered and the other objects read, and no decision is made before the pods sync.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn the_provider_is_discovered_while_only_the_pods_list() {
        let (client, handle) = client();
        let log: Log = Arc::default();
        tokio::spawn(serve(handle, log.clone()));
        let (parts, unsynced) = parts(client);
        let informer = parts.informer.clone();
        let config = ControllerConfig::default();
        let prepared =
            || autoscaler_actuation::lock_informer(&informer).is_prepared(&config.clusterapi);
        let machines = "cluster.x-k8s.io/Machine".to_string();
        unsynced.send_replace(BTreeSet::from([crate::watch::PODS.to_string(), machines]));
        let (_lead_tx, leading) = watch::channel(true);
        tokio::spawn(supervise(parts, config.clone(), leading));
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert!(!prepared(), "Machines still list: nothing discovered yet");
        unsynced.send_replace(BTreeSet::from([crate::watch::PODS.to_string()]));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(prepared(), "only the pods list: the provider is ready");
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert!(
            log.lock().expect("log").is_empty(),
            "no decision before the pods"
        );
        unsynced.send_replace(BTreeSet::new());
        until(&log, |l| count(l, is_scale) == 1).await;
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn no_decision_before_the_caches_sync() {
        let (client, handle) = client();
        let log: Log = Arc::default();
        tokio::spawn(serve(handle, log.clone()));
        let (parts, unsynced) = parts(client);
        unsynced.send_replace(BTreeSet::from(["/Pod".to_string()]));
        let (_lead_tx, leading) = watch::channel(true);
        tokio::spawn(supervise(parts, ControllerConfig::default(), leading));
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert!(log.lock().expect("log").is_empty());
        unsynced.send_replace(BTreeSet::new());
        until(&log, |l| count(l, is_scale) == 1).await;
    }

    /// Plays an API server of version 1.`minor` serving what `compat::REQUIRED` lists (policy
    /// and v1 Evictions only from 1.22), failing `/version` with a 500 the first `flaky` times.
    async fn serve_discovery(mut h: Mock, minor: u32, mut flaky: usize) {
        while let Some((seen, send)) = next(&mut h).await {
            let modern = minor >= 22;
            let list = |gv: &str, names: &[&str]| {
                let mut rs: Vec<Value> = names
                    .iter()
                    .map(|n| {
                        json!({"name": n, "singularName": "", "namespaced": true,
                        "kind": "K", "verbs": ["list"]})
                    })
                    .collect();
                if gv == "v1" {
                    rs.push(
                        json!({"name": "pods/eviction", "singularName": "", "namespaced": true,
                        "group": "policy", "version": if modern { "v1" } else { "v1beta1" },
                        "kind": "Eviction", "verbs": ["create"]}),
                    );
                }
                (
                    200,
                    json!({"kind": "APIResourceList", "groupVersion": gv, "resources": rs}),
                )
            };
            let (code, body) = match seen.uri.as_str() {
                "/version" if flaky > 0 => {
                    flaky -= 1;
                    (500, json!({"kind": "Status", "code": 500}))
                }
                "/version" => (
                    200,
                    json!({"major": "1", "minor": minor.to_string(),
                        "gitVersion": format!("v1.{minor}.0"), "gitCommit": "", "gitTreeState": "",
                        "buildDate": "", "goVersion": "", "compiler": "", "platform": ""}),
                ),
                "/api/v1" => list(
                    "v1",
                    &[
                        "nodes",
                        "pods",
                        "namespaces",
                        "configmaps",
                        "replicationcontrollers",
                    ],
                ),
                "/apis/apps/v1" => list("apps/v1", &["daemonsets", "replicasets", "statefulsets"]),
                "/apis/batch/v1" => list("batch/v1", &["jobs"]),
                "/apis/policy/v1" if modern => list("policy/v1", &["poddisruptionbudgets"]),
                "/apis/events.k8s.io/v1" => list("events.k8s.io/v1", &["events"]),
                "/apis/coordination.k8s.io/v1" => list("coordination.k8s.io/v1", &["leases"]),
                _ => (
                    404,
                    json!({"kind": "Status", "code": 404, "reason": "NotFound"}),
                ),
            };
            respond(send, code, &body);
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_supported_server_passes_after_discovery_errors_are_retried() {
        let (client, handle) = client();
        tokio::spawn(serve_discovery(handle, 30, 2));
        check_server(&client, true)
            .await
            .expect("1.30 is supported");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn an_old_server_is_unsupported_before_anything_else() {
        let (client, handle) = client();
        tokio::spawn(serve_discovery(handle, 20, 0));
        let err = check_server(&client, true).await.expect_err("1.20");
        assert!(
            matches!(err, crate::compat::Unsupported::TooOld { .. }),
            "{err}"
        );
        let e = ControllerError::from(err);
        assert!(e.to_string().contains("v1.20.0"), "{e}");
    }

    #[test]
    fn failed_removals_give_upstream_events_on_nodes_pods_and_the_status() {
        use autoscaler_core::PodRef;
        use autoscaler_core::{ActionError, ErrorClass};
        use autoscaler_model::Sym;
        let drain = Report::DrainFailed {
            group: "g".into(),
            node: Sym::new("n1"),
            error: ActionError::new(ErrorClass::Unavailable, "evicting web/p1: blocked"),
            evicted: 1,
            refused: vec![PodRef {
                namespace: Sym::new("web"),
                name: Arc::from("p1"),
            }],
            not_evicted: 1,
        };
        let events = failure_events(&drain);
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(events[0].reason, "ScaleDownFailed");
        assert_eq!(events[0].message, "evicting web/p1: blocked".into());
        assert!(
            matches!(&events[0].target, crate::events::Target::Node { name, .. } if name == "n1")
        );
        assert_eq!(events[1].reason, "ScaleDownFailed");
        assert_eq!(
            events[1].message,
            "failed to delete pod for ScaleDown".into()
        );
        assert!(matches!(&events[1].target,
            crate::events::Target::Pod { namespace, name, .. } if namespace == "web" && name == "p1"));
        let unregistered = Report::CorrectionFailed {
            group: "g".into(),
            correction: Correction::DeleteInstances {
                instances: vec![Arc::from("i-1")],
                reason: DELETE_UNREGISTERED,
            },
            error: ActionError::new(ErrorClass::Forbidden, "boom"),
        };
        let events = failure_events(&unregistered);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].reason, "DeleteUnregisteredFailed");
        assert!(events[0].warning);
        assert_eq!(
            events[0].message,
            "Failed to remove unregistered instances i-1 of g: boom".into()
        );
        assert!(
            failure_events(&Report::ScaledUp {
                group: "g".into(),
                delta: 1
            })
            .is_empty()
        );
    }
}

//! The controller: waits for the caches to sync and for the leader Lease, then runs the core's
//! loop every scan interval (sooner, debounced, when new unschedulable pods appear), carries the
//! actions out and feeds their outcomes back into the core's state.
//!
//! It never decides what to scale (the core does) and never acts without holding the Lease.

use std::net::SocketAddr;
use std::time::Duration;

use autoscaler_clusterapi::ClusterApiConfig;
use autoscaler_core::autoscaler::AutoscalerOptions;

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

/// Runs the controller until the process is told to stop (SIGTERM / Ctrl-C).
pub async fn run(client: kube::Client, config: ControllerConfig) -> Result<(), ControllerError> {
    // Filled in by the controller work of issue 8; the signature is the contract with the binary.
    let _ = (client, config);
    Err(ControllerError::Api(
        "the controller is not assembled yet".into(),
    ))
}

//! `run`: the controller on a live cluster. Validates the options, sets up logging, builds the
//! Kubernetes client and hands both to `autoscaler_kube::controller::run`.
//!
//! Exit codes: 2 for anything wrong before the controller starts (a flag, the config file, the
//! kubeconfig, an API server it does not support), 1 when the controller stops with an error. It never decides anything itself and
//! never starts the controller with options that did not validate.
//!
//! Log verbosity (`--v`, klog's levels) maps onto `tracing` levels: 0-1 `info`, 2-4 `debug`,
//! 5-10 `trace`; below 9 the HTTP and TLS libraries stay at `info` (klog shows protocol-level
//! details only from about 9). `RUST_LOG`, when set, replaces this filter.

use std::path::Path;

use anyhow::anyhow;
use autoscaler_kube::controller;
use tracing_subscriber::EnvFilter;

use crate::CliError;
use crate::options::{RunArgs, RunOptions};

/// The `tracing` filter for a klog verbosity.
pub fn log_filter(verbosity: u8) -> String {
    let level = match verbosity {
        0..=1 => "info",
        2..=4 => "debug",
        _ => "trace",
    };
    if verbosity >= 9 || level == "info" {
        level.to_string()
    } else {
        format!("{level},hyper=info,hyper_util=info,h2=info,tower=info,rustls=info")
    }
}

fn init_logging(verbosity: u8) {
    let filter = match std::env::var("RUST_LOG") {
        Ok(s) if !s.trim().is_empty() => EnvFilter::new(s),
        _ => EnvFilter::new(log_filter(verbosity)),
    };
    // A second initialization (tests) is harmless: the first subscriber stays.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// Reads and parses a kubeconfig file; errors name the path (exit 2).
fn read_kubeconfig(path: &Path) -> Result<kube::config::Kubeconfig, CliError> {
    kube::config::Kubeconfig::read_from(path).map_err(|e| {
        CliError::usage(anyhow!(
            "--kubeconfig {}: cannot read kubeconfig: {e}",
            path.display()
        ))
    })
}

/// Builds the client: from `--kubeconfig` when given, else in-cluster / `KUBECONFIG` /
/// `~/.kube/config` (kube's inference). Errors are configuration errors (exit 2).
async fn client(
    opts: &RunOptions,
    kubeconfig: Option<kube::config::Kubeconfig>,
) -> Result<kube::Client, CliError> {
    let mut config = match (kubeconfig, &opts.kubeconfig) {
        (Some(kc), Some(path)) => {
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| {
                    CliError::usage(anyhow!(
                        "--kubeconfig {}: unusable kubeconfig: {e}",
                        path.display()
                    ))
                })?
        }
        _ => kube::Config::infer().await.map_err(|e| {
            CliError::usage(anyhow!(
                "no Kubernetes configuration (in-cluster, KUBECONFIG or ~/.kube/config): {e}; \
                 use --kubeconfig"
            ))
        })?,
    };
    // The shell owns its retries: kube's built-in retry of 429 would hold a PDB-refused
    // eviction inside the client for minutes, past `--max-pod-eviction-time`.
    config.default_retry = false;
    kube::Client::try_from(config)
        .map_err(|e| CliError::usage(anyhow!("cannot build the Kubernetes client: {e}")))
}

/// Runs `cluster-autoscaler run`.
pub fn run(args: &RunArgs) -> Result<(), CliError> {
    let opts = RunOptions::from_args(args, &|k| std::env::var(k).ok())
        .map_err(|e| CliError::usage(e.into()))?;
    // Read the kubeconfig before anything starts, so a bad path fails at once with exit 2.
    let kubeconfig = opts
        .kubeconfig
        .as_deref()
        .map(read_kubeconfig)
        .transpose()?;
    init_logging(opts.verbosity);
    for flag in &opts.ignored_flags {
        tracing::warn!(flag = %format!("--{flag}"), "flag has no effect in this autoscaler");
    }
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        namespace = %opts.controller.namespace,
        address = %opts.controller.address,
        leader_elect = opts.controller.leader_elect,
        "starting cluster-autoscaler"
    );
    tracing::debug!(options = ?opts.controller, "options");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::failure(anyhow!("cannot start the async runtime: {e}")))?;
    runtime.block_on(async {
        let client = client(&opts, kubeconfig).await?;
        controller::run(client, opts.controller)
            .await
            .map_err(|e| match e {
                // A server it cannot work with is a configuration error, found before leading.
                controller::ControllerError::Unsupported(_) => CliError::usage(anyhow!("{e}")),
                e => CliError::failure(anyhow!("controller stopped: {e}")),
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbosity_maps_to_tracing_levels() {
        assert_eq!(log_filter(0), "info");
        assert_eq!(log_filter(1), "info");
        assert!(log_filter(4).starts_with("debug,"));
        assert!(log_filter(4).contains("hyper=info"));
        assert!(log_filter(5).starts_with("trace,"));
        assert_eq!(log_filter(9), "trace");
        assert_eq!(log_filter(10), "trace");
        for v in 0..=10 {
            assert!(EnvFilter::try_new(log_filter(v)).is_ok(), "{v}");
        }
    }
}

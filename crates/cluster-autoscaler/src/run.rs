//! `run`: the controller on a live cluster. Validates the options, sets up logging, builds the
//! Kubernetes client and hands both to `autoscaler_kube::controller::run`.
//!
//! Exit codes: 2 for anything wrong before the controller starts (a flag, the config file, the
//! kubeconfig, an API server it does not support), 1 when the controller stops with an error. It never decides anything itself and
//! never starts the controller with options that did not validate.
//!
//! Log verbosity (`--v`, klog's levels) maps onto `tracing` levels of the autoscaler's own
//! crates: 0-1 `info` (decisions and changes), 2-4 `debug` (why: unneeded nodes, groups
//! considered, evictions refused), 5-7 `trace`. Libraries log at `info` and above, except the
//! Kubernetes client's per-request HTTP traces (and its duplicate error line for a failed
//! request, which the autoscaler reports itself): they appear from 8, as client-go's request
//! logs do; 9-10 turn on every library's traces. `RUST_LOG`, when set, replaces this filter.
//! `--logging-format=json` writes one JSON object per line.

use std::path::Path;

use anyhow::anyhow;
use autoscaler_kube::controller;
use tracing_subscriber::EnvFilter;

use crate::CliError;
use crate::options::{LogFormat, RunArgs, RunOptions};

/// The autoscaler's own crates (their `tracing` targets).
const OWN_CRATES: [&str; 4] = [
    "cluster_autoscaler",
    "autoscaler_kube",
    "autoscaler_core",
    "autoscaler_clusterapi",
];

/// The `tracing` filter for a klog verbosity.
pub fn log_filter(verbosity: u8) -> String {
    if verbosity >= 9 {
        return "trace".into();
    }
    let own = match verbosity {
        0..=1 => "info",
        2..=4 => "debug",
        _ => "trace",
    };
    // The client's request spans and events ("requesting", "stream closed", "failed with
    // error") live in this module.
    let client = if verbosity >= 8 {
        "kube_client=debug"
    } else {
        "kube_client::client::builder=off"
    };
    let mut filter = format!("info,{client}");
    if own != "info" {
        for c in OWN_CRATES {
            filter.push_str(&format!(",{c}={own}"));
        }
    }
    filter
}

fn init_logging(verbosity: u8, format: LogFormat) {
    let filter = match std::env::var("RUST_LOG") {
        Ok(s) if !s.trim().is_empty() => EnvFilter::new(s),
        _ => EnvFilter::new(log_filter(verbosity)),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second initialization (tests) is harmless: the first subscriber stays.
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .try_init(),
    };
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
    init_logging(opts.verbosity, opts.logging_format);
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
    let result = runtime.block_on(async {
        let client = client(&opts, kubeconfig).await?;
        controller::run(client, opts.controller)
            .await
            .map_err(|e| match e {
                // A server it cannot work with is a configuration error, found before leading.
                controller::ControllerError::Unsupported(_) => CliError::usage(anyhow!("{e}")),
                e => CliError::failure(anyhow!("controller stopped: {e}")),
            })
    });
    match &result {
        Ok(()) => tracing::info!("cluster-autoscaler stopped"),
        Err(e) => tracing::error!(error = %e, "cluster-autoscaler stopped"),
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbosity_maps_to_tracing_levels() {
        assert_eq!(log_filter(0), "info,kube_client::client::builder=off");
        assert_eq!(log_filter(1), log_filter(0));
        let v4 = log_filter(4);
        assert!(
            v4.starts_with("info,kube_client::client::builder=off,"),
            "{v4}"
        );
        assert!(v4.contains("autoscaler_kube=debug"), "{v4}");
        assert!(v4.contains("cluster_autoscaler=debug"), "{v4}");
        assert!(log_filter(7).contains("autoscaler_core=trace"));
        assert!(log_filter(7).contains("builder=off"));
        let v8 = log_filter(8);
        assert!(
            v8.contains("kube_client=debug") && !v8.contains("off"),
            "{v8}"
        );
        assert_eq!(log_filter(9), "trace");
        assert_eq!(log_filter(10), "trace");
        for v in 0..=10 {
            assert!(EnvFilter::try_new(log_filter(v)).is_ok(), "{v}");
        }
    }
}

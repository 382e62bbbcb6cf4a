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

use std::path::{Path, PathBuf};

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

/// A kubeconfig read at start, with where its path came from, for error messages.
struct Kubeconfig {
    /// `--kubeconfig` or `KUBECONFIG`.
    origin: &'static str,
    path: PathBuf,
    kc: kube::config::Kubeconfig,
}

impl Kubeconfig {
    /// Reads and parses a kubeconfig file and checks the server of its current context; errors
    /// name the origin, the path and the field (exit 2).
    fn read(origin: &'static str, path: PathBuf) -> Result<Kubeconfig, CliError> {
        let kc = read_kubeconfig(origin, &path)?;
        Ok(Kubeconfig { origin, path, kc })
    }
}

/// See [`Kubeconfig::read`].
fn read_kubeconfig(origin: &str, path: &Path) -> Result<kube::config::Kubeconfig, CliError> {
    let usage = |msg: String| CliError::usage(anyhow!("{origin} {}: {msg}", path.display()));
    // Read it once ourselves: kube's own error quotes the path twice and repeats the cause.
    let text = std::fs::read_to_string(path).map_err(|e| usage(format!("cannot read: {e}")))?;
    autoscaler_core::yaml_depth::check_depth(&text).map_err(|e| usage(e.to_string()))?;
    let kc = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| usage(format!("cannot parse kubeconfig: {e}")))?;
    if let Some((field, server)) = current_server(&kc) {
        check_server_url(server).map_err(|e| usage(format!("{field}: {e}")))?;
    }
    Ok(kc)
}

/// `KUBECONFIG` when it names one existing file (kube reads it first when inferring): read and
/// checked here like `--kubeconfig`, so its errors name it once. A list of files, or a file that
/// is not there (kube then falls back to the in-cluster configuration), is left to kube.
fn single_kubeconfig_env() -> Option<PathBuf> {
    let value = std::env::var_os("KUBECONFIG")?;
    let mut paths = std::env::split_paths(&value).filter(|p| !p.as_os_str().is_empty());
    let first = paths.next()?;
    (paths.next().is_none() && first.is_file()).then_some(first)
}

/// The field path and value of the current context's cluster server, when the kubeconfig names
/// one (kube reports a missing context or cluster itself).
fn current_server(kc: &kube::config::Kubeconfig) -> Option<(String, &str)> {
    let context = kc.current_context.as_deref()?;
    let cluster = kc
        .contexts
        .iter()
        .find(|c| c.name == context)?
        .context
        .as_ref()?
        .cluster
        .as_str();
    let (i, named) = kc
        .clusters
        .iter()
        .enumerate()
        .find(|(_, c)| c.name == cluster)?;
    let server = named.cluster.as_ref()?.server.as_deref()?;
    Some((format!("clusters[{i}] ({cluster}).cluster.server"), server))
}

/// Accepts `http(s)://host[:port][/path]` with a port in 1..=65535. The client panics on a
/// URL without a scheme and can never connect to another scheme or port, so such a server is
/// a configuration error, reported before anything starts.
fn check_server_url(server: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("invalid server URL {server:?}: {why}"));
    let uri: http::Uri = match server.parse() {
        Ok(uri) => uri,
        Err(e) => return bad(&e.to_string()),
    };
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => return bad(&format!("scheme {other:?} is not http or https")),
        None => return bad("no scheme (expected https://host:port)"),
    }
    let Some(authority) = uri.authority() else {
        return bad("no host");
    };
    if authority.host().is_empty() {
        return bad("no host");
    }
    // `Authority::port` hides a port that does not fit in u16, so read it from the text.
    if let Some((_, port)) = authority.as_str().rsplit_once(':')
        && !port.contains(']')
        && !matches!(port.parse::<u16>(), Ok(1..))
    {
        return bad(&format!("port {port:?} is not in 1-65535"));
    }
    Ok(())
}

/// Builds the client: from `--kubeconfig` when given, else in-cluster / `KUBECONFIG` /
/// `~/.kube/config` (kube's inference). Errors are configuration errors (exit 2).
async fn client(kubeconfig: Option<Kubeconfig>) -> Result<kube::Client, CliError> {
    let mut config = match kubeconfig {
        Some(Kubeconfig { origin, path, kc }) => {
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| {
                    CliError::usage(anyhow!(
                        "{origin} {}: unusable kubeconfig: {e}",
                        path.display()
                    ))
                })?
        }
        None => kube::Config::infer().await.map_err(|e| {
            CliError::usage(anyhow!(
                "no Kubernetes configuration (in-cluster, KUBECONFIG or ~/.kube/config): {e}; \
                 use --kubeconfig"
            ))
        })?,
    };
    // The shell owns its retries: kube's built-in retry of 429 would hold a PDB-refused
    // eviction inside the client for minutes, past `--max-pod-eviction-time`.
    config.default_retry = false;
    // The inferred configuration may come from a file we did not read: check its URL too.
    check_server_url(&config.cluster_url.to_string())
        .map_err(|e| CliError::usage(anyhow!("Kubernetes configuration: server: {e}")))?;
    kube::Client::try_from(config)
        .map_err(|e| CliError::usage(anyhow!("cannot build the Kubernetes client: {e}")))
}

/// Runs `cluster-autoscaler run`.
pub fn run(args: &RunArgs) -> Result<(), CliError> {
    let opts = RunOptions::from_args(args, &|k| std::env::var(k).ok())
        .map_err(|e| CliError::usage(e.into()))?;
    // Read the kubeconfig before anything starts, so a bad path fails at once with exit 2.
    let kubeconfig = match (&opts.kubeconfig, single_kubeconfig_env()) {
        (Some(path), _) => Some(Kubeconfig::read("--kubeconfig", path.clone())?),
        (None, Some(path)) => Some(Kubeconfig::read("KUBECONFIG", path)?),
        (None, None) => None,
    };
    init_logging(opts.verbosity, opts.logging_format);
    for flag in &opts.ignored_flags {
        tracing::warn!(flag = %format!("--{flag}"), "flag has no effect in this autoscaler");
    }
    for w in &opts.config_warnings {
        tracing::warn!("{w}");
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
        let client = client(kubeconfig).await?;
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

    #[test]
    fn server_urls_need_http_scheme_host_and_valid_port() {
        for ok in [
            "https://127.0.0.1:6443",
            "http://localhost:8080",
            "https://api.example.com",
            "https://[::1]:6443/prefix",
        ] {
            assert_eq!(check_server_url(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("127.0.0.1:6443", "no scheme"),
            ("ftp://x", "\"ftp\""),
            ("https://x:99999", "99999"),
            ("https://x:0", "port \"0\""),
            ("", "invalid server URL"),
            ("https://", "invalid server URL"),
            ("not a url", "invalid server URL"),
        ] {
            let err = check_server_url(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}

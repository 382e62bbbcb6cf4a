//! `run`: the controller on a live cluster. Validates the options, sets up logging, builds the
//! Kubernetes clients and hands them to `autoscaler_kube::run_controller`.
//!
//! Two clients, as upstream's Cluster API provider has: the workload cluster's (`--kubeconfig`,
//! else in-cluster) for nodes, pods, the Lease, events and the status ConfigMap, and the
//! management cluster's for the Cluster API objects: `--cloud-config`'s kubeconfig when given,
//! else the in-cluster configuration with `--clusterapi-cloud-config-authoritative`, else the
//! workload client itself.
//!
//! Exit codes: 2 for anything wrong before the controller starts (a flag, the config file, the
//! kubeconfig or `--cloud-config`, an API server it does not support), 1 when the controller stops with an error. It never decides anything itself and
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
use autoscaler_kube::{ControllerConfig, ControllerError};
use tracing_subscriber::EnvFilter;

use crate::CliError;
use crate::exec_plugin::RefreshingToken;
use autoscaler_options::{LogFormat, ManagementCluster, RunArgs, RunOptions};

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
    // error") live in the builder module. Below `--v=8` the client's own warnings are off
    // too: one is the whole response body that did not decode, at each retry (the watches
    // log the error, cut, naming the kind).
    let client = if verbosity >= 8 {
        "kube_client=debug"
    } else {
        "kube_client::client::builder=off,kube_client::client=error"
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
    /// `--kubeconfig`, `--cloud-config`, `KUBECONFIG` or `~/.kube/config`.
    origin: &'static str,
    /// The file (for `KUBECONFIG`, its value).
    path: PathBuf,
    kc: kube::config::Kubeconfig,
}

impl Kubeconfig {
    /// Reads and parses a kubeconfig file, checks the server and credentials of its current
    /// context and reads the files it names; errors name the origin, the path and the field
    /// (exit 2).
    fn read(origin: &'static str, path: PathBuf) -> Result<Kubeconfig, CliError> {
        let mut kc = parse_kubeconfig(origin, &path)?;
        check_kubeconfig(origin, &path, &mut kc)?;
        Ok(Kubeconfig { origin, path, kc })
    }
}

/// Reads (bounded) and parses one kubeconfig file, its relative paths made absolute.
fn parse_kubeconfig(origin: &str, path: &Path) -> Result<kube::config::Kubeconfig, CliError> {
    let usage = |msg: String| CliError::usage(anyhow!("{origin} {}: {msg}", path.display()));
    // Read once, here: kube's reader has no size limit.
    let bytes =
        autoscaler_options::read_bounded(path, autoscaler_options::KUBECONFIG_LIMIT, origin)
            .map_err(|e| CliError::usage(e.into()))?;
    let text = kubeconfig_text(bytes).map_err(|e| usage(e.into()))?;
    autoscaler_model::check_depth(&text).map_err(|e| usage(e.to_string()))?;
    let mut kc = kube::config::Kubeconfig::from_yaml(&text)
        .map_err(|e| usage(format!("cannot parse kubeconfig: {e}")))?;
    if let Some(dir) = path.parent() {
        crate::credentials::resolve_relative(&mut kc, dir);
    }
    Ok(kc)
}

/// A kubeconfig's text: UTF-8, with or without a byte-order mark, or UTF-16 with one (the
/// encodings kube's reader takes).
fn kubeconfig_text(bytes: Vec<u8>) -> Result<String, &'static str> {
    let utf16 = |b: &[u8], f: fn([u8; 2]) -> u16| {
        let units: Vec<u16> = b
            .chunks(2)
            .map(|c| f([c[0], *c.get(1).unwrap_or(&0)]))
            .collect();
        String::from_utf16(&units).map_err(|_| "not UTF-16 text")
    };
    match bytes.as_slice() {
        [0xFF, 0xFE, rest @ ..] => utf16(rest, u16::from_le_bytes),
        [0xFE, 0xFF, rest @ ..] => utf16(rest, u16::from_be_bytes),
        [0xEF, 0xBB, 0xBF, rest @ ..] => {
            String::from_utf8(rest.to_vec()).map_err(|_| "not UTF-8 text")
        }
        _ => String::from_utf8(bytes).map_err(|_| "not UTF-8 text"),
    }
}

/// Checks the current context's server and credentials (see [`crate::credentials`]).
fn check_kubeconfig(
    origin: &str,
    path: &Path,
    kc: &mut kube::config::Kubeconfig,
) -> Result<(), CliError> {
    let usage = |msg: String| CliError::usage(anyhow!("{origin} {}: {msg}", path.display()));
    if let Some((field, server)) = current_server(kc) {
        check_server_url(server).map_err(|e| usage(format!("{field}: {e}")))?;
    }
    crate::credentials::check(kc).map_err(|e| usage(e.to_string()))
}

/// The kubeconfig kube would infer without `--kubeconfig`: the files of `KUBECONFIG` that
/// exist (merged, the first to set a value wins), else `~/.kube/config` if it exists; read and
/// checked here like `--kubeconfig`. `None`: the in-cluster configuration.
fn inferred_kubeconfig() -> Result<Option<Kubeconfig>, CliError> {
    if let Some(value) = std::env::var_os("KUBECONFIG") {
        let paths: Vec<PathBuf> = std::env::split_paths(&value)
            .filter(|p| !p.as_os_str().is_empty() && p.exists())
            .collect();
        if paths.is_empty() {
            return Ok(None);
        }
        let path = PathBuf::from(&value);
        let mut merged = kube::config::Kubeconfig::default();
        for p in &paths {
            let kc = parse_kubeconfig("KUBECONFIG", p)?;
            merged = merged
                .merge(kc)
                .map_err(|e| CliError::usage(anyhow!("KUBECONFIG {}: {e}", path.display())))?;
        }
        check_kubeconfig("KUBECONFIG", &path, &mut merged)?;
        return Ok(Some(Kubeconfig {
            origin: "KUBECONFIG",
            path,
            kc: merged,
        }));
    }
    match std::env::home_dir().map(|h| h.join(".kube").join("config")) {
        Some(p) if p.exists() => Kubeconfig::read("~/.kube/config", p).map(Some),
        _ => Ok(None),
    }
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

/// The management cluster's configuration, read at start (see [`ManagementCluster`]).
enum Management {
    /// The workload client serves both.
    Workload,
    /// `--cloud-config`'s kubeconfig.
    Kubeconfig(Box<Kubeconfig>),
    /// The cluster the autoscaler runs in.
    InCluster,
}

impl Management {
    /// Reads `--cloud-config` when it is the management cluster (exit 2 naming the file).
    fn read(m: &ManagementCluster) -> Result<Management, CliError> {
        Ok(match m {
            ManagementCluster::Workload => Management::Workload,
            ManagementCluster::Kubeconfig(path) => {
                Management::Kubeconfig(Box::new(Kubeconfig::read("--cloud-config", path.clone())?))
            }
            ManagementCluster::InCluster => Management::InCluster,
        })
    }

    /// What the start log says.
    fn describe(&self) -> String {
        match self {
            Management::Workload => "the workload cluster".into(),
            Management::Kubeconfig(k) => format!("--cloud-config {}", k.path.display()),
            Management::InCluster => "in-cluster (--clusterapi-cloud-config-authoritative)".into(),
        }
    }
}

/// The workload and management clients (see the module documentation).
async fn clients(
    kubeconfig: Option<Kubeconfig>,
    management: Management,
) -> Result<autoscaler_kube::Clients, CliError> {
    let workload = client(kubeconfig).await?;
    let management = match management {
        Management::Workload => workload.clone(),
        Management::Kubeconfig(k) => client(Some(*k)).await?,
        Management::InCluster => in_cluster().await.map_err(|e| {
            CliError::usage(anyhow!(
                "--clusterapi-cloud-config-authoritative without --cloud-config reads the \
                 Cluster API objects from the cluster the autoscaler runs in, but there is \
                 no in-cluster configuration: {e}; give --cloud-config"
            ))
        })??,
    };
    Ok(autoscaler_kube::Clients {
        workload,
        management,
    })
}

/// The in-cluster client, its service-account files checked first (bounded). The outer error:
/// there is no usable in-cluster configuration; the inner one: the client cannot be built.
async fn in_cluster() -> Result<Result<kube::Client, CliError>, anyhow::Error> {
    let dir = crate::credentials::service_account_dir();
    crate::credentials::check_service_account(&dir)?;
    let config = kube::Config::incluster()?;
    Ok(build_client(config, "in-cluster configuration", "the service account").await)
}

/// Builds the client: from `kubeconfig` when given, else the in-cluster configuration.
/// Errors are configuration errors (exit 2).
async fn client(kubeconfig: Option<Kubeconfig>) -> Result<kube::Client, CliError> {
    match kubeconfig {
        Some(Kubeconfig { origin, path, kc }) => {
            let user = kc
                .current_context
                .as_deref()
                .and_then(|name| kc.contexts.iter().find(|c| c.name == name))
                .and_then(|c| c.context.as_ref()?.user.clone())
                .unwrap_or_default();
            let config = kube::Config::from_custom_kubeconfig(
                kc,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .map_err(|e| {
                CliError::usage(anyhow!(
                    "{origin} {}: unusable kubeconfig: {e}",
                    path.display()
                ))
            })?;
            build_client(config, &format!("{origin} {}", path.display()), &user).await
        }
        None => in_cluster().await.map_err(|e| {
            CliError::usage(anyhow!(
                "no Kubernetes configuration (in-cluster, KUBECONFIG or ~/.kube/config): {e}; \
                 use --kubeconfig"
            ))
        })?,
    }
}

/// The client of `config`, without kube's own retries; its server URL checked, and its token
/// file or exec plugin taken over by [`crate::exec_plugin`] (`what` names the configuration
/// in errors, `user` the kubeconfig user).
async fn build_client(
    mut config: kube::Config,
    what: &str,
    user: &str,
) -> Result<kube::Client, CliError> {
    // The shell owns its retries: kube's built-in retry of 429 would hold a PDB-refused
    // eviction inside the client for minutes, past `--max-pod-eviction-time`.
    config.default_retry = false;
    // The inferred configuration may come from a file we did not read: check its URL too.
    check_server_url(&config.cluster_url.to_string())
        .map_err(|e| CliError::usage(anyhow!("{what}: server: {e}")))?;
    let token = refreshing_token(&mut config, user)
        .await
        .map_err(|e| CliError::usage(anyhow!("{what}: {e}")))?;
    // Every response body bounded: a watch line or a list without end is an error and a retry.
    let bounded = autoscaler_kube::BoundedReadsLayer::new(autoscaler_kube::ReadLimits::default());
    let builder = kube::client::ClientBuilder::try_from(config)
        .map_err(|e| CliError::usage(anyhow!("cannot build the Kubernetes client: {e}")))?
        .with_layer(&bounded);
    Ok(match token {
        Some(t) => {
            let layer = t.layer();
            t.spawn();
            builder.with_layer(&layer).build()
        }
        None => builder.build(),
    })
}

/// Takes the token file or exec plugin the client would use out of `config`: a token file
/// becomes a [`RefreshingToken`]; a plugin is run now, its token becomes one, its client
/// certificate and key go into `config` (read once, as the client does).
async fn refreshing_token(
    config: &mut kube::Config,
    user: &str,
) -> Result<Option<RefreshingToken>, anyhow::Error> {
    use crate::exec_plugin::{Credential, ExecLimits, run_plugin};
    let auth = &mut config.auth_info;
    // The client's order: auth-provider, basic, token, tokenFile, exec.
    if auth.auth_provider.is_some()
        || (auth.username.is_some() && auth.password.is_some())
        || auth.token.is_some()
    {
        return Ok(None);
    }
    if let Some(path) = auth.token_file.take() {
        auth.exec = None;
        return Ok(Some(RefreshingToken::file(path.into())?));
    }
    let Some(exec) = auth.exec.take() else {
        return Ok(None);
    };
    let limits = ExecLimits::default();
    let (u, e) = (user.to_string(), exec.clone());
    let credential = tokio::task::spawn_blocking(move || run_plugin(&u, &e, limits)).await??;
    match credential {
        Credential::Token { token, expires } => Ok(Some(RefreshingToken::exec(
            user, exec, limits, &token, expires,
        )?)),
        Credential::Certificate { certificate, key } => {
            use base64::Engine;
            let at = format!("the ExecCredential of kubeconfig user {user:?}");
            crate::credentials::certificates(
                certificate.as_bytes(),
                "status.clientCertificateData",
            )
            .and_then(|()| crate::credentials::private_key(key.as_bytes(), "status.clientKeyData"))
            .map_err(|e| anyhow!("{at}: {e}"))?;
            let b64 = base64::engine::general_purpose::STANDARD;
            let auth = &mut config.auth_info;
            auth.client_certificate_data = Some(b64.encode(certificate));
            auth.client_key_data = Some(b64.encode(key).into());
            Ok(None)
        }
    }
}

/// The workload and management clients `run` would build for `opts` (`--kubeconfig` or
/// `KUBECONFIG`, `--cloud-config`), for `plan` on a live cluster; errors exit 2.
pub async fn clients_of(opts: &RunOptions) -> Result<autoscaler_kube::Clients, CliError> {
    let kubeconfig = match &opts.kubeconfig {
        Some(path) => Some(Kubeconfig::read("--kubeconfig", path.clone())?),
        None => inferred_kubeconfig()?,
    };
    clients(kubeconfig, Management::read(&opts.management)?).await
}

/// The decision's options for one version of the cluster's `ClusterAutoscaler` (`None`: absent
/// or deleted), with the flags over it: the options and what to warn about, or why the version
/// is refused.
pub fn options_for(
    args: &RunArgs,
    obj: Option<&serde_json::Value>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<RunOptions, autoscaler_options::OptionsError> {
    let resource = obj
        .map(autoscaler_options::config_from_cluster)
        .transpose()?;
    RunOptions::build(args, resource.as_ref(), env)
}

/// When the cluster serves the `ClusterAutoscaler` kind, watches its singleton `default` and
/// returns the options channel the controller reads before each loop: each valid version
/// replaces the options, an invalid one is refused with a warning and the previous options
/// stay. Waits (a little) for the first answer so the first loop already decides with it.
/// `None` when the kind is not served.
async fn watch_cluster_resource(
    client: &kube::Client,
    args: &RunArgs,
    config: &ControllerConfig,
    verbosity: u8,
) -> Option<tokio::sync::watch::Receiver<autoscaler_core::AutoscalerOptions>> {
    use autoscaler_kube::{
        CONFIG_RESOURCE_NAME, EventSink, EventSpec, config_resource_served, spawn_config_resource,
    };
    let base = config.autoscaler.clone();
    let resource = match config_resource_served(client).await {
        Ok(Some(r)) => r,
        Ok(None) => {
            tracing::debug!("the cluster serves no ClusterAutoscaler kind: flags only");
            return None;
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot tell whether the cluster serves ClusterAutoscaler: flags only");
            return None;
        }
    };
    let (tx, rx) = tokio::sync::watch::channel(base);
    let first = std::sync::Arc::new(tokio::sync::Notify::new());
    let seen = first.clone();
    let args = args.clone();
    let events = std::sync::Arc::new(EventSink::new(
        client.clone(),
        &config.identity,
        &config.namespace,
        &config.status_config_map_name,
        Default::default(),
    ));
    spawn_config_resource(client.clone(), resource, move |obj| {
        match options_for(&args, obj.as_ref(), &|k| std::env::var(k).ok()) {
            Ok(o) => {
                for w in &o.config_warnings {
                    tracing::warn!("{w}");
                }
                if o.verbosity != verbosity {
                    // The log filter is set once, at start, from --v.
                    tracing::warn!(
                        "ClusterAutoscaler {}: spec.logVerbosity {} has no effect on a running \
                         process; give --v={} instead",
                        CONFIG_RESOURCE_NAME,
                        o.verbosity,
                        o.verbosity
                    );
                }
                let what = if obj.is_some() {
                    "read"
                } else {
                    "absent: flags only"
                };
                tracing::info!(
                    "ClusterAutoscaler {}: {what}; the next loop decides with it",
                    CONFIG_RESOURCE_NAME
                );
                tx.send_replace(o.controller.autoscaler);
            }
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "ClusterAutoscaler {}: change refused; the previous options stay",
                    CONFIG_RESOURCE_NAME
                );
                // Also on the object, where whoever edited it looks (`kubectl describe`).
                let uid = obj
                    .as_ref()
                    .and_then(|o| o.pointer("/metadata/uid")?.as_str())
                    .unwrap_or_default();
                let spec = EventSpec::config_rejected(CONFIG_RESOURCE_NAME, uid, &e.to_string());
                let events = events.clone();
                tokio::spawn(async move {
                    let now = jiff::Timestamp::now().as_millisecond();
                    events.publish(&[spec], now).await;
                });
            }
        }
        seen.notify_one();
    });
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), first.notified()).await;
    Some(rx)
}

/// Runs `cluster-autoscaler run`.
pub fn run(args: &RunArgs) -> Result<(), CliError> {
    let opts = RunOptions::from_args(args, &|k| std::env::var(k).ok())
        .map_err(|e| CliError::usage(e.into()))?;
    // Read the kubeconfig before anything starts, so a bad path fails at once with exit 2.
    let kubeconfig = match &opts.kubeconfig {
        Some(path) => Some(Kubeconfig::read("--kubeconfig", path.clone())?),
        None => inferred_kubeconfig()?,
    };
    let management = Management::read(&opts.management)?;
    init_logging(opts.verbosity, opts.logging_format);
    say_flags(&opts);
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        namespace = %opts.controller.namespace,
        address = %opts.controller.address,
        leader_elect = opts.controller.leader_elect,
        cluster_api_objects_from = %management.describe(),
        "starting cluster-autoscaler"
    );
    tracing::debug!(options = ?opts.controller, "options");
    // Listing every object allocates and frees gigabytes at scale: keep freed memory for reuse
    // until the first loop is done (the controller gives it back then).
    autoscaler_kube::keep_freed_memory();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::failure(anyhow!("cannot start the async runtime: {e}")))?;
    let verbosity = opts.verbosity;
    let result = runtime.block_on(async {
        let clients = clients(kubeconfig, management).await?;
        // The resource configures this autoscaler, so it is read where the autoscaler keeps
        // its own state (lease, status): the workload cluster.
        let options = match args.config() {
            Some(_) => None,
            None => {
                watch_cluster_resource(&clients.workload, args, &opts.controller, verbosity).await
            }
        };
        autoscaler_kube::run_controller_with_options(clients, opts.controller, options)
            .await
            .map_err(|e| match e {
                // A server it cannot work with is a configuration error, found before leading.
                ControllerError::Unsupported(_) => CliError::usage(anyhow!("{e}")),
                e => CliError::failure(anyhow!("controller stopped: {e}")),
            })
    });
    // The watches and other spawned tasks end with the runtime, before the last line: a watch
    // that notices the closed connection after it would log past "stopped".
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    match &result {
        Ok(()) => tracing::info!("cluster-autoscaler stopped"),
        Err(e) => tracing::error!(error = %e, "cluster-autoscaler stopped"),
    }
    result
}

/// Logs, once at start, the flags given that have no effect and those that ask for a feature
/// this autoscaler does not have (the latter also go to the status ConfigMap).
fn say_flags(opts: &RunOptions) {
    for flag in &opts.ignored_flags {
        tracing::warn!(flag = %format!("--{flag}"), "flag has no effect in this autoscaler");
    }
    for u in &opts.unsupported {
        tracing::warn!(
            flag = %format!("--{}", u.flag),
            value = %u.value,
            missing = u.why,
            "flag asks for a feature this autoscaler does not have; running without it"
        );
    }
    for w in &opts.config_warnings {
        tracing::warn!("{w}");
    }
}

/// `run --validate-only`: reads and validates the flags and the `--config` file as `run` does,
/// says what `run` would say about them at start, and stops before touching any cluster.
pub fn validate_only(args: &RunArgs) -> Result<(), CliError> {
    let opts = RunOptions::from_args(args, &|k| std::env::var(k).ok())
        .map_err(|e| CliError::usage(e.into()))?;
    init_logging(opts.verbosity, opts.logging_format);
    say_flags(&opts);
    tracing::info!("flags and configuration are valid");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each version of the cluster's resource gives the options the next loop decides with,
    /// flags over it; an invalid version is refused with its field named.
    #[test]
    fn cluster_resource_versions_give_options_with_the_flags_over_them() {
        use clap::Parser;
        #[derive(Debug, Parser)]
        struct Cli {
            #[command(flatten)]
            run: RunArgs,
        }
        let args = Cli::try_parse_from(["ca", "--scale-down-unneeded-time=7m"])
            .unwrap()
            .run;
        let env = |_: &str| None;
        let v1 = serde_json::json!({
            "apiVersion": "autoscaling.openshift.io/v1", "kind": "ClusterAutoscaler",
            "metadata": {"name": "default", "resourceVersion": "5", "managedFields": []},
            "spec": {"maxPodGracePeriod": 60,
                     "scaleDown": {"enabled": true, "unneededTime": "1m", "delayAfterAdd": "2m"}},
            "status": {}});
        let o = options_for(&args, Some(&v1), &env).unwrap();
        let a = &o.controller.autoscaler;
        assert_eq!(a.scale_down.max_graceful_termination_sec(), 60);
        assert_eq!(a.scale_down.delay_after_add().as_secs(), 120);
        // The flag wins over the resource.
        assert_eq!(a.scale_down.unneeded_time().as_secs(), 420);

        let bad = serde_json::json!({
            "apiVersion": "autoscaling.openshift.io/v1", "kind": "ClusterAutoscaler",
            "spec": {"scaleDown": {"enabled": true, "utilizationThreshold": "2"}}});
        let e = options_for(&args, Some(&bad), &env)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(autoscaler_options::CONFIG_CLUSTER_SOURCE)
                && e.contains("spec.scaleDown.utilizationThreshold"),
            "{e}"
        );
        let bad_duration = serde_json::json!({
            "apiVersion": "autoscaling.openshift.io/v1", "kind": "ClusterAutoscaler",
            "spec": {"scaleDown": {"enabled": true, "delayAfterAdd": "10 minutes"}}});
        let e = options_for(&args, Some(&bad_duration), &env)
            .unwrap_err()
            .to_string();
        assert!(e.contains("spec.scaleDown.delayAfterAdd"), "{e}");
        let unknown = serde_json::json!({
            "apiVersion": "autoscaling.openshift.io/v1", "kind": "ClusterAutoscaler",
            "spec": {"scaleDwon": {}}});
        assert!(options_for(&args, Some(&unknown), &env).is_err());

        // Deleted: the flags alone.
        let none = options_for(&args, None, &env).unwrap();
        assert_eq!(
            none.controller
                .autoscaler
                .scale_down
                .max_graceful_termination_sec(),
            600
        );
    }

    #[test]
    fn verbosity_maps_to_tracing_levels() {
        assert_eq!(
            log_filter(0),
            "info,kube_client::client::builder=off,kube_client::client=error"
        );
        assert_eq!(log_filter(1), log_filter(0));
        let v4 = log_filter(4);
        assert!(
            v4.starts_with("info,kube_client::client::builder=off,kube_client::client=error,"),
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
    fn kubeconfigs_are_read_in_utf8_and_utf16_with_byte_order_marks() {
        let text = "kind: Config # ü\n";
        let le: Vec<u8> = [0xFF, 0xFE]
            .into_iter()
            .chain(text.encode_utf16().flat_map(u16::to_le_bytes))
            .collect();
        let be: Vec<u8> = [0xFE, 0xFF]
            .into_iter()
            .chain(text.encode_utf16().flat_map(u16::to_be_bytes))
            .collect();
        let bom: Vec<u8> = [0xEF, 0xBB, 0xBF].into_iter().chain(text.bytes()).collect();
        for bytes in [text.as_bytes().to_vec(), le, be, bom] {
            assert_eq!(kubeconfig_text(bytes).as_deref(), Ok(text));
        }
        assert!(kubeconfig_text(vec![0xFF, 0xFE, 0x00, 0xD8]).is_err());
        assert!(kubeconfig_text(vec![0x80]).is_err());
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

//! `plan`: load a snapshot of Kubernetes objects from YAML, or list a live cluster's objects,
//! and print what one loop of the autoscaler would decide now, and why: where each unbound pod
//! would fit, the scale-ups, the unneeded nodes and deletions, the reason for every pending pod
//! that triggers nothing and every node that is not removable.
//!
//! Input and output only: the decisions come from the core (`Autoscaler::run_once`) and the
//! Cluster API provider over the same object store the live controller and the simulation use,
//! and the report from `autoscaler_kube::Explained` (the document the leader serves at `/explain`).
//! On a live cluster it only lists and watches: it never writes anything there.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, anyhow};
use autoscaler_actuation::{Actuation, Informer};
use autoscaler_clusterapi::{ClusterApiConfig, ClusterApiProvider};
use autoscaler_core::{Autoscaler, AutoscalerOptions, ClusterView, LoopInput};
use autoscaler_kube::{
    Explained, WatchConfig, explained_json, explained_json_text, explained_text,
};
use autoscaler_model::ObjectStore;
use autoscaler_model::read_objects;

use crate::CliError;
use autoscaler_options::{RunArgs, RunOptions};

/// Flags of `plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// YAML file with Kubernetes objects (Nodes, Pods, DaemonSets, PodDisruptionBudgets,
    /// Namespaces, workload controllers, Cluster API MachineDeployments / MachineSets / Machines).
    /// Documents separated by `---`; `kind: List` objects are expanded.
    /// Without it, `plan` reads the live cluster of `--kubeconfig` (or `--from-cluster`).
    #[arg(long, value_name = "FILE")]
    pub snapshot: Option<PathBuf>,
    /// Read the live cluster (read-only: list and watch) through the configuration `run` would
    /// use: `--kubeconfig`, else in-cluster, `KUBECONFIG` or `~/.kube/config`. Implied by
    /// `--kubeconfig` without `--snapshot`.
    #[arg(long, conflicts_with = "snapshot")]
    pub from_cluster: bool,
    /// How many fitting nodes to name per pod.
    #[arg(long, default_value_t = 5)]
    pub show_nodes: usize,
    /// The decision time (RFC 3339, e.g. `2026-01-01T00:00:00Z`); default: now.
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,
    /// API group of the Cluster API objects (`cluster.x-k8s.io`, or `machine.openshift.io`);
    /// default: the `CAPI_GROUP` environment variable, else `cluster.x-k8s.io`.
    #[arg(long, value_name = "GROUP")]
    pub capi_group: Option<String>,
    /// `text` for people, `json` for machines.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Every flag of `run` (and `--config`), so the plan answers for the configuration the
    /// cluster runs with; those that only concern a running process (leader election, the
    /// status ConfigMap) are accepted and have no effect here. `--kubeconfig` and
    /// `--cloud-config` name the live cluster read without `--snapshot`.
    #[command(flatten)]
    pub run: RunArgs,
}

/// Output formats of `plan`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Text for people.
    Text,
    /// One JSON document.
    Json,
}

/// Runs `plan`.
pub fn run(args: &PlanArgs) -> Result<(), CliError> {
    let now_ms = match &args.now {
        Some(t) => t
            .parse::<jiff::Timestamp>()
            .map_err(|e| CliError::usage(anyhow!("--now {t:?}: {e}")))?
            .as_millisecond(),
        None => jiff::Timestamp::now().as_millisecond(),
    };
    // One set of options with `run`: defaults, then `--config`, then the flags, one validation.
    let env = |k: &str| std::env::var(k).ok();
    let opts =
        RunOptions::from_args(&args.run, &env).map_err(|e| CliError::usage(anyhow!("{e}")))?;
    // A flag asking for a feature this autoscaler does not have is said, never silent.
    for u in &opts.unsupported {
        eprintln!("warning: {u}");
    }
    let mut config = opts.controller.clusterapi.clone();
    if let Some(group) = &args.capi_group {
        config = ClusterApiConfig::from_env_and_flag(Some(group), None)
            .and_then(|c| c.with_auto_discovery(&args.run.values("node-group-auto-discovery")))
            .map_err(|e| CliError::usage(anyhow!("{e}")))?;
    }
    let options = &opts.controller.autoscaler;
    let namespace = &opts.controller.namespace;
    let Some(snapshot) = &args.snapshot else {
        if !args.from_cluster && opts.kubeconfig.is_none() {
            return Err(CliError::usage(anyhow!(
                "give --snapshot FILE, or --kubeconfig FILE or --from-cluster to read a live \
                 cluster"
            )));
        }
        let report = live_plan(&opts, &config, now_ms, args)?;
        print!("{report}");
        return Ok(());
    };
    let text = autoscaler_options::read_bounded_text(
        snapshot,
        autoscaler_options::SNAPSHOT_LIMIT,
        "snapshot file",
    )
    .map_err(|e| CliError::usage(e.into()))?;
    let report = match args.output {
        OutputFormat::Text => {
            plan_text(&text, &config, options, namespace, now_ms, args.show_nodes)
        }
        OutputFormat::Json => {
            plan_json(&text, &config, options, namespace, now_ms, args.show_nodes)
                .map(|v| format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default()))
        }
    }
    .with_context(|| format!("snapshot file {}", snapshot.display()))
    .map_err(CliError::usage)?;
    print!("{report}");
    Ok(())
}

/// How long `plan` waits for a live cluster's objects to list.
const LIST_TIMEOUT: Duration = Duration::from_secs(120);

/// One loop on the live cluster of `opts` (the clients `run` would build), read-only: its
/// objects are listed (and watched until they all listed), never written; the report as
/// `args.output` asks.
fn live_plan(
    opts: &RunOptions,
    config: &ClusterApiConfig,
    now_ms: i64,
    args: &PlanArgs,
) -> Result<String, CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::failure(anyhow!("cannot start the async runtime: {e}")))?;
    runtime.block_on(async {
        let clients = crate::run::clients_of(opts).await?;
        let namespace = &opts.controller.namespace;
        // The capacity-on-request kinds `run` watches with the same flags.
        let capacity = &opts.controller.autoscaler.capacity;
        let watch_config = WatchConfig {
            capacity: autoscaler_kube::CapacityWatch {
                requests: capacity.requests().enabled(),
                buffers: capacity.buffer_controller() || capacity.buffer_pods(),
                ..Default::default()
            },
            ..WatchConfig::new(namespace, config.clone())
        };
        let watches = autoscaler_kube::start_watches(&clients, watch_config)
            .await
            .map_err(|e| CliError::failure(anyhow!("cannot read the cluster: {e}")))?;
        if tokio::time::timeout(LIST_TIMEOUT, watches.wait_synced())
            .await
            .is_err()
        {
            return Err(CliError::failure(anyhow!(
                "the cluster's objects did not list within {}s; still listing: {:?}",
                LIST_TIMEOUT.as_secs(),
                watches.unsynced()
            )));
        }
        let (provider, objects, pods, priorities, capacity_objects) = {
            let mut inf = autoscaler_actuation::lock_informer(watches.informer());
            let provider = inf.provider(config);
            let objects = inf.objects_without_pods();
            let pods = inf.pods().clone();
            // As `run`: an object that does not convert is skipped (the watches named it).
            let capacity_objects = (opts.controller.autoscaler.capacity.any())
                .then(|| autoscaler_model::CapacityObjects::from_store(inf.store()).0);
            let priorities = inf.priority_text(namespace);
            (provider, objects, pods, priorities, capacity_objects)
        };
        drop(watches);
        let view = ClusterView::of_objects(&objects, &pods, &*provider);
        let mut autoscaler = Autoscaler::new(opts.controller.autoscaler.clone());
        autoscaler.set_priority_text(priorities.as_deref());
        let in_flight = Actuation::default().in_flight(&provider);
        let outcome = autoscaler.run_once(
            LoopInput::new(&view, now_ms)
                .controllers(&objects.controllers)
                .in_flight(in_flight)
                .capacity(capacity_objects.as_ref()),
        );
        let e = Explained {
            view: &view,
            outcome: &outcome,
            provider_warnings: &[],
            now_ms,
            show_nodes: args.show_nodes,
        };
        Ok(match args.output {
            OutputFormat::Text => {
                let mut out = explained_text(&e);
                if let Some(c) = &outcome.capacity {
                    out.push_str(&crate::capacity::text(c));
                }
                out
            }
            OutputFormat::Json => match &outcome.capacity {
                None => explained_json_text(&e),
                Some(c) => {
                    let mut v = explained_json(&e);
                    if let Some(o) = v.as_object_mut() {
                        o.insert("capacity".into(), crate::capacity::json(c));
                    }
                    format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default())
                }
            },
        })
    })
}

/// The whole report for a snapshot text, for an autoscaler running in `namespace` (where the
/// priority expander's ConfigMap is read). Errors (malformed YAML or objects) name the
/// document or the object and the field.
pub fn plan_text(
    text: &str,
    config: &ClusterApiConfig,
    options: &AutoscalerOptions,
    namespace: &str,
    now_ms: i64,
    show_nodes: usize,
) -> anyhow::Result<String> {
    let d = decide(text, config, options, namespace, now_ms)?;
    let mut out = explained_text(&d.explained(&d.view(), now_ms, show_nodes));
    if let Some(c) = &d.outcome.capacity {
        out.push_str(&crate::capacity::text(c));
    }
    Ok(out)
}

/// The same decision as [`plan_text`], as one JSON document: everything the text shows.
pub fn plan_json(
    text: &str,
    config: &ClusterApiConfig,
    options: &AutoscalerOptions,
    namespace: &str,
    now_ms: i64,
    show_nodes: usize,
) -> anyhow::Result<serde_json::Value> {
    let d = decide(text, config, options, namespace, now_ms)?;
    let mut out = explained_json(&d.explained(&d.view(), now_ms, show_nodes));
    if let (Some(c), Some(o)) = (&d.outcome.capacity, out.as_object_mut()) {
        o.insert("capacity".into(), crate::capacity::json(c));
    }
    Ok(out)
}

/// The objects of a snapshot, its node groups and one loop's decision on them.
struct Decided {
    objects: autoscaler_model::ClusterObjects,
    provider: ClusterApiProvider,
    provider_warnings: Vec<String>,
    /// The loop's decision, capacity on request's included when any of its flags is on.
    outcome: autoscaler_core::LoopOutcome,
}

impl Decided {
    /// The loop to explain, on `view` (this snapshot's).
    fn explained<'a>(
        &'a self,
        view: &'a ClusterView<'a>,
        now_ms: i64,
        show_nodes: usize,
    ) -> Explained<'a> {
        Explained {
            view,
            outcome: &self.outcome,
            provider_warnings: &self.provider_warnings,
            now_ms,
            show_nodes,
        }
    }

    fn view(&self) -> ClusterView<'_> {
        ClusterView {
            nodes: &self.objects.nodes,
            pods: &self.objects.pods,
            daemonsets: &self.objects.daemonsets,
            namespaces: &self.objects.namespaces,
            provider: &self.provider,
            pdbs: &self.objects.pdbs,
            storage: &self.objects.storage,
        }
    }
}

/// Loads `text` into an informer (as the live shell and the simulator see their clusters),
/// discovers the node groups, reads the priority expander's ConfigMap in `namespace` and runs
/// one loop at `now_ms`. Unlike a live cluster, an object that does not convert is an error.
fn decide(
    text: &str,
    config: &ClusterApiConfig,
    options: &AutoscalerOptions,
    namespace: &str,
    now_ms: i64,
) -> anyhow::Result<Decided> {
    let mut store = ObjectStore::new();
    store.load_yaml(text)?;
    if let Some(e) = read_objects(&store).1.first() {
        return Err(anyhow!("{e}"));
    }
    let mut informer = Informer::from_store(&store);
    drop(store);
    let (provider, provider_warnings) = ClusterApiProvider::discover(informer.store(), config);
    let mut d = Decided {
        objects: informer.objects(),
        provider,
        provider_warnings,
        outcome: Default::default(),
    };
    let capacity = if options.capacity.any() {
        Some(crate::capacity::objects(informer.store())?)
    } else {
        None
    };
    let mut autoscaler = Autoscaler::new(options.clone());
    autoscaler.set_priority_text(informer.priority_text(namespace).as_deref());
    // The loop `run` runs (requests and buffers decided within it, on its cluster state).
    let in_flight = Actuation::default().in_flight(&d.provider);
    let view = d.view();
    let outcome = autoscaler.run_once(
        LoopInput::new(&view, now_ms)
            .controllers(&d.objects.controllers)
            .in_flight(in_flight)
            .capacity(capacity.as_ref()),
    );
    d.outcome = outcome;
    Ok(d)
}

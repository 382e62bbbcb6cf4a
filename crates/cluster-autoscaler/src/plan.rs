//! `plan`: load a snapshot of Kubernetes objects from YAML and print what one loop of the
//! autoscaler would decide now, and why: where each unbound pod would fit, the scale-ups, the
//! unneeded nodes and deletions, the reason for every pending pod that triggers nothing and every
//! node that is not removable.
//!
//! Input and output only: the decisions come from the core (`Autoscaler::run_once`) and the
//! Cluster API provider over the same object store the live controller and the simulation use.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, anyhow};
use autoscaler_actuation::{Actuation, Informer};
use autoscaler_clusterapi::{ClusterApiConfig, ClusterApiProvider};
use autoscaler_core::Action;
use autoscaler_core::ObjectStore;
use autoscaler_core::Unlimited;
use autoscaler_core::autoscaler::build_snapshot;
use autoscaler_core::model::duration::format_duration;
use autoscaler_core::model::objects::read_objects;
use autoscaler_core::scale_down::Waiting;
use autoscaler_core::scale_up::IncreaseReason;
use autoscaler_core::scale_up::pending::is_unschedulable;
use autoscaler_core::{Autoscaler, AutoscalerOptions, ClusterView};

use crate::CliError;
use crate::options::{RunArgs, RunOptions};

/// Flags of `plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// YAML file with Kubernetes objects (Nodes, Pods, DaemonSets, PodDisruptionBudgets,
    /// Namespaces, workload controllers, Cluster API MachineDeployments / MachineSets / Machines).
    /// Documents separated by `---`; `kind: List` objects are expanded.
    #[arg(long, value_name = "FILE")]
    pub snapshot: PathBuf,
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
    /// cluster runs with; those that only concern a live process (leader election, the status
    /// ConfigMap, the kubeconfig) are accepted and have no effect here.
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
    let mut config = opts.controller.clusterapi.clone();
    if let Some(group) = &args.capi_group {
        config = ClusterApiConfig::from_env_and_flag(Some(group), None)
            .and_then(|c| c.with_auto_discovery(&args.run.node_group_auto_discovery))
            .map_err(|e| CliError::usage(anyhow!("{e}")))?;
    }
    let options = &opts.controller.autoscaler;
    let namespace = &opts.controller.namespace;
    let text = std::fs::read_to_string(&args.snapshot)
        .with_context(|| format!("cannot read snapshot file {}", args.snapshot.display()))
        .map_err(CliError::usage)?;
    let report = match args.output {
        OutputFormat::Text => {
            plan_text(&text, &config, options, namespace, now_ms, args.show_nodes)
        }
        OutputFormat::Json => plan_json(&text, &config, options, namespace, now_ms)
            .map(|v| format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default())),
    }
    .with_context(|| format!("snapshot file {}", args.snapshot.display()))
    .map_err(CliError::usage)?;
    print!("{report}");
    Ok(())
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
    let view = d.view();
    let mut out = String::new();
    for w in &d.provider_warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    explain_scheduling(&view, show_nodes, &mut out);

    let outcome = &d.outcome;
    for w in &outcome.scale_up.warnings {
        let _ = writeln!(out, "warning: {w}");
    }

    let status = &outcome.status;
    let _ = writeln!(
        out,
        "\nCluster: {} ({} ready, {} unready, {} starting, {} being deleted)",
        status.message.as_deref().unwrap_or("healthy"),
        status.ready,
        status.unready,
        status.not_started,
        status.being_deleted
    );
    let _ = writeln!(
        out,
        "\nNode groups:{}",
        if status.groups.is_empty() {
            " none found"
        } else {
            ""
        }
    );
    for g in &status.groups {
        let mut line = format!(
            "  {}: size {} (min {}, max {})",
            g.id, g.target_size, g.min_size, g.max_size
        );
        if g.upcoming > 0 {
            let _ = write!(line, ", {} upcoming", g.upcoming);
        }
        if let Some(why) = g.blocked_reason() {
            let _ = write!(line, "; {why}");
        }
        let _ = writeln!(out, "{line}");
    }
    for e in &outcome.events {
        let _ = writeln!(out, "  event {} {}: {}", e.reason, e.object, e.message);
    }

    let up = &outcome.scale_up;
    let _ = writeln!(out, "\nScale-up:");
    if up.result.increases.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for inc in &up.result.increases {
        let from = inc.new_target - inc.delta;
        let why = match inc.reason {
            IncreaseReason::PendingPods => "for pending pods",
            IncreaseReason::Balancing => "balancing a similar group",
            IncreaseReason::MinSize => "to its min size",
        };
        let _ = writeln!(
            out,
            "  {}: {} -> {} (+{}, {why})",
            inc.group, from, inc.new_target, inc.delta
        );
    }
    if !up.result.triggered.is_empty() {
        let _ = writeln!(
            out,
            "  for {} pod(s): {}",
            up.result.triggered.len(),
            names(up.result.triggered.iter().map(|p| p.key()))
        );
    }
    if !up.fit_existing.is_empty() {
        let _ = writeln!(
            out,
            "  {} pending pod(s) fit existing or upcoming nodes: {}",
            up.fit_existing.len(),
            names(up.fit_existing.iter().map(|p| p.key()))
        );
    }
    for note in &up.result.notes {
        let _ = writeln!(out, "  note: {note}");
    }
    for n in &up.result.no_scale_up {
        let reasons: Vec<String> = n.reasons.iter().map(|(g, r)| format!("{g}: {r}")).collect();
        let why = if reasons.is_empty() {
            "no node group".to_string()
        } else {
            reasons.join("; ")
        };
        let _ = writeln!(out, "  {} triggers no scale-up: {why}", n.pod.key());
    }
    for (pod, why) in &up.set_aside {
        let _ = writeln!(out, "  {} is not acted on: {why}", pod.key());
    }

    let down = &outcome.scale_down;
    let _ = writeln!(out, "\nScale-down:");
    if down.unneeded.is_empty() {
        let _ = writeln!(out, "  no unneeded node");
    }
    let waiting: BTreeMap<_, _> = down.waiting.iter().map(|(n, w)| (*n, w)).collect();
    for (node, _) in &down.unneeded {
        let status = match waiting.get(node) {
            Some(Waiting::UnneededTime { deletable_at_ms }) => format!(
                "unneeded; deletable after {}",
                format_duration(std::time::Duration::from_millis(
                    u64::try_from(deletable_at_ms - now_ms).unwrap_or(0)
                ))
            ),
            Some(Waiting::MinSize) => "unneeded; kept: node group min size".into(),
            Some(Waiting::Limit(l)) => format!("unneeded; kept: {l}"),
            Some(Waiting::Parallelism) => "unneeded; waits for the deletion parallelism".into(),
            Some(Waiting::Cooldown(why)) => format!("unneeded; {why}"),
            None => "deleted now".into(),
        };
        let _ = writeln!(out, "  {node}: {status}");
    }
    for (node, why) in &down.unremovable {
        let _ = writeln!(out, "  {node} is not removable: {why}");
    }

    let _ = writeln!(out, "\nActions:");
    if outcome.actions.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for a in &outcome.actions {
        let _ = writeln!(out, "  {}", describe(a));
    }
    for r in &outcome.refused {
        let _ = writeln!(
            out,
            "  refused by the safety check: {} ({})",
            describe(&r.action),
            r.why
        );
    }
    Ok(out)
}

/// For every pod not bound to a node: where it would fit and, elsewhere, why not, in
/// kube-scheduler's words; and whether the scheduler has marked it unschedulable yet.
fn explain_scheduling(view: &ClusterView<'_>, show_nodes: usize, out: &mut String) {
    let mut warnings = Vec::new();
    let snapshot = build_snapshot(view, &mut warnings);
    for w in &warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    let ids: Vec<_> = snapshot.node_ids().collect();
    let _ = writeln!(out, "Scheduling:");
    let mut any = false;
    for pod in view
        .pods
        .iter()
        .filter(|p| p.node_name.is_none() && p.deletion_ms.is_none())
    {
        if pod.is_terminal() {
            continue;
        }
        any = true;
        let prepared = snapshot.prepare(pod);
        let mut fits = Vec::new();
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        for &id in &ids {
            match snapshot.check(pod, &prepared, id) {
                Ok(()) => fits.push(
                    snapshot
                        .node(id)
                        .map(|n| n.node.name.to_string())
                        .unwrap_or_default(),
                ),
                Err(unfit) => {
                    for r in unfit.reasons() {
                        *reasons.entry(r).or_default() += 1;
                    }
                }
            }
        }
        let mut line = format!(
            "  {}: {}/{} nodes are available",
            pod.key(),
            fits.len(),
            ids.len()
        );
        if !reasons.is_empty() {
            // kube-scheduler sorts the formatted "count reason" strings.
            let mut parts: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
            parts.sort();
            line.push_str(": ");
            line.push_str(&parts.join(", "));
        }
        line.push('.');
        if !fits.is_empty() {
            let shown: Vec<&str> = fits.iter().take(show_nodes).map(String::as_str).collect();
            let _ = write!(line, " Fits on: {}", shown.join(", "));
            if fits.len() > shown.len() {
                let _ = write!(line, " and {} more", fits.len() - shown.len());
            }
            line.push('.');
        }
        if !is_unschedulable(pod) {
            line.push_str(
                " (not marked Unschedulable by the scheduler yet: the autoscaler waits for that)",
            );
        }
        let _ = writeln!(out, "{line}");
    }
    if !any {
        let _ = writeln!(out, "  no pod is waiting for a node");
    }
}

fn names(keys: impl Iterator<Item = String>) -> String {
    keys.collect::<Vec<_>>().join(", ")
}

/// One action in words, as `plan` prints it (text and JSON).
pub fn describe(a: &Action) -> String {
    match a {
        Action::IncreaseSize {
            group,
            delta,
            new_target,
        } => format!("increase {group} by {delta} to {new_target}"),
        Action::DecreaseTargetSize { group, delta } => {
            format!("decrease the target of {group} by {delta}")
        }
        Action::DeleteInstances {
            group,
            instances,
            reason,
        } => format!(
            "delete instance(s) {} of {group} ({reason})",
            names(instances.iter().map(|i| i.to_string()))
        ),
        Action::AddTaint { node, taint } => {
            format!(
                "taint {node} with {}={}:{}",
                taint.key,
                taint.value,
                taint.effect.as_str()
            )
        }
        Action::RemoveTaint { node, key } => format!("remove taint {key} from {node}"),
        Action::DeleteEmptyNodes { group, nodes } => {
            format!(
                "delete empty node(s) {} of {group}",
                names(nodes.iter().map(|n| n.to_string()))
            )
        }
        Action::DrainAndDelete {
            group,
            node,
            evict,
            sequential,
        } => format!(
            "drain {node} of {group} (evict {}{}) and delete it",
            names(evict.iter().map(|e| format!(
                "{}/{} (grace {}s)",
                e.pod.namespace, e.pod.name, e.grace_period_sec
            ))),
            if *sequential { ", one at a time" } else { "" }
        ),
    }
}

/// The same decision as [`plan_text`], as one JSON document.
pub fn plan_json(
    text: &str,
    config: &ClusterApiConfig,
    options: &AutoscalerOptions,
    namespace: &str,
    now_ms: i64,
) -> anyhow::Result<serde_json::Value> {
    use serde_json::json;
    let d = decide(text, config, options, namespace, now_ms)?;
    let (outcome, provider, provider_warnings) = (&d.outcome, &d.provider, &d.provider_warnings);
    let up = &outcome.scale_up;
    let down = &outcome.scale_down;
    let groups: Vec<_> = autoscaler_core::model::node_group::CloudProvider::node_groups(provider)
        .iter()
        .map(|g| json!({"id": g.id.as_str(), "size": g.target_size, "min": g.min_size, "max": g.max_size}))
        .collect();
    let waiting: BTreeMap<_, _> = down.waiting.iter().map(|(n, w)| (*n, w)).collect();
    Ok(json!({
        "now_ms": now_ms,
        "warnings": provider_warnings.iter().chain(&up.warnings).collect::<Vec<_>>(),
        "node_groups": groups,
        "scale_up": {
            "increases": up.result.increases.iter().map(|i| json!({
                "group": i.group.as_str(), "from": i.new_target - i.delta, "to": i.new_target, "delta": i.delta,
                "reason": format!("{:?}", i.reason),
            })).collect::<Vec<_>>(),
            "pods_helped": up.result.triggered.iter().map(|p| p.key()).collect::<Vec<_>>(),
            "pods_fitting_existing_nodes": up.fit_existing.iter().map(|p| p.key()).collect::<Vec<_>>(),
            "pods_without_scale_up": up.result.no_scale_up.iter().map(|n| json!({
                "pod": n.pod.key(),
                "reasons": n.reasons.iter().map(|(g, r)| (g.to_string(), r.clone())).collect::<BTreeMap<_, _>>(),
            })).collect::<Vec<_>>(),
            "pods_set_aside": up.set_aside.iter().map(|(p, why)| json!({"pod": p.key(), "reason": why.to_string()})).collect::<Vec<_>>(),
            "notes": up.result.notes,
        },
        "scale_down": {
            "unneeded": down.unneeded.iter().map(|(n, since)| json!({
                "node": n.as_str(),
                "since_ms": since,
                "deleted_now": !waiting.contains_key(n),
                "waiting": waiting.get(n).map(|w| format!("{w:?}")),
            })).collect::<Vec<_>>(),
            "unremovable": down.unremovable.iter().map(|(n, why)| json!({"node": n.as_str(), "reason": why.to_string()})).collect::<Vec<_>>(),
        },
        "actions": outcome.actions.iter().map(describe).collect::<Vec<_>>(),
        "refused": outcome.refused.iter().map(|r| json!({"action": describe(&r.action), "why": r.why})).collect::<Vec<_>>(),
    }))
}

/// The objects of a snapshot, its node groups and one loop's decision on them.
struct Decided {
    objects: autoscaler_core::model::objects::ClusterObjects,
    provider: ClusterApiProvider,
    provider_warnings: Vec<String>,
    outcome: autoscaler_core::LoopOutcome,
}

impl Decided {
    fn view(&self) -> ClusterView<'_> {
        ClusterView {
            nodes: &self.objects.nodes,
            pods: &self.objects.pods,
            daemonsets: &self.objects.daemonsets,
            namespaces: &self.objects.namespaces,
            provider: &self.provider,
            pdbs: &self.objects.pdbs,
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
    let informer = Informer::from_store(&store);
    drop(store);
    let (provider, provider_warnings) = ClusterApiProvider::discover(informer.store(), config);
    let mut d = Decided {
        objects: informer.objects(),
        provider,
        provider_warnings,
        outcome: Default::default(),
    };
    let mut autoscaler = Autoscaler::new(options.clone());
    autoscaler.set_priority_text(informer.priority_text(namespace).as_deref());
    d.outcome = autoscaler.run_once(
        &d.view(),
        &d.objects.controllers,
        Actuation::default().in_flight(&d.provider),
        now_ms,
        &mut Unlimited,
    );
    Ok(d)
}

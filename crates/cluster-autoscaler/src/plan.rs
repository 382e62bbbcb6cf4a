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
use autoscaler_core::model::node_group::{CloudProvider as _, NodeGroupId};
use autoscaler_core::model::objects::read_objects;
use autoscaler_core::scale_down::Waiting;
use autoscaler_core::scale_up::IncreaseReason;
use autoscaler_core::scale_up::pending::is_unschedulable;
use autoscaler_core::{Autoscaler, AutoscalerOptions, ClusterView};

use crate::CliError;
use crate::options::{RunArgs, RunOptions};
use crate::text::count;

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
    /// ConfigMap, the kubeconfig and `--cloud-config`) are accepted and have no effect here.
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
            .and_then(|c| c.with_auto_discovery(&args.run.node_group_auto_discovery))
            .map_err(|e| CliError::usage(anyhow!("{e}")))?;
    }
    let options = &opts.controller.autoscaler;
    let namespace = &opts.controller.namespace;
    let text = crate::bounded_file::read_bounded_text(
        &args.snapshot,
        crate::bounded_file::SNAPSHOT_LIMIT,
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
    let (placements, snapshot_warnings) = scheduling(&view, show_nodes);
    for w in &snapshot_warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    let _ = writeln!(out, "Scheduling:");
    if placements.is_empty() {
        let _ = writeln!(out, "  no pod is waiting for a node");
    }
    for p in &placements {
        let _ = writeln!(out, "  {}", p.line());
    }

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
        if let Some(p) = price_of(&d.provider, &g.id) {
            let _ = write!(line, ", {p:.3}/node-hour");
        }
        if let Some(why) = g.blocked_reason() {
            let _ = write!(line, "; {why}");
        }
        let _ = writeln!(out, "{line}");
    }
    // `plan` acts on nothing: these are the events the loop would emit.
    for e in &outcome.events {
        let _ = writeln!(
            out,
            "  would emit event {} {}: {}",
            e.reason, e.object, e.message
        );
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
        let cost = price_of(&d.provider, &inc.group)
            .map(|p| format!(", +{:.3}/hour", p * inc.delta as f64))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {}: {} -> {} (+{}, {why}{cost})",
            inc.group, from, inc.new_target, inc.delta
        );
    }
    for o in &up.result.considered {
        let _ = writeln!(out, "  {}", considered_line(o));
    }
    if !up.result.triggered.is_empty() {
        let _ = writeln!(
            out,
            "  for {}: {}",
            count(up.result.triggered.len() as u64, "pod"),
            names(up.result.triggered.iter().map(|p| p.key()))
        );
    }
    if !up.fit_existing.is_empty() {
        let _ = writeln!(
            out,
            "  {} existing or upcoming nodes: {}",
            if up.fit_existing.len() == 1 {
                "1 pending pod fits".to_string()
            } else {
                format!("{} pending pods fit", up.fit_existing.len())
            },
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
        let _ = writeln!(
            out,
            "  {node}: {}",
            unneeded_status(waiting.get(node).copied(), now_ms)
        );
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

/// Where one pod not bound to a node would fit, and why not elsewhere.
struct Placement {
    /// `namespace/name`.
    pod: String,
    /// Nodes it fits on.
    available: usize,
    /// Nodes checked.
    nodes: usize,
    /// `count reason`, sorted as kube-scheduler sorts them.
    reasons: Vec<String>,
    /// The first fitting nodes (at most `--show-nodes`).
    fits_on: Vec<String>,
    /// Fitting nodes beyond `fits_on`.
    more: usize,
    /// Whether the scheduler has marked it unschedulable (the autoscaler waits for that).
    marked_unschedulable: bool,
}

impl Placement {
    /// kube-scheduler's message: `0/3 nodes are available: 1 Insufficient cpu, ...`.
    fn scheduler_message(&self) -> String {
        let mut m = format!("{}/{} nodes are available", self.available, self.nodes);
        if !self.reasons.is_empty() {
            m.push_str(": ");
            m.push_str(&self.reasons.join(", "));
        }
        m.push('.');
        m
    }

    /// The line `plan` prints for the pod.
    fn line(&self) -> String {
        let mut line = format!("{}: {}", self.pod, self.scheduler_message());
        if !self.fits_on.is_empty() {
            let _ = write!(line, " Fits on: {}", self.fits_on.join(", "));
            if self.more > 0 {
                let _ = write!(line, " and {} more", self.more);
            }
            line.push('.');
        }
        if !self.marked_unschedulable {
            line.push_str(
                " (not marked Unschedulable by the scheduler yet: the autoscaler waits for that)",
            );
        }
        line
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "pod": self.pod,
            "nodes_available": self.available,
            "nodes": self.nodes,
            "reasons": self.reasons,
            "message": self.scheduler_message(),
            "fits_on": self.fits_on,
            "fits_on_more": self.more,
            "marked_unschedulable": self.marked_unschedulable,
        })
    }
}

/// For every pod not bound to a node: where it would fit and, elsewhere, why not, in
/// kube-scheduler's words; and whether the scheduler has marked it unschedulable yet. Also the
/// warnings of building the scheduling snapshot (objects skipped).
fn scheduling(view: &ClusterView<'_>, show_nodes: usize) -> (Vec<Placement>, Vec<String>) {
    let mut warnings = Vec::new();
    let snapshot = build_snapshot(view, &mut warnings);
    let ids: Vec<_> = snapshot.node_ids().collect();
    let mut out = Vec::new();
    for pod in view
        .pods
        .iter()
        .filter(|p| p.node_name.is_none() && p.deletion_ms.is_none() && !p.is_terminal())
    {
        let prepared = snapshot.prepare(pod);
        let mut fits = Vec::new();
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        let mut pre_filter = None;
        for &id in &ids {
            match snapshot.check(pod, &prepared, id) {
                Ok(()) => fits.push(
                    snapshot
                        .node(id)
                        .map(|n| n.node.name.to_string())
                        .unwrap_or_default(),
                ),
                Err(unfit) if unfit.is_pre_filter() => pre_filter = Some(unfit.to_string()),
                Err(unfit) => {
                    for r in unfit.reasons() {
                        *reasons.entry(r).or_default() += 1;
                    }
                }
            }
        }
        // kube-scheduler sorts the formatted "count reason" strings; a rejection before any
        // node was looked at is said once, without a count.
        let mut reasons: Vec<String> = match pre_filter {
            Some(why) => vec![why],
            None => reasons.iter().map(|(r, n)| format!("{n} {r}")).collect(),
        };
        reasons.sort();
        let available = fits.len();
        fits.truncate(show_nodes);
        out.push(Placement {
            pod: pod.key(),
            available,
            nodes: ids.len(),
            reasons,
            more: available - fits.len(),
            fits_on: fits,
            marked_unschedulable: is_unschedulable(pod),
        });
    }
    (out, warnings.iter().map(ToString::to_string).collect())
}

/// What happens to an unneeded node, as `plan` says it (text and JSON).
fn unneeded_status(waiting: Option<&Waiting>, now_ms: i64) -> String {
    match waiting {
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

/// The same decision as [`plan_text`], as one JSON document: everything the text shows.
pub fn plan_json(
    text: &str,
    config: &ClusterApiConfig,
    options: &AutoscalerOptions,
    namespace: &str,
    now_ms: i64,
    show_nodes: usize,
) -> anyhow::Result<serde_json::Value> {
    use serde_json::json;
    let d = decide(text, config, options, namespace, now_ms)?;
    let (placements, snapshot_warnings) = scheduling(&d.view(), show_nodes);
    let outcome = &d.outcome;
    let (up, down, status) = (&outcome.scale_up, &outcome.scale_down, &outcome.status);
    let groups: Vec<_> = status
        .groups
        .iter()
        .map(|g| {
            json!({
                "id": g.id.as_str(), "size": g.target_size, "min": g.min_size, "max": g.max_size,
                "upcoming": g.upcoming, "blocked": g.blocked_reason(),
                "price_per_hour": price_of(&d.provider, &g.id),
            })
        })
        .collect();
    let waiting: BTreeMap<_, _> = down.waiting.iter().map(|(n, w)| (*n, w)).collect();
    let warnings: Vec<&String> = d
        .provider_warnings
        .iter()
        .chain(&snapshot_warnings)
        .chain(&up.warnings)
        .collect();
    Ok(json!({
        "now_ms": now_ms,
        "warnings": warnings,
        "scheduling": placements.iter().map(Placement::to_json).collect::<Vec<_>>(),
        "cluster": {
            "healthy": status.healthy,
            "message": status.message.as_deref().unwrap_or("healthy"),
            "ready": status.ready,
            "unready": status.unready,
            "not_started": status.not_started,
            "being_deleted": status.being_deleted,
        },
        "node_groups": groups,
        // `plan` acts on nothing: the events one loop would emit.
        "would_emit_events": outcome.events.iter().map(|e| json!({
            "reason": e.reason, "object": e.object, "message": e.message,
        })).collect::<Vec<_>>(),
        "scale_up": {
            "increases": up.result.increases.iter().map(|i| json!({
                "group": i.group.as_str(), "from": i.new_target - i.delta, "to": i.new_target, "delta": i.delta,
                "reason": format!("{:?}", i.reason),
                "added_cost_per_hour": price_of(&d.provider, &i.group).map(|p| p * i.delta as f64),
            })).collect::<Vec<_>>(),
            "pods_helped": up.result.triggered.iter().map(|p| p.key()).collect::<Vec<_>>(),
            "pods_fitting_existing_nodes": up.fit_existing.iter().map(|p| p.key()).collect::<Vec<_>>(),
            "pods_without_scale_up": up.result.no_scale_up.iter().map(|n| json!({
                "pod": n.pod.key(),
                "reasons": n.reasons.iter().map(|(g, r)| (g.to_string(), r.to_string())).collect::<BTreeMap<_, _>>(),
            })).collect::<Vec<_>>(),
            "pods_set_aside": up.set_aside.iter().map(|(p, why)| json!({"pod": p.key(), "reason": why.to_string()})).collect::<Vec<_>>(),
            "notes": up.result.notes,
            "options": up.result.considered.iter().map(|o| json!({
                "round": o.round, "group": o.group.as_str(), "nodes": o.node_count, "pods": o.pods,
                "price_per_node_hour": o.node_price_per_hour,
                "cost_per_hour": o.node_price_per_hour.map(|p| p * o.node_count as f64),
                "chosen": o.chosen,
            })).collect::<Vec<_>>(),
        },
        "scale_down": {
            "unneeded": down.unneeded.iter().map(|(n, since)| json!({
                "node": n.as_str(),
                "since_ms": since,
                "deleted_now": !waiting.contains_key(n),
                "waiting": waiting.get(n).map(|w| format!("{w:?}")),
                "status": unneeded_status(waiting.get(n).copied(), now_ms),
            })).collect::<Vec<_>>(),
            "unremovable": down.unremovable.iter().map(|(n, why)| json!({"node": n.as_str(), "reason": why.to_string()})).collect::<Vec<_>>(),
        },
        "actions": outcome.actions.iter().map(describe).collect::<Vec<_>>(),
        "refused": outcome.refused.iter().map(|r| json!({"action": describe(&r.action), "why": r.why})).collect::<Vec<_>>(),
    }))
}

/// One option the expander was offered: `option 1: g +2 nodes for 5 pods, 2 x 0.500 = 1.000/hour
/// (chosen)`.
fn considered_line(o: &autoscaler_core::scale_up::ConsideredOption) -> String {
    let price = match o.node_price_per_hour {
        Some(p) => format!(
            ", {} x {p:.3} = {:.3}/hour",
            o.node_count,
            p * o.node_count as f64
        ),
        None => ", no price".to_string(),
    };
    format!(
        "option {}: {} +{} for {}{price}{}",
        o.round + 1,
        o.group,
        count(o.node_count as u64, "node"),
        count(o.pods as u64, "pod"),
        if o.chosen { " (chosen)" } else { "" }
    )
}

/// The price of one node of group `id` per hour, from its price annotation, if it has one.
fn price_of(provider: &ClusterApiProvider, id: &NodeGroupId) -> Option<f64> {
    provider
        .node_groups()
        .iter()
        .find(|g| &g.id == id)
        .and_then(|g| g.node_price_per_hour)
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

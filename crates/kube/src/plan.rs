//! The plan of one loop, as `plan` prints it and the leader serves it at `/explain`: for every
//! pod not bound to a node where it would fit and why not elsewhere (in kube-scheduler's
//! words), the cluster and node-group state, the scale-up with the options the expander was
//! offered, the unneeded and unremovable nodes with why, and the actions. [`text`] for people,
//! [`json`] for machines, both from the same [`Explained`] loop.
//!
//! Rendering only: it reads what the core decided and never decides, acts or reads a clock
//! (the caller gives the decision time).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use autoscaler_core::Action;
use autoscaler_core::IncreaseReason;
use autoscaler_core::Waiting;
use autoscaler_core::build_snapshot;
use autoscaler_core::is_unschedulable;
use autoscaler_core::{ClusterView, LoopOutcome};
use autoscaler_model::NodeGroupId;
use autoscaler_model::format_duration;

/// One loop to explain: the view it decided on, what it decided, and what it said about its
/// input.
#[derive(Clone, Copy)]
pub struct Explained<'a> {
    /// The objects and node groups the loop saw.
    pub view: &'a ClusterView<'a>,
    /// What it decided.
    pub outcome: &'a LoopOutcome,
    /// Warnings of discovering the node groups (objects skipped, with why).
    pub provider_warnings: &'a [String],
    /// The decision time (ms since the Unix epoch).
    pub now_ms: i64,
    /// How many fitting nodes to name per pod.
    pub show_nodes: usize,
}

impl std::fmt::Debug for Explained<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Explained")
            .field("now_ms", &self.now_ms)
            .finish_non_exhaustive()
    }
}

/// How many fitting nodes the plan names per pod unless told (`plan --show-nodes`).
pub const SHOW_NODES: usize = 5;

/// The JSON document as `plan --output json` prints it and `/explain` serves it: pretty, with
/// a final newline.
pub fn json_text(e: &Explained<'_>) -> String {
    let mut s = serde_json::to_string_pretty(&json(e)).unwrap_or_default();
    s.push('\n');
    s
}

/// `n word`, with `word` in the plural unless `n` is 1.
fn count(n: u64, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

pub fn text(e: &Explained<'_>) -> String {
    let (view, now_ms) = (e.view, e.now_ms);
    let mut out = String::new();
    for w in e.provider_warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    let (placements, snapshot_warnings) = scheduling(view, e.show_nodes);
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

    let outcome = e.outcome;
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
        if let Some(p) = price_of(view, &g.id) {
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
        let cost = price_of(view, &inc.group)
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
    // Consolidation (ours) says what it decided only when it decided something.
    if let Some(c) = &outcome.consolidation.command {
        let _ = writeln!(out, "  consolidation: {}", c.explanation);
    }
    if let Some(why) = &outcome.consolidation.gave_up {
        let _ = writeln!(out, "  consolidation: {why}");
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
    out
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
pub(crate) fn unneeded_status(waiting: Option<&Waiting>, now_ms: i64) -> String {
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
        Action::AtomicIncreaseSize { request, increases } => format!(
            "increase {} (all or none, for ProvisioningRequest {request})",
            increases
                .iter()
                .map(|i| format!("{} by {} to {}", i.group, i.delta, i.new_target))
                .collect::<Vec<_>>()
                .join(", ")
        ),
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

/// The same loop as [`text`], as one JSON document: everything the text shows.
pub fn json(e: &Explained<'_>) -> serde_json::Value {
    let mut v = json_document(e);
    // Consolidation (ours) adds its decision only when it decided something.
    if let Some(c) = &e.outcome.consolidation.command {
        v["scale_down"]["consolidation"] = serde_json::json!({
            "nodes": c.deletions.iter().map(|d| d.node.as_str()).collect::<Vec<_>>(),
            "kind": format!("{:?}", c.kind),
            "saved_per_hour": c.saved_per_hour,
            "pods_disrupted": c.pods_disrupted,
            "explanation": c.explanation,
        });
    }
    v
}

/// [`json`] without consolidation's decision.
fn json_document(e: &Explained<'_>) -> serde_json::Value {
    use serde_json::json;
    let (view, now_ms) = (e.view, e.now_ms);
    let (placements, snapshot_warnings) = scheduling(view, e.show_nodes);
    let outcome = e.outcome;
    let (up, down, status) = (&outcome.scale_up, &outcome.scale_down, &outcome.status);
    let groups: Vec<_> = status
        .groups
        .iter()
        .map(|g| {
            json!({
                "id": g.id.as_str(), "size": g.target_size, "min": g.min_size, "max": g.max_size,
                "upcoming": g.upcoming, "blocked": g.blocked_reason(),
                "price_per_hour": price_of(view, &g.id),
            })
        })
        .collect();
    let waiting: BTreeMap<_, _> = down.waiting.iter().map(|(n, w)| (*n, w)).collect();
    let warnings: Vec<&String> = e
        .provider_warnings
        .iter()
        .chain(&snapshot_warnings)
        .chain(&up.warnings)
        .collect();
    json!({
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
                "added_cost_per_hour": price_of(view, &i.group).map(|p| p * i.delta as f64),
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
    })
}

/// One option the expander was offered: `option 1: g +2 nodes for 5 pods, 2 x 0.500 = 1.000/hour
/// (chosen)`.
fn considered_line(o: &autoscaler_core::ConsideredOption) -> String {
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
fn price_of(view: &ClusterView<'_>, id: &NodeGroupId) -> Option<f64> {
    view.provider
        .node_groups()
        .iter()
        .find(|g| g.id() == id)
        .and_then(|g| g.node_price_per_hour())
}

//! The simulation report: a deterministic summary of a run (the same scenario and seed give a
//! byte-identical JSON), as text for people and JSON for machines.
//!
//! It decides what is measured and how (percentiles by nearest rank, node-hours integrated over
//! the samples, cost from registered nodes). It never reads the real clock: wall time is the
//! caller's to print, outside the report.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use autoscaler_world::SimTime;
use serde::Serialize;

use super::bound::{FluidBound, Shape};
use super::distance::{DistanceReport, distance};
use super::driver::RunLog;
use super::scenario::Scenario;
use crate::text::count;

/// The bound's figures and the run's ratios to them.
fn bound_report(shapes: &[Shape], b: &FluidBound, groups: &[GroupReport]) -> BoundReport {
    let node_hours: f64 = groups.iter().map(|g| g.node_hours).sum();
    let cost: f64 = groups.iter().map(|g| g.cost).sum();
    let ratio = |run: f64, bound: f64| (bound > 0.0).then(|| round3(run / bound));
    let distinct = shapes
        .iter()
        .map(|s| format!("{:?}", s.allocatable))
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    BoundReport {
        method: if distinct <= 1 {
            "one node shape".to_string()
        } else {
            format!("linear program over {distinct} node shapes")
        },
        node_hours: round3(b.node_hours),
        cost: round3(b.cost),
        node_hours_ratio: ratio(node_hours, b.node_hours),
        cost_ratio: ratio(cost, b.cost),
        uncovered: b.uncovered.clone(),
        node_hours_by_resource: b
            .by_resource
            .iter()
            .map(|(k, v)| (k.clone(), round3(*v)))
            .collect(),
    }
}

/// `h:mm:ss` of a virtual time.
pub fn clock(t: SimTime) -> String {
    let s = t / 1000;
    format!("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Wait-time percentiles, seconds; none (`null`) when no pod started.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Waits {
    /// Pods that started running.
    pub started: usize,
    /// Median.
    pub p50_s: Option<f64>,
    /// 90th percentile.
    pub p90_s: Option<f64>,
    /// 99th percentile.
    pub p99_s: Option<f64>,
    /// Longest.
    pub max_s: Option<f64>,
}

/// One node group's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupReport {
    /// `namespace/name`.
    pub group: String,
    /// Min size.
    pub min: u32,
    /// Max size.
    pub max: u32,
    /// Registered nodes at the start.
    pub nodes_start: usize,
    /// Registered nodes at the end.
    pub nodes_end: usize,
    /// Most registered nodes at once.
    pub nodes_max: usize,
    /// Registered-node hours.
    pub node_hours: f64,
    /// Price per node-hour.
    pub price_per_hour: f64,
    /// `node_hours * price_per_hour`.
    pub cost: f64,
    /// Scale-ups applied.
    pub scale_ups: u64,
    /// Nodes asked for by the scale-ups.
    pub nodes_added: u64,
    /// Scale-ups the API refused.
    pub scale_up_errors: u64,
    /// Nodes removed by scale-down.
    pub nodes_removed: u64,
    /// Machines that failed to provision.
    pub failed_provisionings: u64,
    /// Broken instances removed.
    pub instances_deleted: u64,
    /// Target decreases applied (unfulfilled scale-ups reverted).
    pub target_decreases: u64,
    /// Delete-machine marks removed because the set deleted another Machine for them (only
    /// in the JSON when there were any).
    #[serde(skip_serializing_if = "is_zero")]
    pub stale_marks_cleared: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// An event of the core.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EventReport {
    /// Virtual time of the loop, seconds.
    pub t_s: f64,
    /// Reason (`ScaledUpGroup`, `ScaleUpTimedOut`, `ScaleUpFailed`, `DeleteUnregistered`,
    /// `ClusterUnhealthy`, `FailedToScaleUpGroup`, `FixNodeGroupSize`).
    pub reason: String,
    /// Group (`namespace/name`) or `cluster`.
    pub object: String,
    /// Message.
    pub message: String,
}

/// A backoff of a group.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BackoffReport {
    /// When the loop first showed it, seconds.
    pub t_s: f64,
    /// Group (`namespace/name`).
    pub group: String,
    /// Failures since the last reset.
    pub failures: u32,
    /// The failure that started (or extended) it, seconds.
    pub failed_at_s: f64,
    /// End of the backoff, seconds of virtual time.
    pub until_s: f64,
    /// `until_s - failed_at_s`: the backoff's length.
    pub duration_s: f64,
    /// Failure code.
    pub code: String,
}

/// When one pod started running.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PodStart {
    /// `namespace/name`.
    pub pod: String,
    /// Created, seconds.
    pub created_s: f64,
    /// Running, seconds.
    pub running_s: f64,
}

/// How many pod starts the report lists one by one.
pub const POD_STARTS_LISTED: usize = 200;
const _: () = assert!(POD_STARTS_LISTED <= autoscaler_world::NAMED_WAITS);

/// A failed group and the fallback to another.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FallbackReport {
    /// The group that failed.
    pub group: String,
    /// When its failure was first seen, seconds.
    pub failed_at_s: f64,
    /// The group grown instead, if any.
    pub fell_back_to: Option<String>,
    /// Seconds from the failure to that scale-up.
    pub after_s: Option<f64>,
}

/// One timeline point.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    /// Virtual time, seconds.
    pub t_s: f64,
    /// Pods not bound to a node.
    pub pending: usize,
    /// Registered nodes per group.
    pub nodes: BTreeMap<String, usize>,
    /// The fewest nodes that could hold the bound pods now (fluid bound, fractional).
    pub bound_nodes: f64,
}

/// The fluid lower bound of the run (see `simulate::bound`) and the run against it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BoundReport {
    /// How the nodes needed at an instant are found: `one node shape` or `linear program over
    /// N node shapes`.
    pub method: String,
    /// Node-hours of the fewest nodes holding the bound pods' requests at each sample, work
    /// evictions made lost left out (see `distance`).
    pub node_hours: f64,
    /// Cost of the cheapest mix of node shapes doing so.
    pub cost: f64,
    /// The run's node-hours over the bound's (none when the bound is 0).
    pub node_hours_ratio: Option<f64>,
    /// The run's cost over the bound's (none when the bound is 0, e.g. without prices).
    pub cost_ratio: Option<f64>,
    /// Requested resources no node shape offers, left out of the bound.
    pub uncovered: Vec<String>,
    /// Per resource, the node-hours it alone needs on the shape offering most of it.
    pub node_hours_by_resource: BTreeMap<String, f64>,
}

/// Nodes removed by scale-down at one instant.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RemovalReport {
    /// Virtual time, seconds.
    pub t_s: f64,
    /// Nodes removed.
    pub nodes: u64,
}

/// Pods that never started, grouped by why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NeverStartedReport {
    /// How many.
    pub pods: usize,
    /// The scheduler's last message (its Unschedulable condition), if it wrote one.
    pub scheduler: Option<String>,
    /// The autoscaler's last word: its `NotTriggerScaleUp` message or why it set them aside.
    pub autoscaler: Option<String>,
    /// The first of them.
    pub examples: Vec<String>,
}

/// The report of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    /// Scenario name.
    pub scenario: String,
    /// Its description.
    pub description: String,
    /// Seed.
    pub seed: u64,
    /// Virtual duration, seconds.
    pub duration_s: f64,
    /// Loop interval, seconds.
    pub scan_interval_s: f64,
    /// Loops run.
    pub loops: u64,
    /// Node groups.
    pub groups: Vec<GroupReport>,
    /// Pods created.
    pub pods_created: usize,
    /// Pods still pending at the end.
    pub pods_pending_at_end: usize,
    /// Creation-to-running waits.
    pub pod_wait: Waits,
    /// Most pending pods at a sample.
    pub pending_max: usize,
    /// Total node-hours.
    pub node_hours: f64,
    /// Total cost.
    pub cost: f64,
    /// The fluid lower bound of the trace's own work and the ratios against it.
    pub bound: BoundReport,
    /// Where the run's node-hours above the bound are, and the work evictions lost.
    pub distance: DistanceReport,
    /// Scale-ups (all groups).
    pub scale_ups: u64,
    /// Nodes removed (all groups).
    pub scale_downs: u64,
    /// Pods evicted.
    pub evictions: u64,
    /// Evictions refused by a budget (retried).
    pub eviction_refusals: u64,
    /// Disruptions that broke a PodDisruptionBudget (must be zero).
    pub pdb_violations: u64,
    /// Safety invariants broken (must be zero), over `safety_checks` loops.
    pub safety_violations: u64,
    /// Loops whose actions were checked.
    pub safety_checks: u64,
    /// The first violations.
    pub safety_violation_samples: Vec<String>,
    /// Drains started.
    pub drains: u64,
    /// Drains given up.
    pub drains_failed: u64,
    /// Failed provisionings (all groups).
    pub failed_provisionings: u64,
    /// Failures and the fallback to another group.
    pub fallbacks: Vec<FallbackReport>,
    /// Actions that could not be applied.
    pub actuation_errors: u64,
    /// The first of them.
    pub actuation_error_samples: Vec<String>,
    /// Events of the core, with virtual times (a `ClusterUnhealthy` repeated in consecutive
    /// loops is listed once).
    pub events: Vec<EventReport>,
    /// Loops in which the cluster was not ready for autoscaling.
    pub unhealthy_loops: u64,
    /// Backoffs of groups as the core's status showed them.
    pub backoffs: Vec<BackoffReport>,
    /// Virtual times (seconds) at which the autoscaler was restarted.
    pub restarts_s: Vec<f64>,
    /// The first pods to start running, in start order.
    pub pod_starts: Vec<PodStart>,
    /// The pods still pending at the end, grouped by why (largest groups first).
    pub never_started: Vec<NeverStartedReport>,
    /// Scale-down removals over time.
    pub removals: Vec<RemovalReport>,
    /// Samples over time.
    pub timeline: Vec<Point>,
    /// ProvisioningRequests and CapacityBuffers (absent when the run had none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<super::capacity_report::CapacityReport>,
}

fn secs(ms: SimTime) -> f64 {
    ms as f64 / 1000.0
}

/// The `p`th percentile by nearest rank, seconds; none of an empty list.
fn percentile(sorted: &[SimTime], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let i = rank.clamp(1, sorted.len()) - 1;
    Some(sorted[i] as f64 / 1000.0)
}

/// Seconds rounded to whole seconds, or `n/a` when there is no value.
fn seconds_or_na(s: Option<f64>) -> String {
    s.map_or_else(|| "n/a".to_string(), |s| format!("{s:.0}s"))
}

impl Report {
    /// Builds the report of a run.
    pub fn new(s: &Scenario, log: &RunLog) -> Report {
        let samples = &log.metrics.samples;
        let mut waits = log.metrics.wait_ms.clone();
        waits.sort_unstable();
        let mut groups = Vec::new();
        for g in &s.groups {
            let id = format!("{}/{}", g.spec.namespace, g.spec.name);
            let at = |i: usize| {
                samples
                    .get(i)
                    .and_then(|x| x.nodes_per_group.get(&id).copied())
                    .unwrap_or(0)
            };
            let mut ms_nodes: u128 = 0;
            for w in samples.windows(2) {
                let n = w[0].nodes_per_group.get(&id).copied().unwrap_or(0) as u128;
                ms_nodes += n * u128::from(w[1].at_ms.saturating_sub(w[0].at_ms));
            }
            let node_hours = ms_nodes as f64 / 3_600_000.0;
            let gl = log.groups.get(&id).cloned().unwrap_or_default();
            groups.push(GroupReport {
                group: id.clone(),
                min: g.spec.min_size,
                max: g.spec.max_size,
                nodes_start: at(0),
                nodes_end: at(samples.len().saturating_sub(1)),
                nodes_max: samples
                    .iter()
                    .filter_map(|x| x.nodes_per_group.get(&id).copied())
                    .max()
                    .unwrap_or(0),
                node_hours: round3(node_hours),
                price_per_hour: g.price_per_hour,
                cost: round3(node_hours * g.price_per_hour),
                scale_ups: gl.scale_ups,
                nodes_added: gl.nodes_added,
                scale_up_errors: gl.scale_up_errors,
                nodes_removed: gl.nodes_removed,
                failed_provisionings: gl.failed_provisionings,
                instances_deleted: gl.instances_deleted,
                target_decreases: gl.target_decreases,
                stale_marks_cleared: gl.stale_marks_cleared,
            });
        }
        let shaped: Vec<(String, Shape)> = s
            .groups
            .iter()
            .filter_map(|g| {
                let id = format!("{}/{}", g.spec.namespace, g.spec.name);
                Some((id, Shape::of_group(g)?))
            })
            .collect();
        let shapes: Vec<Shape> = shaped.iter().map(|(_, sh)| sh.clone()).collect();
        let split = distance(
            &shaped,
            samples,
            &log.metrics.lost_runs,
            &log.metrics.timed_work,
            log.evictions,
        );
        let fluid = split.bound;
        let fallbacks = log
            .fallbacks
            .iter()
            .map(|f| FallbackReport {
                group: f.group.clone(),
                failed_at_s: f.failed_at_ms as f64 / 1000.0,
                fell_back_to: f.fell_back.as_ref().map(|x| x.0.clone()),
                after_s: f
                    .fell_back
                    .as_ref()
                    .map(|x| x.1.saturating_sub(f.failed_at_ms) as f64 / 1000.0),
            })
            .collect();
        Report {
            scenario: s.name.clone(),
            description: s.description.clone(),
            seed: s.seed,
            duration_s: s.duration as f64 / 1000.0,
            scan_interval_s: s.scan_interval as f64 / 1000.0,
            loops: log.loops,
            pods_created: log.pods_created,
            pods_pending_at_end: log.pending_at_end,
            pod_wait: Waits {
                started: waits.len(),
                p50_s: percentile(&waits, 50.0),
                p90_s: percentile(&waits, 90.0),
                p99_s: percentile(&waits, 99.0),
                max_s: waits.last().map(|w| *w as f64 / 1000.0),
            },
            pending_max: samples.iter().map(|x| x.pending).max().unwrap_or(0),
            node_hours: round3(groups.iter().map(|g| g.node_hours).sum()),
            cost: round3(groups.iter().map(|g| g.cost).sum()),
            bound: bound_report(&shapes, &fluid, &groups),
            distance: split.report,
            scale_ups: groups.iter().map(|g| g.scale_ups).sum(),
            scale_downs: groups.iter().map(|g| g.nodes_removed).sum(),
            failed_provisionings: groups.iter().map(|g| g.failed_provisionings).sum(),
            groups,
            evictions: log.evictions,
            eviction_refusals: log.eviction_refusals,
            pdb_violations: log.pdb_violations,
            safety_violations: log.safety.count,
            safety_checks: log.safety.checks,
            safety_violation_samples: log.safety.violations.clone(),
            drains: log.drains,
            drains_failed: log.drains_failed,
            fallbacks,
            actuation_errors: log.error_count,
            actuation_error_samples: log.errors.clone(),
            events: log
                .events
                .iter()
                .map(|e| EventReport {
                    t_s: secs(e.at_ms),
                    reason: e.reason.clone(),
                    object: e.object.clone(),
                    message: e.message.clone(),
                })
                .collect(),
            unhealthy_loops: log.unhealthy_loops,
            backoffs: log
                .backoffs
                .iter()
                .map(|b| BackoffReport {
                    t_s: secs(b.at_ms),
                    group: b.group.clone(),
                    failures: b.failures,
                    failed_at_s: secs(b.failed_at_ms),
                    until_s: secs(b.until_ms),
                    duration_s: secs(b.until_ms.saturating_sub(b.failed_at_ms)),
                    code: b.code.clone(),
                })
                .collect(),
            restarts_s: log.restarts.iter().map(|&t| secs(t)).collect(),
            pod_starts: log
                .metrics
                .waits
                .iter()
                .take(POD_STARTS_LISTED)
                .map(|w| PodStart {
                    pod: w.pod.clone(),
                    created_s: secs(w.created_ms),
                    running_s: secs(w.running_ms),
                })
                .collect(),
            never_started: log
                .never_started
                .iter()
                .map(|n| NeverStartedReport {
                    pods: n.pods,
                    scheduler: n.scheduler.clone(),
                    autoscaler: n.autoscaler.clone(),
                    examples: n.examples.clone(),
                })
                .collect(),
            removals: log
                .removals
                .iter()
                .map(|&(t, nodes)| RemovalReport {
                    t_s: secs(t),
                    nodes,
                })
                .collect(),
            timeline: samples
                .iter()
                .zip(fluid.nodes.iter().copied().chain(std::iter::repeat(0.0)))
                .map(|(x, bound_nodes)| Point {
                    t_s: x.at_ms as f64 / 1000.0,
                    pending: x.pending,
                    nodes: x.nodes_per_group.clone(),
                    bound_nodes: round3(bound_nodes),
                })
                .collect(),
            capacity: super::capacity_report::CapacityReport::new(log),
        }
    }

    /// The report as pretty JSON (deterministic: fields in declaration order, maps sorted).
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self)
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
        s.push('\n');
        s
    }

    /// At most `rows + 1` evenly spaced timeline points (the first and the last included), each
    /// with the most pods pending at one sample since the previous row's point (its own
    /// sample for the first), so a peak between two rows is never hidden.
    fn timeline_rows(&self, rows: usize) -> Vec<(&Point, usize)> {
        let n = self.timeline.len();
        let mut picked: Vec<usize> = (0..=rows).map(|i| i * n.saturating_sub(1) / rows).collect();
        picked.dedup();
        let mut out = Vec::new();
        let mut from = 0;
        for i in picked {
            let Some(p) = self.timeline.get(i) else {
                continue;
            };
            let window = self.timeline.get(from..=i).unwrap_or_default();
            let pending = window.iter().map(|x| x.pending).max().unwrap_or(p.pending);
            out.push((p, pending));
            from = i + 1;
        }
        out
    }

    /// `Fluid bound: ...`: the bound and the run's ratios to it.
    fn bound_line(&self) -> String {
        let b = &self.bound;
        let ratio = |r: Option<f64>| r.map_or_else(|| "n/a".to_string(), |r| format!("{r:.2}x"));
        let mut line = format!(
            "Fluid bound ({}): {:.2} node-hours (run: {}), cost {:.2} (run: {})",
            b.method,
            b.node_hours,
            ratio(b.node_hours_ratio),
            b.cost,
            ratio(b.cost_ratio)
        );
        if !b.uncovered.is_empty() {
            let _ = write!(line, "; no node offers {}", b.uncovered.join(", "));
        }
        if !b.node_hours_by_resource.is_empty() {
            let each: Vec<String> = b
                .node_hours_by_resource
                .iter()
                .map(|(k, v)| format!("{k} {v:.2}"))
                .collect();
            let _ = write!(
                line,
                "\n  node-hours each resource alone needs: {}",
                each.join(", ")
            );
        }
        line
    }

    /// The summary for people: a coarse timeline and the figures.
    pub fn summary(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "Scenario {} (seed {}): {} of virtual time, {} loops every {}s",
            self.scenario,
            self.seed,
            clock((self.duration_s * 1000.0) as SimTime),
            self.loops,
            self.scan_interval_s
        );
        if !self.description.is_empty() {
            let _ = writeln!(o, "  {}", self.description);
        }
        let _ = writeln!(
            o,
            "\nTimeline (registered nodes per group; pending: the peak since the previous row):"
        );
        let names: Vec<&str> = self
            .groups
            .iter()
            .map(|g| g.group.rsplit('/').next().unwrap_or(&g.group))
            .collect();
        let mut header = format!("  {:>8}", "time");
        for n in &names {
            let _ = write!(header, " {n:>9}");
        }
        let _ = write!(header, " {:>9}", "pending");
        let _ = writeln!(o, "{header}");
        for (p, pending) in self.timeline_rows(12) {
            let mut line = format!("  {:>8}", clock((p.t_s * 1000.0) as SimTime));
            for g in &self.groups {
                let _ = write!(line, " {:>9}", p.nodes.get(&g.group).copied().unwrap_or(0));
            }
            let _ = write!(line, " {:>9}", pending);
            let _ = writeln!(o, "{line}");
        }
        let _ = writeln!(o, "\nNode groups:");
        for g in &self.groups {
            let _ = writeln!(
                o,
                "  {:<22} min {:>2} max {:>3}  nodes {:>3} -> {:>3} (peak {:>3})  {:>8.2} node-h  cost {:>8.2}  +{} in {}, -{} removed{}{}",
                g.group,
                g.min,
                g.max,
                g.nodes_start,
                g.nodes_end,
                g.nodes_max,
                g.node_hours,
                g.cost,
                g.nodes_added,
                count(g.scale_ups, "scale-up"),
                g.nodes_removed,
                if g.failed_provisionings > 0 {
                    format!(", {}", count(g.failed_provisionings, "failed provisioning"))
                } else {
                    String::new()
                },
                if g.scale_up_errors > 0 {
                    format!(", {}", count(g.scale_up_errors, "scale-up API error"))
                } else {
                    String::new()
                },
            );
        }
        let w = &self.pod_wait;
        let _ = writeln!(
            o,
            "\nPods: {} created, {} started, {} still pending at the end (peak pending {})",
            self.pods_created, w.started, self.pods_pending_at_end, self.pending_max
        );
        for n in &self.never_started {
            let _ = writeln!(o, "{}", never_started_lines(n));
        }
        let _ = writeln!(
            o,
            "Pod wait (creation to running): p50 {}  p90 {}  p99 {}  max {}",
            seconds_or_na(w.p50_s),
            seconds_or_na(w.p90_s),
            seconds_or_na(w.p99_s),
            seconds_or_na(w.max_s)
        );
        let _ = writeln!(
            o,
            "Cost: {:.2} node-hours, {:.2} total",
            self.node_hours, self.cost
        );
        let _ = writeln!(o, "{}", self.bound_line());
        let _ = writeln!(o, "{}", crate::distance::summary_lines(&self.distance));
        let _ = writeln!(
            o,
            "Scale-ups: {}  nodes removed: {}  drains: {} ({} given up)  evictions: {} ({} refused by a PDB, retried)",
            self.scale_ups,
            self.scale_downs,
            self.drains,
            self.drains_failed,
            self.evictions,
            self.eviction_refusals
        );
        let _ = writeln!(o, "PDB violations: {}", self.pdb_violations);
        let _ = writeln!(
            o,
            "Safety violations: {} (checked every loop)",
            self.safety_violations
        );
        for v in &self.safety_violation_samples {
            let _ = writeln!(o, "  {v}");
        }
        let _ = writeln!(o, "Failed provisionings: {}", self.failed_provisionings);
        for f in &self.fallbacks {
            match (&f.fell_back_to, f.after_s) {
                (Some(to), Some(after)) => {
                    let _ = writeln!(
                        o,
                        "  {} failed at {}; fell back to {} after {:.0}s",
                        f.group,
                        clock((f.failed_at_s * 1000.0) as SimTime),
                        to,
                        after
                    );
                }
                _ => {
                    let _ = writeln!(
                        o,
                        "  {} failed at {}; no other group was grown afterwards",
                        f.group,
                        clock((f.failed_at_s * 1000.0) as SimTime)
                    );
                }
            }
        }
        if !self.restarts_s.is_empty() || self.unhealthy_loops > 0 || !self.backoffs.is_empty() {
            let _ = writeln!(
                o,
                "Restarts: {}  loops with the cluster not ready for autoscaling: {}  backoffs: {}",
                self.restarts_s.len(),
                self.unhealthy_loops,
                self.backoffs.len()
            );
        }
        if self.actuation_errors > 0 {
            let _ = writeln!(
                o,
                "Actions that could not be applied: {}",
                self.actuation_errors
            );
            for e in self.actuation_error_samples.iter().take(5) {
                let _ = writeln!(o, "  {e}");
            }
        }
        if let Some(c) = &self.capacity {
            o.push_str(&c.text());
        }
        o
    }
}

/// One group of never-started pods, as the summary prints it (three lines).
fn never_started_lines(n: &NeverStartedReport) -> String {
    format!(
        "  never started: {} (e.g. {})\n    scheduler: {}\n    autoscaler: {}",
        count(n.pods as u64, "pod"),
        n.examples.join(", "),
        n.scheduler
            .as_deref()
            .unwrap_or("(no Unschedulable condition written)"),
        n.autoscaler
            .as_deref()
            .unwrap_or("(not considered in its last loop)")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<SimTime> = (1..=100).map(|x| x * 1000).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 90.0), Some(90.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&[5000], 99.0), Some(5.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(seconds_or_na(None), "n/a");
        assert_eq!(seconds_or_na(Some(76.6)), "77s");
    }

    fn point(t_s: f64, pending: usize) -> Point {
        Point {
            t_s,
            pending,
            nodes: BTreeMap::new(),
            bound_nodes: 0.0,
        }
    }

    #[test]
    fn timeline_rows_show_the_peak_pending_of_their_window() {
        // 25 samples, 12 rows: every other sample is a row; the peak sits between two rows.
        let mut timeline: Vec<Point> = (0..25).map(|i| point(f64::from(i) * 10.0, 0)).collect();
        timeline[0].pending = 4;
        timeline[3].pending = 27;
        let report = Report {
            timeline,
            ..Report::default()
        };
        let rows = report.timeline_rows(12);
        assert_eq!(rows.len(), 13);
        let pending: Vec<(f64, usize)> = rows.iter().map(|(p, n)| (p.t_s, *n)).collect();
        assert_eq!(pending[0], (0.0, 4), "the first row is its own sample");
        assert_eq!(pending[1], (20.0, 0), "samples 1 and 2");
        assert_eq!(pending[2], (40.0, 27), "samples 3 and 4: the peak at 30s");
        assert_eq!(pending[3], (60.0, 0));
        assert_eq!(rows.iter().map(|r| r.1).max(), Some(27));
    }

    #[test]
    fn clock_renders_hours_minutes_seconds() {
        assert_eq!(clock(0), "0:00:00");
        assert_eq!(clock(3_723_000), "1:02:03");
    }
}

//! Where a run's distance to its fluid bound is: the work evictions made lost (kept out of the
//! bound, reported on its own), and the run's node-hours above the bound split into parts that
//! sum to it.
//!
//! The bound of a report is built from the trace's own work, the same for every run of a
//! scenario: a replayed pod (a trace's pod whose Job or ReplicaSet the world stands in for)
//! counts from its arrival for its duration as the trace gives them, whether the run started it
//! late, restarted it or never finished it (a pod too large for every shape, which no run can
//! start, is left out); other pods count at each sample as the run held them, minus the runs
//! evictions made lost (a Job's evicted run, any pod's termination after its eviction). A run
//! that drains more therefore neither raises its own bound nor, by pushing restarted work past
//! its end, lowers it. With `N` the registered nodes of the run's groups at a sample, `E` those
//! holding no pod but DaemonSet pods (`F` of them never seen holding one since they registered),
//! `O = N - E` the occupied nodes, `B` the bound's nodes, `R` the bound's nodes for the work the
//! run held minus the lost work, `B'` the bound's nodes with the lost work too, and `P'` the
//! nodes of the run's own occupied mix (the average allocatable of the `O` nodes) that would
//! hold all bound pods' requests if pods could be split, at least `B'`:
//!
//! - provisioning `F`: nodes bought ahead of their use, or never used;
//! - waiting `E - F`: empty nodes kept after their pods left (unneeded time, scale-down delays);
//! - packing `O - P'`: room on occupied nodes that the pods' sizes leave unused;
//! - shape choice `P' - B'`: what the run's mix of shapes costs over the best mix;
//! - restarted work `B' - R`: the nodes the lost work needed;
//! - delayed work `R - B`: the trace's work the run held at other instants than it arrived
//!   (pods waiting for nodes, restarts pushing the rest of a task on); negative when work was
//!   pushed past the run's end or never started (0 without replayed pods);
//!
//! each integrated over the samples as the run's node-hours are, so they sum to the run's
//! node-hours minus the bound's. It measures a finished run and decides nothing; the autoscaler
//! must never read it.

use std::collections::BTreeMap;

use autoscaler_model::Resources;
use autoscaler_world::{LostRun, Sample, SimTime, TimedWork};
use serde::Serialize;

use super::bound::{FluidBound, Shape, demand, fluid_bound_of};

/// The run's node-hours above its bound, split, and the work evictions lost (all node-hours,
/// rounded to thousandths).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DistanceReport {
    /// The run's node-hours minus the bound's: the sum of the six parts below.
    pub excess_node_hours: f64,
    /// Nodes of the run's shapes over the best mix of shapes for the same demand.
    pub shape_choice: f64,
    /// Empty nodes kept after their pods left.
    pub waiting: f64,
    /// Unused room on occupied nodes.
    pub packing: f64,
    /// Empty nodes that had not held a pod yet (bought ahead of their use, or never used).
    pub provisioning: f64,
    /// The bound's nodes for the work evictions lost, outside the bound.
    pub restarted_work: f64,
    /// The trace's work the run held at other instants than it arrived (negative when pushed
    /// past the run's end); 0 without replayed pods.
    pub delayed_work: f64,
    /// Whether the run replayed pods (then the summary shows the delayed work).
    #[serde(skip)]
    pub replayed: bool,
    /// The cost of that work in the cheapest mix (outside the bound's cost).
    pub restarted_work_cost: f64,
    /// Lost runs: evicted pods' terminations, and the starts of replayed tasks that did an
    /// evicted run's work again (a Job's evicted run, whole).
    pub restarted_runs: usize,
    /// Pods evicted per node-hour of the run (none without node-hours); compare runs with and
    /// without consolidation for evictions per node-hour saved.
    pub evictions_per_node_hour: Option<f64>,
}

/// The bound of the trace's own work, and where the run's distance to it is.
pub struct Distance {
    /// The bound without the lost work.
    pub bound: FluidBound,
    /// The split.
    pub report: DistanceReport,
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The requests of lost runs at each sample: a run counts at a sample `t` with `from <= t <
/// to`, at most the sample's bound requests (a pod bound or gone in the sample's own tick).
pub fn lost_at_samples(samples: &[Sample], lost: &[LostRun]) -> Vec<Resources> {
    let runs = lost.iter().map(|l| (l.from_ms, l.to_ms, &l.requests));
    let mut at = live_at_samples(samples, runs);
    for (r, s) in at.iter_mut().zip(samples) {
        let names: Vec<_> = r.iter().map(|(n, _)| n).collect();
        for name in names {
            let v = r.get(name).clamp(0, s.bound_requests.get(name).max(0));
            r.set(name, v);
        }
    }
    at
}

/// The summed requests, at each sample `t`, of the windows `(from, to, requests)` with `from <=
/// t < to`.
fn live_at_samples<'r>(
    samples: &[Sample],
    windows: impl Iterator<Item = (SimTime, SimTime, &'r Resources)>,
) -> Vec<Resources> {
    // Starts and ends, in time order; an end sorts before a start at the same instant.
    let mut steps: Vec<(SimTime, bool, &Resources)> = windows
        .filter(|(from, to, _)| to > from)
        .flat_map(|(from, to, r)| [(from, true, r), (to, false, r)])
        .collect();
    steps.sort_by_key(|(t, starts, _)| (*t, *starts));
    let mut live = Resources::default();
    let mut next = steps.iter().peekable();
    samples
        .iter()
        .map(|s| {
            while let Some((_, starts, r)) = next.next_if(|(t, _, _)| *t <= s.at_ms) {
                if *starts {
                    live.add(r);
                } else {
                    live.sub(r);
                }
            }
            live.clone()
        })
        .collect()
}

/// Whether one node of some shape could hold `r` (every resource it requests that the bound
/// counts).
fn fits_a_shape(shapes: &[Shape], r: &Resources) -> bool {
    let d = demand(r);
    shapes.iter().any(|sh| {
        d.iter()
            .all(|(name, v)| *v <= 0.0 || sh.allocatable.get(name).is_some_and(|a| v <= a))
    })
}

/// Each resource of `r` at least 0.
fn not_below_zero(mut r: Resources) -> Resources {
    let names: Vec<_> = r.iter().map(|(n, _)| n).collect();
    for name in names {
        let v = r.get(name).max(0);
        r.set(name, v);
    }
    r
}

/// The trace's own work at each sample: the replayed pods as the trace gives them (those some
/// shape could hold), and the other pods as the run held them minus their lost runs.
fn own_work(
    shapes: &[Shape],
    samples: &[Sample],
    lost: &[LostRun],
    timed: &TimedWork,
) -> Vec<Resources> {
    let fits: Vec<bool> = (timed.requests().iter())
        .map(|r| fits_a_shape(shapes, r))
        .collect();
    let given = timed
        .windows()
        .iter()
        .filter(|(_, _, i)| fits.get(*i as usize).copied().unwrap_or(false))
        .filter_map(|(from, to, i)| Some((*from, *to, timed.requests().get(*i as usize)?)));
    let ideal = live_at_samples(samples, given);
    let untimed: Vec<LostRun> = lost.iter().filter(|l| !l.timed).cloned().collect();
    let lost_untimed = lost_at_samples(samples, &untimed);
    samples
        .iter()
        .zip(lost_untimed)
        .zip(ideal)
        .map(|((s, l), ideal)| {
            let mut r = s.bound_requests.clone();
            r.sub(&s.timed_requests);
            r.sub(&l);
            let mut r = not_below_zero(r);
            r.add(&ideal);
            r
        })
        .collect()
}

/// Splits a run's distance to the bound of its trace's own work. `groups` are the run's node
/// groups (`namespace/name`) with their shapes; `timed` the replayed pods' work as the trace
/// gives it; `evictions` the pods evicted.
pub fn distance(
    groups: &[(String, Shape)],
    samples: &[Sample],
    lost: &[LostRun],
    timed: &TimedWork,
    evictions: u64,
) -> Distance {
    let shapes: Vec<Shape> = groups.iter().map(|(_, s)| s.clone()).collect();
    let lost_now = lost_at_samples(samples, lost);
    let held: Vec<Resources> = samples
        .iter()
        .zip(&lost_now)
        .map(|(s, l)| {
            let mut r = s.bound_requests.clone();
            r.sub(l);
            r
        })
        .collect();
    let with_lost: Vec<(SimTime, &Resources)> = samples
        .iter()
        .map(|s| (s.at_ms, &s.bound_requests))
        .collect();
    let at = |rs: &[Resources]| -> FluidBound {
        let points: Vec<(SimTime, &Resources)> = samples.iter().map(|s| s.at_ms).zip(rs).collect();
        fluid_bound_of(&shapes, &points)
    };
    let run_own = at(&held);
    let replayed = !timed.is_empty();
    // Without replayed pods the trace's own work is what the run held minus the lost work.
    let bound = if replayed {
        at(&own_work(&shapes, samples, lost, timed))
    } else {
        run_own.clone()
    };
    let all = fluid_bound_of(&shapes, &with_lost);
    let mut parts = [0.0f64; 6];
    let mut run = 0.0;
    for (i, w) in samples.windows(2).enumerate() {
        let hours = w[1].at_ms.saturating_sub(w[0].at_ms) as f64 / 3_600_000.0;
        let s = &w[0];
        let count = |m: &BTreeMap<String, usize>| -> f64 {
            groups
                .iter()
                .map(|(g, _)| m.get(g).copied().unwrap_or(0) as f64)
                .sum()
        };
        let nodes = count(&s.nodes_per_group);
        let empty = count(&s.empty_per_group);
        let fresh = (s.empty_fresh as f64).min(empty);
        let occupied = nodes - empty;
        let (b, r, b_all) = (bound.nodes[i], run_own.nodes[i], all.nodes[i]);
        let mix = mix_nodes(groups, s, occupied).max(b_all);
        let split = [
            fresh,
            empty - fresh,
            occupied - mix,
            mix - b_all,
            b_all - r,
            r - b,
        ];
        for (p, v) in parts.iter_mut().zip(split) {
            *p += v * hours;
        }
        run += nodes * hours;
    }
    let [
        provisioning,
        waiting,
        packing,
        shape_choice,
        restarted_work,
        delayed_work,
    ] = parts;
    let report = DistanceReport {
        excess_node_hours: round3(run - bound.node_hours),
        shape_choice: round3(shape_choice),
        waiting: round3(waiting),
        packing: round3(packing),
        provisioning: round3(provisioning),
        restarted_work: round3(restarted_work),
        delayed_work: round3(delayed_work),
        replayed,
        restarted_work_cost: round3(all.cost - run_own.cost),
        restarted_runs: lost.iter().filter(|l| l.to_ms > l.from_ms).count(),
        evictions_per_node_hour: (run > 0.0).then(|| round3(evictions as f64 / run)),
    };
    Distance { bound, report }
}

/// The fewest nodes of the run's occupied mix at sample `s` (each of them with the average
/// allocatable of its `occupied` nodes) whose summed allocatable covers the bound pods'
/// requests, pods split at will; 0 without occupied nodes.
fn mix_nodes(groups: &[(String, Shape)], s: &Sample, occupied: f64) -> f64 {
    if occupied <= 0.0 {
        return 0.0;
    }
    let mut total: BTreeMap<&str, f64> = BTreeMap::new();
    for (g, shape) in groups {
        let nodes = s.nodes_per_group.get(g).copied().unwrap_or(0);
        let n = nodes.saturating_sub(s.empty_per_group.get(g).copied().unwrap_or(0));
        for (name, v) in &shape.allocatable {
            *total.entry(name).or_default() += n as f64 * v;
        }
    }
    demand(&s.bound_requests)
        .iter()
        .filter_map(|(name, v)| {
            let cap = total.get(name.as_str()).copied().unwrap_or(0.0);
            (*v > 0.0 && cap > 0.0).then(|| v / cap * occupied)
        })
        .fold(0.0, f64::max)
}

/// The summary's lines for the split (two lines, no trailing newline).
pub fn summary_lines(d: &DistanceReport) -> String {
    let delayed = if d.replayed {
        format!(" + delayed work {:.2}", d.delayed_work)
    } else {
        String::new()
    };
    format!(
        "  above the bound: {:.2} node-hours = shape choice {:.2} + waiting {:.2} + packing {:.2} + provisioning {:.2} + restarted work {:.2}{delayed}\n  restarted work: {} lost run(s), {:.2} node-hours outside the bound; evictions per node-hour: {}",
        d.excess_node_hours,
        d.shape_choice,
        d.waiting,
        d.packing,
        d.provisioning,
        d.restarted_work,
        d.restarted_runs,
        d.restarted_work,
        d.evictions_per_node_hour
            .map_or_else(|| "n/a".to_string(), |e| format!("{e:.3}"))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(cpu: f64, mem: f64) -> Shape {
        Shape {
            allocatable: BTreeMap::from([
                ("cpu".to_string(), cpu),
                ("memory".to_string(), mem),
                ("pods".to_string(), 110.0),
            ]),
            price: 1.0,
        }
    }

    fn cores(n: i64) -> Resources {
        Resources {
            cpu: n * 1000,
            memory: 1 << 30,
            pods: 1,
            ..Resources::default()
        }
    }

    /// A sample at `at_s` with `requests` bound, and per group (nodes, empty); `fresh` of the
    /// empty nodes never used.
    fn sample(
        at_s: u64,
        requests: Resources,
        groups: &[(&str, usize, usize)],
        fresh: usize,
    ) -> Sample {
        Sample {
            at_ms: at_s * 1000,
            pending: 0,
            unschedulable: 0,
            running: 0,
            nodes: groups.iter().map(|g| g.1).sum(),
            nodes_per_group: groups.iter().map(|g| (g.0.to_string(), g.1)).collect(),
            machines_per_group: BTreeMap::new(),
            bound_requests: requests,
            timed_requests: Resources::default(),
            empty_per_group: groups
                .iter()
                .filter(|g| g.2 > 0)
                .map(|g| (g.0.to_string(), g.2))
                .collect(),
            empty_fresh: fresh,
        }
    }

    fn lost(requests: Resources, from_s: u64, to_s: u64) -> LostRun {
        LostRun {
            pod: "ns/p".into(),
            requests,
            from_ms: from_s * 1000,
            to_ms: to_s * 1000,
            timed: false,
        }
    }

    #[test]
    fn a_lost_run_counts_from_its_start_until_its_end_and_never_above_the_bound_pods() {
        let samples: Vec<Sample> = [0, 10, 20, 30]
            .iter()
            .map(|&t| sample(t, cores(4), &[], 0))
            .collect();
        let at = lost_at_samples(&samples, &[lost(cores(2), 10, 30), lost(cores(9), 20, 25)]);
        let cpu: Vec<i64> = at.iter().map(|r| r.cpu).collect();
        // 2 cores from 10 s to 30 s (not at 30 s); the 9 cores at 20 s are cut to the 4 bound.
        assert_eq!(cpu, vec![0, 2000, 4000, 0]);
        // A run that ends as it starts holds nothing.
        assert!(
            lost_at_samples(&samples, &[lost(cores(2), 10, 10)])
                .iter()
                .all(|r| r.cpu == 0)
        );
    }

    #[test]
    fn the_parts_sum_to_the_excess_each_where_its_nodes_are() {
        let groups = [("ns/a".to_string(), shape(16.0, 64.0))];
        // Hour 1: 4 nodes, 1 empty and never used; 16 cores of the trace plus 8 of a lost run.
        // Hour 2: 3 nodes, 2 empty after use; 8 cores.
        let samples = [
            sample(0, cores(24), &[("ns/a", 4, 1)], 1),
            sample(3600, cores(8), &[("ns/a", 3, 2)], 0),
            sample(7200, cores(0), &[("ns/a", 1, 1)], 0),
        ];
        let d = distance(
            &groups,
            &samples,
            &[lost(cores(8), 0, 3600)],
            &TimedWork::default(),
            7,
        );
        // The bound: 1 node (16 of 24 cores), then 0.5; the lost work's 0.5 is outside it.
        assert!((d.bound.node_hours - 1.5).abs() < 1e-9, "{:?}", d.bound);
        let r = &d.report;
        assert_eq!(r.excess_node_hours, 5.5);
        assert_eq!(r.provisioning, 1.0);
        assert_eq!(r.waiting, 2.0);
        // 3 occupied nodes for 1.5 nodes of work, then 1 for 0.5.
        assert_eq!(r.packing, 2.0);
        assert_eq!(r.shape_choice, 0.0);
        assert_eq!(r.restarted_work, 0.5);
        assert_eq!(r.restarted_runs, 1);
        assert_eq!(r.evictions_per_node_hour, Some(1.0));
        let sum = r.shape_choice + r.waiting + r.packing + r.provisioning + r.restarted_work;
        assert!((sum - r.excess_node_hours).abs() < 1e-9);
        assert_eq!(r.delayed_work, 0.0);
    }

    #[test]
    fn replayed_work_counts_as_the_trace_gives_it_whatever_the_run_held() {
        let groups = [("ns/a".to_string(), shape(16.0, 64.0))];
        // The trace: 16 cores arriving at 0 for 2 h (one node for two hours), and a pod no
        // shape can hold (left out: no run can start it).
        let mut timed = TimedWork::default();
        timed.push(0, 7200 * 1000, &cores(16));
        timed.push(0, 7200 * 1000, &cores(64));
        let replayed = |at_s: u64, held: Resources| {
            let mut s = sample(at_s, held.clone(), &[("ns/a", 1, 0)], 0);
            s.timed_requests = held;
            s
        };
        // Run 1 starts the pod at once and holds it for the whole run.
        let on_time: Vec<Sample> = [0, 3600, 7200]
            .iter()
            .map(|&t| replayed(t, cores(if t < 7200 { 16 } else { 0 })))
            .collect();
        // Run 2 evicts it after an hour and restarts it: the first hour is redone (lost), and the
        // rest of the work runs past the run's end. The old bound (the run's held work minus the
        // lost work) counted only one of the two hours.
        let restarted: Vec<Sample> = [0, 3600, 7200]
            .iter()
            .map(|&t| replayed(t, cores(16)))
            .collect();
        let mut redo = lost(cores(16), 3600, 7200);
        redo.timed = true;
        let a = distance(&groups, &on_time, &[], &timed, 0);
        let b = distance(&groups, &restarted, &[redo], &timed, 1);
        assert!((a.bound.node_hours - 2.0).abs() < 1e-9, "{:?}", a.bound);
        assert_eq!(a.bound, b.bound);
        assert_eq!(a.report.delayed_work, 0.0);
        // Run 2: one hour of restarted work, and one hour of the trace's work not done by the end.
        assert_eq!(b.report.restarted_work, 1.0);
        assert_eq!(b.report.delayed_work, -1.0);
        let r = &b.report;
        let sum = r.shape_choice
            + r.waiting
            + r.packing
            + r.provisioning
            + r.restarted_work
            + r.delayed_work;
        assert!((sum - r.excess_node_hours).abs() < 1e-9, "{r:?}");
        assert!(summary_lines(r).contains("+ restarted work 1.00 + delayed work -1.00\n"));
        // Without replayed pods the summary has no delayed work.
        let plain = distance(&groups, &on_time, &[], &TimedWork::default(), 0).report;
        assert!(!summary_lines(&plain).contains("delayed"));
    }

    #[test]
    fn nodes_of_a_worse_shape_are_shape_choice_not_packing() {
        // 16 cores fit one `big` node; the run held them on two full `small` ones.
        let groups = [
            ("ns/big".to_string(), shape(16.0, 64.0)),
            ("ns/small".to_string(), shape(8.0, 64.0)),
        ];
        let samples = [
            sample(0, cores(16), &[("ns/big", 0, 0), ("ns/small", 2, 0)], 0),
            sample(3600, cores(0), &[("ns/small", 0, 0)], 0),
        ];
        let r = distance(&groups, &samples, &[], &TimedWork::default(), 0).report;
        assert_eq!(r.excess_node_hours, 1.0);
        assert_eq!(r.shape_choice, 1.0);
        assert_eq!(r.packing, 0.0);
        assert_eq!(r.evictions_per_node_hour, Some(0.0));
        // Without node-hours there is nothing to divide by.
        let none = [sample(0, cores(0), &[], 0), sample(10, cores(0), &[], 0)];
        assert_eq!(
            distance(&groups, &none, &[], &TimedWork::default(), 3)
                .report
                .evictions_per_node_hour,
            None
        );
    }
}

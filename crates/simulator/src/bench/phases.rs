//! The phases of one loop, each run `iterations` times on the generated cluster and timed with
//! the wall clock and the thread's CPU clock: reading one field of every pod (the floor any
//! phase that reads each pod pays), snapshot build, filtering pending pods onto existing nodes,
//! the scale-up decision, one group's bin-packing estimate, scale-down planning (two passes
//! eleven minutes apart, the second producing the deletion plan), and the whole
//! `Autoscaler::run_once`.
//!
//! Each phase calls the core exactly as the loop does; none of them changes the generated
//! objects, and every phase starts from the same state in every iteration.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use autoscaler_core::ExpanderChain;
use autoscaler_core::InFlight;
use autoscaler_core::InvalidOption;
use autoscaler_core::NodeInfo;
use autoscaler_core::ScaleUpOptions;
use autoscaler_core::ScaleUpResult;
use autoscaler_core::Unlimited;
use autoscaler_core::group_template;
use autoscaler_core::{Autoscaler, AutoscalerOptions, ClusterView, LoopInput, ScaleUpConfig};
use autoscaler_core::{EstimatorLimits, estimate};
use autoscaler_core::{ScaleDownInput, ScaleDownState, plan_scale_down};
use autoscaler_core::{build_snapshot, decide_scale_up_with_upcoming};
use autoscaler_core::{place_on_existing, select_pending};
use autoscaler_model::CloudProvider;
use autoscaler_model::ClusterTotals;
use autoscaler_model::DisruptionBudgets;
use autoscaler_model::NoControllerLookup;
use autoscaler_model::Pod;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::cluster::Cluster;
use crate::text::count;

/// The decision time of every phase (2026-01-01T00:00:00Z); pods have no creation time, so it
/// only matters relative to the scale-down passes.
pub const NOW_MS: i64 = 1_767_225_600_000;
/// Time between the two scale-down passes: past the default 10-minute unneeded time.
pub const SECOND_PASS_AFTER_MS: i64 = 11 * 60 * 1000;
/// Time between the warm-up loop and the measured loop of the "next loop" phase (the default
/// scan interval).
pub const NEXT_LOOP_AFTER_MS: i64 = 10 * 1000;

/// How to measure.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Runs per phase.
    pub iterations: usize,
    /// `--max-nodes-per-scaleup`.
    pub max_nodes_per_scale_up: usize,
    /// Seed of the `random` expander.
    pub seed: u64,
}

pub(crate) use crate::cpu_clock::thread_cpu;

/// A wall-clock and a CPU-clock reading, to time one run.
#[derive(Clone, Copy, Debug)]
struct Stopwatch {
    wall: Instant,
    cpu: Duration,
}

impl Stopwatch {
    fn start() -> Stopwatch {
        Stopwatch {
            wall: Instant::now(),
            cpu: thread_cpu(),
        }
    }

    /// `(wall, cpu)` since the start.
    fn elapsed(&self) -> (Duration, Duration) {
        (self.wall.elapsed(), thread_cpu().saturating_sub(self.cpu))
    }
}

/// The timings and the decisions of one phase.
#[derive(Clone, Debug)]
pub struct PhaseResult {
    /// What was measured.
    pub phase: &'static str,
    /// One wall-clock duration per iteration.
    pub samples: Vec<Duration>,
    /// The thread's CPU time of each iteration.
    pub cpu: Vec<Duration>,
    /// What the phase decided (the same in every iteration: the core is deterministic).
    pub decisions: String,
}

/// The median of `samples` (the upper one of an even count).
fn median_of(samples: &[Duration]) -> Duration {
    let mut s = samples.to_vec();
    s.sort();
    s.get(s.len() / 2).copied().unwrap_or_default()
}

impl PhaseResult {
    /// The median sample (the upper one of an even count).
    pub fn median(&self) -> Duration {
        median_of(&self.samples)
    }

    /// The median CPU time.
    pub fn median_cpu(&self) -> Duration {
        median_of(&self.cpu)
    }

    /// The slowest sample.
    pub fn max(&self) -> Duration {
        self.samples.iter().copied().max().unwrap_or_default()
    }
}

/// Wall and CPU samples.
type Samples = (Vec<Duration>, Vec<Duration>);

/// Runs `f` `iterations` times, timing each run; returns the wall and CPU samples and the last
/// result.
fn time<T>(iterations: usize, mut f: impl FnMut() -> T) -> (Samples, T) {
    let mut samples: Samples = (
        Vec::with_capacity(iterations),
        Vec::with_capacity(iterations),
    );
    let mut last = None;
    for _ in 0..iterations.max(1) {
        let watch = Stopwatch::start();
        let out = f();
        let (wall, cpu) = watch.elapsed();
        samples.0.push(wall);
        samples.1.push(cpu);
        // The previous result is dropped here, outside the timed run.
        last = Some(out);
    }
    (samples, last.expect("at least one iteration"))
}

/// The options of the measured loop: upstream defaults, expander `random` with a fixed seed;
/// refused if a setting breaks an option's rule.
pub fn options(settings: &Settings) -> Result<AutoscalerOptions, InvalidOption> {
    let mut scale_up = ScaleUpOptions::default();
    scale_up.set_max_nodes_per_scale_up(settings.max_nodes_per_scale_up)?;
    Ok(AutoscalerOptions {
        scale_up: ScaleUpConfig {
            scale_up,
            expander: ExpanderChain::parse("random").expect("a known expander"),
            ..ScaleUpConfig::default()
        },
        seed: settings.seed,
        ..AutoscalerOptions::default()
    })
}

/// `ng-3 +134, ng-7 +2` (group names shortened to their last segment), or `none`.
fn increases(result: &ScaleUpResult) -> String {
    if result.increases.is_empty() {
        return "no scale-up".into();
    }
    let mut s = format!("+{} (", count(result.total_nodes() as u64, "node"));
    for (i, inc) in result.increases.iter().enumerate() {
        let name = inc.group.as_str().rsplit('/').next().unwrap_or_default();
        let _ = write!(s, "{}{name} +{}", if i > 0 { ", " } else { "" }, inc.delta);
    }
    s.push(')');
    s
}

/// Measures every phase on `cluster`; refused if a setting breaks an option's rule.
pub fn measure(cluster: &Cluster, settings: &Settings) -> Result<Vec<PhaseResult>, InvalidOption> {
    let n = settings.iterations;
    let options = options(settings)?;
    let view = ClusterView {
        nodes: &cluster.nodes,
        pods: &cluster.pods,
        daemonsets: &[],
        namespaces: &[],
        provider: &cluster.provider,
        pdbs: &[],
        storage: &cluster.storage,
    };
    let mut results = vec![floor_phase(view.pods, n)];

    let ((samples, cpu), (mut snapshot, warnings)) = time(n, || {
        let mut warnings = Vec::new();
        (build_snapshot(&view, &mut warnings), warnings)
    });
    let mut decisions = format!(
        "{}, {} bound",
        count(snapshot.len() as u64, "node"),
        count(snapshot.pod_count() as u64, "pod")
    );
    if !warnings.is_empty() {
        let _ = write!(
            decisions,
            ", {} skipped",
            count(warnings.len() as u64, "object")
        );
    }
    results.push(PhaseResult {
        phase: "snapshot build",
        samples,
        cpu,
        decisions,
    });

    // The scale-up reads only the pods the snapshot left out (those not bound to a node, or
    // terminal), which the loop collects while it builds the snapshot; so do these phases.
    let outside: Vec<Arc<Pod>> = cluster
        .pods
        .iter()
        .filter(|p| p.node_name.is_none() || p.is_terminal())
        .cloned()
        .collect();
    let pending_view = ClusterView {
        pods: &outside,
        ..view
    };
    let ((samples, cpu), placement) = time(n, || {
        let selected = select_pending(&outside, NOW_MS, &options.scale_up.pending);
        snapshot.forked(|s| place_on_existing(s, selected.eligible))
    });
    results.push(PhaseResult {
        phase: "filter pending onto existing nodes",
        samples,
        cpu,
        decisions: format!(
            "{} pods fit existing nodes, {} need new nodes",
            placement.placed.len(),
            placement.remaining.len()
        ),
    });

    let ((samples, cpu), decision) = time(n, || {
        let mut rng = ChaCha8Rng::seed_from_u64(settings.seed);
        decide_scale_up_with_upcoming(
            &mut snapshot,
            &pending_view,
            &options.scale_up,
            NOW_MS,
            &|_, _| None,
            None,
            &mut rng,
            &mut Unlimited,
        )
    });
    results.push(PhaseResult {
        phase: "scale-up decision (filter included)",
        samples,
        cpu,
        decisions: format!(
            "{}; {} pods trigger it, {} fit existing nodes, {} help from no group",
            increases(&decision.result),
            decision.result.triggered.len(),
            decision.fit_existing.len(),
            decision.result.no_scale_up.len()
        ),
    });

    results.push(estimate_phase(cluster, &view, &mut snapshot, settings));
    results.extend(scale_down_phases(
        cluster,
        &view,
        &mut snapshot,
        &options,
        n,
    ));
    results.push(super::consolidation::phase(
        cluster,
        &view,
        &mut snapshot,
        &options,
        n,
    ));

    let ((samples, cpu), (_autoscaler, outcome)) = time(n, || {
        let mut autoscaler = Autoscaler::new(options.clone());
        let outcome = autoscaler.run_once(LoopInput::new(&view, NOW_MS));
        // A running autoscaler keeps its state (and snapshot) for the next loop: dropping it is
        // no part of the loop, so it happens outside the timed run.
        (autoscaler, outcome)
    });
    results.push(PhaseResult {
        phase: "run_once (first loop: snapshot built)",
        samples,
        cpu,
        decisions: format!(
            "{}; deletions: {}; actions: {}",
            increases(&outcome.scale_up.result),
            outcome.scale_down.deletions.len(),
            outcome.actions.len()
        ),
    });

    // The next loop sees the first loop's scale-up applied (targets raised, nodes not
    // registered yet: upcoming) and the same objects otherwise, so the kept snapshot is reused.
    let mut next_provider = cluster.provider.clone();
    for inc in &outcome.scale_up.result.increases {
        if let Some(g) = next_provider.groups_mut().get_mut(inc.index) {
            g.set_target_size(inc.new_target);
        }
    }
    let next_view = ClusterView {
        provider: &next_provider,
        ..view
    };
    let (mut samples, mut cpu) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut last = None;
    for _ in 0..n.max(1) {
        let mut autoscaler = Autoscaler::new(options.clone());
        let _ = autoscaler.run_once(LoopInput::new(&view, NOW_MS));
        let watch = Stopwatch::start();
        let outcome = autoscaler.run_once(LoopInput::new(&next_view, NOW_MS + NEXT_LOOP_AFTER_MS));
        let (wall, used) = watch.elapsed();
        samples.push(wall);
        cpu.push(used);
        last = Some(outcome);
    }
    let outcome = last.expect("at least one iteration");
    let upcoming: usize = outcome.status.groups.iter().map(|g| g.upcoming).sum();
    results.push(PhaseResult {
        phase: "run_once (next loop: snapshot kept)",
        samples,
        cpu,
        decisions: format!(
            "{}; upcoming nodes: {upcoming}; actions: {}",
            increases(&outcome.scale_up.result),
            outcome.actions.len()
        ),
    });
    Ok(results)
}

/// The least any phase that reads each pod pays: one field of every pod, in the view's order
/// (the pods' own memory, one allocation each, as the informer made them). What it costs per
/// pod at each size shows how much of a phase's growth is the memory it must read.
fn floor_phase(pods: &[Arc<Pod>], iterations: usize) -> PhaseResult {
    let ((samples, cpu), sum) = time(iterations, || {
        std::hint::black_box(pods)
            .iter()
            .map(|p| p.requests.cpu)
            .fold(0i64, i64::wrapping_add)
    });
    PhaseResult {
        phase: "read each pod once (memory floor)",
        samples,
        cpu,
        decisions: format!(
            "{}, {sum} millicores requested",
            count(pods.len() as u64, "pod")
        ),
    }
}

/// The bin-packing estimate of every pending pod onto new nodes of the first group (as if none
/// fit an existing node), capped as scale-up caps it: by the group's room and
/// `--max-nodes-per-scaleup`.
fn estimate_phase(
    cluster: &Cluster,
    view: &ClusterView<'_>,
    snapshot: &mut autoscaler_core::ClusterSnapshot,
    settings: &Settings,
) -> PhaseResult {
    let phase = "bin-packing estimate (all pending, one group)";
    let group = &cluster.provider.node_groups()[0];
    let members: Vec<&NodeInfo> = view
        .nodes
        .iter()
        .filter(|n| cluster.provider.node_group_of(n) == Some(0))
        .filter_map(|n| snapshot.node_by_name(n.name))
        .collect();
    let template = match group_template(snapshot, group, &members, &[], &Default::default()) {
        Ok(t) => t,
        Err(e) => {
            return PhaseResult {
                phase,
                samples: Vec::new(),
                cpu: Vec::new(),
                decisions: format!("no template for {}: {e}", group.id()),
            };
        }
    };
    let pods = select_pending(view.pods, NOW_MS, &Default::default()).eligible;
    let max_nodes = group
        .max_size()
        .saturating_sub(group.target_size())
        .min(settings.max_nodes_per_scale_up);
    let ((samples, cpu), result) = time(settings.iterations, || {
        let limits = EstimatorLimits::new(Some(max_nodes), Unlimited);
        estimate(snapshot, &pods, &template.template, limits)
    });
    let decisions = match result {
        Ok(e) => {
            let mut s = format!(
                "{} of {} for {} of {} pods",
                count(e.node_count as u64, "new node"),
                group.id().as_str().rsplit('/').next().unwrap_or_default(),
                e.placed_count(),
                pods.len()
            );
            if e.limit_hit.is_some() {
                let _ = write!(s, " (capped at {max_nodes} nodes)");
            }
            s
        }
        Err(e) => format!("failed: {e}"),
    };
    PhaseResult {
        phase,
        samples,
        cpu,
        decisions,
    }
}

/// Two scale-down passes eleven minutes apart on the running pods (pending pods are not
/// placed: this measures the planning machinery on the cluster as it runs), from a fresh state
/// each iteration: the first finds the unneeded nodes, the second (past the unneeded time)
/// produces the deletion plan.
fn scale_down_phases(
    cluster: &Cluster,
    view: &ClusterView<'_>,
    snapshot: &mut autoscaler_core::ClusterSnapshot,
    options: &AutoscalerOptions,
    iterations: usize,
) -> Vec<PhaseResult> {
    let totals = ClusterTotals::from_nodes(view.nodes.iter().map(|n| &**n));
    let input = || ScaleDownInput {
        provider: &cluster.provider,
        budgets: DisruptionBudgets::new(Vec::new()),
        controllers: &NoControllerLookup,
        limits: &options.scale_up.limits,
        totals: totals.clone(),
        in_flight: InFlight::default(),
    };
    let opts = &options.scale_down;
    let (mut first, mut second, mut both): (Samples, Samples, Samples) = Default::default();
    let mut last = None;
    for _ in 0..iterations.max(1) {
        let mut state = ScaleDownState::default();
        let start = Stopwatch::start();
        let pass1 = plan_scale_down(snapshot, &mut state, input(), opts, NOW_MS, &mut Unlimited);
        let middle = Stopwatch::start();
        let pass2 = plan_scale_down(
            snapshot,
            &mut state,
            input(),
            opts,
            NOW_MS + SECOND_PASS_AFTER_MS,
            &mut Unlimited,
        );
        let (wall2, cpu2) = middle.elapsed();
        let (wall, cpu) = start.elapsed();
        first.0.push(wall - wall2);
        first.1.push(cpu.saturating_sub(cpu2));
        second.0.push(wall2);
        second.1.push(cpu2);
        both.0.push(wall);
        both.1.push(cpu);
        last = Some((pass1, pass2));
    }
    let (pass1, pass2) = last.expect("at least one iteration");
    let empty = pass2.deletions.iter().filter(|d| d.empty).count();
    vec![
        PhaseResult {
            phase: "scale-down pass 1 (unneeded nodes)",
            samples: first.0,
            cpu: first.1,
            decisions: format!(
                "{} unneeded, {} not removable",
                pass1.unneeded.len(),
                pass1.unremovable.len()
            ),
        },
        PhaseResult {
            phase: "scale-down pass 2 (+11 min, deletion plan)",
            samples: second.0,
            cpu: second.1,
            decisions: format!(
                "deletions: {} ({} empty, {} drained); {} unneeded still waiting",
                pass2.deletions.len(),
                empty,
                pass2.deletions.len() - empty,
                pass2.waiting.len()
            ),
        },
        PhaseResult {
            phase: "scale-down planning (both passes)",
            samples: both.0,
            cpu: both.1,
            decisions: String::new(),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::cluster::{Shape, generate};
    use autoscaler_model::testing::GI;

    fn run(shape: Shape, max_nodes_per_scale_up: usize) -> Vec<PhaseResult> {
        let cluster = generate(&shape).expect("the bench cluster converts");
        measure(
            &cluster,
            &Settings {
                iterations: 3,
                max_nodes_per_scale_up,
                seed: 42,
            },
        )
        .expect("valid settings")
    }

    fn decisions<'a>(results: &'a [PhaseResult], phase: &str) -> &'a str {
        let r = results
            .iter()
            .find(|r| r.phase.starts_with(phase))
            .unwrap_or_else(|| panic!("phase {phase}"));
        assert_eq!(r.samples.len(), 3, "{phase}");
        &r.decisions
    }

    fn shape() -> Shape {
        Shape {
            nodes: 50,
            groups: 5,
            pods: 1500,
            pending: 100,
            pending_cpu_milli: 1000,
            pending_memory: 2 * GI,
            pending_owners: 4,
        }
    }

    #[test]
    fn reference_shape_fits_pending_on_the_light_nodes_and_finds_them_unneeded() {
        let r = run(shape(), 1000);
        // 300 pods of 100m on the 10 light nodes, 1,200 of 500m, 100 pending of 1 CPU.
        assert_eq!(
            decisions(&r, "read each pod once"),
            "1600 pods, 730000 millicores requested"
        );
        assert_eq!(decisions(&r, "snapshot build"), "50 nodes, 1500 pods bound");
        // 10 light nodes with 13 CPU free: room for 130 pods of 1 CPU.
        assert_eq!(
            decisions(&r, "filter"),
            "100 pods fit existing nodes, 0 need new nodes"
        );
        assert!(decisions(&r, "scale-up decision").starts_with("no scale-up; 0 pods"));
        // 100 pods of 1 CPU / 2 GiB: 15 per 16-CPU template node.
        assert!(
            decisions(&r, "bin-packing").starts_with("7 new nodes of ng-0 for 100 of 100 pods"),
            "{}",
            decisions(&r, "bin-packing")
        );
        // The 10 light nodes are below 50%; their pods can move to the others' free room.
        assert!(decisions(&r, "scale-down pass 1").starts_with("10 unneeded"));
        assert!(decisions(&r, "scale-down pass 2").contains("deletions: "));
        // run_once places the pending pods on the light nodes first: nothing to remove.
        assert!(decisions(&r, "run_once (first").starts_with("no scale-up; deletions: 0"));
    }

    #[test]
    fn pods_that_fit_nowhere_scale_up_capped_by_max_nodes_per_scale_up() {
        let r = run(
            Shape {
                pending_cpu_milli: 14_000,
                pending_memory: 8 * GI,
                ..shape()
            },
            30,
        );
        assert_eq!(
            decisions(&r, "filter"),
            "0 pods fit existing nodes, 100 need new nodes"
        );
        let up = decisions(&r, "scale-up decision");
        assert!(up.starts_with("+30 nodes ("), "{up}");
        assert!(decisions(&r, "bin-packing").contains("(capped at 30 nodes)"));
        assert!(decisions(&r, "run_once (first").starts_with("+30 nodes"));
        // The next loop sees the 30 nodes upcoming and asks for 30 more (70 pods still wait).
        let next = decisions(&r, "run_once (next");
        assert!(
            next.starts_with("+30 nodes") && next.contains("upcoming nodes: 30"),
            "{next}"
        );
    }
}

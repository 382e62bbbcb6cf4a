//! What a scenario costs to run, estimated before it runs: the most pods and nodes alive at
//! once, the loops over them, and the pods its workloads start. Each is bounded, so that a
//! scenario a field at a time valid (200,000 replicas on 20 nodes, a pod lifetime of 1 ms over
//! hours) is refused at once, naming the fields, instead of running out of memory or for hours.
//!
//! It decides only whether a validated scenario may run; it never runs anything. Trace rows are
//! read during the run, so a trace counts for its `limit` when it gives one (the driver stops a run
//! whose pods alive at once pass [`MAX_PODS_AT_ONCE`]); the nodes it may ask for are its groups'
//! `max`.

use super::scenario::{MAX_INITIAL_NODES, Scenario, ScenarioError, WorkloadFile};

/// The most pods a run may hold at once: a simulated pod takes about 12 KB with the informer's
/// and the decision's copies (200,000 pending pods took 2.5 GB), so this keeps a run near
/// 1.3 GB (Kubernetes documents 150,000 pods per cluster).
pub const MAX_PODS_AT_ONCE: u64 = 100_000;
/// The most nodes a run may hold at once (Kubernetes documents 5,000 per cluster).
pub const MAX_NODES_AT_ONCE: u64 = 20_000;
/// The most work a run may do: loops times the objects (pods and nodes) each loop may read.
/// The examples' largest, the three-zone Azure replay (84 h at 10 s, 3,000 possible nodes), is
/// about 9e7.
pub const MAX_WORK: u64 = 400_000_000;
/// The most pods a run's Deployments and Jobs may start (replacements of pods whose lifetime
/// ended included).
pub const MAX_POD_STARTS: u64 = 10_000_000;
/// The largest change of replicas a `replicas-changed` fault may make, either way: as many nodes
/// as a group may start with.
pub const MAX_REPLICAS_CHANGE: i64 = MAX_INITIAL_NODES as i64;

/// The estimate of a scenario's cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cost {
    /// Most pods alive at once.
    pub pods: u64,
    /// Most nodes at once.
    pub nodes: u64,
    /// Loops of the autoscaler.
    pub loops: u64,
    /// Pods started over the run by Deployments (with replacements) and Jobs.
    pub starts: u64,
}

impl Cost {
    /// Loops times the objects each one may read.
    pub fn work(&self) -> u64 {
        self.loops
            .saturating_mul(self.pods.saturating_add(self.nodes))
    }
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> ScenarioError {
    ScenarioError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// A workload's largest replica count over its schedule.
fn peak(replicas: u32, schedule: &[(u64, u32)]) -> u64 {
    let most = schedule.iter().map(|&(_, r)| r).max().unwrap_or(0);
    u64::from(replicas.max(most))
}

/// Estimates the cost of a validated scenario.
pub fn estimate(s: &Scenario) -> Cost {
    let mut pods: u64 = 0;
    let mut starts: u64 = 0;
    for rs in &s.replica_sets {
        let p = peak(rs.replicas, &rs.schedule);
        pods = pods.saturating_add(p);
        let generations = match rs.pod_lifetime_ms {
            Some(life) => s.duration.div_ceil(life.max(1)).saturating_add(1),
            None => 1,
        };
        starts = starts.saturating_add(p.saturating_mul(generations));
    }
    for st in &s.stateful_sets {
        pods = pods.saturating_add(peak(st.replicas, &st.schedule));
    }
    for (_, job) in &s.jobs {
        pods = pods.saturating_add(u64::from(job.parallelism.min(job.completions)));
        starts = starts.saturating_add(u64::from(job.completions));
    }
    let mut unknown_trace = false;
    for t in &s.traces {
        match u64::try_from(t.options.limit) {
            Ok(limit) if t.options.limit != usize::MAX => pods = pods.saturating_add(limit),
            _ => unknown_trace = true,
        }
    }
    let added: u64 = s
        .faults
        .iter()
        .filter_map(|f| match f.kind {
            autoscaler_world::FaultKind::ReplicasChanged { delta } if delta > 0 => {
                Some(delta.unsigned_abs())
            }
            _ => None,
        })
        .fold(0, u64::saturating_add);
    let capacity: u64 = s.groups.iter().map(|g| u64::from(g.spec.max_size)).sum();
    let initial: u64 = s.groups.iter().map(|g| u64::from(g.spec.replicas)).sum();
    // Scale-up adds at most a node per pending pod; a trace without a limit may ask for any.
    let nodes = if unknown_trace {
        capacity
    } else {
        capacity.min(initial.saturating_add(pods))
    }
    .saturating_add(added);
    let daemon_pods = (s.daemon_sets.len() as u64).saturating_mul(nodes);
    Cost {
        pods: pods.saturating_add(daemon_pods),
        nodes,
        loops: s.duration / s.scan_interval.max(1),
        starts,
    }
}

/// Refuses a scenario whose cost passes a bound, naming the fields that make it; `duration` is
/// how the duration was given (`duration`, or `--duration` when the flag overrides it).
pub fn check(s: &Scenario, duration: &str) -> Result<Cost, ScenarioError> {
    let c = estimate(s);
    if c.pods > MAX_PODS_AT_ONCE {
        return Err(invalid(
            "workloads",
            format!(
                "{} pods at once (each deployment's and stateful set's largest replicas, each \
                 job's parallelism, each trace's limit, a DaemonSet pod per node) is more than \
                 the {MAX_PODS_AT_ONCE} a run may hold",
                c.pods
            ),
        ));
    }
    if c.nodes > MAX_NODES_AT_ONCE {
        return Err(invalid(
            "node_groups",
            format!(
                "{} nodes at once (the groups' max, or their replicas plus a node per pod, plus \
                 replicas-changed faults) is more than the {MAX_NODES_AT_ONCE} a run may hold",
                c.nodes
            ),
        ));
    }
    if c.work() > MAX_WORK {
        return Err(invalid(
            duration,
            format!(
                "{} loops (over options.scan-interval) of up to {} pods and nodes is {} \
                 object-loops, more than the {MAX_WORK} a run may do: shorten the duration, \
                 lengthen the scan interval or shrink the workloads",
                c.loops,
                c.pods + c.nodes,
                c.work()
            ),
        ));
    }
    Ok(c)
}

/// Refuses pod lifetimes that would start more than [`MAX_POD_STARTS`] pods over the run,
/// naming the first workload whose lifetime passes the bound.
pub fn check_starts(s: &Scenario, workloads: &[WorkloadFile]) -> Result<(), ScenarioError> {
    let c = estimate(s);
    if c.starts <= MAX_POD_STARTS {
        return Ok(());
    }
    let field = workloads
        .iter()
        .position(|w| matches!(w, WorkloadFile::Deployment(d) if d.pod_lifetime.is_some()))
        .map_or("workloads".to_string(), |i| {
            format!("workloads[{i}].pod_lifetime")
        });
    Err(invalid(
        field,
        format!(
            "the workloads would start {} pods over the run (replicas times duration / \
             pod_lifetime, and jobs' completions), more than the {MAX_POD_STARTS} a run may start",
            c.starts
        ),
    ))
}

/// Checks a `replicas-changed` fault's delta.
pub fn check_delta(field: &str, delta: i64) -> Result<(), ScenarioError> {
    if delta.unsigned_abs() > MAX_REPLICAS_CHANGE.unsigned_abs() {
        return Err(invalid(
            field,
            format!(
                "{delta} changes replicas by more than the {MAX_REPLICAS_CHANGE} nodes a group \
                 may start with"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn parse(text: &str) -> Result<Scenario, String> {
        Scenario::parse(text, Path::new(".")).map_err(|e| e.to_string())
    }

    fn scenario(duration: &str, groups: &str, workloads: &str) -> String {
        format!("name: t\nduration: {duration}\nnode_groups:\n{groups}\nworkloads:\n{workloads}\n")
    }

    const GROUP: &str = "- {name: a, min: 20, max: 20, cpu: '4', memory: 16Gi}";

    /// 200,000 replicas on 20 nodes, each field within its bound, once took 2.5 GB in 10 virtual
    /// seconds and ran for hours.
    #[test]
    fn pods_at_once_are_bounded() {
        let text = scenario(
            "1h",
            GROUP,
            "- {kind: deployment, name: d, replicas: 200000}",
        );
        let e = parse(&text).unwrap_err();
        assert!(
            e.starts_with("field `workloads`: 200000 pods at once"),
            "{e}"
        );
        // Several workloads add up; a DaemonSet counts a pod per node.
        let text = scenario(
            "1h",
            GROUP,
            "- {kind: deployment, name: d, replicas: 60000}\n\
             - {kind: stateful-set, name: s, replicas: 1, schedule: [{at: 1m, replicas: 50000}]}",
        );
        assert!(parse(&text).unwrap_err().contains("110000 pods at once"));
        let text = scenario(
            "1h",
            "- {name: a, min: 0, max: 20000, cpu: '4', memory: 16Gi}",
            "- {kind: deployment, name: d, replicas: 90000}\n- {kind: daemon-set, name: ds}",
        );
        assert!(parse(&text).unwrap_err().contains("110000 pods at once"));
    }

    #[test]
    fn loops_times_objects_are_bounded() {
        let text = scenario(
            "1000h",
            GROUP,
            "- {kind: deployment, name: d, replicas: 100000}",
        );
        let e = parse(&text).unwrap_err();
        assert!(e.starts_with("field `duration`: 360000 loops"), "{e}");
        assert!(e.contains("100020 pods and nodes"), "{e}");
        // The same workload over an hour is within the bound.
        let text = scenario(
            "1h",
            GROUP,
            "- {kind: deployment, name: d, replicas: 100000}",
        );
        let s = parse(&text).expect("within bounds");
        assert_eq!(estimate(&s).work(), 360 * 100_020);
    }

    /// A pod lifetime of 1 ms replaces each pod a thousand times a virtual second.
    #[test]
    fn pod_starts_are_bounded() {
        let text = scenario(
            "1h",
            GROUP,
            "- {kind: job, name: j, completions: 10, duration: 1m}\n\
             - {kind: deployment, name: d, replicas: 10, pod_lifetime: 1ms}",
        );
        let e = parse(&text).unwrap_err();
        assert!(e.starts_with("field `workloads[1].pod_lifetime`: "), "{e}");
        assert!(e.contains("36000020 pods"), "{e}");
        let text = scenario(
            "1h",
            GROUP,
            "- {kind: deployment, name: d, replicas: 10, pod_lifetime: 1s}",
        );
        assert_eq!(parse(&text).map(|s| estimate(&s).starts), Ok(36_010));
    }

    #[test]
    fn replicas_changed_deltas_are_bounded() {
        for delta in [i64::MAX, i64::MIN, 10_001] {
            let text = format!(
                "{}faults: [{{group: a, from: 1m, to: 2m, kind: replicas-changed, delta: {delta}}}]\n",
                scenario("1h", GROUP, "  []")
            );
            let e = parse(&text).unwrap_err();
            assert!(e.starts_with("field `faults[0].delta`: "), "{e}");
        }
        // Positive deltas add nodes beyond the groups' max.
        let text = format!(
            "{}faults: [{{group: a, from: 1m, to: 2m, kind: replicas-changed, delta: 10000}}]\n",
            scenario("1h", GROUP, "  []")
        );
        assert_eq!(parse(&text).map(|s| estimate(&s).nodes), Ok(10_020));
    }

    /// The examples (valid input) are within every bound; those replaying a trace that is not
    /// present are skipped.
    #[test]
    fn the_examples_are_within_bounds() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let mut most = 0;
        for entry in std::fs::read_dir(&dir).expect("examples") {
            let path = entry.expect("entry").path();
            // Scenarios only: an example's trace and its generator sit beside it.
            if path.extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read");
            match Scenario::parse(&text, &dir) {
                Ok(s) => most = most.max(check(&s, "duration").expect("within").work()),
                Err(ScenarioError::Trace { .. }) => {}
                Err(e) => panic!("{}: {e}", path.display()),
            }
        }
        assert!(most > 0 && most <= MAX_WORK / 2, "{most}");
    }
}

//! The safety invariants a simulation checks on every loop, so that every scenario and every
//! random fault schedule is also a test of them: the actions the core asks for never lower a
//! group's target below its live Machines or its min, never remove an instance already on its
//! way out, never grow a group in backoff, above its max or past `--max-nodes-total` or the
//! core limit; the world never loses a healthy Machine to a careless decrease; a node is never
//! deleted with pods that were not moved; with DRA drivers, no device is allocated twice nor
//! allocated where its claim's node does not publish it.
//!
//! It decides only whether an invariant held and records what broke. It never changes an
//! action or the world.

use autoscaler_clusterapi::ClusterApiProvider;
use autoscaler_core::Action;
use autoscaler_core::LoopOutcome;
use autoscaler_model::Node;
use autoscaler_model::ResourceLimits;
use autoscaler_model::{CloudProvider, InstanceState};
use autoscaler_world::{SimTime, UnmarkedDeletion};

/// How many violations are kept with their text.
const KEPT: usize = 50;

/// What the checks found over a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SafetyLog {
    /// Loops checked.
    pub checks: u64,
    /// Violations found.
    pub count: u64,
    /// The first of them, with their virtual time.
    pub violations: Vec<String>,
}

impl SafetyLog {
    /// Records a violation at `t`.
    pub fn violation(&mut self, t: SimTime, what: String) {
        self.count += 1;
        if self.violations.len() < KEPT {
            self.violations
                .push(format!("{}: {what}", super::report::clock(t)));
        }
    }
}

/// The violations in one loop's actions, judged against the provider and nodes the loop saw.
pub fn check_actions(
    outcome: &LoopOutcome,
    provider: &ClusterApiProvider,
    nodes: &[std::sync::Arc<Node>],
    limits: &ResourceLimits,
) -> Vec<String> {
    let mut out = Vec::new();
    let groups = provider.node_groups();
    let mut grown = 0usize;
    let mut grown_cpu = 0i64;
    for action in &outcome.actions {
        match action {
            Action::IncreaseSize { .. } | Action::AtomicIncreaseSize { .. } => {
                for inc in action.increases() {
                    let (group, new_target) = (&inc.group, &inc.new_target);
                    let Some(g) = groups.iter().find(|g| g.id() == group) else {
                        continue;
                    };
                    let delta = new_target.saturating_sub(g.target_size());
                    grown += delta;
                    if let Some(t) = &g.template() {
                        grown_cpu += t.allocatable.cpu.saturating_mul(delta as i64);
                    }
                    let status = outcome.status.groups.iter().find(|s| s.id == *group);
                    if let Some(b) = status.and_then(|s| s.backoff.as_ref()) {
                        out.push(format!(
                            "{group} grown to {new_target} inside its backoff ({})",
                            b.reason.code
                        ));
                    }
                    if *new_target > g.max_size() {
                        out.push(format!(
                            "{group} grown to {new_target}, above its max {}",
                            g.max_size()
                        ));
                    }
                }
            }
            Action::DecreaseTargetSize { group, delta } => {
                let Some(r) = provider.resource(group.as_str()) else {
                    continue;
                };
                let live = r
                    .machines
                    .iter()
                    .filter(|m| m.state != InstanceState::Deleting)
                    .count() as i64;
                let target = r.replicas - *delta as i64;
                if target < live {
                    out.push(format!(
                        "{group}: target lowered to {target}, below its {live} live machines"
                    ));
                }
                if target < r.min_size as i64 {
                    out.push(format!(
                        "{group}: target lowered to {target}, below its min {}",
                        r.min_size
                    ));
                }
            }
            Action::DeleteInstances {
                group, instances, ..
            } => {
                let Some(r) = provider.resource(group.as_str()) else {
                    continue;
                };
                for id in instances {
                    let again = r
                        .machines
                        .iter()
                        .any(|m| m.instance_id == *id && m.state == InstanceState::Deleting);
                    if again {
                        out.push(format!(
                            "{group}: instance {id} removed again while being deleted"
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    if grown > 0 {
        check_limits(&mut out, outcome, nodes, limits, grown, grown_cpu);
    }
    out
}

/// `--max-nodes-total` and the core limit, on what the cluster becomes once every node on its
/// way and every node asked for in this loop has registered.
fn check_limits(
    out: &mut Vec<String>,
    outcome: &LoopOutcome,
    nodes: &[std::sync::Arc<Node>],
    limits: &ResourceLimits,
    grown: usize,
    grown_cpu: i64,
) {
    let s = &outcome.status;
    let upcoming: usize = s.groups.iter().map(|g| g.upcoming).sum();
    let settled = s.total_nodes - s.being_deleted - s.not_started;
    let total = settled + upcoming + grown;
    if limits.max_nodes_total > 0 && total > limits.max_nodes_total {
        out.push(format!(
            "grown to {total} nodes, above --max-nodes-total {}",
            limits.max_nodes_total
        ));
    }
    let cpu: i64 = nodes.iter().map(|n| n.capacity.cpu).sum::<i64>() + grown_cpu;
    if cpu > limits.cpu.max() {
        out.push(format!(
            "grown to {} cores, above the max {}",
            cpu / 1000,
            limits.cpu.max() / 1000
        ));
    }
}

/// The careless deletions among `new`: healthy unmarked Machines a set deleted, except in a
/// group whose replicas someone else lowered (`lowered_by_others`, group names).
pub fn careless(new: &[UnmarkedDeletion], lowered_by_others: &[String]) -> Vec<String> {
    new.iter()
        .filter(|d| !lowered_by_others.contains(&d.group))
        .map(|d| {
            format!(
                "healthy Machine {} of {} (node {}) deleted by its set: a decrease without a marked Machine",
                d.machine, d.group, d.node
            )
        })
        .collect()
}

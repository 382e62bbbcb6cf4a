//! `--drain-priority-config` (upstream's priority evictor): which stage of a drain each pod is
//! evicted in, and the grace period its eviction gives it.
//!
//! The flag is a list of `priority:seconds` couples (`10000:20,1000:100,0:60`), sorted by
//! priority. A pod belongs to the couple with the highest priority not above its own (a pod below
//! the lowest couple belongs to the lowest, one above the highest to the highest; the rule is
//! upstream's search, ties included). A drain evicts the lowest couple's pods first, waits until
//! they are gone, then the next couple's, and so on; empty couples are skipped. Each eviction's
//! grace period is the pod's own `terminationGracePeriodSeconds` (30 s when unset) capped by its
//! couple's seconds when those are above 0. DaemonSet pods (those the eviction flags evict) are
//! staged by their priority like any other: with the flag, upstream evicts them fully, so a
//! critical DaemonSet pod (priority 2000001000) goes last under a usual configuration.
//!
//! Without the flag nothing here applies: one stage, `--max-graceful-termination-sec` caps the
//! grace. It only decides the stages; the shells evict and wait. It never reads a clock.

use std::fmt;
use std::str::FromStr;

use crate::actions::{Action, PodEviction, PodRef};
use crate::scale_down::NodeDeletion;
use crate::scale_down::drain::DEFAULT_TERMINATION_GRACE_MS;
use autoscaler_model::Pod;

/// One `priority:seconds` couple.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainPriority {
    /// The lowest pod priority of the couple.
    pub priority: i32,
    /// The longest grace period given to its pods, seconds (0 or less: the pod's own).
    pub grace_sec: i64,
}

/// A parsed `--drain-priority-config`: its couples in ascending priority (never empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrainPriorityConfig {
    groups: Vec<DrainPriority>,
}

/// Why a `--drain-priority-config` value is refused (upstream refuses the same and exits).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DrainPriorityError {
    /// The value is empty.
    #[error("no priority:seconds couple given")]
    Empty,
    /// An item is not two parts separated by one ':'.
    #[error("{item:?} is not a priority and grace period couple separated by ':'")]
    NotACouple {
        /// The item.
        item: String,
    },
    /// A part is not an integer (or the priority does not fit a 32-bit pod priority).
    #[error("{item:?}: the {part} {value:?} is not an integer")]
    NotInteger {
        /// The item.
        item: String,
        /// `priority` or `grace period`.
        part: &'static str,
        /// The text.
        value: String,
    },
}

impl FromStr for DrainPriorityConfig {
    type Err = DrainPriorityError;

    /// Upstream's rules: items separated by ',', each exactly `priority:seconds`, both decimal
    /// integers with an optional sign and no spaces.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.is_empty() {
            return Err(DrainPriorityError::Empty);
        }
        let mut groups = Vec::new();
        for item in text.split(',') {
            let parts: Vec<&str> = item.split(':').collect();
            let [p, g] = parts[..] else {
                return Err(DrainPriorityError::NotACouple { item: item.into() });
            };
            let bad = |part, value: &str| DrainPriorityError::NotInteger {
                item: item.into(),
                part,
                value: value.into(),
            };
            let priority: i32 = p.parse().map_err(|_| bad("priority", p))?;
            let grace_sec: i64 = g.parse().map_err(|_| bad("grace period", g))?;
            groups.push(DrainPriority {
                priority,
                grace_sec,
            });
        }
        // Stable: couples of equal priority keep their order.
        groups.sort_by_key(|g| g.priority);
        Ok(DrainPriorityConfig { groups })
    }
}

impl fmt::Display for DrainPriorityConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, g) in self.groups.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}:{}", g.priority, g.grace_sec)?;
        }
        Ok(())
    }
}

impl DrainPriorityConfig {
    /// The couples, in ascending priority.
    pub fn groups(&self) -> &[DrainPriority] {
        &self.groups
    }

    /// The stage (index of the couple) of a pod of `priority`: the first couple whose priority
    /// is at least the pod's, stepped back one when it is above it (upstream's search).
    pub fn stage_of(&self, priority: i32) -> usize {
        let i = self.groups.partition_point(|g| g.priority < priority);
        if i == self.groups.len() {
            return self.groups.len().saturating_sub(1);
        }
        if i > 0 && self.groups[i].priority > priority {
            return i - 1;
        }
        i
    }

    /// The grace period the eviction of `pod` gives it, seconds: its own (30 s when unset),
    /// capped by its couple's when that is above 0.
    pub fn grace_sec(&self, pod: &Pod) -> u64 {
        let own = pod
            .termination_grace_ms
            .unwrap_or(DEFAULT_TERMINATION_GRACE_MS)
            .max(0)
            / 1000;
        let cap = self.groups[self.stage_of(pod.priority)].grace_sec;
        let sec = if cap > 0 { own.min(cap) } else { own };
        u64::try_from(sec).unwrap_or(0)
    }

    /// The evictions of `pods` in stage order (stable within a stage), each with its stage and
    /// grace period.
    pub fn evictions(&self, pods: &[std::sync::Arc<Pod>]) -> Vec<PodEviction> {
        let mut out: Vec<PodEviction> = pods
            .iter()
            .map(|p| PodEviction {
                pod: PodRef {
                    namespace: p.namespace,
                    name: p.name.as_arc().clone(),
                },
                grace_period_sec: self.grace_sec(p),
                stage: u32::try_from(self.stage_of(p.priority)).unwrap_or(u32::MAX),
            })
            .collect();
        out.sort_by_key(|e| e.stage);
        out
    }
}

/// Rewrites the evictions of the drains in `actions` into `config`'s stages, from the pods of
/// the matching `deletions`.
pub(crate) fn stage_drains(
    actions: &mut [Action],
    deletions: &[NodeDeletion],
    config: &DrainPriorityConfig,
) {
    for a in actions {
        if let Action::DrainAndDelete { node, evict, .. } = a
            && let Some(d) = deletions.iter().find(|d| d.node == *node)
        {
            *evict = config.evictions(&d.evict);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_model::testing::{GI, PodBuilder};
    use std::sync::Arc;

    fn cfg(text: &str) -> DrainPriorityConfig {
        text.parse().unwrap()
    }

    fn pod(name: &str, priority: i32, grace_sec: Option<i64>) -> Arc<Pod> {
        let mut p = PodBuilder::new(name, 100, GI).build();
        p.priority = priority;
        p.termination_grace_ms = grace_sec.map(|s| s * 1000);
        Arc::new(p)
    }

    /// Upstream's parse: items by ',', couples by ':', integers (sign allowed), anything else
    /// refused (upstream exits with "Invalid configuration, parsing --drain-priority-config").
    #[test]
    fn parses_as_upstream_and_refuses_the_rest() {
        let c = cfg("10000:20,1000:100,0:60");
        let got: Vec<(i32, i64)> = c
            .groups()
            .iter()
            .map(|g| (g.priority, g.grace_sec))
            .collect();
        assert_eq!(
            got,
            [(0, 60), (1000, 100), (10000, 20)],
            "sorted by priority"
        );
        assert_eq!(c.to_string(), "0:60,1000:100,10000:20");
        assert_eq!(cfg("-10:+5").groups()[0].priority, -10);
        assert_eq!(
            "".parse::<DrainPriorityConfig>(),
            Err(DrainPriorityError::Empty)
        );
        for bad in [
            "10000",
            "10000:20:5",
            "10000:20,",
            ",0:60",
            "a:20",
            "10:b",
            " 10:20",
            "10: 20",
            "1.5:20",
            "3000000000:20",
        ] {
            let e = bad.parse::<DrainPriorityConfig>();
            assert!(e.is_err(), "{bad:?} must be refused");
        }
        assert_eq!(
            "10000:20:5"
                .parse::<DrainPriorityConfig>()
                .unwrap_err()
                .to_string(),
            "\"10000:20:5\" is not a priority and grace period couple separated by ':'"
        );
    }

    /// Upstream's group index: below the lowest → the lowest; above the highest → the
    /// highest; between two → the lower; equal → that couple.
    #[test]
    fn a_pod_belongs_to_the_highest_couple_not_above_its_priority() {
        let c = cfg("10000:20,1000:100,0:60");
        for (priority, stage) in [
            (-5, 0),
            (0, 0),
            (999, 0),
            (1000, 1),
            (5000, 1),
            (10000, 2),
            (2_000_001_000, 2),
        ] {
            assert_eq!(c.stage_of(priority), stage, "priority {priority}");
        }
        let one = cfg("100:30");
        assert_eq!(
            (one.stage_of(-1), one.stage_of(100), one.stage_of(101)),
            (0, 0, 0)
        );
    }

    /// Each eviction's grace: the pod's own (30 s unset), capped by its couple's seconds when
    /// those are above 0; a couple of 0 (or less) leaves the pod's own.
    #[test]
    fn grace_is_the_pods_own_capped_by_its_couple() {
        let c = cfg("10000:20,1000:100,0:0");
        assert_eq!(c.grace_sec(&pod("hi", 20000, Some(300))), 20);
        assert_eq!(c.grace_sec(&pod("hi-short", 20000, Some(5))), 5);
        assert_eq!(c.grace_sec(&pod("mid", 1000, None)), 30);
        assert_eq!(c.grace_sec(&pod("mid-long", 1000, Some(300))), 100);
        assert_eq!(c.grace_sec(&pod("low", 0, Some(900))), 900, "0: no cap");
    }

    /// The loop's hook: a drain's evictions are rewritten from its deletion's pods, other
    /// actions left alone.
    #[test]
    fn the_drains_of_a_plan_are_staged() {
        use autoscaler_model::{NodeGroupId, Sym};
        let c = cfg("1000:10,0:60");
        let pods = vec![pod("db", 1000, Some(300)), pod("web", 0, None)];
        let deletion = NodeDeletion {
            node: Sym::new("n1"),
            group_index: 0,
            group: NodeGroupId::from("g"),
            empty: false,
            evict: pods,
            destinations: Vec::new(),
            grace_period_sec: 600,
            sequential_evictions: false,
        };
        let mut actions = crate::actions::scale_down_actions(
            &crate::scale_down::ScaleDownPlan {
                deletions: vec![deletion.clone()],
                ..Default::default()
            },
            0,
        );
        let before = actions.clone();
        stage_drains(&mut actions, &[deletion], &c);
        assert_eq!(actions.len(), before.len());
        assert_eq!(actions[0], before[0], "the taint is left alone");
        let Action::DrainAndDelete { evict, .. } = &actions[1] else {
            panic!("{actions:?}");
        };
        let got: Vec<(&str, u32, u64)> = evict
            .iter()
            .map(|e| (&*e.pod.name, e.stage, e.grace_period_sec))
            .collect();
        assert_eq!(got, [("web", 0, 30), ("db", 1, 10)]);
    }

    /// Evictions come lowest stage first, stable within a stage.
    #[test]
    fn evictions_are_ordered_by_stage() {
        let c = cfg("10000:20,1000:100,0:60");
        let pods = [
            pod("critical", 2_000_001_000, None),
            pod("web", 0, None),
            pod("db", 1500, Some(600)),
            pod("batch", -10, None),
        ];
        let got: Vec<(String, u32, u64)> = c
            .evictions(&pods)
            .into_iter()
            .map(|e| (e.pod.name.to_string(), e.stage, e.grace_period_sec))
            .collect();
        assert_eq!(
            got,
            [
                ("web".to_string(), 0, 30),
                ("batch".to_string(), 0, 30),
                ("db".to_string(), 1, 100),
                ("critical".to_string(), 2, 20),
            ]
        );
    }
}

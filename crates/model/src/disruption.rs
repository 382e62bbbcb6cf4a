//! Per-group consolidation settings (ours, beyond upstream; read from annotations of the group's
//! MachineDeployment or MachineSet): whether and how the group is consolidated, its disruption
//! budgets and the windows they apply in, and its nodes' lifetime.
//!
//! It decides what each annotation text means and whether it is acceptable; a malformed value
//! never panics: it is reported as a warning naming the object and the annotation, and the
//! group falls back to the safe side (see [`GroupDisruption`]). Budgets are modelled on
//! Karpenter's NodePool `disruption.budgets`: `nodes` is a count or a percentage of the group's
//! nodes (rounded up), a budget with a `schedule` (cron, UTC) and a `duration` applies only from
//! each time the schedule hits for that long, and the most restrictive active budget wins. It
//! never reads a clock: the time is passed in.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::duration::parse_duration;

/// What a group's consolidation annotation asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupConsolidation {
    /// The group is never consolidated.
    Off,
    /// Its nodes may be deleted when their pods fit elsewhere.
    Delete,
    /// Its nodes may also be replaced by a cheaper node.
    Replace,
}

impl FromStr for GroupConsolidation {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(GroupConsolidation::Off),
            "delete" => Ok(GroupConsolidation::Delete),
            "replace" => Ok(GroupConsolidation::Replace),
            other => Err(format!(
                "{other:?} is not a consolidation mode (expected off, delete or replace)"
            )),
        }
    }
}

/// How many nodes a budget lets go at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetNodes {
    /// At most this many.
    Count(usize),
    /// At most this percentage of the group's nodes, rounded up.
    Percent(u8),
}

impl BudgetNodes {
    /// The nodes allowed out of `total`.
    pub fn of(self, total: usize) -> usize {
        match self {
            BudgetNodes::Count(n) => n,
            BudgetNodes::Percent(p) => (total * usize::from(p)).div_ceil(100),
        }
    }
}

/// One disruption budget of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeBudget {
    /// The nodes it allows at once.
    pub nodes: BudgetNodes,
    /// When it starts to apply (a 5-field cron schedule or a `@daily`-like macro, UTC), with
    /// `duration`; none: always.
    pub schedule: Option<Arc<str>>,
    /// How long it applies after each time the schedule hits.
    pub duration: Option<Duration>,
}

impl NodeBudget {
    /// Whether the budget applies at `now_ms`: always without a schedule; otherwise when the
    /// schedule hit within the last `duration` (a hit exactly `duration` ago does not count,
    /// one at `now_ms` does), as Karpenter's budgets.
    pub fn is_active(&self, now_ms: i64) -> bool {
        let (Some(schedule), Some(duration)) = (&self.schedule, self.duration) else {
            return true;
        };
        // Checked when parsed; a schedule that no longer parses applies (the safe side).
        let Ok(cron) = parse_schedule(schedule) else {
            return true;
        };
        let window = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        let Some(start) = chrono::DateTime::from_timestamp_millis(now_ms.saturating_sub(window))
        else {
            return true;
        };
        match cron.find_next_occurrence(&start, false) {
            Ok(next) => next.timestamp_millis() <= now_ms,
            Err(_) => false,
        }
    }
}

/// A group's consolidation settings. `Default`: none given (the cluster-wide settings apply,
/// no budget but `--max-drain-parallelism`, no lifetime).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupDisruption {
    /// The mode asked for (`None`: `--consolidation`'s). A malformed value is read as
    /// [`GroupConsolidation::Off`].
    pub consolidation: Option<GroupConsolidation>,
    /// The budgets; the most restrictive active one applies. A malformed list is read as one
    /// budget of 0 nodes (nothing is consolidated), as Karpenter fails closed.
    pub budgets: Vec<NodeBudget>,
    /// Nodes older than this are replaced (Karpenter's `expireAfter`; `None`: never).
    pub expire_after: Option<Duration>,
    /// Nodes younger than this are not consolidated. A malformed value is read as "never old
    /// enough" (nothing is consolidated).
    pub min_node_age: Option<Duration>,
}

impl GroupDisruption {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == GroupDisruption::default()
    }

    /// The nodes that may be disrupted at once out of the group's `total` at `now_ms` (`None`:
    /// no budget applies).
    pub fn allowed(&self, total: usize, now_ms: i64) -> Option<usize> {
        (self.budgets.iter())
            .filter(|b| b.is_active(now_ms))
            .map(|b| b.nodes.of(total))
            .min()
    }
}

/// The annotation texts of one group, by setting (each `None` when absent).
#[derive(Clone, Copy, Debug, Default)]
pub struct DisruptionAnnotations<'a> {
    /// `off`, `delete` or `replace`.
    pub consolidation: Option<(&'a str, &'a str)>,
    /// A JSON list of budgets.
    pub budgets: Option<(&'a str, &'a str)>,
    /// A duration, or `Never`.
    pub expire_after: Option<(&'a str, &'a str)>,
    /// A duration.
    pub min_node_age: Option<(&'a str, &'a str)>,
}

/// The settings of one group from its annotations, as `(key, text)`; each malformed value is
/// reported in `warnings` (prefixed by `what`) and read on the safe side.
pub fn group_disruption(
    ann: DisruptionAnnotations<'_>,
    what: &str,
    warnings: &mut Vec<String>,
) -> GroupDisruption {
    let mut out = GroupDisruption::default();
    if let Some((key, text)) = ann.consolidation {
        out.consolidation = Some(text.trim().parse().unwrap_or_else(|e| {
            warnings.push(format!(
                "{what}: annotation {key}: {e}; the group is not consolidated"
            ));
            GroupConsolidation::Off
        }));
    }
    if let Some((key, text)) = ann.budgets {
        out.budgets = parse_budgets(text).unwrap_or_else(|e| {
            warnings.push(format!(
                "{what}: annotation {key}: {e}; no node of the group is consolidated"
            ));
            vec![NodeBudget {
                nodes: BudgetNodes::Count(0),
                schedule: None,
                duration: None,
            }]
        });
    }
    if let Some((key, text)) = ann.expire_after {
        let text = text.trim();
        out.expire_after = if text == "Never" {
            None
        } else {
            match parse_duration(text) {
                Ok(d) if !d.is_zero() => Some(d),
                Ok(_) => {
                    warnings.push(format!(
                        "{what}: annotation {key}: must be greater than 0 (or Never); nodes do not expire"
                    ));
                    None
                }
                Err(e) => {
                    warnings.push(format!(
                        "{what}: annotation {key}: {e}; nodes do not expire"
                    ));
                    None
                }
            }
        };
    }
    if let Some((key, text)) = ann.min_node_age {
        out.min_node_age = Some(parse_duration(text.trim()).unwrap_or_else(|e| {
            warnings.push(format!(
                "{what}: annotation {key}: {e}; no node of the group is consolidated"
            ));
            Duration::MAX
        }));
    }
    out
}

/// A budget as written: Karpenter's field names.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetText {
    nodes: serde_json::Value,
    #[serde(default)]
    schedule: Option<String>,
    #[serde(default)]
    duration: Option<String>,
}

/// Longest budget list read (a group needs a handful).
const MAX_BUDGETS: usize = 50;

/// Parses a JSON list of budgets, e.g.
/// `[{"nodes": "20%"}, {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"}]`.
pub fn parse_budgets(text: &str) -> Result<Vec<NodeBudget>, String> {
    let list: Vec<BudgetText> =
        serde_json::from_str(text).map_err(|e| format!("not a list of budgets: {e}"))?;
    if list.len() > MAX_BUDGETS {
        return Err(format!("more than {MAX_BUDGETS} budgets"));
    }
    list.into_iter()
        .enumerate()
        .map(|(i, b)| parse_budget(b).map_err(|e| format!("budget [{i}]: {e}")))
        .collect()
}

fn parse_budget(b: BudgetText) -> Result<NodeBudget, String> {
    let nodes = match &b.nodes {
        serde_json::Value::String(s) => parse_nodes(s)?,
        serde_json::Value::Number(n) => parse_nodes(&n.to_string())?,
        other => return Err(format!("nodes {other} is not a count or a percentage")),
    };
    let (schedule, duration) = match (b.schedule, b.duration) {
        (None, None) => (None, None),
        (Some(s), Some(d)) => {
            parse_schedule(&s).map_err(|e| format!("schedule {s:?}: {e}"))?;
            let d = parse_duration(d.trim()).map_err(|e| format!("duration: {e}"))?;
            (Some(Arc::from(s.trim())), Some(d))
        }
        _ => return Err("schedule and duration go together".to_string()),
    };
    Ok(NodeBudget {
        nodes,
        schedule,
        duration,
    })
}

/// `"5"` or `"20%"` (0% to 100%), digits only.
fn parse_nodes(s: &str) -> Result<BudgetNodes, String> {
    let bad = || format!("nodes {s:?} is not a count or a percentage (0% to 100%)");
    let (digits, percent) = match s.strip_suffix('%') {
        Some(p) => (p, true),
        None => (s, false),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    if percent {
        match digits.parse::<u8>() {
            Ok(p) if p <= 100 => Ok(BudgetNodes::Percent(p)),
            _ => Err(bad()),
        }
    } else {
        digits
            .parse::<usize>()
            .map(BudgetNodes::Count)
            .map_err(|_| bad())
    }
}

/// A 5-field cron schedule or one of `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`,
/// `@midnight`, `@hourly` (Karpenter's set).
fn parse_schedule(text: &str) -> Result<croner::Cron, String> {
    let t = text.trim();
    let t = if t.eq_ignore_ascii_case("@midnight") {
        "@daily"
    } else {
        t
    };
    if !t.starts_with('@') && t.split_whitespace().count() != 5 {
        return Err("not 5 fields (minute hour day-of-month month day-of-week)".to_string());
    }
    croner::Cron::from_str(t).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2025-12-01 (a Monday) at `h:m` UTC, in ms.
    fn monday(h: i64, m: i64) -> i64 {
        1_764_547_200_000 + (h * 60 + m) * 60_000
    }

    fn budgets(text: &str) -> GroupDisruption {
        GroupDisruption {
            budgets: parse_budgets(text).unwrap(),
            ..GroupDisruption::default()
        }
    }

    #[test]
    fn counts_and_percentages_round_up_and_the_smallest_active_wins() {
        let g = budgets(r#"[{"nodes": "20%"}, {"nodes": 3}]"#);
        assert_eq!(g.allowed(10, 0), Some(2));
        assert_eq!(g.allowed(11, 0), Some(3), "20% of 11 rounds up to 3");
        assert_eq!(g.allowed(100, 0), Some(3));
        assert_eq!(budgets("[]").allowed(10, 0), None);
        assert_eq!(budgets(r#"[{"nodes": "5%"}]"#).allowed(10, 0), Some(1));
        assert_eq!(budgets(r#"[{"nodes": "0%"}]"#).allowed(10, 0), Some(0));
    }

    /// Weekdays 9:00 to 17:00 UTC: none; otherwise 10%.
    #[test]
    fn a_scheduled_budget_applies_for_its_duration_after_each_hit() {
        let g = budgets(
            r#"[{"nodes": "10%"}, {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"}]"#,
        );
        assert_eq!(g.allowed(10, monday(8, 59)), Some(1));
        assert_eq!(g.allowed(10, monday(9, 0)), Some(0), "a hit now counts");
        assert_eq!(g.allowed(10, monday(16, 59)), Some(0));
        assert_eq!(
            g.allowed(10, monday(17, 0)),
            Some(1),
            "a hit exactly the duration ago does not"
        );
        // Sunday 2025-11-30 at noon: no hit within 8 hours.
        assert_eq!(g.allowed(10, monday(-12, 0)), Some(1));
        let daily = budgets(r#"[{"nodes": 0, "schedule": "@midnight", "duration": "1h"}]"#);
        assert_eq!(daily.allowed(10, monday(0, 30)), Some(0));
        assert_eq!(daily.allowed(10, monday(1, 30)), None);
    }

    #[test]
    fn malformed_budgets_are_refused_with_why() {
        for (text, why) in [
            ("nope", "not a list of budgets"),
            (r#"[{"nodes": "101%"}]"#, "nodes \"101%\""),
            (r#"[{"nodes": "-1"}]"#, "nodes \"-1\""),
            (r#"[{"nodes": "x%"}]"#, "nodes \"x%\""),
            (r#"[{"nodes": true}]"#, "nodes true"),
            (r#"[{"nodes": "1", "schedule": "@daily"}]"#, "go together"),
            (
                r#"[{"nodes": "1", "schedule": "0 9 * *", "duration": "1h"}]"#,
                "not 5 fields",
            ),
            (
                r#"[{"nodes": "1", "schedule": "0 99 * * *", "duration": "1h"}]"#,
                "schedule",
            ),
            (
                r#"[{"nodes": "1", "schedule": "0 9 * * *", "duration": "1x"}]"#,
                "duration",
            ),
            (r#"[{"nodes": "1", "reasons": ["Drifted"]}]"#, "reasons"),
        ] {
            let e = parse_budgets(text).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
    }

    /// Each malformed annotation is a warning naming the object and the key, and the group
    /// falls on the safe side: not consolidated, or not expiring.
    #[test]
    fn malformed_annotations_warn_and_fall_on_the_safe_side() {
        let mut w = Vec::new();
        let g = group_disruption(
            DisruptionAnnotations {
                consolidation: Some(("k/consolidation", "on")),
                budgets: Some(("k/budgets", "[{")),
                expire_after: Some(("k/expire", "soon")),
                min_node_age: Some(("k/age", "-")),
            },
            "MachineDeployment ns/md",
            &mut w,
        );
        assert_eq!(g.consolidation, Some(GroupConsolidation::Off));
        assert_eq!(g.allowed(10, 0), Some(0));
        assert_eq!(g.expire_after, None);
        assert_eq!(g.min_node_age, Some(Duration::MAX));
        assert_eq!(w.len(), 4, "{w:?}");
        for (w, key) in w
            .iter()
            .zip(["k/consolidation", "k/budgets", "k/expire", "k/age"])
        {
            assert!(w.starts_with("MachineDeployment ns/md: annotation "), "{w}");
            assert!(w.contains(key), "{w}");
        }
        let mut w = Vec::new();
        let g = group_disruption(
            DisruptionAnnotations {
                consolidation: Some(("k", "replace")),
                expire_after: Some(("k", "720h")),
                min_node_age: Some(("k", "10m")),
                budgets: None,
            },
            "md",
            &mut w,
        );
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(g.consolidation, Some(GroupConsolidation::Replace));
        assert_eq!(g.expire_after, Some(Duration::from_secs(720 * 3600)));
        assert_eq!(g.min_node_age, Some(Duration::from_secs(600)));
        assert!(GroupDisruption::default().is_empty());
    }
}

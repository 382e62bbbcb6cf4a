//! The log lines of one loop's decisions, by upstream's `--v` levels: what was decided at
//! `info` (scale-up plans with the pods that triggered them, removals, the cluster state's
//! events: backoffs, timeouts, health changes) and why at `debug` (pods no group helps and each
//! group's reason, the groups considered, unneeded nodes with since when and why they wait, why
//! other nodes are not removable), the long tail at `trace`.
//!
//! [`lines_of`] is pure: it only reads what the core returned and never decides anything;
//! [`log`] writes the lines through `tracing`. Lists are capped so one loop of a large cluster
//! stays a few lines at `info`.

use std::fmt::Write as _;

use autoscaler_core::Waiting;
use autoscaler_core::{ClusterView, LoopOutcome};
use autoscaler_model::SCALED_UP_GROUP;
use tracing::Level;
use tracing::level_filters::LevelFilter;

/// Items named in one line before "(+N more)".
const LIST_CAP: usize = 10;

/// Per-object lines at `debug` before the rest go to `trace`.
const DEBUG_LINES_CAP: usize = 20;

/// One log line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// Its level.
    pub level: Level,
    /// Its text.
    pub message: String,
}

/// Debug for the first [`DEBUG_LINES_CAP`] lines of a kind in a loop, trace after.
fn capped_level(i: usize) -> Level {
    if i < DEBUG_LINES_CAP {
        Level::DEBUG
    } else {
        Level::TRACE
    }
}

/// The lines of one loop, each formatted only if the log writes its level: a loop with tens
/// of thousands of pending pods would otherwise format a reason per pod and group for nothing.
struct Lines {
    max: LevelFilter,
    lines: Vec<Line>,
}

impl Lines {
    fn push(&mut self, level: Level, message: impl FnOnce() -> String) {
        if self.max >= level {
            self.lines.push(Line {
                level,
                message: message(),
            });
        }
    }
}

/// `a, b, c (+N more)`.
fn capped<I: IntoIterator<Item = String>>(items: I, total: usize) -> String {
    let shown: Vec<String> = items.into_iter().take(LIST_CAP).collect();
    let mut s = shown.join(", ");
    if total > shown.len() {
        let _ = write!(s, " (+{} more)", total - shown.len());
    }
    s
}

fn time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(|_| ms.to_string(), |t| t.to_string())
}

/// The lines of `outcome`, decided on `view` at `now_ms`, at the levels `max` lets through
/// (the others are not formatted).
pub fn lines_of(
    view: &ClusterView<'_>,
    outcome: &LoopOutcome,
    now_ms: i64,
    max: LevelFilter,
) -> Vec<Line> {
    let mut out = Lines {
        max,
        lines: Vec::new(),
    };
    scale_up_lines(view, outcome, &mut out);
    scale_down_lines(outcome, now_ms, &mut out);
    for e in &outcome.events {
        // A scale-up is announced by its plan line.
        if e.reason == SCALED_UP_GROUP {
            continue;
        }
        let level = if e.warning { Level::WARN } else { Level::INFO };
        out.push(level, || {
            format!("{} ({}): {}", e.reason, e.object, e.message)
        });
    }
    out.lines
}

fn scale_up_lines(view: &ClusterView<'_>, outcome: &LoopOutcome, out: &mut Lines) {
    let up = &outcome.scale_up.result;
    let groups = view.provider.node_groups();
    if !up.increases.is_empty() || !up.no_scale_up.is_empty() {
        let considered = groups
            .iter()
            .map(|g| {
                format!(
                    "{} (target {}, min {}, max {})",
                    g.id(),
                    g.target_size(),
                    g.min_size(),
                    g.max_size()
                )
            })
            .collect::<Vec<_>>();
        let n = considered.len();
        out.push(Level::DEBUG, || {
            format!("node groups considered: {}", capped(considered, n))
        });
    }
    if !up.increases.is_empty() {
        let plan = crate::events::increases_text(&up.increases, groups, true);
        let pods = capped(up.triggered.iter().map(|p| p.key()), up.triggered.len());
        out.push(Level::INFO, || {
            format!(
                "Scale-up: final plan [{plan}] for {} pod(s): {pods}",
                up.triggered.len()
            )
        });
    }
    for note in &up.notes {
        out.push(Level::INFO, || format!("Scale-up: {note}"));
    }
    for (i, n) in up.no_scale_up.iter().enumerate() {
        out.push(capped_level(i), || {
            let reasons = crate::events::reasons_text(&n.reasons);
            format!(
                "pod {} is unschedulable and triggers no scale-up: {}",
                n.pod.key(),
                if reasons.is_empty() {
                    "no node group"
                } else {
                    &reasons
                }
            )
        });
    }
    let aside = outcome.scale_up.set_aside.len();
    let fit = outcome.scale_up.fit_existing.len();
    if aside + fit > 0 {
        out.push(Level::DEBUG, || {
            format!(
                "pending pods not needing a scale-up: {fit} fit existing or upcoming nodes, \
                 {aside} set aside"
            )
        });
    }
}

fn waiting_text(w: &Waiting) -> String {
    match w {
        Waiting::UnneededTime { deletable_at_ms } => {
            format!(
                "not unneeded long enough (deletable at {})",
                time(*deletable_at_ms)
            )
        }
        Waiting::MinSize => "its group would go below min size".into(),
        Waiting::Limit(l) => format!("a cluster-wide minimum would be crossed: {l}"),
        Waiting::Parallelism => "scale-down parallelism reached in this loop".into(),
        Waiting::Cooldown(why) => format!("scale-down in cooldown: {why}"),
    }
}

fn scale_down_lines(outcome: &LoopOutcome, now_ms: i64, out: &mut Lines) {
    let plan = &outcome.scale_down;
    for d in &plan.deletions {
        let message = if d.empty {
            format!(
                "Scale-down: removing empty node {} (group {})",
                d.node, d.group
            )
        } else {
            let pods = capped(d.evict.iter().map(|p| p.key()), d.evict.len());
            format!(
                "Scale-down: removing node {} (group {}), pods to reschedule: {pods}",
                d.node, d.group
            )
        };
        out.push(Level::INFO, || message);
        for (p, to) in &d.destinations {
            out.push(Level::DEBUG, || {
                format!(
                    "Scale-down: pod {} of node {} fits on {to}",
                    p.key(),
                    d.node
                )
            });
        }
    }
    for (i, (node, since)) in plan.unneeded.iter().enumerate() {
        out.push(capped_level(i), || {
            let waiting = plan
                .waiting
                .iter()
                .find(|(n, _)| n == node)
                .map(|(_, w)| format!("; waits: {}", waiting_text(w)))
                .unwrap_or_default();
            let secs = now_ms.saturating_sub(*since).max(0) / 1000;
            let age = if secs < 120 {
                format!("{secs}s")
            } else {
                format!("{}m", secs / 60)
            };
            format!(
                "node {node} is unneeded since {} ({age} ago){waiting}",
                time(*since)
            )
        });
    }
    for (i, (node, why)) in plan.unremovable.iter().enumerate() {
        out.push(capped_level(i), || {
            format!("node {node} is not removable: {why}")
        });
    }
}

/// Writes `lines` through `tracing`.
pub fn log(lines: &[Line]) {
    for l in lines {
        let m = &l.message;
        match l.level {
            Level::ERROR => tracing::error!("{m}"),
            Level::WARN => tracing::warn!("{m}"),
            Level::INFO => tracing::info!("{m}"),
            Level::DEBUG => tracing::debug!("{m}"),
            _ => tracing::trace!("{m}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_cluster::Cluster;

    fn texts(lines: &[Line], level: Level) -> Vec<&str> {
        lines
            .iter()
            .filter(|l| l.level == level)
            .map(|l| l.message.as_str())
            .collect()
    }

    #[test]
    fn a_scale_up_names_its_plan_pods_and_the_groups_considered() {
        // Too big for any node: never helped.
        let c = Cluster::new(3, 3).with_huge_pod();
        let view = c.view();
        let outcome = c.first_loop();
        let lines = lines_of(&view, &outcome, 0, LevelFilter::TRACE);
        let info = texts(&lines, Level::INFO);
        let plan = info
            .iter()
            .find(|m| m.starts_with("Scale-up: final plan [{ng 2->3 (max: 3)}] for "))
            .unwrap_or_else(|| panic!("{lines:#?}"));
        let first = outcome.scale_up.result.triggered[0].key();
        assert!(plan.contains(&first), "{plan}");
        let debug = texts(&lines, Level::DEBUG);
        assert!(
            debug
                .iter()
                .any(|m| m.starts_with("node groups considered: ng (target 2, min ")),
            "{lines:#?}"
        );
        assert!(
            debug.iter().any(|m| m.starts_with("pod ")
                && m.contains("/huge is unschedulable and triggers no scale-up: ng: ")),
            "{lines:#?}"
        );
        // The core's ScaledUpGroup event is not repeated as a line of its own.
        assert!(!lines.iter().any(|l| l.message.starts_with("ScaledUpGroup")));
    }

    /// Lines above the log's level are not produced (nor formatted); the rest are the same.
    #[test]
    fn lines_above_the_level_are_left_out() {
        let c = Cluster::new(3, 3).with_huge_pod();
        let view = c.view();
        let outcome = c.first_loop();
        let all = lines_of(&view, &outcome, 0, LevelFilter::TRACE);
        let info = lines_of(&view, &outcome, 0, LevelFilter::INFO);
        assert!(all.iter().any(|l| l.level == Level::DEBUG), "{all:#?}");
        let kept: Vec<_> = all.into_iter().filter(|l| l.level <= Level::INFO).collect();
        assert!(!kept.is_empty());
        assert_eq!(info, kept);
        assert!(lines_of(&view, &outcome, 0, LevelFilter::OFF).is_empty());
    }

    #[test]
    fn lists_are_capped() {
        let items = (0..25).map(|i| format!("p{i}"));
        let s = capped(items, 25);
        assert!(s.starts_with("p0, p1,"));
        assert!(s.ends_with("p9 (+15 more)"), "{s}");
        assert_eq!(capped(["a".to_string()], 1), "a");
    }

    #[test]
    fn a_waiting_node_says_until_when() {
        let w = Waiting::UnneededTime {
            deletable_at_ms: 1_700_000_600_000,
        };
        assert_eq!(
            waiting_text(&w),
            "not unneeded long enough (deletable at 2023-11-14T22:23:20Z)"
        );
    }
}

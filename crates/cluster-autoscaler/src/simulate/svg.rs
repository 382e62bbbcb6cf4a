//! The timeline plot of a report, as a hand-written SVG: nodes per group, their total and the
//! fluid bound (dashed), with a mark at each scale-up and each removal (top panel), and pending
//! pods (bottom panel) over virtual time, with labelled axes and a legend.
//!
//! It decides only the drawing; it never computes figures the report does not have.

use std::fmt::Write as _;

use autoscaler_model::SCALED_UP_GROUP;

use super::report::Report;

const W: f64 = 900.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 180.0;
const PANEL_H: f64 = 220.0;
const TOP1: f64 = 40.0;
const TOP2: f64 = TOP1 + PANEL_H + 70.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
];

/// A named, coloured series of `(seconds, value)` points, dashed or not.
type Series<'a> = (&'a str, &'a str, bool, Vec<(f64, f64)>);

/// Scale-up marks (below the top panel's plot area) and removal marks (above it).
const SCALE_UP_COLOR: &str = "#2ca02c";
const REMOVAL_COLOR: &str = "#d62728";

/// The x coordinate of `t_s` seconds in a plot of `dur_s` seconds.
fn x_of(t_s: f64, dur_s: f64) -> f64 {
    LEFT + t_s / dur_s.max(1.0) * (W - LEFT - RIGHT)
}

fn nice_max(v: f64) -> f64 {
    if v <= 1.0 {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if v <= m * mag {
            return m * mag;
        }
    }
    10.0 * mag
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One panel: axes, ticks, labels and a step line per series.
fn panel(o: &mut String, top: f64, title: &str, ylabel: &str, dur_s: f64, series: &[Series<'_>]) {
    let plot_w = W - LEFT - RIGHT;
    let ymax = nice_max(
        series
            .iter()
            .flat_map(|s| s.3.iter().map(|p| p.1))
            .fold(0.0, f64::max),
    );
    let x = |t: f64| x_of(t, dur_s);
    let y = |v: f64| top + PANEL_H - v / ymax * PANEL_H;
    let _ = writeln!(
        o,
        r#"<text x="{LEFT}" y="{}" font-size="15" font-weight="bold">{}</text>"#,
        top - 12.0,
        esc(title)
    );
    let _ = writeln!(
        o,
        r##"<rect x="{LEFT}" y="{top}" width="{plot_w}" height="{PANEL_H}" fill="none" stroke="#444"/>"##
    );
    for i in 0..=5 {
        let v = ymax * f64::from(i) / 5.0;
        let yy = y(v);
        let _ = writeln!(
            o,
            r##"<line x1="{LEFT}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ddd"/>"##,
            LEFT + plot_w
        );
        let _ = writeln!(
            o,
            r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            yy + 4.0,
            v.round()
        );
    }
    let hours = dur_s / 3600.0;
    let step_h = [0.25, 0.5, 1.0, 2.0, 4.0, 6.0, 12.0, 24.0, 48.0, 168.0]
        .into_iter()
        .find(|s| hours / s <= 10.0)
        .unwrap_or(336.0);
    let mut t = 0.0;
    while t <= hours + 1e-9 {
        let xx = x(t * 3600.0);
        let _ = writeln!(
            o,
            r##"<line x1="{xx:.1}" y1="{:.1}" x2="{xx:.1}" y2="{:.1}" stroke="#444"/>"##,
            top + PANEL_H,
            top + PANEL_H + 5.0
        );
        let label = format!("{}:{:02}", (t as u64), ((t.fract() * 60.0).round() as u64));
        let _ = writeln!(
            o,
            r#"<text x="{xx:.1}" y="{:.1}" font-size="12" text-anchor="middle">{label}</text>"#,
            top + PANEL_H + 18.0
        );
        t += step_h;
    }
    let _ = writeln!(
        o,
        r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">virtual time (h:mm)</text>"#,
        LEFT + plot_w / 2.0,
        top + PANEL_H + 36.0
    );
    let _ = writeln!(
        o,
        r#"<text x="18" y="{:.1}" font-size="12" text-anchor="middle" transform="rotate(-90 18 {:.1})">{}</text>"#,
        top + PANEL_H / 2.0,
        top + PANEL_H / 2.0,
        esc(ylabel)
    );
    for (i, (name, color, dashed, pts)) in series.iter().enumerate() {
        let mut d = String::new();
        let mut last: Option<f64> = None;
        for (t, v) in pts {
            match last {
                None => {
                    let _ = write!(d, "M{:.1},{:.1}", x(*t), y(*v));
                }
                Some(_) => {
                    let _ = write!(d, " H{:.1} V{:.1}", x(*t), y(*v));
                }
            }
            last = Some(*v);
        }
        let dash = if *dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let _ = writeln!(
            o,
            r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="2"{dash}/>"#
        );
        let ly = top + 14.0 + 20.0 * i as f64;
        let lx = LEFT + plot_w + 15.0;
        let _ = writeln!(
            o,
            r#"<line x1="{lx}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="3"{dash}/>"#,
            lx + 20.0
        );
        let _ = writeln!(
            o,
            r#"<text x="{:.1}" y="{:.1}" font-size="12">{}</text>"#,
            lx + 26.0,
            ly + 4.0,
            esc(name)
        );
    }
}

/// Small triangles at `times` (seconds) on the edge `y` of the top panel, pointing up or down;
/// marks closer than a pixel are drawn once. Returns how many were drawn.
fn marks(o: &mut String, times: &[f64], dur_s: f64, y: f64, up: bool, color: &str) -> usize {
    let mut last_px: Option<i64> = None;
    let mut drawn = 0;
    for &t in times {
        let x = x_of(t, dur_s);
        let px = x.round() as i64;
        if last_px == Some(px) {
            continue;
        }
        last_px = Some(px);
        let tip = if up { y - 7.0 } else { y + 7.0 };
        let _ = writeln!(
            o,
            r#"<path d="M{:.1},{y:.1} L{:.1},{y:.1} L{x:.1},{tip:.1} Z" fill="{color}"/>"#,
            x - 4.0,
            x + 4.0
        );
        drawn += 1;
    }
    drawn
}

/// A legend entry for a kind of mark, below the series' entries of the top panel.
fn mark_legend(o: &mut String, row: usize, label: &str, up: bool, color: &str) {
    let lx = W - RIGHT + 25.0;
    let ly = TOP1 + 14.0 + 20.0 * row as f64;
    let (base, tip) = if up {
        (ly + 4.0, ly - 4.0)
    } else {
        (ly - 4.0, ly + 4.0)
    };
    let _ = writeln!(
        o,
        r#"<path d="M{:.1},{base:.1} L{:.1},{base:.1} L{lx:.1},{tip:.1} Z" fill="{color}"/>"#,
        lx - 5.0,
        lx + 5.0
    );
    let _ = writeln!(
        o,
        r#"<text x="{:.1}" y="{:.1}" font-size="12">{}</text>"#,
        lx + 16.0,
        ly + 4.0,
        esc(label)
    );
}

/// The SVG document of a report's timeline.
pub fn timeline(r: &Report) -> String {
    let h = TOP2 + PANEL_H + 60.0;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" font-family="sans-serif">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let groups: Vec<Series<'_>> = r
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let pts = r
                .timeline
                .iter()
                .map(|p| (p.t_s, p.nodes.get(&g.group).copied().unwrap_or(0) as f64))
                .collect();
            (g.group.as_str(), COLORS[i % COLORS.len()], false, pts)
        })
        .collect();
    let mut top = groups;
    if r.groups.len() > 1 {
        let total = r
            .timeline
            .iter()
            .map(|p| (p.t_s, p.nodes.values().sum::<usize>() as f64))
            .collect();
        top.push(("total", "#000000", false, total));
    }
    let bound = r.timeline.iter().map(|p| (p.t_s, p.bound_nodes)).collect();
    top.push(("fluid bound", "#7f7f7f", true, bound));
    panel(
        &mut o,
        TOP1,
        &format!("{}: nodes per group", r.scenario),
        "registered nodes",
        r.duration_s,
        &top,
    );
    let ups: Vec<f64> = r
        .events
        .iter()
        .filter(|e| e.reason == SCALED_UP_GROUP)
        .map(|e| e.t_s)
        .collect();
    let removals: Vec<f64> = r.removals.iter().map(|x| x.t_s).collect();
    marks(
        &mut o,
        &ups,
        r.duration_s,
        TOP1 + PANEL_H,
        true,
        SCALE_UP_COLOR,
    );
    marks(&mut o, &removals, r.duration_s, TOP1, false, REMOVAL_COLOR);
    mark_legend(&mut o, top.len(), "scale-up", true, SCALE_UP_COLOR);
    mark_legend(&mut o, top.len() + 1, "removal", false, REMOVAL_COLOR);
    let pending = vec![(
        "pending pods",
        "#d62728",
        false,
        r.timeline
            .iter()
            .map(|p| (p.t_s, p.pending as f64))
            .collect(),
    )];
    panel(&mut o, TOP2, "pending pods", "pods", r.duration_s, &pending);
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plot_has_a_total_line_the_bound_and_scale_marks() {
        use super::super::report::{EventReport, GroupReport, Point, RemovalReport};
        use std::collections::BTreeMap;
        let group = |name: &str| GroupReport {
            group: name.into(),
            min: 0,
            max: 9,
            nodes_start: 0,
            nodes_end: 0,
            nodes_max: 0,
            node_hours: 0.0,
            price_per_hour: 0.0,
            cost: 0.0,
            scale_ups: 0,
            nodes_added: 0,
            scale_up_errors: 0,
            nodes_removed: 0,
            failed_provisionings: 0,
            instances_deleted: 0,
            target_decreases: 0,
            stale_marks_cleared: 0,
        };
        let point = |t_s: f64, a: usize, b: usize, bound_nodes: f64| Point {
            t_s,
            pending: 0,
            nodes: BTreeMap::from([("ns/a".to_string(), a), ("ns/b".to_string(), b)]),
            bound_nodes,
        };
        let up = |t_s: f64| EventReport {
            t_s,
            reason: SCALED_UP_GROUP.into(),
            object: "ns/a".into(),
            message: String::new(),
        };
        let r = Report {
            scenario: "s".into(),
            duration_s: 3600.0,
            groups: vec![group("ns/a"), group("ns/b")],
            timeline: vec![
                point(0.0, 1, 1, 0.5),
                point(1800.0, 3, 4, 6.25),
                point(3600.0, 1, 1, 1.0),
            ],
            // Two scale-ups in the same pixel, one later; one removal.
            events: vec![up(100.0), up(101.0), up(900.0)],
            removals: vec![RemovalReport {
                t_s: 2400.0,
                nodes: 5,
            }],
            ..Report::default()
        };
        let svg = timeline(&r);
        // The total (2, 7, 2 nodes) is drawn in black, at 7 = 7/10 of the panel's height.
        let x = |t: f64| x_of(t, 3600.0);
        let y = |v: f64| TOP1 + PANEL_H - v / 10.0 * PANEL_H;
        let total = format!(
            "M{:.1},{:.1} H{:.1} V{:.1}",
            x(0.0),
            y(2.0),
            x(1800.0),
            y(7.0)
        );
        assert!(svg.contains(&total), "no total line {total:?} in {svg}");
        assert!(svg.contains(">total</text>") && svg.contains(">fluid bound</text>"));
        assert!(svg.contains(&format!("V{:.1}", y(6.25))), "bound line");
        assert!(svg.contains(r#"stroke-dasharray="6 4""#));
        assert_eq!(
            svg.matches(&format!(r#"fill="{SCALE_UP_COLOR}""#)).count(),
            2 + 1
        );
        assert_eq!(
            svg.matches(&format!(r#"fill="{REMOVAL_COLOR}""#)).count(),
            1 + 1
        );
        // One group alone: no total line, the bound still.
        let one = Report {
            groups: vec![group("ns/a")],
            ..r
        };
        let svg = timeline(&one);
        assert!(!svg.contains(">total</text>") && svg.contains(">fluid bound</text>"));
    }

    #[test]
    fn axis_maxima_are_round() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(7.0), 10.0);
        assert_eq!(nice_max(13.0), 20.0);
        assert_eq!(nice_max(420.0), 500.0);
    }
}

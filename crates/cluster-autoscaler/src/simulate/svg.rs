//! The timeline plot of a report, as a hand-written SVG: nodes per group (top panel) and pending
//! pods (bottom panel) over virtual time, with labelled axes and a legend.
//!
//! It decides only the drawing; it never computes figures the report does not have.

use std::fmt::Write as _;

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

/// A named, coloured series of `(seconds, value)` points.
type Series<'a> = (&'a str, &'a str, Vec<(f64, f64)>);

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
            .flat_map(|s| s.2.iter().map(|p| p.1))
            .fold(0.0, f64::max),
    );
    let x = |t: f64| LEFT + t / dur_s.max(1.0) * plot_w;
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
    for (i, (name, color, pts)) in series.iter().enumerate() {
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
        let _ = writeln!(
            o,
            r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="2"/>"#
        );
        let ly = top + 14.0 + 20.0 * i as f64;
        let lx = LEFT + plot_w + 15.0;
        let _ = writeln!(
            o,
            r#"<line x1="{lx}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="3"/>"#,
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
            (g.group.as_str(), COLORS[i % COLORS.len()], pts)
        })
        .collect();
    panel(
        &mut o,
        TOP1,
        &format!("{}: nodes per group", r.scenario),
        "registered nodes",
        r.duration_s,
        &groups,
    );
    let pending = vec![(
        "pending pods",
        "#d62728",
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
    fn axis_maxima_are_round() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(7.0), 10.0);
        assert_eq!(nice_max(13.0), 20.0);
        assert_eq!(nice_max(420.0), 500.0);
    }
}

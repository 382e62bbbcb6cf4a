//! `simulate [SCENARIO]`: run the real decision core against a simulated cluster in virtual
//! time and report what happened (summary, `--report` JSON, `--plot` SVG).
//!
//! Input and output only: the scenario is parsed by [`scenario`], the loop is run by [`driver`],
//! figures come from [`report`]. Wall time is measured here and printed to stderr, never put in
//! the report, so that the same scenario and seed give a byte-identical report.

pub mod driver;
pub mod informer;
pub mod report;
pub mod scenario;
pub mod svg;
pub mod trace;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::CliError;
use scenario::{DEFAULT_SCENARIO, Scenario};

/// Flags of `simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// Scenario YAML (see docs/scenarios.md); default: the built-in scenario.
    #[arg(value_name = "SCENARIO")]
    pub scenario: Option<PathBuf>,
    /// Write the report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Write the timeline (nodes per group, pending pods) as SVG to this file.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Override the scenario's duration (e.g. `30m`).
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Override the scenario's seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print only the summary's last lines (no timeline table).
    #[arg(long)]
    pub quiet: bool,
}

/// Loads the scenario named by the flags (or the built-in one) with the overrides applied.
pub fn load(args: &SimulateArgs) -> Result<Scenario, CliError> {
    let (text, base, label) = match &args.scenario {
        Some(p) => (
            std::fs::read_to_string(p)
                .with_context(|| format!("cannot read scenario {}", p.display()))
                .map_err(CliError::usage)?,
            p.parent().map(Path::to_path_buf).unwrap_or_default(),
            p.display().to_string(),
        ),
        None => (
            DEFAULT_SCENARIO.to_string(),
            PathBuf::from("."),
            "built-in scenario".to_string(),
        ),
    };
    let mut s = Scenario::parse(&text, &base)
        .map_err(|e| CliError::usage(anyhow!("scenario {label}: {e}")))?;
    if let Some(d) = &args.duration {
        let d = autoscaler_core::duration::parse_duration(d)
            .map_err(|e| CliError::usage(anyhow!("--duration {d:?}: {e}")))?;
        s.duration = u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1);
    }
    if let Some(seed) = args.seed {
        s.seed = seed;
        s.options.seed = seed;
    }
    Ok(s)
}

/// Runs `simulate`.
pub fn run(args: &SimulateArgs) -> Result<(), CliError> {
    let s = load(args)?;
    let started = std::time::Instant::now();
    let bar = ProgressBar::with_draw_target(
        Some(s.duration / 1000),
        if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        },
    );
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {pos}/{len} virtual s ({elapsed}) {msg}")
    {
        bar.set_style(style);
    }
    let driver = driver::Driver::new(&s).map_err(|e| CliError::usage(anyhow!("{e}")))?;
    let log = driver.run(&mut |t| bar.set_position(t / 1000));
    bar.finish_and_clear();
    let wall = started.elapsed();
    let report = report::Report::new(&s, &log);
    let summary = report.summary();
    if args.quiet {
        let tail: Vec<&str> = summary
            .lines()
            .skip_while(|l| !l.starts_with("Node groups"))
            .collect();
        println!("{}", tail.join("\n"));
    } else {
        print!("{summary}");
    }
    eprintln!(
        "simulated {} of virtual time in {:.2}s of wall time",
        report::clock(s.duration),
        wall.as_secs_f64()
    );
    if let Some(p) = &args.report {
        std::fs::write(p, report.to_json())
            .with_context(|| format!("cannot write {}", p.display()))
            .map_err(CliError::io)?;
    }
    if let Some(p) = &args.plot {
        std::fs::write(p, svg::timeline(&report))
            .with_context(|| format!("cannot write {}", p.display()))
            .map_err(CliError::io)?;
    }
    Ok(())
}

//! `simulate [SCENARIO]`: run the real decision core against a simulated cluster in virtual
//! time and report what happened (summary, `--report` JSON, `--plot` SVG).
//!
//! Input and output only: the scenario is parsed by [`scenario`], the loop is run by [`driver`],
//! figures come from [`report`]. Wall time is measured here and printed to stderr, never put in
//! the report, so that the same scenario and seed give a byte-identical report.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::{cost, driver, report, scenario, svg};
use autoscaler_options::CliError;
use autoscaler_options::RunArgs;
use scenario::{CommandLine, DEFAULT_SCENARIO, Scenario, ScenarioError};

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
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub duration: Option<String>,
    /// Override the scenario's seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print only the summary's last lines (no timeline table).
    #[arg(long)]
    pub quiet: bool,
    /// Virtual time (e.g. `25m`) of the loop whose input `--snapshot-out` writes: the first loop
    /// at or after it.
    #[arg(
        long,
        value_name = "DURATION",
        requires = "snapshot_out",
        allow_hyphen_values = true
    )]
    pub snapshot_at: Option<String>,
    /// Write the world's objects, as the loop at `--snapshot-at` read them, as multi-document
    /// YAML (for `plan --snapshot`); a comment header gives the loop's clock (`plan --now`) and
    /// the actions it decided.
    #[arg(long, value_name = "FILE", requires = "snapshot_at")]
    pub snapshot_out: Option<PathBuf>,
    /// Every flag of `run` and `--config` (see the subcommand's help for their precedence and
    /// those without effect here).
    #[command(flatten)]
    pub run: RunArgs,
}

/// Loads the scenario named by the flags (or the built-in one) with the overrides applied.
pub fn load(args: &SimulateArgs) -> Result<Scenario, CliError> {
    let (text, base, label) = match &args.scenario {
        Some(p) => (
            autoscaler_options::read_bounded_text(
                p,
                autoscaler_options::SCENARIO_LIMIT,
                "scenario",
            )
            .map_err(|e| CliError::usage(e.into()))?,
            p.parent().map(Path::to_path_buf).unwrap_or_default(),
            p.display().to_string(),
        ),
        None => (
            DEFAULT_SCENARIO.to_string(),
            PathBuf::from("."),
            "built-in scenario".to_string(),
        ),
    };
    let file = match args.run.config() {
        Some(p) => {
            Some(autoscaler_options::load_config(&p).map_err(|e| CliError::usage(anyhow!("{e}")))?)
        }
        None => None,
    };
    let cli = CommandLine {
        args: &args.run,
        file: file.as_ref(),
    };
    let mut s = Scenario::parse_with(&text, &base, &cli).map_err(|e| match e {
        // The flags or the config file are at fault, and the message names them.
        ScenarioError::Options(e) => CliError::usage(anyhow!("{e}")),
        e => CliError::usage(anyhow!("scenario {label}: {e}")),
    })?;
    if let Some(d) = &args.duration {
        let d = autoscaler_model::parse_duration(d)
            .map_err(|e| CliError::usage(anyhow!("--duration {d:?}: {e}")))?;
        s.duration = u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1);
        scenario::check_loops(s.duration, s.scan_interval)
            .map_err(|e| CliError::usage(anyhow!("--duration {d:?}: {e}")))?;
        let flag = |e: ScenarioError| match e {
            ScenarioError::Invalid { field, message } if field == "--duration" => {
                CliError::usage(anyhow!("--duration {d:?}: {message}"))
            }
            e => CliError::usage(anyhow!("scenario {label} with --duration {d:?}: {e}")),
        };
        cost::check(&s, "--duration").map_err(flag)?;
        cost::check_starts(&s, &[]).map_err(flag)?;
        // Memory for samples stays bounded whatever the duration: coarsen them if needed.
        s.sample_interval = s
            .sample_interval
            .max(s.duration.div_ceil(scenario::MAX_SAMPLES));
    }
    if let Some(seed) = args.seed {
        s.seed = seed;
        s.options.seed = seed;
    }
    Ok(s)
}

/// `--snapshot-at` in virtual milliseconds; a time at or past the end of the run is refused
/// before it starts.
fn snapshot_at(args: &SimulateArgs, s: &Scenario) -> Result<Option<u64>, CliError> {
    let Some(at) = &args.snapshot_at else {
        return Ok(None);
    };
    let d = autoscaler_model::parse_duration(at)
        .map_err(|e| CliError::usage(anyhow!("--snapshot-at {at:?}: {e}")))?;
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if ms >= s.duration {
        return Err(CliError::usage(anyhow!(
            "--snapshot-at {at:?} is not before the end of the run ({})",
            report::clock(s.duration)
        )));
    }
    Ok(Some(ms))
}

/// Creates every output file before the run, so an unwritable path is reported at once rather
/// than after the whole run: a path that cannot be written is bad input (exit 2), named with
/// its flag.
fn open_outputs(
    args: &SimulateArgs,
) -> Result<Vec<(&'static str, PathBuf, std::fs::File)>, CliError> {
    let mut files = Vec::new();
    for (flag, p) in [
        ("--snapshot-out", &args.snapshot_out),
        ("--report", &args.report),
        ("--plot", &args.plot),
    ] {
        if let Some(p) = p {
            let f = std::fs::File::create(p)
                .with_context(|| format!("{flag} {}: cannot create", p.display()))
                .map_err(CliError::usage)?;
            files.push((flag, p.clone(), f));
        }
    }
    Ok(files)
}

/// Writes `text` to an output opened by [`open_outputs`].
fn write_output(
    files: &mut [(&'static str, PathBuf, std::fs::File)],
    path: &Path,
    text: &str,
) -> Result<(), CliError> {
    use std::io::Write;
    let Some((flag, _, f)) = files.iter_mut().find(|(_, p, _)| p == path) else {
        return Ok(());
    };
    f.write_all(text.as_bytes())
        .and_then(|()| f.flush())
        .with_context(|| format!("{flag} {}: cannot write", path.display()))
        .map_err(CliError::usage)
}

/// Runs `simulate`.
pub fn run(args: &SimulateArgs) -> Result<(), CliError> {
    let s = load(args)?;
    // A flag asking for a feature this autoscaler does not have is said, never silent.
    for u in args.run.compat.unsupported() {
        eprintln!("warning: {u}");
    }
    let snapshot_at = snapshot_at(args, &s)?;
    let mut files = open_outputs(args)?;
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
    let mut driver = driver::Driver::new(&s).map_err(|e| CliError::usage(anyhow!("{e}")))?;
    if let Some(at) = snapshot_at {
        driver.snapshot_at(at);
    }
    let mut progress = |t| bar.set_position(t / 1000);
    let run = if args.snapshot_at.is_some() {
        driver.run_with_snapshot(&mut progress)
    } else {
        driver.run(&mut progress).map(|log| (log, None))
    };
    // A trace row read during the run is malformed or out of order: the scenario is at fault.
    let (log, snapshot) = run.map_err(|e| CliError::usage(anyhow!("{e}")))?;
    bar.finish_and_clear();
    let wall = started.elapsed();
    let mut report = report::Report::new(&s, &log);
    if let Some(c) = &mut report.capacity
        && c.buffers.is_some()
        && s.options.capacity.buffer_pods()
    {
        // The same scenario without the buffers' pods, for the comparison.
        let without = without_buffer_pods(&s);
        let driver = driver::Driver::new(&without).map_err(|e| CliError::usage(anyhow!("{e}")))?;
        let log = driver
            .run(&mut |_| {})
            .map_err(|e| CliError::usage(anyhow!("{e}")))?;
        c.set_without_buffers(&log);
    }
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
    // Every output is written even when another one fails; the first failure is returned.
    let mut outputs = Vec::new();
    let mut errors = Vec::new();
    if let Some(p) = &args.snapshot_out {
        match &snapshot {
            Some(snap) => outputs.push((p, snapshot_text(&s, snap))),
            // Only a time between the last loop and the end gets here.
            None => errors.push(CliError::usage(anyhow!(
                "--snapshot-at: no loop ran at or after it before the end ({})",
                report::clock(s.duration)
            ))),
        }
    }
    if let Some(p) = &args.report {
        outputs.push((p, report.to_json()));
    }
    if let Some(p) = &args.plot {
        outputs.push((p, svg::timeline(&report)));
    }
    for (p, text) in outputs {
        if let Err(e) = write_output(&mut files, p, &text) {
            errors.push(e);
        }
    }
    let mut errors = errors.into_iter();
    let first = errors.next();
    for e in errors {
        eprintln!("error: {e}");
    }
    first.map_or(Ok(()), Err)
}

/// `s` with CapacityBuffers resolved but their pods not injected
/// (`--capacity-buffer-pod-injection-enabled=false`).
fn without_buffer_pods(s: &Scenario) -> Scenario {
    let mut without = s.clone();
    without.options.capacity.set_buffer_pods(false);
    without
}

/// The `--snapshot-out` file: a comment header (scenario, loop time, `plan --now` value, the
/// loop's actions) and the objects.
pub fn snapshot_text(s: &Scenario, snap: &driver::SnapshotTaken) -> String {
    let now = jiff::Timestamp::from_millisecond(snap.now_ms)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| snap.now_ms.to_string());
    let mut out = format!(
        "# cluster-autoscaler simulate: scenario {} (seed {}), the objects the loop at virtual time {} read\n# now: {now}\n# actions the loop decided:\n",
        s.name,
        s.seed,
        report::clock(snap.at_ms),
    );
    for a in &snap.actions {
        out.push_str(&format!("#   {a}\n"));
    }
    if snap.actions.is_empty() {
        out.push_str("#   none\n");
    }
    out.push_str(&snap.yaml);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(duration: &str) -> SimulateArgs {
        SimulateArgs {
            scenario: None,
            report: None,
            plot: None,
            duration: Some(duration.into()),
            seed: None,
            quiet: true,
            snapshot_at: None,
            snapshot_out: None,
            run: RunArgs::default(),
        }
    }

    #[test]
    fn samples_stay_bounded_whatever_the_duration() {
        // 1,000 virtual hours once took 657 MB; samples are what grows with the duration.
        for d in ["1h", "1000h", "2500h"] {
            let s = load(&args(d)).expect("loads");
            assert!(
                s.duration / s.sample_interval <= scenario::MAX_SAMPLES,
                "{d}: {} samples",
                s.duration / s.sample_interval
            );
        }
        // Loops are bounded too (time): 292 years at 10s is refused at once.
        let e = load(&args("2562047h")).expect_err("too many loops");
        assert!(e.to_string().contains("--duration"), "{e}");
    }
}

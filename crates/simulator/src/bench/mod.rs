//! `bench`: generates a synthetic cluster in memory ([`cluster`]) and times each phase of one
//! autoscaler loop on it ([`phases`]), printing the median and the maximum of each phase over
//! `--iterations` (wall clock) and its median CPU time, what each phase decided, and the peak
//! resident memory of the process.
//!
//! It measures the decision core as `run`, `plan` and `simulate` call it; it never talks to a
//! cluster and never changes how decisions are made.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::anyhow;
use autoscaler_model::{parse_milli, parse_units};

use crate::text::count;
use autoscaler_options::CliError;

pub mod claims;
pub mod cluster;
pub mod consolidation;
pub mod gpus;
pub mod phases;

use cluster::Shape;

/// The most nodes `bench` generates.
const MAX_NODES: usize = 100_000;
/// The most pending pods `bench` generates: a million took 2.45 GB, and 200,000 is beyond
/// Kubernetes' documented limit of 150,000 pods per cluster.
const MAX_PENDING: usize = 200_000;
/// The most iterations per phase (each keeps one timing sample).
const MAX_ITERATIONS: usize = 10_000;

/// The cluster sizes of `BENCHMARKS.md`'s growth table, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    /// 1,000 nodes, 30,000 pods, 2,000 pending, 10 groups (the defaults).
    #[value(name = "1k")]
    OneK,
    /// 5,000 nodes, 150,000 pods, 20,000 pending, 50 groups.
    #[value(name = "5k")]
    FiveK,
    /// 15,000 nodes, 450,000 pods, 50,000 pending, 100 groups: the largest managed clusters.
    #[value(name = "15k")]
    FifteenK,
}

impl Preset {
    /// `(nodes, pods, pending, groups)`.
    pub fn sizes(self) -> (usize, usize, usize, usize) {
        match self {
            Preset::OneK => (1000, 30_000, 2000, 10),
            Preset::FiveK => (5000, 150_000, 20_000, 50),
            Preset::FifteenK => (15_000, 450_000, 50_000, 100),
        }
    }
}

/// Flags of `bench`. The defaults are the reference scenario of `BENCHMARKS.md`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// A named cluster size, instead of `--nodes`, `--pods`, `--pending` and `--groups`:
    /// `1k` (the defaults), `5k` (5,000 / 150,000 / 20,000 / 50) or `15k` (15,000 nodes,
    /// 450,000 pods, 50,000 pending, 100 groups).
    #[arg(long, value_enum, conflicts_with_all = ["nodes", "groups", "pods", "pending"])]
    pub preset: Option<Preset>,
    /// Ready nodes of 16 CPU / 64 GiB / 110 pods.
    #[arg(long, default_value_t = 1000)]
    pub nodes: usize,
    /// Node groups (nodes are spread round-robin; each has min 0, max 4×nodes/groups+1000).
    #[arg(long, default_value_t = 10)]
    pub groups: usize,
    /// Running pods, spread round-robin over the nodes, owned by one ReplicaSet: 100m / 256 MiB
    /// on every fifth node, 500m / 2 GiB elsewhere.
    #[arg(long, default_value_t = 30_000)]
    pub pods: usize,
    /// Unschedulable pods.
    #[arg(long, default_value_t = 2000)]
    pub pending: usize,
    /// CPU request of each pending pod (a Kubernetes quantity: `1`, `500m`).
    #[arg(long, default_value = "1", value_name = "QUANTITY")]
    pub pending_cpu: String,
    /// Memory request of each pending pod (a Kubernetes quantity: `2Gi`).
    #[arg(long, default_value = "2Gi", value_name = "QUANTITY")]
    pub pending_memory: String,
    /// ReplicaSets owning the pending pods, round-robin (0: pods without an owner, so no two
    /// of them are known to be equivalent).
    #[arg(long, default_value_t = 20)]
    pub pending_owners: usize,
    /// Times each phase is run; the table shows the median and the maximum.
    #[arg(long, default_value_t = 10)]
    pub iterations: usize,
    /// `--max-nodes-per-scaleup` of the decision.
    #[arg(long, default_value_t = 1000)]
    pub max_nodes_per_scaleup: usize,
    /// Seed of the `random` expander.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Share of the running and of the pending pods (0 to 1) that use a PersistentVolumeClaim:
    /// running ones bound to a CSI volume pinned to their node's group, pending ones unbound
    /// (WaitForFirstConsumer); every node has a CSI attach limit.
    #[arg(long, default_value_t = 0.0, value_name = "FRACTION")]
    pub pvc_fraction: f64,
    /// Makes it a GPU cluster (ours): every node has 8 GPUs and every pending pod asks for
    /// one, as an extended resource (`extended`: `nvidia.com/gpu`) or through a DRA claim
    /// template (`dra`: a ResourceSlice of 8 devices per node), to compare the two.
    #[arg(long, value_enum, value_name = "MODE")]
    pub gpus: Option<gpus::Gpus>,
}

impl BenchArgs {
    /// The flags with `--preset`'s sizes in place of `--nodes`, `--pods`, `--pending` and
    /// `--groups` (clap refuses them together).
    fn resolved(mut self) -> BenchArgs {
        if let Some(p) = self.preset {
            (self.nodes, self.pods, self.pending, self.groups) = p.sizes();
        }
        self
    }

    /// The cluster shape, with quantities parsed and sizes checked.
    fn shape(&self) -> Result<Shape, anyhow::Error> {
        let pending_cpu_milli = parse_milli(&self.pending_cpu)
            .map_err(|e| anyhow!("--pending-cpu {:?}: {e}", self.pending_cpu))?;
        let pending_memory = parse_units(&self.pending_memory)
            .map_err(|e| anyhow!("--pending-memory {:?}: {e}", self.pending_memory))?;
        if pending_cpu_milli < 0 || pending_memory < 0 {
            return Err(anyhow!(
                "--pending-cpu and --pending-memory must not be negative"
            ));
        }
        // Far beyond what any cluster runs, and small enough that no size computed from them
        // overflows or asks for more memory than exists.
        for (flag, value, max) in [
            ("--nodes", self.nodes, MAX_NODES),
            ("--pending", self.pending, MAX_PENDING),
            ("--iterations", self.iterations, MAX_ITERATIONS),
        ] {
            if value > max {
                return Err(anyhow!(
                    "{flag} {value} is more than the {max} bench supports"
                ));
            }
        }
        if self.nodes == 0 {
            return Err(anyhow!("--nodes must be at least 1"));
        }
        if self.groups == 0 || self.groups > self.nodes {
            return Err(anyhow!(
                "--groups {} must be between 1 and --nodes ({})",
                self.groups,
                self.nodes
            ));
        }
        let slots = self.nodes as u64 * cluster::NODE_PODS as u64;
        if self.pods as u64 > slots {
            return Err(anyhow!(
                "--pods {} does not fit {} nodes of {} pods each",
                self.pods,
                self.nodes,
                cluster::NODE_PODS
            ));
        }
        if self.iterations == 0 {
            return Err(anyhow!("--iterations must be at least 1"));
        }
        if self.max_nodes_per_scaleup == 0 {
            return Err(anyhow!("--max-nodes-per-scaleup must be at least 1"));
        }
        Ok(Shape {
            nodes: self.nodes,
            groups: self.groups,
            pods: self.pods,
            pending: self.pending,
            pending_cpu_milli,
            pending_memory,
            pending_owners: self.pending_owners,
        })
    }
}

/// Runs `bench` and prints its table on stdout.
pub fn run(args: BenchArgs) -> Result<(), CliError> {
    let args = &args.resolved();
    let shape = args.shape().map_err(CliError::usage)?;
    if !(0.0..=1.0).contains(&args.pvc_fraction) {
        return Err(CliError::usage(anyhow!(
            "--pvc-fraction {} must be between 0 and 1",
            args.pvc_fraction
        )));
    }
    let mut cluster = cluster::generate(&shape)
        .map_err(|e| CliError::usage(anyhow!("the synthetic cluster of these flags: {e}")))?;
    claims::add_claims(&mut cluster, args.pvc_fraction);
    if let Some(mode) = args.gpus {
        gpus::add_gpus(&mut cluster, mode);
    }
    let generated_rss = memory().map(|m| m.rss);
    let results = phases::measure(
        &cluster,
        &phases::Settings {
            iterations: args.iterations,
            max_nodes_per_scale_up: args.max_nodes_per_scaleup,
            seed: args.seed,
        },
    )
    .map_err(|e| CliError::usage(anyhow!("the options of these flags: {e}")))?;
    let mut text = render(args, &shape, &results, generated_rss, memory());
    let _ = writeln!(
        text,
        "model conversion of the generated API objects (once, as an informer converts them on \
         arrival; not part of a loop): {} wall, {} CPU",
        fmt_duration(cluster.conversion.0),
        fmt_duration(cluster.conversion.1)
    );
    print!("{text}");
    Ok(())
}

/// Resident memory of this process, from `/proc/self/status` (Linux only).
#[derive(Clone, Copy, Debug)]
pub struct Memory {
    /// Peak resident set size (`VmHWM`), in bytes.
    pub peak: u64,
    /// Current resident set size (`VmRSS`), in bytes.
    pub rss: u64,
}

/// The process's memory figures, if the platform reports them.
pub fn memory() -> Option<Memory> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line[name.len()..]
            .trim()
            .strip_suffix("kB")?
            .trim()
            .parse()
            .ok()?;
        Some(kib * 1024)
    };
    Some(Memory {
        peak: field("VmHWM:")?,
        rss: field("VmRSS:")?,
    })
}

/// A duration for the table: µs below 1 ms, ms below 10 s, else s.
fn fmt_duration(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.0} µs")
    } else if us < 10_000_000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// The report: the scenario, one row per phase, memory.
fn render(
    args: &BenchArgs,
    shape: &Shape,
    results: &[phases::PhaseResult],
    generated_rss: Option<u64>,
    end: Option<Memory>,
) -> String {
    let mut out = String::new();
    let owners = if shape.pending_owners == 0 {
        "no owner".to_string()
    } else {
        count(shape.pending_owners as u64, "ReplicaSet")
    };
    let _ = writeln!(
        out,
        "cluster: {} in {}, {}, {} of {} CPU / {} ({owners})",
        count(shape.nodes as u64, "node"),
        count(shape.groups as u64, "group"),
        count(shape.pods as u64, "running pod"),
        count(shape.pending as u64, "pending pod"),
        args.pending_cpu,
        args.pending_memory,
    );
    let _ = writeln!(
        out,
        "{} per phase; expander random (seed {}); --max-nodes-per-scaleup {}",
        count(args.iterations as u64, "iteration"),
        args.seed,
        args.max_nodes_per_scaleup
    );
    if args.pvc_fraction > 0.0 {
        let _ = writeln!(
            out,
            "--pvc-fraction {}: that share of the pods use a PersistentVolumeClaim",
            args.pvc_fraction
        );
    }
    if let Some(mode) = args.gpus {
        let how = match mode {
            gpus::Gpus::Extended => "as the extended resource nvidia.com/gpu",
            gpus::Gpus::Dra => "through a DRA claim template (a ResourceSlice per node)",
        };
        let _ = writeln!(
            out,
            "--gpus: {} GPUs per node, one per pending pod {how}",
            gpus::GPUS_PER_NODE
        );
    }
    let _ = writeln!(out);
    let width = results
        .iter()
        .map(|r| r.phase.chars().count())
        .max()
        .unwrap_or(5)
        .max(5);
    let _ = writeln!(
        out,
        "{:<width$}  {:>10}  {:>10}  {:>10}  decisions",
        "phase", "median", "max", "cpu"
    );
    for r in results {
        let _ = writeln!(
            out,
            "{:<width$}  {:>10}  {:>10}  {:>10}  {}",
            r.phase,
            fmt_duration(r.median()),
            fmt_duration(r.max()),
            fmt_duration(r.median_cpu()),
            r.decisions
        );
    }
    let _ = writeln!(out);
    match end {
        Some(m) => {
            let _ = write!(out, "peak RSS: {}", mib(m.peak));
            if let Some(g) = generated_rss {
                let _ = write!(out, " (after generating the cluster: {})", mib(g));
            }
            let _ = writeln!(out);
        }
        None => {
            let _ = writeln!(out, "peak RSS: not available on this platform");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn parse(args: &[&str]) -> BenchArgs {
        let mut argv = vec!["bench"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv)
            .expect("flags parse")
            .bench
            .resolved()
    }

    #[test]
    fn presets_set_the_four_sizes_and_exclude_them() {
        let shape = parse(&["--preset", "15k", "--pending-cpu", "2"])
            .shape()
            .unwrap();
        assert_eq!(
            (shape.nodes, shape.pods, shape.pending, shape.groups),
            (15_000, 450_000, 50_000, 100)
        );
        assert_eq!(shape.pending_cpu_milli, 2000);
        let five = parse(&["--preset", "5k"]).shape().unwrap();
        assert_eq!((five.nodes, five.groups), (5000, 50));
        assert_eq!(
            parse(&["--preset", "1k"]).shape().unwrap(),
            parse(&[]).shape().unwrap()
        );
        for clash in ["--nodes", "--pods", "--pending", "--groups"] {
            let err = Cli::try_parse_from(["bench", "--preset", "15k", clash, "10"])
                .err()
                .expect("refused");
            assert!(err.to_string().contains(clash), "{clash}: {err}");
        }
        assert!(Cli::try_parse_from(["bench", "--preset", "20k"]).is_err());
    }

    #[test]
    fn defaults_are_the_reference_scenario() {
        let shape = parse(&[]).shape().unwrap();
        assert_eq!(
            shape,
            Shape {
                nodes: 1000,
                groups: 10,
                pods: 30_000,
                pending: 2000,
                pending_cpu_milli: 1000,
                pending_memory: 2 << 30,
                pending_owners: 20,
            }
        );
        let args = parse(&[]);
        assert_eq!(args.iterations, 10);
        assert_eq!(args.max_nodes_per_scaleup, 1000);
    }

    #[test]
    fn bad_values_name_the_flag() {
        let cases: &[(&[&str], &str)] = &[
            (&["--pending-cpu", "lots"], "--pending-cpu"),
            (&["--pending-memory", "2Gx"], "--pending-memory"),
            (&["--nodes", "0"], "--nodes"),
            (
                &["--nodes", "18446744073709551615", "--groups", "1"],
                "--nodes",
            ),
            (&["--pending", "100000000"], "--pending"),
            (&["--pending", "1000000"], "--pending"),
            // Panicked on capacity overflow, and 2^32 aborted on a 64 GiB allocation.
            (&["--iterations", "18446744073709551615"], "--iterations"),
            (&["--iterations", "4294967296"], "--iterations"),
            (&["--groups", "0"], "--groups"),
            (&["--nodes", "5", "--groups", "6"], "--groups"),
            (
                &["--nodes", "1", "--groups", "1", "--pods", "111"],
                "--pods",
            ),
            (&["--iterations", "0"], "--iterations"),
            (&["--max-nodes-per-scaleup", "0"], "--max-nodes-per-scaleup"),
            (&["--pending-cpu=-1"], "--pending-cpu"),
        ];
        for (args, flag) in cases {
            let err = parse(args).shape().expect_err("rejected").to_string();
            assert!(err.contains(flag), "{args:?}: {err}");
        }
    }

    #[test]
    fn durations_are_readable() {
        assert_eq!(fmt_duration(Duration::from_micros(250)), "250 µs");
        assert_eq!(fmt_duration(Duration::from_micros(12_345)), "12.35 ms");
        assert_eq!(fmt_duration(Duration::from_secs(12)), "12.00 s");
    }

    #[test]
    fn memory_is_read_from_proc_on_linux() {
        if cfg!(target_os = "linux") {
            let m = memory().expect("VmHWM and VmRSS");
            assert!(m.peak >= m.rss && m.rss > 0);
        }
    }
}

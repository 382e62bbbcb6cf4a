//! `cluster-autoscaler`: the binary. Parses flags, loads input, calls the decision core and
//! prints or applies its answer. It holds no decision logic of its own.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod config;
#[cfg(test)]
mod fuzz;
mod options;
mod plan;
mod run;
mod simulate;
mod text;
mod yaml;

/// Kubernetes cluster autoscaler.
#[derive(Debug, Parser)]
#[command(name = "cluster-autoscaler", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the autoscaler on a live cluster (the default when only flags are given, as
    /// upstream's binary runs).
    ///
    /// Flags have upstream cluster-autoscaler's names, syntax and defaults; `--config FILE`
    /// reads a `ClusterAutoscaler` resource (autoscaling.openshift.io/v1), and flags given on the
    /// command line win over it. Invalid values stop it at start with exit code 2.
    Run(Box<options::RunArgs>),
    /// Run one loop on a snapshot of Kubernetes objects (YAML) and explain it.
    ///
    /// For every pod not bound to a node: on which nodes it would fit and, where it would not,
    /// why not, in kube-scheduler's words; then the cluster and node-group state, the scale-up
    /// and scale-down plan and the actions. It takes every flag of `run` and `--config`, so the
    /// plan answers for the configuration the cluster runs with.
    Plan(Box<plan::PlanArgs>),
    /// Run the autoscaler against a simulated cluster in virtual time and report what happened.
    ///
    /// Without SCENARIO it runs a built-in scenario (three node groups, a morning burst, quiet
    /// hours, a PodDisruptionBudget). Scenario files are described in docs/scenarios.md.
    ///
    /// It takes every flag of `run` and `--config`, through the same options and validation:
    /// defaults < `--config` file < the scenario's `options:` < flags given here.
    /// `--scan-interval` is the virtual loop interval and `--max-pod-eviction-time` the drains'
    /// deadline. Flags that only concern a live process (kubeconfig, namespace, leader
    /// election, address, status ConfigMap, logging, node-group auto-discovery: every group of
    /// the scenario is discovered) are validated as `run` validates them and have no effect.
    Simulate(Box<simulate::SimulateArgs>),
    /// Time each phase of one loop on a synthetic cluster generated in memory.
    ///
    /// Prints, per phase (snapshot build, filtering pending pods onto existing nodes, scale-up
    /// decision, one group's bin-packing estimate, scale-down planning, the whole loop), the
    /// median and maximum over --iterations and what it decided, then the peak RSS. The defaults
    /// are the reference scenario of BENCHMARKS.md; build with --release to measure.
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    // Flags only mean `run`, and Go's single-dash long flags are accepted (see normalize_args).
    let argv = options::normalize_args(std::env::args_os().collect());
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help/version to stdout with success, usage errors to stderr.
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let result = match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Plan(args) => plan::run(&args),
        Command::Simulate(args) => simulate::run(&args),
        Command::Bench(args) => bench::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// A failure of the binary, with the exit code it maps to.
#[derive(Debug)]
pub struct CliError {
    code: u8,
    error: anyhow::Error,
}

impl CliError {
    /// Bad usage or bad input (a flag, a file, an object): exit code 2.
    pub fn usage(error: anyhow::Error) -> CliError {
        CliError { code: 2, error }
    }

    /// A failure to write output: exit code 1.
    pub fn io(error: anyhow::Error) -> CliError {
        CliError { code: 1, error }
    }

    /// A failure while running (the controller stopped with an error): exit code 1.
    pub fn failure(error: anyhow::Error) -> CliError {
        CliError { code: 1, error }
    }

    /// The process exit code.
    pub fn exit_code(&self) -> u8 {
        self.code
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

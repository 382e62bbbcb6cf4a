//! `cluster-autoscaler`: the binary. Parses flags, loads input, calls the decision core and
//! prints or applies its answer. It holds no decision logic of its own.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod capacity;
mod credentials;
mod exec_plugin;
#[cfg(test)]
mod fuzz;
mod plan;
mod run;

// The error every command ends with (exit codes 1 and 2); the simulator's commands return it too.
use autoscaler_options::CliError;

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
    /// command line win over it. Invalid values stop it at start with exit code 2. Every
    /// upstream flag is accepted; those without effect here are listed under their own
    /// headings in --help (docs/flags.md has the full table).
    Run(Box<RunCommand>),
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
    /// deadline. Flags that only concern a live process (kubeconfig, cloud-config, namespace,
    /// leader election, address, status ConfigMap, logging, node-group auto-discovery: every
    /// group of the scenario is discovered) are validated as `run` validates them and have no
    /// effect.
    Simulate(Box<autoscaler_simulator::SimulateArgs>),
    /// Time each phase of one loop on a synthetic cluster generated in memory.
    ///
    /// Prints, per phase (reading each pod once: the memory floor; snapshot build, filtering
    /// pending pods onto existing nodes, scale-up decision, one group's bin-packing estimate,
    /// scale-down planning, the whole loop), the median and maximum over --iterations and what
    /// it decided, then the peak RSS. The defaults are the reference scenario of BENCHMARKS.md;
    /// build with --release to measure.
    Bench(autoscaler_simulator::BenchArgs),
    /// Print the table of upstream's flags and what this autoscaler does with each one
    /// (docs/flags.md), as Markdown.
    #[command(hide = true)]
    Flags,
}

/// `run`: its flags, and a check-only switch for manifests and tests.
#[derive(Debug, clap::Args)]
struct RunCommand {
    #[command(flatten)]
    args: autoscaler_options::RunArgs,
    /// Validate the flags and the `--config` file, print what `run` would say about them, and
    /// exit without contacting a cluster.
    #[arg(long, hide = true)]
    validate_only: bool,
}

fn main() -> ExitCode {
    // Flags only mean `run`, and Go's single-dash long flags are accepted (see normalize_args).
    let argv = autoscaler_options::normalize_args(std::env::args_os().collect());
    let cli = match parse(argv) {
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
        Command::Run(cmd) if cmd.validate_only => run::validate_only(&cmd.args),
        Command::Run(cmd) => run::run(&cmd.args),
        Command::Plan(args) => plan::run(&args),
        Command::Simulate(args) => autoscaler_simulator::run(&args),
        Command::Bench(args) => autoscaler_simulator::bench(args),
        Command::Flags => {
            print!("{}", autoscaler_options::flags_markdown());
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// The command line, read with [`command`].
fn parse(argv: Vec<std::ffi::OsString>) -> Result<Cli, clap::Error> {
    use clap::FromArgMatches;
    command()
        .try_get_matches_from(argv)
        .and_then(|m| Cli::from_arg_matches(&m))
}

/// The command line's definition, where every duration flag takes a value starting with `-`:
/// `--duration -1s` is then refused by the flag's own check, naming the flag, rather than read
/// as an unknown argument `-1`; the flags' help shows the defaults of the flag table.
fn command() -> clap::Command {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, |s| {
            autoscaler_options::with_table_defaults(s).mut_args(|a| {
                let duration = a
                    .get_value_names()
                    .is_some_and(|v| v.iter().any(|n| n == "DURATION"));
                if duration {
                    a.allow_hyphen_values(true)
                } else {
                    a
                }
            })
        });
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A negative duration is refused by its flag, by name, in every subcommand.
    #[test]
    fn negative_durations_name_their_flag() {
        for argv in [
            &["ca", "run", "--scan-interval", "-1s"][..],
            &["ca", "simulate", "--max-node-provision-time", "-5m"],
            &["ca", "plan", "--scale-down-unneeded-time", "-1h"],
        ] {
            let flag = argv[2];
            let e = parse(argv.iter().map(std::ffi::OsString::from).collect())
                .expect_err("negative duration");
            let text = e.to_string();
            assert!(text.contains(flag) && text.contains(argv[3]), "{text}");
            assert!(!text.contains("unexpected argument"), "{text}");
        }
        // simulate's own `--duration` is read later, by `simulate::load`, which names it.
        let argv = ["ca", "simulate", "--duration", "-1s"];
        let cli = parse(argv.iter().map(std::ffi::OsString::from).collect()).expect("parses");
        let Command::Simulate(args) = cli.command else {
            panic!("simulate")
        };
        let e = autoscaler_simulator::load(&args).expect_err("negative duration");
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("--duration \"-1s\""), "{e}");
    }
}

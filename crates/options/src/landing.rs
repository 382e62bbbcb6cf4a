//! Where an implemented flag's value lands: the value types of the flag table's rows (which
//! parser reads a value: upstream's syntax, our range checks and their messages) and the row's
//! setter, which puts the typed value into the options being built ([`Draft`]). A layer of
//! values (the command line, the `--config` file or a scenario's `options:`) is the texts given
//! per flag ([`Layer`]); applying it hands each text to its row's setter.
//!
//! It decides how a given text becomes a typed value and which setter gets it; it never states
//! a default (the flag table and the core's `Default`s do), never checks one value against
//! another (`validate` in [`crate::options`] does) and never panics on any input.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use autoscaler_core::{ConsolidationMode, InvalidOption};
use autoscaler_kube::ControllerConfig;
use clap::builder::ValueParser;
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command, value_parser};

use crate::flags::UpstreamFlag;
use crate::options::{
    DEFAULT_VERBOSITY, LogFormat, OptionsError, flag_err, fraction, go_bool, go_duration,
    non_negative, percentage,
};

/// An implemented flag's value type and setter: the variant says how the text is read (and
/// checked, with the message a bad value gets), the function where the value lands.
#[derive(Clone, Copy)]
pub(crate) enum Lands {
    /// `--config`: read by [`crate::RunOptions::from_args`] before the layers are applied.
    ConfigFile,
    /// A path.
    Path(fn(&mut Draft, PathBuf)),
    /// A Go boolean (`--flag`, `--flag=false`).
    Bool(fn(&mut Draft, bool)),
    /// A Go duration.
    Duration(fn(&mut Draft, Duration)),
    /// A Go duration handed to a validated setter of the core's options (as [`Lands::Fraction`]).
    CheckedDuration(fn(&mut Draft, Duration) -> Result<(), InvalidOption>),
    /// A number from 0 to 1, handed to a validated setter of the core's options: the rule it
    /// breaks is the reason the value is refused.
    Fraction(fn(&mut Draft, f64) -> Result<(), InvalidOption>),
    /// A finite number >= 0, handed to a validated setter of the core's options (as
    /// [`Lands::Fraction`]).
    Ratio(fn(&mut Draft, f64) -> Result<(), InvalidOption>),
    /// A percentage from 0 to 100, handed to a validated setter of the core's options (as
    /// [`Lands::Fraction`]).
    Percent(fn(&mut Draft, f64) -> Result<(), InvalidOption>),
    /// A count (>= 0).
    Count(fn(&mut Draft, usize)),
    /// A count handed to a validated setter of the core's options (as [`Lands::Fraction`]).
    CheckedCount(fn(&mut Draft, usize) -> Result<(), InvalidOption>),
    /// A 32-bit integer, negative ones included.
    Int(fn(&mut Draft, i32)),
    /// A 32-bit integer handed to a validated setter of the core's options (as
    /// [`Lands::Fraction`]): negative ones reach the setter, which names its rule.
    CheckedInt(fn(&mut Draft, i32) -> Result<(), InvalidOption>),
    /// A 64-bit integer, negative ones included.
    Long(fn(&mut Draft, i64)),
    /// Seconds (>= 0).
    Seconds(fn(&mut Draft, u64)),
    /// The log verbosity, 0 to 10.
    Level(fn(&mut Draft, u8)),
    /// Text, checked by the setter (its error is the reason the value is refused).
    Text(fn(&mut Draft, &str) -> Result<(), String>),
    /// A repeatable text; the setter's error names the value refused and why.
    Texts(fn(&mut Draft, &[String]) -> Result<(), Refused>),
    /// A repeatable, comma-separated list of names (pflag's string slices).
    Names(fn(&mut Draft, &[String])),
    /// `--logging-format`.
    LogFormat(fn(&mut Draft, LogFormat)),
    /// `--consolidation`.
    Consolidation(fn(&mut Draft, ConsolidationMode)),
}

impl fmt::Debug for Lands {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Lands::ConfigFile => "ConfigFile",
            Lands::Path(_) => "Path",
            Lands::Bool(_) => "Bool",
            Lands::Duration(_) => "Duration",
            Lands::CheckedDuration(_) => "CheckedDuration",
            Lands::Fraction(_) => "Fraction",
            Lands::Ratio(_) => "Ratio",
            Lands::Percent(_) => "Percent",
            Lands::Count(_) => "Count",
            Lands::CheckedCount(_) => "CheckedCount",
            Lands::Int(_) => "Int",
            Lands::CheckedInt(_) => "CheckedInt",
            Lands::Long(_) => "Long",
            Lands::Seconds(_) => "Seconds",
            Lands::Level(_) => "Level",
            Lands::Text(_) => "Text",
            Lands::Texts(_) => "Texts",
            Lands::Names(_) => "Names",
            Lands::LogFormat(_) => "LogFormat",
            Lands::Consolidation(_) => "Consolidation",
        };
        f.write_str(name)
    }
}

/// A value of a repeatable flag refused by its setter, and why.
pub(crate) type Refused = (String, String);

/// The `--help` section of an implemented flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Heading {
    /// The live process, the loop and ours.
    General,
    /// Scale-up.
    ScaleUp,
    /// Scale-down.
    ScaleDown,
    /// Cluster state and backoff.
    ClusterState,
    /// ProvisioningRequests and CapacityBuffers.
    CapacityOnRequest,
}

impl Heading {
    fn title(self) -> &'static str {
        match self {
            Heading::General => "General",
            Heading::ScaleUp => "Scale-up",
            Heading::ScaleDown => "Scale-down",
            Heading::ClusterState => "Cluster state and backoff",
            Heading::CapacityOnRequest => "Capacity on request",
        }
    }
}

/// How an implemented flag is shown and used: its place in `--help`, its help (the one text of
/// what it does: `--help` and `docs/flags.md` show it), whether it is also a setting (a key of
/// a scenario's `options:`, and what a `--config` field may stand for) and where it lands.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Use {
    /// Its place in `--help`: flags are listed by it, under the heading of each.
    pub(crate) position: u16,
    /// Its `--help` section.
    pub(crate) heading: Heading,
    /// The name of its value in `--help` (`DURATION`, `BOOL`, `FILE`).
    pub(crate) value_name: &'static str,
    /// What it does (`--help`, `docs/flags.md`); the default is added from the row.
    pub(crate) help: &'static str,
    /// Whether a scenario's `options:` takes it (a setting of the decision, the loop or the
    /// drain rather than of the live process).
    pub(crate) setting: bool,
    /// Its value type and setter.
    pub(crate) lands: Lands,
    /// The field of the `ClusterAutoscaler` resource of `--config` that stands for it, if any.
    pub(crate) file: Option<&'static str>,
}

/// The options being built, layer after layer: the controller's configuration plus what the
/// binary reads before or apart from it. Setters write here; [`crate::RunOptions`] is made
/// from it once every layer is applied and the whole is validated.
#[derive(Clone, Debug)]
pub(crate) struct Draft {
    /// The controller's configuration (core options, lease, server, drain).
    pub(crate) c: ControllerConfig,
    /// `--kubeconfig`.
    pub(crate) kubeconfig: Option<PathBuf>,
    /// `--cloud-config`.
    pub(crate) cloud_config: Option<String>,
    /// `--clusterapi-cloud-config-authoritative`.
    pub(crate) authoritative: bool,
    /// `--cloud-provider`, checked.
    pub(crate) provider: Option<String>,
    /// `--node-group-auto-discovery`, read with the Cluster API group of the environment.
    pub(crate) auto_discovery: Vec<String>,
    /// `--v`.
    pub(crate) verbosity: u8,
    /// `--logging-format`.
    pub(crate) logging_format: LogFormat,
    /// The layer being applied, for the few flags whose meaning depends on another one of the
    /// same layer (a deprecated flag and the one that replaced it).
    pub(crate) layer: Layer,
}

impl Default for Draft {
    fn default() -> Self {
        Draft {
            c: ControllerConfig::default(),
            kubeconfig: None,
            cloud_config: None,
            authoritative: false,
            provider: None,
            auto_discovery: Vec::new(),
            verbosity: DEFAULT_VERBOSITY,
            logging_format: LogFormat::default(),
            layer: Layer::default(),
        }
    }
}

impl Draft {
    /// Applies each flag `layer` gives, in the table's order; a later layer wins.
    pub(crate) fn apply(&mut self, layer: &Layer) -> Result<(), OptionsError> {
        self.layer = layer.clone();
        let result = layer
            .given
            .iter()
            .try_for_each(|(flag, values)| land(flag, values, self));
        self.layer = Layer::default();
        result
    }
}

/// Hands `values` (as given) to `flag`'s setter, read by its parser.
fn land(
    flag: &'static UpstreamFlag,
    values: &[OsString],
    d: &mut Draft,
) -> Result<(), OptionsError> {
    let Some(u) = flag.how() else {
        return Ok(());
    };
    let name = flag.name;
    let texts: Vec<String> = (values.iter())
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    // A single-valued flag is given once (the parser refuses a second value).
    let last = texts.last().cloned().unwrap_or_default();
    let refused = |why: String| flag_err(name, &last, why);
    match u.lands {
        Lands::ConfigFile => {}
        Lands::Path(f) => f(d, PathBuf::from(values.last().cloned().unwrap_or_default())),
        Lands::Bool(f) => f(d, go_bool(&last).map_err(refused)?),
        Lands::Duration(f) => f(d, go_duration(&last).map_err(refused)?),
        Lands::CheckedDuration(f) => {
            f(d, go_duration(&last).map_err(refused)?).map_err(|e| refused(e.rule().to_string()))?
        }
        Lands::Fraction(f) => {
            f(d, fraction(&last).map_err(refused)?).map_err(|e| refused(e.rule().to_string()))?
        }
        Lands::Ratio(f) => f(d, non_negative(&last).map_err(refused)?)
            .map_err(|e| refused(e.rule().to_string()))?,
        Lands::Percent(f) => {
            f(d, percentage(&last).map_err(refused)?).map_err(|e| refused(e.rule().to_string()))?
        }
        Lands::Count(f) => f(d, last.parse().map_err(|e| refused(format!("{e}")))?),
        Lands::CheckedCount(f) => f(d, last.parse().map_err(|e| refused(format!("{e}")))?)
            .map_err(|e| refused(e.rule().to_string()))?,
        Lands::Int(f) => f(d, last.parse().map_err(|e| refused(format!("{e}")))?),
        Lands::CheckedInt(f) => f(d, last.parse().map_err(|e| refused(format!("{e}")))?)
            .map_err(|e| refused(e.rule().to_string()))?,
        Lands::Long(f) => f(d, last.parse().map_err(|e| refused(format!("{e}")))?),
        Lands::Seconds(f) => f(d, last.parse().map_err(|e| refused(format!("{e}")))?),
        Lands::Level(f) => match last.parse::<u8>() {
            Ok(v) if v <= 10 => f(d, v),
            _ => return Err(refused("is not in 0..=10".to_string())),
        },
        Lands::Text(f) => f(d, &last).map_err(refused)?,
        Lands::Texts(f) => f(d, &texts).map_err(|(value, why)| flag_err(name, value, why))?,
        Lands::Names(f) => f(d, &texts),
        Lands::LogFormat(f) => {
            let v = <LogFormat as clap::ValueEnum>::from_str(&last, false).map_err(refused)?;
            f(d, v)
        }
        Lands::Consolidation(f) => f(d, last.parse().map_err(refused)?),
    }
    Ok(())
}

/// The parser of a value type: the one the command line, the `--config` file and a scenario's
/// `options:` all read a flag's text with.
fn parser(lands: Lands) -> ValueParser {
    match lands {
        Lands::ConfigFile | Lands::Path(_) => value_parser!(PathBuf),
        Lands::Bool(_) => ValueParser::new(go_bool),
        Lands::Duration(_) | Lands::CheckedDuration(_) => ValueParser::new(go_duration),
        Lands::Fraction(_) => ValueParser::new(fraction),
        Lands::Ratio(_) => ValueParser::new(non_negative),
        Lands::Percent(_) => ValueParser::new(percentage),
        Lands::Count(_) | Lands::CheckedCount(_) => value_parser!(usize).into(),
        Lands::Int(_) | Lands::CheckedInt(_) => value_parser!(i32).into(),
        Lands::Long(_) => value_parser!(i64).into(),
        Lands::Seconds(_) => value_parser!(u64).into(),
        Lands::Level(_) => value_parser!(u8).range(0..=10).into(),
        Lands::Text(_) | Lands::Texts(_) | Lands::Names(_) => value_parser!(String),
        Lands::LogFormat(_) => value_parser!(LogFormat).into(),
        Lands::Consolidation(_) => ValueParser::new(|s: &str| s.parse::<ConsolidationMode>()),
    }
}

/// The clap argument of an implemented flag, with upstream's syntax.
pub(crate) fn arg(flag: &'static UpstreamFlag, u: &Use) -> Arg {
    let a = Arg::new(flag.name)
        .long(flag.name)
        .value_name(u.value_name)
        .help(u.help)
        .help_heading(u.heading.title())
        .value_parser(parser(u.lands))
        .required(false);
    match u.lands {
        Lands::Bool(_) => a
            .num_args(0..=1)
            .require_equals(true)
            .default_missing_value("true")
            .action(ArgAction::Set),
        Lands::Texts(_) => a.action(ArgAction::Append),
        Lands::Names(_) => a.action(ArgAction::Append).value_delimiter(','),
        Lands::Int(_) | Lands::CheckedInt(_) | Lands::Long(_) => {
            a.allow_negative_numbers(true).action(ArgAction::Set)
        }
        _ => a.action(ArgAction::Set),
    }
}

/// The implemented flags of `table` (the settings only, with `settings`), in `--help` order.
pub(crate) fn implemented(
    table: &'static [UpstreamFlag],
    settings: bool,
) -> Vec<(&'static UpstreamFlag, &'static Use)> {
    let mut rows: Vec<(&'static UpstreamFlag, &'static Use)> = (table.iter())
        .filter_map(|f| f.how().map(|u| (f, u)))
        .filter(|(_, u)| u.setting || !settings)
        .collect();
    rows.sort_by_key(|(_, u)| u.position);
    rows
}

/// `cmd` with the implemented flags of `table` (the settings only, with `settings`).
pub(crate) fn augment(cmd: Command, table: &'static [UpstreamFlag], settings: bool) -> Command {
    implemented(table, settings)
        .into_iter()
        .fold(cmd, |cmd, (flag, u)| cmd.arg(arg(flag, u)))
}

/// The values one layer gives, per flag, as given (a path may be any bytes), in the order the
/// flags were first given (the command line's: the table's).
#[derive(Clone, Debug, Default)]
pub(crate) struct Layer {
    given: Vec<(&'static UpstreamFlag, Vec<OsString>)>,
}

impl Layer {
    /// The implemented flags of `table` that `m` holds from the command line (the settings
    /// only, with `settings`: the other flags are not arguments of that command).
    pub(crate) fn from_matches(
        table: &'static [UpstreamFlag],
        settings: bool,
        m: &ArgMatches,
    ) -> Layer {
        let mut given = Vec::new();
        for flag in table {
            let Some(u) = flag.how() else { continue };
            if (settings && !u.setting)
                || m.value_source(flag.name) != Some(ValueSource::CommandLine)
            {
                continue;
            }
            let values: Vec<OsString> = (m.try_get_raw(flag.name).ok().flatten())
                .map(|v| v.map(OsStr::to_owned).collect())
                .unwrap_or_default();
            given.push((flag, values));
        }
        Layer { given }
    }

    /// `self` with the flags `later` gives replaced by its values (a flag given again keeps
    /// the last).
    pub(crate) fn merge(&mut self, later: Layer) {
        for (flag, values) in later.given {
            match self.given.iter_mut().find(|(f, _)| f.name == flag.name) {
                Some((_, old)) => *old = values,
                None => self.given.push((flag, values)),
            }
        }
    }

    /// The values given for `name`, if it is given.
    pub(crate) fn values(&self, name: &str) -> Option<&[OsString]> {
        (self.given.iter())
            .find(|(f, _)| f.name == name)
            .map(|(_, v)| v.as_slice())
    }

    /// The texts given for `name` (none when not given).
    pub(crate) fn texts(&self, name: &str) -> Vec<String> {
        (self.values(name).unwrap_or_default().iter())
            .map(|v| v.to_string_lossy().into_owned())
            .collect()
    }

    /// Whether `name` is given.
    pub(crate) fn gives(&self, name: &str) -> bool {
        self.values(name).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flags::{FLAGS, Kind, Source, Status, imp, run, setting};
    use crate::options::settings_of;

    /// A table of two flags that exist nowhere else: one setting, one flag of the live process.
    static TEST_TABLE: &[UpstreamFlag] = &[
        imp(
            "test-only-delay",
            "7s",
            Kind::Duration,
            Source::Ours,
            setting(
                1,
                Heading::ScaleDown,
                "DURATION",
                "How long a test waits",
                Lands::Duration(|d, v| d.c.max_startup_time = v),
            ),
        ),
        imp(
            "test-only-name",
            "",
            Kind::Text,
            Source::Ours,
            run(
                2,
                Heading::General,
                "NAME",
                "The lease of a test",
                Lands::Text(|d, v| {
                    d.c.lease_name = v.to_string();
                    Ok(())
                }),
            ),
        ),
    ];

    fn applied(layer: &Layer) -> Result<Draft, OptionsError> {
        let mut d = Draft::default();
        d.apply(layer)?;
        Ok(d)
    }

    /// A row alone makes a flag: parsed from the command line (with its help under its
    /// heading, and its value checked by its type's parser) and from a scenario's `options:`,
    /// landing where its setter says, with no other code.
    #[test]
    fn a_row_alone_is_a_flag_on_the_command_line_and_a_setting() {
        let mut cmd = augment(Command::new("t"), TEST_TABLE, false);
        let m =
            (cmd.try_get_matches_from_mut(["t", "--test-only-delay=1m30s", "--test-only-name=x"]))
                .expect("parses");
        let d = applied(&Layer::from_matches(TEST_TABLE, false, &m)).expect("applies");
        assert_eq!(d.c.max_startup_time, Duration::from_secs(90));
        assert_eq!(d.c.lease_name, "x");
        let help = cmd.render_help().to_string();
        let section = help.split("Scale-down:").nth(1).unwrap_or_default();
        assert!(section.contains("--test-only-delay <DURATION>"), "{help}");
        assert!(section.contains("How long a test waits"), "{help}");

        let e = (cmd.try_get_matches_from_mut(["t", "--test-only-delay=soon"])).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("--test-only-delay"), "{e}");

        let two = ["2m".to_string()];
        let layer = settings_of(TEST_TABLE, [("test-only-delay", &two[..])]).expect("a setting");
        let d = applied(&layer).expect("applies");
        assert_eq!(d.c.max_startup_time, Duration::from_secs(120));
        let x = ["x".to_string()];
        let e = settings_of(TEST_TABLE, [("test-only-name", &x[..])]).unwrap_err();
        assert!(e.why.contains("flag of the live process"), "{e}");
        let soon = ["soon".to_string()];
        let e = settings_of(TEST_TABLE, [("test-only-delay", &soon[..])]).unwrap_err();
        assert_eq!(e.name, "test-only-delay");
    }

    /// Every implemented row has a setter, and the setter lands somewhere: given a value other
    /// than its default, each implemented flag changes the options built.
    #[test]
    fn every_implemented_row_lands_its_value() {
        let env = |k: &str| (k == "POD_NAME").then(|| "ca-0".to_string());
        let built = |args: &[String]| {
            use clap::FromArgMatches;
            let cmd = <crate::RunArgs as clap::Args>::augment_args(Command::new("ca"));
            let argv = std::iter::once("ca".to_string()).chain(args.iter().cloned());
            let m = cmd.try_get_matches_from(argv).map_err(|e| e.to_string())?;
            let a = crate::RunArgs::from_arg_matches(&m).map_err(|e| e.to_string())?;
            let o = crate::RunOptions::build(&a, None, &env).map_err(|e| e.to_string())?;
            Ok::<_, String>(format!(
                "{:?}",
                (
                    o.controller,
                    o.kubeconfig,
                    o.management,
                    o.verbosity,
                    o.logging_format
                )
            ))
        };
        let none = built(&[]).expect("defaults");
        let mut checked = 0;
        for flag in FLAGS {
            assert_eq!(
                flag.how().is_some(),
                flag.status == Status::Implemented,
                "--{}: an implemented row has a setter, and only it",
                flag.name
            );
            let Some(u) = flag.how() else { continue };
            let value = match (flag.name, u.lands) {
                ("config", _) => continue,
                ("leader-elect-lease-duration", _) => "20s",
                ("leader-elect-renew-deadline", _) => "5s",
                ("leader-elect-retry-period", _) => "1s",
                ("initial-node-group-backoff-duration", _) => "1m",
                ("max-node-group-backoff-duration", _) => "40m",
                ("address", _) => ":9999",
                ("cloud-provider", _) => "openshift",
                ("expander", _) => "random",
                ("cores-total" | "memory-total", _) => "0:7",
                ("gpu-total", _) => "nvidia.com/gpu:0:7",
                ("node-group-auto-discovery", _) => "clusterapi:namespace=x",
                ("logging-format", _) => "json",
                ("consolidation", _) => "delete",
                ("drain-priority-config", _) => "1000:100,0:60",
                (_, Lands::Bool(_)) if flag.default == "true" => "false",
                (_, Lands::Bool(_)) => "true",
                (_, Lands::Duration(_) | Lands::CheckedDuration(_)) => "7m7s",
                (_, Lands::Fraction(_) | Lands::Ratio(_) | Lands::Percent(_)) => "0.37",
                (_, Lands::Count(_) | Lands::CheckedCount(_)) => "7",
                (_, Lands::Int(_) | Lands::CheckedInt(_) | Lands::Long(_) | Lands::Seconds(_)) => {
                    "7"
                }
                (_, Lands::Level(_)) => "7",
                _ => "x",
            };
            let arg = format!("--{}={value}", flag.name);
            let given = built(std::slice::from_ref(&arg)).unwrap_or_else(|e| panic!("{arg}: {e}"));
            assert_ne!(given, none, "{arg} lands nowhere");
            checked += 1;
        }
        assert!(checked > 80, "only {checked} flags checked");
    }

    /// Each row's place in `--help` is its own.
    #[test]
    fn help_positions_are_unique() {
        let mut positions: Vec<u16> = (FLAGS.iter().filter_map(UpstreamFlag::how))
            .map(|u| u.position)
            .collect();
        let before = positions.len();
        positions.sort_unstable();
        positions.dedup();
        assert_eq!(before, positions.len(), "two rows share a place in --help");
    }
}

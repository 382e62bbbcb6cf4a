//! The `priority` expander: prefer the node groups the user ranks highest.
//!
//! The user writes, under key [`PRIORITY_CONFIG_KEY`](autoscaler_model::PRIORITY_CONFIG_KEY) of ConfigMap [`PRIORITY_CONFIG_MAP_NAME`](autoscaler_model::PRIORITY_CONFIG_MAP_NAME),
//! a YAML mapping from integer priorities to lists of regular expressions:
//!
//! ```yaml
//! 10:
//!   - .*t2\.large.*
//! 50:
//!   - .*m4\.4xlarge.*
//! ```
//!
//! A group's priority is the highest one with an expression that matches its id. As upstream
//! (which uses Go's `FindStringIndex`), an expression matches if it matches anywhere in the id:
//! it is not anchored, so write `^...$` to match whole ids. The options whose group has the
//! highest priority among the candidates survive (ties kept); options whose group matches nothing
//! are dropped with a warning. If no option matches at all, or the configuration is missing or
//! unusable, every option survives and a warning says why. Priorities are ordered numerically,
//! negative ones included (upstream asks for positive values).
//!
//! This module parses the text; it must never fetch the ConfigMap itself.

use std::collections::BTreeMap;
use std::fmt;

use regex::RegexSet;

use super::{Expander, ExpanderError, ExpanderName, ExpanderWarning, ExpansionOption};

/// One priority level and its expressions.
#[derive(Clone)]
struct Tier {
    priority: i64,
    patterns: Vec<String>,
    set: RegexSet,
}

/// A parsed priority configuration: priority levels, highest first, each with its expressions.
#[derive(Clone)]
pub struct PriorityConfig {
    tiers: Vec<Tier>,
}

impl PartialEq for PriorityConfig {
    fn eq(&self, other: &Self) -> bool {
        self.tiers.len() == other.tiers.len()
            && self
                .tiers
                .iter()
                .zip(&other.tiers)
                .all(|(a, b)| a.priority == b.priority && a.patterns == b.patterns)
    }
}

impl fmt::Debug for PriorityConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.tiers.iter().map(|t| (t.priority, &t.patterns)))
            .finish()
    }
}

impl PriorityConfig {
    /// Parses the YAML text of the `priorities` key. Fails if it is empty, is not a mapping from
    /// integers to lists of strings (a priority with no list is allowed and matches nothing), or
    /// holds an expression that does not compile. A priority written twice keeps only its last
    /// list (upstream likewise uses only one of them).
    pub fn parse(text: &str) -> Result<PriorityConfig, ExpanderError> {
        if text.trim().is_empty() {
            return Err(ExpanderError::PriorityConfigEmpty);
        }
        autoscaler_model::check_depth(text).map_err(|e| ExpanderError::PriorityConfigYaml {
            message: e.to_string(),
        })?;
        let raw: Option<BTreeMap<i64, Option<Vec<String>>>> = serde_yaml_ng::from_str(text)
            .map_err(|e| ExpanderError::PriorityConfigYaml {
                message: e.to_string(),
            })?;
        let mut tiers = Vec::new();
        for (priority, patterns) in raw.unwrap_or_default().into_iter().rev() {
            let patterns = patterns.unwrap_or_default();
            for pattern in &patterns {
                regex::Regex::new(pattern).map_err(|e| ExpanderError::PriorityRegex {
                    priority,
                    pattern: pattern.clone(),
                    message: e.to_string(),
                })?;
            }
            let set = RegexSet::new(&patterns).map_err(|e| ExpanderError::PriorityRegex {
                priority,
                pattern: patterns.join(", "),
                message: e.to_string(),
            })?;
            tiers.push(Tier {
                priority,
                patterns,
                set,
            });
        }
        Ok(PriorityConfig { tiers })
    }

    /// The priority levels, highest first, with their expressions as written.
    pub fn tiers(&self) -> impl Iterator<Item = (i64, &[String])> + '_ {
        self.tiers
            .iter()
            .map(|t| (t.priority, t.patterns.as_slice()))
    }

    /// The priority of the group with id `group_id`: the highest priority with an expression
    /// matching anywhere in it, or `None` if none matches.
    pub fn priority_of(&self, group_id: &str) -> Option<i64> {
        self.tiers
            .iter()
            .find(|t| t.set.is_match(group_id))
            .map(|t| t.priority)
    }
}

/// The priority configuration as the shell last saw it.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum PrioritySetting {
    /// No ConfigMap, or no `priorities` key in it.
    #[default]
    Missing,
    /// A text that could not be parsed.
    Invalid(ExpanderError),
    /// A usable configuration.
    Loaded(PriorityConfig),
}

impl PrioritySetting {
    /// From the raw text of the `priorities` key (`None`: absent).
    pub fn from_text(text: Option<&str>) -> PrioritySetting {
        match text {
            None => PrioritySetting::Missing,
            Some(t) => match PriorityConfig::parse(t) {
                Ok(config) => PrioritySetting::Loaded(config),
                Err(error) => PrioritySetting::Invalid(error),
            },
        }
    }
}

/// The priority expander over a configuration.
#[derive(Clone, Copy, Debug)]
pub struct Priority<'a> {
    setting: &'a PrioritySetting,
}

impl<'a> Priority<'a> {
    /// The expander reading `setting`.
    pub fn new(setting: &'a PrioritySetting) -> Priority<'a> {
        Priority { setting }
    }
}

impl Expander for Priority<'_> {
    fn name(&self) -> ExpanderName {
        ExpanderName::Priority
    }

    fn filter(
        &self,
        options: &[ExpansionOption],
        candidates: &[usize],
        warnings: &mut Vec<ExpanderWarning>,
    ) -> Vec<usize> {
        let config = match self.setting {
            PrioritySetting::Missing => {
                warnings.push(ExpanderWarning::PriorityConfigMissing);
                return candidates.to_vec();
            }
            PrioritySetting::Invalid(error) => {
                warnings.push(ExpanderWarning::PriorityConfigInvalid {
                    error: error.clone(),
                });
                return candidates.to_vec();
            }
            PrioritySetting::Loaded(config) => config,
        };
        let mut best: Option<i64> = None;
        let mut kept = Vec::new();
        let mut unmatched = Vec::new();
        for &i in candidates {
            let Some(option) = options.get(i) else {
                continue;
            };
            match config.priority_of(option.group.as_str()) {
                None => unmatched.push(ExpanderWarning::PriorityGroupNotMatched {
                    group: option.group.clone(),
                }),
                Some(p) if best.is_none_or(|b| p > b) => {
                    best = Some(p);
                    kept.clear();
                    kept.push(i);
                }
                Some(p) if best == Some(p) => kept.push(i),
                Some(_) => {}
            }
        }
        if kept.is_empty() {
            if !candidates.is_empty() {
                warnings.push(ExpanderWarning::PriorityNoGroupMatched);
            }
            return candidates.to_vec();
        }
        warnings.extend(unmatched);
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale_up::expander::tests::opt;

    const CONFIG: &str = "10:\n  - .*small.*\n50:\n  - ^big-a$\n  - big-b\n";

    fn options() -> Vec<ExpansionOption> {
        vec![
            opt("small-1", 1, 1, 4000, 8),
            opt("big-a", 1, 1, 4000, 8),
            opt("other", 1, 1, 4000, 8),
            opt("pool/big-b/x", 1, 1, 4000, 8),
            opt("big-a-2", 1, 1, 4000, 8),
        ]
    }

    #[test]
    fn parses_levels_highest_first() {
        let c = PriorityConfig::parse(CONFIG).expect("valid");
        let tiers: Vec<_> = c.tiers().map(|(p, r)| (p, r.to_vec())).collect();
        assert_eq!(
            tiers,
            vec![
                (50, vec!["^big-a$".to_owned(), "big-b".to_owned()]),
                (10, vec![".*small.*".to_owned()]),
            ]
        );
        assert_eq!(c.priority_of("big-a"), Some(50));
        // Unanchored: matches anywhere in the id.
        assert_eq!(c.priority_of("pool/big-b/x"), Some(50));
        assert_eq!(c.priority_of("big-a-2"), None);
        assert_eq!(c.priority_of("very-small"), Some(10));
    }

    #[test]
    fn highest_matching_priority_wins_and_unmatched_are_dropped() {
        let setting = PrioritySetting::from_text(Some(CONFIG));
        let mut w = Vec::new();
        let all: Vec<usize> = (0..5).collect();
        assert_eq!(
            Priority::new(&setting).filter(&options(), &all, &mut w),
            vec![1, 3]
        );
        assert_eq!(
            w,
            vec![
                ExpanderWarning::PriorityGroupNotMatched {
                    group: "other".into()
                },
                ExpanderWarning::PriorityGroupNotMatched {
                    group: "big-a-2".into()
                },
            ]
        );
        // Among the lower-priority candidates only, the best of those wins.
        let mut w = Vec::new();
        assert_eq!(
            Priority::new(&setting).filter(&options(), &[0, 2], &mut w),
            vec![0]
        );
    }

    #[test]
    fn a_group_matching_several_levels_takes_the_highest() {
        let setting = PrioritySetting::from_text(Some("1: ['.*']\n5: ['^b']\n"));
        let opts = vec![opt("a", 1, 1, 1, 1), opt("b", 1, 1, 1, 1)];
        assert_eq!(Priority::new(&setting).best(&opts), vec![1]);
    }

    #[test]
    fn negative_priorities_order_numerically() {
        let setting = PrioritySetting::from_text(Some("-5: [a]\n-2: [b]\n"));
        let opts = vec![opt("a", 1, 1, 1, 1), opt("b", 1, 1, 1, 1)];
        assert_eq!(Priority::new(&setting).best(&opts), vec![1]);
    }

    #[test]
    fn nothing_matched_lets_everything_through_with_a_warning() {
        let setting = PrioritySetting::from_text(Some("10: ['^nope$']\n"));
        let mut w = Vec::new();
        assert_eq!(
            Priority::new(&setting).filter(&options(), &[0, 2], &mut w),
            vec![0, 2]
        );
        assert_eq!(w, vec![ExpanderWarning::PriorityNoGroupMatched]);
    }

    #[test]
    fn missing_or_malformed_config_lets_everything_through_with_a_warning() {
        let all: Vec<usize> = (0..5).collect();
        for (text, expect_missing) in [
            (None, true),
            (Some(""), false),
            (Some("10: [\"(unclosed\"]"), false),
            (Some("high: [a]"), false),
            (Some("10: a-string-not-a-list"), false),
            (Some("- a\n- b\n"), false),
        ] {
            let setting = PrioritySetting::from_text(text);
            let mut w = Vec::new();
            assert_eq!(
                Priority::new(&setting).filter(&options(), &all, &mut w),
                all,
                "{text:?}"
            );
            assert_eq!(w.len(), 1, "{text:?}: {w:?}");
            if expect_missing {
                assert_eq!(w[0], ExpanderWarning::PriorityConfigMissing);
            } else {
                assert!(
                    matches!(w[0], ExpanderWarning::PriorityConfigInvalid { .. }),
                    "{text:?}: {w:?}"
                );
                assert!(w[0].to_string().contains("configuration ignored"));
            }
        }
    }

    #[test]
    fn parse_errors_are_typed() {
        assert_eq!(
            PriorityConfig::parse("  \n"),
            Err(ExpanderError::PriorityConfigEmpty)
        );
        assert!(matches!(
            PriorityConfig::parse("7: ['a', '(b']"),
            Err(ExpanderError::PriorityRegex { priority: 7, ref pattern, .. }) if pattern == "(b"
        ));
        assert!(matches!(
            PriorityConfig::parse("x: [a]"),
            Err(ExpanderError::PriorityConfigYaml { .. })
        ));
        // A priority written twice keeps its last list.
        let c = PriorityConfig::parse("10: [a]\n10: [b]\n").expect("valid");
        assert_eq!(c.tiers().count(), 1);
        assert_eq!(c.priority_of("a"), None);
        assert_eq!(c.priority_of("b"), Some(10));
        // A level with no list is allowed and matches nothing.
        let c = PriorityConfig::parse("10:\n20: [a]\n").expect("valid");
        assert_eq!(c.priority_of("a"), Some(20));
        assert_eq!(c.priority_of("b"), None);
    }
}

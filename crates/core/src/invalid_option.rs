//! Why an option value is refused: the rules the option structs' validated setters check, and the
//! error naming the field that broke one.
//!
//! It decides whether one value may land in one field; it never checks a value against another
//! field (a setter cannot know which of two fields is set last; the shells check those once all
//! are set) and never reads where the value came from (the shells name their flag or file key).

use std::fmt;
use std::time::Duration;

/// A value an option's setter refused, naming the field and the rule it broke.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{field} = {value}: {rule}")]
pub struct InvalidOption {
    field: &'static str,
    value: String,
    rule: OptionRule,
}

impl InvalidOption {
    /// The option struct's field, named as in the code (`utilization_threshold`).
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// The refused value, as text.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The rule the value broke; its text is the reason a shell shows beside its own name of
    /// the field.
    pub fn rule(&self) -> OptionRule {
        self.rule
    }
}

/// A rule on one option value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OptionRule {
    /// A share, from 0 to 1 (a utilization threshold).
    #[error("must be between 0 and 1")]
    Fraction,
    /// A percentage, from 0 to 100 (the unready nodes' share).
    #[error("must be between 0 and 100")]
    Percentage,
    /// A ratio: a finite number, 0 or more (a difference ratio).
    #[error("must be a finite number >= 0")]
    Ratio,
    /// A count or a time that may be zero but not below (a minimum replica count, a backoff in
    /// milliseconds).
    #[error("must not be negative")]
    NotNegative,
    /// A count that must allow something (a parallelism, a scale-up's nodes).
    #[error("must be at least 1")]
    AtLeastOne,
    /// A duration that must not be zero (a first backoff, a reset timeout).
    #[error("must be greater than 0")]
    Positive,
    /// A duration that must not be shorter than another field's (the field named).
    #[error("must not be shorter than {0}")]
    NotShorterThan(&'static str),
}

/// `value` if it lies in `0..=1` (NaN does not).
pub(crate) fn fraction(field: &'static str, value: f64) -> Result<f64, InvalidOption> {
    check(
        field,
        value,
        OptionRule::Fraction,
        (0.0..=1.0).contains(&value),
    )
}

/// `value` if it lies in `0..=100` (NaN does not).
pub(crate) fn percentage(field: &'static str, value: f64) -> Result<f64, InvalidOption> {
    check(
        field,
        value,
        OptionRule::Percentage,
        (0.0..=100.0).contains(&value),
    )
}

/// `value` if it is finite and not below zero.
pub(crate) fn ratio(field: &'static str, value: f64) -> Result<f64, InvalidOption> {
    check(
        field,
        value,
        OptionRule::Ratio,
        value.is_finite() && value >= 0.0,
    )
}

/// `value` if it is not below zero (a count, or a time in milliseconds).
pub(crate) fn not_negative<T>(field: &'static str, value: T) -> Result<T, InvalidOption>
where
    T: PartialOrd + Default + fmt::Display,
{
    let ok = value >= T::default();
    check(field, value, OptionRule::NotNegative, ok)
}

/// `value` if it is at least 1.
pub(crate) fn at_least_one(field: &'static str, value: usize) -> Result<usize, InvalidOption> {
    check(field, value, OptionRule::AtLeastOne, value >= 1)
}

/// `value` if it is not zero.
pub(crate) fn positive(field: &'static str, value: Duration) -> Result<Duration, InvalidOption> {
    check(field, Shown(value), OptionRule::Positive, !value.is_zero()).map(|d| d.0)
}

/// `value` if it is not shorter than `other`, the value of the field `other_field`.
pub(crate) fn not_shorter_than(
    field: &'static str,
    value: Duration,
    other_field: &'static str,
    other: Duration,
) -> Result<Duration, InvalidOption> {
    let rule = OptionRule::NotShorterThan(other_field);
    check(field, Shown(value), rule, value >= other).map(|d| d.0)
}

/// A duration as `Debug` shows it (`0ns`, `90s`): the text of a refused duration.
struct Shown(Duration);

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

fn check<T: fmt::Display>(
    field: &'static str,
    value: T,
    rule: OptionRule,
    ok: bool,
) -> Result<T, InvalidOption> {
    if ok {
        Ok(value)
    } else {
        Err(InvalidOption {
            field,
            value: value.to_string(),
            rule,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fraction_lies_in_zero_to_one() {
        assert_eq!(fraction("t", 0.0), Ok(0.0));
        assert_eq!(fraction("t", 1.0), Ok(1.0));
        for bad in [-0.1, 1.01, f64::NAN, f64::INFINITY] {
            let e = fraction("utilization_threshold", bad).unwrap_err();
            assert_eq!(e.field(), "utilization_threshold");
            assert_eq!(e.rule(), OptionRule::Fraction);
            assert_eq!(e.value(), bad.to_string());
        }
        let e = fraction("utilization_threshold", 1.5).unwrap_err();
        assert_eq!(
            e.to_string(),
            "utilization_threshold = 1.5: must be between 0 and 1"
        );
    }

    #[test]
    fn a_count_of_zero_is_refused() {
        assert_eq!(at_least_one("n", 1), Ok(1));
        let e = at_least_one("max_drain_parallelism", 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "max_drain_parallelism = 0: must be at least 1"
        );
    }
}

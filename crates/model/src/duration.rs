//! Go-style durations (`10s`, `1m30s`, `1.5h`, `300ms`), as upstream flags, the
//! `ClusterAutoscaler` resource (seed 002) and pod annotations write them.
//!
//! Parsing is exact to the nanosecond and never panics; negative durations are rejected because
//! no autoscaler setting accepts one.

use std::time::Duration;

/// Why a duration text was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {text:?}: {why}")]
pub struct DurationError {
    /// The rejected text.
    pub text: String,
    /// What is wrong.
    pub why: &'static str,
}

/// Parses a Go duration: a sequence of decimal numbers, each with an optional fraction and a
/// unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), e.g. `1h15m30.5s`. `0` alone is zero.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let err = |why| DurationError {
        text: text.to_string(),
        why,
    };
    let mut rest = text;
    if let Some(r) = rest.strip_prefix('+') {
        rest = r;
    } else if rest.starts_with('-') {
        return Err(err("negative durations are not allowed"));
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(err("empty"));
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_part, after) = rest.split_at(int_len);
        let (frac_part, after) = match after.strip_prefix('.') {
            Some(a) => {
                let n = a.bytes().take_while(u8::is_ascii_digit).count();
                a.split_at(n)
            }
            None => ("", after),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(err("expected a number"));
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let nanos_per: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(err("missing unit (ns, us, ms, s, m, h)")),
            _ => return Err(err("unknown unit (expected ns, us, ms, s, m, h)")),
        };
        let int: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| err("number too large"))?
        };
        total = int
            .checked_mul(nanos_per)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| err("duration too large"))?;
        // The fraction, exact to the nanosecond (digits beyond are truncated, as Go does).
        let mut scale = nanos_per;
        for d in frac_part.bytes() {
            scale /= 10;
            if scale == 0 {
                break;
            }
            total += u128::from(d - b'0') * scale;
        }
        rest = after;
    }
    // Go's durations are signed 64-bit nanoseconds (about 292 years); beyond is no real time.
    if total > i64::MAX as u128 {
        return Err(err("duration too large (more than 2562047h)"));
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| err("duration too large"))?;
    Ok(Duration::new(secs, (total % 1_000_000_000) as u32))
}

/// Formats a duration the way Go prints it (`1h2m3s`, `1m30s`, `500ms`, `0s`).
pub fn format_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    if nanos < 1_000_000_000 {
        return match nanos {
            n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
            n if n % 1_000 == 0 => format!("{}µs", n / 1_000),
            n => format!("{n}ns"),
        };
    }
    let total_secs = d.as_secs();
    let (h, m, s) = (total_secs / 3600, (total_secs / 60) % 60, total_secs % 60);
    let sub = d.subsec_nanos();
    let secs = if sub == 0 {
        format!("{s}s")
    } else {
        let frac = format!("{sub:09}");
        format!("{s}.{}s", frac.trim_end_matches('0'))
    };
    match (h, m) {
        (0, 0) => secs,
        (0, m) => format!("{m}m{secs}"),
        (h, m) => format!("{h}h{m}m{secs}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_go_durations() {
        let cases = [
            ("0", 0),
            ("10s", 10_000_000_000),
            ("1m30s", 90_000_000_000),
            ("1.5h", 5_400_000_000_000),
            ("300ms", 300_000_000),
            ("2h45m", 9_900_000_000_000),
            ("1us", 1_000),
            ("1µs", 1_000),
            ("7ns", 7),
            (".5s", 500_000_000),
            ("1.000000001s", 1_000_000_001),
            ("+5m", 300_000_000_000),
        ];
        for (text, nanos) in cases {
            assert_eq!(parse_duration(text).unwrap().as_nanos(), nanos, "{text}");
        }
    }

    #[test]
    fn rejects_bad_durations_with_the_text() {
        for bad in [
            "",
            "10",
            "-1s",
            "1x",
            "s",
            "1.s5",
            ".s",
            "1h-5m",
            "99999999999999999999999h",
            // Past Go's int64 nanoseconds: no real time span.
            "2562048h",
            "9223372036854775808ns",
            "1 s",
        ] {
            let e = parse_duration(bad).expect_err(bad);
            assert_eq!(e.text, bad);
        }
    }

    #[test]
    fn go_range_is_the_limit() {
        assert_eq!(
            parse_duration("9223372036854775807ns").unwrap(),
            Duration::from_nanos(i64::MAX as u64)
        );
        assert!(parse_duration("2562047h").is_ok());
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(format_duration(Duration::from_secs(3723)), "1h2m3s");
        assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(format_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::ZERO), "0s");
    }

    proptest! {
        #[test]
        fn format_parse_round_trip(nanos in 0u64..10_000_000_000_000_000) {
            let d = Duration::from_nanos(nanos);
            prop_assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
        }

        #[test]
        fn never_panics(s in "\\PC{0,20}") {
            let _ = parse_duration(&s);
        }
    }
}

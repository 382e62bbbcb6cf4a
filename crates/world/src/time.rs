//! Virtual time: milliseconds since the start of a simulation, and their rendering as API
//! timestamps. This module decides how virtual instants map to wall-clock-looking strings; it
//! must never read the real clock.

/// A virtual instant or duration in milliseconds since the start of the simulation.
pub type SimTime = u64;

/// Renders `epoch_ms + t` (milliseconds since the Unix epoch) as an RFC 3339 UTC timestamp with
/// second precision, the form Kubernetes uses for `metav1.Time`.
pub fn rfc3339(unix_ms: i64) -> String {
    let secs = unix_ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (the well-known era-based method).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_render_as_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_735_689_600_000), "2025-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_709_210_096_999), "2024-02-29T12:34:56Z");
    }
}

//! Durations as users type them, on the command line (`5s`, `500ms`, `1.5s`, `2m`, a bare
//! number of seconds) and in experiment files (fio's `runtime = "4s"`, which also takes `us`
//! and `d`). This is the one duration parser in iolab: every flag and every fio time option
//! goes through it, so negative, NaN, infinite and absurdly large values are refused the same
//! way everywhere, with a message that states the allowed range, before anything converts
//! them to a `Duration` (which panics on overflow) or multiplies them into an estimate.

use std::time::Duration;

/// The longest duration accepted anywhere unless a caller states a tighter bound: 30 days.
/// Nothing iolab runs or waits for is meant to take longer, and it keeps every product
/// (estimates, time limits at twice the runtime) far inside `Duration` and `f64` precision.
pub(crate) const MAX: Duration = Duration::from_secs(30 * 24 * 3600);

/// Parses a duration between zero and [`MAX`]; the error says what forms and range are
/// accepted.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    duration_in(text, Duration::ZERO, MAX)
}

/// Parses a duration and checks it lies in `min..=max`.
pub(crate) fn duration_in(text: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    let seconds = seconds(text)?;
    let range = format!("from {} to {}", human(min), human(max));
    // Compared as f64 before any conversion: `Duration::from_secs_f64` panics on overflow.
    if seconds > max.as_secs_f64() {
        return Err(format!(
            "duration {} is too long: the allowed range is {range}",
            quoted(text)
        ));
    }
    if seconds < min.as_secs_f64() {
        return Err(format!(
            "duration {} is too short: the allowed range is {range}",
            quoted(text)
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// The value in seconds, finite and not negative, without a range check.
fn seconds(text: &str) -> Result<f64, String> {
    let bad = || {
        format!(
            "bad duration {}: expected a number >= 0 (2, 1.5, 1e3) with an optional unit (us, \
             ms, s, m, h, d), e.g. 5s, 500ms or 2m",
            quoted(text)
        )
    };
    let t = text.trim();
    let mut split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    // An exponent (`2e10`, `1e-9`): no unit starts with `e`, so it cannot be mistaken.
    let rest = &t.as_bytes()[split..];
    if split > 0 && matches!(rest.first(), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(rest.get(1), Some(b'+' | b'-')));
        let digits = rest[1 + sign..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits > 0 {
            split += 1 + sign + digits;
        }
    }
    let (num, unit) = t.split_at(split);
    // Digits, dots and an exponent only: no sign, "inf" or "nan" reaches `parse`.
    let value: f64 = num
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .ok_or_else(bad)?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "s" | "sec" => 1.0,
        "us" | "usec" => 1e-6,
        "ms" | "msec" => 1e-3,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        other => {
            return Err(format!(
                "bad duration {}: unknown unit {other:?} (use us, ms, s, m, h or d)",
                quoted(text)
            ))
        }
    };
    let seconds = value * scale;
    if !seconds.is_finite() {
        return Err(bad());
    }
    Ok(seconds)
}

/// The text in quotes, shortened when it is long (a fuzzer's megabyte string should not
/// come back as a megabyte message).
fn quoted(text: &str) -> String {
    if text.chars().count() <= 40 {
        format!("{text:?}")
    } else {
        let head: String = text.chars().take(40).collect();
        format!("{head:?}... ({} bytes)", text.len())
    }
}

/// A bound as people write it: 30d, 1h, 5s, 1ms.
fn human(d: Duration) -> String {
    let s = d.as_secs();
    if d.is_zero() {
        "0s".to_string()
    } else if d.subsec_nanos() != 0 || s == 0 {
        let ms = d.as_secs_f64() * 1e3;
        if ms >= 1.0 {
            format!("{ms}ms")
        } else {
            format!("{}us", d.as_secs_f64() * 1e6)
        }
    } else if s.is_multiple_of(86400) {
        format!("{}d", s / 86400)
    } else if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_usual_forms() {
        assert_eq!(duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(duration("2d").unwrap(), Duration::from_secs(2 * 86400));
        assert_eq!(duration("4S").unwrap(), Duration::from_secs(4));
        assert_eq!(duration("30d").unwrap(), MAX);
        assert_eq!(duration("1e3s").unwrap(), Duration::from_secs(1000));
        assert_eq!(duration("5e-1").unwrap(), Duration::from_millis(500));
        assert!(duration("fast").is_err());
        assert!(duration("5 parsecs").is_err());
        assert!(duration("").is_err());
        assert!(duration("-1").is_err());
    }

    #[test]
    fn refuses_negative_nan_infinite_and_absurd_values_naming_the_range() {
        for bad in [
            "-4s",
            "-1",
            "inf",
            "nan",
            "NaN",
            "infinity",
            "1e30",
            "2e10",
            "1e400",
            "+5s",
            "100000000000d",
            "100000000000000000000000000d",
            "31d",
            &"9".repeat(400),
        ] {
            let e = duration(bad).unwrap_err();
            assert!(e.contains("duration"), "{bad}: {e}");
            assert!(e.len() < 200, "{bad}: message too long: {e}");
        }
        let e = duration("100000000000d").unwrap_err();
        assert!(e.contains("from 0s to 30d"), "{e}");
        let e = duration_in("1e-9", Duration::from_millis(1), MAX).unwrap_err();
        assert!(e.contains("too short"), "{e}");
        let e = duration_in("1us", Duration::from_millis(1), MAX).unwrap_err();
        assert!(
            e.contains("too short") && e.contains("from 1ms to 30d"),
            "{e}"
        );
    }
}

//! Wall-clock time for records: stored as Unix seconds (REAL, so durations are a subtraction)
//! and shown as UTC "YYYY-MM-DD HH:MM:SS" without pulling a date crate for one conversion.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch, with sub-second precision.
pub(crate) fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// UTC calendar time of a Unix timestamp, e.g. "2026-11-22 02:13:14".
pub(crate) fn format_utc(unix: f64) -> String {
    if !unix.is_finite() {
        return "?".to_string();
    }
    let secs = unix.floor() as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian calendar).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_utc(0.0), "1970-01-01 00:00:00");
        assert_eq!(format_utc(951_782_400.5), "2000-02-29 00:00:00");
        assert_eq!(format_utc(1_795_832_394.0), "2026-11-28 02:19:54");
        assert_eq!(format_utc(f64::NAN), "?");
    }
}

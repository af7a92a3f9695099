//! Durations as users type them on the command line: `5s`, `500ms`, `1.5s`, `2m`, or a bare
//! number of seconds (`2`).

use std::time::Duration;

/// Parses a duration; the error says what forms are accepted.
pub fn duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| format!("bad duration {text:?}: expected e.g. 5s, 500ms, 2m or 2"))?;
    let seconds = match unit.trim() {
        "" | "s" | "sec" => value,
        "ms" => value / 1e3,
        "us" => value / 1e6,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "bad duration {text:?}: unknown unit {other:?} (use ms, s, m or h)"
            ))
        }
    };
    if seconds > 1e9 {
        return Err(format!("bad duration {text:?}: too long"));
    }
    Ok(Duration::from_secs_f64(seconds))
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
        assert!(duration("fast").is_err());
        assert!(duration("5 parsecs").is_err());
        assert!(duration("").is_err());
        assert!(duration("-1").is_err());
    }
}

//! `repetitions`: a fixed count, or an adaptive table that runs more rounds for the cells
//! whose confidence interval is still too wide.

use toml::de::DeValue;

use super::{integer, type_name, Value, Walker};

/// How many times each cell runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Repetitions {
    Fixed(u32),
    /// Run `min` rounds, then more rounds for the cells whose confidence interval (relative
    /// half-width of the mean of `metric`) is still wider than `target_ci`, up to `max`.
    Adaptive {
        min: u32,
        max: u32,
        target_ci: f64,
        metric: Option<String>,
    },
}

impl Repetitions {
    /// Rounds that always run.
    pub(crate) fn min_rounds(&self) -> u32 {
        match self {
            Repetitions::Fixed(n) => *n,
            Repetitions::Adaptive { min, .. } => *min,
        }
    }
    /// Rounds that may run at most.
    pub(crate) fn max_rounds(&self) -> u32 {
        match self {
            Repetitions::Fixed(n) => *n,
            Repetitions::Adaptive { max, .. } => *max,
        }
    }
}

pub(super) const ADAPTIVE_KEYS: &[&str] = &["min", "max", "target_ci", "metric"];

impl Walker<'_> {
    pub(super) fn repetitions(&mut self, v: &Value) -> Option<Repetitions> {
        let allowed = "an integer from 1 to 1000, or { target_ci = 0.02, min = 3, max = 30, \
                       metric = \"read_iops\" } for adaptive repetitions";
        let table = match v.get_ref() {
            DeValue::Integer(_) => {
                return self
                    .integer_in(v, "repetitions", 1, 1000)
                    .map(|n| Repetitions::Fixed(n as u32))
            }
            DeValue::Table(t) => t,
            other => {
                self.error(
                    v.span(),
                    format!("`repetitions` cannot be {}", type_name(other)),
                    Some(allowed.to_string()),
                );
                return None;
            }
        };
        let (mut min, mut max, mut target_ci, mut metric) = (3, 30, None, None);
        let mut ok = true;
        for (key, value) in table.iter() {
            match key.get_ref().as_ref() {
                "min" => match self.integer_in(value, "min", 1, 1000) {
                    Some(n) => min = n as u32,
                    None => ok = false,
                },
                "max" => match self.integer_in(value, "max", 1, 1000) {
                    Some(n) => max = n as u32,
                    None => ok = false,
                },
                "target_ci" => {
                    let x = match value.get_ref() {
                        DeValue::Float(f) => f.as_str().replace('_', "").parse::<f64>().ok(),
                        DeValue::Integer(i) => integer(i).map(|n| n as f64),
                        _ => None,
                    };
                    match x.filter(|x| *x > 0.0 && *x < 1.0) {
                        Some(x) => target_ci = Some(x),
                        None => {
                            ok = false;
                            self.error(
                                value.span(),
                                "`target_ci` is the wanted relative half-width of the 95% \
                                 confidence interval"
                                    .to_string(),
                                Some("a number between 0 and 1, e.g. 0.02 for +-2%".to_string()),
                            )
                        }
                    }
                }
                "metric" => match self.nonempty_string(value, "metric") {
                    Some(m)
                        if crate::experiment::metrics::is_known(&m) || self.engine_metric(&m) =>
                    {
                        metric = Some(m)
                    }
                    Some(m) => {
                        ok = false;
                        let hint = crate::suggest::closest(
                            &m,
                            crate::experiment::metrics::known()
                                .iter()
                                .map(String::as_str),
                        )
                        .map(|s| format!(" (did you mean `{s}`?)"))
                        .unwrap_or_default();
                        self.error(
                            value.span(),
                            format!("`{m}` is not a metric iolab records{hint}"),
                            Some(crate::experiment::metrics::known().join(", ")),
                        );
                    }
                    None => ok = false,
                },
                other => {
                    ok = false;
                    self.unknown_key(key.span(), other, "`repetitions`", ADAPTIVE_KEYS)
                }
            }
        }
        if target_ci.is_none() && ok {
            self.error(
                v.span(),
                "adaptive `repetitions` needs `target_ci`".to_string(),
                Some(allowed.to_string()),
            );
            return None;
        }
        if min > max {
            self.error(
                v.span(),
                format!("`repetitions`: min ({min}) is larger than max ({max})"),
                None,
            );
            return None;
        }
        ok.then(|| Repetitions::Adaptive {
            min,
            max,
            target_ci: target_ci.unwrap_or_default(),
            metric,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::*;
    use super::*;

    #[test]
    fn adaptive_repetitions() {
        let e = parse(
            "x.toml",
            "name = \"n\"\nrepetitions = { target_ci = 0.02, max = 12 }",
        )
        .unwrap();
        assert_eq!(
            e.repetitions,
            Repetitions::Adaptive {
                min: 3,
                max: 12,
                target_ci: 0.02,
                metric: None
            }
        );
        let errs = errors("name = \"n\"\nrepetitions = { max = 12 }");
        assert!(errs[0].starts_with("x.toml:2:15: adaptive `repetitions` needs `target_ci`"));
        let errs = errors("name = \"n\"\nrepetitions = { target_ci = 2.0 }");
        assert!(errs[0].contains("confidence interval"), "{errs:?}");
        let errs = errors("name = \"n\"\nrepetitions = { target_ci = 0.1, min = 5, max = 4 }");
        assert!(
            errs[0].contains("min (5) is larger than max (4)"),
            "{errs:?}"
        );
        let errs = errors("name = \"n\"\nrepetitions = { target_ci = 0.1, metric = \"read_iop\" }");
        assert!(
            errs[0]
                .contains("`read_iop` is not a metric iolab records (did you mean `read_iops`?)"),
            "{errs:?}"
        );
        let errs = errors("name = \"n\"\nrepetitions = 0");
        assert!(errs[0].starts_with("x.toml:2:15: `repetitions` is out of range"));
        assert_eq!(errs[1], "    allowed: an integer from 1 to 1000");
    }
}

//! Runs grouped into cells by their factor levels, with factors and levels in a meaningful
//! order. The store keeps each run's levels as a JSON object (keys sorted), and runs in the
//! shuffled order they ran, so neither gives the order people expect (`on, near, far`;
//! `4k, 64k, 1m`). The experiment file's `[factors]` table does: levels are listed there in
//! the order the user chose. Levels the file does not list (imported runs, edited files) come
//! after, in natural order (numbers with size suffixes by value).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::store::{Run, RunStatus};

/// A factor and its levels in display order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Factor {
    pub name: String,
    pub levels: Vec<String>,
}

/// The runs of one cell, split by how they ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CellRuns {
    /// (factor, level) in factor order; empty for runs without factors.
    pub levels: Vec<(String, String)>,
    pub ok: Vec<i64>,
    /// (run id, reason)
    pub failed: Vec<(i64, String)>,
    pub not_applicable: Vec<(i64, String)>,
}

impl CellRuns {
    /// `rq_affinity=1,placement=far`, written as runs' cell keys are (a level holding a
    /// comma in double quotes), so it can be matched with what `runs` lists and given to
    /// `compare` as a selector; `base` for runs without factors, the cell key they are
    /// stored under.
    pub(crate) fn label(&self) -> String {
        if self.levels.is_empty() {
            super::import::BASE_CELL.to_string()
        } else {
            self.levels
                .iter()
                .map(|(f, l)| format!("{f}={}", crate::experiment::plan::quote_label(l)))
                .collect::<Vec<_>>()
                .join(",")
        }
    }

    /// Only the levels, `1/far`: short enough for a table whose header names the factors.
    pub(crate) fn short_label(&self) -> String {
        if self.levels.is_empty() {
            super::import::BASE_CELL.to_string()
        } else {
            self.levels
                .iter()
                .map(|(_, l)| l.as_str())
                .collect::<Vec<_>>()
                .join("/")
        }
    }

    pub(crate) fn level(&self, factor: &str) -> Option<&str> {
        self.levels
            .iter()
            .find(|(f, _)| f == factor)
            .map(|(_, l)| l.as_str())
    }

    /// The reason shared by the cell's not-applicable runs, when the cell has no result.
    pub(crate) fn not_applicable_reason(&self) -> Option<&str> {
        (self.ok.is_empty() && !self.not_applicable.is_empty())
            .then(|| self.not_applicable[0].1.as_str())
    }
}

/// A level as text: strings as they are, numbers and booleans as TOML/JSON print them, and a
/// structured level (e.g. a placement stored with its resolved CPUs) by its `label`.
pub(crate) fn level_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(map) => match map.get("label").or_else(|| map.get("name")) {
            Some(label) => level_text(label),
            None => v.to_string(),
        },
        other => other.to_string(),
    }
}

/// A run's levels as factor -> text.
pub(crate) fn run_levels(run: &Run) -> BTreeMap<String, String> {
    match &run.cell_levels {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| (k.clone(), level_text(v)))
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// Whether the experiment file's workload is fio's (no `engine`, or `engine = "fio"`), not a
/// program engine's. An import has no file: fio's outputs.
pub(crate) fn runs_fio(file_text: &str) -> bool {
    let Ok(doc) = file_text.parse::<toml::Table>() else {
        return true;
    };
    doc.get("engine")
        .and_then(toml::Value::as_str)
        .is_none_or(|e| e == "fio")
}

/// Factor order and declared level order from an experiment file's `[factors]` table; empty
/// when the text is not TOML or has no factors (imported experiments).
pub(crate) fn declared_factors(file_text: &str) -> Vec<Factor> {
    let Ok(doc) = file_text.parse::<toml::Table>() else {
        return Vec::new();
    };
    let Some(toml::Value::Table(factors)) = doc.get("factors") else {
        return Vec::new();
    };
    factors
        .iter()
        .map(|(name, v)| {
            let levels = match v {
                toml::Value::Array(items) => items.iter().map(toml_level).collect(),
                other => vec![toml_level(other)],
            };
            Factor {
                name: name.clone(),
                levels,
            }
        })
        .collect()
}

fn toml_level(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        // An inline table level (e.g. an explicit CPU list with a label) is shown by its label.
        toml::Value::Table(t) => t
            .get("label")
            .or_else(|| t.get("name"))
            .map(toml_level)
            .unwrap_or_else(|| v.to_string()),
        other => other.to_string(),
    }
}

/// The factors the runs actually vary (or carry), in declared order, then any others by name.
pub(crate) fn factors_of(declared: &[Factor], runs: &[Run]) -> Vec<Factor> {
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in runs {
        for (f, l) in run_levels(r) {
            let levels = seen.entry(f).or_default();
            if !levels.contains(&l) {
                levels.push(l);
            }
        }
    }
    let mut out = Vec::new();
    for d in declared {
        if let Some(observed) = seen.remove(&d.name) {
            out.push(Factor {
                name: d.name.clone(),
                levels: ordered_levels(&d.levels, observed),
            });
        }
    }
    for (name, observed) in seen {
        out.push(Factor {
            name,
            levels: ordered_levels(&[], observed),
        });
    }
    out
}

fn ordered_levels(declared: &[String], observed: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = declared
        .iter()
        .filter(|l| observed.contains(l))
        .cloned()
        .collect();
    let mut rest: Vec<String> = observed.into_iter().filter(|l| !out.contains(l)).collect();
    rest.sort_by(|a, b| natural_cmp(a, b));
    out.extend(rest);
    out
}

/// Numbers (with k/m/g size suffixes) by value, then text.
pub(crate) fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    match (numeric_value(a), numeric_value(b)) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// `4k` -> 4096, `1m` -> 1048576, `32` -> 32 (fio's binary size suffixes); `None` for text.
pub(crate) fn numeric_value(level: &str) -> Option<f64> {
    let t = level.trim().to_ascii_lowercase();
    let t = t.strip_suffix('b').unwrap_or(&t);
    let t = t.strip_suffix('i').unwrap_or(t);
    let (num, mult) = match t.chars().last()? {
        'k' => (&t[..t.len() - 1], 1024.0),
        'm' => (&t[..t.len() - 1], 1024.0 * 1024.0),
        'g' => (&t[..t.len() - 1], 1024.0 * 1024.0 * 1024.0),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().ok()?;
    v.is_finite().then_some(v * mult)
}

/// Whether a level has a size suffix (so a chart can label the axis in KiB).
pub(crate) fn has_size_suffix(level: &str) -> bool {
    level
        .trim()
        .to_ascii_lowercase()
        .trim_end_matches(['b', 'i'])
        .ends_with(['k', 'm', 'g'])
}

/// Groups runs into cells keyed by their levels of `factors` (other levels are ignored, so
/// a comparison between levels of one factor can match on the rest). Cells come in matrix
/// order: by the position of each level in its factor, the last factor varying fastest.
pub(crate) fn group(runs: &[Run], factors: &[Factor]) -> Vec<CellRuns> {
    let mut by_key: BTreeMap<Vec<usize>, CellRuns> = BTreeMap::new();
    for r in runs {
        let levels = run_levels(r);
        let mut key = Vec::with_capacity(factors.len());
        let mut named = Vec::with_capacity(factors.len());
        for f in factors {
            let l = levels.get(&f.name).cloned().unwrap_or_else(|| "-".into());
            key.push(f.levels.iter().position(|x| *x == l).unwrap_or(usize::MAX));
            named.push((f.name.clone(), l));
        }
        let cell = by_key.entry(key).or_insert_with(|| CellRuns {
            levels: named,
            ok: Vec::new(),
            failed: Vec::new(),
            not_applicable: Vec::new(),
        });
        match &r.status {
            RunStatus::Ok => cell.ok.push(r.id),
            RunStatus::Failed(why) => cell.failed.push((r.id, why.clone())),
            RunStatus::NotApplicable(why) => cell.not_applicable.push((r.id, why.clone())),
        }
    }
    by_key.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: i64, levels: Value, status: RunStatus) -> Run {
        Run {
            id,
            experiment_id: 1,
            cell_key: String::new(),
            cell_levels: levels,
            repetition: 1,
            warmup: false,
            start_unix: 0.0,
            end_unix: 1.0,
            status,
        }
    }

    #[test]
    fn declared_order_wins_then_natural_order() {
        let declared = declared_factors(
            "[factors]\nrq_affinity = [0, 1]\nplacement = [\"on\", \"near\", \"far\"]\n",
        );
        assert_eq!(declared[0].levels, ["0", "1"]);
        let runs = vec![
            run(
                1,
                serde_json::json!({"placement": "far", "rq_affinity": 1}),
                RunStatus::Ok,
            ),
            run(
                2,
                serde_json::json!({"placement": "on", "rq_affinity": 0}),
                RunStatus::Ok,
            ),
            run(
                3,
                serde_json::json!({"placement": "near", "rq_affinity": 0, "bs": "64k"}),
                RunStatus::Ok,
            ),
            run(
                4,
                serde_json::json!({"placement": "near", "rq_affinity": 0, "bs": "4k"}),
                RunStatus::Failed("x".into()),
            ),
        ];
        let f = factors_of(&declared, &runs);
        let names: Vec<&str> = f.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["rq_affinity", "placement", "bs"]);
        assert_eq!(f[1].levels, ["on", "near", "far"]);
        assert_eq!(f[2].levels, ["4k", "64k"]);
        let cells = group(&runs, &f[..2]);
        assert_eq!(cells.len(), 3);
        assert_eq!(cells[0].label(), "rq_affinity=0,placement=on");
        assert_eq!(cells[1].ok, [3]);
        assert_eq!(cells[1].failed.len(), 1);
        assert_eq!(cells[2].short_label(), "1/far");
        // Without factors, one cell, named as its runs are stored (and as `runs` lists them).
        let plain = group(&runs, &[]);
        assert_eq!(plain.len(), 1);
        assert_eq!(
            (plain[0].label(), plain[0].short_label()),
            ("base".into(), "base".into())
        );
    }

    #[test]
    fn levels_print_as_people_wrote_them() {
        assert_eq!(level_text(&serde_json::json!("on")), "on");
        assert_eq!(level_text(&serde_json::json!(1)), "1");
        assert_eq!(level_text(&serde_json::json!(true)), "true");
        assert_eq!(
            level_text(&serde_json::json!({"label": "near", "cpus": [1]})),
            "near"
        );
    }

    #[test]
    fn sizes_sort_by_value() {
        let mut v = vec!["1m", "4k", "64k", "512", "4m"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["512", "4k", "64k", "1m", "4m"]);
        assert_eq!(numeric_value("16KiB"), Some(16384.0));
        assert!(has_size_suffix("4k") && !has_size_suffix("32"));
        assert_eq!(numeric_value("far"), None);
    }
}

//! The cells of an imported experiment. A directory of fio outputs is often a sweep (block
//! sizes, queue depths, engines), each configuration run a few times; stored as one cell, the
//! runs of every configuration would be taken for repetitions of one and their statistics
//! mixed. So each fio option whose value differs between the outputs is a factor, and a run's
//! cell is its levels of those, named as `iolab run` names the cells of a matrix.
//!
//! Options that say where a job ran, what it was called or which random numbers it drew, not
//! how it ran (`filename`, `directory`, the job's `name`, log file names, `randseed`), are no
//! factors: one job file run on two hosts names two devices, and its runs must still meet cell
//! by cell in a comparison. Outputs that differ in them are pointed out instead, to be told
//! apart by tags.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::import::BASE_CELL;
use crate::experiment::plan::quote_label;
use crate::store::{Run, Store};
use crate::workload::fio_json::{self, FioReport};

/// The level of an option an output's job file did not set: fio used its default.
pub(crate) const DEFAULT_LEVEL: &str = "default";

/// Options naming where a job ran, what it was called or which random numbers it drew, not
/// how it ran (a seed per repetition is how runs are made independent).
pub(crate) fn says_where(option: &str) -> bool {
    matches!(
        option,
        "name" | "description" | "filename" | "directory" | "filename_format" | "randseed"
    ) || (option.starts_with("write_") && option.ends_with("_log"))
}

/// Options fio reads as a number of bytes (several, for `bs`'s per-direction `4k,64k` and
/// `bsrange`'s `1k-4k`), which outputs may write apart: `4k`, `4K` and `4096` are one size.
const SIZE_OPTIONS: &[&str] = &["bs", "ba", "bsrange", "size", "io_size", "offset"];

/// fio's block size where a job sets none: 4 KiB.
const FIO_DEFAULT_BS: &str = "4k";

/// `value` of `option` in one spelling per size, so that one configuration is one cell: each
/// plain number, or number with a unit letter (k, m, g, t, either case: 1024 apart unless the
/// job says `kb_base=1000`), as the largest unit that holds it whole (`4096` -> `4k`).
/// Anything else, as written (fio's `KiB` is 1000 in its default mode: left alone).
pub(crate) fn one_spelling(option: &str, value: &str, kb_base_1000: bool) -> String {
    let option = crate::workload::options::canonical(option);
    if !SIZE_OPTIONS.contains(&option) {
        return value.to_string();
    }
    if value == DEFAULT_LEVEL {
        return default_level(option).to_string();
    }
    let base: u64 = if kb_base_1000 { 1000 } else { 1024 };
    let bytes = |part: &str| -> Option<u64> {
        let digits = part.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let unit = &part[digits.len()..];
        let number: u64 = digits.parse().ok()?;
        let power = match unit.to_ascii_lowercase().as_str() {
            "" => 0,
            "k" => 1,
            "m" => 2,
            "g" => 3,
            "t" => 4,
            _ => return None,
        };
        number.checked_mul(base.checked_pow(power)?)
    };
    let spelled = |n: u64| {
        let (mut n, mut unit) = (n, 0);
        while n != 0 && n % base == 0 && unit < 4 {
            n /= base;
            unit += 1;
        }
        format!("{n}{}", ["", "k", "m", "g", "t"][unit])
    };
    // Each part, and the separator after it (`,` between directions, `-` of a range).
    let mut out = String::new();
    for piece in value.split_inclusive([',', '-', ':']) {
        let part = piece.trim_end_matches([',', '-', ':']);
        let Some(n) = bytes(part) else {
            return value.to_string();
        };
        out.push_str(&spelled(n));
        out.push_str(&piece[part.len()..]);
    }
    out
}

/// An output's configuration, option -> value: the `[global]` section's values under the
/// jobs' own, sizes in one spelling (`one_spelling`). Where its jobs set an option apart (a
/// reader beside a writer), the jobs' values in job order, each once, joined with '/'.
pub(crate) fn configuration(report: &FioReport) -> BTreeMap<String, String> {
    let names: BTreeSet<&String> = report
        .global_options
        .keys()
        .chain(report.jobs.iter().flat_map(|j| j.options.keys()))
        .collect();
    names
        .into_iter()
        .map(|name| {
            let mut values: Vec<String> = Vec::new();
            for job in &report.jobs {
                let setting = |option: &str| {
                    job.options
                        .get(option)
                        .or_else(|| report.global_options.get(option))
                };
                let kb_base_1000 = setting("kb_base").is_some_and(|v| v.trim() == "1000");
                let v = setting(name).map_or(DEFAULT_LEVEL, String::as_str);
                let v = one_spelling(name, v, kb_base_1000);
                if !values.contains(&v) {
                    values.push(v);
                }
            }
            (name.clone(), values.join("/"))
        })
        .collect()
}

/// The factors of a set of outputs' configurations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImportCells {
    /// Options whose values differ between the outputs, by name.
    pub factors: Vec<String>,
    /// Options saying where a job ran or what it was called whose values differ too.
    pub places: Vec<String>,
}

impl ImportCells {
    pub(crate) fn of(configs: &[BTreeMap<String, String>]) -> Self {
        let names: BTreeSet<&String> = configs.iter().flat_map(|c| c.keys()).collect();
        let (mut factors, mut places) = (Vec::new(), Vec::new());
        for name in names {
            let values: BTreeSet<&str> = configs.iter().map(|c| level(c, name)).collect();
            if values.len() > 1 {
                if says_where(name) {
                    places.push(name.clone());
                } else {
                    factors.push(name.clone());
                }
            }
        }
        ImportCells { factors, places }
    }

    /// The cell key and levels of an output of `config`.
    pub(crate) fn cell(&self, config: &BTreeMap<String, String>) -> (String, Value) {
        if self.factors.is_empty() {
            return (BASE_CELL.to_string(), Value::Object(Default::default()));
        }
        let key = self
            .factors
            .iter()
            .map(|f| format!("{f}={}", quote_label(level(config, f))))
            .collect::<Vec<_>>()
            .join(",");
        let levels = self
            .factors
            .iter()
            .map(|f| (f.clone(), Value::String(level(config, f).to_string())))
            .collect();
        (key, Value::Object(levels))
    }
}

/// Runs of imported experiments compared with one another: an option one experiment held
/// constant is no factor there, while another's outputs set it apart. A run lacking a level
/// of a factor some imported run of the comparison has takes its level from its own fio
/// output, so that the same configuration meets cell by cell whichever experiment holds it.
pub(crate) fn complete_levels(
    store: &Store,
    imported: &BTreeSet<i64>,
    sides: [&mut Vec<Run>; 2],
) -> anyhow::Result<()> {
    let [a, b] = sides;
    let mut runs: Vec<&mut Run> = a
        .iter_mut()
        .chain(b.iter_mut())
        .filter(|r| imported.contains(&r.experiment_id))
        .collect();
    let factors: BTreeSet<String> = runs
        .iter()
        .filter_map(|r| r.cell_levels.as_object())
        .flat_map(|levels| levels.keys().cloned())
        .collect();
    for run in &mut runs {
        let Value::Object(levels) = &mut run.cell_levels else {
            continue;
        };
        if factors.iter().all(|f| levels.contains_key(f)) {
            continue;
        }
        let Some(config) = stored_configuration(store, run.id)? else {
            continue;
        };
        for f in &factors {
            levels
                .entry(f.clone())
                .or_insert_with(|| Value::String(level(&config, f).to_string()));
        }
    }
    Ok(())
}

/// The configuration of a stored run's fio output; `None` for a run without one, or whose
/// output no longer parses.
pub(crate) fn stored_configuration(
    store: &Store,
    run: i64,
) -> anyhow::Result<Option<BTreeMap<String, String>>> {
    let text = store.run_texts(run)?.and_then(|t| t.fio_json);
    Ok(text
        .and_then(|t| fio_json::parse(&t).ok())
        .map(|report| configuration(&report)))
}

/// The ids of the experiments `import` made.
pub(crate) fn imported_experiments(store: &Store) -> anyhow::Result<BTreeSet<i64>> {
    Ok(store
        .experiments()?
        .into_iter()
        .filter(|e| e.status == "imported")
        .map(|e| e.id)
        .collect())
}

fn level<'a>(config: &'a BTreeMap<String, String>, option: &str) -> &'a str {
    config
        .get(option)
        .map_or(default_level(option), String::as_str)
}

/// The level of `option` where an output's job did not set it: fio's block size for `bs`
/// (the same runs as `bs=4k`), else [`DEFAULT_LEVEL`].
fn default_level(option: &str) -> &'static str {
    if crate::workload::options::canonical(option) == "bs" {
        FIO_DEFAULT_BS
    } else {
        DEFAULT_LEVEL
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::fio_json::JobResult;

    fn job(options: &[(&str, &str)]) -> JobResult {
        JobResult {
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    fn report(global: &[(&str, &str)], jobs: Vec<JobResult>) -> FioReport {
        FioReport {
            global_options: global
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            jobs,
            ..Default::default()
        }
    }

    #[test]
    fn jobs_override_the_global_section_and_differing_jobs_are_joined() {
        let r = report(
            &[("bs", "4k"), ("iodepth", "8")],
            vec![
                job(&[("rw", "read"), ("iodepth", "8")]),
                job(&[("rw", "write"), ("bs", "1m")]),
                job(&[("rw", "read"), ("iodepth", "8")]),
            ],
        );
        let c = configuration(&r);
        assert_eq!(c["bs"], "4k/1m");
        assert_eq!(c["iodepth"], "8");
        assert_eq!(c["rw"], "read/write");
    }

    #[test]
    fn options_that_differ_are_the_factors_and_places_are_not() {
        let a = configuration(&report(
            &[],
            vec![job(&[("iodepth", "1"), ("filename", "/dev/nvme0n1")])],
        ));
        let b = configuration(&report(
            &[],
            vec![job(&[
                ("iodepth", "32"),
                ("filename", "/dev/nvme1n1"),
                ("bs", "8k"),
            ])],
        ));
        let seeded = |c: &BTreeMap<String, String>, seed: &str| {
            let mut c = c.clone();
            c.insert("randseed".into(), seed.into());
            c
        };
        let cells = ImportCells::of(&[a.clone(), b.clone(), seeded(&a, "7")]);
        assert_eq!(cells.factors, ["bs", "iodepth"]);
        assert_eq!(cells.places, ["filename", "randseed"]);
        let (key, levels) = cells.cell(&a);
        // fio's own block size where none is set.
        assert_eq!(key, "bs=4k,iodepth=1");
        assert_eq!(levels["iodepth"], "1");
        assert_eq!(cells.cell(&b).0, "bs=8k,iodepth=32");
        // One configuration throughout: one cell, as before.
        let same = ImportCells::of(&[a.clone(), a.clone()]);
        assert!(same.factors.is_empty() && same.places.is_empty());
        assert_eq!(same.cell(&a).0, BASE_CELL);
    }

    /// `4k`, `4K` and `4096` are one block size, one cell (`compare bs=4k bs=4096` showed
    /// +26.7% between one configuration's runs); a job's `kb_base=1000` makes `4k` 4000
    /// bytes, and fio's `KiB` (1000 in its default mode) is left as written.
    #[test]
    fn one_size_written_apart_is_one_level() {
        let bs = |options: &[(&str, &str)]| {
            configuration(&report(&[], vec![job(options)]))["bs"].clone()
        };
        for written in ["4k", "4K", "4096"] {
            assert_eq!(bs(&[("bs", written)]), "4k", "{written}");
        }
        assert_eq!(bs(&[("bs", "1048576,4K")]), "1m,4k");
        assert_eq!(bs(&[("bs", "4k"), ("kb_base", "1000")]), "4k");
        assert_eq!(bs(&[("bs", "4096"), ("kb_base", "1000")]), "4096");
        assert_eq!(bs(&[("bs", "4KiB")]), "4KiB");
        let range = configuration(&report(&[], vec![job(&[("bsrange", "1024-4K")])]));
        assert_eq!(range["bsrange"], "1k-4k");
        let other = configuration(&report(&[], vec![job(&[("iodepth", "0x10")])]));
        assert_eq!(other["iodepth"], "0x10");
    }

    #[test]
    fn a_level_holding_a_comma_is_quoted_in_the_key() {
        let a = configuration(&report(&[], vec![job(&[("cpus_allowed", "0,1")])]));
        let b = configuration(&report(&[], vec![job(&[("cpus_allowed", "2")])]));
        let cells = ImportCells::of(&[a.clone(), b]);
        assert_eq!(cells.cell(&a).0, "cpus_allowed=\"0,1\"");
    }
}

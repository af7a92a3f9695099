//! What each compared run ran, so that a cell pooling runs of different fio jobs is said to.
//! Cells are keyed by factor levels only, and a tag reused across experiments (`--tag
//! baseline` on a random-read experiment and on a sequential one, two imports under one
//! kernel tag) gathers their runs into one cell: its mean and interval then describe neither
//! workload, and nothing in the table shows it. A run's workload is its fio jobs' options, as
//! its job file gives them (or, for an import, fio's `job options`), without those that say
//! where a job ran, not how (`filename`, the job's name, `randseed`, ...: the same job on
//! another scratch device is the same workload), sizes in one spelling, as an import's cells
//! are told apart (`import_cells`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::cells::CellRuns;
use super::import_cells::{one_spelling, says_where};
use crate::store::JobText;
use crate::workload::options;

/// One fio job's options, by canonical name.
type Job = BTreeMap<String, String>;

/// A run's jobs (a job fio runs `numjobs` times is one job here).
pub(crate) type Workload = BTreeSet<Job>;

/// The workload of a stored run; `None` when its text holds no job (a program's output).
pub(crate) fn of(text: &JobText) -> Option<Workload> {
    let jobs = match text {
        JobText::JobFile(t) => of_job_file(t),
        JobText::FioOutput(t) => of_fio_output(t),
    };
    (!jobs.is_empty()).then_some(jobs)
}

fn insert(job: &mut Job, name: &str, value: &str) {
    let name = options::canonical(name.trim());
    if !says_where(name) {
        job.insert(name.to_string(), value.trim().to_string());
    }
}

/// Sizes in one spelling (`4096` and `4K` are `4k`), once the job's `kb_base` is known.
fn spelled_alike(mut job: Job) -> Job {
    let kb_base_1000 = job.get("kb_base").is_some_and(|b| b == "1000");
    for (name, value) in job.iter_mut() {
        *value = one_spelling(name, value, kb_base_1000);
    }
    job
}

/// The jobs of a job file: each `[section]` a job, `[global]` options the default of the
/// jobs after it (as fio reads them).
fn of_job_file(text: &str) -> Workload {
    let mut global = Job::new();
    let mut jobs: Vec<Job> = Vec::new();
    let mut in_global = false;
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_global = section == "global";
            if !in_global {
                jobs.push(global.clone());
            }
            continue;
        }
        let (name, value) = line.split_once('=').unwrap_or((line, ""));
        match jobs.last_mut() {
            Some(job) if !in_global => insert(job, name, value),
            _ => insert(&mut global, name, value),
        }
    }
    jobs.into_iter().map(spelled_alike).collect()
}

/// The jobs of fio's JSON output: each job's `job options` over the `global options`
/// (client/server outputs list them under `client_stats`).
fn of_fio_output(text: &str) -> Workload {
    let Ok(doc) = serde_json::from_str::<Value>(text) else {
        return Workload::new();
    };
    let mut global = Job::new();
    if let Some(g) = doc.get("global options").and_then(Value::as_object) {
        for (n, v) in g {
            insert(&mut global, n, v.as_str().unwrap_or_default());
        }
    }
    let entries = ["jobs", "client_stats"]
        .iter()
        .filter_map(|k| doc.get(*k).and_then(Value::as_array))
        .flatten();
    entries
        .filter_map(|e| e.get("job options").and_then(Value::as_object))
        .map(|opts| {
            let mut job = global.clone();
            for (n, v) in opts {
                insert(&mut job, n, v.as_str().unwrap_or_default());
            }
            spelled_alike(job)
        })
        .collect()
}

/// The values a workload's jobs give `name` ("not set" where a job leaves it out).
fn values_in(w: &Workload, name: &str) -> BTreeSet<String> {
    w.iter()
        .map(|j| j.get(name).cloned().unwrap_or_else(|| "not set".into()))
        .collect()
}

/// The options whose values differ among `workloads`, each with the values seen ("not set"
/// where a workload leaves it out).
fn differences(workloads: &[&Workload]) -> Vec<(String, BTreeSet<String>)> {
    let names: BTreeSet<&String> = workloads
        .iter()
        .flat_map(|w| w.iter())
        .flat_map(|j| j.keys())
        .collect();
    names
        .into_iter()
        .filter_map(|name| {
            let each: Vec<BTreeSet<String>> =
                workloads.iter().map(|w| values_in(w, name)).collect();
            let differ = each.windows(2).any(|p| p[0] != p[1]);
            differ.then(|| (name.clone(), each.into_iter().flatten().collect()))
        })
        .collect()
}

/// Said when cells of `label`'s side each pool runs of different fio jobs: the cells, and
/// the options they differ in.
pub(crate) fn pooled_warning(
    label: &str,
    cells: &[CellRuns],
    workloads: &BTreeMap<i64, Workload>,
) -> Option<String> {
    let mut pooling = Vec::new();
    let mut differ: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for cell in cells {
        let distinct: BTreeSet<&Workload> =
            cell.ok.iter().filter_map(|id| workloads.get(id)).collect();
        if distinct.len() < 2 {
            continue;
        }
        pooling.push(cell.label());
        let distinct: Vec<&Workload> = distinct.into_iter().collect();
        for (name, values) in differences(&distinct) {
            differ.entry(name).or_default().extend(values);
        }
    }
    let first = pooling.first()?;
    const SHOWN: usize = 3;
    let (cells_said, whose) = match pooling.len() {
        1 => (format!("cell {first} pools"), "its"),
        n if n <= SHOWN => (format!("cells {} each pool", pooling.join(", ")), "their"),
        n => (
            format!(
                "cells {} and {} more each pool",
                pooling[..SHOWN].join(", "),
                n - SHOWN
            ),
            "their",
        ),
    };
    let how = if differ.is_empty() {
        "their jobs are paired differently".to_string()
    } else {
        let said: Vec<String> = differ
            .iter()
            .map(|(n, v)| format!("{n}: {}", v.iter().cloned().collect::<Vec<_>>().join(", ")))
            .collect();
        format!("they differ in {}", said.join("; "))
    };
    Some(format!(
        "warning: {label}: {cells_said} runs of different fio jobs ({how}), so {whose} figures \
         mix workloads: select one workload on that side (e.g. experiment=N) to \
         compare like with like"
    ))
}

/// Said when matched cells ran different fio jobs on the two sides (each side's cell one
/// job): two experiment ids mistyped, a random read against a sequential write, would
/// otherwise show as a change of everything. Options the selectors name (`named`, the
/// factors they fix: `bs=4k` against `bs=64k` is the comparison asked for) are not said.
pub(crate) fn across_warning(
    base: &[CellRuns],
    cand: &[CellRuns],
    named: &BTreeSet<&str>,
    workloads: &BTreeMap<i64, Workload>,
) -> Option<String> {
    let only = |cell: &CellRuns| -> Option<&Workload> {
        let distinct: BTreeSet<&Workload> =
            cell.ok.iter().filter_map(|id| workloads.get(id)).collect();
        let first = distinct.first().copied();
        first.filter(|_| distinct.len() == 1)
    };
    // Option -> (baseline's values, candidate's values), over every matched cell.
    let mut differ: BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
    for b in base {
        let Some(c) = cand.iter().find(|c| c.levels == b.levels) else {
            continue;
        };
        let (Some(wb), Some(wc)) = (only(b), only(c)) else {
            continue;
        };
        for (name, _) in differences(&[wb, wc]) {
            if named.contains(name.as_str()) {
                continue;
            }
            let entry = differ.entry(name.clone()).or_default();
            entry.0.extend(values_in(wb, &name));
            entry.1.extend(values_in(wc, &name));
        }
    }
    if differ.is_empty() {
        return None;
    }
    let joined = |v: &BTreeSet<String>| v.iter().cloned().collect::<Vec<_>>().join(", ");
    let said: Vec<String> = differ
        .iter()
        .map(|(n, (b, c))| format!("{n}: {} against {}", joined(b), joined(c)))
        .collect();
    Some(format!(
        "warning: the two sides ran different fio jobs ({}): their figures differ for that \
         too, not only for what the selectors name",
        said.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job_file(device: &str, rw: &str) -> JobText {
        JobText::JobFile(format!(
            "; fio job file written by iolab\n; cell: base\n[rr]\nfilename={device}\nrw={rw}\n\
             bs=4k\niodepth=16\ntime_based\n"
        ))
    }

    fn cell(ids: &[i64]) -> CellRuns {
        CellRuns {
            levels: Vec::new(),
            ok: ids.to_vec(),
            failed: Vec::new(),
            not_applicable: Vec::new(),
        }
    }

    #[test]
    fn the_target_is_not_the_workload_and_names_are_canonical() {
        let a = of(&job_file("/dev/loop0", "randread")).unwrap();
        let b = of(&job_file("/dev/loop7", "randread")).unwrap();
        assert_eq!(a, b);
        let job = a.first().unwrap();
        assert_eq!(job.get("time_based").map(String::as_str), Some(""));
        assert!(!job.contains_key("filename"), "{job:?}");
        // fio's JSON of the same job, with an alias (`blocksize`) and a global option.
        let out = JobText::FioOutput(
            r#"{"global options": {"iodepth": "16"},
                "jobs": [{"job options": {"name": "x", "filename": "/dev/sdb", "rw": "randread",
                          "blocksize": "4096", "time_based": "", "randseed": "7"}},
                         {"job options": {"name": "x", "filename": "/dev/sdb", "rw": "randread",
                          "blocksize": "4k", "time_based": ""}}]}"#
                .into(),
        );
        assert_eq!(of(&out).unwrap(), a);
        assert_eq!(of(&JobText::FioOutput("{\"jobs\": []}".into())), None);
        assert_eq!(of(&JobText::FioOutput("not json".into())), None);
    }

    #[test]
    fn a_global_section_sets_the_jobs_after_it() {
        let w = of(&JobText::JobFile(
            "[global]\nbs=64k\n[a]\nrw=read\n[b]\nrw=write\nbs=4k\n".into(),
        ))
        .unwrap();
        let jobs: Vec<(&str, &str)> = w
            .iter()
            .map(|j| (j["rw"].as_str(), j["bs"].as_str()))
            .collect();
        assert_eq!(jobs, [("write", "4k"), ("read", "64k")]);
    }

    #[test]
    fn a_cell_of_two_workloads_is_named_with_what_differs() {
        let workloads: BTreeMap<i64, Workload> = [
            (1, of(&job_file("/dev/loop0", "randread")).unwrap()),
            (2, of(&job_file("/dev/loop1", "randread")).unwrap()),
            (3, of(&job_file("/dev/loop2", "read")).unwrap()),
        ]
        .into_iter()
        .collect();
        assert_eq!(pooled_warning("tag=a", &[cell(&[1, 2])], &workloads), None);
        let w = pooled_warning("tag=a", &[cell(&[1, 2, 3])], &workloads).unwrap();
        assert!(
            w.contains("tag=a: cell base pools runs of different fio jobs (they differ in rw: randread, read)"),
            "{w}"
        );
        // An option one workload leaves out.
        let mut more = workloads.clone();
        let mut job = more[&1].first().unwrap().clone();
        job.insert("direct".into(), "1".into());
        more.insert(4, [job].into_iter().collect());
        let w = pooled_warning("x", &[cell(&[1, 4])], &more).unwrap();
        assert!(w.contains("direct: 1, not set"), "{w}");
        // Runs without a known workload say nothing.
        assert_eq!(pooled_warning("x", &[cell(&[1, 9])], &workloads), None);
    }

    #[test]
    fn sides_of_different_jobs_are_named_with_what_differs_unless_a_selector_names_it() {
        let workloads: BTreeMap<i64, Workload> = [
            (1, of(&job_file("/dev/loop0", "randread")).unwrap()),
            (2, of(&job_file("/dev/loop1", "randread")).unwrap()),
            (3, of(&job_file("/dev/loop2", "write")).unwrap()),
        ]
        .into_iter()
        .collect();
        let none = BTreeSet::new();
        // Another device is the same job.
        assert_eq!(
            across_warning(&[cell(&[1])], &[cell(&[2])], &none, &workloads),
            None
        );
        let w = across_warning(&[cell(&[1])], &[cell(&[3])], &none, &workloads).unwrap();
        assert!(
            w.contains("different fio jobs (rw: randread against write)"),
            "{w}"
        );
        let rw: BTreeSet<&str> = ["rw"].into_iter().collect();
        assert_eq!(
            across_warning(&[cell(&[1])], &[cell(&[3])], &rw, &workloads),
            None
        );
        // A side pooling two jobs is said by `pooled_warning`, not here.
        assert_eq!(
            across_warning(&[cell(&[1, 3])], &[cell(&[3])], &none, &workloads),
            None
        );
    }
}

//! What an experiment's figures rest on, for `show` and the report: the interval the
//! sampler's metrics were taken over, the cross-checks between fio's figures and the
//! sampler's (every failed one listed with both figures: a disagreement is a finding, never
//! passed over), and the environment the runs started in (memory, page cache, versions,
//! kernel command line). Reads what the run loop stored per run (`store::RunBasis`).

use crate::report::format::terminal_safe as safe;
use crate::store::RunBasis;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// One failed check of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Finding {
    pub run: i64,
    pub check: String,
    pub subject: String,
    pub fio: f64,
    pub other: f64,
    pub other_is: String,
    pub difference_pct: f64,
    pub tolerance_pct: f64,
    /// The check's likely cause, where it knows one (events lost while tracing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The experiment's runs summed up.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Basis {
    /// Window basis (`fio status report`, ...) -> runs.
    pub windows: BTreeMap<String, usize>,
    /// Runs whose devices' own figures were taken where each device's I/O ran, fio's final
    /// report coming only when the last device was done (`devices_at_io_end`).
    #[serde(skip_serializing_if = "is_zero")]
    pub devices_at_io_end_runs: usize,
    /// Check name -> (ok, disagrees, not judged).
    pub checks: BTreeMap<String, (usize, usize, usize)>,
    /// Check name -> why runs were not judged, each distinct reason once, in run order.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub not_judged: BTreeMap<String, Vec<String>>,
    pub findings: Vec<Finding>,
    /// Environment key -> distinct values in run order (text keys), or (min, max) over runs
    /// for the memory figures.
    pub text: BTreeMap<String, Vec<String>>,
    pub memory_kib: BTreeMap<String, (u64, u64)>,
    /// Device -> queue knob -> its distinct values at run start, in run order.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub queues: BTreeMap<String, BTreeMap<String, Vec<String>>>,
}

/// Sums up the stored bases of an experiment's runs (runs without any are skipped).
pub(crate) fn summarise(bases: &[RunBasis]) -> Basis {
    let mut b = Basis::default();
    for r in bases {
        if let Some(w) = r.sample_window.as_ref().and_then(|w| w["basis"].as_str()) {
            *b.windows.entry(w.to_string()).or_default() += 1;
        }
        let placed = r.sample_window.as_ref().map(|w| &w["devices_at_io_end"]);
        if placed
            .and_then(Value::as_array)
            .is_some_and(|d| !d.is_empty())
        {
            b.devices_at_io_end_runs += 1;
        }
        for c in r
            .checks
            .iter()
            .flat_map(|c| c.as_array().into_iter().flatten())
        {
            let name = c["check"].as_str().unwrap_or("?").to_string();
            let e = b.checks.entry(name.clone()).or_default();
            match c["verdict"].as_str() {
                Some("ok") => e.0 += 1,
                Some("disagrees") => {
                    e.1 += 1;
                    let f = |k: &str| c[k].as_f64().unwrap_or(f64::NAN);
                    b.findings.push(Finding {
                        run: r.run_id,
                        check: name,
                        subject: c["subject"].as_str().unwrap_or("").to_string(),
                        fio: f("fio"),
                        other: f("other"),
                        other_is: c["other_is"].as_str().unwrap_or("").to_string(),
                        difference_pct: f("difference_pct"),
                        tolerance_pct: f("tolerance_pct"),
                        note: c["note"].as_str().map(str::to_string),
                    });
                }
                _ => {
                    e.2 += 1;
                    if let Some(why) = c["note"].as_str() {
                        let whys = b.not_judged.entry(name).or_default();
                        if !whys.iter().any(|w| w == why) {
                            whys.push(why.to_string());
                        }
                    }
                }
            }
        }
        let Some(env) = r.environment.as_ref().and_then(Value::as_object) else {
            continue;
        };
        for (k, v) in env {
            match v {
                Value::Object(devices) if k == "queues" => {
                    for (device, knobs) in devices {
                        let seen = b.queues.entry(device.clone()).or_default();
                        for (knob, value) in knobs.as_object().into_iter().flatten() {
                            let Some(value) = value.as_str() else {
                                continue;
                            };
                            let values = seen.entry(knob.clone()).or_default();
                            if !values.iter().any(|v| v == value) {
                                values.push(value.to_string());
                            }
                        }
                    }
                }
                Value::Number(n) => {
                    let Some(n) = n.as_u64() else { continue };
                    let e = b.memory_kib.entry(k.clone()).or_insert((n, n));
                    e.0 = e.0.min(n);
                    e.1 = e.1.max(n);
                }
                Value::String(s) => {
                    let e = b.text.entry(k.clone()).or_default();
                    if !e.contains(s) {
                        e.push(s.clone());
                    }
                }
                _ => {}
            }
        }
    }
    b
}

/// What a run's window basis (`sample_window.basis`) means, in words: a program engine's
/// runs and fio runs without timestamps are taken over the whole sampled span, not fio's
/// measured interval.
fn window_text(basis: &str) -> std::borrow::Cow<'_, str> {
    match basis {
        "fio status report" => "fio's measured interval, from its status reports".into(),
        "fio final report" => "fio's measured interval, from its final report".into(),
        crate::experiment::run::align::DEVICE_IO_END => {
            "fio's measured interval, as long as fio's runtime and ending where the device's \
             I/O stopped"
                .into()
        }
        crate::experiment::run::align::FIO_EXIT => {
            "fio's measured interval, as long as fio's runtime and ending where fio exited (this \
             machine's `local:` figures, with fio servers alone)"
                .into()
        }
        crate::experiment::run::align::HOSTS_WINDOWS => {
            "the hosts' measured intervals together (this machine's `local:` figures)".into()
        }
        "whole sampled span" => "the whole sampled span".into(),
        other => safe(other),
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn mib(kib: u64) -> String {
    format!("{} MiB", kib / 1024)
}

/// The text section `show` prints under its header; empty when nothing was recorded (runs
/// stored by an older iolab).
pub(crate) fn text(b: &Basis) -> String {
    let mut out = String::new();
    if !b.windows.is_empty() {
        let parts: Vec<String> = b
            .windows
            .iter()
            .map(|(k, n)| {
                format!(
                    "{} ({n} run{})",
                    window_text(k),
                    if *n == 1 { "" } else { "s" }
                )
            })
            .collect();
        out.push_str(&format!("sampler metrics over: {}\n", parts.join("; ")));
    }
    if let n @ 1.. = b.devices_at_io_end_runs {
        out.push_str(&format!(
            "  per device: where its own I/O ran, as fio's report waited for the last device \
             ({n} run{})\n",
            if n == 1 { "" } else { "s" }
        ));
    }
    for key in [
        "iolab_version",
        "fio_version",
        "fio_notes",
        "kernel_cmdline",
    ] {
        if let Some(v) = b.text.get(key) {
            let v: Vec<String> = v.iter().map(|s| safe(s).into_owned()).collect();
            // Wrapped: a kernel command line runs to hundreds of characters.
            out.push_str(&crate::report::table::wrap(
                &format!("{}: {}", key.replace('_', " "), v.join(" | ")),
                crate::report::table::MAX_WIDTH,
            ));
        }
    }
    let mem: Vec<String> = [
        ("mem_total_kib", "RAM"),
        ("mem_free_kib", "free"),
        ("page_cache_kib", "page cache"),
    ]
    .iter()
    .filter_map(|(k, label)| {
        let (lo, hi) = b.memory_kib.get(*k)?;
        Some(if lo == hi {
            format!("{label} {}", mib(*lo))
        } else {
            format!("{label} {}-{}", mib(*lo), mib(*hi))
        })
    })
    .collect();
    if !mem.is_empty() {
        out.push_str(&format!("memory at run start: {}\n", mem.join(", ")));
    }
    for (device, knobs) in &b.queues {
        out.push_str(&crate::report::table::wrap(
            &format!(
                "queue of {} at run start: {}",
                safe(device),
                queue_text(knobs)
            ),
            crate::report::table::MAX_WIDTH,
        ));
    }
    if !b.checks.is_empty() {
        let parts: Vec<String> = b
            .checks
            .iter()
            .map(|(k, (ok, bad, nj))| {
                let mut s = format!("{k} {ok} ok");
                if *bad > 0 {
                    s.push_str(&format!(", {bad} disagree"));
                }
                if *nj > 0 {
                    s.push_str(&format!(", {nj} not judged"));
                }
                s
            })
            .collect();
        out.push_str(&crate::report::table::wrap(
            &format!("cross-checks: {}", parts.join("; ")),
            crate::report::table::MAX_WIDTH,
        ));
        // Indented under the counts, so why a check said nothing is read beside them.
        for (check, whys) in &b.not_judged {
            let text = crate::report::table::wrap(
                &format!("{check} not judged: {}", whys.join("; ")),
                crate::report::table::MAX_WIDTH - 2,
            );
            for line in text.lines() {
                out.push_str(&format!("  {line}\n"));
            }
        }
    }
    for f in &b.findings {
        out.push_str(&format!("  {}\n", finding_line(f)));
    }
    out
}

/// A device's queue settings over runs, in the order `inspect` lists knobs: `knob value`, or
/// `knob a | b` where runs differed (a factor, or a setting that changed under the runs).
fn queue_text(knobs: &BTreeMap<String, Vec<String>>) -> String {
    let known = crate::model::devices::KNOBS;
    let others = knobs
        .keys()
        .map(String::as_str)
        .filter(|k| !known.contains(k));
    known
        .iter()
        .copied()
        .chain(others)
        .filter_map(|knob| {
            let values: Vec<String> = knobs
                .get(knob)?
                .iter()
                .map(|v| safe(v).into_owned())
                .collect();
            Some(format!("{} {}", safe(knob), values.join(" | ")))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One failed check, both figures and the limit.
pub(crate) fn finding_line(f: &Finding) -> String {
    let line = format!(
        "run {}: {} {}: fio {}, {} {} ({:+.1}%, limit {:.1}%) disagrees",
        f.run,
        f.check,
        safe(&f.subject),
        figure(f.fio),
        safe(&f.other_is),
        figure(f.other),
        f.difference_pct,
        f.tolerance_pct
    );
    match &f.note {
        Some(note) => format!("{line}: {}", safe(note)),
        None => line,
    }
}

fn figure(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The bases of the given runs that succeeded (any experiments) summed up, in run order:
/// what `compare` lists under each side, so a disagreement behind a compared figure is never
/// passed over. A failed run is in no figure (as in `show`, `Store::measured_run_bases`).
pub(crate) fn of_runs(
    store: &crate::store::Store,
    runs: &[crate::store::Run],
) -> anyhow::Result<Basis> {
    let ids: std::collections::BTreeSet<i64> = runs
        .iter()
        .filter(|r| r.status == crate::store::RunStatus::Ok)
        .map(|r| r.id)
        .collect();
    let experiments: std::collections::BTreeSet<i64> =
        runs.iter().map(|r| r.experiment_id).collect();
    let mut bases = Vec::new();
    for e in experiments {
        bases.extend(
            store
                .run_bases(e)?
                .into_iter()
                .filter(|b| ids.contains(&b.run_id)),
        );
    }
    bases.sort_by_key(|b| b.run_id);
    Ok(summarise(&bases))
}

/// The same as an HTML section for the report.
pub(crate) fn html(b: &Basis) -> String {
    let t = text(b);
    if t.is_empty() {
        return String::new();
    }
    format!(
        "<section id=\"basis\">\n<h2>What the figures rest on</h2>\n<pre>{}</pre>\n</section>\n",
        crate::report::html::escape(&t)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn basis(run: i64, verdict: &str, free: u64) -> RunBasis {
        RunBasis {
            run_id: run,
            sample_window: Some(
                json!({"basis": "fio status report", "start_s": 1.1, "end_s": 3.1}),
            ),
            checks: Some(
                json!([{"check": "fio_bytes_vs_diskstats", "subject": "loop0",
                "fio": 10000.0, "other": 8500.0, "other_is": "diskstats MB/s read+written",
                "difference_pct": -15.0, "tolerance_pct": 2.0, "verdict": verdict}]),
            ),
            environment: Some(json!({"mem_total_kib": 4096000, "mem_free_kib": free,
                "page_cache_kib": 1024, "fio_version": "fio-3.33",
                "kernel_cmdline": "ro quiet", "iolab_version": "0.1.0 (commit abc)"})),
        }
    }

    #[test]
    fn the_window_line_says_which_runs_were_not_taken_over_fios_interval() {
        let mut fio = basis(1, "ok", 2048);
        fio.sample_window = Some(json!({"basis": "fio final report"}));
        let mut program = basis(2, "ok", 2048);
        program.sample_window = Some(json!({"basis": "whole sampled span"}));
        let mut host = basis(3, "ok", 2048);
        host.sample_window = Some(json!({"basis": "end of device I/O"}));
        let t = text(&summarise(&[fio, program, host]));
        assert!(
            t.contains(
                "sampler metrics over: fio's measured interval, as long as fio's runtime and \
                 ending where the device's I/O stopped (1 run); fio's measured interval, from \
                 its final report (1 run); the whole sampled span (1 run)\n"
            ),
            "{t}"
        );
        // Two devices done at different times, each measured where its own I/O ran.
        let mut two = basis(5, "ok", 2048);
        two.sample_window =
            Some(json!({"basis": "fio final report", "devices_at_io_end": ["loop0", "loop1"]}));
        let b = summarise(&[two]);
        assert_eq!(b.devices_at_io_end_runs, 1);
        assert!(
            text(&b).contains(
                "from its final report (1 run)\n  per device: where its own I/O ran, as fio's \
                 report waited for the last device (1 run)\n"
            ),
            "{}",
            text(&b)
        );
        let mut aggregate = basis(4, "ok", 2048);
        aggregate.sample_window = Some(json!({"basis": "hosts' windows"}));
        let t = text(&summarise(&[aggregate]));
        assert!(
            t.contains(
                "sampler metrics over: the hosts' measured intervals together (this machine's \
                 `local:` figures) (1 run)\n"
            ),
            "{t}"
        );
    }

    /// `compare` lists the findings of the runs its figures come from: a failed run's
    /// checks (a hosts-mode run whose other hosts were judged) are not among them.
    #[test]
    fn compare_lists_no_finding_of_a_failed_run() {
        use crate::store::{NewExperiment, NewRun, RunStatus, Store};
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("f.db")).unwrap();
        let e = store
            .create_experiment(&NewExperiment {
                name: "f".into(),
                ..Default::default()
            })
            .unwrap();
        for status in [RunStatus::Ok, RunStatus::Failed("fio exited with 1".into())] {
            store
                .insert_run(&NewRun {
                    experiment_id: e,
                    cell_key: "base".into(),
                    status,
                    checks: basis(0, "disagrees", 0).checks,
                    ..Default::default()
                })
                .unwrap();
        }
        let runs = store.runs(e).unwrap();
        let found = of_runs(&store, &runs).unwrap().findings;
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].run, runs[0].id);
    }

    #[test]
    fn failed_checks_are_findings_with_both_figures() {
        let b = summarise(&[basis(1, "ok", 2048), basis(2, "disagrees", 4096)]);
        assert_eq!(b.checks["fio_bytes_vs_diskstats"], (1, 1, 0));
        assert_eq!(b.findings.len(), 1);
        let t = text(&b);
        assert!(
            t.contains(
                "run 2: fio_bytes_vs_diskstats loop0: fio 10000, diskstats \
                        MB/s read+written 8500 (-15.0%, limit 2.0%) disagrees"
            ),
            "{t}"
        );
        assert!(
            t.contains(
                "sampler metrics over: fio's measured interval, from its status reports (2 runs)\n"
            ),
            "{t}"
        );
        assert!(
            t.contains("memory at run start: RAM 4000 MiB, free 2 MiB-4 MiB"),
            "{t}"
        );
        assert!(t.contains("fio version: fio-3.33"), "{t}");
        assert!(t.contains("kernel cmdline: ro quiet"), "{t}");
        assert!(html(&b).contains("&lt;") || !t.contains('<'));
        // A check that knows its likely cause says it after the verdict.
        let mut short = basis(3, "disagrees", 2048);
        short.checks.as_mut().unwrap()[0]["note"] = json!("the kernel lost 12 events");
        let t = text(&summarise(&[short]));
        assert!(
            t.contains("(-15.0%, limit 2.0%) disagrees: the kernel lost 12 events\n"),
            "{t}"
        );
    }

    #[test]
    fn why_runs_were_not_judged_is_said_once_per_reason() {
        let why = |run, note: &str| {
            let mut b = basis(run, "not judged", 2048);
            b.checks.as_mut().unwrap()[0]["note"] = json!(note);
            b
        };
        let buffered = "buffered I/O: the page cache decides what reaches the device";
        let b = summarise(&[
            why(1, buffered),
            why(2, buffered),
            why(3, "the device holds data"),
            basis(4, "not judged", 2048),
        ]);
        assert_eq!(b.checks["fio_bytes_vs_diskstats"], (0, 0, 4));
        let t = text(&b);
        assert!(
            t.contains(
                "cross-checks: fio_bytes_vs_diskstats 0 ok, 4 not judged\n  \
                 fio_bytes_vs_diskstats not judged: buffered I/O: the page cache decides what\n    \
                 reaches the device; the device holds data\n"
            ),
            "{t}"
        );
    }

    #[test]
    fn runs_from_an_older_iolab_add_nothing() {
        let old = RunBasis {
            run_id: 1,
            sample_window: None,
            checks: None,
            environment: None,
        };
        let b = summarise(&[old]);
        assert_eq!(text(&b), "");
        assert_eq!(html(&b), "");
    }
}

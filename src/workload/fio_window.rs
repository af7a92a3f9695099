//! When fio measured, in wall-clock time, read from fio's own output. A run's figures cover
//! only part of the fio process's life: start-up, `ramp_time` and the tail after the job ends
//! are left out. Anything compared with them (the sampler's disk, interrupt and CPU figures)
//! must cover the same interval, and only fio knows where it lies.
//!
//! fio started with `--status-interval` prints a complete report every interval while jobs
//! run. Each carries `timestamp_ms` (wall clock, when printed) and every job's `runtime` so far
//! (milliseconds since its statistics began; fio resets them when `ramp_time` ends). So
//! `timestamp_ms - runtime` is the wall-clock moment the measured interval began, to within
//! the few milliseconds between the two readings; the earliest of those anchors is the best.
//! The measured interval then lasts the final report's `runtime`. The final report alone
//! gives an anchor too, but late by the time fio took to reap its jobs (tens of ms), so it is
//! used only when no status report fell in the measured interval, and says so.
//!
//! Pure: text in, windows out.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where a job's window was anchored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Anchor {
    /// A status report printed while the job measured (exact to a few ms).
    StatusReport,
    /// The final report only (late by fio's reaping delay).
    FinalReport,
}

/// The interval in which one fio job measured, in milliseconds since the Unix epoch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct JobWindow {
    pub job: String,
    /// The job's `filename` as fio echoed it (the target device), when it did.
    pub filename: Option<String>,
    pub start_unix_ms: f64,
    pub end_unix_ms: f64,
    pub anchor: Anchor,
}

/// One of fio's JSON documents (a status report or the final one), only the fields iolab's
/// readers of the reports use (`fio_series` reads the counters).
#[derive(Deserialize)]
pub(crate) struct Doc {
    pub timestamp_ms: Option<f64>,
    #[serde(default)]
    pub jobs: Vec<Job>,
}

#[derive(Deserialize)]
pub(crate) struct Job {
    #[serde(default)]
    pub jobname: String,
    #[serde(rename = "job options", default)]
    options: BTreeMap<String, serde_json::Value>,
    pub read: Option<Dir>,
    pub write: Option<Dir>,
    pub trim: Option<Dir>,
}

#[derive(Deserialize, Default)]
pub(crate) struct Dir {
    pub runtime: Option<f64>,
    pub total_ios: Option<f64>,
    pub io_bytes: Option<f64>,
    pub clat_ns: Option<Clat>,
}

#[derive(Deserialize, Default)]
pub(crate) struct Clat {
    #[serde(rename = "N")]
    pub n: Option<f64>,
    pub mean: Option<f64>,
}

impl Job {
    /// Milliseconds the job has measured so far: fio divides each direction's count by its
    /// own runtime, and they differ by a millisecond at most.
    pub(crate) fn runtime_ms(&self) -> f64 {
        [&self.read, &self.write, &self.trim]
            .into_iter()
            .flatten()
            .filter_map(|d| d.runtime)
            .filter(|r| r.is_finite() && *r >= 0.0)
            .fold(0.0, f64::max)
    }

    fn option(&self, name: &str) -> Option<String> {
        self.options.get(name).map(|v| match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    }

    /// `ramp_time` in ms (fio's bare numbers are seconds); 0 when absent or unreadable.
    pub(crate) fn ramp_ms(&self) -> f64 {
        self.option("ramp_time")
            .and_then(|t| crate::sys::parse::duration::duration(&t).ok())
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    }
}

/// Every complete document of fio's output, in order (fio's warnings before, between or
/// after them skipped; a truncated last one ignored).
pub(crate) fn documents(output: &str) -> Vec<Doc> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(start) = next_document(output, pos) {
        let mut stream = serde_json::Deserializer::from_str(&output[start..]).into_iter::<Doc>();
        match stream.next() {
            Some(Ok(doc)) => {
                out.push(doc);
                pos = start + stream.byte_offset();
            }
            _ => break,
        }
    }
    out
}

fn next_document(text: &str, from: usize) -> Option<usize> {
    let mut offset = from;
    for line in text[from..].split_inclusive('\n') {
        if line.starts_with('{') {
            return Some(offset);
        }
        offset += line.len();
    }
    None
}

/// The measured interval of each job of the final report, in its order. Empty when the
/// output has no report with `timestamp_ms` (old fio, client mode, a canned output without
/// one): then nothing says when fio measured.
pub(crate) fn measured_windows(output: &str) -> Vec<JobWindow> {
    let docs = documents(output);
    let Some((last, interim)) = docs.split_last() else {
        return Vec::new();
    };
    let Some(final_ts) = last.timestamp_ms.filter(|t| t.is_finite()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, job) in last.jobs.iter().enumerate() {
        let runtime = job.runtime_ms();
        if runtime <= 0.0 {
            continue;
        }
        let final_anchor = final_ts - runtime;
        // Reports printed during ramp_time are anchored at the job's start, at least a
        // ramp_time before the measured interval; half of it separates the two phases.
        let ramp = job.ramp_ms();
        let lowest = if ramp > 0.0 {
            final_anchor - ramp / 2.0
        } else {
            f64::NEG_INFINITY
        };
        let status = interim
            .iter()
            .filter_map(|d| {
                let ts = d.timestamp_ms.filter(|t| t.is_finite())?;
                // Jobs keep their order in every report; the name guards against a mix-up.
                let j = d.jobs.get(i).filter(|j| j.jobname == job.jobname)?;
                let r = j.runtime_ms();
                // Only a report printed while the job still measured: one that shows its
                // final runtime may come long after it ended (another job of the run went
                // on), and would place its interval that much late.
                (r > 0.0 && r < runtime).then_some(ts - r)
            })
            // An anchor after the final one cannot be: the final report comes last.
            .filter(|a| *a >= lowest && *a <= final_anchor)
            .fold(None, |m: Option<f64>, a| Some(m.map_or(a, |m| m.min(a))));
        let (start, anchor) = match status {
            Some(a) => (a, Anchor::StatusReport),
            None => (final_anchor, Anchor::FinalReport),
        };
        out.push(JobWindow {
            job: job.jobname.clone(),
            filename: job.option("filename"),
            start_unix_ms: start,
            end_unix_ms: start + runtime,
            anchor,
        });
    }
    out
}

/// fio's output with only its final report (and any text before the first report): the
/// status reports served the window and would multiply what the store keeps per run.
pub(crate) fn final_report_only(output: &str) -> String {
    let Some(first) = next_document(output, 0) else {
        return output.to_string();
    };
    let mut last = first;
    let mut pos = first;
    loop {
        let mut stream =
            serde_json::Deserializer::from_str(&output[pos..]).into_iter::<serde::de::IgnoredAny>();
        match stream.next() {
            Some(Ok(_)) => {
                last = pos;
                pos += stream.byte_offset();
            }
            _ => break,
        }
        match next_document(output, pos) {
            Some(next) => pos = next,
            None => break,
        }
    }
    if last == first {
        return output.to_string();
    }
    format!("{}{}", &output[..first], &output[last..])
}

/// How often fio should print a status report for a run of `nominal` seconds (ramp_time +
/// runtime; `None` when fio stops by size): often enough that several fall in the measured
/// interval, rarely enough that a long run prints a handful.
pub(crate) fn status_interval(nominal: Option<f64>) -> std::time::Duration {
    let secs = nominal.map_or(10.0, |n| (n / 8.0).clamp(0.5, 3600.0));
    std::time::Duration::from_millis((secs * 1000.0).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fio 3.33's reports of a 2 s randread with a 1 s ramp and `--status-interval=500ms`
    /// (trimmed to the fields read here; timestamps and runtimes as fio printed them).
    fn status_output() -> String {
        let doc = |ts: u64, rt: u64| {
            format!(
                "{{\"fio version\": \"fio-3.33\", \"timestamp_ms\": {ts}, \"jobs\": [{{\
                 \"jobname\": \"j\", \"job options\": {{\"filename\": \"/dev/loop0\", \
                 \"ramp_time\": \"1s\"}}, \"read\": {{\"runtime\": {rt}}}, \
                 \"write\": {{\"runtime\": 0}}, \"trim\": {{\"runtime\": 0}}}}]}}\n"
            )
        };
        let mut out = String::from("fio: a warning\n");
        for (ts, rt) in [
            (1795447965202, 390),
            (1795447965706, 890),
            (1795447966328, 503),
            (1795447966818, 1004),
            (1795447967318, 1503),
            (1795447967818, 2002),
            (1795447967845, 2007),
        ] {
            out.push_str(&doc(ts, rt));
        }
        out
    }

    #[test]
    fn the_window_starts_at_the_earliest_anchor_after_the_ramp() {
        let w = measured_windows(&status_output());
        assert_eq!(w.len(), 1);
        let w = &w[0];
        // Anchors in the ramp: ...4812, ...4816 (the job's start); after it ...5825, ...5814,
        // ...5815, ...5816; the final report's ...5838 is late by fio's reaping.
        assert_eq!(w.start_unix_ms, 1795447965814.0);
        assert_eq!(w.end_unix_ms, 1795447965814.0 + 2007.0);
        assert_eq!(w.anchor, Anchor::StatusReport);
        assert_eq!(w.filename.as_deref(), Some("/dev/loop0"));
    }

    #[test]
    fn without_status_reports_the_final_report_anchors_it_and_says_so() {
        let text = status_output();
        let last = text.lines().last().unwrap();
        let w = measured_windows(last);
        assert_eq!(w[0].start_unix_ms, 1795447967845.0 - 2007.0);
        assert_eq!(w[0].anchor, Anchor::FinalReport);
        // Only reports from the ramp: they are not the measured interval's.
        let ramp_only: String = text
            .lines()
            .filter(|l| l.contains("965202") || l.contains("965706") || l.contains("967845"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(measured_windows(&ramp_only)[0].anchor, Anchor::FinalReport);
        // No timestamp (a canned output, old fio): no window rather than a guess.
        assert!(
            measured_windows(r#"{"jobs": [{"jobname": "j", "read": {"runtime": 5}}]}"#).is_empty()
        );
        assert!(measured_windows("no json").is_empty());
    }

    /// Two jobs: `a` measured 800 ms and ended; a status report 1.5 s later still lists it,
    /// with its final runtime, while `b` (2 s) goes on. That report anchors `b` (still
    /// measuring) but not `a`, whose interval it would place 1.2 s late as if exact.
    #[test]
    fn a_report_printed_after_a_job_ended_does_not_anchor_it() {
        let doc = |ts: u64, a: u64, b: u64| {
            format!(
                "{{\"timestamp_ms\": {ts}, \"jobs\": [\
                 {{\"jobname\": \"a\", \"read\": {{\"runtime\": {a}}}}}, \
                 {{\"jobname\": \"b\", \"read\": {{\"runtime\": {b}}}}}]}}\n"
            )
        };
        // Both began at 10,000; `a` ended at 10,800, `b` at 12,000 (the final report: 12,030).
        let text = doc(11_500, 800, 1_500) + &doc(12_030, 800, 2_000);
        let w = measured_windows(&text);
        assert_eq!(
            (w[1].anchor, w[1].start_unix_ms),
            (Anchor::StatusReport, 10_000.0)
        );
        assert_eq!(w[0].anchor, Anchor::FinalReport);
        assert_eq!(w[0].start_unix_ms, 12_030.0 - 800.0);
    }

    #[test]
    fn only_the_final_report_is_kept_for_the_store() {
        let text = status_output();
        let kept = final_report_only(&text);
        assert!(kept.starts_with("fio: a warning\n{"), "{kept}");
        assert_eq!(kept.matches("timestamp_ms").count(), 1);
        assert!(kept.contains("1795447967845"));
        assert_eq!(final_report_only("{\"a\": 1}\n"), "{\"a\": 1}\n");
        assert_eq!(final_report_only("nothing"), "nothing");
    }

    #[test]
    fn status_reports_come_about_eight_times_a_run() {
        assert_eq!(status_interval(Some(3.0)).as_millis(), 500);
        assert_eq!(status_interval(Some(80.0)).as_millis(), 10_000);
        assert_eq!(status_interval(None).as_millis(), 10_000);
    }
}

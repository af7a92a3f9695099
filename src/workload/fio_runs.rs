//! One file holding the JSON outputs of several fio runs, written one after another
//! (`for i in 1 2 3; do fio job.fio --output-format=json >>all.json; done`), told apart from
//! one run's `--status-interval` documents. `fio_json::parse` keeps a file's last document,
//! which is right for a run's cumulative documents but would drop every run but the last of
//! such a file; `import` splits it here and stores each run.
//!
//! A document continues the run of the one before it when it names the same jobs, no job's
//! `elapsed` or `job_runtime` and not the timestamp goes back, and the run's start (timestamp
//! less the longest `elapsed`) stays within `SAME_START_S`. A run's cumulative documents keep
//! all of that; the next run's output restarts its clocks at a later start. Short runs
//! appended end that rule: two 1 s runs, each 1.3 s from start to output, have the same
//! `elapsed` (2) and `job_runtime` (1000), and starts 1.3 s apart. So the run's own clock
//! must also have moved as far as the timestamps did: fio's `elapsed` is the milliseconds
//! since fio started rounded up to whole seconds (eta.c), and no job has run longer than
//! that, which bounds that clock at each document to within a second; the next run's clock
//! starts again from 0. fio 3.36 and later say when each job started (`job_start`): one
//! run's documents all say the same.

use serde_json::Value;

use super::fio_json::first_document_start;

/// How far apart two documents' estimates of their run's start may be and still be one run:
/// fio's `elapsed` is in whole seconds, its timestamps in milliseconds.
const SAME_START_S: f64 = 1.5;

/// How far a run's clock may seem to have moved beyond the timestamps (ms): fio reads its
/// clock for `elapsed` after the timestamp, for each job in turn, and truncates both to ms.
const CLOCK_SLACK_MS: f64 = 50.0;

/// The parts of `output` that are each one fio run's output: the text before and including
/// its last document. One part, the whole text, when the output is one run's (or is not JSON
/// fio wrote: `fio_json::parse` says what is wrong with it).
pub(crate) fn split(output: &str) -> Vec<&str> {
    let mut ends: Vec<(usize, Progress)> = Vec::new();
    let Some(mut pos) = first_document_start(output, 0) else {
        return vec![output];
    };
    loop {
        let mut stream = serde_json::Deserializer::from_str(&output[pos..]).into_iter::<Value>();
        let Some(Ok(doc)) = stream.next() else {
            break;
        };
        pos += stream.byte_offset();
        ends.push((pos, Progress::of(&doc)));
        match first_document_start(output, pos) {
            Some(next) => pos = next,
            None => break,
        }
    }
    let mut parts = Vec::new();
    let mut from = 0;
    for pair in ends.windows(2) {
        let ((end, before), (_, after)) = (&pair[0], &pair[1]);
        if !after.continues(before) {
            parts.push(&output[from..*end]);
            from = *end;
        }
    }
    parts.push(&output[from..]);
    parts
}

/// What a document says of how far its run has got.
#[derive(Debug, PartialEq)]
struct Progress {
    jobs: Vec<String>,
    elapsed_s: Vec<Option<u64>>,
    runtime_ms: Vec<Option<u64>>,
    /// When each job started (fio 3.36 and later).
    job_start: Vec<Option<u64>>,
    timestamp_s: Option<f64>,
    /// Jobs of this fio's own (`jobs`), not of servers it is a client of (`client_stats`,
    /// whose clocks are the servers' and whose sum entry sums them).
    own_clock: bool,
}

impl Progress {
    fn of(doc: &Value) -> Progress {
        let own_clock = doc.get("jobs").is_some();
        let entries = doc
            .get("jobs")
            .or_else(|| doc.get("client_stats"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let field = |name: &str| -> Vec<Option<u64>> {
            entries
                .iter()
                .map(|j| j.get(name).and_then(Value::as_u64))
                .collect()
        };
        Progress {
            jobs: entries
                .iter()
                .map(|j| {
                    j.get("jobname")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                })
                .collect(),
            elapsed_s: field("elapsed"),
            runtime_ms: field("job_runtime"),
            job_start: field("job_start"),
            own_clock,
            timestamp_s: doc
                .get("timestamp_ms")
                .and_then(Value::as_f64)
                .map(|ms| ms / 1000.0)
                .or_else(|| doc.get("timestamp").and_then(Value::as_f64)),
        }
    }

    /// When the run began, by this document: its timestamp less the longest `elapsed`.
    fn start_s(&self) -> Option<f64> {
        let longest = self.elapsed_s.iter().flatten().max()?;
        Some(self.timestamp_s? - *longest as f64)
    }

    /// Bounds (ms) on the time since fio started when this document was written: `elapsed`
    /// rounds it up to whole seconds, and no job ran longer.
    fn since_start_ms(&self) -> Option<(f64, f64)> {
        if !self.own_clock {
            return None;
        }
        let fewest = self.elapsed_s.iter().flatten().min()?;
        let most = self.elapsed_s.iter().flatten().max()?;
        let longest_run = self.runtime_ms.iter().flatten().max().copied().unwrap_or(0);
        let low = (fewest.saturating_sub(1) * 1000).max(longest_run);
        Some((low as f64, (most * 1000) as f64))
    }

    /// Whether the run's clock can have moved from `before`'s to this document's by as much
    /// as the timestamps did.
    fn clock_kept_pace(&self, before: &Progress) -> bool {
        let (Some(now), Some(then)) = (self.timestamp_s, before.timestamp_s) else {
            return true;
        };
        let (Some((low, high)), Some((low_then, high_then))) =
            (self.since_start_ms(), before.since_start_ms())
        else {
            return true;
        };
        let gap = (now - then) * 1000.0;
        low_then + gap <= high + CLOCK_SLACK_MS && low <= high_then + gap + CLOCK_SLACK_MS
    }

    fn continues(&self, before: &Progress) -> bool {
        let never_back = |now: &[Option<u64>], then: &[Option<u64>]| {
            now.iter().zip(then).all(|pair| match pair {
                (Some(now), Some(then)) => now >= then,
                _ => true,
            })
        };
        let later = match (self.timestamp_s, before.timestamp_s) {
            (Some(now), Some(then)) => now >= then,
            _ => true,
        };
        let same_start = match (self.start_s(), before.start_s()) {
            (Some(now), Some(then)) => (now - then).abs() <= SAME_START_S,
            _ => true,
        };
        let known = |starts: &[Option<u64>]| starts.iter().all(Option::is_some);
        let same_jobs_start = !(known(&self.job_start) && known(&before.job_start))
            || self.job_start == before.job_start;
        self.jobs == before.jobs
            && same_jobs_start
            && self.clock_kept_pace(before)
            && never_back(&self.elapsed_s, &before.elapsed_s)
            && never_back(&self.runtime_ms, &before.runtime_ms)
            && later
            && same_start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/fio")
                .join(name),
        )
        .unwrap()
    }

    #[test]
    fn one_runs_status_interval_documents_are_one_run() {
        let text = fixture("status_interval_json.out");
        assert_eq!(split(&text), [text.as_str()]);
        assert_eq!(split("not json"), ["not json"]);
    }

    /// A run's output appended after another's, even of the same job file and as long: its
    /// start is the first one's end. Each part is a run's output whole, warnings included,
    /// and the parts together are the file.
    #[test]
    fn runs_appended_one_after_another_are_told_apart() {
        let one = fixture("randrw_2jobs_json.out");
        let doc: Value = serde_json::from_str(&one).unwrap();
        let stamp = doc["timestamp_ms"].as_u64().unwrap();
        let later = |by_ms: u64| {
            one.replace(
                &format!("\"timestamp_ms\" : {stamp}"),
                &format!("\"timestamp_ms\" : {}", stamp + by_ms),
            )
        };
        let second = format!("fio: a warning of the second run\n{}", later(3_000));
        let text = format!("{one}{second}{}", later(6_000));
        let parts = split(&text);
        assert_eq!(parts.len(), 3, "{parts:?}");
        assert_eq!(parts.concat(), text);
        assert_eq!(parts[0], one.trim_end());
        assert!(
            parts[1].contains("a warning of the second run"),
            "{}",
            parts[1]
        );
        for part in parts {
            crate::workload::fio_json::parse(part).unwrap();
        }
        // Other jobs, or a job's clock gone back, start another run whatever the times say.
        let other = one.replace("\"jobname\" : \"mix\"", "\"jobname\" : \"other\"");
        assert_eq!(split(&format!("{one}{other}")).len(), 2);
        let sooner = later(0).replace("\"job_runtime\" : 2002", "\"job_runtime\" : 1002");
        assert_eq!(split(&format!("{one}{sooner}")).len(), 2);
        // fio 3.36's job starts: one run's documents all say the same.
        let started = |doc: &str, at: u64| {
            doc.replace(
                "\"jobname\" : \"mix\",",
                &format!("\"jobname\" : \"mix\", \"job_start\" : {at},"),
            )
        };
        let update = started(&later(100), 5);
        assert_eq!(split(&format!("{}{update}", started(&one, 5))).len(), 1);
        let rerun = started(&later(100), 6);
        assert_eq!(split(&format!("{}{rerun}", started(&one, 5))).len(), 2);
    }

    /// Runs of 1 s appended (fio 3.33, each 1.3 s from start to output) have the same
    /// `elapsed` (2) and `job_runtime` (1000) and starts within 1.5 s: their clocks tell them
    /// apart, as a run's documents of `--status-interval=1` of two jobs (one done before the
    /// other, its runtime standing still) stay one run.
    #[test]
    fn short_runs_appended_are_told_apart_by_their_clocks() {
        let three = fixture("appended_1s_runs_json.out");
        let parts = split(&three);
        assert_eq!(parts.len(), 3);
        let bs: Vec<String> = parts
            .iter()
            .map(|p| {
                let report = crate::workload::fio_json::parse(p).unwrap();
                report.jobs[0].options["bs"].clone()
            })
            .collect();
        assert_eq!(bs, ["4k", "8k", "16k"]);
        let updates = fixture("status_interval_2jobs_json.out");
        assert_eq!(split(&updates), [updates.as_str()]);
    }
}

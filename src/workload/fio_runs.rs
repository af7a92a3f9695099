//! One file holding the JSON outputs of several fio runs, written one after another
//! (`for i in 1 2 3; do fio job.fio --output-format=json >>all.json; done`), told apart from
//! one run's `--status-interval` documents. `fio_json::parse` keeps a file's last document,
//! which is right for a run's cumulative documents but would drop every run but the last of
//! such a file; `import` splits it here and stores each run.
//!
//! A document continues the run of the one before it when it names the same jobs, no job's
//! `elapsed` or `job_runtime` and not the timestamp goes back, and the run's start (timestamp
//! less the longest `elapsed`) stays within `SAME_START_S`. A run's cumulative documents keep
//! all of that; the next run's output restarts its clocks at a later start.

use serde_json::Value;

use super::fio_json::first_document_start;

/// How far apart two documents' estimates of their run's start may be and still be one run:
/// fio's `elapsed` is in whole seconds, its timestamps in milliseconds.
const SAME_START_S: f64 = 1.5;

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
    timestamp_s: Option<f64>,
}

impl Progress {
    fn of(doc: &Value) -> Progress {
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
        self.jobs == before.jobs
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
    }
}

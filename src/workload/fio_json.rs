//! fio's JSON output, read defensively. fio prints warnings before its JSON (`fio: pid=...,
//! err=95/...`), several complete documents with `--status-interval`, one entry per job unless
//! `group_reporting` is set, a different top level in client mode (`client_stats` plus an "All
//! clients" sum without percentiles), and direction blocks full of zeros for unused directions.
//! This module turns any of those into one typed `FioReport`, and derives iolab's stable
//! metric names from it. Percentiles across jobs are merged exactly from `json+` histogram bins
//! or not at all: averaging percentiles gives numbers that describe no distribution.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::metrics;

/// What went wrong reading fio's output; offsets and lines refer to the text given.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FioJsonError {
    #[error("no JSON document in fio's output (no line starts with '{{'); fio printed: {excerpt}")]
    NoDocument { excerpt: String },
    #[error("fio's JSON is malformed at line {line}, column {column}: {message}")]
    Malformed {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("fio's JSON has neither `jobs` nor `client_stats`")]
    NoJobs,
    /// A field fio always writes is missing, has the wrong type, or holds a value fio cannot
    /// produce (negative, non-finite, absurdly large); `path` is the JSON path to it.
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

fn invalid(path: &str, message: impl Into<String>) -> FioJsonError {
    FioJsonError::Invalid {
        path: path.to_string(),
        message: message.into(),
    }
}

/// Largest values fio can plausibly report, per job. Anything above comes from a damaged or
/// hand-edited file, and would dominate every mean and sum it entered.
mod limits {
    /// 10 billion I/Os per second.
    pub(crate) const IOPS: f64 = 1e10;
    /// 100 TB/s.
    pub(crate) const BW_BYTES: f64 = 1e14;
    /// About 11.6 days, in nanoseconds.
    pub(crate) const LATENCY_NS: f64 = 1e15;
    /// About 3 years, in milliseconds.
    pub(crate) const RUNTIME_MS: f64 = 1e11;
    /// An exabyte, and a quadrillion I/Os.
    pub(crate) const BYTES: f64 = 1e18;
    pub(crate) const COUNT: f64 = 1e15;
    /// Percent of one CPU (fio's usr_cpu/sys_cpu), for a job with very many threads.
    pub(crate) const CPU_PCT: f64 = 1e6;
}

/// Completion-latency statistics of one direction of one job (nanoseconds).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latency {
    pub(crate) min_ns: f64,
    pub(crate) max_ns: f64,
    pub(crate) mean_ns: f64,
    pub(crate) stddev_ns: f64,
    /// Number of completions the figures describe.
    pub samples: u64,
    /// fio's own percentiles, (percent, ns), sorted by percent.
    pub percentiles: Vec<(f64, f64)>,
    /// `json+` histogram: bucket value in ns -> count. `None` with plain `json`.
    pub bins: Option<BTreeMap<u64, u64>>,
}

/// One direction (read, write or trim) of one job.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Direction {
    pub iops: f64,
    /// Bytes per second (fio's `bw_bytes`; `bw` is KiB/s and not used).
    pub(crate) bw_bytes: f64,
    pub(crate) io_bytes: u64,
    pub total_ios: u64,
    pub runtime_ms: u64,
    pub clat: Latency,
}

impl Direction {
    /// True when the job did I/O in this direction.
    pub(crate) fn used(&self) -> bool {
        self.total_ios > 0 || self.clat.samples > 0 || self.io_bytes > 0
    }
}

/// One job as fio reported it (one clone of `numjobs`, a group, or one client host's job).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobResult {
    pub name: String,
    /// The server a client-mode job ran on: its address and port as the client named them
    /// (servers behind one address, through port forwards, differ by port alone).
    pub hostname: Option<String>,
    pub(crate) port: Option<u16>,
    /// fio's errno for this job; 0 means no error.
    pub(crate) error: i64,
    /// Its reporting group (`groupid`): a job after `new_group` or `stonewall` starts one.
    pub(crate) group: u64,
    pub read: Direction,
    pub write: Direction,
    pub(crate) trim: Direction,
    /// Percent of one CPU spent by this job's own threads in user and system mode. For a
    /// group (`group_reporting`), fio divides the group's CPU time by its members' summed
    /// run times: the mean of one member, not the group's sum.
    pub(crate) usr_cpu: f64,
    pub(crate) sys_cpu: f64,
    /// The jobs this entry reports together: 1, or a group's members, which fio does not
    /// write in its JSON but gives away in `job_runtime` (their run times summed) against
    /// the entry's own `runtime` (the longest member's).
    pub(crate) members: u32,
    /// The options fio echoed (valueless booleans such as `hipri` are missing: fio drops them).
    pub(crate) options: BTreeMap<String, String>,
}

/// A whole fio run, from the last complete document of its output.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FioReport {
    /// `"fio version"`, e.g. "fio-3.33".
    pub version: Option<String>,
    /// The options of the job file's `[global]` section, as fio echoed them (each job's own
    /// are in its `options`).
    pub(crate) global_options: BTreeMap<String, String>,
    pub jobs: Vec<JobResult>,
    /// Client/server mode: the layout had `client_stats`.
    pub client_mode: bool,
    /// Client mode's "All clients" sum, kept apart so it is not counted twice.
    pub all_clients: Option<JobResult>,
    /// How many complete documents the output held (more than one with `--status-interval`).
    pub documents: usize,
    /// Text found before the first document (fio's warnings), trimmed.
    pub preamble: String,
}

/// Which of the three directions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Read,
    Write,
    Trim,
}

impl Dir {
    pub(crate) const ALL: [Dir; 3] = [Dir::Read, Dir::Write, Dir::Trim];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Dir::Read => "read",
            Dir::Write => "write",
            Dir::Trim => "trim",
        }
    }

    /// This direction's metrics in the registry.
    pub(crate) fn metrics(self) -> &'static metrics::FioDirection {
        match self {
            Dir::Read => &metrics::FIO_READ,
            Dir::Write => &metrics::FIO_WRITE,
            Dir::Trim => &metrics::FIO_TRIM,
        }
    }

    fn of(self, job: &JobResult) -> &Direction {
        match self {
            Dir::Read => &job.read,
            Dir::Write => &job.write,
            Dir::Trim => &job.trim,
        }
    }
}

/// Percentiles iolab publishes, with their metric in a direction's.
type PercentileMetric = fn(&metrics::FioDirection) -> &metrics::Metric;
const PUBLISHED_PERCENTILES: [(f64, PercentileMetric); 3] = [
    (50.0, |m| &m.clat_p50_us),
    (99.0, |m| &m.clat_p99_us),
    (99.9, |m| &m.clat_p999_us),
];

/// What tells one fio measurement from another whatever its file looks like: its last
/// document (status-interval output holds several, each cumulative), as parsed, written
/// again. The same output reformatted, behind another first line, or with its interval
/// documents cut away is the same measurement. `None` when there is no document.
pub(crate) fn measurement_key(output: &str) -> Option<String> {
    let start = first_document_start(output, 0)?;
    let (last, _) = last_document::<Value>(output, start).ok()?;
    last.map(|doc| doc.to_string())
}

/// Parses fio's stdout. Starts at the first line beginning with `{`, reads every complete
/// document that follows and keeps the last one (status-interval documents are cumulative).
pub fn parse(output: &str) -> Result<FioReport, FioJsonError> {
    let start = first_document_start(output, 0).ok_or_else(|| FioJsonError::NoDocument {
        excerpt: excerpt(output),
    })?;
    let preamble = output[..start].trim().to_string();
    let (last, documents) = last_document::<Value>(output, start)?;
    let doc = last.ok_or_else(|| FioJsonError::NoDocument {
        excerpt: excerpt(output),
    })?;
    let mut report = report_from_value(&doc)?;
    report.documents = documents;
    report.preamble = preamble;
    Ok(report)
}

/// The last complete document of those from `start` on (each begins a line with `{`), and how
/// many were complete. A truncated final document (fio killed mid-print) leaves the one before
/// it as the best complete answer; a broken only document is an error.
fn last_document<T: serde::de::DeserializeOwned>(
    output: &str,
    start: usize,
) -> Result<(Option<T>, usize), FioJsonError> {
    let mut last = None;
    let mut documents = 0;
    let mut pos = start;
    loop {
        let mut stream = serde_json::Deserializer::from_str(&output[pos..]).into_iter::<T>();
        match stream.next() {
            Some(Ok(doc)) => {
                documents += 1;
                last = Some(doc);
                pos += stream.byte_offset();
            }
            Some(Err(e)) => {
                if last.is_some() {
                    break;
                }
                let (line, column) = line_column(output, pos, e.line(), e.column());
                return Err(FioJsonError::Malformed {
                    line,
                    column,
                    message: e.to_string(),
                });
            }
            None => break,
        }
        match first_document_start(output, pos) {
            Some(next) => pos = next,
            None => break,
        }
    }
    Ok((last, documents))
}

pub(crate) fn first_document_start(text: &str, from: usize) -> Option<usize> {
    let mut offset = from;
    for line in text[from..].split_inclusive('\n') {
        if line.starts_with('{') {
            return Some(offset);
        }
        offset += line.len();
    }
    None
}

/// serde_json counts lines from the slice it was given; turn that into a line of the whole
/// output so the message points where a user would look.
fn line_column(output: &str, slice_start: usize, line: usize, column: usize) -> (usize, usize) {
    let lines_before = output[..slice_start].matches('\n').count();
    (lines_before + line, column)
}

fn excerpt(output: &str) -> String {
    let trimmed = output.trim();
    if trimmed.is_empty() {
        return "(nothing)".to_string();
    }
    let mut s: String = trimmed.chars().take(200).collect();
    if s.len() < trimmed.len() {
        s.push_str("...");
    }
    s
}

fn report_from_value(doc: &Value) -> Result<FioReport, FioJsonError> {
    let version = doc
        .get("fio version")
        .and_then(Value::as_str)
        .map(str::to_string);
    let (entries, client_mode) = if let Some(jobs) = doc.get("jobs").and_then(Value::as_array) {
        (jobs, false)
    } else if let Some(clients) = doc.get("client_stats").and_then(Value::as_array) {
        (clients, true)
    } else {
        return Err(FioJsonError::NoJobs);
    };
    let list = if client_mode { "client_stats" } else { "jobs" };
    let global_options = options_of(doc.get("global options"));
    let mut jobs = Vec::new();
    let mut all_clients = None;
    for (i, entry) in entries.iter().enumerate() {
        let job = job_from_value(entry, &format!("{list}[{i}]"), &global_options)?;
        if client_mode && job.name == "All clients" {
            all_clients = Some(job);
        } else {
            jobs.push(job);
        }
    }
    if jobs.is_empty() {
        return Err(invalid(list, "lists no jobs"));
    }
    Ok(FioReport {
        version,
        global_options,
        jobs,
        client_mode,
        all_clients,
        documents: 1,
        preamble: String::new(),
    })
}

/// A short description of a JSON value for messages.
fn describe(v: &Value) -> String {
    let text = v.to_string();
    let kind = match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    if text.chars().count() > 40 {
        format!("{kind} ({}...)", text.chars().take(40).collect::<String>())
    } else {
        format!("{kind} ({text})")
    }
}

/// A number fio wrote at `path`: absent counts as 0 (fio omits some fields in some versions);
/// a string holding a number is accepted; anything else, or a value that is negative,
/// non-finite or above `max`, is an error naming the path.
fn checked(v: &Value, key: &str, path: &str, max: f64) -> Result<f64, FioJsonError> {
    match v.get(key) {
        None => Ok(0.0),
        Some(x) => checked_value(x, &format!("{path}.{key}"), max),
    }
}

fn checked_value(x: &Value, path: &str, max: f64) -> Result<f64, FioJsonError> {
    let n = match x {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
    .ok_or_else(|| invalid(path, format!("expected a number, found {}", describe(x))))?;
    if !n.is_finite() {
        return Err(invalid(path, format!("{n} is not a finite number")));
    }
    if n < 0.0 {
        return Err(invalid(
            path,
            format!("{n} is negative, which fio never reports; the file is damaged or edited"),
        ));
    }
    if n > max {
        return Err(invalid(
            path,
            format!(
                "{n} is above {max:e}, more than fio can measure; the file is damaged or edited"
            ),
        ));
    }
    Ok(n)
}

/// An options object fio echoed (`"global options"`, a job's `"job options"`) as name -> text.
fn options_of(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .map(|(k, v)| {
                    let value = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), value)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn job_from_value(
    v: &Value,
    path: &str,
    global: &BTreeMap<String, String>,
) -> Result<JobResult, FioJsonError> {
    if !v.is_object() {
        return Err(invalid(
            path,
            format!("expected a job object, found {}", describe(v)),
        ));
    }
    let options = options_of(v.get("job options"));
    let error = match v.get("error") {
        None => 0,
        Some(x) => match x {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
        .ok_or_else(|| {
            invalid(
                &format!("{path}.error"),
                format!("expected an errno, found {}", describe(x)),
            )
        })?,
    };
    let read = direction_from_value(v, "read", path, true)?;
    let write = direction_from_value(v, "write", path, true)?;
    let trim = direction_from_value(v, "trim", path, false)?;
    let members = group_members(
        checked(v, "job_runtime", path, limits::RUNTIME_MS)?,
        [&read, &write, &trim].map(|d| d.runtime_ms),
        verifies(&options, global),
    );
    Ok(JobResult {
        name: v
            .get("jobname")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        hostname: v
            .get("hostname")
            .and_then(Value::as_str)
            .map(str::to_string),
        port: v
            .get("port")
            .and_then(Value::as_u64)
            .and_then(|p| u16::try_from(p).ok()),
        error,
        group: v.get("groupid").and_then(Value::as_u64).unwrap_or(0),
        read,
        write,
        trim,
        members,
        usr_cpu: checked(v, "usr_cpu", path, limits::CPU_PCT)?,
        sys_cpu: checked(v, "sys_cpu", path, limits::CPU_PCT)?,
        options,
    })
}

/// How many jobs an entry reports together, from `job_runtime` (the members' run times
/// summed, after any ramp) over the longest direction's run time: 1 for a job of its own
/// (1000 ms against 1001), 2 for a group of two; 1 where fio wrote no `job_runtime` (before
/// 3.13). Members of different lengths give the group's CPU time over its longest run. A
/// job that `verifies` reads back what it wrote after writing it: its directions ran one
/// after the other, so each member's run time is theirs summed (a single such job, 350 ms of
/// writes and 180 of verify reads, was taken for a group of two, and its CPU doubled).
fn group_members(job_runtime_ms: f64, runtimes_ms: [u64; 3], verifies: bool) -> u32 {
    let one_member = if verifies {
        runtimes_ms.into_iter().sum::<u64>()
    } else {
        runtimes_ms.into_iter().max().unwrap_or(0)
    };
    if one_member == 0 {
        return 1;
    }
    (job_runtime_ms / one_member as f64)
        .round()
        .clamp(1.0, f64::from(u32::MAX)) as u32
}

/// Whether a job reads back what it writes (`verify`, unless `do_verify=0`), as its own
/// options or the global ones say.
fn verifies(job: &BTreeMap<String, String>, global: &BTreeMap<String, String>) -> bool {
    let option = |name: &str| job.get(name).or_else(|| global.get(name));
    let on = option("verify").is_some_and(|v| !matches!(v.as_str(), "0" | "none" | ""));
    on && option("do_verify").is_none_or(|v| v != "0")
}

/// fio writes `read` and `write` objects for every job (zeros when unused) and `trim` since
/// 2.x; a job without them is not fio's output, and a non-object there is damage.
fn direction_from_value(
    job: &Value,
    key: &str,
    job_path: &str,
    required: bool,
) -> Result<Direction, FioJsonError> {
    let path = format!("{job_path}.{key}");
    let v = match job.get(key) {
        Some(v) if v.is_object() => v,
        Some(other) => {
            return Err(invalid(
                &path,
                format!("expected an object, found {}", describe(other)),
            ))
        }
        None if required => {
            return Err(invalid(
                &path,
                "missing: fio writes a read and a write object for every job; is this fio's \
                 --output-format=json output?",
            ))
        }
        None => return Ok(Direction::default()),
    };
    // fio before 3.0 wrote latencies in microseconds (`clat`) and bandwidth in KiB/s
    // (`bw`) alone: read as today's, its bandwidth was 0 and its latencies missing.
    if v.get("bw_bytes").is_none() && v.get("clat_ns").is_none() && v.get("clat").is_some() {
        return Err(invalid(
            &path,
            "has `clat` and `bw` but no `clat_ns` or `bw_bytes`: the layout of fio before 3.0 \
             (microseconds, KiB/s), which iolab does not read; run fio 3.0 or later",
        ));
    }
    Ok(Direction {
        iops: checked(v, "iops", &path, limits::IOPS)?,
        bw_bytes: checked(v, "bw_bytes", &path, limits::BW_BYTES)?,
        io_bytes: checked(v, "io_bytes", &path, limits::BYTES)? as u64,
        total_ios: checked(v, "total_ios", &path, limits::COUNT)? as u64,
        runtime_ms: checked(v, "runtime", &path, limits::RUNTIME_MS)? as u64,
        clat: latency_from_value(v.get("clat_ns"), &format!("{path}.clat_ns"))?,
    })
}

fn latency_from_value(v: Option<&Value>, path: &str) -> Result<Latency, FioJsonError> {
    let v = match v {
        None => return Ok(Latency::default()),
        Some(v) if v.is_object() => v,
        Some(other) => {
            return Err(invalid(
                path,
                format!("expected an object, found {}", describe(other)),
            ))
        }
    };
    let mut percentiles = Vec::new();
    if let Some(p) = v.get("percentile").and_then(Value::as_object) {
        for (k, val) in p {
            let at = format!("{path}.percentile[{k:?}]");
            let pct = k
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|p| (0.0..=100.0).contains(p))
                .ok_or_else(|| invalid(&at, "the key is not a percentage"))?;
            percentiles.push((pct, checked_value(val, &at, limits::LATENCY_NS)?));
        }
    }
    percentiles.sort_by(|a, b| a.0.total_cmp(&b.0));
    let bins = match v.get("bins").and_then(Value::as_object) {
        None => None,
        Some(b) => {
            let mut map = BTreeMap::new();
            // The I/Os of all bins, held to what one bin may hold: summed unchecked, 20,000
            // bins of 1e15 wrapped u64 (percentiles silently wrong, or a panic).
            let mut total = 0.0;
            for (k, val) in b {
                let at = format!("{path}.bins[{k:?}]");
                let ns = k
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| invalid(&at, "the key is not a latency in ns"))?;
                let n = checked_value(val, &at, limits::COUNT)?;
                total += n;
                if total > limits::COUNT {
                    return Err(invalid(
                        &format!("{path}.bins"),
                        format!("the bins count more than {:e} I/Os", limits::COUNT),
                    ));
                }
                if n > 0.0 {
                    *map.entry(ns).or_insert(0) += n as u64;
                }
            }
            Some(map)
        }
    };
    Ok(Latency {
        min_ns: checked(v, "min", path, limits::LATENCY_NS)?,
        max_ns: checked(v, "max", path, limits::LATENCY_NS)?,
        mean_ns: checked(v, "mean", path, limits::LATENCY_NS)?,
        stddev_ns: checked(v, "stddev", path, limits::LATENCY_NS)?,
        samples: checked(v, "N", path, limits::COUNT)? as u64,
        percentiles,
        bins,
    })
}

use crate::stats::histogram::{merge_bins, percentile_of};

/// Only what a latency histogram needs, so the rest of a 40 KB json+ document is skipped
/// instead of built into a `Value` tree (a report over thousands of runs reads them all).
#[derive(serde::Deserialize)]
struct BinsDoc {
    #[serde(default)]
    jobs: Vec<BinsJob>,
    #[serde(default)]
    client_stats: Vec<BinsJob>,
}

#[derive(serde::Deserialize)]
struct BinsJob {
    #[serde(default)]
    jobname: String,
    read: Option<BinsDir>,
    write: Option<BinsDir>,
    trim: Option<BinsDir>,
}

#[derive(serde::Deserialize)]
struct BinsDir {
    #[serde(default)]
    total_ios: u64,
    clat_ns: Option<BinsClat>,
}

#[derive(serde::Deserialize)]
struct BinsClat {
    // serde_json reads quoted integer keys straight into u64: no String per bucket.
    bins: Option<BTreeMap<u64, u64>>,
}

/// One direction's completion-latency histogram in one fio output, or why there is none.
#[derive(Debug, PartialEq)]
pub(crate) enum ClatBins {
    Histogram(BTreeMap<u64, u64>),
    /// No job did I/O in that direction (a read-only job's writes).
    NoIo,
    /// I/O was done but no job has `json+` bins for it (plain `json` output).
    NotJsonPlus,
}

/// The completion-latency histogram of one direction, merged over every job of the last
/// complete document (like [`parse`]; client mode's "All clients" sum is left out so nothing
/// counts twice). A bucket key that is not a number makes the document malformed.
pub(crate) fn clat_bins(output: &str, dir: Dir) -> Result<ClatBins, FioJsonError> {
    let start = first_document_start(output, 0).ok_or_else(|| FioJsonError::NoDocument {
        excerpt: excerpt(output),
    })?;
    let (last, _) = last_document::<BinsDoc>(output, start)?;
    let Some(doc) = last else {
        return Ok(ClatBins::NotJsonPlus);
    };
    let client_mode = doc.jobs.is_empty();
    let jobs = if client_mode {
        doc.client_stats
    } else {
        doc.jobs
    };
    let mut merged: Option<BTreeMap<u64, u64>> = None;
    let mut io_done = false;
    for job in jobs {
        if client_mode && job.jobname == "All clients" {
            continue;
        }
        let d = match dir {
            Dir::Read => job.read,
            Dir::Write => job.write,
            Dir::Trim => job.trim,
        };
        io_done |= d.as_ref().is_some_and(|d| d.total_ios > 0);
        let Some(bins) = d.and_then(|d| d.clat_ns).and_then(|c| c.bins) else {
            continue;
        };
        let into = merged.get_or_insert_with(BTreeMap::new);
        for (ns, n) in bins {
            let at = into.entry(ns).or_insert(0);
            *at = at.saturating_add(n);
        }
    }
    Ok(match merged {
        Some(bins) => ClatBins::Histogram(bins),
        None if io_done => ClatBins::NotJsonPlus,
        None => ClatBins::NoIo,
    })
}

/// Figures of one direction summed or combined over every job.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DirectionTotal {
    pub iops: f64,
    pub(crate) bw_bytes: f64,
    pub(crate) total_ios: u64,
    /// Completion latency over all jobs; `None` when no job did I/O in this direction.
    pub clat: Option<CombinedLatency>,
}

/// Completion latency combined over jobs, in nanoseconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CombinedLatency {
    pub samples: u64,
    /// Mean weighted by each job's number of completions.
    pub(crate) mean_ns: f64,
    /// Stddev of the pooled samples (exact from each job's mean, stddev and count).
    pub(crate) stddev_ns: f64,
    pub(crate) min_ns: f64,
    pub(crate) max_ns: f64,
    /// (percent, ns) for 50, 99 and 99.9 where they can be known exactly; see `PercentileSource`.
    pub percentiles: Vec<(f64, f64)>,
    pub percentile_source: PercentileSource,
}

/// Where the combined percentiles came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PercentileSource {
    /// Merged `json+` bins of every job: exact.
    MergedBins,
    /// Only one job did I/O in this direction: its own percentiles.
    SingleJob,
    /// Several jobs without bins: percentiles cannot be combined, so none are given.
    #[default]
    Unavailable,
}

impl FioReport {
    /// The first job that reported an error, with its errno.
    pub fn first_error(&self) -> Option<(&str, i64)> {
        self.jobs
            .iter()
            .find(|j| j.error != 0)
            .map(|j| (j.name.as_str(), j.error))
    }

    /// Whether any job did any I/O (a job that does none measured nothing, whatever fio's
    /// exit status says).
    pub fn did_io(&self) -> bool {
        self.jobs
            .iter()
            .any(|j| j.read.used() || j.write.used() || j.trim.used())
    }

    /// One direction summed over jobs: IOPS and bandwidth add up, latency means are weighted by
    /// completions, percentiles are merged from bins or taken from the only job that has them.
    pub fn total(&self, dir: Dir) -> DirectionTotal {
        let used: Vec<&Direction> = self
            .jobs
            .iter()
            .map(|j| dir.of(j))
            .filter(|d| d.used())
            .collect();
        let mut total = DirectionTotal {
            iops: self.jobs.iter().map(|j| dir.of(j).iops).sum(),
            bw_bytes: self.jobs.iter().map(|j| dir.of(j).bw_bytes).sum(),
            total_ios: self.jobs.iter().map(|j| dir.of(j).total_ios).sum(),
            clat: None,
        };
        let with_samples: Vec<&Latency> = used
            .iter()
            .map(|d| &d.clat)
            .filter(|l| l.samples > 0)
            .collect();
        if with_samples.is_empty() {
            return total;
        }
        let n: u64 = with_samples.iter().map(|l| l.samples).sum();
        let mean = with_samples
            .iter()
            .map(|l| l.mean_ns * l.samples as f64)
            .sum::<f64>()
            / n as f64;
        // Pooled variance from per-job (n-1)-variances and the spread of the job means.
        let ss: f64 = with_samples
            .iter()
            .map(|l| {
                let ni = l.samples as f64;
                (ni - 1.0).max(0.0) * l.stddev_ns * l.stddev_ns
                    + ni * (l.mean_ns - mean) * (l.mean_ns - mean)
            })
            .sum();
        let stddev = if n > 1 {
            (ss / (n as f64 - 1.0)).sqrt()
        } else {
            0.0
        };
        let (percentiles, source) = if with_samples.iter().all(|l| l.bins.is_some()) {
            let merged = merge_bins(with_samples.iter().filter_map(|l| l.bins.as_ref()));
            let p = PUBLISHED_PERCENTILES
                .iter()
                .filter_map(|&(pct, _)| Some((pct, percentile_of(&merged, pct)? as f64)))
                .collect();
            (p, PercentileSource::MergedBins)
        } else if with_samples.len() == 1 {
            let own = &with_samples[0].percentiles;
            let p = PUBLISHED_PERCENTILES
                .iter()
                .filter_map(|&(pct, _)| {
                    own.iter()
                        .find(|(k, _)| (k - pct).abs() < 1e-9)
                        .map(|&(_, v)| (pct, v))
                })
                .collect();
            (p, PercentileSource::SingleJob)
        } else {
            (Vec::new(), PercentileSource::Unavailable)
        };
        total.clat = Some(CombinedLatency {
            samples: n,
            mean_ns: mean,
            stddev_ns: stddev,
            min_ns: with_samples
                .iter()
                .map(|l| l.min_ns)
                .fold(f64::INFINITY, f64::min),
            max_ns: with_samples.iter().map(|l| l.max_ns).fold(0.0, f64::max),
            percentiles,
            percentile_source: source,
        });
        total
    }

    /// The jobs one server ran in client mode (fio names them with the server's address and
    /// port, `hostname` and `port`), as a report of their own: one host's figures of a run on
    /// several. A report without ports (fio before 2.1.4) is matched by address alone.
    pub(crate) fn of_client(&self, (hostname, port): (&str, u16)) -> FioReport {
        FioReport {
            jobs: self
                .jobs
                .iter()
                .filter(|j| {
                    j.hostname.as_deref() == Some(hostname) && j.port.is_none_or(|p| p == port)
                })
                .cloned()
                .collect(),
            all_clients: None,
            version: self.version.clone(),
            global_options: self.global_options.clone(),
            client_mode: self.client_mode,
            documents: self.documents,
            preamble: String::new(),
        }
    }

    /// How many reporting groups its jobs are in, when more than one: fio starts one at
    /// `new_group` (the jobs still run together) and at `stonewall` (they run after the ones
    /// before), and its JSON does not say which.
    pub(crate) fn groups(&self) -> Option<usize> {
        let groups: std::collections::BTreeSet<u64> = self.jobs.iter().map(|j| j.group).collect();
        (groups.len() > 1).then_some(groups.len())
    }

    /// iolab's stable metric names (docs/architecture.md). Read and write IOPS and bandwidth
    /// are always present (0 for an unused direction, which is a real figure); latencies only
    /// for directions that did I/O; percentiles only where they are exact; trim only if used.
    /// `fio_usr_pct`/`fio_sys_pct` are summed over jobs: percent of one CPU, so two jobs each
    /// keeping a CPU half busy give 100.
    pub fn metrics(&self) -> Vec<(String, f64)> {
        let mut out = Vec::new();
        for dir in Dir::ALL {
            let total = self.total(dir);
            if dir == Dir::Trim && total.total_ios == 0 && total.clat.is_none() {
                continue;
            }
            let m = dir.metrics();
            let mut push =
                |metric: &metrics::Metric, v: f64| out.push((metric.name.to_string(), v));
            push(&m.iops, total.iops);
            push(&m.bw_mbs, total.bw_bytes / 1e6);
            if let Some(clat) = &total.clat {
                push(&m.clat_mean_us, clat.mean_ns / 1e3);
                for &(pct, metric) in &PUBLISHED_PERCENTILES {
                    if let Some(&(_, v)) = clat.percentiles.iter().find(|(p, _)| *p == pct) {
                        push(metric(m), v / 1e3);
                    }
                }
                push(&m.clat_min_us, clat.min_ns / 1e3);
                push(&m.clat_max_us, clat.max_ns / 1e3);
                push(&m.clat_stddev_us, clat.stddev_ns / 1e3);
            }
        }
        // Summed over jobs: a group's figure is one member's mean (see `JobResult::usr_cpu`).
        let summed = |cpu: fn(&JobResult) -> f64| -> f64 {
            self.jobs
                .iter()
                .map(|j| cpu(j) * f64::from(j.members.max(1)))
                .sum()
        };
        out.push((metrics::FIO_USR_PCT.name.to_string(), summed(|j| j.usr_cpu)));
        out.push((metrics::FIO_SYS_PCT.name.to_string(), summed(|j| j.sys_cpu)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clat_bins_match_the_full_parse() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fio");
        for (file, d) in [
            ("randread_2jobs_jsonplus.out", Dir::Read),
            ("randrw_2jobs_jsonplus.out", Dir::Write),
            ("client_randread_2jobs_jsonplus.out", Dir::Read),
            ("write_1job_jsonplus.out", Dir::Write),
        ] {
            let text = std::fs::read_to_string(dir.join(file)).unwrap();
            let report = parse(&text).unwrap();
            let expected = merge_bins(report.jobs.iter().filter_map(|j| match d {
                Dir::Read => j.read.clat.bins.as_ref(),
                Dir::Write => j.write.clat.bins.as_ref(),
                Dir::Trim => j.trim.clat.bins.as_ref(),
            }));
            let ClatBins::Histogram(fast) = clat_bins(&text, d).unwrap() else {
                panic!("{file}: no histogram");
            };
            assert!(!fast.is_empty(), "{file}");
            assert_eq!(fast, expected, "{file}");
        }
        let plain = std::fs::read_to_string(dir.join("randread_1job_json.out")).unwrap();
        assert_eq!(clat_bins(&plain, Dir::Read).unwrap(), ClatBins::NotJsonPlus);
        let read_only = std::fs::read_to_string(dir.join("randread_2jobs_jsonplus.out")).unwrap();
        assert_eq!(clat_bins(&read_only, Dir::Write).unwrap(), ClatBins::NoIo);
    }

    /// Servers behind one address (port forwards to guests) differ by port alone: each
    /// host's part held every host's jobs, so each stored the sum of all.
    #[test]
    fn one_servers_jobs_are_told_apart_by_port_too() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fio");
        let text = std::fs::read_to_string(dir.join("client_randread_2jobs_json.out")).unwrap();
        let mut report = parse(&text).unwrap();
        assert_eq!(report.jobs.len(), 2);
        assert!(report.jobs.iter().all(|j| j.port == Some(8766)));
        assert_eq!(report.of_client(("127.0.0.1", 8766)).jobs.len(), 2);
        report.jobs[1].port = Some(8767);
        let first = report.of_client(("127.0.0.1", 8766));
        assert_eq!(first.jobs, [report.jobs[0].clone()]);
        assert_eq!(report.of_client(("127.0.0.1", 8767)).jobs.len(), 1);
        assert!(report.of_client(("127.0.0.1", 8765)).jobs.is_empty());
        // A report without ports: by address alone.
        report.jobs.iter_mut().for_each(|j| j.port = None);
        assert_eq!(report.of_client(("127.0.0.1", 8765)).jobs.len(), 2);
    }

    /// fio 2.x's layout (latencies in µs under `clat`, bandwidth in KiB/s only) is refused,
    /// not read as a run of no bandwidth and no latency.
    #[test]
    fn fio_2_json_is_refused_by_name() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fio");
        let text = std::fs::read_to_string(dir.join("randread_1job_json.out")).unwrap();
        let mut doc: Value = serde_json::from_str(&text[text.find('{').unwrap()..]).unwrap();
        doc["fio version"] = Value::from("fio-2.2.10");
        for d in ["read", "write", "trim"] {
            let x = doc["jobs"][0][d].as_object_mut().unwrap();
            x.remove("bw_bytes");
            for l in ["slat", "clat", "lat"] {
                let ns = x.remove(&format!("{l}_ns")).unwrap();
                x.insert(l.into(), ns);
            }
        }
        let e = parse(&doc.to_string()).unwrap_err().to_string();
        assert!(e.contains("the layout of fio before 3.0"), "{e}");
    }

    /// fio 3.33, `numjobs=2 --group_reporting --ramp_time=1 --runtime=1`: one entry whose
    /// CPU figures are one member's mean (18.25% user), summed over both here as they are
    /// for jobs reported apart.
    #[test]
    fn a_groups_cpu_is_summed_over_its_members() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fio");
        let text = std::fs::read_to_string(dir.join("randread_2jobs_group_json.out")).unwrap();
        let report = parse(&text).unwrap();
        assert_eq!(report.jobs.len(), 1);
        assert_eq!(report.jobs[0].members, 2);
        let metric = |name: &str| {
            let m = report.metrics();
            m.iter().find(|(n, _)| n == name).map(|(_, v)| *v).unwrap()
        };
        assert!((metric("fio_usr_pct") - 36.5).abs() < 1e-9);
        assert!((metric("fio_sys_pct") - 161.6).abs() < 1e-9);
        // Jobs reported apart are one each (1000 ms against 1001 ms), as before.
        let text = std::fs::read_to_string(dir.join("randread_2jobs_jsonplus.out")).unwrap();
        assert!(parse(&text).unwrap().jobs.iter().all(|j| j.members == 1));
        assert_eq!(group_members(0.0, [0, 0, 0], false), 1);
        assert_eq!(group_members(3000.0, [0, 1000, 999], false), 3);
        // fio 3.33, `--rw=write --bs=64k --size=64M --verify=crc32c`: one job, 350 ms of
        // writes, then 180 ms reading them back (job_runtime 530).
        assert_eq!(group_members(530.0, [180, 350, 0], true), 1);
        assert_eq!(group_members(1060.0, [180, 350, 0], true), 2);
        let opts = |kv: &[(&str, &str)]| {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        assert!(verifies(&opts(&[("verify", "crc32c")]), &opts(&[])));
        assert!(verifies(&opts(&[]), &opts(&[("verify", "md5")])));
        assert!(!verifies(
            &opts(&[("verify", "crc32c"), ("do_verify", "0")]),
            &opts(&[])
        ));
        assert!(!verifies(&opts(&[("verify", "0")]), &opts(&[])));
    }

    fn job_json(name: &str, iops: f64, n: u64, mean: f64, sd: f64, bins: Option<&str>) -> String {
        let bins = bins
            .map(|b| format!(r#", "bins": {b}"#))
            .unwrap_or_default();
        format!(
            r#"{{"jobname": "{name}", "error": 0, "usr_cpu": 1.5, "sys_cpu": 10.0,
               "read": {{"iops": {iops}, "bw_bytes": 4096000, "io_bytes": 8192, "total_ios": {n},
                        "runtime": 1000,
                        "clat_ns": {{"min": 10, "max": 900, "mean": {mean}, "stddev": {sd},
                                    "N": {n}, "percentile": {{"50.000000": 100, "99.000000": 800,
                                    "99.900000": 900}}{bins}}}}},
               "write": {{"iops": 0.0, "bw_bytes": 0, "total_ios": 0,
                         "clat_ns": {{"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0}}}}}}"#
        )
    }

    fn doc(jobs: &[String]) -> String {
        format!(
            "{{\"fio version\": \"fio-3.33\", \"jobs\": [{}]}}\n",
            jobs.join(",")
        )
    }

    #[test]
    fn text_before_the_json_is_skipped_and_kept() {
        let out = format!(
            "fio: pid=1, err=95/file:io_u.c:1876\n{}",
            doc(&[job_json("a", 5.0, 10, 100.0, 0.0, None)])
        );
        let r = parse(&out).unwrap();
        assert_eq!(r.preamble, "fio: pid=1, err=95/file:io_u.c:1876");
        assert_eq!(r.jobs.len(), 1);
        assert_eq!(r.version.as_deref(), Some("fio-3.33"));
    }

    #[test]
    fn no_json_is_an_error_quoting_the_output() {
        let e = parse("fio: failed to open /dev/nope\n").unwrap_err();
        assert!(
            matches!(e, FioJsonError::NoDocument { ref excerpt } if excerpt.contains("/dev/nope"))
        );
        assert!(matches!(
            parse("").unwrap_err(),
            FioJsonError::NoDocument { .. }
        ));
    }

    #[test]
    fn malformed_json_points_at_the_line_of_the_whole_output() {
        let e = parse("warning\n{\n  \"jobs\": [,]\n}\n").unwrap_err();
        match e {
            FioJsonError::Malformed { line, .. } => assert_eq!(line, 3),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn several_documents_keep_the_last_and_a_truncated_tail_is_ignored() {
        let first = doc(&[job_json("a", 1.0, 10, 100.0, 0.0, None)]);
        let second = doc(&[job_json("a", 2.0, 20, 100.0, 0.0, None)]);
        let r = parse(&format!("{first}{second}{{\"jobs\": [")).unwrap();
        assert_eq!(r.documents, 2);
        assert_eq!(r.jobs[0].read.iops, 2.0);
    }

    #[test]
    fn neither_jobs_nor_clients_is_an_error() {
        assert_eq!(
            parse("{\"fio version\": \"x\"}").unwrap_err(),
            FioJsonError::NoJobs
        );
    }

    #[test]
    fn means_are_weighted_and_stddev_pooled_exactly() {
        // Job a: samples {1,3} -> mean 2, sample sd sqrt(2). Job b: {5,5,5,9} -> mean 6,
        // sd 2. Pooled {1,3,5,5,5,9}: mean 14/3, sample variance = 7.8667.
        let a = job_json("a", 1.0, 2, 2.0, 2f64.sqrt(), None);
        let b = job_json("b", 2.0, 4, 6.0, 2.0, None);
        let r = parse(&doc(&[a, b])).unwrap();
        let t = r.total(Dir::Read);
        let c = t.clat.unwrap();
        assert_eq!(t.iops, 3.0);
        assert!((c.mean_ns - 28.0 / 6.0).abs() < 1e-12);
        let xs = [1.0, 3.0, 5.0, 5.0, 5.0, 9.0];
        let m: f64 = xs.iter().sum::<f64>() / 6.0;
        let var = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / 5.0;
        assert!((c.stddev_ns - var.sqrt()).abs() < 1e-12);
        // Two jobs without bins: no percentile may be invented.
        assert_eq!(c.percentile_source, PercentileSource::Unavailable);
        assert!(c.percentiles.is_empty());
        let names: Vec<String> = r.metrics().into_iter().map(|(n, _)| n).collect();
        assert!(!names.iter().any(|n| n.contains("p99")));
        assert!(names.contains(&"read_clat_mean_us".to_string()));
    }

    #[test]
    fn single_job_percentiles_come_from_fio() {
        let r = parse(&doc(&[job_json("a", 1.0, 10, 100.0, 5.0, None)])).unwrap();
        let m: BTreeMap<String, f64> = r.metrics().into_iter().collect();
        assert_eq!(m["read_clat_p50_us"], 0.1);
        assert_eq!(m["read_clat_p99_us"], 0.8);
        assert_eq!(m["read_clat_p999_us"], 0.9);
        assert_eq!(m["read_bw_mbs"], 4.096);
        assert_eq!(m["write_iops"], 0.0);
        assert!(!m.contains_key("write_clat_mean_us"));
        assert!(!m.contains_key("trim_iops"));
        assert_eq!(m["fio_sys_pct"], 10.0);
    }

    /// Each bin within the count limit, and 20,000 of them past u64 in all: refused at
    /// their place, not summed into a wrapped count.
    #[test]
    fn bins_that_count_more_than_the_limit_in_all_are_refused() {
        let many: Vec<String> = (1..=20_000).map(|ns| format!("\"{ns}\": 1e15")).collect();
        let bins = format!("{{{}}}", many.join(", "));
        let e = parse(&doc(&[job_json("a", 1.0, 4, 1.0, 0.0, Some(&bins))])).unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains("clat_ns.bins") && e.contains("more than 1e15"),
            "{e}"
        );
    }

    #[test]
    fn bins_are_merged_before_taking_percentiles() {
        let a = job_json("a", 1.0, 4, 1.0, 0.0, Some(r#"{"100": 3, "1000": 1}"#));
        let b = job_json("b", 1.0, 4, 1.0, 0.0, Some(r#"{"100": 1, "2000": 3}"#));
        let r = parse(&doc(&[a, b])).unwrap();
        let c = r.total(Dir::Read).clat.unwrap();
        assert_eq!(c.percentile_source, PercentileSource::MergedBins);
        // merged: 100 x4, 1000 x1, 2000 x3 -> p50 = 100 (4 >= 4), p99 = 2000.
        assert_eq!(
            c.percentiles,
            vec![(50.0, 100.0), (99.0, 2000.0), (99.9, 2000.0)]
        );
    }

    #[test]
    fn lenient_where_fio_is_and_strict_where_damage_shows() {
        // Numbers as strings are fio's own habit in places; they are accepted.
        let out = r#"{"jobs": [{"jobname": 5, "error": "95", "read": {},
                      "write": {"iops": "12.5", "clat_ns": {"N": 3, "bins": {"7": "2"}}}}]}"#;
        let r = parse(out).unwrap();
        assert_eq!(r.jobs[0].error, 95);
        assert_eq!(r.jobs[0].write.iops, 12.5);
        assert_eq!(r.jobs[0].write.clat.samples, 3);
        assert_eq!(
            r.jobs[0].write.clat.bins.as_ref().unwrap().get(&7),
            Some(&2)
        );
        let _ = r.metrics();
    }

    /// Each damaged field is refused with its JSON path (the list says which and why).
    #[test]
    fn damaged_fields_are_refused_with_their_json_path() {
        let job = |read: &str, write: &str| {
            format!(r#"{{"jobs": [{{"jobname": "j", "read": {read}, "write": {write}}}]}}"#)
        };
        let cases = [
            (job(r#""oops""#, "{}"), "jobs[0].read", "expected an object"),
            (job("{}", "[1]"), "jobs[0].write", "expected an object"),
            (
                r#"{"jobs": [{"jobname": "j"}]}"#.to_string(),
                "jobs[0].read",
                "missing",
            ),
            (r#"{"jobs": []}"#.to_string(), "jobs", "no jobs"),
            (r#"{"jobs": [7]}"#.to_string(), "jobs[0]", "job object"),
            (
                job(r#"{"iops": -1e308}"#, "{}"),
                "jobs[0].read.iops",
                "negative",
            ),
            (
                job(r#"{"iops": "NaN"}"#, "{}"),
                "jobs[0].read.iops",
                "finite",
            ),
            (
                job(r#"{"iops": "inf"}"#, "{}"),
                "jobs[0].read.iops",
                "finite",
            ),
            (
                job(r#"{"bw_bytes": 1e300}"#, "{}"),
                "jobs[0].read.bw_bytes",
                "above",
            ),
            (
                job(r#"{"iops": true}"#, "{}"),
                "jobs[0].read.iops",
                "expected a number",
            ),
            (
                job("{}", r#"{"clat_ns": {"mean": -5}}"#),
                "jobs[0].write.clat_ns.mean",
                "negative",
            ),
            (
                job("{}", r#"{"clat_ns": {"percentile": {"99.000000": -1}}}"#),
                "jobs[0].write.clat_ns.percentile[\"99.000000\"]",
                "negative",
            ),
            (
                job("{}", r#"{"clat_ns": {"bins": {"x": 1}}}"#),
                "jobs[0].write.clat_ns.bins[\"x\"]",
                "not a latency",
            ),
        ];
        for (text, path, what) in cases {
            match parse(&text) {
                Err(FioJsonError::Invalid { path: p, message }) => {
                    assert_eq!(p, path, "{text}");
                    assert!(message.contains(what), "{text}: {message}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }
}

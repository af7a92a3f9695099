//! Per-run block traces for experiments with `trace = true`: each measured run records the
//! target device's block events through tracefs (`trace::capture`), the per-CPU files are kept
//! beside the database, and the trace is analysed at once so its headline figures become
//! ordinary `trace_*` metrics of the run (docs/architecture.md).
//!
//! Where the files go: `<db>.traces/experiment-<E>/cell<C>-round<R>/<device>.blktrace.<CPU>.gz`
//! (gzip-compressed once analysed, `trace::keep`; `iolab trace analyze` reads them as they are,
//! `iolab trace export` writes the plain files blkparse and btt need).
//! The run's database id is known only after its row is inserted, which is after the trace
//! has been written; experiment id, cell index and round are known before and identify a
//! measured run uniquely (warm-ups are never traced). If iolab dies between writing the files
//! and inserting the run, the directory is an orphan no run points to, and a later experiment
//! gets a new id, so nothing is overwritten. The run row stores the base name relative to the
//! database's directory, so a results directory can be moved as a whole.
//!
//! The blk tracer is global (one recorder per machine): when it is busy, tracefs is missing or
//! iolab is not root, the run goes on without a trace and the reason is said once.
//!
//! What is kept: every traced run is analysed, but `[trace] keep` and `keep_max` decide which
//! runs' files stay (`Keeper`); a trace not kept is removed at once and its run row names no
//! trace, so `show` can say how many were analysed but not kept (`kept_note`).

use std::path::{Path, PathBuf};

use std::collections::HashSet;

use crate::experiment::file::{KeepRuns, TraceSettings, DEFAULT_BUFFER_KB};
use crate::metrics;
use crate::trace::analyze::{self, DeviceReport, Report};
use crate::trace::capture::{self, Recording, Summary};

/// The trace buffer per CPU an experiment records with unless `[trace] buffer_kb` says:
/// a 32nd of this machine's memory (at most 4 GiB in all) spread over its online CPUs, from
/// 8 to 64 MiB each. The
/// recorder shares the CPUs with fio and falls behind on a busy machine; what the buffer holds
/// it reads once fio is done. (8 MiB lost a third of the events of a 2 s run of 64 KiB reads
/// at 90,000/s on a 2-CPU machine; 64 MiB none.)
pub(crate) fn auto_buffer_kb() -> u64 {
    let mem_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| crate::preflight::parse::meminfo_kib(&m, "MemTotal"));
    // Every online CPU gets a buffer, wherever iolab itself may run.
    let cpus = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|t| crate::sys::parse::cpulist::cpulist(t.trim()).ok())
        .map_or(1, |c| c.len() as u64);
    buffer_kb_for(mem_kib.unwrap_or(0), cpus)
}

fn buffer_kb_for(mem_kib: u64, cpus: u64) -> u64 {
    let all_cpus_kib = (mem_kib / 32).min(4 << 20);
    (all_cpus_kib / cpus.max(1)).clamp(DEFAULT_BUFFER_KB, 64 << 10)
}

/// The directory that holds every trace of the database `db_path`.
pub fn traces_dir(db_path: &Path) -> PathBuf {
    let mut name = db_path.file_name().unwrap_or_default().to_os_string();
    name.push(".traces");
    db_path.with_file_name(name)
}

/// Why tracing cannot work here, checked without touching anything (for `--dry-run`).
pub(crate) fn unavailable(device: &str) -> Option<String> {
    if !crate::sys::is_root() {
        return Some("recording needs root".into());
    }
    let enable = Path::new("/sys/class/block")
        .join(device)
        .join("trace/enable");
    if !enable.exists() {
        return Some(format!(
            "{} is missing (kernel without CONFIG_BLK_DEV_IO_TRACE?)",
            enable.display()
        ));
    }
    match std::fs::read_to_string("/sys/kernel/tracing/current_tracer") {
        Ok(t) if matches!(t.trim(), "nop" | "blk") => None,
        Ok(t) => Some(format!("tracefs is in use by the `{}` tracer", t.trim())),
        // tracefs is mounted by the recorder when it is not.
        Err(_) => None,
    }
}

/// Tracing for one experiment.
pub(crate) struct Tracing {
    db_path: PathBuf,
    /// Where the recordings journal the tracefs settings (`capture::Config::state_dir`).
    state_dir: PathBuf,
    experiment_id: i64,
    device: String,
    /// "major,minor" of the target, as the analysis names devices.
    dev: String,
    said_unavailable: bool,
    keeper: Keeper,
    /// The kernel's trace buffer per CPU, KiB (`[trace] buffer_kb`).
    pub(crate) buffer_kb: u64,
}

/// Decides, run after run, which traces an experiment keeps (`[trace] keep`, `keep_max`).
/// No I/O: the caller removes what is not kept.
#[derive(Debug, Clone)]
pub(crate) struct Keeper {
    policy: TraceSettings,
    /// Cells that already keep a trace (for `keep = "first"`).
    cells: HashSet<usize>,
    /// Bytes of the traces kept so far.
    pub(crate) kept_bytes: u64,
    pub(crate) kept: u64,
    /// Set once a trace did not fit under `keep_max`: no later trace is kept.
    pub(crate) full: bool,
}

impl Keeper {
    pub(crate) fn new(policy: TraceSettings) -> Keeper {
        Keeper {
            policy,
            cells: HashSet::new(),
            kept_bytes: 0,
            kept: 0,
            full: false,
        }
    }

    /// Whether a trace of `cell` may be kept at all (before its size is known).
    pub(crate) fn wants(&self, cell: usize) -> bool {
        !self.full
            && match self.policy.runs {
                KeepRuns::All => true,
                KeepRuns::First => !self.cells.contains(&cell),
                KeepRuns::None => false,
            }
    }

    /// Offers a trace of `cell` that takes `bytes` on disk: true when it is kept (and counted).
    /// A trace that would take the total past `keep_max` is refused, and so is every later one
    /// (the cap is reached), so the kept ones are the experiment's earliest runs.
    pub(crate) fn offer(&mut self, cell: usize, bytes: u64) -> bool {
        if !self.wants(cell) {
            return false;
        }
        if let Some(max) = self.policy.max_bytes {
            if self.kept_bytes.saturating_add(bytes) > max {
                self.full = true;
                return false;
            }
        }
        self.cells.insert(cell);
        self.kept_bytes += bytes;
        self.kept += 1;
        true
    }
}

/// A recording in progress for one run. Dropped without [`RunTrace::finish`] (fio failed,
/// Ctrl-C), it stops the recording — which restores tracefs — and removes its files, since no
/// run will point to them.
pub(crate) struct RunTrace {
    recording: Option<Recording>,
    dir: PathBuf,
    base: PathBuf,
    stored: String,
}

/// A recording's `trace_*` metrics, and the MB of the bios completed within fio's measured
/// interval when it was given.
pub(crate) struct Analysed {
    pub(crate) metrics: Vec<(String, f64)>,
    pub(crate) in_window_mb: Option<f64>,
}

/// A finished recording: where it is and what the recorder saw.
pub(crate) struct Recorded {
    pub(crate) base: PathBuf,
    /// The base name relative to the database's directory (what the run row stores).
    pub(crate) stored: String,
    pub(crate) summary: Summary,
}

impl Tracing {
    /// `dev` is the target's `major:minor` (the machine model's form).
    pub(crate) fn new(
        db_path: &Path,
        state_dir: &Path,
        experiment_id: i64,
        device: &str,
        dev: &str,
        settings: TraceSettings,
    ) -> Tracing {
        Tracing {
            db_path: db_path.to_path_buf(),
            state_dir: state_dir.to_path_buf(),
            experiment_id,
            device: device.to_string(),
            dev: dev.replace(':', ","),
            said_unavailable: false,
            keeper: Keeper::new(settings),
            buffer_kb: settings.buffer_kb.unwrap_or_else(auto_buffer_kb),
        }
    }

    /// Keeps an analysed recording of `cell` compressed, or removes it, as `[trace] keep` and
    /// `keep_max` say; the name the run row stores when it is kept.
    pub(crate) fn keep(
        &mut self,
        cell: usize,
        recorded: &Recorded,
        say: &mut dyn FnMut(&str),
    ) -> Option<String> {
        let dir = recorded.base.parent().map(Path::to_path_buf);
        let remove = |say: &mut dyn FnMut(&str)| {
            if let Some(dir) = &dir {
                if let Err(e) = std::fs::remove_dir_all(dir) {
                    say(&format!("trace: cannot remove {}: {e}", dir.display()));
                }
            }
        };
        if !self.keeper.wants(cell) {
            remove(say);
            return None;
        }
        // Kept compressed (analysed before from the plain files); `trace export` unpacks them.
        let bytes = match crate::trace::keep::compress(&recorded.base) {
            Ok(sizes) => sizes.gz_bytes,
            Err(e) => {
                say(&format!("trace: {e:#}"));
                trace_bytes(&recorded.base)
            }
        };
        let was_full = self.keeper.full;
        if self.keeper.offer(cell, bytes) {
            return Some(recorded.stored.clone());
        }
        if self.keeper.full && !was_full {
            say(&format!(
                "trace: keep_max reached ({} traces kept, {:.1} MB; the next would take {:.1} \
                 MB): later runs' traces are analysed, not kept",
                self.keeper.kept,
                self.keeper.kept_bytes as f64 / 1e6,
                bytes as f64 / 1e6
            ));
        }
        remove(say);
        None
    }

    /// Starts recording for the measured run of cell `cell` in round `round`; `None` (and,
    /// the first time, a message) when tracing is unavailable.
    pub(crate) fn start(
        &mut self,
        cell: usize,
        round: u32,
        say: &mut dyn FnMut(&str),
    ) -> Option<RunTrace> {
        let db_name = self.db_path.file_name().unwrap_or_default();
        let relative_dir = traces_dir(Path::new(db_name))
            .join(format!("experiment-{}", self.experiment_id))
            .join(format!("cell{cell}-round{round}"));
        let dir = crate::store::trace_location(&self.db_path, &relative_dir.to_string_lossy());
        let started = std::fs::create_dir_all(&dir)
            .map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))
            .and_then(|()| {
                capture::start(capture::Config {
                    device: self.device.clone(),
                    output: dir.join(&self.device),
                    duration: None,
                    buffer_kb: self.buffer_kb,
                    command: Vec::new(),
                    status_line: false,
                    command_stdout_to_stderr: false,
                    state_dir: self.state_dir.clone(),
                })
            });
        match started {
            Ok(recording) => Some(RunTrace {
                recording: Some(recording),
                base: dir.join(&self.device),
                stored: relative_dir
                    .join(&self.device)
                    .to_string_lossy()
                    .into_owned(),
                dir,
            }),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                if !self.said_unavailable {
                    self.said_unavailable = true;
                    say(&format!(
                        "trace: cannot record /dev/{} ({e:#}); runs go on without a trace",
                        self.device
                    ));
                }
                None
            }
        }
    }

    /// Analyses a finished recording into the run's `trace_*` metrics, and the MB of the
    /// bios completed on the device within `window` (fio's measured interval on the trace's
    /// clock, `[start, end)` ns) when there is one.
    pub(crate) fn metrics(
        &self,
        recorded: &Recorded,
        window: Option<(u64, u64)>,
    ) -> anyhow::Result<Analysed> {
        analyse(&recorded.base, &self.dev, &recorded.summary, window)
    }
}

/// Analyses the recording `base` of device `dev` ("major,minor") into the run's `trace_*`
/// metrics, and the MB of the bios completed there within `window` (`[start, end)` ns on the
/// trace's clock) when one is given. A run here and a controlled host's run alike.
pub(crate) fn analyse(
    base: &Path,
    dev: &str,
    summary: &Summary,
    window: Option<(u64, u64)>,
) -> anyhow::Result<Analysed> {
    let report = analyze::analyze_paths(
        std::slice::from_ref(&base.to_path_buf()),
        analyze::Options {
            timeline: false,
            window,
            ..Default::default()
        },
    )
    .map_err(|e| anyhow::anyhow!("analysing {}: {e}", base.display()))?;
    let in_window_mb = report
        .devices
        .iter()
        .find(|d| d.dev == dev)
        .and_then(|d| d.bio_bytes_in_window)
        .map(|b| b as f64 / 1e6);
    Ok(Analysed {
        metrics: metrics(&report, dev, summary),
        in_window_mb,
    })
}

impl RunTrace {
    /// Stops recording (draining the buffers and restoring tracefs).
    pub(crate) fn finish(mut self) -> anyhow::Result<Recorded> {
        let recording = self
            .recording
            .take()
            .expect("a RunTrace records until finished");
        let summary = recording.stop()?;
        let recorded = Recorded {
            base: self.base.clone(),
            stored: std::mem::take(&mut self.stored),
            summary,
        };
        // Kept: forget the directory so Drop leaves it.
        self.dir = PathBuf::new();
        Ok(recorded)
    }
}

impl Drop for RunTrace {
    fn drop(&mut self) {
        if let Some(r) = self.recording.take() {
            let _ = r.stop();
        }
        if !self.dir.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Bytes on disk of the files of the trace `base` (plain or compressed).
fn trace_bytes(base: &Path) -> u64 {
    crate::trace::stream::resolve_input(base)
        .unwrap_or_default()
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

/// What `show` says when traced runs were analysed but their traces not kept: `analysed`
/// runs carry `trace_*` metrics, `kept` of them name their trace files.
pub(crate) fn kept_note(analysed: u64, kept: u64) -> Option<String> {
    (kept < analysed).then(|| {
        format!(
            "traces: {kept} of {analysed} traced runs keep their trace files; the other {} \
             were analysed (trace_* metrics) and not kept ([trace] keep / keep_max)",
            analysed - kept
        )
    })
}

/// The headline figures of a trace for device `dev` ("major,minor"), under the stable names
/// of docs/architecture.md. Latencies are btt's per-bio view. A device with no events in the
/// trace gives only the event counts.
pub(crate) fn metrics(report: &Report, dev: &str, summary: &Summary) -> Vec<(String, f64)> {
    let mut out = vec![
        (metrics::TRACE_EVENTS.name.to_string(), report.events as f64),
        (
            metrics::TRACE_EVENTS_LOST.name.to_string(),
            summary.lost() as f64,
        ),
    ];
    let Some(d) = report.devices.iter().find(|d| d.dev == dev) else {
        return out;
    };
    out.extend(device_metrics(d));
    out.retain(|(_, v)| v.is_finite());
    out
}

fn device_metrics(d: &DeviceReport) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    let us = |s: f64| s * 1e6;
    out.push((
        metrics::TRACE_COMPLETED_MB.name.into(),
        d.bio_bytes_completed as f64 / 1e6,
    ));
    if let Some(q2c) = d.latency.get("q2c") {
        out.push((metrics::TRACE_Q2C_COUNT.name.into(), q2c.n as f64));
    }
    // A latency of no samples is no figure (not 0 us): left out.
    let measured = |name: &str| d.latency.get(name).filter(|l| l.n > 0);
    if let Some(q2c) = measured("q2c") {
        out.push((metrics::TRACE_Q2C_MEAN_US.name.into(), us(q2c.avg)));
        out.push((metrics::TRACE_Q2C_P50_US.name.into(), us(q2c.p50)));
        out.push((metrics::TRACE_Q2C_P99_US.name.into(), us(q2c.p99)));
        out.push((metrics::TRACE_Q2C_MAX_US.name.into(), us(q2c.max)));
        out.push((metrics::TRACE_I2D_PCT.name.into(), d.overhead.i2d));
    }
    if let Some(d2c) = measured("d2c") {
        out.push((metrics::TRACE_D2C_MEAN_US.name.into(), us(d2c.avg)));
        out.push((metrics::TRACE_D2C_P99_US.name.into(), us(d2c.p99)));
    }
    if d.merge.d > 0 {
        out.push((metrics::TRACE_MERGE_RATIO.name.into(), d.merge.ratio));
        out.push((
            metrics::TRACE_REQUEST_KB_MEAN.name.into(),
            d.merge.blk_avg as f64 / 2.0,
        ));
    }
    if d.dispatch_depth.n > 0 {
        out.push((
            metrics::TRACE_DISPATCH_DEPTH_MEAN.name.into(),
            d.dispatch_depth.avg,
        ));
    }
    out.push((metrics::TRACE_SLEEPS.name.into(), d.sleeps as f64));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn fixture_report() -> Report {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/trace/fx");
        analyze::analyze_paths(&[base], analyze::Options::default()).unwrap()
    }

    #[test]
    fn the_automatic_buffer_is_a_32nd_of_memory_within_8_and_64_mib_per_cpu() {
        let gib = 1 << 20;
        assert_eq!(buffer_kb_for(24 * gib, 2), 64 << 10);
        assert_eq!(buffer_kb_for(4 * gib, 4), 32 << 10);
        // 4 GiB at most over all CPUs.
        assert_eq!(buffer_kb_for(512 * gib, 256), 16 << 10);
        assert_eq!(buffer_kb_for(64 * gib, 256), 8 << 10);
        assert_eq!(buffer_kb_for(0, 0), 8 << 10);
    }

    fn summary(overrun: u64, dropped: u64, missed: u64) -> Summary {
        Summary {
            device: "loop0".into(),
            files: Vec::new(),
            events_per_cpu: BTreeMap::new(),
            processes: 0,
            overrun,
            dropped,
            missed,
            foreign: 0,
            elapsed: std::time::Duration::ZERO,
            stopped_by: String::new(),
            command_status: None,
        }
    }

    #[test]
    fn headline_figures_come_from_the_targets_section_of_the_analysis() {
        let report = fixture_report();
        let m: BTreeMap<String, f64> = metrics(&report, "7,0", &summary(1, 2, 3))
            .into_iter()
            .collect();
        let d = &report.devices[0];
        let q2c = &d.latency["q2c"];
        assert_eq!(m["trace_events"], report.events as f64);
        // Overwritten events are counted twice (tracefs' overrun and the pages' missed
        // count): the larger of the two, plus those dropped.
        assert_eq!(m["trace_events_lost"], 5.0);
        assert_eq!(m["trace_q2c_count"], 1600.0);
        assert_eq!(m["trace_q2c_mean_us"], q2c.avg * 1e6);
        assert_eq!(m["trace_q2c_p99_us"], q2c.p99 * 1e6);
        assert_eq!(m["trace_d2c_p99_us"], d.latency["d2c"].p99 * 1e6);
        assert_eq!(m["trace_i2d_pct"], d.overhead.i2d);
        assert!(m["trace_i2d_pct"] > 0.0 && m["trace_i2d_pct"] < 100.0);
        assert_eq!(m["trace_merge_ratio"], 1600.0 / 1585.0);
        assert_eq!(m["trace_dispatch_depth_mean"], d.dispatch_depth.avg);
        assert_eq!(m["trace_request_kb_mean"], 5.5);
        assert_eq!(m["trace_sleeps"], 0.0);
        assert_eq!(m["trace_completed_mb"], d.bio_bytes_completed as f64 / 1e6);
        assert!(m["trace_completed_mb"] > 0.0);
        // Every figure listed in the registry: experiment::metrics' tests.
        assert_eq!(m.len(), metrics::TRACE.len());
    }

    /// A device whose bios were queued and never completed (a remapper, or a trace cut short)
    /// has no latency: a count of 0, and no mean, percentile or share said to be 0.
    #[test]
    fn latencies_of_no_samples_are_left_out() {
        let mut report = fixture_report();
        for l in report.devices[0].latency.values_mut() {
            l.n = 0;
        }
        let m: BTreeMap<String, f64> = metrics(&report, "7,0", &summary(0, 0, 0))
            .into_iter()
            .collect();
        assert_eq!(m["trace_q2c_count"], 0.0);
        for name in [
            "trace_q2c_mean_us",
            "trace_q2c_p99_us",
            "trace_d2c_mean_us",
            "trace_i2d_pct",
        ] {
            assert!(!m.contains_key(name), "{name}: {m:?}");
        }
    }

    #[test]
    fn another_device_gives_only_the_event_counts() {
        let m = metrics(&fixture_report(), "8,0", &summary(0, 0, 0));
        let names: Vec<&str> = m.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["trace_events", "trace_events_lost"]);
    }

    fn policy(runs: KeepRuns, max_bytes: Option<u64>) -> Keeper {
        Keeper::new(TraceSettings {
            runs,
            max_bytes,
            ..TraceSettings::default()
        })
    }

    #[test]
    fn keep_first_keeps_one_trace_per_cell() {
        let mut k = policy(KeepRuns::First, None);
        let kept: Vec<bool> = [0, 1, 0, 1, 2, 0].iter().map(|&c| k.offer(c, 10)).collect();
        assert_eq!(kept, [true, true, false, false, true, false]);
        assert_eq!((k.kept, k.kept_bytes), (3, 30));
        let mut all = policy(KeepRuns::All, None);
        assert!((0..5).all(|_| all.offer(0, 10)));
        let mut none = policy(KeepRuns::None, None);
        assert!(!none.wants(0) && !none.offer(0, 0));
    }

    #[test]
    fn keep_max_stops_keeping_once_a_trace_would_pass_it() {
        let mut k = policy(KeepRuns::All, Some(100));
        let kept: Vec<bool> = [40, 60, 1, 0].iter().map(|&b| k.offer(0, b)).collect();
        // 40 + 60 = 100 fits exactly; the next byte would pass the cap, and after that nothing
        // is kept, not even an empty trace.
        assert_eq!(kept, [true, true, false, false]);
        assert!(k.full && !k.wants(1));
        assert_eq!(k.kept_bytes, 100);
        let mut first = policy(KeepRuns::First, Some(50));
        assert!(!first.offer(0, 51));
        assert!(!first.offer(1, 1), "the cap was reached");
    }

    #[test]
    fn show_notes_traces_analysed_but_not_kept() {
        assert_eq!(kept_note(4, 4), None);
        assert_eq!(kept_note(0, 0), None);
        let note = kept_note(6, 2).unwrap();
        assert!(
            note.starts_with("traces: 2 of 6 traced runs keep"),
            "{note}"
        );
        assert!(note.contains("the other 4 were analysed"), "{note}");
    }

    #[test]
    fn traces_live_beside_the_database() {
        assert_eq!(
            traces_dir(Path::new("/r/results.db")),
            PathBuf::from("/r/results.db.traces")
        );
        assert_eq!(
            traces_dir(Path::new("iolab.db")),
            PathBuf::from("iolab.db.traces")
        );
    }
}

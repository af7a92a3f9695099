//! Per-run block traces for experiments with `trace = true`: each measured run records the
//! target devices' block events through tracefs (`trace::capture`), the per-CPU files are
//! kept beside the database, and the trace is analysed at once so its headline figures
//! become ordinary `trace_*` metrics of the run (docs/architecture.md). Several target
//! devices are recorded together, into one set of files: the run's `trace_*` are over all of
//! them, and each device's own are `DEVICE:trace_*`. The devices stacked below a target (a dm
//! or md device's members) are recorded with it, their figures only their own
//! `DEVICE:trace_*`: where the bios are cut and merged again shows between the layers.
//! With fio on other hosts this machine records only its own `[target] local_devices` (and
//! the devices below them), each device's figures stored as `local:DEVICE:trace_*`.
//!
//! Where the files go: `<db>.traces/experiment-<E>/cell<C>-round<R>/<device>.blktrace.<CPU>.gz`
//! (`devices.blktrace.<CPU>.gz` for several)
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

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use super::align::TraceWindow;
use super::checks::{trace_vs_fio, Check, TraceBytes};
use super::{Plan, Settings};
use crate::experiment::file::{KeepRuns, TraceSettings, DEFAULT_BUFFER_KB};
use crate::metrics;
use crate::model::Machine;
use crate::trace::analyze::latency::LatencySummary;
use crate::trace::analyze::{self, DeviceReport, Report};
use crate::trace::capture::{self, Recording, Summary};
use crate::workload::fio_json::FioReport;

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
    let cpus = crate::sys::online_cpus(&crate::sys::SysRoot::live()).map_or(1, |c| c.len() as u64);
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

/// How [`unavailable`] begins when the device is being traced already.
pub(crate) const ALREADY_RUNNING: &str = "a block trace is already running on";

/// Why tracing cannot work here, checked without touching anything (for `--dry-run`).
pub(crate) fn unavailable(device: &str) -> Option<String> {
    if !crate::sys::is_root() {
        return Some("recording needs root".into());
    }
    let enable = Path::new("/sys/class/block")
        .join(device)
        .join("trace/enable");
    match std::fs::read_to_string(&enable) {
        Err(_) => {
            return Some(format!(
                "{} is missing (kernel without CONFIG_BLK_DEV_IO_TRACE?)",
                enable.display()
            ))
        }
        Ok(on) if on.trim() == "1" => return Some(format!("{ALREADY_RUNNING} {device}")),
        Ok(_) => {}
    }
    match std::fs::read_to_string("/sys/kernel/tracing/current_tracer") {
        Ok(t) if matches!(t.trim(), "nop" | "blk") => None,
        Ok(t) => Some(format!("tracefs is in use by the `{}` tracer", t.trim())),
        // tracefs is mounted by the recorder when it is not.
        Err(_) => None,
    }
}

/// A device an experiment traces.
#[derive(Debug, Clone)]
pub(crate) struct Traced {
    pub(crate) name: String,
    /// "major,minor", as the analysis names devices.
    pub(crate) dev: String,
    /// Stacked below a target (what a dm or md target is built from): recorded with the
    /// targets, its figures only its own `DEVICE:trace_*`, and no bytes check (fio drives the
    /// target, not it).
    pub(crate) below: bool,
}

impl Traced {
    /// A target; `dev` is the machine model's "major:minor".
    pub(crate) fn new(name: &str, dev: &str) -> Traced {
        Traced {
            name: name.to_string(),
            dev: dev.replace(':', ","),
            below: false,
        }
    }

    /// A device stacked below a target.
    pub(crate) fn below(name: &str, dev: &str) -> Traced {
        Traced {
            below: true,
            ..Traced::new(name, dev)
        }
    }
}

/// What an experiment records: its `targets`, then the devices stacked `below` them (what a
/// dm or md target is built from, `run::stacked`), each found by its number in sysfs. Left
/// out: a device below that cannot be traced (an NVMe multipath path, hidden, has no trace
/// of its own), and one on a disk recorded already (two partitions of one disk under an md
/// device: the kernel keeps one trace per disk, which the first one takes).
pub(crate) fn with_devices_below(mut targets: Vec<Traced>, below: &[String]) -> Vec<Traced> {
    let disk = |name: &str| capture::disk_of(name).unwrap_or_else(|_| name.to_string());
    let mut disks: Vec<String> = targets.iter().map(|t| disk(&t.name)).collect();
    for name in below {
        let traceable = Path::new("/sys/class/block")
            .join(name)
            .join("trace/enable");
        let Ok(number) = capture::device_number(name) else {
            continue;
        };
        let on = disk(name);
        if !traceable.exists() || disks.contains(&on) {
            continue;
        }
        disks.push(on);
        let dev = crate::trace::blk_io_trace::dev_name(number);
        targets.push(Traced::below(name, &dev));
    }
    targets
}

/// The base name of a recording of `devices`: the target's own name (with the devices below
/// it, if any), the one device's when there is no target (this machine's one local device in
/// a run across hosts), or `devices`.
fn base_name(devices: &[Traced]) -> &str {
    let mut targets = devices.iter().filter(|d| !d.below);
    match (targets.next(), targets.next(), devices) {
        (Some(one), None, _) | (None, _, [one]) => &one.name,
        _ => "devices",
    }
}

/// [`unavailable`] for the scratch devices of a dry run, which do not exist yet: asked of a
/// loop device that does (they will be loop devices too).
pub(crate) fn unavailable_for_scratch() -> Option<String> {
    let existing = std::fs::read_dir("/sys/class/block")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("loop"))
        .min();
    unavailable(existing.as_deref().unwrap_or("loop0"))
}

/// Tracing for one experiment.
pub(crate) struct Tracing {
    db_path: PathBuf,
    /// Where the recordings journal the tracefs settings (`capture::Config::state_dir`).
    state_dir: PathBuf,
    experiment_id: i64,
    devices: Vec<Traced>,
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

/// A recording's `trace_*` metrics, and what each traced device completed.
pub(crate) struct Analysed {
    pub(crate) metrics: Vec<(String, f64)>,
    /// By traced device, in the order given; `None` for a device with no events.
    pub(crate) devices: Vec<Option<Completed>>,
}

/// The MB of the bios a device completed in the whole trace, and within fio's measured
/// interval when it was given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Completed {
    pub(crate) mb: f64,
    pub(crate) in_window_mb: Option<f64>,
}

/// A measured run's trace figures and the checks of its targets' bytes against fio's.
pub(crate) struct Judged {
    pub(crate) metrics: Vec<(String, f64)>,
    pub(crate) checks: Vec<Check>,
}

/// A finished recording: where it is and what the recorder saw.
pub(crate) struct Recorded {
    pub(crate) base: PathBuf,
    /// The base name relative to the database's directory (what the run row stores).
    pub(crate) stored: String,
    pub(crate) summary: Summary,
}

impl Tracing {
    /// The recordings of the experiment stored as `experiment_id`: every target device of
    /// `plan` together with the devices stacked below them, as `[trace]` says. With fio on
    /// other hosts, this machine's own devices (`local`) alone, each for its own figures.
    pub(crate) fn of_plan(
        plan: &Plan,
        machine: &Machine,
        run: &Settings,
        experiment_id: i64,
        settings: TraceSettings,
    ) -> Tracing {
        let targets = plan
            .devices
            .iter()
            .map(|d| {
                let dev = machine.device(&d.name).map_or("", |m| m.dev.as_str());
                Traced::new(&d.name, dev)
            })
            .collect();
        let names = |d: &[super::PlanDevice]| d.iter().map(|d| d.name.clone()).collect::<Vec<_>>();
        let devices = if plan.local.is_empty() {
            with_devices_below(targets, &names(&plan.stacked))
        } else {
            with_devices_below(Vec::new(), &names(&plan.local))
        };
        Tracing {
            db_path: run.db_path.clone(),
            state_dir: run.state_dir.clone(),
            experiment_id,
            devices,
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
                // The experiment's directory goes too once it keeps no trace (only if empty).
                if let Some(experiment) = dir.parent() {
                    let _ = std::fs::remove_dir(experiment);
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
                "trace: keep_max reached ({} trace{} kept, {:.1} MB; the next would take \
                 {:.1} MB): later runs' traces are analysed, not kept",
                self.keeper.kept,
                if self.keeper.kept == 1 { "" } else { "s" },
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
        let name = base_name(&self.devices);
        // Written as root by path: iolab's own all the way from the database's directory.
        let base = self.db_path.parent().unwrap_or(Path::new(""));
        let started = crate::sys::own_dir::make_own_dir(base, &dir)
            .map_err(anyhow::Error::msg)
            .and_then(|()| {
                capture::start(capture::Config {
                    devices: self.devices.iter().map(|d| d.name.clone()).collect(),
                    output: dir.join(name),
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
                base: dir.join(name),
                stored: relative_dir.join(name).to_string_lossy().into_owned(),
                dir,
            }),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                if !self.said_unavailable {
                    self.said_unavailable = true;
                    let names: Vec<String> = self
                        .devices
                        .iter()
                        .map(|d| format!("/dev/{}", d.name))
                        .collect();
                    say(&format!(
                        "trace: cannot record {} ({e:#}); runs go on without a trace",
                        capture::listed(&names)
                    ));
                }
                None
            }
        }
    }

    /// A finished recording analysed into the run's `trace_*` metrics, and each target's
    /// check of the bytes its trace saw completed against the bytes fio moved on it
    /// (`report`, when fio's output is checked), counted over `window_of(target)`: the
    /// target's measured interval on the trace's clock. The devices below a target give
    /// figures only: fio drives the target, not them.
    pub(crate) fn judge(
        &self,
        recorded: &Recorded,
        window_of: impl Fn(&str) -> Option<TraceWindow>,
        report: Option<&FioReport>,
    ) -> anyhow::Result<Judged> {
        let windows: Vec<Option<TraceWindow>> = self
            .devices
            .iter()
            .map(|d| if d.below { None } else { window_of(&d.name) })
            .collect();
        let spans: Vec<_> = windows
            .iter()
            .map(|w| w.as_ref().map(|w| (w.start_ns, w.end_ns)))
            .collect();
        let Analysed {
            metrics: figures,
            devices,
        } = analyse(&recorded.base, &self.devices, &recorded.summary, &spans)?;
        let lost = figures
            .iter()
            .find(|(k, _)| k == metrics::TRACE_EVENTS_LOST.name)
            .map_or(0.0, |(_, v)| *v);
        let mut checks = Vec::new();
        let traced = self.devices.iter().zip(&devices).zip(&windows);
        for ((device, completed), window) in traced {
            let (Some(c), Some(report), false) = (completed, report, device.below) else {
                continue;
            };
            let trace = TraceBytes {
                completed_mb: c.mb,
                in_window: c.in_window_mb.zip(window.map(|w| w.uncertainty_pct)),
            };
            checks.push(trace_vs_fio(
                report,
                &device.name,
                trace,
                (lost, Some(self.buffer_kb)),
            ));
        }
        Ok(Judged {
            metrics: figures,
            checks,
        })
    }
}

/// How a recording of `devices` is analysed: each device's bytes counted over its own
/// `windows` entry, and "All Devices" over the targets only when devices below them are in
/// it (the run's figures of several targets come from it).
fn options(devices: &[Traced], windows: &[Option<(u64, u64)>]) -> analyze::Options {
    let device_windows = devices
        .iter()
        .zip(windows)
        .filter_map(|(d, w)| Some((d.dev.clone(), (*w)?)))
        .collect();
    let all_devices = devices.iter().any(|d| d.below).then(|| {
        let targets = devices.iter().filter(|d| !d.below);
        targets.map(|d| d.dev.clone()).collect()
    });
    analyze::Options {
        timeline: false,
        device_windows,
        all_devices,
        ..Default::default()
    }
}

/// Analyses the recording `base` of `devices` into the run's `trace_*` metrics, and the MB
/// of the bios each completed, within its `windows` entry (`[start, end)` ns on the trace's
/// clock) too when it has one. A run here and a controlled host's run alike.
pub(crate) fn analyse(
    base: &Path,
    devices: &[Traced],
    summary: &Summary,
    windows: &[Option<(u64, u64)>],
) -> anyhow::Result<Analysed> {
    let report = analyze::analyze_paths(
        std::slice::from_ref(&base.to_path_buf()),
        options(devices, windows),
    )
    .map_err(|e| anyhow::anyhow!("analysing {}: {e}", base.display()))?;
    let completed = devices
        .iter()
        .map(|t| {
            let d = report.devices.iter().find(|d| d.dev == t.dev)?;
            Some(Completed {
                mb: d.bio_bytes_completed as f64 / 1e6,
                in_window_mb: d.bio_bytes_in_window.map(|b| b as f64 / 1e6),
            })
        })
        .collect();
    Ok(Analysed {
        metrics: metrics(&report, devices, summary),
        devices: completed,
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

/// What the plan says of the traces an experiment keeps (`[trace] keep`, `keep_max`).
pub(crate) fn keeping(settings: &crate::experiment::file::TraceSettings) -> String {
    use crate::experiment::file::KeepRuns;
    let which = match settings.runs {
        KeepRuns::All => "every trace is kept, compressed",
        KeepRuns::First => "the first run's trace of each cell is kept, compressed",
        KeepRuns::None => return "; no trace is kept ([trace] keep = \"none\")".to_string(),
    };
    match settings.max_bytes {
        Some(bytes) => format!(
            "; {which}, until the kept ones would pass {:.1} MB ([trace] keep_max)",
            bytes as f64 / 1e6
        ),
        None => format!("; {which}"),
    }
}

/// What `show` says when traced runs were analysed but their traces not kept: `analysed`
/// runs carry `trace_*` metrics, `kept` of them name their trace files. `on_hosts`: the runs
/// were traced on controlled hosts, whose agents keep no trace files, whatever `[trace]` says.
pub(crate) fn kept_note(analysed: u64, kept: u64, on_hosts: bool) -> Option<String> {
    let why = if on_hosts {
        "by the hosts that ran them, which keep no trace files"
    } else {
        "and not kept ([trace] keep / keep_max)"
    };
    (kept < analysed).then(|| {
        format!(
            "traces: {kept} of {analysed} traced runs keep their trace files; the other {} \
             were analysed (trace_* metrics) {why}",
            analysed - kept
        )
    })
}

/// The headline figures of a trace of `devices`, under the stable names of
/// docs/architecture.md. Latencies are btt's per-bio view, but for Q2C, which is per bio
/// as issued (a split bio once, whole: the latency the workload saw, and the same however a
/// kernel cuts bios, where btt's counts each part). With one target they are its
/// own; with several, the run's are over all of them (`Figures::together`) and each
/// target's own follow as `DEVICE:trace_*`. A device below a target gives only its own
/// `DEVICE:trace_*`. A device with no events in the trace gives no figures: with none, only
/// the event counts are left.
pub(crate) fn metrics(
    report: &Report,
    devices: &[Traced],
    summary: &Summary,
) -> Vec<(String, f64)> {
    let mut out = vec![
        (metrics::TRACE_EVENTS.name.to_string(), report.events as f64),
        (
            metrics::TRACE_EVENTS_LOST.name.to_string(),
            summary.lost() as f64,
        ),
    ];
    let found: Vec<(&Traced, &DeviceReport)> = devices
        .iter()
        .filter_map(|t| Some((t, report.devices.iter().find(|d| d.dev == t.dev)?)))
        .collect();
    let own = |(t, d): &(&Traced, &DeviceReport)| {
        let figures = Figures::of(d).metrics().into_iter();
        figures
            .map(|(k, v)| (format!("{}:{k}", t.name), v))
            .collect::<Vec<_>>()
    };
    let (below, targets): (Vec<_>, Vec<_>) = found.into_iter().partition(|(t, _)| t.below);
    match targets.as_slice() {
        [] => {}
        [(_, d)] if devices.iter().filter(|t| !t.below).count() == 1 => {
            out.extend(Figures::of(d).metrics())
        }
        several => {
            let reports: Vec<&DeviceReport> = several.iter().map(|(_, d)| *d).collect();
            out.extend(Figures::together(report, &reports).metrics());
            out.extend(several.iter().flat_map(own));
        }
    }
    out.extend(below.iter().flat_map(own));
    out.retain(|(_, v)| v.is_finite());
    out
}

/// What the `trace_*` figures are made of: one device's section of the analysis, or several
/// devices' together.
struct Figures<'a> {
    latency: &'a BTreeMap<String, LatencySummary>,
    /// Q2C per bio as the program issued it: a bio the block layer split counts once,
    /// whole, where `latency` (btt's view) counts each part; without splits, the same.
    q2c: Option<&'a LatencySummary>,
    i2d_pct: f64,
    completed_bytes: u64,
    /// Bios queued (btt's Q), requests dispatched, and the sectors these carried.
    queued: u64,
    dispatched: u64,
    dispatched_sectors: u64,
    /// Dispatches seen, and the mean number in the device at each.
    depth_n: u64,
    depth_mean: f64,
    sleeps: u64,
}

impl<'a> Figures<'a> {
    fn of(d: &'a DeviceReport) -> Figures<'a> {
        Figures {
            latency: &d.latency,
            q2c: d.q2c_as_issued.as_ref().or(d.latency.get("q2c")),
            i2d_pct: d.overhead.i2d,
            completed_bytes: d.bio_bytes_completed,
            queued: d.merge.q,
            dispatched: d.merge.d,
            dispatched_sectors: d.merge.total,
            depth_n: d.dispatch_depth.n,
            depth_mean: d.dispatch_depth.avg,
            sleeps: d.sleeps,
        }
    }

    /// Several devices as one: latencies over all their bios (the analysis' "All Devices",
    /// whose percentiles come from the merged histograms), I2D's share of their summed
    /// Q2C, counts and bytes summed, the merge ratio and request size over the sums, and the
    /// dispatch depth averaged over all dispatches.
    fn together(report: &'a Report, ds: &[&DeviceReport]) -> Figures<'a> {
        let all = &report.all;
        let sum = |f: fn(&DeviceReport) -> u64| ds.iter().map(|d| f(d)).sum::<u64>();
        let total = |name: &str| all.get(name).map_or(0.0, |l| l.total);
        let depth_n = sum(|d| d.dispatch_depth.n);
        let depth_sum: f64 = ds
            .iter()
            .map(|d| d.dispatch_depth.avg * d.dispatch_depth.n as f64)
            .sum();
        Figures {
            latency: all,
            q2c: report.all_q2c_as_issued.as_ref().or(all.get("q2c")),
            i2d_pct: 100.0 * total("i2d") / total("q2c"),
            completed_bytes: sum(|d| d.bio_bytes_completed),
            queued: sum(|d| d.merge.q),
            dispatched: sum(|d| d.merge.d),
            dispatched_sectors: sum(|d| d.merge.total),
            depth_n,
            depth_mean: depth_sum / depth_n as f64,
            sleeps: sum(|d| d.sleeps),
        }
    }

    fn metrics(&self) -> Vec<(String, f64)> {
        let mut out = Vec::new();
        let us = |s: f64| s * 1e6;
        out.push((
            metrics::TRACE_COMPLETED_MB.name.into(),
            self.completed_bytes as f64 / 1e6,
        ));
        if let Some(q2c) = self.q2c {
            out.push((metrics::TRACE_Q2C_COUNT.name.into(), q2c.n as f64));
        }
        // A latency of no samples is no figure (not 0 us): left out.
        let measured = |name: &str| self.latency.get(name).filter(|l| l.n > 0);
        if let Some(q2c) = self.q2c.filter(|l| l.n > 0) {
            out.push((metrics::TRACE_Q2C_MEAN_US.name.into(), us(q2c.avg)));
            out.push((metrics::TRACE_Q2C_P50_US.name.into(), us(q2c.p50)));
            out.push((metrics::TRACE_Q2C_P99_US.name.into(), us(q2c.p99)));
            out.push((metrics::TRACE_Q2C_MAX_US.name.into(), us(q2c.max)));
        }
        // Summed over each part, as the I2D it is a share of.
        if measured("q2c").is_some() {
            out.push((metrics::TRACE_I2D_PCT.name.into(), self.i2d_pct));
        }
        if let Some(d2c) = measured("d2c") {
            out.push((metrics::TRACE_D2C_MEAN_US.name.into(), us(d2c.avg)));
            out.push((metrics::TRACE_D2C_P99_US.name.into(), us(d2c.p99)));
        }
        if self.dispatched > 0 {
            out.push((
                metrics::TRACE_MERGE_RATIO.name.into(),
                self.queued as f64 / self.dispatched as f64,
            ));
            // In KiB: half the sectors, of the whole sectors per request btt reports.
            out.push((
                metrics::TRACE_REQUEST_KB_MEAN.name.into(),
                (self.dispatched_sectors / self.dispatched) as f64 / 2.0,
            ));
        }
        if self.depth_n > 0 {
            out.push((
                metrics::TRACE_DISPATCH_DEPTH_MEAN.name.into(),
                self.depth_mean,
            ));
        }
        out.push((metrics::TRACE_SLEEPS.name.into(), self.sleeps as f64));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn fixture_report() -> Report {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/trace/fx");
        analyze::analyze_paths(&[base], analyze::Options::default()).unwrap()
    }

    /// The fixture's device.
    fn loop0() -> [Traced; 1] {
        [Traced::new("loop0", "7:0")]
    }

    /// Ten 4 KiB reads a millisecond apart on each device, each inserted `i2d` ns before its
    /// dispatch and completed `d2c` ns after it.
    fn two_devices(timing: &[(u32, u64, u64)]) -> Report {
        devices_covering(timing, &[])
    }

    /// The `trace_*` figures of devices with this `timing`, recorded as `traced`.
    fn figures_of(timing: &[(u32, u64, u64)], traced: &[Traced]) -> BTreeMap<String, f64> {
        let report = devices_covering(timing, traced);
        metrics(&report, traced, &summary(0, 0, 0))
            .into_iter()
            .collect()
    }

    /// [`two_devices`] with any number of devices, analysed as a recording of `traced` is.
    fn devices_covering(timing: &[(u32, u64, u64)], traced: &[Traced]) -> Report {
        use crate::trace::blk_io_trace::{action, category, code, Event};
        let mut a = analyze::Analyzer::new(options(traced, &[]));
        for i in 0..10u64 {
            for &(device, i2d, d2c) in timing {
                let (t, sector) = (i * 1_000_000, i * 8);
                let at = |time: u64, c: u8| Event {
                    version: 7,
                    time,
                    sector,
                    bytes: 4096,
                    action: action(c, category::READ),
                    pid: 1,
                    device,
                    ..Event::default()
                };
                a.feed(&at(t, code::QUEUE));
                a.feed(&at(t + 1_000, code::GETRQ));
                a.feed(&at(t + 2_000, code::INSERT));
                a.feed(&at(t + 2_000 + i2d, code::ISSUE));
                a.feed(&at(t + 2_000 + i2d + d2c, code::COMPLETE));
            }
        }
        a.finish()
    }

    /// Several devices: the run's figures are over all their bios, each device's own are
    /// prefixed with its name, and a device that saw nothing adds nothing.
    #[test]
    fn several_devices_give_figures_over_all_and_each_its_own() {
        let (sdb, sdc) = (8 << 20 | 16, 8 << 20 | 32);
        let report = two_devices(&[(sdb, 1_000, 97_000), (sdc, 5_000, 293_000)]);
        let traced = [
            Traced::new("sdb", "8:16"),
            Traced::new("sdc", "8:32"),
            Traced::new("sdd", "8:48"),
        ];
        let m: BTreeMap<String, f64> = metrics(&report, &traced, &summary(0, 0, 0))
            .into_iter()
            .collect();
        let close = |name: &str, want: f64| {
            let got = m[name];
            assert!(
                (got - want).abs() < 1e-9 * want.abs().max(1.0),
                "{name}: {got} vs {want}"
            );
        };
        // Q2C: 100 us on sdb, 300 us on sdc.
        close("sdb:trace_q2c_mean_us", 100.0);
        close("sdc:trace_q2c_mean_us", 300.0);
        close("trace_q2c_mean_us", 200.0);
        close("trace_q2c_max_us", 300.0);
        assert!(m["trace_q2c_p50_us"] < m["trace_q2c_p99_us"], "{m:?}");
        close("trace_q2c_count", 20.0);
        close("sdb:trace_q2c_count", 10.0);
        close("trace_completed_mb", 20.0 * 4096.0 / 1e6);
        close("sdc:trace_completed_mb", 10.0 * 4096.0 / 1e6);
        // I2D: 1 of 100 us and 5 of 300 us; over both, 60 of 4000 us.
        close("sdb:trace_i2d_pct", 1.0);
        close("sdc:trace_i2d_pct", 100.0 * 5.0 / 300.0);
        close("trace_i2d_pct", 100.0 * 60.0 / 4000.0);
        close("trace_merge_ratio", 1.0);
        close("trace_request_kb_mean", 4.0);
        close("trace_sleeps", 0.0);
        assert!(m.keys().all(|k| !k.starts_with("sdd:")), "{m:?}");
        let prefixed = |p: &str| m.keys().filter(|k| k.starts_with(p)).count();
        assert_eq!(prefixed("sdb:"), prefixed("sdc:"));
        assert_eq!(
            prefixed("sdb:"),
            metrics::TRACE.len() - 2,
            "all but the event counts"
        );
        // One device named, and only it in the trace: its own figures, under plain names.
        let one = metrics(&report, &traced[..1], &summary(0, 0, 0));
        assert!(one.iter().all(|(k, _)| !k.contains(':')), "{one:?}");
        assert!(one.contains(&("trace_q2c_count".to_string(), 10.0)));
    }

    /// Bios the block layer split count once, whole, in the Q2C figures (what the workload
    /// saw), on one device and over several; btt's per-part view stays in the I2D share.
    #[test]
    fn a_split_bio_counts_once_whole_in_the_q2c_figures() {
        use crate::trace::blk_io_trace::{action, category, code, Event};
        let (sdb, sdc) = (8 << 20 | 16, 8 << 20 | 32);
        let traced = [Traced::new("sdb", "8:16"), Traced::new("sdc", "8:32")];
        let mut a = analyze::Analyzer::new(options(&traced, &[]));
        let at = |time: u64, c: u8, device: u32, sector: u64, sectors: u32| Event {
            version: 7,
            time,
            sector,
            bytes: sectors * 512,
            action: action(c, category::WRITE),
            pid: 1,
            device,
            ..Event::default()
        };
        for i in 0..10u64 {
            // On sdb a 1 MiB write cut in two halves, done 100 and 300 us after its Q.
            let (t, s) = (i * 1_000_000, i * 4096);
            a.feed(&at(t, code::QUEUE, sdb, s, 2048));
            a.feed(&at(t + 10, code::SPLIT, sdb, s, 1024));
            for (part, done) in [(0, 100_000), (1, 300_000)] {
                let ps = s + part * 1024;
                a.feed(&at(t + 20 + part, code::GETRQ, sdb, ps, 1024));
                a.feed(&at(t + 30 + part, code::INSERT, sdb, ps, 1024));
                a.feed(&at(t + 40 + part, code::ISSUE, sdb, ps, 1024));
                a.feed(&at(t + done, code::COMPLETE, sdb, ps, 1024));
            }
            // On sdc a 4 KiB write, done in 500 us.
            a.feed(&at(t, code::QUEUE, sdc, s, 8));
            a.feed(&at(t + 20, code::GETRQ, sdc, s, 8));
            a.feed(&at(t + 30, code::INSERT, sdc, s, 8));
            a.feed(&at(t + 40, code::ISSUE, sdc, s, 8));
            a.feed(&at(t + 500_000, code::COMPLETE, sdc, s, 8));
        }
        let report = a.finish();
        let close = |m: &BTreeMap<String, f64>, name: &str, want: f64| {
            let got = m[name];
            assert!((got - want).abs() < 1e-6 * want, "{name}: {got} vs {want}");
        };
        let one: BTreeMap<String, f64> = metrics(&report, &traced[..1], &summary(0, 0, 0))
            .into_iter()
            .collect();
        // Ten bios of 300 us, where btt counts twenty parts of 200 us on average.
        close(&one, "trace_q2c_count", 10.0);
        close(&one, "trace_q2c_mean_us", 300.0);
        close(&one, "trace_q2c_max_us", 300.0);
        assert_eq!(report.devices[0].latency["q2c"].n, 20);
        // I2D (10 ns per part) over the parts' summed Q2C (400 us per bio).
        close(&one, "trace_i2d_pct", 100.0 * 20.0 / 400_000.0);
        let both: BTreeMap<String, f64> = metrics(&report, &traced, &summary(0, 0, 0))
            .into_iter()
            .collect();
        close(&both, "trace_q2c_count", 20.0);
        close(&both, "trace_q2c_mean_us", 400.0);
        close(&both, "sdb:trace_q2c_mean_us", 300.0);
        close(&both, "sdc:trace_q2c_mean_us", 500.0);
        assert_eq!(report.all["q2c"].n, 30);
    }

    /// A target with devices below it (a dm device over two disks): the run's figures are
    /// the target's own, under plain names, and each device below adds its own as
    /// `DEVICE:trace_*`; the recording is named after the target.
    #[test]
    fn devices_below_a_target_add_only_their_own_figures() {
        let (dm, sdb, sdc) = (253 << 20, 8 << 20 | 16, 8 << 20 | 32);
        let timing = [
            (dm, 1_000, 297_000),
            (sdb, 1_000, 97_000),
            (sdc, 5_000, 93_000),
        ];
        let traced = [
            Traced::new("dm-0", "253:0"),
            Traced::below("sdb", "8,16"),
            Traced::below("sdc", "8,32"),
        ];
        assert_eq!(base_name(&traced), "dm-0");
        assert_eq!(base_name(&[traced[1].clone(), traced[0].clone()]), "dm-0");
        // With no target: one local device's own name, else `devices`.
        assert_eq!(base_name(&traced[1..2]), "sdb");
        assert_eq!(base_name(&traced[1..]), "devices");
        let m = figures_of(&timing, &traced);
        let close = |name: &str, want: f64| {
            let got = m[name];
            assert!((got - want).abs() < 1e-9 * want, "{name}: {got} vs {want}");
        };
        // Q2C: 300 us on the dm device, 100 us on each disk.
        close("trace_q2c_mean_us", 300.0);
        close("trace_q2c_max_us", 300.0);
        close("trace_q2c_count", 10.0);
        close("trace_completed_mb", 10.0 * 4096.0 / 1e6);
        close("trace_i2d_pct", 100.0 * 1.0 / 300.0);
        close("sdb:trace_q2c_mean_us", 100.0);
        close("sdc:trace_q2c_mean_us", 100.0);
        close("sdc:trace_i2d_pct", 5.0);
        close("sdc:trace_q2c_count", 10.0);
        assert!(m.keys().all(|k| !k.starts_with("dm-0:")), "{m:?}");
        let prefixed = |p: &str| m.keys().filter(|k| k.starts_with(p)).count();
        assert_eq!(prefixed("sdb:"), metrics::TRACE.len() - 2);
        assert_eq!(prefixed("sdc:"), prefixed("sdb:"));

        // Two targets over one disk each: the run's figures are over both targets' bios,
        // none of the disks'.
        let dm1 = 253 << 20 | 1;
        let timing = [
            (dm, 1_000, 297_000),
            (dm1, 1_000, 497_000),
            (sdb, 1_000, 97_000),
            (sdc, 1_000, 97_000),
        ];
        let traced = [
            Traced::new("dm-0", "253:0"),
            Traced::new("dm-1", "253:1"),
            Traced::below("sdb", "8,16"),
            Traced::below("sdc", "8,32"),
        ];
        let m = figures_of(&timing, &traced);
        assert_eq!(m["trace_q2c_count"], 20.0, "{m:?}");
        assert!((m["trace_q2c_mean_us"] - 400.0).abs() < 1e-6, "{m:?}");
        assert!((m["dm-1:trace_q2c_mean_us"] - 500.0).abs() < 1e-6, "{m:?}");
        assert!((m["sdc:trace_q2c_mean_us"] - 100.0).abs() < 1e-6, "{m:?}");
        // Without devices below, every device is in "All Devices".
        assert_eq!(options(&traced[..2], &[]).all_devices, None);
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
            devices: vec!["loop0".into()],
            files: Vec::new(),
            earlier_removed: Vec::new(),
            earlier_left: Vec::new(),
            events_per_cpu: BTreeMap::new(),
            events_per_device: BTreeMap::new(),
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
        let m: BTreeMap<String, f64> = metrics(&report, &loop0(), &summary(1, 2, 3))
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
        let m: BTreeMap<String, f64> = metrics(&report, &loop0(), &summary(0, 0, 0))
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
        let sda = [Traced::new("sda", "8:0")];
        let m = metrics(&fixture_report(), &sda, &summary(0, 0, 0));
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
    fn the_plan_says_which_traces_are_kept() {
        use crate::experiment::file::{KeepRuns, TraceSettings};
        let said = |runs, max_bytes| {
            keeping(&TraceSettings {
                runs,
                max_bytes,
                buffer_kb: None,
            })
        };
        assert_eq!(
            said(KeepRuns::All, None),
            "; every trace is kept, compressed"
        );
        assert_eq!(
            said(KeepRuns::First, Some(500_000_000)),
            "; the first run's trace of each cell is kept, compressed, until the kept ones \
             would pass 500.0 MB ([trace] keep_max)"
        );
        assert!(said(KeepRuns::None, Some(1)).contains("no trace is kept"));
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
        assert_eq!(kept_note(4, 4, false), None);
        assert_eq!(kept_note(0, 0, false), None);
        let note = kept_note(6, 2, false).unwrap();
        assert!(
            note.starts_with("traces: 2 of 6 traced runs keep"),
            "{note}"
        );
        assert!(note.contains("the other 4 were analysed"), "{note}");
        assert!(note.ends_with("([trace] keep / keep_max)"), "{note}");
        // Controlled hosts keep none, whatever [trace] says: it is not the reason.
        let note = kept_note(2, 0, true).unwrap();
        assert!(
            note.ends_with("by the hosts that ran them, which keep no trace files"),
            "{note}"
        );
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

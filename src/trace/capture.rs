//! Recording block events through tracefs, where relay-based blktrace is locked out (kernel
//! lockdown, Secure Boot): the `blk` tracer puts its records in tracefs' per-CPU ring
//! buffers, read here a page at a time (`ring_buffer`). This module sets that up, writes the
//! records by CPU into
//! `NAME.blktrace.N` files (blkparse and btt insist that a file's records carry its CPU),
//! adds the process-name notify records the blk tracer never emits (from /proc/PID/comm while
//! recording), and puts every tracefs setting back — on success, on error, on Ctrl-C and
//! SIGTERM (a knobs `Journal` on disk, whose Drop restores in reverse order), and after a
//! SIGKILL through `iolab restore`; so is a tracefs mount it made (`tracefs_mount`).

use crate::knobs::Journal;
use crate::sys::lock::Resource;
use crate::sys::SysRoot;
use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::blk_io_trace::{self, action, category, notify, Endian, Event, Payload};
use super::ring_buffer::{self, PageLayout};
use super::terminal::Terminal;
use super::tracefs_mount::{Mounted, TRACEFS};

const O_NONBLOCK: i32 = 0o4000;

/// What to record.
#[derive(Debug, Clone)]
pub struct Config {
    /// The devices whose events are recorded, together in one set of files (the analysis
    /// takes them apart by device number).
    pub devices: Vec<String>,
    pub output: PathBuf,
    pub duration: Option<Duration>,
    pub buffer_kb: u64,
    pub command: Vec<String>,
    /// Keep a status line on stderr (elapsed time, events, events lost), redrawn each second:
    /// for a person at a terminal waiting on a recording with no command of its own.
    pub status_line: bool,
    /// The command's standard output goes to standard error (`trace record --json`, whose
    /// standard output is the JSON alone).
    pub command_stdout_to_stderr: bool,
    /// The state directory: the tracefs settings are journaled in its `tracer/`, where
    /// `iolab restore` finds them after a SIGKILL.
    pub state_dir: PathBuf,
}

/// What was recorded.
#[derive(Debug, Clone)]
pub struct Summary {
    pub(crate) devices: Vec<String>,
    pub(crate) files: Vec<PathBuf>,
    /// Files of an earlier recording of the same name that this one removed, and the ones it
    /// could not (with why): `trace analyze NAME` would read those with this recording.
    pub(crate) earlier_removed: Vec<PathBuf>,
    pub(crate) earlier_left: Vec<String>,
    pub(crate) events_per_cpu: BTreeMap<u32, u64>,
    /// The block events of each recorded device (process-name records left out), every
    /// device listed.
    pub(crate) events_per_device: BTreeMap<String, u64>,
    pub(crate) processes: usize,
    pub(crate) overrun: u64,
    pub(crate) dropped: u64,
    /// Events the ring buffer's pages said were lost before them (the same events as
    /// `overrun`, counted where they were missed).
    pub(crate) missed: u64,
    /// Entries in the ring buffer that were not the recorded devices' blk tracer records
    /// (events someone else enabled in tracefs), left out.
    pub(crate) foreign: u64,
    pub(crate) elapsed: Duration,
    pub(crate) stopped_by: String,
    pub(crate) command_status: Option<ExitStatus>,
}

/// How a recording that the command's end stopped says so.
const COMMAND_EXITED: &str = "command exited";

impl Summary {
    /// The command's status when it ended on its own and failed (one iolab ended, at the
    /// duration or a signal, was meant to end).
    pub(crate) fn command_failed(&self) -> Option<ExitStatus> {
        self.command_status
            .filter(|st| !st.success() && self.stopped_by == COMMAND_EXITED)
    }

    pub fn events(&self) -> u64 {
        self.events_per_cpu.values().sum()
    }

    /// Events the kernel lost: overwritten (counted by tracefs, or by the pages that follow
    /// them, whichever saw more) or dropped.
    pub fn lost(&self) -> u64 {
        self.overrun.max(self.missed) + self.dropped
    }
}

/// `trace record --json`: the summary for scripts, each figure named (the text's warnings
/// are its figures: `events_lost`, `foreign`, `empty`).
#[derive(Debug, serde::Serialize)]
pub(crate) struct Recorded<'a> {
    /// The devices recorded, comma-separated (one: its name); `devices` lists them.
    device: String,
    devices: &'a [String],
    files: &'a [PathBuf],
    /// Files of an earlier recording of the same name, removed so no analysis mixes them in.
    earlier_removed: &'a [PathBuf],
    /// Such files iolab could not remove (why, each): they would be read with this recording.
    earlier_left: &'a [String],
    events: u64,
    events_per_cpu: &'a BTreeMap<u32, u64>,
    events_per_device: &'a BTreeMap<String, u64>,
    /// Overwritten or dropped by the kernel (`Summary::lost`); the parts follow.
    events_lost: u64,
    overrun: u64,
    dropped: u64,
    missed: u64,
    /// Other tracefs entries left out.
    foreign: u64,
    processes_named: usize,
    seconds: f64,
    stopped_by: &'a str,
    /// The command's exit code, or the signal that ended it; both null without a command.
    command_exit_code: Option<i32>,
    command_signal: Option<i32>,
    /// Nothing was recorded (see the text's warning for the likely reasons).
    empty: bool,
}

impl<'a> Recorded<'a> {
    pub(crate) fn of(s: &'a Summary) -> Recorded<'a> {
        use std::os::unix::process::ExitStatusExt;
        Recorded {
            device: s.devices.join(","),
            devices: &s.devices,
            files: &s.files,
            earlier_removed: &s.earlier_removed,
            earlier_left: &s.earlier_left,
            events: s.events(),
            events_per_cpu: &s.events_per_cpu,
            events_per_device: &s.events_per_device,
            events_lost: s.lost(),
            overrun: s.overrun,
            dropped: s.dropped,
            missed: s.missed,
            foreign: s.foreign,
            processes_named: s.processes,
            seconds: s.elapsed.as_secs_f64(),
            stopped_by: &s.stopped_by,
            command_exit_code: s.command_status.and_then(|st| st.code()),
            command_signal: s.command_status.and_then(|st| st.signal()),
            empty: s.events() == 0,
        }
    }
}

/// Names from the machine, files or the database are escaped for the terminal
/// (`report::format::terminal_safe`).
pub(crate) fn render(s: &Summary) -> String {
    crate::report::format::terminal_safe_lines(&render_unescaped(s)).into_owned()
}

fn render_unescaped(s: &Summary) -> String {
    let mut o = format!(
        "recorded {} events of {} in {:.1}s ({}) into {} file(s); {} process name(s) kept in the trace\n",
        s.events(),
        listed(&s.devices),
        s.elapsed.as_secs_f64(),
        s.stopped_by,
        s.files.len(),
        s.processes
    );
    if s.devices.len() > 1 {
        let each: Vec<String> = s
            .events_per_device
            .iter()
            .map(|(d, n)| format!("{d} {n}"))
            .collect();
        o.push_str(&format!("block events by device: {}\n", each.join(", ")));
    }
    if !s.earlier_removed.is_empty() {
        let names: Vec<String> = s
            .earlier_removed
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        o.push_str(&format!(
            "removed {} file(s) of an earlier recording of this name, which an analysis would \
             have read with this one: {}\n",
            names.len(),
            names.join(", ")
        ));
    }
    for why in &s.earlier_left {
        o.push_str(&format!(
            "WARNING: {why}: an analysis of this recording by its name would read it too; \
             remove it, or analyse the files listed above\n"
        ));
    }
    if s.lost() > 0 {
        o.push_str(&format!(
            "WARNING: the kernel lost {} events: {} overrun, {} dropped, {} missed before the pages read (raise --buffer-kb)\n",
            s.lost(), s.overrun, s.dropped, s.missed
        ));
    } else {
        o.push_str("no events lost (tracefs overrun 0, dropped 0)\n");
    }
    if s.foreign > 0 {
        o.push_str(&format!(
            "note: {} entries of other tracefs events (trace_marker lines, events someone enabled) were left out\n",
            s.foreign
        ));
    }
    if s.events() == 0 {
        o.push_str(&format!(
            "WARNING: nothing was recorded: no I/O reached {} while recording (a command that \
             did I/O elsewhere, or only through the page cache without writeback yet?), the \
             wrong device (a partition or a device below a dm/md device gets its own events), \
             or another tracer took tracefs over\n",
            listed(&s.devices)
        ));
    } else {
        let silent: Vec<String> = s
            .events_per_device
            .iter()
            .filter(|(_, n)| **n == 0)
            .map(|(d, _)| d.clone())
            .collect();
        if !silent.is_empty() {
            o.push_str(&format!(
                "WARNING: nothing was recorded of {}: no I/O reached it while recording, or \
                 its I/O went to a partition or a device below it (each has its own events)\n",
                listed(&silent)
            ));
        }
    }
    if let Some(st) = s.command_status {
        o.push_str(&format!("command exited with {st}\n"));
    }
    o
}

/// "loop0", "loop0 and loop1", "sdb, sdc and sdd".
pub(crate) fn listed(devices: &[String]) -> String {
    match devices {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The dev_t of block device `name` of this machine as the kernel writes it in trace records
/// (major << 20 | minor), from /sys/class/block/NAME/dev.
pub(crate) fn device_number(name: &str) -> anyhow::Result<u32> {
    let dev = read_trim(&Path::new("/sys/class/block").join(name).join("dev"))?;
    dev.split_once(':')
        .and_then(|(ma, mi)| Some(ma.parse::<u32>().ok()? << 20 | mi.parse::<u32>().ok()?))
        .with_context(|| format!("{name}: a device number {dev:?}"))
}

fn read_trim(path: &Path) -> anyhow::Result<String> {
    Ok(fs::read_to_string(path)
        .with_context(|| format!("reading {}", path.display()))?
        .trim()
        .to_string())
}

/// Sums "overrun:" and "dropped events:" over per_cpu/cpu*/stats.
pub(crate) fn lost_events(tracefs: &Path) -> (u64, u64) {
    let mut overrun = 0;
    let mut dropped = 0;
    if let Ok(dir) = fs::read_dir(tracefs.join("per_cpu")) {
        for e in dir.flatten() {
            if let Ok(text) = fs::read_to_string(e.path().join("stats")) {
                let (o, d) = parse_stats(&text);
                overrun += o;
                dropped += d;
            }
        }
    }
    (overrun, dropped)
}

/// Parses one per-CPU stats file.
pub(crate) fn parse_stats(text: &str) -> (u64, u64) {
    let mut o = 0;
    let mut d = 0;
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':') {
            let v = v.trim().parse().unwrap_or(0);
            match k.trim() {
                "overrun" => o = v,
                "dropped events" => d = v,
                _ => {}
            }
        }
    }
    (o, d)
}

/// Per-CPU output files, created on demand.
struct Writers {
    base: PathBuf,
    files: BTreeMap<u32, BufWriter<File>>,
    sequence: HashMap<u32, u32>,
    counts: BTreeMap<u32, u64>,
    last_time: HashMap<u32, u64>,
    buf: Vec<u8>,
}

impl Writers {
    fn path(&self, cpu: u32) -> PathBuf {
        PathBuf::from(format!("{}.blktrace.{cpu}", self.base.display()))
    }

    fn write(&mut self, ev: &mut Event) -> anyhow::Result<()> {
        if !self.files.contains_key(&ev.cpu) {
            let p = self.path(ev.cpu);
            let f = create_output(&p)?;
            self.files
                .insert(ev.cpu, BufWriter::with_capacity(1 << 20, f));
        }
        // Number records per CPU as relay blktrace does, so blkparse's checks are happy.
        let seq = self.sequence.entry(ev.cpu).or_insert(0);
        *seq += 1;
        ev.sequence = *seq;
        self.buf.clear();
        blk_io_trace::encode(ev, 7, Endian::native(), &mut self.buf);
        if let Some(w) = self.files.get_mut(&ev.cpu) {
            w.write_all(&self.buf)?;
        }
        *self.counts.entry(ev.cpu).or_insert(0) += 1;
        Ok(())
    }

    /// Flushes, and creates empty files for CPUs that saw nothing below the highest one:
    /// blkparse stops reading at the first missing CPU file.
    fn finish(mut self) -> anyhow::Result<Written> {
        for w in self.files.values_mut() {
            w.flush()?;
        }
        let max = self.files.keys().next_back().copied().unwrap_or(0);
        let mut files = Vec::new();
        for cpu in 0..=max {
            let p = self.path(cpu);
            if !self.files.contains_key(&cpu) {
                create_output(&p)?;
            }
            files.push(p);
        }
        let (earlier_removed, earlier_left) = remove_earlier_files(&self.base, max, true);
        Ok(Written {
            files,
            counts: self.counts,
            earlier_removed,
            earlier_left,
        })
    }
}

/// What a recording wrote, and what it found of an earlier recording of the same name.
struct Written {
    files: Vec<PathBuf>,
    counts: BTreeMap<u32, u64>,
    earlier_removed: Vec<PathBuf>,
    /// Files of the name iolab could not remove, with why.
    earlier_left: Vec<String>,
}

/// Removes the files of an earlier recording under `base` that this one did not replace: the
/// CPUs above `max` (a recording on more CPUs, or of a CPU now idle), and with `every_gz`
/// every compressed `.gz` copy (below `max` the plain files written are read first). Left
/// there, `trace analyze NAME` would read them with this recording's files, as one trace of
/// two recordings.
pub(crate) fn remove_earlier_files(
    base: &Path,
    max: u32,
    every_gz: bool,
) -> (Vec<PathBuf>, Vec<String>) {
    let earlier: Vec<PathBuf> = super::stream::cpu_files_of(base)
        .into_iter()
        .filter(|&(_, cpu, gz)| (every_gz && gz) || cpu > max)
        .map(|(path, _, _)| path)
        .collect();
    let mut removed = Vec::new();
    let mut left = Vec::new();
    for path in earlier {
        match crate::sys::own_dir::remove_named_file(&path) {
            Ok(true) => removed.push(path),
            Ok(false) => {}
            Err(why) => left.push(why),
        }
    }
    (removed, left)
}

impl Splitter {
    /// Writes a message record into `cpu`'s file at `time`.
    fn note(&mut self, cpu: u32, time: u64, device: u32, text: String) -> anyhow::Result<()> {
        let mut ev = Event {
            version: 7,
            time,
            action: action(notify::MESSAGE, category::NOTIFY),
            device,
            cpu,
            payload: Payload::Message(text.into()),
            ..Event::default()
        };
        self.writers.write(&mut ev)
    }
}

fn name_note(ev: &Event, time: u64, comm: &str) -> Event {
    Event {
        version: 7,
        time,
        action: action(notify::PROCESS, category::NOTIFY),
        pid: ev.pid,
        device: ev.device,
        cpu: ev.cpu,
        payload: Payload::ProcessName(comm.into()),
        ..Event::default()
    }
}

/// "PID COMM" lines of tracefs' saved_cmdlines (the kernel's pid -> comm cache for traced
/// tasks, filled by the blk tracer too).
pub(crate) fn parse_saved_cmdlines(text: &str) -> HashMap<u32, String> {
    text.lines()
        .filter_map(|l| {
            let (pid, comm) = l.trim().split_once(' ')?;
            Some((pid.parse().ok()?, comm.trim().to_string()))
        })
        .collect()
}

impl Splitter {
    /// Names the processes that exited before /proc or saved_cmdlines could be read while
    /// recording, from saved_cmdlines as it is now; the note goes at the end of the CPU's file
    /// (with that file's last time, keeping the file in time order), so blkparse names only
    /// their later events. Returns how many processes have names.
    fn name_late(&mut self) -> anyhow::Result<usize> {
        let saved = self.saved_cmdlines();
        let mut late: Vec<(u32, u32, u32)> = self
            .named
            .iter()
            .filter_map(|(&pid, at)| at.map(|(cpu, dev)| (pid, cpu, dev)))
            .collect();
        late.sort_unstable();
        for (pid, cpu, device) in late {
            if let Some(comm) = saved.get(&pid) {
                let time = self.writers.last_time.get(&cpu).copied().unwrap_or(0);
                let ev = Event {
                    pid,
                    cpu,
                    device,
                    ..Event::default()
                };
                let mut note = name_note(&ev, time, comm);
                self.writers.write(&mut note)?;
                self.named.insert(pid, None);
            }
        }
        Ok(self.named.values().filter(|v| v.is_none()).count())
    }

    fn saved_cmdlines(&self) -> HashMap<u32, String> {
        fs::read_to_string(&self.saved_cmdlines)
            .map(|t| parse_saved_cmdlines(&t))
            .unwrap_or_default()
    }
}

/// Turns the recorded events into per-CPU files, naming processes as they appear.
struct Splitter {
    /// Events the ring buffer's pages say were lost before them.
    missed: u64,
    /// Entries in the buffer that are not the recorded devices' blk tracer records.
    foreign: u64,
    /// Block events by device (dev_t).
    by_device: HashMap<u32, u64>,
    /// Pids seen, and whether a name was written for them; unnamed ones remember where
    /// (CPU, device) to put a late name from tracefs' saved_cmdlines.
    named: HashMap<u32, Option<(u32, u32)>>,
    /// tracefs' saved_cmdlines, read as it is each time: a name read earlier may be of
    /// another process by now, which had the pid before.
    saved_cmdlines: PathBuf,
    writers: Writers,
}

impl Splitter {
    /// Writes NAME.blktrace.CPU files under the base name `base`, with process names from
    /// `/proc` and from the `saved_cmdlines` of `tracefs`.
    fn new(base: PathBuf, tracefs: &Path) -> Self {
        Splitter {
            missed: 0,
            foreign: 0,
            by_device: HashMap::new(),
            named: HashMap::new(),
            saved_cmdlines: tracefs.join("saved_cmdlines"),
            writers: Writers {
                base,
                files: BTreeMap::new(),
                sequence: HashMap::new(),
                counts: BTreeMap::new(),
                last_time: HashMap::new(),
                buf: Vec::new(),
            },
        }
    }

    fn take(&mut self, mut ev: Event) -> anyhow::Result<()> {
        if ev.pid != 0 && !self.named.contains_key(&ev.pid) {
            // A process already gone (a short-lived one) is looked up in the kernel's cache
            // of traced tasks' names: blkparse names a process's events only after its note,
            // so the note must come before its first event.
            let comm = fs::read_to_string(format!("/proc/{}/comm", ev.pid))
                .ok()
                .or_else(|| self.saved_cmdlines().remove(&ev.pid));
            match comm {
                Some(comm) => {
                    self.named.insert(ev.pid, None);
                    let mut note = name_note(&ev, ev.time, comm.trim());
                    self.writers.write(&mut note)?;
                }
                // Not even there: named at the end, if the cache has it by then.
                None => {
                    self.named.insert(ev.pid, Some((ev.cpu, ev.device)));
                }
            }
        }
        self.writers.last_time.insert(ev.cpu, ev.time);
        *self.by_device.entry(ev.device).or_insert(0) += 1;
        self.writers.write(&mut ev)
    }
}

/// Creates (or empties) an output file as a file the user named
/// ([`crate::sys::own_dir::create_named_file`]): the default names (`trace.blktrace.N` where
/// iolab was started) are predictable, and root recording in /tmp would otherwise empty and
/// fill whatever file another user's link there names.
fn create_output(p: &Path) -> anyhow::Result<File> {
    crate::sys::own_dir::create_named_file(p).map_err(anyhow::Error::msg)
}

/// The output files' directory exists and takes files: said before tracefs is touched, not
/// when the first event is written (or at the end, when there was none).
fn output_dir_ready(output: &Path) -> anyhow::Result<()> {
    // `-o DIR` would write hidden files, DIR/.blktrace.N.
    if output.is_dir()
        || output.as_os_str().as_encoded_bytes().ends_with(b"/")
        || output.file_name().is_none()
    {
        bail!(
            "{}: -o names the recording, whose files are NAME.blktrace.N, not a directory \
             (e.g. -o {}/trace)",
            output.display(),
            output.display().to_string().trim_end_matches('/')
        );
    }
    let dir = match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        bail!(
            "{}: no such directory for the output files ({}.blktrace.N)",
            dir.display(),
            output.display()
        );
    }
    if !crate::sys::writable(dir) {
        bail!(
            "{}: cannot write the output files there (read-only, or not permitted)",
            dir.display()
        );
    }
    Ok(())
}

/// The device's kernel name and its tracefs directory in sysfs. A link to the device
/// (/dev/disk/by-id/..., /dev/mapper/NAME, /dev/block/MAJ:MIN) names it too.
fn device_dir(device: &str) -> anyhow::Result<(String, PathBuf)> {
    let name = crate::target::device_name(device);
    if name.is_empty() || name.contains('/') || name.contains("..") {
        bail!("{device}: not a block device name (try e.g. loop0 or /dev/loop0)");
    }
    let dir = PathBuf::from("/sys/class/block").join(&name).join("trace");
    if !dir.parent().is_some_and(Path::exists) {
        let mut here: Vec<String> = std::fs::read_dir("/sys/class/block")
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        here.sort();
        bail!(
            "{device}: no such block device (this machine has {})",
            crate::report::format::some_names(&here)
        );
    }
    if !dir.join("enable").exists() {
        bail!(
            "{device}: no {} (not a block device, or the kernel lacks CONFIG_BLK_DEV_IO_TRACE)",
            dir.join("enable").display()
        );
    }
    Ok((name, dir))
}

/// The kernel keeps one block trace per disk, which its partitions share (enabling a second
/// one is a no-op, and the events all carry the first one's device and range): two devices
/// of one disk cannot be recorded apart.
fn refuse_shared_disks(traced: &[(String, PathBuf)]) -> anyhow::Result<()> {
    let disks: Vec<String> = traced
        .iter()
        .map(|(name, _)| disk_of(name))
        .collect::<anyhow::Result<_>>()?;
    for (i, disk) in disks.iter().enumerate() {
        let Some(j) = disks[..i].iter().position(|d| d == disk) else {
            continue;
        };
        let (a, b) = (&traced[j].0, &traced[i].0);
        let pair = if a == disk || b == disk {
            let part = if a == disk { b } else { a };
            format!("{part} is a partition of {disk}")
        } else {
            format!("{a} and {b} are partitions of one disk, {disk}")
        };
        bail!(
            "{pair}, and the kernel keeps one block trace per disk: they cannot be recorded \
             apart. Record {disk} alone (its trace holds the I/O of all its partitions, at the \
             disk's sectors), or one partition"
        );
    }
    Ok(())
}

/// The disk block device `name` is on: itself, or a partition's parent in sysfs.
pub(crate) fn disk_of(name: &str) -> anyhow::Result<String> {
    let dir = Path::new("/sys/class/block").join(name);
    if !dir.join("partition").exists() {
        return Ok(name.to_string());
    }
    let real = fs::canonicalize(&dir).with_context(|| format!("resolving {}", dir.display()))?;
    real.parent()
        .and_then(|p| p.file_name())
        .map(|d| d.to_string_lossy().into_owned())
        .with_context(|| format!("{name}: no disk above it in {}", real.display()))
}

/// Records until the duration elapses, the command exits, or a stopping signal arrives
/// (`signals::STOPPING`: a closed terminal or ssh session too must not leave the tracer on).
pub(crate) fn record(cfg: &Config) -> anyhow::Result<Summary> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut sig_ids = Vec::new();
    for sig in crate::knobs::signals::STOPPING {
        sig_ids.push(signal_hook::flag::register(sig, Arc::clone(&stop))?);
    }
    let result = record_until(cfg, &stop, None);
    for id in sig_ids {
        signal_hook::low_level::unregister(id);
    }
    result
}

/// A recording running in the background (for experiments that trace each run). Dropping it
/// stops it too, so a caller's early return or panic does not leave the tracer running.
pub struct Recording {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<anyhow::Result<Summary>>>,
}

/// Starts recording in a background thread and returns once the device's events are being
/// captured. Signals are left to the caller, who must call [`Recording::stop`]; tracefs is
/// restored when the recording stops (also if its thread fails).
pub fn start(cfg: Config) -> anyhow::Result<Recording> {
    // A command is `trace record`'s alone: ending what it started goes by the processes
    // below iolab, which in an experiment are fio's and the runner's.
    anyhow::ensure!(
        cfg.command.is_empty(),
        "a recording in the background runs no command"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
    let flag = Arc::clone(&stop);
    let thread = std::thread::Builder::new()
        .name("trace-record".into())
        .spawn(move || record_until(&cfg, &flag, Some(ready_tx)))?;
    match ready_rx.recv() {
        Ok(()) => Ok(Recording {
            stop,
            thread: Some(thread),
        }),
        Err(_) => match thread.join() {
            Ok(Err(e)) => Err(e),
            Ok(Ok(_)) => bail!("the recording ended before it started"),
            Err(_) => bail!("the recording thread panicked"),
        },
    }
}

impl Recording {
    /// Stops, drains the ring buffer, restores tracefs and says what was recorded.
    pub fn stop(mut self) -> anyhow::Result<Summary> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> anyhow::Result<Summary> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => bail!("the recording thread panicked"),
            None => bail!("the recording was already stopped"),
        }
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if self.thread.is_some() {
            if let Err(e) = self.stop_and_join() {
                say!("iolab: warning: stopping a trace recording: {e:#}");
            }
        }
    }
}

fn record_until(
    cfg: &Config,
    stop: &AtomicBool,
    ready: Option<std::sync::mpsc::SyncSender<()>>,
) -> anyhow::Result<Summary> {
    if !crate::sys::is_root() {
        bail!("trace record needs root (it writes tracefs settings)");
    }
    if cfg.devices.is_empty() {
        bail!("no device to record");
    }
    let mut traced: Vec<(String, PathBuf)> = Vec::new();
    for device in &cfg.devices {
        if device.trim().is_empty() {
            return Err(crate::cli::usage("-d names no device (an empty name)"));
        }
        let (name, dir) = device_dir(device)?;
        if traced.iter().any(|(n, _)| *n == name) {
            return Err(crate::cli::usage(format!("{device}: named twice")));
        }
        traced.push((name, dir));
    }
    refuse_shared_disks(&traced)?;
    output_dir_ready(&cfg.output)?;
    let tracefs = PathBuf::from(TRACEFS);
    // Declared before the journal, so the journal (dropped first) has put the settings back
    // before tracefs is unmounted.
    let mounted;
    // The tracefs settings are journaled on disk like knobs, and the journal holds the
    // machine-wide tracer lock (the blk tracer is global: one recorder at a time) until they
    // are back. It begins before the lock is taken: it refuses to begin over a journal a
    // killed recorder left here, before the lock file's record of that recorder is replaced.
    let dir = cfg.state_dir.join(crate::knobs::TRACER_DIR);
    let mut journal = Journal::begin_in(&dir)?;
    journal.hold(crate::knobs::machine_locks(
        &SysRoot::live(),
        &dir,
        [Resource::Tracer],
    )?);
    mounted = Mounted::ensure(&dir)?;
    let current = read_trim(&tracefs.join("current_tracer"))?;
    if current != "nop" && current != "blk" {
        bail!("tracefs is in use by the `{current}` tracer; refusing to take it over");
    }

    // A trace someone else started on a disk's queue would take this recording's place
    // silently: enabling it again is a no-op, and its events go to that tool, not here.
    for (name, dir) in &traced {
        if read_trim(&dir.join("enable"))? == "1" {
            bail!(
                "{name}: a block trace is already running on its disk (blktrace, or another \
                 tool using the kernel's block tracer); iolab does not take it over: stop it \
                 first (left behind by a tool that is gone, it ends with `echo 0 > {}`)",
                dir.join("enable").display()
            );
        }
    }

    let result = record_with(cfg, &traced, &tracefs, &mut journal, stop, ready);
    let restored = journal.restore();
    drop(journal);
    drop(mounted);
    let summary = result?;
    restored.context("recorded, but could not restore tracefs")?;
    Ok(summary)
}

/// Records the devices `traced` (name, its `trace` directory in sysfs).
fn record_with(
    cfg: &Config,
    traced: &[(String, PathBuf)],
    tracefs: &Path,
    journal: &mut Journal,
    stop: &AtomicBool,
    ready: Option<std::sync::mpsc::SyncSender<()>>,
) -> anyhow::Result<Summary> {
    let p = |f: &str| tracefs.join(f);
    let mut set = |path: PathBuf, value: &str| {
        journal
            .set(&path.display().to_string(), value)
            .map(drop)
            .context("setting up tracefs")
    };
    set(p("buffer_size_kb"), &cfg.buffer_kb.to_string())?;
    set(p("trace_clock"), "mono")?;
    set(p("current_tracer"), "blk")?;
    set(p("tracing_on"), "1")?;
    // Empty whatever an earlier session left in the ring buffer.
    fs::write(p("trace"), "").context("clearing the trace buffer")?;
    let (over0, drop0) = lost_events(tracefs);

    let names: Vec<String> = traced.iter().map(|(n, _)| n.clone()).collect();
    let mut buffers = CpuBuffers::open(tracefs, &names)?;
    let mut splitter = Splitter::new(cfg.output.clone(), tracefs);
    for (_, trace_dir) in traced {
        set(trace_dir.join("enable"), "1")?;
    }
    if let Some(tx) = ready {
        let _ = tx.send(());
    }
    let start = Instant::now();
    let mut child = start_command(cfg)?;
    let mut status = None;
    let stopped_by;
    let mut shown = start;
    loop {
        let n = buffers.drain(&mut splitter)?;
        if cfg.status_line && shown.elapsed() >= Duration::from_secs(1) {
            shown = Instant::now();
            let (over, dropped) = lost_events(tracefs);
            let lost = over.saturating_sub(over0) + dropped.saturating_sub(drop0);
            let events = splitter.writers.counts.values().sum();
            say_part!(
                "\r\x1b[K{}",
                status_text(&names, start.elapsed(), events, lost)
            );
        }
        if stop.load(Ordering::Relaxed) {
            stopped_by = "stopped (signal or caller)".to_string();
            break;
        }
        if let Some(d) = cfg.duration {
            if start.elapsed() >= d {
                // Said as the limit it is: beside the time the recording took, a bare
                // "after 0.2s" read as a second, unexplained time.
                stopped_by = format!("--duration {}s reached", d.as_secs_f64());
                break;
            }
        }
        if let Some(c) = child.as_mut() {
            if let Some(st) = c.try_wait()? {
                status = Some(st);
                stopped_by = COMMAND_EXITED.to_string();
                break;
            }
        }
        if n == 0 {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    // The recording ends here, before a command still running is ended: what it does in
    // the seconds it may take to stop is not part of a recording of `--duration`.
    for (name, trace_dir) in traced {
        fs::write(trace_dir.join("enable"), "0")
            .with_context(|| format!("disabling {name}'s trace"))?;
    }
    let elapsed = start.elapsed();
    if cfg.status_line {
        say_part!("\r\x1b[K");
    }
    if let (Some(mut c), None) = (child, status) {
        status = c.end();
    }
    // What is left in the ring buffer: nothing more comes in once the devices' traces are off.
    while buffers.drain(&mut splitter)? > 0 {}
    let (over1, drop1) = lost_events(tracefs);
    let (overrun, dropped) = (over1.saturating_sub(over0), drop1.saturating_sub(drop0));
    let lost = overrun.max(splitter.missed) + dropped;
    if lost > splitter.missed {
        // The kernel's counters saw losses no page reported (dropped events, say): the
        // whole, after the last record.
        let last = splitter.writers.last_time.iter().max_by_key(|(_, t)| **t);
        let (cpu, time) = last.map_or((0, 0), |(c, t)| (*c, *t));
        let text = blk_io_trace::lost_in_all_message(lost);
        splitter.note(cpu, time, buffers.devices[0], text)?;
    }
    let processes = splitter.name_late()?;
    let written = splitter.writers.finish()?;
    let events_per_device = names
        .iter()
        .zip(&buffers.devices)
        .map(|(name, dev)| {
            let n = splitter.by_device.get(dev).copied().unwrap_or(0);
            (name.clone(), n)
        })
        .collect();
    Ok(Summary {
        devices: names,
        files: written.files,
        earlier_removed: written.earlier_removed,
        earlier_left: written.earlier_left,
        events_per_cpu: written.counts,
        events_per_device,
        processes,
        overrun,
        dropped,
        missed: splitter.missed,
        foreign: splitter.foreign,
        elapsed,
        stopped_by,
        command_status: status,
    })
}

/// Starts the command to record while it runs, if one was given (its output on standard
/// error with `--json`, whose standard output is the JSON alone).
fn start_command(cfg: &Config) -> anyhow::Result<Option<Workload>> {
    let Some((prog, args)) = cfg.command.split_first() else {
        return Ok(None);
    };
    let stdout = if cfg.command_stdout_to_stderr {
        use std::os::fd::AsFd;
        let err = io::stderr().as_fd().try_clone_to_owned()?;
        std::process::Stdio::from(err)
    } else {
        std::process::Stdio::inherit()
    };
    use std::os::unix::process::CommandExt;
    // What leaves the command's group (a shell's jobs, setsid, a daemon) comes to iolab, not
    // init, when its parent ends: still found, and ended with the command.
    let reaper = match crate::sys::reaper::Reaper::adopt() {
        Ok(r) => Some(r),
        Err(e) => {
            say!(
                "iolab: warning: processes the command starts outside its process group may \
                 outlive the recording (PR_SET_CHILD_SUBREAPER: {e})"
            );
            None
        }
    };
    let child = Command::new(prog)
        .args(args)
        .stdout(stdout)
        // A group of its own, so ending it reaches what it started too (the fio of a
        // `sh -c` wrapper would otherwise go on doing I/O, unrecorded, after iolab ended);
        // Ctrl-C reaches iolab alone, which ends the group.
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {prog}"))?;
    let terminal = i32::try_from(child.id()).ok().and_then(Terminal::of);
    Ok(Some(Workload {
        child: Some(child),
        terminal,
        reaper,
    }))
}

/// The recorded command, the leader of its own process group. Ended with its group when the
/// recording stops first (signal, duration) or fails.
struct Workload {
    child: Option<Child>,
    /// The terminal iolab held when the command started, which the command is given if it
    /// stops on it (see `terminal`), and which comes back when it ends.
    terminal: Option<Terminal>,
    /// iolab as the subreaper of what the command starts (`sys::reaper`).
    reaper: Option<crate::sys::reaper::Reaper>,
}

impl Workload {
    fn try_wait(&mut self) -> io::Result<Option<std::process::ExitStatus>> {
        if let Some(t) = self.terminal.as_mut() {
            t.tend();
        }
        match self.child.as_mut() {
            Some(c) => {
                let st = c.try_wait()?;
                if st.is_some() {
                    self.child = None;
                    self.terminal = None;
                }
                Ok(st)
            }
            None => Ok(None),
        }
    }

    /// SIGTERM to the command's group (fio then ends its jobs and reports), up to two seconds
    /// for all of it to finish, then SIGKILL to what is left; then the same to whatever else
    /// the command started and left running, in its group or out of it, which is named.
    fn end(&mut self) -> Option<std::process::ExitStatus> {
        let status = self.end_group();
        self.terminal = None;
        if let Some(reaper) = self.reaper.take() {
            let e = reaper.end_all(Duration::from_secs(2));
            let named = |list: &[crate::sys::reaper::Descendant]| {
                let each: Vec<String> = list
                    .iter()
                    .map(|d| format!("{} ({})", d.pid, d.comm))
                    .collect();
                crate::report::format::terminal_safe_lines(&each.join(", ")).into_owned()
            };
            if !e.ended.is_empty() {
                say!(
                    "iolab: ended {} process(es) the command started and left running: {}",
                    e.ended.len(),
                    named(&e.ended)
                );
            }
            if !e.left.is_empty() {
                say!(
                    "iolab: warning: {} process(es) the command started did not end, even \
                     on SIGKILL (in uninterruptible sleep, on a device that hangs?): {}",
                    e.left.len(),
                    named(&e.left)
                );
            }
        }
        status
    }

    fn end_group(&mut self) -> Option<std::process::ExitStatus> {
        let mut c = self.child.take()?;
        let group = i32::try_from(c.id()).ok()?;
        // SAFETY: kill(2) of the group our child leads. The child is not yet waited for, and
        // a pid is not reused while a group of that id has members, so the id is its own.
        let signal = |sig| unsafe { libc::kill(-group, sig) };
        signal(libc::SIGTERM);
        // A stopped process (on the terminal, or by the user) takes SIGTERM only once it runs.
        signal(libc::SIGCONT);
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut status = None;
        while Instant::now() < deadline {
            if status.is_none() {
                status = c.try_wait().ok().flatten();
            }
            if status.is_some() && signal(0) != 0 {
                return status;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        signal(libc::SIGKILL);
        status.or_else(|| c.wait().ok())
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.end();
    }
}

/// "recording loop0: 12 s, 1234567 events, 0 lost so far".
fn status_text(devices: &[String], elapsed: Duration, events: u64, lost: u64) -> String {
    crate::report::format::terminal_safe_lines(&format!(
        "recording {}: {} s, {events} events, {lost} lost so far (Ctrl-C stops)",
        listed(devices),
        elapsed.as_secs()
    ))
    .into_owned()
}

/// The ring buffer of each CPU, read a page at a time (see `ring_buffer`).
struct CpuBuffers {
    layout: PageLayout,
    /// The traced devices' dev_t as the kernel writes it (major << 20 | minor).
    devices: Vec<u32>,
    /// Each CPU's buffer, with its CPU.
    files: Vec<(PathBuf, u32, File)>,
    page: Vec<u8>,
    scratch: Vec<u8>,
}

impl CpuBuffers {
    fn open(tracefs: &Path, names: &[String]) -> anyhow::Result<CpuBuffers> {
        let layout = PageLayout::read(tracefs)?;
        let devices = names
            .iter()
            .map(|n| device_number(n))
            .collect::<anyhow::Result<Vec<u32>>>()?;
        let mut files = Vec::new();
        let dir = tracefs.join("per_cpu");
        for e in fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let cpu_dir = e?.path();
            let Some(cpu) = cpu_dir
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("cpu"))
                .and_then(|n| n.parse().ok())
            else {
                continue;
            };
            let path = cpu_dir.join("trace_pipe_raw");
            match OpenOptions::new()
                .read(true)
                .custom_flags(O_NONBLOCK)
                .open(&path)
            {
                Ok(f) => files.push((path, cpu, f)),
                // A CPU that is offline has no buffer to read (and writes nothing).
                Err(e) if e.raw_os_error() == Some(libc::ENODEV) => {}
                Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
            }
        }
        if files.is_empty() {
            bail!("no per-CPU ring buffer to read in {}", dir.display());
        }
        Ok(CpuBuffers {
            page: vec![0; layout.page_size],
            layout,
            devices,
            files,
            scratch: Vec::new(),
        })
    }

    /// Reads the pages available now from every CPU, up to `PAGES_AT_ONCE` of each (a busy
    /// device fills them as fast as they are read, and the caller must get to check whether
    /// to stop); returns the number of bytes read.
    fn drain(&mut self, splitter: &mut Splitter) -> anyhow::Result<usize> {
        const PAGES_AT_ONCE: usize = 256;
        let mut total = 0;
        for (path, cpu, file) in &mut self.files {
            for _ in 0..PAGES_AT_ONCE {
                let n = match file.read(&mut self.page) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
                };
                total += n;
                let mut failed = Ok(());
                let (devices, scratch) = (&self.devices, &mut self.scratch);
                let page = &self.page[..n];
                let missed = ring_buffer::events(&self.layout, page, |t, d| {
                    match ring_buffer::blk_event(t, d, devices, scratch) {
                        Some(ev) if failed.is_ok() => failed = splitter.take(ev),
                        Some(_) => {}
                        None => splitter.foreign += 1,
                    }
                })
                .with_context(|| format!("reading {}", path.display()))?;
                failed?;
                if missed > 0 {
                    // Where the loss was: the page's first entry follows it.
                    let time = u64::from_ne_bytes(page[..8].try_into().unwrap_or_default());
                    let text = blk_io_trace::lost_here_message(missed);
                    splitter.note(*cpu, time, devices[0], text)?;
                }
                splitter.missed += missed;
            }
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link planted at an output's predictable name is not written through.
    #[test]
    fn an_output_file_is_never_written_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep\n").unwrap();
        let planted = dir.path().join("trace.blktrace.0");
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let e = create_output(&planted).unwrap_err().to_string();
        assert!(e.contains("is a symbolic link"), "{e}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
        // A plain file is emptied and written, as before.
        let plain = dir.path().join("trace.blktrace.1");
        std::fs::write(&plain, "old").unwrap();
        create_output(&plain).unwrap();
        assert_eq!(std::fs::read(&plain).unwrap(), b"");
    }

    /// A link to a block device (as udev makes in /dev/disk/by-id) names the device. Only
    /// sysfs is read.
    #[test]
    fn a_link_to_a_block_device_names_it() {
        let traced = std::fs::read_dir("/sys/class/block")
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| {
                Path::new("/dev").join(n).exists()
                    && Path::new("/sys/class/block")
                        .join(n)
                        .join("trace/enable")
                        .exists()
            })
            .expect("a block device with a block trace in /dev and /sys/class/block");
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("by-id-link");
        std::os::unix::fs::symlink(Path::new("/dev").join(&traced), &link).unwrap();
        let (name, sys) = device_dir(link.to_str().unwrap()).unwrap();
        assert_eq!(name, traced);
        assert_eq!(
            sys,
            Path::new("/sys/class/block").join(&traced).join("trace")
        );
        let e = device_dir("/dev/../etc/passwd").unwrap_err().to_string();
        assert!(e.contains("not a block device name"), "{e}");
    }

    #[test]
    fn the_status_line_says_how_long_how_many_and_how_many_lost() {
        assert_eq!(
            status_text(
                &["loop0".into()],
                Duration::from_millis(12_700),
                1_234_567,
                0
            ),
            "recording loop0: 12 s, 1234567 events, 0 lost so far (Ctrl-C stops)"
        );
        let three = ["sdb", "sdc", "sdd"].map(String::from);
        assert_eq!(
            status_text(&three, Duration::from_secs(2), 5, 1),
            "recording sdb, sdc and sdd: 2 s, 5 events, 1 lost so far (Ctrl-C stops)"
        );
    }

    /// Several devices: the events of each are said, and a device that saw none is named
    /// in a warning (a trace of nothing at all has its own).
    #[test]
    fn a_device_that_recorded_nothing_among_several_is_named() {
        let summary = |counts: &[(&str, u64)]| Summary {
            devices: counts.iter().map(|(d, _)| d.to_string()).collect(),
            files: Vec::new(),
            earlier_removed: Vec::new(),
            earlier_left: Vec::new(),
            events_per_cpu: BTreeMap::from([(0, counts.iter().map(|(_, n)| n).sum())]),
            events_per_device: counts.iter().map(|(d, n)| (d.to_string(), *n)).collect(),
            processes: 1,
            overrun: 0,
            dropped: 0,
            missed: 0,
            foreign: 0,
            elapsed: Duration::from_secs(3),
            stopped_by: COMMAND_EXITED.into(),
            command_status: None,
        };
        let text = render_unescaped(&summary(&[("sdb", 120), ("sdc", 0), ("sdd", 7)]));
        assert!(
            text.starts_with("recorded 127 events of sdb, sdc and sdd in 3.0s"),
            "{text}"
        );
        // What was counted: names the trace holds for its processes, not processes acted on.
        assert!(
            text.contains("; 1 process name(s) kept in the trace\n"),
            "{text}"
        );
        assert!(
            text.contains("block events by device: sdb 120, sdc 0, sdd 7\n"),
            "{text}"
        );
        assert!(
            text.contains("WARNING: nothing was recorded of sdc: no I/O"),
            "{text}"
        );
        let none = render_unescaped(&summary(&[("sdb", 0), ("sdc", 0)]));
        assert_eq!(
            none.matches("WARNING: nothing was recorded").count(),
            1,
            "{none}"
        );
        assert!(
            none.contains("nothing was recorded: no I/O reached sdb and sdc"),
            "{none}"
        );
        let one = render_unescaped(&summary(&[("sdb", 5)]));
        assert!(!one.contains("by device"), "{one}");
    }

    /// A process gone before its first event is read (dd, done in milliseconds) is named
    /// from tracefs' saved_cmdlines before that event, where blkparse needs the name; one
    /// that is nowhere yet is named at the end, once the cache has it.
    #[test]
    fn a_process_already_gone_is_named_before_its_first_event() {
        use crate::trace::blk_io_trace::{code, decode, Payload};
        let dir = tempfile::tempdir().unwrap();
        let tracefs = dir.path().join("tracefs");
        std::fs::create_dir(&tracefs).unwrap();
        // Pids above the kernel's largest pid_max (2^22): in no /proc.
        let (gone, later) = (4_194_400, 4_194_401);
        std::fs::write(tracefs.join("saved_cmdlines"), format!("{gone} dd\n")).unwrap();
        let mut splitter = Splitter::new(dir.path().join("t"), &tracefs);
        for (time, pid) in [(5, gone), (6, gone), (7, later)] {
            splitter
                .take(Event {
                    version: 7,
                    time,
                    sector: 8,
                    bytes: 4096,
                    action: action(code::QUEUE, category::WRITE),
                    pid,
                    device: 7 << 20,
                    ..Event::default()
                })
                .unwrap();
        }
        std::fs::write(
            tracefs.join("saved_cmdlines"),
            format!("{gone} dd\n{later} sync\n"),
        )
        .unwrap();
        assert_eq!(splitter.name_late().unwrap(), 2);
        splitter.writers.finish().unwrap();
        let bytes = std::fs::read(dir.path().join("t.blktrace.0")).unwrap();
        let mut records = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let (ev, n) = decode(&bytes[at..]).unwrap();
            at += n;
            records.push(match ev.payload {
                Payload::ProcessName(name) => format!("{} name {}", ev.pid, name),
                _ => format!("{} event {}", ev.pid, ev.time),
            });
        }
        assert_eq!(
            records,
            [
                format!("{gone} name dd"),
                format!("{gone} event 5"),
                format!("{gone} event 6"),
                format!("{later} event 7"),
                format!("{later} name sync"),
            ]
        );
    }

    #[test]
    fn parses_tracefs_files() {
        let stats = "entries: 0\noverrun: 12\ncommit overrun: 0\nbytes: 0\ndropped events: 3\nread events: 9\n";
        assert_eq!(parse_stats(stats), (12, 3));
        let saved = parse_saved_cmdlines("6707 fio\n22 ksoftirqd/1\nbad\n");
        assert_eq!(saved.get(&22).map(String::as_str), Some("ksoftirqd/1"));
        assert_eq!(saved.len(), 2);
    }
}

//! `iolab snapshot`: a machine in a directory. Users capture production boxes and analyse
//! them elsewhere with `--root DIR`, so a snapshot holds exactly the files the model reads —
//! found by reading the model once through a recording `SysRoot`, not by a hand-kept list
//! that would drift — at their real paths, with sysfs symlinks kept relative. Then, after the
//! interval, a second reading of the counters goes to `DIR/later/proc/`, and
//! `DIR/snapshot.json` says when, where and how far apart.
//!
//! Nothing secret: no process environments or command lines. The one per-process file,
//! mountinfo, is rewritten to the block-backed mounts and the fields that tie a mount to a
//! device; mount options (which can carry credentials) are dropped.

mod mirror;

use crate::model::{elevators, Machine, LATER_DIR, SNAPSHOT_META};
use crate::sys::parse::mountinfo::{escape, mountinfo};
use crate::sys::{SysRoot, MODES_FILE};
use anyhow::{bail, Context};
use mirror::Mirror;
use serde::Serialize;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The counters read twice.
pub(crate) const COUNTER_FILES: [&str; 3] = ["/proc/interrupts", "/proc/stat", "/proc/diskstats"];

/// What `snapshot.json` holds.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotMeta {
    pub(crate) format: String,
    pub(crate) iolab_version: String,
    pub hostname: Option<String>,
    pub(crate) kernel: Option<String>,
    /// UTC, RFC 3339, when the first reading of the counters was taken.
    pub(crate) captured_at: String,
    /// The same in milliseconds (a copy of a snapshot that did not say has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) captured_at_unix_ms: Option<u128>,
    /// Measured time between the two readings of the counters; 0 with one reading.
    pub interval_ns: u64,
    /// The time asked for between them (a copy keeps its source's, if it said).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) requested_interval_ns: Option<u64>,
    /// The regular files the snapshot holds besides this description, and their bytes (as
    /// on disk: a file read twice is one file, of its last content).
    pub(crate) files: usize,
    pub(crate) bytes: u64,
    /// Files the model touched that could not be read (left out).
    pub(crate) unreadable: Vec<String>,
}

/// What `iolab snapshot` reports: where the snapshot went and what its `snapshot.json` says.
#[derive(Debug, Serialize)]
pub(crate) struct Captured {
    pub(crate) directory: std::path::PathBuf,
    #[serde(flatten)]
    pub(crate) meta: SnapshotMeta,
}

impl crate::output::Render for Captured {
    fn text(&self) -> String {
        let m = &self.meta;
        format!(
            "snapshot of {} (Linux {}) in {}: {} files, {} bytes, readings {:.3} s apart\n",
            m.hostname.as_deref().unwrap_or("?"),
            m.kernel.as_deref().unwrap_or("?"),
            self.directory.display(),
            m.files,
            m.bytes,
            m.interval_ns as f64 / 1e9
        )
    }
}

/// How many regular files are under `dir` (links not followed), and their bytes.
fn regular_files(dir: &Path) -> std::io::Result<(usize, u64)> {
    let (mut files, mut bytes) = (0, 0);
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            let (f, b) = regular_files(&entry.path())?;
            files += f;
            bytes += b;
        } else if kind.is_file() {
            files += 1;
            bytes += entry.metadata()?.len();
        }
    }
    Ok((files, bytes))
}

/// `iolab snapshot`: captures `source` into `out` and warns on stderr of each file that could
/// not be read (left out).
pub(crate) fn take(source: &SysRoot, out: &Path, interval: Duration) -> anyhow::Result<Captured> {
    let meta = capture(source, out, interval)?;
    for f in &meta.unreadable {
        say!(
            "iolab: warning: {}: could not be read; left out of the snapshot",
            crate::report::format::terminal_safe(f)
        );
    }
    Ok(Captured {
        directory: out.to_path_buf(),
        meta,
    })
}

/// A reader whose files belong in snapshots too (e.g. preflight's governor and C-state
/// checks): it is run once against a recording root and everything it reads is copied.
pub(crate) type ExtraReader<'a> = &'a dyn Fn(&SysRoot) -> anyhow::Result<()>;

/// Captures `source` (usually the live machine) into `out`, which must not exist or be
/// empty. Returns what was written to `snapshot.json`.
pub(crate) fn capture(
    source: &SysRoot,
    out: &Path,
    interval: Duration,
) -> anyhow::Result<SnapshotMeta> {
    capture_with(
        source,
        out,
        interval,
        &[&plan_reads, &crate::preflight::snapshot_reads],
    )
}

/// What `run --dry-run --root` reads beside the model: memory, to check what fio's `lockmem`
/// would pin (`experiment::job_memory`).
fn plan_reads(root: &SysRoot) -> anyhow::Result<()> {
    root.read_optional("/proc/meminfo")?;
    Ok(())
}

/// Like `capture`, also copying whatever each of `extra` reads, so every feature that
/// accepts `--root` finds its files in the snapshot.
pub fn capture_with(
    source: &SysRoot,
    out: &Path,
    interval: Duration,
    extra: &[ExtraReader],
) -> anyhow::Result<SnapshotMeta> {
    prepare_dir(out)?;
    let out = out
        .canonicalize()
        .with_context(|| format!("{}: cannot resolve", out.display()))?;
    let (recording_root, recording) = source.recording();
    Machine::read(&recording_root).context("reading the machine model to snapshot")?;
    for reader in extra {
        reader(&recording_root).context("reading extra files to snapshot")?;
    }
    let rec = recording
        .lock()
        .map_err(|_| anyhow::anyhow!("recording lock poisoned"))?
        .clone();

    let mut m = Mirror::new(source.base(), &out);
    for abs in &rec.resolved {
        m.walk(abs, true).map_err(io(&out, abs))?;
    }
    for abs in &rec.links {
        m.walk(abs, false).map_err(io(&out, abs))?;
    }
    let mut modes = String::new();
    for abs in rec.files.iter().chain(&rec.modes) {
        // A reader may look at the kernel's command line (preflight, for C-state limits);
        // it can carry secrets, so it is never copied.
        let private = abs.ends_with("/cmdline") || abs.ends_with("/environ");
        if private
            || abs.starts_with("/proc/self/")
            || abs.starts_with(LATER_DIR)
            || abs == SNAPSHOT_META
        {
            continue;
        }
        // The kernel's module index: only its scheduler lines (a megabyte of driver aliases
        // otherwise, which nothing here reads).
        let keep = |bytes: Vec<u8>| match std::str::from_utf8(&bytes)
            .ok()
            .and_then(|text| elevators::scheduler_lines(abs, text))
        {
            Some(kept) => kept.into_bytes(),
            None => bytes,
        };
        if let Some(found) = m.walk(abs, true).map_err(io(&out, abs))? {
            if !found.is_dir {
                m.copy_file(&found.canonical, keep).map_err(io(&out, abs))?;
            }
        }
    }
    // Listings last, so they can tell which of their entries the snapshot already holds.
    for abs in &rec.dirs {
        if let Some(found) = m.walk(abs, true).map_err(io(&out, abs))? {
            if found.is_dir {
                m.copy_listing(&found.canonical).map_err(io(&out, abs))?;
            }
        }
    }
    for abs in &rec.modes {
        if let Ok(mode) = source.mode(abs) {
            modes.push_str(&format!("{mode:04o} {abs}\n"));
        }
    }
    m.write(&format!("/{MODES_FILE}"), modes.as_bytes())
        .map_err(io(&out, MODES_FILE))?;
    if rec.files.contains(crate::model::devices::MOUNTINFO) {
        let abs = crate::model::devices::MOUNTINFO;
        if let Ok(text) = source.read(abs) {
            m.write(abs, sanitized_mountinfo(&text).as_bytes())
                .map_err(io(&out, abs))?;
        }
    }

    // The counters last, right before the clock starts, so the interval is what it says.
    let first = read_counters(source)?;
    let started = Instant::now();
    let captured_at = SystemTime::now();
    for (abs, bytes) in &first {
        m.write(abs, bytes).map_err(io(&out, abs))?;
    }
    // A snapshot of a snapshot keeps its second reading and the time between the two, or
    // stays without one: a second reading of files that do not change would show every rate
    // as a measured 0.
    let (second, interval_ns) = match earlier_second_reading(source)? {
        Some((kept, ns)) => (Some(kept), ns),
        None if !source.is_live() => (None, 0),
        None => {
            std::thread::sleep(interval.saturating_sub(started.elapsed()));
            let second = read_counters(source)?;
            (Some(second), started.elapsed().as_nanos() as u64)
        }
    };
    for (abs, bytes) in second.iter().flatten() {
        let later = format!("{LATER_DIR}{abs}");
        m.write(&later, bytes).map_err(io(&out, &later))?;
    }

    // A copy was taken when its source was.
    let earlier = earlier_times(source);
    let unix = captured_at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let mut meta = SnapshotMeta {
        format: "iolab-snapshot/1".to_string(),
        iolab_version: env!("CARGO_PKG_VERSION").to_string(),
        hostname: source.attr("/proc/sys/kernel/hostname"),
        kernel: source.attr("/proc/sys/kernel/osrelease"),
        captured_at: earlier
            .as_ref()
            .map_or_else(|| rfc3339(unix.as_secs()), |e| e.0.clone()),
        captured_at_unix_ms: earlier.as_ref().map_or(Some(unix.as_millis()), |e| e.1),
        interval_ns,
        requested_interval_ns: if source.is_live() {
            Some(interval.as_nanos() as u64)
        } else {
            earlier.as_ref().and_then(|e| e.2)
        },
        files: 0,
        bytes: 0,
        unreadable: m.unreadable.clone(),
    };
    (meta.files, meta.bytes) = regular_files(&out).map_err(io(&out, "/"))?;
    let json = serde_json::to_string_pretty(&meta)? + "\n";
    m.write(SNAPSHOT_META, json.as_bytes())
        .map_err(io(&out, SNAPSHOT_META))?;

    // The snapshot must read back as a machine, or it is not a snapshot.
    let back = SysRoot::at(&out)?;
    Machine::read(&back).with_context(|| {
        format!(
            "the snapshot in {} does not read back as a machine",
            out.display()
        )
    })?;
    Ok(meta)
}

fn prepare_dir(out: &Path) -> anyhow::Result<()> {
    match std::fs::read_dir(out) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                bail!(
                    "{}: exists and is not empty; choose a new directory for the snapshot",
                    out.display()
                );
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(_) if !out.is_dir() => bail!(
            "{}: exists and is not a directory; a snapshot is a directory tree: name a new \
             directory",
            out.display()
        ),
        Err(e) => bail!("{}: {e}", out.display()),
    }
    // Filled by path as root: an empty directory someone else made must not be taken.
    crate::sys::own_dir::make_own_dir(out.parent().unwrap_or(Path::new("")), out)
        .map_err(anyhow::Error::msg)?;
    // Find out now, naming the destination, rather than on the first copied file (whose
    // source path would be all the message said).
    let probe = out.join(".iolab-write-test");
    std::fs::write(&probe, b"")
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| {
            anyhow::anyhow!(
                "{}: cannot write the snapshot there ({e}); choose a writable directory",
                out.display()
            )
        })?;
    Ok(())
}

/// The counter files as read: (path, contents).
type Reading = Vec<(&'static str, Vec<u8>)>;

/// Whether `source` is a snapshot that holds a second reading of the counters.
pub(crate) fn has_second_reading(source: &SysRoot) -> bool {
    !source.is_live() && source.exists(&format!("{LATER_DIR}/proc/interrupts"))
}

/// When a snapshot root's first reading was taken (`captured_at`, in milliseconds too where
/// it says) and the interval asked for, from its `snapshot.json`; `None` for the live
/// machine or a tree that does not say when.
fn earlier_times(source: &SysRoot) -> Option<(String, Option<u128>, Option<u64>)> {
    if source.is_live() {
        return None;
    }
    let meta: serde_json::Value = serde_json::from_str(&source.read(SNAPSHOT_META).ok()?).ok()?;
    let number = |key: &str| meta.get(key).and_then(serde_json::Value::as_u64);
    Some((
        meta.get("captured_at")?.as_str()?.to_string(),
        number("captured_at_unix_ms").map(u128::from),
        number("requested_interval_ns"),
    ))
}

/// The second reading of a snapshot root and its interval (`snapshot.json`), if it has one.
fn earlier_second_reading(source: &SysRoot) -> anyhow::Result<Option<(Reading, u64)>> {
    if !has_second_reading(source) {
        return Ok(None);
    }
    let interval_ns = crate::model::snapshot_interval_ns(source)?;
    let later = SysRoot::at(source.path(LATER_DIR))?;
    Ok(Some((read_counters(&later)?, interval_ns)))
}

fn read_counters(source: &SysRoot) -> anyhow::Result<Reading> {
    COUNTER_FILES
        .iter()
        .map(|abs| {
            let mut bytes = Vec::new();
            source.read_into(abs, &mut bytes)?;
            Ok((*abs, bytes))
        })
        .collect()
}

/// An I/O error while copying `abs` into the snapshot at `out`, naming both: the failure may
/// be on either side (an unreadable source file, a full or read-only destination).
fn io<'a>(out: &'a Path, abs: &'a str) -> impl Fn(std::io::Error) -> anyhow::Error + 'a {
    move |e| anyhow::anyhow!("{}: copying {abs} into the snapshot: {e}", out.display())
}

/// Keeps the mounts that can sit on a block device (device number with a non-zero major, or
/// a /dev source), with the device-identifying fields only.
pub(crate) fn sanitized_mountinfo(text: &str) -> String {
    let mut out = String::new();
    for m in mountinfo(text).unwrap_or_default() {
        if m.major == 0 && !m.source.starts_with("/dev/") {
            continue;
        }
        out.push_str(&format!(
            "{} {} {}:{} {} {} {} - {} {} -\n",
            m.id,
            m.parent,
            m.major,
            m.minor,
            escape(&m.root),
            escape(&m.mount_point),
            if m.read_only { "ro" } else { "rw" },
            escape(&m.fs_type),
            escape(&m.source),
        ));
    }
    out
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (Howard Hinnant's civil-from-days).
pub(crate) fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_763_776_000), "2025-11-22T01:46:40Z");
    }

    #[test]
    fn mountinfo_keeps_block_mounts_without_options() {
        let text = "27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard\n\
40 27 0:50 / /mnt/share rw - cifs //server/share rw,username=bob,password=hunter2\n\
41 27 0:51 / /data rw - btrfs /dev/sdb1 rw,subvol=/\n";
        let s = sanitized_mountinfo(text);
        assert!(!s.contains("hunter2") && !s.contains("cifs"), "{s}");
        assert!(s.contains("254:0 / / rw - ext4 /dev/vda -"), "{s}");
        assert!(s.contains("/dev/sdb1"), "{s}");
        assert_eq!(mountinfo(&s).unwrap().len(), 2);
    }
}

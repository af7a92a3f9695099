//! The embedded default target: a loop device over a sparse file in /dev/shm, so an experiment
//! with no device named runs somewhere fast and harmless. The device exists exactly as long as
//! its `ScratchDevice` guard: dropping it (normal end, error, panic unwinding, or the run loop
//! stopping on a signal) detaches the loop device and deletes the file. A marker in the state
//! directory records it first, so a scratch device leaked by a SIGKILL is found and removed by
//! `iolab restore`. A loop device keeps its queue settings after it is detached, so both put
//! back the ones it had when attached: the next user of that loop device finds it as it was.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use serde::{Deserialize, Serialize};

use super::TargetError;

/// Default size of the scratch file (sparse: RAM is used only for what is written).
pub(crate) const DEFAULT_SCRATCH_BYTES: u64 = 1 << 30;

/// Where scratch files live: RAM-backed on every systemd machine and most others.
pub(crate) const SCRATCH_FILE_DIR: &str = "/dev/shm";

static COUNTER: AtomicU32 = AtomicU32::new(0);
/// Scratch file names tried before giving up, when files of those names are already there.
const NAME_TRIES: usize = 16;

/// What the state directory remembers about a scratch device.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Marker {
    pid: u32,
    /// When that process started (`sys::process`): a pid reused since is not it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    started: Option<u64>,
    backing_file: String,
    device: Option<String>,
    /// The queue settings the device had when attached.
    #[serde(default)]
    queue: QueueSettings,
}

/// A scratch loop device, removed when dropped.
#[derive(Debug)]
pub struct ScratchDevice {
    name: String,
    backing_file: PathBuf,
    marker: PathBuf,
    size_bytes: u64,
    queue: QueueSettings,
}

impl ScratchDevice {
    /// Creates a scratch device of `size_bytes` with its marker in the default state directory.
    pub fn create(size_bytes: u64) -> Result<ScratchDevice, TargetError> {
        ScratchDevice::create_in(&crate::knobs::state_dir(), size_bytes)
    }

    pub fn create_in(state_dir: &Path, size_bytes: u64) -> Result<ScratchDevice, TargetError> {
        if size_bytes < 1 << 20 || !size_bytes.is_multiple_of(4096) {
            return Err(TargetError::BadSize { size_bytes });
        }
        let free = free_bytes(Path::new(SCRATCH_FILE_DIR))?;
        if size_bytes > free {
            // Sparse, so creation would succeed; the workload's writes would then fail with
            // ENOSPC half-way through a run. Refuse now instead.
            return Err(TargetError::NoRoom {
                dir: SCRATCH_FILE_DIR.to_string(),
                size_bytes,
                free_bytes: free,
            });
        }
        let markers = state_dir.join("scratch");
        crate::knobs::trusted_state_dir(&markers)?;
        let io = |p: &Path| {
            let path = p.display().to_string();
            move |source| TargetError::Io { path, source }
        };
        // A file of the name already there is not this iolab's (another user's, made to
        // stop runs, or one left by a process that had this pid): left alone, and the next
        // name taken.
        let mut taken = Vec::new();
        let (mut guard, mut m, f) = loop {
            if taken.len() == NAME_TRIES {
                return Err(TargetError::Io {
                    path: taken.join(", "),
                    source: std::io::Error::other(
                        "every scratch file name tried was taken by a file already there",
                    ),
                });
            }
            let stem = format!(
                "iolab-scratch-{}-{}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::SeqCst)
            );
            let backing_file = Path::new(SCRATCH_FILE_DIR).join(format!("{stem}.img"));
            let marker = markers.join(format!("{stem}.json"));
            let m = Marker {
                pid: std::process::id(),
                started: crate::sys::process::own_start(),
                backing_file: backing_file.display().to_string(),
                device: None,
                queue: QueueSettings::default(),
            };
            // The marker first: a file made after it is never left unnamed.
            write_marker(&marker, &m)?;
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&backing_file)
            {
                // From here on, the guard cleans up whatever exists if a later step fails.
                Ok(f) => {
                    let guard = ScratchDevice {
                        name: String::new(),
                        backing_file,
                        marker,
                        size_bytes,
                        queue: QueueSettings::default(),
                    };
                    break (guard, m, f);
                }
                Err(e) => {
                    let _ = std::fs::remove_file(&marker);
                    if e.kind() != std::io::ErrorKind::AlreadyExists {
                        return Err(io(&backing_file)(e));
                    }
                    taken.push(backing_file.display().to_string());
                }
            }
        };
        f.set_len(size_bytes).map_err(io(&guard.backing_file))?;
        drop(f);
        guard.name = attach(&guard.backing_file)?;
        guard.queue = QueueSettings::read(&guard.name);
        m.device = Some(guard.name.clone());
        m.queue = guard.queue.clone();
        write_marker(&guard.marker, &m)?;
        Ok(guard)
    }

    /// Kernel name, e.g. "loop3".
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Device node, e.g. "/dev/loop3".
    pub fn dev_path(&self) -> String {
        format!("/dev/{}", self.name)
    }

    /// Leaves the queue settings as they are when dropped: another iolab holds the device's
    /// lock (it named a loop device this one had just made), and they are its to put back.
    pub(crate) fn leave_queue_alone(&mut self) {
        self.queue = QueueSettings::default();
    }

    pub fn backing_file(&self) -> &Path {
        &self.backing_file
    }

    pub(crate) fn size_bytes(&self) -> u64 {
        self.size_bytes
    }
}

impl Drop for ScratchDevice {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.backing_file);
        if !self.name.is_empty() {
            self.queue.put_back(&self.name);
            if let Err(e) = detach(&self.name) {
                // Keep the marker: once this process is gone, `iolab restore` retries.
                say!("iolab: warning: {e}; `iolab restore` will retry");
                return;
            }
        }
        let _ = std::fs::remove_file(&self.marker);
    }
}

/// Bytes an unprivileged file could still grow into on the filesystem holding `dir`.
fn free_bytes(dir: &Path) -> Result<u64, TargetError> {
    use std::os::unix::ffi::OsStrExt;
    let io = |source| TargetError::Io {
        path: dir.display().to_string(),
        source,
    };
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io(std::io::Error::from(std::io::ErrorKind::InvalidInput)))?;
    // SAFETY: statvfs writes into the zeroed struct we own; the path is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io(std::io::Error::last_os_error()));
    }
    Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

fn write_marker(path: &Path, m: &Marker) -> Result<(), TargetError> {
    let text = serde_json::to_string(m).expect("marker serialises");
    std::fs::write(path, text).map_err(|source| TargetError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// losetup's complaint, and where the kernel offers no loop devices at all (no
/// `/dev/loop-control`: the module is not loaded, as on a machine that has never used one
/// and has no udev to load it), what to do about it.
fn with_loop_hint(why: String, control: &Path) -> String {
    if control.exists() {
        why
    } else {
        format!(
            "{why} (no {}: load the loop module, `modprobe loop`)",
            control.display()
        )
    }
}

/// `losetup --find --show`, with direct I/O when the backing filesystem allows it (without
/// it, I/O is double-cached in RAM); gives the device's name.
fn attach(file: &Path) -> Result<String, TargetError> {
    let try_attach = |direct: bool| -> Result<String, String> {
        let mut cmd = Command::new("losetup");
        cmd.args(["--find", "--show"]);
        if direct {
            cmd.arg("--direct-io=on");
        }
        let out = cmd
            .arg(file)
            .output()
            .map_err(|e| format!("cannot run losetup: {e}"))?;
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && dev.starts_with("/dev/") {
            Ok(dev)
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    };
    let dev = match try_attach(true) {
        Ok(d) => d,
        Err(_) => try_attach(false).map_err(|why| TargetError::Losetup {
            file: file.display().to_string(),
            why: with_loop_hint(why, Path::new("/dev/loop-control")),
        })?,
    };
    Ok(dev.trim_start_matches("/dev/").to_string())
}

/// The writable settings of a loop device's queue (`model::devices::KNOBS`, scheduler first)
/// at one moment. A loop device keeps them when detached, so whoever attaches one puts them
/// back before detaching it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct QueueSettings(Vec<(String, String)>);

impl QueueSettings {
    /// The settings of `name`'s queue as they are now (those that can be read).
    pub fn read(name: &str) -> QueueSettings {
        QueueSettings(crate::model::devices::queue_settings(
            &crate::sys::SysRoot::live(),
            name,
        ))
    }

    /// The settings named like a queue knob iolab reads: those of a marker come from a file,
    /// which is not trusted, and a name like `../../x` must lead no write out of the queue.
    fn known(&self) -> impl Iterator<Item = &(String, String)> {
        self.0
            .iter()
            .filter(|(knob, _)| crate::model::devices::KNOBS.contains(&knob.as_str()))
    }

    /// Writes back each setting that changed since [`QueueSettings::read`], in order: the
    /// scheduler first, since choosing one resets `nr_requests`. Best effort: the device is
    /// about to go, and a setting the kernel refuses now it refused before.
    pub fn put_back(&self, name: &str) {
        for (knob, value) in self.known() {
            let path = crate::knobs::queue_attr_path(name, knob);
            let now = crate::knobs::read_attr(&path).map(|t| crate::knobs::current_choice(&t));
            if now.is_ok_and(|now| now != *value) {
                let _ = crate::knobs::write_attr(&path, value);
            }
        }
    }
}

fn detach(name: &str) -> Result<(), TargetError> {
    let out = Command::new("losetup")
        .args(["--detach", &format!("/dev/{name}")])
        .output()
        .map_err(|e| TargetError::Losetup {
            file: name.to_string(),
            why: format!("cannot run losetup: {e}"),
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(TargetError::Losetup {
            file: format!("/dev/{name}"),
            why: format!(
                "could not detach: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        })
    }
}

/// Loop devices whose backing file is `file` (from /sys/block/loop*/loop/backing_file).
fn loops_backed_by(file: &str) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut out: Vec<String> = rd
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("loop"))
        .filter(|n| {
            std::fs::read_to_string(format!("/sys/block/{n}/loop/backing_file"))
                .map(|b| b.trim().trim_end_matches(" (deleted)") == file)
                .unwrap_or(false)
        })
        .collect();
    out.sort();
    out
}

/// What `remove_leaked_scratch` did, and what it would not do.
#[derive(Debug, Default, Clone, Serialize)]
pub(crate) struct ScratchCleanup {
    /// Loop devices detached (or, where none was attached, scratch files deleted).
    pub(crate) removed: Vec<String>,
    /// Markers that were unreadable or named something iolab does not make, each with what
    /// was done about it and what to do.
    pub(crate) problems: Vec<String>,
}

/// The pid in a scratch file's name when `file` is one `create_in` makes
/// (`/dev/shm/iolab-scratch-PID-N.img`), else None. Pure.
pub(crate) fn scratch_file_pid(file: &str) -> Option<u32> {
    let name = file.strip_prefix(SCRATCH_FILE_DIR)?.strip_prefix('/')?;
    let (pid, n) = name
        .strip_prefix("iolab-scratch-")?
        .strip_suffix(".img")?
        .split_once('-')?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    (digits(pid) && digits(n)).then(|| pid.parse().ok())?
}

/// Removes scratch devices and files left by iolab processes that no longer exist (killed
/// before their guard ran). A marker is only a file in the state directory, so nothing in it
/// is trusted: only a file iolab makes (`scratch_file_pid`) whose creator — the pid in its
/// name, which must be the marker's — is gone, is deleted, and a loop device is detached only
/// when the kernel says that file is its backing file. A marker that cannot be read is moved
/// aside (`NAME.json.corrupt`) and reported, never skipped silently.
pub(crate) fn remove_leaked_scratch(state_dir: &Path) -> Result<ScratchCleanup, TargetError> {
    let dir = state_dir.join("scratch");
    let entries = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(source) => {
            return Err(TargetError::Io {
                path: dir.display().to_string(),
                source,
            })
        }
    };
    let mut out = ScratchCleanup::default();
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let m = match crate::sys::own_dir::read_own_file(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Marker>(&b).map_err(|e| e.to_string()))
        {
            Ok(m) => m,
            Err(why) => {
                let aside = path.with_extension("json.corrupt");
                let moved = match std::fs::rename(&path, &aside) {
                    Ok(()) => format!("moved to {}", aside.display()),
                    Err(e) => format!("could not be moved aside ({e}); delete it"),
                };
                out.problems.push(format!(
                    "{}: unreadable scratch marker ({why}); {moved}. Check `losetup --list` for \
                     a loop device over {SCRATCH_FILE_DIR}/iolab-scratch-*.img whose iolab is \
                     gone: detach it with `losetup -d` and delete the file",
                    path.display()
                ));
                continue;
            }
        };
        if crate::sys::process::still_running(m.pid, m.started) {
            continue; // its owner is still running and will clean up itself
        }
        match scratch_file_pid(&m.backing_file) {
            Some(pid) if pid == m.pid => {}
            _ => {
                out.problems.push(format!(
                    "{}: names {} (pid {}), which is not a scratch file of that iolab \
                     ({SCRATCH_FILE_DIR}/iolab-scratch-PID-N.img): nothing was detached or \
                     deleted; the marker was removed",
                    path.display(),
                    m.backing_file,
                    m.pid
                ));
                let _ = std::fs::remove_file(&path);
                continue;
            }
        }
        // Under the devices' machine-wide locks: another iolab may have taken the leaked
        // device by its name since (or the marker lies about its iolab being gone): the
        // device is then that one's, to use and to detach, and the marker waits.
        let loops = loops_backed_by(&m.backing_file);
        let devices = loops
            .iter()
            .map(|name| crate::sys::lock::Resource::Device(name.clone()));
        let _held =
            match crate::knobs::machine_locks(&crate::sys::SysRoot::live(), state_dir, devices) {
                Ok(held) => held,
                Err(e) => {
                    out.problems.push(format!(
                        "{}: left attached, with its file and marker ({}): {e}",
                        loops
                            .iter()
                            .map(|n| format!("/dev/{n}"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        path.display()
                    ));
                    continue;
                }
            };
        let mut detached = Vec::new();
        for name in loops {
            m.queue.put_back(&name);
            detach(&name)?;
            detached.push(name);
        }
        if std::fs::remove_file(&m.backing_file).is_ok() && detached.is_empty() {
            detached.push(m.backing_file.clone());
        }
        out.removed.extend(detached);
        let _ = std::fs::remove_file(&path);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_loop_control_means_load_the_module() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("loop-control");
        let why = "losetup: cannot find an unused loop device".to_string();
        assert_eq!(
            with_loop_hint(why.clone(), &missing),
            format!(
                "{why} (no {}: load the loop module, `modprobe loop`)",
                missing.display()
            )
        );
        std::fs::write(&missing, "").unwrap();
        assert_eq!(with_loop_hint(why.clone(), &missing), why);
    }

    #[test]
    fn only_queue_knobs_are_put_back() {
        let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
        let marker = QueueSettings(vec![
            pair("scheduler", "none"),
            pair("../../../../etc/evil", "1"),
            pair("nr_requests", "64"),
        ]);
        let known: Vec<&str> = marker.known().map(|(k, _)| k.as_str()).collect();
        assert_eq!(known, ["scheduler", "nr_requests"]);
    }

    #[test]
    fn only_files_named_like_iolabs_scratch_files_are_its_own() {
        assert_eq!(
            scratch_file_pid("/dev/shm/iolab-scratch-123-0.img"),
            Some(123)
        );
        for other in [
            "/dev/shm/iolab-scratch-123-0.img.bak",
            "/dev/shm/sub/iolab-scratch-1-0.img",
            "/dev/shm/../etc/iolab-scratch-1-0.img",
            "/tmp/iolab-scratch-1-0.img",
            "/dev/shm/iolab-scratch--0.img",
            "/dev/shm/iolab-scratch-1-x.img",
            "/dev/shm/data.img",
            "/etc/passwd",
        ] {
            assert_eq!(scratch_file_pid(other), None, "{other}");
        }
    }
}

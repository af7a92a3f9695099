//! A recording mounts tracefs where it is not mounted and unmounts it when done, so the
//! machine is left as found. A recording killed with SIGKILL cannot unmount, so the mount is
//! noted in the tracer's state directory beside its journal (the boot and the kernel's id of
//! the mount), and `iolab restore` unmounts it: only that very mount (same boot, same mount id
//! at /sys/kernel/tracing, where someone may have mounted tracefs again since), and only when
//! nothing holds it open.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use crate::sys::parse::mountinfo::mountinfo;

pub(crate) const TRACEFS: &str = "/sys/kernel/tracing";
/// The note of a mount, in the tracer's state directory.
const NOTE: &str = "mounted";

/// Unmounts tracefs when dropped, if this recording mounted it, and removes the note.
pub(crate) struct Mounted {
    note: Option<PathBuf>,
}

impl Mounted {
    /// Mounts tracefs unless it is mounted, noting the mount in `state` (the tracer's
    /// journal directory, which the caller holds).
    pub(crate) fn ensure(state: &Path) -> anyhow::Result<Mounted> {
        if Path::new(TRACEFS).join("trace_pipe").exists() {
            return Ok(Mounted { note: None });
        }
        let st = std::process::Command::new("mount")
            .args(["-t", "tracefs", "nodev", TRACEFS])
            .status()
            .context("running mount -t tracefs")?;
        if !st.success() || !Path::new(TRACEFS).join("trace_pipe").exists() {
            bail!("tracefs is not mounted at {TRACEFS} and mounting it failed");
        }
        let note = state.join(NOTE);
        let mounted = Mounted {
            note: Some(note.clone()),
        };
        // Unmounted by `mounted`'s drop if the note cannot be written: a mount nobody knows
        // of must not outlive the recording.
        let id = this_mount().context("finding the tracefs just mounted")?;
        write_synced(&note, &format!("{} {id}\n", boot_id()?))
            .with_context(|| format!("writing {}", note.display()))?;
        Ok(mounted)
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(note) = self.note.take() {
            if unmount().is_ok() {
                let _ = fs::remove_file(note);
            }
        }
    }
}

/// What became of the tracefs mount a killed recording made.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct LeftMount {
    pub(crate) path: &'static str,
    pub(crate) unmounted: bool,
    /// Why it stays mounted (the note stays too, for the next `iolab restore`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) kept_because: Option<String>,
}

/// After a kill: unmounts the tracefs a recording that kept its state in `state` mounted,
/// if it is still mounted. `None` when there is nothing to do (no note, or that mount is gone
/// or was replaced: the note is dropped).
pub(crate) fn unmount_left(state: &Path) -> Option<LeftMount> {
    let note = state.join(NOTE);
    let text = fs::read_to_string(&note).ok()?;
    let mut words = text.split_whitespace();
    let ours = (
        words.next(),
        words.next().and_then(|w| w.parse::<u64>().ok()),
    );
    let still = match (ours, boot_id().ok(), this_mount()) {
        ((Some(boot), Some(id)), Some(now_boot), Some(now_id)) => boot == now_boot && id == now_id,
        _ => false,
    };
    if !still {
        let _ = fs::remove_file(&note);
        return None;
    }
    let kept_because = match unmount() {
        Ok(()) => {
            let _ = fs::remove_file(&note);
            None
        }
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
            Some("something holds it open (a tracer or a reader of its files)".into())
        }
        Err(e) => Some(e.to_string()),
    };
    Some(LeftMount {
        path: TRACEFS,
        unmounted: kept_because.is_none(),
        kept_because,
    })
}

/// The kernel's id of the tracefs mount at [`TRACEFS`] (the topmost, if several).
fn this_mount() -> Option<u64> {
    let text = fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo(&text)
        .ok()?
        .into_iter()
        .rev()
        .find(|m| m.mount_point == TRACEFS && m.fs_type == "tracefs")
        .map(|m| m.id)
}

fn boot_id() -> anyhow::Result<String> {
    let id = fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .context("reading /proc/sys/kernel/random/boot_id")?;
    Ok(id.trim().to_string())
}

fn unmount() -> std::io::Result<()> {
    let path = std::ffi::CString::new(TRACEFS).expect("no NUL in a constant");
    // SAFETY: a NUL-terminated path that outlives the call; the kernel refuses a busy mount.
    if unsafe { libc::umount2(path.as_ptr(), 0) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn write_synced(path: &Path, text: &str) -> std::io::Result<()> {
    let mut f = fs::File::create(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

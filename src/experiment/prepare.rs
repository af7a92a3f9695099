//! Steps taken before every measured run (`[prepare]`): flush dirty pages, drop the page
//! cache, trim a file system on the target, let the machine settle. Case 4 dropped caches between runs so that no run read what
//! the one before it left in memory; without it, buffered reads after the first run of a cell
//! measure RAM. These are actions, not settings: there is nothing to put back, so nothing is
//! journaled. The experiment's text, stored with its results, says which steps every run took;
//! a step that fails makes the run fail with the reason.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::sys::SysRoot;
use crate::workload::CancelToken;

const DROP_CACHES: &str = "/proc/sys/vm/drop_caches";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prepare {
    /// `sync(2)`: write dirty pages back.
    pub(crate) sync: bool,
    /// Free the page cache, dentries and inodes (after a sync, which it needs to free dirty
    /// pages).
    pub drop_caches: bool,
    /// Discard the free blocks of the file system mounted here (FITRIM, what fstrim(8) does),
    /// so an SSD or thin device starts every run with the same free space. Only a file system
    /// on the experiment's own target (`check_fstrim`).
    pub(crate) fstrim: Option<PathBuf>,
    /// Wait this long before the run (after the steps above and the cell's knobs).
    pub settle: Option<Duration>,
}

impl Prepare {
    pub(crate) fn is_empty(&self) -> bool {
        *self == Prepare::default()
    }

    /// The steps in the order [`Prepare::before_run`] takes them, as a plan lists them.
    pub(crate) fn steps(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.sync || self.drop_caches {
            out.push("sync".to_string());
        }
        if self.drop_caches {
            out.push(format!("drop the page cache ({DROP_CACHES} = 3)"));
        }
        if let Some(mount) = &self.fstrim {
            out.push(format!("fstrim {}", mount.display()));
        }
        // A settle of no time is no step ("settle 0ns").
        if let Some(settle) = self.settle.filter(|d| !d.is_zero()) {
            out.push(format!("settle {settle:?}"));
        }
        out
    }

    /// Takes the steps under `root`. `false` when cancelled while settling; an error names the
    /// step that failed.
    pub(crate) fn before_run(&self, root: &SysRoot, cancel: &CancelToken) -> Result<bool, String> {
        if self.sync || self.drop_caches {
            // SAFETY: sync(2) takes no arguments and cannot fail.
            unsafe { libc::sync() };
        }
        if self.drop_caches {
            let path = root.path(DROP_CACHES);
            std::fs::write(&path, "3")
                .map_err(|e| format!("cannot drop caches ({}): {e}", path.display()))?;
        }
        if let Some(mount) = &self.fstrim {
            fitrim(mount).map_err(|e| format!("fstrim {}: {e}", mount.display()))?;
        }
        if let Some(settle) = self.settle {
            let end = std::time::Instant::now() + settle;
            while let Some(left) = end.checked_duration_since(std::time::Instant::now()) {
                if cancel.is_cancelled() {
                    return Ok(false);
                }
                std::thread::sleep(left.min(Duration::from_millis(50)));
            }
        }
        Ok(true)
    }
}

/// FITRIM on the whole of the file system mounted at `mount`; the kernel answers with how
/// many bytes it trimmed, which nothing here needs.
fn fitrim(mount: &Path) -> std::io::Result<()> {
    #[repr(C)]
    struct FstrimRange {
        start: u64,
        len: u64,
        minlen: u64,
    }
    // _IOWR('X', 121, struct fstrim_range), linux/fs.h.
    const FITRIM: libc::c_ulong = 0xC018_5879;
    let dir = std::fs::File::open(mount)?;
    let mut range = FstrimRange {
        start: 0,
        len: u64::MAX,
        minlen: 0,
    };
    use std::os::fd::AsRawFd;
    // SAFETY: the descriptor is open for the call and `range` is the struct FITRIM reads and
    // writes, alive across it.
    let rc = unsafe { libc::ioctl(dir.as_raw_fd(), FITRIM, &mut range as *mut FstrimRange) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Refuses `fstrim` unless the file system `mount` leads to is on one of `targets` ((name,
/// "maj:min"), partitions included), from /proc/self/mountinfo's text: trimming discards
/// blocks, and iolab changes nothing but its target. Of several mounts at one place the last
/// is the one a path reaches (it hides those under it), so only that one counts.
pub(crate) fn check_fstrim(
    mount: &Path,
    mountinfo: &str,
    targets: &[(String, String)],
) -> Result<(), String> {
    let topmost = mountinfo.lines().rev().find(|line| {
        crate::sys::parse::mountinfo::mount_line(line, 1)
            .is_ok_and(|m| Path::new(&m.mount_point) == mount)
    });
    let on_target = topmost.is_some_and(|line| {
        crate::target::mounts_of(line, targets)
            .iter()
            .any(|r| matches!(r, crate::target::Reason::Mounted { .. }))
    });
    if on_target {
        return Ok(());
    }
    let names: Vec<&str> = targets.iter().map(|(n, _)| n.as_str()).collect();
    Err(format!(
        "[prepare] fstrim = \"{}\": no file system on the target (/dev/{}) is mounted there; \
         fstrim trims only a file system on the experiment's own target",
        mount.display(),
        names.join(", /dev/")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_caches_writes_3_under_the_root_and_settle_stops_on_cancel() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("proc/sys/vm/drop_caches");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "0").unwrap();
        let root = SysRoot::at(dir.path()).unwrap();
        let p = Prepare {
            sync: false,
            drop_caches: true,
            fstrim: None,
            settle: Some(Duration::from_secs(60)),
        };
        let cancel = CancelToken::new();
        cancel.cancel();
        assert_eq!(p.before_run(&root, &cancel), Ok(false));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "3");
        std::fs::remove_file(&file).unwrap();
        std::fs::create_dir(&file).unwrap();
        let err = p.before_run(&root, &CancelToken::new()).unwrap_err();
        assert!(err.contains("cannot drop caches"), "{err}");
        assert_eq!(p.steps()[2], "settle 60s");
        let none = Prepare {
            settle: Some(Duration::ZERO),
            ..p
        };
        assert_eq!(none.steps().len(), 2, "{:?}", none.steps());
    }

    #[test]
    fn fstrim_is_only_for_a_file_system_on_the_target() {
        let info = "22 1 7:3 / /mnt/bench rw,relatime - ext4 /dev/loop3 rw\n\
                    23 1 259:2 / /srv rw - xfs /dev/nvme0n1p2 rw\n";
        let t = |n: &str, d: &str| (n.to_string(), d.to_string());
        assert!(check_fstrim(Path::new("/mnt/bench"), info, &[t("loop3", "7:3")]).is_ok());
        let part = [t("nvme0n1", "259:0"), t("nvme0n1p2", "259:2")];
        assert!(check_fstrim(Path::new("/srv"), info, &part).is_ok());
        let err = check_fstrim(Path::new("/srv"), info, &[t("loop3", "7:3")]).unwrap_err();
        assert!(err.contains("/srv") && err.contains("/dev/loop3"), "{err}");
        assert!(check_fstrim(Path::new("/mnt"), info, &[t("loop3", "7:3")]).is_err());
        // Another file system mounted over the target's: the path reaches that one.
        let covered = format!("{info}24 1 7:5 / /mnt/bench rw - ext4 /dev/loop5 rw\n");
        assert!(check_fstrim(Path::new("/mnt/bench"), &covered, &[t("loop3", "7:3")]).is_err());
        assert!(check_fstrim(Path::new("/mnt/bench"), &covered, &[t("loop5", "7:5")]).is_ok());
    }
}

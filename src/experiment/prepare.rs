//! Steps taken before every measured run (`[prepare]`): flush dirty pages, drop the page
//! cache, let the machine settle. Case 4 dropped caches between runs so that no run read what
//! the one before it left in memory; without it, buffered reads after the first run of a cell
//! measure RAM. These are actions, not settings: there is nothing to put back, so nothing is
//! journaled. The experiment's text, stored with its results, says which steps every run took;
//! a step that fails makes the run fail with the reason.

use std::time::Duration;

use crate::sys::SysRoot;
use crate::workload::CancelToken;

const DROP_CACHES: &str = "/proc/sys/vm/drop_caches";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prepare {
    /// `sync(2)`: write dirty pages back.
    pub sync: bool,
    /// Free the page cache, dentries and inodes (after a sync, which it needs to free dirty
    /// pages).
    pub drop_caches: bool,
    /// Wait this long before the run (after the steps above and the cell's knobs).
    pub settle: Option<Duration>,
}

impl Prepare {
    pub fn is_empty(&self) -> bool {
        *self == Prepare::default()
    }

    /// Takes the steps under `root`. `false` when cancelled while settling; an error names the
    /// step that failed.
    pub fn before_run(&self, root: &SysRoot, cancel: &CancelToken) -> Result<bool, String> {
        if self.sync || self.drop_caches {
            // SAFETY: sync(2) takes no arguments and cannot fail.
            unsafe { libc::sync() };
        }
        if self.drop_caches {
            let path = root.path(DROP_CACHES);
            std::fs::write(&path, "3")
                .map_err(|e| format!("cannot drop caches ({}): {e}", path.display()))?;
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
    }
}

//! The directory fio runs in. fio writes files of its own into its working directory (the logs
//! of `write_*_log`) and its `--aux-path` (verify state), so iolab never lets it run where the
//! user happens to be: each run gets a fresh private directory (mode 0700) under iolab's state
//! directory, which holds the job file too and is removed when the run ends, however it ends.
//! An iolab killed with SIGKILL leaves its directory behind; `sweep` removes the directories of
//! processes that are gone (`iolab run` and `iolab restore` call it).

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// One run's private directory, removed on drop.
#[derive(Debug)]
pub(crate) struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// Makes `parent/run-<pid>-<n>` (and `parent`), readable by root only.
    pub(crate) fn create(parent: &Path) -> std::io::Result<RunDir> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true).mode(0o700).create(parent)?;
        // fio's job file, logs and working directory go here: not into a directory another
        // user could replace.
        if let Some(why) = crate::sys::own_dir::untrusted_path(&parent.canonicalize()?) {
            return Err(std::io::Error::other(why));
        }
        // Not recursive: a directory already there (the leftover of a killed iolab whose pid
        // this process has now) is not ours to use; the next number is tried instead.
        builder.recursive(false);
        let mut tries = 0;
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = parent.join(format!("run-{}-{n}", std::process::id()));
            match builder.create(&path) {
                Ok(()) => return Ok(RunDir { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 16 => {
                    tries += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Removes the run directories in `parent` whose process no longer exists; returns them.
pub(crate) fn sweep(parent: &Path) -> Vec<PathBuf> {
    sweep_dead(parent, "run-")
}

/// Removes the directories in `parent` named `PREFIX<pid>` or `PREFIX<pid>-...` whose process
/// no longer exists (a killed iolab's own working directories); returns them.
/// Only directories iolab made count: not a link, nor a directory another user could have put
/// there, nor anything in a directory others could write to (whose processes would be killed).
pub(crate) fn sweep_dead(parent: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(parent) = parent.canonicalize() else {
        return Vec::new();
    };
    if crate::sys::own_dir::untrusted_path(&parent).is_some() {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(&parent) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let own = std::fs::symlink_metadata(entry.path())
            .is_ok_and(|meta| crate::sys::own_dir::untrusted(&meta, true).is_none());
        if !own {
            continue;
        }
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        // Named by pid alone: a process that reused the pid keeps the directory meanwhile.
        if crate::sys::process::still_running(pid, None) {
            continue;
        }
        stop_processes_in(&entry.path());
        if std::fs::remove_dir_all(entry.path()).is_ok() {
            removed.push(entry.path());
        }
    }
    removed
}

/// Kills every process still working in `dir`, a dead iolab's directory: a fio is told to stop
/// when iolab dies (SIGTERM, `PR_SET_PDEATHSIG`), but one was seen to hang in its SIGTERM path
/// and live on, orphaned, with its job processes. They all run in the directory (it is their
/// working directory), which is how they are found; nothing else works in it. `dir` is resolved
/// (as the kernel gives a working directory) and not a link.
fn stop_processes_in(dir: &Path) {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if std::fs::read_link(p.path().join("cwd")).is_ok_and(|cwd| cwd == dir) {
            // SAFETY: kill(2) with a pid read from /proc; at worst it names a process gone.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sleep 60` started in `dir`, once it works there.
    fn sleeper_in(dir: &Path) -> std::process::Child {
        let child = std::process::Command::new("sleep")
            .arg("60")
            .current_dir(dir)
            .spawn()
            .unwrap();
        while std::fs::read_link(format!("/proc/{}/cwd", child.id()))
            .map_or(true, |c| c != dir.canonicalize().unwrap())
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child
    }

    /// A process left working in a dead iolab's run directory (a fio that outlived it) is
    /// stopped before the directory is removed.
    #[test]
    fn what_still_runs_in_a_dead_iolabs_directory_is_stopped() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("run-999999999-0");
        std::fs::create_dir(&dir).unwrap();
        let mut orphan = sleeper_in(&dir);
        assert_eq!(sweep(parent.path()), vec![dir.clone()]);
        let status = orphan.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL)
        );
        assert!(!dir.exists());
    }

    /// What iolab did not make is not a run directory: a link named like one (to wherever
    /// processes work) and a directory others may write to are left, and so are the
    /// processes working there.
    #[test]
    fn a_link_or_a_directory_iolab_did_not_make_is_left_with_its_processes() {
        use std::os::unix::fs::PermissionsExt;
        let parent = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let mut bystander = sleeper_in(elsewhere.path());
        let link = parent.path().join("run-999999999-0");
        std::os::unix::fs::symlink(elsewhere.path(), &link).unwrap();
        let open = parent.path().join("run-999999999-1");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let mut other = sleeper_in(&open);
        assert!(sweep(parent.path()).is_empty());
        assert!(bystander.try_wait().unwrap().is_none());
        assert!(other.try_wait().unwrap().is_none());
        assert!(elsewhere.path().exists() && open.exists());
        // Nor is anything in a directory others may write to.
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(parent.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(sweep(parent.path()).is_empty());
        assert!(other.try_wait().unwrap().is_none());
        for mut child in [bystander, other] {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    #[test]
    fn a_run_directory_is_private_and_goes_away() {
        use std::os::unix::fs::PermissionsExt;
        let parent = tempfile::tempdir().unwrap();
        let dir = RunDir::create(&parent.path().join("fio")).unwrap();
        let path = dir.path().to_path_buf();
        std::fs::write(path.join("x_bw.1.log"), "1, 2\n").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        drop(dir);
        assert!(!path.exists());
    }

    /// A killed iolab's directory under this process's pid (a pid reused since) is left
    /// alone, and the run takes the next name.
    #[test]
    fn a_reused_pids_leftover_is_passed_over() {
        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path().join("fio");
        let number = |d: &RunDir| -> u64 {
            let name = d.path().to_str().unwrap();
            name.rsplit('-').next().unwrap().parse().unwrap()
        };
        let n = number(&RunDir::create(&parent).unwrap());
        let pid = std::process::id();
        for k in n + 1..n + 4 {
            std::fs::create_dir(parent.join(format!("run-{pid}-{k}"))).unwrap();
            std::fs::write(parent.join(format!("run-{pid}-{k}/left")), "x").unwrap();
        }
        let next = RunDir::create(&parent).unwrap();
        assert!(number(&next) >= n + 4, "{}", next.path().display());
        assert!(parent.join(format!("run-{pid}-{}/left", n + 1)).exists());
    }

    #[test]
    fn sweep_removes_only_directories_of_dead_processes() {
        let parent = tempfile::tempdir().unwrap();
        let mine = RunDir::create(parent.path()).unwrap();
        // pid_max is at most 2^22: this pid cannot exist.
        let dead = parent.path().join("run-99999999-0");
        let other = parent.path().join("notes");
        std::fs::create_dir(&dead).unwrap();
        std::fs::create_dir(&other).unwrap();
        assert_eq!(sweep(parent.path()), vec![dead.clone()]);
        assert!(!dead.exists() && other.exists() && mine.path().exists());
    }

    /// A killed agent's trace directory goes at `iolab restore`; a live one's stays.
    #[test]
    fn a_killed_agents_traces_are_swept_and_a_live_ones_kept() {
        let state = tempfile::tempdir().unwrap();
        let prefix = crate::hosts::agent_trace::DIR_PREFIX;
        let dead = state.path().join(format!("{prefix}99999999"));
        let live = state.path().join(format!("{prefix}{}", std::process::id()));
        for d in [&dead, &live] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("sdb.blktrace.0"), "x").unwrap();
        }
        assert_eq!(sweep_dead(state.path(), prefix), vec![dead.clone()]);
        assert!(!dead.exists() && live.exists());
    }
}

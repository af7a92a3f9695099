//! Which hosts an experiment may have left changed: `STATE_DIR/hosts.json`, written before
//! the first knob is set on any host and trimmed as each host's session says `bye` (which
//! restores it there). A host that died or was cut off mid-run, or a controller killed
//! mid-run, leaves its entry; `iolab restore` then runs each listed host's own `iolab
//! restore` over ssh (see `restore`), and `iolab run` refuses to start while the file is
//! there, as it does for this machine's own journal. The file names hosts and how to reach
//! them, nothing else: each host's journal and the allow-list it is checked against stay on
//! that host.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

const FILE: &str = "hosts.json";
/// Held (flock) by the run that keeps the list, for as long as it runs, with its pid inside:
/// `iolab restore` leaves a live run's hosts to it, and a second run is told to wait, not to
/// restore.
const LOCK: &str = "hosts.lock";

/// One host to restore: its ssh destination, the iolab to run there (the copy
/// `--copy-binary` made, when it made one) and the ssh options (`$IOLAB_SSH`) the run used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TouchedHost {
    pub ssh: String,
    pub(crate) remote_iolab: String,
    /// `None` in files from before it was recorded: `$IOLAB_SSH` as it is at restore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ssh_options: Option<Vec<String>>,
}

/// The file, held by the run that writes it.
#[derive(Debug)]
pub(crate) struct Touched {
    path: PathBuf,
    hosts: Vec<TouchedHost>,
    /// The file is this run's and nothing can have been set on its hosts yet (until `arm`),
    /// so dropping the list removes it: a run that stopped before its first cell (a host's
    /// fio server would not start) set nothing on them, and its list refused the next run.
    drop_removes: bool,
    /// The run's hold on `LOCK`.
    _lock: std::fs::File,
}

/// Who holds a hosts list: a pid, and the command (`iolab run`, `iolab restore`).
#[derive(Debug, PartialEq)]
pub(crate) struct Holder(Option<u32>, String);

/// "`iolab run` (pid 4242)".
impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}`", self.1)?;
        match self.0 {
            Some(pid) => write!(f, " (pid {pid})"),
            None => Ok(()),
        }
    }
}

/// The hold on `dir`'s hosts list for `role` (the command holding it, said to others), or
/// who has it (`Err`).
fn hold(dir: &Path, role: &str) -> Result<std::result::Result<std::fs::File, Holder>> {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    let path = dir.join(LOCK);
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(err).with_context(|| format!("cannot lock {}", path.display()));
        }
        let mut text = String::new();
        let _ = f.read_to_string(&mut text);
        return Ok(Err(holder_of(&text)));
    }
    f.set_len(0)?;
    write!(f, "{} {role}", std::process::id())?;
    Ok(Ok(f))
}

/// "4242 iolab run", as `hold` writes it.
fn holder_of(text: &str) -> Holder {
    let (pid, role) = text.trim().split_once(' ').unwrap_or((text.trim(), ""));
    let role = if role.is_empty() { "iolab" } else { role };
    Holder(pid.parse().ok(), role.to_string())
}

/// Who holds `dir`'s list now, found without taking its lock (a probe that took it would
/// make a run or a restore starting then refuse).
fn held_by(dir: &Path) -> Option<Holder> {
    let path = dir.join(LOCK);
    let pid = crate::sys::lock::flock_holder(&path)?;
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    match holder_of(&text) {
        Holder(Some(p), role) if p == pid => Some(Holder(Some(pid), role)),
        // Written a moment after the lock was taken: the holder is known, its role not yet.
        _ => Some(Holder(Some(pid), "iolab".to_string())),
    }
}

/// The refusal of a run while another iolab, still running, holds `dir`'s list.
fn still_running(dir: &Path, holder: Holder) -> anyhow::Error {
    anyhow::anyhow!(
        "{holder} is using this state directory's list of hosts ({}) now: wait for it to end",
        dir.join(FILE).display()
    )
}

impl Touched {
    /// Records `hosts` in `dir` before anything is set on them; never over another run's
    /// list. Two runs on one state directory can both pass `check_clean` (each connects to
    /// its hosts before it gets here), and the second's list would replace the first's.
    pub(crate) fn begin(dir: &Path, hosts: Vec<TouchedHost>) -> Result<Touched> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot make {}", dir.display()))?;
        let lock = hold(dir, "iolab run")?.map_err(|h| still_running(dir, h))?;
        let mut t = Touched {
            path: dir.join(FILE),
            hosts,
            drop_removes: false,
            _lock: lock,
        };
        let tmp = t.write_aside()?;
        // A link is made only where no file is: the list appears whole, or not at all.
        let linked = std::fs::hard_link(&tmp, &t.path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => {
                t.drop_removes = true;
                Ok(t)
            }
            // A list no running iolab holds (this run holds the lock): an earlier run's.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(left_by(dir)?
                .unwrap_or_else(|| anyhow::anyhow!("{}: it is in the way", t.path.display()))),
            Err(e) => Err(e).with_context(|| format!("cannot write {}", t.path.display())),
        }
    }

    /// Knobs may be set on the hosts from now on: the list stays until each host says bye.
    pub(crate) fn arm(&mut self) {
        self.drop_removes = false;
    }

    /// `ssh` was restored (its session said bye): it leaves the file, and the file goes with
    /// the last host.
    pub(crate) fn done(&mut self, ssh: &str) -> Result<()> {
        self.hosts.retain(|h| h.ssh != ssh);
        self.persist()
    }

    fn persist(&mut self) -> Result<()> {
        if self.hosts.is_empty() {
            return match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(e).with_context(|| format!("cannot remove {}", self.path.display()))
                }
                _ => Ok(()),
            };
        }
        let tmp = self.write_aside()?;
        std::fs::rename(&tmp, &self.path)
            .with_context(|| format!("cannot write {}", self.path.display()))
    }

    /// The list in a file of this process's own beside the list's, to be moved into place.
    fn write_aside(&self) -> Result<PathBuf> {
        let text = serde_json::to_string_pretty(&self.hosts)? + "\n";
        let tmp = self
            .path
            .with_extension(format!("json.{}.tmp", std::process::id()));
        std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
        Ok(tmp)
    }
}

impl Drop for Touched {
    fn drop(&mut self) {
        if self.drop_removes {
            self.hosts.clear();
            let _ = self.persist();
        }
    }
}

/// The hosts an earlier run left listed in `dir` (none when there is no file).
pub fn read(dir: &Path) -> Result<Vec<TouchedHost>> {
    let path = dir.join(FILE);
    match crate::sys::own_dir::read_own_file(&path) {
        Ok(text) => serde_json::from_slice(&text)
            .with_context(|| format!("{}: not a list of hosts iolab wrote", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// The hosts an earlier run left listed in `dir`, held while `iolab restore` restores them,
/// and rewritten as the restore leaves them (`Listed::keep_only`); `Err` names who holds the
/// list while it runs: a run's hosts are its own.
pub(crate) fn take_over(dir: &Path) -> Result<std::result::Result<Listed, Holder>> {
    if !dir.join(FILE).exists() {
        return Ok(Ok(Listed(None)));
    }
    let lock = match hold(dir, "iolab restore")? {
        Ok(lock) => lock,
        Err(holder) => return Ok(Err(holder)),
    };
    let hosts = read(dir)?;
    Ok(Ok(Listed(Some(Touched {
        path: dir.join(FILE),
        hosts,
        drop_removes: false,
        _lock: lock,
    }))))
}

/// An earlier run's list, taken over by `iolab restore` (`None`: there is none).
pub(crate) struct Listed(Option<Touched>);

impl Listed {
    pub(crate) fn hosts(&self) -> &[TouchedHost] {
        self.0.as_ref().map_or(&[], |t| &t.hosts)
    }

    /// Rewrites the list as `hosts` (those `iolab restore` could not put back).
    pub(crate) fn keep_only(self, hosts: Vec<TouchedHost>) -> Result<()> {
        match self.0 {
            Some(mut t) => {
                t.hosts = hosts;
                t.persist()
            }
            None => Ok(()),
        }
    }
}

/// Refuses a new run while an earlier one's hosts may still be changed.
pub(crate) fn check_clean(dir: &Path) -> Result<()> {
    if !dir.join(FILE).exists() {
        return Ok(());
    }
    if let Some(holder) = held_by(dir) {
        return Err(still_running(dir, holder));
    }
    left_by(dir)?.map_or(Ok(()), Err)
}

/// The refusal of a run while an earlier run's list names hosts (nobody holds it).
fn left_by(dir: &Path) -> Result<Option<anyhow::Error>> {
    let names: Vec<String> = read(dir)?.into_iter().map(|h| h.ssh).collect();
    Ok((!names.is_empty()).then(|| {
        anyhow::anyhow!(
            "an earlier run may have left knobs set on {} ({}); run `iolab restore` once the \
             host(s) answer, then run again",
            names.join(", "),
            dir.join(FILE).display()
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(n: &str) -> TouchedHost {
        TouchedHost {
            ssh: n.into(),
            remote_iolab: "iolab".into(),
            ssh_options: None,
        }
    }

    #[test]
    fn the_file_lists_the_hosts_not_yet_restored_and_goes_with_the_last() {
        let dir = tempfile::tempdir().unwrap();
        assert!(check_clean(dir.path()).is_ok());
        let mut t = Touched::begin(dir.path(), vec![host("a"), host("b")]).unwrap();
        t.arm();
        assert_eq!(read(dir.path()).unwrap(), vec![host("a"), host("b")]);
        t.done("a").unwrap();
        assert_eq!(read(dir.path()).unwrap(), vec![host("b")]);
        // The run ends (killed, or b unreachable): b stays listed for `iolab restore`.
        drop(t);
        let e = check_clean(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("knobs set on b (") && e.contains("iolab restore"),
            "{e}"
        );
        let listed = take_over(dir.path()).unwrap().unwrap();
        assert_eq!(listed.hosts(), [host("b")]);
        listed.keep_only(Vec::new()).unwrap();
        assert!(!dir.path().join(FILE).exists());
        assert!(read(dir.path()).unwrap().is_empty());
        assert!(check_clean(dir.path()).is_ok());
    }

    /// `iolab restore` during a run took the run's hosts off its list (their agents, alive,
    /// had nothing to restore yet): a host that died later was then forgotten. A second run
    /// was told to restore, not to wait. The checks before a run (and a dry run's) look
    /// without taking the lock, so they never make a run or a restore starting then refuse.
    #[test]
    fn a_running_runs_list_is_left_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = Touched::begin(dir.path(), vec![host("a")]).unwrap();
        t.arm();
        drop(t);
        // Another process, running, holds the list, as a run does.
        let lock = dir.path().join(LOCK);
        // A group of its own: `sleep` inherits the lock from `flock`, and both must go.
        use std::os::unix::process::CommandExt;
        let mut runner = std::process::Command::new("flock")
            .arg(&lock)
            .args(["sleep", "30"])
            .process_group(0)
            .spawn()
            .unwrap();
        std::fs::write(&lock, format!("{} iolab run", runner.id())).unwrap();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while crate::sys::lock::flock_holder(&lock).is_none() && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let running = Holder(Some(runner.id()), "iolab run".into());
        assert_eq!(take_over(dir.path()).unwrap().err(), Some(running));
        let e = check_clean(dir.path()).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("`iolab run` (pid {}) is using", runner.id()))
                && e.contains("wait for it to end"),
            "{e}"
        );
        let e = Touched::begin(dir.path(), vec![host("b")]).unwrap_err();
        assert!(
            e.to_string()
                .contains("is using this state directory's list"),
            "{e}"
        );
        assert_eq!(read(dir.path()).unwrap(), vec![host("a")]);
        // SAFETY: kill(2) of the group the child leads, not yet waited for.
        unsafe { libc::kill(-(runner.id() as i32), libc::SIGKILL) };
        runner.wait().unwrap();
        while crate::sys::lock::flock_holder(&lock).is_some() && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(take_over(dir.path()).unwrap().unwrap().hosts(), [host("a")]);
    }

    /// A run that stops before its first cell (a host's fio server would not start) set
    /// nothing on its hosts: its list goes with it. Once armed, it stays for `restore`.
    #[test]
    fn a_list_dropped_before_anything_was_set_goes() {
        let dir = tempfile::tempdir().unwrap();
        drop(Touched::begin(dir.path(), vec![host("a")]).unwrap());
        assert!(check_clean(dir.path()).is_ok());
        let mut t = Touched::begin(dir.path(), vec![host("a")]).unwrap();
        t.arm();
        drop(t);
        assert_eq!(read(dir.path()).unwrap(), vec![host("a")]);
    }

    /// A second run's list never replaces the first's: it is refused, naming who holds it.
    #[test]
    fn a_second_list_is_refused_while_the_first_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let _first = Touched::begin(dir.path(), vec![host("a")]).unwrap();
        let e = Touched::begin(dir.path(), vec![host("b")]).unwrap_err();
        assert!(
            e.to_string().contains("`iolab run` (pid") && e.to_string().contains("is using"),
            "{e}"
        );
        assert_eq!(read(dir.path()).unwrap(), vec![host("a")]);
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [FILE, LOCK],
            "nothing but the list and its lock is left"
        );
    }

    /// What restore needs to reach a host again: the copied iolab's path and the run's ssh
    /// options; a file from before they were recorded still reads.
    #[test]
    fn a_host_keeps_the_iolab_and_ssh_options_its_run_used() {
        let dir = tempfile::tempdir().unwrap();
        let copied = TouchedHost {
            ssh: "lab1".into(),
            remote_iolab: "/var/lib/iolab/bin/iolab".into(),
            ssh_options: Some(vec!["-F".into(), "/etc/iolab/ssh".into()]),
        };
        let _t = Touched::begin(dir.path(), vec![copied.clone()]).unwrap();
        assert_eq!(read(dir.path()).unwrap(), vec![copied]);
        std::fs::write(
            dir.path().join(FILE),
            r#"[{"ssh": "lab2", "remote_iolab": "iolab"}]"#,
        )
        .unwrap();
        assert_eq!(read(dir.path()).unwrap(), vec![host("lab2")]);
    }
}

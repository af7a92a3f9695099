//! Which hosts an experiment may have left changed: `STATE_DIR/hosts.json`, written before
//! the first knob is set on any host and trimmed as each host's session says `bye` (which
//! restores it there). A host that died or was cut off mid-run, or a controller killed
//! mid-run, leaves its entry; `iolab restore` then runs each listed host's own `iolab
//! restore` over ssh (see `restore`), and `iolab run` refuses to start while the file is
//! there, as it does for this machine's own journal. The file names hosts and how to reach
//! them, nothing else: each host's journal and the allow-list it is checked against stay on
//! that host.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

const FILE: &str = "hosts.json";

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
}

impl Touched {
    /// Records `hosts` in `dir` before anything is set on them; never over another run's
    /// list. Two runs on one state directory can both pass `check_clean` (each connects to
    /// its hosts before it gets here), and the second's list would replace the first's.
    pub(crate) fn begin(dir: &Path, hosts: Vec<TouchedHost>) -> Result<Touched> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot make {}", dir.display()))?;
        let mut t = Touched {
            path: dir.join(FILE),
            hosts,
            drop_removes: false,
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
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                check_clean(dir)?;
                bail!("{}: another run wrote it meanwhile", t.path.display())
            }
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

/// Rewrites `dir`'s list as `hosts` (after `iolab restore` put some of them back).
pub(crate) fn keep_only(dir: &Path, hosts: Vec<TouchedHost>) -> Result<()> {
    Touched {
        path: dir.join(FILE),
        hosts,
        drop_removes: false,
    }
    .persist()
}

/// Refuses a new run while an earlier one's hosts may still be changed.
pub(crate) fn check_clean(dir: &Path) -> Result<()> {
    let left = read(dir)?;
    if !left.is_empty() {
        let names: Vec<&str> = left.iter().map(|h| h.ssh.as_str()).collect();
        bail!(
            "an earlier run may have left knobs set on {} ({}); run `iolab restore` once the \
             host(s) answer, then run again",
            names.join(", "),
            dir.join(FILE).display()
        );
    }
    Ok(())
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
        assert_eq!(read(dir.path()).unwrap(), vec![host("a"), host("b")]);
        let e = check_clean(dir.path()).unwrap_err().to_string();
        assert!(e.contains("a, b") && e.contains("iolab restore"), "{e}");
        t.done("a").unwrap();
        assert_eq!(read(dir.path()).unwrap(), vec![host("b")]);
        t.done("b").unwrap();
        assert!(!dir.path().join(FILE).exists());
        assert!(read(dir.path()).unwrap().is_empty());
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

    /// A second run's list never replaces the first's: it is refused, naming the first's hosts.
    #[test]
    fn a_second_list_is_refused_while_the_first_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let _first = Touched::begin(dir.path(), vec![host("a")]).unwrap();
        let e = Touched::begin(dir.path(), vec![host("b")]).unwrap_err();
        assert!(e.to_string().contains("knobs set on a ("), "{e}");
        assert_eq!(read(dir.path()).unwrap(), vec![host("a")]);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "nothing but the list is left: {names:?}");
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

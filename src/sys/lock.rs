//! Machine-wide locks. A block device's queue knobs, an interrupt's affinity and the kernel's
//! tracer belong to the machine, not to one state directory: two iolab processes with
//! different `IOLAB_STATE_DIR`s would otherwise both change them, each measure under the
//! other's settings, and each journal the other's values as "originals". So every writer takes
//! an exclusive flock on one file per thing it changes, in `<root>/run/lock/iolab/` (live:
//! /run/lock/iolab), before its first write, and holds it until everything is put back.
//!
//! The directory hangs off the `SysRoot`, never off the state directory (that is what differs
//! between the two processes), and fixture-root tests get their own. The holder writes its pid
//! into the file so a refused process can say who holds it; a lock whose holder died is free
//! again (flock dies with its process), and the stale pid is simply overwritten.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::SysRoot;

/// One thing only one iolab may change at a time.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Resource {
    /// A block device by kernel name ("loop3"): its queue attributes.
    Device(String),
    /// A network interface by name ("eth0"), while an experiment measures it: its traffic
    /// and its interrupts' placement.
    Nic(String),
    /// An interrupt by number: its affinity.
    Irq(u32),
    /// The kernel's tracer (tracefs `current_tracer` and its options).
    Tracer,
    /// A system-wide setting by name: `sysctl.vm.dirty_ratio`, `module.nvme.io_timeout`,
    /// `cpu.governor` (every CPU's at once), `cpu.smt`, `cpu.boost`, `cpu.cstates`.
    Setting(String),
}

impl Resource {
    fn file_name(&self) -> String {
        match self {
            Resource::Device(d) => format!("block-{d}.lock"),
            Resource::Nic(n) => format!("net-{n}.lock"),
            Resource::Irq(n) => format!("irq-{n}.lock"),
            Resource::Tracer => "tracer.lock".to_string(),
            Resource::Setting(name) => {
                let safe: String = name
                    .chars()
                    .map(|c| match c {
                        'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' | '.' => c,
                        _ => '_',
                    })
                    .collect();
                format!("setting-{safe}.lock")
            }
        }
    }

    fn describe(&self) -> String {
        match self {
            Resource::Device(d) => format!("/dev/{d}"),
            Resource::Nic(n) => format!("network interface {n}"),
            Resource::Irq(n) => format!("IRQ {n}"),
            Resource::Tracer => "the kernel's block tracer".to_string(),
            Resource::Setting(name) => format!("the setting {name}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("{what} is being changed by another iolab ({holder}, lock {path}); wait for it to finish, or stop it, then try again{about}")]
    Held {
        what: String,
        holder: String,
        path: String,
        /// What the holder is and how it ends, when that is known ("" else).
        about: String,
    },
    #[error("{path}: cannot take the machine-wide lock: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what}: {why}")]
    Stale { what: String, why: String },
    #[error("{0:?}: not a device name (expected a kernel name such as loop3 or eth0)")]
    BadName(String),
    #[error("{path}: {why}; iolab takes no lock there (remove it if it is not iolab's)")]
    Untrusted { path: String, why: String },
}

/// A held lock; released when dropped (the file stays, emptied, for the next holder).
#[derive(Debug)]
pub struct MachineLock {
    file: File,
    resource: Resource,
    /// False when refusing over a stale holder: its record must stay for the next look.
    clear: bool,
}

impl MachineLock {
    pub(crate) fn resource(&self) -> &Resource {
        &self.resource
    }

    /// Leaves the record (pid, note) in the lock file on release: the holder's changes stay
    /// in effect (kept, or not restorable), so the next taker must see whose they are.
    pub(crate) fn keep_record(&mut self) {
        self.clear = false;
    }
}

impl Drop for MachineLock {
    fn drop(&mut self) {
        // Still holding the flock: nobody reads a half-cleared file. Failing to clear only
        // leaves a stale pid, which the next holder overwrites.
        if self.clear {
            let _ = self.file.set_len(0);
        }
    }
}

/// Where the lock files of `root` live.
pub(crate) fn lock_dir(root: &SysRoot) -> PathBuf {
    root.base().join("run/lock/iolab")
}

/// The pid of another process holding the lock on `resource` now, found without taking it:
/// the kernel lists every flock in /proc/locks by its file's device and inode. A probe that
/// took the lock, even for an instant, could make an experiment starting then refuse its
/// device. `None` when nobody else holds it (or /proc/locks cannot be read).
pub(crate) fn held_elsewhere(root: &SysRoot, resource: &Resource) -> Option<u32> {
    flock_holder(&lock_dir(root).join(resource.file_name()))
}

/// The pid of another process holding an flock on the file at `path`, found without taking
/// it (see `held_elsewhere`).
pub(crate) fn flock_holder(path: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    let file = format!(
        "{:02x}:{:02x}:{}",
        libc::major(meta.dev()),
        libc::minor(meta.dev()),
        meta.ino()
    );
    let me = std::process::id();
    // "1: FLOCK  ADVISORY  WRITE 4242 00:1a:5678 0 EOF"; a waiter's line has "->" after
    // the number and holds nothing.
    std::fs::read_to_string("/proc/locks")
        .ok()?
        .lines()
        .filter(|l| !l.contains("->"))
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let pid: u32 = f.get(4)?.parse().ok()?;
            (f.get(5) == Some(&file.as_str()) && pid != me).then_some(pid)
        })
}

/// Takes the lock on `resource` without waiting; refuses, naming the holder's pid, when
/// another process has it.
pub fn acquire(root: &SysRoot, resource: Resource) -> Result<MachineLock, LockError> {
    acquire_noting(root, resource, None, &|_, _| None)
}

/// What a holder that died without releasing left in the lock file: its pid and note.
pub(crate) type StaleCheck<'a> = &'a dyn Fn(u32, &Path) -> Option<String>;

/// `acquire`, recording `note` (the holder's journal) beside the pid. A process killed while
/// holding the lock leaves both behind; the next taker's `stale` check sees them (pid, note)
/// when the note is not its own, and a `Some(why)` refuses the lock with that reason, keeping
/// the record for the next look.
pub(crate) fn acquire_noting(
    root: &SysRoot,
    resource: Resource,
    note: Option<&Path>,
    stale: StaleCheck,
) -> Result<MachineLock, LockError> {
    if let Resource::Device(d) | Resource::Nic(d) = &resource {
        if d.is_empty() || d.contains('/') || d == "." || d == ".." {
            return Err(LockError::BadName(d.clone()));
        }
    }
    let dir = lock_dir(root);
    private_dir(&dir)?;
    let path = dir.join(resource.file_name());
    let io = |source| LockError::Io {
        path: path.display().to_string(),
        source,
    };
    // Never through a symbolic link, and readable by this user alone: nobody else can flock
    // it (and so hold every run and restore of the device back).
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(io)?;
    owned_by_me(&path, &file.metadata().map_err(io)?, false)?;
    // SAFETY: flock on a file descriptor we own; no memory is involved.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(io(err));
        }
        let (holder, about) = holder_of(root, &path);
        return Err(LockError::Held {
            what: resource.describe(),
            holder,
            path: path.display().to_string(),
            about,
        });
    }
    let mut earlier = String::new();
    file.read_to_string(&mut earlier).map_err(io)?;
    let mut lines = earlier.lines();
    if let (Some(Ok(pid)), Some(theirs)) = (lines.next().map(str::parse::<u32>), lines.next()) {
        let theirs = Path::new(theirs);
        if Some(theirs) != note {
            if let Some(why) = stale(pid, theirs) {
                // Dropped without clearing: the record stays for whoever looks next.
                drop(MachineLock {
                    file,
                    resource: resource.clone(),
                    clear: false,
                });
                return Err(LockError::Stale {
                    what: resource.describe(),
                    why,
                });
            }
        }
    }
    let me = match note {
        Some(n) => format!("{}\n{}\n", std::process::id(), n.display()),
        None => format!("{}\n", std::process::id()),
    };
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(me.as_bytes()))
        .map_err(io)?;
    Ok(MachineLock {
        file,
        resource,
        clear: true,
    })
}

/// Makes `dir` (and its parents) if missing, then checks that it is a directory of this user
/// that nobody else may write to. The live one lies in /run/lock, which every user may write
/// to: another user who made /run/lock/iolab first, or a symbolic link in it, could otherwise
/// have iolab, as root, open and empty a file of their choosing, or swap a lock file for
/// another while it is held.
fn private_dir(dir: &Path) -> Result<(), LockError> {
    let io = |source| LockError::Io {
        path: dir.display().to_string(),
        source,
    };
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    match std::fs::DirBuilder::new().mode(0o755).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(e)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(io)?;
    owned_by_me(dir, &meta, true)
}

/// Refuses a lock directory or file that is not this user's, not of the kind expected (a
/// symbolic link, a device), or that others may write to.
fn owned_by_me(path: &Path, meta: &std::fs::Metadata, dir: bool) -> Result<(), LockError> {
    match super::own_dir::untrusted(meta, dir) {
        Some(why) => Err(LockError::Untrusted {
            path: path.display().to_string(),
            why,
        }),
        None => Ok(()),
    }
}

/// Takes every lock in `resources` (sorted, duplicates once, so two processes wanting the
/// same set never deadlock or half-succeed); on the first refusal the ones taken are released.
#[cfg(test)]
pub(crate) fn acquire_all(
    root: &SysRoot,
    resources: impl IntoIterator<Item = Resource>,
) -> Result<Vec<MachineLock>, LockError> {
    acquire_all_noting(root, resources, None, &|_, _| None)
}

/// `acquire_all` with `acquire_noting`'s note and stale check.
pub(crate) fn acquire_all_noting(
    root: &SysRoot,
    resources: impl IntoIterator<Item = Resource>,
    note: Option<&Path>,
    stale: StaleCheck,
) -> Result<Vec<MachineLock>, LockError> {
    let mut wanted: Vec<Resource> = resources.into_iter().collect();
    wanted.sort();
    wanted.dedup();
    wanted
        .into_iter()
        .map(|r| acquire_noting(root, r, note, stale))
        .collect()
}

/// "pid N" from a held lock file (the holder may not have written it yet), and what the
/// holder is when it is a controlled host's agent: after its controller was cut off it holds
/// the lock until it notices, and the user is told so rather than left guessing.
fn holder_of(root: &SysRoot, path: &Path) -> (String, String) {
    let mut text = String::new();
    let _ = File::open(path).and_then(|mut f| f.read_to_string(&mut text));
    let pid = match text
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .parse::<u32>()
    {
        Ok(pid) => pid,
        Err(_) => return ("pid not yet recorded".to_string(), String::new()),
    };
    let cmdline = std::fs::read(root.base().join(format!("proc/{pid}/cmdline")));
    if !cmdline.is_ok_and(|c| c.split(|&b| b == 0).nth(1) == Some(b"agent")) {
        return (format!("pid {pid}"), String::new());
    }
    // The controller shows the message its agent here relays: the host is named.
    let host = std::fs::read_to_string(root.base().join("proc/sys/kernel/hostname"))
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let (holder, on) = if host.is_empty() {
        (format!("pid {pid}"), "where it runs".to_string())
    } else {
        (format!("pid {pid} on {host}"), format!("on {host}"))
    };
    let about = format!(
        ". That iolab is an agent, the session of a run controlled from another machine: if \
         that run is over or was cut off, it restores and ends once its connection closes or \
         its controller has been silent for its lease (10 minutes), or at once with `kill \
         {pid}` {on}"
    );
    (holder, about)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lock held by a controlled host's agent says what holds it and how it ends: after a
    /// cut its runs were refused for up to 10 minutes with only a pid to go on.
    #[test]
    fn a_lock_held_by_an_agent_says_how_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::at(dir.path()).unwrap();
        let me = std::process::id();
        let proc_dir = dir.path().join(format!("proc/{me}"));
        std::fs::create_dir_all(&proc_dir).unwrap();
        std::fs::write(proc_dir.join("cmdline"), b"/usr/bin/iolab\0agent\0").unwrap();
        std::fs::create_dir_all(dir.path().join("proc/sys/kernel")).unwrap();
        std::fs::write(dir.path().join("proc/sys/kernel/hostname"), "lab3\n").unwrap();
        let _held = acquire(&root, Resource::Device("loop3".into())).unwrap();
        let msg = acquire(&root, Resource::Device("loop3".into()))
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains(&format!("(pid {me} on lab3, lock "))
                && msg.contains("then try again. That iolab is an agent")
                && msg.ends_with(&format!("at once with `kill {me}` on lab3")),
            "{msg}"
        );
        // Any other holder is named by its pid alone.
        std::fs::write(proc_dir.join("cmdline"), b"/usr/bin/iolab\0run\0x.toml\0").unwrap();
        let msg = acquire(&root, Resource::Device("loop3".into()))
            .unwrap_err()
            .to_string();
        assert!(msg.contains(&format!("(pid {me}, lock ")), "{msg}");
    }

    #[test]
    fn a_second_holder_is_refused_with_the_pid_and_a_released_lock_is_free_again() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::at(dir.path()).unwrap();
        let first = acquire(&root, Resource::Device("loop3".into())).unwrap();
        let file = dir.path().join("run/lock/iolab/block-loop3.lock");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap().trim(),
            std::process::id().to_string()
        );
        // flock locks belong to the open file, so a second open in this process conflicts.
        let err = acquire(&root, Resource::Device("loop3".into())).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("/dev/loop3")
                && msg.contains(&format!("pid {}", std::process::id()))
                && msg.contains("block-loop3.lock"),
            "{msg}"
        );
        // Other things stay free.
        let _irq = acquire(&root, Resource::Irq(29)).unwrap();
        drop(first);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "");
        acquire(&root, Resource::Device("loop3".into())).unwrap();
    }

    #[test]
    fn a_set_is_all_or_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::at(dir.path()).unwrap();
        let _held = acquire(&root, Resource::Irq(7)).unwrap();
        let err =
            acquire_all(&root, [Resource::Device("loop1".into()), Resource::Irq(7)]).unwrap_err();
        assert!(err.to_string().contains("IRQ 7"), "{err}");
        // loop1 was taken first and released with the refusal.
        acquire(&root, Resource::Device("loop1".into())).unwrap();
        assert!(matches!(
            acquire(&root, Resource::Device("../x".into())),
            Err(LockError::BadName(_))
        ));
    }

    #[test]
    fn a_lock_file_or_directory_someone_else_could_have_planted_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::at(dir.path()).unwrap();
        let locks = dir.path().join("run/lock/iolab");
        std::fs::create_dir_all(&locks).unwrap();
        // A symbolic link in place of a lock file: opened as root and emptied, it would
        // have emptied its target.
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::os::unix::fs::symlink(&victim, locks.join("block-loop0.lock")).unwrap();
        let err = acquire(&root, Resource::Device("loop0".into())).unwrap_err();
        assert!(matches!(err, LockError::Io { .. }), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        // A directory others may write to (they could swap a held lock file for another).
        std::fs::set_permissions(&locks, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = acquire(&root, Resource::Irq(3)).unwrap_err().to_string();
        assert!(err.contains("writable by others (mode 777)"), "{err}");
        // Another user's directory (made before iolab first ran, say).
        std::fs::set_permissions(&locks, std::fs::Permissions::from_mode(0o755)).unwrap();
        // SAFETY: geteuid has no arguments and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&locks, Some(12345), None).unwrap();
            let err = acquire(&root, Resource::Irq(3)).unwrap_err().to_string();
            assert!(err.contains("owned by uid 12345"), "{err}");
            std::os::unix::fs::chown(&locks, Some(0), None).unwrap();
        }
        // A lock file of its own is readable by its user alone.
        let _held = acquire(&root, Resource::Irq(3)).unwrap();
        let mode = std::fs::metadata(locks.join("irq-3.lock"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
    }
}

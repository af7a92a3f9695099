//! Confines fio with Landlock, so that what iolab lets fio touch is enforced by the kernel
//! and not only by iolab's checks of its options.
//!
//! fio's client (client mode, `[target] hosts`) trusts its servers with this machine's files:
//! a server may ask the client to send it any file (fio's `SENDFILE`, meant for replaying an
//! iolog kept on the client) and may send it a log to write under a name the server chooses
//! (`IOLOG`), and fio's protocol has no authentication, so whoever answers at a server's
//! address can do both, as the user iolab runs as (usually root). So the client runs in a
//! domain that may read only the system's programs and libraries, the few files name
//! resolution and the C library read, and the run's own directories, and may write only in
//! those directories; as root it also gives up every capability before fio starts. A kernel
//! without Landlock (Linux 5.13 and later, when enabled) gets no unconfined client: client
//! mode is refused there.
//!
//! fio running here may read anything but write only the run's own directories and the
//! target devices of the job's sections that write (and, while it only reads a job, nothing):
//! a read-only experiment cannot open its device for writing even if an option iolab thought
//! harmless tried. Of root's capabilities it keeps what a job can need, those a fio server
//! keeps ([`SERVER_KEEPS`]: cache flushes, priorities, memory locking), and CAP_SYS_RAWIO only
//! when it writes a device (with it, a SCSI pass-through may send write commands on a device
//! opened for reading): whatever got into fio past iolab's checks could otherwise load kernel
//! modules, change owners and modes, or reboot. Other ioctls are left to the open mode (the
//! ones that destroy data need a device opened for writing). A job that runs programs
//! (`allow_exec`) is not confined: the user asked for programs that may write anywhere.
//! Without Landlock fio runs on the option checks alone. A confined fio is also started so
//! that it can start no program (`exec_once`, by the runner and the parse check).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, Context, Result};

use super::exec_once::ExecOnce;

// Landlock's user API (linux/landlock.h); the libc crate has only the syscall numbers.
const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: libc::c_int = 1;
const EXECUTE: u64 = 1 << 0;
const WRITE_FILE: u64 = 1 << 1;
const READ_FILE: u64 = 1 << 2;
const READ_DIR: u64 = 1 << 3;
/// The rights a rule may give a file that is not a directory (the rest are about entries).
const FILE_RIGHTS: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
const TRUNCATE: u64 = 1 << 14;
const IOCTL_DEV: u64 = 1 << 15;
/// linux/capability.h
const CAP_IPC_LOCK: u32 = 14;
const CAP_SYS_RAWIO: u32 = 17;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_SYS_NICE: u32 = 23;
/// What a fio server keeps of root's capabilities: CAP_SYS_ADMIN to flush a block device's
/// cache before a job (fio's `invalidate`), CAP_SYS_NICE for real-time I/O priorities and
/// negative nice values, CAP_IPC_LOCK for `lockmem`. Not CAP_SYS_RAWIO: without it a SCSI
/// pass-through may send only commands its open mode allows.
const SERVER_KEEPS: u64 = 1 << CAP_SYS_ADMIN | 1 << CAP_SYS_NICE | 1 << CAP_IPC_LOCK;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The file-system rights Landlock's ABI `abi` knows: all are handled, so what the rules do
/// not give is refused. ABI 1 has 13 (execute, read, write, make and remove entries), 2 adds
/// linking across directories, 3 truncating, 5 device ioctls.
fn handled_rights(abi: i64) -> u64 {
    match abi {
        ..=1 => (1 << 13) - 1,
        2 => (1 << 14) - 1,
        3 | 4 => (1 << 15) - 1,
        _ => (1 << 16) - 1,
    }
}

/// What fio's client may read of the system (those present): fio, its libraries and a shell
/// in the system trees, the files the loader, the C library and name resolution read, and the
/// CPU and memory layout libnuma and fio's own setup read.
const SYSTEM_READS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.preload",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/dev/urandom",
    "/dev/random",
    "/sys/devices/system/cpu",
    "/sys/devices/system/node",
];

/// A Landlock ruleset ready to be applied to a child process.
#[derive(Debug)]
pub(crate) struct Confinement {
    ruleset: OwnedFd,
    /// The capabilities the program starts without (a mask by number): all for fio's client,
    /// which needs none; all but [`SERVER_KEEPS`] (and CAP_SYS_RAWIO when it writes a device)
    /// for fio here.
    drop: u64,
}

impl Confinement {
    /// The domain fio's client runs in: `program` (the fio to start) and the system's files
    /// readable, `/dev/null` writable, and `dirs` (the run's own) readable and writable.
    pub(crate) fn fio_client(program: &Path, dirs: &[&Path]) -> Result<Confinement> {
        let abi = abi_version().map_err(|e| anyhow!("{}", unavailable(&e)))?;
        let handled = handled_rights(abi);
        let confinement = Confinement::handling(handled, u64::MAX)?;
        let read = READ_FILE | READ_DIR | EXECUTE;
        for path in SYSTEM_READS {
            // What this system does not have needs no rule.
            let _ = confinement.allow(Path::new(path), read & handled);
        }
        let program = resolve(program)
            .ok_or_else(|| anyhow!("cannot find {} to start", program.display()))?;
        confinement.allow(&program, (READ_FILE | EXECUTE) & handled)?;
        confinement.allow(Path::new("/dev/null"), (READ_FILE | WRITE_FILE) & handled)?;
        for dir in dirs {
            confinement.allow(dir, handled)?;
        }
        Ok(confinement)
    }

    /// The domain fio runs in here, `None` when this kernel has no Landlock: everything
    /// readable, `/dev/null`, `dirs` (the run's own) and `devices` (the targets it may write)
    /// writable.
    pub(crate) fn fio_local(dirs: &[&Path], devices: &[&Path]) -> Result<Option<Confinement>> {
        let Ok(abi) = abi_version() else {
            return Ok(None);
        };
        let handled = handled_rights(abi) & !IOCTL_DEV;
        // Without CAP_SYS_RAWIO the kernel lets a SCSI pass-through (fio's sg engine) send
        // only read commands on a device opened for reading.
        let drop = if devices.is_empty() {
            !SERVER_KEEPS
        } else {
            !(SERVER_KEEPS | 1 << CAP_SYS_RAWIO)
        };
        let confinement = Confinement::handling(handled, drop)?;
        confinement.allow(Path::new("/"), (READ_FILE | READ_DIR | EXECUTE) & handled)?;
        confinement.allow(Path::new("/dev/null"), (READ_FILE | WRITE_FILE) & handled)?;
        for dir in dirs {
            confinement.allow(dir, handled)?;
        }
        for device in devices {
            confinement.allow(device, (READ_FILE | WRITE_FILE) & handled)?;
        }
        Ok(Some(confinement))
    }

    /// The domain of a fio server that runs jobs on `device` for whoever reaches its port
    /// (the agent's, `hosts::fio_server`): it may read and execute the system's files, read
    /// `/sys` and `/proc` and the device, write the device only when `writes`, and `/dev/null`,
    /// and it keeps only [`SERVER_KEEPS`] of its capabilities. Executing matters only for its
    /// own start: `exec_once` lets it start no program after that (a rule for fio's file alone
    /// would not do: fio's ELF loader, which it must execute, starts any program it can read).
    /// Refused without Landlock.
    pub(crate) fn fio_server(program: &Path, device: &Path, writes: bool) -> Result<Confinement> {
        let abi = abi_version().map_err(|e| {
            anyhow!(
                "a fio server is started only in a Landlock domain, and this kernel has none \
                 ({e}): Landlock is in Linux 5.13 and later, enabled when `landlock` is among \
                 the kernel's LSMs"
            )
        })?;
        // Device ioctls are left to the open mode, as for fio here.
        let handled = handled_rights(abi) & !IOCTL_DEV;
        let confinement = Confinement::handling(handled, !SERVER_KEEPS)?;
        let read = READ_FILE | READ_DIR;
        for path in SYSTEM_READS {
            let _ = confinement.allow(Path::new(path), (read | EXECUTE) & handled);
        }
        for path in ["/sys", "/proc"] {
            confinement.allow(Path::new(path), read & handled)?;
        }
        let program = resolve(program)
            .ok_or_else(|| anyhow!("cannot find {} to start", program.display()))?;
        confinement.allow(&program, (READ_FILE | EXECUTE) & handled)?;
        confinement.allow(Path::new("/dev/null"), (READ_FILE | WRITE_FILE) & handled)?;
        let device_rights = if writes {
            READ_FILE | WRITE_FILE
        } else {
            READ_FILE
        };
        confinement.allow(device, device_rights & handled)?;
        Ok(confinement)
    }

    /// The capabilities the program starts without.
    #[cfg(test)]
    pub(crate) fn dropped(&self) -> u64 {
        self.drop
    }

    fn handling(handled: u64, drop: u64) -> Result<Confinement> {
        Ok(Confinement {
            ruleset: create_ruleset(handled).context("cannot make a Landlock ruleset")?,
            drop,
        })
    }

    /// Gives the file or tree at `path` the `rights` (only a file's own, if it is a file).
    fn allow(&self, path: &Path, rights: u64) -> Result<()> {
        let file = std::fs::File::options()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
            .open(path)
            .with_context(|| format!("cannot open {} for a Landlock rule", path.display()))?;
        let rights = if file.metadata()?.is_dir() {
            rights
        } else {
            rights & FILE_RIGHTS
        };
        let attr = PathBeneathAttr {
            allowed_access: rights,
            parent_fd: file.as_raw_fd(),
        };
        // SAFETY: the attribute is a live, properly laid out struct; the kernel only reads it.
        let r = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                self.ruleset.as_raw_fd(),
                RULE_PATH_BENEATH,
                &attr as *const PathBeneathAttr,
                0u32,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("cannot add a Landlock rule for {}", path.display()));
        }
        Ok(())
    }

    /// Confines `cmd` ([`Confinement::apply_to`]) and returns how to start it: a confined
    /// program may start no other (`exec_once`), so this start must come after every other
    /// preparation `cmd` gets (`process::run_fed` takes it).
    pub(crate) fn start(&self, cmd: &mut Command) -> Result<ExecOnce> {
        self.apply_to(cmd)?;
        ExecOnce::of(cmd)
    }

    /// Makes `cmd`'s process confine itself just before it starts its program: it drops the
    /// capabilities it was told to, may never gain privileges again, and enters the domain.
    /// `cmd` holds its own descriptor of the ruleset, so `self` may go before the spawn (a
    /// closed descriptor, or its number reused by another file, would fail every start).
    pub(crate) fn apply_to(&self, cmd: &mut Command) -> Result<()> {
        let (ruleset, drop) = (
            self.ruleset
                .try_clone()
                .context("cannot copy the Landlock ruleset's descriptor")?,
            self.drop,
        );
        // SAFETY: only async-signal-safe syscalls on plain data, no allocation.
        unsafe {
            cmd.pre_exec(move || {
                if drop != 0 {
                    drop_capabilities(drop)?;
                }
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(())
    }
}

/// Fails, saying why, when this kernel cannot confine fio's client: checked before a run
/// changes anything.
pub(crate) fn check_available() -> Result<()> {
    abi_version()
        .map(|_| ())
        .map_err(|e| anyhow!("{}", unavailable(&e)))
}

fn unavailable(e: &std::io::Error) -> String {
    format!(
        "fio's client mode needs Landlock to keep fio servers out of this machine's files \
         (a fio server may ask its client to read any file or write a log anywhere), and this \
         kernel has none ({e}): Landlock is in Linux 5.13 and later, enabled when `landlock` \
         is among the kernel's LSMs (CONFIG_LSM or the lsm= boot option)"
    )
}

/// The Landlock ABI version this kernel offers.
pub(crate) fn abi_version() -> std::io::Result<i64> {
    // SAFETY: a null attribute of size 0 with the version flag only asks for the version.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if v < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(v)
    }
}

fn create_ruleset(handled: u64) -> std::io::Result<OwnedFd> {
    let attr = RulesetAttr {
        handled_access_fs: handled,
    };
    // SAFETY: the attribute is live and its size is given; the kernel returns a new fd (close
    // on exec) or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            std::mem::size_of::<RulesetAttr>(),
            0u32,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just gave us this fd and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Removes the capabilities in `which` (a mask by capability number) from the bounding,
/// ambient, effective, permitted and inheritable sets, so the program starts without them even
/// as root. A process without CAP_SETPCAP (not root) has none of them to drop.
fn drop_capabilities(which: u64) -> std::io::Result<()> {
    // SAFETY (whole body): prctl and capset on plain stack data; async-signal-safe.
    unsafe {
        let mut header = CapHeader {
            version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
            pid: 0,
        };
        let mut data = [CapData::default(); 2];
        if libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let held = |d: &CapData| u64::from(d.permitted | d.effective);
        if (held(&data[0]) | held(&data[1]) << 32) & which == 0 {
            return Ok(());
        }
        // Without this, execve as root would give the program the capabilities back.
        let mut cap: u32 = 0;
        while cap < 64 && libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) >= 0 {
            if which & (1 << cap) != 0 {
                if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Fails only where ambient capabilities do not exist (before Linux 4.3).
                libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_LOWER, cap, 0, 0);
            }
            cap += 1;
        }
        for (half, d) in data.iter_mut().enumerate() {
            let keep = !((which >> (32 * half)) as u32);
            d.effective &= keep;
            d.permitted &= keep;
            d.inheritable &= keep;
        }
        if libc::syscall(libc::SYS_capset, &header, data.as_ptr()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `program` as the path exec would run: itself when it names a path, else the first match on
/// PATH.
pub(crate) fn resolve(program: &Path) -> Option<PathBuf> {
    if program.as_os_str().as_bytes().contains(&b'/') {
        return Some(program.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// True when this kernel has Landlock (and this is root, when `root`); otherwise says the
    /// test is skipped, and fails under CI, which runs as root on a kernel that has it.
    pub(crate) fn landlock_or_skip(root: bool) -> bool {
        let missing = match check_available() {
            Err(e) => e.to_string(),
            Ok(()) if root && !crate::sys::is_root() => "needs root".to_string(),
            Ok(()) => return true,
        };
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(!ci, "prerequisite missing under CI: {missing}");
        say!("skipped: {missing}");
        false
    }

    fn run_confined(script: &str, dirs: &[&Path]) -> std::process::Output {
        let sh = Path::new("/bin/sh");
        run_in(&Confinement::fio_client(sh, dirs).unwrap(), script)
    }

    fn run_in(confinement: &Confinement, script: &str) -> std::process::Output {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", script]);
        confinement.apply_to(&mut cmd).unwrap();
        cmd.output().unwrap()
    }

    /// The effective capabilities a confined shell starts with, from its /proc status.
    fn effective_capabilities(confinement: &Confinement) -> u64 {
        let out = run_in(confinement, "grep CapEff /proc/self/status");
        let text = String::from_utf8_lossy(&out.stdout);
        let hex = text.split_whitespace().nth(1).expect("no CapEff line");
        u64::from_str_radix(hex, 16).unwrap()
    }

    /// fio here keeps only what a job can need: a fio server's capabilities, and raw I/O
    /// when it writes a device (without it a SCSI pass-through sends no write command on a
    /// device opened for reading). Not, for one, CAP_SYS_MODULE or CAP_FOWNER, which code
    /// loaded into fio past iolab's checks used (a mode changed) or could have.
    #[test]
    fn fio_here_keeps_only_the_capabilities_a_job_needs() {
        if !landlock_or_skip(true) {
            return;
        }
        let own = tempfile::tempdir().unwrap();
        let reader = Confinement::fio_local(&[own.path()], &[]).unwrap().unwrap();
        assert_eq!(effective_capabilities(&reader), SERVER_KEEPS);
        let writer = Confinement::fio_local(&[own.path()], &[Path::new("/dev/null")])
            .unwrap()
            .unwrap();
        assert_eq!(
            effective_capabilities(&writer),
            SERVER_KEEPS | 1 << CAP_SYS_RAWIO
        );
    }

    #[test]
    fn a_confined_program_reads_and_writes_only_its_own_directories() {
        if !landlock_or_skip(false) {
            return;
        }
        let own = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        std::fs::write(own.path().join("job"), "mine\n").unwrap();
        std::fs::write(other.path().join("secret"), "not yours\n").unwrap();
        let out = run_confined(
            &format!(
                "cat {own}/job; cat {other}/secret; echo a > {own}/log; echo b > {other}/log; \
                 echo c > /dev/null && echo null-ok",
                own = own.path().display(),
                other = other.path().display()
            ),
            &[own.path()],
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout, "mine\nnull-ok\n");
        assert!(own.path().join("log").exists());
        assert!(!other.path().join("log").exists());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("Permission denied"), "{stderr}");
    }

    /// The command carries its own copy of the ruleset: the confinement may be dropped (its
    /// descriptor closed, and the number taken by another file) before the spawn.
    #[test]
    fn a_command_stays_confined_after_its_confinement_is_dropped() {
        if !landlock_or_skip(false) {
            return;
        }
        let own = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let confinement = Confinement::fio_client(Path::new("/bin/sh"), &[own.path()]).unwrap();
        let mut cmd = Command::new("/bin/sh");
        let script = format!(
            "echo a > {own}/log; echo b > {other}/log",
            own = own.path().display(),
            other = other.path().display()
        );
        cmd.args(["-c", &script]);
        confinement.apply_to(&mut cmd).unwrap();
        drop(confinement);
        let _reuses_the_number = std::fs::File::open("/dev/null").unwrap();
        let status = cmd.status().expect("the confined command did not start");
        assert!(!status.success());
        assert!(own.path().join("log").exists());
        assert!(!other.path().join("log").exists());
    }

    /// As root the program has no capabilities: a file only its mode protects is protected.
    #[test]
    fn a_confined_program_started_by_root_has_no_capabilities() {
        if !landlock_or_skip(true) {
            return;
        }
        let own = tempfile::tempdir().unwrap();
        let locked = own.path().join("read-only");
        std::fs::write(&locked, "kept\n").unwrap();
        std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o444))
            .unwrap();
        let out = run_confined(
            &format!("echo changed > {}", locked.display()),
            &[own.path()],
        );
        assert!(!out.status.success());
        assert_eq!(std::fs::read_to_string(&locked).unwrap(), "kept\n");
    }

    #[test]
    fn every_known_right_is_handled() {
        assert_eq!(handled_rights(1), 0x1fff);
        assert_eq!(handled_rights(3), 0x7fff);
        assert_eq!(handled_rights(6), 0xffff);
    }
}

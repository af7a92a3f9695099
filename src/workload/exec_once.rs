//! Starts a program that can never start another: a seccomp filter refuses `execve` and
//! `execveat` to the program and to everything it forks, except the one `execveat` that
//! starts it (of a descriptor only this start holds, by its number, with `AT_EMPTY_PATH`).
//!
//! fio runs programs when a job asks (`exec_prerun`, the `exec` engine). iolab's option
//! allow-list keeps those out of its jobs unless the experiment allows them; a fio server runs
//! whatever job reaches its port (fio's protocol has no authentication). Every fio iolab
//! confines (`confine`) is started this way, so a program is refused by the kernel whatever
//! the job says. Landlock alone cannot do it: it can refuse to execute every file but fio and
//! its ELF loader, and the loader, run as a program, starts any program it can read.

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

// linux/filter.h and linux/seccomp.h
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;
const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
/// Offsets in `struct seccomp_data`: the syscall number, the audit architecture, and the low
/// halves (little-endian) of the first and fifth arguments.
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0: u32 = 16;
const ARG4: u32 = 16 + 4 * 8;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH: u32 = 0;
/// x32 system calls (x86_64 only): numbers from here on would bypass the checks below.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: Option<u32> = Some(0x4000_0000);
#[cfg(not(target_arch = "x86_64"))]
const X32_SYSCALL_BIT: Option<u32> = None;

#[repr(C)]
#[derive(Clone, Copy)]
struct SockFilter {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

#[repr(C)]
struct SockFprog {
    len: u16,
    filter: *const SockFilter,
}

/// A start of `program` prepared in the parent, so the child only makes system calls.
pub(crate) struct ExecOnce {
    program: OwnedFd,
    filter: Vec<SockFilter>,
    _strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

// SAFETY: the raw pointers point into `_strings`, owned alongside and never changed; the child
// reads them after fork, where no other thread exists.
unsafe impl Send for ExecOnce {}
unsafe impl Sync for ExecOnce {}

impl ExecOnce {
    /// `cmd`'s program, arguments and environment (this process's, with `cmd`'s changes).
    pub(crate) fn of(cmd: &Command) -> Result<Self> {
        // Said as a failed start says it: callers tell a missing program by these words.
        let program = super::confine::resolve(Path::new(cmd.get_program())).with_context(|| {
            format!(
                "cannot start {}: {}",
                cmd.get_program().display(),
                std::io::Error::from_raw_os_error(libc::ENOENT)
            )
        })?;
        let args: Vec<&OsStr> = cmd.get_args().collect();
        let mut env: std::collections::BTreeMap<OsString, OsString> = std::env::vars_os().collect();
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => env.insert(k.to_owned(), v.to_owned()),
                None => env.remove(k),
            };
        }
        ExecOnce::new(&program, &args, env)
    }

    /// `program` with `args` (its argv[1..]) and exactly the environment `env`.
    pub(crate) fn new<K: AsRef<OsStr>, V: AsRef<OsStr>>(
        program: &Path,
        args: &[&OsStr],
        env: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self> {
        let file = std::fs::File::options()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
            .open(program)
            .with_context(|| format!("cannot open {} to start it", program.display()))?;
        // Through a descriptor closed at exec, the kernel cannot hand a script to its
        // interpreter (which could start nothing anyway).
        let mut start = [0u8; 2];
        let read = std::fs::File::open(program)
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut start));
        if read.is_ok() && &start == b"#!" {
            bail!(
                "{} is a script: iolab starts it so that it can start no other program, and a \
                 script's interpreter would have to; name the binary itself",
                program.display()
            );
        }
        let program_fd = OwnedFd::from(file);
        let cstring = |b: &[u8]| CString::new(b).context("a NUL byte in an argument");
        let mut strings = vec![cstring(program.as_os_str().as_bytes())?];
        for a in args {
            strings.push(cstring(a.as_bytes())?);
        }
        let argc = strings.len();
        for (k, v) in env {
            let pair = [k.as_ref().as_bytes(), b"=", v.as_ref().as_bytes()].concat();
            strings.push(cstring(&pair)?);
        }
        let pointers = |s: &[CString]| {
            let mut p: Vec<*const libc::c_char> = s.iter().map(|c| c.as_ptr()).collect();
            p.push(std::ptr::null());
            p
        };
        let argv = pointers(&strings[..argc]);
        let envp = pointers(&strings[argc..]);
        let filter = filter(program_fd.as_raw_fd())?;
        Ok(ExecOnce {
            program: program_fd,
            filter,
            _strings: strings,
            argv,
            envp,
        })
    }

    /// Makes `cmd`'s child start the program itself, under the filter, after every other
    /// preparation `cmd` has (register this last): `cmd`'s own program, arguments and
    /// environment are never used. The child must not be able to gain privileges (no-new-privs,
    /// as `Confinement::apply_to` sets) unless it holds CAP_SYS_ADMIN.
    pub(crate) fn apply_to(self, cmd: &mut Command) {
        // SAFETY: prctl and execveat on memory prepared before the fork; no allocation.
        unsafe {
            cmd.pre_exec(move || {
                // The whole (Send) value, not its fields one by one.
                let once = &self;
                let prog = SockFprog {
                    len: once.filter.len() as u16,
                    filter: once.filter.as_ptr(),
                };
                if libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::syscall(
                    libc::SYS_execveat,
                    once.program.as_raw_fd(),
                    c"".as_ptr(),
                    once.argv.as_ptr(),
                    once.envp.as_ptr(),
                    libc::AT_EMPTY_PATH,
                );
                Err(std::io::Error::last_os_error())
            });
        }
    }
}

/// The filter: any other architecture's system calls kill the process; `execve` and every
/// `execveat` but `execveat(fd, "", ..., AT_EMPTY_PATH)` fail with EPERM; all else passes.
fn filter(fd: i32) -> Result<Vec<SockFilter>> {
    if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        bail!("starting a program that may start no other is supported on x86_64 and aarch64");
    }
    let op = |code, k, jt, jf| SockFilter { code, jt, jf, k };
    let ret = |k| op(BPF_RET_K, k, 0, 0);
    let deny = SECCOMP_RET_ERRNO | libc::EPERM as u32;
    let mut f = vec![
        op(BPF_LD_W_ABS, ARCH, 0, 0),
        // jf: to the kill at the end, counted below once the length is known.
        op(BPF_JEQ_K, AUDIT_ARCH, 0, 0),
        op(BPF_LD_W_ABS, NR, 0, 0),
    ];
    if let Some(bit) = X32_SYSCALL_BIT {
        f.push(op(BPF_JGE_K, bit, 8, 0));
    }
    f.extend([
        op(BPF_JEQ_K, libc::SYS_execve as u32, 7, 0),
        op(BPF_JEQ_K, libc::SYS_execveat as u32, 1, 0),
        ret(SECCOMP_RET_ALLOW),
        op(BPF_LD_W_ABS, ARG0, 0, 0),
        op(BPF_JEQ_K, fd as u32, 0, 3),
        op(BPF_LD_W_ABS, ARG4, 0, 0),
        op(BPF_JEQ_K, libc::AT_EMPTY_PATH as u32, 0, 1),
        ret(SECCOMP_RET_ALLOW),
        ret(deny),
        ret(SECCOMP_RET_KILL_PROCESS),
    ]);
    f[1].jf = (f.len() - 3) as u8;
    Ok(f)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// This system's ELF loader: run as a program, it starts any program it can read.
    pub(crate) fn elf_loader() -> &'static str {
        ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
            .into_iter()
            .find(|l| Path::new(l).exists())
            .expect("no ELF loader where expected")
    }

    fn run(script: &str) -> std::process::Output {
        let once = ExecOnce::new(
            Path::new("/bin/sh"),
            &[OsStr::new("-c"), OsStr::new(script)],
            [("PATH", "/usr/bin:/bin")],
        )
        .unwrap();
        let mut cmd = Command::new("/nonexistent-program-never-started");
        cmd.env("NOT_PASSED", "1");
        // Without no-new-privs, installing a filter needs CAP_SYS_ADMIN.
        // SAFETY: prctl only.
        unsafe {
            cmd.pre_exec(
                || match libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) {
                    0 => Ok(()),
                    _ => Err(std::io::Error::last_os_error()),
                },
            );
        }
        once.apply_to(&mut cmd);
        cmd.output().unwrap()
    }

    /// The program starts, with its own arguments and environment only, and can start nothing:
    /// not a program, not the ELF loader run as one.
    #[test]
    fn the_program_starts_and_can_start_no_other() {
        let loader = elf_loader();
        let out = run(&format!(
            "echo \"started ${{NOT_PASSED:-alone}}\"; /bin/true && echo ran-true; \
             {loader} /bin/true && echo ran-loader; echo still-here"
        ));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout, "started alone\nstill-here\n", "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("Operation not permitted"), "{stderr}");
    }

    #[test]
    fn a_script_is_refused_before_any_start() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("fio");
        std::fs::write(&script, "#!/bin/sh\nexec /usr/bin/fio \"$@\"\n").unwrap();
        let e = ExecOnce::new(&script, &[], [("A", "b")]).err().unwrap();
        assert!(e.to_string().contains("is a script"), "{e}");
    }

    #[test]
    fn a_program_that_cannot_be_opened_is_an_error_before_any_start() {
        let e = ExecOnce::new(Path::new("/nonexistent/fio"), &[], [("A", "b")])
            .err()
            .unwrap();
        assert!(e.to_string().contains("/nonexistent/fio"), "{e}");
    }
}

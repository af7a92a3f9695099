//! Everything iolab knows about the kernel comes through here: one rooted reader (`SysRoot`)
//! so the same code runs on the live machine and on a snapshot directory, and pure parsers
//! that turn the text of /proc and /sys files into values without doing any I/O themselves.

pub mod lock;
pub(crate) mod own_dir;
pub mod parse;
pub(crate) mod process;
pub(crate) mod reaper;
mod root;
pub(crate) mod user_file;

pub(crate) use root::MODES_FILE;
pub use root::{SysError, SysRoot};

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `access(2)` with W_OK: also right for root, where the permission bits say nothing but a
/// read-only mount still refuses (EROFS).
pub(crate) fn writable(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// CLOCK_REALTIME minus CLOCK_MONOTONIC now, in nanoseconds: what turns a time on the
/// monotonic clock (block traces' `trace_clock=mono`) into one since the Unix epoch.
pub(crate) fn realtime_minus_monotonic_ns() -> f64 {
    let read = |clock| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec the call writes; both clocks always exist.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
    };
    read(libc::CLOCK_REALTIME) - read(libc::CLOCK_MONOTONIC)
}

/// The CPUs online on `root`'s machine (`/sys/devices/system/cpu/online`); `None` when it
/// cannot be read.
pub(crate) fn online_cpus(root: &SysRoot) -> Option<Vec<u32>> {
    let text = root.attr("/sys/devices/system/cpu/online")?;
    parse::cpulist(&text).ok()
}

/// True when this process runs with effective uid 0 (from /proc/self/status, so no libc call).
/// Commands that write knobs or create devices check it to give a clear error; tests that need
/// real devices skip themselves without it.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|rest| rest.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

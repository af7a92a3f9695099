//! Everything iolab knows about the kernel comes through here: one rooted reader (`SysRoot`)
//! so the same code runs on the live machine and on a snapshot directory, and pure parsers
//! that turn the text of /proc and /sys files into values without doing any I/O themselves.

pub mod lock;
pub mod parse;
mod root;

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

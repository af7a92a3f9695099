//! A read-only memory map of a trace file. Reading a trace through `read()` copies every byte
//! into a buffer first (and copies a record straddling the buffer's end once more); a map lets
//! the decoder read the page cache in place, which is most of what a decoder of 48-byte
//! records does. Used only for regular files; pipes, empty files and anything mmap refuses
//! fall back to `read()`.
//!
//! A file truncated by another process while mapped would fault (SIGBUS) on the lost pages;
//! traces are written once and then only read, and `trace record` appends, never truncates.

use std::fs::File;
use std::os::fd::AsRawFd;

pub struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
}

// The map is read-only and owned: sharing or moving it between threads is safe.
unsafe impl Send for Mapped {}
unsafe impl Sync for Mapped {}

impl Mapped {
    /// Maps the whole of `file` read-only; `None` when it cannot be mapped (not a regular file,
    /// empty, or mmap failed), and the caller reads it instead.
    pub fn new(file: &File) -> Option<Mapped> {
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() == 0 {
            return None;
        }
        let len = usize::try_from(meta.len()).ok()?;
        // SAFETY: a fresh private read-only mapping of a file we hold open; the kernel checks
        // every argument and returns MAP_FAILED on error.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return None;
        }
        // SAFETY: advice on the mapping made above; failure only loses the hint. The file
        // is read once from start to end: read ahead, and drop pages behind.
        unsafe {
            libc::madvise(ptr, len, libc::MADV_SEQUENTIAL);
        }
        Some(Mapped { ptr, len })
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: ptr/len describe a live PROT_READ mapping owned by self until drop.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping this value owns, exactly once.
        unsafe {
            libc::munmap(self.ptr, self.len);
        }
    }
}

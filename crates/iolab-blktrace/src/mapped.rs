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
    /// Bytes before this offset were handed back to the kernel (see [`Mapped::release`]).
    released: usize,
}

/// How much to read past the last release before releasing again.
const RELEASE_STEP: usize = 8 << 20;

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
        Some(Mapped {
            ptr,
            len,
            released: 0,
        })
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: ptr/len describe a live PROT_READ mapping owned by self until drop.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Mapped {
    /// Says the bytes before `upto` will not be read again: their pages leave this process
    /// (they stay in the page cache), so resident memory stays at a few MiB whatever the
    /// file's size, as it does when reading through a buffer.
    pub fn release(&mut self, upto: usize) {
        let page = 4096;
        let upto = upto.min(self.len) / page * page;
        if upto < self.released + RELEASE_STEP {
            return;
        }
        // SAFETY: a page-aligned range inside our own read-only private file mapping; the
        // pages are refetched from the file should they ever be touched again.
        unsafe {
            libc::madvise(
                (self.ptr as *mut u8).add(self.released) as *mut libc::c_void,
                upto - self.released,
                libc::MADV_DONTNEED,
            );
        }
        self.released = upto;
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

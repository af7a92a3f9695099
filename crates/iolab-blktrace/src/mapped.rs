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
    /// Bytes before this offset were handed back to the kernel (see [`Mapped::advance`]).
    released: usize,
    /// Bytes before this offset are mapped in ahead of the reader; 0 once the kernel has
    /// refused to (before Linux 5.14), and then pages come in by faults.
    populated: usize,
}

/// How much to read past the last release before releasing again, and how far ahead pages
/// are mapped in: at most twice this is mapped at once.
const RELEASE_STEP: usize = 4 << 20;
const FIRST_STEP: usize = 256 << 10;

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
        let mut m = Mapped {
            ptr,
            len,
            released: 0,
            populated: 0,
        };
        m.populate(0);
        Some(m)
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: ptr/len describe a live PROT_READ mapping owned by self until drop.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Mapped {
    /// Maps the pages of the step from `from` in at once, half a step before they are needed:
    /// otherwise each 64 KiB (the kernel's fault-around) is a page fault, about 950 on a
    /// 62 MB trace (measured: 770 fewer faults per run), a few microseconds each in a VM.
    fn populate(&mut self, from: usize) {
        if self.populated == usize::MAX || from + RELEASE_STEP / 2 <= self.populated {
            return;
        }
        let start = self.populated.max(from);
        // The first step is short, so the first records are ready soon.
        let step = if self.populated == 0 {
            FIRST_STEP
        } else {
            RELEASE_STEP
        };
        let end = (from + step).min(self.len);
        if start >= end {
            return;
        }
        let start = start / 4096 * 4096;
        // SAFETY: advice on a page-aligned range inside our own read-only mapping; it only
        // fills page tables from the page cache (or reads the file), never writes.
        let r = unsafe {
            libc::madvise(
                (self.ptr as *mut u8).add(start) as *mut libc::c_void,
                end - start,
                libc::MADV_POPULATE_READ,
            )
        };
        self.populated = if r == 0 { end } else { usize::MAX };
    }

    /// Says the reader has reached `upto`: the bytes before it will not be read again, so
    /// their pages leave this process (they stay in the page cache) and resident memory stays
    /// at a few MiB whatever the file's size, as it does when reading through a buffer; the
    /// pages ahead are mapped in.
    pub fn advance(&mut self, upto: usize) {
        self.populate(upto);
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

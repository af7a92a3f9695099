//! Reads a small text file a user names as input (an experiment, a fio job file, an
//! interrupt plan). Such a name
//! can be anything: `/dev/zero` was read until the machine ran out of memory (24 GB, the
//! process killed by the OOM killer), and a FIFO blocked the run where Ctrl-C could not stop
//! it. Only a regular file is read, opened so that a FIFO cannot block, and only up to a
//! limit far above any real one.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The most such a file may hold (a plan for thousands of interrupts is a few MiB).
pub(crate) const MAX_BYTES: u64 = 16 << 20;

/// The text of the regular file `path`, at most `MAX_BYTES`; why not, as a sentence.
pub(crate) fn read_text(path: &Path) -> Result<String, String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > MAX_BYTES {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    // A file growing while it is read stops at the limit all the same.
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(too_large());
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".into())
}

fn too_large() -> String {
    format!(
        "larger than {} MiB, far more than any experiment, job or plan file",
        MAX_BYTES >> 20
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_small_regular_text_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("e.toml");
        std::fs::write(&ok, "name = \"x\"\n").unwrap();
        assert_eq!(read_text(&ok).unwrap(), "name = \"x\"\n");
        let big = dir.path().join("big.toml");
        std::fs::write(&big, vec![b'#'; MAX_BYTES as usize + 1]).unwrap();
        assert!(read_text(&big).unwrap_err().contains("larger than 16 MiB"));
        let binary = dir.path().join("b.toml");
        std::fs::write(&binary, [0xff, 0xfe, 0]).unwrap();
        assert_eq!(read_text(&binary).unwrap_err(), "not UTF-8 text");
        // Neither blocks nor reads forever.
        let fifo = dir.path().join("f.toml");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(read_text(&fifo).unwrap_err(), "not a regular file");
        assert_eq!(
            read_text(Path::new("/dev/zero")).unwrap_err(),
            "not a regular file"
        );
        assert!(read_text(dir.path()).is_err());
    }
}

//! Whether the results file can be written here, decided before SQLite is asked: SQLite's own
//! answer for a read-only directory is "unable to open database file", which names neither
//! the file nor the cause, and opening read-write first would fail the reading commands
//! (`runs`, `show`, ...) that archived results on read-only media must still serve.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The directory a database file lives in (`.` for a bare file name).
fn directory(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `access(2)` with W_OK: also right for root, where the permission bits say nothing but a
/// read-only mount still refuses (EROFS).
fn writable(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// Why the database at `path` cannot be written, or `None` when it can (or does not exist
/// yet and its directory is writable). SQLite writes a journal beside the file, so the
/// directory must be writable as well as the file.
pub(super) fn read_only_reason(path: &Path) -> Option<String> {
    let dir = directory(path);
    if path.exists() && !writable(path) {
        return Some("the file is read-only".to_string());
    }
    if dir.exists() && !writable(&dir) {
        return Some(format!(
            "its directory {} is read-only (SQLite needs to write a journal beside the file)",
            dir.display()
        ));
    }
    None
}

/// A SQLite URI for a read-only open of `path`; `immutable` tells SQLite nothing will change
/// the file, so it takes no locks and looks for no journal (none can exist in a read-only
/// directory).
pub(super) fn file_uri(path: &Path, immutable: bool) -> String {
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        // Percent-encode everything a URI would read specially.
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str(if immutable {
        "?mode=ro&immutable=1"
    } else {
        "?mode=ro"
    });
    uri
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_escape_what_sqlite_would_read_specially() {
        assert_eq!(
            file_uri(Path::new("/a b/x?y#z%.db"), true),
            "file:/a%20b/x%3Fy%23z%25.db?mode=ro&immutable=1"
        );
        assert_eq!(file_uri(Path::new("r.db"), false), "file:r.db?mode=ro");
    }

    #[test]
    fn a_new_file_in_a_writable_directory_is_writable() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_only_reason(&dir.path().join("new.db")), None);
    }
}

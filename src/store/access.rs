//! Whether the results file can be written here, decided before SQLite is asked: SQLite's own
//! answer for a read-only directory is "unable to open database file", which names neither
//! the file nor the cause, and opening read-write first would fail the reading commands
//! (`runs`, `show`, ...) that archived results on read-only media must still serve. And what
//! kind of filesystem it is on, where a network one explains SQLite's bare "disk I/O error".

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The directory a database file lives in (`.` for a bare file name).
pub(super) fn directory(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The network filesystem the database at `path` lives on (its type, as the kernel's mount
/// table names it), if it is on one: SQLite's write-ahead log needs memory shared between
/// processes through a mapped file, which these do not give. (The mount table, not
/// `statfs`: a 9p export of QEMU reports the host's filesystem there.)
pub(super) fn network_filesystem(path: &Path) -> Option<String> {
    let dir = std::fs::canonicalize(directory(path)).ok()?;
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    network_kind(&filesystem_of(&table, &dir)?)
}

/// The type of the filesystem mounted nearest above `dir` in a mountinfo table (the last
/// such mount: a later one hides an earlier one at the same place).
fn filesystem_of(table: &str, dir: &Path) -> Option<String> {
    let mut best: Option<(usize, String)> = None;
    for line in table.lines() {
        let Some((head, tail)) = line.split_once(" - ") else {
            continue;
        };
        let (Some(mount), Some(kind)) = (head.split(' ').nth(4), tail.split(' ').next()) else {
            continue;
        };
        let mount = unescape(mount);
        let depth = Path::new(&mount).components().count();
        if dir.starts_with(&mount) && best.as_ref().is_none_or(|(d, _)| depth >= *d) {
            best = Some((depth, kind.to_string()));
        }
    }
    best.map(|(_, kind)| kind)
}

/// mountinfo writes space, tab, newline and backslash in paths as `\040` and the like.
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn network_kind(kind: &str) -> Option<String> {
    const NETWORK: [&str; 10] = [
        "nfs",
        "cifs",
        "smb",
        "9p",
        "fuse",
        "ceph",
        "afs",
        "lustre",
        "glusterfs",
        "gfs2",
    ];
    NETWORK
        .iter()
        .any(|n| kind.starts_with(n))
        .then(|| kind.to_string())
}

/// Why the database at `path` cannot be written, or `None` when it can (or does not exist
/// yet and its directory is writable). SQLite writes a journal beside the file, so the
/// directory must be writable as well as the file.
pub(super) fn read_only_reason(path: &Path) -> Option<String> {
    let dir = directory(path);
    if path.exists() && !crate::sys::writable(path) {
        return Some("the file is read-only".to_string());
    }
    if dir.exists() && !crate::sys::writable(&dir) {
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
    fn the_filesystem_is_the_nearest_mount_above_the_directory() {
        let table = "\
22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
30 22 0:40 / /home rw shared:9 - nfs4 srv:/home rw,vers=4.2
31 30 0:41 / /home/lab\\040results rw - 9p lab rw
32 22 0:42 / /home/x rw - tmpfs tmpfs rw
33 22 0:43 / /home/x rw - cifs //srv/x rw
";
        let of = |d: &str| filesystem_of(table, Path::new(d));
        assert_eq!(of("/var/lib/iolab").as_deref(), Some("ext4"));
        assert_eq!(of("/home/ann").as_deref(), Some("nfs4"));
        assert_eq!(of("/home/lab results/db").as_deref(), Some("9p"));
        // A later mount at the same place hides the earlier one.
        assert_eq!(of("/home/x").as_deref(), Some("cifs"));
        // /homeless is not under /home.
        assert_eq!(of("/homeless").as_deref(), Some("ext4"));
        for (kind, network) in [("nfs4", true), ("fuse.sshfs", true), ("9p", true)] {
            assert_eq!(network_kind(kind).is_some(), network, "{kind}");
        }
        for local in ["ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs"] {
            assert_eq!(network_kind(local), None, "{local}");
        }
    }

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

//! Directories iolab makes for what it writes: an experiment's traces and fio logs beside its
//! database, charts, exports and snapshots. iolab usually runs as root and writes into these
//! by path, and their names are predictable (`iolab.db.traces/experiment-1/cell0-round0`,
//! `trace-plots`). Run from /tmp, a directory another user made there first would let that
//! user put a symbolic link where root then writes (an /etc file emptied and overwritten), or
//! hand fio, whose log directory bounds what it may write, the run of /etc. So each directory
//! iolab names must be one it made, or one of its own user that nobody else may write to;
//! the place the user chose to put them may be shared only if it is sticky, as /tmp is, where
//! nobody may move or replace another's entries.

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Component, Path};

/// Makes `path`, a directory below `base` (the place the user chose: a database's directory,
/// the parent of an `-o DIR`), with each missing directory on the way; each that exists must
/// pass [`untrusted`]. The error names the directory and what to do.
pub(crate) fn make_own_dir(base: &Path, path: &Path) -> Result<(), String> {
    let (base, below) = if base.as_os_str().is_empty() {
        (Path::new("."), path)
    } else {
        let below = path
            .strip_prefix(base)
            .map_err(|_| format!("{} does not lie below {}", path.display(), base.display()))?;
        (base, below)
    };
    std::fs::create_dir_all(base).map_err(|e| format!("cannot make {}: {e}", base.display()))?;
    let meta = std::fs::metadata(base).map_err(|e| format!("{}: {e}", base.display()))?;
    if meta.mode() & 0o002 != 0 && meta.mode() & 0o1000 == 0 {
        return Err(format!(
            "{}: anyone may write to it and it is not sticky (mode {:o}), so another user could \
             replace what iolab makes there; choose another place",
            base.display(),
            meta.mode() & 0o7777
        ));
    }
    let mut at = base.to_path_buf();
    for part in below.components() {
        let name = match part {
            Component::Normal(name) => name,
            Component::CurDir => continue,
            _ => return Err(format!("{}: a plain path is needed here", path.display())),
        };
        at.push(name);
        match std::fs::DirBuilder::new().mode(0o755).create(&at) {
            Ok(()) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot make {}: {e}", at.display())),
        }
        let meta = std::fs::symlink_metadata(&at).map_err(|e| format!("{}: {e}", at.display()))?;
        if let Some(why) = untrusted(&meta, true) {
            return Err(format!(
                "{} is {why}: iolab writes there, so it must be a directory iolab made or one of \
                 its user's that nobody else may write to; remove it, or choose another place",
                at.display()
            ));
        }
    }
    Ok(())
}

/// Why a file or directory is not safe to write into as this process's user, or `None`: it is
/// not of the kind expected (a symbolic link, a device), belongs to another user, or others
/// may write to it.
pub(crate) fn untrusted(meta: &std::fs::Metadata, dir: bool) -> Option<String> {
    let kind_ok = if dir {
        meta.file_type().is_dir()
    } else {
        meta.file_type().is_file()
    };
    if !kind_ok {
        return Some(format!(
            "not a {}",
            if dir { "directory" } else { "regular file" }
        ));
    }
    // SAFETY: geteuid has no arguments and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Some(format!(
            "owned by uid {}, not by this iolab's user (uid {me})",
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Some(format!(
            "writable by others (mode {:o})",
            meta.mode() & 0o7777
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_directory_iolab_names_must_be_its_own() {
        let base = tempfile::tempdir().unwrap();
        let path = base
            .path()
            .join("iolab.db.traces/experiment-1/cell0-round0");
        make_own_dir(base.path(), &path).unwrap();
        assert!(path.is_dir());
        // Again: they are its own now.
        make_own_dir(base.path(), &path).unwrap();

        // A symbolic link on the way, as another user would plant one.
        let elsewhere = tempfile::tempdir().unwrap();
        let traces = base.path().join("other.db.traces");
        std::os::unix::fs::symlink(elsewhere.path(), &traces).unwrap();
        let e = make_own_dir(base.path(), &traces.join("experiment-1")).unwrap_err();
        assert!(e.contains("other.db.traces is not a directory"), "{e}");
        assert!(!elsewhere.path().join("experiment-1").exists());

        // One that others may write to.
        let open = base.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = make_own_dir(base.path(), &open.join("x")).unwrap_err();
        assert!(e.contains("open is writable by others (mode 777)"), "{e}");

        // Another user's, as one made first in /tmp would be (root can make one to test).
        if unsafe { libc::geteuid() } == 0 {
            let theirs = base.path().join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            let e = make_own_dir(base.path(), &theirs.join("x")).unwrap_err();
            assert!(e.contains("theirs is owned by uid 65534"), "{e}");
        }

        // The chosen place may be shared if sticky (as /tmp), not otherwise.
        let e = make_own_dir(&open, &open.join("x")).unwrap_err();
        assert!(
            e.contains("anyone may write to it and it is not sticky"),
            "{e}"
        );
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        make_own_dir(&open, &open.join("x")).unwrap();

        // A path that climbs out is refused; the current directory is the chosen place.
        assert!(make_own_dir(base.path(), &base.path().join("a/../b")).is_err());
        make_own_dir(Path::new(""), Path::new(".")).unwrap();
    }
}

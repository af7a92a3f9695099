//! Directories iolab makes for what it writes: an experiment's traces and fio logs beside its
//! database, charts, exports and snapshots. iolab usually runs as root and writes into these
//! by path, and their names are predictable (`iolab.db.traces/experiment-1/cell0-round0`,
//! `trace-plots`). Run from /tmp, a directory another user made there first would let that
//! user put a symbolic link where root then writes (an /etc file emptied and overwritten), or
//! hand fio, whose log directory bounds what it may write, the run of /etc. So each directory
//! iolab names must be one it made, or one of its own user that nobody else may write to;
//! the place the user chose to put them may be shared only if it is sticky, as /tmp is, where
//! nobody may move or replace another's entries. The same holds for a file the user names
//! (`report -o`), which is never written through a link, and for iolab's state directory,
//! whose journals and markers iolab trusts when it restores.

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
    shared_place(base)?;
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

/// Why `dir`, an existing directory named by a resolved path, is no safe place for iolab to
/// keep what it later trusts (its state directory): the directory is not this user's or
/// others may write to it ([`untrusted`]), or a directory above it could be replaced
/// ([`replaceable`]).
pub(crate) fn untrusted_path(dir: &Path) -> Option<String> {
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) => return Some(format!("{}: {e}", dir.display())),
    };
    if let Some(why) = untrusted(&meta, true) {
        return Some(format!("{} is {why}", dir.display()));
    }
    dir.parent().and_then(replaceable)
}

/// Refuses `base`, the place the user chose for iolab to make directories in, when another
/// user could move what iolab makes there away and put a link in its place (a home directory
/// `sudo iolab` runs in): iolab writes into those directories by name, later.
pub(crate) fn shared_place(base: &Path) -> Result<(), String> {
    let resolved = base
        .canonicalize()
        .map_err(|e| format!("{}: {e}", base.display()))?;
    match replaceable(&resolved) {
        Some(why) => Err(format!(
            "{}: {why}, so another user could replace what iolab makes there; choose a \
             directory of this user's or root's, or a sticky one such as /tmp",
            base.display()
        )),
        None => Ok(()),
    }
}

/// Why `dir` (resolved) or a directory above it could be moved away and replaced by someone
/// other than root and this user: it belongs to another user, or others may write to it and
/// it is not sticky. A sticky directory that all may write to, as /tmp, is fine: nobody may
/// move or replace another's entries in it.
fn replaceable(dir: &Path) -> Option<String> {
    // SAFETY: geteuid has no arguments and cannot fail.
    let me = unsafe { libc::geteuid() };
    dir.ancestors().find_map(|at| {
        let meta = match std::fs::symlink_metadata(at) {
            Ok(meta) => meta,
            Err(e) => return Some(format!("{}: {e}", at.display())),
        };
        if meta.uid() != 0 && meta.uid() != me {
            return Some(format!(
                "{} is owned by uid {}, neither root nor this iolab's user (uid {me})",
                at.display(),
                meta.uid()
            ));
        }
        (meta.mode() & 0o022 != 0 && meta.mode() & 0o1000 == 0).then(|| {
            format!(
                "{} is writable by others and not sticky (mode {:o})",
                at.display(),
                meta.mode() & 0o7777
            )
        })
    })
}

/// Creates `path`, a file the user named for iolab to write (a report, a chart, a trace),
/// replacing a plain file there. iolab usually runs as root, so the name is not followed
/// blindly: the directory is resolved once and opened with no symbolic link allowed on the
/// way (one put in place of a directory meanwhile, say by the owner of a home directory
/// `sudo iolab` writes into, would have root write where they chose); everything after is
/// done in that directory as opened. A file already there is removed and a new one made, not
/// written into, so a hard link to a file of root's leaves that file intact. A symbolic link
/// at the name is refused, and so is anything else that is not a plain file.
pub(crate) fn create_named_file(path: &Path) -> Result<std::fs::File, String> {
    use std::os::fd::{AsRawFd, FromRawFd};
    let (dir_fd, c_name) = named_in_dir(path)?;
    let dirfd = dir_fd.as_raw_fd();
    let fail = |what: &str| {
        format!(
            "{}: {what}: {}",
            path.display(),
            std::io::Error::last_os_error()
        )
    };
    // SAFETY: a zeroed stat is valid; fstatat fills it for a valid fd and C string.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let found =
        unsafe { libc::fstatat(dirfd, c_name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    if found == 0 {
        match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => {
                // SAFETY: a valid fd and C string.
                if unsafe { libc::unlinkat(dirfd, c_name.as_ptr(), 0) } != 0 {
                    return Err(fail("cannot replace it"));
                }
            }
            libc::S_IFLNK => {
                return Err(format!(
                    "{} is a symbolic link: iolab does not write through one; remove it or \
                     name another file",
                    path.display()
                ))
            }
            _ => {
                return Err(format!(
                    "{} is not a regular file: iolab does not replace it; name another file",
                    path.display()
                ))
            }
        }
    } else if std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOENT) {
        return Err(fail("cannot look at it"));
    }
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a valid fd and C string; the mode is passed as openat's variadic argument.
    let fd = unsafe { libc::openat(dirfd, c_name.as_ptr(), flags, 0o644 as libc::c_uint) };
    if fd < 0 {
        return Err(
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EEXIST) {
                format!(
                    "{}: something took its name again while iolab replaced it; nothing was \
                     written",
                    path.display()
                )
            } else {
                fail("cannot create it")
            },
        );
    }
    // SAFETY: a file descriptor the kernel just opened for this process, owned by nobody else.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

/// The directory of `path`, opened with no symbolic link allowed on the way, and the file's
/// name in it: what [`create_named_file`] and [`remove_named_file`] act on, so the name is
/// resolved once.
fn named_in_dir(path: &Path) -> Result<(std::fs::File, std::ffi::CString), String> {
    use std::os::unix::ffi::OsStrExt;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| format!("{}: not a file name", path.display()))?;
    let dir = parent
        .canonicalize()
        .map_err(|e| format!("{}: {e}", parent.display()))?;
    let dir_flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
    let dir_fd = match open_without_links(&dir, dir_flags, 0) {
        // A kernel before 5.6 (or a sandbox that refuses the call) cannot refuse links on
        // the way: the directories on the way must then be ones nobody else could replace.
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
            if let Some(why) = replaceable(&dir) {
                return Err(format!(
                    "{}: iolab does not write there: {why}; choose another place",
                    path.display()
                ));
            }
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::File::options()
                .read(true)
                .custom_flags(dir_flags)
                .open(&dir)
        }
        other => other,
    }
    .map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) => format!(
            "{}: a directory on the way was replaced by a symbolic link while iolab opened \
             it; nothing was written",
            path.display()
        ),
        _ => format!("{}: {e}", dir.display()),
    })?;
    let c_name = std::ffi::CString::new(name.as_bytes())
        .map_err(|_| format!("{}: not a file name", path.display()))?;
    Ok((dir_fd, c_name))
}

/// Removes `path`, a plain file of a name the user chose (an earlier recording's file), from
/// its directory resolved as [`create_named_file`] does; anything else there (a symbolic
/// link, a directory) is left and said. `Ok(false)` when there was nothing.
pub(crate) fn remove_named_file(path: &Path) -> Result<bool, String> {
    use std::os::fd::AsRawFd;
    let (dir_fd, c_name) = named_in_dir(path)?;
    // SAFETY: a zeroed stat is valid; fstatat fills it for a valid fd and C string.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let dirfd = dir_fd.as_raw_fd();
    if unsafe { libc::fstatat(dirfd, c_name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOENT) => Ok(false),
            _ => Err(format!("{}: {e}", path.display())),
        };
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(format!(
            "{} is not a regular file: iolab does not remove it",
            path.display()
        ));
    }
    // SAFETY: a valid fd and C string.
    if unsafe { libc::unlinkat(dirfd, c_name.as_ptr(), 0) } != 0 {
        return Err(format!(
            "{}: cannot remove it: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(true)
}

/// `open(2)` of `path` (resolved) with `flags` and `mode`, refusing a symbolic link anywhere on
/// the way (`openat2` with `RESOLVE_NO_SYMLINKS`): ELOOP if there is one, ENOSYS on a kernel
/// without `openat2`.
fn open_without_links(path: &Path, flags: i32, mode: u32) -> std::io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: open_how is plain data; zeroed, then each field set.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.mode = u64::from(mode);
    how.resolve = libc::RESOLVE_NO_SYMLINKS;
    // SAFETY: a valid C string and an open_how of the size passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            c_path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a file descriptor the kernel just opened for this process, owned by nobody else.
    Ok(unsafe { std::fs::File::from_raw_fd(fd as i32) })
}

/// The bytes of `path`, a file iolab keeps in its state directory and acts on as root (a
/// journal, a marker, the list of touched hosts), if it is a plain file of this user's that
/// nobody else may write to: not a link, nor one another user could have written. NotFound
/// stays NotFound.
pub(crate) fn read_own_file(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if let Some(why) = untrusted(&file.metadata()?, false) {
        return Err(std::io::Error::other(format!(
            "{why}: not read, as iolab acts on what it finds there"
        )));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Writes `bytes` as the whole of `path`, a file the user named ([`create_named_file`]).
pub(crate) fn write_named_file(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    create_named_file(path)?
        .write_all(bytes)
        .map_err(|e| format!("writing {}: {e}", path.display()))
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

        // Another user's, as one made first in /tmp would be (root can make one to test);
        // and the chosen place itself another user's (a home `sudo iolab` runs in).
        if unsafe { libc::geteuid() } == 0 {
            let theirs = base.path().join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            let e = make_own_dir(base.path(), &theirs.join("x")).unwrap_err();
            assert!(e.contains("theirs is owned by uid 65534"), "{e}");
            let e = make_own_dir(&theirs, &theirs.join("x")).unwrap_err();
            assert!(
                e.contains("is owned by uid 65534, neither root nor this iolab's user"),
                "{e}"
            );
        }

        // The chosen place may be shared if sticky (as /tmp), not otherwise.
        let e = make_own_dir(&open, &open.join("x")).unwrap_err();
        assert!(e.contains("is writable by others and not sticky"), "{e}");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        make_own_dir(&open, &open.join("x")).unwrap();

        // A path that climbs out is refused; the current directory is the chosen place.
        assert!(make_own_dir(base.path(), &base.path().join("a/../b")).is_err());
        make_own_dir(Path::new(""), Path::new(".")).unwrap();
    }

    /// A file the user names is made anew, in the directory as resolved and opened with no
    /// link on the way: a plain file there is replaced, not written into (a hard link's other
    /// name keeps its content); a link or anything else at the name is refused.
    #[test]
    fn a_named_file_is_made_anew_where_nobody_else_decides_what_it_is() {
        let base = tempfile::tempdir().unwrap();
        let victim = base.path().join("victim");
        std::fs::write(&victim, "keep\n").unwrap();
        let out = base.path().join("report.html");

        write_named_file(&out, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "new");
        write_named_file(&out, b"x").unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "x");

        let link = base.path().join("link.html");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let e = write_named_file(&link, b"new").unwrap_err();
        assert!(e.contains("is a symbolic link"), "{e}");

        // Another name of the victim: the name gets a file of its own.
        let hard = base.path().join("hard.html");
        std::fs::hard_link(&victim, &hard).unwrap();
        write_named_file(&hard, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&hard).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");

        let fifo = base.path().join("fifo.html");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string and mode.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let e = write_named_file(&fifo, b"new").unwrap_err();
        assert!(e.contains("is not a regular file"), "{e}");
        assert!(fifo.exists());

        // A directory replaced by a link on the way is refused by the open itself; named
        // through a link the user chose, the directory is resolved first and written.
        let open = base.path().join("open");
        std::fs::create_dir(&open).unwrap();
        let moved = base.path().join("moved");
        std::os::unix::fs::symlink(&open, &moved).unwrap();
        let e = open_without_links(&moved.join("p.svg"), libc::O_RDONLY, 0).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
        write_named_file(&moved.join("q.svg"), b"new").unwrap();
        assert_eq!(std::fs::read_to_string(open.join("q.svg")).unwrap(), "new");

        if unsafe { libc::geteuid() } == 0 {
            // Another user's file where iolab is told to write is replaced by one of root's
            // (the other user's stays theirs no more than its name did), and a directory of
            // another user's (a home `sudo iolab` writes into) takes a new file.
            let theirs = open.join("theirs.svg");
            std::fs::write(&theirs, "theirs").unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            write_named_file(&theirs, b"new").unwrap();
            assert_eq!(std::fs::metadata(&theirs).unwrap().uid(), 0);
            let dir = base.path().join("theirs");
            std::fs::create_dir(&dir).unwrap();
            std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
            write_named_file(&dir.join("p.svg"), b"new").unwrap();
        }
    }
}

//! The one door to /proc and /sys. Every reader takes a `SysRoot` and names files by their
//! absolute path on a live machine ("/proc/interrupts"); the root maps that path into either
//! the real filesystem or a snapshot directory. Tests point it at fixture trees, and users
//! point `--root DIR` at a snapshot taken on another machine. Errors always carry the path.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// A failure to read or understand one file, always naming the file (as the live path and,
/// under a snapshot root, the real path on disk).
#[derive(Debug, thiserror::Error)]
pub enum SysError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Parse {
        path: String,
        line: usize,
        message: String,
    },
    #[error("{path}: not a directory (expected a machine root such as / or a snapshot made by `iolab snapshot`)")]
    BadRoot { path: String },
}

impl SysError {
    /// True when the file simply does not exist (an optional file on this kernel).
    pub fn is_not_found(&self) -> bool {
        matches!(self, SysError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// Where /proc and /sys live: `/` on the machine itself, or a snapshot directory.
#[derive(Clone, PartialEq, Eq)]
pub struct SysRoot {
    base: PathBuf,
}

impl fmt::Debug for SysRoot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SysRoot({})", self.base.display())
    }
}

impl SysRoot {
    /// The running machine.
    pub fn live() -> Self {
        SysRoot {
            base: PathBuf::from("/"),
        }
    }

    /// A snapshot or fixture tree; it must be an existing directory.
    pub fn at(dir: impl AsRef<Path>) -> Result<Self, SysError> {
        let dir = dir.as_ref();
        let shown = dir.display().to_string();
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(SysError::BadRoot { path: shown }),
            Err(source) => {
                return Err(SysError::Io {
                    path: shown,
                    source,
                })
            }
        }
        // Canonical so that symlinks resolved inside the tree can be mapped back to live paths.
        let base = dir.canonicalize().map_err(|source| SysError::Io {
            path: shown,
            source,
        })?;
        Ok(SysRoot { base })
    }

    pub fn is_live(&self) -> bool {
        self.base == Path::new("/")
    }

    /// The directory this root maps `/` to.
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// Where the live path `abs` ("/proc/stat") is on disk under this root.
    pub fn path(&self, abs: &str) -> PathBuf {
        self.base.join(abs.trim_start_matches('/'))
    }

    fn io_error(&self, abs: &str, source: io::Error) -> SysError {
        let path = if self.is_live() {
            abs.to_string()
        } else {
            self.path(abs).display().to_string()
        };
        SysError::Io { path, source }
    }

    /// A parse error about the file at `abs`, named the way the user can find it.
    pub fn parse_error(&self, abs: &str, line: usize, message: impl Into<String>) -> SysError {
        let path = if self.is_live() {
            abs.to_string()
        } else {
            self.path(abs).display().to_string()
        };
        SysError::Parse {
            path,
            line,
            message: message.into(),
        }
    }

    /// The whole text of a file.
    pub fn read(&self, abs: &str) -> Result<String, SysError> {
        let bytes = std::fs::read(self.path(abs)).map_err(|e| self.io_error(abs, e))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The text of a file that may legitimately be absent (an attribute this kernel or this
    /// device lacks). Other errors (permission, I/O) are still errors.
    pub fn read_optional(&self, abs: &str) -> Result<Option<String>, SysError> {
        match self.read(abs) {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A one-line attribute, trimmed; `None` when the file does not exist or cannot be read
    /// (sysfs attributes that are write-only or EINVAL on read are treated as absent).
    pub fn attr(&self, abs: &str) -> Option<String> {
        self.read(abs).ok().map(|s| s.trim().to_string())
    }

    pub fn exists(&self, abs: &str) -> bool {
        self.path(abs).exists()
    }

    /// Entry names of a directory, sorted so output is stable.
    pub fn list(&self, abs: &str) -> Result<Vec<String>, SysError> {
        let rd = std::fs::read_dir(self.path(abs)).map_err(|e| self.io_error(abs, e))?;
        let mut names = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|e| self.io_error(abs, e))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    /// Like `list`, but an absent directory is empty.
    pub fn list_optional(&self, abs: &str) -> Result<Vec<String>, SysError> {
        match self.list(abs) {
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            other => other,
        }
    }

    /// The target of a symlink, as stored (sysfs links are relative).
    pub fn read_link(&self, abs: &str) -> Result<PathBuf, SysError> {
        std::fs::read_link(self.path(abs)).map_err(|e| self.io_error(abs, e))
    }

    /// The live path that `abs` resolves to after following symlinks, e.g.
    /// "/sys/block/vda" -> "/sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda".
    /// Resolution stays inside the root: a link that leaves it is an error.
    pub fn resolve(&self, abs: &str) -> Result<String, SysError> {
        let real = self
            .path(abs)
            .canonicalize()
            .map_err(|e| self.io_error(abs, e))?;
        let inside = real.strip_prefix(&self.base).map_err(|_| {
            self.io_error(
                abs,
                io::Error::other(format!("resolves outside the root to {}", real.display())),
            )
        })?;
        Ok(format!("/{}", inside.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_live_paths_under_a_snapshot_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(dir.path().join("proc/stat"), "cpu 1 2 3\n").unwrap();
        let root = SysRoot::at(dir.path()).unwrap();
        assert!(!root.is_live());
        assert_eq!(root.read("/proc/stat").unwrap(), "cpu 1 2 3\n");
        assert_eq!(root.read_optional("/proc/nope").unwrap(), None);
        let err = root.read("/proc/interrupts").unwrap_err();
        assert!(err.is_not_found());
        assert!(err.to_string().contains("proc/interrupts"), "{err}");
    }

    #[test]
    fn resolves_relative_symlinks_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("sys/devices/virtual/block/loop0");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::create_dir_all(dir.path().join("sys/block")).unwrap();
        std::os::unix::fs::symlink(
            "../devices/virtual/block/loop0",
            dir.path().join("sys/block/loop0"),
        )
        .unwrap();
        let root = SysRoot::at(dir.path()).unwrap();
        assert_eq!(
            root.resolve("/sys/block/loop0").unwrap(),
            "/sys/devices/virtual/block/loop0"
        );
    }

    #[test]
    fn rejects_a_missing_root_naming_it() {
        let err = SysRoot::at("/no/such/iolab/root").unwrap_err();
        assert!(err.to_string().contains("/no/such/iolab/root"), "{err}");
    }
}

//! The one door to /proc and /sys. Every reader takes a `SysRoot` and names files by their
//! absolute path on a live machine ("/proc/interrupts"); the root maps that path into either
//! the real filesystem or a snapshot directory. Tests point it at fixture trees, and users
//! point `--root DIR` at a snapshot taken on another machine. Errors always carry the path.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The file in a snapshot that keeps permission bits a copy (or git) would lose: one line per
/// file, `0444 /proc/irq/36/smp_affinity`. Whether an IRQ's affinity file is writable is how
/// iolab tells a kernel-managed IRQ without writing to it.
pub(crate) const MODES_FILE: &str = "file-modes";

/// Every path a reader touched, by kind, so `iolab snapshot` copies exactly what the model
/// reads and nothing else.
#[derive(Debug, Default, Clone)]
pub(crate) struct Recording {
    /// Files read (or probed with `exists`).
    pub(crate) files: BTreeSet<String>,
    /// Directories listed: their entries' names are needed, not their contents.
    pub(crate) dirs: BTreeSet<String>,
    /// Symlinks read with `read_link` (only the link itself is needed).
    pub(crate) links: BTreeSet<String>,
    /// Paths resolved through symlinks (the whole chain must exist).
    pub(crate) resolved: BTreeSet<String>,
    /// Files whose permission bits were asked for.
    pub(crate) modes: BTreeSet<String>,
}

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
    #[error("{path} is not a snapshot or machine root (no {missing}); `iolab snapshot -o DIR` makes one (DIR new or empty)")]
    NotMachineRoot { path: String, missing: String },
}

impl SysError {
    /// True when the file simply does not exist (an optional file on this kernel).
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, SysError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// Where /proc and /sys live: `/` on the machine itself, or a snapshot directory.
#[derive(Clone)]
pub struct SysRoot {
    base: PathBuf,
    /// Permission bits recorded by a snapshot (`MODES_FILE`), by live path.
    modes: Arc<BTreeMap<String, u32>>,
    recorder: Option<Arc<Mutex<Recording>>>,
}

impl PartialEq for SysRoot {
    fn eq(&self, other: &Self) -> bool {
        self.base == other.base
    }
}
impl Eq for SysRoot {}

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
            modes: Arc::default(),
            recorder: None,
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
        let modes = match std::fs::read_to_string(base.join(MODES_FILE)) {
            Ok(text) => parse_modes(&text),
            Err(_) => BTreeMap::new(),
        };
        Ok(SysRoot {
            base,
            modes: Arc::new(modes),
            recorder: None,
        })
    }

    /// A user's `--root DIR`: like [`SysRoot::at`], and DIR must hold what every reader of the
    /// machine model needs (`proc/` and `sys/devices/system/cpu`), so a wrong directory is
    /// named as such instead of failing later on some file deep inside it.
    pub(crate) fn machine_root(dir: impl AsRef<Path>) -> Result<Self, SysError> {
        if !dir.as_ref().exists() {
            return Err(SysError::NotMachineRoot {
                path: dir.as_ref().display().to_string(),
                missing: "such directory".into(),
            });
        }
        let root = SysRoot::at(dir.as_ref())?;
        let missing: Vec<&str> = ["proc/", "sys/devices/system/cpu/"]
            .into_iter()
            .filter(|rel| !root.base.join(rel).is_dir())
            .collect();
        if !missing.is_empty() {
            return Err(SysError::NotMachineRoot {
                path: dir.as_ref().display().to_string(),
                missing: missing.join(", no "),
            });
        }
        Ok(root)
    }

    /// The same root, remembering every path read through it (see `Recording`).
    pub(crate) fn recording(&self) -> (SysRoot, Arc<Mutex<Recording>>) {
        let rec = Arc::new(Mutex::new(Recording::default()));
        let mut root = self.clone();
        root.recorder = Some(rec.clone());
        (root, rec)
    }

    fn note(&self, kind: fn(&mut Recording) -> &mut BTreeSet<String>, abs: &str) {
        if let Some(rec) = &self.recorder {
            if let Ok(mut rec) = rec.lock() {
                kind(&mut rec).insert(abs.to_string());
            }
        }
    }

    pub(crate) fn is_live(&self) -> bool {
        self.base == Path::new("/")
    }

    /// The directory this root maps `/` to.
    pub(crate) fn base(&self) -> &Path {
        &self.base
    }

    /// Where the live path `abs` ("/proc/stat") is on disk under this root.
    pub(crate) fn path(&self, abs: &str) -> PathBuf {
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
    pub(crate) fn parse_error(
        &self,
        abs: &str,
        line: usize,
        message: impl Into<String>,
    ) -> SysError {
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
        self.note(|r| &mut r.files, abs);
        let bytes = std::fs::read(self.path(abs)).map_err(|e| self.io_error(abs, e))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Reads a file into a buffer the caller keeps between calls, so a sampler reading the
    /// same files every interval does not allocate each time. The buffer is cleared first.
    pub(crate) fn read_into(&self, abs: &str, buf: &mut Vec<u8>) -> Result<(), SysError> {
        use std::io::Read;
        self.note(|r| &mut r.files, abs);
        buf.clear();
        std::fs::File::open(self.path(abs))
            .and_then(|mut f| f.read_to_end(buf))
            .map_err(|e| self.io_error(abs, e))?;
        Ok(())
    }

    /// The text of a file that may legitimately be absent (an attribute this kernel or this
    /// device lacks). Other errors (permission, I/O) are still errors.
    pub(crate) fn read_optional(&self, abs: &str) -> Result<Option<String>, SysError> {
        match self.read(abs) {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A one-line attribute, trimmed; `None` when the file does not exist or cannot be read
    /// (sysfs attributes that are write-only or EINVAL on read are treated as absent).
    pub(crate) fn attr(&self, abs: &str) -> Option<String> {
        self.read(abs).ok().map(|s| s.trim().to_string())
    }

    pub(crate) fn exists(&self, abs: &str) -> bool {
        self.note(|r| &mut r.files, abs);
        self.path(abs).exists()
    }

    /// Entry names of a directory, sorted so output is stable.
    pub fn list(&self, abs: &str) -> Result<Vec<String>, SysError> {
        self.note(|r| &mut r.dirs, abs);
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
    pub(crate) fn list_optional(&self, abs: &str) -> Result<Vec<String>, SysError> {
        match self.list(abs) {
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            other => other,
        }
    }

    /// The target of a symlink, as stored (sysfs links are relative).
    pub(crate) fn read_link(&self, abs: &str) -> Result<PathBuf, SysError> {
        self.note(|r| &mut r.links, abs);
        std::fs::read_link(self.path(abs)).map_err(|e| self.io_error(abs, e))
    }

    /// The live path that `abs` resolves to after following symlinks, e.g.
    /// "/sys/block/vda" -> "/sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda".
    /// Resolution stays inside the root: a link that leaves it is an error.
    pub(crate) fn resolve(&self, abs: &str) -> Result<String, SysError> {
        self.note(|r| &mut r.resolved, abs);
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

    /// The permission bits of a file (e.g. 0o444). Under a snapshot root the bits recorded
    /// at capture time win, because copies and git do not keep them.
    pub(crate) fn mode(&self, abs: &str) -> Result<u32, SysError> {
        self.note(|r| &mut r.modes, abs);
        if let Some(mode) = self.modes.get(abs) {
            return Ok(*mode);
        }
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(self.path(abs)).map_err(|e| self.io_error(abs, e))?;
        Ok(meta.permissions().mode() & 0o7777)
    }
}

/// Reads `MODES_FILE` lines; lines that do not parse are ignored (the file is advisory).
pub(crate) fn parse_modes(text: &str) -> BTreeMap<String, u32> {
    text.lines()
        .filter_map(|l| {
            let (mode, path) = l.trim().split_once(' ')?;
            Some((path.trim().to_string(), u32::from_str_radix(mode, 8).ok()?))
        })
        .collect()
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

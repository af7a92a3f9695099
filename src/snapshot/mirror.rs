//! Copies paths from one machine root into a snapshot directory so that the same paths read
//! the same there: real directories become directories, sysfs symlinks become the same
//! relative symlinks (so `/sys/block/vda` still resolves to its PCI path inside the
//! snapshot), and files get their bytes. Only what is asked for is copied.
//! This is the one place that works below `SysRoot` (on `SysRoot::base()`): it must see
//! symlinks as links rather than follow them.

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

pub(super) struct Mirror {
    /// The source root, canonical ("/" for the live machine).
    pub src: PathBuf,
    pub dst: PathBuf,
    /// Files that exist but could not be read (write-only attributes, EIO).
    pub unreadable: Vec<String>,
}

/// What a walk found at the end of a path.
pub(super) struct Found {
    /// The live path it resolves to (no symlinks).
    pub canonical: String,
    pub is_dir: bool,
}

fn rel(abs: &str) -> &str {
    abs.trim_start_matches('/')
}

impl Mirror {
    pub(super) fn new(src: &Path, dst: &Path) -> Mirror {
        Mirror {
            src: src.to_path_buf(),
            dst: dst.to_path_buf(),
            unreadable: Vec::new(),
        }
    }

    /// Recreates every directory and symlink on the way to `abs`. With `follow_last` false
    /// a final symlink is copied but not followed. None when the path does not exist.
    pub(super) fn walk(&mut self, abs: &str, follow_last: bool) -> io::Result<Option<Found>> {
        let comps: Vec<&str> = abs.split('/').filter(|c| !c.is_empty()).collect();
        let mut cur = String::new();
        let mut is_dir = true;
        for (i, comp) in comps.iter().enumerate() {
            let last = i + 1 == comps.len();
            let next = format!("{cur}/{comp}");
            let real = self.src.join(rel(&next));
            let meta = match fs::symlink_metadata(&real) {
                Ok(m) => m,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            };
            if meta.file_type().is_symlink() {
                self.copy_link(&next, &real)?;
                if last && !follow_last {
                    return Ok(Some(Found {
                        canonical: next,
                        is_dir: false,
                    }));
                }
                let canon = match real.canonicalize() {
                    Ok(c) => c,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(e),
                };
                let Ok(inside) = canon.strip_prefix(&self.src) else {
                    return Ok(None);
                };
                cur = format!("/{}", inside.display());
                is_dir = canon.is_dir();
                if is_dir {
                    fs::create_dir_all(self.dst.join(rel(&cur)))?;
                } else if !last {
                    return Ok(None);
                }
            } else if meta.is_dir() {
                fs::create_dir_all(self.dst.join(rel(&next)))?;
                cur = next;
                is_dir = true;
            } else {
                if !last {
                    return Ok(None);
                }
                cur = next;
                is_dir = false;
            }
        }
        Ok(Some(Found {
            canonical: if cur.is_empty() { "/".into() } else { cur },
            is_dir,
        }))
    }

    /// Recreates the symlink at live path `at` (whose source is `real`), relative.
    fn copy_link(&mut self, at: &str, real: &Path) -> io::Result<()> {
        let link = self.dst.join(rel(at));
        if fs::symlink_metadata(&link).is_ok() {
            return Ok(());
        }
        let mut target = fs::read_link(real)?;
        if target.is_absolute() {
            let from = Path::new(at).parent().unwrap_or(Path::new("/"));
            target = relative_path(from, &target);
        }
        if let Some(parent) = link.parent() {
            fs::create_dir_all(parent)?;
        }
        std::os::unix::fs::symlink(target, link)
    }

    /// Copies a file's bytes as `keep` returns them; unreadable files are noted, not fatal.
    pub(super) fn copy_file(
        &mut self,
        canonical: &str,
        keep: impl FnOnce(Vec<u8>) -> Vec<u8>,
    ) -> io::Result<()> {
        let to = self.dst.join(rel(canonical));
        if to.exists() {
            return Ok(());
        }
        match fs::read(self.src.join(rel(canonical))) {
            Ok(bytes) => self.write(canonical, &keep(bytes)),
            Err(_) => {
                self.unreadable.push(canonical.to_string());
                Ok(())
            }
        }
    }

    /// Writes `bytes` at live path `abs` (a real file, not through symlinks).
    pub(super) fn write(&mut self, abs: &str, bytes: &[u8]) -> io::Result<()> {
        let to = self.dst.join(rel(abs));
        if let Some(parent) = to.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(&to, bytes)?;
        Ok(())
    }

    /// Completes a listed directory, after everything read has been copied: a symlink entry
    /// is kept when its target is in the snapshot (holders, /sys/block), so a listing finds
    /// the same devices without dangling links to things never read; the entries of
    /// `msi_irqs`, whose names are the IRQ numbers, are all kept. Other entries were either
    /// read (and are there already) or do not matter.
    pub(super) fn copy_listing(&mut self, canonical: &str) -> io::Result<()> {
        let dir = self.src.join(rel(canonical));
        let names_matter = canonical.ends_with("/msi_irqs");
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let abs = format!("{}/{name}", canonical.trim_end_matches('/'));
            let ft = entry.file_type()?;
            if ft.is_symlink() {
                let in_snapshot = entry
                    .path()
                    .canonicalize()
                    .ok()
                    .and_then(|t| t.strip_prefix(&self.src).ok().map(|t| self.dst.join(t)))
                    .is_some_and(|t| t.exists());
                if in_snapshot || names_matter {
                    self.copy_link(&abs, &entry.path())?;
                }
            } else if ft.is_dir() {
                if names_matter {
                    fs::create_dir_all(self.dst.join(rel(&abs)))?;
                }
            } else if names_matter {
                self.copy_file(&abs, |b| b)?;
            }
        }
        Ok(())
    }
}

/// The relative path from directory `from` to `to`, both absolute.
pub(super) fn relative_path(from: &Path, to: &Path) -> PathBuf {
    let f: Vec<Component> = from.components().collect();
    let t: Vec<Component> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..f.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c.as_os_str());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths() {
        assert_eq!(
            relative_path(
                Path::new("/sys/block"),
                Path::new("/sys/devices/virtual/block/loop0")
            ),
            PathBuf::from("../devices/virtual/block/loop0")
        );
        assert_eq!(
            relative_path(Path::new("/a/b"), Path::new("/a/b/c")),
            PathBuf::from("c")
        );
    }

    #[test]
    fn mirrors_links_dirs_and_files() {
        let src = tempfile::tempdir().unwrap();
        let dst = tempfile::tempdir().unwrap();
        let s = src.path();
        fs::create_dir_all(s.join("sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda/queue"))
            .unwrap();
        fs::write(
            s.join("sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda/queue/scheduler"),
            "[none]\n",
        )
        .unwrap();
        fs::create_dir_all(s.join("sys/block")).unwrap();
        std::os::unix::fs::symlink(
            "../devices/pci0000:00/0000:00:02.0/virtio1/block/vda",
            s.join("sys/block/vda"),
        )
        .unwrap();
        let mut m = Mirror::new(&s.canonicalize().unwrap(), dst.path());
        let found = m
            .walk("/sys/block/vda/queue/scheduler", true)
            .unwrap()
            .unwrap();
        assert_eq!(
            found.canonical,
            "/sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda/queue/scheduler"
        );
        m.copy_file(&found.canonical, |b| b).unwrap();
        assert_eq!(
            fs::read_to_string(dst.path().join("sys/block/vda/queue/scheduler")).unwrap(),
            "[none]\n"
        );
        assert!(fs::symlink_metadata(dst.path().join("sys/block/vda"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(m.walk("/sys/block/nope", true).unwrap().is_none());
    }
}

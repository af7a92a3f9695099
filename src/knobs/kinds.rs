//! The kinds of file iolab changes, and nothing else. A journal is a file on disk that anyone
//! with access to the state directory can edit, and restore writes whatever it says back: a
//! journal entry naming `/etc/passwd` must not make `iolab restore` overwrite it. So every path
//! is checked against this table both when a knob is set and when a journal is replayed:
//! it must match one pattern exactly (one path component per placeholder, no `..`), and the
//! file it names under the journal's root must, with every symlink resolved, still lie inside
//! that root's /sys or /proc. A new kind of knob (sysctl, cpufreq) is one more line in `KINDS`.

use std::path::{Component, Path, PathBuf};

use crate::sys::lock::Resource;

/// One kind of knob: its live path pattern. `{dev}` is a block device's kernel name, `{n}` a
/// number, `{attr}` an attribute name; every other component is literal.
#[derive(Debug)]
pub struct Kind {
    pub what: &'static str,
    pub pattern: &'static str,
}

pub const KINDS: &[Kind] = &[
    Kind {
        what: "block queue attribute",
        pattern: "/sys/block/{dev}/queue/{attr}",
    },
    Kind {
        what: "interrupt affinity",
        pattern: "/proc/irq/{n}/smp_affinity_list",
    },
    Kind {
        what: "interrupt affinity",
        pattern: "/proc/irq/{n}/smp_affinity",
    },
];

/// What a valid path names: its kind and the machine-wide thing it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct Matched {
    pub kind: &'static str,
    pub resource: Resource,
}

/// Checks `path` against the table (no I/O). The error says why and which kinds are allowed.
pub fn classify(path: &str) -> Result<Matched, String> {
    let parts: Vec<&str> = path.split('/').collect();
    for k in KINDS {
        let pat: Vec<&str> = k.pattern.split('/').collect();
        if pat.len() != parts.len() {
            continue;
        }
        let mut resource = None;
        let ok = pat.iter().zip(&parts).all(|(p, s)| match *p {
            "{dev}" if is_name(s) => {
                resource = Some(Resource::Device(s.to_string()));
                true
            }
            "{n}" => match s.parse::<u32>() {
                Ok(n) if s.bytes().all(|b| b.is_ascii_digit()) => {
                    resource = Some(Resource::Irq(n));
                    true
                }
                _ => false,
            },
            "{attr}" => {
                !s.is_empty()
                    && s.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            }
            lit => lit == *s,
        });
        if let (true, Some(resource)) = (ok, resource) {
            return Ok(Matched {
                kind: k.what,
                resource,
            });
        }
    }
    Err(format!(
        "not a kind of file iolab changes (only {})",
        KINDS
            .iter()
            .map(|k| k.pattern)
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// A device's kernel name: one path component, no `.`/`..`.
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// Where a valid path's file is on disk.
#[derive(Debug, Clone, PartialEq)]
pub enum Located {
    /// The file, symlinks resolved: write to exactly this.
    File(PathBuf),
    /// No such file under the root (the device or IRQ went away).
    Missing,
}

/// Maps a live path to its file under `root`, refusing anything outside the table and any file
/// that, symlinks resolved, leaves the root's /sys or /proc.
pub fn locate(root: &Path, path: &str) -> Result<Located, String> {
    classify(path)?;
    let rel = path.trim_start_matches('/');
    // `classify` already allows one plain component per placeholder; this guards the table.
    if Path::new(rel)
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return Err("the path must not contain `.` or `..`".into());
    }
    let top = rel.split('/').next().unwrap_or_default();
    let base = root
        .canonicalize()
        .map_err(|e| format!("the journal's root {}: {e}", root.display()))?;
    let file = match base.join(rel).canonicalize() {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Located::Missing),
        Err(e) => return Err(format!("{}: {e}", base.join(rel).display())),
    };
    let fence = base.join(top);
    if !file.starts_with(&fence) {
        return Err(format!(
            "it resolves to {}, outside {}",
            file.display(),
            fence.display()
        ));
    }
    Ok(Located::File(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_kinds_in_the_table_pass() {
        let ok = classify("/sys/block/loop3/queue/nr_requests").unwrap();
        assert_eq!(ok.resource, Resource::Device("loop3".into()));
        let irq = classify("/proc/irq/29/smp_affinity_list").unwrap();
        assert_eq!(irq.resource, Resource::Irq(29));
        classify("/proc/irq/29/smp_affinity").unwrap();
        for bad in [
            "/etc/passwd",
            "/tmp/x",
            "/sys/block/../queue/x/scheduler",
            "/sys/block/loop3/queue/../../../../etc/passwd",
            "/sys/block/loop3/queue/Scheduler",
            "/sys/block/loop3/queue/iosched/quantum",
            "/proc/irq/+1/smp_affinity",
            "/proc/irq/29/spurious",
            "sys/block/loop3/queue/scheduler",
            "/sys/block//queue/scheduler",
        ] {
            let why = classify(bad).unwrap_err();
            assert!(
                why.contains("/sys/block/{dev}/queue/{attr}"),
                "{bad}: {why}"
            );
        }
    }

    #[test]
    fn a_symlink_out_of_the_root_is_refused_and_a_missing_file_is_missing() {
        let root = tempfile::tempdir().unwrap();
        let q = root.path().join("sys/block/loop0/queue");
        std::fs::create_dir_all(&q).unwrap();
        std::fs::write(q.join("nr_requests"), "64\n").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("victim"), "keep\n").unwrap();
        std::os::unix::fs::symlink(outside.path().join("victim"), q.join("scheduler")).unwrap();
        assert!(matches!(
            locate(root.path(), "/sys/block/loop0/queue/nr_requests"),
            Ok(Located::File(_))
        ));
        let why = locate(root.path(), "/sys/block/loop0/queue/scheduler").unwrap_err();
        assert!(why.contains("outside"), "{why}");
        assert_eq!(
            locate(root.path(), "/sys/block/loop9/queue/scheduler").unwrap(),
            Located::Missing
        );
        // A /sys path that escapes into the root's /proc is outside its fence too.
        std::fs::create_dir_all(root.path().join("proc")).unwrap();
        std::fs::write(root.path().join("proc/x"), "").unwrap();
        std::os::unix::fs::symlink(root.path().join("proc/x"), q.join("rq_affinity")).unwrap();
        assert!(locate(root.path(), "/sys/block/loop0/queue/rq_affinity").is_err());
    }
}

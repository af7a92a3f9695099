//! "Would writing to this device destroy someone's data?" Collects every reason to think so:
//! it (or one of its partitions) is mounted, something is stacked on it (device-mapper, MD,
//! LVM — its `holders`), it is active swap, it has partitions, or its first/last bytes carry a
//! filesystem, partition-table or volume signature. The pure parts (mountinfo and swaps
//! matching) take text; `holds_data` gathers the text through a `SysRoot` and reads the
//! device's bytes (read-only) on a live machine.

use std::fmt;
use std::io::{Read, Seek, SeekFrom};

use serde::Serialize;

use super::signatures::{self, Signature};
use super::TargetError;
use crate::sys::SysRoot;

/// One reason to believe a device holds data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reason {
    /// `device` (the target or one of its partitions) is mounted at `mount_point`.
    Mounted { device: String, mount_point: String },
    /// `holder` (dm-0, md127, ...) is built on `device`.
    Held { device: String, holder: String },
    /// `device` is in use as swap.
    Swap { device: String },
    /// The device has partitions.
    Partitions { names: Vec<String> },
    /// Loop device `looped` reads and writes `device` (or a part of it) as its backing file;
    /// the kernel lists no holder for it.
    LoopedBy { device: String, looped: String },
    /// The kernel refuses to give `device` exclusively: something has claimed it (a file
    /// system mounted in any mount namespace, MD, device-mapper, bcache, swap).
    Claimed { device: String },
    /// Its bytes carry a known signature.
    Signature { signature: Signature },
    /// blkid's probe finds a format (`what`: its TYPE or PTTYPE, e.g. `minix`), which iolab's
    /// own list may not know.
    Probed { what: String },
    /// Its first bytes could not be read, so a signature cannot be ruled out (treated as data).
    Unreadable { why: String },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Mounted {
                device,
                mount_point,
            } => write!(f, "{device} is mounted on {mount_point}"),
            Reason::Held { device, holder } => write!(f, "{holder} is built on {device}"),
            Reason::Swap { device } => write!(f, "{device} is in use as swap"),
            Reason::Partitions { names } => write!(f, "it has partitions ({})", names.join(", ")),
            Reason::LoopedBy { device, looped } => {
                write!(f, "loop device {looped} is built on {device}")
            }
            Reason::Claimed { device } => write!(
                f,
                "{device} is claimed by the kernel (mounted, perhaps in another mount \
                 namespace, or used by MD, device-mapper, bcache or swap)"
            ),
            Reason::Signature { signature } => write!(f, "it carries a {}", signature.name()),
            Reason::Probed { what } => write!(f, "blkid finds {what} on it"),
            Reason::Unreadable { why } => write!(f, "its contents cannot be checked: {why}"),
        }
    }
}

/// The kernel name of a block device given as "loop0", "/dev/loop0" or a /dev symlink
/// ("/dev/disk/by-id/..."): what /sys/class/block knows it as.
pub(crate) fn device_name(arg: &str) -> String {
    let p = std::path::Path::new(arg);
    if arg.starts_with('/') {
        if let Ok(real) = p.canonicalize() {
            if let Some(name) = real.strip_prefix("/dev").ok().and_then(|r| r.to_str()) {
                return name.to_string();
            }
        }
    }
    arg.trim_start_matches("/dev/").to_string()
}

/// The kernel name of a device on another machine, given as that kernel names it ("sdb",
/// "/dev/nvme0n1"). Anything else is refused: a link such as /dev/disk/by-id/... resolves on
/// the machine that reads it, and this machine's links say nothing of another's (resolved
/// here, it named whatever disk the other machine has under this machine's name for it).
pub(crate) fn remote_device_name(arg: &str) -> Result<String, String> {
    let name = arg.strip_prefix("/dev/").unwrap_or(arg);
    let plain = !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if plain {
        Ok(name.to_string())
    } else {
        // An experiment file's names are kept without their "/dev/": say it as written.
        let said = if arg.starts_with('/') {
            arg.to_string()
        } else {
            format!("/dev/{arg}")
        };
        Err(format!(
            "`{said}`: name a device on another machine as its kernel does (such as sdb or \
             /dev/nvme0n1): a link such as /dev/disk/by-id/... would be resolved on this \
             machine, whose links say nothing of another's"
        ))
    }
}

/// The device and its partitions.
fn device_and_partitions(root: &SysRoot, name: &str) -> Result<Vec<Part>, TargetError> {
    // /sys/class/block names disks and partitions alike; a snapshot (`iolab snapshot`, read
    // by a dry run with --root) holds /sys/block, which names the disks.
    let base = [
        format!("/sys/class/block/{name}"),
        format!("/sys/block/{name}"),
    ]
    .into_iter()
    .find(|b| root.exists(b))
    .ok_or_else(|| TargetError::NoDevice {
        device: name.to_string(),
    })?;
    let mut out = vec![Part {
        name: name.to_string(),
        dev: root.attr(&format!("{base}/dev")).unwrap_or_default(),
        dir: base.clone(),
    }];
    for entry in root.list_optional(&base)? {
        let sub = format!("{base}/{entry}");
        if entry.starts_with(name) && root.exists(&format!("{sub}/partition")) {
            out.push(Part {
                name: entry.clone(),
                dev: root.attr(&format!("{sub}/dev")).unwrap_or_default(),
                dir: sub,
            });
        }
    }
    Ok(out)
}

/// A device or one of its partitions: its name, "major:minor" and sysfs directory.
struct Part {
    name: String,
    dev: String,
    dir: String,
}

/// Mounts of any of `devices` ((name, "maj:min")), from /proc/self/mountinfo's text. Matches
/// the device number and, because btrfs and some others report an anonymous device number,
/// also the mount source ("/dev/NAME"). A line that does not parse cannot be ruled out, so it
/// counts as a reason too: this check errs towards "holds data".
pub(crate) fn mounts_of(mountinfo: &str, devices: &[(String, String)]) -> Vec<Reason> {
    let mut out = Vec::new();
    for (i, line) in mountinfo.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let m = match crate::sys::parse::mountinfo::mount_line(line, i + 1) {
            Ok(m) => m,
            Err(e) => {
                out.push(Reason::Unreadable {
                    why: format!("/proc/self/mountinfo:{}: {}", e.line, e.message),
                });
                continue;
            }
        };
        let majmin = format!("{}:{}", m.major, m.minor);
        for (name, dev) in devices {
            let by_number = !dev.is_empty() && majmin == *dev;
            let by_source = m.source == format!("/dev/{name}");
            if by_number || by_source {
                let r = Reason::Mounted {
                    device: name.clone(),
                    mount_point: m.mount_point.clone(),
                };
                if !out.contains(&r) {
                    out.push(r);
                }
            }
        }
    }
    out
}

/// Swap areas on any of `names`, from /proc/swaps' text (first line is a header).
pub(super) fn swaps_on(swaps: &str, names: &[String]) -> Vec<Reason> {
    swaps
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|file| {
            let name = file.strip_prefix("/dev/")?;
            names
                .iter()
                .find(|n| *n == name)
                .map(|n| Reason::Swap { device: n.clone() })
        })
        .collect()
}

/// Every reason to think `device` holds data; empty means it looks blank and unused. Reading
/// the signature needs the live machine (and root); under a snapshot root it is skipped.
pub fn holds_data(root: &SysRoot, device: &str) -> Result<Vec<Reason>, TargetError> {
    let name = device_name(device);
    let parts = device_and_partitions(root, &name)?;
    let names: Vec<String> = parts.iter().map(|p| p.name.clone()).collect();
    let devs: Vec<(String, String)> = parts
        .iter()
        .map(|p| (p.name.clone(), p.dev.clone()))
        .collect();
    let mut reasons = Vec::new();
    if let Some(mi) = root.read_optional("/proc/self/mountinfo")? {
        reasons.extend(mounts_of(&mi, &devs));
    }
    for p in &parts {
        // The same directory on a live machine (a partition's class entry links to its
        // disk's subdirectory); read both, so neither a tree without the class entries nor
        // one without the subdirectories hides a holder.
        let mut holders = root.list_optional(&format!("{}/holders", p.dir))?;
        holders.extend(root.list_optional(&format!("/sys/class/block/{}/holders", p.name))?);
        holders.sort();
        holders.dedup();
        for holder in holders {
            reasons.push(Reason::Held {
                device: p.name.clone(),
                holder,
            });
        }
    }
    reasons.extend(looped_by(root, &devs)?);
    if let Some(sw) = root.read_optional("/proc/swaps")? {
        reasons.extend(swaps_on(&sw, &names));
    }
    if names.len() > 1 {
        reasons.push(Reason::Partitions {
            names: names[1..].to_vec(),
        });
    }
    if root.is_live() {
        for p in &parts {
            if claimed(&format!("/dev/{}", p.name)) {
                reasons.push(Reason::Claimed {
                    device: p.name.clone(),
                });
            }
        }
        let dev_path = format!("/dev/{name}");
        match read_signatures(&dev_path) {
            Ok(found) => reasons.extend(
                found
                    .into_iter()
                    .map(|signature| Reason::Signature { signature }),
            ),
            // Fail safe: what cannot be read cannot be shown to be blank.
            Err(e) => reasons.push(Reason::Unreadable { why: e.to_string() }),
        }
        // iolab's own list knows the common formats; blkid knows some eighty more (minix,
        // erofs, Ceph's BlueStore, Intel and DDF RAID members, ...). Both must find nothing.
        match super::blkid::probe(&dev_path) {
            Ok(found) => reasons.extend(found.into_iter().map(|what| Reason::Probed { what })),
            Err(why) => reasons.push(Reason::Unreadable { why }),
        }
    }
    // Both probes fail alike on a device that cannot be read: one reason, said once.
    reasons.dedup();
    Ok(reasons)
}

/// Loop devices whose backing file is one of `devices` ((name, "maj:min")): a loop device is
/// no holder of what it reads, so neither `holders` nor a mount of the device itself shows
/// that a file system mounted through the loop device lives on it.
fn looped_by(root: &SysRoot, devices: &[(String, String)]) -> Result<Vec<Reason>, TargetError> {
    let mut out = Vec::new();
    for looped in root.list_optional("/sys/block")? {
        let Some(backing) =
            root.read_optional(&format!("/sys/block/{looped}/loop/backing_file"))?
        else {
            continue;
        };
        let backing = backing.trim();
        // By name, and on the live machine by device number (a link names it too).
        let number = root.is_live().then(|| device_number_of(backing)).flatten();
        for (name, dev) in devices {
            let named = backing == format!("/dev/{name}");
            if named || number.as_deref().is_some_and(|n| n == dev) {
                out.push(Reason::LoopedBy {
                    device: name.clone(),
                    looped: looped.clone(),
                });
            }
        }
    }
    Ok(out)
}

/// "major:minor" of the block device at `path`, if it is one.
fn device_number_of(path: &str) -> Option<String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = std::fs::metadata(path).ok()?;
    if !meta.file_type().is_block_device() {
        return None;
    }
    let rdev = meta.rdev();
    Some(format!("{}:{}", libc::major(rdev), libc::minor(rdev)))
}

/// Whether the kernel refuses an exclusive open of the block device at `path` (EBUSY): a file
/// system mounted in any mount namespace, or MD, device-mapper, bcache or swap, has it. Opened
/// read-only and closed at once.
fn claimed(path: &str) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(path)
    {
        Ok(_) => false,
        Err(e) => e.raw_os_error() == Some(libc::EBUSY),
    }
}

/// Reads the first MiB and the last 128 KiB of a block device (read-only) and looks for
/// signatures.
pub fn read_signatures(dev_path: &str) -> Result<Vec<Signature>, TargetError> {
    let io = |source| TargetError::Io {
        path: dev_path.to_string(),
        source,
    };
    let mut f = std::fs::File::open(dev_path).map_err(io)?;
    let size = f.seek(SeekFrom::End(0)).map_err(io)?;
    f.seek(SeekFrom::Start(0)).map_err(io)?;
    let mut head = Vec::new();
    (&mut f)
        .take(signatures::HEAD_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(io)?;
    let tail_start = size.saturating_sub(signatures::TAIL_BYTES as u64);
    f.seek(SeekFrom::Start(tail_start)).map_err(io)?;
    let mut tail = Vec::new();
    f.take(signatures::TAIL_BYTES as u64)
        .read_to_end(&mut tail)
        .map_err(io)?;
    Ok(signatures::detect(&head, &tail, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_machines_device_is_named_as_its_kernel_names_it() {
        for (arg, name) in [
            ("sdb", "sdb"),
            ("/dev/nvme0n1", "nvme0n1"),
            ("dm-0", "dm-0"),
        ] {
            assert_eq!(remote_device_name(arg).as_deref(), Ok(name));
        }
        // A link, a path elsewhere, fio's file separator, nothing.
        for arg in [
            "/dev/disk/by-id/wwn-1",
            "disk/by-path/x",
            "/tmp/d",
            "sdb:sdc",
            "..",
            "",
        ] {
            assert!(remote_device_name(arg).is_err(), "{arg}");
        }
        // A file's name, kept without its "/dev/", is quoted as the user wrote it.
        let e = remote_device_name("disk/by-id/virtio-xyz").unwrap_err();
        assert!(e.starts_with("`/dev/disk/by-id/virtio-xyz`: "), "{e}");
    }

    const MOUNTINFO: &str = "\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
23 22 0:21 / /proc rw,nosuid - proc proc rw
40 22 8:17 / /mnt/my\\040data rw - xfs /dev/sdb1 rw
41 22 0:45 / /srv rw - btrfs /dev/sdc rw
";

    fn devs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn finds_mounts_by_number_partition_and_source() {
        let r = mounts_of(MOUNTINFO, &devs(&[("vda", "254:0")]));
        assert_eq!(
            r,
            vec![Reason::Mounted {
                device: "vda".into(),
                mount_point: "/".into()
            }]
        );
        let r = mounts_of(MOUNTINFO, &devs(&[("sdb", "8:16"), ("sdb1", "8:17")]));
        assert_eq!(
            r,
            vec![Reason::Mounted {
                device: "sdb1".into(),
                mount_point: "/mnt/my data".into()
            }]
        );
        let r = mounts_of(MOUNTINFO, &devs(&[("sdc", "8:32")]));
        assert_eq!(
            r.len(),
            1,
            "btrfs reports 0:45 but the source names the device"
        );
        assert!(mounts_of(MOUNTINFO, &devs(&[("loop0", "7:0")])).is_empty());
        // Lines that do not parse cannot rule a mount out: they count against writing.
        let r = mounts_of("garbage\n\n1 2\n", &devs(&[("loop0", "7:0")]));
        assert_eq!(r.len(), 2, "{r:?}");
        assert!(
            r[0].to_string().contains("/proc/self/mountinfo:1:"),
            "{}",
            r[0]
        );
    }

    #[test]
    fn finds_swap_devices_not_files() {
        let swaps = "Filename\tType\tSize\tUsed\tPriority\n/dev/zram0 partition 100 0 100\n/swapfile file 10 0 -2\n";
        assert_eq!(
            swaps_on(swaps, &["zram0".into()]),
            vec![Reason::Swap {
                device: "zram0".into()
            }]
        );
        assert!(swaps_on(swaps, &["vda".into()]).is_empty());
    }

    #[test]
    fn names_are_normalised() {
        assert_eq!(device_name("loop3"), "loop3");
        assert_eq!(device_name("/dev/nonexistent-iolab0"), "nonexistent-iolab0");
    }

    #[test]
    fn reads_holders_partitions_from_a_fixture_tree() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        let mk = |rel: &str, text: Option<&str>| {
            let path = p.join(rel);
            match text {
                Some(t) => {
                    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                    std::fs::write(path, t).unwrap();
                }
                None => std::fs::create_dir_all(path).unwrap(),
            }
        };
        mk("sys/class/block/sdb/dev", Some("8:16\n"));
        mk("sys/class/block/sdb/holders", None);
        mk("sys/class/block/sdb/sdb1/partition", Some("1\n"));
        mk("sys/class/block/sdb/sdb1/dev", Some("8:17\n"));
        mk("sys/class/block/sdb1/holders/dm-0", None);
        mk("sys/class/block/sdb1/dev", Some("8:17\n"));
        mk("proc/self/mountinfo", Some(MOUNTINFO));
        mk("proc/swaps", Some("Filename Type Size Used Priority\n"));
        let root = SysRoot::at(p).unwrap();
        let r = holds_data(&root, "/dev/sdb").unwrap();
        assert!(
            r.contains(&Reason::Held {
                device: "sdb1".into(),
                holder: "dm-0".into()
            }),
            "{r:?}"
        );
        assert!(
            r.contains(&Reason::Partitions {
                names: vec!["sdb1".into()]
            }),
            "{r:?}"
        );
        assert!(
            r.iter().any(|x| matches!(x, Reason::Mounted { .. })),
            "{r:?}"
        );
        let err = holds_data(&root, "sdz").unwrap_err();
        assert!(err.to_string().contains("sdz"), "{err}");
    }

    /// A snapshot (`iolab snapshot`) has /sys/block, not /sys/class/block: a dry run against
    /// one still finds the disk, its partition and the partition's holder.
    #[test]
    fn reads_a_snapshots_sys_block() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        for (rel, text) in [
            ("sys/block/sdb/dev", "8:16\n"),
            ("sys/block/sdb/sdb1/partition", "1\n"),
            ("sys/block/sdb/sdb1/dev", "8:17\n"),
            ("sys/block/sdb/sdb1/holders/md0", ""),
        ] {
            if text.is_empty() {
                std::fs::create_dir_all(p.join(rel)).unwrap();
            } else {
                std::fs::create_dir_all(p.join(rel).parent().unwrap()).unwrap();
                std::fs::write(p.join(rel), text).unwrap();
            }
        }
        let root = SysRoot::at(p).unwrap();
        let r = holds_data(&root, "sdb").unwrap();
        assert_eq!(
            r,
            vec![
                Reason::Held {
                    device: "sdb1".into(),
                    holder: "md0".into()
                },
                Reason::Partitions {
                    names: vec!["sdb1".into()]
                }
            ]
        );
    }
}

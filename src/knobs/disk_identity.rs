//! Which disk a block-queue knob belonged to. Disk names are reused: a loop device detached and
//! attached to another file, a drive pulled and another plugged in. After a kill, `restore`
//! must not write the old disk's values onto whatever disk has the name now (another user's
//! new loop device, on a shared machine). The kernel numbers every disk it makes or
//! re-attaches (`diskseq`, Linux 5.15 and later); before that the device number is all there
//! is, which tells a hot-plugged disk from the one before it but not a loop device re-attached.

use crate::sys::SysRoot;

/// The disk of a block-queue attribute's path (`/sys/block/NAME/queue/...`), as `diskseq N`
/// or, where the kernel has no diskseq, `dev MAJ:MIN`; `None` for other paths.
pub(super) fn of(root: &SysRoot, path: &str) -> Option<String> {
    let rest = path
        .strip_prefix("/sys/block/")
        .or_else(|| path.strip_prefix("/sys/class/block/"))?;
    let (disk, attr) = rest.split_once('/')?;
    if !attr.starts_with("queue/") {
        return None;
    }
    of_disk(root, disk)
}

/// The identity of disk `disk` (`loop1`, `sdb`): `diskseq N`, else `dev MAJ:MIN`; `None` when
/// no such disk exists.
pub(crate) fn of_disk(root: &SysRoot, disk: &str) -> Option<String> {
    let read = |file: &str| root.attr(&format!("/sys/block/{disk}/{file}"));
    read("diskseq")
        .map(|n| format!("diskseq {n}"))
        .or_else(|| read("dev").map(|d| format!("dev {d}")))
}

/// Whether the disk journaled in `then` is still the one under its name; entries with no
/// record (other knobs, older journals) are.
pub(super) fn still_the_same(root: &SysRoot, path: &str, then: Option<&str>) -> bool {
    then.is_none_or(|then| of(root, path).as_deref() == Some(then))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disk_is_known_by_its_sequence_number_else_its_device_number() {
        let dir = tempfile::tempdir().unwrap();
        let block = dir.path().join("sys/block");
        for (disk, files) in [
            ("loop1", &[("diskseq", "1896\n"), ("dev", "7:1\n")][..]),
            ("sdb", &[("dev", "8:16\n")][..]),
        ] {
            std::fs::create_dir_all(block.join(disk).join("queue")).unwrap();
            for (f, v) in files {
                std::fs::write(block.join(disk).join(f), v).unwrap();
            }
        }
        let root = SysRoot::at(dir.path()).unwrap();
        let ra = "/sys/block/loop1/queue/read_ahead_kb";
        assert_eq!(of(&root, ra).as_deref(), Some("diskseq 1896"));
        let sdb = "/sys/block/sdb/queue/scheduler";
        assert_eq!(of(&root, sdb).as_deref(), Some("dev 8:16"));
        assert_eq!(of(&root, "/proc/irq/30/smp_affinity_list"), None);
        assert!(still_the_same(&root, ra, Some("diskseq 1896")));
        assert!(still_the_same(&root, ra, None));
        // Re-attached: a new number under the same name.
        std::fs::write(block.join("loop1/diskseq"), "2300\n").unwrap();
        assert!(!still_the_same(&root, ra, Some("diskseq 1896")));
    }
}

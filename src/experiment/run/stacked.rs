//! The devices under a target: what a dm or md device is built from (`/sys/block/DEV/slaves`,
//! followed down), and the per-path disks of an NVMe multipath head (`nvme0c0n1`, where
//! kernels before 6.3 count the head's I/O). The sampler watches them too, so a run on
//! `dm-0` also says what each disk below it did (case 4 compared a dm device with the
//! disks below it).

use crate::sys::SysRoot;

/// The devices below `name`, nearest first, each once, `name` itself excluded; `paths_of`
/// gives a multipath head's path disks (the machine model's `paths`). Depth is bounded so a
/// cycle in a damaged fixture tree cannot loop.
pub(crate) fn below(
    root: &SysRoot,
    paths_of: &dyn Fn(&str) -> Vec<String>,
    name: &str,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut frontier = vec![name.to_string()];
    for _ in 0..8 {
        let mut next = Vec::new();
        for dev in &frontier {
            let mut found = root
                .list_optional(&format!("/sys/block/{dev}/slaves"))
                .unwrap_or_default();
            found.extend(paths_of(dev));
            found.sort();
            for f in found {
                // A partition below a dm device is sampled as itself (it has its own line in
                // /proc/diskstats).
                if f != name && !out.contains(&f) {
                    out.push(f.clone());
                    next.push(f);
                }
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slaves_are_followed_down_and_each_listed_once() {
        let dir = tempfile::tempdir().unwrap();
        let mk = |p: &str| std::fs::create_dir_all(dir.path().join(p)).unwrap();
        // dm-1 on md0 and sdc; md0 on sda and sdb; sdb also under sdc (a damaged tree).
        mk("sys/block/dm-1/slaves/md0");
        mk("sys/block/dm-1/slaves/sdc");
        mk("sys/block/md0/slaves/sda");
        mk("sys/block/md0/slaves/sdb");
        mk("sys/block/sdc/slaves/sdb");
        mk("sys/block/sda/slaves");
        let root = SysRoot::at(dir.path()).unwrap();
        let none = |_: &str| Vec::new();
        assert_eq!(below(&root, &none, "dm-1"), ["md0", "sdc", "sda", "sdb"]);
        assert!(below(&root, &none, "sda").is_empty());
        assert!(below(&root, &none, "nosuch").is_empty());
        let multipath = |d: &str| {
            if d == "nvme0n1" {
                vec!["nvme0c0n1".to_string()]
            } else {
                Vec::new()
            }
        };
        assert_eq!(below(&root, &multipath, "nvme0n1"), ["nvme0c0n1"]);
    }
}

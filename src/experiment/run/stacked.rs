//! The devices under a target: what a dm or md device is built from (its `slaves` in the
//! machine model, followed down), and the per-path disks of an NVMe multipath head
//! (`nvme0c0n1`, where kernels before 6.3 count the head's I/O). The sampler watches them
//! too, so a run on `dm-0` also says what each disk below it did (case 4 compared a dm device
//! with the disks below it). Read from the model, so a host's are found as this machine's are.

use crate::model::Machine;

/// The devices below `name` in `m`, nearest first, each once, `name` itself excluded. Depth
/// is bounded so a cycle in a damaged fixture tree cannot loop.
pub(crate) fn below(m: &Machine, name: &str) -> Vec<String> {
    below_by(
        &|dev: &str| {
            m.device(dev)
                .map(|d| [d.slaves.clone(), d.paths.clone()].concat())
                .unwrap_or_default()
        },
        name,
    )
}

/// [`below`] with `children` giving what each device is built from.
fn below_by(children: &dyn Fn(&str) -> Vec<String>, name: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut frontier = vec![name.to_string()];
    for _ in 0..8 {
        let mut next = Vec::new();
        for dev in &frontier {
            let mut found = children(dev);
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
        // dm-1 on md0 and sdc; md0 on sda and sdb; sdb also under sdc (a damaged tree).
        let children = |d: &str| -> Vec<String> {
            let c: &[&str] = match d {
                "dm-1" => &["sdc", "md0"],
                "md0" => &["sda", "sdb"],
                "sdc" => &["sdb"],
                "nvme0n1" => &["nvme0c0n1"],
                _ => &[],
            };
            c.iter().map(|s| s.to_string()).collect()
        };
        assert_eq!(below_by(&children, "dm-1"), ["md0", "sdc", "sda", "sdb"]);
        assert!(below_by(&children, "sda").is_empty());
        assert!(below_by(&children, "nosuch").is_empty());
        assert_eq!(below_by(&children, "nvme0n1"), ["nvme0c0n1"]);
    }
}

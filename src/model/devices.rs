//! Block devices: every disk in /sys/block with its partitions, size, rotational flag, the
//! queue knobs experiments turn (current value and what may be written), its blk-mq hardware
//! queues with the CPUs that submit to each, and whether it holds data. The data check is the
//! first line of defence for "never write to a disk that holds data": mounted (through
//! mountinfo, by device number or source), holders (dm, MD, LVM), swap, or partitions.

use super::Warnings;
use crate::sys::parse::mountinfo::{mountinfo, Mount};
use crate::sys::parse::queue::bracketed_choice;
use crate::sys::parse::swaps::{swaps, Swap};
use crate::sys::{SysError, SysRoot};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub(crate) const MOUNTINFO: &str = "/proc/self/mountinfo";
pub(crate) const SWAPS: &str = "/proc/swaps";

/// One disk (not a partition).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockDevice {
    pub(crate) name: String,
    /// `major:minor`.
    pub(crate) dev: String,
    /// Where the device lives in sysfs (resolved), e.g. /sys/devices/pci0000:00/.../block/vda.
    pub(crate) sysfs: String,
    /// nvme, virtio, scsi, loop, zram, dm, md, ... (from the name and the sysfs path).
    pub(crate) kind: String,
    pub(crate) size_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) rotational: Option<bool>,
    pub(crate) read_only: bool,
    /// The driver bound to the nearest device above the disk (virtio_blk, sd, nvme).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) driver: Option<String>,
    /// The PCI function of its controller, and that function's driver.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) pci: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) controller_driver: Option<String>,
    /// NUMA node of the controller (None when the platform does not say).
    pub(crate) node: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) model: Option<String>,
    /// For a bound loop device, the file behind it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) backing_file: Option<String>,
    pub(crate) partitions: Vec<Partition>,
    /// True for the hidden per-path disks of NVMe multipath (`nvme0c0n1`).
    pub(crate) hidden: bool,
    /// For an NVMe multipath head, its path disks (whose controllers serve it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) paths: Vec<String>,
    /// What a dm or md device is built from (`/sys/block/X/slaves`): disks or partitions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) slaves: Vec<String>,
    /// Current value of each queue knob that exists on this device.
    pub(crate) knobs: BTreeMap<String, String>,
    /// What each knob accepts, where that is known.
    pub(crate) allowed: BTreeMap<String, Allowed>,
    /// The I/O scheduler's own settings (`queue/iosched/*`: mq-deadline's read_expire, bfq's
    /// slice_idle, ...), which an experiment varies as `queue/iosched/NAME`; empty with none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) iosched: BTreeMap<String, String>,
    /// blk-mq hardware queues (empty for bio-based devices such as zram or md).
    pub(crate) queues: Vec<HwQueue>,
    /// IRQ numbers that complete this device's I/O.
    pub(crate) irqs: Vec<u32>,
    /// Where an I/O generator would run "on", "near" or "far" from the CPU that takes this
    /// device's completion interrupts (see `placement`); absent without interrupts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) placement: Option<super::OnNearFar>,
    /// In use here: mounted, held (dm, md, LVM), swap or partitioned, as /sys and /proc say.
    /// Its bytes are not read (that would disturb the page cache of a device under test):
    /// the check before a write (`target::holds_data`) reads them.
    pub(crate) holds_data: bool,
    /// Why it holds data ("mounted at / (ext4)", "holder dm-0", "swap", "partition vda1").
    pub(crate) data_reasons: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Partition {
    pub(crate) name: String,
    pub(crate) dev: String,
    pub(crate) size_bytes: u64,
}

/// What a knob accepts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Allowed {
    Choices(Vec<String>),
    Range { min: i64, max: Option<i64> },
}

/// One blk-mq hardware context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HwQueue {
    pub(crate) queue: u32,
    /// CPUs whose submissions go to this queue.
    pub(crate) cpus: Vec<u32>,
    /// The IRQ that completes it, when one IRQ serves exactly this queue.
    pub(crate) irq: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) nr_tags: Option<u32>,
}

/// Knobs read from /sys/block/X/queue, in the order people look at them.
pub(crate) const KNOBS: &[&str] = &[
    "scheduler",
    "rq_affinity",
    "nr_requests",
    "read_ahead_kb",
    "nomerges",
    "io_poll",
    "io_poll_delay",
    "wbt_lat_usec",
    "max_sectors_kb",
    "add_random",
    "iostats",
    "write_cache",
];

/// The [`KNOBS`] of `device`'s queue that can be read under `root`, each as its current
/// value (a list's chosen entry): what a run records, and what a scratch device puts back.
pub(crate) fn queue_settings(root: &SysRoot, device: &str) -> Vec<(String, String)> {
    KNOBS
        .iter()
        .filter_map(|&knob| {
            let text = root.attr(&crate::knobs::queue_attr_path(device, knob))?;
            Some((knob.to_string(), crate::knobs::current_choice(&text)))
        })
        .collect()
}

/// Queue knobs that kernels from some release on keep as they are, and why: a factor of one
/// is refused there rather than failing every run (each write is checked to hold).
pub(crate) const FIXED: &[(&str, &str)] = &[
    (
        "io_poll",
        "Linux 5.16 and later refuse or ignore writes to io_poll (\"block: don't allow writing \
         to the poll queue attribute\"): a queue polls when its driver gives it poll queues, \
         e.g. nvme.poll_queues; vary `hipri` to compare polled I/O with interrupts",
    ),
    (
        "io_poll_delay",
        "Linux 6.4 and later ignore writes to io_poll_delay and read it as -1 (\"blk-mq: remove \
         hybrid polling\"): polling is always classic",
    ),
];

fn choices(values: &[&str]) -> Allowed {
    Allowed::Choices(values.iter().map(|s| s.to_string()).collect())
}

/// The current scheduler's settings, by name.
fn read_iosched(root: &SysRoot, name: &str) -> BTreeMap<String, String> {
    let dir = format!("/sys/block/{name}/queue/iosched");
    root.list_optional(&dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|k| Some((k.clone(), root.attr(&format!("{dir}/{k}"))?)))
        .collect()
}

/// Reads the queue knobs and what they accept.
fn read_knobs(root: &SysRoot, name: &str) -> (BTreeMap<String, String>, BTreeMap<String, Allowed>) {
    let q = format!("/sys/block/{name}/queue");
    let mut knobs = BTreeMap::new();
    let mut allowed = BTreeMap::new();
    let release = root.attr("/proc/sys/kernel/osrelease");
    let since = |major, minor| {
        release
            .as_deref()
            .and_then(|r| super::release_at_least(r, major, minor))
            .unwrap_or(false)
    };
    for &knob in KNOBS {
        let Some(text) = root.attr(&format!("{q}/{knob}")) else {
            continue;
        };
        let value = match knob {
            "scheduler" => {
                let c = bracketed_choice(&text);
                if !c.allowed.is_empty() {
                    allowed.insert(knob.to_string(), Allowed::Choices(c.allowed));
                }
                c.current.unwrap_or(text)
            }
            _ => text,
        };
        let accepts = match knob {
            "rq_affinity" | "nomerges" => Some(choices(&["0", "1", "2"])),
            // Knobs this kernel no longer lets change: no value is allowed (`FIXED` says why).
            "io_poll" if since(5, 16) => None,
            "io_poll_delay" if since(6, 4) => None,
            "io_poll" | "add_random" | "iostats" => Some(choices(&["0", "1"])),
            "write_cache" => Some(choices(&["write back", "write through"])),
            // BLKDEV_MIN_RQ; the upper bound depends on the tag set.
            "nr_requests" => Some(Allowed::Range { min: 4, max: None }),
            "read_ahead_kb" => Some(Allowed::Range { min: 0, max: None }),
            // -1 restores the default; 0 disables.
            "wbt_lat_usec" => Some(Allowed::Range { min: -1, max: None }),
            "io_poll_delay" => Some(Allowed::Range { min: -1, max: None }),
            "max_sectors_kb" => Some(Allowed::Range {
                min: 4,
                max: root
                    .attr(&format!("{q}/max_hw_sectors_kb"))
                    .and_then(|v| v.parse().ok()),
            }),
            _ => None,
        };
        if let Some(a) = accepts {
            allowed.insert(knob.to_string(), a);
        }
        knobs.insert(knob.to_string(), value);
    }
    (knobs, allowed)
}

/// Reads the blk-mq hardware queues (`/sys/block/X/mq/N/cpu_list`), IRQs not yet assigned.
pub(crate) fn read_queues(root: &SysRoot, name: &str, warn: &mut Warnings) -> Vec<HwQueue> {
    let dir = format!("/sys/block/{name}/mq");
    let mut queues: Vec<HwQueue> = Vec::new();
    let entries = match root.list_optional(&dir) {
        Ok(e) => e,
        Err(e) => {
            warn.push(e.to_string());
            return queues;
        }
    };
    for entry in entries {
        let Ok(index) = entry.parse::<u32>() else {
            continue;
        };
        let abs = format!("{dir}/{entry}/cpu_list");
        let cpus = match super::topology::read_cpulist(root, &abs) {
            Ok(c) => c,
            Err(e) => {
                warn.push(e.to_string());
                continue;
            }
        };
        queues.push(HwQueue {
            queue: index,
            cpus,
            irq: None,
            nr_tags: root
                .attr(&format!("{dir}/{entry}/nr_tags"))
                .and_then(|v| v.parse().ok()),
        });
    }
    queues.sort_by_key(|q| q.queue);
    queues
}

fn size_bytes(root: &SysRoot, dir: &str) -> u64 {
    // The size attribute is always in 512-byte sectors.
    root.attr(&format!("{dir}/size"))
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0)
        .saturating_mul(512)
}

fn kind_of(name: &str, sysfs: &str) -> String {
    let prefixes = [
        ("nvme", "nvme"),
        ("vd", "virtio"),
        ("xvd", "xen"),
        ("loop", "loop"),
        ("zram", "zram"),
        ("dm-", "dm"),
        ("md", "md"),
        ("nbd", "nbd"),
        ("ram", "ram"),
        ("sr", "cdrom"),
        ("mmcblk", "mmc"),
        ("rbd", "rbd"),
        ("pmem", "pmem"),
    ];
    if sysfs.contains("/host") && sysfs.contains("/target") {
        return "scsi".to_string();
    }
    for (p, k) in prefixes {
        if name.starts_with(p) {
            return k.to_string();
        }
    }
    if name.starts_with("sd") {
        return "scsi".to_string();
    }
    "other".to_string()
}

/// Reads one disk: everything but its interrupts (see `device_map`).
pub(crate) fn read_device(
    root: &SysRoot,
    name: &str,
    warn: &mut Warnings,
) -> Result<BlockDevice, SysError> {
    let dir = format!("/sys/block/{name}");
    let sysfs = root.resolve(&dir)?;
    let dev = root.attr(&format!("{dir}/dev")).unwrap_or_default();
    let mut partitions = Vec::new();
    for entry in root.list(&dir)? {
        if entry.starts_with(name) && root.exists(&format!("{dir}/{entry}/partition")) {
            let pdir = format!("{dir}/{entry}");
            partitions.push(Partition {
                dev: root.attr(&format!("{pdir}/dev")).unwrap_or_default(),
                size_bytes: size_bytes(root, &pdir),
                name: entry,
            });
        }
    }
    let (knobs, allowed) = read_knobs(root, name);
    Ok(BlockDevice {
        name: name.to_string(),
        kind: kind_of(name, &sysfs),
        dev,
        size_bytes: size_bytes(root, &dir),
        rotational: root
            .attr(&format!("{dir}/queue/rotational"))
            .map(|v| v == "1"),
        read_only: root.attr(&format!("{dir}/ro")).as_deref() == Some("1"),
        driver: None,
        pci: None,
        controller_driver: None,
        node: None,
        model: root
            .attr(&format!("{dir}/device/model"))
            .filter(|m| !m.is_empty()),
        backing_file: root
            .attr(&format!("{dir}/loop/backing_file"))
            .filter(|f| !f.is_empty()),
        partitions,
        hidden: root.attr(&format!("{dir}/hidden")).as_deref() == Some("1"),
        paths: Vec::new(),
        slaves: {
            let mut s = root
                .list_optional(&format!("{dir}/slaves"))
                .unwrap_or_default();
            s.sort();
            s
        },
        knobs,
        allowed,
        iosched: read_iosched(root, name),
        queues: read_queues(root, name, warn),
        irqs: Vec::new(),
        placement: None,
        holds_data: false,
        data_reasons: Vec::new(),
        sysfs,
    })
}

/// The mounts and swaps that make a device "hold data"; absent files warn and count as none.
#[derive(Debug, Default)]
pub(crate) struct InUse {
    pub(crate) mounts: Vec<Mount>,
    pub(crate) swaps: Vec<Swap>,
}

pub(crate) fn read_in_use(root: &SysRoot, warn: &mut Warnings) -> InUse {
    let mut out = InUse::default();
    match root.read(MOUNTINFO) {
        Ok(text) => match mountinfo(&text) {
            Ok(m) => out.mounts = m,
            Err(e) => warn.push(root.parse_error(MOUNTINFO, e.line, e.message).to_string()),
        },
        Err(e) => warn.push(format!("{e}; mounted devices cannot be recognised")),
    }
    match root.read(SWAPS) {
        Ok(text) => match swaps(&text) {
            Ok(s) => out.swaps = s,
            Err(e) => warn.push(root.parse_error(SWAPS, e.line, e.message).to_string()),
        },
        Err(e) => warn.push(format!("{e}; swap devices cannot be recognised")),
    }
    out
}

/// Fills `holds_data` and `data_reasons` for one device, following holders (dm, md) down.
pub(crate) fn mark_data(root: &SysRoot, dev: &mut BlockDevice, in_use: &InUse) {
    let mut reasons = Vec::new();
    let mut names: Vec<(String, String)> = vec![(dev.name.clone(), dev.dev.clone())];
    for p in &dev.partitions {
        reasons.push(format!("partition {}", p.name));
        names.push((p.name.clone(), p.dev.clone()));
    }
    // Holders of the disk or any partition (LVM, dm-crypt, MD): data lives above them.
    let mut i = 0;
    while i < names.len() && names.len() < 256 {
        let (name, _) = names[i].clone();
        let holders_dir = if name == dev.name {
            format!("/sys/block/{name}/holders")
        } else if dev.partitions.iter().any(|p| p.name == name) {
            format!("/sys/block/{}/{name}/holders", dev.name)
        } else {
            format!("/sys/block/{name}/holders")
        };
        for holder in root.list_optional(&holders_dir).unwrap_or_default() {
            if !names.iter().any(|(n, _)| *n == holder) {
                reasons.push(format!("holder {holder} (of {name})"));
                let hdev = root
                    .attr(&format!("/sys/block/{holder}/dev"))
                    .unwrap_or_default();
                names.push((holder, hdev));
            }
        }
        i += 1;
    }
    let dm_names: Vec<String> = names
        .iter()
        .filter_map(|(n, _)| root.attr(&format!("/sys/block/{n}/dm/name")))
        .collect();
    let is_ours = |path: &str| -> Option<String> {
        let base = path.strip_prefix("/dev/")?;
        let base = base.strip_prefix("mapper/").unwrap_or(base);
        names
            .iter()
            .map(|(n, _)| n)
            .chain(dm_names.iter())
            .find(|n| n.as_str() == base)
            .cloned()
    };
    for m in &in_use.mounts {
        let number = format!("{}:{}", m.major, m.minor);
        let by_number = m.major != 0 && names.iter().any(|(_, d)| *d == number);
        if by_number || is_ours(&m.source).is_some() {
            reasons.push(format!("mounted at {} ({})", m.mount_point, m.fs_type));
        }
    }
    for s in &in_use.swaps {
        if let Some(n) = is_ours(&s.filename) {
            reasons.push(format!("swap on {n}"));
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    reasons.retain(|r| seen.insert(r.clone()));
    dev.holds_data = !reasons.is_empty();
    dev.data_reasons = reasons;
}

#[cfg(test)]
mod tests {
    /// scripts/machine-state, which CI uses to check that the tests put every queue knob
    /// back, lists the same knobs iolab writes.
    #[test]
    fn the_tests_state_check_lists_every_queue_knob() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/machine-state");
        let script = std::fs::read_to_string(path).unwrap();
        let listed = script
            .split("knobs=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .expect("no knobs=\"...\" in scripts/machine-state");
        let mut listed: Vec<&str> = listed.split_whitespace().collect();
        let mut knobs = super::KNOBS.to_vec();
        listed.sort_unstable();
        knobs.sort_unstable();
        assert_eq!(listed, knobs);
        // And the scheduler's own settings, which experiments vary too.
        assert!(script.contains("/queue/iosched/"), "{script}");
    }

    /// The scheduler's settings are read as they are, each by its name (shown by `inspect`).
    #[test]
    fn the_schedulers_settings_are_read_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let iosched = dir.path().join("sys/block/sdb/queue/iosched");
        std::fs::create_dir_all(&iosched).unwrap();
        std::fs::write(iosched.join("read_expire"), "500\n").unwrap();
        std::fs::write(iosched.join("fifo_batch"), "16\n").unwrap();
        let root = crate::sys::SysRoot::at(dir.path()).unwrap();
        let read = super::read_iosched(&root, "sdb");
        assert_eq!(
            read.into_iter().collect::<Vec<_>>(),
            [
                ("fifo_batch".to_string(), "16".to_string()),
                ("read_expire".to_string(), "500".to_string())
            ]
        );
        assert!(super::read_iosched(&root, "sdc").is_empty());
    }
}

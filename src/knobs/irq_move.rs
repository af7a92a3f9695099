//! Interrupt moves that are still pending. On x86 a write to an interrupt's affinity takes
//! effect only when the interrupt next fires, and a second write replaces a move that has not
//! happened yet. Putting an interrupt back (its old CPU, then its old mask; or `irq_cpu =
//! "unchanged"`'s found CPU, then found mask) therefore needs the first move to have happened
//! before the second write, or the interrupt stays where iolab put it (docs/lab.md records the
//! measurements). Before an affinity write on the live machine, `settle` waits briefly for a
//! pending move; when the interrupt stays idle it makes a disk the interrupt serves answer one
//! direct read of its first block, sent from a CPU of the new mask. Reads only, never writes;
//! a device that does not answer keeps only its own thread waiting.

use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::time::{Duration, Instant};

use super::attr::read_attr;
use crate::model::device_map::disks_of_irq;
use crate::sys::parse::{cpulist, cpumask};
use crate::sys::SysRoot;

/// How long a pending move is waited for: a busy interrupt fires within milliseconds.
const WAIT: Duration = Duration::from_millis(200);
/// When an idle interrupt is made to fire, if it has not moved by then.
const NUDGE_AFTER: Duration = Duration::from_millis(20);
/// How long, once a disk was made to answer a read, the move is waited for: the read's
/// completion is the interrupt that moves it, and a slow disk, or an emulated guest with many
/// CPUs, can take longer than `WAIT` (a lab guest left an HBA interrupt outside its restored
/// mask, its move never made). A disk that answers at once ends the wait as soon.
const NUDGED_WAIT: Duration = Duration::from_secs(2);

/// The interrupt number and effective-affinity file of an affinity file
/// (`/proc/irq/N/smp_affinity[_list]`).
pub(super) fn effective_of(path: &str) -> Option<(u32, String)> {
    let (dir, file) = path.rsplit_once('/')?;
    let irq = dir.strip_prefix("/proc/irq/")?.parse().ok()?;
    match file {
        "smp_affinity_list" => Some((irq, format!("{dir}/effective_affinity_list"))),
        "smp_affinity" => Some((irq, format!("{dir}/effective_affinity"))),
        _ => None,
    }
}

/// Whether two values of the affinity file `path` name the same CPUs (`0-3` and `0,1,2,3`;
/// masks with or without leading zeros and commas). Unparsable text compares as text.
pub(super) fn same_cpus(path: &str, a: &str, b: &str) -> bool {
    let cpus = |v: &str| {
        if path.ends_with("_list") {
            cpulist(v.trim()).ok()
        } else {
            cpumask(v.trim()).ok()
        }
    };
    match (cpus(a), cpus(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a.trim() == b.trim(),
    }
}

/// The handlers the interrupt of affinity file `path` serves now: the action directories the
/// kernel keeps in /proc/irq/N, named as drivers requested them ("nvme0q3", "eth0-TxRx-1"),
/// sorted and joined by ','. `None` for other files, or an interrupt with none.
pub(super) fn serving(root: &SysRoot, path: &str) -> Option<String> {
    effective_of(path)?;
    let (dir, _) = path.rsplit_once('/')?;
    let mut names: Vec<String> = std::fs::read_dir(root.path(dir))
        .ok()?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    (!names.is_empty()).then(|| names.join(","))
}

/// Whether the interrupt journaled in `entry` is still the one under its number: it serves
/// at least one handler it served then (a shared line may have gained others). A number
/// freed, or handed to another device by a driver reloaded within the boot, is not. Entries
/// with no record (other knobs, older journals, trees without action directories) are.
pub(super) fn still_serving(root: &SysRoot, entry: &super::JournalEntry) -> bool {
    let Some(then) = &entry.serving else {
        return true;
    };
    let now = serving(root, &entry.path).unwrap_or_default();
    then.split(',').any(|h| now.split(',').any(|n| n == h))
}

/// A CPU set as an affinity file of either form holds it.
fn cpus_in(path: &str, text: &str) -> Option<Vec<u32>> {
    if path.ends_with("_list") {
        cpulist(text).ok()
    } else {
        cpumask(text).ok()
    }
}

/// True when the interrupt is delivered within its current mask, or not started (empty
/// effective affinity): no move is pending.
fn settled(path: &str, effective: &str) -> Option<(bool, Vec<u32>)> {
    let mask = cpus_in(path, &read_attr(path).ok()?)?;
    let eff = cpus_in(effective, &read_attr(effective).ok()?)?;
    Some((eff.is_empty() || eff.iter().all(|c| mask.contains(c)), mask))
}

/// Before writing the live affinity file `path`: waits up to 200 ms for a pending move of its
/// interrupt to happen, making an idle disk interrupt fire after 20 ms (and then waiting up to
/// 2 s for that read's interrupt). Returns the disk read for that, if any. Not an affinity
/// file, or unreadable: returns at once.
pub(super) fn settle(path: &str) -> Option<String> {
    let (irq, effective) = effective_of(path)?;
    let start = Instant::now();
    let (mut nudged, mut wait) = (None, WAIT);
    loop {
        let (done, mask) = settled(path, &effective)?;
        if done || start.elapsed() >= wait {
            return nudged;
        }
        if nudged.is_none() && start.elapsed() >= NUDGE_AFTER {
            let disk = nudge(irq, &mask).unwrap_or_default();
            if !disk.is_empty() {
                wait = NUDGE_AFTER + NUDGED_WAIT;
            }
            nudged = Some(disk);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sends one direct read of the first 4 KiB of a disk that `irq` serves, from one of `cpus`,
/// on a thread of its own. Returns the disk's name.
fn nudge(irq: u32, cpus: &[u32]) -> Option<String> {
    let root = SysRoot::live();
    let disk = disks_of_irq(&root, irq)
        .into_iter()
        .find(|d| is_device_node(&root, d))?;
    let node = format!("/dev/{disk}");
    let cpus = cpus.to_vec();
    std::thread::spawn(move || {
        pin_to(&cpus);
        let _ = read_first_block(&node);
    });
    Some(disk)
}

/// True when /dev/NAME is the block device /sys/block/NAME describes (not a stale or
/// unrelated node).
fn is_device_node(root: &SysRoot, disk: &str) -> bool {
    let Some(numbers) = root.attr(&format!("/sys/block/{disk}/dev")) else {
        return false;
    };
    let Ok(meta) = std::fs::metadata(format!("/dev/{disk}")) else {
        return false;
    };
    let rdev = meta.rdev();
    meta.file_type().is_block_device()
        && numbers == format!("{}:{}", libc::major(rdev), libc::minor(rdev))
}

fn pin_to(cpus: &[u32]) {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET stays within its bounds for the
    // CPU numbers the kernel reports, and pid 0 is this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus
            .iter()
            .filter(|c| (**c as usize) < libc::CPU_SETSIZE as usize)
        {
            libc::CPU_SET(c as usize, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// One O_DIRECT read (past the page cache, so the device must answer) of 4 KiB at offset 0,
/// into a 4 KiB-aligned buffer: valid for every logical block size up to 4 KiB.
fn read_first_block(node: &str) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(node)?;
    let mut buf = vec![0u8; 8192];
    let skip = buf.as_ptr().align_offset(4096);
    file.read_at(&mut buf[skip..skip + 4096], 0).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affinity_files_name_their_interrupt_and_effective_file() {
        assert_eq!(
            effective_of("/proc/irq/35/smp_affinity_list"),
            Some((35, "/proc/irq/35/effective_affinity_list".into()))
        );
        assert_eq!(
            effective_of("/proc/irq/7/smp_affinity"),
            Some((7, "/proc/irq/7/effective_affinity".into()))
        );
        assert_eq!(effective_of("/sys/block/sda/queue/scheduler"), None);
        assert_eq!(effective_of("/proc/irq/x/smp_affinity"), None);
    }

    #[test]
    fn both_forms_of_affinity_read_as_cpu_sets() {
        assert_eq!(
            cpus_in("/proc/irq/1/smp_affinity_list", "0-2,9"),
            Some(vec![0, 1, 2, 9])
        );
        assert_eq!(
            cpus_in("/proc/irq/1/smp_affinity", "00000205"),
            Some(vec![0, 2, 9])
        );
    }
}

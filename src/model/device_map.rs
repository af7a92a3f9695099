//! Device ↔ interrupt ↔ queue ↔ CPU. A block device's interrupts belong to its controller, so
//! we walk up the device's sysfs path (…/0000:3d:00.0/nvme/nvme0/nvme0n1, or
//! …/0000:00:1f.2/host0/target0:0:0/0:0:0:0/block/sda behind an HBA) to the nearest PCI
//! function and take its `msi_irqs` (or its legacy `irq`). Among those, configuration and
//! admin vectors (`virtio1-config`, `nvme0q0`) are not I/O. Each blk-mq hardware queue is
//! then tied to the IRQ that completes it: by the driver's action name where the naming is
//! fixed (`nvme0q3` is hardware queue 2, `virtio1-req.0` is queue 0), otherwise by the IRQ
//! whose affinity equals the queue's CPU list (how blk_mq_pci_map_queues builds the map).

use super::devices::BlockDevice;
use super::irqs::Irq;
use super::Warnings;
use crate::sys::SysRoot;

/// True for `0000:3d:00.0`-style names (domain:bus:device.function); Intel VMD domains
/// have five hex digits (`10000:01:00.0`).
fn is_pci_address(name: &str) -> bool {
    let hex = |s: &str, len: std::ops::RangeInclusive<usize>| {
        len.contains(&s.len()) && s.chars().all(|c| c.is_ascii_hexdigit())
    };
    let parts: Vec<&str> = name.split(':').collect();
    if parts.len() != 3 {
        return false;
    }
    let Some((device, function)) = parts[2].split_once('.') else {
        return false;
    };
    hex(parts[0], 4..=8) && hex(parts[1], 2..=2) && hex(device, 2..=2) && hex(function, 1..=1)
}

fn basename(path: &std::path::Path) -> Option<String> {
    path.file_name().map(|n| n.to_string_lossy().into_owned())
}

/// `name` followed by a non-empty run of digits, returning the digits' value.
fn numbered(name: &str, prefix: &str) -> Option<u32> {
    let rest = name.strip_prefix(prefix)?;
    (!rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
        .then(|| rest.parse().ok())
        .flatten()
}

/// Actions that configure or administer the controller rather than complete I/O.
fn is_control_action(action: &str) -> bool {
    action.ends_with("-config")
        || action
            .split_once('q')
            .is_some_and(|(ctrl, q)| numbered(ctrl, "nvme").is_some() && q == "0")
}

/// The hardware queue an action name says it serves, given the controller names above the
/// disk (`nvme0`, `virtio1`).
fn queue_from_action(action: &str, controllers: &[String]) -> Option<u32> {
    for ctrl in controllers {
        let Some(rest) = action.strip_prefix(ctrl.as_str()) else {
            continue;
        };
        if ctrl.starts_with("nvme") {
            // nvme I/O queue N (1-based) is blk-mq hardware context N-1.
            if let Some(n) = numbered(rest, "q").filter(|n| *n > 0) {
                return Some(n - 1);
            }
        } else if ctrl.starts_with("virtio") {
            if let Some(n) = numbered(rest, "-req.") {
                return Some(n);
            }
        }
    }
    None
}

/// What walking up from one sysfs path found.
#[derive(Default)]
pub(crate) struct Controller {
    /// Names of the devices between the disk and the PCI function (`nvme0`, `virtio1`,
    /// `host0`, ...), nearest first: action names start with some of them.
    pub(crate) names: Vec<String>,
    pub(crate) driver: Option<String>,
    pub(crate) pci: Option<String>,
    pub(crate) pci_driver: Option<String>,
    pub(crate) node: Option<u32>,
    pub(crate) irqs: Vec<u32>,
}

fn link_name(root: &SysRoot, abs: &str) -> Option<String> {
    root.read_link(abs).ok().and_then(|t| basename(&t))
}

/// Walks up from a device's sysfs path to the nearest PCI function.
pub(crate) fn walk_up(root: &SysRoot, sysfs: &str) -> Controller {
    let mut c = Controller::default();
    let mut dir = std::path::PathBuf::from(sysfs);
    while dir.pop()
        && dir.starts_with("/sys/devices")
        && dir != std::path::Path::new("/sys/devices")
    {
        let abs = dir.display().to_string();
        let Some(name) = basename(&dir) else { break };
        if c.driver.is_none() {
            c.driver = link_name(root, &format!("{abs}/driver"));
        }
        if is_pci_address(&name) {
            c.pci = Some(name);
            c.pci_driver = link_name(root, &format!("{abs}/driver"));
            c.node = root
                .attr(&format!("{abs}/numa_node"))
                .and_then(|v| v.parse::<i64>().ok())
                .filter(|n| *n >= 0)
                .map(|n| n as u32);
            c.irqs = root
                .list_optional(&format!("{abs}/msi_irqs"))
                .unwrap_or_default()
                .iter()
                .filter_map(|e| e.parse().ok())
                .collect();
            if c.irqs.is_empty() {
                // Legacy INTx: one line, shared with whatever else sits on it.
                c.irqs.extend(
                    root.attr(&format!("{abs}/irq"))
                        .and_then(|v| v.parse::<u32>().ok())
                        .filter(|n| *n > 0),
                );
            }
            break;
        }
        c.names.push(name);
    }
    c
}

/// The disks (names under /sys/block) whose controller raises interrupt `irq`: the disks a
/// read can be sent to when that interrupt has to fire.
pub(crate) fn disks_of_irq(root: &SysRoot, irq: u32) -> Vec<String> {
    let mut disks: Vec<String> = Vec::new();
    for name in root.list_optional("/sys/block").unwrap_or_default() {
        let Ok(sysfs) = root.resolve(&format!("/sys/block/{name}")) else {
            continue;
        };
        if walk_up(root, &sysfs).irqs.contains(&irq) {
            disks.push(name);
        }
    }
    disks.sort();
    disks
}

/// Finds the controller, its IRQs and the per-queue IRQs of one device.
pub(crate) fn attach(root: &SysRoot, dev: &mut BlockDevice, irqs: &[Irq], warn: &mut Warnings) {
    let mut c = walk_up(root, &dev.sysfs);
    if c.pci.is_none() {
        // An NVMe multipath head sits under /sys/devices/virtual/nvme-subsystem; its paths
        // (nvme0c0n1, ...) sit under the controllers that have the queues and interrupts.
        let dir = format!("/sys/block/{}/multipath", dev.name);
        for path in root.list_optional(&dir).unwrap_or_default() {
            let Ok(sysfs) = root.resolve(&format!("{dir}/{path}")) else {
                continue;
            };
            let p = walk_up(root, &sysfs);
            if c.pci.is_none() {
                c.pci = p.pci.clone();
                c.pci_driver = p.pci_driver.clone();
                c.node = p.node;
                c.driver = p.driver.clone().or(c.driver);
            }
            c.names.extend(p.names);
            c.irqs.extend(p.irqs);
            if dev.queues.is_empty() {
                dev.queues = super::devices::read_queues(root, &path, warn);
            }
            dev.paths.push(path);
        }
    }
    dev.driver = c.driver;
    dev.pci = c.pci;
    dev.controller_driver = c.pci_driver;
    dev.node = c.node;
    let controllers = c.names;
    let mut candidates = c.irqs;
    if dev.pci.is_none() {
        // Platform devices (virtio-mmio, SoC controllers): match action names instead.
        candidates = irqs
            .iter()
            .filter(|irq| {
                irq.actions.iter().any(|a| {
                    controllers.iter().any(|c| {
                        a == c
                            || a.strip_prefix(c.as_str())
                                .is_some_and(|r| r.starts_with('-') || numbered(r, "q").is_some())
                    })
                })
            })
            .filter_map(|irq| irq.number())
            .collect();
    }
    candidates.sort_unstable();
    candidates.dedup();
    let known: Vec<&Irq> = candidates
        .iter()
        .filter_map(|n| irqs.iter().find(|i| i.number() == Some(*n)))
        .collect();
    let io: Vec<&Irq> = known
        .iter()
        .copied()
        .filter(|irq| !irq.actions.is_empty() && !irq.actions.iter().all(|a| is_control_action(a)))
        .collect();
    let serving = if io.is_empty() { known } else { io };
    dev.irqs = serving.iter().filter_map(|i| i.number()).collect();

    // Where the driver names its queue vectors, the name decides; poll queues then have no
    // IRQ even when some vector's affinity happens to equal their CPU list.
    let named_scheme = serving.iter().any(|irq| {
        irq.actions
            .iter()
            .any(|a| queue_from_action(a, &controllers).is_some())
    });
    for q in &mut dev.queues {
        let by_name = serving.iter().find(|irq| {
            irq.actions
                .iter()
                .any(|a| queue_from_action(a, &controllers) == Some(q.queue))
        });
        let by_affinity = || {
            if named_scheme {
                return None;
            }
            let same: Vec<_> = serving
                .iter()
                .filter(|irq| irq.affinity.as_deref() == Some(q.cpus.as_slice()))
                .collect();
            (same.len() == 1).then(|| same[0])
        };
        q.irq = by_name.or_else(by_affinity).and_then(|irq| irq.number());
    }
    if dev.queues.len() == 1 && dev.queues[0].irq.is_none() && dev.irqs.len() == 1 {
        dev.queues[0].irq = Some(dev.irqs[0]);
    }
}

/// Marks as kernel-managed the interrupts that blk-mq spread over a multi-queue device: one
/// IRQ per hardware queue whose affinity is exactly that queue's CPUs. Such vectors come from
/// `pci_alloc_irq_vectors_affinity(.., PCI_IRQ_AFFINITY)` (the map `blk_mq_pci_map_queues`
/// builds from), and the kernel refuses to move them (a write to `smp_affinity` fails with
/// EIO). Their file mode does not always say so: Debian's 6.1 creates `smp_affinity` 0644 for
/// them too (seen in the lab's cells4 NVMe, tests/lab.rs), so the mode check in `irqs` alone
/// would offer them to `irq plan`. A one-queue device's vector is left as its mode says.
pub(crate) fn mark_spread_managed(devices: &[BlockDevice], irqs: &mut [Irq]) {
    for dev in devices {
        let with_irq = dev.queues.iter().filter(|q| q.irq.is_some()).count();
        if with_irq < 2 {
            continue;
        }
        for q in &dev.queues {
            let Some(n) = q.irq else { continue };
            if let Some(irq) = irqs.iter_mut().find(|i| i.number() == Some(n)) {
                if irq.affinity.as_deref() == Some(q.cpus.as_slice()) {
                    irq.managed = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_pci_addresses() {
        assert!(is_pci_address("0000:3d:00.0"));
        assert!(is_pci_address("10000:01:00.0"));
        assert!(!is_pci_address("0000:3d:00"));
        assert!(!is_pci_address("pci0000:00"));
        assert!(!is_pci_address("virtio1"));
    }

    #[test]
    fn queues_from_action_names() {
        let c = vec!["nvme0".to_string()];
        assert_eq!(queue_from_action("nvme0q1", &c), Some(0));
        assert_eq!(queue_from_action("nvme0q12", &c), Some(11));
        assert_eq!(queue_from_action("nvme0q0", &c), None);
        assert_eq!(queue_from_action("nvme1q3", &c), None);
        let v = vec!["virtio1".to_string()];
        assert_eq!(queue_from_action("virtio1-req.3", &v), Some(3));
        assert_eq!(queue_from_action("virtio1-config", &v), None);
        assert_eq!(queue_from_action("virtio12-req.0", &v), None);
    }

    #[test]
    fn control_vectors() {
        assert!(is_control_action("virtio1-config"));
        assert!(is_control_action("nvme0q0"));
        assert!(!is_control_action("nvme0q10"));
        assert!(!is_control_action("mpt3sas0-msix0"));
    }
}

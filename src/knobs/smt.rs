//! What switching SMT off does to interrupts. The kernel takes every core's second and later
//! threads offline, and an interrupt whose mask holds only CPUs going offline is given every
//! online CPU as its mask ("broke affinity"); switching SMT on again leaves it so (seen on
//! Debian's 6.1 in the lab's ht4 guest: an interrupt pinned to CPU 1 read 0-7 after off and
//! on). The journal records those masks before the switch, so restore writes them back once
//! SMT is on again, and takes their interrupts' locks.

use crate::sys::SysRoot;

const CONTROL: &str = "/sys/devices/system/cpu/smt/control";

/// The affinity files of the interrupts whose masks writing `value` to `path` would break:
/// for SMT control going off, those whose masks lie within the CPUs it takes offline.
/// Kernel-managed interrupts are left out: the kernel shuts them down and brings them back
/// itself, and refuses writes to them.
pub(super) fn masks_broken_by(root: &SysRoot, path: &str, value: &str) -> Vec<String> {
    if path != CONTROL || !matches!(value.trim(), "off" | "forceoff") {
        return Vec::new();
    }
    let Ok(m) = crate::model::Machine::read(root) else {
        return Vec::new();
    };
    // A core keeps its first thread.
    let offline: Vec<u32> = m
        .cpus
        .iter()
        .filter(|c| c.siblings.first().is_some_and(|first| *first != c.cpu))
        .map(|c| c.cpu)
        .collect();
    m.irqs
        .iter()
        .filter(|irq| !irq.managed)
        .filter_map(|irq| {
            let (n, mask) = (irq.number()?, irq.affinity.as_ref()?);
            let within = !mask.is_empty() && mask.iter().all(|c| offline.contains(c));
            within.then(|| super::irq_affinity_path(n))
        })
        .collect()
}

//! On / near / far for one device (case 0). For each online CPU c we find the CPUs that
//! handle the interrupt for I/O submitted from c — the effective affinity of the IRQ of the
//! hardware queue c submits to, or of the device's only IRQ — and call c "on" if it is one of
//! them. "Near" and "far" are then resolved from the "on" CPUs by `crate::placement`, the one
//! definition `inspect` shows and `run` pins to. A multi-queue device whose every CPU completes
//! on itself has nothing near or far; a device without interrupts (loop, zram) has no placement.

use super::{BlockDevice, Irq, Machine};
use crate::placement::{self as level, CpuPlace, Resolved};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct OnNearFar {
    pub on: Vec<u32>,
    pub near: Vec<u32>,
    pub far: Vec<u32>,
}

/// Where an IRQ is delivered: its effective affinity, or its requested one.
fn delivered(irq: &Irq) -> Vec<u32> {
    irq.effective
        .clone()
        .filter(|e| !e.is_empty())
        .or_else(|| irq.affinity.clone())
        .unwrap_or_default()
}

/// The CPUs that take the completion interrupt for I/O submitted from `cpu`.
fn irq_cpus(m: &Machine, dev: &BlockDevice, cpu: u32) -> Vec<u32> {
    let irqs: Vec<&Irq> = dev.irqs.iter().filter_map(|n| m.irq(*n)).collect();
    if let Some(n) = dev
        .queues
        .iter()
        .find(|q| q.cpus.contains(&cpu))
        .and_then(|q| q.irq)
    {
        if let Some(irq) = m.irq(n) {
            return delivered(irq);
        }
    }
    if irqs.len() == 1 {
        return delivered(irqs[0]);
    }
    // Several vectors without a queue map (e.g. an HBA with per-CPU reply queues behind one
    // hardware queue): the vectors whose affinity includes the submitting CPU.
    let mut cpus: Vec<u32> = irqs
        .iter()
        .filter(|i| i.affinity.as_ref().is_some_and(|a| a.contains(&cpu)))
        .flat_map(|i| delivered(i))
        .collect();
    if cpus.is_empty() {
        cpus = irqs.iter().flat_map(|i| delivered(i)).collect();
    }
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

/// Classifies the online CPUs for one device; None when the device has no interrupts.
pub(crate) fn placement(m: &Machine, dev: &BlockDevice) -> Option<OnNearFar> {
    if dev.irqs.is_empty() {
        return None;
    }
    let on: Vec<u32> = m
        .cpus
        .iter()
        .filter(|c| m.online.contains(&c.cpu) && irq_cpus(m, dev, c.cpu).contains(&c.cpu))
        .map(|c| c.cpu)
        .collect();
    let cpus = cpu_places(m);
    let distance = |a, b| m.distance(a, b);
    let cpus_of = |l: level::Placement| {
        level::resolve(&l, &on, &cpus, &distance)
            .map(|r| r.cpus)
            .unwrap_or_default()
    };
    Some(OnNearFar {
        near: cpus_of(level::Placement::Near),
        far: cpus_of(level::Placement::Far),
        on,
    })
}

/// The CPUs to pin an I/O generator to for `wanted` on device `dev` (or, for levels that need
/// no device, on this machine). `anchor_cpu` stands in for the interrupt CPU of a device that
/// takes no interrupt (a loop device), so on/near/far still mean something there.
/// `Err` says why the level cannot be realised here.
pub(crate) fn resolve(
    m: &Machine,
    dev: Option<&BlockDevice>,
    wanted: &level::Placement,
    anchor_cpu: Option<u32>,
) -> Result<Resolved, String> {
    let anchor = match (anchor_cpu, dev.and_then(|d| d.placement.as_ref())) {
        (Some(cpu), _) => vec![cpu],
        (None, Some(p)) => p.on.clone(),
        (None, None) => Vec::new(),
    };
    level::resolve(wanted, &anchor, &cpu_places(m), &|a, b| m.distance(a, b))
}

/// The topology as placement sees it: online CPUs with core, package, node and LLC domain.
pub(crate) fn cpu_places(m: &Machine) -> Vec<CpuPlace> {
    m.cpus
        .iter()
        .filter(|c| m.online.contains(&c.cpu))
        .map(|c| CpuPlace {
            cpu: c.cpu,
            core: c.core,
            package: c.package,
            node: c.node,
            // A cache's id where the kernel gives one; otherwise its first CPU names it.
            llc: c
                .llc
                .as_ref()
                .and_then(|l| l.id.or_else(|| l.cpus.first().copied())),
        })
        .collect()
}

//! On / near / far: where an I/O generator runs relative to the CPU that takes the device's
//! completion interrupt (seeds/000). For each online CPU c we find the CPUs that handle the
//! interrupt for I/O submitted from c — the effective affinity of the IRQ of the hardware
//! queue c submits to, or of the device's only IRQ — and call c "on" if it is one of them,
//! "near" if it shares a NUMA node with one of them, and "far" otherwise. A machine with one
//! node has no "far"; a device without interrupts (loop, zram) has no placement at all.

use super::{BlockDevice, Irq, Machine};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
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

/// Classifies every online CPU for one device; None when the device has no interrupts.
pub fn placement(m: &Machine, dev: &BlockDevice) -> Option<Placement> {
    if dev.irqs.is_empty() {
        return None;
    }
    let node_of = |c: u32| m.cpu(c).map(|c| c.node);
    let mut p = Placement {
        on: Vec::new(),
        near: Vec::new(),
        far: Vec::new(),
    };
    for cpu in &m.cpus {
        let handlers = irq_cpus(m, dev, cpu.cpu);
        if handlers.is_empty() {
            continue;
        }
        if handlers.contains(&cpu.cpu) {
            p.on.push(cpu.cpu);
        } else if handlers.iter().any(|h| node_of(*h) == Some(cpu.node)) {
            p.near.push(cpu.cpu);
        } else {
            p.far.push(cpu.cpu);
        }
    }
    Some(p)
}

//! Interrupts: every row of /proc/interrupts joined with what /proc/irq/N and
//! /sys/kernel/irq/N say about it — requested and effective affinity, node, chip, hardware
//! number, action names — and whether the kernel manages its affinity. A managed IRQ (blk-mq
//! and NVMe spread their queue vectors this way) cannot be moved by user space: the kernel
//! creates its `smp_affinity` file read-only (mode 0444) since 4.14, so the file mode tells us
//! without ever writing to it.

use super::Warnings;
use crate::sys::parse::interrupts::{InterruptRow, Interrupts, IrqId};
use crate::sys::parse::{cpulist, cpumask, interrupts};
use crate::sys::{SysError, SysRoot};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub(crate) const INTERRUPTS: &str = "/proc/interrupts";

/// One interrupt row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Irq {
    /// The IRQ number, or the summary row's name (`"LOC"`).
    pub(crate) irq: IrqId,
    /// Action names joined with ", " (the last column of /proc/interrupts), or the
    /// description of a summary row.
    pub name: String,
    pub(crate) actions: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) chip: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) hwirq: Option<String>,
    /// True when user space cannot change the affinity (kernel-managed, or a per-CPU or
    /// chip-restricted interrupt). False for summary rows.
    pub managed: bool,
    /// CPUs the interrupt may be delivered to (`smp_affinity_list`); null for summary rows.
    pub affinity: Option<Vec<u32>>,
    /// CPUs it is actually delivered to (`effective_affinity_list`).
    pub effective: Option<Vec<u32>>,
    /// The driver's affinity hint (`affinity_hint`, a hex mask), when it set one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) hint: Option<Vec<u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) node: Option<u32>,
    /// Count since boot per CPU id (only CPUs that are columns of /proc/interrupts).
    pub(crate) counts: BTreeMap<u32, u64>,
    pub(crate) total: u64,
    /// Interrupts per second from two readings, when there are two.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) rate: Option<IrqRate>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct IrqRate {
    pub(crate) total: f64,
    pub(crate) per_cpu: BTreeMap<u32, f64>,
}

impl Irq {
    pub fn number(&self) -> Option<u32> {
        self.irq.number()
    }
}

/// The affinity new IRQs get (`/proc/irq/default_smp_affinity`, a hex mask).
pub(crate) fn default_affinity(root: &SysRoot, warn: &mut Warnings) -> Option<Vec<u32>> {
    const ABS: &str = "/proc/irq/default_smp_affinity";
    let text = root.attr(ABS)?;
    match cpumask(&text) {
        Ok(v) => Some(v),
        Err(e) => {
            warn.push(root.parse_error(ABS, e.line, e.message).to_string());
            None
        }
    }
}

/// Reads and parses /proc/interrupts, naming it on error.
pub(crate) fn read_interrupts(root: &SysRoot) -> Result<Interrupts, SysError> {
    let text = root.read(INTERRUPTS)?;
    interrupts(&text).map_err(|e| root.parse_error(INTERRUPTS, e.line, e.message))
}

pub(crate) fn read(root: &SysRoot, warn: &mut Warnings) -> Result<Vec<Irq>, SysError> {
    let parsed = read_interrupts(root)?;
    let mut out = Vec::with_capacity(parsed.rows.len());
    for row in &parsed.rows {
        out.push(match row.id.number() {
            Some(n) => numbered(root, n, row, &parsed.cpus, warn),
            None => summary(row, &parsed.cpus),
        });
    }
    Ok(out)
}

fn counts_by_cpu(row: &InterruptRow, cpus: &[u32]) -> BTreeMap<u32, u64> {
    cpus.iter()
        .copied()
        .zip(row.counts.iter().copied())
        .collect()
}

fn summary(row: &InterruptRow, cpus: &[u32]) -> Irq {
    Irq {
        irq: row.id.clone(),
        name: row.description.clone().unwrap_or_default(),
        actions: Vec::new(),
        chip: None,
        hwirq: None,
        managed: false,
        affinity: None,
        effective: None,
        hint: None,
        node: None,
        counts: counts_by_cpu(row, cpus),
        total: row.total,
        rate: None,
    }
}

fn numbered(root: &SysRoot, n: u32, row: &InterruptRow, cpus: &[u32], warn: &mut Warnings) -> Irq {
    let proc_dir = format!("/proc/irq/{n}");
    let sys_dir = format!("/sys/kernel/irq/{n}");
    let list = |name: &str, warn: &mut Warnings| -> Option<Vec<u32>> {
        let abs = format!("{proc_dir}/{name}");
        let text = root.attr(&abs)?;
        match cpulist(&text) {
            Ok(v) => Some(v),
            Err(e) => {
                warn.push(root.parse_error(&abs, e.line, e.message).to_string());
                None
            }
        }
    };
    let affinity = list("smp_affinity_list", warn);
    let effective = list("effective_affinity_list", warn);
    // An all-zero mask means "no hint".
    let hint = root
        .attr(&format!("{proc_dir}/affinity_hint"))
        .and_then(|text| match cpumask(&text) {
            Ok(v) => Some(v),
            Err(e) => {
                let abs = format!("{proc_dir}/affinity_hint");
                warn.push(root.parse_error(&abs, e.line, e.message).to_string());
                None
            }
        })
        .filter(|v| !v.is_empty());
    let node = root
        .attr(&format!("{proc_dir}/node"))
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|n| *n >= 0)
        .map(|n| n as u32);
    // /sys/kernel/irq has the exact actions (names with spaces, no column guessing).
    let actions = root
        .attr(&format!("{sys_dir}/actions"))
        .map(|a| {
            a.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .unwrap_or_else(|| row.actions.clone());
    let chip = root
        .attr(&format!("{sys_dir}/chip_name"))
        .or_else(|| row.chip.clone());
    let hwirq = root
        .attr(&format!("{sys_dir}/hwirq"))
        .or_else(|| row.hwirq.clone());
    let managed = match root.mode(&format!("{proc_dir}/smp_affinity")) {
        Ok(mode) => mode & 0o222 == 0,
        Err(_) => false,
    };
    Irq {
        irq: row.id.clone(),
        name: actions.join(", "),
        actions,
        chip,
        hwirq,
        managed,
        affinity,
        effective,
        hint,
        node,
        counts: counts_by_cpu(row, cpus),
        total: row.total,
        rate: None,
    }
}

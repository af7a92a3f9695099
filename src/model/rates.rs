//! Rates from two raw readings of the cumulative counters (/proc/interrupts, /proc/stat,
//! /proc/diskstats) and the time between them. Raw counters are what gets stored; rates are
//! always derived here. A counter that went backwards (a reset, a CPU that went offline and
//! came back, a device that was re-created) gives no value — never a huge wrapped number.

use crate::sys::parse::diskstats::DiskStat;
use crate::sys::parse::interrupts::{Interrupts, IrqId};
use crate::sys::parse::stat::{CpuTimes, Stat};
use crate::sys::{SysError, SysRoot};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub(crate) const STAT: &str = "/proc/stat";
pub(crate) const DISKSTATS: &str = "/proc/diskstats";

/// One reading of the three counter files.
#[derive(Debug, Clone, Default)]
pub(crate) struct Counters {
    pub interrupts: Interrupts,
    pub stat: Stat,
    pub diskstats: Vec<DiskStat>,
}

impl Counters {
    pub(crate) fn read(root: &SysRoot) -> Result<Counters, SysError> {
        let interrupts = super::irqs::read_interrupts(root)?;
        let text = root.read(STAT)?;
        let stat = crate::sys::parse::stat(&text)
            .map_err(|e| root.parse_error(STAT, e.line, e.message))?;
        let text = root.read(DISKSTATS)?;
        let diskstats = crate::sys::parse::diskstats(&text)
            .map_err(|e| root.parse_error(DISKSTATS, e.line, e.message))?;
        Ok(Counters {
            interrupts,
            stat,
            diskstats,
        })
    }
}

/// `after - before`, or None when the counter went backwards.
pub(crate) fn delta(before: u64, after: u64) -> Option<u64> {
    after.checked_sub(before)
}

/// Events per second between two counter values `interval_ns` apart.
pub(crate) fn per_second(before: u64, after: u64, interval_ns: u64) -> Option<f64> {
    if interval_ns == 0 {
        return None;
    }
    delta(before, after).map(|d| d as f64 * 1e9 / interval_ns as f64)
}

/// Per-IRQ rates: total and per CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct IrqRates {
    pub total: Option<f64>,
    pub per_cpu: BTreeMap<u32, Option<f64>>,
}

/// CPU time shares over the interval, in percent of all ticks that passed on that CPU.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuShare {
    pub usr_pct: f64,
    pub nice_pct: f64,
    pub sys_pct: f64,
    pub irq_pct: f64,
    pub softirq_pct: f64,
    pub iowait_pct: f64,
    pub steal_pct: f64,
    pub idle_pct: f64,
}

/// iostat-like figures for one device over the interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DiskRates {
    pub r_per_s: f64,
    pub w_per_s: f64,
    /// Requests merged into others per second (iostat's rrqm/s, wrqm/s): with the completed
    /// ones, the I/Os submitted to the device.
    pub rrqm_per_s: f64,
    pub wrqm_per_s: f64,
    pub rmb_per_s: f64,
    pub wmb_per_s: f64,
    /// Average request size in KiB (sectors of both directions / requests).
    pub avg_rq_kb: Option<f64>,
    pub avg_qu_sz: f64,
    pub r_await_ms: Option<f64>,
    pub w_await_ms: Option<f64>,
    pub util_pct: f64,
}

/// Everything derived from two readings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Rates {
    pub interval_ns: u64,
    pub irqs: BTreeMap<IrqId, IrqRates>,
    /// All interrupts delivered to each CPU per second (sum over /proc/interrupts rows).
    pub cpu_interrupts_per_s: BTreeMap<u32, f64>,
    pub cpus: BTreeMap<u32, CpuShare>,
    pub all_cpus: Option<CpuShare>,
    pub disks: BTreeMap<String, DiskRates>,
}

/// CPU shares between two /proc/stat lines; None if any counter went backwards or no tick
/// passed.
pub(crate) fn cpu_share(before: &CpuTimes, after: &CpuTimes) -> Option<CpuShare> {
    let d = |a: u64, b: u64| delta(a, b);
    let user = d(before.user, after.user)?;
    let nice = d(before.nice, after.nice)?;
    let system = d(before.system, after.system)?;
    let idle = d(before.idle, after.idle)?;
    let iowait = d(before.iowait, after.iowait)?;
    let irq = d(before.irq, after.irq)?;
    let softirq = d(before.softirq, after.softirq)?;
    let steal = d(before.steal, after.steal)?;
    let total = [nice, system, idle, iowait, irq, softirq, steal]
        .iter()
        .fold(user, |a, b| a.saturating_add(*b));
    if total == 0 {
        return None;
    }
    let pct = |v: u64| v as f64 * 100.0 / total as f64;
    Some(CpuShare {
        usr_pct: pct(user),
        nice_pct: pct(nice),
        sys_pct: pct(system),
        irq_pct: pct(irq),
        softirq_pct: pct(softirq),
        iowait_pct: pct(iowait),
        steal_pct: pct(steal),
        idle_pct: pct(idle),
    })
}

/// iostat's formulas over one interval (sysstat `rd_sec`/`r_await`/`aqu-sz`/`%util`).
pub(crate) fn disk_rates(
    before: &DiskStat,
    after: &DiskStat,
    interval_ns: u64,
) -> Option<DiskRates> {
    if interval_ns == 0 {
        return None;
    }
    let secs = interval_ns as f64 / 1e9;
    let reads = delta(before.reads, after.reads)?;
    let writes = delta(before.writes, after.writes)?;
    let rmerged = delta(before.reads_merged, after.reads_merged)?;
    let wmerged = delta(before.writes_merged, after.writes_merged)?;
    let rsec = delta(before.sectors_read, after.sectors_read)?;
    let wsec = delta(before.sectors_written, after.sectors_written)?;
    let rticks = delta(before.read_ms, after.read_ms)?;
    let wticks = delta(before.write_ms, after.write_ms)?;
    let io_ms = delta(before.io_ms, after.io_ms)?;
    let weighted = delta(before.weighted_io_ms, after.weighted_io_ms)?;
    let ios = reads.saturating_add(writes);
    Some(DiskRates {
        r_per_s: reads as f64 / secs,
        w_per_s: writes as f64 / secs,
        rrqm_per_s: rmerged as f64 / secs,
        wrqm_per_s: wmerged as f64 / secs,
        rmb_per_s: rsec as f64 * 512.0 / 1e6 / secs,
        wmb_per_s: wsec as f64 * 512.0 / 1e6 / secs,
        avg_rq_kb: (ios > 0).then(|| (rsec as f64 + wsec as f64) / 2.0 / ios as f64),
        avg_qu_sz: weighted as f64 / 1000.0 / secs,
        r_await_ms: (reads > 0).then(|| rticks as f64 / reads as f64),
        w_await_ms: (writes > 0).then(|| wticks as f64 / writes as f64),
        util_pct: (io_ms as f64 / 10.0 / secs).min(100.0),
    })
}

/// Derives every rate from two readings `interval_ns` apart.
pub(crate) fn rates(before: &Counters, after: &Counters, interval_ns: u64) -> Rates {
    let mut irqs = BTreeMap::new();
    let mut cpu_interrupts: BTreeMap<u32, f64> = BTreeMap::new();
    for row in &after.interrupts.rows {
        let Some(old) = before.interrupts.row(&row.id) else {
            continue;
        };
        let mut per_cpu = BTreeMap::new();
        for (col, cpu) in after.interrupts.cpus.iter().enumerate() {
            let new = row.counts.get(col).copied();
            let prev = before
                .interrupts
                .cpus
                .iter()
                .position(|c| c == cpu)
                .and_then(|i| old.counts.get(i).copied());
            let rate = match (prev, new) {
                (Some(p), Some(n)) => per_second(p, n, interval_ns),
                _ => None,
            };
            if let Some(r) = rate {
                *cpu_interrupts.entry(*cpu).or_default() += r;
            }
            if new.is_some() {
                per_cpu.insert(*cpu, rate);
            }
        }
        irqs.insert(
            row.id.clone(),
            IrqRates {
                total: per_second(old.total, row.total, interval_ns),
                per_cpu,
            },
        );
    }
    let cpus = after
        .stat
        .cpus
        .iter()
        .filter_map(|(cpu, t)| Some((*cpu, cpu_share(before.stat.cpus.get(cpu)?, t)?)))
        .collect();
    let disks = after
        .diskstats
        .iter()
        .filter_map(|d| {
            let old = before
                .diskstats
                .iter()
                .find(|o| o.name == d.name && o.major == d.major && o.minor == d.minor)?;
            Some((d.name.clone(), disk_rates(old, d, interval_ns)?))
        })
        .collect();
    Rates {
        interval_ns,
        irqs,
        cpu_interrupts_per_s: cpu_interrupts,
        cpus,
        all_cpus: cpu_share(&before.stat.all, &after.stat.all),
        disks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::parse::{diskstats, interrupts, stat};

    fn counters(ints: &str, st: &str, disks: &str) -> Counters {
        Counters {
            interrupts: interrupts(ints).unwrap(),
            stat: stat(st).unwrap(),
            diskstats: diskstats(disks).unwrap(),
        }
    }

    #[test]
    fn interrupt_rates_and_backwards_counters() {
        let a = counters(
            "  CPU0 CPU1\n 36: 0 1000 PCI-MSI 1-edge virtio1-req.0\n 40: 500 0 PCI-MSI 2-edge eth0\nLOC: 10 20 Local timer interrupts\n",
            "cpu 0 0 0 100\ncpu0 0 0 0 50\ncpu1 0 0 0 50\n",
            "254 0 vda 0 0 0 0 0 0 0 0 0 0 0\n",
        );
        let b = counters(
            "  CPU0 CPU1\n 36: 0 3000 PCI-MSI 1-edge virtio1-req.0\n 40: 100 0 PCI-MSI 2-edge eth0\nLOC: 210 420 Local timer interrupts\n",
            "cpu 100 0 100 200\ncpu0 50 0 50 100\ncpu1 50 0 50 100\n",
            "254 0 vda 0 0 0 0 0 0 0 0 0 0 0\n",
        );
        let r = rates(&a, &b, 2_000_000_000);
        let virtio = &r.irqs[&IrqId::Number(36)];
        assert_eq!(virtio.total, Some(1000.0));
        assert_eq!(virtio.per_cpu[&1], Some(1000.0));
        assert_eq!(virtio.per_cpu[&0], Some(0.0));
        // IRQ 40's count went from 500 to 100: no value, not 2^64 - 400.
        assert_eq!(r.irqs[&IrqId::Number(40)].total, None);
        assert_eq!(r.irqs[&IrqId::Named("LOC".into())].per_cpu[&1], Some(200.0));
        assert_eq!(r.cpu_interrupts_per_s[&1], 1000.0 + 200.0);
        let all = r.all_cpus.unwrap();
        assert!((all.usr_pct - 100.0 / 3.0).abs() < 1e-9);
        assert!((all.idle_pct - 100.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn iostat_formulas() {
        let before = diskstats("8 0 sda 100 0 800 50 10 0 80 20 0 100 500\n").unwrap();
        // +200 reads of 8 sectors taking 400 ms, +50 writes of 16 sectors taking 250 ms,
        // busy 500 of 1000 ms, weighted 1500 ms.
        let after = diskstats("8 0 sda 300 0 2400 450 60 0 880 270 0 600 2000\n").unwrap();
        let r = disk_rates(&before[0], &after[0], 1_000_000_000).unwrap();
        assert_eq!(r.r_per_s, 200.0);
        assert_eq!(r.w_per_s, 50.0);
        assert!((r.rmb_per_s - 1600.0 * 512.0 / 1e6).abs() < 1e-9);
        assert!((r.wmb_per_s - 800.0 * 512.0 / 1e6).abs() < 1e-9);
        assert_eq!(r.avg_rq_kb, Some(2400.0 / 2.0 / 250.0));
        assert_eq!(r.r_await_ms, Some(2.0));
        assert_eq!(r.w_await_ms, Some(5.0));
        assert_eq!(r.avg_qu_sz, 1.5);
        assert_eq!(r.util_pct, 50.0);
        assert!(disk_rates(&after[0], &before[0], 1_000_000_000).is_none());
        assert_eq!(per_second(5, 4, 1), None);
        assert_eq!(per_second(1, 2, 0), None);
    }
}

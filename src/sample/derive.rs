//! What a run's readings mean: per interval and over the whole run, CPU time shares per CPU
//! (%usr %sys %irq %softirq %iowait %idle), interrupts per second per IRQ and per CPU, and
//! iostat's device figures, a network interface's throughput and packet rates. Pure functions
//! of two `Reading`s; a counter that went backwards gives no value. The whole-run summary also
//! names the figures with the store's metric names (docs/architecture.md).

use super::reading::{NicCounters, Reading};
use crate::metrics;
use crate::model::rates::{cpu_share, disk_rates, per_second, CpuShare, DiskRates};
use crate::sys::parse::interrupts::IrqId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Interrupts per second of one IRQ over an interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IrqRate {
    pub irq: IrqId,
    pub total: Option<f64>,
    /// Per CPU column (empty for one-count rows like ERR).
    pub per_cpu: Vec<(u32, Option<f64>)>,
}

/// Everything derived from two readings (read back from a host's `sample_stop` answer too).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub start_ns: u64,
    pub end_ns: u64,
    pub all_cpus: Option<CpuShare>,
    pub cpus: Vec<(u32, CpuShare)>,
    pub irqs: Vec<IrqRate>,
    /// All interrupts per second (numbered and summary rows).
    pub irq_per_s: Option<f64>,
    /// Interrupts per second delivered to each CPU.
    pub cpu_irq_per_s: Vec<(u32, f64)>,
    /// Per watched device, in the sampler's order.
    pub disks: Vec<(String, Option<DiskRates>)>,
}

/// Derives one interval. `devices` names the entries of `Reading::disks`.
pub(crate) fn interval(a: &Reading, b: &Reading, devices: &[String]) -> Interval {
    let ns = b.elapsed_ns.saturating_sub(a.elapsed_ns);
    let mut irqs = Vec::with_capacity(b.irq_layout.ids.len());
    let mut cpu_irq: Vec<(u32, f64)> = b.irq_layout.cpus.iter().map(|c| (*c, 0.0)).collect();
    let mut all: Option<f64> = Some(0.0);
    let same_layout =
        std::sync::Arc::ptr_eq(&a.irq_layout, &b.irq_layout) || a.irq_layout == b.irq_layout;
    let same_shape = a.irq_layout.cpus == b.irq_layout.cpus;
    for (row, id) in b.irq_layout.ids.iter().enumerate() {
        // Rows are matched by label, so an IRQ that appeared between readings has no rate.
        let old_row = if same_layout {
            Some(row)
        } else {
            a.irq_layout.ids.iter().position(|x| x == id)
        };
        let Some(old_row) = old_row else {
            continue;
        };
        let single = b.irq_layout.single[row];
        let mut total_old = 0u64;
        let mut total_new = 0u64;
        let mut per_cpu = Vec::new();
        for (col, cpu) in b.irq_layout.cpus.iter().enumerate() {
            let new = b.irq_counts[b.irq_layout.index(row, col)];
            total_new = total_new.saturating_add(new);
            let old_col = if same_shape {
                Some(col)
            } else {
                a.irq_layout.cpus.iter().position(|c| c == cpu)
            };
            let old = old_col.map(|c| a.irq_counts[a.irq_layout.index(old_row, c)]);
            if let Some(o) = old {
                total_old = total_old.saturating_add(o);
            }
            if single {
                continue;
            }
            let rate = old.and_then(|o| per_second(o, new, ns));
            if let Some(r) = rate {
                cpu_irq[col].1 += r;
            }
            per_cpu.push((*cpu, rate));
        }
        let total = if same_shape || single {
            per_second(total_old, total_new, ns)
        } else {
            None
        };
        all = match (all, total) {
            (Some(s), Some(t)) => Some(s + t),
            _ => None,
        };
        irqs.push(IrqRate {
            irq: id.clone(),
            total,
            per_cpu,
        });
    }
    let cpus = b
        .cpus
        .iter()
        .filter_map(|(cpu, t)| {
            let old = a.cpus.iter().find(|(c, _)| c == cpu)?;
            Some((*cpu, cpu_share(&old.1, t)?))
        })
        .collect();
    let disks = devices
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let rates = match (a.disks.get(i), b.disks.get(i)) {
                (Some(Some(x)), Some(Some(y))) => disk_rates(x, y, ns),
                _ => None,
            };
            (name.clone(), rates)
        })
        .collect();
    Interval {
        start_ns: a.elapsed_ns,
        end_ns: b.elapsed_ns,
        all_cpus: cpu_share(&a.all_cpus, &b.all_cpus),
        cpus,
        irqs,
        irq_per_s: all,
        cpu_irq_per_s: cpu_irq,
        disks,
    }
}

/// A network interface's throughput and packet rates from its counters at two readings
/// `ns` apart (MB are 10^6 bytes, as for disks); a counter that went back gives no rate.
fn nic_rates(a: &NicCounters, b: &NicCounters, ns: u64, m: &mut BTreeMap<&'static str, f64>) {
    let mb = |x, y| per_second(x, y, ns).map(|v| v / 1e6);
    for (metric, rate) in [
        (metrics::NIC_RX_MB_PER_S, mb(a.rx_bytes, b.rx_bytes)),
        (metrics::NIC_TX_MB_PER_S, mb(a.tx_bytes, b.tx_bytes)),
        (
            metrics::NIC_RX_PKTS_PER_S,
            per_second(a.rx_packets, b.rx_packets, ns),
        ),
        (
            metrics::NIC_TX_PKTS_PER_S,
            per_second(a.tx_packets, b.tx_packets, ns),
        ),
    ] {
        if let Some(v) = rate {
            m.insert(metric.name, v);
        }
    }
}

/// The run as a whole (first to last reading) plus the named metrics of each device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub whole: Interval,
    /// Metric name → value: `usr_pct` ... `idle_pct`, `irq_per_s`, and per device
    /// `dev_irq_per_s`, `dev_r_per_s`, ... under the device's name.
    pub system: BTreeMap<&'static str, f64>,
    pub devices: BTreeMap<String, BTreeMap<&'static str, f64>>,
}

/// Fewest ticks (USER_HZ, 10 ms each, over all CPUs) a run's CPU shares are given from:
/// their resolution is then 5%. Over fewer they are no measurement: a 7 ms command run's one
/// tick was "usr 100%, idle 0%". (The per-interval series keep theirs: each is a point of a
/// curve, not a run's figure.)
const MIN_TICKS: u64 = 20;

/// Summarises readings; `device_irqs[i]` are the IRQ numbers serving `devices[i]`.
pub(crate) fn summary(
    readings: &[Reading],
    devices: &[String],
    device_irqs: &[Vec<u32>],
) -> Option<Summary> {
    let (first, last) = (readings.first()?, readings.last()?);
    if readings.len() < 2 {
        return None;
    }
    let whole = interval(first, last, devices);
    let mut system = BTreeMap::new();
    let ticks = last.all_cpus.total().saturating_sub(first.all_cpus.total());
    let enough_ticks = ticks >= MIN_TICKS;
    if let (Some(c), true) = (&whole.all_cpus, enough_ticks) {
        system.insert(metrics::USR_PCT.name, c.usr_pct + c.nice_pct);
        system.insert(metrics::SYS_PCT.name, c.sys_pct);
        system.insert(metrics::IRQ_PCT.name, c.irq_pct);
        system.insert(metrics::SOFTIRQ_PCT.name, c.softirq_pct);
        system.insert(metrics::IOWAIT_PCT.name, c.iowait_pct);
        system.insert(metrics::IDLE_PCT.name, c.idle_pct);
        system.insert(metrics::STEAL_PCT.name, c.steal_pct);
    }
    if let Some(v) = whole.irq_per_s {
        system.insert(metrics::IRQ_PER_S.name, v);
    }
    let mut per_device = BTreeMap::new();
    for (i, (name, rates)) in whole.disks.iter().enumerate() {
        let mut m = BTreeMap::new();
        let irqs = device_irqs.get(i).map(Vec::as_slice).unwrap_or(&[]);
        if !irqs.is_empty() {
            let mut sum = Some(0.0);
            for n in irqs {
                let r = whole
                    .irqs
                    .iter()
                    .find(|r| r.irq == IrqId::Number(*n))
                    .and_then(|r| r.total);
                sum = match (sum, r) {
                    (Some(s), Some(r)) => Some(s + r),
                    _ => None,
                };
            }
            if let Some(s) = sum {
                m.insert(metrics::DEV_IRQ_PER_S.name, s);
            }
        }
        if let Some(r) = rates {
            m.insert(metrics::DEV_R_PER_S.name, r.r_per_s);
            m.insert(metrics::DEV_W_PER_S.name, r.w_per_s);
            m.insert(metrics::DEV_RRQM_PER_S.name, r.rrqm_per_s);
            m.insert(metrics::DEV_WRQM_PER_S.name, r.wrqm_per_s);
            m.insert(metrics::DEV_RMB_PER_S.name, r.rmb_per_s);
            m.insert(metrics::DEV_WMB_PER_S.name, r.wmb_per_s);
            if let Some(v) = r.avg_rq_kb {
                m.insert(metrics::DEV_AVG_RQ_KB.name, v);
            }
            m.insert(metrics::DEV_AVG_QU_SZ.name, r.avg_qu_sz);
            if let Some(v) = r.r_await_ms {
                m.insert(metrics::DEV_R_AWAIT_MS.name, v);
            }
            if let Some(v) = r.w_await_ms {
                m.insert(metrics::DEV_W_AWAIT_MS.name, v);
            }
            m.insert(metrics::DEV_UTIL_PCT.name, r.util_pct);
            // Device interrupts per completed I/O (case 3's ints/s next to IOPS): 1 with
            // one interrupt per completion, less with coalescing or polling.
            let ios = r.r_per_s + r.w_per_s;
            if let (Some(irq), true) = (m.get(metrics::DEV_IRQ_PER_S.name).copied(), ios > 0.0) {
                m.insert(metrics::DEV_IRQ_PER_IO.name, irq / ios);
            }
        }
        if let (Some(Some(a)), Some(Some(b))) = (first.nics.get(i), last.nics.get(i)) {
            nic_rates(a, b, whole.end_ns - whole.start_ns, &mut m);
        }
        per_device.insert(name.clone(), m);
    }
    Some(Summary {
        whole,
        system,
        devices: per_device,
    })
}

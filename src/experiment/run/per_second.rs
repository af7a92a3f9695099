//! Per-second series within a run, on one time axis: seconds since the measured window's
//! start (the interval `align` put the sampler's figures on). fio's throughput and mean
//! latency come from its status reports (`workload::fio_series`), the device completions and
//! the interrupts per CPU from the sampler's raw readings; both are cumulative counters,
//! turned here into one value per second of the window. A run's averages hide what these
//! show: a throughput that sags after 40 s, or the first seconds after a cell's knob change.
//!
//! Every series is binned the same way: bins end at 1, 2, ... s and at the window's end (a
//! remainder under 50 ms joins the last whole second rather than becoming a bin whose rate
//! is mostly noise). A counter between two readings is interpolated linearly, and held at
//! its first or last reading outside them. A bin's value times its width is the count in it,
//! so a series adds up to the run's total.
//!
//! Pure: readings and text in, points out.

use super::align::WindowRecord;
use crate::metrics;
use crate::sample::{Reading, SampleRun};
use crate::store::SeriesPoint;
use crate::workload::fio_series::{job_points, DirTotals, Point};

/// The bin edges of a window `len_s` long: 0, 1, 2, ..., len_s.
pub(crate) fn edges(len_s: f64) -> Vec<f64> {
    if !(len_s.is_finite() && len_s > 0.0) {
        return Vec::new();
    }
    // To the millisecond, fio's resolution: the sampler's window (from nanoseconds) and
    // fio's runtime then end their series at the same `t_s`.
    let len_s = (len_s * 1000.0).round() / 1000.0;
    let whole = len_s.floor() as usize;
    let mut e: Vec<f64> = (0..=whole).map(|k| k as f64).collect();
    if len_s - whole as f64 > 0.05 || whole == 0 {
        e.push(len_s);
    } else if let Some(last) = e.last_mut() {
        *last = len_s;
    }
    e
}

/// A cumulative counter given at sorted times, at time `t` (linear between points, held
/// outside them); `None` without points.
fn at(points: &[(f64, f64)], t: f64) -> Option<f64> {
    let first = points.first()?;
    if t <= first.0 {
        return Some(first.1);
    }
    let i = points.partition_point(|p| p.0 < t);
    let Some(&(t1, c1)) = points.get(i) else {
        return points.last().map(|p| p.1);
    };
    let (t0, c0) = points[i - 1];
    Some(if t1 > t0 {
        c0 + (c1 - c0) * (t - t0) / (t1 - t0)
    } else {
        c1
    })
}

/// The count in each bin between consecutive `edges`; `None` for a bin where the counter
/// went backwards (a reset, a device that vanished): no value, never a huge one.
fn deltas(points: &[(f64, f64)], edges: &[f64]) -> Vec<Option<f64>> {
    edges
        .windows(2)
        .map(|w| {
            let d = at(points, w[1])? - at(points, w[0])?;
            (d >= 0.0).then_some(d)
        })
        .collect()
}

/// Points of a series from per-bin counts: count / width (times `scale`).
fn rates(name: &str, edges: &[f64], counts: &[Option<f64>], scale: f64) -> Vec<SeriesPoint> {
    edges
        .windows(2)
        .zip(counts)
        .filter_map(|(w, c)| {
            Some(SeriesPoint {
                name: name.to_string(),
                t_s: w[1],
                value: c.as_ref()? / (w[1] - w[0]) * scale,
            })
        })
        .collect()
}

/// Adds per-bin counts (absent bins stay absent).
fn add(sum: &mut Vec<Option<f64>>, more: Vec<Option<f64>>) {
    if sum.is_empty() {
        *sum = more;
        return;
    }
    for (s, m) in sum.iter_mut().zip(more) {
        *s = s.zip(m).map(|(a, b)| a + b);
    }
}

/// fio's series, summed over its jobs: `read_iops`, `read_bw_mbs` (10^6 bytes/s),
/// `read_clat_mean_us` (the mean of the completions in each bin), and `write_*` likewise;
/// a direction with no I/O in the run is left out.
pub(crate) fn fio_series(fio_output: &str) -> Vec<SeriesPoint> {
    let jobs = job_points(fio_output);
    let len = jobs
        .iter()
        .filter_map(|p| p.last())
        .map(|p| p.t_s)
        .fold(0.0, f64::max);
    let edges = edges(len);
    let mut out = Vec::new();
    type Pick = fn(&Point) -> DirTotals;
    for (dir, pick) in [
        (&metrics::FIO_READ, (|p| p.read) as Pick),
        (&metrics::FIO_WRITE, (|p| p.write) as Pick),
    ] {
        let (mut ios, mut bytes, mut lat, mut n) = (vec![], vec![], vec![], vec![]);
        for job in &jobs {
            let curve = |f: fn(&DirTotals) -> f64| -> Vec<(f64, f64)> {
                job.iter().map(|p| (p.t_s, f(&pick(p)))).collect()
            };
            add(&mut ios, deltas(&curve(|d| d.ios), &edges));
            add(&mut bytes, deltas(&curve(|d| d.bytes), &edges));
            add(&mut lat, deltas(&curve(|d| d.clat_sum_ns), &edges));
            add(&mut n, deltas(&curve(|d| d.clat_n), &edges));
        }
        if !ios.iter().flatten().any(|c| *c > 0.0) {
            continue;
        }
        out.extend(rates(dir.iops.name, &edges, &ios, 1.0));
        out.extend(rates(dir.bw_mbs.name, &edges, &bytes, 1e-6));
        // The mean completion latency of the bin's completions (none: no value).
        out.extend(
            edges
                .windows(2)
                .zip(lat.iter().zip(&n))
                .filter_map(|(w, (l, n))| {
                    let (l, n) = ((*l)?, (*n)?);
                    (n > 0.0).then(|| SeriesPoint {
                        name: dir.clat_mean_us.name.to_string(),
                        t_s: w[1],
                        value: l / n / 1000.0,
                    })
                }),
        );
    }
    out
}

/// The sampler's series over `window`: per watched device `DEV:dev_r_per_s` and
/// `DEV:dev_w_per_s` (completions) or, for a network interface, `DEV:nic_rx_mb_per_s`,
/// `DEV:nic_tx_mb_per_s`, `DEV:nic_rx_pkts_per_s` and `DEV:nic_tx_pkts_per_s`; and per CPU
/// `cpuN:irq_per_s` (all interrupts that CPU took, from /proc/interrupts) and
/// `cpuN:dev_irq_per_s` (only those of the IRQs serving the watched devices, when any is
/// known: the device's own interrupts, without the timer's or a NIC's).
pub(crate) fn sampler_series(samples: &SampleRun, window: &WindowRecord) -> Vec<SeriesPoint> {
    let edges = edges(window.end_s - window.start_s);
    let t = |r: &Reading| r.elapsed_ns as f64 / 1e9 - window.start_s;
    let mut out = Vec::new();
    for (i, dev) in samples.devices.iter().enumerate() {
        // A counter of this device per reading (none where it has no such counter), as
        // `metric` per second times `scale`.
        let mut per_device = |metric: &str, scale: f64, count: &dyn Fn(&Reading) -> Option<u64>| {
            let curve: Vec<(f64, f64)> = samples
                .readings
                .iter()
                .filter_map(|r| Some((t(r), count(r)? as f64)))
                .collect();
            out.extend(rates(
                &format!("{dev}:{metric}"),
                &edges,
                &deltas(&curve, &edges),
                scale,
            ));
        };
        per_device(metrics::DEV_R_PER_S.name, 1.0, &|r| {
            Some(r.disks.get(i)?.as_ref()?.reads)
        });
        per_device(metrics::DEV_W_PER_S.name, 1.0, &|r| {
            Some(r.disks.get(i)?.as_ref()?.writes)
        });
        let nic = |r: &Reading| r.nics.get(i).copied().flatten();
        per_device(metrics::NIC_RX_MB_PER_S.name, 1e-6, &|r| {
            Some(nic(r)?.rx_bytes)
        });
        per_device(metrics::NIC_TX_MB_PER_S.name, 1e-6, &|r| {
            Some(nic(r)?.tx_bytes)
        });
        per_device(metrics::NIC_RX_PKTS_PER_S.name, 1.0, &|r| {
            Some(nic(r)?.rx_packets)
        });
        per_device(metrics::NIC_TX_PKTS_PER_S.name, 1.0, &|r| {
            Some(nic(r)?.tx_packets)
        });
    }
    let cpus: std::collections::BTreeSet<u32> = samples
        .readings
        .iter()
        .flat_map(|r| r.irq_layout.cpus.iter().copied())
        .collect();
    let mut device_irqs: Vec<u32> = samples.device_irqs.iter().flatten().copied().collect();
    device_irqs.sort_unstable();
    device_irqs.dedup();
    for cpu in cpus {
        let mut per_cpu = |metric: &str, only: Option<&[u32]>| {
            let curve: Vec<(f64, f64)> = samples
                .readings
                .iter()
                .filter_map(|r| Some((t(r), irqs_on(r, cpu, only)? as f64)))
                .collect();
            out.extend(rates(
                &format!("cpu{cpu}:{metric}"),
                &edges,
                &deltas(&curve, &edges),
                1.0,
            ));
        };
        per_cpu(ALL_IRQ_SERIES, None);
        if !device_irqs.is_empty() {
            per_cpu(DEVICE_IRQ_SERIES, Some(&device_irqs));
        }
    }
    out
}

/// The per-CPU interrupt series: `cpuN:` followed by one of these.
pub(crate) const ALL_IRQ_SERIES: &str = metrics::IRQ_PER_S.name;
pub(crate) const DEVICE_IRQ_SERIES: &str = metrics::DEV_IRQ_PER_S.name;

/// The interrupts CPU `cpu` has taken by reading `r`: of every numbered IRQ (`only` None;
/// rows with one system-wide count left out), or of the IRQs in `only`; `None` when the CPU
/// is not in the reading.
fn irqs_on(r: &Reading, cpu: u32, only: Option<&[u32]>) -> Option<u64> {
    use crate::sys::parse::interrupts::IrqId;
    let l = &r.irq_layout;
    let col = l.cpus.iter().position(|c| *c == cpu)?;
    Some(
        (0..l.ids.len())
            .filter(|row| !l.single.get(*row).copied().unwrap_or(false))
            .filter(|row| match (only, &l.ids[*row]) {
                (None, _) => true,
                (Some(set), IrqId::Number(n)) => set.contains(n),
                (Some(_), _) => false,
            })
            .filter_map(|row| r.irq_counts.get(l.index(row, col)))
            .sum(),
    )
}

/// Every series of a run: fio's, and the sampler's over the window `align` chose.
pub(crate) fn series(
    samples: Option<&SampleRun>,
    window: Option<&WindowRecord>,
    fio_output: &str,
) -> Vec<SeriesPoint> {
    let mut out = fio_series(fio_output);
    if let (Some(s), Some(w)) = (samples, window) {
        out.extend(sampler_series(s, w));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_end_at_the_window_and_absorb_a_sliver() {
        assert_eq!(edges(2.5), vec![0.0, 1.0, 2.0, 2.5]);
        assert_eq!(edges(2.007), vec![0.0, 1.0, 2.007]);
        assert_eq!(edges(0.4), vec![0.0, 0.4]);
        assert_eq!(edges(2.003000064), vec![0.0, 1.0, 2.003]);
        assert!(edges(0.0).is_empty());
        assert!(edges(f64::NAN).is_empty());
    }

    /// Counts at 0.5 s steps binned per second: each bin holds what happened in it, and the
    /// bins add up to the total.
    #[test]
    fn counters_become_per_second_counts_that_add_up() {
        let pts = [
            (0.0, 0.0),
            (0.5, 100.0),
            (1.0, 300.0),
            (1.5, 300.0),
            (2.5, 900.0),
        ];
        let e = edges(2.5);
        let d: Vec<f64> = deltas(&pts, &e).into_iter().map(Option::unwrap).collect();
        assert_eq!(d, vec![300.0, 300.0, 300.0]);
        let r = rates("x", &e, &deltas(&pts, &e), 1.0);
        assert_eq!(r[2].value, 600.0, "{r:?}");
        assert_eq!(r[2].t_s, 2.5);
        // A counter that went backwards gives no value for that bin.
        let back = [(0.0, 10.0), (1.0, 5.0), (2.0, 8.0)];
        assert_eq!(deltas(&back, &edges(2.0)), vec![None, Some(3.0)]);
    }

    /// Two jobs' reports summed; latency is the mean of each bin's completions.
    #[test]
    fn fio_series_sum_jobs_and_match_the_final_counts() {
        let doc = |rt: &[(u64, u64); 2]| {
            let job = |(t, n): (u64, u64)| {
                format!(
                    "{{\"jobname\": \"j\", \"read\": {{\"runtime\": {t}, \"total_ios\": {n}, \
                     \"io_bytes\": {}, \"clat_ns\": {{\"N\": {n}, \"mean\": 1000.0}}}}}}",
                    n * 4096
                )
            };
            format!("{{\"jobs\": [{}, {}]}}\n", job(rt[0]), job(rt[1]))
        };
        let text = doc(&[(1000, 1000), (1000, 3000)]) + &doc(&[(2000, 2000), (2000, 6000)]);
        let s = fio_series(&text);
        let iops: Vec<f64> = s
            .iter()
            .filter(|p| p.name == "read_iops")
            .map(|p| p.value)
            .collect();
        assert_eq!(iops, vec![4000.0, 4000.0]);
        let lat: Vec<f64> = s
            .iter()
            .filter(|p| p.name == "read_clat_mean_us")
            .map(|p| p.value)
            .collect();
        assert_eq!(lat, vec![1.0, 1.0]);
        assert!(s.iter().all(|p| !p.name.starts_with("write")));
        let bw = s.iter().find(|p| p.name == "read_bw_mbs").unwrap();
        assert!((bw.value - 4000.0 * 4096.0 / 1e6).abs() < 1e-9);
    }

    /// Readings at 0, 1 and 2 s on CPUs 0 and 1 with the device's IRQ 40, a foreign IRQ 41
    /// and a one-count ERR row; `counts[k]` are reading k's (40 on cpu0, 40 on cpu1, 41 on
    /// cpu0, 41 on cpu1, ERR).
    fn replayed(counts: [[u64; 5]; 3]) -> SampleRun {
        use crate::sys::parse::interrupts::{IrqId, IrqLayout};
        let layout = std::sync::Arc::new(IrqLayout {
            cpus: vec![0, 1],
            ids: vec![
                IrqId::Number(40),
                IrqId::Number(41),
                IrqId::Named("ERR".into()),
            ],
            single: vec![false, false, true],
        });
        let readings = counts
            .iter()
            .enumerate()
            .map(|(k, c)| Reading {
                elapsed_ns: k as u64 * 1_000_000_000,
                irq_layout: layout.clone(),
                irq_counts: vec![c[0], c[1], c[2], c[3], c[4], 0],
                all_cpus: Default::default(),
                cpus: Vec::new(),
                disks: vec![None],
                nics: vec![None],
            })
            .collect();
        SampleRun {
            readings,
            devices: vec!["nvme0n1".into()],
            device_irqs: vec![vec![40]],
            intervals: Vec::new(),
            summary: None,
            errors: Vec::new(),
            started_unix_ns: 0.0,
        }
    }

    /// The window of `replayed`'s readings.
    fn two_seconds() -> WindowRecord {
        WindowRecord {
            basis: "test".into(),
            start_s: 0.0,
            end_s: 2.0,
            devices: Default::default(),
            devices_at_io_end: Vec::new(),
            note: None,
            uncertain_mb_per_s: Default::default(),
        }
    }

    /// The values of the series `name`, in time order.
    fn values_of(points: &[SeriesPoint], name: &str) -> Vec<f64> {
        points
            .iter()
            .filter(|p| p.name == name)
            .map(|p| p.value)
            .collect()
    }

    /// A watched NIC's counters become its throughput and packets per second, bin by bin.
    #[test]
    fn a_nics_counters_become_per_second_series() {
        let mut samples = replayed([[0; 5]; 3]);
        samples.devices = vec!["eth0".into()];
        for (r, (bytes, packets)) in
            samples
                .readings
                .iter_mut()
                .zip([(0, 0), (3_000_000, 2_000), (4_000_000, 2_500)])
        {
            r.nics[0] = Some(crate::sample::reading::NicCounters {
                rx_bytes: bytes / 100,
                tx_bytes: bytes,
                rx_packets: packets / 2,
                tx_packets: packets,
            });
        }
        let points = sampler_series(&samples, &two_seconds());
        let values = |name: &str| values_of(&points, name);
        assert_eq!(values("eth0:nic_tx_mb_per_s"), vec![3.0, 1.0]);
        assert_eq!(values("eth0:nic_rx_mb_per_s"), vec![0.03, 0.01]);
        assert_eq!(values("eth0:nic_tx_pkts_per_s"), vec![2_000.0, 500.0]);
        assert_eq!(values("eth0:nic_rx_pkts_per_s"), vec![1_000.0, 250.0]);
        // No diskstats for a NIC: no completion series.
        assert!(points.iter().all(|p| !p.name.starts_with("eth0:dev_")));
    }

    /// The device's series per CPU counts its own IRQ only; the all-interrupts series keeps
    /// the foreign one too (issue 12: interrupts per CPU over time, of the device).
    #[test]
    fn device_interrupts_per_cpu_leave_other_irqs_out() {
        let samples = replayed([
            [0, 0, 0, 0, 7],
            [100, 10, 5_000, 50, 9],
            [300, 30, 9_000, 90, 12],
        ]);
        let points = sampler_series(&samples, &two_seconds());
        let values = |name: &str| values_of(&points, name);
        assert_eq!(values("cpu0:dev_irq_per_s"), vec![100.0, 200.0]);
        assert_eq!(values("cpu1:dev_irq_per_s"), vec![10.0, 20.0]);
        assert_eq!(values("cpu0:irq_per_s"), vec![5_100.0, 4_200.0]);
        assert_eq!(values("cpu1:irq_per_s"), vec![60.0, 60.0]);
        // Without known device IRQs (a loop device) there is no device series at all.
        let mut no_irqs = samples;
        no_irqs.device_irqs = vec![vec![]];
        assert!(sampler_series(&no_irqs, &two_seconds())
            .iter()
            .all(|p| !p.name.ends_with(":dev_irq_per_s")));
    }
}

//! The sampler's figures over a chosen interval rather than over the whole sampled span. fio
//! measures only part of the time the sampler watches (not its start-up, `ramp_time` or
//! tail), so figures meant to sit next to fio's (disk completions, interrupts, CPU time) are
//! taken over fio's measured interval: the counters at each end are interpolated linearly
//! between the two readings around it, and rates divide by the interval's own length.
//!
//! Why interpolation is good enough: at the start the workload runs steadily on both sides
//! (the ramp does the same I/O), so the counters grow linearly across it; at the end the I/O
//! stops, and the error is at most a quarter of one sampling interval's worth of I/O, which
//! the run loop keeps small by sampling short runs more often (`cadence_for`).
//!
//! Pure: readings in, readings and summaries out.

use super::derive::{summary, Summary};
use super::reading::{NicCounters, Reading};
use super::Cadence;
use crate::sys::parse::diskstats::DiskStat;
use crate::sys::parse::stat::CpuTimes;
use serde::Serialize;
use std::time::Duration;

/// An interval on the sampler's clock (ns since its first reading).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct Span {
    pub start_ns: u64,
    pub end_ns: u64,
}

/// `a + (b - a) * f` for a counter; a counter that went backwards keeps the later value, so
/// the derivation downstream still sees it go backwards and gives no value.
fn lerp(a: u64, b: u64, f: f64) -> u64 {
    if b < a {
        return b;
    }
    a + ((b - a) as f64 * f).round() as u64
}

fn lerp_cpu(a: &CpuTimes, b: &CpuTimes, f: f64) -> CpuTimes {
    CpuTimes {
        user: lerp(a.user, b.user, f),
        nice: lerp(a.nice, b.nice, f),
        system: lerp(a.system, b.system, f),
        idle: lerp(a.idle, b.idle, f),
        iowait: lerp(a.iowait, b.iowait, f),
        irq: lerp(a.irq, b.irq, f),
        softirq: lerp(a.softirq, b.softirq, f),
        steal: lerp(a.steal, b.steal, f),
        guest: lerp(a.guest, b.guest, f),
        guest_nice: lerp(a.guest_nice, b.guest_nice, f),
    }
}

fn lerp_disk(a: &DiskStat, b: &DiskStat, f: f64) -> DiskStat {
    let l = |x: u64, y: u64| lerp(x, y, f);
    DiskStat {
        reads: l(a.reads, b.reads),
        reads_merged: l(a.reads_merged, b.reads_merged),
        sectors_read: l(a.sectors_read, b.sectors_read),
        read_ms: l(a.read_ms, b.read_ms),
        writes: l(a.writes, b.writes),
        writes_merged: l(a.writes_merged, b.writes_merged),
        sectors_written: l(a.sectors_written, b.sectors_written),
        write_ms: l(a.write_ms, b.write_ms),
        io_ms: l(a.io_ms, b.io_ms),
        weighted_io_ms: l(a.weighted_io_ms, b.weighted_io_ms),
        // A gauge and the later extensions: the nearer reading's.
        ..if f < 0.5 { a.clone() } else { b.clone() }
    }
}

fn lerp_nic(a: &NicCounters, b: &NicCounters, f: f64) -> NicCounters {
    let l = |x: u64, y: u64| lerp(x, y, f);
    NicCounters {
        rx_bytes: l(a.rx_bytes, b.rx_bytes),
        tx_bytes: l(a.tx_bytes, b.tx_bytes),
        rx_packets: l(a.rx_packets, b.rx_packets),
        tx_packets: l(a.tx_packets, b.tx_packets),
    }
}

/// The counters at `t_ns`, interpolated between the readings around it; the first or last
/// reading when `t_ns` lies outside them. `None` without readings.
pub(crate) fn reading_at(readings: &[Reading], t_ns: u64) -> Option<Reading> {
    let after = readings.iter().position(|r| r.elapsed_ns >= t_ns);
    let (a, b) = match after {
        None => return readings.last().cloned(),
        Some(0) => return readings.first().cloned(),
        Some(i) => (&readings[i - 1], &readings[i]),
    };
    let f = (t_ns - a.elapsed_ns) as f64 / (b.elapsed_ns - a.elapsed_ns) as f64;
    let near = if f < 0.5 { a } else { b };
    let same_irqs =
        std::sync::Arc::ptr_eq(&a.irq_layout, &b.irq_layout) || a.irq_layout == b.irq_layout;
    // An IRQ or CPU that came or went between the two: the nearer reading's counts whole.
    let (irq_layout, irq_counts) = if same_irqs && a.irq_counts.len() == b.irq_counts.len() {
        let counts = a
            .irq_counts
            .iter()
            .zip(&b.irq_counts)
            .map(|(x, y)| lerp(*x, *y, f))
            .collect();
        (b.irq_layout.clone(), counts)
    } else {
        (near.irq_layout.clone(), near.irq_counts.clone())
    };
    let cpus = b
        .cpus
        .iter()
        .map(|(cpu, tb)| match a.cpus.iter().find(|(c, _)| c == cpu) {
            Some((_, ta)) => (*cpu, lerp_cpu(ta, tb, f)),
            None => (*cpu, *tb),
        })
        .collect();
    let disks = b
        .disks
        .iter()
        .enumerate()
        .map(
            |(i, db)| match (a.disks.get(i).and_then(Option::as_ref), db) {
                (Some(da), Some(db)) => Some(lerp_disk(da, db, f)),
                _ => near.disks.get(i).cloned().flatten(),
            },
        )
        .collect();
    let nics = b
        .nics
        .iter()
        .enumerate()
        .map(|(i, nb)| match (a.nics.get(i).copied().flatten(), nb) {
            (Some(na), Some(nb)) => Some(lerp_nic(&na, nb, f)),
            _ => near.nics.get(i).copied().flatten(),
        })
        .collect();
    Some(Reading {
        elapsed_ns: t_ns,
        irq_layout,
        irq_counts,
        all_cpus: lerp_cpu(&a.all_cpus, &b.all_cpus, f),
        cpus,
        disks,
        nics,
    })
}

/// The span clipped to the readings; `None` when nothing of it lies between the first and
/// the last reading.
pub(crate) fn clip(readings: &[Reading], span: Span) -> Option<Span> {
    let (first, last) = (readings.first()?.elapsed_ns, readings.last()?.elapsed_ns);
    let s = span.start_ns.max(first);
    let e = span.end_ns.min(last);
    (e > s).then_some(Span {
        start_ns: s,
        end_ns: e,
    })
}

/// The summary (`derive::summary`) over `span` alone.
pub(crate) fn summary_over(
    readings: &[Reading],
    span: Span,
    devices: &[String],
    device_irqs: &[Vec<u32>],
) -> Option<Summary> {
    let span = clip(readings, span)?;
    let a = reading_at(readings, span.start_ns)?;
    let b = reading_at(readings, span.end_ns)?;
    summary(&[a, b], devices, device_irqs)
}

/// How far the bytes each watched device moved over `span` (clipped to the readings) may be
/// off, in the order of the readings' disks. Where an end of the span falls between two
/// readings, the counters there are interpolated as if the device had worked evenly between
/// them, and it may not have: a run that began or ended inside that interval did all its
/// I/O there on one side of the end. The true count lies between the two readings', so the
/// error is at most that interval's bytes times the larger of the end's two shares of it;
/// nothing at an end that falls on a reading.
pub(crate) fn edge_error_bytes(readings: &[Reading], span: Span) -> Vec<f64> {
    let devices = readings.first().map_or(0, |r| r.disks.len());
    let mut out = vec![0.0; devices];
    let Some(span) = clip(readings, span) else {
        return out;
    };
    let bytes = |d: &DiskStat| (d.sectors_read + d.sectors_written) as f64 * 512.0;
    for t in [span.start_ns, span.end_ns] {
        let Some(i) = readings.iter().position(|r| r.elapsed_ns >= t) else {
            continue;
        };
        if i == 0 || readings[i].elapsed_ns == t {
            continue;
        }
        let (a, b) = (&readings[i - 1], &readings[i]);
        let f = (t - a.elapsed_ns) as f64 / (b.elapsed_ns - a.elapsed_ns) as f64;
        for (k, e) in out.iter_mut().enumerate() {
            if let (Some(Some(da)), Some(Some(db))) = (a.disks.get(k), b.disks.get(k)) {
                *e += (bytes(db) - bytes(da)).max(0.0) * f.max(1.0 - f);
            }
        }
    }
    out
}

/// Completed I/Os on the watched devices so far (reads, writes and discards).
fn completed(r: &Reading) -> u64 {
    r.disks.iter().flatten().map(completed_on).sum()
}

fn completed_on(d: &DiskStat) -> u64 {
    d.reads + d.writes + d.discards.as_ref().map_or(0, |x| x.discards)
}

/// The last `measured_ns` before I/O on the watched devices stopped: where fio's measured
/// interval lies when fio said how long it measured but not when (its client mode reports
/// each host's `runtime` and no clock time), since fio measures until its jobs end and the
/// device's I/O ends with them. The moment it stopped is placed inside the last reading
/// interval that completed any I/O, by how much that interval completed against the steady
/// rate before it. `None` when nothing completed while sampled.
pub(crate) fn activity_window(readings: &[Reading], measured_ns: u64) -> Option<Span> {
    activity_window_by(readings, measured_ns, completed)
}

/// [`activity_window`] of one watched device (its index in the readings' `disks`) alone:
/// where its own I/O stopped while other devices' went on.
pub(crate) fn device_activity_window(
    readings: &[Reading],
    measured_ns: u64,
    device: usize,
) -> Option<Span> {
    activity_window_by(readings, measured_ns, |r| {
        r.disks
            .get(device)
            .and_then(Option::as_ref)
            .map_or(0, completed_on)
    })
}

fn activity_window_by(
    readings: &[Reading],
    measured_ns: u64,
    completed: impl Fn(&Reading) -> u64,
) -> Option<Span> {
    let done: Vec<u64> = readings.iter().map(completed).collect();
    let k = (1..done.len()).rev().find(|&i| done[i] > done[i - 1])?;
    let (t0, t1) = (readings[k - 1].elapsed_ns, readings[k].elapsed_ns);
    // The steady rate: over the (up to five) intervals before, those that ran at half the
    // fastest one's rate or more. Idle ones (before fio began, on a run shorter than five
    // intervals) and the one fio began in would dilute it, and so place the end too late.
    let before: Vec<(u64, u64)> = (k.saturating_sub(5).max(1)..k)
        .map(|i| {
            let ns = readings[i]
                .elapsed_ns
                .saturating_sub(readings[i - 1].elapsed_ns);
            // A device missing from one reading makes the count drop: nothing done then.
            (done[i].saturating_sub(done[i - 1]), ns)
        })
        .filter(|&(_, ns)| ns > 0)
        .collect();
    let rate = |(n, ns): (u64, u64)| n as f64 / ns as f64;
    let fastest = before.iter().map(|&b| rate(b)).fold(0.0, f64::max);
    let (n, ns) = before
        .iter()
        .filter(|&&b| rate(b) >= fastest / 2.0)
        .fold((0, 0), |(n, ns), &(a, b)| (n + a, ns + b));
    // A whole interval's worth at that rate; none known: the interval's end.
    let full = if n > 0 {
        n as f64 * (t1 - t0) as f64 / ns as f64
    } else {
        0.0
    };
    let share = if full > 0.0 {
        ((done[k] - done[k - 1]) as f64 / full).min(1.0)
    } else {
        1.0
    };
    let end = t0 + ((t1 - t0) as f64 * share).round() as u64;
    Some(Span {
        start_ns: end.saturating_sub(measured_ns),
        end_ns: end,
    })
}

/// How often to sample a run whose measured part lasts about `measured` seconds: every
/// configured interval, or more often so the measured interval spans at least 100 readings
/// (the interpolation at its end then errs by at most 0.25% of the run's I/O, and bursts at
/// its start, common on a busy machine, blur at most one short interval); never below 20 ms.
/// A run of unknown length (`None`: fio's size-bound jobs) starts at 20 ms and slows down
/// as it goes on (`Cadence::unknown_length`).
pub(crate) fn cadence_for(configured: Duration, measured: Option<f64>) -> Cadence {
    let Some(m) = measured.filter(|m| m.is_finite() && *m > 0.0) else {
        return Cadence::unknown_length(configured);
    };
    let fine = Duration::from_secs_f64((m / 100.0).min(3600.0)).max(Cadence::FINEST);
    Cadence::every(configured.min(fine))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sys::parse::interrupts::IrqLayout;
    use std::sync::Arc;

    /// A device doing `rate` reads/s from 0.5 s to 2.5 s and nothing else, read at `times`;
    /// its one IRQ fires once per read; CPU 0 is busy while it reads.
    pub(crate) fn readings(times: &[f64], rate: f64) -> Vec<Reading> {
        let layout = Arc::new(IrqLayout {
            ids: vec![crate::sys::parse::interrupts::IrqId::Number(30)],
            cpus: vec![0],
            single: vec![false],
        });
        let busy = |t: f64| (t.clamp(0.5, 2.5) - 0.5) * rate;
        times
            .iter()
            .map(|&t| {
                let n = busy(t) as u64;
                let ticks = (t * 100.0) as u64;
                let busy_ticks = ((t.clamp(0.5, 2.5) - 0.5) * 100.0) as u64;
                let cpu = CpuTimes {
                    system: busy_ticks,
                    idle: ticks - busy_ticks,
                    ..Default::default()
                };
                Reading {
                    elapsed_ns: (t * 1e9) as u64,
                    irq_layout: layout.clone(),
                    irq_counts: vec![n],
                    all_cpus: cpu,
                    cpus: vec![(0, cpu)],
                    disks: vec![Some(DiskStat {
                        name: "loop0".into(),
                        reads: n,
                        sectors_read: n * 8,
                        io_ms: (busy(t) / rate * 1000.0) as u64,
                        ..Default::default()
                    })],
                    nics: vec![None],
                }
            })
            .collect()
    }

    fn span(s: f64, e: f64) -> Span {
        Span {
            start_ns: (s * 1e9) as u64,
            end_ns: (e * 1e9) as u64,
        }
    }

    #[test]
    fn the_whole_span_dilutes_and_the_measured_window_does_not() {
        // Read every 0.05 s from 0 to 3 s; fio measured from 1.0 s (after a ramp from 0.5 s)
        // to 2.5 s.
        let times: Vec<f64> = (0..=60).map(|i| i as f64 * 0.05).collect();
        let r = readings(&times, 40_000.0);
        let dev = vec!["loop0".to_string()];
        let irqs = vec![vec![30]];
        let whole = summary(&r, &dev, &irqs).unwrap();
        let w = summary_over(&r, span(1.0, 2.5), &dev, &irqs).unwrap();
        let rate = |s: &Summary, k: &str| s.devices["loop0"][k];
        assert!((rate(&whole, "dev_r_per_s") - 40_000.0 * 2.0 / 3.0).abs() < 1.0);
        assert!((rate(&w, "dev_r_per_s") - 40_000.0).abs() < 1.0, "{w:?}");
        assert!((rate(&w, "dev_irq_per_s") - 40_000.0).abs() < 1.0);
        assert!((rate(&w, "dev_util_pct") - 100.0).abs() < 0.1);
        assert!((w.system["sys_pct"] - 100.0).abs() < 1.0, "{:?}", w.system);
        assert!(whole.system["sys_pct"] < 70.0);
    }

    #[test]
    fn ends_between_readings_are_interpolated_within_a_quarter_interval() {
        // Read every 0.2 s; the window ends at 2.5 s, between 2.4 and 2.6, where the I/O
        // stops: linear interpolation errs by at most rate * 0.2 / 4.
        let times: Vec<f64> = (0..=15).map(|i| i as f64 * 0.2).collect();
        let r = readings(&times, 10_000.0);
        let dev = vec!["loop0".to_string()];
        let w = summary_over(&r, span(1.1, 2.5), &dev, &[vec![]]).unwrap();
        let got = w.devices["loop0"]["dev_r_per_s"];
        let bound = 10_000.0 * 0.2 / 4.0 / 1.4;
        assert!((got - 10_000.0).abs() <= bound + 1.0, "{got}");
        // A reading exactly at a boundary is taken as it is.
        let at = reading_at(&r, (1.2e9) as u64).unwrap();
        assert_eq!(at.disks[0].as_ref().unwrap().reads, 7000);
        assert_eq!(at.elapsed_ns, 1_200_000_000);
    }

    #[test]
    fn a_window_outside_the_readings_is_clipped_or_refused() {
        let times: Vec<f64> = (0..=10).map(|i| i as f64 * 0.3).collect();
        let r = readings(&times, 1000.0);
        assert_eq!(clip(&r, span(-0.0, 9.0)), Some(span(0.0, 3.0)));
        assert_eq!(clip(&r, span(5.0, 9.0)), None);
        assert!(summary_over(&r, span(5.0, 9.0), &[], &[]).is_none());
        assert!(reading_at(&[], 5).is_none());
    }

    #[test]
    fn the_measured_interval_ends_where_the_devices_io_stopped() {
        // The device reads from 0.5 s to 2.5 s; fio measured the last 1.5 s of it.
        let times: Vec<f64> = (0..=60).map(|i| i as f64 * 0.05).collect();
        let r = readings(&times, 40_000.0);
        let w = activity_window(&r, 1_500_000_000).unwrap();
        assert_eq!(w, span(1.0, 2.5));
        // Stopping inside a reading interval: 2.5 s lies between 2.4 and 2.6.
        let times: Vec<f64> = (0..=15).map(|i| i as f64 * 0.2).collect();
        let r = readings(&times, 10_000.0);
        let w = activity_window(&r, 1_000_000_000).unwrap();
        assert!(w.end_ns.abs_diff(2_500_000_000) <= 1_000_000, "{w:?}");
        assert_eq!(w.end_ns - w.start_ns, 1_000_000_000);
        let dev = vec!["loop0".to_string()];
        let got = summary_over(&r, w, &dev, &[vec![]]).unwrap().devices["loop0"]["dev_r_per_s"];
        // Within the interpolation's bound: a quarter interval's I/O over the 1 s window.
        assert!(
            (got - 10_000.0).abs() <= 10_000.0 * 0.2 / 4.0 + 1.0,
            "{got}"
        );
        // Idle intervals among the five before the last one (a run that began after them)
        // say nothing of its rate: taken in, they placed this end at 2.521 s.
        let times = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 2.4, 2.6, 3.0];
        let r = readings(&times, 10_000.0);
        let w = activity_window(&r, 1_000_000_000).unwrap();
        assert!(w.end_ns.abs_diff(2_500_000_000) <= 1_000_000, "{w:?}");
        // Nor does the interval the run began in, partly idle: at 0.45-2.35 s only.
        let r = readings(&[0.0, 0.1, 0.2, 0.45, 2.35, 2.6, 3.0], 10_000.0);
        let w = activity_window(&r, 1_000_000_000).unwrap();
        assert!(w.end_ns.abs_diff(2_500_000_000) <= 10_000_000, "{w:?}");
        // Nothing completed: nothing to place the interval by.
        let idle = readings(&[0.0, 0.1, 0.2, 0.3], 1000.0);
        assert_eq!(activity_window(&idle, 1), None);
        assert_eq!(activity_window(&[], 1), None);
    }

    /// Reading every second, a device busy from 0.5 to 2.5 s: a window from 0.6 to 2.5 s
    /// has both ends between readings, each in an interval of 0.5 s of I/O (20 MB at 10,000
    /// 4 KiB reads/s); the ends' shares there are 0.6 and 0.5.
    #[test]
    fn ends_between_readings_bound_the_bytes_error() {
        let r = readings(&[0.0, 1.0, 2.0, 3.0], 10_000.0);
        let half_second = 5_000.0 * 4096.0;
        let e = edge_error_bytes(&r, span(0.6, 2.5));
        assert_eq!(e.len(), 1);
        assert!((e[0] - half_second * (0.6 + 0.5)).abs() < 1.0, "{e:?}");
        // Ends on readings, or beyond them (clipped onto them): nothing interpolated.
        assert_eq!(edge_error_bytes(&r, span(1.0, 2.0)), [0.0]);
        assert_eq!(edge_error_bytes(&r, span(0.0, 9.0)), [0.0]);
        // The true bytes of the window lie within the bound of the interpolated ones.
        let dev = vec!["loop0".to_string()];
        let got = summary_over(&r, span(0.6, 2.5), &dev, &[vec![]])
            .unwrap()
            .devices["loop0"]["dev_rmb_per_s"]
            * 1.9e6;
        let truth = 1.9 * 10_000.0 * 4096.0;
        assert!(
            (got - truth).abs() <= e[0],
            "{got} vs {truth} within {}",
            e[0]
        );
    }

    #[test]
    fn short_runs_are_sampled_finely() {
        let s = Duration::from_secs(1);
        let every = |ms| Cadence::every(Duration::from_millis(ms));
        assert_eq!(cadence_for(s, Some(2.0)), every(20));
        assert_eq!(cadence_for(s, Some(5.0)), every(50));
        assert_eq!(cadence_for(s, Some(600.0)), every(1000));
        assert_eq!(cadence_for(s, Some(0.1)), every(20));
        assert_eq!(cadence_for(Duration::from_millis(10), Some(2.0)), every(10));
        // Unknown length: from 20 ms up to the configured interval.
        let c = cadence_for(s, None);
        assert_eq!((c.first, c.max), (Duration::from_millis(20), s));
    }
}

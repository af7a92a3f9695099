//! Cross-checks on every run: figures that measure the same thing two ways must agree, and
//! when they do not the run says so with both figures instead of the disagreement passing
//! silently into a table. Each check is stored with the run (`checks`) and a failed one is a
//! finding in `show` and the report.
//!
//! - fio's bytes per second against the bytes the kernel counted read and written on the
//!   device in the same interval (`align`): over 2% apart on a device nothing else should
//!   use (a scratch device, one named `--destructive-device`, or one holding no data),
//!   something else used the device or the windows do not match. Bytes, not I/Os: the block
//!   layer splits an I/O larger than the queue's limits allow (`max_sectors_kb`,
//!   `max_segments`: a 4 MiB direct read is eight requests on a loop device) and merges
//!   small ones, so request counts differ from fio's by design while bytes may not.
//!   Buffered I/O is left out: the page cache decides what reaches the device.
//! - with `trace = true`, the bytes completed in the block trace against fio's (1%, direct
//!   I/O only; reads and writes, as a discard moves no data); with `ramp_time`, the trace's bytes over fio's measured interval only (the
//!   trace also holds the ramp's I/O, which fio does not count), the interval's uncertainty
//!   added to the tolerance.
//! - for each job, the percentiles taken from its `json+` histogram the way iolab merges them
//!   against fio's own percentiles: equal within the width of the histogram bin.
//! - a polled run (`hipri`): the device's interrupts per second against fio's I/Os per second.
//!   Polled completions take no interrupt, so more than half an interrupt per I/O says the
//!   kernel did not poll: the run measured interrupts under a polled label. The plan already
//!   leaves out what is known not to poll (`resolve::cannot_poll`); this catches the rest, as
//!   a distribution kernel that took the change to pvsync2 into an older release.
//!
//! Pure: figures in, checks out.

use crate::metrics;
use crate::stats::histogram::percentile_of;
use crate::workload::fio_json::{Dir, FioReport, JobResult};
use serde::Serialize;
use std::collections::BTreeMap;

/// How far two figures may differ before a check fails, in percent.
pub(crate) const BYTES_TOLERANCE_PCT: f64 = 2.0;
pub(crate) const TRACE_TOLERANCE_PCT: f64 = 1.0;

/// One check: what was compared, both figures, and the verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Check {
    /// `fio_bytes_vs_diskstats`, `trace_bytes_vs_fio`, `json_plus_percentile`.
    pub check: String,
    /// What it is about: a device, `read p99`, ...
    pub subject: String,
    /// fio's figure and what it is.
    pub fio: f64,
    pub other: f64,
    /// What `other` is (e.g. `diskstats MB/s read+written`).
    pub other_is: String,
    /// `(other - fio) / fio` in percent.
    pub difference_pct: f64,
    pub tolerance_pct: f64,
    /// `ok`, `disagrees`, or `not judged` (see `note`).
    pub verdict: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Check {
    #[cfg(test)]
    pub(crate) fn failed(&self) -> bool {
        self.verdict == "disagrees"
    }

    fn new(check: &str, subject: String, fio: f64, other: f64, other_is: &str) -> Check {
        let difference_pct = if fio != 0.0 {
            (other - fio) / fio * 100.0
        } else if other == 0.0 {
            0.0
        } else {
            f64::INFINITY
        };
        Check {
            check: check.into(),
            subject,
            fio,
            other,
            other_is: other_is.into(),
            difference_pct,
            tolerance_pct: 0.0,
            verdict: String::new(),
            note: None,
        }
    }

    fn judged(mut self, tolerance_pct: f64) -> Check {
        self.tolerance_pct = tolerance_pct;
        // Compared with a hair of slack: a figure exactly at the limit passes.
        let ok = self.difference_pct.abs() <= tolerance_pct * (1.0 + 1e-9);
        self.verdict = if ok { "ok" } else { "disagrees" }.into();
        self
    }

    fn not_judged(mut self, tolerance_pct: f64, why: &str) -> Check {
        self.tolerance_pct = tolerance_pct;
        self.verdict = "not judged".into();
        self.note = Some(why.into());
        self
    }
}

fn device_of(job: &JobResult) -> Option<&str> {
    job.options.get("filename")?.rsplit('/').next()
}

fn is_direct(job: &JobResult) -> bool {
    job.options
        .get("direct")
        .is_some_and(|v| v.trim() != "0" && !v.trim().is_empty())
}

/// Past this share of fio's bytes, the uncertainty of the window's figures (its ends among
/// the sampler's readings, its place by fio's reports) leaves nothing to judge.
const MAX_EDGE_PCT: f64 = 8.0;

/// fio's MB/s per device against the MB/s the device's diskstats counted read and written
/// over the same interval. `devices` holds the aligned `dev_*` figures by device; `owned`
/// says which devices nothing but this experiment should use; `uncertain` how far each
/// device's MB/s may be off (the window record's `uncertain_mb_per_s`), which is added to
/// the tolerance.
pub(crate) fn bytes_vs_diskstats(
    report: &FioReport,
    devices: &BTreeMap<String, BTreeMap<&'static str, f64>>,
    owned: &dyn Fn(&str) -> bool,
    uncertain: &BTreeMap<String, f64>,
) -> Vec<Check> {
    let mut by_device: BTreeMap<&str, (f64, bool)> = BTreeMap::new();
    for job in &report.jobs {
        let Some(dev) = device_of(job) else { continue };
        let e = by_device.entry(dev).or_insert((0.0, true));
        // In MB (10^6 bytes), like `dev_rmb_per_s`.
        e.0 += (job.read.bw_bytes + job.write.bw_bytes) / 1e6;
        e.1 &= is_direct(job);
    }
    let mut out = Vec::new();
    for (dev, (fio, direct)) in by_device {
        let Some(m) = devices.get(dev) else { continue };
        let get = |k: &str| m.get(k).copied();
        let (Some(r), Some(w)) = (
            get(metrics::DEV_RMB_PER_S.name),
            get(metrics::DEV_WMB_PER_S.name),
        ) else {
            continue;
        };
        let c = Check::new(
            "fio_bytes_vs_diskstats",
            dev.to_string(),
            fio,
            r + w,
            "diskstats MB/s read+written",
        );
        let edge_pct = match uncertain.get(dev) {
            Some(u) if fio > 0.0 => u / fio * 100.0,
            _ => 0.0,
        };
        let tolerance = BYTES_TOLERANCE_PCT + edge_pct;
        out.push(if !direct {
            c.not_judged(BYTES_TOLERANCE_PCT, BUFFERED)
        } else if !owned(dev) {
            c.not_judged(
                BYTES_TOLERANCE_PCT,
                "the device holds data (mounted, held, swap or partitioned): other I/O may reach it",
            )
        } else if edge_pct > MAX_EDGE_PCT {
            c.not_judged(
                tolerance,
                "the run is too short for its window: where fio's measured interval lies \
                 (between the sampler's readings, by fio's reports) is known to within more \
                 than 8% of its bytes (a longer run, or a shorter --sample-ms, lets it be \
                 judged)",
            )
        } else {
            c.judged(tolerance)
        });
    }
    out
}

/// Device interrupts per 100 I/Os above which a polled run counts as not polled. In the
/// `nvme-poll` lab guest 1000 polled reads took no interrupt, 1000 interrupt-driven ones 820 to
/// 1000; coalescing can take that lower, so the limit stays well above what polling leaves.
pub(crate) const POLLED_INTERRUPTS_PCT: f64 = 50.0;

/// For a run whose jobs all poll: each device's interrupts per second (the aligned `dev_*`
/// figures) against the I/Os per second fio's jobs on it completed. `difference_pct` is the
/// interrupts per 100 I/Os here, and `tolerance_pct` its limit. Devices without interrupts of
/// their own (loop) give no check.
pub(crate) fn polled_io_vs_interrupts(
    report: &FioReport,
    devices: &BTreeMap<String, BTreeMap<&'static str, f64>>,
) -> Vec<Check> {
    let mut by_device: BTreeMap<&str, f64> = BTreeMap::new();
    for job in &report.jobs {
        let Some(dev) = device_of(job) else { continue };
        *by_device.entry(dev).or_default() += job.read.iops + job.write.iops;
    }
    let mut out = Vec::new();
    for (dev, iops) in by_device {
        let interrupts = devices
            .get(dev)
            .and_then(|m| m.get(metrics::DEV_IRQ_PER_S.name).copied());
        let Some(interrupts) = interrupts.filter(|_| iops > 0.0) else {
            continue;
        };
        let mut c = Check::new(
            "polled_io_vs_interrupts",
            dev.to_string(),
            iops,
            interrupts,
            "device interrupts/s",
        );
        let per_io = interrupts / iops;
        c.difference_pct = per_io * 100.0;
        c.tolerance_pct = POLLED_INTERRUPTS_PCT;
        let polled = c.difference_pct <= POLLED_INTERRUPTS_PCT;
        c.verdict = if polled { "ok" } else { "disagrees" }.into();
        if !polled {
            c.note = Some(format!(
                "{:.2} device interrupts per polled I/O: the kernel did not poll (pvsync2's \
                 hipri is ignored from Linux 5.18 on, also where a distribution took that \
                 change into an older kernel; io_uring needs poll queues), so these figures \
                 are of interrupt-driven I/O",
                per_io
            ));
        }
        out.push(c);
    }
    out
}

/// What a block trace of the run's device saw completed, in MB.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TraceBytes {
    /// Over the whole recording.
    pub completed_mb: f64,
    /// Within fio's measured interval, and how much of that interval its ends may be off by
    /// in percent (`align::TraceWindow`); `None` when fio's output did not say when it was.
    pub in_window: Option<(f64, f64)>,
}

/// Why a check of bytes on the device cannot judge buffered I/O.
const BUFFERED: &str = "buffered I/O: the page cache decides what reaches the device";

/// The bytes a block trace of `device` saw completed against the bytes fio's jobs on that
/// device moved (all jobs when none names its file), in MB. Bytes, not I/Os: a 4 MiB direct
/// read is queued as several bios and split into more requests, while its bytes stay 4 MiB.
/// With `ramp_time` the trace's bytes are counted over fio's measured interval only, with
/// the interval's uncertainty added to the tolerance. `lost` is the events the kernel
/// dropped while recording with a trace buffer of `buffer_kb` per CPU (when known): a trace
/// short of them says why, and what to raise.
pub(crate) fn trace_vs_fio(
    report: &FioReport,
    device: &str,
    trace: TraceBytes,
    (lost, buffer_kb): (f64, Option<u64>),
) -> Check {
    let named = report.jobs.iter().any(|j| device_of(j).is_some());
    let jobs: Vec<&JobResult> = report
        .jobs
        .iter()
        .filter(|j| !named || device_of(j) == Some(device))
        .collect();
    // Data moved: the trace counts a discard apart from the writes (it moves no data), so
    // fio's trimmed bytes are no part of either side.
    let fio_mb = jobs
        .iter()
        .map(|j| j.read.io_bytes + j.write.io_bytes)
        .sum::<u64>() as f64
        / 1e6;
    let check = |other: f64, other_is: &str| {
        Check::new(
            "trace_bytes_vs_fio",
            format!("trace of {device}"),
            fio_mb,
            other,
            other_is,
        )
    };
    let whole = || check(trace.completed_mb, "MB completed in the trace");
    // Only reads and writes go through the page cache: a job that only discards is judged
    // (none of its bytes can reach the trace as data).
    if !jobs
        .iter()
        .filter(|j| j.read.io_bytes + j.write.io_bytes > 0)
        .all(|j| is_direct(j))
    {
        return whole().not_judged(TRACE_TOLERANCE_PCT, BUFFERED);
    }
    let ramp = jobs.iter().any(|j| {
        j.options
            .get("ramp_time")
            .is_some_and(|v| crate::sys::parse::duration::duration(v).is_ok_and(|d| !d.is_zero()))
    });
    let mut c = match (ramp, trace.in_window) {
        (false, _) => whole().judged(TRACE_TOLERANCE_PCT),
        (true, Some((mb, uncertainty_pct))) => check(
            mb,
            "MB completed in the trace within fio's measured interval",
        )
        .judged(TRACE_TOLERANCE_PCT + uncertainty_pct),
        (true, None) => {
            return whole().not_judged(
                TRACE_TOLERANCE_PCT,
                "the trace also holds the ramp_time's I/O, which fio does not count, and \
                 fio's output does not say when it measured",
            )
        }
    };
    if lost > 0.0 && c.verdict == "disagrees" {
        let size = buffer_kb.map_or(String::new(), |kb| format!(", {kb} KiB per CPU,"));
        c.note = Some(format!(
            "the kernel lost {lost} events while recording (its trace buffer{size} filled \
             faster than it was read), so the trace is short: raise [trace] buffer_kb"
        ));
    }
    c
}

/// The histogram bin holding `value`: the distance to the next bin fio could report. fio's
/// bins are log-linear, 64 per power of two (FIO_IO_U_PLAT_BITS = 6), exact below 128 ns.
fn bin_width_ns(value: f64) -> f64 {
    if value < 128.0 {
        return 1.0;
    }
    let power = value.log2().floor();
    2f64.powf(power - 6.0)
}

/// Each job's percentiles from its own `json+` bins (as `metrics` takes them when jobs are
/// merged) against the percentiles fio printed.
pub(crate) fn percentiles_vs_bins(report: &FioReport) -> Vec<Check> {
    let mut out = Vec::new();
    for job in &report.jobs {
        for dir in Dir::ALL {
            let d = match dir {
                Dir::Read => &job.read,
                Dir::Write => &job.write,
                Dir::Trim => &job.trim,
            };
            let Some(bins) = d.clat.bins.as_ref().filter(|b| !b.is_empty()) else {
                continue;
            };
            for &(pct, fio_ns) in &d.clat.percentiles {
                if ![50.0, 99.0, 99.9].contains(&pct) {
                    continue;
                }
                let Some(ours) = percentile_of(bins, pct) else {
                    continue;
                };
                let width = bin_width_ns(fio_ns.max(ours as f64));
                let subject = format!("{} {} p{}", job.name, dir.name(), pct);
                let c = Check::new(
                    "json_plus_percentile",
                    subject,
                    fio_ns,
                    ours as f64,
                    "ns, from the json+ histogram",
                );
                let tolerance = if fio_ns > 0.0 {
                    width / fio_ns * 100.0
                } else {
                    0.0
                };
                out.push(c.judged(tolerance));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::fio_json::parse;

    /// One job reading `mbs` MB/s in 4 MiB blocks.
    fn report(mbs: f64, options: &str) -> FioReport {
        let (bw, iops) = (mbs * 1e6, mbs * 1e6 / 4194304.0);
        parse(&format!(
            r#"{{"jobs": [{{"jobname": "j", "job options": {{{options}}},
                 "read": {{"iops": {iops}, "bw_bytes": {bw}, "total_ios": 20000,
                   "io_bytes": 81920000,
                   "clat_ns": {{"N": 5,
                   "percentile": {{"50.000000": 1000, "99.000000": 5000}},
                   "bins": {{"1000": 3, "1008": 1, "5056": 1}}}}}},
                 "write": {{}}}}]}}"#
        ))
        .unwrap()
    }

    /// The device read `mb` MB/s in `requests` requests/s.
    fn dev(mb: f64, requests: f64) -> BTreeMap<String, BTreeMap<&'static str, f64>> {
        let m = BTreeMap::from([
            ("dev_r_per_s", requests),
            ("dev_w_per_s", 0.0),
            ("dev_rmb_per_s", mb),
            ("dev_wmb_per_s", 0.0),
        ]);
        BTreeMap::from([("loop0".to_string(), m)])
    }

    const DIRECT: &str = r#""filename": "/dev/loop0", "direct": "1""#;

    #[test]
    fn a_polled_run_that_took_an_interrupt_per_io_did_not_poll() {
        let r = report(400.0, DIRECT);
        let iops = r.jobs[0].read.iops;
        let with = |irq: f64| {
            let mut d = dev(400.0, iops);
            d.get_mut("loop0").unwrap().insert("dev_irq_per_s", irq);
            polled_io_vs_interrupts(&r, &d)
        };
        let polled = with(0.0);
        assert_eq!(polled[0].verdict, "ok");
        let not = with(0.98 * iops);
        assert_eq!(not[0].verdict, "disagrees");
        assert!((not[0].difference_pct - 98.0).abs() < 1e-9);
        let note = not[0].note.as_deref().unwrap();
        assert!(
            note.starts_with("0.98 device interrupts per polled I/O"),
            "{note}"
        );
        // A device without interrupts of its own (a loop device) is not judged.
        assert!(polled_io_vs_interrupts(&r, &dev(400.0, iops)).is_empty());
    }

    #[test]
    fn bytes_that_disagree_with_diskstats_are_flagged_with_both_figures() {
        let owned = |_: &str| true;
        let checks = |fio: f64, dev: BTreeMap<_, _>, owned: &dyn Fn(&str) -> bool| {
            bytes_vs_diskstats(&report(fio, DIRECT), &dev, owned, &BTreeMap::new())
        };
        let c = &checks(5_000.0, dev(4_950.0, 1_180.0), &owned)[0];
        assert_eq!(c.verdict, "ok", "{c:?}");
        let c = &checks(5_000.0, dev(4_250.0, 1_010.0), &owned)[0];
        assert!(c.failed(), "{c:?}");
        assert_eq!((c.fio, c.other), (5_000.0, 4_250.0));
        assert!((c.difference_pct + 15.0).abs() < 1e-9);
        // Not the experiment's device, or buffered I/O: shown, not judged.
        let c = &checks(5_000.0, dev(4_250.0, 1_010.0), &|_| false)[0];
        assert_eq!(c.verdict, "not judged");
        let buffered = r#""filename": "/dev/loop0", "direct": "0""#;
        let c = &bytes_vs_diskstats(
            &report(5_000.0, buffered),
            &dev(4_250.0, 1.0),
            &owned,
            &BTreeMap::new(),
        )[0];
        assert_eq!(c.verdict, "not judged");
        assert!(c.note.as_deref().unwrap().contains("page cache"));
    }

    /// Where the window's ends fall between the sampler's readings, what that may cost is
    /// added to the tolerance; past 8% of fio's bytes nothing is judged.
    #[test]
    fn the_windows_placement_among_readings_widens_the_tolerance() {
        let owned = |_: &str| true;
        let check = |dev_mb: f64, uncertain: f64| {
            let u = BTreeMap::from([("loop0".to_string(), uncertain)]);
            bytes_vs_diskstats(&report(5_000.0, DIRECT), &dev(dev_mb, 1.0), &owned, &u)[0].clone()
        };
        // 4% short: over 2%, within 2% plus 150 MB/s (3%) of uncertainty.
        assert!(check(4_800.0, 0.0).failed());
        let c = check(4_800.0, 150.0);
        assert_eq!(c.verdict, "ok", "{c:?}");
        assert!((c.tolerance_pct - 5.0).abs() < 1e-9);
        assert!(check(4_600.0, 150.0).failed());
        // 45% short with ends placed to within 40% (a 0.4 s run read every second).
        let c = check(2_750.0, 2_000.0);
        assert_eq!(c.verdict, "not judged", "{c:?}");
        assert!(c.note.unwrap().contains("--sample-ms"));
    }

    /// 4 MiB reads split into eight requests each, as a loop device's queue (128 segments of
    /// 4 KiB pages) splits them. The bytes agree, so the check passes.
    #[test]
    fn requests_split_by_the_block_layer_do_not_fail_the_check() {
        let fio = report(5_886.0, DIRECT);
        let reads_per_s = fio.jobs[0].read.iops;
        let c = &bytes_vs_diskstats(
            &fio,
            &dev(5_890.0, reads_per_s * 8.0),
            &|_| true,
            &BTreeMap::new(),
        )[0];
        assert_eq!(c.verdict, "ok", "{c:?}");
        assert_eq!(c.check, "fio_bytes_vs_diskstats");
    }

    fn whole(completed_mb: f64) -> TraceBytes {
        TraceBytes {
            completed_mb,
            in_window: None,
        }
    }

    #[test]
    fn trace_bytes_must_match_fios_without_a_ramp() {
        // 20,000 reads of 4 KiB: 81.92 MB.
        let r = report(1.0, DIRECT);
        assert_eq!(
            trace_vs_fio(&r, "loop0", whole(82.5), (0.0, Some(8192))).verdict,
            "ok"
        );
        // Another device's trace is compared with no job's I/O.
        assert!(trace_vs_fio(&r, "loop1", whole(81.92), (0.0, Some(8192))).failed());
        let c = trace_vs_fio(&r, "loop0", whole(77.0), (0.0, Some(8192)));
        assert!(c.failed());
        assert_eq!((c.fio, c.other), (81.92, 77.0));
        assert_eq!(c.note, None);
        // Events lost while recording are named as the likely cause.
        let c = trace_vs_fio(&r, "loop0", whole(77.0), (1200.0, Some(8192)));
        assert!(c.failed());
        let note = c.note.unwrap();
        assert!(note.contains("lost 1200 events"), "{note}");
        assert!(
            note.contains("8192 KiB per CPU") && note.contains("buffer_kb"),
            "{note}"
        );
        // Trims are no data on either side: fio's trimmed bytes are not compared.
        let mut trimmed = report(1.0, DIRECT);
        trimmed.jobs[0].trim.io_bytes = 500_000_000;
        assert_eq!(
            trace_vs_fio(&trimmed, "loop0", whole(82.0), (0.0, Some(8192))).verdict,
            "ok"
        );
        // A job that only discards, without direct=1, is not buffered I/O: nothing of it is
        // data, so the trace must hold none.
        let mut trim_only = report(1.0, r#""filename": "/dev/loop0", "direct": "0""#);
        trim_only.jobs[0].read.io_bytes = 0;
        trim_only.jobs[0].trim.io_bytes = 500_000_000;
        let c = trace_vs_fio(&trim_only, "loop0", whole(0.0), (0.0, Some(8192)));
        assert_eq!(c.verdict, "ok", "{c:?}");
        assert!(trace_vs_fio(&trim_only, "loop0", whole(40.0), (0.0, None)).failed());
        // Through the page cache, the device sees what the cache lets through.
        let buffered = report(1.0, r#""filename": "/dev/loop0", "direct": "0""#);
        let c = trace_vs_fio(&buffered, "loop0", whole(40.0), (0.0, Some(8192)));
        assert_eq!(c.verdict, "not judged");
        assert!(c.note.unwrap().contains("page cache"));
    }

    /// With a ramp, the trace's bytes within fio's measured interval are what fio counted;
    /// the whole trace's are not, and without the interval nothing is judged.
    #[test]
    fn with_a_ramp_the_trace_is_counted_over_fios_measured_interval() {
        let ramped = report(
            1.0,
            r#""filename": "/dev/loop0", "direct": "1", "ramp_time": "1s""#,
        );
        let trace = |in_window| TraceBytes {
            completed_mb: 120.0,
            in_window,
        };
        let c = trace_vs_fio(
            &ramped,
            "loop0",
            trace(Some((82.3, 0.25))),
            (0.0, Some(8192)),
        );
        assert_eq!(c.verdict, "ok", "{c:?}");
        assert_eq!((c.other, c.tolerance_pct), (82.3, 1.25));
        assert!(c.other_is.contains("within fio's measured interval"));
        // 1.4% short: over 1% plus the interval's 0.25%.
        let c = trace_vs_fio(
            &ramped,
            "loop0",
            trace(Some((80.77, 0.25))),
            (0.0, Some(8192)),
        );
        assert!(c.failed(), "{c:?}");
        // The same shortfall with an interval known only to within 1%.
        let c = trace_vs_fio(
            &ramped,
            "loop0",
            trace(Some((80.77, 1.0))),
            (0.0, Some(8192)),
        );
        assert_eq!(c.verdict, "ok", "{c:?}");
        let c = trace_vs_fio(&ramped, "loop0", trace(None), (0.0, Some(8192)));
        assert_eq!(c.verdict, "not judged");
        assert_eq!(c.other, 120.0);
        assert!(c.note.unwrap().contains("ramp_time"));
    }

    #[test]
    fn percentiles_from_bins_agree_with_fios_within_a_bin() {
        let checks = percentiles_vs_bins(&report(1.0, DIRECT));
        assert_eq!(checks.len(), 2);
        // p50: 3 of 5 samples at 1000 ns; p99: the 5056 bin, fio printed 5000 (64 ns wide
        // bins between 4096 and 8192: 56 ns apart is within one).
        assert!(checks.iter().all(|c| c.verdict == "ok"), "{checks:?}");
        // A histogram that disagrees with fio's own percentile by several bins.
        let bad = parse(
            r#"{"jobs": [{"jobname": "j", "read": {"iops": 1, "total_ios": 5,
                 "clat_ns": {"N": 5, "percentile": {"50.000000": 1000},
                   "bins": {"2000": 5}}}, "write": {}}]}"#,
        )
        .unwrap();
        let c = &percentiles_vs_bins(&bad)[0];
        assert!(c.failed(), "{c:?}");
        assert_eq!((c.fio, c.other), (1000.0, 2000.0));
    }

    #[test]
    fn bin_widths_follow_fios_histogram() {
        assert_eq!(bin_width_ns(100.0), 1.0);
        assert_eq!(bin_width_ns(4096.0), 64.0);
        assert_eq!(bin_width_ns(8191.0), 64.0);
        assert_eq!(bin_width_ns(1_000_000.0), 2f64.powi(13));
    }
}

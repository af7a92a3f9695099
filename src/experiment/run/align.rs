//! Puts the sampler's figures on fio's measured interval. fio reports I/O over the part of
//! its life after `ramp_time` until its jobs ended (`workload::fio_window` reads when, from
//! its status reports); the sampler watched from before fio started until after it exited.
//! Over the whole sampled span every sampler metric would be diluted by fio's start-up, ramp
//! and tail (issue 12: `dev_r_per_s` 15% under `read_iops` with 2 s runs). Here each device's
//! figures are taken over the interval of the fio jobs that drove it, and the system-wide
//! ones over the span of all jobs; the window used is recorded with the run.
//!
//! A window that only fio's final report anchors (a size-bound run, too short for a status
//! report) is late by fio's reaping; it is moved to end where the device's I/O stopped
//! (`where_io_stopped`), as a host's is. With several devices the report comes when the last
//! job ends, so each device's window is moved to where its own I/O stopped
//! (`device_io_stopped`).
//!
//! In hosts mode fio's client output has each host's runtime but no clock time, so a host's
//! agent places the interval itself, where its device's I/O stopped (`align_to_activity`),
//! and this machine, which only drove them, takes its figures over the hosts' windows
//! together (`align_to_unix_span`), or, with fio servers alone, over fio's runtime up to its
//! exit (`align_to_fio_exit`).
//!
//! A block trace recorded during the run is put on the same interval (`trace_window`): its
//! clock is the monotonic one, so fio's wall-clock window moves onto it by the difference
//! between the two clocks.
//!
//! Pure: the sampler's readings and fio's text in, a summary and a record of the window out.

use crate::metrics;
use crate::sample::window::{
    activity_window, clip, device_activity_window, edge_error_bytes, summary_over, Span,
};
use crate::sample::{SampleRun, Summary};
use crate::workload::fio_window::{measured_windows, Anchor, JobWindow};
use serde::Serialize;
use std::collections::BTreeMap;

/// What the sampler's metrics were taken over, stored with the run (`sample_window`):
/// seconds on the series' axis (since the sampler's first reading).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct WindowRecord {
    /// `fio status report`, `fio final report` (late by fio's reaping, tens of ms), `end of
    /// device I/O` (a host's, or a window the final report alone anchored, moved to where
    /// the device's I/O stopped), `hosts' windows` in hosts mode (`end of fio` with fio
    /// servers alone and no local device), or `whole sampled span`
    /// (nothing said when the workload measured; `note` says why).
    pub basis: String,
    pub start_s: f64,
    pub end_s: f64,
    /// Per watched device, when its jobs' interval differs from the run's.
    pub devices: BTreeMap<String, (f64, f64)>,
    /// Those of `devices` placed where the device's own I/O stopped (`device_io_stopped`)
    /// rather than by fio's reports.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices_at_io_end: Vec<String>,
    /// Why the whole span was used, or what was clipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Per watched device, how far its MB/s over the window may be off: the window's ends
    /// fall between readings (`window::edge_error_bytes`), and, placed by fio's reports, lie
    /// where they do only to within the reports' anchor. Absent for the whole span.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub uncertain_mb_per_s: BTreeMap<String, f64>,
}

/// Per watched device of `samples`, how far its MB/s over `span` may be off at the span's
/// ends.
fn uncertain(samples: &SampleRun, span: Span) -> BTreeMap<String, f64> {
    let secs = span.end_ns.saturating_sub(span.start_ns) as f64 / 1e9;
    if secs <= 0.0 {
        return BTreeMap::new();
    }
    edge_error_bytes(&samples.readings, span)
        .into_iter()
        .zip(&samples.devices)
        .map(|(bytes, d)| (d.clone(), bytes / secs / 1e6))
        .collect()
}

/// The sampler's summary over fio's measured interval, and the record of that interval.
#[derive(Debug, Clone)]
pub(crate) struct Aligned {
    pub summary: Option<Summary>,
    pub window: WindowRecord,
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// A job window on the sampler's clock; `None` when it starts before the sampler did by more
/// than a sampling interval could explain (another clock, a canned output).
fn on_sampler_clock(w: &JobWindow, sampler_start_unix_ns: f64) -> Option<(f64, f64)> {
    let s = w.start_unix_ms * 1e6 - sampler_start_unix_ns;
    let e = w.end_unix_ms * 1e6 - sampler_start_unix_ns;
    (e > s && s > -1e9).then_some((s.max(0.0), e))
}

/// The device a job drove: its `filename`'s last component (`/dev/loop3` → `loop3`).
fn device_of(w: &JobWindow) -> Option<&str> {
    w.filename.as_deref()?.rsplit('/').next()
}

/// The sampler's own summary, over everything it watched, and why no narrower window was used.
pub(crate) fn whole(samples: &SampleRun, note: String) -> Aligned {
    let (s, e) = match (samples.readings.first(), samples.readings.last()) {
        (Some(a), Some(b)) => (secs(a.elapsed_ns), secs(b.elapsed_ns)),
        _ => (0.0, 0.0),
    };
    Aligned {
        summary: samples.summary.clone(),
        window: WindowRecord {
            basis: "whole sampled span".into(),
            start_s: s,
            end_s: e,
            devices: BTreeMap::new(),
            devices_at_io_end: Vec::new(),
            note: Some(note),
            uncertain_mb_per_s: BTreeMap::new(),
        },
    }
}

/// Why a window could not be used, in either way of placing it.
const OUTSIDE: &str = "fio's measured interval lies outside the sampled span";
const TOO_FEW: &str = "too few readings inside fio's measured interval";

/// Basis of a window placed by [`align_to_activity`].
pub(crate) const DEVICE_IO_END: &str = "end of device I/O";

/// Aligns a host's `samples` (hosts mode, on the host) with fio's measured interval, which
/// lasted `measured_ms` and ended where I/O on the host's device stopped: fio's client
/// output gives each host's runtime, not when it ran (see `window::activity_window`).
pub(crate) fn align_to_activity(samples: &SampleRun, measured_ms: u64) -> Aligned {
    let readings = &samples.readings;
    let Some(span) = activity_window(readings, measured_ms.saturating_mul(1_000_000)) else {
        return whole(
            samples,
            "no I/O completed on the device while sampled, to place fio's measured interval by"
                .into(),
        );
    };
    over(
        samples,
        span,
        DEVICE_IO_END,
        Some(part_of(measured_ms as f64)),
    )
}

/// Aligns this machine's `samples` (its `local_devices`, beside fio servers alone) with fio's
/// measured interval, placed where their I/O stopped; up to where fio exited when they saw
/// none (a device named beside the ones fio drives, idle): over the whole span, as before,
/// its figures were diluted by everything before the servers' jobs began.
pub(crate) fn align_to_local_activity(samples: &SampleRun, measured_ms: u64) -> Aligned {
    let placed = align_to_activity(samples, measured_ms);
    if placed.window.basis == DEVICE_IO_END {
        return placed;
    }
    let mut exit = align_to_fio_exit(samples, measured_ms);
    let said = "no I/O completed on this machine's devices to place fio's measured interval by";
    exit.window.note = Some(match exit.window.note.take() {
        Some(note) => format!("{said}; {note}"),
        None => said.to_string(),
    });
    exit
}

/// The note of a window placed where the device's I/O stopped, should the readings cover
/// only part of the `measured_ms` it lasted.
fn part_of(measured_ms: f64) -> String {
    format!("fio measured {measured_ms:.0} ms; the readings cover only part of it")
}

/// The summary of `samples` over `span` (clipped to the readings), recorded under `basis`
/// with `clipped_note` when the readings cover only part of it; the whole span, saying why,
/// when they cover none of it or too little.
fn over(samples: &SampleRun, span: Span, basis: &str, clipped_note: Option<String>) -> Aligned {
    let readings = &samples.readings;
    let Some(clipped) = clip(readings, span) else {
        return whole(samples, OUTSIDE.into());
    };
    let Some(summary) = summary_over(readings, clipped, &samples.devices, &samples.device_irqs)
    else {
        return whole(samples, TOO_FEW.into());
    };
    Aligned {
        summary: Some(summary),
        window: WindowRecord {
            basis: basis.into(),
            start_s: secs(clipped.start_ns),
            end_s: secs(clipped.end_ns),
            devices: BTreeMap::new(),
            devices_at_io_end: Vec::new(),
            note: clipped_note.filter(|_| clipped != span),
            uncertain_mb_per_s: uncertain(samples, clipped),
        },
    }
}

/// Basis of a window placed by [`align_to_fio_exit`].
pub(crate) const FIO_EXIT: &str = "end of fio";

/// Aligns this machine's `samples` in hosts mode when no device places fio's measured
/// interval (fio servers alone, no `local_devices`): `measured_ms` long (fio's longest
/// runtime), ending at the last reading, taken as fio's client exited, a moment after its
/// servers' jobs ended. fio's start-up and its servers' late start (about a second) stay out,
/// as they did not over the whole sampled span.
pub(crate) fn align_to_fio_exit(samples: &SampleRun, measured_ms: u64) -> Aligned {
    let end = samples.readings.last().map_or(0, |r| r.elapsed_ns);
    let span = Span {
        start_ns: end.saturating_sub(measured_ms.saturating_mul(1_000_000)),
        end_ns: end,
    };
    over(samples, span, FIO_EXIT, Some(part_of(measured_ms as f64)))
}

/// Basis of a window taken from the hosts' windows ([`align_to_unix_span`]).
pub(crate) const HOSTS_WINDOWS: &str = "hosts' windows";

/// Aligns this machine's `samples` in hosts mode with the span its hosts measured in
/// (`span_unix_ns`, ns since the epoch on this machine's clock, `None` when no host placed
/// its window): it drove them while they measured, and nothing happens here otherwise.
pub(crate) fn align_to_unix_span(samples: &SampleRun, span_unix_ns: Option<(f64, f64)>) -> Aligned {
    let Some((start, end)) = span_unix_ns else {
        return whole(samples, "no host placed fio's measured interval".into());
    };
    let on_clock = |t: f64| (t - samples.started_unix_ns).max(0.0) as u64;
    let span = Span {
        start_ns: on_clock(start),
        end_ns: on_clock(end),
    };
    over(samples, span, HOSTS_WINDOWS, None)
}

/// Aligns `samples` with the windows in fio's `output`. `device_irqs[i]` are the IRQs of
/// `samples.devices[i]`.
pub(crate) fn align(samples: &SampleRun, fio_output: &str, device_irqs: &[Vec<u32>]) -> Aligned {
    let readings = &samples.readings;
    let jobs: Vec<(JobWindow, (f64, f64))> = measured_windows(fio_output)
        .into_iter()
        .filter_map(|w| {
            let span = on_sampler_clock(&w, samples.started_unix_ns)?;
            Some((w, span))
        })
        .collect();
    if jobs.is_empty() {
        return whole(
            samples,
            "fio's output says nothing usable about when it measured".into(),
        );
    }
    let run_span = jobs
        .iter()
        .map(|(_, s)| *s)
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
        .expect("not empty");
    let Some(clipped) = clip(readings, to_span(run_span)) else {
        return whole(samples, OUTSIDE.into());
    };
    let Some(mut summary) = summary_over(readings, clipped, &samples.devices, device_irqs) else {
        return whole(samples, TOO_FEW.into());
    };
    let mut uncertain_mb_per_s = uncertain(samples, clipped);
    let Own {
        devices,
        devices_at_io_end,
    } = own_windows(
        samples,
        &jobs,
        run_span,
        device_irqs,
        &mut summary,
        &mut uncertain_mb_per_s,
    );
    let final_only = jobs.iter().any(|(w, _)| w.anchor == Anchor::FinalReport);
    if final_only && devices.is_empty() {
        if let Some(span) = where_io_stopped(samples, to_span(run_span)) {
            let measured_ms = (run_span.1 - run_span.0) / 1e6;
            return over(samples, span, DEVICE_IO_END, Some(part_of(measured_ms)));
        }
    }
    let anchor_s = if final_only {
        FINAL_ANCHOR_MS
    } else {
        STATUS_ANCHOR_MS
    } / 1e3;
    let default_span = (secs(clipped.start_ns), secs(clipped.end_ns));
    for (name, figures) in &summary.devices {
        // Placed by its own I/O, as a window moved to the device's I/O end is: its ends'
        // readings bound its error, and no anchor of fio's is involved.
        if devices_at_io_end.contains(name) {
            continue;
        }
        let span = devices.get(name).copied().unwrap_or(default_span);
        if let Some(u) = anchor_uncertainty(figures, span, anchor_s) {
            *uncertain_mb_per_s.entry(name.clone()).or_default() += u;
        }
    }
    let clipped_note = (clipped != to_span(run_span)).then(|| {
        format!(
            "fio measured {:.3}-{:.3} s; the readings cover only part of it",
            run_span.0 / 1e9,
            run_span.1 / 1e9
        )
    });
    Aligned {
        summary: Some(summary),
        window: WindowRecord {
            basis: if final_only {
                "fio final report"
            } else {
                "fio status report"
            }
            .into(),
            start_s: secs(clipped.start_ns),
            end_s: secs(clipped.end_ns),
            devices,
            devices_at_io_end,
            note: clipped_note,
            uncertain_mb_per_s,
        },
    }
}

/// A span in nanoseconds on the sampler's clock, from one in fractional nanoseconds.
fn to_span((s, e): (f64, f64)) -> Span {
    Span {
        start_ns: s as u64,
        end_ns: e as u64,
    }
}

/// The windows of the devices fio's jobs drove, where a device's own differs from the run's.
struct Own {
    /// Each device's window, seconds on the sampler's axis.
    devices: BTreeMap<String, (f64, f64)>,
    /// The devices whose window was moved to where their I/O stopped.
    devices_at_io_end: Vec<String>,
}

/// Takes each device's figures over the interval of the jobs that drove it (moved to where
/// its I/O stopped when several devices were driven and only fio's final report anchors its
/// jobs) instead of the run's span, in `summary` and `uncertain_mb_per_s`.
fn own_windows(
    samples: &SampleRun,
    jobs: &[(JobWindow, (f64, f64))],
    run_span: (f64, f64),
    device_irqs: &[Vec<u32>],
    summary: &mut Summary,
    uncertain_mb_per_s: &mut BTreeMap<String, f64>,
) -> Own {
    let readings = &samples.readings;
    let mut own = Own {
        devices: BTreeMap::new(),
        devices_at_io_end: Vec::new(),
    };
    // Devices fio's jobs drive (a stacked target's members are watched, not driven).
    let driven = |name: &String| {
        jobs.iter()
            .any(|(w, _)| device_of(w) == Some(name.as_str()))
    };
    let several = samples.devices.iter().filter(|n| driven(n)).count() > 1;
    for (index, name) in samples.devices.iter().enumerate() {
        let mine: Vec<&(JobWindow, (f64, f64))> = jobs
            .iter()
            .filter(|(w, _)| device_of(w) == Some(name.as_str()))
            .collect();
        let Some(span) = mine
            .iter()
            .map(|(_, s)| *s)
            .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
        else {
            continue;
        };
        // With one device driven the run's window is the device's, moved below when need be.
        let stopped = (several && mine.iter().all(|(w, _)| w.anchor == Anchor::FinalReport))
            .then(|| device_io_stopped(samples, index, to_span(span), to_span(run_span)))
            .flatten();
        if stopped.is_none() && span == run_span {
            continue;
        }
        let Some(window) = clip(readings, stopped.unwrap_or(to_span(span))) else {
            continue;
        };
        if let Some(dev) = summary_over(readings, window, &samples.devices, device_irqs)
            .and_then(|s| s.devices.get(name).cloned())
        {
            summary.devices.insert(name.clone(), dev);
            own.devices
                .insert(name.clone(), (secs(window.start_ns), secs(window.end_ns)));
            if stopped.is_some() {
                own.devices_at_io_end.push(name.clone());
            }
            if let Some(u) = uncertain(samples, window).remove(name) {
                uncertain_mb_per_s.insert(name.clone(), u);
            }
        }
    }
    own
}

/// MB/s a device's figures may be off by because where fio's window lies is known only to
/// within its anchor (`anchor_s`): a window off by that much trades as long a stretch of the
/// device's I/O for idle time, at the window's rate. `span` is the window, in seconds.
fn anchor_uncertainty(
    figures: &BTreeMap<&str, f64>,
    span: (f64, f64),
    anchor_s: f64,
) -> Option<f64> {
    let (s, e) = span;
    let mb_per_s: f64 = [metrics::DEV_RMB_PER_S.name, metrics::DEV_WMB_PER_S.name]
        .iter()
        .filter_map(|k| figures.get(k))
        .sum();
    (e > s && mb_per_s.is_finite()).then(|| mb_per_s * anchor_s / (e - s))
}

/// A window that fio's final report alone anchors (late by fio's reaping, up to
/// `FINAL_ANCHOR_MS`), moved to end where the device's I/O stopped, as a host's is
/// (`activity_window`): the readings place that to within the interval it fell in, where the
/// anchor cost a short size-bound run a third of its length. Taken only where the I/O stopped
/// within the anchor's reach before the report's end (give or take that interval): I/O that
/// went on after the report (writeback of buffered writes, someone else's) or stopped long
/// before it says the device's activity is not fio's, and the report's window stands.
fn where_io_stopped(samples: &SampleRun, report: Span) -> Option<Span> {
    let measured = report.end_ns.checked_sub(report.start_ns)?;
    let stopped = activity_window(&samples.readings, measured)?;
    let interval = interval_holding(&samples.readings, stopped.end_ns)?;
    let anchor = (FINAL_ANCHOR_MS * 1e6) as u64;
    (stopped.end_ns <= report.end_ns + interval
        && stopped.end_ns + anchor + interval >= report.end_ns)
        .then_some(stopped)
}

/// The window of one of several devices that fio's final report alone anchors: the report
/// comes when the run's last job ends, so a device whose jobs ended sooner has its window
/// placed late by as much (a device done after 0.3 s of a 0.9 s run would be measured over
/// 0.6 s of idling). Moved to end where this device's own I/O stopped, when that lies where
/// its jobs could have ended: not after the report, and not before the run's measured start
/// plus the time this device measured (give or take the reading interval and fio's
/// reaping).
fn device_io_stopped(samples: &SampleRun, device: usize, own: Span, run: Span) -> Option<Span> {
    let measured = own.end_ns.checked_sub(own.start_ns)?;
    let stopped = device_activity_window(&samples.readings, measured, device)?;
    let interval = interval_holding(&samples.readings, stopped.end_ns)?;
    let anchor = (FINAL_ANCHOR_MS * 1e6) as u64;
    (stopped.end_ns <= own.end_ns + interval
        && stopped.end_ns + interval + anchor >= run.start_ns + measured)
        .then_some(stopped)
}

/// The length of the reading interval that `t_ns` falls in (0 at or before the first
/// reading), where an end placed by the device's I/O is known to lie; `None` after the last.
fn interval_holding(readings: &[crate::sample::Reading], t_ns: u64) -> Option<u64> {
    match readings.iter().position(|r| r.elapsed_ns >= t_ns)? {
        0 => Some(0),
        i => Some(readings[i].elapsed_ns - readings[i - 1].elapsed_ns),
    }
}

/// fio's measured interval on a block trace's clock, to count the trace's bytes over.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TraceWindow {
    /// `[start, end)` in nanoseconds on the trace's clock (CLOCK_MONOTONIC).
    pub start_ns: u64,
    pub end_ns: u64,
    /// How much of the window its ends may be off by, in percent: the bytes moved in that
    /// time may fall on the wrong side of it.
    pub uncertainty_pct: f64,
}

/// How far a window's anchor may be off: a status report's by the milliseconds between
/// fio's two readings (and `runtime`'s whole milliseconds), the final report's by the time
/// fio took to reap its jobs (24 ms in `fio_window`'s example). Both the sampler's window
/// and a trace's take these as their uncertainty.
const STATUS_ANCHOR_MS: f64 = 5.0;
const FINAL_ANCHOR_MS: f64 = 100.0;

/// The interval fio measured the jobs on `device` in (all jobs when none names its file),
/// on the monotonic clock, given `realtime_minus_mono_ns` (`sys::realtime_minus_monotonic_ns`
/// read about when fio ran). Jobs that measured over different intervals are taken over
/// their union, and the difference adds to the uncertainty. `None` when fio's output says
/// nothing usable about when it measured.
pub(crate) fn trace_window(
    fio_output: &str,
    device: &str,
    realtime_minus_mono_ns: f64,
) -> Option<TraceWindow> {
    let all = measured_windows(fio_output);
    let named = all.iter().any(|w| device_of(w).is_some());
    let jobs: Vec<&JobWindow> = all
        .iter()
        .filter(|w| !named || device_of(w) == Some(device))
        .collect();
    let range = |f: fn(&JobWindow) -> f64| {
        jobs.iter()
            .map(|w| f(w))
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                (lo.min(v), hi.max(v))
            })
    };
    let (start_ms, latest_start) = range(|w| w.start_unix_ms);
    let (earliest_end, end_ms) = range(|w| w.end_unix_ms);
    let spread = (latest_start - start_ms) + (end_ms - earliest_end);
    let anchor = if jobs.iter().any(|w| w.anchor == Anchor::FinalReport) {
        FINAL_ANCHOR_MS
    } else {
        STATUS_ANCHOR_MS
    };
    let to_mono = |ms: f64| ms * 1e6 - realtime_minus_mono_ns;
    let (start_ns, end_ns) = (to_mono(start_ms), to_mono(end_ms));
    (!jobs.is_empty() && start_ns > 0.0 && end_ns > start_ns).then(|| TraceWindow {
        start_ns: start_ns as u64,
        end_ns: end_ns as u64,
        uncertainty_pct: (anchor + spread) / (end_ms - start_ms) * 100.0,
    })
}

/// A window placed where the device's I/O stopped (a host's, `align_to_activity`, or one
/// moved there from fio's final report, `where_io_stopped`; with several devices, `device`'s
/// own, `device_io_stopped`), on the monotonic clock, for a block trace: the end is known to
/// within the reading interval it was placed in, which makes the uncertainty. `None` for a
/// window placed otherwise.
pub(crate) fn activity_window_on_monotonic(
    samples: &SampleRun,
    window: &WindowRecord,
    device: Option<&str>,
    realtime_minus_mono_ns: f64,
) -> Option<TraceWindow> {
    let own = device
        .filter(|d| window.devices_at_io_end.iter().any(|n| n == d))
        .and_then(|d| window.devices.get(d));
    let (start_s, end_s) = match own {
        Some(&span) => span,
        None if window.basis == DEVICE_IO_END => (window.start_s, window.end_s),
        None => return None,
    };
    if end_s <= start_s {
        return None;
    }
    let end_ns = (end_s * 1e9) as u64;
    let placed_in = interval_holding(&samples.readings, end_ns)?;
    let to_mono = |s: f64| samples.started_unix_ns + s * 1e9 - realtime_minus_mono_ns;
    let (start, end) = (to_mono(start_s), to_mono(end_s));
    (start > 0.0).then(|| TraceWindow {
        start_ns: start as u64,
        end_ns: end as u64,
        uncertainty_pct: placed_in as f64 / 1e9 / (end_s - start_s) * 100.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fio's final report of jobs `(name, filename, runtime ms)`, printed at `ts` (ms since
    /// the epoch), after a status report at `status_ts` that anchors the first job only.
    fn output(jobs: &[(&str, &str, u64)], ts: u64, status_ts: Option<u64>) -> String {
        let job = |(name, file, rt): (&str, &str, u64)| {
            format!(
                "{{\"jobname\": \"{name}\", \"job options\": {{\"filename\": \"{file}\", \
                 \"ramp_time\": \"1s\"}}, \"read\": {{\"runtime\": {rt}}}}}"
            )
        };
        let doc = |ts: u64, jobs: Vec<String>| {
            format!(
                "{{\"timestamp_ms\": {ts}, \"jobs\": [{}]}}\n",
                jobs.join(", ")
            )
        };
        let mut out = String::new();
        if let Some(s) = status_ts {
            // 500 ms into the first job's measured interval, which began 30 ms before the
            // final report's anchor says.
            let (name, file, _) = jobs[0];
            let first = [job((name, file, 500))];
            out.push_str(&doc(s, first.to_vec()));
        }
        out.push_str(&doc(ts, jobs.iter().map(|j| job(*j)).collect()));
        out
    }

    #[test]
    fn the_trace_window_is_fios_interval_on_the_monotonic_clock() {
        let offset = 1_795_000_000_000.0 * 1e6; // realtime - monotonic, ns
        let mono = |ms: f64| (ms * 1e6 - offset) as u64;
        // Two jobs on loop0 (one measured 20 ms less), one on loop1, anchored by the final
        // report only: the union of loop0's, 100 ms of anchor and 20 of spread uncertain.
        let text = output(
            &[
                ("a", "/dev/loop0", 2000),
                ("b", "/dev/loop1", 4000),
                ("c", "/dev/loop0", 1980),
            ],
            1_795_000_010_000,
            None,
        );
        let w = trace_window(&text, "loop0", offset).unwrap();
        assert_eq!(w.start_ns, mono(1_795_000_008_000.0));
        assert_eq!(w.end_ns, mono(1_795_000_010_000.0));
        assert!(
            (w.uncertainty_pct - 120.0 / 2000.0 * 100.0).abs() < 1e-9,
            "{w:?}"
        );
        let w1 = trace_window(&text, "loop1", offset).unwrap();
        assert_eq!(w1.start_ns, mono(1_795_000_006_000.0));
        // A status report anchors loop0's first job 30 ms earlier and within a few ms; the
        // other job on loop0, anchored by the final report alone, still widens it.
        let text = output(
            &[("a", "/dev/loop0", 2000), ("c", "/dev/loop0", 2000)],
            1_795_000_010_000,
            Some(1_795_000_008_470),
        );
        let w = trace_window(&text, "loop0", offset).unwrap();
        assert_eq!(w.start_ns, mono(1_795_000_007_970.0));
        assert_eq!(w.end_ns, mono(1_795_000_010_000.0));
        assert!(
            (w.uncertainty_pct - (100.0 + 60.0) / 2030.0 * 100.0).abs() < 1e-9,
            "{w:?}"
        );
        let text = output(
            &[("a", "/dev/loop0", 2000)],
            1_795_000_010_000,
            Some(1_795_000_008_470),
        );
        let w = trace_window(&text, "loop0", offset).unwrap();
        assert!(
            (w.uncertainty_pct - 5.0 / 2000.0 * 100.0).abs() < 1e-9,
            "{w:?}"
        );
        // Nothing about loop2, nothing usable at all, or a window before the clock began.
        assert_eq!(trace_window(&text, "loop2", offset), None);
        assert_eq!(trace_window("no json", "loop0", offset), None);
        assert_eq!(
            trace_window(&text, "loop0", 1_795_000_009_000.0 * 1e6),
            None
        );
    }

    /// A sampler's run of `readings` watching loop0 (served by `irqs`), begun at a fixed
    /// moment of 2026.
    fn on_loop0(readings: Vec<crate::sample::Reading>, irqs: Vec<u32>) -> SampleRun {
        SampleRun {
            readings,
            devices: vec!["loop0".into()],
            device_irqs: vec![irqs],
            intervals: Vec::new(),
            summary: None,
            errors: Vec::new(),
            started_unix_ns: 1_795_000_000e9,
        }
    }

    /// With fio servers alone, this machine's figures are over fio's runtime up to its exit,
    /// not diluted by what came before the servers' jobs began.
    #[test]
    fn fio_servers_alone_are_measured_up_to_fios_exit() {
        // loop0 reads 40,000/s from 0.5 s to 2.5 s; fio exited at 2.55 s, the last reading.
        let times: Vec<f64> = (0..=51).map(|i| i as f64 * 0.05).collect();
        let samples = on_loop0(
            crate::sample::window::tests::readings(&times, 40_000.0),
            vec![30],
        );
        let a = align_to_fio_exit(&samples, 2000);
        assert_eq!(a.window.basis, FIO_EXIT);
        assert!((a.window.start_s - 0.55).abs() < 1e-3, "{:?}", a.window);
        assert!((a.window.end_s - 2.55).abs() < 1e-3, "{:?}", a.window);
        let reads = a.summary.unwrap().devices["loop0"]["dev_r_per_s"];
        assert!((reads / 40_000.0 - 1.0).abs() < 0.03, "{reads}");
        // Over the whole span it was 22% under.
        let whole = align_to_fio_exit(&samples, 2550).summary;
        let diluted = whole.unwrap().devices["loop0"]["dev_r_per_s"];
        assert!(diluted < 0.8 * 40_000.0, "{diluted}");
    }

    /// This machine's devices beside fio servers place fio's interval where their I/O
    /// stopped; idle ones place nothing, and the figures are up to fio's exit, as without
    /// them, not over the whole span.
    #[test]
    fn idle_local_devices_leave_the_window_at_fios_exit() {
        let times: Vec<f64> = (0..=51).map(|i| i as f64 * 0.05).collect();
        let busy = on_loop0(
            crate::sample::window::tests::readings(&times, 40_000.0),
            vec![30],
        );
        assert_eq!(
            align_to_local_activity(&busy, 2000).window.basis,
            DEVICE_IO_END
        );
        let idle = on_loop0(
            crate::sample::window::tests::readings(&times, 0.0),
            vec![30],
        );
        let a = align_to_local_activity(&idle, 2000);
        assert_eq!(a.window.basis, FIO_EXIT);
        assert!((a.window.start_s - 0.55).abs() < 1e-3, "{:?}", a.window);
        assert!(
            a.window
                .note
                .as_deref()
                .unwrap_or("")
                .starts_with("no I/O completed on this"),
            "{:?}",
            a.window
        );
    }

    /// A size-bound run's window rests on fio's final report, late by fio's reaping: it is
    /// moved to end where the device's I/O stopped, when that lies within the report's reach;
    /// I/O that went on after the report, or stopped long before it, leaves the report's.
    #[test]
    fn a_final_reports_window_ends_where_the_devices_io_stopped() {
        // loop0 reads 40,000/s from 0.5 s to 2.5 s, read every 50 ms.
        let times: Vec<f64> = (0..=60).map(|i| i as f64 * 0.05).collect();
        let samples = on_loop0(
            crate::sample::window::tests::readings(&times, 40_000.0),
            vec![30],
        );
        let at = |s: f64| (1_795_000_000.0 + s) * 1e3; // ms since the epoch
        let aligned = |report_s: f64| {
            let fio = output(&[("j", "/dev/loop0", 2000)], at(report_s) as u64, None);
            align(&samples, &fio, &[vec![30]])
        };
        // Reaped 60 ms late: the window is the device's, and its figures are the device's.
        let a = aligned(2.56);
        assert_eq!(a.window.basis, DEVICE_IO_END);
        assert!((a.window.start_s - 0.5).abs() < 1e-3, "{:?}", a.window);
        assert!((a.window.end_s - 2.5).abs() < 1e-3, "{:?}", a.window);
        let reads = a.summary.unwrap().devices["loop0"]["dev_r_per_s"];
        assert!((reads - 40_000.0).abs() < 40.0, "{reads}");
        // The I/O went on 200 ms after the report, or stopped 300 ms before it: not fio's.
        for late in [2.3, 2.8] {
            let a = aligned(late);
            assert_eq!(a.window.basis, "fio final report", "{late}: {:?}", a.window);
            assert!((a.window.end_s - late).abs() < 1e-3, "{:?}", a.window);
        }
    }

    /// Two devices, size-bound, no status report: loop1's job ended at 1.3 s, loop0's at
    /// 2.5 s, and fio's final report (2.56 s) anchors both. loop1's window is moved to where
    /// its own I/O stopped, not left at the report's 1.76-2.56 s, when it idled.
    #[test]
    fn a_device_done_before_the_others_is_measured_where_its_own_io_ran() {
        let times: Vec<f64> = (0..=60).map(|i| i as f64 * 0.05).collect();
        let mut readings = crate::sample::window::tests::readings(&times, 40_000.0);
        for r in &mut readings {
            let t = r.elapsed_ns as f64 / 1e9;
            let n = ((t.clamp(0.5, 1.3) - 0.5) * 20_000.0) as u64;
            r.disks.push(Some(crate::sys::parse::diskstats::DiskStat {
                name: "loop1".into(),
                reads: n,
                sectors_read: n * 8,
                ..Default::default()
            }));
        }
        let samples = SampleRun {
            devices: vec!["loop0".into(), "loop1".into()],
            device_irqs: vec![vec![30], vec![]],
            ..on_loop0(readings, vec![30])
        };
        let at = |s: f64| ((1_795_000_000.0 + s) * 1e3) as u64;
        let fio = output(
            &[("a", "/dev/loop0", 2000), ("b", "/dev/loop1", 800)],
            at(2.56),
            None,
        );
        let a = align(&samples, &fio, &[vec![30], vec![]]);
        let (s, e) = a.window.devices["loop1"];
        assert!(
            (s - 0.5).abs() < 1e-3 && (e - 1.3).abs() < 1e-3,
            "{:?}",
            a.window
        );
        let summary = a.summary.unwrap();
        let reads = summary.devices["loop1"]["dev_r_per_s"];
        assert!((reads - 20_000.0).abs() < 20.0, "{reads}");
        // loop0's own stop (2.5 s) ends its window too, rather than the report's reaping.
        let (s, e) = a.window.devices["loop0"];
        assert!(
            (s - 0.5).abs() < 1e-3 && (e - 2.5).abs() < 1e-3,
            "{:?}",
            a.window
        );
        assert!((summary.devices["loop0"]["dev_r_per_s"] - 40_000.0).abs() < 40.0);
        assert_eq!(a.window.devices_at_io_end, ["loop0", "loop1"]);
        // Its MB/s is uncertain by its ends' readings alone (about 0.05 s of 80 MB/s at each
        // end, over 0.8 s), not by 100 ms of fio's reaping.
        let u = a.window.uncertain_mb_per_s["loop1"];
        assert!(u < 80.0 * 0.1 / 0.8 + 1e-6, "{u}");
        // A trace of loop1 counts its bytes over loop1's own window, uncertain by the 50 ms
        // reading interval its end was placed in (of 0.8 s).
        let offset = 1_795_000_000e9 - 1e12; // realtime - monotonic, ns
        let w = activity_window_on_monotonic(&samples, &a.window, Some("loop1"), offset).unwrap();
        assert_eq!(
            (w.start_ns, w.end_ns),
            (1_000_500_000_000, 1_001_300_000_000)
        );
        assert!(
            (w.uncertainty_pct - 0.05 / 0.8 * 100.0).abs() < 1e-6,
            "{w:?}"
        );
        // Only loop0 driven (loop1 watched as a stacked target's member is): the run's window
        // moves as one device's does, CPU and interrupt figures with it.
        let fio = output(&[("a", "/dev/loop0", 2000)], at(2.56), None);
        let a = align(&samples, &fio, &[vec![30], vec![]]);
        assert_eq!(a.window.basis, DEVICE_IO_END, "{:?}", a.window);
        assert!(a.window.devices_at_io_end.is_empty());
        // A stop before the run's measured start plus loop1's 0.8 s cannot be its job's end:
        // the report's window stands.
        let fio = output(
            &[("a", "/dev/loop0", 2000), ("b", "/dev/loop1", 1700)],
            at(2.56),
            None,
        );
        let a = align(&samples, &fio, &[vec![30], vec![]]);
        let (_, e) = a.window.devices["loop1"];
        assert!((e - 2.56).abs() < 1e-3, "{:?}", a.window);
    }

    /// A host's window placed where its I/O stopped, at 1.55 s inside the reading interval
    /// 1.5-1.6 s, moves onto the monotonic clock whole, uncertain by that interval (0.1 s
    /// of 0.5 s); a window placed otherwise says nothing for a trace.
    #[test]
    fn a_hosts_activity_window_moves_onto_the_monotonic_clock() {
        let readings = (0..=20)
            .map(|k| crate::sample::Reading {
                elapsed_ns: k * 100_000_000,
                irq_layout: Default::default(),
                irq_counts: Vec::new(),
                all_cpus: Default::default(),
                cpus: Vec::new(),
                disks: vec![None],
                nics: vec![None],
            })
            .collect();
        let samples = on_loop0(readings, vec![]);
        let window = |basis: &str| WindowRecord {
            basis: basis.into(),
            start_s: 1.05,
            end_s: 1.55,
            devices: BTreeMap::new(),
            devices_at_io_end: Vec::new(),
            note: None,
            uncertain_mb_per_s: BTreeMap::new(),
        };
        let offset = 1_794_999_000e9; // realtime - monotonic: booted 1000 s before
        let w =
            activity_window_on_monotonic(&samples, &window(DEVICE_IO_END), None, offset).unwrap();
        // Nanoseconds since 1970 in an f64 step by 256 ns: to the microsecond.
        assert!(w.start_ns.abs_diff(1_001_050_000_000) < 1000, "{w:?}");
        assert!(w.end_ns.abs_diff(1_001_550_000_000) < 1000, "{w:?}");
        assert!((w.uncertainty_pct - 20.0).abs() < 1e-6, "{w:?}");
        assert_eq!(
            activity_window_on_monotonic(&samples, &window("whole sampled span"), None, offset),
            None
        );
    }
}

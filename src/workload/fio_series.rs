//! fio's progress through its measured interval, from the status reports it prints with
//! `--status-interval` (the same reports `fio_window` anchors the window with). Each report
//! is cumulative since fio's statistics began (reset when `ramp_time` ends), and each job's
//! `runtime` is the time since then: so a report is a point on the measured window's own
//! axis, seconds since its start, with no clock to reconcile. Per-second rates come from
//! differences of these points (`experiment::run::per_second`), and they add up to the
//! final report's counts exactly, because the final report is the last point.
//!
//! Why status reports and not fio's `write_iops_log`: the logs are files fio writes where
//! the job file says (the safety rules confine such paths), they need `log_avg_msec` in the
//! job, and the reports are already there in every run iolab starts.
//!
//! Pure: text in, points out.

use super::fio_window::{Dir, Job};

/// Cumulative counts of one direction at one point.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct DirTotals {
    pub ios: f64,
    pub bytes: f64,
    /// Sum of completion latencies in ns (fio's `clat_ns` mean x N) and its N.
    pub clat_sum_ns: f64,
    pub clat_n: f64,
}

/// One job's totals at `t_s` seconds after its measured interval began.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Point {
    pub t_s: f64,
    pub read: DirTotals,
    pub write: DirTotals,
}

/// A direction's cumulative counts in one report.
fn totals(d: &Dir) -> DirTotals {
    let f = |v: Option<f64>| v.filter(|x| x.is_finite() && *x >= 0.0).unwrap_or(0.0);
    let (n, mean) = d
        .clat_ns
        .as_ref()
        .map_or((0.0, 0.0), |c| (f(c.n), f(c.mean)));
    DirTotals {
        ios: f(d.total_ios),
        bytes: f(d.io_bytes),
        clat_sum_ns: n * mean,
        clat_n: n,
    }
}

/// A job's totals in one report, at its runtime.
fn point(job: &Job) -> Point {
    Point {
        t_s: job.runtime_ms() / 1000.0,
        read: job.read.as_ref().map(totals).unwrap_or_default(),
        write: job.write.as_ref().map(totals).unwrap_or_default(),
    }
}

/// Per job of the final report (in its order), its points through the measured interval:
/// `t_s = 0` with nothing done, every status report printed after the ramp, and the final
/// report last. Empty when the output holds no report.
pub(crate) fn job_points(output: &str) -> Vec<Vec<Point>> {
    let docs = super::fio_window::documents(output);
    let Some((last, interim)) = docs.split_last() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, job) in last.jobs.iter().enumerate() {
        let end = point(job);
        // Reports of this job, oldest first (jobs keep their order; the name guards it).
        let reports: Vec<(Option<f64>, Point)> = interim
            .iter()
            .filter_map(|d| {
                let j = d.jobs.get(i).filter(|j| j.jobname == job.jobname)?;
                Some((d.timestamp_ms, point(j)))
            })
            .collect();
        // The measured phase is the tail in which runtime never goes back: fio resets its
        // statistics when the ramp ends. A ramp report whose runtime happens to be below the
        // first measured one is caught by its anchor, as in `fio_window`: reports from the
        // ramp are anchored at least a ramp_time before the measured interval.
        let final_anchor = last.timestamp_ms.map(|t| t - end.t_s * 1000.0);
        let ramp = job.ramp_ms();
        let mut kept: Vec<Point> = Vec::new();
        let mut next = end;
        for (ts, p) in reports.into_iter().rev() {
            let in_ramp = match (ts, final_anchor) {
                (Some(ts), Some(fa)) if ramp > 0.0 => ts - p.t_s * 1000.0 < fa - ramp / 2.0,
                _ => false,
            };
            if in_ramp || p.t_s > next.t_s || p.read.ios > next.read.ios {
                break;
            }
            kept.push(p);
            next = p;
        }
        kept.reverse();
        let mut points = vec![Point::default()];
        points.extend(kept.into_iter().filter(|p| p.t_s > 0.0));
        points.push(end);
        out.push(points);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(ts: u64, rt: u64, ios: u64) -> String {
        format!(
            "{{\"timestamp_ms\": {ts}, \"jobs\": [{{\"jobname\": \"j\", \"job options\": \
             {{\"ramp_time\": \"1s\"}}, \"read\": {{\"runtime\": {rt}, \"total_ios\": {ios}, \
             \"io_bytes\": {}, \"clat_ns\": {{\"N\": {ios}, \"mean\": 2000.0}}}}, \
             \"write\": {{\"runtime\": 0, \"total_ios\": 0}}}}]}}\n",
            ios * 4096
        )
    }

    /// The ramp's reports (runtime 390, 890 ms) are left out, the measured ones kept in order,
    /// the final report last; the first point is the window's start with nothing done.
    #[test]
    fn points_follow_the_measured_interval_after_the_ramp() {
        let mut text = String::from("fio: a warning\n");
        for (ts, rt, ios) in [
            (100_390, 390, 3900),
            (100_890, 890, 8900),
            (101_503, 503, 5000),
            (102_004, 1004, 10100),
            (102_503, 1503, 15000),
            (103_010, 2007, 20000),
        ] {
            text.push_str(&doc(ts, rt, ios));
        }
        let jobs = job_points(&text);
        assert_eq!(jobs.len(), 1);
        let t: Vec<f64> = jobs[0].iter().map(|p| p.t_s).collect();
        assert_eq!(t, vec![0.0, 0.503, 1.004, 1.503, 2.007]);
        let ios: Vec<f64> = jobs[0].iter().map(|p| p.read.ios).collect();
        assert_eq!(ios, vec![0.0, 5000.0, 10100.0, 15000.0, 20000.0]);
        let last = jobs[0].last().unwrap().read;
        assert_eq!(last.bytes, 20000.0 * 4096.0);
        assert_eq!(last.clat_sum_ns, 20000.0 * 2000.0);
    }

    #[test]
    fn a_final_report_alone_is_one_interval_and_garbage_is_nothing() {
        let jobs = job_points(&doc(5000, 2000, 4000));
        assert_eq!(jobs[0].len(), 2);
        assert_eq!(jobs[0][1].t_s, 2.0);
        assert!(job_points("not json").is_empty());
    }
}

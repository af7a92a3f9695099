//! Diagnosis: turns a [`Report`] into findings a person can act on, each with the numbers
//! that triggered it (case 1: I2D grew to 88% of Q2C, allocation sleeps appeared, the
//! dispatch depth collapsed). Rules are plain thresholds on the report, kept in one table so
//! they are easy to read and to test.

use std::fmt::Write;

use serde::Serialize;

use super::analyze::{DeviceReport, Report};

#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Finding {
    pub(crate) dev: String,
    /// Stable identifier ("i2d_dominant", ...), used by `trace compare`.
    pub(crate) code: String,
    /// "warning" or "info".
    pub(crate) severity: String,
    pub(crate) message: String,
    pub(crate) evidence: Vec<String>,
}

fn find(
    d: &DeviceReport,
    code: &str,
    sev: &str,
    message: String,
    evidence: Vec<String>,
) -> Finding {
    Finding {
        dev: d.dev.clone(),
        code: code.into(),
        severity: sev.into(),
        message,
        evidence,
    }
}

fn lat(d: &DeviceReport, k: &str) -> (u64, f64) {
    d.latency.get(k).map(|s| (s.n, s.avg)).unwrap_or((0, 0.0))
}

/// All findings: the trace's own first, then device by device.
pub(crate) fn diagnose(r: &Report) -> Vec<Finding> {
    let mut out = Vec::new();
    if r.events_lost > 0 {
        out.push(Finding {
            dev: "all".into(),
            code: "events_lost".into(),
            severity: "warning".into(),
            message: format!(
                "the recording lost {} events (the kernel's trace buffer was full): bios and \
                 requests whose events were lost are unmatched or matched wrongly, so latencies, \
                 counts and what never completed are not to be trusted; record again with a \
                 larger --buffer-kb",
                r.events_lost
            ),
            evidence: vec![format!(
                "{} events lost, {} recorded",
                r.events_lost, r.events
            )],
        });
    }
    for d in &r.devices {
        device_findings(d, &mut out);
    }
    // Events, and not one bio timed: "nothing stands out" would read as a healthy trace.
    if r.devices.iter().all(|d| lat(d, "q2c").0 == 0) {
        out.push(Finding {
            dev: "all".into(),
            code: "nothing_timed".into(),
            severity: "info".into(),
            message: "no bio carrying data was queued and completed in this trace, so there is \
                      nothing to time (only empty flushes, an fsync's, or a cut that left out \
                      every completion); record while the workload runs"
                .into(),
            evidence: vec![format!(
                "{} events; {} before any bio was queued",
                r.events, r.ignored_before_first_q
            )],
        });
    }
    out
}

/// The least mean Q2G, in seconds, and the fewest bios, that can show bios waiting for a
/// free request (see `waiting_for_requests`).
const MIN_TAG_WAIT_S: f64 = 10e-6;
const MIN_TAG_WAIT_BIOS: u64 = 20;

/// The rules, in the order their findings are listed; each looks at one device.
const RULES: [fn(&DeviceReport) -> Option<Finding>; 10] = [
    i2d_dominant,
    allocation_sleeps,
    waiting_for_requests,
    under_fed,
    seeky,
    no_merging,
    device_bound,
    split_bios,
    incomplete,
    cgroup_events,
];

fn device_findings(d: &DeviceReport, out: &mut Vec<Finding>) {
    if lat(d, "q2c").0 == 0 {
        return;
    }
    out.extend(RULES.iter().filter_map(|rule| rule(d)));
}

/// Requests wait between their insertion and their dispatch (case 1: I2D grew to 88% of Q2C,
/// in the I/O scheduler). The trace does not say which scheduler the device had: with `none`,
/// the wait is a plug's (discards wait for the timer's unplug) or the driver's, and advice to
/// take `none` would be wrong there.
fn i2d_dominant(d: &DeviceReport) -> Option<Finding> {
    let o = &d.overhead;
    (o.i2d >= 20.0).then(|| {
        let (_, q2c_avg) = lat(d, "q2c");
        let (_, i2d_avg) = lat(d, "i2d");
        let mut evidence = vec![
            format!("I2D {:.1}% of summed Q2C", o.i2d),
            format!("mean I2D {:.6}s vs mean Q2C {:.6}s", i2d_avg, q2c_avg),
        ];
        if d.plug.timer_unplugs > 0 {
            evidence.push(format!(
                "{} timer unplugs (UT) for {} plugs",
                d.plug.timer_unplugs, d.plug.plugs
            ));
        }
        find(
            d,
            "i2d_dominant",
            "warning",
            format!(
                "{:.0}% of Q2C is I2D: requests wait between insertion and dispatch, in the \
                 I/O scheduler (where the device has one, try `none`), in a plug, or for the \
                 driver",
                o.i2d
            ),
            evidence,
        )
    })
}

/// Requests sleep for a free request (S events).
fn allocation_sleeps(d: &DeviceReport) -> Option<Finding> {
    if d.sleeps == 0 {
        return None;
    }
    let (ns2g, s2g_avg) = lat(d, "s2g");
    Some(find(
        d,
        "allocation_sleeps",
        "warning",
        "requests sleep waiting for allocation (S2G): nr_requests too small for this load".into(),
        vec![
            format!("{} sleeps (S events)", d.sleeps),
            format!("S2G n {ns2g}, mean {s2g_avg:.6}s"),
        ],
    ))
}

/// Bios wait to get a request (Q2G): every tag is taken, so the queue (nr_requests, or the
/// device's own depth) is too shallow for the load. Kernels since 5.11 trace no S (the
/// sleep itself): a long Q2G is what shows it there.
fn waiting_for_requests(d: &DeviceReport) -> Option<Finding> {
    let o = &d.overhead;
    let (q2g_n, q2g_avg) = lat(d, "q2g");
    // Getting a free request costs a few microseconds of CPU time: on a fast device that can
    // be a tenth of Q2C without any wait (2 reads of an idle loop device: 5 us of 45). A wait
    // for a tag lasts until a request completes and the sleeper is woken, tens of
    // microseconds at the least; and a handful of bios says nothing either way.
    if o.q2g < 10.0 || q2g_avg < MIN_TAG_WAIT_S || q2g_n < MIN_TAG_WAIT_BIOS {
        return None;
    }
    let q2g_p99 = d.latency.get("q2g").map_or(0.0, |s| s.p99);
    let mut evidence = vec![
        format!("Q2G {:.1}% of summed Q2C", o.q2g),
        format!("mean Q2G {q2g_avg:.6}s, p99 {q2g_p99:.6}s"),
    ];
    // A part of a split bio is timed from its whole bio's Q (as btt times it): its Q2G holds
    // the time the parts before it took to be cut and to get their requests. With many
    // splits and no allocation sleeps, that is what Q2G shows; telling users to raise
    // nr_requests sent them after the wrong knob (16 parts in flight, 128 tags free).
    let bios = d.reads + d.writes;
    if d.splits > 0 && d.splits * 10 >= bios && d.sleeps == 0 {
        evidence.push(format!(
            "{} splits (X) over {bios} bios queued; no allocation sleeps (S)",
            d.splits
        ));
        return Some(find(
            d,
            "q2g_of_split_bios",
            "info",
            format!(
                "{:.0}% of Q2C is Q2G, in bios cut into parts: each part's Q2G counts from its \
                 whole bio's Q, so it holds the time the parts before it took to be cut and to \
                 get their requests; it need not mean too few requests (tags)",
                o.q2g
            ),
            evidence,
        ));
    }
    Some(find(
        d,
        "waiting_for_requests",
        "warning",
        format!(
            "{:.0}% of Q2C is Q2G: bios wait for a free request (tag); nr_requests or the \
             device's queue depth is too small for this load",
            o.q2g
        ),
        evidence,
    ))
}

/// Few requests in the driver while most of the time is spent above it.
fn under_fed(d: &DeviceReport) -> Option<Finding> {
    let o = &d.overhead;
    let waiting = o.q2g + o.g2i + o.i2d + o.q2m + o.m2d;
    let dd = &d.dispatch_depth;
    if !(dd.n > 0 && dd.avg < 4.5 && waiting >= 50.0) {
        return None;
    }
    Some(find(
        d,
        "under_fed",
        "warning",
        format!(
            "average dispatch {:.1} requests / {:.0} sectors while {:.0}% of Q2C is spent above the driver: device under-fed",
            dd.avg, d.dispatch_sectors.avg, waiting
        ),
        vec![
            format!("dispatch depth avg {:.1}, p90 {}, max {}", dd.avg, dd.p90, dd.max),
            format!("D2C {:.1}% of Q2C", o.d2c),
        ],
    ))
}

/// Dispatches far apart on the device.
fn seeky(d: &DeviceReport) -> Option<Finding> {
    let s = d.seek_d2d.as_ref()?;
    if !(s.nseeks >= 100 && s.median >= 2048) {
        return None;
    }
    Some(find(
        d,
        "seeky",
        "info",
        format!("seeky: median seek {} sectors between dispatches", s.median),
        vec![format!(
            "D2D seeks {}: mean {:.0}, median {}, mode {}({})",
            s.nseeks, s.mean, s.median, s.mode, s.mode_count
        )],
    ))
}

/// Sequential bios that were not merged.
fn no_merging(d: &DeviceReport) -> Option<Finding> {
    let s = d.seek_q2q.as_ref()?;
    let m = &d.merge;
    // Only when IOs overlapped (more than one in the driver on average): one IO at a
    // time cannot merge, and that is not plugging's fault. Nor when bios were split
    // (over a tenth of them): they were already larger than a request may be.
    let applies = s.nseeks >= 100
        && s.median == 0
        && m.d > 0
        && m.ratio < 1.05
        && d.dispatch_depth.avg >= 2.0
        && d.splits * 10 <= m.q;
    if !applies {
        return None;
    }
    // A plug that holds one I/O has nothing to merge it with: the submitter sent them one at
    // a time (fio's libaio, one io_submit per I/O once its queue is full). That is how such
    // a load behaves, not a fault of plugging. Measured on a loop device (64 KiB sequential
    // direct reads, depth 8): ratio 1.00 under `none` and under mq-deadline (an idle device
    // takes each request at once); 2.00 with fio submitting and reaping 8 at a time.
    let one_per_plug = d.plug.plugs > 0 && d.plug.ios_per_unplug < 1.5;
    let message = if one_per_plug {
        format!(
            "merge ratio {:.2} with sequential I/O submitted one per plug: there was \
             nothing to merge each with; submitted in batches, they merge in the plug \
             (fio: iodepth_batch_submit and iodepth_batch_complete_min)",
            m.ratio
        )
    } else {
        format!(
            "merge ratio {:.2} with sequential I/O: plugging/merging ineffective",
            m.ratio
        )
    };
    Some(find(
        d,
        "no_merging",
        "info",
        message,
        vec![
            format!("#Q {} #D {}", m.q, m.d),
            format!("dispatch depth avg {:.1}", d.dispatch_depth.avg),
            format!("median Q2Q seek {} sectors", s.median),
            format!(
                "{} plugs, {:.1} IOs per unplug",
                d.plug.plugs, d.plug.ios_per_unplug
            ),
        ],
    ))
}

/// Nearly all the time is the device's.
fn device_bound(d: &DeviceReport) -> Option<Finding> {
    let o = &d.overhead;
    (o.d2c >= 90.0).then(|| {
        find(
            d,
            "device_bound",
            "info",
            format!(
                "{:.0}% of Q2C is D2C: the time goes to the device (driver and hardware)",
                o.d2c
            ),
            vec![format!("mean D2C {:.6}s", lat(d, "d2c").1)],
        )
    })
}

/// Case 4: 4 KiB LVM stripes cut every 1 MiB request into 4 KiB pieces, which cost dom0's
/// CPUs and were merged again below. Each X adds a piece to its bio, in either form. The
/// figures are of the bios split, not of all (a large reader split into 64 KiB pieces beside
/// a buffered writer's small bios is 16 pieces of 64 KiB, not 1.6 of 27).
fn split_bios(d: &DeviceReport) -> Option<Finding> {
    let bios = d.reads + d.writes;
    if !(bios > 0 && d.splits >= 100 && d.splits * 10 >= bios) {
        return None;
    }
    // A report saved before iolab counted the bios split has only the totals: over all bios.
    let (split, bytes) = if d.bios_split > 0 {
        (d.bios_split, d.split_bio_bytes)
    } else if d.bio_bytes_queued > 0 {
        (bios, d.bio_bytes_queued)
    } else {
        (bios, d.bio_bytes_completed)
    };
    let pieces = split + d.splits;
    let kib = |n: u64| bytes as f64 / 1024.0 / n as f64;
    Some(find(
        d,
        "split_bios",
        "info",
        format!(
            "bios are split: {:.1} pieces per bio split, {:.1} KiB each",
            pieces as f64 / split as f64,
            kib(pieces)
        ),
        vec![
            format!(
                "{} splits (X) cut {split} of the {bios} bios queued ({:.0}%), {:.0} KiB per \
                 bio split",
                d.splits,
                100.0 * split as f64 / bios as f64,
                kib(split)
            ),
            "a stripe or chunk smaller than the I/O (dm, md) or the queue's limits \
             (max_sectors_kb, max_segments) cut each one: more CPU per byte, and pieces \
             to merge again below"
                .to_string(),
        ],
    ))
}

/// IOs still open when the trace ended.
fn incomplete(d: &DeviceReport) -> Option<Finding> {
    let n = &d.never_completed;
    if n.bios == 0 && n.requests == 0 {
        return None;
    }
    Some(find(
        d,
        "incomplete",
        "info",
        format!(
            "{} bios and {} requests never completed in the trace (cut at the end, or events dropped)",
            n.bios, n.requests
        ),
        vec![format!("{} bios replaced by a later Q on the same sector", n.replaced_bios)],
    ))
}

/// Events with a cgroup id, which btt drops.
fn cgroup_events(d: &DeviceReport) -> Option<Finding> {
    if d.merge.q == 0 || d.cgroup_events == 0 {
        return None;
    }
    Some(find(
        d,
        "cgroup_events",
        "info",
        format!(
            "{} events carry a cgroup id; counted here (btt silently drops them)",
            d.cgroup_events
        ),
        vec![],
    ))
}

/// The findings as text.
/// Names from the machine, files or the database are escaped for the terminal
/// (`report::format::terminal_safe`).
pub(crate) fn render(findings: &[Finding]) -> String {
    crate::report::format::terminal_safe_lines(&render_unescaped(findings)).into_owned()
}

fn render_unescaped(findings: &[Finding]) -> String {
    let mut o = String::from("==================== Findings ====================\n\n");
    if findings.is_empty() {
        o.push_str("nothing stands out\n");
    }
    for f in findings {
        let _ = writeln!(o, "[{}] ({}) {}", f.severity, f.dev, f.message);
        for e in &f.evidence {
            let _ = writeln!(o, "    - {e}");
        }
    }
    o
}

/// A trace's analysis with its findings, as `trace analyze` prints it: the report's text
/// then the findings', or one JSON document (the report's fields and `findings`).
pub(crate) struct Diagnosed {
    pub(crate) report: Report,
    pub(crate) findings: Vec<Finding>,
}

impl Diagnosed {
    pub(crate) fn of(report: Report) -> Diagnosed {
        let findings = diagnose(&report);
        Diagnosed { report, findings }
    }
}

/// `trace analyze --json`: the report's fields in their declared order (min, avg, max, n, ...
/// as the tables read), then `findings`. Written straight from the report: sorting every
/// object's keys through a JSON value, as once done, took 1.9 M of the 4.8 M instructions of
/// analysing a 1,000-record trace.
impl serde::Serialize for Diagnosed {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(serde::Serialize)]
        struct Doc<'a> {
            #[serde(flatten)]
            report: &'a Report,
            findings: &'a [Finding],
        }
        let doc = Doc {
            report: &self.report,
            findings: &self.findings,
        };
        doc.serialize(s)
    }
}

impl crate::output::Render for Diagnosed {
    fn text(&self) -> String {
        crate::report::format::terminal_safe_lines(&crate::trace::analyze::render::render(
            &self.report,
        ))
        .into_owned()
            + &render(&self.findings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::analyze::{Analyzer, Options};
    use crate::trace::blk_io_trace::{action, category, code, Event, Payload};

    fn ev(t: u64, c: u8, sector: u64) -> Event {
        Event {
            version: 7,
            time: t,
            sector,
            bytes: 4096,
            action: action(c, category::READ),
            pid: 7,
            device: 8 << 20,
            ..Event::default()
        }
    }

    /// case 1's regression in miniature: requests wait ~90% of their life in the
    /// scheduler (I2D), allocation sleeps (S) appear, one request at a time in the driver.
    #[test]
    fn scheduler_bound_trace_gives_the_case_1_findings() {
        let mut a = Analyzer::new(Options::default());
        let mut t = 1_000_000;
        for i in 0..500u64 {
            let s = i * 8;
            a.feed(&ev(t, code::QUEUE, s));
            a.feed(&ev(t + 1_000, code::SLEEPRQ, s));
            a.feed(&ev(t + 20_000, code::GETRQ, s));
            a.feed(&ev(t + 21_000, code::INSERT, s));
            a.feed(&ev(t + 900_000, code::ISSUE, s));
            a.feed(&ev(t + 1_000_000, code::COMPLETE, s));
            t += 1_000_001;
        }
        let report = a.finish();
        let f = diagnose(&report);
        let codes: Vec<&str> = f.iter().map(|f| f.code.as_str()).collect();
        assert!(codes.contains(&"i2d_dominant"), "{codes:?}");
        assert!(codes.contains(&"allocation_sleeps"), "{codes:?}");
        assert!(codes.contains(&"under_fed"), "{codes:?}");
        let i2d = f.iter().find(|f| f.code == "i2d_dominant").unwrap();
        assert!(
            i2d.message.starts_with("88% of Q2C is I2D")
                && i2d.message.contains("where the device has one, try `none`"),
            "{}",
            i2d.message
        );
        assert!(!codes.contains(&"device_bound"));
        assert!(render(&f).contains("nr_requests"));
    }

    /// Bios that wait long for a request (Q2G) are pointed out without any S event (kernels
    /// since 5.11 trace none); a recording's note of lost events is a finding of its own, and
    /// two notes of one loss (where it was, and the whole) count it once.
    #[test]
    fn waiting_for_requests_and_lost_events_are_found() {
        use crate::trace::blk_io_trace::{lost_here_message, lost_in_all_message, notify};
        let mut a = Analyzer::new(Options::default());
        let mut t = 1_000_000;
        for i in 0..200u64 {
            let s = i * 8;
            a.feed(&ev(t, code::QUEUE, s));
            a.feed(&ev(t + 300_000, code::GETRQ, s));
            a.feed(&ev(t + 301_000, code::ISSUE, s));
            a.feed(&ev(t + 1_000_000, code::COMPLETE, s));
            t += 1_000_001;
        }
        let note = |t: u64, text: String| Event {
            action: action(notify::MESSAGE, category::NOTIFY),
            payload: Payload::Message(text.into()),
            ..ev(t, 0, 0)
        };
        a.feed(&note(50_000_000, lost_here_message(700)));
        a.feed(&note(90_000_000, lost_here_message(300)));
        a.feed(&note(t, lost_in_all_message(1000)));
        let report = a.finish();
        assert_eq!(report.events_lost, 1000);
        let f = diagnose(&report);
        assert_eq!(f[0].code, "events_lost", "{f:?}");
        assert!(
            f[0].message.starts_with("the recording lost 1000 events"),
            "{f:?}"
        );
        let wait = f
            .iter()
            .find(|f| f.code == "waiting_for_requests")
            .expect("Q2G");
        assert!(
            wait.message.starts_with("30% of Q2C is Q2G"),
            "{}",
            wait.message
        );
    }

    /// A trace of only an fsync's empty flushes has nothing to time: said, where "nothing
    /// stands out" read as a healthy trace.
    #[test]
    fn a_trace_with_nothing_timed_says_so() {
        let mut a = Analyzer::new(Options::default());
        for t in 0..10u64 {
            a.feed(&Event {
                bytes: 0,
                action: action(code::QUEUE, category::WRITE | category::FLUSH),
                ..ev(1_000 + t, code::QUEUE, 0)
            });
        }
        let f = diagnose(&a.finish());
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].code, "nothing_timed");
        assert!(f[0].evidence[0].starts_with("10 events"), "{f:?}");
        let mut a = Analyzer::new(Options::default());
        a.feed(&ev(1_000, code::QUEUE, 8));
        a.feed(&ev(2_000, code::ISSUE, 8));
        a.feed(&ev(3_000, code::COMPLETE, 8));
        assert!(diagnose(&a.finish())
            .iter()
            .all(|f| f.code != "nothing_timed"));
    }

    /// Q2G a tenth of Q2C or more is no wait for a request when it is the few microseconds
    /// getting one costs (a fast device), or when there are only a handful of bios (2 reads
    /// of an idle loop device were called a shortage of tags).
    #[test]
    fn quick_or_rare_request_allocation_is_not_called_a_wait() {
        let found = |bios: u64, q2g: u64, q2c: u64| {
            let mut a = Analyzer::new(Options::default());
            let mut t = 1_000_000;
            for i in 0..bios {
                a.feed(&ev(t, code::QUEUE, i * 8));
                a.feed(&ev(t + q2g, code::GETRQ, i * 8));
                a.feed(&ev(t + q2g + 1_000, code::ISSUE, i * 8));
                a.feed(&ev(t + q2c, code::COMPLETE, i * 8));
                t += q2c + 1;
            }
            let f = diagnose(&a.finish());
            f.iter().any(|f| f.code == "waiting_for_requests")
        };
        assert!(found(200, 300_000, 1_000_000));
        assert!(!found(200, 5_000, 45_000), "5 us of 45");
        assert!(!found(2, 300_000, 1_000_000), "two bios");
        assert!(found(20, 15_000, 45_000));
    }

    /// 1 MiB bios cut into four parts, each part getting its request after the one before
    /// it: the parts' Q2G, timed from the whole bio's Q, is the cutting, not a wait for a
    /// free request, and is not called one (it was, with advice to raise nr_requests).
    #[test]
    fn q2g_of_split_bios_is_not_called_a_shortage_of_requests() {
        let part = |t, c, s| Event {
            bytes: 256 << 10,
            ..ev(t, c, s)
        };
        let mut events = Vec::new();
        for i in 0..200u64 {
            let (t, s) = (i * 1_000_000, i * 2048);
            events.push(Event {
                bytes: 1 << 20,
                ..ev(t, code::QUEUE, s)
            });
            for k in 0..4u64 {
                let (pt, ps) = (t + k * 100_000, s + k * 512);
                if k < 3 {
                    events.push(part(pt + 1, code::SPLIT, ps));
                }
                events.push(part(pt + 2, code::GETRQ, ps));
                events.push(part(pt + 3, code::ISSUE, ps));
                events.push(part(pt + 50_000, code::COMPLETE, ps));
            }
        }
        events.sort_by_key(|e| e.time);
        let mut a = Analyzer::new(Options::default());
        for e in &events {
            a.feed(e);
        }
        let f = diagnose(&a.finish());
        let codes: Vec<&str> = f.iter().map(|f| f.code.as_str()).collect();
        assert!(!codes.contains(&"waiting_for_requests"), "{codes:?}");
        let split = f
            .iter()
            .find(|f| f.code == "q2g_of_split_bios")
            .expect("q2g_of_split_bios");
        assert!(
            split
                .message
                .contains("each part's Q2G counts from its whole bio's Q"),
            "{}",
            split.message
        );
    }

    /// Sequential 1 MiB bios, each split in two, overlapping in the driver: merging
    /// cannot help requests already at the queue's limit, so "merging ineffective" is not
    /// said; the same I/O unsplit (two 512 KiB bios) is told it.
    #[test]
    fn split_bios_are_not_called_unmerged() {
        let run = |split: bool| {
            let half = |t, c, s| Event {
                bytes: 512 << 10,
                ..ev(t, c, s)
            };
            let mut events = Vec::new();
            for i in 0..200u64 {
                let (t, s) = (i * 100_000, i * 2048);
                if split {
                    events.push(Event {
                        bytes: 1 << 20,
                        ..ev(t, code::QUEUE, s)
                    });
                    events.push(half(t + 10, code::SPLIT, s));
                } else {
                    events.push(half(t, code::QUEUE, s));
                    events.push(half(t + 10, code::QUEUE, s + 1024));
                }
                events.push(half(t + 20, code::ISSUE, s));
                events.push(half(t + 30, code::ISSUE, s + 1024));
                events.push(half(t + 150_000, code::COMPLETE, s));
                events.push(half(t + 150_010, code::COMPLETE, s + 1024));
            }
            events.sort_by_key(|e| e.time);
            let mut a = Analyzer::new(Options::default());
            for e in &events {
                a.feed(e);
            }
            let codes: Vec<String> = diagnose(&a.finish()).into_iter().map(|f| f.code).collect();
            codes
        };
        assert!(run(false).contains(&"no_merging".to_string()));
        let split = run(true);
        assert!(!split.contains(&"no_merging".to_string()), "{split:?}");
        assert!(split.contains(&"split_bios".to_string()), "{split:?}");
        assert!(!run(false).contains(&"split_bios".to_string()));
    }

    /// Sequential I/Os overlapping in the driver, each queued in a plug of its own (libaio's
    /// one io_submit per I/O): the finding says they were submitted one per plug and what would
    /// merge them, not that plugging failed.
    #[test]
    fn sequential_io_submitted_one_per_plug_is_told_why_it_did_not_merge() {
        use crate::trace::blk_io_trace::Payload;
        let mut events = Vec::new();
        for i in 0..200u64 {
            let (t, s) = (i * 100_000, i * 8);
            events.push(ev(t, code::PLUG, 0));
            events.push(ev(t + 5, code::QUEUE, s));
            events.push(Event {
                payload: Payload::Count(1),
                ..ev(t + 8, code::UNPLUG_IO, 0)
            });
            events.push(ev(t + 10, code::ISSUE, s));
            events.push(ev(t + 250_000, code::COMPLETE, s));
        }
        events.sort_by_key(|e| e.time);
        let mut a = Analyzer::new(Options::default());
        for e in &events {
            a.feed(e);
        }
        let report = a.finish();
        assert_eq!(report.devices[0].plug.ios_per_unplug, 1.0);
        let f = diagnose(&report);
        let m = &f
            .iter()
            .find(|f| f.code == "no_merging")
            .expect("no_merging")
            .message;
        assert!(m.contains("submitted one per plug"), "{m}");
        assert!(m.contains("iodepth_batch_submit"), "{m}");
        assert!(!m.contains("ineffective"), "{m}");
    }

    /// Case 4's 4 KiB stripes under a device-mapper device: every 64 KiB bio is cut into 16
    /// pieces (dm's X names what is left after each), and the finding says how many and how
    /// small. The trace ends while the last bio is in flight: the sizes still come out
    /// whole, over the bytes queued.
    #[test]
    fn bios_cut_into_small_pieces_are_a_finding() {
        // 21 bios of 64 KiB cut as dm cuts them, and `small` bios of 4 KiB never split.
        let finding = |small: u64| {
            let mut a = Analyzer::new(Options::default());
            for i in 0..21u64 {
                let (t, s) = (i * 100_000, i * 128);
                a.feed(&Event {
                    bytes: 64 << 10,
                    ..ev(t, code::QUEUE, s)
                });
                for k in 1..16u64 {
                    a.feed(&Event {
                        bytes: (128 - 8 * k as u32) * 512,
                        ..ev(t + k, code::SPLIT, s + 8 * k)
                    });
                }
                if i < 20 {
                    a.feed(&ev(t + 50_000, code::COMPLETE, s + 120));
                }
            }
            for i in 0..small {
                a.feed(&ev(3_000_000 + i * 1_000, code::QUEUE, 100_000 + i * 8));
            }
            let f = diagnose(&a.finish());
            let split = f.into_iter().find(|f| f.code == "split_bios").unwrap();
            (split.message, split.evidence[0].clone())
        };
        let (message, evidence) = finding(0);
        assert_eq!(
            message,
            "bios are split: 16.0 pieces per bio split, 4.0 KiB each"
        );
        assert_eq!(
            evidence,
            "315 splits (X) cut 21 of the 21 bios queued (100%), 64 KiB per bio split"
        );
        // Beside as many small bios never split, the figures are still the split bios'.
        let (message, evidence) = finding(21);
        assert_eq!(
            message,
            "bios are split: 16.0 pieces per bio split, 4.0 KiB each"
        );
        assert_eq!(
            evidence,
            "315 splits (X) cut 21 of the 42 bios queued (50%), 64 KiB per bio split"
        );
    }

    #[test]
    fn a_healthy_device_bound_trace_says_so() {
        let mut a = Analyzer::new(Options::default());
        let mut t = 1_000;
        for i in 0..500u64 {
            let s = i * 8;
            a.feed(&ev(t, code::QUEUE, s));
            a.feed(&ev(t + 100, code::ISSUE, s));
            a.feed(&ev(t + 50_000, code::COMPLETE, s));
            t += 60_000;
        }
        let f = diagnose(&a.finish());
        let codes: Vec<&str> = f.iter().map(|f| f.code.as_str()).collect();
        assert_eq!(codes, vec!["device_bound"], "{codes:?}");
    }
}

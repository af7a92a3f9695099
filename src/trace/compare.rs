//! Two traces side by side (case 1: the same workload on 2.6.16 and 2.6.32): the key
//! numbers of each device with their change, and the findings present in only one of them.

use std::fmt::Write;

use serde::Serialize;

use super::analyze::{DeviceReport, Report};
use super::diagnose::{diagnose, Finding};

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    pub(crate) metric: String,
    /// None where that trace has no such figure (no S events, no I events, no writes).
    pub(crate) a: Option<f64>,
    pub(crate) b: Option<f64>,
    /// (b - a) / a in percent; None when a is 0 or either side has no figure.
    pub(crate) change_pct: Option<f64>,
    /// For a figure that is itself a percentage (a share of Q2C): b - a, in percentage
    /// points, which is the change the text shows for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) change_points: Option<f64>,
}

/// Whether a metric is a percentage of something, whose change reads in points: 79.76% to
/// 93.10% is 13.3 points, not "+16.7%", and 0.004% to 0.001% is not "-75%".
fn is_share(metric: &str) -> bool {
    metric.contains("% of ")
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct DeviceComparison {
    pub(crate) dev_a: String,
    pub(crate) dev_b: String,
    pub(crate) rows: Vec<Row>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Comparison {
    pub(crate) devices: Vec<DeviceComparison>,
    /// Devices of one trace with no partner in the other, which are not compared.
    pub(crate) devices_only_in_a: Vec<String>,
    pub(crate) devices_only_in_b: Vec<String>,
    /// Findings of one trace that the other has not on the paired device.
    pub(crate) only_in_a: Vec<Finding>,
    pub(crate) only_in_b: Vec<Finding>,
}

/// The figures compared, the same names in the same order for every device: a latency that
/// has no samples in one trace (S2G where nothing slept, I2D without a scheduler, a direction
/// with no I/O) is None there, so it still shows beside the trace that has it.
/// `issued`: either trace has split bios, so that the Q2C of the bios as issued (each split
/// bio once, whole) is compared too.
fn metrics(d: &DeviceReport, duration: f64, issued: bool) -> Vec<(String, Option<f64>)> {
    let mut m: Vec<(String, Option<f64>)> = Vec::new();
    let secs = (d.last - d.first).max(1e-9).min(duration.max(1e-9));
    m.push((
        "IOs/s (completed requests)".into(),
        Some(d.merge.d as f64 / secs),
    ));
    // Data moved: the bios completed, discards left out.
    m.push((
        "MB/s".into(),
        Some(d.bio_bytes_completed as f64 / 1e6 / secs),
    ));
    let mut latency = |name: String, s: Option<&super::analyze::latency::LatencySummary>| {
        let s = s.filter(|s| s.n > 0);
        m.push((format!("{name} avg (s)"), s.map(|s| s.avg)));
        m.push((format!("{name} p99 (s)"), s.map(|s| s.p99)));
    };
    for k in ["q2c", "d2c", "i2d", "q2g", "s2g", "m2d"] {
        latency(k.to_uppercase(), d.latency.get(k));
    }
    for dir in ["read", "write"] {
        let q2c = d.by_direction.get(dir).and_then(|l| l.get("q2c"));
        latency(format!("{dir} Q2C"), q2c);
    }
    // Where two kernels cut bios differently (max_sectors_kb), or one does not cut them,
    // the rows above compare parts of different sizes; the bios as the programs issued them
    // are the same on both (without splits, they are the rows above).
    if issued {
        for dir in ["read", "write"] {
            let as_issued = d.bios_as_issued_q2c.get(dir).or_else(|| {
                (d.splits == 0)
                    .then(|| d.by_direction.get(dir).and_then(|l| l.get("q2c")))
                    .flatten()
            });
            latency(format!("{dir} Q2C as issued"), as_issued);
        }
    }
    let o = &d.overhead;
    for (k, v) in [
        ("I2D", o.i2d),
        ("D2C", o.d2c),
        ("Q2G", o.q2g),
        ("M2D", o.m2d),
    ] {
        m.push((format!("{k} % of Q2C"), Some(v)));
    }
    m.push(("merge ratio".into(), Some(d.merge.ratio)));
    // The exact mean of every dispatched request, not btt's whole-sector BLKavg: 7.5 against
    // 8 sectors is not a 12.5% change.
    m.push(("avg request (sectors)".into(), Some(d.dispatch_sectors.avg)));
    m.push(("dispatch depth avg".into(), Some(d.dispatch_depth.avg)));
    m.push((
        "D2D seek median (sectors)".into(),
        d.seek_d2d.as_ref().map(|s| s.median as f64),
    ));
    m.push(("allocation sleeps".into(), Some(d.sleeps as f64)));
    m
}

/// Compares devices pairwise: same "major,minor" first, else in order.
pub(crate) fn compare(a: &Report, b: &Report) -> Comparison {
    let mut devices = Vec::new();
    let mut used = vec![false; b.devices.len()];
    for (i, da) in a.devices.iter().enumerate() {
        let j = b
            .devices
            .iter()
            .position(|db| db.dev == da.dev)
            .filter(|&j| !used[j])
            .or_else(|| (i < b.devices.len() && !used[i]).then_some(i));
        let Some(j) = j else { continue };
        used[j] = true;
        let db = &b.devices[j];
        let issued = da.splits > 0 || db.splits > 0;
        let rows = metrics(da, a.duration, issued)
            .into_iter()
            .zip(metrics(db, b.duration, issued))
            .filter(|((_, va), (_, vb))| va.is_some() || vb.is_some())
            .map(|((metric, va), (_, vb))| Row {
                change_pct: match (va, vb) {
                    (Some(va), Some(vb)) if va != 0.0 => Some(100.0 * (vb - va) / va),
                    _ => None,
                },
                change_points: match (va, vb) {
                    (Some(va), Some(vb)) if is_share(&metric) => Some(vb - va),
                    _ => None,
                },
                metric,
                a: va,
                b: vb,
            })
            .collect();
        devices.push(DeviceComparison {
            dev_a: da.dev.clone(),
            dev_b: db.dev.clone(),
            rows,
        });
    }
    // A finding is the same on both sides when the device it is of is paired with the one
    // the other's is of (the trace's own findings, of "all", pair with each other).
    let pairs: Vec<(&str, &str)> = devices
        .iter()
        .map(|d| (d.dev_a.as_str(), d.dev_b.as_str()))
        .chain([("all", "all")])
        .collect();
    let fa = diagnose(a);
    let fb = diagnose(b);
    let only = |x: &[Finding], y: &[Finding], paired: &dyn Fn(&str, &str) -> bool| {
        x.iter()
            .filter(|f| !y.iter().any(|g| g.code == f.code && paired(&f.dev, &g.dev)))
            .cloned()
            .collect::<Vec<_>>()
    };
    let unpaired = |r: &Report, taken: &dyn Fn(&str) -> bool| {
        r.devices
            .iter()
            .map(|d| d.dev.clone())
            .filter(|dev| !taken(dev))
            .collect::<Vec<_>>()
    };
    Comparison {
        only_in_a: only(&fa, &fb, &|x, y| pairs.contains(&(x, y))),
        only_in_b: only(&fb, &fa, &|x, y| pairs.contains(&(y, x))),
        devices_only_in_a: unpaired(a, &|dev| pairs.iter().any(|p| p.0 == dev)),
        devices_only_in_b: unpaired(b, &|dev| pairs.iter().any(|p| p.1 == dev)),
        devices,
    }
}

/// Names from the machine, files or the database are escaped for the terminal
/// (`report::format::terminal_safe`).
/// Two traces compared, with the names the text calls them; JSON is the comparison alone.
#[derive(serde::Serialize)]
#[serde(transparent)]
pub(crate) struct Named {
    pub(crate) comparison: Comparison,
    #[serde(skip)]
    pub(crate) names: (String, String),
}

impl crate::output::Render for Named {
    fn text(&self) -> String {
        render(&self.comparison, &self.names.0, &self.names.1)
    }
}

pub(crate) fn render(c: &Comparison, name_a: &str, name_b: &str) -> String {
    crate::report::format::terminal_safe_lines(&render_unescaped(c, name_a, name_b)).into_owned()
}

fn render_unescaped(c: &Comparison, name_a: &str, name_b: &str) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "A: {name_a}\nB: {name_b}");
    // Unlike `iolab compare`'s runs, one trace a side holds no spread to judge noise by.
    let _ = writeln!(
        o,
        "(one trace a side: a change is a difference, not tested against noise; repeated runs \
         with `iolab compare` say what is real)\n"
    );
    for d in &c.devices {
        let _ = writeln!(o, "device A {} vs B {}", d.dev_a, d.dev_b);
        let _ = writeln!(
            o,
            "{:<28} {:>14} {:>14} {:>9}",
            "metric", "A", "B", "change"
        );
        for r in &d.rows {
            // A count that appears (sleeps, I2D under a scheduler) is a change, not a "-";
            // so is a latency only one trace has.
            let ch = match (r.change_points, r.change_pct, r.a, r.b) {
                (Some(pts), ..) => format!("{pts:+.1} pt"),
                (None, Some(p), _, _) => crate::report::format::signed_pct(p),
                (None, None, Some(_), Some(b)) if b != 0.0 => "from 0".into(),
                (None, None, None, Some(_)) => "only B".into(),
                (None, None, Some(_), None) => "only A".into(),
                _ => "-".into(),
            };
            let side = |v: Option<f64>| v.map_or("-".to_string(), |v| num(&r.metric, v));
            let _ = writeln!(
                o,
                "{:<28} {:>14} {:>14} {:>9}",
                r.metric,
                side(r.a),
                side(r.b),
                ch
            );
        }
        o.push('\n');
    }
    for (side, devs) in [("A", &c.devices_only_in_a), ("B", &c.devices_only_in_b)] {
        if !devs.is_empty() {
            let _ = writeln!(
                o,
                "not compared, only in {side}: device(s) {}\n",
                devs.join(", ")
            );
        }
    }
    for (title, list) in [("only in A", &c.only_in_a), ("only in B", &c.only_in_b)] {
        let _ = writeln!(o, "findings {title}:");
        if list.is_empty() {
            o.push_str("  none\n");
        }
        for f in list.iter() {
            let _ = writeln!(o, "  ({}) {}", f.dev, f.message);
        }
    }
    o
}

/// A figure as its metric reads best: times in seconds to the nanosecond as btt prints them
/// (two decimals would print 11.6 ms as 0.01 beside 0.008266399), counts and sector figures
/// whole, rates and ratios to two decimals.
fn num(metric: &str, v: f64) -> String {
    if metric.ends_with("(s)") {
        format!("{v:.9}")
    } else if metric.ends_with("(sectors)") || metric == "allocation sleeps" {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device only one trace has is named, not dropped unsaid; a finding is the same on
    /// both sides only on paired devices.
    #[test]
    fn unpaired_devices_are_named_and_findings_go_by_device() {
        use crate::trace::analyze::{Analyzer, Options};
        use crate::trace::blk_io_trace::{action, category, code, Event};
        let trace = |devs: &[u32]| {
            let mut a = Analyzer::new(Options::default());
            for (k, &dev) in devs.iter().enumerate() {
                for i in 0..50u64 {
                    let t = i * 1_000_000 + k as u64;
                    for (dt, c) in [
                        (0, code::QUEUE),
                        (10, code::ISSUE),
                        (90_000, code::COMPLETE),
                    ] {
                        a.feed(&Event {
                            version: 7,
                            time: t + dt,
                            // Far apart: seeky.
                            sector: (i * 7919 % 50) * 100_000,
                            bytes: 4096,
                            action: action(c, category::READ),
                            device: dev,
                            ..Event::default()
                        });
                    }
                }
            }
            a.finish()
        };
        let (d70, d71) = (7 << 20, 7 << 20 | 1);
        let c = compare(&trace(&[d70, d71]), &trace(&[d70]));
        assert_eq!(c.devices.len(), 1);
        assert_eq!(c.devices_only_in_a.len(), 1);
        assert!(
            c.devices_only_in_a[0].contains('1'),
            "{:?}",
            c.devices_only_in_a
        );
        assert!(c.devices_only_in_b.is_empty());
        // The unpaired device's findings are A's alone, the paired one's are on both.
        assert!(!c.only_in_a.is_empty(), "{c:?}");
        assert!(
            c.only_in_a.iter().all(|f| f.dev == c.devices_only_in_a[0]),
            "{c:?}"
        );
        assert!(c.only_in_b.is_empty(), "{c:?}");
        let text = render(&c, "a", "b");
        assert!(
            text.contains("not compared, only in A: device(s)"),
            "{text}"
        );
    }

    /// Two kernels that cut 1 MiB writes into parts of different sizes, or one that does not
    /// cut them: the bios' Q2C as issued is compared beside the parts', and no read row
    /// appears where neither has reads.
    #[test]
    fn bios_as_issued_are_compared() {
        use crate::trace::analyze::{Analyzer, Options};
        use crate::trace::blk_io_trace::{action, category, code, Event};
        let trace = |parts: u64, part_ns: u64| {
            let mut a = Analyzer::new(Options::default());
            let part = 2048 / parts;
            let mut feed = |time, c, sector, sectors: u64| {
                a.feed(&Event {
                    version: 7,
                    time,
                    sector,
                    bytes: (sectors * 512) as u32,
                    action: action(c, category::WRITE),
                    device: 8 << 20,
                    ..Event::default()
                })
            };
            for i in 0..20u64 {
                let (t, s) = (i * 10_000_000, i * 2048);
                feed(t, code::QUEUE, s, 2048);
                for k in 0..parts - 1 {
                    feed(t + 1, code::SPLIT, s + k * part, part);
                }
                for k in 0..parts {
                    feed(t + (k + 1) * part_ns, code::COMPLETE, s + k * part, part);
                }
            }
            a.finish()
        };
        let row =
            |c: &Comparison, m: &str| c.devices[0].rows.iter().find(|r| r.metric == m).cloned();
        let (issued, per_part) = ("write Q2C as issued avg (s)", "write Q2C avg (s)");
        let c = compare(&trace(2, 1_000_000), &trace(4, 400_000));
        let whole = row(&c, issued).unwrap();
        assert_eq!((whole.a, whole.b), (Some(0.002), Some(0.0016)));
        // Per part: 1.5 ms on average against 1 ms.
        let parts = row(&c, per_part).unwrap();
        assert_eq!((parts.a, parts.b), (Some(0.0015), Some(0.001)));
        assert!(row(&c, "read Q2C as issued avg (s)").is_none());
        // Not split on one side: its bios as issued are its bios.
        let c = compare(&trace(2, 1_000_000), &trace(1, 1_200_000));
        let whole = row(&c, issued).unwrap();
        assert_eq!((whole.a, whole.b), (Some(0.002), Some(0.0012)));
        // Split on neither: no such row, the rows above say it all.
        let c = compare(&trace(1, 1_000_000), &trace(1, 1_200_000));
        assert!(row(&c, issued).is_none());
    }

    #[test]
    fn a_figure_that_appears_reads_from_zero_and_each_kind_keeps_its_digits() {
        let row = |metric: &str, a: f64, b: f64| Row {
            metric: metric.into(),
            a: Some(a),
            b: Some(b),
            change_pct: (a != 0.0).then(|| 100.0 * (b - a) / a),
            change_points: is_share(metric).then_some(b - a),
        };
        let c = Comparison {
            devices: vec![DeviceComparison {
                dev_a: "8,0".into(),
                dev_b: "8,0".into(),
                rows: vec![
                    row("allocation sleeps", 0.0, 12.0),
                    row("M2D % of Q2C", 0.0, 0.0),
                    row("D2C % of Q2C", 79.76, 93.10),
                    row("Q2G % of Q2C", 0.004, 0.001),
                    row("dispatch depth avg", 22.0, 4.0),
                    row("Q2C avg (s)", 0.008266399, 0.011604531),
                    row("D2D seek median (sectors)", 33896.0, 33280.0),
                    Row {
                        metric: "S2G avg (s)".into(),
                        a: None,
                        b: Some(0.000412),
                        change_pct: None,
                        change_points: None,
                    },
                ],
            }],
            devices_only_in_a: Vec::new(),
            devices_only_in_b: Vec::new(),
            only_in_a: Vec::new(),
            only_in_b: Vec::new(),
        };
        let text = render(&c, "a", "b");
        let line = |m: &str| text.lines().find(|l| l.starts_with(m)).unwrap().to_string();
        assert!(line("allocation sleeps").ends_with("from 0"), "{text}");
        // A share changes by points: not "+16.7%", nor -75% between two shares that both
        // round to 0.00.
        assert!(line("M2D % of Q2C").ends_with(" +0.0 pt"), "{text}");
        assert!(line("D2C % of Q2C").ends_with(" +13.3 pt"), "{text}");
        assert!(line("Q2G % of Q2C").ends_with(" -0.0 pt"), "{text}");
        assert!(line("dispatch depth avg").ends_with("-81.8%"), "{text}");
        // A latency only one trace has (requests slept only in B) shows, with a "-" for A.
        assert!(
            line("S2G avg (s)").ends_with("-    0.000412000    only B"),
            "{text}"
        );
        // Seconds keep their digits on both sides, whatever their size; sectors are whole.
        assert!(
            line("Q2C avg (s)").contains(" 0.008266399    0.011604531 "),
            "{text}"
        );
        assert!(
            line("D2D seek median").contains(" 33896          33280 "),
            "{text}"
        );
    }
}

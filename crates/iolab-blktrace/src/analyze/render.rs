//! Human output of a [`Report`]: btt's sections in btt's order and column layout (so the two
//! can be read side by side), then what btt does not have. ASCII only.

use std::fmt::Write;

use super::latency::LatencySummary;
use super::{DeviceReport, Report};

const ORDER: [&str; 9] = [
    "q2q", "q2g", "s2g", "g2i", "q2m", "i2d", "m2d", "d2c", "q2c",
];

fn dev_hdr(dev: &str) -> String {
    let (ma, mi) = dev.split_once(',').unwrap_or((dev, ""));
    format!("({ma:>3},{mi:>3})")
}

fn section(out: &mut String, title: &str) {
    let _ = writeln!(out, "==================== {title} ====================\n");
}

fn lat_table<'a>(
    out: &mut String,
    label: &str,
    rows: impl Iterator<Item = (String, &'a LatencySummary)>,
) {
    // btt's exact layout (percentiles are in the per-device section below).
    let _ = writeln!(
        out,
        "{label:>15} {:>13} {:>13} {:>13} {:>11}",
        "MIN", "AVG", "MAX", "N"
    );
    let _ = writeln!(
        out,
        "--------------- ------------- ------------- ------------- -----------"
    );
    for (name, s) in rows {
        if s.n == 0 {
            continue;
        }
        let _ = writeln!(
            out,
            "{name:<15} {:>13.9} {:>13.9} {:>13.9} {:>11}",
            s.min, s.avg, s.max, s.n
        );
    }
    out.push('\n');
}

/// One of btt's per-device tables: the header and rule after "DEV |", a row per device
/// (`row` gives none for a device it has nothing for), then `after`.
fn device_table(
    o: &mut String,
    r: &Report,
    head: &str,
    rule: &str,
    row: impl Fn(&DeviceReport) -> Option<String>,
    after: &str,
) {
    let _ = writeln!(o, "       DEV | {head}");
    let _ = writeln!(o, "---------- | {rule}");
    for d in &r.devices {
        if let Some(row) = row(d) {
            let _ = writeln!(o, "{:>10} | {row}", dev_hdr(&d.dev));
        }
    }
    o.push_str(after);
}

/// The report as text. Device and process names come from the trace as they are: a caller
/// printing to a terminal escapes them (iolab's `report::format::terminal_safe_lines`).
pub fn render(r: &Report) -> String {
    let mut o = String::new();
    section(&mut o, "All Devices");
    lat_table(
        &mut o,
        "ALL",
        ORDER
            .iter()
            .filter_map(|k| r.all.get(*k).map(|s| (k.to_uppercase(), s))),
    );
    btt_device_sections(&mut o, r);
    if !r.processes.is_empty() {
        section(&mut o, "Per Process");
        for key in ["q2c", "d2c"] {
            lat_table(
                &mut o,
                &key.to_uppercase(),
                r.processes.iter().filter_map(|p| {
                    // btt's width, in characters: a name cut by the kernel inside a
                    // character ends in a replacement character that bytes would split.
                    p.latency
                        .get(key)
                        .map(|s| (p.name.chars().take(15).collect::<String>(), s))
                }),
            );
        }
    }
    for d in &r.devices {
        device_extras(&mut o, d);
    }
    o
}

/// btt's sections of one row per device, from "Device Overhead" to "I/O Active Period
/// Information", each with what iolab adds or measures otherwise noted below it.
fn btt_device_sections(o: &mut String, r: &Report) {
    section(o, "Device Overhead");
    device_table(
        o,
        r,
        &format!(
            "{:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "Q2G", "G2I", "Q2M", "I2D", "M2D", "D2C"
        ),
        "--------- --------- --------- --------- --------- ---------",
        |d| {
            let v = &d.overhead;
            Some(format!(
                "{:>8.4}% {:>8.4}% {:>8.4}% {:>8.4}% {:>8.4}% {:>8.4}%",
                v.q2g, v.g2i, v.q2m, v.i2d, v.m2d, v.d2c
            ))
        },
        "(iolab adds M2D, which btt leaves out of this table)\n\n",
    );
    section(o, "Device Merge Information");
    device_table(
        o,
        r,
        "      #Q       #D   Ratio |   BLKmin   BLKavg   BLKmax    Total",
        "-------- -------- ------- | -------- -------- -------- --------",
        |d| {
            let m = &d.merge;
            Some(format!(
                "{:>8} {:>8} {:>7.1} | {:>8} {:>8} {:>8} {:>8}",
                m.q, m.d, m.ratio, m.blk_min, m.blk_avg, m.blk_max, m.total
            ))
        },
        "\n",
    );
    for (title, pick) in [
        ("Device Q2Q Seek Information", true),
        ("Device D2D Seek Information", false),
    ] {
        let seeks = |d: &DeviceReport| {
            if pick {
                d.seek_q2q.clone()
            } else {
                d.seek_d2d.clone()
            }
        };
        let mut after = String::from(
            "(MEDIAN is the true median of |distance|, btt's is not; ~ = within 0.4%)\n",
        );
        for d in &r.devices {
            if let Some(s) = seeks(d).filter(|s| !s.mode_exact) {
                let _ = writeln!(
                    after,
                    "(* {}: the mode among distances below 4096 sectors; larger ones were too \
                     many to count one by one, and one of them may have come up to {} times)",
                    dev_hdr(&d.dev),
                    s.mode_bound.unwrap_or(0)
                );
            }
        }
        after.push('\n');
        section(o, title);
        device_table(
            o,
            r,
            &format!("{:>15} {:>15} {:>15} | MODE", "NSEEKS", "MEAN", "MEDIAN"),
            "--------------- --------------- --------------- | ---------------",
            |d| {
                let s = seeks(d)?;
                let unknown = if s.mode_exact { "" } else { "*" };
                let mode = format!("{}({}){unknown}", s.mode, s.mode_count);
                let median = format!("{}{}", if s.median_exact { "" } else { "~" }, s.median);
                Some(format!(
                    "{:>15} {:>15.1} {:>15} | {mode}",
                    s.nseeks, s.mean, median
                ))
            },
            &after,
        );
    }
    section(o, "Plug Information");
    device_table(
        o,
        r,
        "   # Plugs # Timer Us  | % Time Q Plugged",
        "---------- ----------  | ----------------",
        |d| {
            let p = &d.plug;
            let pct = p
                .pct_time_plugged
                .map_or(format!("{:>14}", "unknown"), |v| format!("{v:>13.9}%"));
            Some(format!("{:>10}({:>10}) | {pct}", p.plugs, p.timer_unplugs))
        },
        "",
    );
    for d in r
        .devices
        .iter()
        .filter(|d| d.plug.pct_time_plugged.is_none())
    {
        let p = &d.plug;
        let _ = writeln!(
            o,
            "({}: {} plugs (P) but {} unplugs (U, UT) traced: blk-mq passed plugged requests\n \
             to the driver without tracing an unplug (seen with NVMe on Linux 6.1), so when\n \
             plugging ended is not in the trace; btt would print {:.9}%)",
            d.dev, p.plug_records, p.unplug_records, p.btt_pct_time_plugged
        );
    }
    o.push('\n');
    device_table(
        o,
        r,
        "   IOs/Unp   IOs/Unp(to)",
        "----------   ----------",
        |d| {
            Some(format!(
                "{:>10.1}   {:>10.1}",
                d.plug.ios_per_unplug, d.plug.ios_per_timer_unplug
            ))
        },
        "\n",
    );
    section(o, "Active Requests At Q Information");
    device_table(
        o,
        r,
        " Avg Reqs @ Q",
        "-------------",
        |d| Some(format!("{:>13.1}", d.active_requests_at_q)),
        "\n",
    );
    section(o, "I/O Active Period Information");
    device_table(
        o,
        r,
        "    # Live      Avg. Act     Avg. !Act % Live",
        "---------- ------------- ------------- ------",
        |d| {
            let a = &d.active_periods;
            Some(format!(
                "{:>10} {:>13.9} {:>13.9} {:>6.2}",
                a.live, a.avg_active, a.avg_inactive, a.pct_live
            ))
        },
        "(Avg. !Act and % Live over the gaps between periods; btt also counts the time\n \
         before the first dispatch",
    );
    for d in &r.devices {
        let a = &d.active_periods;
        if let (Some(inactive), Some(live)) = (a.btt_avg_inactive, a.btt_pct_live) {
            let _ = write!(o, "; {}: btt would print {inactive:.9} {live:.2}", d.dev);
        } else if d.splits > 0 {
            let _ = write!(
                o,
                "; {}: what btt prints is not known here, as it completes no request that \
                 holds part of a split bio",
                d.dev
            );
        }
    }
    o.push_str(")\n");
    for d in &r.devices {
        let n = &d.never_completed;
        if let Some(t) = n.oldest_dispatch {
            // btt counts only requests that completed; here one still in the driver keeps the
            // device active, which is so when the trace was cut while it was in flight, and
            // overstates it when its completion was lost.
            let _ = writeln!(
                o,
                "({}: {} request(s) never completed; the device counts as active from the \
                 first one's dispatch, at {t:.6} s, to the trace's end, {:.6} s later; btt \
                 leaves them out{})",
                d.dev,
                n.requests,
                (r.duration - t).max(0.0),
                if d.active_periods.btt_pct_live.is_none() && d.splits == 0 {
                    ", and what it would print is not known here: they shared a period with \
                     requests that completed"
                } else {
                    ""
                }
            );
        }
    }
    o.push('\n');
}

/// One row of the percentile tables (nothing when there are no samples).
fn percentile_row(o: &mut String, label: &str, s: Option<&LatencySummary>) {
    if let Some(s) = s.filter(|s| s.n > 0) {
        let _ = writeln!(
            o,
            "{label:>7} {:>11.9} {:>11.9} {:>11.9} {:>11.9} {:>11.9} {:>11}",
            s.avg, s.p50, s.p90, s.p99, s.p999, s.n
        );
    }
}

fn device_extras(o: &mut String, d: &DeviceReport) {
    section(o, &format!("Device {} beyond btt", dev_hdr(&d.dev)));
    let _ = writeln!(o, "kind: {}", d.kind);
    // Percentiles come from a histogram, not from every sample kept: said once, here.
    let _ = writeln!(
        o,
        "(AVG and N are exact; each percentile is within 0.4% of the true one)"
    );
    let _ = writeln!(
        o,
        "{:>7} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}",
        "per bio", "AVG", "P50", "P90", "P99", "P99.9", "N"
    );
    for k in ORDER {
        percentile_row(o, &k.to_uppercase(), d.latency.get(k));
    }
    let _ = writeln!(o, "per request (one sample per dispatched request):");
    for k in ["q2d", "d2c", "q2c"] {
        percentile_row(o, &k.to_uppercase(), d.per_request.get(k));
    }
    let apart = if d.discards > 0 {
        "reads, writes and discards (DSC)"
    } else {
        "reads and writes"
    };
    let _ = writeln!(o, "per bio, {apart} apart:");
    let directions = crate::blk_io_trace::DIRECTIONS
        .iter()
        .zip(["R", "W", "DSC"]);
    for (lat, side) in directions.filter_map(|(dir, side)| Some((d.by_direction.get(*dir)?, side)))
    {
        for k in ["q2c", "d2c"] {
            percentile_row(o, &format!("{side} {}", k.to_uppercase()), lat.get(k));
        }
    }
    // Where bios were split, the rows above count each part as a bio.
    for (title, rows) in [
        (
            "split bios whole, Q to their last part's C (the rows above count each part):",
            &d.split_bios_q2c,
        ),
        (
            "per bio as issued, each split bio once, whole:",
            &d.bios_as_issued_q2c,
        ),
    ] {
        if !rows.is_empty() {
            let _ = writeln!(o, "{title}");
            for (dir, side) in crate::blk_io_trace::DIRECTIONS
                .iter()
                .zip(["R", "W", "DSC"])
            {
                percentile_row(o, &format!("{side} Q2C"), rows.get(*dir));
            }
        }
    }
    let dd = &d.dispatch_depth;
    let _ = writeln!(
        o,
        "dispatch depth (requests in driver at D): avg {:.1} p50 {} p90 {} p99 {} max {}",
        dd.avg, dd.p50, dd.p90, dd.p99, dd.max
    );
    let ds = &d.dispatch_sectors;
    let _ = writeln!(
        o,
        "dispatch size (sectors): avg {:.1} p50 {} max {}",
        ds.avg, ds.p50, ds.max
    );
    let n = &d.never_completed;
    let _ = writeln!(
        o,
        "never completed: {} bios, {} requests; replaced before completing (a later one on the \
         same start sector): {} bios, {} requests",
        n.bios, n.requests, n.replaced_bios, n.replaced_requests
    );
    let discards = if d.discards > 0 {
        format!(" discards {}", d.discards)
    } else {
        String::new()
    };
    let flushes = if d.flushes > 0 {
        format!(" flushes {} (empty: counted, in no latency)", d.flushes)
    } else {
        String::new()
    };
    let _ = writeln!(
        o,
        "reads {} writes {}{discards}{flushes}; allocation sleeps (S) {}; cgroup-tagged \
         events {}",
        d.reads, d.writes, d.sleeps, d.cgroup_events
    );
    // Reads and writes apart where both are there (as biolatency -F): a buffered writer's
    // and a reader's latencies mixed in one histogram read as neither.
    let q2c_of = |dir: &str| {
        d.by_direction
            .get(dir)
            .and_then(|l| l.get("q2c"))
            .filter(|s| s.n > 0)
    };
    let histograms = match (q2c_of("read"), q2c_of("write")) {
        (Some(r), Some(w)) => vec![("Q2C histogram, reads:", r), ("Q2C histogram, writes:", w)],
        _ => d
            .latency
            .get("q2c")
            .filter(|s| s.n > 0)
            .map(|s| vec![("Q2C histogram:", s)])
            .unwrap_or_default(),
    };
    for (title, q2c) in histograms {
        let _ = writeln!(o, "{title}");
        let most = q2c.histogram.iter().map(|b| b.count).max().unwrap_or(1);
        for b in &q2c.histogram {
            let bar = (b.count * 40).div_ceil(most) as usize;
            let _ = writeln!(
                o,
                "  {:>10} - {:<10} {:>10} {}",
                fmt_secs(b.from),
                fmt_secs(b.to),
                b.count,
                "#".repeat(bar)
            );
        }
    }
    if let Some(first) = d.timeline.first() {
        // As many decimals as the interval needs (0.01 s rows would all read 0.0 with one).
        let decimals = (-first.interval.log10() - 1e-9).ceil().clamp(1.0, 9.0) as usize;
        // Discards' columns only where there are some (iostat's d/s, dMB/s).
        let discards = d.discards > 0;
        let _ = write!(
            o,
            "{:>8} {:>9} {:>9} {:>8} {:>8}",
            "t(s)", "r/s", "w/s", "rMB/s", "wMB/s"
        );
        if discards {
            let _ = write!(o, " {:>9} {:>8}", "d/s", "dMB/s");
        }
        let _ = writeln!(
            o,
            " {:>7} {:>7} {:>10} {:>9}",
            "qdepth", "ddepth", "Q2C avg", "seeks/s"
        );
        for p in &d.timeline {
            let _ = write!(
                o,
                "{:>8.decimals$} {:>9.0} {:>9.0} {:>8.1} {:>8.1}",
                p.start, p.read_iops, p.write_iops, p.read_mb_per_s, p.write_mb_per_s,
            );
            if discards {
                let _ = write!(o, " {:>9.0} {:>8.1}", p.discard_iops, p.discard_mb_per_s);
            }
            let _ = writeln!(
                o,
                " {:>7.1} {:>7.1} {:>10} {:>9.0}",
                p.queue_depth,
                p.driver_depth,
                fmt_secs(p.q2c_avg),
                p.seeks_per_s
            );
        }
        // The last row ends with the trace, so its rates are over a length of its own.
        let last = d.timeline.last().filter(|l| {
            d.timeline.len() > 1 && (l.interval - first.interval).abs() > first.interval * 1e-9
        });
        if let Some(last) = last {
            let _ = writeln!(
                o,
                "(the last row's rates are over {:.6} s, to the trace's end)",
                last.interval
            );
        } else if d.timeline.len() == 1 {
            // A trace shorter than the interval: its one row is over the trace, not a whole
            // interval.
            let _ = writeln!(
                o,
                "(the row's rates are over {:.6} s, from the device's first event to the \
                 trace's end)",
                first.interval
            );
        }
    }
    o.push('\n');
}

/// Seconds with a unit that keeps three significant figures.
pub fn fmt_secs(s: f64) -> String {
    if s == 0.0 {
        "0".into()
    } else if s < 1e-6 {
        format!("{:.0}ns", s * 1e9)
    } else if s < 1e-3 {
        format!("{:.1}us", s * 1e6)
    } else if s < 1.0 {
        format!("{:.2}ms", s * 1e3)
    } else {
        format!("{s:.2}s")
    }
}

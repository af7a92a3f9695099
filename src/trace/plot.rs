//! `trace plot`: the pictures of seeds/001 — where on the device the I/O went over time (the
//! "cloud" of dispatched sectors, reads and writes coloured), latency over time, queue and
//! driver depth over time, and the latency histogram — as SVG files.
//!
//! Two passes over the trace: the first finds the device, its duration and sector range; the
//! second bins dispatches into a fixed time x sector grid (so a trace of any length gives a
//! bounded picture) and builds a timeline fine enough for ~300 points.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::analyze::{analyze_paths, Analyzer, DeviceReport, Options};
use super::merge::open_trace;
use super::record::code;
use super::svg::{Axes, Chart};

const TIME_BINS: usize = 600;
const SECTOR_BINS: usize = 300;
const READ: &str = "#1f77b4";
const WRITE: &str = "#d62728";
const BOTH: &str = "#9467bd";

/// Writes sectors.svg, latency.svg, depth.svg and histogram.svg into `out_dir`; returns them.
pub fn plot(names: &[PathBuf], out_dir: &Path, dev: Option<&str>) -> anyhow::Result<Vec<PathBuf>> {
    let first = analyze_paths(
        names,
        Options {
            interval_ns: 1_000_000_000,
            timeline: false,
        },
    )?;
    let d = pick_device(&first.devices, dev)?;
    let device = parse_dev(&d.dev)?;
    let span = (d.last - d.first).max(1e-6);
    let interval_ns = ((span / 300.0) * 1e9).max(1e5) as u64;

    // Second pass: fine timeline and the sector grid.
    let mut analyzer = Analyzer::new(Options {
        interval_ns,
        timeline: true,
    });
    let mut grid = vec![(0u32, 0u32); TIME_BINS * SECTOR_BINS];
    let (smin, smax) = (d.sector_min, d.sector_max.max(d.sector_min + 1));
    let mut origin = None;
    for ev in open_trace(names)? {
        let ev = ev?;
        analyzer.feed(&ev);
        if ev.is_notify() || ev.is_pc() {
            continue;
        }
        let origin = *origin.get_or_insert(ev.time);
        if ev.device != device || ev.code() != code::ISSUE || ev.bytes == 0 {
            continue;
        }
        let t = ev.time.saturating_sub(origin) as f64 / 1e9;
        let ti = (((t - d.first) / span) * TIME_BINS as f64) as usize;
        let si = ((ev.sector.saturating_sub(smin)) as f64 / (smax - smin) as f64
            * SECTOR_BINS as f64) as usize;
        let cell = &mut grid[ti.min(TIME_BINS - 1) * SECTOR_BINS + si.min(SECTOR_BINS - 1)];
        if ev.is_write() {
            cell.1 += 1;
        } else {
            cell.0 += 1;
        }
    }
    let report = analyzer.finish();
    let fine = report
        .devices
        .iter()
        .find(|x| x.dev == d.dev)
        .context("device vanished in the second pass")?;

    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let mut written = Vec::new();
    let mut save = |name: &str, svg: String| -> anyhow::Result<()> {
        let p = out_dir.join(name);
        std::fs::write(&p, svg).with_context(|| format!("writing {}", p.display()))?;
        written.push(p);
        Ok(())
    };

    // 1. Sector against time.
    let mut chart = Chart::new(
        900.0,
        500.0,
        &format!("dispatched sectors over time, device {}", d.dev),
        Axes {
            x_name: "time (s)",
            y_name: "sector",
            x: (d.first, d.first + span),
            y: (smin as f64, smax as f64),
            log_x: false,
        },
    );
    let (mut reads, mut writes, mut both) = (Vec::new(), Vec::new(), Vec::new());
    for ti in 0..TIME_BINS {
        for si in 0..SECTOR_BINS {
            let (r, w) = grid[ti * SECTOR_BINS + si];
            if r + w == 0 {
                continue;
            }
            let x = d.first + (ti as f64 + 0.5) / TIME_BINS as f64 * span;
            let y = smin as f64 + (si as f64 + 0.5) / SECTOR_BINS as f64 * (smax - smin) as f64;
            match (r > 0, w > 0) {
                (true, false) => reads.push((x, y)),
                (false, true) => writes.push((x, y)),
                _ => both.push((x, y)),
            }
        }
    }
    chart.points(&reads, READ, "reads", 0);
    chart.points(&writes, WRITE, "writes", 1);
    chart.points(&both, BOTH, "reads and writes", 2);
    save("sectors.svg", chart.finish())?;

    // 2. Latency over time.
    let tl = &fine.timeline;
    let ms = |v: f64| v * 1e3;
    // Intervals without completions have no latency: NaN breaks the line there.
    let value = |p: &super::analyze::timeline::TimelinePoint, v: f64| {
        if p.q2c_max > 0.0 {
            ms(v)
        } else {
            f64::NAN
        }
    };
    let avg: Vec<(f64, f64)> = tl
        .iter()
        .map(|p| (p.start + p.interval / 2.0, value(p, p.q2c_avg)))
        .collect();
    let max: Vec<(f64, f64)> = tl
        .iter()
        .map(|p| (p.start + p.interval / 2.0, value(p, p.q2c_max)))
        .collect();
    let top = max
        .iter()
        .map(|p| p.1)
        .filter(|v| !v.is_nan())
        .fold(0.0, f64::max)
        .max(1e-6);
    let mut chart = Chart::new(
        900.0,
        400.0,
        &format!("Q2C latency over time, device {}", d.dev),
        Axes {
            x_name: "time (s)",
            y_name: "Q2C (ms)",
            x: (d.first, d.first + span),
            y: (0.0, top * 1.05),
            log_x: false,
        },
    );
    chart.line(&avg, READ, "mean", 0);
    chart.line(&max, WRITE, "max", 1);
    save("latency.svg", chart.finish())?;

    // 3. Depth over time.
    let q: Vec<(f64, f64)> = tl
        .iter()
        .map(|p| (p.start + p.interval / 2.0, p.queue_depth))
        .collect();
    let dd: Vec<(f64, f64)> = tl
        .iter()
        .map(|p| (p.start + p.interval / 2.0, p.driver_depth))
        .collect();
    let top = q
        .iter()
        .chain(&dd)
        .map(|p| p.1)
        .fold(0.0, f64::max)
        .max(1.0);
    let mut chart = Chart::new(
        900.0,
        400.0,
        &format!("queue and driver depth over time, device {}", d.dev),
        Axes {
            x_name: "time (s)",
            y_name: "IOs in flight (time-weighted mean)",
            x: (d.first, d.first + span),
            y: (0.0, top * 1.05),
            log_x: false,
        },
    );
    chart.line(&q, READ, "queued bios (Q..C)", 0);
    chart.line(&dd, WRITE, "requests in driver (D..C)", 1);
    save("depth.svg", chart.finish())?;

    // 4. Latency histogram (power-of-two buckets, log time axis).
    let h = |k: &str| {
        fine.latency
            .get(k)
            .map(|s| {
                s.histogram
                    .iter()
                    .map(|b| (b.from.max(1e-9), b.to, b.count as f64))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let (q2c, d2c) = (h("q2c"), h("d2c"));
    let lo = q2c.iter().chain(&d2c).map(|b| b.0).fold(f64::MAX, f64::min);
    let hi = q2c.iter().chain(&d2c).map(|b| b.1).fold(0.0, f64::max);
    let top = q2c
        .iter()
        .chain(&d2c)
        .map(|b| b.2)
        .fold(0.0, f64::max)
        .max(1.0);
    let mut chart = Chart::new(
        900.0,
        400.0,
        &format!("latency histogram, device {}", d.dev),
        Axes {
            x_name: "latency (s, log scale)",
            y_name: "bios",
            x: if lo < hi { (lo, hi) } else { (1e-9, 1.0) },
            y: (0.0, top * 1.05),
            log_x: true,
        },
    );
    chart.bars(&q2c, READ, "Q2C", 0);
    let d2c_tops: Vec<(f64, f64)> = d2c.iter().map(|b| ((b.0 * b.1).sqrt(), b.2)).collect();
    chart.line(&d2c_tops, WRITE, "D2C", 1);
    save("histogram.svg", chart.finish())?;
    Ok(written)
}

/// Writes a PNG copy of an SVG chart beside it (same name, .png), rasterised in-process.
pub fn to_png(svg: &Path) -> anyhow::Result<PathBuf> {
    let png = svg.with_extension("png");
    let text =
        std::fs::read_to_string(svg).with_context(|| format!("{}: reading", svg.display()))?;
    let bytes = crate::report::png::svg_to_png(&text)
        .with_context(|| format!("{}: rasterising", svg.display()))?;
    std::fs::write(&png, bytes).with_context(|| format!("{}: writing", png.display()))?;
    Ok(png)
}

fn parse_dev(s: &str) -> anyhow::Result<u32> {
    let (ma, mi) = s
        .split_once(',')
        .with_context(|| format!("{s}: expected MAJOR,MINOR"))?;
    let ma: u32 = ma
        .trim()
        .parse()
        .with_context(|| format!("{s}: bad major"))?;
    let mi: u32 = mi
        .trim()
        .parse()
        .with_context(|| format!("{s}: bad minor"))?;
    Ok((ma << 20) | mi)
}

fn pick_device<'a>(
    devs: &'a [DeviceReport],
    want: Option<&str>,
) -> anyhow::Result<&'a DeviceReport> {
    match want {
        Some(w) => {
            let w = parse_dev(w)?;
            devs.iter()
                .find(|d| parse_dev(&d.dev).ok() == Some(w))
                .with_context(|| {
                    let have: Vec<&str> = devs.iter().map(|d| d.dev.as_str()).collect();
                    format!("device not in the trace (it has {})", have.join(" "))
                })
        }
        None => devs
            .iter()
            .max_by_key(|d| (d.merge.d, d.merge.q))
            .context("the trace holds no block I/O"),
    }
}

//! `trace plot`: the pictures of case 1 — where on the device the I/O went over time (the
//! "cloud" of dispatched sectors, reads, writes and discards coloured; several traces on one
//! chart, one colour each), latency over time, queue and driver depth over time, throughput,
//! IOPS and seeks per second over time, and the latency histogram with reads, writes and
//! discards apart — as SVG files.
//!
//! Two passes over the trace: the first finds the device, its duration and sector range; the
//! second bins dispatches into a fixed time x sector grid (so a trace of any length gives a
//! bounded picture) and builds a timeline fine enough for ~300 points.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::analyze::timeline::TimelinePoint;
use super::analyze::{analyze_paths, Analyzer, DeviceReport, Options};
use super::blk_io_trace::{code, DISCARD as DISCARD_KIND, READ as READ_KIND, WRITE as WRITE_KIND};
use super::merge::open_trace;
use crate::report::plot::{Axes, Chart};
use plotters::style::RGBColor;

const TIME_BINS: usize = 600;
const SECTOR_BINS: usize = 300;
const READ: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const WRITE: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const BOTH: RGBColor = RGBColor(0x94, 0x67, 0xbd);
const DISCARD: RGBColor = RGBColor(0x7f, 0x7f, 0x7f);
/// A named, coloured line of (time, value) points.
type Series<'a> = (&'a str, RGBColor, Vec<(f64, f64)>);

const READ_LIGHT: RGBColor = RGBColor(0x17, 0xbe, 0xcf);
const WRITE_LIGHT: RGBColor = RGBColor(0xff, 0x7f, 0x0e);
const DISCARD_LIGHT: RGBColor = RGBColor(0xbc, 0xbd, 0x22);

/// One trace binned for drawing: its device, a fine timeline, and dispatches in a fixed
/// time x sector grid (so a trace of any length gives a bounded picture).
struct Pass {
    d: DeviceReport,
    span: f64,
    smin: u64,
    smax: u64,
    /// Dispatches per cell, time-major: reads, writes and discards (`blk_io_trace::READ`,
    /// `WRITE`, `DISCARD`).
    grid: Vec<[u32; 3]>,
}

/// The centres of the cells with dispatches of one kind only, each kind apart, and of the
/// cells with more than one.
struct Cloud {
    kinds: [Vec<(f64, f64)>; 3],
    mixed: Vec<(f64, f64)>,
}

impl Pass {
    /// The trace's cloud, x in seconds from the trace's start (plus `shift`).
    fn cloud(&self, shift: f64) -> Cloud {
        let mut cloud = Cloud {
            kinds: Default::default(),
            mixed: Vec::new(),
        };
        let (smin, smax) = (self.smin as f64, self.smax as f64);
        for ti in 0..TIME_BINS {
            for si in 0..SECTOR_BINS {
                let cell = self.grid[ti * SECTOR_BINS + si];
                let x = shift + (ti as f64 + 0.5) / TIME_BINS as f64 * self.span;
                let y = smin + (si as f64 + 0.5) / SECTOR_BINS as f64 * (smax - smin);
                let mut present = (0..3).filter(|&k| cell[k] > 0);
                match (present.next(), present.next()) {
                    (None, _) => {}
                    (Some(k), None) => cloud.kinds[k].push((x, y)),
                    _ => cloud.mixed.push((x, y)),
                }
            }
        }
        cloud
    }
}

/// Two passes over a trace: the first finds the device, its duration and sector range; the
/// second bins dispatches and builds a timeline fine enough for ~300 points.
fn pass(names: &[PathBuf], dev: Option<&str>) -> anyhow::Result<Pass> {
    let first = analyze_paths(
        names,
        Options {
            timeline: false,
            ..Default::default()
        },
    )?;
    let d = pick_device(&first.devices, dev)?;
    let device = parse_dev(&d.dev)?;
    let span = (d.last - d.first).max(1e-6);
    let interval_ns = plot_interval_ns(span);

    let mut analyzer = Analyzer::new(Options {
        interval_ns,
        ..Default::default()
    });
    let mut grid = vec![[0u32; 3]; TIME_BINS * SECTOR_BINS];
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
        cell[ev.io().0.direction()] += 1;
    }
    let report = analyzer.finish();
    let fine = report
        .devices
        .into_iter()
        .find(|x| x.dev == d.dev)
        .context("device vanished in the second pass")?;
    Ok(Pass {
        d: fine,
        span,
        smin,
        smax,
        grid,
    })
}

/// The timeline's bucket for about 300 points over `span` seconds, at least 0.1 ms, rounded
/// to two significant digits: the title's "points every 10ms" is then what it says, and the
/// points are those of `trace analyze --interval 10ms` (at 10.0009 ms they drifted apart by
/// 12% at the end of a 3 s trace).
fn plot_interval_ns(span: f64) -> u64 {
    let raw = ((span / 300.0) * 1e9).max(1e5);
    let unit = 10f64.powi(raw.log10().floor() as i32 - 1);
    ((raw / unit).round() * unit).round() as u64
}

/// Colours of overlaid traces, in order (case 1: the first in green, the second in red).
/// As many as one chart may hold: beyond, two traces would share a colour.
const TRACE_COLOURS: [RGBColor; 10] = [
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
];

/// Writes sectors.svg, latency.svg, depth.svg, throughput.svg, iops.svg, seeks.svg and
/// histogram.svg into `out_dir`, and sectors-overlay.svg when traces are given `with` the main
/// one (`labels`: the main trace's, then one per `with`; the names given by default); returns
/// the files written.
pub(crate) fn plot(
    names: &[PathBuf],
    out_dir: &Path,
    dev: Option<&str>,
    with: &[PathBuf],
    labels: &[String],
) -> anyhow::Result<Vec<PathBuf>> {
    check_inputs(names, with, labels)?;
    let main = pass(names, dev)?;
    let mut out = Out::new(out_dir);
    out.save("sectors.svg", sectors(&main)?);
    if !with.is_empty() {
        out.save(
            "sectors-overlay.svg",
            overlay(&main, names, with, labels, dev)?,
        );
    }
    over_time_charts(&main, &mut out)?;
    out.save("histogram.svg", histogram(&main.d)?);
    out.write()
}

/// Refuses what cannot be drawn before anything is read: more labels than traces, and a
/// trace that can be read only once (each is read twice).
fn check_inputs(names: &[PathBuf], with: &[PathBuf], labels: &[String]) -> anyhow::Result<()> {
    if !labels.is_empty() && with.is_empty() {
        return Err(crate::cli::usage(
            "--label names the traces of the chart of several (sectors-overlay.svg), drawn only \
             with --with: add the traces to draw beside this one",
        ));
    }
    if with.len() >= TRACE_COLOURS.len() {
        return Err(crate::cli::usage(format!(
            "{} traces on one chart: it draws at most {} (one colour each; more would share \
             colours); plot them in groups",
            with.len() + 1,
            TRACE_COLOURS.len()
        )));
    }
    // Some labels but not all would leave the reader to guess which trace is which.
    if !labels.is_empty() && labels.len() != with.len() + 1 {
        return Err(crate::cli::usage(format!(
            "{} --label given for {} traces: give one per trace (the main one, then each --with)",
            labels.len(),
            with.len() + 1
        )));
    }
    if let Some(once) = names
        .iter()
        .chain(with)
        .find(|n| super::stream::reads_once(n))
    {
        anyhow::bail!(
            "{}: trace plot reads each trace twice, and a pipe or standard input can be read \
             once; save it to a file first (e.g. `zcat t.bin.gz > t.bin`)",
            once.display()
        );
    }
    Ok(())
}

/// The directory the charts go to, and the charts drawn so far. Nothing is written until
/// every chart is drawn: a trace that fails (a `--with` one without the device) leaves no
/// half set of charts, nor a directory.
struct Out<'a> {
    dir: &'a Path,
    drawn: Vec<(&'static str, String)>,
}

impl<'a> Out<'a> {
    fn new(dir: &'a Path) -> Self {
        Out {
            dir,
            drawn: Vec::new(),
        }
    }

    fn save(&mut self, name: &'static str, svg: String) {
        debug_assert!(CHARTS.contains(&name.trim_end_matches(".svg")), "{name}");
        self.drawn.push((name, svg));
    }

    /// Writes the charts; returns the files written.
    fn write(self) -> anyhow::Result<Vec<PathBuf>> {
        crate::sys::own_dir::make_own_dir(self.dir.parent().unwrap_or(Path::new("")), self.dir)
            .map_err(anyhow::Error::msg)?;
        let mut written = Vec::new();
        for (name, svg) in self.drawn {
            let p = self.dir.join(name);
            std::fs::write(&p, svg).with_context(|| format!("writing {}", p.display()))?;
            written.push(p);
        }
        Ok(written)
    }
}

/// Sector against time: the cloud of dispatches, reads, writes and discards coloured.
fn sectors(main: &Pass) -> anyhow::Result<String> {
    let d = &main.d;
    let mut chart = Chart::new(
        (900, 500),
        &format!("dispatched sectors over time, device {}", d.dev),
        Axes {
            x_name: "time (s)",
            y_name: "sector",
            x: (d.first, d.first + main.span),
            y: (main.smin as f64, main.smax as f64),
            log_x: false,
        },
    );
    let cloud = main.cloud(d.first);
    chart.points(&cloud.kinds[READ_KIND], READ, "reads");
    chart.points(&cloud.kinds[WRITE_KIND], WRITE, "writes");
    chart.points(&cloud.kinds[DISCARD_KIND], DISCARD, "discards");
    chart.points(&cloud.mixed, BOTH, "more than one of these");
    Ok(chart.finish()?)
}

/// Several traces on one sector-against-time chart, each from its own start, one colour per
/// trace.
fn overlay(
    main: &Pass,
    names: &[PathBuf],
    with: &[PathBuf],
    labels: &[String],
    dev: Option<&str>,
) -> anyhow::Result<String> {
    let label =
        |i: usize, names: &[PathBuf]| labels.get(i).cloned().unwrap_or_else(|| show_names(names));
    let mut passes = vec![(label(0, names), main_cloud(main))];
    let mut devices = vec![main.d.dev.clone()];
    let mut ranges = vec![(main.span, main.smin, main.smax)];
    for (i, w) in with.iter().enumerate() {
        let w = std::slice::from_ref(w);
        let p = pass(w, dev).with_context(|| format!("--with {}", show_names(w)))?;
        ranges.push((p.span, p.smin, p.smax));
        passes.push((label(i + 1, w), main_cloud(&p)));
        devices.push(p.d.dev.clone());
    }
    let x_hi = ranges.iter().map(|r| r.0).fold(0.0, f64::max);
    let y_lo = ranges.iter().map(|r| r.1).min().unwrap_or(0);
    let y_hi = ranges.iter().map(|r| r.2).max().unwrap_or(1);
    let shown = overlay_title(
        &passes.iter().map(|p| p.0.clone()).collect::<Vec<_>>(),
        &devices,
    );
    for (p, name) in passes.iter_mut().zip(shown.1) {
        p.0 = name;
    }
    let labels: Vec<&str> = passes.iter().map(|p| p.0.as_str()).collect();
    let mut chart = Chart::new(
        (900, 500),
        &format!(
            "dispatched sectors over time{}: {}",
            shown.0,
            labels.join(" vs ")
        ),
        Axes {
            x_name: "time from each trace's start (s)",
            y_name: "sector",
            x: (0.0, x_hi),
            y: (y_lo as f64, y_hi as f64),
            log_x: false,
        },
    );
    for (i, (name, pts)) in passes.iter().enumerate() {
        chart.see_through_points(pts, TRACE_COLOURS[i], name);
    }
    Ok(chart.finish()?)
}

/// Where the overlay names the device each trace's cloud is drawn from (a trace may hold
/// several; the one drawn is the busiest or `--dev`'s): in the title when it is one for all
/// (", device 8,16"), else after each trace's label. Returns the title's part and the labels.
fn overlay_title(labels: &[String], devices: &[String]) -> (String, Vec<String>) {
    if devices.iter().all(|d| *d == devices[0]) {
        return (format!(", device {}", devices[0]), labels.to_vec());
    }
    let labels = labels
        .iter()
        .zip(devices)
        .map(|(l, d)| format!("{l} (device {d})"))
        .collect();
    (String::new(), labels)
}

/// The charts drawn from the timeline: Q2C latency, queue and driver depth, throughput, IOPS
/// and seeks per second, each against time.
fn over_time_charts(main: &Pass, out: &mut Out) -> anyhow::Result<()> {
    let tl = &main.d.timeline;
    let pick = |f: fn(&TimelinePoint) -> f64| -> Vec<(f64, f64)> {
        tl.iter()
            .map(|p| (p.start + p.interval / 2.0, f(p)))
            .collect()
    };
    // Milliseconds; intervals without completions have no latency: NaN breaks the line there.
    fn latency(p: &TimelinePoint, v: f64) -> f64 {
        if p.q2c_max > 0.0 {
            v * 1e3
        } else {
            f64::NAN
        }
    }
    let charts: [(&str, &str, &str, f64, Vec<Series>); 5] = [
        (
            "latency.svg",
            "Q2C latency over time",
            "Q2C (ms)",
            1e-6,
            vec![
                ("mean", READ, pick(|p| latency(p, p.q2c_avg))),
                ("max", WRITE, pick(|p| latency(p, p.q2c_max))),
            ],
        ),
        (
            "depth.svg",
            "queue and driver depth over time",
            "IOs in flight (time-weighted mean)",
            1.0,
            vec![
                ("queued bios (Q..C)", READ, pick(|p| p.queue_depth)),
                ("requests in driver (D..C)", WRITE, pick(|p| p.driver_depth)),
            ],
        ),
        (
            "throughput.svg",
            "throughput over time",
            "MB/s (completed)",
            1e-9,
            vec![
                ("reads", READ, pick(|p| p.read_mb_per_s)),
                ("writes", WRITE, pick(|p| p.write_mb_per_s)),
            ],
        ),
        (
            "iops.svg",
            "IOPS over time",
            "completed requests per second",
            1e-9,
            vec![
                ("reads", READ, pick(|p| p.read_iops)),
                ("writes", WRITE, pick(|p| p.write_iops)),
            ],
        ),
        (
            "seeks.svg",
            "seeks per second over time",
            "dispatches at a nonzero seek distance per second",
            1e-9,
            vec![("seeks", BOTH, pick(|p| p.seeks_per_s))],
        ),
    ];
    for (file, title, y_name, least_top, mut series) in charts {
        // Discards (trims) move no data: drawn apart, where there are any.
        if main.d.discards > 0 {
            match file {
                "throughput.svg" => {
                    series.push(("discards", DISCARD, pick(|p| p.discard_mb_per_s)))
                }
                "iops.svg" => series.push(("discards", DISCARD, pick(|p| p.discard_iops))),
                _ => {}
            }
        }
        // A direction with nothing completed is no line at 0 with a legend entry, which
        // said there were writes to see on a read-only trace. (By what completed, not by
        // what was queued: a trace begun mid-workload completes writes queued before it.)
        if matches!(file, "throughput.svg" | "iops.svg") {
            let has = |s: &Series| s.2.iter().any(|p| p.1 > 0.0);
            if series.iter().any(has) {
                series.retain(has);
            }
        }
        // The points' spacing, which the peaks depend on (a 6.7 ms bucket of a 2 s trace
        // peaks far above its mean).
        let each = tl.first().map_or(String::new(), |p| {
            format!(
                " (points every {})",
                super::analyze::render::fmt_secs(p.interval)
            )
        });
        let title = format!("{title}{each}");
        out.save(file, over_time(main, &title, y_name, least_top, &series)?);
    }
    Ok(())
}

/// One chart of lines against the trace's time, from 0 to a little above the highest point
/// (`least_top` at least, so a chart of zeros still has a y range).
fn over_time(
    main: &Pass,
    title: &str,
    y_name: &str,
    least_top: f64,
    series: &[Series],
) -> anyhow::Result<String> {
    let d = &main.d;
    // f64::max skips NaN, the gaps of the latency lines.
    let top = series
        .iter()
        .flat_map(|s| s.2.iter().map(|p| p.1))
        .fold(0.0, f64::max)
        .max(least_top);
    let mut chart = Chart::new(
        (900, 400),
        &format!("{title}, device {}", d.dev),
        Axes {
            x_name: "time (s)",
            y_name,
            x: (d.first, d.first + main.span),
            y: (0.0, top * 1.05),
            log_x: false,
        },
    );
    for (name, colour, pts) in series {
        chart.line(pts, *colour, name);
    }
    Ok(chart.finish()?)
}

/// Latency histogram, reads and writes apart (power-of-two buckets, log time axis): Q2C as
/// bars, D2C as a line through the bars' tops.
fn histogram(d: &DeviceReport) -> anyhow::Result<String> {
    let h = |dir: &str, k: &str| {
        d.by_direction
            .get(dir)
            .and_then(|m| m.get(k))
            .map(|s| {
                s.histogram
                    .iter()
                    .map(|b| (b.from.max(1e-9), b.to, b.count as f64))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let sets = [
        ("read Q2C", READ, h("read", "q2c"), true),
        ("write Q2C", WRITE, h("write", "q2c"), true),
        ("discard Q2C", DISCARD, h("discard", "q2c"), true),
        ("read D2C", READ_LIGHT, h("read", "d2c"), false),
        ("write D2C", WRITE_LIGHT, h("write", "d2c"), false),
        ("discard D2C", DISCARD_LIGHT, h("discard", "d2c"), false),
    ];
    let all = || sets.iter().flat_map(|s| s.2.iter());
    let lo = all().map(|b| b.0).fold(f64::MAX, f64::min);
    let hi = all().map(|b| b.1).fold(0.0, f64::max);
    let top = all().map(|b| b.2).fold(0.0, f64::max).max(1.0);
    // The title names the directions the trace has: "reads and writes" over a read-only
    // trace's chart said there were writes to see.
    let present: Vec<&str> = ["reads", "writes", "discards"]
        .into_iter()
        .zip(&sets)
        .filter(|(_, set)| !set.2.is_empty())
        .map(|(name, _)| name)
        .collect();
    let directions = match present.as_slice() {
        [] => "no completed I/O".to_string(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    };
    let mut chart = Chart::new(
        (900, 400),
        &format!("latency histogram, {directions}, device {}", d.dev),
        Axes {
            x_name: "latency (s, log scale)",
            y_name: "bios",
            x: if lo < hi { (lo, hi) } else { (1e-9, 1.0) },
            y: (0.0, top * 1.05),
            log_x: true,
        },
    );
    // The directions' bars share each bucket side by side, each in its own part of it (parts
    // of the log axis), reads first: drawn over each other, writes hid the reads.
    let bars: Vec<usize> = (0..sets.len())
        .filter(|&i| sets[i].3 && !sets[i].2.is_empty())
        .collect();
    for (i, (name, colour, buckets, is_bars)) in sets.iter().enumerate() {
        if buckets.is_empty() {
            continue;
        }
        if *is_bars {
            let (part, parts) = (bars.iter().position(|&b| b == i).unwrap_or(0), bars.len());
            let drawn: Vec<_> = buckets
                .iter()
                .map(|&(from, to, n)| {
                    let at = |k: usize| from * (to / from).powf(k as f64 / parts as f64);
                    (at(part), at(part + 1), n)
                })
                .collect();
            chart.bars(&drawn, *colour, name);
        } else {
            let tops: Vec<(f64, f64)> = buckets.iter().map(|b| ((b.0 * b.1).sqrt(), b.2)).collect();
            chart.line(&tops, *colour, name);
        }
    }
    Ok(chart.finish()?)
}

/// Every chart `plot` may write, without its ending (.svg, and .png with `--png`).
const CHARTS: [&str; 8] = [
    "sectors",
    "sectors-overlay",
    "latency",
    "depth",
    "throughput",
    "iops",
    "seeks",
    "histogram",
];

/// The list, in an output directory, of the charts the last plot there wrote.
const WRITTEN_LIST: &str = ".iolab-plot";

/// Removes from `dir` the charts the previous plot there wrote (as its list says) that this
/// one (`written`) did not draw: an overlay drawn before `--with` was dropped, PNGs drawn
/// before `--png` was. Left there, they passed for this trace's. Only chart names are taken
/// from the list, and only plain files; a file of a chart's name that iolab did not write
/// (the user's own `latency.png`) stays. Then lists what this plot wrote. Returns the files
/// removed; what could not be done is said, as this plot's charts are written already.
pub(crate) fn remove_earlier(dir: &Path, written: &[PathBuf]) -> Vec<PathBuf> {
    let list = dir.join(WRITTEN_LIST);
    let earlier = match crate::sys::own_dir::read_own_file(&list) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            say!("iolab: {}: {e}; no earlier chart removed", list.display());
            String::new()
        }
    };
    let is_chart = |name: &str| {
        let stem = name
            .strip_suffix(".svg")
            .or_else(|| name.strip_suffix(".png"));
        stem.is_some_and(|stem| CHARTS.contains(&stem))
    };
    let mut removed = Vec::new();
    for name in earlier.lines().filter(|n| is_chart(n)) {
        let p = dir.join(name);
        let is_file = std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_file());
        if !is_file || written.contains(&p) {
            continue;
        }
        match std::fs::remove_file(&p) {
            Ok(()) => removed.push(p),
            Err(e) => say!(
                "iolab: {}, an earlier plot's chart, stays: {e}",
                p.display()
            ),
        }
    }
    let names: String = written
        .iter()
        .filter_map(|p| p.file_name())
        .map(|n| format!("{}\n", n.to_string_lossy()))
        .collect();
    let listed = crate::sys::own_dir::create_named_file(&list).and_then(|mut f| {
        std::io::Write::write_all(&mut f, names.as_bytes()).map_err(|e| e.to_string())
    });
    if let Err(e) = listed {
        say!(
            "iolab: {}: {e}; a later plot will not remove these charts",
            list.display()
        );
    }
    removed
}

/// Writes a PNG copy of an SVG chart beside it (same name, .png), rasterised in-process.
pub(crate) fn to_png(svg: &Path) -> anyhow::Result<PathBuf> {
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

/// The device `s` names: MAJOR,MINOR, or the name of a block device of this machine (whose
/// number a trace recorded here carries).
fn wanted_dev(s: &str) -> anyhow::Result<u32> {
    if s.contains(',') {
        return parse_dev(s).map_err(|e| crate::cli::usage(format!("--dev {e}")));
    }
    let name = s.trim_start_matches("/dev/");
    match super::capture::device_number(name) {
        Ok(number) if !name.is_empty() && !name.contains('/') => Ok(number),
        _ => anyhow::bail!("{s}: expected MAJOR,MINOR or the name of a block device here"),
    }
}

fn pick_device<'a>(
    devs: &'a [DeviceReport],
    want: Option<&str>,
) -> anyhow::Result<&'a DeviceReport> {
    match want {
        Some(asked) => {
            let w = wanted_dev(asked)?;
            devs.iter()
                .find(|d| parse_dev(&d.dev).ok() == Some(w))
                .with_context(|| {
                    let have: Vec<&str> = devs.iter().map(|d| d.dev.as_str()).collect();
                    let number = super::blk_io_trace::dev_name(w);
                    let asked = if asked.contains(',') {
                        number
                    } else {
                        format!("{asked} ({number})")
                    };
                    format!(
                        "--dev {asked} is not in the trace; it has {}",
                        have.join(", ")
                    )
                })
        }
        None => devs
            .iter()
            .max_by_key(|d| (d.merge.d, d.merge.q))
            .context("the trace holds no block I/O"),
    }
}

/// Every cell with a dispatch of a trace, of any kind, x from the trace's start.
fn main_cloud(p: &Pass) -> Vec<(f64, f64)> {
    let Cloud { kinds, mixed } = p.cloud(0.0);
    kinds.into_iter().flatten().chain(mixed).collect()
}

fn show_names(names: &[PathBuf]) -> String {
    let v: Vec<String> = names.iter().map(|n| n.display().to_string()).collect();
    v.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The overlay names the device drawn from each trace: once when all are one device,
    /// else beside each label. It named none, and a trace of several devices drew one unsaid.
    #[test]
    fn the_overlay_names_the_devices_drawn() {
        let labels = vec!["2.6.16".to_string(), "2.6.32".to_string()];
        let same = overlay_title(&labels, &["8,0".into(), "8,0".into()]);
        assert_eq!(same, (", device 8,0".to_string(), labels.clone()));
        let apart = overlay_title(&labels, &["8,0".into(), "8,16".into()]);
        assert_eq!(apart.0, "");
        assert_eq!(apart.1, ["2.6.16 (device 8,0)", "2.6.32 (device 8,16)"]);
    }

    /// The histogram's title names the directions the trace has.
    #[test]
    fn the_histogram_title_names_the_directions_drawn() {
        let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/trace/fx.bin");
        let report = analyze_paths(&[fx], Options::default()).unwrap();
        let mut d = report.devices[0].clone();
        assert!(histogram(&d)
            .unwrap()
            .contains("latency histogram, reads and writes, device"));
        d.by_direction.remove("write");
        let reads = histogram(&d).unwrap();
        assert!(
            reads.contains("latency histogram, reads, device"),
            "{}",
            &reads[..400.min(reads.len())]
        );
    }

    /// A discard carries the kernel's write bit, but it is drawn as a discard: its own colour
    /// and legend entry in the cloud (it was drawn as a write), its own bars in the histogram
    /// (a discard-only trace's histogram was empty), and no legend entry for kinds absent.
    #[test]
    fn discards_are_drawn_as_discards() {
        use crate::trace::blk_io_trace::category;
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("trim.bin");
        write_trace(&trace, &[7 << 20], category::WRITE | category::DISCARD);
        let main = pass(&[trace], None).unwrap();
        let cloud = sectors(&main).unwrap();
        let hex = |c: RGBColor| format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2);
        // A legend entry is a text element of its own lines.
        let named = |svg: &str, label: &str| svg.contains(&format!(">\n{label}\n</text>"));
        assert!(named(&cloud, "discards"), "no discards in the legend");
        assert!(!named(&cloud, "writes") && !named(&cloud, "reads"));
        assert!(cloud.contains(&hex(DISCARD)) && !cloud.contains(&hex(WRITE)));
        let hist = histogram(&main.d).unwrap();
        assert!(hist.contains("latency histogram, discards, device 7,0"));
        assert!(named(&hist, "discard Q2C") && hist.contains(&hex(DISCARD)));
    }

    /// The throughput and IOPS charts draw the directions the trace has: a read-only trace
    /// had a flat "writes" line at 0, with its legend entry.
    #[test]
    fn throughput_and_iops_draw_only_the_directions_there() {
        use crate::trace::blk_io_trace::category;
        let dir = tempfile::tempdir().unwrap();
        let named = |svg: &str, label: &str| svg.contains(&format!(">\n{label}\n</text>"));
        for (kind, categories, there, absent) in [
            ("read", category::READ, "reads", "writes"),
            ("write", category::WRITE, "writes", "reads"),
        ] {
            let trace = dir.path().join(format!("{kind}.bin"));
            write_trace(&trace, &[7 << 20], categories);
            let main = pass(&[trace], None).unwrap();
            let mut out = Out::new(dir.path());
            over_time_charts(&main, &mut out).unwrap();
            for chart in ["throughput.svg", "iops.svg"] {
                let svg = &out.drawn.iter().find(|(f, _)| *f == chart).unwrap().1;
                assert!(named(svg, there), "{kind}: {chart}");
                assert!(!named(svg, absent), "{kind}: {chart}");
            }
        }
    }

    /// 50 I/Os of 64 KiB on each of `devices`, of the kind `categories` says.
    fn write_trace(path: &Path, devices: &[u32], categories: u64) {
        use crate::trace::blk_io_trace::{action, encode, Endian, Event};
        let mut bytes = Vec::new();
        for i in 0..50u64 {
            for (at, c) in [
                (0, code::QUEUE),
                (1_000, code::ISSUE),
                (40_000, code::COMPLETE),
            ] {
                for &device in devices {
                    let ev = Event {
                        version: 7,
                        time: i * 100_000 + at,
                        sector: i * 128,
                        bytes: 65536,
                        action: action(c, categories),
                        device,
                        ..Event::default()
                    };
                    encode(&ev, 7, Endian::native(), &mut bytes);
                }
            }
        }
        std::fs::write(path, bytes).unwrap();
    }

    /// A `--with` trace that cannot be drawn fails the plot before anything is written: the
    /// main trace's charts were written first, and stayed beside the error.
    #[test]
    fn a_with_trace_that_fails_leaves_nothing_written() {
        use crate::trace::blk_io_trace::category;
        let dir = tempfile::tempdir().unwrap();
        let (two, one) = (dir.path().join("two.bin"), dir.path().join("one.bin"));
        write_trace(&two, &[7 << 20, 7 << 20 | 1], category::READ);
        write_trace(&one, &[7 << 20], category::READ);
        let out = dir.path().join("charts");
        let e = plot(std::slice::from_ref(&two), &out, Some("7,1"), &[one], &[]).unwrap_err();
        assert!(format!("{e:#}").contains("7,1"), "{e:#}");
        assert!(!out.exists(), "the charts directory was made");
        // Eleven traces would share colours.
        let many = vec![dir.path().join("one.bin"); 10];
        let e = plot(&[dir.path().join("two.bin")], &out, None, &many, &[]).unwrap_err();
        assert!(e.to_string().contains("11 traces on one chart"), "{e}");
        let written = plot(&[two], &out, Some("7,1"), &[], &[]).unwrap();
        assert_eq!(written.len(), 7, "{written:?}");
    }

    #[test]
    fn the_plots_bucket_is_round() {
        assert_eq!(plot_interval_ns(3.00027), 10_000_000);
        assert_eq!(plot_interval_ns(4.1), 14_000_000);
        assert_eq!(plot_interval_ns(0.001), 100_000);
        assert_eq!(plot_interval_ns(3600.0), 12_000_000_000);
    }

    /// A device is named by number, or by its name on this machine.
    #[test]
    fn a_device_is_wanted_by_number_or_by_name() {
        assert_eq!(wanted_dev("8,16").unwrap(), 8 << 20 | 16);
        let any = std::fs::read_dir("/sys/class/block")
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .next()
            .expect("a block device on this machine");
        let number = std::fs::read_to_string(format!("/sys/class/block/{any}/dev")).unwrap();
        let want = parse_dev(&number.trim().replace(':', ",")).unwrap();
        assert_eq!(wanted_dev(&any).unwrap(), want);
        assert_eq!(wanted_dev(&format!("/dev/{any}")).unwrap(), want);
        for bad in ["nosuchdisk9", "../block", ""] {
            let e = wanted_dev(bad).unwrap_err().to_string();
            assert!(e.contains("expected MAJOR,MINOR or the name"), "{bad}: {e}");
        }
    }
}

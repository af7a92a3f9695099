//! From one stored experiment to the charts people post (issue 4): bars with CI whiskers per
//! cell, a metric against a numeric factor with one line per variant, completion-latency CDFs
//! from fio's json+ bins merged exactly across repetitions, a per-CPU interrupt-rate heatmap,
//! and a per-CPU time breakdown. The drawing lives in `report::plot`; this module picks the
//! data and says clearly when it is not there (imported runs have no sampled series; plain
//! `json` output has no histogram bins).
//!
//! Sampled series as the run loop stores them (`experiment::run::stored::series`, one per run
//! and key, offsets at the end of each interval): kind `irq`, key `IRQ/cpuN` in interrupts/s
//! (and `all`, the total, which the per-CPU heatmap does not need); kind `cpu`, key
//! `cpuN/usr_pct` ... `cpuN/idle_pct` in percent of that CPU's time (and `all/...`).

use std::collections::BTreeMap;

use anyhow::{bail, Context};

use crate::report::plot::{
    bars_with_ci, cpu_breakdown, irq_heatmap, latency_cdf, metric_vs_factor, Bar, RateGrid, Series,
    SeriesPoint,
};
use crate::stats::LatencyHistogram;
use crate::store::{SampleSeries, Store};
use crate::workload::fio_json::{self, Dir};

use super::cells::{has_size_suffix, numeric_value, Factor};
use super::metrics;
use super::show::{summarise, Loaded};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Kind {
    /// Mean per cell with 95% CI whiskers (case 0's r/s and %sys).
    Bars,
    /// A metric against a numeric factor, one line per variant (case 4).
    Lines,
    /// Completion-latency CDF per cell from merged json+ histograms.
    Latency,
    /// Interrupts/s per CPU over time for one run (case 2).
    Heatmap,
    /// Per-CPU time breakdown (usr, sys, irq, softirq, iowait, idle) for one run.
    Cpu,
    /// A metric per second over the measured interval, one line per run of a cell
    /// (`--metric`: read_iops, read_bw_mbs, read_clat_mean_us, dev_r_per_s, ...; `--cell`).
    OverTime,
    /// Interrupts per second on each CPU over the measured interval for one run.
    IrqOverTime,
}

#[derive(Debug, Clone)]
pub(crate) struct PlotRequest {
    pub kind: Kind,
    pub metric: Option<String>,
    /// `lines`: the numeric factor on the x axis.
    pub x: Option<String>,
    /// `bars`: the factor that colours bars; `lines`: the factor that makes the lines.
    pub by: Option<String>,
    /// `heatmap`/`cpu`: which run (default: the first successful run with samples).
    pub run: Option<i64>,
    /// `heatmap`: only this IRQ (as named in /proc/interrupts: `45`, `LOC`, ...).
    pub irq: Option<String>,
    /// `lines`: more experiments drawn on the same axes, one set of lines each.
    pub with: Vec<i64>,
    /// `over-time`, `irq-over-time`: the cell (full or short label; default: the first
    /// with per-second series).
    pub cell: Option<String>,
}

impl PlotRequest {
    pub(crate) fn new(kind: Kind) -> Self {
        PlotRequest {
            kind,
            metric: None,
            x: None,
            by: None,
            run: None,
            irq: None,
            with: Vec::new(),
            cell: None,
        }
    }
}

/// The SVG document for `req`.
/// A chart written to a file: what `iolab plot` prints.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Written {
    pub bytes: usize,
    pub experiment: i64,
    pub output: String,
}

impl crate::output::Render for Written {
    fn text(&self) -> String {
        format!("wrote {} ({} bytes)\n", self.output, self.bytes)
    }
}

/// Whether a chart written to `output` is a PNG (else an SVG): its extension says, and any
/// other extension is refused.
pub(crate) fn is_png(output: &std::path::Path) -> Result<bool, String> {
    let ext = output
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("svg") => Ok(false),
        Some("png") => Ok(true),
        // `.svg` alone is a hidden file's name, with no extension.
        None if output
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| [".svg", ".png"].contains(&n.to_ascii_lowercase().as_str())) =>
        {
            Err(format!(
                "{}: a name is needed before the extension (e.g. chart.svg)",
                output.display()
            ))
        }
        _ => Err(format!(
            "{}: the output must end in .svg or .png (the extension picks the format)",
            output.display()
        )),
    }
}

/// Draws experiment `id`'s chart from the database at `db` and writes it to `output`, as SVG
/// or PNG by its extension (checked before the database is opened).
pub(crate) fn write_chart(
    db: &std::path::Path,
    id: i64,
    req: &PlotRequest,
    output: &std::path::Path,
) -> anyhow::Result<Written> {
    let as_png = is_png(output).map_err(|e| anyhow::anyhow!(e))?;
    let store = Store::open_existing(db)?;
    let loaded = super::show::load(&store, id)?;
    let svg = plot(&store, &loaded, req)?;
    let bytes = if as_png {
        crate::report::png::svg_to_png(&svg)
            .with_context(|| format!("{}: rasterising the chart", output.display()))?
    } else {
        svg.into_bytes()
    };
    crate::sys::own_dir::write_named_file(output, &bytes).map_err(anyhow::Error::msg)?;
    Ok(Written {
        bytes: bytes.len(),
        experiment: id,
        output: output.display().to_string(),
    })
}

pub(crate) fn plot(store: &Store, loaded: &Loaded, req: &PlotRequest) -> anyhow::Result<String> {
    if !req.with.is_empty() && req.kind != Kind::Lines {
        bail!("--with draws several experiments on one chart; only --kind lines supports it");
    }
    if let Some(why) = loaded.no_successful_runs() {
        bail!(why);
    }
    let svg = match req.kind {
        Kind::Bars => bars(store, loaded, req)?,
        Kind::Lines => lines(store, loaded, req)?,
        Kind::Latency => latency(store, loaded, req)?,
        Kind::Heatmap => heatmap(store, loaded, req)?,
        Kind::Cpu => cpu(store, loaded, req)?,
        Kind::OverTime => super::over_time::over_time(store, loaded, req)?,
        Kind::IrqOverTime => super::over_time::irq_over_time(store, loaded, req)?,
    };
    Ok(svg)
}

fn metric_of(store: &Store, loaded: &Loaded, req: &PlotRequest) -> anyhow::Result<String> {
    let ids = loaded.ok_run_ids();
    if ids.is_empty() {
        bail!("experiment {} has no successful runs", loaded.experiment.id);
    }
    let requested: Vec<String> = req.metric.iter().cloned().collect();
    let label = format!("experiment {}", loaded.experiment.id);
    let chosen = metrics::choose(store, &[(&label, &ids)], &requested)?;
    Ok(chosen[0].0.clone())
}

fn y_label(metric: &str) -> String {
    match metrics::unit(metric) {
        Some(u) => format!("{metric} [{u}]"),
        None => metric.to_string(),
    }
}

fn bars(store: &Store, loaded: &Loaded, req: &PlotRequest) -> anyhow::Result<String> {
    let metric = metric_of(store, loaded, req)?;
    let values = metrics::values(store, &loaded.ok_run_ids(), &metric)?;
    let mc = summarise(loaded, &metric, &values)?;
    let by: Option<&Factor> = match &req.by {
        Some(name) => Some(loaded.factor(name)?),
        None => loaded.varying().first().copied(),
    };
    let mut bars = Vec::new();
    for (cell, s) in loaded.cells.iter().zip(&mc.summaries) {
        let group = by
            .and_then(|f| {
                let l = cell.level(&f.name)?;
                f.levels.iter().position(|x| x == l)
            })
            .unwrap_or(0);
        // Marked as `show` marks a cell without figures.
        let missing = match (cell.not_applicable_reason(), cell.ok.is_empty()) {
            (Some(_), _) => "n/a",
            (None, true) if !cell.failed.is_empty() => "failed",
            (None, true) => "no runs",
            (None, false) => "no value",
        };
        bars.push(Bar {
            label: cell.short_label(),
            value: s.as_ref().map(|s| s.mean),
            missing,
            ci: s.as_ref().and_then(|s| s.ci_mean).map(|c| (c.low, c.high)),
            group,
            outliers: s.as_ref().is_some_and(|s| !s.outliers.is_empty()),
        });
    }
    let cells_named = if loaded.factors.is_empty() {
        "of all runs".to_string()
    } else {
        let names: Vec<&str> = loaded.factors.iter().map(|f| f.name.as_str()).collect();
        format!("per {}", names.join("/"))
    };
    // A cell of one run has no interval: the title does not promise whiskers none has.
    let shown = if bars.iter().any(|b| b.ci.is_some()) {
        "mean, 95% CI"
    } else {
        "mean (no CI: one run per cell)"
    };
    // The labels give every level; the colour says which one of them it follows.
    let coloured = match by {
        Some(f) if bars.iter().any(|b| b.group != bars[0].group) => {
            format!(", coloured by {}", f.name)
        }
        _ => String::new(),
    };
    let title = format!("{metric} {cells_named}: {shown}{coloured}");
    Ok(bars_with_ci(&title, &y_label(&metric), &bars)?)
}

fn lines(store: &Store, loaded: &Loaded, req: &PlotRequest) -> anyhow::Result<String> {
    let metric = metric_of(store, loaded, req)?;
    let numeric = |f: &Factor| f.levels.iter().all(|l| numeric_value(l).is_some());
    let x = match &req.x {
        Some(name) => {
            let f = loaded.factor(name)?;
            if !numeric(f) {
                bail!(
                    "factor {name:?} has levels that are not numbers ({}); lines need a numeric factor on the x axis",
                    f.levels.join(", ")
                );
            }
            f
        }
        // Sizes (bs = 4k, 64k, 1m) are the usual x axis; other numbers (rq_affinity = 0,
        // 1, 2) are often codes, so they come second.
        None => loaded
            .varying()
            .into_iter()
            .filter(|f| numeric(f))
            .min_by_key(|f| !f.levels.iter().any(|l| has_size_suffix(l)))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "experiment {} has no factor with numeric levels for the x axis; factors: {}",
                    loaded.experiment.id,
                    loaded.factor_list()
                )
            })?,
    };
    let by: Vec<&Factor> = match &req.by {
        Some(name) => vec![loaded.factor(name)?],
        None => loaded.factors.iter().filter(|f| f.name != x.name).collect(),
    };
    let sizes = x.levels.iter().any(|l| has_size_suffix(l));
    let scale = if sizes { 1024.0 } else { 1.0 };
    let mut series: BTreeMap<Vec<usize>, Series> = BTreeMap::new();
    let mut experiments = vec![loaded.clone()];
    for &id in &req.with {
        let other = super::show::load(store, id)?;
        if other.factor(&x.name).is_err() {
            bail!(
                "experiment {id} has no factor {:?} to put on the x axis; its factors: {}",
                x.name,
                other.factor_list()
            );
        }
        experiments.push(other);
    }
    // A factor neither on the x axis nor drawing lines would put several cells at one x of
    // a line, joined into a zig-zag as if one series.
    if req.by.is_some() {
        for exp in &experiments {
            let pooled: Vec<String> = exp
                .varying()
                .into_iter()
                .filter(|f| f.name != x.name && by.iter().all(|b| b.name != f.name))
                .map(|f| format!("{} ({})", f.name, f.levels.join(", ")))
                .collect();
            if !pooled.is_empty() {
                bail!(
                    "--by {} draws one line per level, but experiment {} also varies {}: each \
                     line would join cells of those levels at one x; leave --by out for one \
                     line per combination",
                    by[0].name,
                    exp.experiment.id,
                    pooled.join(" and ")
                );
            }
        }
    }
    let labels = variant_labels(store, &experiments)?;
    for (e, exp) in experiments.iter().enumerate() {
        let values = metrics::values(store, &exp.ok_run_ids(), &metric)?;
        let mc = summarise(exp, &metric, &values)?;
        for (cell, s) in exp.cells.iter().zip(&mc.summaries) {
            let (Some(s), Some(level)) = (s, cell.level(&x.name)) else {
                continue;
            };
            let Some(xv) = numeric_value(level) else {
                continue;
            };
            let mut key = vec![e];
            key.extend(by.iter().map(|f| {
                cell.level(&f.name)
                    .and_then(|l| f.levels.iter().position(|x| x == l))
                    .unwrap_or(usize::MAX)
            }));
            let mut parts: Vec<String> = labels.get(e).cloned().into_iter().collect();
            parts.extend(
                by.iter()
                    .filter_map(|f| cell.level(&f.name).map(|l| format!("{}={l}", f.name))),
            );
            let name = if parts.is_empty() {
                metric.clone()
            } else {
                parts.join(" ")
            };
            series
                .entry(key)
                .or_insert_with(|| Series {
                    name,
                    points: Vec::new(),
                })
                .points
                .push(SeriesPoint {
                    x: xv / scale,
                    y: s.mean,
                    ci: s.ci_mean.map(|c| (c.low, c.high)),
                });
        }
    }
    let mut series: Vec<Series> = series.into_values().collect();
    for s in &mut series {
        s.points.sort_by(|a, b| a.x.total_cmp(&b.x));
    }
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.x))
        .collect();
    let (lo, hi) = xs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    let log_x = lo > 0.0 && hi / lo >= 8.0;
    let x_label = if sizes {
        format!("{} [KiB]", x.name)
    } else {
        x.name.clone()
    };
    let title = format!("{metric} vs {}: mean, 95% CI", x.name);
    Ok(metric_vs_factor(
        &title,
        &x_label,
        &y_label(&metric),
        &series,
        log_x,
    )?)
}

/// How to tell experiments apart in a legend (case 4: stock vs backported kernel): the
/// first run tag whose value differs between them (user tags before `kernel` and `host`),
/// else the experiment id. Empty when only one experiment is drawn.
fn variant_labels(store: &Store, experiments: &[Loaded]) -> anyhow::Result<Vec<String>> {
    if experiments.len() < 2 {
        return Ok(Vec::new());
    }
    let mut tags: Vec<BTreeMap<String, String>> = Vec::new();
    for e in experiments {
        let first = e.runs.first().map(|r| r.id);
        let t = match first {
            Some(id) => store.run_tags(id)?.into_iter().collect(),
            None => BTreeMap::new(),
        };
        tags.push(t);
    }
    let mut names: Vec<&String> = tags[0]
        .keys()
        .filter(|n| *n != "kernel" && *n != "host")
        .collect();
    names.sort();
    let kernel = "kernel".to_string();
    let host = "host".to_string();
    names.push(&kernel);
    names.push(&host);
    for name in names {
        let values: Vec<Option<&String>> = tags.iter().map(|t| t.get(name)).collect();
        let distinct: std::collections::BTreeSet<&String> =
            values.iter().flatten().copied().collect();
        if values.iter().all(Option::is_some) && distinct.len() == experiments.len() {
            return Ok(values
                .into_iter()
                .flatten()
                .map(|v| format!("{name}={v}"))
                .collect());
        }
    }
    Ok(experiments
        .iter()
        .map(|e| format!("experiment {}", e.experiment.id))
        .collect())
}

fn latency(store: &Store, loaded: &Loaded, req: &PlotRequest) -> anyhow::Result<String> {
    let dir = match req.metric.as_deref() {
        Some(m) if m.starts_with("write") => Dir::Write,
        Some(m) if m.starts_with("read") => Dir::Read,
        Some(m) => {
            bail!("--metric {m:?}: a latency plot takes read_... or write_... (the direction)")
        }
        None => Dir::Read,
    };
    let mut series = Vec::new();
    let mut without_bins = 0usize;
    let mut without_io = 0usize;
    for cell in &loaded.cells {
        // One cell at a time (memory stays bounded), its runs parsed on every core.
        let mut texts = Vec::with_capacity(cell.ok.len());
        for &id in &cell.ok {
            match store.run_texts(id)?.and_then(|t| t.fio_json) {
                Some(text) => texts.push((id, text)),
                None => without_bins += 1,
            }
        }
        let parsed = super::map_on_every_core(&texts, |(id, text)| {
            fio_json::clat_bins(text, dir).with_context(|| format!("run {id}: stored fio output"))
        });
        let mut merged = LatencyHistogram::new();
        for bins in parsed {
            match bins? {
                fio_json::ClatBins::Histogram(b) => merged.merge(&LatencyHistogram::from_pairs(b)),
                fio_json::ClatBins::NotJsonPlus => without_bins += 1,
                fio_json::ClatBins::NoIo => without_io += 1,
            }
        }
        if !merged.is_empty() {
            series.push((cell.label(), merged));
        }
    }
    if series.is_empty() && without_bins == 0 && without_io > 0 {
        bail!(
            "experiment {}: no run did {} I/O, so there is no {} latency to plot",
            loaded.experiment.id,
            dir.name(),
            dir.name()
        );
    }
    if series.is_empty() {
        bail!(
            "experiment {}: no {} completion-latency histograms ({} runs without clat_ns.bins); \
             they come from fio --output-format=json+",
            loaded.experiment.id,
            dir.name(),
            without_bins
        );
    }
    let title = format!("{} completion latency, merged over repetitions", dir.name());
    Ok(latency_cdf(&title, &series)?)
}

/// The run a per-run chart shows: `--run`, else the first successful run with `kind` series.
fn run_with_samples(
    store: &Store,
    loaded: &Loaded,
    req: &PlotRequest,
    kind: &str,
) -> anyhow::Result<(i64, Vec<SampleSeries>)> {
    if let Some(id) = req.run {
        let Some(run) = loaded.runs.iter().find(|r| r.id == id) else {
            bail!("run {id} is not in experiment {}", loaded.experiment.id);
        };
        let s: Vec<SampleSeries> = store
            .samples(id)?
            .into_iter()
            .filter(|s| s.kind == kind)
            .collect();
        if s.is_empty() {
            // A run that never ran (or failed before sampling) says why.
            if let Some(why) = run.status.reason() {
                bail!(
                    "run {id} has no sampled {kind} series: it was {} ({why}); `iolab runs \
                     {}` lists the runs",
                    run.status.as_str().replace('_', " "),
                    loaded.experiment.id
                );
            }
            bail!("run {id} has no sampled {kind} series");
        }
        return Ok((id, s));
    }
    for id in loaded.ok_run_ids() {
        let s: Vec<SampleSeries> = store
            .samples(id)?
            .into_iter()
            .filter(|s| s.kind == kind)
            .collect();
        if !s.is_empty() {
            return Ok((id, s));
        }
    }
    bail!(
        "experiment {} has no sampled {kind} series (imported fio outputs carry none)",
        loaded.experiment.id
    )
}

fn cell_of(loaded: &Loaded, run: i64) -> String {
    loaded
        .cells
        .iter()
        .find(|c| c.ok.contains(&run))
        .map(|c| c.label())
        .unwrap_or_default()
}

/// `cpu12` -> 12.
fn cpu_number(text: &str) -> Option<u32> {
    text.strip_prefix("cpu")?.parse().ok()
}

fn heatmap(store: &Store, loaded: &Loaded, req: &PlotRequest) -> anyhow::Result<String> {
    let (run, series) = run_with_samples(store, loaded, req, "irq")?;
    let mut per_cpu: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    let mut times: Vec<f64> = Vec::new();
    let mut irqs: Vec<String> = Vec::new();
    for s in &series {
        let Some((irq, cpu)) = s.key.split_once('/') else {
            continue;
        };
        let Some(cpu) = cpu_number(cpu) else {
            continue;
        };
        if !irqs.iter().any(|i| i == irq) {
            irqs.push(irq.to_string());
        }
        if req.irq.as_deref().is_some_and(|want| want != irq) {
            continue;
        }
        if times.len() < s.t_offsets.len() {
            times = s.t_offsets.clone();
        }
        let row = per_cpu.entry(cpu).or_default();
        if row.len() < s.values.len() {
            row.resize(s.values.len(), 0.0);
        }
        for (slot, v) in row.iter_mut().zip(&s.values) {
            *slot += v;
        }
    }
    if per_cpu.is_empty() {
        bail!(
            "run {run} has no interrupt series{}; IRQs sampled: {}",
            req.irq
                .as_deref()
                .map(|i| format!(" for IRQ {i}"))
                .unwrap_or_default(),
            irqs.join(", ")
        );
    }
    let n = times.len();
    let mut times_s = vec![0.0];
    times_s.extend(&times);
    if times_s.windows(2).any(|w| w[0] >= w[1]) {
        // Offsets that start at 0 describe the reading times, not interval ends.
        times_s.remove(0);
    }
    let intervals = times_s.len() - 1;
    let grid = RateGrid {
        window_s: measured_window(store, loaded, run)?,
        cpus: per_cpu.keys().copied().collect(),
        times_s,
        rates: per_cpu
            .values()
            .map(|row| {
                (0..intervals)
                    .map(|i| row.get(i + n - intervals).copied())
                    .collect()
            })
            .collect(),
    };
    let what = req
        .irq
        .as_deref()
        .map(|i| format!("IRQ {i}"))
        .unwrap_or_else(|| "all interrupts".to_string());
    let title = format!("{what} per CPU, run {run} ({})", cell_of(loaded, run));
    Ok(irq_heatmap(&title, "interrupts/s", &grid)?)
}

/// The run's measured interval on its samples' time axis (seconds since sampling began), as
/// the run loop aligned it (`experiment::run::align`); None for runs stored without one.
fn measured_window(store: &Store, loaded: &Loaded, run: i64) -> anyhow::Result<Option<(f64, f64)>> {
    Ok(store
        .run_bases(loaded.experiment.id)?
        .into_iter()
        .find(|b| b.run_id == run)
        .and_then(|b| b.sample_window)
        .and_then(|w| Some((w["start_s"].as_f64()?, w["end_s"].as_f64()?))))
}

/// The mean of a sampled series over `window`: each value is a rate over the interval
/// ending at its offset (the first from 0), weighted by how much of that interval lies in
/// the window. None when nothing of the series falls in it.
fn mean_within(t_offsets: &[f64], values: &[f64], (a, b): (f64, f64)) -> Option<f64> {
    let (mut sum, mut weight) = (0.0, 0.0);
    let mut start = 0.0f64;
    for (&end, &v) in t_offsets.iter().zip(values) {
        let w = (end.min(b) - start.max(a)).max(0.0);
        sum += w * v;
        weight += w;
        start = end;
    }
    (weight > 0.0).then(|| sum / weight)
}

/// Categories in the order /proc/stat lists them, then any others.
const CPU_ORDER: [&str; 8] = [
    "usr", "nice", "sys", "irq", "softirq", "iowait", "steal", "idle",
];

fn cpu(store: &Store, loaded: &Loaded, req: &PlotRequest) -> anyhow::Result<String> {
    let (run, series) = run_with_samples(store, loaded, req, "cpu")?;
    // Over the interval the run's usr/sys figures describe, where it is known: the sampler
    // also saw fio start and stop (seconds of it in a slow guest).
    let window = measured_window(store, loaded, run)?.filter(|&w| {
        series
            .iter()
            .all(|s| s.values.is_empty() || mean_within(&s.t_offsets, &s.values, w).is_some())
    });
    let mut shares: BTreeMap<u32, BTreeMap<String, f64>> = BTreeMap::new();
    let mut cats: Vec<String> = Vec::new();
    for s in &series {
        let Some((cpu, cat)) = s.key.split_once('/') else {
            continue;
        };
        let Some(cpu) = cpu_number(cpu) else {
            continue;
        };
        let cat = cat.strip_suffix("_pct").unwrap_or(cat);
        if s.values.is_empty() {
            continue;
        }
        let mean = window
            .and_then(|w| mean_within(&s.t_offsets, &s.values, w))
            .unwrap_or(s.values.iter().sum::<f64>() / s.values.len() as f64);
        shares.entry(cpu).or_default().insert(cat.to_string(), mean);
        if !cats.iter().any(|c| c == cat) {
            cats.push(cat.to_string());
        }
    }
    if shares.is_empty() {
        bail!("run {run} has no per-CPU series (keys cpuN/CATEGORY)");
    }
    cats.sort_by_key(|c| {
        CPU_ORDER
            .iter()
            .position(|o| o == c)
            .unwrap_or(CPU_ORDER.len())
    });
    let cpus: Vec<u32> = shares.keys().copied().collect();
    let rows: Vec<Vec<f64>> = shares
        .values()
        .map(|m| {
            cats.iter()
                .map(|c| m.get(c).copied().unwrap_or(0.0))
                .collect()
        })
        .collect();
    let cat_refs: Vec<&str> = cats.iter().map(String::as_str).collect();
    let title = format!(
        "CPU time per CPU, run {run} ({}), mean over {}",
        cell_of(loaded, run),
        if window.is_some() {
            "the measured interval"
        } else {
            "the run"
        }
    );
    Ok(cpu_breakdown(&title, &cpus, &cat_refs, &rows)?)
}

#[cfg(test)]
mod tests {
    use super::{is_png, mean_within};

    #[test]
    fn the_extension_picks_the_format_and_a_bare_one_is_said_to_lack_a_name() {
        let of = |p: &str| is_png(std::path::Path::new(p));
        assert_eq!(of("a/chart.SVG"), Ok(false));
        assert_eq!(of("chart.png"), Ok(true));
        assert!(of("chart.pdf")
            .unwrap_err()
            .contains("must end in .svg or .png"));
        assert!(of("dir/.svg")
            .unwrap_err()
            .contains("a name is needed before the extension"));
    }

    #[test]
    fn a_series_is_averaged_over_the_part_of_each_interval_in_the_window() {
        // Rates over (0,1], (1,2], (2,3]: 10, 20, 40.
        let (t, v) = ([1.0, 2.0, 3.0], [10.0, 20.0, 40.0]);
        assert_eq!(mean_within(&t, &v, (0.0, 3.0)), Some(70.0 / 3.0));
        assert_eq!(mean_within(&t, &v, (1.0, 2.0)), Some(20.0));
        // Half of (1,2] and all of (2,3]: (0.5 * 20 + 40) / 1.5.
        assert_eq!(mean_within(&t, &v, (1.5, 3.0)), Some(50.0 / 1.5));
        assert_eq!(mean_within(&t, &v, (5.0, 6.0)), None);
    }
}

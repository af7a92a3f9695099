//! Charts of the per-second series a run stores (`experiment::run::per_second`): a metric
//! over the measured window for every run of one cell, one line per run, so a sag after some
//! seconds or a slow first second after a knob change shows; and interrupts per CPU over
//! time for one run, one line per CPU. The axis is the one the series are stored on:
//! seconds since the run's measured interval began (fio's measured window, or the span a
//! program engine ran under the sampler). Drawing is `report::plot::metric_vs_factor`.

use std::collections::BTreeMap;

use anyhow::bail;

use crate::report::plot::{metric_vs_factor, Series, SeriesPoint};
use crate::store::{self, Store};

use super::cells::CellRuns;
use super::plots::PlotRequest;
use super::show::Loaded;

const X_LABEL: &str = "seconds since the run's measured interval began";

/// The cell named by `--cell` (its full or short label), or the first with stored series
/// (per-second, or a program engine's own).
/// The cell `want` names, by its full or short label (or the full one with spaces between
/// the levels, as labels were written before; `all` for the one cell of an experiment
/// without factors, as `show` called it before it said `base`); an error listing the cells
/// if none.
pub(crate) fn named_cell<'a>(loaded: &'a Loaded, want: &str) -> anyhow::Result<&'a CellRuns> {
    let spaced = |c: &CellRuns| {
        let levels: Vec<String> = c.levels.iter().map(|(f, l)| format!("{f}={l}")).collect();
        levels.join(" ")
    };
    let earlier = |c: &CellRuns| c.levels.is_empty() && want == "all";
    loaded
        .cells
        .iter()
        .find(|c| c.label() == want || c.short_label() == want || spaced(c) == want || earlier(c))
        .ok_or_else(|| {
            let labels: Vec<String> = loaded.cells.iter().map(CellRuns::label).collect();
            anyhow::anyhow!(
                "experiment {} has no cell {want:?}; its cells: {}",
                loaded.experiment.id,
                labels.join("; ")
            )
        })
}

fn chosen_cell<'a>(
    store: &Store,
    loaded: &'a Loaded,
    cell: Option<&str>,
) -> anyhow::Result<&'a CellRuns> {
    if let Some(want) = cell {
        let c = named_cell(loaded, want)?;
        // Said as what it is, not as a series missing from its runs.
        if let Some((_, why)) = c.not_applicable.first().filter(|_| c.ok.is_empty()) {
            bail!("cell {} is not applicable here: {why}", c.label());
        }
        if let Some((_, why)) = c.failed.first().filter(|_| c.ok.is_empty()) {
            bail!(
                "cell {} has no successful run ({} failed; the first: {why})",
                c.label(),
                c.failed.len()
            );
        }
        return Ok(c);
    }
    for c in &loaded.cells {
        for id in &c.ok {
            if !store.series(*id)?.is_empty()
                || store.samples(*id)?.iter().any(|s| s.kind == ENGINE)
            {
                return Ok(c);
            }
        }
    }
    bail!(
        "experiment {} has no per-second series (runs stored before schema version 4, or \
         imported fio outputs, carry none)",
        loaded.experiment.id
    )
}

/// One series of a run by metric: the exact name (`read_iops`, `cpu1:irq_per_s`), else the
/// sum over devices of `DEV:metric` (`dev_r_per_s` over every watched device).
fn points_of(all: &[store::SeriesPoint], metric: &str) -> Vec<SeriesPoint> {
    let exact: Vec<&store::SeriesPoint> = all.iter().filter(|p| p.name == metric).collect();
    let picked: Vec<&store::SeriesPoint> = if exact.is_empty() {
        let suffix = format!(":{metric}");
        all.iter().filter(|p| p.name.ends_with(&suffix)).collect()
    } else {
        exact
    };
    // t_s as the key in ms: the bins of one run share their edges.
    let mut by_t: BTreeMap<i64, f64> = BTreeMap::new();
    for p in picked {
        *by_t.entry((p.t_s * 1000.0).round() as i64).or_default() += p.value;
    }
    by_t.into_iter()
        .map(|(t, y)| SeriesPoint {
            x: t as f64 / 1000.0,
            y,
            ci: None,
        })
        .collect()
}

/// A program engine's own per-interval series (iperf3's `iperf3/mbit_per_s`, kept as the
/// run's samples of kind `engine`): the first the experiment's runs have, for the over-time
/// chart of an engine that reports no IOPS. `None` when it keeps none (sockperf).
pub(crate) fn engine_series(store: &Store, loaded: &Loaded) -> Option<String> {
    loaded.ok_run_ids().into_iter().find_map(|id| {
        let samples = store.samples(id).ok()?;
        samples
            .into_iter()
            .find(|s| s.kind == ENGINE)
            .map(|s| s.key)
    })
}

/// The kind of sample series a program engine's own intervals are stored as.
const ENGINE: &str = "engine";

/// A run's series `metric` from its per-second series `stored`, else from its engine's
/// samples (seconds since the engine started, under the sampler).
fn run_points(
    store: &Store,
    id: i64,
    stored: &[store::SeriesPoint],
    metric: &str,
) -> anyhow::Result<Vec<SeriesPoint>> {
    let points = points_of(stored, metric);
    if !points.is_empty() {
        return Ok(points);
    }
    Ok(store
        .samples(id)?
        .into_iter()
        .filter(|s| s.kind == ENGINE && s.key == metric)
        .flat_map(|s| {
            s.t_offsets
                .into_iter()
                .zip(s.values)
                .map(|(x, y)| SeriesPoint { x, y, ci: None })
        })
        .collect())
}

/// `metric` (default read_iops, else write_iops, else the engine's own series) over time,
/// one line per run of the cell.
pub(crate) fn over_time(
    store: &Store,
    loaded: &Loaded,
    req: &PlotRequest,
) -> anyhow::Result<String> {
    let cell = chosen_cell(store, loaded, req.cell.as_deref())?;
    let mut runs: Vec<(i64, Vec<store::SeriesPoint>)> = Vec::new();
    for id in &cell.ok {
        runs.push((*id, store.series(*id)?));
    }
    let metric = match &req.metric {
        Some(m) => m.clone(),
        None => {
            let (read, write) = (
                crate::metrics::READ_IOPS.name,
                crate::metrics::WRITE_IOPS.name,
            );
            [read, write]
                .into_iter()
                .find(|m| runs.iter().any(|(_, s)| !points_of(s, m).is_empty()))
                .map(str::to_string)
                .or_else(|| engine_series(store, loaded))
                .unwrap_or_else(|| read.to_string())
        }
    };
    let mut series: Vec<Series> = Vec::new();
    for (id, stored) in &runs {
        let points = run_points(store, *id, stored, &metric)?;
        if !points.is_empty() {
            series.push(Series {
                name: format!("run {id}"),
                points,
            });
        }
    }
    if series.is_empty() {
        let names: std::collections::BTreeSet<&str> = runs
            .iter()
            .flat_map(|(_, s)| s.iter().map(|p| p.name.as_str()))
            .collect();
        bail!(
            "cell {} has no per-second series {metric:?}; stored: {}",
            cell.label(),
            if names.is_empty() {
                "none".to_string()
            } else {
                names.into_iter().collect::<Vec<_>>().join(", ")
            }
        );
    }
    let y = match super::metrics::unit(&metric) {
        Some(u) => format!("{metric} [{u}]"),
        None => metric.clone(),
    };
    let title = format!(
        "{metric} per second, cell {}: one line per run",
        cell.label()
    );
    Ok(metric_vs_factor(&title, X_LABEL, &y, &series, false)?)
}

/// Interrupts per second on each CPU over time for one run (`--run`, else the chosen cell's
/// first run with series), one line per CPU.
pub(crate) fn irq_over_time(
    store: &Store,
    loaded: &Loaded,
    req: &PlotRequest,
) -> anyhow::Result<String> {
    let run = match req.run {
        Some(id) => {
            if !loaded.runs.iter().any(|r| r.id == id) {
                bail!("run {id} is not in experiment {}", loaded.experiment.id);
            }
            id
        }
        None => {
            let cell = chosen_cell(store, loaded, req.cell.as_deref())?;
            let mut found = None;
            for id in &cell.ok {
                if !store.series(*id)?.is_empty() {
                    found = Some(*id);
                    break;
                }
            }
            found.ok_or_else(|| {
                anyhow::anyhow!("cell {} has no run with per-second series", cell.label())
            })?
        }
    };
    let all = store.series(run)?;
    // The device's own interrupts when its IRQs are known, else every interrupt per CPU.
    let per_cpu = |suffix: &str| -> Vec<(u32, String)> {
        let mut cpus: Vec<(u32, String)> = all
            .iter()
            .filter_map(|p| {
                let cpu = p.name.strip_suffix(suffix)?.strip_prefix("cpu")?;
                Some((cpu.parse().ok()?, p.name.clone()))
            })
            .collect();
        cpus.sort();
        cpus.dedup();
        cpus
    };
    let (cpus, which) = match per_cpu(":dev_irq_per_s") {
        dev if !dev.is_empty() => (dev, "the target devices' interrupts"),
        _ => (
            per_cpu(":irq_per_s"),
            "all interrupts (device IRQs unknown)",
        ),
    };
    if cpus.is_empty() {
        bail!("run {run} has no per-second interrupt series (cpuN:irq_per_s)");
    }
    let series: Vec<Series> = cpus
        .iter()
        .map(|(cpu, name)| Series {
            name: format!("CPU {cpu}"),
            points: points_of(&all, name),
        })
        .collect();
    let title = format!("{which} per second on each CPU, run {run}");
    Ok(metric_vs_factor(
        &title,
        X_LABEL,
        "interrupts/s",
        &series,
        false,
    )?)
}

//! `iolab show ID`: one experiment as the tables people post — a metric by one factor in rows
//! and another in columns (case 0's "r/s: rq=0/1 x QAF on/near/far"), each cell with its
//! 95% CI and outlier mark — and, per metric, every cell's n, mean, median, stddev, CV and CI.
//! Cells that cannot be realised here say `n/a` with the reason; failed runs are counted and
//! named, never silently left out.

use std::collections::BTreeMap;

use anyhow::bail;
use serde::Serialize;

use crate::report::format::terminal_safe as safe;
use crate::report::pivot::{pivot_cells, PivotCell, PivotSpec};
use crate::report::table::{Cell, Column, Table};
use crate::stats::{summarize, Summary};
use crate::store::{Experiment, Run, Store};

use super::cells::{declared_factors, factors_of, group, CellRuns, Factor};
use super::metrics::{self, Values};

/// One experiment's runs grouped into cells; shared by `show`, `plot` and `report`.
#[derive(Debug, Clone)]
pub(crate) struct Loaded {
    pub experiment: Experiment,
    pub factors: Vec<Factor>,
    pub cells: Vec<CellRuns>,
    pub runs: Vec<Run>,
    /// What the plan had that the store does not (an experiment stopped early).
    pub not_run: Option<NotRun>,
    /// fio ran the workload, not a program engine.
    pub runs_fio: bool,
}

/// What an experiment planned and never ran (stopped early: interrupted, killed): the
/// factors and cells come from the runs stored, so without this a level none of whose runs
/// came would be missing from every table without a word.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct NotRun {
    /// Runs planned (repetitions, not warm-ups); `None` for adaptive repetitions, which
    /// stop when the figures settle.
    pub runs_planned: Option<usize>,
    pub runs_stored: usize,
    /// The cells planned of which no run is stored.
    pub cells: Vec<String>,
    /// The experiment is still running: its runs are still coming, not stopped.
    #[serde(skip)]
    pub running: bool,
}

impl NotRun {
    /// Compares the stored plan (`experiments.planned_order`: `cells` by key, `runs` each
    /// with its cell index and whether a warm-up, `adaptive`) with the runs stored; `None`
    /// when everything planned is there, or there is no plan (an import).
    fn of(planned: &serde_json::Value, runs: &[Run]) -> Option<NotRun> {
        let cells: Vec<&str> = planned
            .get("cells")?
            .as_array()?
            .iter()
            .filter_map(|c| c.as_str())
            .collect();
        let stored: std::collections::BTreeSet<&str> =
            runs.iter().map(|r| r.cell_key.as_str()).collect();
        // A cell found not applicable is stored once, as one run, however many repetitions
        // the plan gave it: that one run is all it was to have.
        let not_applicable: std::collections::BTreeSet<&str> = runs
            .iter()
            .filter(|r| matches!(r.status, crate::store::RunStatus::NotApplicable(_)))
            .map(|r| r.cell_key.as_str())
            .collect();
        let mut counted_once = std::collections::BTreeSet::new();
        let runs_planned = planned
            .get("runs")?
            .as_array()?
            .iter()
            .filter(|r| r.get("warmup").and_then(|w| w.as_bool()) != Some(true))
            .filter(|r| {
                let key = r
                    .get("cell")
                    .and_then(|c| c.as_u64())
                    .and_then(|c| cells.get(usize::try_from(c).ok()?));
                match key {
                    Some(key) if not_applicable.contains(key) => counted_once.insert(*key),
                    _ => true,
                }
            })
            .count();
        let adaptive = planned.get("adaptive").and_then(|a| a.as_bool()) == Some(true);
        let missing: Vec<String> = cells
            .iter()
            .filter(|c| !stored.contains(*c))
            .map(|c| c.to_string())
            .collect();
        let short = !adaptive && runs.len() < runs_planned;
        (short || !missing.is_empty()).then(|| NotRun {
            runs_planned: (!adaptive).then_some(runs_planned),
            runs_stored: runs.len(),
            cells: missing,
            running: false,
        })
    }

    /// One line for people: how many runs of the plan are stored, and the cells never run.
    pub(crate) fn text(&self) -> String {
        let (state, so_far, not_yet) = if self.running {
            ("running", " so far", "not run yet")
        } else {
            ("stopped early", "", "never run")
        };
        let mut out = match self.runs_planned {
            Some(planned) => format!(
                "{state}: {} of {planned} planned runs stored{so_far}",
                self.runs_stored
            ),
            None => state.to_string(),
        };
        if !self.cells.is_empty() {
            out.push_str(&format!(
                "; {not_yet}, so in no table: {}",
                self.cells.join("; ")
            ));
        }
        out
    }
}

impl Loaded {
    pub(crate) fn ok_run_ids(&self) -> Vec<i64> {
        self.cells
            .iter()
            .flat_map(|c| c.ok.iter().copied())
            .collect()
    }

    /// Why the runs failed, each reason once with how many runs it ended, the commonest
    /// first (ties in the order met).
    pub(crate) fn failure_reasons(&self) -> Vec<(&str, usize)> {
        let mut reasons = counted(self.cells.iter().flat_map(|c| &c.failed));
        reasons.sort_by_key(|r| std::cmp::Reverse(r.1));
        reasons
    }

    /// `Some(why)` when no run succeeded: nothing to show, draw or compare, and why.
    pub(crate) fn no_successful_runs(&self) -> Option<String> {
        if !self.ok_run_ids().is_empty() {
            return None;
        }
        let id = self.experiment.id;
        let reasons = self.failure_reasons();
        let why = match reasons.first() {
            Some((first, n)) => format!(
                "; {}{first}{}",
                if reasons.len() > 1 {
                    "most often: "
                } else {
                    ""
                },
                if *n > 1 {
                    format!(" ({n} runs)")
                } else {
                    String::new()
                }
            ),
            None => String::new(),
        };
        Some(format!(
            "experiment {id} has no successful runs ({} failed, {} not applicable){why}; \
             `iolab runs {id}` lists them",
            self.experiment.runs_failed, self.experiment.runs_not_applicable
        ))
    }

    /// Factors with more than one level: the ones a table or chart can spread out.
    pub(crate) fn varying(&self) -> Vec<&Factor> {
        self.factors.iter().filter(|f| f.levels.len() > 1).collect()
    }

    pub(crate) fn factor(&self, name: &str) -> anyhow::Result<&Factor> {
        self.factors.iter().find(|f| f.name == name).ok_or_else(|| {
            anyhow::anyhow!(
                "experiment {} has no factor {name:?}; its factors: {}",
                self.experiment.id,
                self.factor_list()
            )
        })
    }

    pub(crate) fn factor_list(&self) -> String {
        if self.factors.is_empty() {
            "none (all runs are one cell)".to_string()
        } else {
            self.factors
                .iter()
                .map(|f| {
                    // As cell keys print them: "0,1" would read as two levels.
                    let levels: Vec<String> = f
                        .levels
                        .iter()
                        .map(|l| crate::experiment::plan::quote_label(l))
                        .collect();
                    format!("{} ({})", f.name, levels.join(", "))
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
    }
}

pub(crate) fn load(store: &Store, id: i64) -> anyhow::Result<Loaded> {
    let experiment = store.experiment(id)?;
    let (file_text, planned) = store.experiment_texts(id)?;
    let runs: Vec<Run> = store.runs(id)?.into_iter().filter(|r| !r.warmup).collect();
    if runs.is_empty() {
        bail!("experiment {id} \"{}\" has no runs stored", experiment.name);
    }
    let factors = factors_of(&declared_factors(&file_text), &runs);
    let cells = group(&runs, &factors);
    let not_run = NotRun::of(&planned, &runs).map(|n| NotRun {
        running: experiment.status == "running",
        ..n
    });
    Ok(Loaded {
        experiment,
        factors,
        cells,
        runs,
        not_run,
        runs_fio: super::cells::runs_fio(&file_text),
    })
}

/// One metric summarised per cell (same order as `Loaded::cells`); `None` where the cell has
/// no successful run with that metric.
#[derive(Debug, Clone)]
pub(crate) struct MetricCells {
    pub metric: String,
    pub summaries: Vec<Option<Summary>>,
    /// The run ids behind each summary, in the order given to `summarize` (outlier indices
    /// point into it).
    pub run_ids: Vec<Vec<i64>>,
}

pub(crate) fn summarise(
    loaded: &Loaded,
    metric: &str,
    values: &Values,
) -> anyhow::Result<MetricCells> {
    let mut summaries = Vec::with_capacity(loaded.cells.len());
    let mut run_ids = Vec::with_capacity(loaded.cells.len());
    for c in &loaded.cells {
        let ids: Vec<i64> =
            c.ok.iter()
                .copied()
                .filter(|id| values.contains_key(id))
                .collect();
        let v: Vec<f64> = ids.iter().map(|id| values[id]).collect();
        summaries.push(if v.is_empty() {
            None
        } else {
            let summary = match crate::metrics::resolution(metric) {
                Some(r) => crate::stats::summarize_buckets(&v, &r),
                None => summarize(&v),
            };
            Some(summary.map_err(|e| anyhow::anyhow!("{metric} in {}: {e}", c.label()))?)
        });
        run_ids.push(ids);
    }
    Ok(MetricCells {
        metric: metric.to_string(),
        summaries,
        run_ids,
    })
}

#[derive(Debug, Clone, Default)]
pub(crate) struct ShowOptions {
    pub metrics: Vec<String>,
    pub rows: Option<String>,
    pub cols: Option<String>,
}

/// Everything `show` prints: the header and tables for people, the typed document for
/// `--json`, the long table for `--csv`.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub(crate) struct Shown {
    #[serde(skip)]
    pub header: String,
    /// Scripts have always seen this document's objects with their keys sorted (it was
    /// built with `json!`): `sorted_keys` keeps it byte for byte.
    #[serde(serialize_with = "crate::output::sorted_keys")]
    pub doc: ShowDoc,
    #[serde(skip)]
    pub csv: String,
}

/// `show --json`: the experiment, its factors, the metrics shown with their units, every
/// cell's runs and summaries, the tables as printed, and what the figures rest on.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ShowDoc {
    pub experiment: Experiment,
    pub factors: Vec<Factor>,
    pub metrics: Vec<MetricShown>,
    pub cells: Vec<CellShown>,
    pub tables: Vec<Table>,
    pub basis: super::basis::Basis,
    /// Where each cell's workload was pinned, and why (`[]` when it was not).
    pub placements: Vec<super::placements::Placed>,
    /// What the plan had that was never run (left out when everything was).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_run: Option<NotRun>,
}

/// A metric shown and its unit (null when it has none).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct MetricShown {
    pub name: String,
    pub unit: Option<&'static str>,
}

/// One cell: its levels, how its runs ended, and its summary per metric.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CellShown {
    pub cell: String,
    pub levels: BTreeMap<String, String>,
    pub runs_ok: usize,
    pub runs_failed: usize,
    pub failed: Vec<FailedRun>,
    pub not_applicable: Option<String>,
    /// Metric name -> the cell's summary (metrics without values here are left out).
    pub metrics: BTreeMap<String, CellSummary>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct FailedRun {
    pub run: i64,
    pub reason: String,
}

/// A cell's summary of one metric, with the runs it covers and those marked as outliers.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CellSummary {
    #[serde(flatten)]
    pub summary: Summary,
    pub runs: Vec<i64>,
    pub outlier_runs: Vec<i64>,
}

impl crate::output::Render for Shown {
    fn text(&self) -> String {
        let mut out = self.header.clone();
        for t in &self.doc.tables {
            out.push('\n');
            out.push_str(&t.render_text(crate::report::table::MAX_WIDTH));
        }
        out
    }
}

impl crate::output::RenderCsv for Shown {
    fn csv(&self) -> String {
        self.csv.clone()
    }
}

/// The pivot layout: which factor goes in rows, which in columns, and the others held fixed.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub rows: Factor,
    pub cols: Factor,
    pub fixed: Vec<Factor>,
}

/// Resolves `--rows`/`--cols`; `None` when the experiment varies fewer than two factors and
/// none was asked for.
pub(crate) fn layout(
    loaded: &Loaded,
    rows: Option<&str>,
    cols: Option<&str>,
) -> anyhow::Result<Option<Layout>> {
    if rows.is_some() && rows == cols {
        return Err(crate::cli::usage(format!(
            "--rows and --cols name the same factor {:?}",
            rows.unwrap_or("")
        )));
    }
    let varying = loaded.varying();
    for name in [rows, cols].into_iter().flatten() {
        loaded.factor(name)?;
    }
    if varying.len() < 2 {
        // `--rows F` of the one factor that varies: the plain table already has a row per
        // level of it.
        let one_factor = |r: &str| varying.iter().any(|f| f.name == r);
        if cols.is_none() && rows.is_some_and(one_factor) {
            return Ok(None);
        }
        if rows.is_some() || cols.is_some() {
            bail!(
                "a pivot table needs two factors with several levels; experiment {} has: {}",
                loaded.experiment.id,
                loaded.factor_list()
            );
        }
        return Ok(None);
    }
    let pick = |taken: Option<&str>| {
        varying
            .iter()
            .find(|f| Some(f.name.as_str()) != taken)
            .map(|f| f.name.clone())
            .unwrap_or_default()
    };
    let row_name = rows.map(str::to_string).unwrap_or_else(|| pick(cols));
    let col_name = cols
        .map(str::to_string)
        .unwrap_or_else(|| pick(Some(&row_name)));
    let rows = loaded.factor(&row_name)?.clone();
    let cols = loaded.factor(&col_name)?.clone();
    let fixed = loaded
        .factors
        .iter()
        .filter(|f| f.name != rows.name && f.name != cols.name)
        .cloned()
        .collect();
    Ok(Some(Layout { rows, cols, fixed }))
}

/// Every combination of the fixed factors' levels (one pivot table each).
fn combinations(fixed: &[Factor]) -> Vec<Vec<(String, String)>> {
    let mut out: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for f in fixed {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                f.levels.iter().map(move |l| {
                    let mut p = prefix.clone();
                    p.push((f.name.clone(), l.clone()));
                    p
                })
            })
            .collect();
    }
    out
}

/// The pivot tables of one metric.
pub(crate) fn pivot_tables(loaded: &Loaded, layout: &Layout, mc: &MetricCells) -> Vec<Table> {
    let mut out = Vec::new();
    for fixed in combinations(&layout.fixed) {
        let find = |r: &str, c: &str| {
            loaded.cells.iter().position(|cell| {
                cell.level(&layout.rows.name) == Some(r)
                    && cell.level(&layout.cols.name) == Some(c)
                    && fixed.iter().all(|(f, l)| cell.level(f) == Some(l))
            })
        };
        let any = layout
            .rows
            .levels
            .iter()
            .any(|r| layout.cols.levels.iter().any(|c| find(r, c).is_some()));
        if !any {
            continue;
        }
        let spec = PivotSpec {
            metric: &mc.metric,
            unit: metrics::unit(&mc.metric),
            row_factor: &layout.rows.name,
            row_levels: &layout.rows.levels,
            col_factor: &layout.cols.name,
            col_levels: &layout.cols.levels,
        };
        let mut t = pivot_cells(&spec, |r, c| match find(r, c) {
            None => PivotCell::NotRun,
            Some(i) => {
                let cell = &loaded.cells[i];
                match &mc.summaries[i] {
                    Some(s) => PivotCell::Measured(s),
                    None => match cell.not_applicable_reason() {
                        Some(why) => PivotCell::NotApplicable(why.to_string()),
                        None => match cell.failed.first() {
                            Some((_, why)) if cell.ok.is_empty() => PivotCell::Failed(why.clone()),
                            _ => PivotCell::NotRun,
                        },
                    },
                }
            }
        });
        let bucketed: Vec<String> = loaded
            .cells
            .iter()
            .zip(&mc.summaries)
            .filter(|(cell, s)| {
                s.as_ref().is_some_and(|s| s.ci_widened_to_buckets)
                    && fixed.iter().all(|(f, l)| cell.level(f) == Some(l))
            })
            .map(|(cell, _)| cell.label())
            .collect();
        t.notes.extend(bucket_note(&mc.metric, &bucketed));
        if !fixed.is_empty() {
            let with: Vec<String> = fixed.iter().map(|(f, l)| format!("{f}={l}")).collect();
            if let Some(title) = &mut t.title {
                title.push_str(&format!(" ({})", with.join(" ")));
            }
        }
        out.push(t);
    }
    out
}

/// The note under a table where the buckets of a latency histogram widened some CIs
/// (`stats::summarize_buckets`): a reader sees a CI wider than the runs' spread.
fn bucket_note(metric: &str, cells: &[String]) -> Option<String> {
    let r = crate::metrics::resolution(metric)?;
    (!cells.is_empty()).then(|| {
        format!(
            "CI with the latency histogram's buckets in {}: each run's value stands for a \
             bucket ({} per power of two) the true value may lie anywhere in, so the interval \
             also holds how far the buckets' edges lie from the values",
            cells.join("; "),
            1u32 << r.sub_bits
        )
    })
}

/// Per cell: n, mean, median, stddev, CV, CI of the mean, outliers.
pub(crate) fn detail_table(loaded: &Loaded, mc: &MetricCells) -> Table {
    let head = if loaded.factors.is_empty() {
        "cell".to_string()
    } else {
        loaded
            .factors
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join("/")
    };
    let mut t = Table::new(vec![
        Column::label(&head),
        Column::number("n", None),
        Column::number("mean", None),
        Column::number("median", None),
        Column::number("stddev", None),
        Column::number("CV", Some("%")),
        Column::number("CI low", None),
        Column::number("CI high", None),
        Column::number("out", None),
    ]);
    t.title = Some(match metrics::unit(&mc.metric) {
        Some(u) => format!("{} [{u}] per cell", mc.metric),
        None => format!("{} per cell", mc.metric),
    });
    let mut failed_notes = Vec::new();
    let mut na_notes = Vec::new();
    let mut any_outliers = false;
    let mut below_zero = Vec::new();
    let mut bucketed = Vec::new();
    for (i, cell) in loaded.cells.iter().enumerate() {
        let label = cell.short_label();
        if !cell.failed.is_empty() {
            // Each reason once, with how many runs failed so where there are several.
            let reasons = counted(&cell.failed);
            let said: Vec<String> = match reasons.as_slice() {
                [(why, _)] => vec![why.to_string()],
                _ => reasons
                    .iter()
                    .map(|(why, n)| format!("{n}: {why}"))
                    .collect(),
            };
            failed_notes.push(format!(
                "{label}: {} ({})",
                cell.failed.len(),
                said.join("; ")
            ));
        }
        match &mc.summaries[i] {
            Some(s) => {
                any_outliers |= !s.outliers.is_empty();
                if s.min >= 0.0 && s.ci_mean.is_some_and(|c| c.low < 0.0) {
                    below_zero.push(format!("{} (n = {})", cell.label(), s.n));
                }
                if s.ci_widened_to_buckets {
                    bucketed.push(cell.label());
                }
                let opt = |x: Option<f64>| x.map_or(Cell::Missing, Cell::number);
                t.push(vec![
                    Cell::text(label),
                    Cell::Number {
                        value: s.n as f64,
                        text: s.n.to_string(),
                    },
                    Cell::number(s.mean),
                    Cell::number(s.median),
                    opt(s.stddev),
                    s.cv.map_or(Cell::Missing, |cv| Cell::Number {
                        value: 100.0 * cv,
                        text: format!("{:.1}", 100.0 * cv),
                    }),
                    opt(s.ci_mean.map(|c| c.low)),
                    opt(s.ci_mean.map(|c| c.high)),
                    Cell::Number {
                        value: s.outliers.len() as f64,
                        text: if s.outliers.is_empty() {
                            "0".into()
                        } else {
                            format!("{}*", s.outliers.len())
                        },
                    },
                ]);
            }
            None => {
                let (mark, why) = match cell.not_applicable_reason() {
                    Some(why) => ("n/a", why.to_string()),
                    None if cell.ok.is_empty() => ("failed", String::new()),
                    None => ("-", "no value for this metric".to_string()),
                };
                if mark == "n/a" {
                    na_notes.push((why, label.clone()));
                }
                t.push(vec![Cell::text(label), Cell::text(mark)]);
            }
        }
    }
    t.notes
        .push("CI: 95% Student-t interval of the mean; CV: stddev / mean".into());
    if !below_zero.is_empty() {
        // A t-interval is symmetric about the mean; with few runs it reaches below zero for a
        // quantity that cannot go there. The interval is what the data supports, so it is
        // printed as computed and this says what to do about it.
        t.notes.push(format!(
            "CI low below 0 in {}: the interval is symmetric about the mean and wide when \
             runs are few (12.7 standard errors each side at n = 2, 4.3 at n = 3) or one is \
             far from the rest (see out); more repetitions narrow it",
            below_zero.join("; ")
        ));
    }
    t.notes.extend(bucket_note(&mc.metric, &bucketed));
    if any_outliers {
        t.notes.push(
            "out: runs flagged by the modified z-score (> 3.5 on the MAD; only in cells of 6 \
             or more runs); kept in the numbers"
                .into(),
        );
    }
    for (why, cells) in by_reason(na_notes) {
        t.notes
            .push(format!("n/a (not applicable here: {why}): {cells}"));
    }
    if !failed_notes.is_empty() {
        t.notes.push(format!(
            "failed runs, not in the numbers: {}",
            failed_notes.join("; ")
        ));
    }
    t
}

/// (reason, cell) pairs as one line per reason listing its cells, in first-seen order.
pub(crate) fn by_reason(items: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for (why, cell) in items {
        match out.iter_mut().find(|(w, _)| *w == why) {
            Some((_, cells)) => cells.push(cell),
            None => out.push((why, vec![cell])),
        }
    }
    out.into_iter()
        .map(|(why, cells)| (why, cells.join(", ")))
        .collect()
}

fn header(loaded: &Loaded) -> String {
    let e = &loaded.experiment;
    let mut out = format!(
        "experiment {} \"{}\" ({}){}\nhost {}, kernel {}; runs: {} ok, {} failed, {} not applicable\n",
        e.id,
        safe(&e.name),
        safe(&e.status),
        e.seed_text(),
        safe(&e.host),
        safe(&e.kernel),
        e.runs_ok,
        e.runs_failed,
        e.runs_not_applicable
    );
    if !e.tags.is_empty() {
        out.push_str(&format!("tags: {}\n", safe(&e.tags.join(", "))));
    }
    out.push_str(&format!("factors: {}\n", safe(&loaded.factor_list())));
    if let Some(n) = &loaded.not_run {
        out.push_str(&crate::report::table::wrap(
            &safe(&n.text()),
            crate::report::table::MAX_WIDTH,
        ));
    }
    out
}

fn cell_summary(s: &Summary, ids: &[i64]) -> CellSummary {
    CellSummary {
        summary: s.clone(),
        runs: ids.to_vec(),
        outlier_runs: s
            .outliers
            .iter()
            .filter_map(|&i| ids.get(i).copied())
            .collect(),
    }
}

/// The reasons of failed runs (run, why), each once with how many runs it ended, in the
/// order met.
fn counted<'a>(failed: impl IntoIterator<Item = &'a (i64, String)>) -> Vec<(&'a str, usize)> {
    let mut reasons: Vec<(&str, usize)> = Vec::new();
    for (_, why) in failed {
        match reasons.iter_mut().find(|(r, _)| r == why) {
            Some((_, n)) => *n += 1,
            None => reasons.push((why, 1)),
        }
    }
    reasons
}

pub(crate) fn show(store: &Store, id: i64, opts: &ShowOptions) -> anyhow::Result<Shown> {
    let loaded = load(store, id)?;
    let ok = loaded.ok_run_ids();
    let label = format!("experiment {id}");
    if let Some(why) = loaded.no_successful_runs() {
        bail!(why);
    }
    let chosen = metrics::choose(store, &[(&label, &ok)], &opts.metrics)?;
    let lay = layout(&loaded, opts.rows.as_deref(), opts.cols.as_deref())?;
    let mut tables = Vec::new();
    let mut per_metric = Vec::new();
    for (m, vals) in &chosen {
        let mc = summarise(&loaded, m, &vals[0])?;
        if let Some(l) = &lay {
            tables.extend(pivot_tables(&loaded, l, &mc));
        }
        tables.push(detail_table(&loaded, &mc));
        per_metric.push(mc);
    }
    let hint = metrics::per_host_hint(store, &[(&label, &ok)], &opts.metrics, &chosen)?;
    let basis = super::basis::summarise(&store.measured_run_bases(id)?);
    let csv = long_table(&loaded, &per_metric).to_csv();
    let mut header = header(&loaded);
    let placements = super::placements::from_environment(&store.environment(id)?);
    header.push_str(&super::placements::text(&placements));
    let (analysed, kept) = store.trace_counts(id)?;
    let on_hosts = loaded.experiment.part_of.is_some() || !store.parts(id)?.is_empty();
    if let Some(note) = crate::experiment::run::trace::kept_note(analysed, kept, on_hosts) {
        header.push_str(&note);
        header.push('\n');
    }
    header.push_str(&super::basis::text(&basis));
    if let Some(hint) = hint {
        header.push_str(&crate::report::table::wrap(
            &hint,
            crate::report::table::MAX_WIDTH,
        ));
    }
    Ok(Shown {
        header,
        doc: show_doc(loaded, &per_metric, tables, basis, placements),
        csv,
    })
}

fn show_doc(
    loaded: Loaded,
    per_metric: &[MetricCells],
    tables: Vec<Table>,
    basis: super::basis::Basis,
    placements: Vec<super::placements::Placed>,
) -> ShowDoc {
    let cells = loaded
        .cells
        .iter()
        .enumerate()
        .map(|(i, c)| CellShown {
            cell: c.label(),
            levels: c.levels.iter().cloned().collect(),
            runs_ok: c.ok.len(),
            runs_failed: c.failed.len(),
            failed: c
                .failed
                .iter()
                .map(|(run, reason)| FailedRun {
                    run: *run,
                    reason: reason.clone(),
                })
                .collect(),
            not_applicable: c.not_applicable_reason().map(str::to_string),
            metrics: per_metric
                .iter()
                .filter_map(|mc| {
                    let s = mc.summaries[i].as_ref()?;
                    Some((mc.metric.clone(), cell_summary(s, &mc.run_ids[i])))
                })
                .collect(),
        })
        .collect();
    ShowDoc {
        metrics: per_metric
            .iter()
            .map(|m| MetricShown {
                name: m.metric.clone(),
                unit: metrics::unit(&m.metric),
            })
            .collect(),
        cells,
        tables,
        basis,
        placements,
        not_run: loaded.not_run,
        experiment: loaded.experiment,
        factors: loaded.factors,
    }
}

/// One row per cell and metric, every statistic in its own column: what a script wants.
pub(crate) fn long_table(loaded: &Loaded, per_metric: &[MetricCells]) -> Table {
    let mut cols = vec![Column::label("cell")];
    cols.extend(loaded.factors.iter().map(|f| Column::label(&f.name)));
    for (name, num) in [
        ("metric", false),
        ("unit", false),
        ("status", false),
        ("n", true),
        ("mean", true),
        ("median", true),
        ("stddev", true),
        ("cv", true),
        ("min", true),
        ("max", true),
        ("ci_low", true),
        ("ci_high", true),
        ("median_ci_low", true),
        ("median_ci_high", true),
        ("outliers", true),
        ("runs_failed", true),
    ] {
        cols.push(if num {
            Column::number(name, None)
        } else {
            Column::label(name)
        });
    }
    let mut t = Table::new(cols);
    let num = |x: Option<f64>| x.map_or(Cell::Missing, Cell::number);
    for mc in per_metric {
        for (i, c) in loaded.cells.iter().enumerate() {
            let mut row = vec![Cell::text(c.label())];
            row.extend(c.levels.iter().map(|(_, l)| Cell::text(l)));
            row.push(Cell::text(&mc.metric));
            row.push(Cell::text(metrics::unit(&mc.metric).unwrap_or("")));
            let s = mc.summaries[i].as_ref();
            row.push(Cell::text(match (s, c.not_applicable_reason()) {
                (Some(_), _) => "ok",
                (None, Some(_)) => "not_applicable",
                (None, None) if c.ok.is_empty() => "failed",
                (None, None) => "no_value",
            }));
            row.push(num(s.map(|s| s.n as f64)));
            row.push(num(s.map(|s| s.mean)));
            row.push(num(s.map(|s| s.median)));
            row.push(num(s.and_then(|s| s.stddev)));
            row.push(num(s.and_then(|s| s.cv)));
            row.push(num(s.map(|s| s.min)));
            row.push(num(s.map(|s| s.max)));
            row.push(num(s.and_then(|s| s.ci_mean.map(|c| c.low))));
            row.push(num(s.and_then(|s| s.ci_mean.map(|c| c.high))));
            row.push(num(s.and_then(|s| s.ci_median.map(|c| c.low))));
            row.push(num(s.and_then(|s| s.ci_median.map(|c| c.high))));
            row.push(num(s.map(|s| s.outliers.len() as f64)));
            row.push(num(Some(c.failed.len() as f64)));
            t.push(row);
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Adaptive repetitions stop when the figures settle: fewer runs than the cap is no
    /// shortfall, a cell with none still is; a plan fully run, or none (an import), says
    /// nothing.
    #[test]
    fn what_was_not_run_is_told_from_the_plan() {
        let run = |key: &str| Run {
            id: 1,
            experiment_id: 1,
            cell_key: key.into(),
            cell_levels: serde_json::json!({}),
            repetition: 1,
            warmup: false,
            start_unix: 0.0,
            end_unix: 1.0,
            status: crate::store::RunStatus::Ok,
        };
        let plan = |adaptive: bool| {
            serde_json::json!({
                "cells": ["a", "b"],
                "runs": (0..6).map(|i| serde_json::json!({"cell": i % 2, "round": 1 + i / 2, "warmup": false})).collect::<Vec<_>>(),
                "adaptive": adaptive,
            })
        };
        assert_eq!(NotRun::of(&plan(true), &[run("a"), run("b")]), None);
        assert_eq!(
            NotRun::of(&plan(true), &[run("a")]),
            Some(NotRun {
                runs_planned: None,
                runs_stored: 1,
                cells: vec!["b".into()],
                running: false,
            })
        );
        let short = NotRun::of(&plan(false), &[run("a"), run("b")]).unwrap();
        assert_eq!((short.runs_planned, short.cells.len()), (Some(6), 0));
        assert_eq!(short.text(), "stopped early: 2 of 6 planned runs stored");
        let coming = NotRun {
            running: true,
            ..short
        };
        assert_eq!(coming.text(), "running: 2 of 6 planned runs stored so far");
        assert_eq!(NotRun::of(&serde_json::Value::Null, &[run("a")]), None);
        // A cell found not applicable is stored once whatever its repetitions: with the
        // other cell's three runs, nothing is missing; with two of them, one run is.
        let not_applicable = || Run {
            status: RunStatus::NotApplicable("far: one cache domain".into()),
            ..run("b")
        };
        let done = [run("a"), not_applicable(), run("a"), run("a")];
        assert_eq!(NotRun::of(&plan(false), &done), None);
        let cut = NotRun::of(&plan(false), &done[..3]).unwrap();
        assert_eq!(cut.text(), "stopped early: 3 of 4 planned runs stored");
    }
    use crate::store::RunStatus;

    /// The one cell of an experiment without factors is `base`, and `all` (what `show`
    /// called it before) still names it; in an experiment with factors `all` names nothing.
    #[test]
    fn the_cell_of_an_experiment_without_factors_is_named_base_or_all() {
        let (with_factors, _) = loaded_3x2x2();
        let runs: Vec<Run> = (1..=2)
            .map(|id| Run {
                id,
                cell_levels: serde_json::json!({}),
                ..with_factors.runs[0].clone()
            })
            .collect();
        let plain = Loaded {
            factors: Vec::new(),
            cells: group(&runs, &[]),
            runs,
            experiment: with_factors.experiment.clone(),
            not_run: None,
            runs_fio: true,
        };
        for want in ["base", "all"] {
            let cell = crate::analysis::over_time::named_cell(&plain, want).unwrap();
            assert_eq!(cell.ok, [1, 2]);
        }
        assert!(crate::analysis::over_time::named_cell(&with_factors, "all").is_err());
    }

    fn loaded_3x2x2() -> (Loaded, Values) {
        let mut runs = Vec::new();
        let mut values = Values::new();
        let mut id = 0;
        for rep in 0..4 {
            for a in ["1", "2", "4"] {
                for b in ["x", "y"] {
                    for c in ["p", "q"] {
                        id += 1;
                        runs.push(Run {
                            id,
                            experiment_id: 1,
                            cell_key: String::new(),
                            cell_levels: serde_json::json!({"a": a, "b": b, "c": c}),
                            repetition: rep,
                            warmup: false,
                            start_unix: 0.0,
                            end_unix: 1.0,
                            status: RunStatus::Ok,
                        });
                        values.insert(id, 100.0 * a.parse::<f64>().unwrap() + rep as f64);
                    }
                }
            }
        }
        let factors = factors_of(&declared_factors("[factors]\na = [1, 2, 4]\n"), &runs);
        let cells = group(&runs, &factors);
        let experiment = Experiment {
            id: 1,
            name: "t".into(),
            seed: 0,
            created_unix: 0.0,
            host: "h".into(),
            kernel: "k".into(),
            tags: Vec::new(),
            status: "done".into(),
            part_of: None,
            runs_ok: runs.len() as u64,
            runs_failed: 0,
            runs_not_applicable: 0,
        };
        (
            Loaded {
                experiment,
                factors,
                cells,
                runs,
                not_run: None,
                runs_fio: true,
            },
            values,
        )
    }

    #[test]
    fn an_interval_reaching_below_zero_is_printed_and_explained() {
        let (loaded, mut values) = loaded_3x2x2();
        // The a=1 cells swing between 1 and 1000: a t-interval from 4 runs reaches below 0.
        for run in &loaded.runs {
            if run.cell_levels["a"] == "1" {
                values.insert(run.id, if run.repetition % 2 == 0 { 1.0 } else { 1000.0 });
            }
        }
        let mc = summarise(&loaded, "read_iops", &values).unwrap();
        let text = detail_table(&loaded, &mc).render_text(200);
        assert!(text.contains("-417.3"), "{text}");
        let note = text
            .lines()
            .find(|l| l.starts_with("CI low below 0"))
            .expect(&text);
        assert!(note.contains("a=1,b=x,c=p (n = 4); "), "{note}");
        assert!(!note.contains("a=2"), "{note}");
        let (loaded, values) = loaded_3x2x2();
        let mc = summarise(&loaded, "read_iops", &values).unwrap();
        let text = detail_table(&loaded, &mc).render_text(200);
        assert!(!text.contains("below 0"), "{text}");
    }

    #[test]
    fn three_factors_give_one_pivot_per_level_of_the_third() {
        let (loaded, values) = loaded_3x2x2();
        let mc = summarise(&loaded, "read_iops", &values).unwrap();
        let lay = layout(&loaded, None, None).unwrap().unwrap();
        assert_eq!((lay.rows.name.as_str(), lay.cols.name.as_str()), ("a", "b"));
        let tables = pivot_tables(&loaded, &lay, &mc);
        assert_eq!(tables.len(), 2);
        assert!(tables[1].title.as_deref().unwrap().ends_with("(c=q)"));
        let text = tables[0].render_text(80);
        // a = 1: values 100..103, mean 101.5
        assert!(text.contains("101.5"), "{text}");
        let lay = layout(&loaded, Some("c"), Some("a")).unwrap().unwrap();
        assert_eq!(lay.fixed.len(), 1);
        assert_eq!(pivot_tables(&loaded, &lay, &mc).len(), 2);
        assert!(layout(&loaded, Some("a"), Some("a")).is_err());
        assert!(layout(&loaded, Some("zz"), None).is_err());
    }
}

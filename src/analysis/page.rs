//! `iolab report ID`: everything about one experiment on one offline page — where it ran and
//! what could make its numbers noisy (preflight findings), the tables `show` prints, each
//! factor's levels compared against its first level (the question the experiment was run to
//! answer, with CIs, p-values and verdicts over one Benjamini–Hochberg family), and the charts.
//! A chart or section that cannot be made says why instead of disappearing.

use serde::Serialize;

use crate::report::html;
use crate::store::time::format_utc;
use crate::store::Store;

use super::cells::{group, CellRuns, Factor};
use super::compare::{compare_cells, long_table, Compared};
use super::metrics::{self, Values};
use super::plots::{plot, Kind, PlotRequest};
use super::show::{detail_table, layout, load, pivot_tables, summarise, Loaded};

#[derive(Debug, Clone, Default)]
pub(crate) struct ReportOptions {
    pub metrics: Vec<String>,
    pub min_effect_pct: f64,
    /// The cell whose per-second series the page draws (default: the first with series).
    pub cell: Option<String>,
}

/// What went into the page, for `--json` and tests.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ReportSummary {
    pub experiment: i64,
    pub metrics: Vec<String>,
    pub tables: usize,
    pub comparisons: usize,
    pub figures: Vec<String>,
    pub missing_figures: Vec<String>,
    pub bytes: usize,
}

/// Each varying factor's levels against its first level, matched on the other factors.
pub(crate) fn factor_comparisons(
    loaded: &Loaded,
    chosen: &[(String, Vec<Values>)],
    min_effect_pct: f64,
) -> anyhow::Result<(Vec<Compared>, Vec<String>)> {
    let mut all = Vec::new();
    let mut notes = Vec::new();
    let triples: Vec<(String, Values, Values)> = chosen
        .iter()
        .map(|(m, v)| (m.clone(), v[0].clone(), v[0].clone()))
        .collect();
    // A metric asked for that is neither work done nor a cost (a queue size, a trace's
    // counts) is compared for change alone: the page has no `--better` to say which side is
    // better, and one such metric refused the whole page.
    let undirected: std::collections::BTreeMap<String, crate::stats::direction::Direction> =
        triples
            .iter()
            .filter(|(m, _, _)| crate::metrics::direction(m).is_none())
            .map(|(m, _, _)| (m.clone(), crate::stats::direction::Direction::NoDirection))
            .collect();
    for f in loaded.varying() {
        let others: Vec<Factor> = loaded
            .factors
            .iter()
            .filter(|o| o.name != f.name)
            .cloned()
            .collect();
        let runs_at = |level: &str| -> Vec<CellRuns> {
            let runs: Vec<_> = loaded
                .runs
                .iter()
                .filter(|r| {
                    super::cells::run_levels(r)
                        .get(&f.name)
                        .is_some_and(|l| l == level)
                })
                .cloned()
                .collect();
            group(&runs, &others)
        };
        let base_level = &f.levels[0];
        let base = runs_at(base_level);
        for level in &f.levels[1..] {
            let cand = runs_at(level);
            let (mut cmp, skipped) =
                compare_cells(&base, &cand, &triples, min_effect_pct, &undirected)?;
            for c in &mut cmp {
                let at = if c.cell == super::import::BASE_CELL {
                    String::new()
                } else {
                    format!(" at {}", c.cell)
                };
                c.group = format!("{}: {base_level} -> {level}", f.name);
                c.cell = format!("{}{at}", c.group);
                c.short_cell = c.cell.clone();
            }
            notes.extend(
                skipped
                    .into_iter()
                    .map(|s| format!("{}: {base_level} -> {level}: {s}", f.name)),
            );
            all.extend(cmp);
        }
    }
    // One family for the whole page: re-adjust across factors.
    let mut cmps: Vec<_> = all.iter().map(|c| c.comparison.clone()).collect();
    crate::stats::compare::adjust_family(&mut cmps);
    for (o, c) in all.iter_mut().zip(cmps) {
        o.comparison = c;
    }
    Ok((all, notes))
}

/// Environment entries about the run itself (key, label), shown with the experiment's own
/// rows rather than among the preflight findings.
const ABOUT_THE_RUN: [(&str, &str); 2] = [("target", "target"), ("part_of", "part of")];

fn environment_section(store: &Store, loaded: &Loaded) -> anyhow::Result<String> {
    let e = &loaded.experiment;
    let mut out = String::from("<section id=\"environment\">\n<h2>Environment</h2>\n");
    out.push_str("<table class=\"meta\">\n<tbody>\n");
    let env = store.environment(e.id)?;
    let mut rows: Vec<(&str, String)> = vec![
        ("experiment", format!("{} \"{}\"", e.id, e.name)),
        ("status", e.status.clone()),
        ("created (UTC)", format_utc(e.created_unix)),
        ("host", e.host.clone()),
        ("kernel", e.kernel.clone()),
        ("seed", e.seed.to_string()),
        (
            "runs",
            format!(
                "{} ok, {} failed, {} not applicable",
                e.runs_ok, e.runs_failed, e.runs_not_applicable
            ),
        ),
        ("factors", loaded.factor_list()),
    ];
    if !e.tags.is_empty() {
        rows.push(("tags", e.tags.join(", ")));
    }
    if let Some(n) = &loaded.not_run {
        rows.push(("not run", n.text()));
    }
    // What the run recorded about itself, not about the machine: shown with the experiment.
    for (key, label) in ABOUT_THE_RUN {
        if let Some(f) = env.iter().find(|f| f.key == key) {
            rows.push((label, f.value.clone()));
        }
    }
    for (k, v) in rows {
        out.push_str(&format!(
            "<tr><th>{}</th><td>{}</td></tr>\n",
            html::escape(k),
            html::escape(&v)
        ));
    }
    out.push_str("</tbody>\n</table>\n");
    out.push_str("<h3 id=\"preflight\">Preflight findings</h3>\n");
    if env.is_empty() {
        out.push_str(
            "<p class=\"missing\">No environment findings were recorded with this experiment \
             (imported runs carry none).</p>\n",
        );
    } else {
        out.push_str(
            "<table class=\"preflight\">\n<thead><tr><th>what</th><th>value</th>\
             <th>severity</th><th>advice</th></tr></thead>\n<tbody>\n",
        );
        // The stored plan is shown as where each cell ran (below), not as a finding.
        let finding = |f: &&crate::store::EnvironmentEntry| {
            f.key != "plan" && !ABOUT_THE_RUN.iter().any(|(key, _)| f.key == *key)
        };
        for f in env.iter().filter(finding) {
            let sev = f.severity.as_deref().unwrap_or("");
            let class = match sev {
                "warn" | "warning" => " class=\"warn\"",
                "bad" | "error" | "critical" => " class=\"bad\"",
                _ => "",
            };
            out.push_str(&format!(
                "<tr{class}><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                html::escape(&f.key),
                long_value(&f.value),
                html::escape(sev),
                html::escape(f.advice.as_deref().unwrap_or(""))
            ));
        }
        out.push_str("</tbody>\n</table>\n");
    }
    let placed = super::placements::from_environment(&env);
    if !placed.is_empty() {
        out.push_str(
            "<h3 id=\"placements\">Where the workload ran</h3>\n<table>\n<thead><tr>\
             <th>cells</th><th>CPUs, and why</th></tr></thead>\n<tbody>\n",
        );
        for p in &placed {
            out.push_str(&format!(
                "<tr><td>{}</td><td>{}</td></tr>\n",
                html::escape(&p.cells),
                html::escape(&p.why)
            ));
        }
        out.push_str("</tbody>\n</table>\n");
    }
    out.push_str("</section>\n");
    Ok(out)
}

/// Long values (a process list) fold into a `<details>`: readable without
/// scripts, out of the way until opened.
fn long_value(value: &str) -> String {
    const SHORT: usize = 120;
    if value.chars().count() <= SHORT {
        return html::escape(value);
    }
    let head: String = value.chars().take(SHORT).collect();
    format!(
        "<details><summary>{}&hellip; ({} characters)</summary><pre>{}</pre></details>",
        html::escape(&head),
        value.chars().count(),
        html::escape(value)
    )
}

fn missing(what: &str, why: &anyhow::Error) -> String {
    format!(
        "<p class=\"missing\">{}: not drawn: {}</p>\n",
        html::escape(what),
        html::escape(&format!("{why:#}"))
    )
}

/// Builds the page; returns the HTML and what went into it.
/// The report written to a file: what `iolab report` prints (the page's size and what went
/// into it as text; the summary as JSON).
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub(crate) struct Written {
    pub summary: ReportSummary,
    #[serde(skip)]
    pub path: std::path::PathBuf,
    #[serde(skip)]
    pub page_bytes: usize,
}

impl crate::output::Render for Written {
    fn text(&self) -> String {
        let s = &self.summary;
        format!(
            "wrote {} ({} bytes: {} tables, {} comparisons, {} charts{})\n",
            self.path.display(),
            self.page_bytes,
            s.tables,
            s.comparisons,
            s.figures.len(),
            if s.missing_figures.is_empty() {
                String::new()
            } else {
                format!("; not drawn: {}", s.missing_figures.join(", "))
            }
        )
    }
}

/// Builds experiment `id`'s report from the database at `db` and writes the page to `path`.
pub(crate) fn write_report(
    db: &std::path::Path,
    id: i64,
    opts: &ReportOptions,
    path: &std::path::Path,
) -> anyhow::Result<Written> {
    if !(opts.min_effect_pct.is_finite() && opts.min_effect_pct >= 0.0) {
        anyhow::bail!(
            "--min-effect {} must be a percentage >= 0",
            opts.min_effect_pct
        );
    }
    let store = Store::open_existing(db)?;
    let (page, summary) = report(&store, id, opts)?;
    crate::sys::own_dir::write_named_file(path, page.as_bytes()).map_err(anyhow::Error::msg)?;
    Ok(Written {
        summary,
        path: path.to_path_buf(),
        page_bytes: page.len(),
    })
}

pub(crate) fn report(
    store: &Store,
    id: i64,
    opts: &ReportOptions,
) -> anyhow::Result<(String, ReportSummary)> {
    let loaded = load(store, id)?;
    // A cell named for the per-second charts must exist: else they would quietly be left out.
    if let Some(want) = &opts.cell {
        super::over_time::named_cell(&loaded, want)?;
    }
    let ok = loaded.ok_run_ids();
    let label = format!("experiment {id}");
    let mut p = Page {
        body: format!(
            "<h1>iolab report: experiment {} &ldquo;{}&rdquo;</h1>\n",
            id,
            html::escape(&loaded.experiment.name)
        ),
        summary: ReportSummary {
            experiment: id,
            metrics: Vec::new(),
            tables: 0,
            comparisons: 0,
            figures: Vec::new(),
            missing_figures: Vec::new(),
            bytes: 0,
        },
    };
    p.body.push_str(&environment_section(store, &loaded)?);
    p.body
        .push_str(&super::basis::html(&super::basis::summarise(
            &store.measured_run_bases(id)?,
        )));
    if ok.is_empty() {
        p.body.push_str(&format!(
            "<p class=\"missing\">No successful runs: {} failed, {} not applicable.</p>\n",
            loaded.experiment.runs_failed, loaded.experiment.runs_not_applicable
        ));
        let reasons = loaded.failure_reasons();
        if !reasons.is_empty() {
            p.body.push_str("<p>Why they failed:</p>\n<ul>\n");
            for (why, n) in reasons {
                p.body.push_str(&format!(
                    "<li>{} ({n} run{})</li>\n",
                    html::escape(why),
                    if n == 1 { "" } else { "s" }
                ));
            }
            p.body.push_str("</ul>\n");
        }
    } else {
        let chosen = metrics::choose(store, &[(&label, &ok)], &opts.metrics)?;
        p.summary.metrics = chosen.iter().map(|(m, _)| m.clone()).collect();
        let hint = metrics::per_host_hint(store, &[(&label, &ok)], &opts.metrics, &chosen)?;
        p.results(store, &loaded, &chosen, hint.as_deref())?;
        p.comparisons(&loaded, &chosen, opts.min_effect_pct)?;
        p.charts(store, &loaded, &chosen, opts);
    }
    p.body.push_str(&format!(
        "<footer>Made by iolab {} from {}. Medians, CIs and p-values as described under each \
         table; nothing on this page loads anything from a network.</footer>\n",
        env!("CARGO_PKG_VERSION"),
        html::escape(store.path())
    ));
    let page = html::page(
        &format!("iolab report: experiment {id} {}", loaded.experiment.name),
        &p.body,
    );
    p.summary.bytes = page.len();
    Ok((page, p.summary))
}

/// The page's body as written so far, and the summary of what it holds.
struct Page {
    body: String,
    summary: ReportSummary,
}

impl Page {
    /// A chart, or why it could not be drawn (`key` names it in the summary either way).
    fn figure(
        &mut self,
        svg: anyhow::Result<String>,
        caption: &str,
        missing_as: &str,
        key: String,
    ) {
        match svg {
            Ok(svg) => {
                self.body.push_str(&html::figure(&svg, caption));
                self.summary.figures.push(key);
            }
            Err(e) => {
                self.body.push_str(&missing(missing_as, &e));
                self.summary.missing_figures.push(key);
            }
        }
    }

    /// Per metric: its pivot tables, the per-cell table and the bars of its means.
    fn results(
        &mut self,
        store: &Store,
        loaded: &Loaded,
        chosen: &[(String, Vec<Values>)],
        hint: Option<&str>,
    ) -> anyhow::Result<()> {
        let lay = layout(loaded, None, None)?;
        self.body
            .push_str("<section id=\"results\">\n<h2>Results</h2>\n");
        if let Some(hint) = hint {
            self.body.push_str(&format!(
                "<p class=\"missing\">{}</p>\n",
                html::escape(hint)
            ));
        }
        for (m, vals) in chosen {
            let mc = summarise(loaded, m, &vals[0])?;
            self.body
                .push_str(&format!("<h3>{}</h3>\n", html::escape(m)));
            if let Some(l) = &lay {
                for t in pivot_tables(loaded, l, &mc) {
                    self.body.push_str(&html::table(&t, "pivot"));
                    self.summary.tables += 1;
                }
            }
            self.body
                .push_str(&html::table(&detail_table(loaded, &mc), "cells"));
            self.summary.tables += 1;
            let req = PlotRequest {
                metric: Some(m.clone()),
                ..PlotRequest::new(Kind::Bars)
            };
            self.figure(
                plot(store, loaded, &req),
                &format!("{m}: mean per cell, 95% CI"),
                &format!("bars of {m}"),
                format!("bars {m}"),
            );
        }
        self.body.push_str("</section>\n");
        Ok(())
    }

    /// Each level of each factor against the factor's first level.
    fn comparisons(
        &mut self,
        loaded: &Loaded,
        chosen: &[(String, Vec<Values>)],
        min_effect_pct: f64,
    ) -> anyhow::Result<()> {
        self.body
            .push_str("<section id=\"comparisons\">\n<h2>Comparisons between levels</h2>\n");
        let (cmps, notes) = factor_comparisons(loaded, chosen, min_effect_pct)?;
        if cmps.is_empty() {
            self.body.push_str(
                "<p class=\"missing\">Nothing to compare: no factor has two levels with \
                 successful runs in matching cells.</p>\n",
            );
        } else {
            let mut t = long_table(
                "each level against the factor's first level (baseline)",
                &cmps,
            );
            t.notes.extend(notes);
            self.body.push_str(&html::table(&t, "comparisons"));
            self.summary.comparisons = cmps.len();
        }
        self.body.push_str("</section>\n");
        Ok(())
    }

    /// The charts beyond the bars: metric against a numeric factor, latency CDF, interrupts
    /// and CPU time per CPU, and one cell's per-second series.
    fn charts(
        &mut self,
        store: &Store,
        loaded: &Loaded,
        chosen: &[(String, Vec<Values>)],
        opts: &ReportOptions,
    ) {
        self.body
            .push_str("<section id=\"plots\">\n<h2>Charts</h2>\n");
        let mut extra: Vec<(String, PlotRequest)> = Vec::new();
        if loaded.varying().iter().any(|f| {
            f.levels
                .iter()
                .all(|l| super::cells::numeric_value(l).is_some())
        }) {
            extra.push((
                "metric against a numeric factor".into(),
                PlotRequest {
                    metric: Some(chosen[0].0.clone()),
                    ..PlotRequest::new(Kind::Lines)
                },
            ));
        }
        // fio's figures: the latency CDF and IOPS per second, of reads if the runs did any.
        // A program engine's runs have neither, so they are not tried (nor reported missing);
        // its own per-interval series, if it keeps one (iperf3), is drawn over time instead.
        let ok = loaded.ok_run_ids();
        let fio_dir = [crate::metrics::READ_IOPS, crate::metrics::WRITE_IOPS]
            .into_iter()
            .map(|m| m.name)
            .find(|m| {
                // fio stores both directions: a write job's read_iops are 0.
                store
                    .metric_values(&ok, m)
                    .is_ok_and(|v| v.iter().any(|(_, x)| *x != 0.0))
            });
        if let Some(dir) = fio_dir {
            extra.push((
                "completion latency CDF".into(),
                PlotRequest {
                    metric: Some(dir.into()),
                    ..PlotRequest::new(Kind::Latency)
                },
            ));
        }
        extra.push((
            "interrupts per CPU over time".into(),
            PlotRequest::new(Kind::Heatmap),
        ));
        extra.push(("CPU time per CPU".into(), PlotRequest::new(Kind::Cpu)));
        // Per-second series of one cell: its runs' throughput, and one run's interrupts
        // per CPU, on fio's measured interval (a program engine's sampled span).
        let per_second = fio_dir
            .map(str::to_string)
            .or_else(|| super::over_time::engine_series(store, loaded));
        if let Some(metric) = per_second {
            extra.push((
                format!("{metric} per second, per run"),
                PlotRequest {
                    metric: Some(metric),
                    cell: opts.cell.clone(),
                    ..PlotRequest::new(Kind::OverTime)
                },
            ));
        }
        extra.push((
            "interrupts per CPU per second".to_string(),
            PlotRequest {
                cell: opts.cell.clone(),
                ..PlotRequest::new(Kind::IrqOverTime)
            },
        ));
        for (what, req) in extra {
            self.figure(plot(store, loaded, &req), &what, &what, what.clone());
        }
        self.body.push_str("</section>\n");
    }
}

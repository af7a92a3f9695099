//! `iolab compare A B`: two groups of runs — two experiments, or two tag selections such as
//! `kernel=6.1` vs `kernel=6.6` — matched cell by cell on their factor levels, and for each
//! cell and metric the change with its CI, the p-values and a verdict. All comparisons shown
//! at once form one family for the Benjamini–Hochberg adjustment, so looking at 40 cells does
//! not manufacture two "significant" ones by chance.
//!
//! The same matching serves `report`'s comparisons between the levels of one factor inside an
//! experiment: there the compared factor is left out of the cell key. A selector may name a
//! factor level as well as a tag (`scheduler=none` vs `scheduler=mq-deadline`): the factors a
//! selector fixes are left out of the cell key in the same way, so the other factors' cells
//! are matched across the two levels.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::bail;
use serde::Serialize;

use crate::report::comparisons::{
    across_note, across_row, comparison_table_in_family, ComparisonRow,
};
use crate::report::table::{Cell, Column, Table, MAX_WIDTH};
use crate::stats::across::{across_cells, AcrossCells};
use crate::stats::compare::{adjust_family, compare, CompareOptions, Comparison};
use crate::stats::direction::Direction;
use crate::store::{Run, Store};

use super::basis::Finding;

use super::cells::{declared_factors, factors_of, group, CellRuns, Factor};
use super::metrics::{self, Values};

/// What `A` or `B` names.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Selector {
    Experiment(i64),
    /// `name=value` pairs that must all hold (run tags or factor levels); `experiment=N`
    /// restricts to one experiment.
    Tags {
        tags: Vec<(String, String)>,
        experiment: Option<i64>,
    },
}

impl Selector {
    /// A selector's text read; what cannot be one is a usage error (exit 2), apart from a
    /// selector that names nothing stored (`resolve`).
    pub(crate) fn parse(text: &str) -> anyhow::Result<Selector> {
        Self::parse_text(text).map_err(crate::cli::usage)
    }

    fn parse_text(text: &str) -> Result<Selector, String> {
        let text = text.trim();
        if let Ok(id) = text.parse::<i64>() {
            return Ok(Selector::Experiment(id));
        }
        let mut tags = Vec::new();
        let mut experiment = None;
        for part in parts(text).map_err(|e| format!("selector {text:?}: {e}"))? {
            let Some(name) = &part.name else {
                return Err(format!(
                    "selector {text:?}: {:?} is neither an experiment id nor NAME=VALUE \
                     (e.g. 3, kernel=6.1, or variant=stock,host=db7; a value holding ',' \
                     goes in double quotes, as tables print it: cpus_allowed=\"0,1\")",
                    part.text
                ));
            };
            let (name, value) = (name.trim(), part.value.as_str());
            if name.is_empty() || value.is_empty() {
                return Err(format!(
                    "selector {text:?}: {:?} needs a name and a value",
                    part.text
                ));
            }
            if name == crate::store::tags::EXPERIMENT {
                experiment = Some(value.parse().map_err(|_| {
                    format!("selector {text:?}: experiment={value:?} is not an id")
                })?);
            } else {
                // The rule tags were stored under (factor names follow it too), but for
                // commas: no tag holds one, a factor level may (`cpus_allowed = ["0,1"]`).
                crate::store::tags::check_name(name)
                    .and_then(|()| crate::store::tags::check_printable(name, value))
                    .map_err(|e| format!("selector {text:?}: {e}"))?;
                tags.push((name.to_string(), value.to_string()));
            }
        }
        Ok(Selector::Tags { tags, experiment })
    }
}

/// One comma-separated part of a selector: its text as written, and its value unquoted.
struct Part {
    text: String,
    name: Option<String>,
    value: String,
}

/// Splits a selector at the commas outside double quotes. A value in double quotes, as cell
/// labels print a level holding `,`, `=`, a quote or a space (`cpus_allowed="0,1"`), is
/// unquoted, `\"` and `\\` inside it read as `"` and `\`; any other value is trimmed.
fn parts(text: &str) -> Result<Vec<Part>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        let (name, after) = match rest.split_once('=') {
            Some((n, a)) if !n.contains(',') => (Some(n.to_string()), a),
            _ => (None, rest),
        };
        let (value, tail) = if let Some(quoted) = after.trim_start().strip_prefix('"') {
            let (value, len) = unquote(quoted)?;
            let tail = quoted[len..].trim_start();
            if !(tail.is_empty() || tail.starts_with(',')) {
                return Err(format!("text after the closing quote: {tail:?}"));
            }
            (value, tail)
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_string(), &after[end..])
        };
        let text_len = rest.len() - tail.len();
        out.push(Part {
            text: rest[..text_len].to_string(),
            name,
            value,
        });
        match tail.strip_prefix(',') {
            Some(next) => rest = next,
            None => return Ok(out),
        }
    }
}

/// The value of a quoted string whose opening quote is already read, and the bytes it took
/// up to and with its closing quote.
fn unquote(quoted: &str) -> Result<(String, usize), String> {
    let mut value = String::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((value, i + 1)),
            '\\' => match chars.next() {
                Some((_, e)) => value.push(e),
                None => break,
            },
            c => value.push(c),
        }
    }
    Err(format!("a quote opened and not closed: \"{quoted}"))
}

/// A resolved selector: its runs (non-warm-up, any status) and a label for titles.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub label: String,
    pub runs: Vec<Run>,
    /// Declared factor order of the experiments involved (first experiment first).
    pub declared: Vec<Factor>,
    /// Factors whose level the selector fixed (left out of the cell key when comparing).
    pub fixed: Vec<String>,
}

impl Group {
    pub(crate) fn ok_ids(&self) -> Vec<i64> {
        self.runs
            .iter()
            .filter(|r| r.status == crate::store::RunStatus::Ok)
            .map(|r| r.id)
            .collect()
    }
}

fn experiment_ids(store: &Store) -> anyhow::Result<String> {
    let ids: Vec<String> = store
        .experiments()?
        .iter()
        .map(|e| e.id.to_string())
        .collect();
    Ok(if ids.is_empty() {
        "none".into()
    } else {
        ids.join(", ")
    })
}

/// Resolves a selector to its runs, with errors that name what exists.
pub(crate) fn resolve(store: &Store, text: &str) -> anyhow::Result<Group> {
    let sel = Selector::parse(text)?;
    let mut fixed = Vec::new();
    let (runs, label) = match &sel {
        Selector::Experiment(id) => {
            if store.experiment(*id).is_err() {
                bail!(
                    "no experiment with id {id} in {}; experiments: {}",
                    store.path(),
                    experiment_ids(store)?
                );
            }
            let runs: Vec<Run> = store.runs(*id)?.into_iter().filter(|r| !r.warmup).collect();
            (runs, format!("experiment {id}"))
        }
        Selector::Tags { tags, experiment } => {
            if let Some(id) = experiment {
                if store.experiment(*id).is_err() {
                    bail!(
                        "selector {text:?}: no experiment with id {id}; experiments: {}",
                        experiment_ids(store)?
                    );
                }
            }
            let names = store.tag_names()?;
            // A tag's value selects the runs with that tag and those whose factor of that name
            // is at that level (a tag named like a factor of other experiments, e.g. an
            // import's `--tag scheduler=none`, hid `scheduler=none` of every experiment); any
            // other value of its name, a factor's level.
            let mut tag_pairs = Vec::new();
            let mut level_pairs = Vec::new();
            for (n, v) in tags {
                if names.contains(n) && store.tag_values(n)?.contains(v) {
                    tag_pairs.push((n, v));
                } else {
                    level_pairs.push((n, v));
                }
            }
            let ids: Vec<i64> = match experiment {
                Some(id) => vec![*id],
                None => store.experiments()?.iter().map(|e| e.id).collect(),
            };
            let mut runs = Vec::new();
            for id in ids {
                runs.extend(store.runs(id)?);
            }
            runs.retain(|r| !r.warmup);
            for (n, v) in &tag_pairs {
                let tagged: BTreeSet<i64> = store.select_runs(&[(n, v)])?.into_iter().collect();
                runs.retain(|r| {
                    tagged.contains(&r.id)
                        || super::cells::run_levels(r).get(n.as_str()) == Some(*v)
                });
                // Runs kept by their level: a factor this side fixes, as a level pair's.
                if runs.iter().any(|r| !tagged.contains(&r.id)) {
                    fixed.push(n.to_string());
                }
            }
            for (n, v) in &level_pairs {
                let levels: BTreeSet<String> = runs
                    .iter()
                    .filter_map(|r| super::cells::run_levels(r).remove(n.as_str()))
                    .collect();
                if levels.is_empty() && names.contains(*n) {
                    bail!(
                        "selector {text:?}: no run has {n}={v}; {n} takes: {}",
                        store.tag_values(n)?.join(", ")
                    );
                }
                if levels.is_empty() {
                    bail!(
                        "selector {text:?}: {n:?} is neither a run tag nor a factor of the selected \
                         runs; tags present: {}",
                        if names.is_empty() {
                            "none".into()
                        } else {
                            names.join(", ")
                        }
                    );
                }
                if !levels.contains(v.as_str()) {
                    bail!(
                        "selector {text:?}: factor {n} has no level {v:?}; its levels: {}",
                        levels
                            .iter()
                            .map(|l| crate::experiment::plan::quote_label(l))
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                }
                runs.retain(|r| super::cells::run_levels(r).get(n.as_str()) == Some(v));
            }
            fixed.extend(level_pairs.iter().map(|(n, _)| n.to_string()));
            (runs, text.to_string())
        }
    };
    if runs.is_empty() {
        bail!("{label} selects no runs (each part exists, but no run matches all of them)");
    }
    let exps: BTreeSet<i64> = runs.iter().map(|r| r.experiment_id).collect();
    let mut declared: Vec<Factor> = Vec::new();
    for id in exps {
        let (text, _) = store.experiment_texts(id)?;
        for f in declared_factors(&text) {
            if !declared.iter().any(|d| d.name == f.name) {
                declared.push(f);
            }
        }
    }
    Ok(Group {
        label,
        runs,
        declared,
        fixed,
    })
}

#[derive(Debug, Clone)]
pub(crate) struct CompareRequest {
    pub metrics: Vec<String>,
    /// Minimum effect in percent (1.0 = 1%).
    pub min_effect_pct: f64,
    /// Which way is better, for metrics whose name does not say (`dev_avg_qu_sz`, trace
    /// counts); also overrides a name's own direction.
    pub better: std::collections::BTreeMap<String, crate::stats::direction::Direction>,
}

impl Default for CompareRequest {
    fn default() -> Self {
        CompareRequest {
            metrics: Vec::new(),
            min_effect_pct: 1.0,
            better: Default::default(),
        }
    }
}

/// One compared cell and metric.
#[derive(Debug, Clone)]
pub(crate) struct Compared {
    /// Which comparison the cell belongs to when one family holds several (`report`: the
    /// factor and its two levels); empty for `compare`. Geomean rows summarise per group
    /// and metric.
    pub group: String,
    pub cell: String,
    /// Levels only (`2/near`), for text tables whose heading names the factors.
    pub short_cell: String,
    pub metric: String,
    pub comparison: Comparison,
}

/// Compares matched cells for every metric; `values` are (baseline, candidate) per metric.
/// Cells where a side has no value for a metric are skipped (listed in the returned notes).
pub(crate) fn compare_cells(
    base: &[CellRuns],
    cand: &[CellRuns],
    metrics: &[(String, Values, Values)],
    min_effect_pct: f64,
    better: &std::collections::BTreeMap<String, crate::stats::direction::Direction>,
) -> anyhow::Result<(Vec<Compared>, Vec<String>)> {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let pairs: Vec<(&CellRuns, &CellRuns)> = base
        .iter()
        .filter_map(|b| cand.iter().find(|c| c.levels == b.levels).map(|c| (b, c)))
        .collect();
    let mut measurable = Vec::new();
    let mut not_comparable = Vec::new();
    for (b, c) in pairs {
        let why = |x: &CellRuns, side: &str| {
            x.ok.is_empty().then(|| match x.not_applicable_reason() {
                Some(r) => format!("not applicable in the {side}: {r}"),
                None => format!("every {side} run failed"),
            })
        };
        // Not applicable for one reason on both sides is said once, of both.
        let both = b
            .not_applicable_reason()
            .filter(|r| c.not_applicable_reason() == Some(r));
        let reason = match both {
            Some(r) => Some(format!("not applicable on either side: {r}")),
            None => why(b, "baseline").or_else(|| why(c, "candidate")),
        };
        match reason {
            Some(reason) => not_comparable.push((reason, b.label())),
            None => measurable.push((b, c)),
        }
    }
    for (why, cells) in super::show::by_reason(not_comparable) {
        skipped.push(format!("{cells} ({why})"));
    }
    // Gather the work first, then compare on every core: each comparison is independent
    // (its bootstrap has its own recorded seed), and the bootstrap dominates on cells with
    // hundreds of runs.
    let mut jobs = Vec::new();
    for (metric, bv, cv) in metrics {
        let direction = better
            .get(metric)
            .copied()
            .or_else(|| crate::metrics::direction(metric));
        let Some(direction) = direction else {
            bail!(
                "{metric} is neither work done nor a cost (no better direction), so a \
                 change cannot be called improved or regressed; say which way is better \
                 with `--better {metric}=higher` (or `=lower`), ask only whether it \
                 changed with `--better {metric}=none`, or see its values with `iolab show`"
            );
        };
        let mut opts = CompareOptions::new(direction);
        opts.min_effect = min_effect_pct / 100.0;
        opts.resolution = crate::metrics::resolution(metric);
        for &(b, c) in &measurable {
            let pick = |cell: &CellRuns, vals: &Values| -> Vec<f64> {
                cell.ok
                    .iter()
                    .filter_map(|id| vals.get(id).copied())
                    .collect()
            };
            let (x, y) = (pick(b, bv), pick(c, cv));
            if x.is_empty() || y.is_empty() {
                let side = if x.is_empty() {
                    "baseline"
                } else {
                    "candidate"
                };
                skipped.push(format!(
                    "{} {metric}: no values on the {side} side",
                    b.label()
                ));
                continue;
            }
            jobs.push((b, metric, opts.clone(), x, y));
        }
    }
    let results = super::map_on_every_core(&jobs, |(_, _, opts, x, y)| compare(x, y, opts));
    for ((b, metric, ..), result) in jobs.iter().zip(results) {
        let comparison = result.map_err(|e| anyhow::anyhow!("{} {metric}: {e}", b.label()))?;
        out.push(Compared {
            group: String::new(),
            cell: b.label(),
            short_cell: b.short_label(),
            metric: (*metric).clone(),
            comparison,
        });
    }
    let mut cmps: Vec<Comparison> = out.iter().map(|c| c.comparison.clone()).collect();
    adjust_family(&mut cmps);
    for (o, c) in out.iter_mut().zip(cmps) {
        o.comparison = c;
    }
    Ok((out, skipped))
}

/// The summary across cells of one group and metric; in JSON the `AcrossCells` with its
/// `metric` (and `group`, when there is one).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Across {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub group: String,
    pub metric: String,
    #[serde(flatten)]
    pub summary: AcrossCells,
}

impl Across {
    /// The row label: `geomean`, or `GROUP: geomean` inside a report's family.
    pub(crate) fn label(&self) -> String {
        if self.group.is_empty() {
            "geomean".to_string()
        } else {
            format!("{}: geomean", self.group)
        }
    }
}

/// One summary per group and metric that has at least two cells (with one cell the row
/// would repeat it), in the order the groups first appear.
pub(crate) fn across(compared: &[Compared]) -> Vec<Across> {
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for c in compared {
        if !keys.contains(&(c.group.as_str(), c.metric.as_str())) {
            keys.push((&c.group, &c.metric));
        }
    }
    keys.into_iter()
        .filter_map(|(group, metric)| {
            let cells: Vec<&Comparison> = compared
                .iter()
                .filter(|c| c.group == group && c.metric == metric)
                .map(|c| &c.comparison)
                .collect();
            let level = 1.0 - cells.first()?.alpha;
            (cells.len() >= 2).then(|| Across {
                group: group.to_string(),
                metric: metric.to_string(),
                summary: across_cells(&cells, level),
            })
        })
        .collect()
}

/// How many comparisons the Benjamini-Hochberg adjustment counted.
fn family_size(compared: &[Compared]) -> usize {
    compared.iter().filter(|c| c.comparison.in_family()).count()
}

/// Adds each summary's row after the last row of its group and metric (`rows[i]` is the
/// table row of `compared[i]`), and the legend when any row was added.
fn add_across_rows(table: &mut Table, compared: &[Compared], with_metric: bool) {
    let summaries = across(compared);
    let mut at: Vec<(usize, Vec<Cell>)> = summaries
        .iter()
        .filter_map(|a| {
            let last = compared
                .iter()
                .rposition(|c| c.group == a.group && c.metric == a.metric)?;
            let metric = with_metric.then_some(a.metric.as_str());
            Some((last + 1, across_row(&a.label(), metric, &a.summary)))
        })
        .collect();
    if let Some(first) = summaries.first() {
        table.notes.push(across_note(first.summary.ci_level));
    }
    // From the bottom up, so earlier positions stay valid.
    at.sort_by_key(|(i, _)| std::cmp::Reverse(*i));
    for (i, mut row) in at {
        row.resize(table.columns.len(), Cell::Missing);
        table.rows.insert(i, row);
    }
}

/// Per-metric text tables over one family, in metric order, each ending in its geomean row.
pub(crate) fn tables(title_of: impl Fn(&str) -> String, compared: &[Compared]) -> Vec<Table> {
    let mut metrics: Vec<&str> = Vec::new();
    for c in compared {
        if !metrics.contains(&c.metric.as_str()) {
            metrics.push(&c.metric);
        }
    }
    let family = family_size(compared);
    metrics
        .iter()
        .map(|m| {
            let of_metric: Vec<Compared> = compared
                .iter()
                .filter(|c| c.metric == *m)
                .cloned()
                .collect();
            let rows: Vec<ComparisonRow> = of_metric
                .iter()
                .map(|c| ComparisonRow {
                    cell: c.short_cell.clone(),
                    metric: None,
                    comparison: &c.comparison,
                })
                .collect();
            let mut t = comparison_table_in_family(&title_of(m), metrics::unit(m), &rows, family);
            add_across_rows(&mut t, &of_metric, false);
            t
        })
        .collect()
}

/// All comparisons in one table with a metric column (CSV, HTML), with a geomean row after
/// each group and metric.
pub(crate) fn long_table(title: &str, compared: &[Compared]) -> Table {
    let rows: Vec<ComparisonRow> = compared
        .iter()
        .map(|c| ComparisonRow {
            cell: c.cell.clone(),
            metric: Some(c.metric.clone()),
            comparison: &c.comparison,
        })
        .collect();
    let mut t = comparison_table_in_family(title, None, &rows, family_size(compared));
    add_across_rows(&mut t, compared, true);
    t
}

/// `serialize_with` for the comparisons: each as `report::comparisons` writes a row, the full
/// `Comparison` with its `cell` and `metric`.
fn comparison_rows<S: serde::Serializer>(compared: &[Compared], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(compared.iter().map(|c| ComparisonRow {
        cell: c.cell.clone(),
        metric: Some(c.metric.clone()),
        comparison: &c.comparison,
    }))
}

/// Renders tables one after another with their footnotes merged at the end (the legends of
/// per-metric tables are the same; printing them once keeps a mail short).
pub(crate) fn render_tables(tables: &[Table]) -> String {
    let mut out = String::new();
    let mut notes: Vec<String> = Vec::new();
    for t in tables {
        let mut bare = t.clone();
        for n in bare.notes.drain(..) {
            if !notes.contains(&n) {
                notes.push(n);
            }
        }
        out.push('\n');
        out.push_str(&bare.render_text(MAX_WIDTH));
    }
    if !notes.is_empty() {
        out.push('\n');
        for n in notes {
            out.push_str(&crate::report::table::wrap(&n, MAX_WIDTH));
        }
    }
    out
}

/// What `compare` prints: the text and the CSV as rendered, and the typed `--json` document.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub(crate) struct CompareOutput {
    #[serde(skip)]
    pub text: String,
    /// Scripts have always seen this document's objects with their keys sorted (it was
    /// built with `json!`): `sorted_keys` keeps it byte for byte.
    #[serde(serialize_with = "crate::output::sorted_keys")]
    pub doc: CompareDoc,
    #[serde(skip)]
    pub csv: String,
}

/// `compare --json`: every comparison, per metric the summary across cells, the failed
/// cross-checks of both sides' runs, what each side selected, and the options that decided.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CompareDoc {
    #[serde(serialize_with = "comparison_rows")]
    pub comparisons: Vec<Compared>,
    pub across_cells: Vec<Across>,
    pub findings: Findings,
    pub baseline: Side,
    pub candidate: Side,
    pub min_effect_pct: f64,
    /// The user's `--better` directions (left out when none was given).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub better: BTreeMap<String, Direction>,
    /// How many comparisons have a p-value: the Benjamini-Hochberg family.
    pub family_size: usize,
    pub unmatched_cells: Vec<String>,
    pub skipped: Vec<String>,
    /// Runs both selectors chose (left out when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shared_runs: Vec<i64>,
    /// What the text prints before its tables: sides from different machines, a side
    /// pooling hosts, runs on both sides (left out when none; CSV has them on stderr).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The failed cross-checks of each side's runs.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Findings {
    pub baseline: Vec<Finding>,
    pub candidate: Vec<Finding>,
}

/// One side of a comparison: its selector, how many of its runs succeeded, and the hosts its
/// experiments ran on.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Side {
    pub selector: String,
    pub runs: usize,
    pub runs_ok: usize,
    pub hosts: BTreeSet<String>,
}

/// The hosts of the experiments a group's runs belong to.
fn hosts_of(store: &Store, g: &Group) -> anyhow::Result<BTreeSet<String>> {
    let exps: BTreeSet<i64> = g.runs.iter().map(|r| r.experiment_id).collect();
    exps.into_iter()
        .map(|id| Ok(store.experiment(id)?.host))
        .collect()
}

/// Warnings when machines mix into the comparison and the selectors do not pick hosts: the
/// two sides ran on different machines (`kernel=6.1` against `kernel=6.6` from two hosts
/// measures the hosts as well), or one side pools runs of several machines into its cells.
fn hosts_warnings(
    a: &str,
    b: &str,
    base: &BTreeSet<String>,
    cand: &BTreeSet<String>,
) -> Vec<String> {
    let names_hosts = |s: &str| s.split(',').any(|t| t.trim_start().starts_with("host="));
    if names_hosts(a) || names_hosts(b) {
        return Vec::new();
    }
    let list = |h: &BTreeSet<String>| h.iter().cloned().collect::<Vec<_>>().join(", ");
    if base.is_disjoint(cand) {
        return vec![format!(
            "warning: the baseline ran on {} and the candidate on {}: every change below is \
             also the difference between those machines; run both sides on one machine to see \
             the rest alone",
            list(base),
            list(cand)
        )];
    }
    [("baseline", base), ("candidate", cand)]
        .into_iter()
        .filter(|(_, hosts)| hosts.len() > 1)
        .map(|(side, hosts)| {
            format!(
                "warning: the {side}'s runs come from {} hosts ({}), and its cells mix them; add \
                 host=H to both selectors to compare on one machine",
                hosts.len(),
                list(hosts)
            )
        })
        .collect()
}

/// The targets a side's experiments drove, as their environment records them: a scratch
/// device is one whatever loop device it was given. Imported experiments record none.
fn targets_of(store: &Store, g: &Group) -> anyhow::Result<BTreeSet<String>> {
    let exps: BTreeSet<i64> = g.runs.iter().map(|r| r.experiment_id).collect();
    let mut out = BTreeSet::new();
    for id in exps {
        let target = store
            .environment(id)?
            .into_iter()
            .find(|e| e.key == "target")
            .map(|e| e.value);
        if let Some(t) = target {
            out.insert(if t.contains("(scratch") {
                "a scratch device".to_string()
            } else {
                t
            });
        }
    }
    Ok(out)
}

/// The two sides drove different targets (one experiment file run with `--device sda`, then
/// `--device nvme0n1`): each device's figures are its own, and its on, near and far are other
/// CPUs, though cells match by those words.
fn targets_warning(base: &BTreeSet<String>, cand: &BTreeSet<String>) -> Option<String> {
    let list = |t: &BTreeSet<String>| t.iter().cloned().collect::<Vec<_>>().join(", ");
    (!base.is_empty() && !cand.is_empty() && base != cand).then(|| {
        format!(
            "warning: the baseline ran on {} and the candidate on {}: every change below is \
             also the difference between those targets (and on, near and far name other CPUs \
             on each)",
            list(base),
            list(cand)
        )
    })
}

/// Queue settings that held through each side's runs but differ between the sides, unless a
/// selector names them (`scheduler=none` against `scheduler=mq-deadline` compares exactly
/// that): two kernels with different default schedulers, or a loop device left tuned by an
/// earlier user, measure those settings too (seeds/001: "the none scheduler fixes it"). One
/// device a side is compared whatever its name (scratch devices get any free loop device);
/// several by name.
fn queues_warning(a: &str, b: &str, base: &Queues, cand: &Queues) -> Option<String> {
    let named = |knob: &str| {
        [a, b].iter().any(|s| {
            s.split(',').any(|t| {
                t.trim_start()
                    .strip_prefix(knob)
                    .is_some_and(|r| r.starts_with('='))
            })
        })
    };
    let pairs: Vec<(&String, &Knobs, &Knobs)> = if base.len() == 1 && cand.len() == 1 {
        base.iter()
            .zip(cand.values())
            .map(|((d, b), c)| (d, b, c))
            .collect()
    } else {
        base.iter()
            .filter_map(|(d, b)| Some((d, b, cand.get(d)?)))
            .collect()
    };
    let several = pairs.len() > 1;
    let mut differences = Vec::new();
    for (device, b, c) in pairs {
        for (knob, bv) in b {
            let (Some(cv), false) = (c.get(knob), named(knob)) else {
                continue;
            };
            if let ([x], [y]) = (bv.as_slice(), cv.as_slice()) {
                if x != y {
                    let on = if several {
                        format!("{device} ")
                    } else {
                        String::new()
                    };
                    differences.push(format!("{on}{knob} {x} against {y}"));
                }
            }
        }
    }
    (!differences.is_empty()).then(|| {
        format!(
            "warning: the baseline's and the candidate's device queues were set apart where no \
             selector says so ({}): every change below is also theirs; set them alike (a \
             knob of the experiment file) to see the rest alone",
            differences.join(", ")
        )
    })
}

type Knobs = BTreeMap<String, Vec<String>>;
type Queues = BTreeMap<String, Knobs>;

/// Runs on both sides make them look alike: the tests take the sides as independent.
fn shared_warning(shared: &[i64]) -> Option<String> {
    (!shared.is_empty()).then(|| {
        let mut ids: Vec<String> = shared.iter().take(10).map(i64::to_string).collect();
        if shared.len() > 10 {
            ids.push("...".into());
        }
        format!(
            "warning: {} run{} on both sides ({}): the tests take the sides as independent, \
             and a run on both pulls them toward no change; narrow a selector so that they \
             share none",
            shared.len(),
            if shared.len() == 1 { " is" } else { "s are" },
            ids.join(", ")
        )
    })
}

/// Runs of one side that hold one fio output (the same file imported into two experiments
/// under the same tags) count one measurement as several: the spread shrinks and the test
/// grows surer than the measurements allow.
fn repeated_output_warning(side: &str, groups: &[Vec<i64>]) -> Option<String> {
    (!groups.is_empty()).then(|| {
        let listed: Vec<String> = groups
            .iter()
            .take(5)
            .map(|g| {
                let ids: Vec<String> = g.iter().map(i64::to_string).collect();
                format!("runs {}", ids.join(" and "))
            })
            .collect();
        format!(
            "warning: {side}: {}{} hold the same fio output: one measurement counts as several \
             runs, which makes the interval narrower and the test surer than the measurements \
             allow; select so that each is taken once",
            listed.join(", "),
            if groups.len() > 5 { ", ..." } else { "" }
        )
    })
}

impl crate::output::Render for CompareOutput {
    fn text(&self) -> String {
        self.text.clone()
    }
}

impl crate::output::RenderCsv for CompareOutput {
    fn csv(&self) -> String {
        self.csv.clone()
    }
}

fn describe(g: &Group) -> String {
    let ok = g.ok_ids().len();
    let exps: BTreeSet<i64> = g.runs.iter().map(|r| r.experiment_id).collect();
    format!(
        "{} ({} runs ok of {}, from {} experiment{})",
        g.label,
        ok,
        g.runs.len(),
        exps.len(),
        if exps.len() == 1 { "" } else { "s" }
    )
}

/// The failed cross-checks of each side, both figures per line; empty when all agree.
fn findings_text(sides: &[(&str, &[super::basis::Finding])]) -> String {
    let mut out = String::new();
    for (label, findings) in sides {
        if findings.is_empty() {
            continue;
        }
        out.push_str(&format!(
            "\ncross-check findings in {} ({} failed):\n",
            crate::report::format::terminal_safe(label),
            findings.len()
        ));
        for f in *findings {
            out.push_str(&format!("  {}\n", super::basis::finding_line(f)));
        }
    }
    out
}

/// The CSV's `findings` column: for each row, the failed cross-checks of the runs of that
/// row's cell on either side, so a spreadsheet shows beside each figure that it rests on runs
/// whose fio and kernel figures disagree. Empty where all agree and on the geomean rows.
fn add_findings_column(table: &mut Table, sides: &[(&str, &[CellRuns], &[super::basis::Finding])]) {
    let Some(cell_col) = table.columns.iter().position(|c| c.name == "cell") else {
        return;
    };
    table.columns.push(Column::label("findings"));
    for row in &mut table.rows {
        let label = match &row[cell_col] {
            Cell::Text(t) => t.clone(),
            _ => String::new(),
        };
        let mut lines = Vec::new();
        for (side, cells, findings) in sides {
            let Some(cell) = cells.iter().find(|c| c.label() == label) else {
                continue;
            };
            for f in findings.iter().filter(|f| cell.ok.contains(&f.run)) {
                lines.push(format!("{side} {}", super::basis::finding_line(f)));
            }
        }
        row.push(Cell::Text(lines.join("; ")));
    }
}

pub(crate) fn compare_selectors(
    store: &Store,
    a: &str,
    b: &str,
    req: &CompareRequest,
) -> anyhow::Result<CompareOutput> {
    if !(req.min_effect_pct.is_finite() && req.min_effect_pct >= 0.0) {
        bail!(
            "--min-effect {} must be a percentage >= 0",
            req.min_effect_pct
        );
    }
    let (mut base, mut cand) = (resolve(store, a)?, resolve(store, b)?);
    // The experiments `import` made: their runs' cells come from their fio outputs.
    let imported = super::import_cells::imported_experiments(store)?;
    super::import_cells::complete_levels(store, &imported, [&mut base.runs, &mut cand.runs])?;
    let (bi, ci) = (base.ok_ids(), cand.ok_ids());
    for (g, ids) in [(&base, &bi), (&cand, &ci)] {
        if ids.is_empty() {
            bail!(
                "{} has no successful runs ({} runs, all failed or not applicable)",
                g.label,
                g.runs.len()
            );
        }
    }
    let shared: Vec<i64> = bi.iter().copied().filter(|id| ci.contains(id)).collect();
    if shared.len() == bi.len() && shared.len() == ci.len() {
        let runs = match shared.len() {
            1 => "run".to_string(),
            n => format!("{n} runs"),
        };
        bail!(
            "{a} and {b} select the same {runs}: a group compared with itself has nothing to \
             show; name two experiments, tag values or factor levels"
        );
    }
    let cells = Matched::cells(&base, &cand)?;
    let groups = [
        (base.label.as_str(), bi.as_slice()),
        (cand.label.as_str(), ci.as_slice()),
    ];
    let chosen = metrics::choose(store, &groups, &req.metrics)?;
    let hint = metrics::per_host_hint(store, &groups, &req.metrics, &chosen)?;
    let triples: Vec<(String, Values, Values)> = chosen
        .into_iter()
        .map(|(m, mut v)| {
            let c = v.pop().unwrap_or_default();
            let b = v.pop().unwrap_or_default();
            (m, b, c)
        })
        .collect();
    // A direction for a metric the table does not show is a typo or a missing --metric:
    // said now, not silently ignored.
    let shown: Vec<&str> = triples.iter().map(|(m, _, _)| m.as_str()).collect();
    if let Some(unknown) = req.better.keys().find(|m| !shown.contains(&m.as_str())) {
        bail!(
            "--better {unknown}=...: the comparison shows no metric {unknown} (it shows {}; \
             name others with --metric)",
            shown.join(", ")
        );
    }
    let (compared, skipped) = compare_cells(
        &cells.base,
        &cells.cand,
        &triples,
        req.min_effect_pct,
        &req.better,
    )?;
    if compared.is_empty() {
        bail!(
            "nothing to compare: the matched cells have no values on one side ({})",
            skipped.join("; ")
        );
    }
    let (base_hosts, cand_hosts) = (hosts_of(store, &base)?, hosts_of(store, &cand)?);
    // The cross-checks of the compared runs: a figure in the table may rest on a run whose
    // fio and kernel figures disagree, and the reader must see that next to the verdict.
    let (base_basis, cand_basis) = (
        super::basis::of_runs(store, &base.runs)?,
        super::basis::of_runs(store, &cand.runs)?,
    );
    let mut text = compare_heading(&base, &cand, &cells.factors);
    let mut warnings: Vec<String> = hosts_warnings(a, b, &base_hosts, &cand_hosts)
        .into_iter()
        .chain(targets_warning(
            &targets_of(store, &base)?,
            &targets_of(store, &cand)?,
        ))
        .chain(queues_warning(a, b, &base_basis.queues, &cand_basis.queues))
        .chain(shared_warning(&shared))
        .chain(pooled_levels_warning(&base, &cand))
        .chain(pooled_levels_warning(&cand, &base))
        .collect();
    // Only cells compared: one found on one side alone is listed as such below.
    let compared_cells = cells.compared();
    let workloads = workloads_of(store, &compared_cells)?;
    for (label, side) in [
        (&base.label, &compared_cells[0]),
        (&cand.label, &compared_cells[1]),
    ] {
        warnings.extend(super::workloads::pooled_warning(label, side, &workloads));
    }
    let mut named: BTreeSet<&str> = base
        .fixed
        .iter()
        .chain(&cand.fixed)
        .map(String::as_str)
        .collect();
    // A placement is fio's CPU pinning: naming one names those options.
    if named.contains("placement") {
        named.extend(["cpus_allowed", "cpus_allowed_policy"]);
    }
    warnings.extend(super::workloads::across_warning(
        &compared_cells[0],
        &compared_cells[1],
        &named,
        &workloads,
    ));
    // Only imports store one output twice: a run iolab made has an output of its own (a
    // program's may repeat itself, and is still a measurement each time).
    let imported_ok = |g: &Group| -> BTreeSet<i64> {
        g.runs
            .iter()
            .filter(|r| r.status == crate::store::RunStatus::Ok)
            .filter(|r| imported.contains(&r.experiment_id))
            .map(|r| r.id)
            .collect()
    };
    let (base_ids, cand_ids) = (imported_ok(&base), imported_ok(&cand));
    // One reading of the outputs of both sides: a group within a side counts one measurement
    // as several runs; one across the sides (a file imported under each side's tag) is a
    // measurement the sides share.
    let both: Vec<i64> = base_ids.union(&cand_ids).copied().collect();
    let groups = store.runs_with_one_output(&both)?;
    for (g, ids) in [(&base, &base_ids), (&cand, &cand_ids)] {
        let repeated: Vec<Vec<i64>> = groups
            .iter()
            .map(|group| {
                group
                    .iter()
                    .copied()
                    .filter(|id| ids.contains(id))
                    .collect()
            })
            .filter(|within: &Vec<i64>| within.len() > 1)
            .collect();
        warnings.extend(repeated_output_warning(&g.label, &repeated));
    }
    let shared_outputs: Vec<(i64, i64)> = groups
        .iter()
        .filter_map(|g| {
            let b = g
                .iter()
                .find(|id| base_ids.contains(id) && !cand_ids.contains(id))?;
            let c = g
                .iter()
                .find(|id| cand_ids.contains(id) && !base_ids.contains(id))?;
            Some((*b, *c))
        })
        .collect();
    if let Some(&(b, c)) = shared_outputs.first() {
        warnings.push(format!(
            "warning: run {b} of {} and run {c} of {} hold the same fio output{}: the sides \
             share measurements, and a change between them is no change at all",
            base.label,
            cand.label,
            match shared_outputs.len() {
                1 => String::new(),
                n => format!(" ({n} such pairs)"),
            }
        ));
    }
    for w in &warnings {
        text.push_str(&crate::report::table::wrap(
            &crate::report::format::terminal_safe(w),
            MAX_WIDTH,
        ));
    }
    let title = |m: &str| format!("{m}: {} -> {}", base.label, cand.label);
    text.push_str(&render_tables(&tables(title, &compared)));
    let not_compared = [
        ("not compared (no matching cell): ", &cells.unmatched),
        ("not compared: ", &skipped),
    ];
    for (what, list) in not_compared.iter().filter(|(_, l)| !l.is_empty()) {
        let line = format!("{what}{}", list.join("; "));
        text.push_str(&crate::report::table::wrap(&line, MAX_WIDTH));
    }
    if let Some(hint) = &hint {
        text.push_str(&crate::report::table::wrap(hint, MAX_WIDTH));
    }
    let (bf, cf) = (base_basis.findings, cand_basis.findings);
    text.push_str(&findings_text(&[(&base.label, &bf), (&cand.label, &cf)]));
    let mut csv_table = long_table(&format!("{} -> {}", base.label, cand.label), &compared);
    add_findings_column(
        &mut csv_table,
        &[
            ("baseline", &cells.base, &bf),
            ("candidate", &cells.cand, &cf),
        ],
    );
    let csv = csv_table.to_csv();
    let doc = CompareDoc {
        across_cells: across(&compared),
        family_size: family_size(&compared),
        baseline: Side {
            selector: a.to_string(),
            runs: base.runs.len(),
            runs_ok: bi.len(),
            hosts: base_hosts,
        },
        candidate: Side {
            selector: b.to_string(),
            runs: cand.runs.len(),
            runs_ok: ci.len(),
            hosts: cand_hosts,
        },
        findings: Findings {
            baseline: bf,
            candidate: cf,
        },
        min_effect_pct: req.min_effect_pct,
        better: req.better.clone(),
        unmatched_cells: cells.unmatched,
        skipped,
        shared_runs: shared,
        comparisons: compared,
        warnings,
    };
    Ok(CompareOutput { text, doc, csv })
}

/// The workload of every run of `sides`' cells that has one, by run id.
fn workloads_of(
    store: &Store,
    sides: &[Vec<CellRuns>],
) -> anyhow::Result<BTreeMap<i64, super::workloads::Workload>> {
    let ids: Vec<i64> = sides
        .iter()
        .flat_map(|cells| cells.iter())
        .flat_map(|c| c.ok.iter().copied())
        .collect();
    Ok(store
        .job_texts(&ids)?
        .iter()
        .filter_map(|(id, text)| Some((*id, super::workloads::of(text)?)))
        .collect())
}

/// Said when `other`'s selector fixes a factor that `side` leaves free and whose levels
/// vary among `side`'s runs: cells are keyed without the factors either selector fixes, so
/// each of `side`'s cells pools those levels, and a change may be the factor's, not the one
/// compared.
fn pooled_levels_warning(side: &Group, other: &Group) -> Option<String> {
    let pooled: Vec<(&str, String)> = other
        .fixed
        .iter()
        .filter(|f| !side.fixed.contains(f))
        .filter_map(|f| {
            let levels: BTreeSet<String> = side
                .runs
                .iter()
                .filter_map(|r| super::cells::run_levels(r).remove(f))
                .collect();
            let levels: Vec<String> = levels
                .iter()
                .map(|l| crate::experiment::plan::quote_label(l))
                .collect();
            (levels.len() > 1).then(|| (f.as_str(), format!("{f} ({})", levels.join(", "))))
        })
        .collect();
    let (first, _) = pooled.first()?;
    let said: Vec<&str> = pooled.iter().map(|(_, s)| s.as_str()).collect();
    Some(format!(
        "warning: each cell of {} pools the levels of {}, which only the other side ({}) \
         fixes: fix them on both sides (e.g. experiment=N,{first}=LEVEL) to compare like with \
         like",
        side.label,
        said.join(", "),
        other.label,
    ))
}

/// The cells of both sides, by the factors that vary across them (those a selector fixed
/// are left out), and the cells found on one side only.
struct Matched {
    factors: Vec<Factor>,
    base: Vec<CellRuns>,
    cand: Vec<CellRuns>,
    unmatched: Vec<String>,
}

impl Matched {
    /// Fails when no cell of one side matches a cell of the other, listing both sides' cells.
    fn cells(base: &Group, cand: &Group) -> anyhow::Result<Matched> {
        let mut declared = base.declared.clone();
        for f in &cand.declared {
            if !declared.iter().any(|d| d.name == f.name) {
                declared.push(f.clone());
            }
        }
        let all: Vec<Run> = base.runs.iter().chain(&cand.runs).cloned().collect();
        let mut factors = factors_of(&declared, &all);
        factors.retain(|f| !base.fixed.contains(&f.name) && !cand.fixed.contains(&f.name));
        let bcells = group(&base.runs, &factors);
        let ccells = group(&cand.runs, &factors);
        let only_in = |these: &[CellRuns], those: &[CellRuns], side: &str| -> Vec<String> {
            these
                .iter()
                .filter(|x| !those.iter().any(|y| y.levels == x.levels))
                .map(|x| format!("{} (only in {side})", x.label()))
                .collect()
        };
        let (only_base, only_cand) = (
            only_in(&bcells, &ccells, &base.label),
            only_in(&ccells, &bcells, &cand.label),
        );
        if only_base.len() == bcells.len() {
            let list = |cells: &[CellRuns]| {
                cells
                    .iter()
                    .map(CellRuns::label)
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            bail!(
                "no cell of {} matches a cell of {} by factor levels\n  {}: {}\n  {}: {}",
                base.label,
                cand.label,
                base.label,
                list(&bcells),
                cand.label,
                list(&ccells)
            );
        }
        Ok(Matched {
            factors,
            base: bcells,
            cand: ccells,
            unmatched: only_base.into_iter().chain(only_cand).collect(),
        })
    }
}

impl Matched {
    /// The cells of each side that the other side has too.
    fn compared(&self) -> [Vec<CellRuns>; 2] {
        let on_both = |these: &[CellRuns], those: &[CellRuns]| -> Vec<CellRuns> {
            these
                .iter()
                .filter(|x| those.iter().any(|y| y.levels == x.levels))
                .cloned()
                .collect()
        };
        [
            on_both(&self.base, &self.cand),
            on_both(&self.cand, &self.base),
        ]
    }
}

/// The lines above the tables: what each side is, and what makes a cell.
fn compare_heading(base: &Group, cand: &Group, factors: &[Factor]) -> String {
    format!(
        "baseline:  {}\ncandidate: {}\ncells:     {}\n",
        describe(base),
        describe(cand),
        if factors.is_empty() {
            "all runs of each side form one cell".to_string()
        } else {
            factors
                .iter()
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>()
                .join("/")
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device's knobs with their values over a side's runs.
    type Given<'a> = (&'a str, &'a [(&'a str, &'a [&'a str])]);

    fn queues(devices: &[Given]) -> Queues {
        devices
            .iter()
            .map(|(d, knobs)| {
                let knobs = knobs
                    .iter()
                    .map(|(k, vs)| (k.to_string(), vs.iter().map(|v| v.to_string()).collect()))
                    .collect();
                (d.to_string(), knobs)
            })
            .collect()
    }

    #[test]
    fn queue_settings_held_apart_on_the_two_sides_are_named_unless_selected() {
        let base = queues(&[(
            "loop0",
            &[
                ("scheduler", &["mq-deadline"]),
                ("rq_affinity", &["1", "2"]),
                ("nr_requests", &["64"]),
            ],
        )]);
        let cand = queues(&[(
            "loop3",
            &[
                ("scheduler", &["none"]),
                ("rq_affinity", &["2"]),
                ("nr_requests", &["64"]),
            ],
        )]);
        // One device a side, whatever its name; a knob that varied on a side is a factor.
        let w = queues_warning("kernel=6.1", "kernel=6.6", &base, &cand).unwrap();
        assert!(
            w.contains("no selector says so (scheduler mq-deadline against none)"),
            "{w}"
        );
        assert!(!w.contains("rq_affinity") && !w.contains("loop"), "{w}");
        assert_eq!(
            queues_warning("scheduler=mq-deadline", "scheduler=none", &base, &cand),
            None
        );
        assert_eq!(queues_warning("1", "2", &base, &base), None);
        // Several devices: matched by name, and named.
        let two = |s: &'static str| {
            queues(&[
                ("sda", &[("scheduler", &[s])]),
                ("sdb", &[("scheduler", &["none"])]),
            ])
        };
        let w = queues_warning("1", "2", &two("bfq"), &two("kyber")).unwrap();
        assert!(w.contains("(sda scheduler bfq against kyber)"), "{w}");
        // A side with no settings recorded (imported, older runs) says nothing.
        assert_eq!(queues_warning("1", "2", &base, &Queues::new()), None);
    }

    #[test]
    fn selectors_are_ids_or_tag_lists() {
        assert_eq!(Selector::parse("3").unwrap(), Selector::Experiment(3));
        assert_eq!(
            Selector::parse("kernel=6.1,variant=stock").unwrap(),
            Selector::Tags {
                tags: vec![
                    ("kernel".into(), "6.1".into()),
                    ("variant".into(), "stock".into())
                ],
                experiment: None
            }
        );
        assert_eq!(
            Selector::parse("experiment=2,host=a").unwrap(),
            Selector::Tags {
                tags: vec![("host".into(), "a".into())],
                experiment: Some(2)
            }
        );
        // A level holding a comma, quoted as tables print it; a tag or level in plain text
        // beside it.
        assert_eq!(
            Selector::parse(r#"cpus_allowed="0,1", host=a,note="say \"hi\", \\o/""#).unwrap(),
            Selector::Tags {
                tags: vec![
                    ("cpus_allowed".into(), "0,1".into()),
                    ("host".into(), "a".into()),
                    ("note".into(), r#"say "hi", \o/"#.into()),
                ],
                experiment: None
            }
        );
        for bad in [
            "kernel",
            "kernel=",
            "=6.1",
            "a=b,c",
            "experiment=x",
            "cpus_allowed=0,1",
            r#"cpus_allowed="0,1"#,
            r#"cpus_allowed="0,1"2"#,
            "a=\"\"",
        ] {
            assert!(Selector::parse(bad).is_err(), "{bad}");
        }
    }
}

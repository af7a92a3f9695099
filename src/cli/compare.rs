//! `iolab compare A B`: two groups of runs, cell by cell, with CIs, p-values and verdicts.

use std::path::PathBuf;

use crate::analysis::compare::{compare_selectors, CompareRequest};
use crate::stats::direction::Direction;
use crate::store::{self, Store};

fn parse_better(text: &str) -> Result<(String, Direction), String> {
    let (metric, way) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}`: expected METRIC=higher, =lower or =none"))?;
    let way = match way.trim() {
        "higher" => Direction::HigherIsBetter,
        "lower" => Direction::LowerIsBetter,
        "none" => Direction::NoDirection,
        other => return Err(format!("`{other}`: expected higher, lower or none")),
    };
    Ok((metric.trim().to_string(), way))
}

/// `--min-effect`: a percentage of 0 or more (compare and report).
pub(super) fn parse_min_effect(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(pct) if pct >= 0.0 && pct.is_finite() => Ok(pct),
        _ => Err("a percentage of 0 or more, e.g. 1 or 0.5".into()),
    }
}

/// Compare two groups of runs cell by cell: baseline A, candidate B.
///
/// A and B are experiment ids (`3`) or tag selectors (`kernel=6.1`, `variant=stock`, several
/// joined with `,`, `experiment=3,variant=stock` to stay inside one experiment). A selector may
/// also fix a factor's level (`scheduler=none` vs `scheduler=mq-deadline`): that factor then
/// leaves the cell key and the remaining factors' cells are matched; a level holding `,` goes
/// in double quotes, as tables print it (`'cpus_allowed="0,1"'`). Cells are matched by
/// their factor levels (imported runs without factors form one cell). Per cell and
/// metric: baseline and candidate medians, change % with a 95% bootstrap CI, a p-value
/// (Benjamini-Hochberg adjusted over everything shown) from the test named in `test`
/// (Mann-Whitney where the run counts let it reach p < 0.05, e.g. 4 vs 4; Welch's t below
/// that, e.g. 3 vs 3), and a verdict: improved, regressed, or `~` when the CI includes 0,
/// the change is below --min-effect, or p >= 0.05. `(n)` marks cells with a single run on a
/// side. Per metric, a `geomean` row sums up the cells: the geometric mean of the ratios with
/// a t interval on the log ratios, and how many cells improved/regressed/~. Where the two
/// sides ran on different hosts, or one side's runs come from several, and the selectors do
/// not pick hosts (`host=H`), a warning says the machines mix into the figures.
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("Print JSON with a `comparisons` array")))]
#[command(mut_arg("csv", |a| a.help("Print CSV, one row per cell and metric (the CI as `95% CI low`, `95% CI high` and `95% CI of`: change, in %, or difference, in the metric's unit; empty without a CI)")))]
pub(crate) struct CompareArgs {
    /// Baseline: experiment id or tag selector.
    #[arg(value_name = "A")]
    pub baseline: String,
    /// Candidate: experiment id or tag selector.
    #[arg(value_name = "B")]
    pub candidate: String,
    /// Metric to compare, e.g. read_iops (repeatable; default: the headline metrics measured).
    #[arg(long = "metric", value_name = "M")]
    pub metrics: Vec<String>,
    /// Smallest change in percent that can be called improved or regressed.
    #[arg(long, value_name = "PCT", default_value_t = 1.0, value_parser = parse_min_effect)]
    pub min_effect: f64,
    /// Which way is better for a metric whose name does not say (e.g. dev_avg_qu_sz=lower);
    /// `none` reports a real change as `changed` without calling it better or worse (the
    /// default for merges, dev_rrqm_per_s and dev_wrqm_per_s); repeatable; also overrides a
    /// metric's own direction.
    #[arg(long, value_name = "METRIC=higher|lower|none", value_parser = parse_better)]
    pub better: Vec<(String, Direction)>,
    /// Results database (default: $IOLAB_DB, else iolab.db in the current directory).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Where A or B is an experiment run on controlled hosts: compare this host's own runs
    /// (its ssh name) instead of the hosts' aggregate. Tag selectors pick hosts with `host=H`.
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    #[command(flatten)]
    pub out: crate::output::TableOutputArgs,
}

pub(super) fn run(args: CompareArgs) -> anyhow::Result<()> {
    let db = Store::open_existing(store::resolve_db_path(args.db.as_deref()))?;
    let on_host = |side: &str| -> anyhow::Result<String> {
        match (&args.host, side.trim().parse::<i64>()) {
            (Some(h), Ok(id)) => Ok(db.part_on_host(id, h)?.to_string()),
            _ => Ok(side.to_string()),
        }
    };
    let (baseline, candidate) = (on_host(&args.baseline)?, on_host(&args.candidate)?);
    let out = compare_selectors(
        &db,
        &baseline,
        &candidate,
        &CompareRequest {
            metrics: super::metrics_once(args.metrics),
            min_effect_pct: args.min_effect,
            better: args.better.into_iter().collect(),
        },
    )?;
    // CSV has no place for them: they go beside it, where a terminal still shows them.
    if args.out.csv {
        for w in &out.doc.warnings {
            say!("iolab: {}", crate::report::format::terminal_safe(w));
        }
    }
    crate::output::print_table(&out, args.out)
}

//! `iolab report ID -o report.html`: one self-contained page about one experiment.

use std::path::PathBuf;

use crate::analysis::page::{write_report, ReportOptions};
use crate::store;

/// Write one self-contained HTML page about an experiment.
///
/// The page holds the environment and preflight findings, the tables of `iolab show`, each factor's levels compared with its first level
/// (change, CI, p-values, verdicts), and the charts. Inline CSS and SVG only: no scripts, no
/// fonts or images from the network; it works offline and survives being mailed.
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("Print what went into the page as JSON")))]
pub(crate) struct ReportArgs {
    /// Experiment id (see `iolab runs`).
    #[arg(value_name = "ID")]
    pub experiment: i64,
    /// Output file (.html).
    #[arg(short = 'o', long = "output", value_name = "FILE.html")]
    pub output: PathBuf,
    /// Metric to include (repeatable; default: the headline metrics measured).
    #[arg(long = "metric", value_name = "M")]
    pub metrics: Vec<String>,
    /// Smallest change in percent that can be called improved or regressed.
    #[arg(long, value_name = "PCT", default_value_t = 1.0, value_parser = super::compare::parse_min_effect)]
    pub min_effect: f64,
    /// The cell whose per-second series (throughput per run, interrupts per CPU) the page
    /// draws, by its label (default: the first cell with per-second series).
    #[arg(long, value_name = "CELL")]
    pub cell: Option<String>,
    /// One controlled host's own runs instead of the hosts' aggregate (its ssh name).
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Results database (default: $IOLAB_DB, else iolab.db in the current directory).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
}

pub(super) fn run(args: ReportArgs) -> anyhow::Result<()> {
    let html = args
        .output
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm"));
    if !html {
        return Err(super::usage(format!(
            "{}: the report is an HTML page: name it FILE.html (a browser opens it by its \
             extension)",
            args.output.display()
        )));
    }
    let db = store::resolve_db_path(args.db.as_deref());
    let id = match &args.host {
        Some(h) => store::Store::open_existing(&db)?.part_on_host(args.experiment, h)?,
        None => args.experiment,
    };
    let written = write_report(
        &db,
        id,
        &ReportOptions {
            metrics: super::metrics_once(args.metrics),
            min_effect_pct: args.min_effect,
            cell: args.cell,
        },
        &args.output,
    )?;
    crate::output::print(&written, args.out)
}

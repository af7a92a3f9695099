//! `iolab report ID -o report.html`: one self-contained page about one experiment.

use std::path::PathBuf;

use anyhow::{bail, Context};

use crate::analysis::page::{report, ReportOptions};
use crate::store::{self, Store};

/// Write one self-contained HTML page about an experiment.
///
/// The page holds the environment and preflight findings, the tables of `iolab show`, each factor's levels compared with its first level
/// (change, CI, p-values, verdicts), and the charts. Inline CSS and SVG only: no scripts, no
/// fonts or images from the network; it works offline and survives being mailed.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
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
    #[arg(long, value_name = "PCT", default_value_t = 1.0)]
    pub min_effect: f64,
    /// The cell whose per-second series (throughput per run, interrupts per CPU) the page
    /// draws, by its label (default: the first cell with per-second series).
    #[arg(long, value_name = "CELL")]
    pub cell: Option<String>,
    /// Results database (default: $IOLAB_DB, else iolab.db in the current directory).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Print what went into the page as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ReportArgs) -> anyhow::Result<()> {
    if !(args.min_effect.is_finite() && args.min_effect >= 0.0) {
        bail!("--min-effect {} must be a percentage >= 0", args.min_effect);
    }
    let db = Store::open_existing(store::resolve_db_path(args.db.as_deref()))?;
    let (page, summary) = report(
        &db,
        args.experiment,
        &ReportOptions {
            metrics: args.metrics,
            min_effect_pct: args.min_effect,
            cell: args.cell,
        },
    )?;
    std::fs::write(&args.output, &page)
        .with_context(|| format!("{}: writing the report", args.output.display()))?;
    let text = if args.json {
        serde_json::to_string_pretty(&summary)? + "\n"
    } else {
        format!(
            "wrote {} ({} bytes: {} tables, {} comparisons, {} charts{})\n",
            args.output.display(),
            page.len(),
            summary.tables,
            summary.comparisons,
            summary.figures.len(),
            if summary.missing_figures.is_empty() {
                String::new()
            } else {
                format!("; not drawn: {}", summary.missing_figures.join(", "))
            }
        )
    };
    crate::output::stdout(&text)
}

//! `iolab show ID`: one experiment's tables with CIs and outlier marks.

use std::path::PathBuf;

use crate::analysis::show::{show, ShowOptions};
use crate::store::{self, Store};

/// Show one experiment's results: pivot tables and per-cell statistics with CIs.
///
/// Per metric, a pivot table (one factor in rows, another in columns; mean +-95% CI, `*` where a cell has outliers) and every cell's n, mean, median, stddev, CV
/// and CI. Cells that cannot run here show `n/a` with the reason; failed runs are counted.
/// Without --metric: a command workload's own metrics, then IOPS, MB/s, mean and p99
/// latency, %usr/%sys and interrupts/s, the device's reads and writes per second and
/// interrupts per I/O, a NIC target's interrupts/s, the network engines' figures and a
/// trace's I2D share: those the runs measured (`iolab metrics` lists them all).
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("Print JSON (every cell's full summary, and the tables)")))]
#[command(mut_arg("csv", |a| a.help("Print CSV: one row per cell and metric, one column per statistic")))]
pub(crate) struct ShowArgs {
    /// Experiment id (see `iolab runs`).
    #[arg(value_name = "ID")]
    pub experiment: i64,
    /// Metric to show, e.g. read_iops or read_clat_p99_us (repeatable).
    #[arg(long = "metric", value_name = "M")]
    pub metrics: Vec<String>,
    /// Factor whose levels form the pivot rows (default: the first factor).
    #[arg(long, value_name = "FACTOR")]
    pub rows: Option<String>,
    /// Factor whose levels form the pivot columns (default: the second factor).
    #[arg(long, value_name = "FACTOR")]
    pub cols: Option<String>,
    /// Only the table `iolab run` printed at its end: a row per cell, IOPS, MB/s, mean and
    /// p99 latency, %usr, %sys and interrupts/s as mean +-stddev (the compact table for a
    /// mail; without it, `show` has the confidence intervals).
    #[arg(long, conflicts_with_all = ["metrics", "rows", "cols", "csv"])]
    pub summary: bool,
    /// One controlled host's own runs instead of the hosts' aggregate (its ssh name, as
    /// `iolab run` listed them).
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Results database (default: $IOLAB_DB, else iolab.db in the current directory).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    #[command(flatten)]
    pub out: crate::output::TableOutputArgs,
}

pub(super) fn run(args: ShowArgs) -> anyhow::Result<()> {
    let path = store::resolve_db_path(args.db.as_deref());
    let db = Store::open_existing(&path)?;
    let id = match &args.host {
        Some(h) => db.part_on_host(args.experiment, h)?,
        None => args.experiment,
    };
    if db.experiment(id).is_ok_and(|e| e.status == "running") {
        note_abandoned(&path, &[id]);
    }
    if args.summary {
        let summary = crate::analysis::summary::of_experiment(&db, id)?;
        return crate::output::print(
            &summary,
            crate::output::OutputArgs {
                json: args.out.json,
            },
        );
    }
    let shown = show(
        &db,
        id,
        &ShowOptions {
            metrics: super::metrics_once(args.metrics),
            rows: args.rows,
            cols: args.cols,
        },
    )?;
    crate::output::print_table(&shown, args.out)
}

/// Says on standard error which of `running`, experiments of the database at `path` still
/// reading `running`, lost their iolab (killed before `restore` marked them).
pub(super) fn note_abandoned(path: &std::path::Path, running: &[i64]) {
    let state = crate::knobs::state_dir();
    for id in running {
        if let Some(note) = crate::experiment::run::registry::abandoned_note(&state, path, *id) {
            eprintln!("iolab: note: {note}");
        }
    }
}

//! `iolab runs`: what the results database holds (`store::listing`).

use std::path::PathBuf;

use crate::store::{self, Store};

/// List stored experiments, or the runs of one experiment.
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("Print JSON instead of a table")))]
pub(crate) struct RunsArgs {
    /// Show the runs of this experiment instead of the list of experiments, with where each
    /// kept its block trace (`trace = true`): the name `iolab trace analyze` takes.
    #[arg(value_name = "EXPERIMENT_ID")]
    pub experiment: Option<i64>,
    /// Results database (default: $IOLAB_DB, else iolab.db in the current directory).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
}

pub(super) fn run(args: RunsArgs) -> anyhow::Result<()> {
    let path = store::resolve_db_path(args.db.as_deref());
    let db = Store::open_existing(&path)?;
    let running: Vec<i64> = db
        .experiments()?
        .into_iter()
        .filter(|e| e.status == "running" && args.experiment.is_none_or(|id| id == e.id))
        .map(|e| e.id)
        .collect();
    super::show::note_abandoned(&path, &running);
    crate::output::print(&store::listing::listing(&db, args.experiment)?, args.out)
}

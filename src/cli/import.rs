//! `iolab import`: store existing fio JSON / json+ outputs as runs.

use std::path::PathBuf;

use crate::analysis::import::{
    import_files, is_database, merge_databases, read_files, ImportOptions,
};
use crate::store::{self, Store};

/// Store fio JSON outputs as runs, or merge other iolab databases into this one.
///
/// Existing fio JSON or json+ outputs are stored one run per file, so they can be shown and
/// compared like runs iolab made.
///
/// A file holding several fio runs' outputs one after another (`fio ... >>all.json` in a
/// loop) is a run each; one run's --status-interval documents are one run, its last document.
///
/// All fio outputs go into one new experiment (status "imported"), or into the imported
/// experiment named by --experiment. fio's JSON does not say which kernel it ran on, and names
/// a host only in client mode, so the `host` and `kernel` tags come from --tag (e.g. --tag
/// kernel=6.1 --tag host=db7); without them they are recorded as "unknown", never as this
/// machine's. Every file is parsed before anything is stored: one bad file stores nothing.
/// A file whose fio job reported an error is stored as a failed run without metrics.
///
/// Each fio option whose value differs between an experiment's outputs is a factor: a sweep
/// of bs=4k, 64k, 1m run three times each gives three cells of three runs, shown and compared
/// cell by cell, not one cell of nine. Runs added later that set another option apart move
/// the runs there to their cells. The options naming where a job ran, what it was called or
/// its random seed (filename, directory, name, randseed) are no factors, so one job file run
/// on two hosts, or with a seed per repetition, stays one cell; tag such runs apart.
///
/// An iolab database (the --db of a run on another machine, or under another kernel) is
/// merged whole: each of its experiments, with its runs, tags, metrics, samples, series and
/// environment, under new ids (the summary says which), so `compare` can set them against
/// this file's. An experiment already here (the same database merged twice) is skipped, but
/// for runs it gained there since (`import --experiment` adds to one), which are added. Runs'
/// block traces stay where they are and are pointed at there. --tag adds a tag to every
/// merged run.
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("Print JSON instead of a summary")))]
pub(crate) struct ImportArgs {
    /// fio outputs (--output-format=json or json+; text before the JSON is fine), or iolab
    /// databases.
    #[arg(value_name = "FILES", required = true)]
    pub files: Vec<PathBuf>,
    /// Tag every imported run, e.g. kernel=6.1 or variant=stock (repeatable).
    #[arg(long = "tag", value_name = "NAME=VALUE")]
    pub tags: Vec<String>,
    /// Add the runs to the imported experiment of this name (created when missing; the name
    /// of an experiment `run` made is refused), or of this id where several share a name (a
    /// number that is no experiment's id is refused, not made a name). Without it, a new
    /// experiment named after the first file.
    #[arg(long, value_name = "NAME|ID", value_parser = parse_experiment_name)]
    pub experiment: Option<String>,
    /// Results database (default: $IOLAB_DB, else iolab.db in the current directory).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
}

/// An experiment's name as given: a blank one would be listed as nothing at all.
fn parse_experiment_name(s: &str) -> Result<String, String> {
    match s.trim() {
        "" => Err("an experiment needs a name that is not blank".into()),
        _ => Ok(s.to_string()),
    }
}

pub(super) fn run(args: ImportArgs) -> anyhow::Result<()> {
    let tags = super::parse_tags(&args.tags)?;
    let path = store::resolve_db_path(args.db.as_deref());
    let (databases, outputs): (Vec<&PathBuf>, Vec<&PathBuf>) =
        args.files.iter().partition(|f| is_database(f));
    if let (Some(d), Some(o)) = (databases.first(), outputs.first()) {
        return Err(super::usage(format!(
            "{} is an iolab database and {} is not: import fio outputs and databases apart",
            d.display(),
            o.display()
        )));
    }
    if !databases.is_empty() {
        if args.experiment.is_some() {
            return Err(super::usage(
                "--experiment names the experiment fio outputs go into; a database's \
                 experiments keep their own names",
            ));
        }
        let summary = merge_databases(&path, &args.files, &tags)?;
        return crate::output::print(&summary, args.out);
    }
    let parsed = read_files(&args.files)?;
    let mut db = Store::open(&path)?;
    let summary = import_files(
        &mut db,
        parsed,
        &ImportOptions {
            tags,
            experiment: args.experiment,
        },
    )?;
    crate::output::print(&summary, args.out)
}

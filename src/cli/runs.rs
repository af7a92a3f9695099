//! `iolab runs`: what the results database holds — experiments with their run counts, or the
//! runs of one experiment — for people or, with `--json`, for scripts.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::report::format::terminal_safe as safe;
use crate::store::{self, time::format_utc, Store};

/// List stored experiments, or the runs of one experiment.
#[derive(Debug, clap::Args)]
pub struct RunsArgs {
    /// Show the runs of this experiment instead of the list of experiments.
    #[arg(value_name = "EXPERIMENT_ID")]
    pub experiment: Option<i64>,
    /// Results database (default: $IOLAB_DB, else iolab.db in the current directory).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: RunsArgs) -> anyhow::Result<()> {
    let path = store::resolve_db_path(args.db.as_deref());
    let db = Store::open_existing(&path)?;
    let text = match args.experiment {
        None => {
            let exps = db.experiments()?;
            if args.json {
                serde_json::to_string_pretty(&exps)? + "\n"
            } else {
                experiments_table(&exps)
            }
        }
        Some(id) => {
            let exp = db.experiment(id)?;
            let runs = db.runs(id)?;
            if args.json {
                let doc = serde_json::json!({ "experiment": exp, "runs": runs });
                serde_json::to_string_pretty(&doc)? + "\n"
            } else {
                runs_table(&exp, &runs)
            }
        }
    };
    crate::output::stdout(&text)
}

/// One line per experiment.
pub fn experiments_table(exps: &[store::Experiment]) -> String {
    if exps.is_empty() {
        return "no experiments stored yet\n".to_string();
    }
    let mut out = format!(
        "{:>4}  {:<19}  {:<20}  {:<11}  {:>4}  {:>6}  {:>4}  host / kernel\n",
        "id", "created (UTC)", "name", "status", "ok", "failed", "n/a"
    );
    for e in exps {
        let _ = writeln!(
            out,
            "{:>4}  {:<19}  {:<20}  {:<11}  {:>4}  {:>6}  {:>4}  {} / {}",
            e.id,
            format_utc(e.created_unix),
            clip(&safe(&e.name), 20),
            safe(&e.status),
            e.runs_ok,
            e.runs_failed,
            e.runs_not_applicable,
            safe(&e.host),
            safe(&e.kernel)
        );
    }
    out
}

/// One line per run of one experiment, in the order they ran.
pub fn runs_table(exp: &store::Experiment, runs: &[store::Run]) -> String {
    let mut out = format!(
        "experiment {} \"{}\" ({}), seed {}, {} on {}\n",
        exp.id,
        safe(&exp.name),
        safe(&exp.status),
        exp.seed,
        safe(&exp.kernel),
        safe(&exp.host)
    );
    if runs.is_empty() {
        out.push_str("no runs stored\n");
        return out;
    }
    let _ = writeln!(
        out,
        "{:>6}  {:<30}  {:>3}  {:<19}  {:>7}  status",
        "run", "cell", "rep", "start (UTC)", "secs"
    );
    for r in runs {
        let mut status = r.status.as_str().to_string();
        if r.warmup {
            status.push_str(" (warm-up)");
        }
        if let Some(reason) = r.status.reason() {
            let _ = write!(status, ": {}", safe(reason));
        }
        let _ = writeln!(
            out,
            "{:>6}  {:<30}  {:>3}  {:<19}  {:>7.1}  {}",
            r.id,
            clip(&safe(&r.cell_key), 30),
            r.repetition,
            format_utc(r.start_unix),
            r.end_unix - r.start_unix,
            status
        );
    }
    out
}

fn clip(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(width - 1).collect();
        t.push('~');
        t
    }
}

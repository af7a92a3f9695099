//! What the results database holds, as `iolab runs` lists it: every experiment with its run
//! counts, or the runs of one experiment (with where each kept its block trace, the name
//! `iolab trace analyze` takes), as a table for people or JSON for scripts.

use std::fmt::Write as _;

use serde::Serialize;

use super::{time::format_utc, Experiment, Run, Store};
use crate::output::sorted_keys;
use crate::report::format::{display_width, pad_right, terminal_safe as safe};

/// `iolab runs`' result. JSON: the list of experiments, or `{experiment, runs}` with every
/// object's keys sorted, as scripts have always read it.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum Listing {
    Experiments(Vec<Experiment>),
    Runs {
        #[serde(serialize_with = "sorted_keys")]
        experiment: Experiment,
        #[serde(serialize_with = "sorted_keys")]
        runs: Vec<ListedRun>,
    },
}

/// A run, and the base name of its kept block trace as a path from the current directory
/// (absent without one, or once `[trace] keep` dropped it).
#[derive(Debug, Serialize)]
pub(crate) struct ListedRun {
    #[serde(flatten)]
    run: Run,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace: Option<String>,
}

/// The experiments in `db`, or the runs of `experiment`.
pub(crate) fn listing(db: &Store, experiment: Option<i64>) -> anyhow::Result<Listing> {
    Ok(match experiment {
        None => Listing::Experiments(db.experiments()?),
        Some(id) => {
            let mut traces = db.run_traces(id)?;
            let at = |stored: String| {
                super::trace_location(std::path::Path::new(db.path()), &stored)
                    .display()
                    .to_string()
            };
            Listing::Runs {
                experiment: db.experiment(id)?,
                runs: db
                    .runs(id)?
                    .into_iter()
                    .map(|run| ListedRun {
                        trace: traces.remove(&run.id).map(at),
                        run,
                    })
                    .collect(),
            }
        }
    })
}

impl crate::output::Render for Listing {
    fn text(&self) -> String {
        match self {
            Listing::Experiments(e) => experiments_table(e),
            Listing::Runs { experiment, runs } => runs_table(experiment, runs),
        }
    }
}

/// One line per experiment.
fn experiments_table(exps: &[Experiment]) -> String {
    if exps.is_empty() {
        return "no experiments stored yet\n".to_string();
    }
    // Names and cell keys whole, however long: cut short, two could not be told apart.
    let names = width(exps.iter().map(|e| safe(&e.name)), "name");
    let mut out = format!(
        "{:>4}  {:<19}  {}  {:<11}  {:>4}  {:>6}  {:>4}  host / kernel\n",
        "id",
        "created (UTC)",
        pad_right("name", names),
        "status",
        "ok",
        "failed",
        "n/a"
    );
    for e in exps {
        let _ = writeln!(
            out,
            "{:>4}  {:<19}  {}  {:<11}  {:>4}  {:>6}  {:>4}  {} / {}{}",
            e.id,
            format_utc(e.created_unix),
            pad_right(&safe(&e.name), names),
            safe(&e.status),
            e.runs_ok,
            e.runs_failed,
            e.runs_not_applicable,
            safe(&e.host),
            safe(&e.kernel),
            match e.part_of {
                Some(p) => format!("  (one host of experiment {p})"),
                None => String::new(),
            } + &tags_text(e)
        );
    }
    out
}

/// "  tags: a=1, b=2" for an experiment whose runs carry tags (what `compare` selects them
/// by), else nothing.
fn tags_text(e: &Experiment) -> String {
    if e.tags.is_empty() {
        return String::new();
    }
    format!("  tags: {}", safe(&e.tags.join(", ")))
}

/// One line per run of one experiment, in the order they ran; where runs kept traces, a last
/// column says where.
fn runs_table(exp: &Experiment, runs: &[ListedRun]) -> String {
    let mut out = format!(
        "experiment {} \"{}\" ({}){}, {} on {}{}\n",
        exp.id,
        safe(&exp.name),
        safe(&exp.status),
        exp.seed_text(),
        safe(&exp.kernel),
        safe(&exp.host),
        tags_text(exp)
    );
    if runs.is_empty() {
        out.push_str("no runs stored\n");
        return out;
    }
    let traced = runs.iter().any(|r| r.trace.is_some());
    let cells = width(runs.iter().map(|r| safe(&r.run.cell_key)), "cell");
    let header = format!(
        "{:>6}  {}  {:>3}  {:<19}  {:>7}  {:<10}{}",
        "run",
        pad_right("cell", cells),
        "rep",
        "start (UTC)",
        "secs",
        "status",
        if traced { "  trace" } else { "" }
    );
    let _ = writeln!(out, "{}", header.trim_end());
    for ListedRun { run: r, trace } in runs {
        let mut status = r.status.as_str().to_string();
        if r.warmup {
            status.push_str(" (warm-up)");
        }
        if let Some(reason) = r.status.reason() {
            let _ = write!(status, ": {}", safe(reason));
        }
        let line = format!(
            "{:>6}  {}  {:>3}  {:<19}  {:>7.1}  {:<10}{}",
            r.id,
            pad_right(&safe(&r.cell_key), cells),
            r.repetition,
            format_utc(r.start_unix),
            r.end_unix - r.start_unix,
            status,
            match trace {
                Some(t) => format!("  {}", safe(t)),
                None => String::new(),
            }
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

/// The width of a column holding `values` under `header`, in terminal columns.
fn width<S: AsRef<str>>(values: impl Iterator<Item = S>, header: &str) -> usize {
    values
        .map(|v| display_width(v.as_ref()))
        .chain([header.len()])
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished experiment with no runs, to be filled in.
    fn experiment(id: i64, name: &str) -> Experiment {
        Experiment {
            id,
            name: name.into(),
            seed: 0,
            created_unix: 0.0,
            host: "h".into(),
            kernel: "k".into(),
            status: "done".into(),
            part_of: None,
            runs_ok: 0,
            runs_failed: 0,
            runs_not_applicable: 0,
            tags: Vec::new(),
        }
    }

    /// Cells that differ only at the end of a long key are listed whole, each its own.
    #[test]
    fn long_cell_keys_are_listed_whole_and_aligned() {
        let run = |id, cell: &str| ListedRun {
            run: Run {
                id,
                experiment_id: 1,
                cell_key: cell.into(),
                cell_levels: serde_json::json!({}),
                repetition: 1,
                warmup: false,
                start_unix: 0.0,
                end_unix: 1.0,
                status: crate::store::RunStatus::Ok,
            },
            trace: None,
        };
        let exp = Experiment {
            runs_ok: 2,
            ..experiment(1, "a name longer than the twenty characters it once had")
        };
        let keys = [
            "scheduler=mq-deadline,placement=on",
            "scheduler=mq-deadline,placement=near",
        ];
        let text = runs_table(&exp, &[run(1, keys[0]), run(2, keys[1])]);
        for key in keys {
            assert!(text.contains(&format!("  {key} ")), "{text}");
        }
        let start_at: Vec<usize> = text
            .lines()
            .skip(2)
            .map(|l| l.find("1970").unwrap())
            .collect();
        assert_eq!(start_at[0], start_at[1], "{text}");
        let listed = experiments_table(&[exp]);
        assert!(
            listed.contains("the twenty characters it once had  done"),
            "{listed}"
        );
        // Columns line up on a terminal, where a CJK character takes two columns and an
        // accent none of its own.
        let keys = [
            "scheduler=日本語日本語",
            "scheduler=u\u{308}nicode",
            "scheduler=none",
        ];
        let text = runs_table(&experiment(2, "名前"), &keys.map(|k| run(1, k)));
        let columns: Vec<usize> = text
            .lines()
            .skip(2)
            .map(|l| crate::report::format::display_width(&l[..l.find("1970").unwrap()]))
            .collect();
        assert!(columns.iter().all(|c| *c == columns[0]), "{text}");
        let listed =
            experiments_table(&[experiment(2, "日本語の名前"), experiment(3, "ascii name")]);
        let columns: Vec<usize> = listed
            .lines()
            .map(|l| {
                crate::report::format::display_width(
                    &l[..l
                        .find("  done")
                        .unwrap_or_else(|| l.find("  status").unwrap())],
                )
            })
            .collect();
        assert!(columns.iter().all(|c| *c == columns[0]), "{listed}");
    }

    #[test]
    fn a_hosts_own_experiment_names_the_experiment_it_is_part_of() {
        let exp = |id, host: &str, part_of| Experiment {
            host: host.into(),
            kernel: "6.1.0".into(),
            part_of,
            runs_ok: 12,
            ..experiment(id, "hosts")
        };
        let text = experiments_table(&[exp(7, "lab1+lab2", None), exp(8, "lab1", Some(7))]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(!lines[1].contains("one host"), "{text}");
        assert!(text.contains("  hosts  "), "{text}");
        assert!(
            lines[2].ends_with("lab1 / 6.1.0  (one host of experiment 7)"),
            "{text}"
        );
    }
}

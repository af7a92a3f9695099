//! fio's verdict on every cell's job, before a run or a dry run touches anything: a value fio
//! refuses (`bs = 0`, `rwmixread = 150`) would otherwise fail each run of its cell, one after
//! another, once the target was made and the knobs were set (see `workload::fio_check`).

use anyhow::{bail, Result};

use super::file::Experiment;
use super::plan::{cells, Cell};
use crate::workload::{fio_check, options, FioRunner};

/// Refuses the experiment when fio refuses a cell's job, naming the cell and fio's words.
/// `Some(why)` when fio cannot be started to check them (a run stops there; a dry run says
/// so).
pub(crate) fn check_jobs(exp: &Experiment, runner: &dyn FioRunner) -> Result<Option<String>> {
    // A program engine runs no fio, the hosts' own fio parses their jobs, and with
    // `allow_exec` fio may load code as it parses (an external engine), which a dry run must
    // not do.
    if !exp.engine.engine().runs_job_file() || !exp.target.hosts.is_empty() || exp.policy.allow_exec
    {
        return Ok(None);
    }
    let cells = cells(exp);
    // A cell whose job cannot be built is refused with its reason when the runs are planned.
    let (checked, jobs): (Vec<&Cell>, Vec<_>) = cells
        .iter()
        .filter_map(|c| Some((c, c.job(exp, "-", None).ok()?)))
        .unzip();
    for batch in fio_check::batches(&jobs) {
        let refused = match runner.check(&batch) {
            Ok(None) => continue,
            Ok(Some(refused)) => refused,
            Err(why) => return Ok(Some(why)),
        };
        let cell = refused
            .section
            .as_deref()
            .and_then(|s| s.strip_prefix("cell")?.parse::<usize>().ok())
            .and_then(|i| checked.get(i));
        let whose = match cell {
            _ if cells.len() == 1 => "the workload".to_string(),
            Some(c) if !from_workload(&refused.said, c) => format!("cell `{}`", c.key),
            Some(_) => "the workload, which every cell shares".to_string(),
            None => "the experiment's jobs".to_string(),
        };
        bail!(
            "fio refuses {whose}: {}; each run of it would fail, and nothing was touched \
             (checked with `fio --parse-only`)",
            refused.said
        );
    }
    Ok(None)
}

/// Whether the option fio names (`fio: failed parsing NAME=VALUE`) is the workload's, which
/// every cell shares, rather than one of `cell`'s factor levels.
fn from_workload(said: &str, cell: &Cell) -> bool {
    let Some(name) = said
        .split("failed parsing ")
        .nth(1)
        .and_then(|rest| rest.split('=').next())
    else {
        return false;
    };
    let name = options::canonical(name.trim());
    !cell
        .fio_overrides()
        .iter()
        .any(|(n, _)| options::canonical(n) == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::file::parse;
    use crate::workload::fio_check::Refused;
    use crate::workload::{FioOutcome, JobSpec};
    use std::cell::RefCell;

    /// Refuses the first section with `bs=0` in fio's words (or, `global`, any file with
    /// words that name no section), and counts the files it was handed.
    #[derive(Default)]
    struct Fio {
        files: RefCell<usize>,
        global: bool,
    }

    impl FioRunner for Fio {
        fn run(&self, _job: &JobSpec) -> Result<FioOutcome> {
            unreachable!("a check runs nothing")
        }
        fn check(&self, job: &JobSpec) -> Result<Option<Refused>, String> {
            *self.files.borrow_mut() += 1;
            if self.global {
                return Ok(Some(Refused::from_stderr("fio: a complaint\n")));
            }
            let text = job.job_file();
            let Some(at) = text.find("bs=0\n") else {
                return Ok(None);
            };
            let section = text[..at].rsplit('[').next().unwrap().split(']').next();
            Ok(Some(Refused::from_stderr(&format!(
                "bs: min value out of range: 0 (1 min)\nfio: failed parsing bs=0\n\
                 fio: job {} dropped\n",
                section.unwrap()
            ))))
        }
    }

    fn exp(workload: &str, factors: &str) -> Experiment {
        parse(
            "t.toml",
            &format!(
                "name = \"t\"\n[workload]\nrw = \"randread\"\n{workload}\n[factors]\n{factors}\n"
            ),
        )
        .unwrap()
    }

    #[test]
    fn the_cell_fio_refuses_is_named_with_fios_words() {
        let fio = Fio::default();
        let e = exp(
            "",
            "scheduler = [\"none\", \"mq-deadline\"]\nbs = [\"4k\", \"0\"]",
        );
        let err = check_jobs(&e, &fio).unwrap_err().to_string();
        assert_eq!(
            err,
            "fio refuses cell `scheduler=none,bs=0`: bs: min value out of range: 0 (1 min); fio: \
             failed parsing bs=0; each run of it would fail, and nothing was touched (checked \
             with `fio --parse-only`)"
        );
        // Four cells, one file.
        assert_eq!(*fio.files.borrow(), 1);
        assert_eq!(
            check_jobs(&exp("", "bs = [\"4k\", \"8k\"]"), &fio).unwrap(),
            None
        );
    }

    /// A value of the workload's own is every cell's: the first cell is not blamed for it.
    #[test]
    fn a_value_of_the_workload_is_named_as_every_cells() {
        let fio = Fio::default();
        let e = exp("bs = \"0\"", "scheduler = [\"none\", \"mq-deadline\"]");
        let err = check_jobs(&e, &fio).unwrap_err().to_string();
        assert!(
            err.starts_with("fio refuses the workload, which every cell shares: bs: min"),
            "{err}"
        );
        let one = exp("", "bs = [\"0\"]");
        let err = check_jobs(&one, &fio).unwrap_err().to_string();
        assert!(err.starts_with("fio refuses the workload: bs:"), "{err}");
    }

    /// A refusal that names no section (fio's words about the file as a whole) blames no cell.
    #[test]
    fn a_refusal_naming_no_section_blames_no_cell() {
        let fio = Fio {
            global: true,
            ..Fio::default()
        };
        let e = exp("", "bs = [\"4k\", \"8k\"]");
        let err = check_jobs(&e, &fio).unwrap_err().to_string();
        assert!(
            err.starts_with("fio refuses the experiment's jobs: fio: a complaint;"),
            "{err}"
        );
    }

    #[test]
    fn jobs_with_allow_exec_are_not_checked_since_parsing_may_load_code() {
        let fio = Fio::default();
        let e = parse(
            "t.toml",
            "name = \"t\"\nallow_exec = true\n[workload]\nrw = \"read\"\n[factors]\nbs = [\"0\"]\n",
        )
        .unwrap();
        assert_eq!(check_jobs(&e, &fio).unwrap(), None);
        assert_eq!(*fio.files.borrow(), 0);
    }
}

//! fio's verdict on every cell's job, before a run or a dry run touches anything: a value fio
//! refuses (`bs = 0`, `rwmixread = 150`) would otherwise fail each run of its cell, one after
//! another, once the target was made and the knobs were set (see `workload::fio_check`).

use anyhow::{bail, Result};

use super::file::Experiment;
use super::plan::cells;
use crate::workload::fio_check;
use crate::workload::FioRunner;

/// Refuses the experiment when fio refuses a cell's job, naming the cell and fio's words.
pub(crate) fn check_jobs(exp: &Experiment, runner: &dyn FioRunner) -> Result<()> {
    // A program engine runs no fio, the hosts' own fio parses their jobs, and with
    // `allow_exec` fio may load code as it parses (an external engine), which a dry run must
    // not do.
    if !exp.engine.engine().runs_job_file() || !exp.target.hosts.is_empty() || exp.policy.allow_exec
    {
        return Ok(());
    }
    let cells = cells(exp);
    // A cell whose job cannot be built is refused with its reason when the runs are planned.
    let (keys, jobs): (Vec<&str>, Vec<_>) = cells
        .iter()
        .filter_map(|c| Some((c.key.as_str(), c.job(exp, "-", None).ok()?)))
        .unzip();
    for batch in fio_check::batches(&jobs) {
        let Some(refused) = runner.check(&batch) else {
            continue;
        };
        let cell = refused
            .section
            .as_deref()
            .and_then(|s| s.strip_prefix("cell")?.parse::<usize>().ok())
            .and_then(|i| keys.get(i));
        let whose = match cell {
            Some(key) if cells.len() > 1 => format!("the job of cell `{key}`"),
            _ => "the workload's job".to_string(),
        };
        bail!(
            "fio refuses {whose}: {} (checked with `fio --parse-only` before anything was \
             touched: each run of it would fail)",
            refused.said
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::file::parse;
    use crate::workload::fio_check::Refused;
    use crate::workload::{FioOutcome, JobSpec};
    use std::cell::RefCell;

    /// Refuses the first section with `bs=0` as fio does, and counts the files it was handed.
    #[derive(Default)]
    struct Fio {
        files: RefCell<usize>,
    }

    impl FioRunner for Fio {
        fn run(&self, _job: &JobSpec) -> Result<FioOutcome> {
            unreachable!("a check runs nothing")
        }
        fn check(&self, job: &JobSpec) -> Option<Refused> {
            *self.files.borrow_mut() += 1;
            let text = job.job_file();
            let at = text.find("bs=0\n")?;
            let section = text[..at].rsplit('[').next()?.split(']').next()?;
            Refused::from_stderr(&format!(
                "bs: min value out of range: 0 (1 min)\nfio: job {section} dropped\n"
            ))
            .into()
        }
    }

    fn exp(extra: &str) -> Experiment {
        parse(
            "t.toml",
            &format!("name = \"t\"\n{extra}\n[workload]\nrw = \"randread\"\n"),
        )
        .unwrap()
    }

    #[test]
    fn the_cell_fio_refuses_is_named_with_fios_words() {
        let fio = Fio::default();
        let e = exp("[factors]\nscheduler = [\"none\", \"mq-deadline\"]\nbs = [\"4k\", \"0\"]");
        let err = check_jobs(&e, &fio).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "fio refuses the job of cell `scheduler=none,bs=0`: bs: min value out of range: \
                 0 (1 min) (checked with `fio --parse-only`"
            ),
            "{err}"
        );
        // Four cells, one file.
        assert_eq!(*fio.files.borrow(), 1);
        let one = exp("[factors]\nbs = [\"0\"]");
        let err = check_jobs(&one, &fio).unwrap_err().to_string();
        assert!(
            err.starts_with("fio refuses the workload's job: bs:"),
            "{err}"
        );
        check_jobs(&exp("[factors]\nbs = [\"4k\", \"8k\"]"), &fio).unwrap();
    }

    #[test]
    fn jobs_fio_would_load_code_for_or_hosts_parse_are_not_checked() {
        let fio = Fio::default();
        check_jobs(&exp("allow_exec = true\n[factors]\nbs = [\"0\"]"), &fio).unwrap();
        assert_eq!(*fio.files.borrow(), 0);
    }
}

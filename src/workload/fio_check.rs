//! fio checks the ranges of its options' values (`bs = 0`, `rwmixread = 150`, `iodepth = 0`)
//! only as it starts a job. iolab's allow-list checks each option's form, not fio's ranges,
//! which change between fio versions, so such a cell used to fail every one of its runs,
//! after the target was made and the knobs were set. `fio --parse-only` reads a job file and
//! checks every value, opening no file and starting no I/O. Before a run or a dry run touches
//! anything, iolab hands it every cell's job, a section per cell, and refuses the experiment
//! when fio refuses a cell.

use std::process::Command;
use std::time::Duration;

use super::confine::Confinement;
use super::job::JobSpec;
use super::process::{self, Limits};
use super::runner::{CancelToken, RealFio};

/// Jobs in one fio call, `numjobs` clones counted. fio limits the jobs of one run
/// (`--max-jobs`); 3.33's `--parse-only` took 5,000 sections without complaint, but a call
/// stays well within any such limit, and 1,024 sections parse in about 0.2 s.
const JOBS_PER_CALL: u64 = 1024;

/// What fio said of a job file it refused.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    /// The section fio dropped (`fio: job NAME dropped`), when it named one.
    pub section: Option<String>,
    /// fio's other lines, joined.
    pub said: String,
}

impl Refused {
    /// Reads fio's standard error after a refusal.
    pub(crate) fn from_stderr(stderr: &str) -> Refused {
        let mut section = None;
        let mut said = Vec::new();
        for line in stderr.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let dropped = line
                .strip_prefix("fio: job ")
                .and_then(|rest| rest.strip_suffix(" dropped"));
            match dropped {
                Some(name) => section = Some(name.to_string()),
                None => said.push(line),
            }
        }
        Refused {
            section,
            said: said.join("; "),
        }
    }
}

/// How long fio may take to read a batch of jobs.
const PARSE_TIME_LIMIT: Duration = Duration::from_secs(30);

/// Runs `fio --parse-only -` with `job`'s file on its standard input (so no file is written
/// and no directory is needed): `Ok(None)` when fio took it, or stopped in a way that says
/// nothing of the job (killed, cancelled: the run then says what is wrong); a refusal when
/// fio refused it or did not finish in time; `Err` when fio cannot be started at all (not
/// installed), with the reason.
pub(crate) fn parse_only(fio: &RealFio, job: &JobSpec) -> Result<Option<Refused>, String> {
    parse_only_within(&fio.program, &fio.cancel, job, PARSE_TIME_LIMIT)
}

fn parse_only_within(
    program: &std::path::Path,
    cancel: &CancelToken,
    job: &JobSpec,
    time_limit: Duration,
) -> Result<Option<Refused>, String> {
    let mut cmd = Command::new(program);
    cmd.args(["--parse-only", "-"]);
    // Reading a job writes nothing: fio may write nowhere but /dev/null while it does (a job
    // that runs programs is left to them, as when it runs).
    let confinement = match job.runs_programs() {
        true => None,
        false => Confinement::fio_local(&[], &[]).map_err(|e| format!("{e:#}"))?,
    };
    let once = confinement
        .as_ref()
        .map(|c| c.start(&mut cmd))
        .transpose()
        .map_err(|e| format!("{e:#}"))?;
    let limits = Limits {
        time_limit: Some(time_limit),
        grace: Duration::from_secs(1),
        cancel: cancel.clone(),
    };
    let raw = process::run_fed(cmd, None, &limits, Some(job.job_file().as_bytes()), once)
        .map_err(|e| format!("{e:#}"))?;
    // fio parses a thousand jobs in a fraction of a second: one that takes longer is stuck on
    // something (a program it started), and a run of the same jobs would be too.
    if raw.timed_out.is_some() && !raw.cancelled {
        return Ok(Some(Refused {
            section: None,
            said: format!(
                "it did not finish reading them within {} s",
                time_limit.as_secs_f64()
            ),
        }));
    }
    Ok(match raw.exit_code {
        Some(code) if code != 0 && !raw.cancelled => Some(Refused::from_stderr(&raw.stderr)),
        _ => None,
    })
}

/// `jobs` in job files of at most `JOBS_PER_CALL` jobs each, each section renamed `cellN`
/// after its place in `jobs`, so a refusal names the cell.
pub(crate) fn batches(jobs: &[JobSpec]) -> Vec<JobSpec> {
    let mut out: Vec<JobSpec> = Vec::new();
    let mut held = 0;
    for (i, job) in jobs.iter().enumerate() {
        // A job's clones: its `numjobs` (fio refuses what does not parse, counted as 1).
        let clones = job
            .option("numjobs")
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or(1)
            .max(1);
        let mut section = job.clone();
        section.name = format!("cell{i}");
        section.also.clear();
        match out.last_mut() {
            Some(lead) if held + clones <= JOBS_PER_CALL => {
                lead.also.push(section);
                held += clones;
            }
            _ => {
                out.push(section);
                held = clones;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::job::JobBuilder;

    fn job(opts: &[(&str, &str)]) -> JobSpec {
        let mut b = JobBuilder::new("iolab").filename("-");
        for (n, v) in opts {
            b = b.set(n, v);
        }
        b.build().unwrap()
    }

    #[test]
    fn fios_words_name_the_dropped_section() {
        let r = Refused::from_stderr(
            "bs: min value out of range: 0 (1 min)\nfio: failed parsing bs=0\nfio: job cell3 dropped\n",
        );
        assert_eq!(r.section.as_deref(), Some("cell3"));
        assert_eq!(
            r.said,
            "bs: min value out of range: 0 (1 min); fio: failed parsing bs=0"
        );
        let r = Refused::from_stderr("fio: some global complaint\n");
        assert_eq!(r.section, None);
        assert_eq!(r.said, "fio: some global complaint");
    }

    #[test]
    fn a_parse_that_does_not_finish_in_time_is_a_refusal() {
        let dir = tempfile::tempdir().unwrap();
        let stuck = dir.path().join("fio");
        std::fs::write(&stuck, "#!/bin/sh\nexec sleep 20\n").unwrap();
        std::fs::set_permissions(&stuck, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let started = std::time::Instant::now();
        // A job that runs a program: fio is not confined, so a script may stand in for it.
        let runs_a_program = JobBuilder::new("iolab")
            .filename("-")
            .policy(crate::workload::options::OptionPolicy {
                allow_exec: true,
                ..Default::default()
            })
            .set("exec_prerun", "true")
            .build()
            .unwrap();
        let r = parse_only_within(
            &stuck,
            &CancelToken::new(),
            &runs_a_program,
            Duration::from_millis(200),
        )
        .unwrap()
        .expect("a refusal");
        assert_eq!(r.section, None);
        assert_eq!(r.said, "it did not finish reading them within 0.2 s");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn batches_hold_every_cell_once_within_the_bound() {
        let jobs: Vec<JobSpec> = (0..2500)
            .map(|i| match i {
                7 => job(&[("numjobs", "1020")]),
                _ => job(&[("bs", "4k")]),
            })
            .collect();
        let files = batches(&jobs);
        let mut names = Vec::new();
        for f in &files {
            let clones: u64 = std::iter::once(f)
                .chain(&f.also)
                .map(|s| s.option("numjobs").map_or(1, |n| n.parse().unwrap()))
                .sum();
            assert!(clones <= JOBS_PER_CALL, "{clones}");
            names.extend(std::iter::once(f).chain(&f.also).map(|s| s.name.clone()));
        }
        let expected: Vec<String> = (0..2500).map(|i| format!("cell{i}")).collect();
        assert_eq!(names, expected);
        assert!(files[0]
            .job_file()
            .contains("[cell0]\nfilename=-\nbs=4k\n[cell1]\n"));
        // numjobs = 1020 does not fit beside the first seven cells: it starts the second file.
        assert_eq!(files[1].name, "cell7");
    }
}

//! One fio job file per experiment cell. The job file is the record of what ran (fio's JSON
//! drops valueless booleans such as `hipri`, so the store keeps this text), and building it is
//! the last point where options are checked: the base workload, the cell's overrides, then
//! what iolab itself decides (target, CPU placement, polling) — in that order, so iolab's own
//! settings always win and a user option can never silently contradict them.

use super::options::{self, OptionPolicy, Refusal, PLACEMENT_OPTIONS, POLLING_ENGINES};
use crate::sys::parse::format_cpulist;

/// A job ready to hand to a runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    /// The cell this job realises, e.g. `rq_affinity=1,placement=far` (replay looks it up).
    pub cell_key: String,
    /// fio's job name (section header).
    pub(crate) name: String,
    /// The target device or file.
    pub filename: String,
    /// Options in the order they appear in the job file, `filename` excluded.
    pub(crate) options: Vec<(String, String)>,
    /// Why this job writes to its target, `None` when it only reads.
    pub(crate) writes: Option<String>,
    /// Further sections of the same job file (one per further device of a multi-device
    /// experiment); fio runs all sections at once.
    pub(crate) also: Vec<JobSpec>,
    /// Where the files fio writes itself (the logs of `write_*_log`) are kept; `None`: they go
    /// with the run's private directory when the run ends.
    pub(crate) files_dir: Option<std::path::PathBuf>,
    /// Client mode with one job file per fio server (`--client=H1 a.fio --client=H2 b.fio`):
    /// each server's address and its own job file (its device, its placement). Empty: this
    /// job's file goes to every server the runner names, or runs here.
    pub per_host: Vec<(String, String)>,
}

/// Why a job could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("{0}")]
    Refused(#[from] Refusal),
    #[error("`{option}` conflicts with {what}: remove it from the workload")]
    Conflict { option: String, what: String },
    #[error("polling needs one of the engines {engines}, but the workload sets ioengine={engine}")]
    EngineCannotPoll { engine: String, engines: String },
    #[error("no target file or device was given")]
    NoTarget,
    #[error("an empty CPU list cannot be pinned to")]
    EmptyCpuList,
    #[error(
        "`{option}=...` would be a job-file line of {bytes} bytes, longer than fio reads whole \
         ({max}): the rest would reach fio as options iolab never checked",
        max = options::FIO_LINE_MAX
    )]
    LineTooLong { option: String, bytes: usize },
}

/// Builds a `JobSpec` step by step.
#[derive(Debug, Clone, Default)]
pub struct JobBuilder {
    name: String,
    cell_key: String,
    options: Vec<(String, String)>,
    filename: Option<String>,
    cpus: Option<(Vec<u32>, bool)>,
    polling: Option<bool>,
    policy: OptionPolicy,
}

impl JobBuilder {
    pub fn new(name: &str) -> Self {
        JobBuilder {
            name: name.to_string(),
            ..Default::default()
        }
    }

    pub fn cell_key(mut self, key: &str) -> Self {
        self.cell_key = key.to_string();
        self
    }

    pub(crate) fn policy(mut self, policy: OptionPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The experiment's base workload (plain fio options).
    pub fn base<'a>(mut self, options: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        for (n, v) in options {
            self = self.set(n, v);
        }
        self
    }

    /// Sets one option, replacing an earlier value of the same option (aliases included:
    /// `blocksize` replaces `bs`) in place, so the job file keeps the workload's order.
    pub fn set(mut self, name: &str, value: &str) -> Self {
        let canon = options::canonical(name);
        match self
            .options
            .iter_mut()
            .find(|(n, _)| options::canonical(n) == canon)
        {
            Some(slot) => *slot = (canon.to_string(), value.to_string()),
            None => self.options.push((canon.to_string(), value.to_string())),
        }
        self
    }

    pub fn filename(mut self, path: &str) -> Self {
        self.filename = Some(path.to_string());
        self
    }

    /// Pins the job to these CPUs; `split` gives each of `numjobs` clones its own CPU.
    pub fn cpus(mut self, cpus: &[u32], split: bool) -> Self {
        self.cpus = Some((cpus.to_vec(), split));
        self
    }

    /// Polled completions on or off. Either way the engine is io_uring unless the workload
    /// chose another polling engine, so on/off compares polling and nothing else.
    pub fn polling(mut self, on: bool) -> Self {
        self.polling = Some(on);
        self
    }

    pub fn build(self) -> Result<JobSpec, JobError> {
        let filename = self.filename.clone().ok_or(JobError::NoTarget)?;
        for (n, v) in &self.options {
            options::check_option(n, v, &self.policy)?;
        }
        let mut opts = self.options;
        if let Some((cpus, split)) = &self.cpus {
            if cpus.is_empty() {
                return Err(JobError::EmptyCpuList);
            }
            if let Some((n, _)) = opts
                .iter()
                .find(|(n, _)| PLACEMENT_OPTIONS.contains(&n.as_str()))
            {
                return Err(JobError::Conflict {
                    option: n.clone(),
                    what: "the placement factor, which pins fio itself".to_string(),
                });
            }
            opts.push(("cpus_allowed".to_string(), format_cpulist(cpus)));
            if *split {
                opts.push(("cpus_allowed_policy".to_string(), "split".to_string()));
            }
        }
        if let Some(on) = self.polling {
            if let Some((n, _)) = opts.iter().find(|(n, _)| n == "hipri") {
                return Err(JobError::Conflict {
                    option: n.clone(),
                    what: "the polling factor, which sets hipri itself".to_string(),
                });
            }
            match opts.iter().find(|(n, _)| n == "ioengine") {
                Some((_, engine)) if !POLLING_ENGINES.contains(&engine.as_str()) => {
                    return Err(JobError::EngineCannotPoll {
                        engine: engine.clone(),
                        engines: POLLING_ENGINES.join(", "),
                    })
                }
                Some(_) => {}
                None => opts.push(("ioengine".to_string(), "io_uring".to_string())),
            }
            opts.push(("hipri".to_string(), if on { "1" } else { "0" }.to_string()));
        }
        // The last word on what fio reads: iolab's own additions too stay whole lines.
        if let Some((n, v)) = opts
            .iter()
            .chain(std::iter::once(&("filename".to_string(), filename.clone())))
            .find(|(n, v)| n.len() + 1 + v.len() > options::FIO_LINE_MAX)
        {
            return Err(JobError::LineTooLong {
                option: n.clone(),
                bytes: n.len() + 1 + v.len(),
            });
        }
        let writes = options::writes(opts.iter().map(|(n, v)| (n.as_str(), v.as_str())));
        Ok(JobSpec {
            cell_key: self.cell_key,
            name: sanitize_name(&self.name),
            filename,
            options: opts,
            writes,
            also: Vec::new(),
            files_dir: None,
            per_host: Vec::new(),
        })
    }
}

/// fio section names are free text, but `[`/`]`, spaces and the reserved word `global` would
/// change the file's meaning.
fn sanitize_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if cleaned.is_empty() || cleaned == "global" {
        "iolab".to_string()
    } else {
        // Kept short: fio reads the rest of a line past its 8 KiB as a line of its own, and a
        // name made of an experiment's and a device's is no clearer for being long.
        cleaned.chars().take(SECTION_NAME_MAX).collect()
    }
}

/// The longest section name written (ASCII after `sanitize_name`).
const SECTION_NAME_MAX: usize = 64;

/// The longest cell key a job file's comment repeats (the store keeps the whole key).
const CELL_COMMENT_MAX: usize = 256;

impl JobSpec {
    /// The fio job file, as stored with the run.
    pub fn job_file(&self) -> String {
        let mut out = String::from("; fio job file written by iolab\n");
        if !self.cell_key.is_empty() {
            // A comment too is a line fio reads in 8 KiB pieces.
            let key: String = self.cell_key.chars().take(CELL_COMMENT_MAX).collect();
            let cut = if key.len() < self.cell_key.len() {
                " ..."
            } else {
                ""
            };
            out.push_str(&format!(
                "; cell: {}{cut}\n",
                key.replace(['\n', '\r'], " ")
            ));
        }
        for section in std::iter::once(self).chain(&self.also) {
            // fio splits `filename` on ':' (several files); a colon in a path must be escaped.
            let filename = section.filename.replace(':', "\\:");
            out.push_str(&format!("[{}]\nfilename={filename}\n", section.name));
            for (n, v) in &section.options {
                // fio refuses `time_based=`: an empty value is its valueless form.
                match v.is_empty() {
                    true => out.push_str(&format!("{n}\n")),
                    false => out.push_str(&format!("{n}={v}\n")),
                }
            }
        }
        out
    }

    /// One job file driving several targets at once: the first job leads, the others become
    /// its further sections. With more than one, each section is named after its target
    /// (`iolab-sdb`) so fio's per-job results and errors say which device they are about.
    pub(crate) fn join(mut jobs: Vec<JobSpec>) -> Option<JobSpec> {
        if jobs.len() > 1 {
            for j in &mut jobs {
                let base = j
                    .filename
                    .rsplit('/')
                    .next()
                    .unwrap_or_default()
                    .to_string();
                j.name = sanitize_name(&format!("{}-{base}", j.name));
            }
        }
        let mut jobs = jobs.into_iter();
        let mut lead = jobs.next()?;
        lead.also.extend(jobs);
        lead.writes = std::iter::once(&lead)
            .chain(&lead.also)
            .find_map(|j| j.writes.clone());
        Some(lead)
    }

    /// The last value of an option, by any of its names.
    pub fn option(&self, name: &str) -> Option<&str> {
        let canon = options::canonical(name);
        self.options
            .iter()
            .rev()
            .find(|(n, _)| n == canon)
            .map(|(_, v)| v.as_str())
    }

    /// True when some section asks fio for per-I/O logs (files fio writes itself).
    pub(crate) fn writes_logs(&self) -> bool {
        std::iter::once(self).chain(&self.also).any(|j| {
            options::LOG_NAME_OPTIONS
                .iter()
                .any(|o| j.option(o).is_some())
        })
    }

    /// Whether any section runs a program or loads code (`allow_exec`).
    pub(crate) fn runs_programs(&self) -> bool {
        options::runs_programs(
            std::iter::once(self)
                .chain(&self.also)
                .flat_map(|j| j.options.iter().map(|(n, v)| (n.as_str(), v.as_str()))),
        )
    }

    /// How long a run should take (ramp_time + runtime) when fio is told a runtime and
    /// `time_based`; `None` when fio stops by size.
    pub(crate) fn nominal_seconds(&self) -> Option<f64> {
        Some(self.measured_seconds()? + self.seconds("ramp_time").unwrap_or(0.0))
    }

    /// How long fio measures (runtime, after ramp_time) when it is `time_based`.
    pub(crate) fn measured_seconds(&self) -> Option<f64> {
        if self.option("time_based").is_none_or(|v| v.trim() == "0") {
            return None;
        }
        self.seconds("runtime")
    }

    fn seconds(&self, name: &str) -> Option<f64> {
        self.option(name)
            .and_then(|t| crate::sys::parse::duration::duration(t).ok())
            .map(|d| d.as_secs_f64())
    }

    /// True when the job asks for polled completions.
    pub(crate) fn polls(&self) -> bool {
        self.option("hipri").is_some_and(|v| v.trim() != "0")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> JobBuilder {
        JobBuilder::new("rr")
            .cell_key("rq_affinity=1,placement=far")
            .base([
                ("rw", "randread"),
                ("bs", "4k"),
                ("iodepth", "32"),
                ("time_based", "1"),
            ])
            .filename("/dev/loop7")
    }

    /// Every line of a job file is one fio reads whole, whatever the experiment's name or
    /// cell key (a long one was cut by fio into lines of their own, read as options).
    #[test]
    fn every_job_file_line_is_one_fio_reads_whole() {
        let long = format!("{}exec_prerun=x", "n".repeat(9000));
        let key = format!("{}\nioengine=external:/x.so", "k".repeat(9000));
        let job = JobBuilder::new(&long)
            .cell_key(&key)
            .base([("rw", "read")])
            .filename("/dev/loop7")
            .build()
            .unwrap();
        let text = job.job_file();
        assert!(text.lines().all(|l| l.len() < 300), "{text}");
        assert!(
            text.contains(&format!("[{}]\n", "n".repeat(SECTION_NAME_MAX))),
            "{text}"
        );
        assert!(
            text.contains(" ...\n") && !text.contains("external"),
            "{text}"
        );
        // iolab's own additions are bounded too: a CPU list fio could not read whole.
        let cpus: Vec<u32> = (0..4000).step_by(2).collect();
        let e = base().cpus(&cpus, false).build().unwrap_err();
        assert!(matches!(e, JobError::LineTooLong { .. }), "{e}");
    }

    #[test]
    fn job_file_has_workload_overrides_and_placement_in_order() {
        let job = base()
            .set("blocksize", "64k")
            .cpus(&[3, 0, 1, 2], true)
            .polling(true)
            .build()
            .unwrap();
        assert_eq!(
            job.job_file(),
            "; fio job file written by iolab\n\
             ; cell: rq_affinity=1,placement=far\n\
             [rr]\n\
             filename=/dev/loop7\n\
             rw=randread\n\
             bs=64k\n\
             iodepth=32\n\
             time_based=1\n\
             cpus_allowed=0-3\n\
             cpus_allowed_policy=split\n\
             ioengine=io_uring\n\
             hipri=1\n"
        );
        assert!(job.polls());
        assert_eq!(job.option("blocksize"), Some("64k"));
        assert_eq!(job.writes, None);
    }

    #[test]
    fn polling_off_keeps_the_engine_and_says_so() {
        let job = base().polling(false).build().unwrap();
        assert_eq!(job.option("ioengine"), Some("io_uring"));
        assert_eq!(job.option("hipri"), Some("0"));
        assert!(!job.polls());
    }

    #[test]
    fn conflicts_and_refusals() {
        assert!(matches!(
            base().set("cpus_allowed", "1").cpus(&[0], false).build(),
            Err(JobError::Conflict { .. })
        ));
        assert!(matches!(
            base().set("ioengine", "libaio").polling(true).build(),
            Err(JobError::EngineCannotPoll { .. })
        ));
        assert!(matches!(
            base().set("hipri", "1").polling(false).build(),
            Err(JobError::Conflict { .. })
        ));
        assert!(matches!(
            base().set("exec_prerun", "true").build(),
            Err(JobError::Refused(Refusal::RunsCode { .. }))
        ));
        assert_eq!(
            JobBuilder::new("x").build().unwrap_err(),
            JobError::NoTarget
        );
        assert_eq!(
            base().cpus(&[], false).build().unwrap_err(),
            JobError::EmptyCpuList
        );
    }

    #[test]
    fn colons_in_the_target_are_escaped() {
        let job = JobBuilder::new("x")
            .filename("/dev/disk/by-path/pci-0000:00:04.0")
            .build()
            .unwrap();
        assert!(job
            .job_file()
            .contains("filename=/dev/disk/by-path/pci-0000\\:00\\:04.0\n"));
    }

    /// fio refuses `time_based=`; a valueless option (from a job file, or `= ""` in TOML)
    /// is written as its bare name.
    #[test]
    fn valueless_options_are_written_bare() {
        let job = base().set("time_based", "").build().unwrap();
        assert!(
            job.job_file().contains("\ntime_based\n"),
            "{}",
            job.job_file()
        );
    }

    #[test]
    fn writes_are_reported() {
        let job = base().set("rw", "randwrite").build().unwrap();
        assert!(job.writes.unwrap().contains("randwrite"));
    }

    #[test]
    fn names() {
        assert_eq!(sanitize_name("a b]["), "a_b__");
        assert_eq!(sanitize_name("global"), "iolab");
    }

    #[test]
    fn joined_jobs_are_one_file_with_a_section_per_target() {
        let one = |f: &str, cpu: u32| base().filename(f).cpus(&[cpu], false).build().unwrap();
        let job = JobSpec::join(vec![one("/dev/sdb", 0), one("/dev/sdc", 3)]).unwrap();
        let file = job.job_file();
        assert!(
            file.ends_with(
                "[rr-sdb]\nfilename=/dev/sdb\nrw=randread\nbs=4k\niodepth=32\ntime_based=1\n\
                 cpus_allowed=0\n[rr-sdc]\nfilename=/dev/sdc\nrw=randread\nbs=4k\niodepth=32\n\
                 time_based=1\ncpus_allowed=3\n"
            ),
            "{file}"
        );
        // A single target keeps its name; no target is no job.
        assert_eq!(JobSpec::join(vec![one("/dev/sdb", 0)]).unwrap().name, "rr");
        assert_eq!(JobSpec::join(Vec::new()), None);
    }
}

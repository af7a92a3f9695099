//! Running fio. The run loop talks to a `FioRunner` trait: `RealFio` spawns fio as a child
//! process (in its own process group, so cancelling also stops fio's forked job processes),
//! and `ReplayFio` hands back canned outputs so the whole run loop can be tested exactly and
//! fast. Both go through one pure `classify` that decides what a run's output means: success,
//! not applicable here (fio error 95, EOPNOTSUPP: e.g. a device that cannot poll), a fio
//! error with its errno, or a crash.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};

use super::confine::Confinement;
use super::engine::{Invocation, ProgramRun};
use super::fio_check::Refused;
use super::fio_json::{self, FioReport};
use super::job::JobSpec;
use super::process::shell_quote;
use super::run_dir::RunDir;

/// EOPNOTSUPP: the device or kernel cannot do what the job asked (polling on loop, dm, ...).
pub(crate) const ERRNO_NOT_SUPPORTED: i64 = 95;

/// Anything that can run a workload: a fio job, or a program engine's invocation
/// (`engine`).
pub trait FioRunner {
    fn run(&self, job: &JobSpec) -> Result<FioOutcome>;
    /// Runs a program engine's invocation (its server first, when iolab starts one). A
    /// runner made for fio alone (a test's) refuses.
    fn run_program(&self, inv: &Invocation) -> Result<ProgramRun> {
        Err(anyhow!(
            "this runner runs fio only; cell `{}` needs a program engine",
            inv.cell_key
        ))
    }

    /// fio's refusal of a job's values, found without running it (`fio_check`); `Ok(None)`
    /// when it takes them, `Err` when fio cannot be started. A runner that runs no real fio
    /// (a test's) takes every job.
    fn check(&self, _job: &JobSpec) -> Result<Option<Refused>, String> {
        Ok(None)
    }
}

/// What a run came to.
#[derive(Debug, Clone, PartialEq)]
pub enum FioStatus {
    Success,
    /// The cell cannot be realised on this device; record it, do not retry.
    NotApplicable {
        errno: i64,
        reason: String,
    },
    /// fio ran and reported an error (`errno` when fio named one).
    FioError {
        errno: Option<i64>,
        message: String,
    },
    /// fio died, hung or printed no result.
    Crash {
        reason: String,
    },
    /// Stopped on request (Ctrl-C, SIGTERM).
    Cancelled,
}

/// Everything a run leaves behind, stored with the run.
#[derive(Debug, Clone, PartialEq)]
pub struct FioOutcome {
    pub command_line: String,
    pub job_file: String,
    pub(crate) stdout: String,
    pub stderr: String,
    pub(crate) exit_code: Option<i32>,
    pub(crate) signal: Option<i32>,
    pub(crate) elapsed: Duration,
    pub status: FioStatus,
    /// The parsed output when there was one (also for errors: fio reports per-job errors).
    pub report: Option<FioReport>,
}

#[cfg(test)]
impl FioOutcome {
    /// A run that succeeded and printed nothing (no report): for tests of what is made of
    /// the rest of a run.
    pub(crate) fn quiet_success() -> FioOutcome {
        FioOutcome {
            command_line: String::new(),
            job_file: String::new(),
            stdout: String::new(),
            stderr: String::new(),
            exit_code: Some(0),
            signal: None,
            elapsed: Duration::ZERO,
            status: FioStatus::Success,
            report: None,
        }
    }
}

/// The raw result of running fio, before interpretation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawOutput {
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) exit_code: Option<i32>,
    pub(crate) signal: Option<i32>,
    pub cancelled: bool,
    /// Killed because it ran past the runner's time limit.
    pub timed_out: Option<Duration>,
    /// Bytes of standard output beyond what is kept (`process::OUTPUT_KEPT`).
    pub(crate) stdout_left_out: u64,
}

/// Short names for the errnos fio reports most.
pub(crate) fn errno_name(errno: i64) -> &'static str {
    match errno {
        1 => "EPERM",
        2 => "ENOENT",
        5 => "EIO",
        11 => "EAGAIN",
        12 => "ENOMEM",
        13 => "EACCES",
        16 => "EBUSY",
        22 => "EINVAL",
        28 => "ENOSPC",
        30 => "EROFS",
        95 => "EOPNOTSUPP",
        110 => "ETIMEDOUT",
        _ => "errno",
    }
}

/// Decides what a run's output means. Pure: the same for real and replayed runs.
pub(crate) fn classify(job: &JobSpec, raw: &RawOutput) -> (FioStatus, Option<FioReport>) {
    let parsed = fio_json::parse(&raw.stdout);
    let report = parsed.as_ref().ok().cloned();
    if raw.cancelled {
        return (FioStatus::Cancelled, report);
    }
    if let Some(limit) = raw.timed_out {
        let reason = format!(
            "fio did not finish within {} s and was killed",
            limit.as_secs()
        );
        return (FioStatus::Crash { reason }, report);
    }
    if let Some(reason) = super::process::too_much_output("fio", raw) {
        return (FioStatus::Crash { reason }, None);
    }
    if let Some(sig) = raw.signal {
        let reason = format!("fio was killed by signal {sig}{}", stderr_tail(&raw.stderr));
        return (FioStatus::Crash { reason }, report);
    }
    let errno = match &report {
        Some(r) => r.first_error().map(|(name, e)| (name.to_string(), e)),
        None => errno_in_text(&raw.stderr)
            .or_else(|| errno_in_text(&raw.stdout))
            .map(|e| (job.name.clone(), e)),
    };
    if let Some((name, e)) = errno {
        if e == ERRNO_NOT_SUPPORTED {
            let reason = if job.polls() {
                "device cannot poll (fio error 95, EOPNOTSUPP: polled I/O needs a queue with \
                 poll queues, io_poll=1)"
                    .to_string()
            } else {
                "the device does not support this operation (fio error 95, EOPNOTSUPP)".to_string()
            };
            return (FioStatus::NotApplicable { errno: e, reason }, report);
        }
        let message = format!(
            "fio job `{name}` failed with error {e} ({}){}",
            errno_name(e),
            stderr_tail(&raw.stderr)
        );
        return (
            FioStatus::FioError {
                errno: Some(e),
                message,
            },
            report,
        );
    }
    match (&parsed, raw.exit_code) {
        (Ok(r), Some(0)) if !r.did_io() => (
            FioStatus::FioError {
                errno: None,
                message: "fio did no I/O (every job completed 0 reads, writes and trims): the \
                          run measured nothing; check the job's size, offset and block size"
                    .to_string(),
            },
            report,
        ),
        (Ok(_), Some(0)) => (FioStatus::Success, report),
        (Ok(_), code) => (
            FioStatus::FioError {
                errno: None,
                message: format!(
                    "fio exited with status {}{}",
                    code.map_or("?".to_string(), |c| c.to_string()),
                    stderr_tail(&raw.stderr)
                ),
            },
            report,
        ),
        (Err(e), Some(code)) if code != 0 => (
            FioStatus::FioError {
                errno: None,
                message: format!(
                    "fio exited with status {code}: {e}{}",
                    stderr_tail(&raw.stderr)
                ),
            },
            None,
        ),
        (Err(e), _) => (
            FioStatus::Crash {
                reason: format!("fio gave no usable result: {e}{}", stderr_tail(&raw.stderr)),
            },
            None,
        ),
    }
}

/// fio's own error lines carry `err=NN/` or `error=...`; take the errno from the first.
fn errno_in_text(text: &str) -> Option<i64> {
    text.lines().find_map(|line| {
        let rest = &line[line.find("err=")? + 4..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok().filter(|&e| e > 0)
    })
}

/// The last few lines of fio's stderr, for error messages.
fn stderr_tail(stderr: &str) -> String {
    super::process::said("fio", stderr)
}

/// How often a waiting runner looks at fio and at the cancel flag. Each look wakes a CPU that
/// fio may be using; ten a second keeps Ctrl-C prompt and iolab's own share of the machine
/// far below what the sampler overhead bench can resolve.
pub(crate) const POLL: Duration = Duration::from_millis(100);

/// A flag the run loop sets on Ctrl-C / SIGTERM; a running fio is then stopped gracefully.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    pub(crate) fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Runs the real fio binary.
#[derive(Debug, Clone)]
pub struct RealFio {
    /// The fio program (default: `fio` from PATH).
    pub program: PathBuf,
    /// Where each run's private directory is made (fio's working directory and `--aux-path`,
    /// with the job file): iolab's state directory unless a caller says otherwise.
    pub work_dir: PathBuf,
    /// Kill fio if it runs longer than this (it should stop by itself after runtime).
    pub time_limit: Option<Duration>,
    /// How long fio gets to print its results after SIGTERM before SIGKILL.
    pub grace: Duration,
    pub cancel: CancelToken,
    /// fio servers to run the job on at once (client mode); empty: run it here.
    pub clients: Vec<String>,
}

impl Default for RealFio {
    fn default() -> Self {
        RealFio {
            program: PathBuf::from("fio"),
            work_dir: default_work_dir(),
            time_limit: None,
            grace: Duration::from_secs(5),
            cancel: CancelToken::new(),
            clients: Vec::new(),
        }
    }
}

/// `STATE_DIR/fio`: iolab's own directory, where `iolab restore` sweeps what a killed run left.
pub(crate) fn default_work_dir() -> PathBuf {
    work_dir_in(&crate::knobs::state_dir())
}

/// fio's directory in the state directory `state`.
pub(crate) fn work_dir_in(state: &Path) -> PathBuf {
    state.join("fio")
}

impl RealFio {
    /// The arguments fio is started with, before the job file.
    pub(crate) const ARGS: [&'static str; 2] = ["--output-format=json+", "--eta=never"];
    /// The same in client mode. fio's client notices a server that stopped answering only
    /// by the ETA requests it sends going unanswered (5 s each; fio 3.33 drops the server at
    /// the seventh, about 40 s after it went quiet): with `--eta=never` it sends none, and
    /// waited for a server cut off without a reset until iolab's time limit killed it,
    /// losing every other server's figures of that run. With JSON output it prints no ETA;
    /// its "timeout on SEND_ETA" lines come before the JSON, as fio's notes.
    const CLIENT_ARGS: [&'static str; 2] = ["--output-format=json+", "--eta=auto"];

    /// fio's arguments: the fixed ones, where fio keeps its state files, the client host list
    /// when there is one, else how often to print status reports (they say when the job
    /// measured, `fio_window`; a local run only, as only a local run is sampled), the job file.
    fn arguments(
        job: &std::path::Path,
        aux: &std::path::Path,
        hosts: Option<&std::path::Path>,
        status: std::time::Duration,
    ) -> Vec<String> {
        let fixed = if hosts.is_some() {
            Self::CLIENT_ARGS
        } else {
            Self::ARGS
        };
        fixed
            .iter()
            .map(|s| s.to_string())
            .chain(std::iter::once(format!("--aux-path={}", aux.display())))
            .chain(hosts.map(|h| format!("--client={}", h.display())))
            .chain(
                hosts
                    .is_none()
                    .then(|| format!("--status-interval={}ms", status.as_millis())),
            )
            .chain(std::iter::once(job.display().to_string()))
            .collect()
    }

    /// Client mode with a job file per server: `--client=H1 a.fio --client=H2 b.fio`.
    fn per_host_arguments(
        aux: &std::path::Path,
        files: &[(String, std::path::PathBuf)],
    ) -> Vec<String> {
        Self::CLIENT_ARGS
            .iter()
            .map(|s| s.to_string())
            .chain(std::iter::once(format!("--aux-path={}", aux.display())))
            .chain(
                files
                    .iter()
                    .flat_map(|(h, f)| [format!("--client={h}"), f.display().to_string()]),
            )
            .collect()
    }

    /// Runs fio in `confinement` when there is one; a
    /// confined fio can start no program either (`exec_once`): one that may is not confined.
    fn execute(
        &self,
        args: &[String],
        cwd: &std::path::Path,
        confinement: Option<&Confinement>,
    ) -> Result<RawOutput> {
        let mut cmd = Command::new(&self.program);
        cmd.args(args).current_dir(cwd);
        let once = confinement.map(|c| c.start(&mut cmd)).transpose()?;
        super::process::run_fed(cmd, None, &self.limits(), None, once)
    }

    /// Where this job's fio may write: the run's own directories, and, when it runs here, the
    /// targets of its sections that write (`confine`). A job that runs programs is left to
    /// them, and one on something other than block devices (a file fio lays out, in tests) to
    /// the option checks; `None` too when this kernel cannot confine fio here.
    fn confinement(&self, job: &JobSpec, dirs: &[&std::path::Path]) -> Result<Option<Confinement>> {
        let sections = || std::iter::once(job).chain(&job.also);
        if !self.clients.is_empty() || !job.per_host.is_empty() {
            // A client's servers can make it read and write files.
            return Confinement::fio_client(&self.program, dirs).map(Some);
        }
        let on_devices = sections().all(|j| {
            std::fs::metadata(&j.filename)
                .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_block_device(&m.file_type()))
        });
        if job.runs_programs() || !on_devices {
            return Ok(None);
        }
        let devices: Vec<&std::path::Path> = sections()
            .filter(|j| j.writes.is_some())
            .map(|j| std::path::Path::new(&j.filename))
            .collect();
        Confinement::fio_local(dirs, &devices)
    }

    /// The time limit, grace and cancel flag every program this runner starts obeys.
    pub(crate) fn limits(&self) -> super::process::Limits {
        super::process::Limits {
            time_limit: self.time_limit,
            grace: self.grace,
            cancel: self.cancel.clone(),
        }
    }
}

impl FioRunner for RealFio {
    fn check(&self, job: &JobSpec) -> Result<Option<Refused>, String> {
        // In client mode each server's own fio parses the job.
        if !self.clients.is_empty() {
            return Ok(None);
        }
        super::fio_check::parse_only(self, job)
    }

    fn run(&self, job: &JobSpec) -> Result<FioOutcome> {
        // Removed when this function returns, however it returns.
        let dir = RunDir::create(&self.work_dir).with_context(|| {
            format!(
                "cannot make fio's run directory under {}",
                self.work_dir.display()
            )
        })?;
        let path = dir.path().join(format!("{}.fio", job.name));
        let job_file = job.job_file();
        std::fs::write(&path, &job_file)
            .with_context(|| format!("cannot write the fio job file {}", path.display()))?;
        // Client mode reads the servers from a file, one per line.
        let hosts = (!self.clients.is_empty()).then(|| dir.path().join("hosts"));
        if let Some(h) = &hosts {
            std::fs::write(h, self.clients.join("\n") + "\n")
                .with_context(|| format!("cannot write the fio host list {}", h.display()))?;
        }
        // fio writes its logs into its working directory: the run's own, or where the caller
        // keeps them.
        let cwd = match &job.files_dir {
            Some(d) => {
                std::fs::create_dir_all(d)
                    .with_context(|| format!("cannot make {}", d.display()))?;
                d.clone()
            }
            None => dir.path().to_path_buf(),
        };
        let status = super::fio_window::status_interval(job.nominal_seconds());
        let args = if job.per_host.is_empty() {
            Self::arguments(&path, dir.path(), hosts.as_deref(), status)
        } else {
            let mut files = Vec::new();
            for (i, (host, text)) in job.per_host.iter().enumerate() {
                let p = dir.path().join(format!("{}-host{i}.fio", job.name));
                std::fs::write(&p, text)
                    .with_context(|| format!("cannot write the fio job file {}", p.display()))?;
                files.push((host.clone(), p));
            }
            Self::per_host_arguments(dir.path(), &files)
        };
        let command_line = std::iter::once(self.program.display().to_string())
            .chain(args.iter().cloned())
            .map(|a| shell_quote(&a))
            .collect::<Vec<_>>()
            .join(" ");
        let start = Instant::now();
        let confinement = self.confinement(job, &[dir.path(), cwd.as_path()])?;
        let raw = self.execute(&args, &cwd, confinement.as_ref());
        if let Some(d) = &job.files_dir {
            // Only removes it when fio wrote nothing there.
            let _ = std::fs::remove_dir(d);
        }
        let raw = raw?;
        let (status, report) = classify(job, &raw);
        Ok(FioOutcome {
            command_line,
            job_file,
            stdout: raw.stdout,
            stderr: raw.stderr,
            exit_code: raw.exit_code,
            signal: raw.signal,
            elapsed: start.elapsed(),
            status,
            report,
        })
    }

    fn run_program(&self, inv: &Invocation) -> Result<ProgramRun> {
        self.program_run(inv)
    }
}

impl RealFio {
    /// Where program engines run: `STATE_DIR/engine`, swept like fio's.
    pub(crate) fn engine_dir(&self) -> PathBuf {
        self.work_dir.with_file_name("engine")
    }
}

/// `argv` as the first process of a PID namespace of its own (util-linux `unshare`): when it
/// ends (exits, is killed, runs out of time) the kernel ends every process it started, also
/// those that left its process group (`setsid`, a daemon). Those would go on loading the
/// machine through the next runs and, holding its output pipes, keep its run from ending.
/// The namespace needs root; without it, or without unshare, ending the group is all there is.
fn in_own_pid_namespace(argv: Vec<String>) -> Vec<String> {
    let unshare = std::path::Path::new("unshare");
    let Some(unshare) = crate::sys::is_root()
        .then(|| super::confine::resolve(unshare))
        .flatten()
    else {
        return argv;
    };
    // --kill-child: the program is killed with unshare (iolab's SIGKILL to the group reaches
    // unshare; the program, its namespace's init, heeds no signal it has no handler for).
    let mut wrapped = vec![
        unshare.display().to_string(),
        "--pid".into(),
        "--fork".into(),
        "--kill-child".into(),
        "--".into(),
    ];
    wrapped.extend(argv);
    wrapped
}

/// Runs `argv` (a program and its arguments) in `cwd`.
fn program(argv: &[String], cwd: &std::path::Path) -> Result<Command> {
    let (first, rest) = argv
        .split_first()
        .ok_or_else(|| anyhow!("the engine gave no program to run"))?;
    let mut cmd = Command::new(first);
    cmd.args(rest).current_dir(cwd);
    Ok(cmd)
}

impl RealFio {
    fn program_run(&self, inv: &Invocation) -> Result<ProgramRun> {
        let dir = RunDir::create(&self.engine_dir()).with_context(|| {
            format!(
                "cannot make the run directory under {}",
                self.engine_dir().display()
            )
        })?;
        let d = dir.path().display().to_string();
        let command_line = inv.command_line(&d);
        // Stopped (its whole group) when this function returns, however it returns.
        let server = match &inv.server {
            Some(s) => Some(super::netserver::start(s, dir.path(), &self.cancel)?),
            None => None,
        };
        let limits = super::process::Limits {
            time_limit: Some(inv.time_limit),
            ..self.limits()
        };
        let start = Instant::now();
        let mut raw = super::process::run(
            program(&in_own_pid_namespace(inv.client_argv(&d)), dir.path())?,
            inv.cpus.as_deref(),
            &limits,
        )?;
        let elapsed = start.elapsed();
        if let Some(s) = server {
            let said = s.stop();
            if raw.exit_code != Some(0) && !said.trim().is_empty() {
                raw.stderr.push_str(&format!("\nserver: {}", said.trim()));
            }
        }
        Ok(ProgramRun {
            command_line,
            raw,
            elapsed,
        })
    }
}

/// A canned fio result for replay.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Canned {
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) exit_code: Option<i32>,
    pub(crate) signal: Option<i32>,
}

impl Canned {
    /// A run that exited with `exit_code` after printing `stdout` and `stderr`.
    pub fn exited(stdout: &str, stderr: &str, exit_code: i32) -> Self {
        Canned {
            stdout: stdout.to_string(),
            stderr: stderr.to_string(),
            exit_code: Some(exit_code),
            signal: None,
        }
    }

    /// A run killed by a signal.
    #[cfg(test)]
    pub(crate) fn killed(signal: i32) -> Self {
        Canned {
            signal: Some(signal),
            ..Default::default()
        }
    }

    /// Reads `STEM.out` and, if present, `STEM.stderr` (as captured for the fixtures).
    pub fn from_files(stem: &std::path::Path, exit_code: i32) -> Result<Self> {
        let out = stem.with_extension("out");
        let stdout = std::fs::read_to_string(&out)
            .with_context(|| format!("cannot read {}", out.display()))?;
        let err = stem.with_extension("stderr");
        let stderr = std::fs::read_to_string(&err).unwrap_or_default();
        Ok(Canned::exited(&stdout, &stderr, exit_code))
    }
}

impl From<Canned> for RawOutput {
    fn from(c: Canned) -> RawOutput {
        RawOutput {
            stdout: c.stdout,
            stderr: c.stderr,
            exit_code: c.exit_code,
            signal: c.signal,
            cancelled: false,
            timed_out: None,
            stdout_left_out: 0,
        }
    }
}

/// Replays canned outputs: in order, or per cell key (the last one for a cell repeats, so one
/// output can stand for every repetition of that cell). Records every job it was given.
#[derive(Debug, Default)]
pub struct ReplayFio {
    in_order: Mutex<VecDeque<Canned>>,
    by_cell: Mutex<HashMap<String, VecDeque<Canned>>>,
    calls: Mutex<Vec<JobSpec>>,
    program_calls: Mutex<Vec<Invocation>>,
}

impl ReplayFio {
    pub fn in_order(outputs: impl IntoIterator<Item = Canned>) -> Self {
        ReplayFio {
            in_order: Mutex::new(outputs.into_iter().collect()),
            ..Default::default()
        }
    }

    pub fn by_cell(outputs: impl IntoIterator<Item = (String, Vec<Canned>)>) -> Self {
        ReplayFio {
            by_cell: Mutex::new(
                outputs
                    .into_iter()
                    .map(|(k, v)| (k, v.into_iter().collect()))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    /// The jobs run so far, in order.
    pub fn calls(&self) -> Vec<JobSpec> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// The program invocations run so far, in order.
    pub fn program_calls(&self) -> Vec<Invocation> {
        self.program_calls
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default()
    }

    fn next_for(&self, job: &JobSpec) -> Result<Canned> {
        self.next_for_cell(&job.cell_key)
    }

    fn next_for_cell(&self, cell_key: &str) -> Result<Canned> {
        let lock_err = || anyhow!("replay runner state is poisoned");
        let mut cells = self.by_cell.lock().map_err(|_| lock_err())?;
        if let Some(queue) = cells.get_mut(cell_key) {
            return match queue.len() {
                0 => Err(anyhow!("replay has no output for cell `{cell_key}`")),
                1 => Ok(queue[0].clone()),
                _ => Ok(queue.pop_front().expect("non-empty")),
            };
        }
        drop(cells);
        let runs = self.calls.lock().map_err(|_| lock_err())?.len()
            + self.program_calls.lock().map_err(|_| lock_err())?.len();
        self.in_order
            .lock()
            .map_err(|_| lock_err())?
            .pop_front()
            .ok_or_else(|| {
                anyhow!("replay ran out of canned outputs after {runs} runs (cell `{cell_key}`)")
            })
    }
}

impl FioRunner for ReplayFio {
    fn run(&self, job: &JobSpec) -> Result<FioOutcome> {
        let canned = self.next_for(job)?;
        self.calls
            .lock()
            .map_err(|_| anyhow!("replay runner state is poisoned"))?
            .push(job.clone());
        let raw = RawOutput::from(canned);
        let (status, report) = classify(job, &raw);
        Ok(FioOutcome {
            command_line: format!("replay {}", shell_quote(&job.name)),
            job_file: job.job_file(),
            stdout: raw.stdout,
            stderr: raw.stderr,
            exit_code: raw.exit_code,
            signal: raw.signal,
            elapsed: Duration::ZERO,
            status,
            report,
        })
    }

    fn run_program(&self, inv: &Invocation) -> Result<ProgramRun> {
        let canned = self.next_for_cell(&inv.cell_key)?;
        self.program_calls
            .lock()
            .map_err(|_| anyhow!("replay runner state is poisoned"))?
            .push(inv.clone());
        Ok(ProgramRun {
            command_line: format!("replay {}", inv.command_line("RUNDIR")),
            raw: RawOutput::from(canned),
            elapsed: Duration::ZERO,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::JobBuilder;

    #[test]
    fn client_mode_adds_the_host_list_before_the_job_file() {
        use std::path::Path;
        let (job, aux) = (Path::new("/run/d/j.fio"), Path::new("/run/d"));
        let status = Duration::from_millis(500);
        assert_eq!(
            RealFio::arguments(job, aux, None, status),
            vec![
                "--output-format=json+",
                "--eta=never",
                "--aux-path=/run/d",
                "--status-interval=500ms",
                "/run/d/j.fio"
            ]
        );
        assert_eq!(
            RealFio::arguments(job, aux, Some(Path::new("/run/d/hosts")), status),
            vec![
                "--output-format=json+",
                "--eta=auto",
                "--aux-path=/run/d",
                "--client=/run/d/hosts",
                "/run/d/j.fio"
            ]
        );
    }

    #[test]
    fn one_job_file_per_host_follows_each_client() {
        let files = [
            (
                "10.0.0.1,8765".to_string(),
                PathBuf::from("/run/d/j-host0.fio"),
            ),
            ("10.0.0.2".to_string(), PathBuf::from("/run/d/j-host1.fio")),
        ];
        assert_eq!(
            RealFio::per_host_arguments(std::path::Path::new("/run/d"), &files),
            [
                "--output-format=json+",
                "--eta=auto",
                "--aux-path=/run/d",
                "--client=10.0.0.1,8765",
                "/run/d/j-host0.fio",
                "--client=10.0.0.2",
                "/run/d/j-host1.fio",
            ]
        );
    }

    fn job(cell: &str, polling: Option<bool>) -> JobSpec {
        let b = JobBuilder::new("j")
            .cell_key(cell)
            .base([("rw", "randread")])
            .filename("/dev/loop0");
        match polling {
            Some(p) => b.polling(p),
            None => b,
        }
        .build()
        .unwrap()
    }

    const OK: &str = r#"{"jobs": [{"jobname": "j", "error": 0,
        "read": {"iops": 10, "total_ios": 10, "io_bytes": 40960}, "write": {}}]}"#;
    const ERR95: &str = r#"{"jobs": [{"jobname": "j", "error": 95, "read": {}, "write": {}}]}"#;
    const ERR5: &str = r#"{"jobs": [{"jobname": "j", "error": 5, "read": {}, "write": {}}]}"#;

    fn raw(stdout: &str, stderr: &str, code: Option<i32>) -> RawOutput {
        RawOutput {
            stdout: stdout.into(),
            stderr: stderr.into(),
            exit_code: code,
            ..Default::default()
        }
    }

    /// fio's own output goes through the same validation as imports: damage is a failed run
    /// with the JSON path, never an ok run with garbage figures.
    #[test]
    fn damaged_output_from_a_run_is_a_failure_naming_the_field() {
        let j = job("c", None);
        let bad = r#"{"jobs": [{"jobname": "j", "read": {"iops": -1e308}, "write": {}}]}"#;
        match classify(&j, &raw(bad, "", Some(0))) {
            (FioStatus::Crash { reason }, None) => {
                assert!(reason.contains("jobs[0].read.iops"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn classification() {
        let j = job("c", None);
        assert_eq!(classify(&j, &raw(OK, "", Some(0))).0, FioStatus::Success);
        // Exit 0 and no error, but not one I/O (fio's answer to bs=-4k): nothing measured.
        let idle = r#"{"jobs": [{"jobname": "j", "error": 0, "read": {"iops": 0.0, "total_ios": 0},
            "write": {"total_ios": 0}}]}"#;
        match classify(&j, &raw(idle, "", Some(0))).0 {
            FioStatus::FioError {
                errno: None,
                message,
            } => {
                assert!(message.contains("fio did no I/O"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        let polled = job("c", Some(true));
        match classify(&polled, &raw(ERR95, "", Some(1))).0 {
            FioStatus::NotApplicable { errno: 95, reason } => {
                assert!(reason.contains("cannot poll"))
            }
            other => panic!("{other:?}"),
        }
        match classify(&j, &raw(ERR95, "", Some(1))).0 {
            FioStatus::NotApplicable { reason, .. } => assert!(!reason.contains("poll")),
            other => panic!("{other:?}"),
        }
        match classify(
            &j,
            &raw(ERR5, "fio: io_u error: Input/output error", Some(1)),
        )
        .0
        {
            FioStatus::FioError {
                errno: Some(5),
                message,
            } => {
                assert!(message.contains("EIO") && message.contains("Input/output"))
            }
            other => panic!("{other:?}"),
        }
        // No JSON, fio complained: an error with the errno from its text.
        let (s, r) = classify(
            &j,
            &raw(
                "",
                "fio: pid=3, err=2/file:filesetup.c:1, error=No such file",
                Some(1),
            ),
        );
        assert!(r.is_none());
        assert!(
            matches!(s, FioStatus::FioError { errno: Some(2), .. }),
            "{s:?}"
        );
        assert!(matches!(
            classify(&j, &raw("", "fio: bad option", Some(1))).0,
            FioStatus::FioError { errno: None, .. }
        ));
        assert!(matches!(
            classify(&j, &raw("", "", Some(0))).0,
            FioStatus::Crash { .. }
        ));
        let mut killed = raw(OK, "", None);
        killed.signal = Some(9);
        assert!(matches!(classify(&j, &killed).0, FioStatus::Crash { .. }));
        killed.cancelled = true;
        assert_eq!(classify(&j, &killed).0, FioStatus::Cancelled);
        assert!(matches!(
            classify(&j, &raw(OK, "", Some(1))).0,
            FioStatus::FioError { errno: None, .. }
        ));
    }

    #[test]
    fn replay_in_order_then_runs_out() {
        let r = ReplayFio::in_order([Canned::exited(OK, "", 0), Canned::killed(9)]);
        assert_eq!(r.run(&job("a", None)).unwrap().status, FioStatus::Success);
        assert!(matches!(
            r.run(&job("b", None)).unwrap().status,
            FioStatus::Crash { .. }
        ));
        let e = r.run(&job("c", None)).unwrap_err().to_string();
        assert!(e.contains("ran out") && e.contains("after 2 runs"), "{e}");
        let cells: Vec<String> = r.calls().into_iter().map(|j| j.cell_key).collect();
        assert_eq!(cells, ["a", "b"]);
    }

    #[test]
    fn replay_by_cell_repeats_the_last_output() {
        let r = ReplayFio::by_cell([
            (
                "x".to_string(),
                vec![Canned::exited(ERR5, "", 1), Canned::exited(OK, "", 0)],
            ),
            ("y".to_string(), vec![Canned::exited(ERR95, "", 1)]),
        ]);
        assert!(matches!(
            r.run(&job("x", None)).unwrap().status,
            FioStatus::FioError { .. }
        ));
        for _ in 0..3 {
            assert_eq!(r.run(&job("x", None)).unwrap().status, FioStatus::Success);
        }
        assert!(matches!(
            r.run(&job("y", Some(true))).unwrap().status,
            FioStatus::NotApplicable { .. }
        ));
        assert!(r.run(&job("z", None)).is_err());
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("/tmp/a.fio"), "/tmp/a.fio");
        assert_eq!(shell_quote("a b'c"), r"'a b'\''c'");
    }

    /// Client mode, by a host list or by a job file per fio server, runs fio's client in its
    /// own domain, with no capabilities, whatever the job's target.
    #[test]
    fn both_forms_of_client_mode_run_the_client_confined() {
        if !super::super::confine::tests::landlock_or_skip(false) {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut job = JobBuilder::new("w")
            .cell_key("c")
            .base([("rw", "read")])
            .filename("/nonexistent/disk")
            .build()
            .unwrap();
        let program = std::path::PathBuf::from("/bin/sh");
        let dropped = |runner: &RealFio, job: &JobSpec| {
            runner
                .confinement(job, &[dir.path()])
                .unwrap()
                .map(|c| c.dropped())
        };
        let here = RealFio {
            program: program.clone(),
            ..RealFio::default()
        };
        // Not a block device: left to the option checks here.
        assert_eq!(dropped(&here, &job), None);
        let listed = RealFio {
            clients: vec!["10.0.0.1".into()],
            ..here
        };
        assert_eq!(dropped(&listed, &job), Some(u64::MAX));
        job.per_host = vec![("10.0.0.1".into(), job.job_file())];
        let per_server = RealFio {
            program,
            ..RealFio::default()
        };
        assert_eq!(dropped(&per_server, &job), Some(u64::MAX));
    }

    /// The kernel's guard behind the option checks, for programs: a confined fio runs a job
    /// but cannot start the program an option names (as an option wrongly judged harmless
    /// might), though its domain would let the program write where it was told to.
    #[test]
    fn a_confined_fio_runs_its_job_and_starts_no_program() {
        if !super::super::confine::tests::landlock_or_skip(false) {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let job = dir.path().join("j.fio");
        std::fs::write(
            &job,
            format!(
                "[read]\nfilename={d}/data\nsize=64k\nrw=read\nbs=4k\n\
                 [prerun]\nstonewall\nfilename={d}/data\nsize=64k\nrw=read\nbs=4k\n\
                 exec_prerun=touch {d}/ran-prerun\n"
            ),
        )
        .unwrap();
        let confinement = Confinement::fio_local(&[dir.path()], &[]).unwrap().unwrap();
        let runner = RealFio::default();
        let args = [job.display().to_string()];
        let raw = runner
            .execute(&args, dir.path(), Some(&confinement))
            .unwrap();
        let said = format!("{}{}", raw.stdout, raw.stderr);
        assert!(said.contains("READ: bw="), "{said}");
        assert!(!dir.path().join("ran-prerun").exists(), "{said}");
    }

    /// The kernel's guard behind the option checks: a job iolab takes for a reader cannot
    /// open its device for writing even when its options write, as an option wrongly judged
    /// harmless might; marked as writing, the same job writes.
    #[test]
    fn a_job_taken_for_a_reader_cannot_write_its_device() {
        if !super::super::confine::tests::landlock_or_skip(true) {
            return;
        }
        let state = tempfile::tempdir().unwrap();
        let dev = crate::target::ScratchDevice::create_in(state.path(), 8 << 20).unwrap();
        let path = format!("/dev/{}", dev.name());
        let start = || {
            use std::io::Read;
            let mut bytes = vec![0u8; 64 << 10];
            std::fs::File::open(&path)
                .unwrap()
                .read_exact(&mut bytes)
                .unwrap();
            bytes
        };
        let before = start();
        let mut job = JobBuilder::new("w")
            .cell_key("c")
            .base([
                ("rw", "write"),
                ("bs", "4k"),
                ("size", "64k"),
                ("direct", "1"),
            ])
            .filename(&path)
            .build()
            .unwrap();
        assert!(job.writes.is_some());
        let runner = RealFio {
            work_dir: state.path().join("fio"),
            ..RealFio::default()
        };
        job.writes = None;
        let refused = runner.run(&job).unwrap();
        assert_ne!(refused.status, FioStatus::Success, "{}", refused.stderr);
        assert!(
            refused.stderr.contains("Permission denied"),
            "{}",
            refused.stderr
        );
        assert_eq!(start(), before);
        job.writes = Some("rw=write".into());
        let wrote = runner.run(&job).unwrap();
        assert_eq!(wrote.status, FioStatus::Success, "{}", wrote.stderr);
        assert_ne!(start(), before);
    }
}

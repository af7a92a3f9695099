//! `iolab run EXPERIMENT.toml`: validate the file, then either print the resolved plan
//! (`--dry-run`, touching nothing) or run it through `experiment::run` with real fio, a
//! progress line on stderr, and the summary table on stdout. Ctrl-C and SIGTERM only set a
//! flag: the loop stops fio, restores every knob, removes the scratch device, and the process
//! exits with 128 + the signal number (130 for Ctrl-C).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Result};

use crate::experiment::run::{self as runloop, render, Settings};
use crate::workload::{CancelToken, RealFio};

/// Run an experiment: a matrix of knobs, CPU placements and fio options.
///
/// The cells are repeated in shuffled order, with the machine sampled and every run stored.
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("Print JSON instead of text")))]
pub(crate) struct RunArgs {
    /// The experiment file (see examples/).
    #[arg(value_name = "EXPERIMENT.toml")]
    pub experiment: PathBuf,
    /// Results database (default: $IOLAB_DB, else iolab.db in the current directory).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Tag every run (repeatable), e.g. --tag variant=backports. Names: lowercase letters,
    /// digits, '_', '-', '.'; values: no ','. Refused: `experiment`, `host`, `kernel` (iolab
    /// sets them; `kernel` is allowed with [target] hosts) and the experiment's factor names.
    // Parsed in `run`, not by clap: clap would echo a refused value with its control
    // characters raw, iolab's error printer escapes them.
    #[arg(long = "tag", value_name = "NAME=VALUE")]
    pub tags: Vec<String>,
    /// Run on this block device instead of the file's target ("default": a scratch device).
    #[arg(long, value_name = "DEV")]
    pub device: Option<String>,
    /// Allow a writing workload on this exact device although it may hold data. Its contents
    /// will be destroyed. Repeat it for each device of a several-device target.
    #[arg(long, value_name = "DEV")]
    pub destructive_device: Vec<String>,
    /// Let the experiment's fio job file read this environment variable as `${NAME}`
    /// (repeatable). Without it a job file reads none: one handed over with an experiment
    /// could otherwise copy a token or a home directory into the results. The value is stored
    /// with the results, in the job file of each run.
    #[arg(long = "job-env", value_name = "NAME")]
    pub job_env: Vec<String>,
    /// Print the resolved plan (cells, CPUs and why, knob writes, order, time) and stop. What
    /// would stop the run itself before its first run (a leftover of a killed run, a store it
    /// cannot write) is said, and listed under `would_stop` with --json; the exit status is 0.
    #[arg(long)]
    pub dry_run: bool,
    /// With --dry-run: plan against a snapshot made by `iolab snapshot` on another machine
    /// (its CPUs, nodes, devices, knobs and interrupts) instead of this one, to see where
    /// on/near/far fall there before going to run it. fio's check of the cells is this
    /// machine's fio.
    #[arg(long, value_name = "DIR", requires = "dry_run")]
    pub root: Option<PathBuf>,
    /// Sampling interval of /proc/interrupts, /proc/stat and /proc/diskstats, in ms
    /// (10 to 3600000); the longest one: a time-based run is read at least 100 times, yet
    /// not more often than every 20 ms, and a size-bound one every 20 ms at first, slowing
    /// down to this.
    #[arg(long, value_name = "MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub sample_ms: u64,
    /// Controlled hosts (`[[target.host]] ssh = ...`): how iolab is found on them.
    #[command(flatten)]
    pub remote: super::hosts::RemoteArgs,
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
}

/// The run was stopped by a signal after everything was restored; the exit code is 128 + it.
#[derive(Debug, thiserror::Error)]
pub(super) struct Stopped {
    pub signal: i32,
    /// Scratch devices the run had created (and removed); a named device is not removed.
    pub scratch_devices: usize,
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stopped by signal {}; knobs restored", self.signal)?;
        match self.scratch_devices {
            0 => Ok(()),
            1 => write!(f, ", scratch device removed"),
            n => write!(f, ", {n} scratch devices removed"),
        }
    }
}

impl Stopped {
    pub(super) fn exit_code(&self) -> i32 {
        128 + self.signal
    }
}

pub(super) fn run(args: RunArgs) -> Result<()> {
    // Before anything can be created: from here on a signal only sets the flag.
    let interrupt = crate::knobs::signals::Interrupt::install()?;
    let exp = crate::experiment::load_with_env(&args.experiment, &args.job_env)?;
    let mut settings = Settings::live(crate::store::resolve_db_path(args.db.as_deref()));
    settings.tags = super::parse_tags(&args.tags)?;
    settings.device = args.device.clone();
    settings.destructive_devices = args.destructive_device.clone();
    settings.sample_interval = Duration::from_millis(args.sample_ms.max(10));
    settings.ssh = args.remote.options();
    if let (true, Some(flag)) = (exp.target.host_specs.is_empty(), args.remote.given()) {
        return Err(super::usage(format!(
            "{flag} acts on the hosts of [[target.host]] tables (iolab over ssh); {} has none",
            args.experiment.display()
        )));
    }
    if let Some(dir) = &args.root {
        settings.root = crate::sys::SysRoot::machine_root(dir)?;
    }
    // Refused before anything is planned or changed, as at run time.
    if !exp.target.hosts.is_empty() || !exp.target.host_specs.is_empty() {
        crate::workload::confine::check_available()?;
    }

    if args.dry_run {
        let mut plan = runloop::dry_run(&exp, &settings, &RealFio::default())?;
        if let Some(dir) = &args.root {
            let host = settings.root.attr("/proc/sys/kernel/hostname");
            let kernel = settings.root.attr("/proc/sys/kernel/osrelease");
            plan.notes.push(format!(
                "planned against the snapshot in {} (host {}, kernel {}), not this machine; \
                 a snapshot holds no device contents, so a written device is checked for \
                 file system signatures only when the experiment runs there",
                dir.display(),
                host.as_deref().unwrap_or("unknown"),
                kernel.as_deref().unwrap_or("unknown")
            ));
        }
        return crate::output::print(
            &render::PlanView {
                plan: &plan,
                exp: &exp,
            },
            args.out,
        );
    }

    let cancel = CancelToken::new();
    let watcher = {
        let (cancel, interrupt) = (cancel.clone(), interrupt.clone());
        let done = CancelToken::new();
        let done2 = done.clone();
        let handle = std::thread::spawn(move || {
            while !done2.is_cancelled() {
                if interrupt.is_set() {
                    cancel.cancel();
                    return;
                }
                std::thread::sleep(crate::workload::runner::POLL);
            }
        });
        (done, handle)
    };
    // fio stops by itself after ramp + runtime; a hung fio is stopped well after that.
    let longest = crate::experiment::cells(&exp)
        .iter()
        .map(|c| c.nominal_seconds(&exp))
        .collect::<Option<Vec<f64>>>()
        .and_then(|v| v.into_iter().reduce(f64::max));
    let runner = RealFio {
        cancel: cancel.clone(),
        // `nominal_seconds` is at most 60 days, but never let a conversion panic.
        time_limit: longest.and_then(|s| Duration::try_from_secs_f64(s * 2.0 + 60.0).ok()),
        clients: exp.target.hosts.clone(),
        ..RealFio::default()
    };
    // What an iolab killed by SIGKILL left of fio's run directories.
    crate::workload::run_dir::sweep(&runner.work_dir);
    crate::workload::run_dir::sweep(&runner.engine_dir());
    let mut progress = super::progress::StderrProgress::new();
    let result = runloop::run(&exp, &settings, &runner, &cancel, &mut progress);
    watcher.0.cancel();
    let _ = watcher.1.join();
    let outcome = result?;
    let view = render::OutcomeView {
        outcome: &outcome,
        db_given: args.db.is_some(),
    };
    crate::output::print(&view, args.out)?;
    if outcome.interrupted {
        return Err(Stopped {
            signal: interrupt.signal().unwrap_or(libc::SIGINT),
            scratch_devices: if outcome.plan.scratch {
                outcome.plan.devices.len()
            } else {
                0
            },
        }
        .into());
    }
    if outcome.failed_runs > 0 {
        return Err(anyhow!(
            "{} run(s) failed (their reasons are above and stored with the runs)",
            outcome.failed_runs
        ));
    }
    Ok(())
}

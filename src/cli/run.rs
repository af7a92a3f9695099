//! `iolab run EXPERIMENT.toml`: validate the file, then either print the resolved plan
//! (`--dry-run`, touching nothing) or run it through `experiment::run` with real fio, a
//! progress line on stderr, and the summary table on stdout. Ctrl-C and SIGTERM only set a
//! flag: the loop stops fio, restores every knob, removes the scratch device, and the process
//! exits with 128 + the signal number (130 for Ctrl-C).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Result};

use crate::experiment::run::{self as runloop, Outcome, Plan, Settings};
use crate::report::table::MAX_WIDTH;
use crate::workload::{CancelToken, RealFio};

/// Run an experiment: a matrix of queue knobs, CPU placements and fio options, repeated in
/// shuffled order, with the machine sampled and every run stored.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
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
    /// Print the resolved plan (cells, CPUs and why, knob writes, order, time) and stop.
    #[arg(long)]
    pub dry_run: bool,
    /// Sampling interval of /proc/interrupts, /proc/stat and /proc/diskstats, in ms
    /// (10 to 3600000).
    #[arg(long, value_name = "MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub sample_ms: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The run was stopped by a signal after everything was restored; the exit code is 128 + it.
#[derive(Debug, thiserror::Error)]
pub struct Stopped {
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
    pub fn exit_code(&self) -> i32 {
        128 + self.signal
    }
}

pub fn run(args: RunArgs) -> Result<()> {
    // Before anything can be created: from here on a signal only sets the flag.
    let interrupt = crate::knobs::signals::Interrupt::install()?;
    let exp = crate::experiment::load(&args.experiment)?;
    let mut settings = Settings::live(crate::store::resolve_db_path(args.db.as_deref()));
    settings.tags = args
        .tags
        .iter()
        .map(|t| crate::store::tags::parse_tag(t))
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow!(e))?;
    settings.device = args.device.clone();
    settings.destructive_devices = args.destructive_device.clone();
    settings.sample_interval = Duration::from_millis(args.sample_ms.max(10));

    if args.dry_run {
        let plan = runloop::dry_run(&exp, &settings)?;
        let text = if args.json {
            serde_json::to_string_pretty(&plan)? + "\n"
        } else {
            plan_text(&plan, &exp)
        };
        return crate::output::stdout(&text);
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
    let text = if args.json {
        serde_json::to_string_pretty(&outcome_json(&outcome))? + "\n"
    } else {
        outcome_text(&outcome, args.db.is_some())
    };
    crate::output::stdout(&text)?;
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

pub(super) fn duration_text(s: f64) -> String {
    let s = s.round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// The resolved plan for people.
pub fn plan_text(plan: &Plan, exp: &crate::experiment::Experiment) -> String {
    // Cell keys, reasons and notes quote the file and the machine: escaped as a whole.
    crate::report::format::terminal_safe_lines(&plan_text_unescaped(plan, exp)).into_owned()
}

fn plan_text_unescaped(plan: &Plan, exp: &crate::experiment::Experiment) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "experiment: {} ({}), seed {}",
        exp.name, &exp.source, exp.seed
    );
    let names = plan
        .devices
        .iter()
        .map(|d| d.name.as_str())
        .collect::<Vec<_>>();
    if let Some(nic) = &plan.nic {
        let _ = writeln!(
            out,
            "target: NIC {nic} (on/near/far and irq_cpu refer to its interrupts: IRQ {})",
            plan.devices[0]
                .irqs
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
    } else if plan.scratch {
        let _ = writeln!(
            out,
            "target: {} new scratch loop device(s) (created when the run starts; called {} \
             below)",
            names.len(),
            names.join(", ")
        );
    } else {
        let _ = writeln!(
            out,
            "target: /dev/{}{}",
            names.join(", /dev/"),
            if exp.target.hosts.is_empty() {
                String::new()
            } else {
                format!(" on {}", exp.target.hosts.join(", "))
            }
        );
    }
    let _ = writeln!(out, "cells ({}):", plan.cells.len());
    for c in &plan.cells {
        let _ = writeln!(out, "  #{:<3} {}", c.index, c.key);
        if let Some(why) = &c.not_applicable {
            let _ = writeln!(out, "        not applicable: {why}");
            continue;
        }
        for d in &c.devices {
            // With several devices each has its own fio section and placement.
            let on = if plan.devices.len() > 1 {
                format!(" for /dev/{}", d.device)
            } else {
                String::new()
            };
            match (&d.cpus, &d.placement_why) {
                (Some(cpus), Some(why)) => {
                    let _ = writeln!(
                        out,
                        "        {}{on} on CPU {}: {why}",
                        exp.engine.name(),
                        crate::sys::parse::format_cpulist(cpus)
                    );
                }
                _ => {
                    let _ = writeln!(out, "        {}{on} unpinned", exp.engine.name());
                }
            }
        }
        for w in &c.writes {
            let _ = writeln!(out, "        set {} = {}", w.path, w.value);
        }
        if let Some(why) = &c.workload_writes {
            let _ = writeln!(out, "        writes to the device: {why}");
        }
        if let Some(cmd) = &c.command {
            let _ = writeln!(out, "        runs: {cmd}");
        }
    }
    let rounds = plan.order.iter().map(|r| r.round).max().unwrap_or(0);
    let _ = writeln!(
        out,
        "order ({} runs in {rounds} round(s){}):",
        plan.order.len(),
        if plan.adaptive {
            "; adaptive: more rounds for imprecise cells"
        } else {
            ""
        }
    );
    for round in 1..=rounds {
        let cells: Vec<String> = plan
            .order
            .iter()
            .filter(|r| r.round == round)
            .map(|r| format!("{}{}", r.cell, if r.warmup { "w" } else { "" }))
            .collect();
        let _ = writeln!(out, "  round {round}: {}", cells.join(" "));
    }
    match plan.estimated_seconds {
        Some(s) => {
            let _ = writeln!(out, "estimated time: {}", duration_text(s));
        }
        None => {
            let _ = writeln!(out, "estimated time: unknown (fio is not time based)");
        }
    }
    for n in &plan.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

fn outcome_text(o: &Outcome, db_given: bool) -> String {
    crate::report::format::terminal_safe_lines(&outcome_text_unescaped(o, db_given)).into_owned()
}

fn outcome_text_unescaped(o: &Outcome, db_given: bool) -> String {
    let mut out = String::new();
    let ran: usize = o.cells.iter().map(|c| c.runs.len()).sum();
    let na = o
        .cells
        .iter()
        .filter(|c| c.not_applicable.is_some())
        .count();
    let _ = writeln!(
        out,
        "experiment {} \"{}\": {ran} run(s) stored in {}, {} failed, {na} cell(s) not applicable{}",
        o.experiment_id,
        o.plan.experiment,
        o.db_path.display(),
        o.failed_runs,
        if o.interrupted { " (interrupted)" } else { "" }
    );
    out.push_str(&runloop::summary::table(&o.cells).render_text(MAX_WIDTH));
    if !o.capped_cells.is_empty() {
        let _ = writeln!(
            out,
            "adaptive repetitions: {} cell(s) reached `max` before the target precision on {}",
            o.capped_cells.len(),
            o.primary_metric
        );
    }
    let db = if db_given {
        format!(" --db {}", o.db_path.display())
    } else {
        String::new()
    };
    let _ = writeln!(out, "see it again: iolab show {}{db}", o.experiment_id);
    out
}

fn outcome_json(o: &Outcome) -> serde_json::Value {
    serde_json::json!({
        "experiment_id": o.experiment_id,
        "db": o.db_path,
        "interrupted": o.interrupted,
        "failed_runs": o.failed_runs,
        "capped_cells": o.capped_cells,
        "primary_metric": o.primary_metric,
        "summary": runloop::summary::table(&o.cells).to_json(),
        "cells": o.cells,
        "knob_changes": o.knob_changes,
        "restored": o.restored,
        "plan": o.plan,
    })
}

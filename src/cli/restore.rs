//! `iolab restore`: undo what a killed iolab left behind — knob changes still in the journal
//! (written back newest first, then the journal is removed) and scratch loop devices whose
//! guard never ran.

use std::fmt::Write as _;

/// Put back knobs (and remove scratch devices) left behind by an iolab that was killed.
#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// Print what was done as JSON.
    #[arg(long)]
    pub json: bool,
    /// Restore on this host instead, over ssh (`ssh HOST -- iolab restore`), e.g. once a host
    /// cut off mid-experiment is back. Repeat for several; `$IOLAB_SSH` adds ssh options.
    #[arg(long = "host", value_name = "HOST")]
    pub hosts: Vec<String>,
    /// The iolab to run on the hosts: a name on their PATH, or a path.
    #[arg(long, value_name = "PATH", default_value = "iolab", requires = "hosts")]
    pub remote_iolab: String,
}

pub fn run(args: RestoreArgs) -> anyhow::Result<()> {
    if !args.hosts.is_empty() {
        return on_hosts(&args);
    }
    let dir = crate::knobs::state_dir();
    let knobs = crate::knobs::replay(&dir)?;
    let scratch = crate::target::remove_leaked_scratch(&dir)?;
    let (interrupted, run_problems) = crate::experiment::run::registry::mark_abandoned(&dir)?;
    // fio's private run directories of killed runs (job files, a log fio was writing).
    let swept = crate::workload::run_dir::sweep(&crate::workload::runner::default_work_dir());
    let refused = knobs.as_ref().map_or(0, |k| k.refused.len());
    let problems = scratch.problems.len() + run_problems.len();
    if args.json {
        let doc = serde_json::json!({
            "knobs": knobs,
            "scratch_devices_removed": scratch.removed,
            "experiments_interrupted": interrupted,
            "fio_run_directories_removed": swept,
            "problems": scratch.problems.iter().chain(&run_problems).collect::<Vec<_>>(),
        });
        crate::output::stdout(&(serde_json::to_string_pretty(&doc)? + "\n"))?;
    } else {
        let mut out = String::new();
        match &knobs {
            None => out.push_str("no knob journal: nothing to restore\n"),
            Some(r) => {
                out += &restored_lines(r, "device no longer present");
                let _ = writeln!(
                    out,
                    "journal {} removed",
                    dir.join("journal.json").display()
                );
            }
        }
        for s in &scratch.removed {
            let _ = writeln!(out, "removed scratch device {s}");
        }
        for d in &swept {
            let _ = writeln!(out, "removed fio run directory {}", d.display());
        }
        for a in &interrupted {
            let _ = writeln!(
                out,
                "experiment {} in {} marked interrupted (its run was killed)",
                a.experiment_id,
                a.db_path.display()
            );
        }
        for p in scratch.problems.iter().chain(&run_problems) {
            let _ = writeln!(out, "problem  {p}");
        }
        // Not undone here: a placement written by `irq apply` is meant to stay.
        let placed = crate::knobs::pending(&crate::irq::apply::journal_dir())?.len();
        if placed > 0 {
            let _ = writeln!(
                out,
                "{placed} interrupt affinity change(s) by `iolab irq apply` stay in effect; \
                 `iolab irq rollback` undoes them"
            );
        }
        crate::output::stdout(&out)?;
    }
    // Everything that could be done was done; a forged or unreadable entry still fails the
    // command, so a script notices.
    if refused + problems > 0 {
        anyhow::bail!(
            "{refused} journal entr(y/ies) refused and {problems} other problem(s), listed \
             above; nothing outside iolab's own knobs and scratch files was touched"
        );
    }
    Ok(())
}

/// `--host`: each host's own `iolab restore`, one after the other; fails when any did.
fn on_hosts(args: &RestoreArgs) -> anyhow::Result<()> {
    let options = crate::hosts::ssh::SshOptions {
        remote_iolab: args.remote_iolab.clone(),
        ..Default::default()
    };
    let mut done = Vec::new();
    for host in &args.hosts {
        done.push(crate::hosts::restore::restore(host, &options, args.json)?);
    }
    if args.json {
        crate::output::stdout(&(serde_json::to_string_pretty(&done)? + "\n"))?;
    } else {
        let mut out = String::new();
        for d in &done {
            let _ = writeln!(out, "== {}", d.host);
            out += d.output.as_str().unwrap_or_default();
            for line in d.errors.lines() {
                let _ = writeln!(out, "{}: {line}", d.host);
            }
        }
        crate::output::stdout(&out)?;
    }
    let failed: Vec<&str> = done
        .iter()
        .filter(|d| !d.ok)
        .map(|d| d.host.as_str())
        .collect();
    if !failed.is_empty() {
        anyhow::bail!(
            "restore did not finish on {}: see above; run it again once the host answers",
            failed.join(", ")
        );
    }
    Ok(())
}

/// One line per knob written back, and per knob whose file is gone (`gone_why` says why).
pub(super) fn restored_lines(r: &crate::knobs::RestoreReport, gone_why: &str) -> String {
    let mut out = String::new();
    for e in &r.restored {
        let _ = writeln!(out, "restored {} = {} (was {})", e.path, e.old, e.new);
    }
    for e in &r.vanished {
        let _ = writeln!(out, "gone     {} ({gone_why})", e.path);
    }
    for r in &r.refused {
        let _ = writeln!(
            out,
            "refused  {} = {} (not written: {})",
            r.entry.path, r.entry.old, r.why
        );
    }
    out
}

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
}

pub fn run(args: RestoreArgs) -> anyhow::Result<()> {
    let dir = crate::knobs::state_dir();
    let knobs = crate::knobs::replay(&dir)?;
    let scratch = crate::target::remove_leaked_scratch(&dir)?;
    if args.json {
        let doc = serde_json::json!({ "knobs": knobs, "scratch_devices_removed": scratch });
        return super::emit::stdout(&(serde_json::to_string_pretty(&doc)? + "\n"));
    }
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
    for s in &scratch {
        let _ = writeln!(out, "removed scratch device {s}");
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
    super::emit::stdout(&out)
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
    out
}

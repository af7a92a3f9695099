//! What a killed iolab left behind, undone in one place: knob changes still in the journal
//! (written back newest first, then the journal removed), the tracefs settings of a killed
//! block trace recording (its own journal) and the tracefs mount it made, scratch loop
//! devices whose guard never ran,
//! experiments still marked running, and fio's private run directories. `iolab restore`
//! prints the result; keeping the sequence here leaves the CLI only its arguments.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::experiment::run::registry::Abandoned;
use crate::output::sorted_keys;
use crate::sys::SysRoot;

/// What `undo` did. Its JSON has the keys sorted, as scripts have always read it.
#[derive(Debug, Serialize)]
pub(crate) struct Leftovers {
    #[serde(serialize_with = "sorted_keys")]
    pub experiments_interrupted: Vec<Abandoned>,
    pub fio_run_directories_removed: Vec<PathBuf>,
    /// The trace directories of agents (`iolab agent`, for a controlling iolab) killed
    /// while recording.
    pub agent_traces_removed: Vec<PathBuf>,
    /// None when there was no journal.
    #[serde(serialize_with = "sorted_keys")]
    pub knobs: Option<super::RestoreReport>,
    pub problems: Vec<String>,
    /// Journals an iolab still running holds (its knobs, its recording's tracefs settings):
    /// its own, left to it; absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub in_use: Vec<String>,
    pub scratch_devices_removed: Vec<String>,
    /// The tracefs settings of a block trace recording that was killed; None when there was
    /// no such journal.
    pub tracer: Option<super::RestoreReport>,
    /// The interrupt placements of an `iolab irq daemon` (without `--keep`) that was killed,
    /// put back; absent when there were none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub irq_daemon: Option<super::RestoreReport>,
    /// The tracefs mount a killed recording made, unmounted or kept; absent when it made
    /// none (or that mount is gone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tracefs_mount: Option<crate::trace::tracefs_mount::LeftMount>,
    /// Hosts an earlier run controlled and left listed (`hosts::touched`), each restored by
    /// its own `iolab restore`; absent when none was listed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<crate::hosts::restore::HostRestore>,
    #[serde(skip)]
    journal: PathBuf,
    /// The knob journal could not be put back whole (its problem says why).
    #[serde(skip)]
    knobs_failed: bool,
    /// The knob journal is a running iolab's (text only).
    #[serde(skip)]
    knobs_in_use: bool,
    /// Interrupts placed by `iolab irq apply` or an `iolab irq daemon --keep`, which are meant
    /// to stay, so restore leaves them (`iolab irq rollback` puts them back); absent when none.
    #[serde(skip_serializing_if = "is_zero")]
    irq_placements_in_effect: usize,
    /// The names of this machine's interrupts, for the lines of those put back (text only).
    #[serde(skip)]
    irq_names: BTreeMap<u32, String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Undoes what was left in `state_dir` (and fio's run directories in it).
pub(crate) fn undo(state_dir: &Path) -> anyhow::Result<Leftovers> {
    // What is found there is acted on as root: not from a directory others could write to,
    // and from the directory found trustworthy, resolved (a link on the way pointed
    // elsewhere meanwhile changes nothing). Made if missing, so that nobody else makes it
    // between a look and a use.
    let state_dir = &super::trusted_state_dir(state_dir).map_err(|e| {
        anyhow::anyhow!(
            "{e}\nNothing was restored. Once only iolab's user can write to it and to each \
             directory above it (`chown root DIR; chmod go-w DIR`, after checking that what \
             is in it is iolab's), run `iolab restore` again"
        )
    })?;
    let fio_work_dir = &crate::workload::runner::work_dir_in(state_dir);
    // A journal that cannot be put back whole (a knob refusing its old value, another iolab
    // holding a device) keeps what is left and is a problem; the rest is undone all the same.
    // The report of each journal, and whether it failed.
    let mut journal_problems = Vec::new();
    // A journal a running iolab holds is its own, not a leftover: it is left to it.
    let mut in_use = Vec::new();
    let mut owned = |dir: &Path, what: &str| {
        let pid = super::in_use(dir)?;
        in_use.push(format!(
            "{what}: {} belongs to an iolab still running{}: left to it",
            dir.join("journal.json").display(),
            pid.map_or_else(String::new, |p| format!(" (pid {p})"))
        ));
        Some(())
    };
    let knobs_owned = owned(state_dir, "knobs").is_some();
    let tracer_dir = state_dir.join(super::TRACER_DIR);
    let tracer_owned = owned(&tracer_dir, "tracefs settings").is_some();
    let mut replay = |dir: &Path, what: &str| match super::root_of(dir)
        .and_then(|root| super::replay(dir, &root))
    {
        Ok(report) => (report, false),
        Err(e) => {
            journal_problems.push(format!(
                "{what}: {e}; what was not put back stays in {}: run `iolab restore` again \
                 once the cause is fixed",
                dir.join("journal.json").display()
            ));
            (None, true)
        }
    };
    let (knobs, knobs_failed) = if knobs_owned {
        (None, false)
    } else {
        replay(state_dir, "knobs")
    };
    // tracefs is only a view: the tracer's settings live on in the kernel while it is
    // unmounted (someone tidied up a killed recording's mount), so it is mounted for the
    // replay; without it every setting would count as gone and the tracer stay on.
    let live_entries = !tracer_owned
        && super::pending_under(&tracer_dir)
            .is_ok_and(|(root, entries)| !entries.is_empty() && root == Path::new("/"));
    let (tracer, _) = match live_entries
        .then(|| crate::trace::tracefs_mount::Mounted::ensure(&tracer_dir))
        .transpose()
    {
        Err(e) => {
            journal_problems.push(format!(
                "tracefs settings: {e:#}; they stay in {}: run `iolab restore` again once \
                 tracefs can be mounted",
                tracer_dir.join("journal.json").display()
            ));
            (None, true)
        }
        Ok(_) if tracer_owned => (None, false),
        // The view, if one was mounted, is unmounted once the settings are back.
        Ok(_view) => replay(&tracer_dir, "tracefs settings"),
    };
    // After its settings are back, as the recording itself would have done; a recording
    // still running keeps its mount.
    let tracefs_mount = (!tracer_owned)
        .then(|| crate::trace::tracefs_mount::unmount_left(&tracer_dir))
        .flatten();
    let scratch = crate::target::remove_leaked_scratch(state_dir)?;
    let (interrupted, run_problems) = crate::experiment::run::registry::mark_abandoned(state_dir)?;
    let swept = crate::workload::run_dir::sweep(fio_work_dir);
    let agent_traces =
        crate::workload::run_dir::sweep_dead(state_dir, crate::hosts::agent_trace::DIR_PREFIX);
    // A daemon that was to put its placements back when it stopped, killed: put back here.
    // One still running holds the journal's lock, and is left to it.
    let irq_dir = crate::irq::apply::journal_dir_in(state_dir);
    let irq_daemon = if super::undone_if_killed(&irq_dir) {
        match super::replay(&irq_dir, &SysRoot::live()) {
            Ok(report) => report,
            Err(super::KnobError::Busy { .. }) => None,
            Err(e) => {
                journal_problems.push(format!(
                    "interrupt placements of a killed `iolab irq daemon`: {e}; `iolab irq \
                     rollback` puts them back"
                ));
                None
            }
        }
    } else {
        None
    };
    // Interrupts, not journal entries (two per interrupt: its old CPU, then its old mask).
    let placed = super::pending(&irq_dir)?
        .iter()
        .map(|e| e.path.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let (hosts, host_problems) = restore_hosts(state_dir, &mut in_use)?;
    Ok(Leftovers {
        experiments_interrupted: interrupted,
        fio_run_directories_removed: swept,
        agent_traces_removed: agent_traces,
        knobs,
        problems: journal_problems
            .into_iter()
            .chain(
                scratch
                    .problems
                    .iter()
                    .chain(&run_problems)
                    .map(ToString::to_string),
            )
            .chain(host_problems)
            .collect(),
        knobs_failed,
        knobs_in_use: knobs_owned,
        in_use,
        scratch_devices_removed: scratch.removed,
        tracer,
        irq_daemon,
        tracefs_mount,
        hosts,
        journal: state_dir.join("journal.json"),
        irq_placements_in_effect: placed,
        irq_names: crate::irq::names(&crate::sys::SysRoot::live()),
    })
}

/// Runs `iolab restore` on every host an earlier run left listed; the hosts that did not
/// finish stay listed and are problems.
fn restore_hosts(
    state_dir: &Path,
    in_use: &mut Vec<String>,
) -> anyhow::Result<(Vec<crate::hosts::restore::HostRestore>, Vec<String>)> {
    let listed = match crate::hosts::touched::take_over(state_dir)? {
        Ok(listed) => listed,
        Err(holder) => {
            in_use.push(format!(
                "hosts: {} is held by {holder}, still running: left to it",
                state_dir.join("hosts.json").display(),
            ));
            return Ok((Vec::new(), Vec::new()));
        }
    };
    let (mut done, mut problems, mut still) = (Vec::new(), Vec::new(), Vec::new());
    for h in listed.hosts().to_vec() {
        let mut options = crate::hosts::ssh::SshOptions {
            remote_iolab: h.remote_iolab.clone(),
            ..Default::default()
        };
        if let Some(extra) = &h.ssh_options {
            options.extra = extra.clone();
        }
        let r = crate::hosts::restore::restore(&h.ssh, &options, true)?;
        if let Some(held) = held_there(&r) {
            // An agent of the run, cut off and still within its lease, holds its journal
            // there: nothing was put back yet, and a host taken off the list now would be
            // forgotten if that agent were killed before it restores.
            in_use.push(format!(
                "host {}: {held}: it stays listed; run `iolab restore` again once that agent \
                 has ended",
                h.ssh
            ));
            still.push(h);
        } else if !r.ok {
            problems.push(format!(
                "host {}: restore did not finish ({}); run `iolab restore` again once it \
                 answers",
                h.ssh,
                r.errors.trim().replace('\n', "; ")
            ));
            still.push(h);
        }
        done.push(r);
    }
    listed.keep_only(still)?;
    Ok((done, problems))
}

/// What a host's own restore left to a process still running there (its `in_use` lines),
/// joined; `None` when it left nothing.
fn held_there(r: &crate::hosts::restore::HostRestore) -> Option<String> {
    let lines: Vec<&str> = r.output["in_use"]
        .as_array()?
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    (!lines.is_empty())
        .then(|| crate::report::format::terminal_safe(&lines.join("; ")).into_owned())
}

impl Leftovers {
    /// Journal entries refused plus other problems: any makes `iolab restore` fail, so a
    /// script notices.
    pub(crate) fn failures(&self) -> (usize, usize) {
        (
            [&self.knobs, &self.tracer]
                .iter()
                .filter_map(|r| r.as_ref())
                .map(|r| r.refused.len())
                .sum(),
            self.problems.len(),
        )
    }
}

impl Leftovers {
    /// True when something besides the knob journal was put back or removed.
    fn undid_anything_else(&self) -> bool {
        self.tracer.is_some()
            || self.irq_daemon.is_some()
            || self.tracefs_mount.is_some()
            || !self.scratch_devices_removed.is_empty()
            || !self.fio_run_directories_removed.is_empty()
            || !self.agent_traces_removed.is_empty()
            || !self.experiments_interrupted.is_empty()
            || !self.hosts.is_empty()
    }
}

impl crate::output::Render for Leftovers {
    fn text(&self) -> String {
        let mut out = String::new();
        for u in &self.in_use {
            let _ = writeln!(out, "in use   {u}");
        }
        match &self.knobs {
            None if self.knobs_failed => {
                let _ = writeln!(out, "journal {} kept", self.journal.display());
            }
            None if self.knobs_in_use => {}
            // The lines below say what was undone: "nothing to restore" before them was false.
            None if self.undid_anything_else() => {}
            None => out.push_str("no knob journal: nothing to restore\n"),
            Some(r) => {
                out += &restored_lines(r, "device no longer present", &self.irq_names);
                let _ = writeln!(out, "journal {} removed", self.journal.display());
            }
        }
        if let Some(r) = &self.tracer {
            out += &restored_lines(
                r,
                "device no longer present or tracefs not mounted",
                &BTreeMap::new(),
            );
            let _ = writeln!(out, "tracefs settings of a killed `trace record` put back");
        }
        if let Some(r) = &self.irq_daemon {
            out += &restored_lines(r, "interrupt no longer present", &self.irq_names);
            let _ = writeln!(
                out,
                "interrupt placements of a killed `iolab irq daemon` put back"
            );
        }
        if let Some(m) = &self.tracefs_mount {
            let _ = match &m.kept_because {
                None => writeln!(
                    out,
                    "unmounted tracefs at {}, which a killed `trace record` had mounted",
                    m.path
                ),
                Some(why) => writeln!(
                    out,
                    "kept     tracefs mounted at {}, which a killed `trace record` mounted: \
                     {why}",
                    m.path
                ),
            };
        }
        for s in &self.scratch_devices_removed {
            let _ = writeln!(out, "removed scratch device {s}");
        }
        for d in &self.fio_run_directories_removed {
            let _ = writeln!(out, "removed fio run directory {}", d.display());
        }
        for d in &self.agent_traces_removed {
            let _ = writeln!(out, "removed a killed agent's traces {}", d.display());
        }
        for a in &self.experiments_interrupted {
            let _ = writeln!(
                out,
                "experiment {} in {} marked interrupted (its run was killed)",
                a.experiment_id,
                a.db_path.display()
            );
        }
        for h in self
            .hosts
            .iter()
            .filter(|h| h.ok && held_there(h).is_none())
        {
            let count = |key: &str| h.output[key]["restored"].as_array().map_or(0, Vec::len);
            let tracer = match count("tracer") {
                0 => String::new(),
                n => format!(", {n} tracefs setting(s)"),
            };
            // The host's text: shown, never obeyed by the terminal.
            let safe = |v: &serde_json::Value| {
                crate::report::format::terminal_safe(v.as_str().unwrap_or("?")).into_owned()
            };
            let list = |key: &str, name: &dyn Fn(&serde_json::Value) -> String| {
                h.output["knobs"][key]
                    .as_array()
                    .map_or(String::new(), |a| {
                        a.iter().map(name).collect::<Vec<_>>().join(", ")
                    })
            };
            let mut modules = String::new();
            let unloaded = list("modules_unloaded", &safe);
            if !unloaded.is_empty() {
                modules += &format!("; scheduler module(s) unloaded: {unloaded}");
            }
            let kept = list("modules_kept", &|k| {
                format!("{} ({})", safe(&k["module"]), safe(&k["why"]))
            });
            if !kept.is_empty() {
                modules += &format!("; scheduler module(s) kept loaded: {kept}");
            }
            let _ = writeln!(
                out,
                "host {}: restored over ssh ({} knob(s){tracer} put back there{modules})",
                h.host,
                count("knobs")
            );
        }
        for p in &self.problems {
            let _ = writeln!(out, "problem  {p}");
        }
        if self.irq_placements_in_effect > 0 {
            let _ = writeln!(
                out,
                "the affinity of {} interrupt(s) set by `iolab irq apply` (or by an `iolab irq \
                 daemon --keep`, or one still running) stays in effect; `iolab irq rollback` \
                 puts it back",
                self.irq_placements_in_effect
            );
        }
        out
    }
}

/// One line per knob written back, and per knob whose file is gone (`gone_why` says why).
/// Writes of one file in a row are one line: the value it ends with, and the one it had
/// before them. An interrupt comes back in two (its old CPU, then its old mask), and the
/// line says where it went first, and its name where `irq_names` (IRQ number to its
/// actions, as `irq apply` named it) has it: a number alone says little.
pub(crate) fn restored_lines(
    r: &super::RestoreReport,
    gone_why: &str,
    irq_names: &BTreeMap<u32, String>,
) -> String {
    let mut out = String::new();
    for run in r.restored.chunk_by(|a, b| a.path == b.path) {
        let (first, last) = (&run[0], &run[run.len() - 1]);
        let irq = super::irq_move::effective_of(&first.path).map(|(irq, _)| irq);
        let name = irq
            .and_then(|irq| irq_names.get(&irq))
            // Drivers' text: shown, never obeyed by the terminal.
            .map_or(String::new(), |n| {
                format!("{}; ", crate::report::format::terminal_safe(n))
            });
        // Sent back through its old CPU, it is delivered there unless it did not fire in time.
        let through = match (run.len() > 1 && irq.is_some(), r.delivered.get(&first.path)) {
            (false, _) => String::new(),
            (true, Some(now)) if !super::irq_move::same_cpus(&first.path, now, &first.old) => {
                format!(
                    "; sent through {} first, where it was delivered, but it is delivered on \
                     {now} now: an interrupt moves when it next fires, and it had not",
                    first.old
                )
            }
            (true, _) => format!("; through {} first, where it was delivered", first.old),
        };
        // Some sysctls separate their fields by tabs (`net.ipv4.tcp_rmem`), which the
        // terminal's escaping would show as \u{9}: shown as spaces, as sysctl(8) does.
        let shown = |v: &str| v.replace('\t', " ");
        let _ = writeln!(
            out,
            "restored {} = {} ({name}was {}{through})",
            first.path,
            shown(&last.old),
            shown(&first.new)
        );
    }
    for c in &r.changed_since {
        let _ = writeln!(out, "left     {}", c.describe());
    }
    for e in &r.reset_by_reboot {
        let _ = writeln!(
            out,
            "reset    {} (by the reboot since it was changed: nothing written)",
            e.path
        );
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
    out += &restore_notes(r);
    out
}

/// What a restore has to say beside the knobs it wrote back, also at the end of a run: a knob
/// someone changed while iolab held it, and each scheduler module iolab's writes made the
/// kernel load (unloaded again, or kept loaded and why).
pub(crate) fn restore_notes(r: &super::RestoreReport) -> String {
    let mut out = String::new();
    for o in &r.overridden {
        let _ = writeln!(
            out,
            "changed  {} read {}, not the {} iolab had set: someone changed it meanwhile, and \
             it was put back all the same",
            o.path,
            crate::report::format::terminal_safe(&o.found),
            o.set
        );
    }
    for m in &r.modules_unloaded {
        let _ = writeln!(
            out,
            "unloaded module {m} (the kernel loaded it when iolab selected its scheduler)"
        );
    }
    for k in &r.modules_kept {
        let _ = writeln!(
            out,
            "kept     module {} loaded, which the kernel loaded when iolab selected its \
             scheduler: {}",
            k.module, k.why
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::Render;

    /// `irq rollback` after a move from mask 0-7 (delivered to CPU 0) to CPU 1 replays two
    /// entries of one file; a scheduler set by two cells replays two more.
    #[test]
    fn writes_of_one_file_in_a_row_are_one_line() {
        let entry = |path: &str, old: &str, new: &str| super::super::JournalEntry {
            path: path.into(),
            old: old.into(),
            new: new.into(),
            time_unix: 0.0,
            loaded_module: None,
            serving: None,
            disk: None,
            restoring: false,
        };
        let irq = "/proc/irq/29/smp_affinity_list";
        let sched = "/sys/block/sda/queue/scheduler";
        let r = super::super::RestoreReport {
            restored: vec![
                entry(irq, "0", "1"),
                entry(irq, "0-7", "0-7"),
                entry(sched, "bfq", "none"),
                entry(sched, "mq-deadline", "bfq"),
                entry("/sys/block/sda/queue/nr_requests", "64", "64"),
                entry(
                    "/proc/sys/net/ipv4/tcp_rmem",
                    "4096\t131072\t6291456",
                    "4096\t87380\t33554432",
                ),
            ],
            ..Default::default()
        };
        assert_eq!(
            restored_lines(
                &r,
                "",
                &BTreeMap::from([(29, "virtio2-input.0".to_string())])
            ),
            "restored /proc/irq/29/smp_affinity_list = 0-7 (virtio2-input.0; was 1; through 0 \
             first, where it was delivered)\n\
             restored /sys/block/sda/queue/scheduler = mq-deadline (was none)\n\
             restored /sys/block/sda/queue/nr_requests = 64 (was 64)\n\
             restored /proc/sys/net/ipv4/tcp_rmem = 4096 131072 6291456 (was 4096 87380 \
             33554432)\n"
        );
        // One that did not fire in time is delivered elsewhere in its mask: said so.
        let r = super::super::RestoreReport {
            delivered: BTreeMap::from([(irq.to_string(), "4".to_string())]),
            ..r
        };
        assert!(restored_lines(&r, "", &BTreeMap::new()).starts_with(
            "restored /proc/irq/29/smp_affinity_list = 0-7 (was 1; sent through 0 first, where \
             it was delivered, but it is delivered on 4 now: an interrupt moves when it next \
             fires, and it had not)\n"
        ));
    }

    #[test]
    fn the_text_names_tracefs_settings_put_back_here_and_on_hosts() {
        let entry = |path: &str, old: &str, new: &str| super::super::JournalEntry {
            path: path.into(),
            old: old.into(),
            new: new.into(),
            time_unix: 0.0,
            loaded_module: None,
            serving: None,
            disk: None,
            restoring: false,
        };
        let tracer = super::super::RestoreReport {
            restored: vec![entry("/sys/kernel/tracing/current_tracer", "nop", "blk")],
            ..Default::default()
        };
        let host = crate::hosts::restore::HostRestore {
            host: "h1".into(),
            ok: true,
            output: serde_json::json!({
                "knobs": {"restored": [1, 2]},
                "tracer": {"restored": [1, 2, 3]},
            }),
            errors: String::new(),
        };
        // A host whose restore unloaded one scheduler module and kept another.
        let modules = crate::hosts::restore::HostRestore {
            host: "h2".into(),
            ok: true,
            output: serde_json::json!({
                "knobs": {
                    "restored": [1],
                    "modules_unloaded": ["bfq"],
                    "modules_kept": [{"module": "kyber_iosched", "why": "in use"}],
                },
            }),
            errors: String::new(),
        };
        let left = Leftovers {
            experiments_interrupted: Vec::new(),
            fio_run_directories_removed: Vec::new(),
            agent_traces_removed: Vec::new(),
            knobs: None,
            problems: Vec::new(),
            scratch_devices_removed: Vec::new(),
            tracer: Some(tracer),
            irq_daemon: None,
            tracefs_mount: Some(crate::trace::tracefs_mount::LeftMount {
                path: "/sys/kernel/tracing",
                unmounted: false,
                kept_because: Some("busy".into()),
            }),
            hosts: vec![host, modules],
            journal: PathBuf::from("/var/lib/iolab/journal.json"),
            knobs_failed: false,
            knobs_in_use: false,
            in_use: Vec::new(),
            irq_placements_in_effect: 7,
            irq_names: BTreeMap::new(),
        };
        let text = left.text();
        assert!(
            text.contains("the affinity of 7 interrupt(s) set by `iolab irq apply` (or by an"),
            "{text}"
        );
        // Scripts are told too.
        let json = serde_json::to_value(&left).unwrap();
        assert_eq!(json["irq_placements_in_effect"], 7, "{json}");
        // No knob journal, but tracefs settings put back: not "nothing to restore".
        assert!(!text.contains("nothing to restore"), "{text}");
        let nothing = Leftovers {
            tracer: None,
            tracefs_mount: None,
            hosts: Vec::new(),
            irq_placements_in_effect: 0,
            ..left
        };
        assert_eq!(nothing.text(), "no knob journal: nothing to restore\n");
        assert!(
            text.contains("restored /sys/kernel/tracing/current_tracer = nop (was blk)"),
            "{text}"
        );
        assert!(text.contains("tracefs settings of a killed"), "{text}");
        assert!(
            text.contains(
                "kept     tracefs mounted at /sys/kernel/tracing, which a killed `trace record` \
                 mounted: busy"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "host h1: restored over ssh (2 knob(s), 3 tracefs setting(s) put back there)\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "host h2: restored over ssh (1 knob(s) put back there; scheduler module(s) \
                 unloaded: bfq; scheduler module(s) kept loaded: kyber_iosched (in use))"
            ),
            "{text}"
        );
    }
}

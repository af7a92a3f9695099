//! Writing a placement: each move goes through a knob journal kept in its own directory
//! (`STATE_DIR/irq`), separate from the experiments' journal because a placement is meant to
//! stay after iolab exits. Applying again adds to the same journal, so `iolab irq rollback`
//! always returns every interrupt to the affinity it had before iolab first touched it.
//! Moves are checked against the live machine before anything is written: a plan made
//! earlier, or on another machine, cannot move a managed interrupt or target an isolated CPU.

use super::plan::Move;
use crate::knobs::{Journal, RestoreReport};
use crate::model::Machine;
use crate::sys::parse::cpulist;
use crate::sys::SysRoot;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the placement journal lives.
pub(crate) fn journal_dir() -> PathBuf {
    journal_dir_in(&crate::knobs::state_dir())
}

/// The placement journal's directory in the state directory `state`.
pub(crate) fn journal_dir_in(state: &Path) -> PathBuf {
    state.join("irq")
}

/// The affinity each interrupt had before iolab first changed it, from the journal in `dir`,
/// for the interrupts whose affinity is still what iolab last wrote. One set since by someone
/// else (a pin made after iolab's move) is left out: that setting is theirs and is judged as
/// it is, not by what it was before iolab.
pub fn before_iolab(dir: &Path) -> Result<BTreeMap<u32, Vec<u32>>> {
    let mut out = BTreeMap::new();
    let mut last_written = BTreeMap::new();
    let (root, entries) = crate::knobs::pending_under(dir)?;
    for e in entries {
        let Some(irq) = irq_of_path(&e.path) else {
            continue;
        };
        // The oldest entry holds the original value.
        if let std::collections::btree_map::Entry::Vacant(v) = out.entry(irq) {
            let cpus = cpulist(&e.old)
                .map_err(|err| anyhow::anyhow!("{}: old value {:?}: {err}", e.path, e.old))?;
            v.insert(cpus);
        }
        last_written.insert(irq, (e.path.clone(), e.new.clone()));
    }
    for (irq, (path, wrote)) in last_written {
        let now = std::fs::read_to_string(root.join(path.trim_start_matches('/')))
            .ok()
            .and_then(|t| cpulist(t.trim()).ok());
        if let (Some(now), Ok(wrote)) = (now, cpulist(wrote.trim())) {
            if now != wrote {
                out.remove(&irq);
            }
        }
    }
    Ok(out)
}

/// The IRQ number in `.../proc/irq/N/smp_affinity_list` (whatever root it lies under).
fn irq_of_path(path: &str) -> Option<u32> {
    let rest = path.strip_suffix("/smp_affinity_list")?;
    rest.rsplit('/').next()?.parse().ok()
}

/// One written move and what the kernel reports afterwards.
#[derive(Debug, Clone, Serialize)]
pub struct Applied {
    pub(crate) irq: u32,
    pub(crate) name: String,
    pub(crate) to: u32,
    /// The affinity before this write.
    pub(crate) was: String,
    /// `effective_affinity_list` read back. Some interrupt chips move an interrupt only when
    /// it next fires, so a stale value here is reported, not treated as failure.
    pub(crate) effective: Option<Vec<u32>>,
}

/// Refuses moves the live machine cannot take, naming each: an IRQ whose name (its actions)
/// differs from the plan's, a managed one, an offline or isolated CPU. One problem refuses all.
pub fn check(moves: &[Move], m: &Machine, slots: &[super::plan::Slot]) -> Result<()> {
    let problems: Vec<String> = moves
        .iter()
        .filter_map(|mv| problem(mv, m, slots))
        .collect();
    if !problems.is_empty() {
        bail!(
            "the plan cannot be applied here:\n  {}",
            problems.join("\n  ")
        );
    }
    Ok(())
}

/// What a saved plan would do that its own options do not allow on the machine as it is now:
/// a move to a CPU outside the interrupt's allowed CPUs (a pin made since the plan was
/// written, or ignored) unless the plan unpins it, or to a CPU the plan bans. A plan measured
/// now respects these by construction; one read from a file may be old.
pub fn against_options(
    p: &super::plan::Plan,
    m: &Machine,
    before_iolab: &std::collections::BTreeMap<u32, Vec<u32>>,
) -> Vec<String> {
    let sources = super::inputs::sources(m, before_iolab);
    let allowed: std::collections::BTreeMap<u32, &Vec<u32>> =
        sources.iter().map(|s| (s.irq, &s.allowed)).collect();
    let slots = super::inputs::slots(m);
    let mut problems = Vec::new();
    for mv in &p.moves {
        if p.options.banned.contains(&mv.to) {
            problems.push(format!(
                "IRQ {}: the plan moves it to CPU {}, which its own --ban-cpus bans",
                mv.irq, mv.to
            ));
        } else if let Some(why) = cpu_problem(mv.to, m, &slots) {
            // Said before the mask: a CPU that is not there is no pin's doing.
            problems.push(format!("IRQ {}: {why}", mv.irq));
        } else if !p.options.unpin.covers(mv.irq) {
            if let Some(a) = allowed
                .get(&mv.irq)
                .filter(|a| !a.is_empty() && !a.contains(&mv.to))
            {
                // `--unpin` cannot go with `--plan`: it belongs to the new plan.
                problems.push(format!(
                    "IRQ {} ({}) may run only on CPUs {} here now, not CPU {} (pinned since the \
                     plan was made?): make a new plan (`iolab irq plan --unpin {} --json` if it \
                     should move anyway)",
                    mv.irq,
                    mv.name,
                    crate::sys::parse::cpulist::format_cpulist(a),
                    mv.to,
                    mv.irq
                ));
            }
        }
    }
    // Journaled, a pin becomes iolab's to lift in every later plan: only one the plan's own
    // `--unpin` names, and one that can be moved at all.
    for irq in &p.unpinned_in_place {
        let managed = sources.iter().find(|s| s.irq == *irq).map(|s| s.managed);
        // The pin as it stands: the one iolab journaled when it took the IRQ over (a second
        // apply of this plan, a daemon's --keep), else its affinity now. A plan from before
        // `pins_seen` was kept has none to compare: it is taken as is.
        let pin_now = before_iolab.get(irq).cloned().or_else(|| {
            m.irqs
                .iter()
                .find(|i| i.number() == Some(*irq))
                .and_then(|i| i.affinity.clone())
        });
        let moved_pin = p
            .pins_seen
            .get(irq)
            .zip(pin_now)
            .filter(|(seen, now)| *seen != now);
        if managed.is_none() {
            problems.push(format!("IRQ {irq}: the plan unpins it, but it is not here"));
        } else if managed == Some(true) {
            problems.push(format!(
                "IRQ {irq}: the plan unpins it, but the kernel manages its affinity here"
            ));
        } else if !p.options.unpin.covers(*irq) {
            problems.push(format!(
                "IRQ {irq}: the plan unpins it where it is, which its own --unpin does not ask"
            ));
        } else if let Some((seen, now)) = moved_pin {
            let list = crate::sys::parse::cpulist::format_cpulist;
            problems.push(format!(
                "IRQ {irq}: the plan unpins it where it was pinned, on CPUs {}; its affinity is \
                 CPUs {} now: make a new plan",
                list(seen),
                list(&now)
            ));
        }
    }
    problems
}

/// Why interrupts cannot be moved to `cpu` on `m`, if they cannot.
fn cpu_problem(cpu: u32, m: &Machine, slots: &[super::plan::Slot]) -> Option<String> {
    if !m.possible.contains(&cpu) && !m.cpus.iter().any(|c| c.cpu == cpu) {
        Some(format!(
            "CPU {cpu} does not exist here (CPUs: {})",
            crate::sys::parse::format_cpulist(&m.possible)
        ))
    } else if !slots.iter().any(|s| s.cpu == cpu) {
        Some(format!("CPU {cpu} is offline or isolated"))
    } else {
        None
    }
}

/// Why the daemon leaves `mv` alone although it could make it: the interrupt serves a disk
/// or a network interface another iolab holds (an experiment measuring it, which locks its
/// device but moves its interrupts only when a cell says so). Moving it mid-run would change
/// what is measured.
pub fn in_use_elsewhere(root: &SysRoot, m: &Machine, mv: &Move) -> Option<String> {
    use crate::sys::lock::{held_elsewhere, Resource};
    let disks = crate::model::device_map::disks_of_irq(root, mv.irq)
        .into_iter()
        .map(|disk| (Resource::Device(disk.clone()), disk));
    let nics = m
        .nics
        .iter()
        .filter(|n| n.irqs.iter().any(|i| i.irq == mv.irq))
        .map(|n| (Resource::Nic(n.name.clone()), n.name.clone()));
    disks.chain(nics).find_map(|(resource, name)| {
        let pid = held_elsewhere(root, &resource)?;
        Some(format!(
            "left IRQ {} where it is: it serves {name}, which another iolab (pid {pid}) is \
             using",
            mv.irq
        ))
    })
}

/// Why `mv` cannot be made on `m`, if it cannot.
pub(crate) fn problem(mv: &Move, m: &Machine, slots: &[super::plan::Slot]) -> Option<String> {
    match m.irq(mv.irq) {
        None => Some(format!("IRQ {} does not exist here", mv.irq)),
        // Numbers differ between boots and machines; the actions name the interrupt.
        Some(irq) if irq.name != mv.name => Some(format!(
            "IRQ {} is {:?} here, not {:?} as the plan says (numbers change between boots \
             and machines: make a new plan here with `iolab irq plan`)",
            mv.irq, irq.name, mv.name
        )),
        Some(irq) if irq.managed => Some(format!(
            "IRQ {} ({}) is managed by the kernel: its affinity cannot be changed",
            mv.irq, irq.name
        )),
        Some(_) => cpu_problem(mv.to, m, slots).map(|why| format!("IRQ {}: {why}", mv.irq)),
    }
}

/// Takes the placement journal in `dir` for `root`, refused while another `irq apply` or
/// `irq daemon` holds it. Taken before measuring, so two never plan from the same load and
/// then both write (the second's plan was stale by then).
pub(crate) fn take_placement(dir: &Path, root: &SysRoot) -> Result<Journal> {
    match Journal::resume_at(dir, root) {
        Err(crate::knobs::KnobError::Busy { path, holder }) => bail!(
            "another iolab{holder} holds the interrupt placement (an `iolab irq daemon`, or an \
             `iolab irq apply` under way; lock {path}); nothing was measured or changed: stop \
             the daemon or let the apply end, then try again"
        ),
        other => Ok(other?),
    }
}

/// Ends this process's hold on the placement journal, keeping what it holds in effect; an
/// empty journal is removed rather than left behind.
pub(crate) fn release(journal: Journal) {
    if journal.entries().is_empty() {
        drop(journal);
    } else {
        journal.keep();
    }
}

/// Writes every move, journaled, each only while the interrupt's affinity is still what `m`
/// (the measurement the plan came from) saw. Stops at the first refusal (the moves already
/// written stay journaled, so rollback still covers them) and says which.
pub fn apply(
    root: &SysRoot,
    m: &Machine,
    moves: &[Move],
    journal: &mut Journal,
) -> Result<Vec<Applied>> {
    let mut done = Vec::with_capacity(moves.len());
    for mv in moves {
        let applied = apply_one(root, m, mv, journal).with_context(|| {
            format!(
                "moving IRQ {} ({}) to CPU {} ({} of {} moves were made; \
                     `iolab irq rollback` undoes them)",
                mv.irq,
                mv.name,
                mv.to,
                done.len(),
                moves.len()
            )
        })?;
        done.extend(applied);
    }
    Ok(done)
}

/// Writes the affinity of each of `irqs` (pinned interrupts a plan unpins but keeps where they
/// are) as it is, through the journal: the pin is iolab's to lift from then on, and `irq
/// rollback` writes it back. Not written, later plans judged it a user's pin again.
pub fn unpin_in_place(root: &SysRoot, irqs: &[u32], journal: &mut Journal) -> Result<()> {
    for irq in irqs {
        let abs = crate::knobs::irq_affinity_path(*irq);
        let Some(now) = root.attr(&abs) else {
            continue;
        };
        journal.placements_only();
        journal
            .set(&abs, &now)
            .with_context(|| format!("unpinning IRQ {irq} where it is"))?;
    }
    Ok(())
}

/// The daemon's way: every move is tried, and one that cannot be made (its IRQ held by
/// another iolab, an experiment say; the kernel refusing the write) stays where it is while
/// the others go on. Stopping there made the daemon exit, undo every move and, restarted by
/// its service, do it all again every few seconds beside the experiment.
pub fn apply_each(
    root: &SysRoot,
    m: &Machine,
    moves: &[Move],
    journal: &mut Journal,
) -> (Vec<Applied>, Vec<String>) {
    let mut done = Vec::with_capacity(moves.len());
    let mut left = Vec::new();
    for mv in moves {
        match apply_one(root, m, mv, journal) {
            Ok(applied) => done.extend(applied),
            Err(e) => left.push(format!(
                "left IRQ {} ({}) where it is: {}",
                mv.irq,
                mv.name,
                crate::cli::error_text(&e)
            )),
        }
    }
    (done, left)
}

/// Writes one move, journaled; `None` when the IRQ is already there (applied before, and the
/// measurement predates the move). Refused when its affinity changed since `m` was read:
/// someone placed it meanwhile, and the plan was made without knowing.
fn apply_one(
    root: &SysRoot,
    m: &Machine,
    mv: &Move,
    journal: &mut Journal,
) -> Result<Option<Applied>> {
    let abs = crate::knobs::irq_affinity_path(mv.irq);
    let now = root.attr(&abs);
    if now == Some(mv.to.to_string()) {
        return Ok(None);
    }
    let seen = m.irq(mv.irq).and_then(|i| i.affinity.clone());
    if let (Some(now), Some(seen)) = (&now, seen) {
        if cpulist(now).ok().as_ref() != Some(&seen) {
            bail!(
                "its affinity is {now} now, not {} as measured: it was changed meanwhile; make \
                 a new plan",
                crate::sys::parse::format_cpulist(&seen)
            );
        }
    }
    // Interrupts are placed through a placement journal: it records where each was found,
    // and its rollback leaves an affinity someone changed since.
    journal.placements_only();
    let was = journal.set(&abs, &mv.to.to_string())?;
    let effective = root
        .attr(&format!("/proc/irq/{}/effective_affinity_list", mv.irq))
        .and_then(|t| cpulist(&t).ok());
    Ok(Some(Applied {
        irq: mv.irq,
        name: mv.name.clone(),
        to: mv.to,
        was,
        effective,
    }))
}

/// Puts every interrupt iolab moved under `root` back where it was; `after_daemon`, only if
/// a daemon without --keep placed them (and was killed). `Ok(None)`: nothing was put back.
pub fn rollback(dir: &Path, root: &SysRoot, after_daemon: bool) -> Result<Option<RestoreReport>> {
    Ok(crate::knobs::replay_if(dir, root, |undone_if_killed| {
        undone_if_killed || !after_daemon
    })?)
}

/// How many interrupts journal `entries` name (two entries for one: its old CPU, then its old
/// mask).
pub(super) fn placed_irqs(entries: &[crate::knobs::JournalEntry]) -> usize {
    let files: std::collections::BTreeSet<&str> = entries.iter().map(|e| e.path.as_str()).collect();
    files.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_irq_is_read_from_a_journaled_path_under_any_root() {
        assert_eq!(irq_of_path("/proc/irq/42/smp_affinity_list"), Some(42));
        assert_eq!(irq_of_path("/tmp/x/proc/irq/7/smp_affinity_list"), Some(7));
        assert_eq!(irq_of_path("/sys/block/loop0/queue/scheduler"), None);
    }

    /// A plan is made from what the measurement saw; an interrupt someone placed since (an
    /// admin, another iolab with another state directory) is not moved over their choice.
    #[test]
    fn a_move_is_refused_when_the_affinity_changed_since_the_measurement() {
        let machine = super::super::fixture::two_node();
        let root = SysRoot::at(machine.path()).unwrap();
        let m = Machine::read(&root).unwrap();
        let file = machine.path().join("proc/irq/161/smp_affinity_list");
        std::fs::write(&file, "5\n").unwrap();
        let state = tempfile::tempdir().unwrap();
        let mut j = take_placement(state.path(), &root).unwrap();
        let mv = super::super::fixture::move_161(6);
        let err = format!("{:#}", apply(&root, &m, &[mv], &mut j).unwrap_err());
        assert!(
            err.contains("its affinity is 5 now, not 4-7,12-14 as measured"),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "5\n");
        assert!(j.entries().is_empty());
    }

    /// `--unpin` of a pin the plan keeps where it is: journaled as iolab's, so the next plan
    /// judges it free to move (it called it pinned again and told to `--unpin` it).
    #[test]
    fn a_pin_unpinned_in_place_is_free_to_move_in_later_plans() {
        let machine = super::super::fixture::two_node();
        let root = SysRoot::at(machine.path()).unwrap();
        let file = machine.path().join("proc/irq/161/smp_affinity_list");
        std::fs::write(&file, "4\n").unwrap();
        let state = tempfile::tempdir().unwrap();
        let mut j = take_placement(state.path(), &root).unwrap();
        unpin_in_place(&root, &[161], &mut j).unwrap();
        release(j);
        assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), "4");
        let m = Machine::read(&root).unwrap();
        let sources = super::super::inputs::sources(&m, &before_iolab(state.path()).unwrap());
        let s = sources.iter().find(|s| s.irq == 161).unwrap();
        assert_eq!(s.allowed, m.online);
        // Rollback writes the pin back.
        let r = rollback(state.path(), &root, false).unwrap().unwrap();
        assert_eq!(r.restored.last().unwrap().old, "4");
    }

    /// The service's clean-up after its daemon (`rollback --after-daemon`) rolled back an
    /// `irq apply` the daemon had refused to start beside. Now it puts back only what a
    /// daemon without --keep left when killed.
    #[test]
    fn rollback_after_a_daemon_undoes_only_a_killed_daemons_placement() {
        let machine = super::super::fixture::two_node();
        let root = SysRoot::at(machine.path()).unwrap();
        let m = Machine::read(&root).unwrap();
        let file = machine.path().join("proc/irq/161/smp_affinity_list");
        let now = || std::fs::read_to_string(&file).unwrap().trim().to_string();
        let state = tempfile::tempdir().unwrap();
        let mut j = take_placement(state.path(), &root).unwrap();
        apply(&root, &m, &[super::super::fixture::move_161(6)], &mut j).unwrap();
        release(j);
        assert!(rollback(state.path(), &root, true).unwrap().is_none());
        assert_eq!(now(), "6");
        assert_eq!(
            placed_irqs(&crate::knobs::pending(state.path()).unwrap()),
            1
        );
        // The same placement as a daemon without --keep leaves it when killed.
        let mut j = take_placement(state.path(), &root).unwrap();
        j.undone_if_killed().unwrap();
        release(j);
        let r = rollback(state.path(), &root, true).unwrap().unwrap();
        assert_eq!(placed_irqs(&r.restored), 1);
        assert_eq!(now(), "4-7,12-14");
        assert!(crate::knobs::pending(state.path()).unwrap().is_empty());
    }

    /// A saved plan moving to a CPU that is not there (none such, or offline) said the IRQ
    /// was pinned, and offered `--unpin`, which `--plan` refuses.
    #[test]
    fn a_saved_plan_to_a_cpu_that_is_not_there_says_so_not_pinned() {
        use super::super::{fixture::move_161, plan};
        let machine = super::super::fixture::two_node();
        let root = SysRoot::at(machine.path()).unwrap();
        for irq in [161, 162, 163] {
            let file = machine
                .path()
                .join(format!("proc/irq/{irq}/smp_affinity_list"));
            std::fs::write(file, "4\n").unwrap();
        }
        let m = Machine::read(&root).unwrap();
        let mut p = plan::plan(&[], &[], plan::Options::default());
        let pinned = Move {
            irq: 162,
            name: "eth0-TxRx-2".into(),
            ..move_161(5)
        };
        p.moves = vec![move_161(99), move_161(20), pinned];
        // A pin kept in place that its --unpin does not name, one that is not here, a
        // managed one (the fixture's NVMe queues), and one pinned elsewhere since.
        p.unpinned_in_place = vec![161, 9999, 121, 163];
        p.options.unpin = plan::Unpin::Irqs(vec![163]);
        p.pins_seen.insert(163, vec![6]);
        let problems = against_options(&p, &m, &Default::default());
        assert_eq!(
            problems[..2],
            [
                "IRQ 161: CPU 99 does not exist here (CPUs: 0-31)",
                "IRQ 161: CPU 20 is offline or isolated"
            ],
            "{problems:?}"
        );
        assert_eq!(
            problems[2],
            "IRQ 162 (eth0-TxRx-2) may run only on CPUs 4 here now, not CPU 5 (pinned since the \
             plan was made?): make a new plan (`iolab irq plan --unpin 162 --json` if it should \
             move anyway)"
        );
        assert_eq!(
            problems[3..],
            [
                "IRQ 161: the plan unpins it where it is, which its own --unpin does not ask",
                "IRQ 9999: the plan unpins it, but it is not here",
                "IRQ 121: the plan unpins it, but the kernel manages its affinity here",
                "IRQ 163: the plan unpins it where it was pinned, on CPUs 6; its affinity is \
                 CPUs 4 now: make a new plan"
            ],
            "{problems:?}"
        );
        // Taken over by an earlier apply (journaled, its pin 6 kept as it was before iolab):
        // the same plan applies again, whatever the affinity reads now.
        let journaled = std::collections::BTreeMap::from([(163, vec![6])]);
        let problems = against_options(&p, &m, &journaled);
        assert!(
            !problems.iter().any(|x| x.starts_with("IRQ 163")),
            "{problems:?}"
        );
    }
}

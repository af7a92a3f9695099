//! `irq daemon`: measure, plan, apply, repeat. The interval adapts (case 2): it doubles up
//! to a ceiling while the load stays balanced, and drops back to the floor after a move, so a
//! quiet machine is looked at rarely and a changing one often. Moves go through the placement
//! journal; on Ctrl-C or SIGTERM every affinity iolab changed is put back unless asked to keep
//! them (after SIGKILL, `iolab restore` or `iolab irq rollback` does it). So without `--keep`
//! it does not start over a placement meant to stay (`irq apply`'s).

use super::apply;
use super::metrics::Figures;
use super::plan::Options;
use crate::knobs::Journal;
use crate::sys::SysRoot;
use anyhow::Result;
use std::path::Path;
use std::time::Duration;

#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub plan: Options,
    pub min_interval: Duration,
    pub max_interval: Duration,
    /// Stop after this many looks (None: until a signal).
    pub cycles: Option<u64>,
    /// Leave the placement in effect on exit.
    pub keep: bool,
}

/// The next interval: back to the floor after a move, else twice as long up to the ceiling.
pub(crate) fn next_interval(now: Duration, moved: bool, s: &Settings) -> Duration {
    if moved {
        s.min_interval
    } else {
        (now * 2).min(s.max_interval)
    }
}

/// The daemon's log on stderr. Under systemd, stderr goes to the journal, which stamps lines
/// itself and reads the level from an sd-daemon `<N>` prefix; elsewhere each line carries its
/// time of day (UTC) and level. Names from the machine are escaped for the terminal.
pub(crate) fn stderr_log() -> impl FnMut(Level, &str) {
    let journald = std::env::var_os("JOURNAL_STREAM").is_some();
    move |level: Level, line: &str| {
        let line = crate::report::format::terminal_safe_lines(line);
        if journald {
            say!("<{}>{line}", level.priority());
        } else {
            let name = match level {
                Level::Notice => "notice",
                Level::Info => "info",
            };
            let secs = crate::store::time::now_unix() as u64 % 86_400;
            let clock = format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
            say!("{clock} {name}: {line}");
        }
    }
}

/// How much a log line matters, in syslog's terms (what a service manager files it under).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    /// A decision that changed the machine (a move, a restore).
    Notice,
    /// A look that changed nothing.
    Info,
}

impl Level {
    /// The syslog priority (sd-daemon's `<N>` prefix).
    pub(crate) fn priority(self) -> u8 {
        match self {
            Level::Notice => 5,
            Level::Info => 6,
        }
    }
}

/// The daemon would not start beside a placement meant to stay, and changed nothing. It exits
/// with its own status ([`Refused::EXIT_STATUS`]), so a service manager neither starts it
/// again nor takes it for a crash to clean up after (iolab-irq.service).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Refused(String);

impl Refused {
    pub(crate) const EXIT_STATUS: i32 = 3;
}

/// Runs with the placement journal in `dir` until `wait` reports a signal or the cycles are
/// done. `log` gets one line per decision; `publish` gets the figures of every look (for
/// `--metrics-file` / `--listen`).
///
/// Without `--keep` it starts only when no placement meant to stay is in effect: it puts back
/// all its journal holds when it stops (or, killed, `iolab restore` does), and a placement
/// `irq apply` made is meant to stay until `irq rollback`. A killed daemon's placement was
/// meant to end: it takes that over. With `--keep` it takes any placement over and balances
/// on from it.
pub(crate) fn run(
    root: &SysRoot,
    dir: &Path,
    s: &Settings,
    wait: &dyn Fn(Duration) -> bool,
    log: &mut dyn FnMut(Level, &str),
    publish: &mut dyn FnMut(&Figures),
) -> Result<()> {
    // Settings that cannot mean anything here are said before anything is taken or measured.
    super::check_options(
        &crate::model::Machine::read_for_irqs(root)?,
        &apply::before_iolab(dir)?,
        &s.plan,
    )?;
    // Read before the journal is taken over, which clears it.
    let killed_daemons = crate::knobs::undone_if_killed(dir);
    let mut journal = apply::take_placement(dir, root)?;
    if !s.keep {
        let placed = apply::placed_irqs(journal.entries());
        if placed > 0 && !killed_daemons {
            apply::release(journal);
            return Err(Refused(format!(
                "the affinity of {placed} interrupt(s) placed by `iolab irq apply` (or a daemon \
                 with --keep) is in effect; without --keep this daemon would put it back when \
                 it stops: run `iolab irq rollback` first, or run the daemon with --keep to \
                 balance on from that placement"
            ))
            .into());
        }
        // Its placements end with it: killed, `iolab restore` puts them back.
        journal.undone_if_killed()?;
    }
    let mut d = Daemon {
        root,
        s,
        dir,
        journal,
        wait,
        log,
        publish,
        interval: s.min_interval,
        looks: 0,
        moves_total: 0,
        last_move_look: 0,
        banned_offline: Vec::new(),
    };
    let result = (|| -> Result<()> {
        while s.cycles.is_none_or(|n| d.looks < n) {
            if !d.look()? {
                break;
            }
        }
        Ok(())
    })();
    d.stop()?;
    result
}

/// The daemon between looks: where it keeps its journal, what it says, and its tally.
struct Daemon<'a> {
    root: &'a SysRoot,
    s: &'a Settings,
    dir: &'a std::path::Path,
    journal: Journal,
    wait: &'a dyn Fn(Duration) -> bool,
    log: &'a mut dyn FnMut(Level, &str),
    publish: &'a mut dyn FnMut(&Figures),
    interval: Duration,
    looks: u64,
    moves_total: u64,
    last_move_look: u64,
    /// Banned CPUs found offline at the last look (said again only when they change).
    banned_offline: Vec<u32>,
}

impl Daemon<'_> {
    /// One look: measure over the interval, plan, move what can be moved, publish the figures
    /// and set the next interval. False when `wait` reported a signal.
    fn look(&mut self) -> Result<bool> {
        let Some((m, secs)) = crate::model::Machine::measure(self.root, self.interval, self.wait)?
        else {
            return Ok(false);
        };
        self.looks += 1;
        let before = apply::before_iolab(self.dir)?;
        let p = match super::plan_for(&m, &before, self.s.plan.clone()) {
            Ok(p) => p,
            // Settings that held at the start (an IRQ to unpin) may stop holding as CPUs and
            // devices come and go: this look moves nothing.
            Err(e) if self.looks > 1 => {
                let why = format!("no plan this look: {}", crate::cli::error_text(&e));
                (self.log)(Level::Notice, &why);
                self.interval = next_interval(self.interval, false, self.s);
                return Ok(true);
            }
            Err(e) => return Err(e),
        };
        if p.banned_offline != self.banned_offline {
            if let Some(note) = super::render::banned_offline_note(&p) {
                (self.log)(Level::Info, &note);
            }
            self.banned_offline = p.banned_offline.clone();
        }
        let (moved, said) = self.apply(&m, &p);
        let next = next_interval(self.interval, moved, self.s);
        (self.publish)(&Figures {
            cpu: p.cpu_before.clone(),
            irqs: super::inputs::sources(&m, &before)
                .iter()
                .map(|src| (src.irq, src.name.clone(), src.per_cpu.values().sum::<f64>()))
                .filter(|(_, _, rate)| *rate > 0.0)
                .collect(),
            moves_total: self.moves_total,
            interval_secs: next.as_secs_f64(),
            time_unix: crate::store::time::now_unix(),
        });
        if next != self.interval || self.looks == 1 {
            // "balanced" only when heavy interrupts are: with none, a CPU carrying many light
            // ones is no balance.
            let (level, what) = if moved {
                (Level::Notice, format!("rebalanced over {secs:.1} s"))
            } else {
                let why = if p.moves.is_empty() {
                    super::render::why_nothing_moves(&p)
                } else if said {
                    "no move could be made (see above)"
                } else {
                    // The interrupts' affinities name their new CPUs; each moves when it
                    // next fires, after this look's measurement was taken.
                    "the moves planned are made already, and take effect as the interrupts \
                     next fire"
                };
                (
                    Level::Info,
                    format!("nothing moved over {secs:.1} s: {why}"),
                )
            };
            let line = format!(
                "{what} (busiest CPU at {}/s); next look in {} s",
                super::render::rate(p.peaks_after.cpu),
                next.as_secs_f64()
            );
            (self.log)(level, &line);
        }
        self.interval = next;
        Ok(true)
    }

    /// Makes the plan's moves that can be made (each one that cannot is said, with why):
    /// whether any was made, and whether any was said not to be.
    fn apply(&mut self, m: &crate::model::Machine, p: &super::plan::Plan) -> (bool, bool) {
        let slots = super::inputs::slots(m);
        let mut possible = Vec::new();
        let mut said = false;
        for mv in &p.moves {
            if let Some(why) = apply::problem(mv, m, &slots) {
                let line = format!("left IRQ {} where it is: {why}", mv.irq);
                (self.log)(Level::Notice, &line);
                said = true;
            } else if let Some(why) = apply::in_use_elsewhere(self.root, m, mv) {
                (self.log)(Level::Notice, &why);
                said = true;
            } else {
                possible.push(mv.clone());
            }
        }
        let (done, left) = apply::apply_each(self.root, m, &possible, &mut self.journal);
        for why in &left {
            (self.log)(Level::Notice, why);
            said = true;
        }
        if let Err(e) = apply::unpin_in_place(self.root, &p.unpinned_in_place, &mut self.journal) {
            (self.log)(Level::Notice, &crate::cli::error_text(&e));
        }
        for a in &done {
            let rate = p
                .moves
                .iter()
                .find(|m| m.irq == a.irq)
                .map_or(0.0, |m| m.rate);
            let line = format!(
                "moved IRQ {} ({}, {rate:.0}/s) to CPU {}",
                a.irq, a.name, a.to
            );
            (self.log)(Level::Notice, &line);
        }
        self.moves_total += done.len() as u64;
        if !done.is_empty() {
            self.last_move_look = self.looks;
        }
        (!done.is_empty(), said)
    }

    /// Says how long the placement held (a daemon that keeps moving is fighting something),
    /// then keeps it or puts every affinity iolab changed back.
    fn stop(mut self) -> Result<()> {
        let since = if self.moves_total == 0 {
            "none needed".to_string()
        } else {
            format!(
                "the last in look {} ({} look(s) since without a move)",
                self.last_move_look,
                self.looks - self.last_move_look
            )
        };
        let line = format!(
            "stopping after {} look(s): {} move(s), {since}",
            self.looks, self.moves_total
        );
        (self.log)(Level::Info, &line);
        if self.s.keep {
            self.journal.keep();
            (self.log)(
                Level::Notice,
                "placement kept; `iolab irq rollback` undoes it",
            );
            return Ok(());
        }
        let r = self.journal.restore()?;
        let said = match apply::placed_irqs(&r.restored) {
            0 => "nothing to put back: no interrupt was moved".to_string(),
            n => format!("put back the affinity of {n} interrupt(s)"),
        };
        (self.log)(Level::Notice, &said);
        for c in &r.changed_since {
            (self.log)(Level::Notice, &format!("left {}", c.describe()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_doubles_while_balanced_and_drops_after_a_move() {
        let s = Settings {
            plan: Options::default(),
            min_interval: Duration::from_secs(2),
            max_interval: Duration::from_secs(10),
            cycles: None,
            keep: false,
        };
        let mut i = s.min_interval;
        let mut seen = Vec::new();
        for _ in 0..4 {
            i = next_interval(i, false, &s);
            seen.push(i.as_secs());
        }
        assert_eq!(seen, vec![4, 8, 10, 10]);
        assert_eq!(next_interval(i, true, &s), s.min_interval);
    }

    /// Settings for a test on a fixture: looks of 1 s, `cycles` of them, nothing heavy.
    fn quiet(cycles: u64, keep: bool) -> Settings {
        Settings {
            plan: Options {
                heavy: 1e12,
                ..Options::default()
            },
            min_interval: Duration::from_secs(1),
            max_interval: Duration::from_secs(1),
            cycles: Some(cycles),
            keep,
        }
    }

    /// Runs the daemon on `root` with its journal in `state`: what it returned, and its log.
    fn run_logged(root: &SysRoot, state: &Path, s: &Settings) -> (Result<()>, Vec<String>) {
        let mut lines = Vec::new();
        let mut log = |_: Level, line: &str| lines.push(line.to_string());
        let result = run(root, state, s, &|_| true, &mut log, &mut |_| {});
        (result, lines)
    }

    /// `irq apply` places interrupts to stay until `irq rollback`. A daemon without --keep
    /// took that journal over and put the apply's placement back when it stopped, having moved
    /// nothing itself: now it refuses to start, and with --keep balances on from it.
    #[test]
    fn a_daemon_without_keep_leaves_an_applied_placement_alone() {
        use super::super::fixture;
        let machine = fixture::two_node();
        let root = SysRoot::at(machine.path()).unwrap();
        let state = tempfile::tempdir().unwrap();
        let m = crate::model::Machine::read(&root).unwrap();
        let mut j = apply::take_placement(state.path(), &root).unwrap();
        apply::apply(&root, &m, &[fixture::move_161(6)], &mut j).unwrap();
        apply::release(j);
        let file = machine.path().join("proc/irq/161/smp_affinity_list");
        let placed = || std::fs::read_to_string(&file).unwrap().trim() == "6";
        assert!(placed());
        let err = run_logged(&root, state.path(), &quiet(1, false))
            .0
            .unwrap_err();
        // Its own exit status: the packaged service neither restarts it nor cleans up after it.
        assert!(err.downcast_ref::<Refused>().is_some(), "{err:#}");
        let err = err.to_string();
        assert!(
            err.contains("the affinity of 1 interrupt(s) placed by `iolab irq apply`")
                && err.contains("`iolab irq rollback` first, or run the daemon with --keep"),
            "{err}"
        );
        assert!(placed());
        assert!(!crate::knobs::undone_if_killed(state.path()));
        run_logged(&root, state.path(), &quiet(1, true)).0.unwrap();
        assert!(placed());
        assert!(!crate::knobs::pending(state.path()).unwrap().is_empty());
        // A killed daemon's placement was to end with it: another takes it over, and ends it.
        let mut j = apply::take_placement(state.path(), &root).unwrap();
        j.undone_if_killed().unwrap();
        apply::release(j);
        run_logged(&root, state.path(), &quiet(1, false)).0.unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), "4-7,12-14");
    }

    /// A banned CPU that is offline (at the start, or going offline meanwhile) is harmless:
    /// the daemon starts, says so, and goes on balancing the others.
    #[test]
    fn a_banned_cpu_that_is_offline_does_not_stop_the_daemon() {
        let machine = super::super::fixture::two_node();
        let root = SysRoot::at(machine.path()).unwrap();
        let state = tempfile::tempdir().unwrap();
        let mut s = quiet(2, false);
        s.plan.banned = vec![20];
        let (result, lines) = run_logged(&root, state.path(), &s);
        result.unwrap();
        let offline: Vec<&String> = lines.iter().filter(|l| l.contains("offline")).collect();
        assert_eq!(
            offline,
            ["--ban-cpus: CPU 20 is offline now (banned should it come online)"],
            "{lines:?}"
        );
    }

    /// The look after a move measured before the interrupt moved (it moves when it next
    /// fires) plans the same move, already written: said so, not "(see above)" over nothing.
    #[test]
    fn a_move_planned_again_before_it_took_effect_is_said_to_be_made() {
        let machine = super::super::fixture::two_node();
        // eth0's eight queue interrupts piled onto CPU 4 (100,000 more each in the reading).
        let later = machine.path().join("later/proc/interrupts");
        let text = std::fs::read_to_string(&later).unwrap();
        let piled: Vec<String> = text
            .lines()
            .map(|l| match l.contains("eth0-TxRx-") {
                false => l.to_string(),
                true => {
                    let mut t: Vec<String> = l.split_whitespace().map(String::from).collect();
                    t[5] = (t[5].parse::<u64>().unwrap() + 100_000).to_string();
                    t.join(" ")
                }
            })
            .collect();
        std::fs::write(&later, piled.join("\n") + "\n").unwrap();
        let root = SysRoot::at(machine.path()).unwrap();
        let state = tempfile::tempdir().unwrap();
        let s = Settings {
            plan: Options::default(),
            min_interval: Duration::from_secs(1),
            max_interval: Duration::from_secs(2),
            cycles: Some(2),
            keep: false,
        };
        let (result, lines) = run_logged(&root, state.path(), &s);
        result.unwrap();
        assert!(
            lines.iter().any(|l| l.starts_with("moved IRQ ")),
            "{lines:?}"
        );
        let second = lines
            .iter()
            .find(|l| l.starts_with("nothing moved over "))
            .expect("the second look");
        assert!(
            second.contains("the moves planned are made already") && !second.contains("above"),
            "{lines:?}"
        );
    }

    /// With nothing heavy the daemon said "balanced" at every look; it says why nothing moves.
    #[test]
    fn a_look_with_nothing_heavy_says_so() {
        let machine = super::super::fixture::two_node();
        let root = SysRoot::at(machine.path()).unwrap();
        let state = tempfile::tempdir().unwrap();
        let (result, lines) = run_logged(&root, state.path(), &quiet(1, false));
        result.unwrap();
        assert!(
            lines[0].starts_with("nothing moved over ")
                && lines[0].contains(" s: no movable interrupt is heavy (busiest CPU at "),
            "{lines:?}"
        );
        assert!(!lines.iter().any(|l| l.contains("balanced")), "{lines:?}");
    }
}

//! `irq daemon`: measure, plan, apply, repeat. The interval adapts (case 2): it doubles up
//! to a ceiling while the load stays balanced, and drops back to the floor after a move, so a
//! quiet machine is looked at rarely and a changing one often. Moves go through the placement
//! journal; on Ctrl-C or SIGTERM every affinity iolab changed is put back unless asked to keep
//! them (after SIGKILL, `iolab irq rollback` does it).

use super::apply::{self, journal_dir};
use super::metrics::Figures;
use super::plan::Options;
use crate::knobs::Journal;
use crate::sys::SysRoot;
use anyhow::Result;
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
            eprintln!("<{}>{line}", level.priority());
        } else {
            let name = match level {
                Level::Notice => "notice",
                Level::Info => "info",
            };
            let secs = crate::store::time::now_unix() as u64 % 86_400;
            let clock = format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
            eprintln!("{clock} {name}: {line}");
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

/// Runs until `wait` reports a signal or the cycles are done. `log` gets one line per decision;
/// `publish` gets the figures of every look (for `--metrics-file` / `--listen`).
pub(crate) fn run(
    root: &SysRoot,
    s: &Settings,
    wait: &dyn Fn(Duration) -> bool,
    log: &mut dyn FnMut(Level, &str),
    publish: &mut dyn FnMut(&Figures),
) -> Result<()> {
    let dir = journal_dir();
    let mut journal = Journal::resume_in(&dir)?;
    journal.placements_only();
    let mut interval = s.min_interval;
    let mut looks = 0u64;
    let mut moves_total = 0u64;
    let mut last_move_look = 0u64;
    let result = (|| -> Result<()> {
        while s.cycles.is_none_or(|n| looks < n) {
            let Some((m, secs)) = crate::model::Machine::measure(root, interval, wait)? else {
                break;
            };
            looks += 1;
            let before = apply::before_iolab(&dir)?;
            let slots = super::inputs::slots(&m);
            let p = match super::plan_for(&m, &before, s.plan.clone()) {
                Ok(p) => p,
                // Settings that held at the start (a banned CPU, an IRQ to unpin) may stop
                // holding as CPUs and devices come and go: this look moves nothing.
                Err(e) if looks > 1 => {
                    log(
                        Level::Notice,
                        &format!("no plan this look: {}", crate::cli::error_text(&e)),
                    );
                    interval = next_interval(interval, false, s);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let mut possible = Vec::new();
            for mv in &p.moves {
                if let Some(why) = apply::problem(mv, &m, &slots) {
                    log(
                        Level::Notice,
                        &format!("left IRQ {} where it is: {why}", mv.irq),
                    );
                } else if let Some(why) = apply::in_use_elsewhere(root, &m, mv) {
                    log(Level::Notice, &why);
                } else {
                    possible.push(mv.clone());
                }
            }
            let (done, left) = apply::apply_each(root, &possible, &mut journal);
            for why in &left {
                log(Level::Notice, why);
            }
            for a in &done {
                log(
                    Level::Notice,
                    &format!(
                        "moved IRQ {} ({}, {:.0}/s) to CPU {}",
                        a.irq,
                        a.name,
                        p.moves
                            .iter()
                            .find(|m| m.irq == a.irq)
                            .map_or(0.0, |m| m.rate),
                        a.to
                    ),
                );
            }
            moves_total += done.len() as u64;
            if !done.is_empty() {
                last_move_look = looks;
            }
            let next = next_interval(interval, !done.is_empty(), s);
            publish(&Figures {
                cpu: p.cpu_before.clone(),
                irqs: super::inputs::sources(&m, &before)
                    .iter()
                    .map(|src| (src.irq, src.name.clone(), src.per_cpu.values().sum::<f64>()))
                    .filter(|(_, _, rate)| *rate > 0.0)
                    .collect(),
                moves_total,
                interval_secs: next.as_secs_f64(),
                time_unix: crate::store::time::now_unix(),
            });
            if next != interval || looks == 1 {
                log(
                    if done.is_empty() {
                        Level::Info
                    } else {
                        Level::Notice
                    },
                    &format!(
                        "{} over {secs:.1} s (busiest CPU at {}/s); next look in {} s",
                        if done.is_empty() {
                            "balanced"
                        } else {
                            "rebalanced"
                        },
                        super::render::rate(p.peaks_after.cpu),
                        next.as_secs_f64()
                    ),
                );
            }
            interval = next;
        }
        Ok(())
    })();
    // How long the placement has held: a daemon that keeps moving is fighting something.
    log(
        Level::Info,
        &format!(
            "stopping after {looks} look(s): {moves_total} move(s), {}",
            if moves_total == 0 {
                "none needed".to_string()
            } else {
                format!(
                    "the last in look {last_move_look} ({} look(s) since without a move)",
                    looks - last_move_look
                )
            }
        ),
    );
    if s.keep {
        journal.keep();
        log(
            Level::Notice,
            "placement kept; `iolab irq rollback` undoes it",
        );
    } else {
        let r = journal.restore()?;
        // Two journal entries per interrupt (its old CPU, then its old mask): count files.
        let irqs: std::collections::BTreeSet<&str> =
            r.restored.iter().map(|e| e.path.as_str()).collect();
        let said = match irqs.len() {
            0 => "nothing to put back: no interrupt was moved".to_string(),
            n => format!("put back the affinity of {n} interrupt(s)"),
        };
        log(Level::Notice, &said);
    }
    result
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
}

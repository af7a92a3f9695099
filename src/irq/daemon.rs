//! `irq daemon`: measure, plan, apply, repeat. The interval adapts (seeds/002): it doubles up
//! to a ceiling while the load stays balanced, and drops back to the floor after a move, so a
//! quiet machine is looked at rarely and a changing one often. Moves go through the placement
//! journal; on Ctrl-C or SIGTERM every affinity iolab changed is put back unless asked to keep
//! them (after SIGKILL, `iolab irq rollback` does it).

use super::apply::{self, journal_dir};
use super::plan::{plan, Options};
use crate::knobs::Journal;
use crate::sys::SysRoot;
use anyhow::Result;
use std::time::Duration;

#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub plan: Options,
    pub min_interval: Duration,
    pub max_interval: Duration,
    /// Stop after this many looks (None: until a signal).
    pub cycles: Option<u64>,
    /// Leave the placement in effect on exit.
    pub keep: bool,
}

/// The next interval: back to the floor after a move, else twice as long up to the ceiling.
pub fn next_interval(now: Duration, moved: bool, s: &Settings) -> Duration {
    if moved {
        s.min_interval
    } else {
        (now * 2).min(s.max_interval)
    }
}

/// Runs until `wait` reports a signal or the cycles are done. `log` gets one line per event.
pub fn run(
    root: &SysRoot,
    s: &Settings,
    wait: &dyn Fn(Duration) -> bool,
    log: &mut dyn FnMut(&str),
) -> Result<()> {
    let dir = journal_dir();
    let mut journal = Journal::resume_in(&dir)?;
    let mut interval = s.min_interval;
    let mut looks = 0u64;
    let result = (|| -> Result<()> {
        while s.cycles.is_none_or(|n| looks < n) {
            let Some((m, secs)) = super::measure(root, interval, wait)? else {
                break;
            };
            looks += 1;
            let before = apply::before_iolab(&dir)?;
            let slots = super::inputs::slots(&m);
            let p = plan(&super::inputs::sources(&m, &before), &slots, s.plan);
            apply::check(&p.moves, &m, &slots)?;
            let done = apply::apply(root, &p.moves, &mut journal)?;
            for a in &done {
                log(&format!(
                    "{} moved IRQ {} ({}, {:.0}/s) to CPU {}",
                    stamp(),
                    a.irq,
                    a.name,
                    p.moves
                        .iter()
                        .find(|m| m.irq == a.irq)
                        .map_or(0.0, |m| m.rate),
                    a.to
                ));
            }
            let next = next_interval(interval, !done.is_empty(), s);
            if next != interval || looks == 1 {
                log(&format!(
                    "{} {} over {secs:.1} s (busiest CPU {:.0}/s); next look in {} s",
                    stamp(),
                    if done.is_empty() {
                        "balanced"
                    } else {
                        "rebalanced"
                    },
                    p.peaks_after.cpu,
                    next.as_secs_f64()
                ));
            }
            interval = next;
        }
        Ok(())
    })();
    if s.keep {
        journal.keep();
        log(&format!(
            "{} placement kept; `iolab irq rollback` undoes it",
            stamp()
        ));
    } else {
        let r = journal.restore()?;
        log(&format!(
            "{} put back {} affinity change(s)",
            stamp(),
            r.restored.len()
        ));
    }
    result
}

fn stamp() -> String {
    let now = crate::store::time::now_unix();
    let secs = now as u64 % 86_400;
    format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
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

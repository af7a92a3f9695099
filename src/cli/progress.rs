//! How `iolab run` shows where it is. On a terminal: one live line, redrawn every second, with
//! a bar, the run, its cell and a counting-down ETA, so a matrix of hours is watchable; messages
//! (preflight, failures) are printed above it. Piped or redirected: one plain line per run, as
//! a log wants. Nothing here decides anything; the run loop reports, this draws.

use std::io::{IsTerminal, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::experiment::run::{Progress, Step};
use crate::report::format::terminal_safe as safe;

const BAR_WIDTH: usize = 24;

/// The line for `step`, `elapsed` seconds after its run started.
pub(super) fn line(step: &Step, elapsed: f64) -> String {
    let done = step.number.saturating_sub(1) as f64;
    let planned = step.planned.max(1) as f64;
    let filled = ((done / planned) * BAR_WIDTH as f64).round() as usize;
    let bar: String = (0..BAR_WIDTH)
        .map(|i| match i.cmp(&filled.min(BAR_WIDTH)) {
            std::cmp::Ordering::Less => '=',
            std::cmp::Ordering::Equal => '>',
            std::cmp::Ordering::Greater => ' ',
        })
        .collect();
    let eta = step
        .eta_seconds
        .map(|e| {
            format!(
                "  ETA {}",
                crate::experiment::run::render::duration_text((e - elapsed).max(0.0))
            )
        })
        .unwrap_or_default();
    format!(
        "[{bar}] {}  {eta}",
        plain(step).trim_end(),
        eta = eta.trim_start()
    )
}

/// The line for a log: `[12/36] rep 2 CELL  ETA 3m12s`.
pub(super) fn plain(step: &Step) -> String {
    let eta = step
        .eta_seconds
        .map(|e| format!("  ETA {}", crate::experiment::run::render::duration_text(e)))
        .unwrap_or_default();
    format!(
        "[{}/{}] {} {}{eta}",
        step.number,
        step.planned,
        if step.warmup {
            "warm-up".to_string()
        } else {
            format!("rep {}", step.round)
        },
        safe(&step.cell),
    )
}

#[derive(Default)]
struct Live {
    step: Option<(Step, Instant)>,
    line_open: bool,
}

impl Live {
    fn draw(&mut self) {
        if let Some((step, since)) = &self.step {
            let mut err = std::io::stderr().lock();
            let _ = write!(
                err,
                "\r\x1b[2K{}",
                line(step, since.elapsed().as_secs_f64())
            );
            let _ = err.flush();
            self.line_open = true;
        }
    }

    fn close_line(&mut self) {
        if self.line_open {
            let _ = writeln!(std::io::stderr());
            self.line_open = false;
        }
    }
}

/// Progress on stderr: live on a terminal, plain lines otherwise.
pub(super) struct StderrProgress {
    live: Option<Arc<Mutex<Live>>>,
    stop: Arc<AtomicBool>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

impl StderrProgress {
    pub(super) fn new() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        if !std::io::stderr().is_terminal() {
            return StderrProgress {
                live: None,
                stop,
                ticker: None,
            };
        }
        let live = Arc::new(Mutex::new(Live::default()));
        let (shared, halt) = (live.clone(), stop.clone());
        let ticker = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || {
                while !halt.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_secs(1));
                    if let Ok(mut l) = shared.lock() {
                        if !halt.load(Ordering::Relaxed) {
                            l.draw();
                        }
                    }
                }
            })
            .ok();
        StderrProgress {
            live: Some(live),
            stop,
            ticker,
        }
    }
}

impl Progress for StderrProgress {
    fn message(&mut self, text: &str) {
        let text = crate::report::format::terminal_safe_lines(text.trim_end()).into_owned();
        match &self.live {
            Some(live) => {
                let mut l = live.lock().unwrap_or_else(|e| e.into_inner());
                l.close_line();
                say!("{text}");
                l.draw();
            }
            None => say!("{text}"),
        }
    }

    fn run_started(&mut self, s: &Step) {
        match &self.live {
            Some(live) => {
                let mut l = live.lock().unwrap_or_else(|e| e.into_inner());
                l.step = Some((s.clone(), Instant::now()));
                l.draw();
            }
            None => say!("{}", plain(s)),
        }
    }

    fn finish(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(live) = &self.live {
            let mut l = live.lock().unwrap_or_else(|e| e.into_inner());
            l.step = None;
            l.close_line();
        }
    }
}

impl Drop for StderrProgress {
    fn drop(&mut self) {
        self.finish();
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(number: usize, eta: Option<f64>) -> Step {
        Step {
            number,
            planned: 4,
            cell: "rq_affinity=2,placement=far".into(),
            round: 2,
            warmup: false,
            eta_seconds: eta,
        }
    }

    #[test]
    fn the_live_line_has_a_bar_the_run_and_a_counting_down_eta() {
        let l = line(&step(3, Some(95.0)), 20.0);
        // Two of four runs done: half the bar.
        assert!(
            l.starts_with(&format!("[{}>{}]", "=".repeat(12), " ".repeat(11))),
            "{l}"
        );
        assert!(l.contains("[3/4] rep 2 rq_affinity=2,placement=far"), "{l}");
        assert!(l.ends_with("ETA 1m15s"), "{l}");
        // Never below zero, and no ETA when none is known.
        assert!(line(&step(3, Some(5.0)), 60.0).ends_with("ETA 0s"));
        assert!(!line(&step(1, None), 0.0).contains("ETA"));
    }

    #[test]
    fn the_plain_line_is_one_log_line() {
        assert_eq!(
            plain(&step(3, Some(95.0))),
            "[3/4] rep 2 rq_affinity=2,placement=far  ETA 1m35s"
        );
    }
}

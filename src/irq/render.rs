//! Plain-text views of a placement plan and of what applying it did, for the terminal and
//! for pasting into a mail.

use super::apply::Applied;
use super::plan::{Peaks, Pinned, Plan};
use crate::sys::parse::format_cpulist;
use std::fmt::Write as _;

/// Interrupts per second: whole numbers, but a rare interrupt still shows a tenth. Cut, not
/// rounded, so that a rate shown never reaches a threshold the rate itself is under (0.9996
/// showed as 1.0 beside "light (under 1/s)").
pub(crate) fn rate(v: f64) -> String {
    if v > 0.0 && v < 10.0 {
        format!("{:.1}", (v * 10.0).floor() / 10.0)
    } else {
        format!("{:.0}", v.floor())
    }
}

/// Names from the machine, files or the database are escaped for the terminal
/// (`report::format::terminal_safe`).
pub(crate) fn plan_text(p: &Plan, measured_s: f64) -> String {
    crate::report::format::terminal_safe_lines(&plan_text_unescaped(p, measured_s)).into_owned()
}

fn plan_text_unescaped(p: &Plan, measured_s: f64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "interrupt placement from rates measured over {measured_s:.1} s (heavy: {}/s and up)",
        p.options.heavy
    );
    if p.moves.is_empty() {
        let see_below = if p.pinned.is_some() {
            " (see below)"
        } else {
            ""
        };
        let _ = writeln!(out, "nothing to move: {}{see_below}", why_nothing_moves(p));
    } else {
        let _ = writeln!(
            out,
            "{:>5} {:>10} {:>8} {:>4}  name",
            "IRQ", "rate/s", "from", "to"
        );
        for m in &p.moves {
            let _ = writeln!(
                out,
                "{:>5} {:>10} {:>8} {:>4}  {}",
                m.irq,
                rate(m.rate),
                format_cpulist(&m.from),
                m.to,
                m.name
            );
        }
    }
    for (irq, why) in &p.off_node {
        let _ = writeln!(out, "IRQ {irq} goes off its device's node: {why}");
    }
    if !p.kept.is_empty() {
        let _ = writeln!(
            out,
            "kept:\n{:>5} {:>10} {:>8}  name: why",
            "IRQ", "rate/s", "on"
        );
        for k in &p.kept {
            let _ = writeln!(
                out,
                "{:>5} {:>10} {:>8}  {}: {}",
                k.irq,
                rate(k.rate),
                format_cpulist(&k.on),
                k.name,
                k.why
            );
        }
    }
    // Loads, not CPU numbers: "CPU 5" alone read as the fifth CPU on a two-CPU machine. A
    // core's and a package's loads are per CPU in them, said beside each: "package at 0.4/s"
    // next to "CPU at 0.9/s" read as a package carrying less than one of its CPUs.
    let peaks = |x: &Peaks| {
        format!(
            "CPU at {}/s, core at {}/s a CPU, package at {}/s a CPU",
            rate(x.cpu),
            rate(x.core),
            rate(x.package)
        )
    };
    let need = if p.forced {
        "moves off CPUs that are to take none need no gain".to_string()
    } else {
        format!("moves need {}%", p.options.min_gain_pct)
    };
    let _ = writeln!(
        out,
        "busiest: now {}; planned {} ({:.0}% lower; {need})",
        peaks(&p.peaks_before),
        peaks(&p.peaks_after),
        p.gain_pct,
    );
    if let Some(pin) = &p.pinned {
        out.push_str(&pinned_text(pin));
    }
    if let Some(note) = unpinned_in_place_note(p) {
        let _ = writeln!(out, "{note}");
    }
    if !p.options.banned.is_empty() {
        let offline = match p.banned_offline.as_slice() {
            [] => String::new(),
            cpus => format!(" (offline: {})", format_cpulist(cpus)),
        };
        let _ = writeln!(
            out,
            "banned CPUs (no interrupt moved there): {}{offline}",
            format_cpulist(&p.options.banned)
        );
    }
    out
}

/// Pinned interrupts unpinned where they are: written as they are, so they are iolab's.
pub(crate) fn unpinned_in_place_note(p: &Plan) -> Option<String> {
    (!p.unpinned_in_place.is_empty()).then(|| {
        format!(
            "unpinned where they are: IRQ {} (their affinity is journaled as iolab's, so later \
             plans may move them; `iolab irq rollback` restores the pins)",
            format_cpulist(&p.unpinned_in_place)
        )
    })
}

/// Said where no plan is printed (`irq apply`, the daemon's log): banned CPUs that are offline.
pub(crate) fn banned_offline_note(p: &Plan) -> Option<String> {
    (!p.banned_offline.is_empty()).then(|| {
        format!(
            "--ban-cpus: CPU {} is offline now (banned should it come online)",
            format_cpulist(&p.banned_offline)
        )
    })
}

/// Why a plan with no moves moves nothing.
pub(crate) fn why_nothing_moves(p: &Plan) -> &'static str {
    if p.pinned.is_some() {
        "the heavy interrupts are pinned"
    } else if p.kept.iter().any(|k| k.why.starts_with("balanced")) {
        "the heavy interrupts are balanced"
    } else if p.kept.iter().any(|k| k.why == "already well placed") {
        "every heavy interrupt is already well placed"
    } else if p.kept.iter().any(|k| p.options.is_heavy(k.rate)) {
        "no heavy interrupt can be moved (why: under kept)"
    } else {
        "no movable interrupt is heavy"
    }
}

/// What `irq apply` says when its plan moves nothing: why, and the pins when they are why.
pub(crate) fn nothing_applied_text(p: &Plan) -> String {
    let mut out = format!("nothing to move: {}\n", why_nothing_moves(p));
    if let Some(pin) = &p.pinned {
        out.push_str(&pinned_text(pin));
    }
    crate::report::format::terminal_safe_lines(&out).into_owned()
}

/// The pins are the problem: say which, by how much, and how to lift them.
fn pinned_text(pin: &Pinned) -> String {
    let n = pin.irqs.len();
    let (what, are) = if n == 1 {
        ("heavy interrupt", "is")
    } else {
        ("heavy interrupts", "are")
    };
    let cpus = match pin.cpus.as_slice() {
        [one] => format!("CPU {one}"),
        many => format!("CPUs {}", format_cpulist(many)),
    };
    format!(
        "pinned: {n} {what} {are} pinned to {cpus} by their affinity (IRQ {}, {}/s); \
         unpinned, the busiest CPU would carry {:.0}% less ({} -> {}/s)\n  \
         `--unpin all` (or --unpin {}) moves them; `iolab irq rollback` restores the pins\n",
        format_cpulist(&pin.irqs),
        rate(pin.rate),
        pin.gain_pct,
        rate(pin.busiest_cpu),
        rate(pin.busiest_cpu_unpinned),
        pin.irqs
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    )
}

/// Names from the machine, files or the database are escaped for the terminal
/// (`report::format::terminal_safe`).
pub(crate) fn applied_text(done: &[Applied]) -> String {
    crate::report::format::terminal_safe_lines(&applied_text_unescaped(done)).into_owned()
}

fn applied_text_unescaped(done: &[Applied]) -> String {
    let mut out = String::new();
    for a in done {
        let eff = match &a.effective {
            Some(e) if e == &[a.to] => String::new(),
            Some(e) => format!(" (delivered to {} until it next fires)", format_cpulist(e)),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "moved IRQ {} ({}) to CPU {} (affinity was {}){eff}",
            a.irq, a.name, a.to, a.was
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::rate;

    #[test]
    fn a_rate_shown_never_reaches_a_threshold_it_is_under() {
        assert_eq!(rate(0.9996), "0.9");
        assert_eq!(rate(9.99), "9.9");
        assert_eq!(rate(99.7), "99");
        assert_eq!(rate(0.0), "0");
        assert_eq!(rate(2.5), "2.5");
    }
}

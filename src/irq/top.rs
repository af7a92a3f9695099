//! `irq top`'s numbers: interrupts per second per IRQ and per CPU between two readings of
//! /proc/interrupts. The cumulative counts in that file hide a pile-up (case 2: load that
//! rotates between CPUs looks even since boot); rates over a short interval show it.

use super::render::rate;
use crate::model::rates::per_second;
use crate::sys::parse::interrupts::Interrupts;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

#[derive(Debug, Clone, Serialize)]
pub(crate) struct TopRow {
    /// The IRQ number, or a summary row's name (`LOC`, `RES`, ...).
    pub irq: String,
    pub name: String,
    pub total: f64,
    pub per_cpu: BTreeMap<u32, f64>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct TopFrame {
    pub interval_s: f64,
    /// Device (numbered) interrupts per second taken by each CPU.
    pub cpu_totals: BTreeMap<u32, f64>,
    /// Busiest first; rows with no interrupts in the interval are left out.
    pub rows: Vec<TopRow>,
}

/// Rates between two readings `ns` apart. Summary rows (timer, IPIs) are included only when
/// asked; they never count in `cpu_totals`. A counter that went backwards gives no rate.
pub(crate) fn frame(
    before: &Interrupts,
    after: &Interrupts,
    ns: u64,
    with_summary: bool,
) -> TopFrame {
    let mut cpu_totals: BTreeMap<u32, f64> = after.cpus.iter().map(|c| (*c, 0.0)).collect();
    let mut rows = Vec::new();
    for row in &after.rows {
        let numbered = row.id.number().is_some();
        if !numbered && !with_summary {
            continue;
        }
        let Some(old) = before.row(&row.id) else {
            continue;
        };
        let mut per_cpu = BTreeMap::new();
        for (i, cpu) in after.cpus.iter().enumerate() {
            let Some(col) = before.cpus.iter().position(|c| c == cpu) else {
                continue;
            };
            let (Some(b), Some(a)) = (old.counts.get(col), row.counts.get(i)) else {
                continue;
            };
            if let Some(r) = per_second(*b, *a, ns).filter(|r| *r > 0.0) {
                per_cpu.insert(*cpu, r);
                if numbered {
                    *cpu_totals.entry(*cpu).or_default() += r;
                }
            }
        }
        let total: f64 = if row.counts.is_empty() {
            per_second(old.total, row.total, ns).unwrap_or(0.0)
        } else {
            per_cpu.values().sum()
        };
        if total > 0.0 {
            rows.push(TopRow {
                irq: row.id.to_string(),
                name: if row.actions.is_empty() {
                    row.description.clone().unwrap_or_default()
                } else {
                    row.actions.join(", ")
                },
                total,
                per_cpu,
            });
        }
    }
    rows.sort_by(|a, b| b.total.total_cmp(&a.total).then(a.irq.cmp(&b.irq)));
    TopFrame {
        interval_s: ns as f64 / 1e9,
        cpu_totals,
        rows,
    }
}

/// What `irq top` shows: `count` refreshes (None: until stopped) every `interval`, with
/// the summary rows (`all`) or without, each table cut to its `limit` busiest rows.
pub(crate) struct Watch {
    pub(crate) interval: std::time::Duration,
    pub(crate) count: Option<u64>,
    pub(crate) all: bool,
    pub(crate) limit: usize,
}

/// One refresh as `irq top` prints it: its JSON is the frame, its text the table.
#[derive(Serialize)]
#[serde(transparent)]
pub(crate) struct Shown {
    frame: TopFrame,
    #[serde(skip)]
    limit: usize,
}

impl crate::output::Render for Shown {
    fn text(&self) -> String {
        render(&self.frame, self.limit)
    }
}

/// Reads /proc/interrupts every `w.interval` and hands each refresh to `show`, until
/// `w.count` refreshes were shown, `wait` says a signal arrived or `show` says nobody reads
/// them any more.
pub(crate) fn watch(
    root: &crate::sys::SysRoot,
    w: &Watch,
    wait: &dyn Fn(std::time::Duration) -> bool,
    show: &mut dyn FnMut(&Shown) -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let mut before = crate::model::irqs::read_interrupts(root)?;
    let mut at = std::time::Instant::now();
    let mut shown = 0u64;
    while w.count.is_none_or(|n| shown < n) {
        if !wait(w.interval) {
            break;
        }
        let after = crate::model::irqs::read_interrupts(root)?;
        let now = std::time::Instant::now();
        let read = show(&Shown {
            frame: frame(&before, &after, (now - at).as_nanos() as u64, w.all),
            limit: w.limit,
        })?;
        if !read {
            break; // the reader went away
        }
        (before, at) = (after, now);
        shown += 1;
    }
    Ok(())
}

/// A table: the `limit` busiest rows, one column per CPU that took any interrupt shown, the
/// device-interrupt total per CPU and each CPU's share of it.
/// Names from the machine, files or the database are escaped for the terminal
/// (`report::format::terminal_safe`).
pub(crate) fn render(f: &TopFrame, limit: usize) -> String {
    crate::report::format::terminal_safe_lines(&render_unescaped(f, limit)).into_owned()
}

fn render_unescaped(f: &TopFrame, limit: usize) -> String {
    let rows = &f.rows[..f.rows.len().min(limit)];
    let cpus: Vec<u32> = f
        .cpu_totals
        .iter()
        .filter(|(c, t)| **t > 0.0 || rows.iter().any(|r| r.per_cpu.contains_key(c)))
        .map(|(c, _)| *c)
        .collect();
    let all: f64 = f.cpu_totals.values().sum();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "interrupts/s over {:.1} s: {} device interrupts/s in all",
        f.interval_s,
        rate(all)
    );
    if f.rows.is_empty() {
        // A table of no rows and a `dev 0` line would look like a reading gone wrong.
        out.push_str("  no interrupt fired in this interval\n");
        return out;
    }
    let _ = write!(out, "{:>5} {:>10}", "IRQ", "total");
    for c in &cpus {
        let _ = write!(out, " {:>9}", format!("CPU{c}"));
    }
    out.push_str("  name\n");
    for r in rows {
        let _ = write!(out, "{:>5} {:>10}", r.irq, rate(r.total));
        for c in &cpus {
            match r.per_cpu.get(c) {
                Some(v) => {
                    let _ = write!(out, " {:>9}", rate(*v));
                }
                None => {
                    let _ = write!(out, " {:>9}", "-");
                }
            }
        }
        let _ = writeln!(out, "  {}", r.name);
    }
    if rows.len() < f.rows.len() {
        let _ = writeln!(
            out,
            "  ({} more with interrupts)",
            f.rows.len() - rows.len()
        );
    }
    let _ = write!(out, "{:>5} {:>10}", "dev", rate(all));
    for c in &cpus {
        let _ = write!(out, " {:>9}", rate(f.cpu_totals[c]));
    }
    out.push_str("  device interrupts per CPU\n");
    if all > 0.0 {
        let _ = write!(out, "{:>5} {:>10}", "", "");
        for c in &cpus {
            let _ = write!(out, " {:>8.1}%", f.cpu_totals[c] / all * 100.0);
        }
        out.push_str("  share\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "           CPU0       CPU1\n\
  30:        100          0   PCI-MSI 0-edge      eth0-rx\n\
  31:          0         50   PCI-MSI 1-edge      eth0-tx\n\
  32:          5          5   PCI-MSI 2-edge      idle\n\
 LOC:       1000       1000   Local timer interrupts\n\
 ERR:          0\n";
    const AFTER: &str = "           CPU0       CPU1\n\
  30:       2100          0   PCI-MSI 0-edge      eth0-rx\n\
  31:        400         50   PCI-MSI 1-edge      eth0-tx\n\
  32:          5          5   PCI-MSI 2-edge      idle\n\
 LOC:       1500       1400   Local timer interrupts\n\
 ERR:          2\n";

    fn parse(t: &str) -> Interrupts {
        crate::sys::parse::interrupts(t).unwrap()
    }

    #[test]
    fn rates_per_irq_and_cpu_busiest_first_idle_rows_left_out() {
        let f = frame(&parse(BEFORE), &parse(AFTER), 2_000_000_000, false);
        let got: Vec<(&str, f64)> = f.rows.iter().map(|r| (r.irq.as_str(), r.total)).collect();
        assert_eq!(got, vec![("30", 1000.0), ("31", 200.0)]);
        assert_eq!(f.rows[1].per_cpu, BTreeMap::from([(0, 200.0)]));
        assert_eq!(f.cpu_totals, BTreeMap::from([(0, 1200.0), (1, 0.0)]));
        let text = render(&f, 10);
        assert!(text.contains("1200 device interrupts/s"), "{text}");
        assert!(text.contains("100.0%"), "{text}");
    }

    #[test]
    fn summary_rows_on_request_and_never_in_the_device_totals() {
        let f = frame(&parse(BEFORE), &parse(AFTER), 1_000_000_000, true);
        let loc = f.rows.iter().find(|r| r.irq == "LOC").unwrap();
        assert_eq!(loc.total, 900.0);
        assert_eq!(loc.name, "Local timer interrupts");
        assert_eq!(f.rows.iter().find(|r| r.irq == "ERR").unwrap().total, 2.0);
        assert_eq!(f.cpu_totals[&0], 2400.0);
    }

    #[test]
    fn a_counter_that_went_backwards_gives_no_rate() {
        let f = frame(&parse(AFTER), &parse(BEFORE), 1_000_000_000, false);
        assert!(f.rows.is_empty());
        let text = render(&f, 10);
        assert_eq!(
            text,
            "interrupts/s over 1.0 s: 0 device interrupts/s in all\n  \
             no interrupt fired in this interval\n"
        );
    }
}

//! /proc/interrupts: a header naming the CPU columns (only online CPUs appear), then one row
//! per interrupt. Numbered rows carry a count per column, the chip, the hardware IRQ number,
//! the trigger and the action names (comma-separated, and names may contain spaces such as
//! "PCIe PME"). Named rows are either per-CPU summaries with a description (`LOC`, `RES`,
//! `CAL`) or a single system-wide count (`ERR`, `MIS`). The layout differs by architecture
//! (x86 prints `5-edge`, ARM prints `27 Level`), so the tail after the counts is split
//! heuristically; `/sys/kernel/irq/N` holds the exact chip and actions where it exists.

use super::ParseError;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Which row: a numbered IRQ or a named summary row such as `LOC`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum IrqId {
    Number(u32),
    Named(String),
}

impl IrqId {
    pub fn number(&self) -> Option<u32> {
        match self {
            IrqId::Number(n) => Some(*n),
            IrqId::Named(_) => None,
        }
    }
}

impl fmt::Display for IrqId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IrqId::Number(n) => write!(f, "{n}"),
            IrqId::Named(s) => f.write_str(s),
        }
    }
}

/// One row of /proc/interrupts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InterruptRow {
    pub id: IrqId,
    /// Count per CPU column, aligned with `Interrupts::cpus`; empty for one-count rows.
    pub counts: Vec<u64>,
    /// Sum of the counts, or the single count of rows like `ERR`.
    pub total: u64,
    pub chip: Option<String>,
    pub hwirq: Option<String>,
    /// `edge` / `level` (lower case) where printed.
    pub trigger: Option<String>,
    /// Action names (drivers' request_irq names); empty when the IRQ has no handler.
    pub actions: Vec<String>,
    /// The description of a named row ("Local timer interrupts").
    pub description: Option<String>,
}

/// The parsed file: the CPU of each count column, then the rows in file order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Interrupts {
    pub cpus: Vec<u32>,
    pub rows: Vec<InterruptRow>,
}

impl Interrupts {
    pub(crate) fn row(&self, id: &IrqId) -> Option<&InterruptRow> {
        self.rows.iter().find(|r| &r.id == id)
    }
}

/// Parses the whole text of /proc/interrupts.
pub(crate) fn interrupts(text: &str) -> Result<Interrupts, ParseError> {
    let mut lines = text.lines().enumerate();
    let (_, header) = lines
        .find(|(_, l)| !l.trim().is_empty())
        .ok_or_else(|| ParseError::new(0, "empty file: expected a header of CPU columns"))?;
    let mut cpus = Vec::new();
    for name in header.split_whitespace() {
        let n = name
            .strip_prefix("CPU")
            .and_then(|n| n.parse::<u32>().ok())
            .ok_or_else(|| {
                ParseError::new(1, format!("expected CPUn column names, found {name:?}"))
            })?;
        cpus.push(n);
    }
    let mut rows = Vec::new();
    for (i, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        rows.push(row(line, cpus.len(), i + 1)?);
    }
    Ok(Interrupts { cpus, rows })
}

fn row(line: &str, columns: usize, lineno: usize) -> Result<InterruptRow, ParseError> {
    let (label, rest) = line.split_once(':').ok_or_else(|| {
        ParseError::new(lineno, format!("expected `IRQ:` at the start of {line:?}"))
    })?;
    let label = label.trim();
    if label.is_empty() || label.contains(char::is_whitespace) {
        return Err(ParseError::new(lineno, format!("bad IRQ label {label:?}")));
    }
    let id = match label.parse::<u32>() {
        Ok(n) => IrqId::Number(n),
        Err(_) => IrqId::Named(label.to_string()),
    };
    // Walk the count columns by hand so the tail keeps its original spacing.
    let mut counts = Vec::with_capacity(columns);
    let mut tail = rest;
    while counts.len() < columns {
        let trimmed = tail.trim_start();
        let end = trimmed.find(char::is_whitespace).unwrap_or(trimmed.len());
        let field = &trimmed[..end];
        match field.parse::<u64>() {
            Ok(n) => {
                counts.push(n);
                tail = &trimmed[end..];
            }
            Err(_) => break,
        }
    }
    let named = matches!(id, IrqId::Named(_));
    if counts.len() < columns {
        // Only named rows may carry a single system-wide count (ERR, MIS).
        if named && counts.len() == 1 && tail.trim().is_empty() {
            return Ok(InterruptRow {
                id,
                total: counts[0],
                counts: Vec::new(),
                chip: None,
                hwirq: None,
                trigger: None,
                actions: Vec::new(),
                description: None,
            });
        }
        let found = tail.split_whitespace().next().unwrap_or("end of line");
        return Err(ParseError::new(
            lineno,
            format!(
                "IRQ {label}: expected {columns} per-CPU counts, found {} then {found:?}",
                counts.len()
            ),
        ));
    }
    // Saturating: garbage input must not overflow (and panic in debug builds).
    let total = counts.iter().fold(0u64, |a, b| a.saturating_add(*b));
    let tail = tail.trim();
    let mut out = InterruptRow {
        id,
        counts,
        total,
        chip: None,
        hwirq: None,
        trigger: None,
        actions: Vec::new(),
        description: None,
    };
    if named {
        out.description = (!tail.is_empty()).then(|| tail.to_string());
    } else {
        split_tail(tail, &mut out);
    }
    Ok(out)
}

/// Splits "IR-PCI-MSI 524288-edge      nvme0q0" or "GICv3  27 Level     arch_timer" into
/// chip, hwirq, trigger and actions.
fn split_tail(tail: &str, row: &mut InterruptRow) {
    let mut rest = tail;
    let next_token = |rest: &mut &str| -> Option<String> {
        let t = rest.trim_start();
        if t.is_empty() {
            return None;
        }
        let end = t.find(char::is_whitespace).unwrap_or(t.len());
        let tok = t[..end].to_string();
        *rest = &t[end..];
        Some(tok)
    };
    row.chip = next_token(&mut rest);
    let after_chip = rest;
    if let Some(tok) = next_token(&mut rest) {
        let lower = tok.to_ascii_lowercase();
        // `5-edge` (x86), or `-ioapic-edge` (Xen pirq chips, no hardware number).
        if let Some((hw, trig)) = lower.rsplit_once('-').filter(|(hw, trig)| {
            (*trig == "edge" || *trig == "level" || *trig == "fasteoi")
                && (hw.is_empty()
                    || hw.starts_with('-')
                    || hw.chars().all(|c| c.is_ascii_hexdigit()))
        }) {
            if !hw.is_empty() && !hw.starts_with('-') {
                row.hwirq = Some(hw.to_string());
            }
            row.trigger = Some(trig.to_string());
        } else if tok.chars().all(|c| c.is_ascii_digit()) {
            row.hwirq = Some(tok);
            let before_trigger = rest;
            match next_token(&mut rest).map(|t| t.to_ascii_lowercase()) {
                Some(t) if t == "edge" || t == "level" => row.trigger = Some(t),
                _ => rest = before_trigger,
            }
        } else {
            rest = after_chip;
        }
    }
    row.actions = rest
        .trim()
        .split(", ")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    const X86: &str = "           CPU0       CPU1       \n\
  0:         44          0   IO-APIC   2-edge      timer\n\
 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n\
 36:          0      27567 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n\
 40:          0          0  IR-PCI-MSI 458752-edge      PCIe PME, pciehp\n\
 41:          0          0  IR-PCI-MSI 524288-edge\n\
NMI:          0          0   Non-maskable interrupts\n\
LOC:      12188      13566   Local timer interrupts\n\
RES:       3546       6238   Rescheduling interrupts\n\
ERR:          0\n\
MIS:          7\n";

    #[test]
    fn parses_x86_rows_with_spaces_in_names_and_one_column_rows() {
        let p = interrupts(X86).unwrap();
        assert_eq!(p.cpus, vec![0, 1]);
        let r = p.row(&IrqId::Number(36)).unwrap();
        assert_eq!(r.counts, vec![0, 27567]);
        assert_eq!(r.total, 27567);
        assert_eq!(r.chip.as_deref(), Some("PCI-MSIX-0000:00:02.0"));
        assert_eq!(r.hwirq.as_deref(), Some("1"));
        assert_eq!(r.trigger.as_deref(), Some("edge"));
        assert_eq!(r.actions, vec!["virtio1-req.0"]);
        let pme = p.row(&IrqId::Number(40)).unwrap();
        assert_eq!(pme.actions, vec!["PCIe PME", "pciehp"]);
        assert_eq!(pme.hwirq.as_deref(), Some("458752"));
        assert!(p.row(&IrqId::Number(41)).unwrap().actions.is_empty());
        let loc = p.row(&IrqId::Named("LOC".into())).unwrap();
        assert_eq!(loc.counts, vec![12188, 13566]);
        assert_eq!(loc.description.as_deref(), Some("Local timer interrupts"));
        let mis = p.row(&IrqId::Named("MIS".into())).unwrap();
        assert!(mis.counts.is_empty());
        assert_eq!(mis.total, 7);
    }

    #[test]
    fn parses_arm_layout_and_offline_cpu_columns() {
        let text = "           CPU0       CPU2\n\
 11:      12345      67890     GICv3  27 Level     arch_timer\n\
 50:          3          0   ITS-MSI 524288 Edge      nvme0q0\n\
IPI0:       100        200       Rescheduling interrupts\n\
Err:          0\n";
        let p = interrupts(text).unwrap();
        assert_eq!(p.cpus, vec![0, 2]);
        let t = p.row(&IrqId::Number(11)).unwrap();
        assert_eq!(t.chip.as_deref(), Some("GICv3"));
        assert_eq!(t.hwirq.as_deref(), Some("27"));
        assert_eq!(t.trigger.as_deref(), Some("level"));
        assert_eq!(t.actions, vec!["arch_timer"]);
        assert_eq!(p.row(&IrqId::Number(50)).unwrap().actions, vec!["nvme0q0"]);
        assert_eq!(p.row(&IrqId::Named("Err".into())).unwrap().total, 0);
    }

    #[test]
    fn xen_pirq_rows() {
        let text = "           CPU0\n  8:          0  xen-pirq    -ioapic-edge  rtc0\n 64:      12345  xen-percpu-virq      timer0\n";
        let p = interrupts(text).unwrap();
        let rtc = &p.rows[0];
        assert_eq!(rtc.chip.as_deref(), Some("xen-pirq"));
        assert_eq!(rtc.hwirq, None);
        assert_eq!(rtc.trigger.as_deref(), Some("edge"));
        assert_eq!(rtc.actions, vec!["rtc0"]);
        assert_eq!(p.rows[1].actions, vec!["timer0"]);
    }

    #[test]
    fn garbage_and_truncation_name_the_line() {
        let e = interrupts("").unwrap_err();
        assert_eq!(e.line, 0);
        let e = interrupts("  CPU0 CPU1\n 36: 5 x virtio\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        let e = interrupts("  CPU0 CPU1\n 36: 5\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        let e = interrupts("  CPU0 CPU1\nthis is not a row\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(interrupts("hello world\n").is_err());
    }
}

/// The shape of /proc/interrupts (CPU columns and row labels) that per-sample count vectors
/// are laid out by; it changes only when an IRQ appears or goes, or a CPU goes on/offline.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct IrqLayout {
    pub cpus: Vec<u32>,
    pub ids: Vec<IrqId>,
    /// Rows with one system-wide count (ERR, MIS): their count is in column 0.
    pub single: Vec<bool>,
}

impl IrqLayout {
    /// Row-major index of a count.
    pub(crate) fn index(&self, row: usize, column: usize) -> usize {
        row * self.cpus.len() + column
    }
}

fn label_matches(id: &IrqId, label: &str) -> bool {
    match id {
        IrqId::Number(n) => label.parse::<u32>().ok() == Some(*n),
        IrqId::Named(s) => s == label,
    }
}

/// The sampler's fast path: only the labels and counts of /proc/interrupts, written into
/// `counts` (row-major, `layout.cpus.len()` per row) without allocating unless `layout` has
/// to change. Returns true when it did change.
pub(crate) fn counts_into(
    text: &str,
    layout: &mut IrqLayout,
    counts: &mut Vec<u64>,
) -> Result<bool, ParseError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines
        .next()
        .ok_or_else(|| ParseError::new(0, "empty file: expected a header of CPU columns"))?;
    let mut changed = false;
    let mut ncols = 0;
    for (i, name) in header.split_whitespace().enumerate() {
        let n = name
            .strip_prefix("CPU")
            .and_then(|n| n.parse::<u32>().ok())
            .ok_or_else(|| {
                ParseError::new(1, format!("expected CPUn column names, found {name:?}"))
            })?;
        if layout.cpus.get(i) != Some(&n) {
            layout.cpus.truncate(i);
            layout.cpus.push(n);
            changed = true;
        }
        ncols += 1;
    }
    if layout.cpus.len() != ncols {
        layout.cpus.truncate(ncols);
        changed = true;
    }
    counts.clear();
    let mut row = 0;
    for (i, line) in lines {
        let lineno = i + 1;
        let (label, rest) = line.split_once(':').ok_or_else(|| {
            ParseError::new(lineno, format!("expected `IRQ:` at the start of {line:?}"))
        })?;
        let label = label.trim();
        if layout
            .ids
            .get(row)
            .is_none_or(|id| !label_matches(id, label))
        {
            layout.ids.truncate(row);
            layout.single.truncate(row);
            layout.ids.push(match label.parse::<u32>() {
                Ok(n) => IrqId::Number(n),
                Err(_) => IrqId::Named(label.to_string()),
            });
            layout.single.push(false);
            changed = true;
        }
        let mut fields = rest.split_whitespace();
        let mut got = 0;
        for _ in 0..ncols {
            match fields.next().and_then(|f| f.parse::<u64>().ok()) {
                Some(v) => {
                    counts.push(v);
                    got += 1;
                }
                None => break,
            }
        }
        let single =
            got == 1 && ncols > 1 && fields.next().is_none() && label.parse::<u32>().is_err();
        if got < ncols && !single {
            return Err(ParseError::new(
                lineno,
                format!("IRQ {label}: expected {ncols} per-CPU counts, found {got}"),
            ));
        }
        if single {
            counts.extend(std::iter::repeat_n(0, ncols - 1));
        }
        if layout.single[row] != single {
            layout.single[row] = single;
            changed = true;
        }
        row += 1;
    }
    if layout.ids.len() != row {
        layout.ids.truncate(row);
        layout.single.truncate(row);
        changed = true;
    }
    Ok(changed)
}

#[cfg(test)]
mod counts_tests {
    use super::*;

    #[test]
    fn counts_match_the_full_parser_and_reuse_the_layout() {
        let text = "           CPU0       CPU1\n 36:  0  27567 PCI-MSIX 1-edge virtio1-req.0\nLOC: 5 6 Local timer interrupts\nERR:  3\n";
        let mut layout = IrqLayout::default();
        let mut counts = Vec::new();
        assert!(counts_into(text, &mut layout, &mut counts).unwrap());
        assert_eq!(layout.cpus, vec![0, 1]);
        assert_eq!(
            layout.ids,
            vec![
                IrqId::Number(36),
                IrqId::Named("LOC".into()),
                IrqId::Named("ERR".into())
            ]
        );
        assert_eq!(layout.single, vec![false, false, true]);
        assert_eq!(counts, vec![0, 27567, 5, 6, 3, 0]);
        let full = interrupts(text).unwrap();
        assert_eq!(full.rows[0].counts, counts[0..2]);
        // Same shape again: no change.
        assert!(!counts_into(text, &mut layout, &mut counts).unwrap());
        // An IRQ appears: the layout changes.
        let more = text.replace("LOC:", " 37: 1 1 PCI-MSIX 2-edge x\nLOC:");
        assert!(counts_into(&more, &mut layout, &mut counts).unwrap());
        assert_eq!(layout.ids.len(), 4);
        assert!(counts_into("  CPU0 CPU1\n 36: 1\n", &mut layout, &mut counts).is_err());
    }
}

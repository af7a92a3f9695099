//! What an experiment varies: factors and their levels, as typed values. A level keeps both
//! its meaning (a knob value, a placement, ...) and a label for cell keys and tables
//! (`placement=far`). Placements are relative (`on`/`near`/`far` the device's interrupt) and
//! are resolved to CPUs by the machine model at plan time; here they are only syntax.

use std::fmt;

use crate::placement as level;
use crate::sys::parse::{cpulist, format_cpulist};

/// Where fio runs: unpinned, or a placement level (`on`, `near`, `far`, `node:N`, CPUs) that
/// `crate::placement` resolves against the machine at plan time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pinning {
    /// No pinning: the scheduler decides.
    Unpinned,
    Pinned(level::Placement),
}

/// Where the device's movable interrupts go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IrqPlacement {
    /// Leave the affinity as found.
    Unchanged,
    /// One CPU of the device's own node (the one taking the interrupt if it is there, else
    /// the lowest-numbered): x86 delivers to one CPU of a mask, and placement is judged from it.
    OnNode,
    /// One CPU as far from the device's interrupt as the topology allows.
    Far,
    /// One CPU of node N.
    Node(u32),
    Cpus(Vec<u32>),
}

/// The accepted spellings, for error messages.
pub(crate) const PLACEMENT_ALLOWED: &str =
    "\"on\", \"near\", \"far\", \"none\" (unpinned), \"node:N\", a CPU list such as \"0-3,6\", \
     or an array of CPU numbers";
pub(crate) const IRQ_ALLOWED: &str =
    "\"unchanged\", \"on-node\", \"far\", \"node:N\", a CPU list such \
                               as \"0-3,6\", or an array of CPU numbers";

/// A non-empty kernel-style CPU list (`0-3,6,8-9`).
fn cpus(text: &str) -> Result<Vec<u32>, String> {
    match cpulist(text) {
        Ok(c) if !c.is_empty() => Ok(c),
        _ => Err(format!("`{text}` is not a CPU list (e.g. 0-3,6)")),
    }
}

fn parse_node(text: &str) -> Option<Result<u32, String>> {
    let n = text.strip_prefix("node:")?;
    Some(
        n.trim()
            .parse()
            .map_err(|_| format!("`{text}`: node:N takes a node number")),
    )
}

impl Pinning {
    pub(crate) fn parse(text: &str) -> Result<Pinning, String> {
        match text.trim() {
            "none" | "unpinned" => Ok(Pinning::Unpinned),
            t => level::Placement::parse(t)
                .map(Pinning::Pinned)
                .map_err(|_| format!("`{t}` is not a placement")),
        }
    }
}

impl IrqPlacement {
    pub(crate) fn parse(text: &str) -> Result<IrqPlacement, String> {
        let t = text.trim();
        match t {
            "unchanged" => Ok(IrqPlacement::Unchanged),
            "on-node" => Ok(IrqPlacement::OnNode),
            "far" => Ok(IrqPlacement::Far),
            _ => {
                if let Some(n) = parse_node(t) {
                    return n.map(IrqPlacement::Node);
                }
                if t.starts_with(|c: char| c.is_ascii_digit()) {
                    return cpus(t).map(IrqPlacement::Cpus);
                }
                Err(format!("`{t}` is not an interrupt placement"))
            }
        }
    }
}

impl fmt::Display for Pinning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pinning::Unpinned => write!(f, "none"),
            Pinning::Pinned(p) => write!(f, "{p}"),
        }
    }
}

impl fmt::Display for IrqPlacement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IrqPlacement::Unchanged => write!(f, "unchanged"),
            IrqPlacement::OnNode => write!(f, "on-node"),
            IrqPlacement::Far => write!(f, "far"),
            IrqPlacement::Node(n) => write!(f, "node:{n}"),
            IrqPlacement::Cpus(c) => write!(f, "{}", format_cpulist(c)),
        }
    }
}

/// What kind of thing a factor varies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FactorKind {
    /// A queue attribute, by path under /sys/block/DEV/queue/ (`rq_affinity`, `iosched/...`).
    QueueKnob { attribute: String },
    /// io_uring `hipri` on or off.
    Polling,
    /// Where fio runs.
    Placement,
    /// Where the device's movable interrupts go.
    IrqAffinity,
    /// A plain fio option (bs, iodepth, numjobs, rw, ...).
    Fio { option: String },
    /// An option of a program engine (iperf3 `parallel`, sockperf `msg_size`, a `command`
    /// placeholder); its levels are `LevelValue::Fio` text.
    Engine { option: String },
    /// A machine-wide control: a sysctl, a module parameter, the CPUs' governor, boost, SMT or
    /// deepest idle state. Its levels are `LevelValue::Knob`.
    System(super::system_knobs::SystemKnob),
}

/// One level of a factor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LevelValue {
    /// Text to write to the queue attribute (or, normalised, to the system control).
    Knob(String),
    Polling(bool),
    Placement(Pinning),
    Irq(IrqPlacement),
    /// The fio option's (or engine option's) value.
    Fio(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Level {
    /// How the level appears in cell keys and tables.
    pub label: String,
    pub(crate) value: LevelValue,
}

/// A factor as written in `[factors]`, with its levels in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Factor {
    pub(crate) name: String,
    pub(crate) kind: FactorKind,
    pub levels: Vec<Level>,
    /// Line of the factor in the experiment file (for later, model-time errors).
    pub(crate) line: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placements_round_trip() {
        for t in ["on", "near", "far", "none", "node:1", "0-2,5"] {
            assert_eq!(Pinning::parse(t).unwrap().to_string(), t);
        }
        assert_eq!(Pinning::parse("unpinned").unwrap(), Pinning::Unpinned);
        assert!(Pinning::parse("nearby").is_err());
        assert!(Pinning::parse("node:x").is_err());
        for t in ["unchanged", "on-node", "far", "node:0", "1"] {
            assert_eq!(IrqPlacement::parse(t).unwrap().to_string(), t);
        }
        assert!(IrqPlacement::parse("on").is_err());
    }
}

//! Interrupt placement (DESIGN story 3): see interrupt rates per CPU (`top`), plan a
//! topology-aware placement of the heavy ones (`plan`), write it with a journal so it can be
//! rolled back (`apply`), and keep it balanced as the load changes (`daemon`).

pub mod apply;
pub mod daemon;
pub mod inputs;
pub mod metrics;
pub mod plan;
pub mod render;
pub mod top;

use crate::model::{rates, Counters, Machine};
use crate::sys::parse::format_cpulist;
use crate::sys::SysRoot;
use anyhow::Result;
use std::time::{Duration, Instant};

/// The machine model with interrupt rates. Live: two readings `over` apart (`wait` sleeps,
/// returning false when interrupted). A snapshot root carries its own second reading.
/// Returns the model and the seconds the rates cover.
pub fn measure(
    root: &SysRoot,
    over: Duration,
    wait: &dyn Fn(Duration) -> bool,
) -> Result<Option<(Machine, f64)>> {
    if !root.is_live() {
        let m = Machine::read(root)?;
        let Some(r) = &m.rates else {
            anyhow::bail!(
                "{}: this snapshot has no second reading, so no rates (take it again with \
                 `iolab snapshot`)",
                root.base().display()
            );
        };
        let s = r.interval_ns as f64 / 1e9;
        return Ok(Some((m, s)));
    }
    let before = Counters::read(root)?;
    let start = Instant::now();
    if !wait(over) {
        return Ok(None);
    }
    let after = Counters::read(root)?;
    let ns = start.elapsed().as_nanos() as u64;
    let mut m = Machine::read(root)?;
    m.apply_rates(&rates(&before, &after, ns));
    Ok(Some((m, ns as f64 / 1e9)))
}

/// The pid of a running irqbalance, which would undo any placement iolab writes.
pub fn irqbalance_pid(root: &SysRoot) -> Option<u32> {
    root.list_optional("/proc")
        .ok()?
        .iter()
        .filter_map(|d| d.parse::<u32>().ok())
        .find(|pid| root.attr(&format!("/proc/{pid}/comm")).as_deref() == Some("irqbalance"))
}

/// The plan for a measured machine: checks that the interrupts `--unpin` names and the CPUs
/// `--ban-cpus` names exist here, then plans. `before_iolab` is the placement journal's view
/// (see `inputs::sources`).
pub fn plan_for(
    m: &Machine,
    before_iolab: &std::collections::BTreeMap<u32, Vec<u32>>,
    options: plan::Options,
) -> Result<plan::Plan> {
    let sources = inputs::sources(m, before_iolab);
    if let plan::Unpin::Irqs(list) = &options.unpin {
        let missing: Vec<u32> = list
            .iter()
            .copied()
            .filter(|n| !sources.iter().any(|s| s.irq == *n))
            .collect();
        if !missing.is_empty() {
            anyhow::bail!(
                "--unpin: no IRQ {} here (see /proc/interrupts or `iolab irq top`)",
                format_cpulist(&missing)
            );
        }
    }
    let unknown: Vec<u32> = options
        .banned
        .iter()
        .copied()
        .filter(|c| !m.cpus.iter().any(|k| k.cpu == *c))
        .collect();
    if !unknown.is_empty() {
        anyhow::bail!(
            "--ban-cpus: CPU {} does not exist here (CPUs: {})",
            format_cpulist(&unknown),
            format_cpulist(&m.cpus.iter().map(|c| c.cpu).collect::<Vec<_>>())
        );
    }
    Ok(plan::plan(&sources, &inputs::slots(m), options))
}

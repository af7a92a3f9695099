//! Interrupt placement (story 3 in docs/design.md): see interrupt rates per CPU (`top`), plan a
//! topology-aware placement of the heavy ones (`plan`), write it with a journal so it can be
//! rolled back (`apply`), and keep it balanced as the load changes (`daemon`).

pub mod apply;
pub mod daemon;
pub mod inputs;
pub mod metrics;
pub mod plan;
pub mod render;
pub mod top;

use crate::model::Machine;
use crate::sys::SysRoot;
use anyhow::Result;
use std::time::Duration;

/// The machine model with interrupt rates and the seconds they cover (`Machine::measure`).
pub fn measure(
    root: &SysRoot,
    over: Duration,
    wait: &dyn Fn(Duration) -> bool,
) -> Result<Option<(Machine, f64)>> {
    Machine::measure(root, over, wait)
}

/// The pid of a running irqbalance, which would undo any placement iolab writes.
pub fn irqbalance_pid(root: &SysRoot) -> Option<u32> {
    root.list_optional("/proc")
        .ok()?
        .iter()
        .filter_map(|d| d.parse::<u32>().ok())
        .find(|pid| root.attr(&format!("/proc/{pid}/comm")).as_deref() == Some("irqbalance"))
}

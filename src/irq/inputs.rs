//! From the machine model to the planner's inputs: which CPUs may take interrupts (online,
//! not isolated, not nohz_full — those are kept quiet on purpose) and each numbered
//! interrupt's measured rates, allowed CPUs and node. An interrupt iolab itself moved is
//! judged by the affinity it had before (from the placement journal), so iolab never mistakes
//! its own earlier move for a user's pin; one iolab moved out of that affinity, or took over as
//! it was (`--unpin`), is judged free to move. One changed by someone else since iolab's move is not in that map
//! (`apply::before_iolab`): its affinity now is theirs.

use super::plan::{Slot, Source};
use crate::model::Machine;
use std::collections::BTreeMap;

/// CPUs that may take interrupts.
pub fn slots(m: &Machine) -> Vec<Slot> {
    m.cpus
        .iter()
        .filter(|c| !m.isolated.contains(&c.cpu) && !m.nohz_full.contains(&c.cpu))
        .map(|c| Slot {
            cpu: c.cpu,
            package: c.package,
            core: c.core,
            node: c.node,
        })
        .collect()
}

/// Every numbered interrupt with rates. `before_iolab` maps an IRQ to the affinity it had
/// before iolab changed it.
pub fn sources(m: &Machine, before_iolab: &BTreeMap<u32, Vec<u32>>) -> Vec<Source> {
    m.irqs
        .iter()
        .filter_map(|irq| {
            let n = irq.number()?;
            let now = irq.affinity.clone().unwrap_or_default();
            let allowed = match before_iolab.get(&n) {
                // iolab moved it out of the mask it had, or wrote that mask itself (iolab only
                // writes one CPU, but for a pin `--unpin` kept where it was): it was unpinned
                // on purpose, and stays free to move until `irq rollback` restores the pin.
                Some(was) if now == *was || !now.iter().all(|c| was.contains(c)) => {
                    m.online.clone()
                }
                Some(was) => was.clone(),
                None => now,
            };
            Some(Source {
                irq: n,
                name: irq.name.clone(),
                per_cpu: irq
                    .rate
                    .as_ref()
                    .map(|r| r.per_cpu.clone())
                    .unwrap_or_default(),
                allowed,
                effective: irq.effective.clone().unwrap_or_default(),
                node: irq.node,
                managed: irq.managed,
            })
        })
        .collect()
}

//! Interrupt placement (story 3 in docs/design.md): see interrupt rates per CPU (`top`), plan a
//! topology-aware placement of the heavy ones (`plan`), write it with a journal so it can be
//! rolled back (`apply`), and keep it balanced as the load changes (`daemon`).

pub mod apply;
pub(crate) mod commands;
pub(crate) mod daemon;
pub mod inputs;
pub(crate) mod metrics;
pub mod plan;
pub(crate) mod render;
pub(crate) mod top;

use crate::model::Machine;
use crate::sys::parse::format_cpulist;
use crate::sys::SysRoot;
use anyhow::Result;

/// Each numbered interrupt's name (its actions, as `irq top` and `irq apply` print them) in
/// `root`'s /proc/interrupts; empty when it cannot be read.
pub(crate) fn names(root: &SysRoot) -> std::collections::BTreeMap<u32, String> {
    let Ok(text) = root.read("/proc/interrupts") else {
        return Default::default();
    };
    let Ok(parsed) = crate::sys::parse::interrupts::interrupts(&text) else {
        return Default::default();
    };
    parsed
        .rows
        .into_iter()
        .filter(|r| !r.actions.is_empty())
        .filter_map(|r| Some((r.id.number()?, r.actions.join(", "))))
        .collect()
}

/// The pid of a running irqbalance, which would undo any placement iolab writes.
pub(crate) fn irqbalance_pid(root: &SysRoot) -> Option<u32> {
    root.list_optional("/proc")
        .ok()?
        .iter()
        .filter_map(|d| d.parse::<u32>().ok())
        .find(|pid| root.attr(&format!("/proc/{pid}/comm")).as_deref() == Some("irqbalance"))
}

/// The plan for a measured machine: checks that the interrupts `--unpin` names and the CPUs
/// `--ban-cpus` names exist here, then plans. `before_iolab` is the placement journal's view
/// (see `inputs::sources`).
pub(crate) fn plan_for(
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
    if m.cpus.iter().all(|c| options.banned.contains(&c.cpu)) {
        anyhow::bail!(
            "--ban-cpus: {} is every CPU here: no interrupt could be moved anywhere; leave out \
             a CPU to take them",
            format_cpulist(&options.banned)
        );
    }
    Ok(plan::plan(&sources, &inputs::slots(m), options))
}

/// Machines to test on: copies of the fixture trees under tests/fixtures/machines.
#[cfg(test)]
pub(crate) mod fixture {
    /// A copy of the two-node fixture (15 CPUs online of 32 possible, eth0's queue interrupts
    /// 160-167 on node 1), to change; with its second reading, it has rates.
    pub(crate) fn two_node() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/machines/two-node-nvme/.");
        let cp = std::process::Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(dir.path())
            .status();
        assert!(cp.unwrap().success());
        dir
    }

    /// A move of eth0's second queue interrupt (IRQ 161, delivered to CPU 4) to CPU `to`.
    pub(crate) fn move_161(to: u32) -> super::plan::Move {
        super::plan::Move {
            irq: 161,
            name: "eth0-TxRx-1".into(),
            rate: 1.0,
            from: vec![4],
            to,
        }
    }
}

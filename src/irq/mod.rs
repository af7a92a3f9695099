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
/// `--ban-cpus` names exist here (a command line that cannot mean anything here is a usage
/// error, exit 2, as one that cannot be read), then plans. `before_iolab` is the placement
/// journal's view (see `inputs::sources`). A banned CPU that exists but is offline is harmless
/// (banned should it come back, as in a service's settings): the plan names it in
/// `banned_offline`.
pub(crate) fn plan_for(
    m: &Machine,
    before_iolab: &std::collections::BTreeMap<u32, Vec<u32>>,
    options: plan::Options,
) -> Result<plan::Plan> {
    let offline = check_options(m, before_iolab, &options)?;
    let mut p = plan::plan(
        &inputs::sources(m, before_iolab),
        &inputs::slots(m),
        options,
    );
    p.banned_offline = offline;
    Ok(p)
}

/// [`plan_for`]'s checks of `--unpin` and `--ban-cpus` alone, on a machine as read (no rates
/// needed): made before a measurement too, so a mistyped IRQ is said at once rather than
/// after seconds of measuring. Returns the banned CPUs that are offline.
pub(crate) fn check_options(
    m: &Machine,
    before_iolab: &std::collections::BTreeMap<u32, Vec<u32>>,
    options: &plan::Options,
) -> Result<Vec<u32>> {
    let sources = inputs::sources(m, before_iolab);
    if let plan::Unpin::Irqs(list) = &options.unpin {
        let missing: Vec<u32> = list
            .iter()
            .copied()
            .filter(|n| !sources.iter().any(|s| s.irq == *n))
            .collect();
        if !missing.is_empty() {
            return Err(crate::cli::usage(format!(
                "--unpin: no IRQ {} here (see /proc/interrupts or `iolab irq top`)",
                format_cpulist(&missing)
            )));
        }
        // Named on purpose, so not passed over in silence as `--unpin all` passes them.
        let managed: Vec<u32> = sources
            .iter()
            .filter(|s| s.managed && list.contains(&s.irq))
            .map(|s| s.irq)
            .collect();
        if !managed.is_empty() {
            return Err(crate::cli::usage(format!(
                "--unpin: IRQ {} is managed by the kernel (a queue's interrupt, its CPUs set by \
                 the driver): nobody can move it",
                format_cpulist(&managed)
            )));
        }
    }
    let online = |c: &u32| m.cpus.iter().any(|k| k.cpu == *c);
    let (offline, unknown): (Vec<u32>, Vec<u32>) = options
        .banned
        .iter()
        .copied()
        .filter(|c| !online(c))
        .partition(|c| m.possible.contains(c));
    if !unknown.is_empty() {
        return Err(crate::cli::usage(format!(
            "--ban-cpus: CPU {} does not exist here (CPUs: {})",
            format_cpulist(&unknown),
            format_cpulist(&m.possible)
        )));
    }
    // Isolated and nohz_full CPUs take no interrupts anyway.
    let slots = inputs::slots(m);
    if slots.iter().all(|s| options.banned.contains(&s.cpu)) {
        return Err(crate::cli::usage(format!(
            "--ban-cpus: {} is every CPU here that takes interrupts ({}): no interrupt could \
             be moved anywhere; leave out a CPU to take them",
            format_cpulist(&options.banned),
            format_cpulist(&slots.iter().map(|s| s.cpu).collect::<Vec<_>>())
        )));
    }
    Ok(offline)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A banned CPU that is offline (CPU 20 of the fixture's possible 0-31, online 0-14) is
    /// accepted and named; one that does not exist at all is refused.
    #[test]
    fn a_banned_cpu_that_is_offline_is_accepted_and_one_that_does_not_exist_refused() {
        let machine = fixture::two_node();
        let m = Machine::read(&SysRoot::at(machine.path()).unwrap()).unwrap();
        let banning = |banned: Vec<u32>| {
            plan_for(
                &m,
                &Default::default(),
                plan::Options {
                    banned,
                    ..plan::Options::default()
                },
            )
        };
        let p = banning(vec![3, 20]).unwrap();
        assert_eq!(p.banned_offline, vec![20]);
        let text = render::plan_text(&p, 1.0);
        assert!(
            text.contains("banned CPUs (no interrupt moved there): 3,20 (offline: 20)"),
            "{text}"
        );
        let err = banning(vec![3, 99]).unwrap_err().to_string();
        assert_eq!(err, "--ban-cpus: CPU 99 does not exist here (CPUs: 0-31)");
        // CPU 14 is isolated: banning the other online CPUs leaves none to take interrupts.
        let err = banning((0..14).collect()).unwrap_err().to_string();
        assert!(
            err.starts_with("--ban-cpus: 0-13 is every CPU here that takes interrupts (0-13)"),
            "{err}"
        );
    }

    /// A managed interrupt named in `--unpin` was passed over in silence: the user asked for a
    /// move that cannot be made.
    #[test]
    fn unpinning_a_managed_interrupt_by_name_is_refused() {
        let machine = fixture::two_node();
        let m = Machine::read(&SysRoot::at(machine.path()).unwrap()).unwrap();
        let unpinning = |irqs: Vec<u32>| {
            plan_for(
                &m,
                &Default::default(),
                plan::Options {
                    unpin: plan::Unpin::Irqs(irqs),
                    ..plan::Options::default()
                },
            )
        };
        let err = unpinning(vec![161, 121, 122]).unwrap_err().to_string();
        assert!(
            err.starts_with("--unpin: IRQ 121-122 is managed by the kernel"),
            "{err}"
        );
        unpinning(vec![161]).unwrap();
    }
}

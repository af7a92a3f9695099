//! Turning every cell of an experiment into what will actually happen on this machine, before
//! anything runs: the knob writes (checked against what the device accepts), the CPUs fio is
//! pinned to and why (through `model::placement::resolve`, the one definition of on/near/far),
//! and the interrupt affinities to write. A level the file allows but the device cannot take
//! (a scheduler that is not loaded, a knob the device lacks) is an error naming the file and
//! line, because running half a matrix and then failing wastes the user's afternoon. A level
//! that is meaningful but cannot be realised here (no interrupt to be `on`, a kernel-managed
//! IRQ) makes the cell *not applicable*, with the reason, and the experiment goes on.
//!
//! Pure: it reads only the `Machine` given to it and returns paths relative to the live
//! system (`/sys/...`, `/proc/...`); the loop maps them under its `SysRoot`.

use std::collections::BTreeSet;

use serde::Serialize;

use super::super::factor::{FactorKind, IrqPlacement, LevelValue, Pinning};
use super::super::plan::Cell;
use super::super::Experiment;
use crate::knobs::{irq_affinity_path, queue_attr_path};
use crate::model::{Allowed, BlockDevice, Machine};
use crate::placement as level;
use crate::sys::parse::format_cpulist;

/// One sysfs/procfs write a cell needs before its run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct KnobWrite {
    /// Live path, e.g. `/sys/block/loop3/queue/scheduler`.
    pub(crate) path: String,
    pub(crate) value: String,
}

/// Where fio runs for one device of a cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct DeviceCpus {
    pub(crate) device: String,
    /// `None` leaves this device's fio section unpinned.
    pub(crate) cpus: Option<Vec<u32>>,
    pub(crate) placement_why: Option<String>,
}

/// A cell as it will run here.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResolvedCell {
    pub(crate) index: usize,
    pub(crate) key: String,
    /// Factor -> level label, in factor order.
    pub(crate) levels: Vec<(String, String)>,
    /// CPUs fio is pinned to (`cpus_allowed`) for the first device; `None` leaves it
    /// unpinned.
    pub(crate) cpus: Option<Vec<u32>>,
    /// How the CPUs were chosen (first device).
    pub(crate) placement_why: Option<String>,
    /// Every device's CPUs, in target order (each placed against its own interrupt).
    pub(crate) devices: Vec<DeviceCpus>,
    /// Writes in the order they are made: machine-wide controls (sysctls, governors, ...),
    /// then the scheduler (the kernel resets
    /// `nr_requests` and `wbt_lat_usec` when the scheduler changes), then the other queue
    /// knobs in factor order, then interrupt affinities.
    pub(crate) writes: Vec<KnobWrite>,
    /// Why this cell cannot be realised here; it is recorded, not run. With several devices
    /// it names the first device that cannot realise it.
    pub not_applicable: Option<String>,
    /// Why the workload writes to the device, if it does.
    pub(crate) workload_writes: Option<String>,
    /// Expected length of one run (ramp + runtime), when fio is time based.
    pub(crate) nominal_seconds: Option<f64>,
    /// What a program engine runs for this cell (the server too, when iolab starts it);
    /// `RUNDIR` is the run's private directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

/// A problem that stops the experiment before it starts: `file:line: message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("\n"))]
pub(crate) struct ResolveError(pub Vec<String>);

/// Resolves every cell against `dev` on machine `m`. `knob_device` names the device whose
/// queue attributes are written (normally `dev` itself).
pub(crate) fn resolve_cells(
    exp: &Experiment,
    cells: &[Cell],
    m: &Machine,
    dev: &BlockDevice,
) -> Result<Vec<ResolvedCell>, ResolveError> {
    let mut errors = Vec::new();
    if let Some(a) = exp.target.anchor_cpu.filter(|a| !m.online.contains(a)) {
        errors.push(format!(
            "{}: [target] anchor_cpu = {a}: CPU {a} is not online here (online: {})",
            exp.source,
            format_cpulist(&m.online)
        ));
    }
    errors.extend(check_knob_levels(exp, dev, &m.schedulers_on_demand));
    if !errors.is_empty() {
        return Err(ResolveError(errors));
    }
    Ok(cells
        .iter()
        .map(|cell| resolve_cell(exp, cell, m, dev))
        .collect())
}

/// Resolves every cell against several devices driven at once: each device is resolved on
/// its own (its knobs checked and written, fio placed against its own interrupt), then the
/// cells merge: every device's writes in device order, every device's CPUs, and the first
/// device's reason, naming it, when one cannot realise the cell.
pub(crate) fn resolve_cells_on(
    exp: &Experiment,
    cells: &[Cell],
    m: &Machine,
    devs: &[&BlockDevice],
) -> Result<Vec<ResolvedCell>, ResolveError> {
    let mut errors: Vec<String> = Vec::new();
    let mut each = Vec::new();
    for dev in devs {
        match resolve_cells(exp, cells, m, dev) {
            Ok(r) => each.push((dev.name.as_str(), r)),
            // anchor_cpu is checked once per device; say it once.
            Err(ResolveError(e)) => {
                for x in e {
                    if !errors.contains(&x) {
                        errors.push(x);
                    }
                }
            }
        }
    }
    if !errors.is_empty() {
        return Err(ResolveError(errors));
    }
    let several = each.len() > 1;
    let mut each = each.into_iter();
    let Some((_, mut merged)) = each.next().map(|(name, mut first)| {
        if several {
            for c in &mut first {
                c.not_applicable = c.not_applicable.take().map(|w| format!("/dev/{name}: {w}"));
            }
        }
        (name, first)
    }) else {
        return Ok(Vec::new());
    };
    for (name, resolved) in each {
        for (into, r) in merged.iter_mut().zip(resolved) {
            // Machine-wide controls are the same for every device: set them once.
            for w in r.writes {
                if !into.writes.contains(&w) {
                    into.writes.push(w);
                }
            }
            into.devices.extend(r.devices);
            if into.not_applicable.is_none() {
                into.not_applicable = r.not_applicable.map(|w| format!("/dev/{name}: {w}"));
            }
        }
    }
    Ok(merged)
}

/// Every knob level against what this device accepts; one message per impossible level.
/// A scheduler in `on_demand` is possible although the device does not list it yet.
fn check_knob_levels(exp: &Experiment, dev: &BlockDevice, on_demand: &[String]) -> Vec<String> {
    let mut errors = Vec::new();
    for f in &exp.factors {
        let FactorKind::QueueKnob { attribute } = &f.kind else {
            continue;
        };
        let at = format!("{}:{}", exp.source, f.line);
        if let Some(setting) = attribute.strip_prefix("iosched/") {
            errors.extend(check_scheduler_setting(exp, dev, setting, &at, &f.name));
            continue;
        }
        // Any other deeper attribute is checked when written.
        if attribute.contains('/') {
            continue;
        }
        if !dev.knobs.contains_key(attribute) {
            // A knob the model does not read is checked when written.
            if crate::model::devices::KNOBS.contains(&attribute.as_str()) {
                errors.push(format!(
                    "{at}: `{}`: /dev/{} has no queue attribute `{attribute}`",
                    f.name, dev.name
                ));
            }
            continue;
        }
        let fixed = crate::model::devices::FIXED
            .iter()
            .find(|(knob, _)| knob == attribute && !dev.allowed.contains_key(attribute));
        if let Some((_, why)) = fixed {
            errors.push(format!(
                "{at}: `{}` cannot be changed on /dev/{}: {why}",
                f.name, dev.name
            ));
            continue;
        }
        for l in &f.levels {
            let LevelValue::Knob(v) = &l.value else {
                continue;
            };
            let loadable = attribute == "scheduler" && on_demand.contains(v);
            match dev.allowed.get(attribute) {
                Some(Allowed::Choices(c)) if !c.iter().any(|x| x == v) && !loadable => {
                    errors.push(format!(
                        "{at}: `{} = {v}` is not possible on /dev/{}; it offers {}",
                        f.name,
                        dev.name,
                        c.join(", ")
                    ))
                }
                Some(Allowed::Range { min, max }) => {
                    let n: Option<i64> = v.parse().ok();
                    let ok = n.is_some_and(|n| n >= *min && max.is_none_or(|mx| n <= mx));
                    if !ok {
                        errors.push(format!(
                            "{at}: `{} = {v}` is not possible on /dev/{}; it takes {} to {}",
                            f.name,
                            dev.name,
                            min,
                            max.map_or("any larger value".to_string(), |m| m.to_string())
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    errors
}

/// The settings scheduler `scheduler` offers on `dev` (`queue/iosched/`): read from the
/// device when it is the current one, else as the kernel's tree has them; `None` for a
/// scheduler out of the tree, whose settings are known only once selected.
fn scheduler_settings_on(dev: &BlockDevice, scheduler: &str) -> Option<Vec<String>> {
    let current = dev.knobs.get("scheduler").map(String::as_str);
    if current == Some(scheduler) && !dev.iosched.is_empty() {
        return Some(dev.iosched.keys().cloned().collect());
    }
    let settings = crate::experiment::queue_knobs::scheduler_settings(scheduler)?;
    Some(settings.iter().map(|s| s.to_string()).collect())
}

/// The scheduler a cell runs under on `dev`: its level of `scheduler`, else the device's.
fn cell_scheduler<'a>(knobs: &'a [(String, String)], dev: &'a BlockDevice) -> Option<&'a str> {
    knobs
        .iter()
        .find(|(attr, _)| attr == "scheduler")
        .map(|(_, v)| v.as_str())
        .or(dev.knobs.get("scheduler").map(String::as_str))
}

/// Why a cell cannot set one of its `queue/iosched/` levels: its scheduler has no such
/// setting (`none` has none at all).
fn lacking_scheduler_setting(dev: &BlockDevice, knobs: &[(String, String)]) -> Option<String> {
    let scheduler = cell_scheduler(knobs, dev)?;
    let settings = scheduler_settings_on(dev, scheduler)?;
    knobs.iter().find_map(|(attr, _)| {
        let setting = attr.strip_prefix("iosched/")?;
        (!settings.iter().any(|s| s == setting))
            .then(|| format!("scheduler {scheduler} has no setting queue/iosched/{setting}"))
    })
}

/// A `queue/iosched/SETTING` factor that no scheduler of the experiment offers (a typo, or
/// another scheduler's), refused before anything is changed: it failed at the first cell's
/// write, with the scheduler already switched. Cells under a scheduler without it (`none`)
/// are not applicable (`resolve_cell`).
fn check_scheduler_setting(
    exp: &Experiment,
    dev: &BlockDevice,
    setting: &str,
    at: &str,
    factor: &str,
) -> Option<String> {
    let scheduler_factor = exp.factors.iter().find(
        |f| matches!(&f.kind, FactorKind::QueueKnob { attribute } if attribute == "scheduler"),
    );
    let schedulers: Vec<String> = match scheduler_factor {
        Some(f) => f
            .levels
            .iter()
            .filter_map(|l| match &l.value {
                LevelValue::Knob(v) => Some(v.clone()),
                _ => None,
            })
            .collect(),
        None => vec![dev.knobs.get("scheduler")?.clone()],
    };
    let mut offered = BTreeSet::new();
    for s in &schedulers {
        let settings = scheduler_settings_on(dev, s)?;
        if settings.iter().any(|x| x == setting) {
            return None;
        }
        offered.extend(settings);
    }
    let hint = crate::suggest::closest(setting, offered.iter().map(String::as_str))
        .map(|s| format!(" (did you mean `queue/iosched/{s}`?)"))
        .unwrap_or_default();
    let has = if offered.is_empty() {
        "none".to_string()
    } else {
        offered.into_iter().collect::<Vec<_>>().join(", ")
    };
    Some(match (scheduler_factor, schedulers.as_slice()) {
        (None, [current]) => format!(
            "{at}: `{factor}`: /dev/{}'s scheduler, {current}, has no setting `{setting}`{hint} \
             (its settings: {has}); a `scheduler` factor selects one for the runs",
            dev.name
        ),
        (_, [one]) => format!(
            "{at}: `{factor}`: scheduler {one} has no setting `{setting}`{hint} (its settings: \
             {has})"
        ),
        (_, many) => format!(
            "{at}: `{factor}`: no scheduler of the experiment ({}) has a setting `{setting}`\
             {hint} (theirs: {has})",
            many.join(", ")
        ),
    })
}

/// What selecting a scheduler that is not loaded yet does to the machine beyond the knob.
pub(crate) fn on_demand_notes(exp: &Experiment, m: &Machine, devs: &[&BlockDevice]) -> Vec<String> {
    let listed = |v: &String| {
        devs.iter().all(|d| match d.allowed.get("scheduler") {
            Some(Allowed::Choices(c)) => c.contains(v),
            _ => true,
        })
    };
    exp.factors
        .iter()
        .filter(
            |f| matches!(&f.kind, FactorKind::QueueKnob { attribute } if attribute == "scheduler"),
        )
        .flat_map(|f| &f.levels)
        .filter_map(|l| match &l.value {
            LevelValue::Knob(v) if !listed(v) && m.schedulers_on_demand.contains(v) => Some(v),
            _ => None,
        })
        .map(|v| {
            format!(
                "scheduler {v} is not loaded: the kernel loads its module when a run first \
                 selects it; once the old scheduler is back, iolab unloads the module again \
                 unless something uses it by then"
            )
        })
        .collect()
}

/// The experiment's placement level in the placement module's terms; `None` for unpinned.
fn placement_level(p: &Pinning) -> Option<level::Placement> {
    match p {
        Pinning::Unpinned => None,
        Pinning::Pinned(p) => Some(p.clone()),
    }
}

/// Cells as they run on fio servers (`[target] hosts`): nothing of this machine applies, so
/// nothing is pinned or written; the file allows only fio options and `hipri` to vary there.
pub(crate) fn remote_cells(
    exp: &Experiment,
    cells: &[Cell],
    devices: &[String],
) -> Vec<ResolvedCell> {
    cells
        .iter()
        .map(|cell| ResolvedCell {
            devices: devices
                .iter()
                .map(|d| DeviceCpus {
                    device: d.clone(),
                    cpus: None,
                    placement_why: None,
                })
                .collect(),
            ..unplaced(exp, cell)
        })
        .collect()
}

/// A cell with nothing resolved yet: unpinned, no writes, applicable.
fn unplaced(exp: &Experiment, cell: &Cell) -> ResolvedCell {
    ResolvedCell {
        index: cell.index,
        key: cell.key.clone(),
        levels: cell
            .levels
            .iter()
            .map(|(n, _, l)| (n.clone(), l.label.clone()))
            .collect(),
        cpus: None,
        placement_why: None,
        devices: Vec::new(),
        writes: Vec::new(),
        not_applicable: None,
        workload_writes: cell.writes(exp),
        nominal_seconds: cell.nominal_seconds(exp),
        command: None,
    }
}

/// `[target] anchor_cpu`, where it applies to `dev`: it stands in for the interrupt CPU of a
/// device that takes no interrupt (a loop device). A device whose interrupt some CPU takes is
/// placed against that CPU: the anchor would place fio "on" a CPU that does not take it.
fn anchor_for(exp: &Experiment, dev: &BlockDevice) -> Option<u32> {
    let own = dev.placement.as_ref().is_some_and(|p| !p.on.is_empty());
    exp.target.anchor_cpu.filter(|_| !own)
}

/// Says where `[target] anchor_cpu` is not used because the device takes its own interrupt.
pub(crate) fn anchor_notes(exp: &Experiment, devs: &[&BlockDevice]) -> Vec<String> {
    let Some(a) = exp.target.anchor_cpu else {
        return Vec::new();
    };
    devs.iter()
        .filter(|d| anchor_for(exp, d).is_none())
        .filter_map(|d| {
            let on = &d.placement.as_ref()?.on;
            let (who, takes) = if on.len() == 1 {
                (format!("CPU {}", format_cpulist(on)), "takes its interrupt")
            } else {
                (
                    format!("CPUs {}", format_cpulist(on)),
                    "take its interrupts",
                )
            };
            Some(format!(
                "[target] anchor_cpu = {a} is not used for /dev/{}: {who} {takes}, and on, near \
                 and far are judged from there (anchor_cpu stands in only for a device without \
                 an interrupt, such as a loop device)",
                d.name
            ))
        })
        .collect()
}

fn resolve_cell(exp: &Experiment, cell: &Cell, m: &Machine, dev: &BlockDevice) -> ResolvedCell {
    let mut out = unplaced(exp, cell);
    let anchor_cpu = anchor_for(exp, dev);
    let mut knobs = cell.queue_knobs();
    // Stable: the scheduler moves to the front, the rest keep factor order.
    knobs.sort_by_key(|(attr, _)| attr != "scheduler");
    let mut irq_knobs = Vec::new();
    // The machine's controls first, then the device's queue.
    // Every control this machine lacks is named, not the first alone: each would be found
    // only once the one before was fixed.
    let mut lacking: Vec<String> = Vec::new();
    for (knob, level) in cell.system_knobs() {
        match knob.writes(level, m) {
            Ok(w) => out.writes.extend(w),
            Err(why) => lacking.push(why),
        }
    }
    if !lacking.is_empty() {
        out.not_applicable = Some(lacking.join("; "));
    }
    if let Some(why) = cannot_poll(exp, cell, m, dev, &knobs) {
        out.not_applicable.get_or_insert(why);
    }
    if let Some(why) = lacking_scheduler_setting(dev, &knobs) {
        out.not_applicable.get_or_insert(why);
    }
    out.writes
        .extend(knobs.into_iter().map(|(attr, value)| KnobWrite {
            path: queue_attr_path(&dev.name, &attr),
            value,
        }));
    // Interrupts first: when a cell moves them, "on/near/far" are relative to where they go.
    let mut moved_to: Option<Vec<u32>> = None;
    if let Some(irq) = cell.irq_placement() {
        match irq_writes(m, dev, irq, anchor_cpu) {
            Ok(Some((w, cpus))) => {
                moved_to = Some(cpus);
                irq_knobs = w;
            }
            Ok(None) => {}
            Err(why) => out.not_applicable = Some(format!("irq_cpu {irq}: {why}")),
        }
    }
    // "unchanged" puts the interrupt back where it was found; other levels move it.
    let where_it_goes = match cell.irq_placement() {
        Some(IrqPlacement::Unchanged) => "where the interrupt was found",
        _ => "where this cell moves the interrupt",
    };
    if let Some(p) = cell.placement().and_then(placement_level) {
        let relative = matches!(
            p,
            level::Placement::On | level::Placement::Near | level::Placement::Far
        );
        // x86 delivers an interrupt to one CPU of its mask, chosen when it fires: on, near and
        // far from a mask of several CPUs the cell writes would be from CPUs that may not
        // take it. (Several interrupts found each on its CPU are several CPUs that do.)
        let one_of_several = match cell.irq_placement() {
            Some(IrqPlacement::Cpus(c)) if relative && c.len() > 1 => Some(c),
            _ => None,
        };
        let resolved = match (&moved_to, anchor_cpu, one_of_several) {
            (Some(_), None, Some(several)) => Err(format!(
                "the interrupt goes to one CPU of {}, which the kernel picks when it fires; \
                 on, near and far need one CPU: give irq_cpu a single CPU",
                format_cpulist(several)
            )),
            (Some(cpus), None, None) => level::resolve(
                &p,
                cpus,
                &crate::model::placement::cpu_places(m),
                &|a, b| m.distance(a, b),
            )
            .map(|r| level::Resolved {
                why: format!("{} ({where_it_goes})", r.why),
                cpus: r.cpus,
            }),
            _ => crate::model::placement::resolve(m, Some(dev), &p, anchor_cpu),
        };
        match resolved {
            Ok(r) => {
                let anchored = anchor_cpu.is_some() && relative;
                let mut why = if anchored {
                    format!("{} (anchor_cpu stands in for the interrupt CPU)", r.why)
                } else {
                    r.why
                };
                if relative && polls(exp, cell) {
                    why.push_str(
                        "; polled, these I/Os take no interrupt: they complete on the CPU \
                         that sent them",
                    );
                }
                out.placement_why = Some(why);
                out.cpus = Some(r.cpus);
            }
            Err(why) => {
                out.not_applicable
                    .get_or_insert(format!("placement {p}: {why}"));
            }
        }
    }
    out.writes.extend(irq_knobs);
    out.devices = vec![DeviceCpus {
        device: dev.name.clone(),
        cpus: out.cpus.clone(),
        placement_why: out.placement_why.clone(),
    }];
    out
}

/// Whether the cell's fio asks for polled completions (`hipri`, as a factor or an option).
fn polls(exp: &Experiment, cell: &Cell) -> bool {
    if !exp.engine.engine().runs_job_file() {
        return false;
    }
    cell.polling().unwrap_or_else(|| {
        cell.fio_options(exp)
            .iter()
            .any(|(n, v)| n == "hipri" && v.trim() != "0")
    })
}

/// Why a cell that asks for polled completions cannot have them on `dev`. fio would not
/// always say so: io_uring fails (error 95) on a queue that cannot poll, but pvsync2's polled
/// reads and writes fall back to interrupts without a word, and the cell would store
/// interrupt-driven figures as polled ones:
/// - the queue says `io_poll` 0 (the kernel sets it only for a queue that polls: NVMe with
///   poll queues), after the cell's own `io_poll` level where it has one;
/// - pvsync2 on Linux 5.18 or later, which ignores RWF_HIPRI for synchronous direct I/O
///   ("block: ignore RWF_HIPRI hint for sync dio"): on Debian's 6.1, 1000 such reads of an
///   NVMe namespace with poll queues took 1000 interrupts.
fn cannot_poll(
    exp: &Experiment,
    cell: &Cell,
    m: &Machine,
    dev: &BlockDevice,
    knobs: &[(String, String)],
) -> Option<String> {
    if !polls(exp, cell) {
        return None;
    }
    let options = cell.fio_options(exp);
    let option = |name: &str| {
        options
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.trim())
    };
    let io_poll = knobs
        .iter()
        .find(|(attr, _)| attr == "io_poll")
        .map(|(_, v)| v)
        .or(dev.knobs.get("io_poll"));
    if io_poll.is_some_and(|v| v.trim() == "0") {
        return Some(format!(
            "polled I/O (hipri) needs a queue that polls, and {}'s has io_poll=0 (no poll \
             queues)",
            dev.name
        ));
    }
    (option("ioengine") == Some("pvsync2") && m.kernel_at_least(5, 18) == Some(true)).then(|| {
        "pvsync2 asks for polling with RWF_HIPRI, which Linux 5.18 and later ignore for \
         synchronous I/O (its runs would take interrupts): use ioengine=io_uring"
            .to_string()
    })
}

/// The affinity writes for a device's movable interrupts, and the CPUs they go to.
type IrqMove = (Vec<KnobWrite>, Vec<u32>);

/// The affinity writes for the device's movable interrupts and the CPUs they go to; `None`
/// when the device has no movable interrupt to put back.
fn irq_writes(
    m: &Machine,
    dev: &BlockDevice,
    wanted: &IrqPlacement,
    anchor_cpu: Option<u32>,
) -> Result<Option<IrqMove>, String> {
    if *wanted == IrqPlacement::Unchanged {
        return Ok(as_found(m, dev));
    }
    let irqs = m.device_irqs(&dev.name);
    if irqs.is_empty() {
        return Err(format!("/dev/{} takes no interrupt", dev.name));
    }
    let movable: Vec<u32> = irqs
        .iter()
        .filter(|i| !i.managed)
        .filter_map(|i| i.number())
        .collect();
    if movable.is_empty() {
        let nums: Vec<u32> = irqs.iter().filter_map(|i| i.number()).collect();
        return Err(format!(
            "the kernel manages the affinity of IRQ {} (it cannot be moved)",
            format_cpulist(&nums)
        ));
    }
    // The node and far levels name CPUs by where they are; the interrupt goes to one of them,
    // the one taking it now if it is among them, else the lowest-numbered: x86 delivers to
    // one CPU of a mask, and placement is judged from that CPU.
    let taking: Vec<u32> = dev
        .placement
        .as_ref()
        .map(|p| p.on.clone())
        .unwrap_or_default();
    let one = |among: Vec<u32>| -> Vec<u32> {
        let pick = among
            .iter()
            .copied()
            .find(|c| taking.contains(c))
            .or_else(|| among.first().copied());
        pick.into_iter().collect()
    };
    let cpus = match wanted {
        IrqPlacement::Unchanged => unreachable!("handled above"),
        IrqPlacement::OnNode => {
            let node = dev.node.unwrap_or(0);
            one(m
                .node(node)
                .map(|n| {
                    n.cpus
                        .iter()
                        .copied()
                        .filter(|c| m.online.contains(c))
                        .collect::<Vec<_>>()
                })
                .filter(|c| !c.is_empty())
                .ok_or_else(|| format!("node {node} has no online CPU"))?)
        }
        IrqPlacement::Far => {
            one(
                crate::model::placement::resolve(m, Some(dev), &level::Placement::Far, anchor_cpu)?
                    .cpus,
            )
        }
        IrqPlacement::Node(n) => {
            one(
                crate::model::placement::resolve(m, Some(dev), &level::Placement::Node(*n), None)?
                    .cpus,
            )
        }
        IrqPlacement::Cpus(c) => {
            crate::model::placement::resolve(
                m,
                Some(dev),
                &level::Placement::Cpus(c.clone()),
                None,
            )?
            .cpus
        }
    };
    let value = format_cpulist(&cpus);
    let writes = movable
        .into_iter()
        .map(|n| KnobWrite {
            path: irq_affinity_path(n),
            value: value.clone(),
        })
        .collect();
    Ok(Some((writes, cpus)))
}

/// `unchanged` means as found when the experiment began, not as the previous cell left it:
/// each movable interrupt's mask goes back, preceded by the CPU it was delivered to. x86 keeps
/// an interrupt's target when a new mask still holds it, and applies a move only when the
/// interrupt next fires, so the mask is written once the move to that CPU has happened
/// (`knobs::irq_move`; docs/lab.md).
fn as_found(m: &Machine, dev: &BlockDevice) -> Option<IrqMove> {
    let mut writes = Vec::new();
    let mut on = Vec::new();
    for irq in m.device_irqs(&dev.name).into_iter().filter(|i| !i.managed) {
        let (Some(n), Some(mask)) = (irq.number(), irq.affinity.as_ref()) else {
            continue;
        };
        if let Some(eff) = irq
            .effective
            .as_ref()
            .filter(|e| !e.is_empty() && *e != mask)
        {
            writes.push(KnobWrite {
                path: irq_affinity_path(n),
                value: format_cpulist(eff),
            });
        }
        writes.push(KnobWrite {
            path: irq_affinity_path(n),
            value: format_cpulist(mask),
        });
        on.extend(irq.effective.clone().unwrap_or_else(|| mask.clone()));
    }
    on.sort_unstable();
    on.dedup();
    (!writes.is_empty()).then_some((writes, on))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::{cells, parse};
    use crate::sys::SysRoot;

    fn machine(name: &str) -> Machine {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/machines")
            .join(name);
        Machine::read(&SysRoot::at(dir).unwrap()).unwrap()
    }

    fn resolve(text: &str, m: &Machine, dev: &str) -> Result<Vec<ResolvedCell>, ResolveError> {
        let e = parse("x.toml", text).unwrap();
        resolve_cells(&e, &cells(&e), m, m.device(dev).unwrap())
    }

    #[test]
    fn loop_device_with_anchor_cpu_has_on_and_near_but_no_far() {
        let m = machine("thisvm");
        let r = resolve(
            "name = \"n\"\n[target]\nanchor_cpu = 0\n[factors]\n\
             nr_requests = [64]\nscheduler = [\"none\"]\nplacement = [\"on\", \"near\", \"far\"]\n",
            &m,
            "loop3",
        )
        .unwrap();
        assert_eq!(r[0].cpus, Some(vec![0]));
        assert_eq!(r[1].cpus, Some(vec![1]));
        assert!(r[1].placement_why.as_ref().unwrap().contains("CPU 1"));
        assert_eq!(r[2].cpus, None);
        let why = r[2].not_applicable.as_ref().unwrap();
        assert!(why.starts_with("placement far: "), "{why}");
        // The scheduler is written before nr_requests although the file lists it second.
        let paths: Vec<&str> = r[0].writes.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/sys/block/loop3/queue/scheduler",
                "/sys/block/loop3/queue/nr_requests"
            ]
        );
    }

    /// x86 delivers an interrupt to one CPU of its mask. A node or far level moves it to one
    /// CPU (the one taking it now where that is among them), from which on and near are
    /// judged; a CPU list of several leaves that CPU to the kernel, so on, near and far
    /// cannot be judged: they were judged from the whole mask, and "on" ran fio beside the
    /// interrupt, not on it.
    #[test]
    fn interrupts_are_moved_to_one_cpu_for_on_and_near_to_mean_something() {
        // sda's IRQ 35 is movable (0-14) and delivered to CPU 2, on node 0 (node 1: 4-7,12-14).
        let m = machine("two-node-nvme");
        let r = resolve(
            "name = \"n\"\n[factors]\nirq_cpu = [\"node:0\", \"node:1\", \"far\", \"0-1\"]\n\
             placement = [\"on\"]\n",
            &m,
            "sda",
        )
        .unwrap();
        let cell = |irq: &str| {
            r.iter()
                .find(|c| c.key == format!("irq_cpu={irq},placement=on"))
                .unwrap_or_else(|| panic!("{irq}: {r:#?}"))
        };
        let moved = |c: &ResolvedCell| -> Vec<String> {
            c.writes
                .iter()
                .filter(|w| w.path.starts_with("/proc/irq/"))
                .map(|w| w.value.clone())
                .collect()
        };
        // On its own node already: it stays on its CPU.
        assert_eq!(cell("node:0").cpus, Some(vec![2]));
        assert_eq!(moved(cell("node:0")), ["2"]);
        // Elsewhere: the lowest-numbered CPU there.
        for irq in ["node:1", "far"] {
            assert_eq!(cell(irq).cpus, Some(vec![4]), "{irq}");
            assert_eq!(moved(cell(irq)), ["4"], "{irq}");
        }
        let why = cell("0-1").not_applicable.as_deref().unwrap_or("");
        assert!(why.contains("goes to one CPU of 0-1"), "{why}");
    }

    /// anchor_cpu stands in for a device's interrupt CPU only where it has none: on vda,
    /// whose interrupt CPU 1 takes, "on" is CPU 1 whatever the anchor (CPU 0 was taken, and
    /// the plan said CPU 0 took the device's interrupt), and the plan says why.
    #[test]
    fn a_device_with_an_interrupt_is_placed_against_it_not_the_anchor() {
        let m = machine("thisvm");
        let text = "name = \"n\"\n[target]\nanchor_cpu = 0\n[factors]\n\
                    placement = [\"on\", \"near\"]\n";
        let r = resolve(text, &m, "vda").unwrap();
        assert_eq!(r[0].cpus, Some(vec![1]));
        assert_eq!(r[1].cpus, Some(vec![0]));
        let why = r[0].placement_why.as_deref().unwrap();
        assert!(!why.contains("anchor_cpu"), "{why}");
        let e = parse("x.toml", text).unwrap();
        let notes = anchor_notes(&e, &[m.device("vda").unwrap(), m.device("loop3").unwrap()]);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("anchor_cpu = 0 is not used for /dev/vda: CPU 1 takes its interrupt"),
            "{notes:?}"
        );
        // The loop device beside it still takes the anchor.
        assert_eq!(resolve(text, &m, "loop3").unwrap()[0].cpus, Some(vec![0]));
    }

    /// A polled cell's I/Os take no interrupt: where fio runs relative to the device's
    /// interrupt CPUs says so (lab nvme-poll: "CPUs 1,3 take the device's interrupts" of cells
    /// whose I/Os went to the poll queues).
    #[test]
    fn a_polled_cell_says_its_ios_take_no_interrupt() {
        let m = machine("two-node-nvme");
        let r = resolve(
            "name = \"n\"\n[workload]\nioengine = \"io_uring\"\n\
             [factors]\nhipri = [false, true]\nplacement = [\"on\"]\n",
            &m,
            "nvme0n1",
        )
        .unwrap();
        let why = |i: usize| r[i].placement_why.clone().unwrap_or_default();
        assert!(!why(0).contains("polled"), "{}", why(0));
        assert!(
            why(1).ends_with(
                "; polled, these I/Os take no interrupt: they complete on the CPU that sent them"
            ),
            "{}",
            why(1)
        );
    }

    #[test]
    fn polled_cells_on_a_queue_that_cannot_poll_are_not_applicable() {
        let mut m = machine("two-node-nvme");
        let text = "name = \"n\"\n[workload]\nioengine = \"io_uring\"\n\
                    [factors]\nhipri = [false, true]\n";
        let why = |text: &str, m: &Machine, dev: &str| -> Vec<Option<String>> {
            let r = resolve(text, m, dev).unwrap();
            r.into_iter().map(|c| c.not_applicable).collect()
        };
        assert_eq!(why(text, &m, "nvme0n1"), [None, None]);
        let no_poll_queues = why(text, &m, "nvme1n1");
        assert_eq!(no_poll_queues[0], None);
        let na = no_poll_queues[1].as_deref().unwrap();
        assert!(na.contains("nvme1n1's has io_poll=0"), "{na}");
        // Asked for by the workload itself, not a factor.
        let fixed = text.replace("[factors]\nhipri = [false, true]\n", "hipri = 1\n");
        assert!(why(&fixed, &m, "nvme1n1")[0].is_some());
        // pvsync2 polls on a queue that can only before Linux 5.18.
        let pvsync2 = text.replace("io_uring", "pvsync2");
        let na = why(&pvsync2, &m, "nvme0n1")[1].clone().unwrap();
        assert!(na.starts_with("pvsync2 asks for polling"), "{na}");
        m.kernel = Some("5.17.15-1-amd64".into());
        assert_eq!(why(&pvsync2, &m, "nvme0n1"), [None, None]);
    }

    #[test]
    fn io_poll_is_a_factor_only_where_the_kernel_lets_it_change() {
        let text = "name = \"n\"\n[factors]\nio_poll = [0, 1]\n";
        let e = resolve(text, &machine("two-node-nvme"), "nvme0n1").unwrap_err();
        let e = e.to_string();
        assert!(
            e.starts_with("x.toml:3: `io_poll` cannot be changed on /dev/nvme0n1: Linux 5.16"),
            "{e}"
        );
        // Before 5.16 it switched polling on and off (RHEL 9's 5.14 here).
        let m = machine("scsi-hba");
        assert!(resolve(text, &m, "sda").is_ok());
    }

    #[test]
    fn kernel_releases_compare_by_major_and_minor() {
        let mut m = machine("thisvm");
        for (release, at_least) in [
            ("6.1.0-27-amd64", Some(true)),
            ("5.18.0", Some(true)),
            ("5.17.15-1-amd64", Some(false)),
            ("4.19.0-6-amd64", Some(false)),
            ("5.14.0-427.el9.x86_64", Some(false)),
            ("6-rc", None),
        ] {
            m.kernel = Some(release.into());
            assert_eq!(m.kernel_at_least(5, 18), at_least, "{release}");
        }
        m.kernel = None;
        assert_eq!(m.kernel_at_least(5, 18), None);
    }

    #[test]
    fn an_offline_anchor_cpu_is_an_error() {
        let m = machine("thisvm");
        let e = resolve(
            "name = \"n\"\n[target]\nanchor_cpu = 7\n[factors]\nplacement = [\"on\"]\n",
            &m,
            "loop3",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.toml: [target] anchor_cpu = 7: CPU 7 is not online here (online: 0-1)"
        );
    }

    #[test]
    fn without_anchor_a_loop_device_has_no_placement() {
        let m = machine("thisvm");
        let r = resolve(
            "name = \"n\"\n[factors]\nplacement = [\"on\", \"none\", \"1\"]\n",
            &m,
            "loop3",
        )
        .unwrap();
        assert!(r[0]
            .not_applicable
            .as_ref()
            .unwrap()
            .contains("set anchor_cpu"));
        assert_eq!(
            (r[1].cpus.clone(), r[1].not_applicable.clone()),
            (None, None)
        );
        assert_eq!(r[2].cpus, Some(vec![1]));
    }

    #[test]
    fn impossible_levels_name_the_file_line_and_what_the_device_offers() {
        let m = machine("thisvm");
        let e = resolve(
            "name = \"n\"\n[factors]\nscheduler = [\"none\"]\nrq_affinity = [1]\n",
            &m,
            "zram0",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "x.toml:3: `scheduler`: /dev/zram0 has no queue attribute `scheduler`\n\
             x.toml:4: `rq_affinity`: /dev/zram0 has no queue attribute `rq_affinity`"
        );
        let e = resolve(
            "name = \"n\"\n[factors]\nmax_sectors_kb = [64, 99999999]\n",
            &m,
            "loop3",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("x.toml:3: `max_sectors_kb = 99999999` is not possible on /dev/loop3; it takes 4 to"),
            "{e}"
        );
    }

    /// A `queue/iosched/` setting no scheduler of the experiment has is refused with the file's
    /// line (it failed at the first cell's write, the scheduler already switched); a cell
    /// under a scheduler without it is not applicable. The device's current scheduler is
    /// judged by what its directory holds.
    #[test]
    fn scheduler_settings_are_checked_against_the_schedulers_of_the_cells() {
        let mut m = machine("thisvm"); // loop3: none, loop0: mq-deadline
        let file = |factors: &str| format!("name = \"n\"\n[factors]\n{factors}");
        let typo = file("scheduler = [\"mq-deadline\"]\n\"queue/iosched/fifo_batchh\" = [8]\n");
        let e = resolve(&typo, &m, "loop3").unwrap_err().to_string();
        assert!(
            e.starts_with(
                "x.toml:4: `queue/iosched/fifo_batchh`: scheduler mq-deadline has no setting \
                 `fifo_batchh` (did you mean `queue/iosched/fifo_batch`?) (its settings: \
                 async_depth, fifo_batch,"
            ),
            "{e}"
        );
        let none_only = file("\"queue/iosched/fifo_batch\" = [8]\n");
        let e = resolve(&none_only, &m, "loop3").unwrap_err().to_string();
        assert!(
            e.contains("/dev/loop3's scheduler, none, has no setting `fifo_batch`")
                && e.contains("a `scheduler` factor selects one"),
            "{e}"
        );
        assert_eq!(resolve(&none_only, &m, "loop0").unwrap().len(), 1);
        let other =
            file("scheduler = [\"mq-deadline\", \"kyber\"]\n\"queue/iosched/slice_idle\" = [0]\n");
        let e = resolve(&other, &m, "loop3").unwrap_err().to_string();
        assert!(
            e.contains(
                "no scheduler of the experiment (mq-deadline, kyber) has a setting `slice_idle`"
            ),
            "{e}"
        );
        let cross = file("scheduler = [\"none\", \"kyber\", \"mq-deadline\"]\n\"queue/iosched/fifo_batch\" = [8]\n");
        let r = resolve(&cross, &m, "loop3").unwrap();
        let why: Vec<Option<&str>> = r.iter().map(|c| c.not_applicable.as_deref()).collect();
        assert_eq!(
            why,
            [
                Some("scheduler none has no setting queue/iosched/fifo_batch"),
                Some("scheduler kyber has no setting queue/iosched/fifo_batch"),
                None
            ]
        );
        // The current scheduler's own directory decides (a kernel may have more or fewer).
        let loop0 = m.devices.iter_mut().find(|d| d.name == "loop0").unwrap();
        loop0.iosched.insert("read_expire".into(), "500".into());
        let e = resolve(&none_only, &m, "loop0").unwrap_err().to_string();
        assert!(e.contains("(its settings: read_expire)"), "{e}");
    }

    /// A scheduler the kernel would load on demand is possible although the disk does not
    /// list it yet, and the plan says the module is unloaded again afterwards; without the module, it is refused.
    #[test]
    fn a_scheduler_loaded_on_demand_is_possible_and_noted_and_refused_without_its_module() {
        let mut m = machine("two-node-nvme"); // nvme0n1 lists none, mq-deadline, kyber
        let text = "name = \"n\"\n[factors]\nscheduler = [\"none\", \"bfq\"]\n";
        let refused = resolve(text, &m, "nvme0n1").unwrap_err().to_string();
        assert_eq!(
            refused,
            "x.toml:3: `scheduler = bfq` is not possible on /dev/nvme0n1; it offers none, \
             mq-deadline, kyber"
        );
        m.schedulers_on_demand = vec!["bfq".into()];
        assert_eq!(resolve(text, &m, "nvme0n1").unwrap().len(), 2);
        let e = parse("x.toml", text).unwrap();
        let notes = on_demand_notes(&e, &m, &[m.device("nvme0n1").unwrap()]);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].starts_with("scheduler bfq is not loaded: the kernel loads"));
        assert!(
            notes[0].contains("iolab unloads the module again"),
            "{}",
            notes[0]
        );
        // Listed already (sda lists bfq): nothing to say.
        assert!(on_demand_notes(&e, &m, &[m.device("sda").unwrap()]).is_empty());
    }

    /// `unchanged` puts the HBA's interrupt back as the model found it (its CPU, then its
    /// mask), so a cell after one that moved it does not run with it moved.
    #[test]
    fn unchanged_puts_the_interrupt_back_where_it_was_found() {
        // sda's IRQ 35 is movable (0-14) and delivered to CPU 2.
        let m = machine("two-node-nvme");
        let dev = m.device("sda").unwrap();
        let irq = m.device_irqs("sda")[0];
        let (n, mask, eff) = (
            irq.number().unwrap(),
            irq.affinity.clone().unwrap(),
            irq.effective.clone(),
        );
        let (writes, on) = as_found(&m, dev).unwrap();
        let mut want = Vec::new();
        if let Some(e) = eff.as_ref().filter(|e| **e != mask) {
            want.push(format_cpulist(e));
        }
        want.push(format_cpulist(&mask));
        let got: Vec<&str> = writes.iter().map(|w| w.value.as_str()).collect();
        assert_eq!(got, want);
        assert!(writes.iter().all(|w| w.path == irq_affinity_path(n)));
        assert_eq!(on, eff.unwrap_or(mask));
        let r = resolve(
            "name = \"n\"\n[factors]\nirq_cpu = [\"unchanged\"]\n",
            &m,
            "sda",
        )
        .unwrap();
        assert_eq!(r[0].writes, writes);
        // Placed against it, the cell says the interrupt is where it was found, not moved.
        let r = resolve(
            "name = \"n\"\n[factors]\nirq_cpu = [\"unchanged\", \"0\"]\nplacement = [\"on\"]\n",
            &m,
            "sda",
        )
        .unwrap();
        let whys: Vec<&str> = r
            .iter()
            .filter_map(|c| c.placement_why.as_deref())
            .collect();
        assert!(
            whys[0].ends_with("(where the interrupt was found)"),
            "{whys:?}"
        );
        assert!(
            whys[1].ends_with("(where this cell moves the interrupt)"),
            "{whys:?}"
        );
    }

    #[test]
    fn managed_irqs_make_irq_affinity_cells_not_applicable() {
        let m = machine("thisvm");
        let r = resolve(
            "name = \"n\"\n[factors]\nirq_cpu = [\"unchanged\", \"0\"]\n",
            &m,
            "vda",
        )
        .unwrap();
        assert_eq!(r[0].not_applicable, None);
        let why = r[1].not_applicable.as_ref().unwrap();
        assert!(why.contains("manages the affinity"), "{why}");
        let r = resolve("name = \"n\"\n[factors]\nirq_cpu = [\"0\"]\n", &m, "loop3").unwrap();
        assert!(r[0]
            .not_applicable
            .as_ref()
            .unwrap()
            .contains("takes no interrupt"));
    }
}

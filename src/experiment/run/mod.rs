//! The run loop: everything `iolab run` does between reading an experiment file and printing
//! its summary, in an order chosen so that a mistake costs as little as possible.
//!
//! 1. Refuse to start while an earlier run's knob journal is unrestored (its "original" values
//!    would be wrong), and refuse a writing workload on a device that holds data — before
//!    anything is created or written.
//! 2. Preflight (printed and stored), the targets (scratch loop devices on /dev/shm, removed
//!    on every way out, or the named devices), the machine model, and every cell resolved
//!    (`resolve`) against every device: impossible levels stop here, unrealisable ones
//!    become *not applicable*.
//! 3. The experiment is stored (file text, seed, planned order), then runs go round by round
//!    in the planner's shuffled, interleaved order: knobs through the journal (scheduler
//!    first) on every device, one fio job file with a section per device (each pinned with
//!    its own `cpus_allowed`, all running at once), the sampler around fio watching every
//!    device, and each run committed to the store as soon as it ends.
//! 4. Knobs are restored (also on error and on Ctrl-C/SIGTERM via the cancel token), the
//!    scratch device removed, and the per-cell results returned for the summary.
//!
//! Adaptive repetitions ask `stats::AdaptiveRule` after each round which cells are still too
//! imprecise on the primary metric: the file's `metric` when given, otherwise total IOPS
//! (`read_iops + write_iops`, which is the workload's own throughput whatever its direction).
//!
//! Warm-up runs are stored flagged `warmup` (the store's counts and `show` leave them out),
//! so what ran stays on record. A cell that cannot be realised is stored once, as one
//! `not_applicable` run with its reason, and not retried.

pub(crate) mod align;
pub(crate) mod checks;
pub(crate) mod environment;
pub mod hosts;
mod one_run;
pub(crate) mod per_second;
pub(crate) mod registry;
pub(crate) mod render;
pub(crate) mod resolve;
pub(crate) mod stacked;
pub(crate) mod stored;
pub(crate) mod summary;
pub mod trace;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

use super::depth;
use super::plan::{PlannedRun, Planner};
use super::{Experiment, Repetitions, TargetDevice};
use crate::knobs::{disk_identity, Journal, JournalEntry, RestoreReport};
use crate::model::Machine;
use crate::stats::{AdaptiveRule, CellStatus};
use crate::store::{NewExperiment, RunStatus, Store};
use crate::sys::lock::{MachineLock, Resource};
use crate::sys::SysRoot;
use crate::workload::options::LOG_NAME_OPTIONS;
use crate::workload::{CancelToken, FioRunner};

pub(crate) use resolve::{KnobWrite, ResolvedCell};
pub(crate) use summary::CellResult;

/// Where and how an experiment runs; `Settings::live` gives the defaults of `iolab run`.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where /proc and /sys are read and knobs written (a fixture tree in tests).
    pub root: SysRoot,
    /// Where the knob journal and scratch markers live.
    pub state_dir: PathBuf,
    pub db_path: PathBuf,
    /// User tags for every run (`--tag NAME=VALUE`).
    pub tags: Vec<(String, String)>,
    /// Overrides the file's `[target] device` with one device ("default" for one scratch
    /// device).
    pub(crate) device: Option<String>,
    /// Devices the user declared expendable (`--destructive-device`, repeatable).
    pub destructive_devices: Vec<String>,
    pub sample_interval: Duration,
    /// How long preflight watches per-process CPU use.
    pub preflight_sample: Duration,
    /// How controlled hosts (`[[target.host]] ssh`) are reached.
    pub ssh: crate::hosts::ssh::SshOptions,
}

impl Settings {
    pub fn live(db_path: PathBuf) -> Settings {
        Settings {
            root: SysRoot::live(),
            state_dir: crate::knobs::state_dir(),
            db_path,
            tags: Vec::new(),
            device: None,
            destructive_devices: Vec::new(),
            sample_interval: Duration::from_secs(1),
            preflight_sample: crate::preflight::DEFAULT_SAMPLE,
            ssh: Default::default(),
        }
    }
}

/// What the loop tells the user while it works (stderr in the CLI).
pub trait Progress {
    /// A line of information (preflight, target, restore).
    fn message(&mut self, text: &str);
    /// A run is about to start.
    fn run_started(&mut self, step: &Step);
    /// All runs are over (clear a progress line).
    fn finish(&mut self) {}
}

/// Where the experiment is, for a progress line.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Runs started so far, this one included.
    pub number: usize,
    /// Runs started so far plus those still planned (past the fixed plan of adaptive
    /// repetitions, the rest of this round); cells found not applicable do not count.
    pub planned: usize,
    pub(crate) cell: String,
    pub(crate) round: u32,
    pub(crate) warmup: bool,
    /// Expected seconds until the planned runs are done.
    pub(crate) eta_seconds: Option<f64>,
}

/// A `Progress` that says nothing (tests, scripts).
pub struct Quiet;
impl Progress for Quiet {
    fn message(&mut self, _: &str) {}
    fn run_started(&mut self, _: &Step) {}
}

/// The resolved plan: what `--dry-run` prints and what the loop executes.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub(crate) experiment: String,
    /// The devices the workload drives at once, never empty (for a dry run of the default
    /// target, the loop devices that stood in for the scratch devices that would be created).
    /// `dev_*` describe the one alone, or all of them summed (`stored::metrics`).
    pub devices: Vec<PlanDevice>,
    /// Devices under the targets (dm and md members, NVMe multipath paths): sampled, and
    /// with `trace = true` traced, too; never driven or changed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) stacked: Vec<PlanDevice>,
    /// With fio on other hosts, this machine's devices sampled while they run
    /// (`[target] local_devices`, then the devices stacked below those), as
    /// `local:DEVICE:dev_*`: a hypervisor's volumes behind its guests' disks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) local: Vec<PlanDevice>,
    pub scratch: bool,
    /// `[target] nic`: the one "device" is this network interface, standing in the model
    /// for its interrupts (`model::nics::with_nic_target`); its interrupt figures are stored
    /// as `nic_irq_per_s` and `cpuN:nic_irq_per_s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nic: Option<String>,
    pub cells: Vec<ResolvedCell>,
    /// The planned runs in order (adaptive: the minimum rounds; more may follow).
    pub(crate) order: Vec<PlannedRun>,
    pub(crate) adaptive: bool,
    /// Sum of the runs' nominal durations (cells that are not applicable do not run).
    pub(crate) estimated_seconds: Option<f64>,
    /// Things the user should know (stand-in device, unchecked levels).
    pub(crate) notes: Vec<String>,
    /// Workload settings that will not do what they say (`depth`); a run prints them before
    /// its runs, and `run --json` has them here.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) warnings: Vec<String>,
    /// In a dry run, why the run itself would stop before its first run (a leftover of a
    /// killed run, a store it cannot write): the plan is still shown, and scripts read this.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) would_stop: Vec<String>,
    /// Controlled hosts' own plans, in a dry run: what each host's part of every cell does
    /// there (its device, the devices below it, per cell its CPUs and what is set).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) hosts: Vec<HostPlan>,
    /// In a dry run, `[stabilise]`: what is set once before the first run (journaled, put
    /// back after), in the order it is set.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) stabilise: Vec<StabiliseWrite>,
    /// `[prepare]`: the steps taken before every measured run, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) prepare: Vec<String>,
}

/// One write `[stabilise]` makes, as a dry run shows it.
#[derive(Debug, Clone, Serialize)]
pub struct StabiliseWrite {
    /// The setting as the file names it, `sysctl.vm.swappiness=7`.
    pub(crate) setting: String,
    pub(crate) path: String,
    /// What the path holds now (none when it cannot be read).
    pub(crate) now: Option<String>,
    pub(crate) value: String,
}

/// A controlled host's plan, as the dry run's JSON gives it.
#[derive(Debug, Clone, Serialize)]
pub struct HostPlan {
    /// Its ssh destination, the name its runs and metrics carry.
    pub(crate) host: String,
    pub(crate) fio: String,
    pub(crate) kernel: Option<String>,
    pub(crate) plan: Plan,
}

/// One target of a plan.
#[derive(Debug, Clone, Serialize)]
pub struct PlanDevice {
    pub name: String,
    /// The interrupts serving the device (for the sampler's per-device interrupt rate).
    pub(crate) irqs: Vec<u32>,
    /// Mounted, held, swap or partitioned when planned (`model`'s `holds_data`): other I/O
    /// may reach it, so its bytes are not checked against fio's.
    pub(crate) holds_data: bool,
}

impl PlanDevice {
    /// Device `name` of the machine `m` models, with its IRQs; one the model lacks is taken
    /// to hold data.
    fn of(m: &Machine, name: &str) -> PlanDevice {
        let dev = m.device(name);
        PlanDevice {
            name: name.to_string(),
            irqs: dev.map(|d| d.irqs.clone()).unwrap_or_default(),
            holds_data: dev.is_none_or(|d| d.holds_data),
        }
    }
}

/// Resolves an experiment against `devices` of machine `m`, driven at once.
pub(crate) fn plan(
    exp: &Experiment,
    m: &Machine,
    devices: &[String],
    scratch: bool,
) -> Result<Plan> {
    let devs = devices
        .iter()
        .map(|d| {
            m.device(d).with_context(|| {
                format!(
                    "/dev/{d}: no such block device on {} (there are {}; `iolab inspect` \
                     describes them)",
                    m.hostname.as_deref().unwrap_or("this machine"),
                    crate::report::format::some_names(
                        &m.devices
                            .iter()
                            .map(|d| d.name.as_str())
                            .collect::<Vec<_>>()
                    )
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    anyhow::ensure!(!devs.is_empty(), "the experiment has no target device");
    let cells = super::cells(exp);
    let mut resolved = resolve::resolve_cells_on(exp, &cells, m, &devs)?;
    for r in &mut resolved {
        r.command = cells[r.index]
            .invocation(exp, r.cpus.as_deref())
            .map(|i| i.command_line("RUNDIR"));
    }
    let order = Planner::fixed_plan(exp);
    let estimated_seconds = order
        .iter()
        .filter(|r| resolved[r.cell].not_applicable.is_none())
        .map(|r| resolved[r.cell].nominal_seconds)
        .sum::<Option<f64>>();
    let mut warnings = warnings(exp, &cells);
    warnings.extend(shared_split_cpus(exp, &cells, &resolved));
    if resolved.iter().all(|c| c.not_applicable.is_some()) {
        warnings.push(format!(
            "no cell can run here: all {} are not applicable (each says why); the experiment \
             is refused before it starts",
            resolved.len()
        ));
    }
    Ok(Plan {
        experiment: exp.name.clone(),
        devices: devs
            .iter()
            .map(|d| PlanDevice {
                name: d.name.clone(),
                irqs: d.irqs.clone(),
                holds_data: d.holds_data,
            })
            .collect(),
        stacked: Vec::new(),
        local: Vec::new(),
        scratch,
        nic: None,
        cells: resolved,
        order,
        adaptive: matches!(exp.repetitions, Repetitions::Adaptive { .. }),
        estimated_seconds,
        notes: resolve::on_demand_notes(exp, m, &devs)
            .into_iter()
            .chain(resolve::anchor_notes(exp, &devs))
            .chain(scratch.then(|| network_on_a_scratch_device(exp)).flatten())
            .collect(),
        warnings,
        would_stop: Vec::new(),
        hosts: Vec::new(),
        stabilise: Vec::new(),
        prepare: exp.prepare.steps(),
    })
}

/// `split_cpus` gives each of fio's job clones a CPU of the placement of its own only while
/// there are as many CPUs; past that fio hands them out in turn and clones share CPUs. Said
/// once, with the cells where it happens.
fn shared_split_cpus(
    exp: &Experiment,
    cells: &[crate::experiment::Cell],
    resolved: &[ResolvedCell],
) -> Option<String> {
    if !exp.split_cpus {
        return None;
    }
    let shared: Vec<String> = resolved
        .iter()
        .filter(|r| r.not_applicable.is_none())
        .filter_map(|r| {
            let cpus = r.cpus.as_ref()?;
            let options = cells[r.index].fio_options(exp);
            let numjobs: usize = options
                .iter()
                .rev()
                .find(|(n, _)| n == "numjobs")
                .and_then(|(_, v)| v.trim().parse().ok())
                .unwrap_or(1);
            (numjobs > cpus.len()).then(|| {
                format!(
                    "{} ({numjobs} clones on CPU {})",
                    cells[r.index].key,
                    crate::sys::parse::format_cpulist(cpus)
                )
            })
        })
        .collect();
    (!shared.is_empty()).then(|| {
        format!(
            "split_cpus: more fio job clones than CPUs in the placement, so clones share CPUs \
             (fio hands the CPUs out in turn), in cells {}",
            shared.join("; ")
        )
    })
}

/// The file's own warnings, then what its cells cannot do.
fn warnings(exp: &Experiment, cells: &[crate::experiment::Cell]) -> Vec<String> {
    exp.warnings
        .iter()
        .cloned()
        .chain(depth::warnings(exp, cells))
        .collect()
}

/// The network namespaces a network engine's client and server are to run in exist (`ip
/// netns add` makes /run/netns/NAME): without them every run fails in turn, each saying so.
fn check_netns(exp: &Experiment) -> Result<()> {
    use crate::workload::engine::EngineSpec;
    let spec = match &exp.engine {
        EngineSpec::Iperf3(e) => &e.0,
        EngineSpec::Sockperf(e) => &e.0,
        _ => return Ok(()),
    };
    let missing: Vec<&str> = [&spec.netns, &spec.server_netns]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .filter(|ns| !Path::new("/run/netns").join(ns).exists())
        .collect();
    anyhow::ensure!(
        missing.is_empty(),
        "[{}] names network namespace(s) this machine does not have: {} (make them with `ip \
         netns add NAME`, and the link between them, as the example's comments show)",
        exp.engine.name(),
        missing.join(", ")
    );
    Ok(())
}

/// A network engine on the default target drives nothing on the scratch device it gets: the
/// note says how to target the interface instead.
fn network_on_a_scratch_device(exp: &Experiment) -> Option<String> {
    use crate::workload::engine::EngineSpec;
    matches!(exp.engine, EngineSpec::Iperf3(_) | EngineSpec::Sockperf(_)).then(|| {
        format!(
            "{} does not use the scratch block device: `[target] nic = \"IFACE\"` makes a \
             network interface the target instead (no device is created, and on/near/far are \
             relative to its interrupts)",
            exp.engine.name()
        )
    })
}

/// The devices under `targets` that are not targets themselves, with their IRQs.
pub(crate) fn stacked_devices(m: &Machine, targets: &[String]) -> Vec<PlanDevice> {
    let mut out: Vec<PlanDevice> = Vec::new();
    for t in targets {
        for name in stacked::below(m, t) {
            if targets.contains(&name) || out.iter().any(|d| d.name == name) {
                continue;
            }
            out.push(PlanDevice::of(m, &name));
        }
    }
    out
}

/// "loop0 and loop1": the devices below the plan's targets that a traced run records with
/// them (`trace::with_devices_below`).
fn traced_below(p: &Plan) -> String {
    let targets = p
        .devices
        .iter()
        .map(|d| trace::Traced::new(&d.name, ""))
        .collect();
    let below: Vec<String> = p.stacked.iter().map(|d| d.name.clone()).collect();
    let traced: Vec<String> = trace::with_devices_below(targets, &below)
        .into_iter()
        .filter(|t| t.below)
        .map(|t| t.name)
        .collect();
    crate::trace::capture::listed(&traced)
}

/// The plan when fio runs on `[target] hosts`: the devices are theirs, so nothing is
/// resolved against this machine (the file allows only fio options and `hipri` to vary).
fn remote_plan(exp: &Experiment, devices: &[String]) -> Plan {
    let matrix = super::cells(exp);
    let cells = resolve::remote_cells(exp, &matrix, devices);
    let order = Planner::fixed_plan(exp);
    let estimated_seconds = order.iter().map(|r| cells[r.cell].nominal_seconds).sum();
    Plan {
        experiment: exp.name.clone(),
        devices: devices
            .iter()
            .map(|d| PlanDevice {
                name: d.clone(),
                irqs: Vec::new(),
                // Another machine's device: what it holds is not known here.
                holds_data: true,
            })
            .collect(),
        stacked: Vec::new(),
        local: Vec::new(),
        scratch: false,
        nic: None,
        cells,
        order,
        adaptive: matches!(exp.repetitions, Repetitions::Adaptive { .. }),
        estimated_seconds,
        notes: vec![
            format!(
                "fio runs on {} at once (fio client mode); nothing on this machine is changed; \
                 it is sampled as a whole while it drives them (metrics local:*)",
                exp.target.hosts.join(", ")
            ),
            // fio's server sleeps up to a second on a semaphore before it looks at its socket
            // again, and the client's start command comes in during that sleep.
            "each run takes about a second more than its fio runtime, which the estimate does \
             not count: fio's server sees the client's start command only when its one-second \
             wait ends"
                .to_string(),
        ],
        warnings: warnings(exp, &matrix),
        would_stop: Vec::new(),
        hosts: Vec::new(),
        stabilise: Vec::new(),
        prepare: exp.prepare.steps(),
    }
}

/// `[target] local_devices` in a plan across hosts: each of this machine's devices named there
/// and the devices stacked below them, sampled while the hosts run. A device this machine
/// lacks is refused.
fn with_local_devices(mut plan: Plan, exp: &Experiment, m: &Machine) -> Result<Plan> {
    let named: Vec<String> = exp
        .target
        .local_devices
        .iter()
        .map(|d| kernel_name(d))
        .collect();
    if named.is_empty() {
        return Ok(plan);
    }
    for (asked, name) in exp.target.local_devices.iter().zip(&named) {
        anyhow::ensure!(
            m.device(name).is_some(),
            "[target] local_devices: {asked}: no such block device on this machine \
             (`iolab inspect` lists them)"
        );
    }
    let below = stacked_devices(m, &named);
    let listed = crate::trace::capture::listed;
    let below_names: Vec<String> = below.iter().map(|d| d.name.clone()).collect();
    plan.notes.push(format!(
        "this machine's {}{} sampled while the hosts run (metrics local:DEVICE:dev_*)",
        listed(&named),
        match below_names.len() {
            0 if named.len() == 1 => " is".to_string(),
            0 => " are".to_string(),
            _ => format!(", and the devices below, {}, are", listed(&below_names)),
        },
    ));
    plan.local = named
        .iter()
        .map(|name| PlanDevice::of(m, name))
        .chain(below)
        .collect();
    Ok(plan)
}

/// The devices `hosts` drive, and the refusal to write to any of them unless named
/// expendable: iolab cannot look at another machine's mounts, holders or signatures. The
/// devices checked are exactly those the hosts' jobs name: each controlled host's own
/// (`hosts::host_device`), else the one job every fio server runs.
fn remote_devices(exp: &Experiment, settings: &Settings) -> Result<Vec<String>> {
    let devices = if exp.target.controlled() {
        hosts::controlled_devices(exp, settings.device.as_deref())?
    } else {
        hosts::uncontrolled_fit(exp)?;
        let named = device_args(exp, settings).ok_or_else(|| {
            anyhow::anyhow!(
                "`hosts` run fio on other machines, where the default scratch device does not \
                 exist: name their device with --device or [target] device"
            )
        })?;
        named
            .iter()
            .map(|d| crate::target::remote_device_name(d).map_err(anyhow::Error::msg))
            .collect::<Result<Vec<_>>>()?
    };
    // Named for the hosts, so by their kernels' names too.
    let expendable = settings
        .destructive_devices
        .iter()
        .map(|d| {
            crate::target::remote_device_name(d)
                .map_err(|why| anyhow::anyhow!("--destructive-device {why}"))
        })
        .collect::<Result<Vec<_>>>()?;
    let given: Vec<(&str, String)> = settings
        .destructive_devices
        .iter()
        .map(String::as_str)
        .zip(expendable.iter().cloned())
        .collect();
    refuse_unused_destructive(&given, &devices)?;
    if let Some((key, why)) = first_write(exp) {
        for d in &devices {
            anyhow::ensure!(
                expendable.contains(d),
                "cell {key} writes ({why}) to /dev/{d} on {}: iolab cannot check another \
                 machine's device for data, so it writes there only to a device named with \
                 --destructive-device {d} (its contents on those hosts will be destroyed)",
                hosts::driving(exp, d).join(", ")
            );
        }
    }
    Ok(devices)
}

/// The devices named by the command line, else by the file, by their kernel names here;
/// `None` for scratch devices.
fn named_devices(exp: &Experiment, settings: &Settings) -> Option<Vec<String>> {
    device_args(exp, settings).map(|n| n.iter().map(|d| kernel_name(d)).collect())
}

/// The kernel name of a device of this machine named on the command line ("/dev/sdb") or in
/// the file, which keeps names without "/dev/": one with a `/` left ("disk/by-id/...") is a
/// link under /dev, resolved there.
fn kernel_name(d: &str) -> String {
    if d.contains('/') && !d.starts_with('/') {
        crate::target::device_name(&format!("/dev/{d}"))
    } else {
        crate::target::device_name(d)
    }
}

/// The devices named by the command line, else by the file, as written.
fn device_args(exp: &Experiment, settings: &Settings) -> Option<Vec<String>> {
    match settings.device.as_deref() {
        Some("default") => None,
        Some(d) => Some(vec![d.to_string()]),
        None => match &exp.target.device {
            TargetDevice::Scratch => None,
            TargetDevice::Named(n) => Some(n.clone()),
        },
    }
}

/// Said where `--device` replaces a file's scratch target whose `size` or `count` the file
/// sets: they size scratch devices only (a file naming a device with them is refused).
fn scratch_keys_unused(exp: &Experiment, settings: &Settings) -> Option<String> {
    let d = settings.device.as_deref().filter(|d| *d != "default")?;
    if exp.target.device != TargetDevice::Scratch || exp.target.scratch_keys.is_empty() {
        return None;
    }
    let keys: Vec<String> = exp
        .target
        .scratch_keys
        .iter()
        .map(|(key, line)| format!("`{key}` ({}:{line})", exp.source))
        .collect();
    let (verb, they) = match keys.len() {
        1 => ("goes", "it sizes"),
        _ => ("go", "they size"),
    };
    Some(format!(
        "--device {d} replaces the file's scratch target, so {} {verb} unused ({they} scratch \
         devices only)",
        keys.join(" and ")
    ))
}

/// The bytes the run's scratch devices can take in /dev/shm: their size when a cell writes,
/// 0 when nothing writes (a read of a sparse file allocates nothing) or the run makes none.
fn scratch_in_memory(exp: &Experiment, settings: &Settings) -> u64 {
    let scratch = exp.target.hosts.is_empty()
        && exp.target.nic.is_none()
        && device_args(exp, settings).is_none();
    if !scratch || first_write(exp).is_none() {
        return 0;
    }
    (scratch_count(exp, settings) as u64).saturating_mul(exp.target.size_bytes)
}

/// How many scratch devices the run creates (the command line's `--device default` means one).
fn scratch_count(exp: &Experiment, settings: &Settings) -> usize {
    match settings.device.as_deref() {
        Some(_) => 1,
        None => exp.target.count as usize,
    }
}

/// Refuses a writing workload, or a knob level that puts data at risk, on any device that may
/// hold data, naming the first cell that does and why.
fn check_writes(exp: &Experiment, settings: &Settings, devices: &[String]) -> Result<()> {
    let risky = first_write(exp)
        .map(|(key, why)| format!("cell {key} writes ({why})"))
        .or_else(|| {
            super::cells(exp).into_iter().find_map(|c| {
                let why = c.endangers_data()?;
                Some(format!(
                    "cell {} puts the data on its device at risk: {why}",
                    c.key
                ))
            })
        });
    if let Some(what) = risky {
        for device in devices {
            crate::target::check_write_allowed_at(
                &settings.root,
                device,
                true,
                expendable(settings, device),
            )
            .with_context(|| what.clone())?;
        }
    }
    Ok(())
}

/// Refuses a named device of this machine (`live`) with no capacity: no I/O can be done on
/// it, and fio would only fail on it run after run. (A machine read from `--root` is left
/// alone: its trees need not say a device's size.)
fn refuse_empty(live: bool, m: &Machine, devices: &[String]) -> Result<()> {
    if !live {
        return Ok(());
    }
    let empty = devices
        .iter()
        .filter_map(|d| m.device(d))
        .find(|d| d.size_bytes == 0);
    if let Some(d) = empty {
        anyhow::bail!(
            "/dev/{}: has no capacity (size 0), so no I/O can be done on it: nothing is \
             attached to it (an unattached loop device, an unconfigured zram); for iolab's own \
             scratch device, leave the device out or write device = \"default\"",
            d.name
        );
    }
    Ok(())
}

/// Refuses a `--destructive-device` that names none of the run's target devices. It lets a
/// run write to a target and to nothing else, so one that names another device (a typo, or
/// a run on the scratch default) does nothing, while its user believes a device was given up.
/// `given` pairs each argument with the device it names; `targets` are the run's devices
/// (none for scratch devices), named the same way.
fn refuse_unused_destructive(given: &[(&str, String)], targets: &[String]) -> Result<()> {
    for (arg, name) in given {
        if !targets.contains(name) {
            anyhow::bail!(
                "--destructive-device {arg}: the run's {}; the flag lets a run write to one \
                 of its own targets, so name the target (--device or [target] device) or \
                 leave the flag out",
                match targets {
                    [] => "target is a scratch device, which holds nothing to lose".to_string(),
                    [one] => format!("target is {one}, not {name}"),
                    many => format!("targets are {}", many.join(", ")),
                }
            );
        }
    }
    Ok(())
}

/// [`refuse_unused_destructive`] for a run on this machine, its devices resolved here (the
/// hosts' are checked with their names, in `remote_devices`).
fn check_destructive_named(exp: &Experiment, settings: &Settings) -> Result<()> {
    if !exp.target.hosts.is_empty() {
        return Ok(());
    }
    let targets: Vec<String> = device_args(exp, settings)
        .unwrap_or_default()
        .iter()
        .map(|d| crate::target::device_name(d))
        .collect();
    let given: Vec<(&str, String)> = settings
        .destructive_devices
        .iter()
        .map(|d| (d.as_str(), crate::target::device_name(d)))
        .collect();
    refuse_unused_destructive(&given, &targets)
}

/// The first cell whose workload writes, and why it writes.
fn first_write(exp: &Experiment) -> Option<(String, String)> {
    super::cells(exp)
        .into_iter()
        .find_map(|c| c.writes(exp).map(|why| (c.key.clone(), why)))
}

/// The `--destructive-device` argument naming `device`, if one does.
fn expendable<'a>(settings: &'a Settings, device: &str) -> Option<&'a str> {
    let name = crate::target::device_name(device);
    settings
        .destructive_devices
        .iter()
        .map(String::as_str)
        .find(|d| crate::target::device_name(d) == name)
}

/// Refuses `--tag` names iolab sets itself or that `compare` would read as something else:
/// `host` (this machine's name, or the fio servers), `kernel` when the runs are on this
/// machine (with `hosts` the kernels are theirs and only the user can say them), and every
/// factor of the experiment: `compare` reads `NAME=VALUE` as a tag when any run has a tag of
/// that name and as a factor level otherwise, so such a tag would hide the factor from every
/// selector. The name and value rule itself is `store::tags::parse_tag`. Refusals are usage
/// errors (exit 2).
pub(crate) fn check_tags(exp: &Experiment, tags: &[(String, String)]) -> Result<()> {
    let host_why = if exp.target.hosts.is_empty() {
        "iolab tags every run with this machine's host name".to_string()
    } else {
        "iolab tags every run with the fio servers it ran on".to_string()
    };
    let mut reserved: Vec<(String, String)> = vec![("host".into(), host_why)];
    if exp.target.hosts.is_empty() {
        reserved.push((
            "kernel".into(),
            "iolab tags every run with this machine's running kernel".into(),
        ));
    }
    for f in &exp.factors {
        reserved.push((
            f.name.clone(),
            format!(
                "{} is a factor of {} (line {}); compare would read {}=VALUE as this tag and no \
                 longer as the factor's level; pick another tag name",
                f.name, exp.source, f.line, f.name
            ),
        ));
    }
    let reserved: Vec<(&str, &str)> = reserved
        .iter()
        .map(|(n, w)| (n.as_str(), w.as_str()))
        .collect();
    // A tag refused is the command line's mistake, whatever the rule: a usage error.
    crate::store::tags::check_reserved(tags, &reserved).map_err(crate::cli::usage)?;
    for (n, v) in tags {
        crate::store::tags::check_name(n).map_err(crate::cli::usage)?;
        crate::store::tags::check_value(n, v).map_err(crate::cli::usage)?;
    }
    Ok(())
}

/// Where fio comes from when it is missing.
const INSTALL_FIO: &str = "install it (Debian: apt-get install fio, or scripts/deps in iolab's \
                           source) or put it on PATH";

/// The plan without touching anything: no scratch device, no knob, no store (fio only parses
/// the cells' jobs, `job_check`). For the default target no device stands for the scratch
/// device: the plan is resolved on the machine's model with a stand-in name that names no
/// real device (see `dry_plan`).
pub fn dry_run(exp: &Experiment, settings: &Settings, runner: &dyn FioRunner) -> Result<Plan> {
    check_tags(exp, &settings.tags)?;
    check_destructive_named(exp, settings)?;
    let unchecked = super::job_check::check_jobs(exp, runner)?;
    super::job_memory::check(exp, &settings.root, scratch_in_memory(exp, settings))?;
    super::system_knobs::check_factors_here(exp, &settings.root)?;
    crate::experiment::metrics::check_adaptive(exp).map_err(anyhow::Error::msg)?;
    let mut p = dry_plan(exp, settings)?;
    if exp.stabilise.advice || !exp.stabilise.settings.is_empty() {
        let m = Machine::read(&settings.root)?;
        for (setting, writes) in stabilise_writes(exp, &m)? {
            p.stabilise
                .extend(writes.into_iter().map(|w| StabiliseWrite {
                    setting: setting.clone(),
                    now: settings.root.attr(&w.path),
                    path: w.path,
                    value: w.value,
                }));
        }
    }
    // A plan is worth having where results cannot be stored (a snapshot's machine, a
    // read-only directory), but the run itself would stop at once: said, not refused.
    if let Err(e) = Store::check_writable(&settings.db_path) {
        p.would_stop.push(e.to_string());
    }
    // A recording killed with the tracer on: a run stops before it starts, traced or not.
    let tracer_dir = settings.state_dir.join(crate::knobs::TRACER_DIR);
    let tracer_leftover = settings
        .root
        .is_live()
        .then(|| Journal::leftover_in(&tracer_dir))
        .flatten();
    // Why recording would fail now, for the trace notes: a trace found running while a
    // killed recording left the tracer on is that recording's, not a trace at work.
    let why_untraced = |why: Option<String>| match why {
        Some(why) if tracer_leftover.is_some() && why.starts_with(trace::ALREADY_RUNNING) => {
            "; right now recording would fail (a recording killed earlier left the tracer on: \
             `iolab restore` turns it off)"
                .to_string()
        }
        Some(why) => {
            format!("; right now recording would fail ({why}) and runs would go on untraced")
        }
        None => String::new(),
    };
    if settings.root.is_live() {
        if let Some(e) = Journal::leftover_in(&settings.state_dir) {
            p.would_stop.push(e.to_string());
        }
        if let Some(e) = &tracer_leftover {
            p.would_stop.push(e.to_string());
        }
        // A recording of this state directory at work: a run that records stops at once.
        if let Some(pid) = Journal::live_owner_in(&tracer_dir).filter(|_| exp.trace) {
            p.would_stop.push(format!(
                "a recording of iolab (pid {pid}) holds the tracer; the experiment records a \
                 trace of each run"
            ));
        }
        if let Err(e) = crate::hosts::touched::check_clean(&settings.state_dir) {
            p.would_stop.push(format!("{e:#}"));
        }
        if let Err(e) = check_netns(exp) {
            p.would_stop.push(e.to_string());
        }
        if let Err(e) = keeps_files_safely(exp, settings) {
            p.would_stop.push(e.to_string());
        }
        // A run refuses a state directory others could write to; a dry run makes none.
        if let Some(Err(e)) = settings
            .state_dir
            .exists()
            .then(|| crate::knobs::trusted_state_dir(&settings.state_dir))
        {
            p.would_stop.push(e.to_string());
        }
    }
    // Settling is part of every measured run's time.
    if let (Some(total), Some(settle)) = (p.estimated_seconds, exp.prepare.settle) {
        p.estimated_seconds = Some(total + settle.as_secs_f64() * p.order.len() as f64);
    }
    if let Some(why) = unchecked {
        p.notes.push(format!(
            "fio could not check the cells' jobs ({why}); a run needs fio: {INSTALL_FIO}"
        ));
    }
    let dir = trace::traces_dir(&settings.db_path);
    if exp.trace && exp.target.controlled() {
        p.notes.push(
            "trace = true: each host records a block trace of its own device (and of the \
             devices it is built from, as DEVICE:trace_*) for each measured run, analyses it \
             there and sends back its trace_* metrics; the trace files are not kept"
                .to_string(),
        );
    }
    if exp.trace && !p.local.is_empty() {
        let local: Vec<String> = p.local.iter().map(|d| d.name.clone()).collect();
        p.notes.push(format!(
            "trace = true: this machine records a block trace of its own devices, {}, for each \
             measured run into {}/experiment-ID/cellC-roundR/ and stores each device's figures \
             as local:DEVICE:trace_*{}{}",
            crate::trace::capture::listed(&local),
            dir.display(),
            trace::keeping(&exp.trace_settings),
            why_untraced(p.local.iter().find_map(|d| trace::unavailable(&d.name)))
        ));
    } else if exp.trace && exp.target.hosts.is_empty() {
        p.notes.push(format!(
            "trace = true: each measured run records a block trace of the target{} through \
             tracefs into {}/experiment-ID/cellC-roundR/ and stores its trace_* metrics{}{}",
            match (p.devices.len() > 1, traced_below(&p)) {
                (true, below) if below.is_empty() =>
                    "s (together: the run's trace_* over all of them, each \
                                 device's own as DEVICE:trace_*)"
                        .to_string(),
                (true, below) => format!(
                    "s and the devices below them, {} (together: the run's trace_* over the \
                     targets, each device's own as DEVICE:trace_*)",
                    below
                ),
                (false, below) if !below.is_empty() => format!(
                    " and the devices below it, {} (together: the run's trace_* are the \
                     target's, each device's below as DEVICE:trace_*)",
                    below
                ),
                (false, _) => String::new(),
            },
            dir.display(),
            trace::keeping(&exp.trace_settings),
            why_untraced(if p.scratch {
                trace::unavailable_for_scratch()
            } else {
                p.devices.iter().find_map(|d| trace::unavailable(&d.name))
            })
        ));
    }
    Ok(p)
}

/// A cell every controlled host finds not applicable is recorded so in the aggregate too:
/// marked in the plan, and out of its estimate.
fn no_host_runs(plan: &mut Plan) {
    let mut dropped = 0.0;
    for (i, cell) in plan.cells.iter_mut().enumerate() {
        let nowhere = plan.hosts.iter().all(|h| {
            h.plan
                .cells
                .get(i)
                .is_some_and(|c| c.not_applicable.is_some())
        });
        if nowhere && cell.not_applicable.is_none() {
            cell.not_applicable = Some("on no host (each host's note below says why)".to_string());
            let runs = plan.order.iter().filter(|r| r.cell == i).count();
            dropped += cell.nominal_seconds.unwrap_or(0.0) * runs as f64;
        }
    }
    if let Some(total) = &mut plan.estimated_seconds {
        *total -= dropped;
    }
}

fn dry_plan(exp: &Experiment, settings: &Settings) -> Result<Plan> {
    if !exp.target.hosts.is_empty() {
        let m = Machine::read(&settings.root)?;
        let plan = remote_plan(exp, &remote_devices(exp, settings)?);
        let mut plan = with_local_devices(plan, exp, &m)?;
        // Controlled hosts are checked and modelled as a run would (nothing is set there):
        // each host's own plan is what its part of every cell will do.
        if exp.target.controlled() {
            let controlled = hosts::connect(exp, &settings.ssh, hosts::MAX_SKEW)?;
            let note = |c: &hosts::Controlled| hosts::plan_note(c, exp.trace);
            plan.notes.extend(controlled.iter().map(note));
            plan.hosts = controlled
                .iter()
                .map(|c| HostPlan {
                    host: c.label().to_string(),
                    fio: c.spec.fio.clone(),
                    kernel: c.machine.kernel.clone(),
                    plan: c.plan.clone(),
                })
                .collect();
            no_host_runs(&mut plan);
        }
        return Ok(plan);
    }
    let m = Machine::read(&settings.root)?;
    if let Some(nic) = target_nic(exp, settings)? {
        return nic_plan(exp, m, &nic);
    }
    match named_devices(exp, settings) {
        Some(devs) => {
            refuse_empty(settings.root.is_live(), &m, &devs)?;
            check_writes(exp, settings, &devs)?;
            if let Some(mount) = &exp.prepare.fstrim {
                check_fstrim(settings, &m, &devs, mount)?;
            }
            let mut p = plan(exp, &m, &devs, false)?;
            p.stacked = stacked_devices(&m, &devs);
            p.notes.extend(scratch_keys_unused(exp, settings));
            Ok(p)
        }
        None => {
            refuse_fstrim_of_scratch(exp)?;
            let count = scratch_count(exp, settings);
            let (m, stand_ins) = with_new_scratch_models(m, count, settings.root.is_live())?;
            let mut p = plan(exp, &m, &stand_ins, true)?;
            p.notes.push(format!(
                "the default target is {count} new scratch loop device(s) on /dev/shm, created \
                 when the run starts and removed after it; their names are not known yet, so \
                 the plan calls them {} (modelled on this kernel's loop driver)",
                stand_ins.join(", ")
            ));
            Ok(p)
        }
    }
}

/// `[prepare] fstrim` with the default target: a new scratch device holds no file system.
fn refuse_fstrim_of_scratch(exp: &Experiment) -> Result<()> {
    match &exp.prepare.fstrim {
        Some(mount) => anyhow::bail!(
            "[prepare] fstrim = \"{}\": the default target is a new scratch device, which holds \
             no file system to trim; name the device whose file system is mounted there \
             ([target] device)",
            mount.display()
        ),
        None => Ok(()),
    }
}

/// `[prepare] fstrim` names a mount point of a file system on one of `devices` (or their
/// partitions); anything else is refused before the experiment starts.
fn check_fstrim(settings: &Settings, m: &Machine, devices: &[String], mount: &Path) -> Result<()> {
    let mut targets = Vec::new();
    for d in devices {
        let dev = m.device(d);
        targets.push((d.clone(), dev.map(|b| b.dev.clone()).unwrap_or_default()));
        for p in dev.map(|b| b.partitions.as_slice()).unwrap_or_default() {
            targets.push((p.name.clone(), p.dev.clone()));
        }
    }
    let mountinfo = settings.root.read("/proc/self/mountinfo")?;
    crate::experiment::prepare::check_fstrim(mount, &mountinfo, &targets)
        .map_err(anyhow::Error::msg)
}

/// The NIC an experiment targets (`[target] nic`), refused with what cannot go with it.
fn target_nic(exp: &Experiment, settings: &Settings) -> Result<Option<String>> {
    let Some((nic, line)) = &exp.target.nic else {
        return Ok(None);
    };
    if let Some(d) = &settings.device {
        anyhow::bail!(
            "--device {d} names a block device, but {}:{line} makes NIC `{nic}` the target",
            exp.source
        );
    }
    anyhow::ensure!(
        !exp.trace,
        "{}: `trace = true` records a block device's trace, but the target is NIC `{nic}`",
        exp.source
    );
    Ok(Some(nic.clone()))
}

/// The plan on a NIC: the model with the NIC standing as the target device.
fn nic_plan(exp: &Experiment, m: Machine, nic: &str) -> Result<Plan> {
    let m = crate::model::nics::with_nic_target(m, nic)
        .map_err(|e| anyhow::anyhow!("{}: {e}", exp.source))?;
    let mut p = plan(exp, &m, &[nic.to_string()], false)?;
    p.nic = Some(nic.to_string());
    Ok(p)
}

/// The machine model plus `count` loop devices that do not exist yet, for a dry run on the
/// default target. An existing loop device may be someone's (mounted, with holders), so none
/// is named as a stand-in: its driver's knobs and allowed values serve as the template, under
/// names no device here has (`scratch1`, ...), with nothing on them.
fn with_new_scratch_models(
    mut m: Machine,
    count: usize,
    live: bool,
) -> Result<(Machine, Vec<String>)> {
    let template = m
        .devices
        .iter()
        .find(|d| d.kind == "loop")
        .cloned()
        .ok_or_else(|| {
            if live {
                anyhow::anyhow!(
                    "no loop device here to model the scratch target on (is the loop module \
                     loaded? `modprobe loop`)"
                )
            } else {
                anyhow::anyhow!(
                    "the machine read from --root has no loop device to model the scratch \
                     target on: name one of its devices with --device"
                )
            }
        })?;
    let mut names = Vec::with_capacity(count);
    let mut i = 1;
    while names.len() < count {
        let name = format!("scratch{i}");
        i += 1;
        if m.device(&name).is_some() {
            continue;
        }
        let mut d = template.clone();
        d.name = name.clone();
        d.dev = "new".into();
        d.sysfs = String::new();
        d.backing_file = None;
        d.partitions.clear();
        d.holds_data = false;
        d.data_reasons.clear();
        d.read_only = false;
        m.devices.push(d);
        names.push(name);
    }
    Ok((m, names))
}

/// What an experiment came to.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub experiment_id: i64,
    pub(crate) db_path: PathBuf,
    pub plan: Plan,
    pub cells: Vec<CellResult>,
    /// Every knob write made, oldest first, as journaled.
    pub knob_changes: Vec<JournalEntry>,
    pub restored: RestoreReport,
    /// Stopped by Ctrl-C / SIGTERM (the token was cancelled).
    pub interrupted: bool,
    /// Runs that failed (not counting not-applicable ones).
    pub failed_runs: usize,
    /// The rounds ran out at `max` while some cells were still imprecise.
    pub capped_cells: Vec<String>,
    pub primary_metric: String,
    /// fio ran the workload (not a program engine): its columns head the closing table
    /// even when no run succeeded.
    pub(crate) runs_fio: bool,
    /// Controlled hosts that may still have knobs set (gone mid-run, or no answer to `bye`),
    /// with why; `iolab restore` puts them back once they answer.
    pub hosts_left: Vec<String>,
    /// Each controlled host and the experiment holding its own runs.
    pub host_parts: Vec<(String, i64)>,
}

/// Runs an experiment end to end. `cancel` is the stop flag (the CLI sets it on a signal; a
/// running `RealFio` sharing it stops fio). Knobs are restored and the scratch device removed
/// on every way out of this function.
pub fn run(
    exp: &Experiment,
    settings: &Settings,
    runner: &dyn FioRunner,
    cancel: &CancelToken,
    progress: &mut dyn Progress,
) -> Result<Outcome> {
    // The state directory as it was found trustworthy, resolved: a link on the way that is
    // pointed elsewhere later changes nothing this run keeps or reads there.
    let settings = &Settings {
        state_dir: crate::knobs::trusted_state_dir(&settings.state_dir)?,
        ..settings.clone()
    };
    refuse_before_touching(exp, settings, runner)?;
    let remote = !exp.target.hosts.is_empty();
    // Controlled hosts are checked and modelled before anything here is touched; their
    // sessions say bye (restoring each host) when the run ends, and the list of touched hosts
    // keeps any that could not, for `iolab restore`.
    let mut controlled = if exp.target.controlled() {
        hosts::connect(exp, &settings.ssh, hosts::MAX_SKEW)?
    } else {
        hosts::Sessions(Vec::new())
    };
    let mut touched = touched_hosts(settings, &controlled)?;
    let nic = target_nic(exp, settings)?;
    let named = if remote {
        Some(remote_devices(exp, settings)?)
    } else if let Some(n) = &nic {
        Some(vec![n.clone()])
    } else {
        named_devices(exp, settings)
    };
    if named.is_none() {
        refuse_fstrim_of_scratch(exp)?;
    }
    // Hosts whose agent starts their fio server: started now that the devices' writes are
    // checked; each stops when its session ends.
    for note in hosts::serve(exp, &mut controlled, first_write(exp).is_some())? {
        progress.message(&note);
    }
    let mut locks = lock_named(exp, settings, &named, &nic)?;
    // This machine's target disks as they were just checked for data: no run goes on once
    // one of them is another disk under its name (`one_run`).
    let identities = |devices: &[String]| -> Vec<(String, Option<String>)> {
        devices
            .iter()
            .map(|d| (d.clone(), disk_identity::of_disk(&settings.root, d)))
            .collect()
    };
    let mut disks = match (&named, remote) {
        (Some(devices), false) => identities(devices),
        _ => Vec::new(),
    };
    let findings = crate::preflight::collect(&settings.root, settings.preflight_sample);
    progress.message(&format!(
        "preflight:\n{}",
        crate::preflight::render(&findings)
    ));
    // The guards live until the end of this function: every return below removes them (one
    // that fails to be created removes the ones before it).
    let mut scratch = match &named {
        Some(_) => Vec::new(),
        None => (0..scratch_count(exp, settings))
            .map(|_| {
                crate::target::ScratchDevice::create_in(&settings.state_dir, exp.target.size_bytes)
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    let devices: Vec<String> = match &named {
        Some(d) => d.clone(),
        None => scratch.iter().map(|s| s.name().to_string()).collect(),
    };
    if named.is_none() {
        disks = identities(&devices);
        match crate::knobs::machine_locks(
            &settings.root,
            &settings.state_dir,
            devices.iter().map(|d| Resource::Device(d.clone())),
        ) {
            Ok(held) => locks.extend(held),
            Err(e) => {
                // Another iolab took a new device of ours by its name, between its attach and
                // this lock: its queue is that iolab's to set and put back, not ours.
                for s in &mut scratch {
                    s.leave_queue_alone();
                }
                return Err(e.into());
            }
        }
    }
    say_targets(exp, &scratch, &devices, &nic, progress);

    let machine = Machine::read(&settings.root)?;
    if !remote && nic.is_none() && scratch.is_empty() {
        refuse_empty(settings.root.is_live(), &machine, &devices)?;
    }
    if let (Some(mount), false) = (&exp.prepare.fstrim, remote) {
        check_fstrim(settings, &machine, &devices, mount)?;
    }
    let plan = plan_targets(
        exp,
        &machine,
        &devices,
        (&nic, !scratch.is_empty()),
        progress,
    )?;
    refuse_nothing_to_run(&plan)?;
    lock_cells_writes(settings, &plan, &mut locks)?;
    // Begun before the experiment is stored, so a busy state directory stores nothing either;
    // it holds the locks until it has restored everything.
    let mut journal = Journal::begin_at(&settings.state_dir, &settings.root)?;
    journal.hold(locks);
    let stabilised = stabilise(exp, &machine, &mut journal)?;
    if !stabilised.is_empty() {
        progress.message(&format!("stabilised: {stabilised}"));
    }

    let mut store = Store::open(&settings.db_path)?;
    let target = target_text(&scratch, &devices, nic.is_some());
    let env = experiment_environment(&findings, target, stabilised, &plan)?;
    let (experiment_id, registered) = store_experiment(
        exp,
        settings,
        (&machine, &plan, env),
        &mut store,
        &mut controlled,
    )?;

    if exp.trace && !settings.root.is_live() {
        progress.message("trace: not recorded (the machine is a fixture tree, not this one)");
    }
    // Controlled hosts record their own devices (`hosts::trace_start`); with fio on other
    // hosts this machine records only its own devices named in `local_devices`.
    let here = !remote || !plan.local.is_empty();
    let tracing = (exp.trace && here && settings.root.is_live()).then(|| {
        trace::Tracing::of_plan(&plan, &machine, settings, experiment_id, exp.trace_settings)
    });
    say_fio_logs(exp, settings, experiment_id, progress);
    if let Some(t) = &mut touched {
        t.arm();
    }
    let looped = execute(
        exp,
        &plan,
        &mut Loop {
            settings,
            runner,
            cancel,
            store: &mut store,
            journal: &mut journal,
            experiment_id,
            progress,
            tracing,
            hosts: &mut controlled,
            position: 0,
            disks,
        },
    );
    progress.finish();
    let host_parts = controlled
        .iter()
        .filter_map(|c| Some((c.label().to_string(), c.part?)))
        .collect();
    let hosts_left = match &mut touched {
        Some(t) => hosts::finish(exp, &mut controlled, t),
        None => Vec::new(),
    };
    let knob_changes = journal.entries().to_vec();
    let restored = journal.restore();
    drop(scratch);
    let status = match (&looped, &restored) {
        (Ok(r), Ok(_)) if r.interrupted => "interrupted",
        // Every run that was tried failed: nothing was measured.
        (Ok(r), Ok(_))
            if r.cells.iter().all(|c| c.runs.is_empty())
                && r.cells.iter().any(|c| !c.failures.is_empty()) =>
        {
            "failed"
        }
        (Ok(_), Ok(_)) => "done",
        _ => "failed",
    };
    store.set_experiment_status(experiment_id, status)?;
    // A run that went to its end: each host's own experiment is as its own runs went.
    if matches!((&looped, &restored), (Ok(r), Ok(_)) if !r.interrupted) {
        store.set_part_statuses_by_runs(experiment_id)?;
    }
    registered.finish();
    drop(journal); // releases the machine-wide locks
    let restored = restored?;
    let looped = looped?;
    let capped_cells = looped
        .cells
        .iter()
        .filter(|c| c.capped)
        .map(|c| c.key.clone())
        .collect();
    Ok(Outcome {
        experiment_id,
        db_path: settings.db_path.clone(),
        plan,
        failed_runs: looped.cells.iter().map(|c| c.failures.len()).sum(),
        cells: looped.cells,
        knob_changes,
        restored,
        interrupted: looped.interrupted,
        capped_cells,
        primary_metric: looped.primary_metric,
        runs_fio: exp.engine.program().is_none(),
        hosts_left,
        host_parts,
    })
}

/// The plan for what the experiment runs on: devices on other hosts (and this machine's
/// `local_devices`), a NIC, or this machine's devices (`scratch`: new ones) with the devices
/// stacked below them. Its notes and warnings are said as they are found.
fn plan_targets(
    exp: &Experiment,
    machine: &Machine,
    devices: &[String],
    (nic, scratch): (&Option<String>, bool),
    progress: &mut dyn Progress,
) -> Result<Plan> {
    let plan = if !exp.target.hosts.is_empty() {
        with_local_devices(remote_plan(exp, devices), exp, machine)?
    } else if let Some(n) = nic {
        nic_plan(exp, machine.clone(), n)?
    } else {
        let mut p = plan(exp, machine, devices, scratch)?;
        p.stacked = stacked_devices(machine, devices);
        for n in &p.notes {
            progress.message(&format!("note: {n}"));
        }
        p
    };
    for w in &plan.warnings {
        progress.message(&format!("warning: {w}"));
    }
    Ok(plan)
}

/// The target as the experiment's environment records it.
fn target_text(scratch: &[crate::target::ScratchDevice], devices: &[String], nic: bool) -> String {
    match scratch.first() {
        Some(s) => format!(
            "/dev/{} (scratch, {} bytes each)",
            devices.join(", /dev/"),
            s.size_bytes()
        ),
        None if nic => format!("NIC {}", devices.join(", ")),
        None => format!("/dev/{}", devices.join(", /dev/")),
    }
}

/// Whether a cell asks fio for logs of its own (kept beside the database).
fn asks_for_fio_logs(exp: &Experiment) -> bool {
    crate::experiment::cells(exp).iter().any(|c| {
        c.fio_options(exp)
            .iter()
            .any(|(n, _)| LOG_NAME_OPTIONS.contains(&n.as_str()))
    })
}

/// Traces and fio logs are kept in directories iolab makes beside the database, during the
/// runs: a place another user could replace them in (a home `sudo iolab run` runs in) is
/// refused before anything is touched, not at the first run that keeps one.
fn keeps_files_safely(exp: &Experiment, settings: &Settings) -> Result<()> {
    if !(exp.trace || asks_for_fio_logs(exp)) {
        return Ok(());
    }
    let base = match settings.db_path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    crate::sys::own_dir::shared_place(base).map_err(|why| {
        anyhow::anyhow!(
            "traces and fio logs are kept beside the database: {why} (name a database there \
             with --db)"
        )
    })
}

/// Says where the logs fio writes itself go, when a cell asks for any.
fn say_fio_logs(
    exp: &Experiment,
    settings: &Settings,
    experiment_id: i64,
    progress: &mut dyn Progress,
) {
    let logs = asks_for_fio_logs(exp);
    if logs {
        progress.message(&format!(
            "fio logs: kept in {}/cell<C>-round<R>/",
            fio_logs_dir(&settings.db_path, experiment_id).display()
        ));
    }
}

/// A plan none of whose cells can run here would store an experiment of nothing but reasons:
/// refused with them instead, before anything is set or stored.
fn refuse_nothing_to_run(plan: &Plan) -> Result<()> {
    if plan.cells.is_empty() || plan.cells.iter().any(|c| c.not_applicable.is_none()) {
        return Ok(());
    }
    let reasons: Vec<String> = plan
        .cells
        .iter()
        .map(|c| format!("  {}: {}", c.key, c.not_applicable.as_deref().unwrap_or("")))
        .collect();
    anyhow::bail!(
        "no cell can run here: all {} are not applicable; nothing was run or stored\n{}",
        plan.cells.len(),
        reasons.join("\n")
    )
}

/// What stops an experiment before anything is touched: a reserved tag, a workload whose fio
/// is missing, an unrestored journal (of knobs, or of a recording killed with the tracer on)
/// or a list of hosts an earlier run could not restore.
fn refuse_before_touching(
    exp: &Experiment,
    settings: &Settings,
    runner: &dyn FioRunner,
) -> Result<()> {
    check_tags(exp, &settings.tags)?;
    check_destructive_named(exp, settings)?;
    Store::check_writable(&settings.db_path)?;
    keeps_files_safely(exp, settings)?;
    if let Some(why) = super::job_check::check_jobs(exp, runner)? {
        anyhow::bail!(
            "{why}: this experiment's workload runs fio: {INSTALL_FIO}; nothing was touched"
        );
    }
    super::job_memory::check(exp, &settings.root, scratch_in_memory(exp, settings))?;
    super::system_knobs::check_factors_here(exp, &settings.root)?;
    crate::experiment::metrics::check_adaptive(exp).map_err(anyhow::Error::msg)?;
    Journal::check_clean_in(&settings.state_dir)?;
    if settings.root.is_live() {
        check_netns(exp)?;
        // A recording killed here left the tracer on, perhaps over the target: every I/O
        // would pay for tracing, and a run's own trace could not start. One still running is
        // no leftover, and stops only a run that records too.
        match Journal::check_clean_in(&settings.state_dir.join(crate::knobs::TRACER_DIR)) {
            Err(crate::knobs::KnobError::Busy { .. }) if !exp.trace => {}
            other => other?,
        }
    }
    crate::hosts::touched::check_clean(&settings.state_dir)?;
    Ok(())
}

/// The list of controlled hosts this run may leave with knobs set, begun before any is
/// touched (none without controlled hosts).
fn touched_hosts(
    settings: &Settings,
    controlled: &[hosts::Controlled],
) -> Result<Option<crate::hosts::touched::Touched>> {
    if controlled.is_empty() {
        return Ok(None);
    }
    let list = controlled
        .iter()
        .map(|c| crate::hosts::touched::TouchedHost {
            ssh: c.label().to_string(),
            remote_iolab: c.connection.remote_iolab().to_string(),
            ssh_options: Some(settings.ssh.extra.clone()),
        })
        .collect();
    Ok(Some(crate::hosts::touched::Touched::begin(
        &settings.state_dir,
        list,
    )?))
}

/// Machine-wide locks on the named devices (here, not a host's) or the NIC, before anything
/// is written, created or stored: a second iolab on the same device, whatever its state
/// directory, stops here. A NIC is not written to, but it is measured: its lock keeps a
/// second NIC experiment off it and `irq daemon` off its interrupts. The scratch devices
/// are locked once created, and the interrupts a cell moves once the plan names them.
fn lock_named(
    exp: &Experiment,
    settings: &Settings,
    named: &Option<Vec<String>>,
    nic: &Option<String>,
) -> Result<Vec<MachineLock>> {
    let lock = |resources: Vec<Resource>| {
        crate::knobs::machine_locks(&settings.root, &settings.state_dir, resources)
    };
    Ok(match (named, nic) {
        (_, Some(n)) => lock(vec![Resource::Nic(n.clone())])?,
        (Some(devs), None) if exp.target.hosts.is_empty() => {
            check_writes(exp, settings, devs)?;
            lock(devs.iter().map(|d| Resource::Device(d.clone())).collect())?
        }
        _ => Vec::new(),
    })
}

/// Every other machine-wide thing a cell writes (the IRQs an `irq_cpu` factor moves),
/// locked beside the targets' locks.
fn lock_cells_writes(settings: &Settings, plan: &Plan, locks: &mut Vec<MachineLock>) -> Result<()> {
    let held: Vec<Resource> = locks.iter().map(|l| l.resource().clone()).collect();
    let more = plan
        .cells
        .iter()
        .flat_map(|c| &c.writes)
        .filter_map(|w| crate::knobs::kinds::classify(&w.path).ok())
        .map(|m| m.resource)
        .filter(|r| !held.contains(r));
    locks.extend(crate::knobs::machine_locks(
        &settings.root,
        &settings.state_dir,
        more,
    )?);
    Ok(())
}

/// Says what the experiment runs on: each scratch device created, the NIC, or the devices
/// named (on the fio servers, across hosts).
fn say_targets(
    exp: &Experiment,
    scratch: &[crate::target::ScratchDevice],
    devices: &[String],
    nic: &Option<String>,
    progress: &mut dyn Progress,
) {
    for s in scratch {
        progress.message(&format!(
            "target: scratch device /dev/{} ({} MiB on {})",
            s.name(),
            s.size_bytes() >> 20,
            s.backing_file().display()
        ));
    }
    if let Some(n) = nic {
        progress.message(&format!("target: NIC {n}"));
    } else if scratch.is_empty() {
        let on = if exp.target.hosts.is_empty() {
            String::new()
        } else {
            format!(" on {}", exp.target.hosts.join(", "))
        };
        progress.message(&format!("target: /dev/{}{on}", devices.join(", /dev/")));
    }
}

/// Stores the experiment (its file, seed, planned order, host and kernel, and where it ran)
/// and each controlled host's part of it, and registers it so that `iolab restore` can find
/// (and mark) it until its status is final.
fn store_experiment(
    exp: &Experiment,
    settings: &Settings,
    (machine, plan, env): (&Machine, &Plan, Vec<crate::store::EnvironmentEntry>),
    store: &mut Store,
    controlled: &mut [hosts::Controlled],
) -> Result<(i64, registry::Registered)> {
    let remote = !exp.target.hosts.is_empty();
    let host = if remote {
        // Addresses hold commas ("host,port"); '+' keeps tag selectors usable.
        exp.target.hosts.join("+")
    } else {
        machine.hostname.clone().unwrap_or_default()
    };
    // The hosts' kernels are theirs: the one they all run when controlled hosts said so,
    // else the one `--tag kernel=...` names (as for imports), else unknown.
    let kernel = if remote {
        let tagged = || {
            settings
                .tags
                .iter()
                .find(|(n, _)| n == "kernel")
                .map(|(_, v)| v.clone())
        };
        hosts::common_kernel(controlled)
            .or_else(tagged)
            .unwrap_or_else(|| "unknown".to_string())
    } else {
        machine.kernel.clone().unwrap_or_default()
    };
    let new_experiment = NewExperiment {
        name: exp.name.clone(),
        file_text: exp.text.clone(),
        seed: exp.seed,
        planned_order: planned_order_json(plan),
        host,
        kernel,
        part_of: None,
    };
    // Recorded in the state directory before the experiment is stored for good: a SIGKILL
    // in between leaves no `running` experiment that `restore` cannot find.
    let (experiment_id, registered) = store.create_experiment_then(&new_experiment, |id| {
        registry::register(&settings.state_dir, &settings.db_path, id)
    })?;
    store.add_environment(experiment_id, &env)?;
    hosts::store_parts(
        store,
        controlled,
        &new_experiment,
        experiment_id,
        settings.preflight_sample,
    )?;
    Ok((experiment_id, registered))
}

/// What the experiment's row keeps about where it ran: preflight's findings, the target,
/// what was stabilised for it and the plan of its cells.
fn experiment_environment(
    findings: &[crate::preflight::Finding],
    target: String,
    stabilised: String,
    plan: &Plan,
) -> Result<Vec<crate::store::EnvironmentEntry>> {
    let entry = |key: &str, value: String| crate::store::EnvironmentEntry {
        key: key.into(),
        value,
        severity: None,
        advice: None,
    };
    let mut env = crate::preflight::to_environment(findings);
    env.push(entry("target", target));
    if !stabilised.is_empty() {
        env.push(entry("stabilised", stabilised));
    }
    env.push(entry("plan", serde_json::to_string(&plan.cells)?));
    Ok(env)
}

/// Where the logs fio writes itself (`write_*_log`, a plain name confined to the run's own
/// directory) are kept: `<db>.fio-logs/experiment-<E>/`, one `cell<C>-round<R>` directory per
/// measured run, named like the traces (the run's id does not exist yet when fio writes).
pub(crate) fn fio_logs_dir(db_path: &Path, experiment_id: i64) -> PathBuf {
    let mut name = db_path.file_name().unwrap_or_default().to_os_string();
    name.push(".fio-logs");
    db_path
        .with_file_name(name)
        .join(format!("experiment-{experiment_id}"))
}

/// The planned order as the experiment row stores it (`experiments.planned_order`).
#[derive(Serialize)]
struct PlannedOrder<'a> {
    /// Each cell's key, by index.
    cells: Vec<&'a str>,
    runs: &'a [PlannedRun],
    adaptive: bool,
}

/// [`PlannedOrder`] as the store takes it. The stored text has its keys sorted (a
/// `serde_json::Value`'s objects are), as it had when this was built with `json!`.
fn planned_order_json(plan: &Plan) -> serde_json::Value {
    serde_json::to_value(PlannedOrder {
        cells: plan.cells.iter().map(|c| c.key.as_str()).collect(),
        runs: &plan.order,
        adaptive: plan.adaptive,
    })
    .unwrap_or(serde_json::Value::Null)
}

/// What the loop needs besides the experiment and its plan.
struct Loop<'a> {
    settings: &'a Settings,
    runner: &'a dyn FioRunner,
    cancel: &'a CancelToken,
    store: &'a mut Store,
    journal: &'a mut Journal,
    experiment_id: i64,
    progress: &'a mut dyn Progress,
    /// Set for `trace = true` experiments.
    tracing: Option<trace::Tracing>,
    /// Controlled hosts: their knobs set, their job files and samplers, per run.
    hosts: &'a mut [hosts::Controlled],
    /// The run under way, counted from 1 as progress shows it (for messages).
    position: usize,
    /// This machine's target disks and their identities when they were checked
    /// (`knobs::disk_identity`): a disk re-attached or replaced under its name since is not
    /// the one checked for data, and no run goes on on it.
    disks: Vec<(String, Option<String>)>,
}

struct Looped {
    cells: Vec<CellResult>,
    interrupted: bool,
    primary_metric: String,
}

/// The primary metric of one run: the file's adaptive `metric`, else total IOPS.
fn primary(metric: Option<&str>, metrics: &[(String, f64)]) -> Option<f64> {
    let get = |n: &str| metrics.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
    match metric {
        Some(m) => get(m),
        None => Some(
            get(crate::metrics::READ_IOPS.name).unwrap_or(0.0)
                + get(crate::metrics::WRITE_IOPS.name).unwrap_or(0.0),
        ),
    }
}

/// When to stop repeating (adaptive repetitions only), and the metric that decides it: the
/// file's `metric`, else a program engine's own headline figure, else total IOPS (named
/// `None` here, and "read_iops+write_iops" for the record).
fn stopping_rule(exp: &Experiment) -> Result<(Option<AdaptiveRule>, Option<String>, String)> {
    let (rule, metric) = match &exp.repetitions {
        Repetitions::Adaptive {
            min,
            max,
            target_ci,
            metric,
        } => {
            let mut rule = AdaptiveRule::new(*target_ci, *max as usize)?;
            rule.min = (*min as usize).min(rule.max);
            (Some(rule), metric.clone())
        }
        Repetitions::Fixed(_) => (None, None),
    };
    let metric = metric.or_else(|| exp.engine.engine().primary_metric());
    let primary_metric = metric.clone().unwrap_or_else(|| {
        format!(
            "{}+{}",
            crate::metrics::READ_IOPS.name,
            crate::metrics::WRITE_IOPS.name
        )
    });
    Ok((rule, metric, primary_metric))
}

fn execute(exp: &Experiment, plan: &Plan, lp: &mut Loop) -> Result<Looped> {
    let (rule, metric, primary_metric) = stopping_rule(exp)?;
    let mut cells: Vec<CellResult> = plan
        .cells
        .iter()
        .map(|c| CellResult {
            index: c.index,
            key: c.key.clone(),
            ..Default::default()
        })
        .collect();
    let mut values: Vec<Vec<f64>> = vec![Vec::new(); cells.len()];
    let mut planner = Planner::new(exp);
    let mut position = 0usize;
    // Runs shown to the user so far: a cell found not applicable is not a run to count.
    let mut shown = 0usize;
    // Each shown run's wall time and nominal duration, for the ETA.
    let mut elapsed_runs: Vec<(f64, Option<f64>)> = Vec::new();
    let mut interrupted = false;
    let planned = plan.order.len();
    let matrix = super::cells(exp);

    'rounds: loop {
        let needing: Vec<usize> = match &rule {
            Some(rule) => {
                let refs: Vec<&[f64]> = values.iter().map(Vec::as_slice).collect();
                rule.cells_needing_runs(&refs)?
            }
            None => Vec::new(),
        };
        let round = planner.next_round(|c| {
            needing.contains(&c.index)
                && cells[c.index].not_applicable.is_none()
                && !values[c.index].is_empty()
        });
        let Some(round) = round else { break };
        for (i, run) in round.iter().enumerate() {
            if lp.cancel.is_cancelled() {
                interrupted = true;
                break 'rounds;
            }
            let cell = &plan.cells[run.cell];
            position += 1;
            if cells[run.cell].not_applicable.is_some()
                || (run.warmup && cell.not_applicable.is_some())
            {
                continue;
            }
            // Fixed repetitions run exactly the planned order; past it (adaptive), only the
            // rest of this round is known.
            let rest = if position <= planned {
                &plan.order[position - 1..]
            } else {
                &round[i..]
            };
            // A cell that the plan (here and on every controlled host) already knows cannot
            // run is visited once, only to record why: no run is shown or counted for it, in
            // the runs left or in the ETA.
            let known_not_applicable = |c: usize| {
                plan.cells[c].not_applicable.is_some()
                    && lp
                        .hosts
                        .iter()
                        .all(|h| h.plan.cells[c].not_applicable.is_some())
            };
            let runs = !known_not_applicable(run.cell);
            let remaining: Vec<Option<f64>> = rest
                .iter()
                .filter(|r| cells[r.cell].not_applicable.is_none() && !known_not_applicable(r.cell))
                .map(|r| plan.cells[r.cell].nominal_seconds)
                .collect();
            if runs {
                shown += 1;
                lp.progress.run_started(&Step {
                    number: shown,
                    planned: shown - 1 + remaining.len(),
                    cell: cell.key.clone(),
                    round: run.round,
                    warmup: run.warmup,
                    eta_seconds: eta(&remaining, &elapsed_runs),
                });
            }
            let t0 = Instant::now();
            lp.position = shown;
            let result = one_run::one_run(exp, plan, (&matrix[run.cell], cell), run, lp)?;
            if runs {
                elapsed_runs.push((t0.elapsed().as_secs_f64(), cell.nominal_seconds));
            }
            let Some((status, metrics)) = result else {
                interrupted = true;
                break 'rounds;
            };
            // A cell some controlled hosts can realise keeps running there: their own
            // experiments get every round, while the aggregate's runs say which host could not.
            let nowhere = lp
                .hosts
                .iter()
                .all(|h| h.plan.cells[run.cell].not_applicable.is_some());
            let (c, v) = (&mut cells[run.cell], &mut values[run.cell]);
            c.record(status, metrics, run.warmup, nowhere, metric.as_deref(), v);
        }
    }
    if let (Some(rule), false) = (&rule, interrupted) {
        let refs: Vec<&[f64]> = values.iter().map(Vec::as_slice).collect();
        for p in rule.assess(&refs)? {
            if matches!(p.status, CellStatus::Capped { .. })
                && cells[p.cell].not_applicable.is_none()
            {
                cells[p.cell].capped = true;
            }
        }
    }
    Ok(Looped {
        cells,
        interrupted,
        primary_metric,
    })
}

impl CellResult {
    /// Takes one run's outcome: a warm-up counts only to find the cell not applicable
    /// (`nowhere`: on no controlled host either); a measured run adds its figures, and its
    /// primary metric to the cell's `values` (for the adaptive rule), or its failure.
    fn record(
        &mut self,
        status: RunStatus,
        metrics: Vec<(String, f64)>,
        warmup: bool,
        nowhere: bool,
        metric: Option<&str>,
        values: &mut Vec<f64>,
    ) {
        if let (RunStatus::NotApplicable(why), true) = (&status, nowhere) {
            self.not_applicable = Some(why.clone());
        }
        if warmup {
            return;
        }
        match status {
            RunStatus::Ok => {
                if let Some(v) = primary(metric, &metrics) {
                    values.push(v);
                }
                self.runs.push(metrics);
            }
            RunStatus::NotApplicable(_) => {}
            RunStatus::Failed(why) => self.failures.push(why),
        }
    }
}

/// Seconds left: each run's nominal duration plus the median time the runs so far took beyond
/// theirs (starting fio, setting knobs; in hosts mode fio's server adds about a second), or,
/// where the duration is not known, the median wall time of the runs so far. Medians, so one
/// run that stalled (a host cut off: 44 s for a 3 s run) does not stretch every run left.
/// None before the first run has ended: what a run costs beyond its measuring is not known
/// yet (a lab guest's first ETA read 18 s for a 2-minute experiment).
fn eta(remaining: &[Option<f64>], finished: &[(f64, Option<f64>)]) -> Option<f64> {
    use crate::stats::order::median;
    if finished.is_empty() && !remaining.is_empty() {
        return None;
    }
    let wall = median(&finished.iter().map(|r| r.0).collect::<Vec<_>>());
    let beyond = median(
        &finished
            .iter()
            .filter_map(|&(w, n)| Some(w - n?))
            .collect::<Vec<_>>(),
    );
    remaining
        .iter()
        .map(|n| match n {
            Some(n) => Some(n + beyond.unwrap_or(0.0).max(0.0)),
            None => wall,
        })
        .sum()
}

/// Sets `[stabilise]` once, through the journal (which puts it back with everything else):
/// preflight's advice where this machine has the control, then the controls the file names,
/// which must exist. Returns what was set, `name=value, ...`.
fn stabilise(exp: &Experiment, m: &Machine, journal: &mut Journal) -> Result<String> {
    let mut done = Vec::new();
    for (setting, writes) in stabilise_writes(exp, m)? {
        for w in writes {
            journal
                .set(&w.path, &w.value)
                .with_context(|| format!("[stabilise] {setting}"))?;
        }
        done.push(setting);
    }
    Ok(done.join(", "))
}

/// `[stabilise]` resolved on `m`: each setting (`knob=level`) with the writes it makes, in
/// the order they are made (the advice first, then what the file names, which overrides it).
fn stabilise_writes(exp: &Experiment, m: &Machine) -> Result<Vec<(String, Vec<KnobWrite>)>> {
    use super::system_knobs::SystemKnob;
    let st = &exp.stabilise;
    let mut wanted: Vec<(SystemKnob, String)> = if st.advice {
        SystemKnob::advice(m)
    } else {
        Vec::new()
    };
    wanted.retain(|(k, _)| !st.settings.iter().any(|(s, _)| s == k));
    wanted.extend(st.settings.iter().cloned());
    wanted
        .iter()
        .map(|(knob, level)| {
            let writes = knob.writes(level, m).map_err(|why| {
                anyhow::anyhow!("{}: [stabilise] {}: {why}", exp.source, knob.name())
            })?;
            Ok((format!("{}={level}", knob.name()), writes))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_tags_depend_on_where_fio_runs() {
        let tag = |n: &str| vec![(n.to_string(), "x".to_string())];
        let local = crate::experiment::parse(
            "l.toml",
            "name = \"l\"\n[workload]\nrw = \"read\"\n[factors]\nbs = [\"4k\"]\n",
        )
        .unwrap();
        for name in ["host", "kernel", "bs", "experiment"] {
            assert!(check_tags(&local, &tag(name)).is_err(), "{name}");
        }
        assert!(check_tags(&local, &tag("variant")).is_ok());
        // On fio servers only the user knows their kernels.
        let remote = crate::experiment::parse(
            "r.toml",
            "name = \"r\"\n[target]\ndevice = \"nvme0n1\"\nhosts = [\"10.0.0.1\"]\n\
             [workload]\nrw = \"read\"\n",
        )
        .unwrap();
        assert!(check_tags(&remote, &tag("kernel")).is_ok());
        let e = check_tags(&remote, &tag("host")).unwrap_err().to_string();
        assert!(e.contains("fio servers"), "{e}");
    }

    #[test]
    fn a_device_of_size_0_is_refused_on_the_live_machine() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/machines/thisvm");
        let m = Machine::read(&crate::sys::SysRoot::at(dir).unwrap()).unwrap();
        let e = refuse_empty(true, &m, &["loop0".into(), "zram0".into()]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/dev/zram0: has no capacity (size 0)"),
            "{e}"
        );
        refuse_empty(true, &m, &["loop0".into()]).unwrap();
        refuse_empty(false, &m, &["zram0".into()]).unwrap();
    }

    #[test]
    fn eta_uses_nominal_durations_and_falls_back_to_the_median_so_far() {
        assert_eq!(eta(&[Some(5.0), Some(5.0)], &[]), None);
        assert_eq!(eta(&[Some(5.0)], &[(7.0, Some(5.0))]), Some(7.0));
        assert_eq!(
            eta(&[Some(5.0), None], &[(2.0, None), (4.0, None)]),
            Some(8.0)
        );
        assert_eq!(eta(&[None], &[]), None);
        assert_eq!(eta(&[], &[]), Some(0.0));
        // Runs of 1 s that took 2.2 and 2.4 s (hosts mode): 1.3 s more than nominal each.
        let took = [(2.2, Some(1.0)), (2.4, Some(1.0))];
        let left = eta(&[Some(1.0), Some(2.0)], &took).unwrap();
        assert!((left - (1.0 + 2.0 + 2.0 * 1.3)).abs() < 1e-9, "{left}");
        // A run that ended before its nominal time (fio failed) takes nothing off the others.
        assert_eq!(eta(&[Some(5.0)], &[(3.0, Some(5.0))]), Some(5.0));
        // One run of 3 s that stalled for 44 s among runs 1 s over theirs.
        let took = [(4.0, Some(3.0)), (44.0, Some(3.0)), (4.0, Some(3.0))];
        assert_eq!(eta(&[Some(3.0), Some(3.0)], &took), Some(8.0));
    }

    #[test]
    fn the_primary_metric_is_the_files_or_total_iops() {
        let m = vec![
            ("read_iops".to_string(), 10.0),
            ("write_iops".to_string(), 5.0),
            ("sys_pct".to_string(), 3.0),
        ];
        assert_eq!(primary(None, &m), Some(15.0));
        assert_eq!(primary(Some("sys_pct"), &m), Some(3.0));
        assert_eq!(primary(Some("usr_pct"), &m), None);
    }
}

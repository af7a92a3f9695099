//! The machine model: one value that answers the questions every iolab feature asks — which
//! CPUs exist and how they group (threads, cores, packages, LLC, NUMA nodes), which disks
//! exist, what their queue knobs are and may become, whether they hold data, which interrupts
//! complete their I/O, which CPUs submit to which hardware queue — read entirely through a
//! `SysRoot` so it works the same on the live machine and on a snapshot.
//!
//! Required inputs (CPU list, /proc/interrupts, /sys/block) fail with an error naming the
//! file; optional ones degrade the model and leave a warning in `warnings`.

pub(crate) mod controls;
pub(crate) mod device_map;
pub(crate) mod devices;
pub(crate) mod elevators;
pub(crate) mod irqs;
pub(crate) mod nics;
pub(crate) mod placement;
pub(crate) mod rates;
pub(crate) mod render;
pub(crate) mod topology;

pub(crate) use controls::Controls;
pub(crate) use devices::{Allowed, BlockDevice};
pub(crate) use irqs::{Irq, IrqRate};
pub(crate) use nics::Nic;
pub(crate) use placement::OnNearFar;
pub(crate) use rates::{rates, Counters, Rates};
pub(crate) use topology::{Cpu, Node, NodeDistance};

use crate::sys::{SysError, SysRoot};
use serde::{Deserialize, Serialize};

/// Problems that degraded the model without stopping it, one message each (naming the file).
pub(crate) type Warnings = Vec<String>;

/// Where a snapshot keeps its second reading and its description (see `crate::snapshot`).
pub(crate) const LATER_DIR: &str = "/later";
pub(crate) const SNAPSHOT_META: &str = "/snapshot.json";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    pub(crate) hostname: Option<String>,
    pub(crate) kernel: Option<String>,
    pub(crate) online: Vec<u32>,
    pub(crate) possible: Vec<u32>,
    pub(crate) isolated: Vec<u32>,
    pub(crate) nohz_full: Vec<u32>,
    /// The affinity the kernel gives new IRQs.
    pub(crate) default_irq_affinity: Option<Vec<u32>>,
    pub(crate) cpus: Vec<Cpu>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) devices: Vec<BlockDevice>,
    pub irqs: Vec<Irq>,
    /// Network interfaces (not `lo`) and the interrupts they raise.
    #[serde(default)]
    pub(crate) nics: Vec<Nic>,
    /// Governors, boost, SMT and idle states, as far as this machine exposes them.
    #[serde(default)]
    pub(crate) controls: Controls,
    /// I/O schedulers the kernel loads when one is first selected (see `elevators`): possible
    /// on every disk although no `queue/scheduler` lists them yet. Not read when the model
    /// is measured for interrupt rates (`measure`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) schedulers_on_demand: Vec<String>,
    /// CPU, per-CPU interrupt and disk rates when a second reading exists (per-IRQ rates are
    /// in each `irqs[].rate`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) rates: Option<MachineRates>,
    pub(crate) warnings: Vec<String>,
}

/// The machine-wide part of `Rates` (the per-IRQ part is folded into `Irq::rate`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct MachineRates {
    pub(crate) interval_ns: u64,
    pub(crate) cpu_interrupts_per_s: std::collections::BTreeMap<u32, f64>,
    pub(crate) cpus: std::collections::BTreeMap<u32, rates::CpuShare>,
    pub(crate) all_cpus: Option<rates::CpuShare>,
    pub(crate) disks: std::collections::BTreeMap<String, rates::DiskRates>,
}

impl Machine {
    /// Reads the whole model. Under a snapshot root with a second reading, rates are filled.
    pub fn read(root: &SysRoot) -> Result<Machine, SysError> {
        Machine::read_model(root, true)
    }

    /// The model as the interrupt commands need it (no scheduler module index, a megabyte
    /// they never use).
    pub(crate) fn read_for_irqs(root: &SysRoot) -> Result<Machine, SysError> {
        Machine::read_model(root, false)
    }

    /// The model; without `schedulers`, the module index is not read (the interrupt commands
    /// measure the machine at every look and never set a scheduler).
    fn read_model(root: &SysRoot, schedulers: bool) -> Result<Machine, SysError> {
        let mut warn = Warnings::new();
        let topo = topology::read(root, &mut warn)?;
        let mut nodes = topo.nodes;
        if nodes.is_empty() {
            // Kernels without NUMA expose no node directories: one node holds every CPU.
            nodes.push(Node {
                node: 0,
                cpus: topo.online.clone(),
                distances: vec![NodeDistance {
                    node: 0,
                    distance: 10,
                }],
            });
        }
        let mut irqs = irqs::read(root, &mut warn)?;
        let in_use = devices::read_in_use(root, &mut warn);
        let mut devices = Vec::new();
        for name in root.list("/sys/block")? {
            match devices::read_device(root, &name, &mut warn) {
                Ok(mut dev) => {
                    devices::mark_data(root, &mut dev, &in_use);
                    device_map::attach(root, &mut dev, &irqs, &mut warn);
                    devices.push(dev);
                }
                Err(e) => warn.push(format!("device {name} skipped: {e}")),
            }
        }
        device_map::mark_spread_managed(&devices, &mut irqs);
        let controls = Controls::read(root, &topo.online);
        let nics = nics::read(root, &irqs, &mut warn);
        let kernel = root.attr("/proc/sys/kernel/osrelease");
        let mut machine = Machine {
            hostname: root.attr("/proc/sys/kernel/hostname"),
            schedulers_on_demand: if schedulers {
                elevators::on_demand(root, kernel.as_deref())
            } else {
                Vec::new()
            },
            kernel,
            online: topo.online,
            possible: topo.possible,
            isolated: topo.isolated,
            nohz_full: topo.nohz_full,
            default_irq_affinity: irqs::default_affinity(root, &mut warn),
            cpus: topo.cpus,
            nodes,
            devices,
            irqs,
            nics,
            controls,
            rates: None,
            warnings: Vec::new(),
        };
        if !root.is_live() && root.exists(&format!("{LATER_DIR}/proc/interrupts")) {
            match second_reading(root) {
                Ok((before, after, ns)) => machine.apply_rates(&rates(&before, &after, ns)),
                Err(e) => warn.push(format!("{RATES_NOT_SHOWN}{e}")),
            }
        }
        let placements: Vec<_> = machine
            .devices
            .iter()
            .map(|d| placement::placement(&machine, d))
            .collect();
        for (dev, p) in machine.devices.iter_mut().zip(placements) {
            dev.placement = p;
        }
        machine.warnings = warn;
        Ok(machine)
    }

    /// The model with rates. On the live machine: two readings of the counters `over` apart
    /// (`wait` sleeps and returns false when interrupted, which gives `None`); a snapshot root
    /// carries its own second reading and must have one. Returns the model and the seconds the
    /// rates cover.
    pub(crate) fn measure(
        root: &SysRoot,
        over: std::time::Duration,
        wait: &dyn Fn(std::time::Duration) -> bool,
    ) -> anyhow::Result<Option<(Machine, f64)>> {
        if !root.is_live() {
            let m = Machine::read(root)?;
            let Some(r) = &m.rates else {
                // A second reading that is there but cannot be read says why itself.
                if let Some(why) = m
                    .warnings
                    .iter()
                    .find_map(|w| w.strip_prefix(RATES_NOT_SHOWN))
                {
                    anyhow::bail!(
                        "{}: the snapshot's rates cannot be read: {why}",
                        root.base().display()
                    );
                }
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
        let start = std::time::Instant::now();
        if !wait(over) {
            return Ok(None);
        }
        let after = Counters::read(root)?;
        let ns = start.elapsed().as_nanos() as u64;
        let mut m = Machine::read_model(root, false)?;
        m.apply_rates(&rates(&before, &after, ns));
        Ok(Some((m, ns as f64 / 1e9)))
    }

    /// What `iolab inspect` shows: the model, and with `interval` rates from two readings
    /// that far apart (of the live machine: `inspect` refuses one for a snapshot, which
    /// carries its own second reading).
    pub(crate) fn observe(
        root: &SysRoot,
        interval: Option<std::time::Duration>,
    ) -> anyhow::Result<Machine> {
        let Some(interval) = interval else {
            return Ok(Machine::read(root)?);
        };
        let sleep = |d| {
            std::thread::sleep(d);
            true
        };
        let mut m = Machine::measure(root, interval, &sleep)?
            .expect("a plain sleep is never interrupted")
            .0;
        m.schedulers_on_demand = elevators::on_demand(root, m.kernel.as_deref());
        Ok(m)
    }

    /// Folds rates from two readings into the model.
    pub(crate) fn apply_rates(&mut self, r: &Rates) {
        for irq in &mut self.irqs {
            if let Some(ir) = r.irqs.get(&irq.irq) {
                irq.rate = ir.total.map(|total| IrqRate {
                    total,
                    per_cpu: ir
                        .per_cpu
                        .iter()
                        .filter_map(|(c, v)| Some((*c, (*v)?)))
                        .collect(),
                });
            }
        }
        self.rates = Some(MachineRates {
            interval_ns: r.interval_ns,
            cpu_interrupts_per_s: r.cpu_interrupts_per_s.clone(),
            cpus: r.cpus.clone(),
            all_cpus: r.all_cpus,
            disks: r.disks.clone(),
        });
    }

    pub fn device(&self, name: &str) -> Option<&BlockDevice> {
        self.devices.iter().find(|d| d.name == name)
    }

    pub(crate) fn node(&self, node: u32) -> Option<&Node> {
        self.nodes.iter().find(|n| n.node == node)
    }

    /// A numbered IRQ.
    pub fn irq(&self, irq: u32) -> Option<&Irq> {
        self.irqs.iter().find(|i| i.number() == Some(irq))
    }

    /// The IRQs serving a device, in IRQ order.
    pub(crate) fn device_irqs(&self, name: &str) -> Vec<&Irq> {
        self.device(name)
            .map(|d| d.irqs.iter().filter_map(|n| self.irq(*n)).collect())
            .unwrap_or_default()
    }

    /// Whether the kernel's release (`6.1.0-27-amd64`) is `major.minor` or later; `None`
    /// when it is unknown or does not start with two numbers.
    pub(crate) fn kernel_at_least(&self, major: u32, minor: u32) -> Option<bool> {
        release_at_least(self.kernel.as_deref()?, major, minor)
    }

    /// SLIT distance between two nodes (None when the kernel did not say).
    pub(crate) fn distance(&self, from: u32, to: u32) -> Option<u32> {
        self.node(from)?
            .distances
            .iter()
            .find(|d| d.node == to)
            .map(|d| d.distance)
    }
}

/// Whether a kernel release (`6.1.0-27-amd64`) is `major.minor` or later; `None` when it does
/// not start with two numbers. Distributions backport, so this says what mainline did.
pub(crate) fn release_at_least(release: &str, major: u32, minor: u32) -> Option<bool> {
    let mut parts = release.trim().split(['.', '-']);
    let mut next = || parts.next()?.parse::<u32>().ok();
    Some((next()?, next()?) >= (major, minor))
}

/// The measured time between a snapshot's two readings (`snapshot.json`).
/// How a model's warning begins when a snapshot's second reading exists but cannot be read.
const RATES_NOT_SHOWN: &str = "rates not shown: ";

pub(crate) fn snapshot_interval_ns(root: &SysRoot) -> Result<u64, SysError> {
    let meta = root.read(SNAPSHOT_META)?;
    serde_json::from_str::<serde_json::Value>(&meta)
        .ok()
        .and_then(|v| v.get("interval_ns")?.as_u64())
        .filter(|ns| *ns > 0)
        .ok_or_else(|| root.parse_error(SNAPSHOT_META, 1, "no positive `interval_ns`"))
}

/// The two readings of a snapshot and the measured time between them.
fn second_reading(root: &SysRoot) -> Result<(Counters, Counters, u64), SysError> {
    let interval_ns = snapshot_interval_ns(root)?;
    let before = Counters::read(root)?;
    let later = SysRoot::at(root.path(LATER_DIR))?;
    let after = Counters::read(&later)?;
    Ok((before, after, interval_ns))
}

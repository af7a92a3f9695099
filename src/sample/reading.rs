//! One raw reading of the counters the sampler watches, and the reader that takes it with
//! buffers kept between readings: the file text goes into reused byte buffers, interrupt
//! counts into one flat vector laid out by a shared `IrqLayout` (re-made only when an IRQ or
//! CPU comes or goes), and only the watched devices' diskstats lines are parsed.

use crate::sys::parse::diskstats::{diskstat_line, DiskStat};
use crate::sys::parse::interrupts::{counts_into, IrqLayout};
use crate::sys::parse::stat::{stat, CpuTimes};
use crate::sys::{SysError, SysRoot};
use std::sync::Arc;

const INTERRUPTS: &str = "/proc/interrupts";
const STAT: &str = "/proc/stat";
const DISKSTATS: &str = "/proc/diskstats";

/// Raw cumulative counters at one instant. Rates come from two of these (`derive`).
#[derive(Debug, Clone)]
pub struct Reading {
    /// Monotonic time since the sampler started, taken just before the files are read.
    pub(crate) elapsed_ns: u64,
    pub(crate) irq_layout: Arc<IrqLayout>,
    /// Row-major: `irq_layout.index(row, column)`.
    pub(crate) irq_counts: Vec<u64>,
    pub(crate) all_cpus: CpuTimes,
    /// Per CPU id; offline CPUs are absent.
    pub(crate) cpus: Vec<(u32, CpuTimes)>,
    /// One entry per watched device, in the order given to the sampler; None when the
    /// device was not in /proc/diskstats at that moment.
    pub(crate) disks: Vec<Option<DiskStat>>,
}

/// Takes readings through a `SysRoot`, keeping its buffers.
pub struct Reader {
    root: SysRoot,
    devices: Vec<String>,
    buf: Vec<u8>,
    layout: Arc<IrqLayout>,
    scratch_layout: IrqLayout,
}

fn text<'a>(buf: &'a [u8], root: &SysRoot, abs: &str) -> Result<&'a str, SysError> {
    std::str::from_utf8(buf).map_err(|e| root.parse_error(abs, 0, format!("not UTF-8: {e}")))
}

impl Reader {
    pub fn new(root: SysRoot, devices: Vec<String>) -> Reader {
        Reader {
            root,
            devices,
            buf: Vec::with_capacity(64 * 1024),
            layout: Arc::new(IrqLayout::default()),
            scratch_layout: IrqLayout::default(),
        }
    }

    /// Takes one reading stamped `elapsed_ns`.
    pub fn read(&mut self, elapsed_ns: u64) -> Result<Reading, SysError> {
        let root = &self.root;
        root.read_into(INTERRUPTS, &mut self.buf)?;
        let t = text(&self.buf, root, INTERRUPTS)?;
        let mut irq_counts = Vec::with_capacity(self.layout.ids.len() * self.layout.cpus.len());
        let changed = counts_into(t, &mut self.scratch_layout, &mut irq_counts)
            .map_err(|e| root.parse_error(INTERRUPTS, e.line, e.message))?;
        if changed || self.layout.ids.is_empty() {
            self.layout = Arc::new(self.scratch_layout.clone());
        }

        root.read_into(STAT, &mut self.buf)?;
        let t = text(&self.buf, root, STAT)?;
        let st = stat(t).map_err(|e| root.parse_error(STAT, e.line, e.message))?;

        root.read_into(DISKSTATS, &mut self.buf)?;
        let t = text(&self.buf, root, DISKSTATS)?;
        let mut disks = vec![None; self.devices.len()];
        for (i, line) in t.lines().enumerate() {
            let Some(name) = line.split_whitespace().nth(2) else {
                continue;
            };
            if let Some(slot) = self.devices.iter().position(|d| d == name) {
                disks[slot] = Some(
                    diskstat_line(line, i + 1)
                        .map_err(|e| root.parse_error(DISKSTATS, e.line, e.message))?,
                );
            }
        }
        Ok(Reading {
            elapsed_ns,
            irq_layout: self.layout.clone(),
            irq_counts,
            all_cpus: st.all,
            cpus: st.cpus.into_iter().collect(),
            disks,
        })
    }
}

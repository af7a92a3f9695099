//! One raw reading of the counters the sampler watches, and the reader that takes it with
//! buffers kept between readings: the file text goes into reused byte buffers, interrupt
//! counts into one flat vector laid out by a shared `IrqLayout` (re-made only when an IRQ or
//! CPU comes or goes), and only the watched devices' diskstats lines are parsed. A watched
//! network interface (`[target] nic`) has no diskstats line: its byte and packet counters
//! come from /sys/class/net/NAME/statistics instead.

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
    /// One entry per watched device: its counters when it is a watched network interface
    /// and they could be read.
    pub(crate) nics: Vec<Option<NicCounters>>,
}

/// A network interface's cumulative counters (/sys/class/net/NAME/statistics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NicCounters {
    pub(crate) rx_bytes: u64,
    pub(crate) tx_bytes: u64,
    pub(crate) rx_packets: u64,
    pub(crate) tx_packets: u64,
}

impl NicCounters {
    /// The interface's counters now; `None` when one cannot be read (the interface is gone).
    fn read(root: &SysRoot, name: &str) -> Option<NicCounters> {
        let counter = |what: &str| {
            root.attr(&format!("/sys/class/net/{name}/statistics/{what}"))?
                .parse::<u64>()
                .ok()
        };
        Some(NicCounters {
            rx_bytes: counter("rx_bytes")?,
            tx_bytes: counter("tx_bytes")?,
            rx_packets: counter("rx_packets")?,
            tx_packets: counter("tx_packets")?,
        })
    }
}

/// Takes readings through a `SysRoot`, keeping its buffers.
pub struct Reader {
    root: SysRoot,
    devices: Vec<String>,
    /// Per device: whether it is a network interface.
    nics: Vec<bool>,
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
            nics: vec![false; devices.len()],
            devices,
            buf: Vec::with_capacity(64 * 1024),
            layout: Arc::new(IrqLayout::default()),
            scratch_layout: IrqLayout::default(),
        }
    }

    /// Reads the devices whose entry in `nics` is true as network interfaces.
    pub(crate) fn with_nics(mut self, nics: Vec<bool>) -> Reader {
        self.nics = nics;
        self
    }

    /// Takes one reading stamped `elapsed_ns`.
    pub fn read(&mut self, elapsed_ns: u64) -> Result<Reading, SysError> {
        let root = &self.root;
        // The disk counters first, nearest the stamp: fio's bytes are checked against them
        // over a window read off these stamps (2%), while /proc/interrupts, the longest
        // to read on a large machine, comes last.
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

        root.read_into(STAT, &mut self.buf)?;
        let t = text(&self.buf, root, STAT)?;
        let st = stat(t).map_err(|e| root.parse_error(STAT, e.line, e.message))?;

        root.read_into(INTERRUPTS, &mut self.buf)?;
        let t = text(&self.buf, root, INTERRUPTS)?;
        let mut irq_counts = Vec::with_capacity(self.layout.ids.len() * self.layout.cpus.len());
        let changed = counts_into(t, &mut self.scratch_layout, &mut irq_counts)
            .map_err(|e| root.parse_error(INTERRUPTS, e.line, e.message))?;
        if changed || self.layout.ids.is_empty() {
            self.layout = Arc::new(self.scratch_layout.clone());
        }
        let nics = self
            .devices
            .iter()
            .zip(&self.nics)
            .map(|(name, &nic)| nic.then(|| NicCounters::read(root, name)).flatten())
            .collect();
        Ok(Reading {
            elapsed_ns,
            irq_layout: self.layout.clone(),
            irq_counts,
            all_cpus: st.all,
            cpus: st.cpus.into_iter().collect(),
            disks,
            nics,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watched network interface's counters come from /sys/class/net; a block device has
    /// none, and an interface that is gone gives none instead of failing the reading.
    #[test]
    fn a_watched_nics_counters_come_from_sys_class_net() {
        let dir = tempfile::tempdir().unwrap();
        let proc = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/machines/thisvm/proc");
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        for f in ["interrupts", "stat", "diskstats"] {
            std::fs::copy(proc.join(f), dir.path().join("proc").join(f)).unwrap();
        }
        let stats = dir.path().join("sys/class/net/eth0/statistics");
        std::fs::create_dir_all(&stats).unwrap();
        for (f, v) in [
            ("rx_bytes", 1000),
            ("tx_bytes", 2000),
            ("rx_packets", 3),
            ("tx_packets", 4),
        ] {
            std::fs::write(stats.join(f), format!("{v}\n")).unwrap();
        }
        let devices = ["vda", "eth0", "eth9"].map(String::from).to_vec();
        let r = Reader::new(SysRoot::at(dir.path()).unwrap(), devices)
            .with_nics(vec![false, true, true])
            .read(0)
            .unwrap();
        let eth0 = NicCounters {
            rx_bytes: 1000,
            tx_bytes: 2000,
            rx_packets: 3,
            tx_packets: 4,
        };
        assert_eq!(r.nics, vec![None, Some(eth0), None]);
        assert!(r.disks[0].is_some() && r.disks[1].is_none());
    }
}

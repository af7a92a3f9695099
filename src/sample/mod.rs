//! The sampler: what the machine did while a workload ran. A background thread reads
//! /proc/interrupts, /proc/stat and /proc/diskstats through a `SysRoot` on a `Cadence`
//! (deadlines on a grid, so a slow read does not shift later samples), keeps the raw
//! readings, and takes one last reading when stopped so the run's tail is counted. Rates are
//! derived afterwards (`derive`), never while sampling, so sampling stays cheap.
//!
//! ```no_run
//! # use iolab::{sample, sys::SysRoot};
//! # use std::time::Duration;
//! let root = SysRoot::live();
//! let machine = iolab::model::Machine::read(&root).unwrap();
//! let watch = sample::Watch::of(&machine, "vda");
//! let every_second = sample::Cadence::every(Duration::from_secs(1));
//! let handle = sample::start(&root, &[watch], every_second).unwrap();
//! // ... run fio ...
//! let run = handle.stop();
//! println!("{:?}", run.summary.map(|s| s.system));
//! ```

pub(crate) mod derive;
pub(crate) mod reading;
pub(crate) mod window;

pub(crate) use derive::{interval, summary, Interval, Summary};
pub use reading::Reader;
pub(crate) use reading::Reading;

use crate::sys::{SysError, SysRoot};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the sampler reads: every `first` for the first readings, then twice as long
/// after each further [`Cadence::DOUBLE_AFTER`] readings, up to `max`. A run whose length
/// is not known beforehand (fio's size-bound jobs) is read often at first, so a short one
/// still has enough readings to place its measured interval among, and a long one ends up
/// at `max` without piling up readings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cadence {
    pub first: Duration,
    pub max: Duration,
}

impl Cadence {
    /// Readings between doublings: as many as a run of known length gets in all
    /// (`window::cadence_for`).
    pub const DOUBLE_AFTER: u32 = 100;
    /// The finest interval a run of unknown length starts at.
    pub const FINEST: Duration = Duration::from_millis(20);

    /// The same interval throughout.
    pub fn every(interval: Duration) -> Cadence {
        Cadence {
            first: interval,
            max: interval,
        }
    }

    /// For a run of unknown length: from [`Cadence::FINEST`] (or `max` if finer) up to `max`.
    pub fn unknown_length(max: Duration) -> Cadence {
        Cadence {
            first: max.min(Cadence::FINEST),
            max,
        }
    }

    /// The interval after the `n`th reading (the first is reading 0).
    fn after(self, n: u32) -> Duration {
        let doublings = (n / Cadence::DOUBLE_AFTER).min(31);
        self.first
            .checked_mul(1 << doublings)
            .unwrap_or(self.max)
            .min(self.max)
            .max(Duration::from_millis(1))
    }
}

/// A running sampler.
pub struct SamplerHandle {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<(Vec<Reading>, Vec<String>)>,
    devices: Vec<String>,
    device_irqs: Vec<Vec<u32>>,
    started_unix_ns: f64,
}

/// What a sampled run produced.
#[derive(Debug)]
pub struct SampleRun {
    pub(crate) readings: Vec<Reading>,
    pub(crate) devices: Vec<String>,
    /// The IRQ numbers serving each of `devices` (empty when none is known, as for loop).
    pub(crate) device_irqs: Vec<Vec<u32>>,
    /// Each consecutive pair of readings.
    pub(crate) intervals: Vec<Interval>,
    /// First to last reading, with the store's metric names; None with fewer than 2 readings.
    pub summary: Option<Summary>,
    /// Readings that failed (the file vanished, a line did not parse), one message each.
    pub(crate) errors: Vec<String>,
    /// Wall-clock time of the first reading (ns since the Unix epoch): puts fio's timestamps
    /// on the readings' clock (`elapsed_ns`).
    pub(crate) started_unix_ns: f64,
}

/// A device to watch: its name as in /proc/diskstats (or a network interface's name) and the
/// IRQs that serve it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watch {
    pub(crate) device: String,
    pub(crate) irqs: Vec<u32>,
    /// A network interface (`[target] nic`): its byte and packet counters are read too.
    pub(crate) nic: bool,
}

impl Watch {
    /// `device` with the IRQs the machine model found for it (none if it is unknown).
    pub fn of(machine: &crate::model::Machine, device: &str) -> Watch {
        Watch {
            device: device.to_string(),
            irqs: machine
                .device(device)
                .map(|d| d.irqs.clone())
                .unwrap_or_default(),
            nic: false,
        }
    }
}

/// Starts sampling the `watched` devices on `cadence`. The first reading is taken before
/// this returns, so an error in it (a missing file) is reported here. The caller names each
/// device's IRQs (it has the machine model already; reading it here would cost every run).
pub fn start(
    root: &SysRoot,
    watched: &[Watch],
    cadence: Cadence,
) -> Result<SamplerHandle, SysError> {
    let device_irqs: Vec<Vec<u32>> = watched.iter().map(|w| w.irqs.clone()).collect();
    let devices: Vec<String> = watched.iter().map(|w| w.device.clone()).collect();
    let nics = watched.iter().map(|w| w.nic).collect();
    let mut reader = Reader::new(root.clone(), devices.clone()).with_nics(nics);
    let started = Instant::now();
    let started_unix_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_nanos() as f64);
    let first = reader.read(0)?;
    let (stop, stopped) = mpsc::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("iolab-sampler".into())
        .spawn(move || {
            let mut readings = vec![first];
            let mut errors = Vec::new();
            // Grid point `n` and its time.
            let mut n: u32 = 1;
            let mut next = started + cadence.after(0);
            loop {
                let wait = next.saturating_duration_since(Instant::now());
                let last = !matches!(
                    stopped.recv_timeout(wait),
                    Err(mpsc::RecvTimeoutError::Timeout)
                );
                let now = started.elapsed().as_nanos() as u64;
                match reader.read(now) {
                    Ok(r) => readings.push(r),
                    Err(e) => errors.push(e.to_string()),
                }
                if last {
                    break;
                }
                // Skip grid points a slow read already passed rather than bunching samples.
                loop {
                    next += cadence.after(n);
                    n = n.saturating_add(1);
                    if next > Instant::now() {
                        break;
                    }
                }
            }
            (readings, errors)
        })
        .map_err(|e| SysError::Io {
            path: "sampler thread".into(),
            source: e,
        })?;
    Ok(SamplerHandle {
        stop,
        thread,
        devices,
        device_irqs,
        started_unix_ns,
    })
}

impl SamplerHandle {
    /// Stops the sampler after one final reading and derives the intervals and summary.
    pub fn stop(self) -> SampleRun {
        let _ = self.stop.send(());
        let (readings, mut errors) = match self.thread.join() {
            Ok(r) => r,
            Err(_) => (Vec::new(), vec!["the sampler thread panicked".to_string()]),
        };
        let intervals = readings
            .windows(2)
            .map(|w| interval(&w[0], &w[1], &self.devices))
            .collect();
        let summary = summary(&readings, &self.devices, &self.device_irqs);
        if readings.len() < 2 {
            errors.push("fewer than two readings: no rates".to_string());
        }
        SampleRun {
            readings,
            devices: self.devices,
            device_irqs: self.device_irqs,
            intervals,
            summary,
            errors,
            started_unix_ns: self.started_unix_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/machines")
            .join(name)
    }

    /// The fixture's two readings, 2 s apart (its snapshot.json says so).
    fn two_readings() -> (Reading, Reading, Vec<String>) {
        let devices = vec![
            "nvme0n1".to_string(),
            "nvme1n1".to_string(),
            "gone".to_string(),
        ];
        let root = SysRoot::at(fixture("two-node-nvme")).unwrap();
        let later = SysRoot::at(fixture("two-node-nvme/later")).unwrap();
        let a = Reader::new(root, devices.clone()).read(0).unwrap();
        let b = Reader::new(later, devices.clone())
            .read(2_000_000_000)
            .unwrap();
        (a, b, devices)
    }

    #[test]
    fn derives_interrupt_rates_per_irq_and_cpu() {
        let (a, b, devices) = two_readings();
        let iv = interval(&a, &b, &devices);
        let nic = iv
            .irqs
            .iter()
            .find(|r| r.irq == IrqId::Number(160))
            .unwrap();
        assert_eq!(nic.total, Some(100_000.0));
        assert_eq!(
            nic.per_cpu.iter().find(|(c, _)| *c == 4).unwrap().1,
            Some(100_000.0)
        );
        assert_eq!(
            nic.per_cpu.iter().find(|(c, _)| *c == 5).unwrap().1,
            Some(0.0)
        );
        let cpu1 = iv.cpu_irq_per_s.iter().find(|(c, _)| *c == 1).unwrap().1;
        assert_eq!(cpu1, 15_000.0);
        assert_eq!(iv.irq_per_s, Some(100_000.0 + 15_000.0 + 2_000.0));
    }

    #[test]
    fn derives_cpu_shares_like_mpstat() {
        let (a, b, devices) = two_readings();
        let iv = interval(&a, &b, &devices);
        // cpu0 ticks: user 1000->1020, system 400->408, idle 9000->9180, iowait 20->20,
        // softirq 30->30 (all scaled by 1.02 and truncated by the fixture generator).
        let (_, c0) = iv.cpus.iter().find(|(c, _)| *c == 0).unwrap();
        let total = 20.0 + 8.0 + 180.0;
        assert!((c0.usr_pct - 2000.0 / total).abs() < 1e-9, "{c0:?}");
        assert!((c0.sys_pct - 800.0 / total).abs() < 1e-9);
        assert!((c0.idle_pct - 18000.0 / total).abs() < 1e-9);
        assert_eq!(c0.irq_pct, 0.0);
        assert_eq!(iv.cpus.len(), 15, "offline CPU 15 has no line");
    }

    #[test]
    fn derives_iostat_figures_and_names_metrics() {
        let (a, b, devices) = two_readings();
        let iv = interval(&a, &b, &devices);
        let (name, nvme0) = &iv.disks[0];
        assert_eq!(name, "nvme0n1");
        let r = nvme0.unwrap();
        // 1,000,000 -> 1,010,000 reads of 8 sectors in 2 s.
        assert_eq!(r.r_per_s, 5000.0);
        assert!((r.rmb_per_s - 5000.0 * 8.0 * 512.0 / 1e6).abs() < 1e-9);
        assert_eq!(
            iv.disks[2].1, None,
            "a device missing from diskstats has no figures"
        );
        let s = summary(&[a, b], &devices, &[vec![121, 122], vec![], vec![]]).unwrap();
        assert_eq!(s.devices["nvme0n1"]["dev_irq_per_s"], 17_000.0);
        assert_eq!(s.devices["nvme0n1"]["dev_r_per_s"], 5000.0);
        assert!(!s.devices["nvme1n1"].contains_key("dev_irq_per_s"));
        for k in [
            "usr_pct",
            "sys_pct",
            "irq_pct",
            "softirq_pct",
            "iowait_pct",
            "idle_pct",
            "irq_per_s",
        ] {
            assert!(s.system.contains_key(k), "{k}");
        }
    }

    /// A run of a few milliseconds passes a tick or two: its CPU shares ("usr 100%") are
    /// left out, its interrupt rate kept.
    #[test]
    fn a_run_of_few_ticks_has_no_cpu_shares() {
        let (a, mut b, devices) = two_readings();
        b.all_cpus = a.all_cpus;
        b.all_cpus.user += 1;
        let s = summary(&[a, b], &devices, &[vec![], vec![], vec![]]).unwrap();
        assert!(!s.system.contains_key("usr_pct"), "{:?}", s.system);
        assert!(!s.system.contains_key("idle_pct"), "{:?}", s.system);
        assert!(s.system.contains_key("irq_per_s"), "{:?}", s.system);
    }

    #[test]
    fn counters_that_go_backwards_give_no_value() {
        let (a, b, devices) = two_readings();
        let iv = interval(&b, &a, &devices);
        assert!(iv
            .irqs
            .iter()
            .filter(|r| r.irq == IrqId::Number(160))
            .all(|r| r.total.is_none()));
        assert!(iv.disks[0].1.is_none());
        assert!(iv.all_cpus.is_none());
        assert_eq!(iv.irq_per_s, None);
    }

    #[test]
    fn samples_the_live_machine_on_a_fixed_grid() {
        let root = SysRoot::live();
        let machine = crate::model::Machine::read(&root).unwrap();
        let watched: Vec<Watch> = machine
            .devices
            .iter()
            .take(2)
            .map(|d| Watch::of(&machine, &d.name))
            .collect();
        let h = start(&root, &watched, Cadence::every(Duration::from_millis(50))).unwrap();
        std::thread::sleep(Duration::from_millis(280));
        let run = h.stop();
        assert!(run.errors.is_empty(), "{:?}", run.errors);
        // 0, 50, ..., 250 ms and the final reading (7); a busy 2-core box may skip grid
        // points, but the first and the final reading are always there.
        assert!(run.readings.len() >= 3, "{}", run.readings.len());
        assert!(run.readings.len() <= 8, "{}", run.readings.len());
        assert!(run
            .readings
            .windows(2)
            .all(|w| w[0].elapsed_ns < w[1].elapsed_ns));
        assert_eq!(run.intervals.len(), run.readings.len() - 1);
        let s = run.summary.unwrap();
        let sum: f64 = [
            "usr_pct",
            "sys_pct",
            "irq_pct",
            "softirq_pct",
            "iowait_pct",
            "idle_pct",
        ]
        .iter()
        .map(|k| s.system[k])
        .sum();
        assert!(sum <= 100.0 + 1e-6, "{sum}");
        assert!(s.system["irq_per_s"] > 0.0, "the timer alone interrupts");
        // Readings share one layout while no IRQ comes or goes.
        let shared = run
            .readings
            .windows(2)
            .filter(|w| std::sync::Arc::ptr_eq(&w[0].irq_layout, &w[1].irq_layout))
            .count();
        assert!(shared > 0);
    }

    use crate::sys::parse::interrupts::IrqId;

    /// A run of unknown length is read every 20 ms for its first 100 readings (2 s), every
    /// 40 ms for the next 100, and so on up to the configured interval.
    #[test]
    fn a_cadence_slows_down_in_steps_up_to_its_longest() {
        let c = Cadence::unknown_length(Duration::from_secs(1));
        let ms = |n| c.after(n).as_millis();
        assert_eq!(
            [ms(0), ms(99), ms(100), ms(199), ms(200)],
            [20, 20, 40, 40, 80]
        );
        assert_eq!([ms(500), ms(600), ms(10_000)], [640, 1000, 1000]);
        let fixed = Cadence::every(Duration::from_millis(250));
        assert_eq!([fixed.after(0), fixed.after(5000)], [fixed.max, fixed.max]);
        // Configured finer than 20 ms: that throughout.
        let fine = Cadence::unknown_length(Duration::from_millis(10));
        assert_eq!(fine, Cadence::every(Duration::from_millis(10)));
    }
}

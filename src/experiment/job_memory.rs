//! The memory a cell's fio jobs hold, against what the machine can spare. As root nothing
//! limits either part:
//! - `lockmem` pins memory with mlock(2), once per job (`numjobs` clones each pin their own);
//!   fio only caps a job at the machine's RAM less 128 MiB (memory.c, `fio_pin_memory`);
//! - each job allocates its I/O buffers up front, the largest block size times `iodepth`,
//!   and every buffer in use is touched (a read fills it): fio 3.33 reading with `bs=64m
//!   iodepth=4` peaked at 262 MiB resident, against 29 MiB with `bs=4k iodepth=1`.
//!
//! A scratch device's backing file lies in /dev/shm, so what a workload writes to it stays in
//! memory until the experiment ends: with a workload that writes, the scratch devices' size
//! counts as well.
//!
//! An experiment file that asks for more than the machine has available makes the kernel
//! reclaim what it can and then kill processes, the machine owner's among them, to find the
//! rest. So a cell whose jobs would hold more than the machine has available, less a tenth of
//! its memory, is refused before anything is touched.

use anyhow::{bail, Result};

use super::file::{parse_size, Experiment};
use crate::preflight::parse::meminfo_kib;
use crate::sys::SysRoot;
use crate::workload::options::canonical;

/// What fio leaves unpinned when a job asks for more than the machine has.
const FIO_LEAVES: u64 = 128 << 20;

/// fio's block size when a job names none.
const FIO_DEFAULT_BS: u64 = 4096;

/// The bytes one job section's clones hold, all `numjobs` of them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Held {
    pinned: u64,
    buffers: u64,
}

/// What one job section's options (fio's last setting of each counts) hold on `mem`'s
/// machine; `Err` names a value iolab cannot read.
fn held_by(options: &[(String, String)], mem: &Memory) -> Result<Held, String> {
    let mem_total = mem.total_kib.map_or(u64::MAX, |t| t << 10);
    let last = |name: &str| {
        options
            .iter()
            .rev()
            .find(|(n, _)| canonical(n) == name)
            .map(|(_, v)| v.trim())
    };
    // fio's keywords stand alone for what fio reads there; in an expression (`$ncpus*2`,
    // which fio hands to bc) they are not worked out here.
    let value = |v: &str| match v {
        "$ncpus" => mem.cpus,
        "$mb_memory" => mem.total_kib.map(|k| k >> 10),
        "$pagesize" => Some(page_size()),
        _ => parse_size(v),
    };
    let count = |name: &str| match last(name) {
        None => Ok(1),
        Some(n) => value(n).ok_or_else(|| format!("{name} = {n}")),
    };
    let jobs = count("numjobs")?;
    let pinned = match last("lockmem") {
        None => 0,
        Some(l) => value(l)
            .ok_or_else(|| format!("lockmem = {l}"))?
            .min(mem_total.saturating_sub(FIO_LEAVES)),
    };
    // Every size in the block-size options (`4k,64k`, `1k-1m`, `4k/10:64k/90`) bounds the
    // largest; a percentage read as bytes stays below any real block size.
    let largest_bs = ["bs", "bsrange", "bssplit"]
        .iter()
        .filter_map(|o| last(o))
        .flat_map(|v| v.split([',', '-', ':', '/']))
        .filter_map(value)
        .max()
        .unwrap_or(FIO_DEFAULT_BS);
    Ok(Held {
        pinned: pinned.saturating_mul(jobs),
        buffers: largest_bs
            .saturating_mul(count("iodepth")?)
            .saturating_mul(jobs),
    })
}

/// This machine's page size: fio's `$pagesize`.
fn page_size() -> u64 {
    // SAFETY: sysconf(3) reads a constant of the running system.
    u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

/// A machine's memory (KiB, from its /proc/meminfo) and how messages name it and that file.
pub(crate) struct Memory<'a> {
    pub total_kib: Option<u64>,
    pub available_kib: Option<u64>,
    /// CPUs online: fio's `$ncpus`.
    pub cpus: Option<u64>,
    pub machine: &'a str,
    pub meminfo: &'a str,
}

/// Refuses the experiment when a cell's fio jobs, run on this machine, would hold more memory
/// than `root`'s /proc/meminfo says it can spare; `scratch_bytes` is what the run's scratch
/// devices can take in /dev/shm (0 when it uses none, or nothing writes).
pub(crate) fn check(exp: &Experiment, root: &SysRoot, scratch_bytes: u64) -> Result<()> {
    if !exp.engine.engine().runs_job_file() || !exp.target.hosts.is_empty() {
        return Ok(());
    }
    let meminfo = root.read_optional("/proc/meminfo").ok().flatten();
    let kib = |field| meminfo.as_deref().and_then(|m| meminfo_kib(m, field));
    let (machine, meminfo_name) = if root.is_live() {
        ("this machine", "/proc/meminfo")
    } else {
        ("the snapshot's machine", "the snapshot's proc/meminfo")
    };
    check_on(
        exp,
        &Memory {
            total_kib: kib("MemTotal"),
            available_kib: kib("MemAvailable"),
            cpus: crate::sys::online_cpus(root).map(|c| c.len() as u64),
            machine,
            meminfo: meminfo_name,
        },
        scratch_bytes,
    )
}

/// Refuses the experiment when a cell's fio jobs (with `scratch_bytes` of scratch data) would
/// hold more than `mem` can spare.
pub(crate) fn check_on(exp: &Experiment, mem: &Memory, scratch_bytes: u64) -> Result<()> {
    let (total, available, machine) = (mem.total_kib, mem.available_kib, mem.machine);
    for cell in super::cells(exp) {
        let Ok(job) = cell.job(exp, "-", None) else {
            continue;
        };
        let mut held = Held::default();
        for options in std::iter::once(&job.options).chain(job.also.iter().map(|j| &j.options)) {
            let h = held_by(options, mem).map_err(|what| {
                anyhow::anyhow!("{what}: iolab cannot tell how much memory the jobs hold")
            })?;
            held.pinned = held.pinned.saturating_add(h.pinned);
            held.buffers = held.buffers.saturating_add(h.buffers);
        }
        let (Some(total), Some(available)) = (total, available) else {
            // Every job has buffers; pinning is what a file asks for on purpose.
            if held.pinned > 0 {
                bail!(
                    "the workload pins memory (lockmem), but {} cannot be read to check that \
                     the machine can spare it",
                    mem.meminfo
                );
            }
            continue;
        };
        let spare = (available << 10).saturating_sub((total << 10) / 10);
        let all = held
            .pinned
            .saturating_add(held.buffers)
            .saturating_add(scratch_bytes);
        if all > spare {
            let mut parts = Vec::new();
            if held.pinned > 0 {
                parts.push(format!("{} pinned by lockmem", size(held.pinned)));
            }
            parts.push(format!(
                "{} of I/O buffers: the largest block size times iodepth, per job",
                size(held.buffers)
            ));
            if scratch_bytes > 0 {
                // Filled by the cells that write, and held from then on by every cell.
                let writer = super::cells(exp)
                    .into_iter()
                    .find(|c| c.writes(exp).is_some())
                    .filter(|_| !exp.factors.is_empty())
                    .map_or("the workload writes".to_string(), |c| {
                        format!("cell `{}` fills (they hold it for the runs after)", c.key)
                    });
                parts.push(format!(
                    "{} of scratch devices in /dev/shm, which {writer}",
                    size(scratch_bytes)
                ));
            }
            let mut lower = vec!["the block size", "iodepth", "numjobs"];
            if held.pinned > 0 {
                lower.insert(0, "lockmem");
            }
            if scratch_bytes > 0 {
                lower.push("[target] size");
            }
            let last = lower.pop().unwrap_or_default();
            bail!(
                "{}: it would hold {} of memory ({}), but {machine} has {} available and keeps \
                 a tenth of its {} free, so it can spare {}: the kernel would reclaim and then \
                 kill processes to find the rest; lower {} or {last} (nothing was touched)",
                if exp.factors.is_empty() {
                    "the workload".to_string()
                } else {
                    format!("cell `{}`", cell.key)
                },
                size(all),
                parts.join("; "),
                size(available << 10),
                size(total << 10),
                size(spare),
                lower.join(", ")
            );
        }
    }
    Ok(())
}

/// Bytes in the largest binary unit that keeps them at 1 or more (`1.5 GiB`, `512.0 MiB`).
fn size(bytes: u64) -> String {
    let b = bytes as f64;
    match bytes {
        b0 if b0 >= 1 << 30 => format!("{:.1} GiB", b / f64::from(1 << 30)),
        b0 if b0 >= 1 << 20 => format!("{:.1} MiB", b / f64::from(1 << 20)),
        _ => format!("{:.1} KiB", b / 1024.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(pairs: &[(&str, &str)]) -> Result<Held, String> {
        let options: Vec<(String, String)> = pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        held_by(
            &options,
            &Memory {
                total_kib: Some(8 << 20),
                available_kib: Some(4 << 20),
                cpus: Some(6),
                machine: "m",
                meminfo: "m/meminfo",
            },
        )
    }

    #[test]
    fn a_job_holds_its_lockmem_capped_as_fio_caps_it_and_its_buffers() {
        let (k, g) = (1u64 << 10, 1u64 << 30);
        assert_eq!(
            held(&[]),
            Ok(Held {
                pinned: 0,
                buffers: 4 * k
            })
        );
        assert_eq!(
            held(&[("lockmem", "1g"), ("numjobs", "3")]),
            Ok(Held {
                pinned: 3 * g,
                buffers: 12 * k
            })
        );
        // The last setting counts; fio leaves 128 MiB of RAM unpinned per job.
        assert_eq!(
            held(&[("lockmem", "1g"), ("lockmem", "64g")]).map(|h| h.pinned),
            Ok(8 * g - FIO_LEAVES)
        );
        // The largest block size of any direction, range or split, times the depth.
        for (option, value) in [
            ("blocksize", "4k,1m"),
            ("bsrange", "4k-1m"),
            ("bssplit", "4k/10:1m/90"),
        ] {
            assert_eq!(
                held(&[(option, value), ("iodepth", "32"), ("numjobs", "2")]).map(|h| h.buffers),
                Ok(64 << 20),
                "{option}"
            );
        }
        assert!(held(&[("lockmem", "1.5g")]).is_err());
        // fio's keywords, alone, are the numbers fio puts in their place: 6 CPUs, 8192 MB
        // (bytes, to lockmem); not in an expression (which fio hands to bc).
        assert_eq!(
            held(&[("numjobs", "$ncpus"), ("bs", "$pagesize")]).map(|h| h.buffers),
            Ok(6 * page_size())
        );
        assert_eq!(
            held(&[("lockmem", "$mb_memory")]).map(|h| h.pinned),
            Ok(8192)
        );
        assert_eq!(
            held(&[("numjobs", "$ncpus*2")]),
            Err("numjobs = $ncpus*2".to_string())
        );
    }
}

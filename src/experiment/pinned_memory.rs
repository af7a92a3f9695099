//! fio's `lockmem` pins memory with mlock(2), once per job (`numjobs` clones each pin their
//! own), and as root nothing limits it: fio only caps each job at the machine's RAM less
//! 128 MiB (memory.c, `fio_pin_memory`). An experiment file that pins more than the machine
//! has available makes the kernel reclaim everything it can and then kill processes, the
//! machine owner's among them, to find the rest. So iolab refuses, before anything is touched,
//! a cell whose jobs would pin more than the machine has available less a tenth of its memory.

use anyhow::{bail, Result};

use super::file::{parse_size, Experiment};
use crate::preflight::parse::meminfo_kib;
use crate::sys::SysRoot;
use crate::workload::options::canonical;

/// What fio leaves unpinned when a job asks for more than the machine has.
const FIO_LEAVES: u64 = 128 << 20;

/// The bytes one job's options pin: `lockmem` (fio's last setting counts) times `numjobs`,
/// each clone capped as fio caps it; `Err` with what could not be read.
fn pinned_by(options: &[(String, String)], mem_total: u64) -> Result<u64, String> {
    let last = |name: &str| {
        options
            .iter()
            .rev()
            .find(|(n, _)| canonical(n) == name)
            .map(|(_, v)| v.trim())
    };
    let Some(lockmem) = last("lockmem") else {
        return Ok(0);
    };
    let bytes = parse_size(lockmem).ok_or_else(|| format!("lockmem = {lockmem}"))?;
    let jobs = match last("numjobs") {
        None => 1,
        Some(n) => n.parse::<u64>().map_err(|_| format!("numjobs = {n}"))?,
    };
    Ok(bytes
        .min(mem_total.saturating_sub(FIO_LEAVES))
        .saturating_mul(jobs))
}

/// Refuses the experiment when a cell's fio jobs, run on this machine, would pin more memory
/// than `root`'s /proc/meminfo says it can spare.
pub(crate) fn check(exp: &Experiment, root: &SysRoot) -> Result<()> {
    if !exp.engine.engine().runs_job_file() || !exp.target.hosts.is_empty() {
        return Ok(());
    }
    let meminfo = root.read_optional("/proc/meminfo").ok().flatten();
    let kib = |field| meminfo.as_deref().and_then(|m| meminfo_kib(m, field));
    let (total, available) = (kib("MemTotal"), kib("MemAvailable"));
    for cell in super::cells(exp) {
        let Ok(job) = cell.job(exp, "-", None) else {
            continue;
        };
        let mut pinned = 0u64;
        for options in std::iter::once(&job.options).chain(job.also.iter().map(|j| &j.options)) {
            pinned += pinned_by(options, total.map_or(u64::MAX, |t| t << 10)).map_err(|what| {
                anyhow::anyhow!("{what}: iolab cannot tell how much memory it pins")
            })?;
        }
        if pinned == 0 {
            continue;
        }
        let (Some(total), Some(available)) = (total, available) else {
            bail!(
                "the workload pins memory (lockmem), but {} cannot be read to check that the \
                 machine can spare it",
                if root.is_live() {
                    "/proc/meminfo"
                } else {
                    "the snapshot's proc/meminfo"
                }
            );
        };
        let spare = (available << 10).saturating_sub((total << 10) / 10);
        if pinned > spare {
            let gib = |b: u64| format!("{:.1} GiB", b as f64 / f64::from(1 << 30));
            bail!(
                "{}: its fio jobs would pin {} of memory (lockmem, per job), but {} has {} \
                 available and keeps a tenth of its {} free, so it can spare {}: the \
                 kernel would reclaim and then kill processes to find the rest; lower lockmem \
                 or numjobs (nothing was touched)",
                if exp.factors.is_empty() {
                    "the workload".to_string()
                } else {
                    format!("cell `{}`", cell.key)
                },
                gib(pinned),
                if root.is_live() {
                    "this machine"
                } else {
                    "the snapshot's machine"
                },
                gib(available << 10),
                gib(total << 10),
                gib(spare)
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn each_job_pins_its_lockmem_capped_as_fio_caps_it() {
        let gib = 1u64 << 30;
        assert_eq!(pinned_by(&opts(&[("bs", "4k")]), 8 * gib), Ok(0));
        assert_eq!(pinned_by(&opts(&[("lockmem", "1g")]), 8 * gib), Ok(gib));
        assert_eq!(
            pinned_by(&opts(&[("lockmem", "1g"), ("numjobs", "3")]), 8 * gib),
            Ok(3 * gib)
        );
        // The last setting counts; fio leaves 128 MiB of RAM unpinned per job.
        assert_eq!(
            pinned_by(&opts(&[("lockmem", "1g"), ("lockmem", "64g")]), 8 * gib),
            Ok(8 * gib - FIO_LEAVES)
        );
        assert!(pinned_by(&opts(&[("lockmem", "1.5g")]), 8 * gib).is_err());
    }
}

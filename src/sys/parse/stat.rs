//! /proc/stat: cumulative CPU time per CPU (in USER_HZ ticks), keyed by the CPU id printed
//! on each `cpuN` line — offline CPUs are simply missing, so position is never the id —
//! plus the interrupt, context-switch and process counters. Older kernels print fewer time
//! columns; missing ones read as zero.

use super::{number, ParseError};
use std::collections::BTreeMap;

/// Cumulative CPU time in ticks, in the kernel's column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    pub guest: u64,
    pub guest_nice: u64,
}

impl CpuTimes {
    /// All ticks. guest and guest_nice are already counted in user and nice, so they are
    /// left out, as top and mpstat do.
    pub(crate) fn total(&self) -> u64 {
        [
            self.nice,
            self.system,
            self.idle,
            self.iowait,
            self.irq,
            self.softirq,
            self.steal,
        ]
        .iter()
        .fold(self.user, |a, b| a.saturating_add(*b))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Stat {
    /// The aggregate `cpu` line.
    pub all: CpuTimes,
    pub cpus: BTreeMap<u32, CpuTimes>,
    /// First number of the `intr` line: all interrupts since boot.
    pub interrupts: u64,
    pub context_switches: u64,
    pub procs_running: u64,
    pub procs_blocked: u64,
    /// First number of the `softirq` line.
    pub softirqs: u64,
}

/// Parses the whole text of /proc/stat.
pub(crate) fn stat(text: &str) -> Result<Stat, ParseError> {
    let mut out = Stat::default();
    let mut saw_cpu = false;
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        let mut fields = line.split_whitespace();
        let Some(key) = fields.next() else { continue };
        if let Some(id) = key.strip_prefix("cpu") {
            let times = cpu_times(fields, key, lineno)?;
            if id.is_empty() {
                out.all = times;
                saw_cpu = true;
            } else {
                let id = id
                    .parse::<u32>()
                    .map_err(|_| ParseError::new(lineno, format!("bad CPU line key {key:?}")))?;
                out.cpus.insert(id, times);
            }
            continue;
        }
        let first = |fields: &mut std::str::SplitWhitespace| -> Result<u64, ParseError> {
            let f = fields
                .next()
                .ok_or_else(|| ParseError::new(lineno, format!("{key}: missing value")))?;
            number(f, key, lineno)
        };
        match key {
            "intr" => out.interrupts = first(&mut fields)?,
            "ctxt" => out.context_switches = first(&mut fields)?,
            "procs_running" => out.procs_running = first(&mut fields)?,
            "procs_blocked" => out.procs_blocked = first(&mut fields)?,
            "softirq" => out.softirqs = first(&mut fields)?,
            _ => {}
        }
    }
    if !saw_cpu {
        return Err(ParseError::new(0, "no `cpu` line: not a /proc/stat file"));
    }
    Ok(out)
}

fn cpu_times<'a>(
    fields: impl Iterator<Item = &'a str>,
    key: &str,
    lineno: usize,
) -> Result<CpuTimes, ParseError> {
    let mut v = [0u64; 10];
    let mut n = 0;
    for f in fields {
        if n < v.len() {
            v[n] = number(f, key, lineno)?;
        }
        n += 1;
    }
    // user nice system idle are present on every kernel since 2.4.
    if n < 4 {
        return Err(ParseError::new(
            lineno,
            format!("{key}: expected at least 4 time columns, found {n}"),
        ));
    }
    Ok(CpuTimes {
        user: v[0],
        nice: v[1],
        system: v[2],
        idle: v[3],
        iowait: v[4],
        irq: v[5],
        softirq: v[6],
        steal: v[7],
        guest: v[8],
        guest_nice: v[9],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_cpus_by_id_with_offline_cpus_missing() {
        let text = "cpu  3071 0 1304 40900 2107 0 62 1 0 0\n\
cpu0 1224 0 488 21759 222 0 26 0 0 0\n\
cpu2 1846 0 815 19141 1885 0 35 0 0 0\n\
intr 127902 0 0 5\n\
ctxt 235083\n\
btime 1763776000\n\
processes 4321\n\
procs_running 3\n\
procs_blocked 1\n\
softirq 9999 1 2 3\n";
        let s = stat(text).unwrap();
        assert_eq!(s.cpus.keys().copied().collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(s.cpus[&2].iowait, 1885);
        assert_eq!(s.all.softirq, 62);
        assert_eq!(s.all.total(), 3071 + 1304 + 40900 + 2107 + 62 + 1);
        assert_eq!(s.interrupts, 127902);
        assert_eq!(s.context_switches, 235083);
        assert_eq!((s.procs_running, s.procs_blocked, s.softirqs), (3, 1, 9999));
    }

    #[test]
    fn old_kernels_with_four_columns() {
        let s = stat("cpu 1 2 3 4\ncpu0 1 2 3 4\n").unwrap();
        assert_eq!(s.cpus[&0].idle, 4);
        assert_eq!(s.cpus[&0].iowait, 0);
    }

    #[test]
    fn garbage_names_the_line() {
        assert_eq!(stat("cpu 1 2 3 4\ncpu0 1 x 3 4\n").unwrap_err().line, 2);
        assert_eq!(stat("cpu 1 2\n").unwrap_err().line, 1);
        assert_eq!(stat("cpuX 1 2 3 4\n").unwrap_err().line, 1);
        assert_eq!(stat("").unwrap_err().line, 0);
        assert_eq!(stat("cpu 1 2 3 4\nctxt\n").unwrap_err().line, 2);
    }
}

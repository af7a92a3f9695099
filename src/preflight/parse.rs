//! Pure parsers and judgements for preflight: text of /proc and /sys files in, values and
//! verdicts out. No I/O here, so every rule is tested against pasted text.

/// The first "model name" of /proc/cpuinfo (x86), else "Processor"/"cpu model" (arm, others).
pub(crate) fn cpu_model(cpuinfo: &str) -> Option<String> {
    ["model name", "Processor", "cpu model", "uarch"]
        .iter()
        .find_map(|key| {
            cpuinfo.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == *key && !v.trim().is_empty()).then(|| v.trim().to_string())
            })
        })
}

/// True when /proc/cpuinfo's flags include `hypervisor` (x86 guests).
pub(crate) fn has_hypervisor_flag(cpuinfo: &str) -> bool {
    cpuinfo.lines().any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim() == "flags" && v.split_whitespace().any(|f| f == "hypervisor")
        })
    })
}

/// The 1, 5 and 15 minute load averages.
pub(crate) fn loadavg(text: &str) -> Option<[f64; 3]> {
    let mut it = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// (SwapTotal, SwapFree) in KiB from /proc/meminfo.
pub(crate) fn swap_kib(meminfo: &str) -> Option<(u64, u64)> {
    Some((
        meminfo_kib(meminfo, "SwapTotal")?,
        meminfo_kib(meminfo, "SwapFree")?,
    ))
}

/// One field of /proc/meminfo (`MemTotal`, `Cached`, ...), in KiB.
pub(crate) fn meminfo_kib(meminfo: &str, name: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse::<u64>().ok()
    })
}

/// The value of `name=` on the kernel command line, if given.
pub(crate) fn cmdline_param<'a>(cmdline: &'a str, name: &str) -> Option<&'a str> {
    cmdline
        .split_whitespace()
        .take_while(|w| *w != "--")
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
}

/// One process's name and CPU time (utime + stime, in clock ticks) from /proc/PID/stat. The
/// name is in parentheses and may itself contain spaces and ')', so fields are counted from
/// the last ')'.
pub(crate) fn proc_stat_ticks(stat: &str) -> Option<(String, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // After ")": state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
    // utime(14) stime(15): indices 11 and 12 here.
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    Some((name, utime + stime))
}

/// A process that used CPU during the sampling window.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct BusyProcess {
    pub pid: u32,
    pub name: String,
    /// Percent of one CPU over the window.
    pub cpu_pct: f64,
}

/// Processes above `threshold_pct` of one CPU between two readings of (pid, name, ticks),
/// busiest first. A pid missing from either reading (started or exited) is ignored; a counter
/// that went backwards (pid reused) gives no value.
pub(crate) fn busy_processes(
    before: &[(u32, String, u64)],
    after: &[(u32, String, u64)],
    elapsed_s: f64,
    ticks_per_s: f64,
    threshold_pct: f64,
) -> Vec<BusyProcess> {
    if elapsed_s <= 0.0 || ticks_per_s <= 0.0 {
        return Vec::new();
    }
    let mut out: Vec<BusyProcess> = after
        .iter()
        .filter_map(|(pid, name, t1)| {
            let (_, _, t0) = before.iter().find(|(p, n, _)| p == pid && n == name)?;
            let d = t1.checked_sub(*t0)?;
            let cpu_pct = d as f64 / ticks_per_s / elapsed_s * 100.0;
            (cpu_pct > threshold_pct).then(|| BusyProcess {
                pid: *pid,
                name: name.clone(),
                cpu_pct,
            })
        })
        .collect();
    out.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct).then(a.pid.cmp(&b.pid)));
    out
}

/// The aggregate "cpu" line of /proc/stat: (total ticks, steal ticks).
pub(crate) fn cpu_total_and_steal(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<Vec<u64>>>()?;
    // user nice system idle iowait irq softirq steal guest guest_nice; guest time is already
    // counted in user/nice, so the total is the first eight.
    let total = v.iter().take(8).sum();
    Some((total, v.get(7).copied().unwrap_or(0)))
}

/// Groups per-CPU values ("performance" x 62, "powersave" x 2) into "performance (62), powersave (2)"
/// or just the value when all agree.
pub(crate) fn summarise_values(values: &[String]) -> String {
    let mut groups: Vec<(String, usize)> = Vec::new();
    for v in values {
        match groups.iter_mut().find(|(g, _)| g == v) {
            Some((_, n)) => *n += 1,
            None => groups.push((v.clone(), 1)),
        }
    }
    if groups.len() == 1 {
        return groups.remove(0).0;
    }
    groups
        .iter()
        .map(|(v, n)| format!("{v} ({n})"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPUINFO: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz\nflags\t\t: fpu vme de pse hypervisor lahf_lm\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz\n";

    #[test]
    fn reads_cpu_model_and_hypervisor() {
        assert_eq!(
            cpu_model(CPUINFO).unwrap(),
            "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"
        );
        assert!(has_hypervisor_flag(CPUINFO));
        assert!(!has_hypervisor_flag("flags\t: fpu hypervisorx\n"));
        assert_eq!(
            cpu_model("Processor\t: ARMv7 rev 4\n").unwrap(),
            "ARMv7 rev 4"
        );
        assert_eq!(cpu_model(""), None);
    }

    #[test]
    fn reads_load_swap_and_cmdline() {
        assert_eq!(
            loadavg("0.52 1.10 0.98 2/345 6789\n"),
            Some([0.52, 1.10, 0.98])
        );
        assert_eq!(loadavg("x"), None);
        let mi = "MemTotal: 100 kB\nSwapTotal:  2048 kB\nSwapFree:   1024 kB\n";
        assert_eq!(swap_kib(mi), Some((2048, 1024)));
        assert_eq!(swap_kib("MemTotal: 1 kB\n"), None);
        let cl = "quiet intel_idle.max_cstate=1 idle=poll -- init=x processor.max_cstate=9";
        assert_eq!(cmdline_param(cl, "intel_idle.max_cstate"), Some("1"));
        assert_eq!(cmdline_param(cl, "idle"), Some("poll"));
        assert_eq!(
            cmdline_param(cl, "processor.max_cstate"),
            None,
            "after -- belongs to init"
        );
    }

    #[test]
    fn reads_process_ticks_with_odd_names() {
        let stat =
            "1234 (my (odd) proc) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 100 0 0";
        assert_eq!(proc_stat_ticks(stat), Some(("my (odd) proc".into(), 300)));
        assert_eq!(proc_stat_ticks("garbage"), None);
        assert_eq!(proc_stat_ticks("1 (x) S 1"), None);
    }

    #[test]
    fn finds_busy_processes_between_two_readings() {
        let before = vec![
            (1, "idle".to_string(), 100),
            (2, "fio".to_string(), 1000),
            (3, "reused".to_string(), 500),
            (4, "gone".to_string(), 0),
        ];
        let after = vec![
            (1, "idle".to_string(), 100),
            (2, "fio".to_string(), 1010),
            (3, "reused".to_string(), 10),
            (5, "new".to_string(), 50),
        ];
        // 10 ticks at 100 Hz over 0.2 s = 50% of a CPU.
        let busy = busy_processes(&before, &after, 0.2, 100.0, 5.0);
        assert_eq!(
            busy,
            vec![BusyProcess {
                pid: 2,
                name: "fio".into(),
                cpu_pct: 50.0
            }]
        );
        assert!(busy_processes(&before, &after, 0.0, 100.0, 5.0).is_empty());
    }

    #[test]
    fn reads_steal_and_groups_values() {
        let stat = "cpu  100 0 50 800 10 0 5 35 20 0\ncpu0 1 2 3\n";
        assert_eq!(cpu_total_and_steal(stat), Some((1000, 35)));
        let v: Vec<String> = ["performance", "powersave", "performance"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(summarise_values(&v), "performance (2), powersave (1)");
        assert_eq!(summarise_values(&v[..1]), "performance");
    }
}

//! Preflight: what on this machine makes I/O numbers noisy or different from another machine's
//! — frequency scaling, turbo, SMT, deep C-states, irqbalance, THP, swap, load, other busy
//! processes, virtualisation. Each finding is recorded with the experiment (so a later
//! `compare` can explain a difference) and printed with advice before a run. Everything is read
//! through a `SysRoot`; the only thing that needs the live machine is the short sampling of
//! CPU use (busy processes, steal time), which is skipped for a snapshot.

pub(crate) mod parse;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::sys::SysRoot;

/// How much a finding matters for the numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Severity {
    /// Recorded for comparison; no action needed.
    Info,
    /// Likely to add noise or bias; the advice says what to change.
    Warn,
}

/// One fact about the machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Finding {
    pub key: String,
    pub value: String,
    pub severity: Severity,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advice: Option<String>,
}

impl Finding {
    fn info(key: &str, value: impl Into<String>) -> Finding {
        Finding {
            key: key.into(),
            value: value.into(),
            severity: Severity::Info,
            advice: None,
        }
    }

    fn warn(key: &str, value: impl Into<String>, advice: impl Into<String>) -> Finding {
        Finding {
            key: key.into(),
            value: value.into(),
            severity: Severity::Warn,
            advice: Some(advice.into()),
        }
    }

    fn note(mut self, advice: impl Into<String>) -> Finding {
        self.advice = Some(advice.into());
        self
    }
}

/// How long to watch per-process CPU use.
pub(crate) const DEFAULT_SAMPLE: Duration = Duration::from_millis(200);
/// A process above this share of one CPU is "busy".
pub(crate) const BUSY_THRESHOLD_PCT: f64 = 5.0;

/// Collects all findings. `sample` is how long CPU use is watched on a live machine.
pub(crate) fn collect(root: &SysRoot, sample: Duration) -> Vec<Finding> {
    let mut f = machine_state(root);
    irqbalance(root, &mut f);
    irq_daemon(root, &mut f);
    if root.is_live() {
        f.push(fio_confinement());
        activity(root, sample, &mut f);
    } else {
        f.push(Finding::info(
            "busy_processes",
            "not measured (snapshot root)",
        ));
    }
    f
}

/// The findings about the machine itself (not its processes): what a snapshot must hold for
/// `preflight --root` to tell the same.
fn machine_state(root: &SysRoot) -> Vec<Finding> {
    let mut f = Vec::new();
    let cpus = online_cpus(root);
    identity(root, &mut f);
    frequency(root, &cpus, &mut f);
    smt_and_idle(root, &cpus, &mut f);
    memory(root, &mut f);
    load(root, cpus.len().max(1), &mut f);
    f
}

/// Reads what [`machine_state`] reads, for `snapshot` to copy (no process's files).
pub(crate) fn snapshot_reads(root: &SysRoot) -> anyhow::Result<()> {
    machine_state(root);
    Ok(())
}

fn online_cpus(root: &SysRoot) -> Vec<u32> {
    crate::sys::online_cpus(root).unwrap_or_default()
}

fn identity(root: &SysRoot, f: &mut Vec<Finding>) {
    if let Some(h) = root.attr("/proc/sys/kernel/hostname") {
        f.push(Finding::info("host", h));
    }
    if let Some(k) = root.attr("/proc/sys/kernel/osrelease") {
        f.push(Finding::info("kernel", k));
    }
    let cpuinfo = root
        .read_optional("/proc/cpuinfo")
        .ok()
        .flatten()
        .unwrap_or_default();
    if let Some(m) = parse::cpu_model(&cpuinfo) {
        f.push(Finding::info("cpu.model", m));
    }
    f.push(Finding::info(
        "cpu.online",
        online_cpus(root).len().to_string(),
    ));
    let hv = root.attr("/sys/hypervisor/type");
    if parse::has_hypervisor_flag(&cpuinfo) || hv.is_some() {
        f.push(
            Finding::info("virtualization", hv.unwrap_or_else(|| "guest (hypervisor flag)".into()))
                .note("a guest: steal time, virtual interrupts and host load add noise; compare only runs from the same host"),
        );
    } else if !root.is_live() && !root.exists("/proc/cpuinfo") {
        f.push(Finding::info(
            "virtualization",
            not_in_root("/proc/cpuinfo"),
        ));
    } else {
        f.push(Finding::info("virtualization", "none detected"));
    }
}

/// What a snapshot root that lacks `file` says of the finding read from it: unknown, not
/// absent (a snapshot made before preflight's files were copied, or a hand-made tree).
fn not_in_root(file: &str) -> String {
    format!("not recorded (this root holds no {file})")
}

fn frequency(root: &SysRoot, cpus: &[u32], f: &mut Vec<Finding>) {
    let per_cpu = |attr: &str| -> Vec<String> {
        cpus.iter()
            .filter_map(|c| root.attr(&format!("/sys/devices/system/cpu/cpu{c}/cpufreq/{attr}")))
            .collect()
    };
    let governors = per_cpu("scaling_governor");
    // A snapshot records cpufreq where the machine has it: none in one is none there.
    if governors.is_empty() {
        f.push(Finding::info(
            "cpufreq.governor",
            "none (no cpufreq: fixed frequency or a VM)",
        ));
    } else {
        let summary = parse::summarise_values(&governors);
        if governors.iter().all(|g| g == "performance") {
            f.push(Finding::info("cpufreq.governor", summary));
        } else {
            f.push(Finding::warn(
                "cpufreq.governor",
                summary,
                "frequency follows load, so numbers vary run to run; set the performance governor (cpupower frequency-set -g performance)",
            ));
        }
        let drivers = per_cpu("scaling_driver");
        if !drivers.is_empty() {
            f.push(Finding::info(
                "cpufreq.driver",
                parse::summarise_values(&drivers),
            ));
        }
    }
    if let Some(no_turbo) = root.attr("/sys/devices/system/cpu/intel_pstate/no_turbo") {
        if no_turbo == "0" {
            f.push(Finding::warn(
                "turbo",
                "on (intel_pstate)",
                "turbo frequency depends on temperature and how many cores are busy; for stable numbers: echo 1 > /sys/devices/system/cpu/intel_pstate/no_turbo",
            ));
        } else {
            f.push(Finding::info("turbo", "off (intel_pstate)"));
        }
    } else if let Some(boost) = root.attr("/sys/devices/system/cpu/cpufreq/boost") {
        if boost == "1" {
            f.push(Finding::warn(
                "turbo",
                "on (cpufreq boost)",
                "boost frequency depends on temperature and load; for stable numbers: echo 0 > /sys/devices/system/cpu/cpufreq/boost",
            ));
        } else {
            f.push(Finding::info("turbo", "off (cpufreq boost)"));
        }
    } else {
        f.push(Finding::info("turbo", "not exposed"));
    }
}

fn smt_and_idle(root: &SysRoot, cpus: &[u32], f: &mut Vec<Finding>) {
    match root.attr("/sys/devices/system/cpu/smt/control") {
        Some(c) => {
            let active = root
                .attr("/sys/devices/system/cpu/smt/active")
                .unwrap_or_default();
            // The kernel's words for SMT that cannot be switched on, said plainly.
            let control = match c.as_str() {
                "notsupported" => "not supported (the CPUs have no SMT siblings)",
                "notimplemented" => "not implemented (the kernel cannot switch SMT)",
                "forceoff" => "forced off (nosmt=force on the kernel command line)",
                other => other,
            };
            let finding = Finding::info(
                "smt",
                format!("{control}{}", if active == "1" { " (active)" } else { "" }),
            );
            f.push(if active == "1" {
                finding.note("SMT siblings share a core: placements on siblings interfere; iolab's near/far placement accounts for it")
            } else {
                finding
            });
        }
        None if !root.is_live() => f.push(Finding::info(
            "smt",
            not_in_root("/sys/devices/system/cpu/smt/control"),
        )),
        None => f.push(Finding::info("smt", "not exposed")),
    }
    let base = "/sys/devices/system/cpu/cpuidle";
    let driver = root.attr(&format!("{base}/current_driver"));
    if let Some(driver) = &driver {
        f.push(Finding::info("cpuidle.driver", driver));
    }
    if let Some(gov) = root
        .attr(&format!("{base}/current_governor"))
        .or_else(|| root.attr(&format!("{base}/current_governor_ro")))
    {
        f.push(Finding::info("cpuidle.governor", gov));
    }
    let cmdline = root.attr("/proc/cmdline");
    if cmdline.is_none() && !root.is_live() {
        // A snapshot leaves the command line out (it can hold secrets).
        f.push(Finding::info(
            "cstate.limits",
            "not recorded (this root holds no /proc/cmdline: a snapshot leaves it out)",
        ));
    }
    let cmdline = cmdline.unwrap_or_default();
    let mut limits = Vec::new();
    for p in ["intel_idle.max_cstate", "processor.max_cstate", "idle"] {
        if let Some(v) = parse::cmdline_param(&cmdline, p) {
            limits.push(format!("{p}={v}"));
        }
    }
    // intel_idle's parameter limits nothing unless it is the driver in use: built in, it is
    // there on AMD machines and on guests whose driver is haltpoll or acpi_idle too.
    if driver.as_deref() == Some("intel_idle") {
        if let Some(v) = root.attr("/sys/module/intel_idle/parameters/max_cstate") {
            limits.push(format!("intel_idle max_cstate={v}"));
        }
    }
    if !limits.is_empty() {
        f.push(Finding::info("cstate.limits", limits.join(", ")));
    }
    // The deepest idle state still enabled on the first CPU, and its exit latency.
    if let Some(cpu) = cpus.first() {
        let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle");
        let mut deepest: Option<(String, u64)> = None;
        for state in root.list_optional(&dir).unwrap_or_default() {
            if !state.starts_with("state") {
                continue;
            }
            let s = format!("{dir}/{state}");
            if root.attr(&format!("{s}/disable")).as_deref() == Some("1") {
                continue;
            }
            let lat = root
                .attr(&format!("{s}/latency"))
                .and_then(|l| l.parse().ok())
                .unwrap_or(0);
            let name = root.attr(&format!("{s}/name")).unwrap_or(state.clone());
            if deepest.as_ref().is_none_or(|(_, l)| lat > *l) {
                deepest = Some((name, lat));
            }
        }
        match deepest {
            Some((name, lat)) if lat > 10 => f.push(Finding::warn(
                "cstate.deepest",
                format!("{name} (exit latency {lat} us)"),
                "deep idle states add wake-up latency to every interrupt; for latency runs limit them (cpupower idle-set -D 10)",
            )),
            Some((name, lat)) => f.push(Finding::info("cstate.deepest", format!("{name} (exit latency {lat} us)"))),
            None => f.push(Finding::info("cstate.deepest", "no cpuidle states exposed")),
        }
    }
}

fn memory(root: &SysRoot, f: &mut Vec<Finding>) {
    if let Some(thp) = root.attr("/sys/kernel/mm/transparent_hugepage/enabled") {
        let mode = crate::knobs::current_choice(&thp);
        let finding = Finding::info("thp", mode.clone());
        f.push(if mode == "always" {
            finding.note("khugepaged compaction can stall allocations now and then; record it when comparing machines")
        } else {
            finding
        });
    }
    if let Some(nb) = root.attr("/proc/sys/kernel/numa_balancing") {
        if nb != "0" {
            f.push(Finding::warn(
                "numa_balancing",
                nb,
                "automatic NUMA balancing migrates pages and tasks during runs; for placement experiments: sysctl kernel.numa_balancing=0",
            ));
        } else {
            f.push(Finding::info("numa_balancing", "0"));
        }
    }
    let meminfo = root
        .read_optional("/proc/meminfo")
        .ok()
        .flatten()
        .unwrap_or_default();
    if let Some((total, free)) = parse::swap_kib(&meminfo) {
        let used = total.saturating_sub(free);
        let value = format!("{} MiB used of {} MiB", used / 1024, total / 1024);
        if used > 0 {
            f.push(Finding::warn(
                "swap",
                value,
                "swap in use: memory pressure can stall the workload and add swap I/O; free memory first",
            ));
        } else {
            f.push(Finding::info("swap", value));
        }
    }
}

fn load(root: &SysRoot, ncpus: usize, f: &mut Vec<Finding>) {
    let Some(text) = root.attr("/proc/loadavg") else {
        return;
    };
    let Some([l1, l5, l15]) = parse::loadavg(&text) else {
        return;
    };
    let value = format!("{l1:.2} {l5:.2} {l15:.2}");
    if l1 > 0.3 * ncpus as f64 {
        f.push(Finding::warn(
            "loadavg",
            value,
            format!("the machine is busy ({l1:.2} runnable on {ncpus} CPUs): other work competes with the workload"),
        ));
    } else {
        f.push(Finding::info("loadavg", value));
    }
}

/// Numeric entries of /proc.
fn pids(root: &SysRoot) -> Vec<u32> {
    root.list_optional("/proc")
        .unwrap_or_default()
        .iter()
        .filter_map(|e| e.parse().ok())
        .collect()
}

/// Said of a process check on a root that holds no processes (a snapshot copies none): a
/// live machine always has some, so "not running" would be a guess.
const NO_PROCESSES: &str = "not recorded (this root holds no processes: a snapshot copies none)";

fn irqbalance(root: &SysRoot, f: &mut Vec<Finding>) {
    let all = pids(root);
    if all.is_empty() {
        f.push(Finding::info("irqbalance", NO_PROCESSES));
        return;
    }
    let running: Vec<u32> = all
        .into_iter()
        .filter(|p| root.attr(&format!("/proc/{p}/comm")).as_deref() == Some("irqbalance"))
        .collect();
    f.push(running_or_not(
        "irqbalance",
        &running,
        "irqbalance moves interrupts during runs, so placement changes under you; stop it (systemctl stop irqbalance)",
    ));
}

/// "not running", or a warning naming the processes found and what to do about them.
fn running_or_not(key: &str, pids: &[u32], advice: &str) -> Finding {
    if pids.is_empty() {
        return Finding::info(key, "not running");
    }
    let listed: Vec<String> = pids.iter().map(u32::to_string).collect();
    Finding::warn(key, format!("running (pid {})", listed.join(", ")), advice)
}

/// `iolab irq daemon` (the `iolab-irq` service, or one started by hand): it leaves the
/// interrupts of the devices an experiment holds alone, but moves every other one during runs.
fn irq_daemon(root: &SysRoot, f: &mut Vec<Finding>) {
    let me = std::process::id();
    let all = pids(root);
    if all.is_empty() {
        f.push(Finding::info("iolab_irq_daemon", NO_PROCESSES));
        return;
    }
    let running: Vec<u32> = all
        .into_iter()
        .filter(|p| *p != me && root.attr(&format!("/proc/{p}/comm")).as_deref() == Some("iolab"))
        .filter(|p| {
            let cmdline = root.read(&format!("/proc/{p}/cmdline")).unwrap_or_default();
            let args: Vec<&str> = cmdline.split('\0').collect();
            args.windows(2).any(|w| w == ["irq", "daemon"])
        })
        .collect();
    f.push(running_or_not(
        "iolab_irq_daemon",
        &running,
        "iolab's irq daemon leaves the interrupts of the devices an experiment measures where they are, but moves the others during runs; stop it for a quiet machine (systemctl stop iolab-irq)",
    ));
}

/// Whether this kernel lets iolab confine fio with Landlock (`workload::confine`).
fn fio_confinement() -> Finding {
    match crate::workload::confine::abi_version() {
        Ok(abi) => Finding::info(
            "fio_confinement",
            format!(
                "Landlock (ABI {abi}): fio writes only its run's directories and the devices it \
                 may write"
            ),
        ),
        Err(e) => Finding::warn(
            "fio_confinement",
            format!("no Landlock ({e})"),
            "fio runs on iolab's checks of its options alone, and experiments with hosts \
             (fio's client mode) are refused; Landlock is in Linux 5.13 and later, enabled \
             when `landlock` is among the kernel's LSMs",
        ),
    }
}

fn process_ticks(root: &SysRoot) -> Vec<(u32, String, u64)> {
    let me = std::process::id();
    pids(root)
        .into_iter()
        .filter(|p| *p != me)
        .filter_map(|p| {
            let (name, ticks) =
                parse::proc_stat_ticks(&root.read(&format!("/proc/{p}/stat")).ok()?)?;
            Some((p, name, ticks))
        })
        .collect()
}

/// Busy processes and steal time over a short window.
fn activity(root: &SysRoot, sample: Duration, f: &mut Vec<Finding>) {
    let stat0 = root
        .attr("/proc/stat")
        .and_then(|s| parse::cpu_total_and_steal(&s));
    let before = process_ticks(root);
    let t0 = Instant::now();
    std::thread::sleep(sample);
    let after = process_ticks(root);
    let elapsed = t0.elapsed().as_secs_f64();
    let stat1 = root
        .attr("/proc/stat")
        .and_then(|s| parse::cpu_total_and_steal(&s));
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let busy = parse::busy_processes(&before, &after, elapsed, hz, BUSY_THRESHOLD_PCT);
    if busy.is_empty() {
        f.push(Finding::info(
            "busy_processes",
            format!(
                "none above {BUSY_THRESHOLD_PCT}% of a CPU over {} ms",
                sample.as_millis()
            ),
        ));
    } else {
        let list = busy
            .iter()
            .take(8)
            .map(|b| format!("{} (pid {}) {:.0}%", b.name, b.pid, b.cpu_pct))
            .collect::<Vec<_>>()
            .join(", ");
        f.push(Finding::warn(
            "busy_processes",
            list,
            "other processes use CPU and will compete with the workload; stop them or expect more noise",
        ));
    }
    if let (Some((tot0, st0)), Some((tot1, st1))) = (stat0, stat1) {
        if let (Some(dt), Some(ds)) = (tot1.checked_sub(tot0), st1.checked_sub(st0)) {
            if dt > 0 {
                let pct = ds as f64 / dt as f64 * 100.0;
                let value = format!("{pct:.1}%");
                if pct >= 1.0 {
                    f.push(Finding::warn(
                        "cpu.steal",
                        value,
                        "the hypervisor is running other guests on these CPUs; numbers will vary with their load",
                    ));
                } else {
                    f.push(Finding::info("cpu.steal", value));
                }
            }
        }
    }
}

impl crate::output::Render for Vec<Finding> {
    fn text(&self) -> String {
        render(self)
    }
}

/// Human-readable report: one line per finding, warnings marked and followed by their advice.
/// Names from the machine, files or the database are escaped for the terminal
/// (`report::format::terminal_safe`).
pub(crate) fn render(findings: &[Finding]) -> String {
    crate::report::format::terminal_safe_lines(&render_unescaped(findings)).into_owned()
}

fn render_unescaped(findings: &[Finding]) -> String {
    let width = findings.iter().map(|f| f.key.len()).max().unwrap_or(0);
    let mut out = String::new();
    for f in findings {
        let mark = match f.severity {
            Severity::Warn => "!",
            Severity::Info => " ",
        };
        let _ = writeln!(out, "{mark} {:<width$}  {}", f.key, f.value);
        if let Some(a) = &f.advice {
            let _ = writeln!(out, "  {:<width$}  -> {a}", "");
        }
    }
    let warnings = findings
        .iter()
        .filter(|f| f.severity == Severity::Warn)
        .count();
    let _ = writeln!(
        out,
        "{warnings} warning(s){}",
        if warnings > 0 {
            ": numbers from this machine may be noisier than they need to be"
        } else {
            ""
        }
    );
    out
}

/// The findings as environment rows for the results database.
pub(crate) fn to_environment(findings: &[Finding]) -> Vec<crate::store::EnvironmentEntry> {
    findings
        .iter()
        .map(|f| crate::store::EnvironmentEntry {
            key: f.key.clone(),
            value: f.value.clone(),
            severity: Some(match f.severity {
                Severity::Info => "info".into(),
                Severity::Warn => "warn".into(),
            }),
            advice: f.advice.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    fn by_key<'a>(f: &'a [Finding], key: &str) -> &'a Finding {
        f.iter()
            .find(|x| x.key == key)
            .unwrap_or_else(|| panic!("no {key} in {f:#?}"))
    }

    /// The kernel's `notsupported` (a guest without SMT, lab machine nvme-poll) is said in
    /// words.
    #[test]
    fn smt_the_kernel_cannot_switch_is_said_plainly() {
        let smt = "/sys/devices/system/cpu/smt";
        for (control, said) in [
            (
                "notsupported",
                "not supported (the CPUs have no SMT siblings)",
            ),
            (
                "forceoff",
                "forced off (nosmt=force on the kernel command line)",
            ),
            ("off", "off"),
        ] {
            let dir = tree(&[
                (&format!("{smt}/control"), &format!("{control}\n")),
                (&format!("{smt}/active"), "0\n"),
            ]);
            let mut f = Vec::new();
            smt_and_idle(&SysRoot::at(dir.path()).unwrap(), &[], &mut f);
            assert_eq!(by_key(&f, "smt").value, said);
        }
    }

    /// intel_idle's max_cstate is a limit only when intel_idle is the driver in use (this VM:
    /// driver haltpoll, and intel_idle built in with max_cstate 9).
    #[test]
    fn intel_idles_limit_is_said_only_when_it_is_the_driver() {
        let cpu = "/sys/devices/system/cpu";
        for (driver, limits) in [
            ("haltpoll", None),
            ("intel_idle", Some("intel_idle max_cstate=9")),
        ] {
            let dir = tree(&[
                (
                    &format!("{cpu}/cpuidle/current_driver"),
                    &format!("{driver}\n"),
                ),
                ("/sys/module/intel_idle/parameters/max_cstate", "9\n"),
                ("/proc/cmdline", "ro quiet\n"),
            ]);
            let mut f = Vec::new();
            smt_and_idle(&SysRoot::at(dir.path()).unwrap(), &[], &mut f);
            let said = f.iter().find(|f| f.key == "cstate.limits");
            assert_eq!(said.map(|f| f.value.as_str()), limits, "{driver}");
        }
    }

    #[test]
    fn a_noisy_machine_gets_warnings_with_advice() {
        let cpu = "/sys/devices/system/cpu";
        let dir = tree(&[
            ("/proc/sys/kernel/hostname", "box1\n"),
            ("/proc/sys/kernel/osrelease", "6.1.0-13-amd64\n"),
            (
                "/proc/cpuinfo",
                "model name\t: AMD EPYC 7R13\nflags\t: fpu hypervisor\n",
            ),
            ("/sys/devices/system/cpu/online", "0-1\n"),
            (
                &format!("{cpu}/cpu0/cpufreq/scaling_governor"),
                "powersave\n",
            ),
            (
                &format!("{cpu}/cpu1/cpufreq/scaling_governor"),
                "performance\n",
            ),
            (
                &format!("{cpu}/cpu0/cpufreq/scaling_driver"),
                "intel_pstate\n",
            ),
            (&format!("{cpu}/intel_pstate/no_turbo"), "0\n"),
            (&format!("{cpu}/smt/control"), "on\n"),
            (&format!("{cpu}/smt/active"), "1\n"),
            (&format!("{cpu}/cpuidle/current_driver"), "intel_idle\n"),
            (&format!("{cpu}/cpu0/cpuidle/state0/name"), "POLL\n"),
            (&format!("{cpu}/cpu0/cpuidle/state0/latency"), "0\n"),
            (&format!("{cpu}/cpu0/cpuidle/state1/name"), "C6\n"),
            (&format!("{cpu}/cpu0/cpuidle/state1/latency"), "133\n"),
            (&format!("{cpu}/cpu0/cpuidle/state2/name"), "C10\n"),
            (&format!("{cpu}/cpu0/cpuidle/state2/latency"), "890\n"),
            (&format!("{cpu}/cpu0/cpuidle/state2/disable"), "1\n"),
            ("/proc/cmdline", "ro quiet intel_idle.max_cstate=6\n"),
            (
                "/sys/kernel/mm/transparent_hugepage/enabled",
                "[always] madvise never\n",
            ),
            ("/proc/sys/kernel/numa_balancing", "1\n"),
            (
                "/proc/meminfo",
                "SwapTotal: 2097152 kB\nSwapFree: 1048576 kB\n",
            ),
            ("/proc/loadavg", "3.50 2.00 1.00 3/200 999\n"),
            ("/proc/812/comm", "irqbalance\n"),
            ("/proc/813/comm", "sshd\n"),
            ("/proc/814/comm", "iolab\n"),
            ("/proc/814/cmdline", "/usr/bin/iolab\0irq\0daemon\0--keep\0"),
            ("/proc/815/comm", "iolab\n"),
            ("/proc/815/cmdline", "iolab\0irq\0top\0"),
        ]);
        let root = SysRoot::at(dir.path()).unwrap();
        let f = collect(&root, Duration::ZERO);
        assert_eq!(by_key(&f, "kernel").value, "6.1.0-13-amd64");
        assert_eq!(by_key(&f, "cpu.model").value, "AMD EPYC 7R13");
        assert_eq!(by_key(&f, "cpu.online").value, "2");
        let g = by_key(&f, "cpufreq.governor");
        assert_eq!(
            (g.severity, g.value.as_str()),
            (Severity::Warn, "powersave (1), performance (1)")
        );
        assert!(g.advice.as_deref().unwrap().contains("performance"));
        assert_eq!(by_key(&f, "turbo").severity, Severity::Warn);
        assert_eq!(by_key(&f, "smt").value, "on (active)");
        let c = by_key(&f, "cstate.deepest");
        assert_eq!(
            (c.severity, c.value.as_str()),
            (Severity::Warn, "C6 (exit latency 133 us)")
        );
        assert_eq!(by_key(&f, "cstate.limits").value, "intel_idle.max_cstate=6");
        assert_eq!(by_key(&f, "thp").value, "always");
        assert_eq!(by_key(&f, "numa_balancing").severity, Severity::Warn);
        assert_eq!(by_key(&f, "swap").value, "1024 MiB used of 2048 MiB");
        assert_eq!(by_key(&f, "loadavg").severity, Severity::Warn);
        assert_eq!(by_key(&f, "irqbalance").value, "running (pid 812)");
        let d = by_key(&f, "iolab_irq_daemon");
        assert_eq!(
            (d.severity, d.value.as_str()),
            (Severity::Warn, "running (pid 814)")
        );
        assert_eq!(
            by_key(&f, "virtualization").value,
            "guest (hypervisor flag)"
        );
        assert_eq!(
            by_key(&f, "busy_processes").value,
            "not measured (snapshot root)"
        );
        let text = render(&f);
        assert!(text.contains("! irqbalance"), "{text}");
        assert!(text.contains("warning(s): numbers"), "{text}");
        let env = to_environment(&f);
        assert_eq!(env.len(), f.len());
        assert_eq!(
            env.iter()
                .find(|e| e.key == "turbo")
                .unwrap()
                .severity
                .as_deref(),
            Some("warn")
        );
    }

    /// A snapshot holds no processes and no kernel command line: what depends on them is
    /// said to be unknown, not "not running" (irqbalance was running when it was taken).
    #[test]
    fn a_snapshot_root_says_what_it_cannot_know() {
        let dir = tree(&[
            ("/sys/devices/system/cpu/online", "0\n"),
            ("/proc/loadavg", "0.01 0.02 0.00 1/100 5\n"),
        ]);
        let f = collect(&SysRoot::at(dir.path()).unwrap(), Duration::ZERO);
        for key in ["irqbalance", "iolab_irq_daemon"] {
            assert!(by_key(&f, key).value.starts_with("not recorded"), "{f:#?}");
        }
        assert!(by_key(&f, "cstate.limits")
            .value
            .starts_with("not recorded"));
        // Files a snapshot did not copy are unknown, not absent ("none detected" of a guest).
        assert_eq!(
            by_key(&f, "virtualization").value,
            "not recorded (this root holds no /proc/cpuinfo)"
        );
        assert_eq!(
            by_key(&f, "smt").value,
            "not recorded (this root holds no /sys/devices/system/cpu/smt/control)"
        );
    }

    #[test]
    fn a_quiet_machine_has_no_warnings() {
        let cpu = "/sys/devices/system/cpu";
        let dir = tree(&[
            ("/sys/devices/system/cpu/online", "0\n"),
            (
                &format!("{cpu}/cpu0/cpufreq/scaling_governor"),
                "performance\n",
            ),
            (&format!("{cpu}/cpufreq/boost"), "0\n"),
            ("/proc/meminfo", "SwapTotal: 0 kB\nSwapFree: 0 kB\n"),
            ("/proc/loadavg", "0.01 0.02 0.00 1/100 5\n"),
            ("/proc/1/comm", "init\n"),
        ]);
        let f = collect(&SysRoot::at(dir.path()).unwrap(), Duration::ZERO);
        let warns: Vec<_> = f.iter().filter(|x| x.severity == Severity::Warn).collect();
        assert!(warns.is_empty(), "{warns:#?}");
        assert_eq!(by_key(&f, "turbo").value, "off (cpufreq boost)");
        assert_eq!(by_key(&f, "irqbalance").value, "not running");
    }
}

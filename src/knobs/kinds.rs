//! The kinds of file iolab changes, and nothing else. A journal is a file on disk that anyone
//! with access to the state directory can edit, and restore writes whatever it says back: a
//! journal entry naming `/etc/passwd` must not make `iolab restore` overwrite it. So every path
//! is checked against this table both when a knob is set and when a journal is replayed:
//! it must match one pattern exactly (one path component per placeholder, no `..`), and the
//! file it names under the journal's root must, with every symlink resolved, still lie inside
//! that root's /sys or /proc. A new kind of knob is one more entry in `KINDS`; kinds whose
//! names are open-ended (sysctls, module parameters) pass an allow-list as well.

use std::path::{Component, Path, PathBuf};

use crate::sys::lock::Resource;

/// One kind of knob: its live path pattern, the machine-wide lock that guards it, and, for
/// kinds whose names are open-ended (sysctls, module parameters), the allow-list they must pass.
///
/// Placeholders take one path component each: `{dev}` a block device's kernel name, `{n}` a
/// number, `{attr}` an attribute name, `{module}` a module name, `cpu{n}`/`state{n}` a literal
/// prefix and a number. `{sysctl...}` takes the rest of the path (1 to 8 components). Every
/// other component is literal.
#[derive(Debug)]
pub(crate) struct Kind {
    pub what: &'static str,
    pub pattern: &'static str,
    lock: Lock,
    allowed: Option<AllowList>,
}

/// Checks a kind's placeholder values against its allow-list; the error says why.
type AllowList = fn(&[&str]) -> Result<(), String>;

/// Which machine-wide lock a path of a kind takes, from its placeholders' values.
#[derive(Debug)]
enum Lock {
    /// The device of the `{dev}` placeholder.
    Device,
    /// The interrupt of the `{n}` placeholder.
    Irq,
    /// One lock for every file of the kind (every CPU's governor is one setting).
    Named(&'static str),
    /// The prefix and the placeholders' values joined by dots (`sysctl.vm.dirty_ratio`).
    Dotted(&'static str),
    /// The kernel's tracer: one lock for the settings a block trace recording changes.
    Tracer,
}

pub(crate) const KINDS: &[Kind] = &[
    Kind {
        what: "block queue attribute",
        pattern: "/sys/block/{dev}/queue/{attr}",
        lock: Lock::Device,
        allowed: None,
    },
    // The elevator's own settings (mq-deadline's fifo_batch, bfq's slice_idle, ...), which
    // switching the elevator away discards: journaled with every switch, put back after it.
    Kind {
        what: "I/O scheduler setting",
        pattern: "/sys/block/{dev}/queue/iosched/{attr}",
        lock: Lock::Device,
        allowed: None,
    },
    Kind {
        what: "interrupt affinity",
        pattern: "/proc/irq/{n}/smp_affinity_list",
        lock: Lock::Irq,
        allowed: None,
    },
    Kind {
        what: "interrupt affinity",
        pattern: "/proc/irq/{n}/smp_affinity",
        lock: Lock::Irq,
        allowed: None,
    },
    Kind {
        what: "sysctl",
        pattern: "/proc/sys/{sysctl...}",
        lock: Lock::Dotted("sysctl"),
        allowed: Some(sysctl_allowed),
    },
    Kind {
        what: "module parameter",
        pattern: "/sys/module/{module}/parameters/{attr}",
        lock: Lock::Dotted("module"),
        allowed: Some(module_allowed),
    },
    Kind {
        what: "CPU frequency governor",
        pattern: "/sys/devices/system/cpu/cpu{n}/cpufreq/scaling_governor",
        lock: Lock::Named("cpu.governor"),
        allowed: None,
    },
    Kind {
        what: "CPU boost",
        pattern: "/sys/devices/system/cpu/cpufreq/boost",
        lock: Lock::Named("cpu.boost"),
        allowed: None,
    },
    Kind {
        what: "CPU boost",
        pattern: "/sys/devices/system/cpu/intel_pstate/no_turbo",
        lock: Lock::Named("cpu.boost"),
        allowed: None,
    },
    Kind {
        what: "SMT control",
        pattern: "/sys/devices/system/cpu/smt/control",
        lock: Lock::Named("cpu.smt"),
        allowed: None,
    },
    Kind {
        what: "idle state",
        pattern: "/sys/devices/system/cpu/cpu{n}/cpuidle/state{n}/disable",
        lock: Lock::Named("cpu.cstates"),
        allowed: None,
    },
    // What `trace record` sets: exactly these tracefs files, never `set_ftrace_filter`,
    // `kprobe_events` or the like, which would make restore install probes.
    Kind {
        what: "tracer setting",
        pattern: "/sys/kernel/tracing/{attr}",
        lock: Lock::Tracer,
        allowed: Some(tracer_allowed),
    },
    // Recordings by iolab before it read the ring buffer's pages set these two (binary
    // `trace_pipe` output); their journals must still restore.
    Kind {
        what: "tracer option",
        pattern: "/sys/kernel/tracing/options/bin",
        lock: Lock::Tracer,
        allowed: None,
    },
    Kind {
        what: "tracer option",
        pattern: "/sys/kernel/tracing/options/context-info",
        lock: Lock::Tracer,
        allowed: None,
    },
    Kind {
        what: "block trace switch",
        pattern: "/sys/class/block/{dev}/trace/enable",
        lock: Lock::Tracer,
        allowed: None,
    },
];

/// The top-level tracefs files a block trace recording sets.
const TRACER_FILES: &[&str] = &[
    "current_tracer",
    "trace_clock",
    "buffer_size_kb",
    "tracing_on",
];

fn tracer_allowed(parts: &[&str]) -> Result<(), String> {
    first_listed(parts, TRACER_FILES, |f| {
        format!("tracefs file {f} is not one iolab changes")
    })
}

/// Passes when the first placeholder's value is in `list`; else `refusal` of it, and the list.
fn first_listed(parts: &[&str], list: &[&str], refusal: fn(&str) -> String) -> Result<(), String> {
    match parts.first() {
        Some(x) if list.contains(x) => Ok(()),
        x => Err(format!(
            "{} (only {})",
            refusal(x.unwrap_or(&"")),
            list.join(", ")
        )),
    }
}

/// Sysctls iolab may change, as dotted prefixes (a prefix ending in `.` covers a tree).
/// An allow-list because some sysctls name programs the kernel runs as root
/// (`kernel.core_pattern`, `kernel.modprobe`, `kernel.poweroff_cmd`): a journal that could
/// name them would make `restore` run anything. Of `vm`, the settings of writeback, reclaim
/// and compaction: the others take memory from the machine's programs or decide when they
/// get none (`SYSCTL_RISKS`), and `vm.drop_caches` and `vm.compact_memory` are actions, not
/// settings, with no value to put back. Of `net`, only the tuning trees (buffers, backlogs,
/// busy polling, TCP and UDP): the rest decides routing and filtering (`net.ipv4.ip_forward`,
/// `rp_filter`), and `net.core.bpf_*` hardens the BPF JIT.
pub(crate) const SYSCTLS: &[&str] = &[
    "vm.dirty_",
    "vm.dirtytime_expire_seconds",
    "vm.swappiness",
    "vm.vfs_cache_pressure",
    "vm.page-cluster",
    "vm.laptop_mode",
    "vm.zone_reclaim_mode",
    "vm.min_unmapped_ratio",
    "vm.min_slab_ratio",
    "vm.watermark_",
    "vm.compaction_proactiveness",
    "vm.extfrag_threshold",
    "vm.compact_unevictable_allowed",
    "vm.defrag_mode",
    "vm.stat_interval",
    "vm.numa_stat",
    "vm.percpu_pagelist_high_fraction",
    "vm.page_lock_unfairness",
    "net.core.",
    "net.ipv4.tcp_",
    "net.ipv4.udp_",
    "dev.raid.",
    "fs.aio-max-nr",
    "kernel.numa_balancing",
    "kernel.sched_",
    "kernel.timer_migration",
    "kernel.watchdog_",
];

/// Switches that read back a state the kernel derives, not what was written: reading
/// `kernel.watchdog` gives 0 while the user's switch is 1 when no lockup detector runs (say
/// `soft_watchdog` is 0), so a journal would put back a 0 that leaves lockup detection off
/// for good once the detector is turned on again. Refused: no old value can be known.
const SYSCTL_DERIVED: &[&str] = &[
    "kernel.watchdog",
    "kernel.nmi_watchdog",
    "kernel.soft_watchdog",
];
const SYSCTL_ACTIONS: &[&str] = &["vm.drop_caches", "vm.compact_memory"];
/// Settings whose value can take the machine from its owner's programs: refused with the
/// reason, as an experiment file is handed around like code.
const SYSCTL_RISKS: &[(&str, &str)] = &[
    (
        "vm.panic_on_oom",
        "makes the kernel panic when memory runs out, taking the machine down",
    ),
    (
        "vm.nr_hugepages",
        "sets memory aside as huge pages, which the machine's programs then cannot use",
    ),
    (
        "vm.nr_overcommit_hugepages",
        "lets huge pages take memory the machine's programs then cannot use",
    ),
    (
        "vm.min_free_kbytes",
        "keeps memory free by reclaiming (a large value reclaims and kills processes at once)",
    ),
    (
        "vm.lowmem_reserve_ratio",
        "reserves memory zones from the machine's programs",
    ),
    (
        "vm.overcommit_",
        "decides whether the machine's programs get the memory they ask for",
    ),
    (
        "vm.admin_reserve_kbytes",
        "decides whether the machine's programs get the memory they ask for",
    ),
    (
        "vm.user_reserve_kbytes",
        "decides whether the machine's programs get the memory they ask for",
    ),
    (
        "vm.max_map_count",
        "limits every program's memory maps (a low value makes programs fail)",
    ),
    ("vm.oom_", "decides which process the kernel kills"),
    (
        "kernel.sched_rt_",
        "decides how much of each CPU real-time tasks may take (-1 lets one spinning task \
         starve everything else on its CPU)",
    ),
];

/// Hardening settings in otherwise allowed trees: a forged journal must not lower them.
const SYSCTL_SECURITY: &[&str] = &[
    "net.core.bpf_",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.tcp_challenge_ack_limit",
    "vm.mmap_min_addr",
    "vm.mmap_rnd_",
    "vm.unprivileged_userfaultfd",
];

/// Sysctls that are one setting in two forms: writing either sets the other to 0 (the kernel
/// keeps one limit, in bytes or as a ratio). So each is journaled with its partner
/// (`linked::dependents_of`), both take one lock, and restore writes back only the form
/// that was in use (`journal::restore_entries`): the other's 0 is its consequence, and
/// writing 0 to a bytes form is refused (its minimum is above 0).
const LINKED_SYSCTLS: &[(&str, &str)] = &[
    ("vm/dirty_bytes", "vm/dirty_ratio"),
    ("vm/dirty_background_bytes", "vm/dirty_background_ratio"),
];

/// The other form of a linked sysctl (`/proc/sys/vm/dirty_ratio` for `.../dirty_bytes`), and
/// whether `path` is the ratio form.
pub(crate) fn linked_sysctl(path: &str) -> Option<(String, bool)> {
    let name = path.strip_prefix("/proc/sys/")?;
    LINKED_SYSCTLS.iter().find_map(|&(bytes, ratio)| {
        if name == bytes {
            Some((format!("/proc/sys/{ratio}"), false))
        } else if name == ratio {
            Some((format!("/proc/sys/{bytes}"), true))
        } else {
            None
        }
    })
}

fn sysctl_allowed(parts: &[&str]) -> Result<(), String> {
    let name = parts.join(".");
    if SYSCTL_ACTIONS.contains(&name.as_str()) {
        return Err(format!("{name} is an action, not a setting"));
    }
    if SYSCTL_SECURITY.iter().any(|p| name.starts_with(p)) {
        return Err(format!("{name} is a security setting, not a tuning one"));
    }
    if SYSCTL_DERIVED.contains(&name.as_str()) {
        return Err(format!(
            "{name} reads back the state the kernel derives from several switches, not the \
             value written, so its old value cannot be put back; iolab does not change it"
        ));
    }
    if let Some((_, why)) = SYSCTL_RISKS.iter().find(|(p, _)| name.starts_with(p)) {
        return Err(format!("{name} {why}; iolab does not change it"));
    }
    if SYSCTLS.iter().any(|p| name.starts_with(p)) {
        return Ok(());
    }
    Err(format!(
        "sysctl {name} is not one iolab changes (only {})",
        SYSCTLS
            .iter()
            .map(|p| if p.ends_with(['.', '_']) {
                format!("{p}*")
            } else {
                p.to_string()
            })
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// Module parameters iolab may change, per module: those that tune how a storage or network
/// driver queues, polls or places its work. An allow-list because the other writable ones load
/// files (`firmware_class.path`), create devices (`md_mod.new_array`), panic the kernel
/// (`workqueue.panic_on_stall`), decide how a driver recovers from errors or which disks it
/// finds (`scsi_mod.eh_deadline`, `scsi_mod.scan`, `libata.ignore_hpa`), override the quirks
/// that keep a drive from dropping off (`nvme_core.force_apst`) or flood the kernel log. The
/// timeouts and retries of `nvme_core` are here so that experiments on them can be run; the
/// values that would fail I/O are refused by `experiment::system_knobs`. Taken from the
/// writable parameters of Debian's 6.1 kernel and of 6.18 (`workqueue`).
pub(crate) const MODULE_PARAMETERS: &[(&str, &[&str])] = &[
    (
        "nvme",
        &[
            "io_queue_depth",
            "poll_queues",
            "write_queues",
            "sgl_threshold",
        ],
    ),
    (
        "nvme_core",
        &[
            "io_timeout",
            "admin_timeout",
            "max_retries",
            "iopolicy",
            "default_ps_max_latency_us",
            "apst_primary_timeout_ms",
            "apst_secondary_timeout_ms",
            "apst_primary_latency_tol_us",
            "apst_secondary_latency_tol_us",
        ],
    ),
    ("virtio_blk", &["num_request_queues", "poll_queues"]),
    ("virtio_net", &["napi_tx"]),
    (
        "dm_mod",
        &[
            "dm_mq_nr_hw_queues",
            "dm_mq_queue_depth",
            "dm_numa_node",
            "reserved_bio_based_ios",
            "reserved_rq_based_ios",
            "kcopyd_subjob_size_kb",
            "swap_bios",
        ],
    ),
    ("e1000e", &["copybreak"]),
    (
        "workqueue",
        &["default_affinity_scope", "cpu_intensive_thresh_us"],
    ),
];

fn module_allowed(parts: &[&str]) -> Result<(), String> {
    let (module, parameter) = (parts.first().copied(), parts.get(1).copied());
    let Some((module, allowed)) = MODULE_PARAMETERS.iter().find(|(m, _)| Some(*m) == module) else {
        return Err(format!(
            "module {} is not one whose parameters iolab changes (only {})",
            module.unwrap_or_default(),
            MODULE_PARAMETERS
                .iter()
                .map(|(m, _)| *m)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    };
    if parameter.is_some_and(|p| allowed.contains(&p)) {
        return Ok(());
    }
    Err(format!(
        "{module}.{} is not a parameter iolab changes: of {module}, only {} (those that tune \
         queues, polling and where work runs)",
        parameter.unwrap_or_default(),
        allowed.join(", ")
    ))
}

/// What a valid path names: its kind and the machine-wide thing it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Matched {
    pub kind: &'static str,
    pub resource: Resource,
}

/// The placeholders' values when `path` matches `pattern`, else `None`.
fn captures<'p>(pattern: &str, path: &'p str) -> Option<Vec<&'p str>> {
    let pat: Vec<&str> = pattern.split('/').collect();
    let parts: Vec<&str> = path.split('/').collect();
    let mut got = Vec::new();
    for (i, p) in pat.iter().enumerate() {
        if *p == "{sysctl...}" {
            let rest = parts.get(i..)?;
            if rest.is_empty() || rest.len() > 8 || !rest.iter().all(|s| is_name(s)) {
                return None;
            }
            got.extend_from_slice(rest);
            return Some(got);
        }
        let s = *parts.get(i)?;
        let ok = match *p {
            "{dev}" => is_name(s),
            "{n}" => is_number(s),
            "{attr}" | "{module}" => {
                !s.is_empty()
                    && s.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            }
            lit => match lit.split_once("{n}") {
                Some((prefix, "")) => s.strip_prefix(prefix).is_some_and(is_number),
                _ => lit == s,
            },
        };
        if !ok {
            return None;
        }
        if p.contains('{') {
            got.push(s);
        }
    }
    (parts.len() == pat.len()).then_some(got)
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit())
}

/// Checks `path` against the table (no I/O). The error says why and which kinds are allowed.
pub(crate) fn classify(path: &str) -> Result<Matched, String> {
    for k in KINDS {
        let Some(got) = captures(k.pattern, path) else {
            continue;
        };
        if let Some(allowed) = k.allowed {
            allowed(&got)?;
        }
        let resource = match k.lock {
            Lock::Device => Resource::Device(got[0].to_string()),
            Lock::Irq => Resource::Irq(got[0].parse().map_err(|_| format!("{path}: IRQ number"))?),
            Lock::Named(name) => Resource::Setting(name.to_string()),
            // Both forms of a linked sysctl are one setting: one lock.
            Lock::Dotted(prefix) => match linked_sysctl(path) {
                Some((partner, is_ratio)) => {
                    let (bytes, ratio) = match is_ratio {
                        true => (partner.as_str(), path),
                        false => (path, partner.as_str()),
                    };
                    let name = |p: &str| p.trim_start_matches("/proc/sys/").replace('/', ".");
                    Resource::Setting(format!("{prefix}.{}+{}", name(bytes), name(ratio)))
                }
                None => Resource::Setting(format!("{prefix}.{}", got.join("."))),
            },
            Lock::Tracer => Resource::Tracer,
        };
        return Ok(Matched {
            kind: k.what,
            resource,
        });
    }
    Err(format!(
        "not a kind of file iolab changes (only {})",
        KINDS
            .iter()
            .map(|k| k.pattern)
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// A device's kernel name: one path component, no `.`/`..`.
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// Where a valid path's file is on disk.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Located {
    /// The file, symlinks resolved: write to exactly this.
    File(PathBuf),
    /// No such file under the root (the device or IRQ went away).
    Missing,
}

/// Maps a live path to its file under `root`, refusing anything outside the table and any file
/// that, symlinks resolved, leaves the root's /sys or /proc.
pub(crate) fn locate(root: &Path, path: &str) -> Result<Located, String> {
    classify(path)?;
    let rel = path.trim_start_matches('/');
    // `classify` already allows one plain component per placeholder; this guards the table.
    if Path::new(rel)
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return Err("the path must not contain `.` or `..`".into());
    }
    let top = rel.split('/').next().unwrap_or_default();
    let base = root
        .canonicalize()
        .map_err(|e| format!("the journal's root {}: {e}", root.display()))?;
    let file = match base.join(rel).canonicalize() {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Located::Missing),
        Err(e) => return Err(format!("{}: {e}", base.join(rel).display())),
    };
    let fence = base.join(top);
    if !file.starts_with(&fence) {
        return Err(format!(
            "it resolves to {}, outside {}",
            file.display(),
            fence.display()
        ));
    }
    Ok(Located::File(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_kinds_in_the_table_pass() {
        let ok = classify("/sys/block/loop3/queue/nr_requests").unwrap();
        assert_eq!(ok.resource, Resource::Device("loop3".into()));
        let iosched = classify("/sys/block/loop3/queue/iosched/fifo_batch").unwrap();
        assert_eq!(iosched.resource, Resource::Device("loop3".into()));
        let irq = classify("/proc/irq/29/smp_affinity_list").unwrap();
        assert_eq!(irq.resource, Resource::Irq(29));
        classify("/proc/irq/29/smp_affinity").unwrap();
        for bad in [
            "/etc/passwd",
            "/tmp/x",
            "/sys/block/../queue/x/scheduler",
            "/sys/block/loop3/queue/../../../../etc/passwd",
            "/sys/block/loop3/queue/Scheduler",
            "/sys/block/loop3/queue/iosched/../../../x",
            "/proc/irq/+1/smp_affinity",
            "/proc/irq/29/spurious",
            "sys/block/loop3/queue/scheduler",
            "/sys/block//queue/scheduler",
        ] {
            let why = classify(bad).unwrap_err();
            assert!(
                why.contains("/sys/block/{dev}/queue/{attr}"),
                "{bad}: {why}"
            );
        }
    }

    #[test]
    fn the_tracefs_files_a_recording_sets_pass_and_take_the_tracer_lock() {
        for ok in [
            "/sys/kernel/tracing/current_tracer",
            "/sys/kernel/tracing/trace_clock",
            "/sys/kernel/tracing/buffer_size_kb",
            "/sys/kernel/tracing/tracing_on",
            "/sys/kernel/tracing/options/bin",
            "/sys/kernel/tracing/options/context-info",
            "/sys/class/block/sda1/trace/enable",
        ] {
            assert_eq!(
                classify(ok).map(|m| m.resource),
                Ok(Resource::Tracer),
                "{ok}"
            );
        }
        // Files that would make restore trace functions, install probes or run triggers.
        for refused in [
            "/sys/kernel/tracing/set_ftrace_filter",
            "/sys/kernel/tracing/kprobe_events",
            "/sys/kernel/tracing/trace",
            "/sys/kernel/tracing/options/func_stack_trace",
            "/sys/kernel/tracing/events/block/enable",
            "/sys/class/block/sda/trace/act_mask",
        ] {
            assert!(classify(refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn system_settings_pass_their_allow_lists_and_take_one_lock_per_setting() {
        let setting = |p: &str| classify(p).map(|m| m.resource);
        let named = |s: &str| Ok(Resource::Setting(s.to_string()));
        assert_eq!(
            setting("/proc/sys/vm/swappiness"),
            named("sysctl.vm.swappiness")
        );
        // The two forms of one limit are one setting.
        for form in ["dirty_ratio", "dirty_bytes"] {
            assert_eq!(
                setting(&format!("/proc/sys/vm/{form}")),
                named("sysctl.vm.dirty_bytes+vm.dirty_ratio")
            );
        }
        assert_eq!(
            setting("/proc/sys/net/core/netdev_budget"),
            named("sysctl.net.core.netdev_budget")
        );
        assert_eq!(
            setting("/proc/sys/net/ipv4/tcp_rmem"),
            named("sysctl.net.ipv4.tcp_rmem")
        );
        // Routing, filtering and BPF hardening are not tuning.
        for refused in [
            "/proc/sys/net/ipv4/ip_forward",
            "/proc/sys/net/ipv4/conf/eth0.100/rp_filter",
            "/proc/sys/net/core/bpf_jit_harden",
            "/proc/sys/net/ipv4/tcp_syncookies",
        ] {
            assert!(classify(refused).is_err(), "{refused}");
        }
        // The watchdog switches read back a derived state, which cannot be put back (a run
        // left lockup detection off); their plain settings are tuning.
        for derived in ["watchdog", "nmi_watchdog", "soft_watchdog"] {
            let why = classify(&format!("/proc/sys/kernel/{derived}")).unwrap_err();
            assert!(
                why.contains("reads back the state the kernel derives"),
                "{why}"
            );
        }
        assert_eq!(
            setting("/proc/sys/kernel/watchdog_thresh"),
            named("sysctl.kernel.watchdog_thresh")
        );
        assert_eq!(
            setting("/sys/module/nvme/parameters/io_queue_depth"),
            named("module.nvme.io_queue_depth")
        );
        // Every CPU's governor (and every idle state) is one setting, one lock.
        for cpu in ["cpu0", "cpu17"] {
            let g = format!("/sys/devices/system/cpu/{cpu}/cpufreq/scaling_governor");
            assert_eq!(setting(&g), named("cpu.governor"));
            let idle = format!("/sys/devices/system/cpu/{cpu}/cpuidle/state3/disable");
            assert_eq!(setting(&idle), named("cpu.cstates"));
        }
        assert_eq!(
            setting("/sys/devices/system/cpu/smt/control"),
            named("cpu.smt")
        );
        assert_eq!(
            setting("/sys/devices/system/cpu/cpufreq/boost"),
            named("cpu.boost")
        );
        assert_eq!(
            setting("/sys/devices/system/cpu/intel_pstate/no_turbo"),
            named("cpu.boost")
        );
        // Sysctls and modules that could make the kernel run or load something are refused,
        // and so are actions with no value to put back.
        for (bad, says) in [
            (
                "/proc/sys/kernel/core_pattern",
                "kernel.core_pattern is not one",
            ),
            ("/proc/sys/kernel/modprobe", "not one iolab changes"),
            ("/proc/sys/vm/drop_caches", "an action"),
            (
                "/proc/sys/vm/panic_on_oom",
                "vm.panic_on_oom makes the kernel panic when memory runs out",
            ),
            (
                "/proc/sys/vm/nr_hugepages",
                "sets memory aside as huge pages",
            ),
            ("/proc/sys/vm/overcommit_memory", "decides whether"),
            ("/proc/sys/vm/oom_kill_allocating_task", "which process"),
            (
                "/proc/sys/kernel/sched_rt_runtime_us",
                "real-time tasks may take",
            ),
            ("/proc/sys/vm/memfd_noexec", "not one iolab changes"),
            (
                "/sys/module/firmware_class/parameters/path",
                "firmware_class is not one",
            ),
            // Of an allowed module, only the parameters that tune it.
            (
                "/sys/module/workqueue/parameters/panic_on_stall",
                "workqueue.panic_on_stall is not a parameter iolab changes: of workqueue, only \
                 default_affinity_scope, cpu_intensive_thresh_us",
            ),
            (
                "/sys/module/md_mod/parameters/new_array",
                "md_mod is not one",
            ),
            (
                "/sys/module/scsi_mod/parameters/scan",
                "scsi_mod is not one",
            ),
            (
                "/sys/module/nvme_core/parameters/force_apst",
                "of nvme_core, only",
            ),
            ("/sys/module/nvme/parameters/io_timeout", "of nvme, only"),
            ("/proc/sys/vm/../kernel/core_pattern", "only"),
            ("/proc/sys/", "only"),
            (
                "/sys/devices/system/cpu/cpux/cpufreq/scaling_governor",
                "only",
            ),
            (
                "/sys/devices/system/cpu/cpu0/cpuidle/state1/latency",
                "only",
            ),
            (
                "/sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq",
                "only",
            ),
        ] {
            let why = classify(bad).unwrap_err();
            assert!(why.contains(says), "{bad}: {why}");
        }
    }

    #[test]
    fn a_symlink_out_of_the_root_is_refused_and_a_missing_file_is_missing() {
        let root = tempfile::tempdir().unwrap();
        let q = root.path().join("sys/block/loop0/queue");
        std::fs::create_dir_all(&q).unwrap();
        std::fs::write(q.join("nr_requests"), "64\n").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("victim"), "keep\n").unwrap();
        std::os::unix::fs::symlink(outside.path().join("victim"), q.join("scheduler")).unwrap();
        assert!(matches!(
            locate(root.path(), "/sys/block/loop0/queue/nr_requests"),
            Ok(Located::File(_))
        ));
        let why = locate(root.path(), "/sys/block/loop0/queue/scheduler").unwrap_err();
        assert!(why.contains("outside"), "{why}");
        assert_eq!(
            locate(root.path(), "/sys/block/loop9/queue/scheduler").unwrap(),
            Located::Missing
        );
        // A /sys path that escapes into the root's /proc is outside its fence too.
        std::fs::create_dir_all(root.path().join("proc")).unwrap();
        std::fs::write(root.path().join("proc/x"), "").unwrap();
        std::os::unix::fs::symlink(root.path().join("proc/x"), q.join("rq_affinity")).unwrap();
        assert!(locate(root.path(), "/sys/block/loop0/queue/rq_affinity").is_err());
    }
}

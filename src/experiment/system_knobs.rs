//! Factors that change the machine rather than a device's queue: `sysctl.NAME`,
//! `module.MODULE.PARAMETER`, `cpu.governor`, `cpu.boost`, `cpu.smt` and `cpu.max_cstate`
//! (the deepest idle state CPUs may enter). Case 3 toggled polling through a sysctl and case 4
//! fixed the governor, turbo, C-states and SMT before measuring; as factors they are journaled
//! and put back like queue knobs. Each level becomes plain file writes that `knobs::kinds`
//! allows (sysctls and modules pass its allow-lists), so restore treats them like every knob.

use crate::knobs::kinds;
use crate::model::Machine;
use crate::sys::SysRoot;

use super::factor::{FactorKind, LevelValue};
use super::run::resolve::ResolveError;
use super::run::KnobWrite;
use super::Experiment;

const CPU: &str = "/sys/devices/system/cpu";

/// A machine-wide control, as named in `[factors]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SystemKnob {
    /// Dotted name without the `sysctl.` prefix: `vm.dirty_ratio`.
    Sysctl(String),
    Module {
        module: String,
        parameter: String,
    },
    Governor,
    Boost,
    Smt,
    MaxCstate,
}

/// Module parameters whose low values fail the I/O of every device of their driver, those
/// holding data among them: (module, parameter, the least value allowed, and why). A module
/// parameter is machine-wide, so no device named as destructive makes these safe. Which
/// parameters may be changed at all is `knobs::kinds::MODULE_PARAMETERS`.
const MODULE_RISKS: &[(&str, &str, i64, &str)] = &[
    (
        "nvme_core",
        "io_timeout",
        30,
        "seconds (the kernel's default; a shorter timeout fails requests of every NVMe disk \
         that take longer, those holding data among them)",
    ),
    (
        "nvme_core",
        "admin_timeout",
        60,
        "seconds (the kernel's default; a shorter one fails every NVMe disk's admin commands \
         that take longer)",
    ),
    (
        "nvme_core",
        "max_retries",
        5,
        "(the kernel's default; fewer fail requests of every NVMe disk that a retry would \
         complete)",
    ),
];

/// Why `value` of `module.parameter` is refused, as the values that are allowed.
fn module_risk(module: &str, parameter: &str, value: &str) -> Option<String> {
    let (_, _, min, why) = MODULE_RISKS
        .iter()
        .find(|(m, p, _, _)| *m == module && *p == parameter)?;
    (!value.parse::<i64>().is_ok_and(|v| v >= *min))
        .then(|| format!("a number of at least {min} {why}"))
}

/// The factor names, for help and suggestions.
pub(crate) const NAMES: &[&str] = &[
    "sysctl.NAME",
    "module.MODULE.PARAMETER",
    "cpu.governor",
    "cpu.boost",
    "cpu.smt",
    "cpu.max_cstate",
];

impl SystemKnob {
    /// `None` when `name` is not a system knob's name at all; an error when it is one but not
    /// one iolab may change.
    pub(crate) fn parse(name: &str) -> Option<Result<SystemKnob, String>> {
        if let Some(sysctl) = name.strip_prefix("sysctl.") {
            let path = format!("/proc/sys/{}", sysctl.replace('.', "/"));
            return Some(kinds::classify(&path).map(|_| SystemKnob::Sysctl(sysctl.to_string())));
        }
        if let Some(rest) = name.strip_prefix("module.") {
            let Some((module, parameter)) = rest.split_once('.') else {
                return Some(Err(format!("`{name}`: write module.MODULE.PARAMETER")));
            };
            let path = format!("/sys/module/{module}/parameters/{parameter}");
            return Some(kinds::classify(&path).map(|_| SystemKnob::Module {
                module: module.to_string(),
                parameter: parameter.to_string(),
            }));
        }
        Some(Ok(match name {
            "cpu.governor" => SystemKnob::Governor,
            "cpu.boost" => SystemKnob::Boost,
            "cpu.smt" => SystemKnob::Smt,
            "cpu.max_cstate" => SystemKnob::MaxCstate,
            _ if name.starts_with("cpu.") => {
                return Some(Err(format!(
                    "`{name}` is not a CPU control (cpu.governor, cpu.boost, cpu.smt, \
                     cpu.max_cstate)"
                )))
            }
            _ => return None,
        }))
    }

    /// Checks and normalises one level's text; the error says what is allowed.
    pub(crate) fn check(&self, text: &str) -> Result<String, String> {
        let t = text.trim();
        let on_off = |t: &str| match t {
            "on" | "true" | "1" => Ok("on".to_string()),
            "off" | "false" | "0" => Ok("off".to_string()),
            _ => Err("on or off".to_string()),
        };
        match self {
            SystemKnob::Boost | SystemKnob::Smt => on_off(t),
            SystemKnob::MaxCstate => t
                .parse::<u32>()
                .ok()
                .filter(|n| *n < 64)
                .map(|n| n.to_string())
                .ok_or_else(|| "an idle-state number: 0 (polling only) to 63".to_string()),
            SystemKnob::Governor => {
                if !t.is_empty() && t.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
                    Ok(t.to_string())
                } else {
                    Err("a governor name (performance, powersave, schedutil, ...)".to_string())
                }
            }
            // The kernel parses these; a value must be one line and cannot name a path.
            SystemKnob::Sysctl(_) | SystemKnob::Module { .. } => {
                if t.is_empty() || t.contains(['\n', '\r', '\0', '/']) {
                    return Err("one line of text without `/`".to_string());
                }
                if let SystemKnob::Module { module, parameter } = self {
                    if let Some(allowed) = module_risk(module, parameter, t) {
                        return Err(allowed);
                    }
                }
                Ok(t.to_string())
            }
        }
    }

    /// The one file a sysctl or a module parameter is; `None` for the CPU controls.
    fn file(&self) -> Option<String> {
        match self {
            SystemKnob::Sysctl(name) => Some(format!("/proc/sys/{}", name.replace('.', "/"))),
            SystemKnob::Module { module, parameter } => {
                Some(format!("/sys/module/{module}/parameters/{parameter}"))
            }
            _ => None,
        }
    }

    /// The writes that set `level` on machine `m`, or why this machine cannot.
    pub(crate) fn writes(&self, level: &str, m: &Machine) -> Result<Vec<KnobWrite>, String> {
        let w = |path: String, value: &str| KnobWrite {
            path,
            value: value.to_string(),
        };
        let c = &m.controls;
        match self {
            SystemKnob::Sysctl(_) | SystemKnob::Module { .. } => {
                Ok(self.file().map(|f| w(f, level)).into_iter().collect())
            }
            SystemKnob::Governor => {
                if c.governor_cpus.is_empty() {
                    return Err("no CPU here has a cpufreq governor".into());
                }
                if !c.governors.is_empty() && !c.governors.iter().any(|g| g == level) {
                    return Err(format!(
                        "governor {level} is not offered here (offered: {})",
                        c.governors.join(", ")
                    ));
                }
                Ok(c.governor_cpus
                    .iter()
                    .map(|cpu| w(format!("{CPU}/cpu{cpu}/cpufreq/scaling_governor"), level))
                    .collect())
            }
            SystemKnob::Boost => {
                let b = c
                    .boost
                    .as_ref()
                    .ok_or("this machine exposes no boost/turbo switch")?;
                let on = level == "on";
                let value = if on != b.inverted { "1" } else { "0" };
                Ok(vec![w(b.path.clone(), value)])
            }
            SystemKnob::Smt => {
                if c.smt.is_none() {
                    return Err("SMT cannot be switched here (smt/control)".into());
                }
                Ok(vec![w(format!("{CPU}/smt/control"), level)])
            }
            SystemKnob::MaxCstate => {
                if c.idle_states.is_empty() {
                    return Err("no CPU here exposes idle states (cpuidle)".into());
                }
                let deepest: u32 = level.parse().map_err(|_| format!("`{level}`"))?;
                Ok(c.idle_states
                    .iter()
                    .flat_map(|&(cpu, states)| {
                        (0..states).map(move |k| {
                            let off = if k > deepest { "1" } else { "0" };
                            w(format!("{CPU}/cpu{cpu}/cpuidle/state{k}/disable"), off)
                        })
                    })
                    .collect())
            }
        }
    }

    /// Why the levels of a sysctl or module parameter cannot be set on this kernel: its file
    /// is missing (another kernel's sysctl, a module not loaded), or its value is integers and
    /// a level is not as many integers. Ranges only the kernel knows: a level out of range
    /// still fails at its write.
    pub(crate) fn check_here(&self, levels: &[&str], root: &SysRoot) -> Result<(), String> {
        let Some(file) = self.file() else {
            return Ok(());
        };
        if !root.exists(&file) {
            return Err(match self {
                SystemKnob::Module { module, .. } => format!(
                    "{file} does not exist here: module {module} is not loaded, or has no such \
                     parameter"
                ),
                _ => format!(
                    "{file} does not exist on this kernel (a sysctl of another kernel, or of a \
                     module not loaded)"
                ),
            });
        }
        let Some(now) = root.attr(&file) else {
            return Ok(());
        };
        let integers = |t: &str| -> Option<usize> {
            let words: Vec<&str> = t.split_whitespace().collect();
            (!words.is_empty() && words.iter().all(|w| w.parse::<i64>().is_ok()))
                .then_some(words.len())
        };
        let Some(count) = integers(&now) else {
            return Ok(());
        };
        let wrong: Vec<&str> = levels
            .iter()
            .copied()
            .filter(|l| integers(l) != Some(count))
            .collect();
        if wrong.is_empty() {
            return Ok(());
        }
        let takes = if count == 1 {
            "an integer".to_string()
        } else {
            format!("{count} integers")
        };
        Err(format!(
            "takes {takes} (it holds \"{}\" now); not {}",
            now.split_whitespace().collect::<Vec<_>>().join(" "),
            wrong
                .iter()
                .map(|l| format!("{l:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }

    /// What preflight advises for a quiet machine, as far as `m` has the controls: the
    /// performance governor, boost off, no idle state deeper than C1 (case 4's set-up).
    pub(crate) fn advice(m: &Machine) -> Vec<(SystemKnob, String)> {
        let c = &m.controls;
        let mut out = Vec::new();
        if c.governors.iter().any(|g| g == "performance") {
            out.push((SystemKnob::Governor, "performance".to_string()));
        }
        if c.boost.is_some() {
            out.push((SystemKnob::Boost, "off".to_string()));
        }
        if !c.idle_states.is_empty() {
            out.push((SystemKnob::MaxCstate, "1".to_string()));
        }
        out
    }

    /// Whether `[stabilise] preflight = true` sets this control where the machine has it
    /// (see [`SystemKnob::advice`]).
    pub(crate) fn is_advised(&self) -> bool {
        matches!(
            self,
            SystemKnob::Governor | SystemKnob::Boost | SystemKnob::MaxCstate
        )
    }

    /// The name as written in an experiment file.
    pub(crate) fn name(&self) -> String {
        match self {
            SystemKnob::Sysctl(n) => format!("sysctl.{n}"),
            SystemKnob::Module { module, parameter } => format!("module.{module}.{parameter}"),
            SystemKnob::Governor => "cpu.governor".into(),
            SystemKnob::Boost => "cpu.boost".into(),
            SystemKnob::Smt => "cpu.smt".into(),
            SystemKnob::MaxCstate => "cpu.max_cstate".into(),
        }
    }

    /// Whether the knob changes which CPUs are online, which the placement of fio and of
    /// interrupts is resolved against before the first run.
    pub(crate) fn changes_cpus(&self) -> bool {
        matches!(self, SystemKnob::Smt)
    }
}

/// Every sysctl and module-parameter factor of `exp` against this machine's kernel, before
/// anything is touched (see [`SystemKnob::check_here`]). Nothing is checked where the knobs
/// are other hosts' or the machine is a snapshot.
pub(crate) fn check_factors_here(exp: &Experiment, root: &SysRoot) -> Result<(), ResolveError> {
    if !root.is_live() || !exp.target.hosts.is_empty() || exp.target.controlled() {
        return Ok(());
    }
    let errors: Vec<String> = exp
        .factors
        .iter()
        .filter_map(|f| {
            let FactorKind::System(knob) = &f.kind else {
                return None;
            };
            let levels: Vec<&str> = f
                .levels
                .iter()
                .filter_map(|l| match &l.value {
                    LevelValue::Knob(v) => Some(v.as_str()),
                    _ => None,
                })
                .collect();
            let why = knob.check_here(&levels, root).err()?;
            Some(format!("{}:{}: `{}`: {why}", exp.source, f.line, f.name))
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ResolveError(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::controls::BoostControl;
    use crate::model::Controls;

    fn machine(controls: Controls) -> Machine {
        let dir = tempfile::tempdir().unwrap();
        for d in ["sys/block", "sys/devices/system/cpu", "proc/irq"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        std::fs::write(dir.path().join("sys/devices/system/cpu/online"), "0-1\n").unwrap();
        std::fs::write(
            dir.path().join("proc/interrupts"),
            "           CPU0       CPU1\n",
        )
        .unwrap();
        let mut m = Machine::read(&crate::sys::SysRoot::at(dir.path()).unwrap()).unwrap();
        m.controls = controls;
        m
    }

    #[test]
    fn names_parse_into_knobs_that_the_journal_allows() {
        assert_eq!(
            SystemKnob::parse("sysctl.vm.dirty_ratio"),
            Some(Ok(SystemKnob::Sysctl("vm.dirty_ratio".into())))
        );
        assert_eq!(
            SystemKnob::parse("module.nvme.poll_queues"),
            Some(Ok(SystemKnob::Module {
                module: "nvme".into(),
                parameter: "poll_queues".into()
            }))
        );
        assert_eq!(SystemKnob::parse("cpu.smt"), Some(Ok(SystemKnob::Smt)));
        assert_eq!(SystemKnob::parse("bs"), None);
        for bad in [
            "sysctl.kernel.core_pattern",
            "module.firmware_class.path",
            "module.nvme.io_timeout",
            "module.workqueue.panic_on_stall",
            "cpu.speed",
        ] {
            assert!(matches!(SystemKnob::parse(bad), Some(Err(_))), "{bad}");
        }
        assert_eq!(SystemKnob::Boost.check("true").unwrap(), "on");
        assert!(SystemKnob::MaxCstate.check("deep").is_err());
        assert!(SystemKnob::Sysctl("vm.x".into())
            .check("/etc/passwd")
            .is_err());
        // Module parameters whose value would fail or corrupt every device of the driver.
        let module = |m: &str, p: &str| SystemKnob::Module {
            module: m.into(),
            parameter: p.into(),
        };
        let timeout = module("nvme_core", "io_timeout");
        assert!(timeout
            .check("5")
            .unwrap_err()
            .starts_with("a number of at least 30"));
        assert_eq!(timeout.check("60").unwrap(), "60");
        assert!(module("nvme_core", "max_retries").check("0").is_err());
        assert_eq!(module("nvme", "sgl_threshold").check("0").unwrap(), "0");
        // Every parameter with a value rule is one that may be changed at all.
        for (m, p, _, _) in MODULE_RISKS {
            let name = format!("module.{m}.{p}");
            assert!(matches!(SystemKnob::parse(&name), Some(Ok(_))), "{name}");
        }
    }

    #[test]
    fn a_sysctls_levels_are_checked_against_its_file() {
        let dir = tempfile::tempdir().unwrap();
        for (rel, text) in [
            ("proc/sys/vm/swappiness", "60\n"),
            ("proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456\n"),
            ("proc/sys/kernel/sched_policy", "fair\n"),
        ] {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let root = SysRoot::at(dir.path()).unwrap();
        let knob = |name: &str| SystemKnob::Sysctl(name.into());
        assert_eq!(
            knob("vm.swappiness").check_here(&["0", "100"], &root),
            Ok(())
        );
        let e = knob("vm.swappiness")
            .check_here(&["10", "abc", "1 2"], &root)
            .unwrap_err();
        assert_eq!(
            e,
            "takes an integer (it holds \"60\" now); not \"abc\", \"1 2\""
        );
        assert!(knob("net.ipv4.tcp_rmem")
            .check_here(&["4096 87380 6291456"], &root)
            .is_ok());
        let e = knob("net.ipv4.tcp_rmem")
            .check_here(&["4096"], &root)
            .unwrap_err();
        assert!(e.starts_with("takes 3 integers"), "{e}");
        // Text is the kernel's to judge.
        assert!(knob("kernel.sched_policy")
            .check_here(&["x"], &root)
            .is_ok());
        let e = knob("vm.nothing").check_here(&["1"], &root).unwrap_err();
        assert!(e.contains("/proc/sys/vm/nothing does not exist"), "{e}");
        let module = SystemKnob::Module {
            module: "nvme".into(),
            parameter: "poll_queues".into(),
        };
        let e = module.check_here(&["4"], &root).unwrap_err();
        assert!(e.contains("module nvme is not loaded"), "{e}");
        assert!(SystemKnob::Governor.check_here(&["x"], &root).is_ok());
    }

    #[test]
    fn levels_become_writes_for_every_cpu_or_a_reason() {
        let none = machine(Controls::default());
        for k in [
            SystemKnob::Governor,
            SystemKnob::Boost,
            SystemKnob::Smt,
            SystemKnob::MaxCstate,
        ] {
            assert!(k.writes("on", &none).is_err(), "{k:?}");
        }
        let m = machine(Controls {
            governor_cpus: vec![0, 1],
            governors: vec!["performance".into(), "powersave".into()],
            boost: Some(BoostControl {
                path: format!("{CPU}/intel_pstate/no_turbo"),
                inverted: true,
            }),
            smt: Some("on".into()),
            idle_states: vec![(0, 3), (1, 3)],
        });
        let g = SystemKnob::Governor.writes("performance", &m).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[1].path, format!("{CPU}/cpu1/cpufreq/scaling_governor"));
        assert!(SystemKnob::Governor
            .writes("ondemand", &m)
            .unwrap_err()
            .contains("offered"));
        // no_turbo reads the other way round.
        assert_eq!(SystemKnob::Boost.writes("off", &m).unwrap()[0].value, "1");
        let c = SystemKnob::MaxCstate.writes("1", &m).unwrap();
        let disabled: Vec<&str> = c.iter().map(|w| w.value.as_str()).collect();
        assert_eq!(disabled, ["0", "0", "1", "0", "0", "1"]);
        for w in g.iter().chain(&c) {
            kinds::classify(&w.path).unwrap();
        }
    }
}

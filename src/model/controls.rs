//! The machine-wide controls an experiment can vary besides a device's queue: CPU frequency
//! governors, boost/turbo, SMT and idle states. Which of them this machine exposes decides
//! whether a cell that sets one can run here (a VM often has no cpufreq at all), so the model
//! reads them once, like everything else, and the resolver decides from the model without I/O.

use serde::{Deserialize, Serialize};

use crate::sys::SysRoot;

const CPU: &str = "/sys/devices/system/cpu";

/// Where boost is switched, and which way round the file reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BoostControl {
    pub path: String,
    /// `intel_pstate/no_turbo` says 1 for "boost off"; `cpufreq/boost` says 1 for "on".
    pub inverted: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Controls {
    /// Online CPUs with a cpufreq governor, and the governors the first of them offers.
    pub governor_cpus: Vec<u32>,
    pub governors: Vec<String>,
    pub boost: Option<BoostControl>,
    /// `smt/control` when it can be switched (`on` or `off`); `notsupported`,
    /// `notimplemented` and `forceoff` cannot.
    pub smt: Option<String>,
    /// Online CPUs with their number of idle states (state0 .. stateN-1).
    pub idle_states: Vec<(u32, u32)>,
}

impl Controls {
    pub(crate) fn read(root: &SysRoot, online: &[u32]) -> Controls {
        let governor_cpus: Vec<u32> = online
            .iter()
            .copied()
            .filter(|c| root.exists(&format!("{CPU}/cpu{c}/cpufreq/scaling_governor")))
            .collect();
        let governors = governor_cpus
            .first()
            .and_then(|c| root.attr(&format!("{CPU}/cpu{c}/cpufreq/scaling_available_governors")))
            .map(|t| t.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        let boost = [("intel_pstate/no_turbo", true), ("cpufreq/boost", false)]
            .into_iter()
            .map(|(file, inverted)| (format!("{CPU}/{file}"), inverted))
            .find(|(path, _)| root.exists(path))
            .map(|(path, inverted)| BoostControl { path, inverted });
        let smt = root
            .attr(&format!("{CPU}/smt/control"))
            .filter(|s| s == "on" || s == "off");
        let idle_states = online
            .iter()
            .map(|&c| {
                let states = (0..64)
                    .take_while(|k| root.exists(&format!("{CPU}/cpu{c}/cpuidle/state{k}/disable")))
                    .count() as u32;
                (c, states)
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        Controls {
            governor_cpus,
            governors,
            boost,
            smt,
            idle_states,
        }
    }
}

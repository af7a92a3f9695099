//! The hosts an experiment controls (`[[target.host]] ssh = ...`), made ready before the
//! first run: every host is checked as `iolab hosts check` does (reachable, fio the same
//! version as this machine's, which runs fio's client, iolab's version, clock skew) and the
//! run is refused with every problem listed, because a run that finds out at cell 7 has
//! already changed knobs everywhere. Then each host's machine model is read through its
//! agent (`inspect`) and the experiment is planned on it, against that host's own device and
//! interrupt CPUs, so a knob level or placement one host cannot realise is refused here, with
//! the host and its line, not half-way through the matrix. The sessions stay open for the
//! run; dropping them says `bye`, which restores each host.

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use super::Plan;
use crate::experiment::file::HostSpec;
use crate::experiment::{Experiment, TargetDevice};
use crate::hosts::check;
use crate::hosts::protocol::Request;
use crate::hosts::ssh::{Connection, SshOptions};
use crate::model::Machine;

/// The clock skew a controlled host may have (as `iolab hosts check`'s default).
pub const MAX_SKEW: Duration = Duration::from_millis(50);

/// One controlled host, connected and modelled.
pub struct Controlled {
    pub spec: HostSpec,
    /// The device fio drives there (the host's own, else [target] device).
    pub device: String,
    pub machine: Machine,
    /// The experiment planned on this host's model and device.
    pub plan: Plan,
    pub connection: Connection,
}

impl Controlled {
    /// "lab1 (x.toml line 5)", for messages.
    pub fn name(&self, exp: &Experiment) -> String {
        describe(exp, &self.spec)
    }
}

fn describe(exp: &Experiment, spec: &HostSpec) -> String {
    format!(
        "host {} ({} line {})",
        spec.ssh.as_deref().unwrap_or(&spec.fio),
        exp.source,
        spec.line
    )
}

/// The device fio drives on the host `spec`: its own, else the one [target] names.
pub fn host_device(exp: &Experiment, spec: &HostSpec) -> Result<String> {
    if let Some(d) = &spec.device {
        return Ok(crate::target::device_name(d));
    }
    match &exp.target.device {
        TargetDevice::Named(n) if n.len() == 1 => Ok(crate::target::device_name(&n[0])),
        TargetDevice::Named(_) => bail!(
            "{}: a controlled host drives one device; give it its own with `device = \"...\"`",
            describe(exp, spec)
        ),
        TargetDevice::Scratch => bail!(
            "{}: the default scratch device is this machine's; name the host's device with \
             `device = \"...\"` in its [[target.host]]",
            describe(exp, spec)
        ),
    }
}

/// Checks, connects to and models every controlled host; refuses with every problem found.
pub fn connect(
    exp: &Experiment,
    options: &SshOptions,
    max_skew: Duration,
) -> Result<Vec<Controlled>> {
    let specs: Vec<&HostSpec> = exp.target.host_specs.iter().collect();
    if let Some(s) = specs.iter().find(|s| s.ssh.is_none()) {
        bail!(
            "{}: a host without `ssh` cannot be controlled; with some hosts controlled every \
             host needs `ssh = \"...\"` in its [[target.host]]",
            describe(exp, s)
        );
    }
    let names: Vec<String> = specs.iter().filter_map(|s| s.ssh.clone()).collect();
    let report = check::check(&names, options, max_skew);
    if report.problems() > 0 {
        bail!(
            "the hosts are not ready ({} problem(s)); fix them and run again:\n{}",
            report.problems(),
            check::render(&report).trim_end()
        );
    }
    let mut out = Vec::with_capacity(specs.len());
    let mut problems = Vec::new();
    for spec in specs {
        match model(exp, spec, options) {
            Ok(c) => out.push(c),
            Err(e) => problems.push(crate::cli::error_text(&e)),
        }
    }
    if !problems.is_empty() {
        // The hosts already connected say bye (and restore, though nothing was set) on drop.
        bail!("{}", problems.join("\n"));
    }
    Ok(out)
}

/// One host's session, model and plan.
fn model(exp: &Experiment, spec: &HostSpec, options: &SshOptions) -> Result<Controlled> {
    let who = describe(exp, spec);
    let device = host_device(exp, spec)?;
    let ssh = spec
        .ssh
        .as_deref()
        .ok_or_else(|| anyhow!("{who}: no ssh"))?;
    let mut connection = Connection::open(ssh, options).with_context(|| who.clone())?;
    let value = connection
        .request(&Request::Inspect)
        .with_context(|| format!("{who}: inspect"))?;
    let machine: Machine = serde_json::from_value(value)
        .map_err(|e| anyhow!("{who}: a machine model this iolab cannot read ({e})"))?;
    let plan = super::plan(exp, &machine, std::slice::from_ref(&device), false)
        .with_context(|| format!("{who}: the experiment does not fit /dev/{device} there"))?;
    Ok(Controlled {
        spec: spec.clone(),
        device,
        machine,
        plan,
        connection,
    })
}

/// The device the hosts name in their own tables, when every host names one and it is the
/// same everywhere (fio's client sends one job file to every host today); `None` otherwise.
pub fn own_device(exp: &Experiment) -> Option<Vec<String>> {
    let mut names = exp.target.host_specs.iter().map(|s| s.device.as_deref());
    let first = names.next()??;
    names
        .all(|d| d == Some(first))
        .then(|| vec![crate::target::device_name(first)])
}

/// What the run loop does not do on controlled hosts yet, refused before anything is
/// touched rather than run and stored as if it had been done: factors set on the hosts
/// (knobs, placement, `irq_cpu`) and devices that differ between hosts (one job file per
/// host).
pub fn not_yet(exp: &Experiment) -> Result<()> {
    use crate::experiment::factor::FactorKind;
    if let Some(f) = exp
        .factors
        .iter()
        .find(|f| !matches!(f.kind, FactorKind::Fio { .. } | FactorKind::Polling))
    {
        bail!(
            "{} line {}: factor `{}` would be set on the hosts through their agents, which \
             `iolab run` does not do yet (the hosts were checked and modelled); vary fio \
             options and hipri only for now",
            exp.source,
            f.line,
            f.name
        );
    }
    let with_own = exp.target.host_specs.iter().filter(|s| s.device.is_some());
    if with_own.count() > 0 && own_device(exp).is_none() {
        bail!(
            "{}: the hosts drive different devices, which needs one fio job file per host, \
             which `iolab run` does not do yet; give every host the same `device`",
            exp.source
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{host_device, not_yet, own_device};
    use crate::experiment::file::parse;

    fn exp(devices: [&str; 2], factors: &str) -> crate::experiment::Experiment {
        let mut text = "name = \"n\"\n".to_string();
        for (i, d) in devices.iter().enumerate() {
            text += &format!("[[target.host]]\nssh = \"h{i}\"\nfio = \"10.0.0.{i}\"\n{d}");
        }
        text += &format!("[factors]\n{factors}");
        parse("x.toml", &text).unwrap()
    }

    #[test]
    fn what_the_run_does_not_do_on_hosts_yet_is_refused_by_name() {
        let same = exp(["device = \"loop5\"\n"; 2], "bs = [\"4k\"]\n");
        assert_eq!(own_device(&same), Some(vec!["loop5".to_string()]));
        assert_eq!(
            host_device(&same, &same.target.host_specs[1]).unwrap(),
            "loop5"
        );
        not_yet(&same).unwrap();
        let differ = exp(
            ["device = \"loop5\"\n", "device = \"loop6\"\n"],
            "bs = [\"4k\"]\n",
        );
        assert_eq!(own_device(&differ), None);
        let text = not_yet(&differ).unwrap_err().to_string();
        assert!(text.contains("the hosts drive different devices"), "{text}");
        let knob = exp(["device = \"loop5\"\n"; 2], "nr_requests = [32, 64]\n");
        let text = not_yet(&knob).unwrap_err().to_string();
        assert!(
            text.contains("x.toml line 11: factor `nr_requests` would be set on the hosts"),
            "{text}"
        );
    }
}

//! The hosts an experiment controls (`[[target.host]] ssh = ...`), made ready before the
//! first run: every host is checked as `iolab hosts check` does (reachable, fio the same
//! version as this machine's, which runs fio's client, iolab's version, clock skew) and the
//! run is refused with every problem listed, because a run that finds out at cell 7 has
//! already changed knobs everywhere. Then each host's machine model is read through its
//! agent (`inspect`) and the experiment is planned on it, against that host's own device and
//! interrupt CPUs, so a knob level or placement one host cannot realise is refused here, with
//! the host and its line, not half-way through the matrix. The sessions stay open for the
//! run; dropping them says `bye`, which restores each host. During the run, this module
//! turns each run into the hosts' part of it: the cell's knob writes sent as `set`, one fio
//! job file per host (its device, its placement), and each host's sampler around fio, stored
//! as `HOST:metric` figures; the run loop only calls it.

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

/// The devices the hosts name in their own tables, each once, when every host names one
/// (each host gets its own job file); `None` when some host does not.
pub fn own_device(exp: &Experiment) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for s in &exp.target.host_specs {
        let d = crate::target::device_name(s.device.as_deref()?);
        if !out.contains(&d) {
            out.push(d);
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Sets cell `cell`'s knobs on every host through its agent, as its own plan resolved them
/// on its own model (the agent journals each write; `bye` or `iolab restore --host` puts
/// them back). Like the local loop, the next cell's writes overwrite these: every cell of a
/// knob factor writes that knob. `Err` is the run's failure reason, naming the host.
pub fn apply(exp: &Experiment, hosts: &mut [Controlled], cell: usize) -> Result<(), String> {
    for c in hosts.iter_mut() {
        let who = describe(exp, &c.spec);
        let planned = &c.plan.cells[cell];
        if let Some(why) = &planned.not_applicable {
            return Err(format!("{who}: {why}"));
        }
        for w in &planned.writes {
            let request = Request::Set {
                path: w.path.clone(),
                value: w.value.clone(),
            };
            c.connection
                .request(&request)
                .map_err(|e| format!("{who}: cannot set {} = {}: {e:#}", w.path, w.value))?;
        }
    }
    Ok(())
}

/// One fio job file per host for cell `cell`: each host's own device and the CPUs its own
/// plan placed the cell on, keyed by the host's fio server address.
pub fn jobs(
    exp: &Experiment,
    hosts: &[Controlled],
    matrix_cell: &crate::experiment::Cell,
    cell: usize,
) -> Result<Vec<(String, String)>> {
    hosts
        .iter()
        .map(|c| {
            let targets: Vec<(String, Option<Vec<u32>>)> = c.plan.cells[cell]
                .devices
                .iter()
                .map(|d| (format!("/dev/{}", d.device), d.cpus.clone()))
                .collect();
            let job = matrix_cell
                .jobs(exp, &targets)
                .with_context(|| format!("{}: cannot build the fio job", describe(exp, &c.spec)))?;
            Ok((c.spec.fio.clone(), job.job_file()))
        })
        .collect()
}

/// Starts every host's sampler on its device, reading every `interval`.
pub fn sample_start(exp: &Experiment, hosts: &mut [Controlled], interval: Duration) -> Result<()> {
    for c in hosts.iter_mut() {
        let request = Request::SampleStart {
            devices: vec![c.device.clone()],
            interval_ms: (interval.as_millis() as u64).max(1),
        };
        c.connection
            .request(&request)
            .with_context(|| format!("{}: sample_start", describe(exp, &c.spec)))?;
    }
    Ok(())
}

/// Stops every host's sampler and returns its figures as per-host metrics `HOST:name`
/// (system-wide `usr_pct`, `irq_per_s`, ... and its device's `dev_r_per_s`, ...): the runs
/// table keeps one run per cell and round, and a prefixed name keeps each host's figures
/// apart from the aggregate fio figures while `show`/`compare` list them like any metric.
pub fn sample_stop(exp: &Experiment, hosts: &mut [Controlled]) -> Result<Vec<(String, f64)>> {
    let mut out = Vec::new();
    for c in hosts.iter_mut() {
        let name = c.spec.ssh.clone().unwrap_or_else(|| c.spec.fio.clone());
        let answer = c
            .connection
            .request(&Request::SampleStop)
            .with_context(|| format!("{}: sample_stop", describe(exp, &c.spec)))?;
        out.extend(host_metrics(&name, &c.device, &answer));
    }
    Ok(out)
}

/// `HOST:metric` pairs from a `sample_stop` answer: its summary's system figures and those
/// of `device`; none when the sampler had too few readings for a summary.
fn host_metrics(host: &str, device: &str, answer: &serde_json::Value) -> Vec<(String, f64)> {
    let summary = &answer["summary"];
    let figures = |v: &serde_json::Value| {
        v.as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((format!("{host}:{k}"), v.as_f64()?)))
            .collect::<Vec<_>>()
    };
    let mut out = figures(&summary["system"]);
    out.extend(figures(&summary["devices"][device]));
    out.retain(|(_, v)| v.is_finite());
    out
}

#[cfg(test)]
mod tests {
    use super::{host_device, host_metrics, own_device};
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
    fn each_host_drives_its_own_device() {
        let same = exp(["device = \"loop5\"\n"; 2], "bs = [\"4k\"]\n");
        assert_eq!(own_device(&same), Some(vec!["loop5".to_string()]));
        assert_eq!(
            host_device(&same, &same.target.host_specs[1]).unwrap(),
            "loop5"
        );
        let differ = exp(
            ["device = \"loop5\"\n", "device = \"/dev/loop6\"\n"],
            "bs = [\"4k\"]\n",
        );
        assert_eq!(
            own_device(&differ),
            Some(vec!["loop5".to_string(), "loop6".to_string()])
        );
    }

    #[test]
    fn a_hosts_sampler_figures_are_prefixed_with_the_host() {
        let answer = serde_json::json!({"summary": {
            "system": {"usr_pct": 12.5, "irq_per_s": 100.0},
            "devices": {"loop5": {"dev_r_per_s": 2000.0}, "loop6": {"dev_r_per_s": 1.0}}
        }});
        let mut m = host_metrics("h1", "loop5", &answer);
        m.sort_by(|a, b| a.0.cmp(&b.0));
        let want = [
            ("h1:dev_r_per_s", 2000.0),
            ("h1:irq_per_s", 100.0),
            ("h1:usr_pct", 12.5),
        ];
        assert_eq!(
            m,
            want.map(|(k, v)| (k.to_string(), v)).to_vec(),
            "the other device's figures stay out"
        );
        assert!(host_metrics("h1", "loop5", &serde_json::json!({"summary": null})).is_empty());
    }
}

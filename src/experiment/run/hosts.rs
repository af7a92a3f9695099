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

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use super::checks::{self, Check};
use super::Plan;
use crate::experiment::file::HostSpec;
use crate::experiment::{Experiment, TargetDevice};
use crate::hosts::check;
use crate::hosts::protocol::{KnobWrite, Request};
use crate::hosts::ssh::{Connection, SshOptions};
use crate::metrics::{self, Source};
use crate::model::Machine;
use crate::store::{EnvironmentEntry, NewExperiment, NewRun, RunStatus, Store};
use crate::workload::fio_json::FioReport;

/// The clock skew a controlled host may have (as `iolab hosts check`'s default).
pub const MAX_SKEW: Duration = Duration::from_millis(50);

/// One controlled host, connected and modelled.
pub struct Controlled {
    pub spec: HostSpec,
    /// The device fio drives there (the host's own, else `[target] device`).
    pub device: String,
    pub machine: Machine,
    /// The experiment planned on this host's model and device.
    pub plan: Plan,
    pub(crate) connection: Connection,
    /// This host's own experiment, part of the aggregate's, once stored (`store_parts`).
    pub(crate) part: Option<i64>,
    /// Why the host left the experiment mid-run (unreachable); every later run of it is
    /// recorded failed with this, and the others go on.
    pub(crate) gone: Option<String>,
    /// The host's clock minus this machine's (seconds), as `hosts check` measured it when
    /// connecting: puts the host's sampler windows on this machine's clock.
    pub(crate) skew_s: f64,
}

/// The controlled hosts of a run. Their sessions end together: every agent is told to stop
/// before any is waited for, so that the run's end takes as long as its slowest host's agent
/// (up to 5 s each, while they stop their fio servers and restore), not all of them in turn.
pub struct Sessions(pub(crate) Vec<Controlled>);

impl Drop for Sessions {
    fn drop(&mut self) {
        crate::hosts::ssh::end_together(self.0.iter_mut().map(|host| &mut host.connection));
    }
}

impl std::ops::Deref for Sessions {
    type Target = Vec<Controlled>;
    fn deref(&self) -> &Vec<Controlled> {
        &self.0
    }
}

impl std::ops::DerefMut for Sessions {
    fn deref_mut(&mut self) -> &mut Vec<Controlled> {
        &mut self.0
    }
}

impl Controlled {
    /// The name its runs, tags and prefixed metrics carry: its ssh destination.
    pub(crate) fn label(&self) -> &str {
        self.spec.ssh.as_deref().unwrap_or(&self.spec.fio)
    }

    /// The devices stacked below its device there (what a dm or md device is built from),
    /// sampled and traced with it, their figures as `DEVICE:dev_*` and `DEVICE:trace_*`.
    pub(crate) fn below(&self) -> Vec<String> {
        self.plan.stacked.iter().map(|d| d.name.clone()).collect()
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
pub(crate) fn host_device(exp: &Experiment, spec: &HostSpec) -> Result<String> {
    let named = |d: &str| {
        crate::target::remote_device_name(d)
            .map_err(|why| anyhow!("{}: {why}", describe(exp, spec)))
    };
    if let Some(d) = &spec.device {
        return named(d);
    }
    match &exp.target.device {
        TargetDevice::Named(n) if n.len() == 1 => named(&n[0]),
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
pub fn connect(exp: &Experiment, options: &SshOptions, max_skew: Duration) -> Result<Sessions> {
    let specs: Vec<&HostSpec> = exp.target.host_specs.iter().collect();
    if let Some(s) = specs.iter().find(|s| s.ssh.is_none()) {
        bail!(
            "{}: a host without `ssh` cannot be controlled; with some hosts controlled every \
             host needs `ssh = \"...\"` in its [[target.host]]",
            describe(exp, s)
        );
    }
    distinct_servers(exp)?;
    let names: Vec<String> = specs.iter().filter_map(|s| s.ssh.clone()).collect();
    let report = check::check(&names, options, max_skew);
    if report.problems() > 0 {
        bail!(
            "the hosts are not ready ({} problem(s)); fix them and run again:\n{}",
            report.problems(),
            check::render(&report).trim_end()
        );
    }
    let unconfinable = without_landlock(exp, &specs, &report.hosts);
    if !unconfinable.is_empty() {
        bail!("{}", unconfinable.join("\n"));
    }
    let astray = served_out_of_reach(exp, &specs, &report.hosts);
    if !astray.is_empty() {
        bail!("{}", astray.join("\n"));
    }
    memory_of_hosts(exp, &specs, &report.hosts)?;
    if let Some(why) = one_device_each(exp, &specs, &report.hosts)? {
        bail!("{why}");
    }
    if exp.trace {
        let here = crate::sys::SysRoot::live().attr(crate::hosts::facts::BOOT_ID);
        if let Some(why) = one_tracer_each(exp, &specs, &report.hosts, here.as_deref()) {
            bail!("{why}");
        }
    }
    let mut out = Sessions(Vec::with_capacity(specs.len()));
    let mut problems = Vec::new();
    for (spec, checked) in specs.into_iter().zip(&report.hosts) {
        let skew_s = checked.skew.map_or(0.0, |s| s.skew_s);
        match model(exp, spec, options, skew_s) {
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

/// Why each host to `serve` cannot: a server its agent starts runs confined, which needs
/// Landlock there. Said before any host is modelled, for every host that lacks it.
fn without_landlock(
    exp: &Experiment,
    specs: &[&HostSpec],
    checked: &[check::HostCheck],
) -> Vec<String> {
    specs
        .iter()
        .zip(checked)
        .filter_map(|(s, c)| {
            let hello = c.hello.as_ref()?;
            (s.serve.is_some() && hello.landlock_abi.is_none()).then(|| {
                format!(
                    "{}: `serve` starts a fio server confined by Landlock, and its kernel ({}) \
                     has none (Linux 5.13 or later, with `landlock` among its LSMs); start its \
                     server yourself and drop `serve`",
                    describe(exp, s),
                    hello.kernel.as_deref().unwrap_or("unknown")
                )
            })
        })
        .collect()
}

/// Why a host's agent would start its fio server where this machine's fio client does not
/// connect: `serve = true` listens on the host's `fio` address, and an address of this
/// machine's own (127.0.0.1, or one of its interfaces') reaches a server here, run by
/// anyone, unconfined, unless the host shares this machine's network (the same kernel and
/// network namespace: `ssh localhost`). The job went there, said to be confined.
fn served_out_of_reach(
    exp: &Experiment,
    specs: &[&HostSpec],
    checked: &[check::HostCheck],
) -> Vec<String> {
    let here = (
        crate::sys::SysRoot::live().attr(crate::hosts::facts::BOOT_ID),
        crate::hosts::facts::own_net_ns(),
    );
    specs
        .iter()
        .zip(checked)
        .filter_map(|(s, c)| {
            if s.serve.as_deref() != Some(s.fio.as_str()) {
                return None; // the user's own server, or a port forward's host side
            }
            let hello = c.hello.as_ref()?;
            let shared = here.0.is_some()
                && here.1.is_some()
                && (hello.boot_id.clone(), hello.net_ns.clone()) == here;
            if shared {
                return None;
            }
            let addresses = crate::hosts::fio_server::socket_addresses(&s.fio).ok()?;
            let own = addresses.iter().find(|a| own_address(a.ip()))?;
            Some(format!(
                "{}: `fio = \"{}\"` with `serve = true`: {} is an address of this machine, so \
                 its fio client would reach a server here, not the confined one the host's \
                 agent starts; name an address of the host that this machine reaches, or, \
                 through a port forward, `serve = \"ADDRESS,PORT\"` with the host's side of it",
                describe(exp, s),
                s.fio,
                own.ip()
            ))
        })
        .collect()
}

/// Whether `ip` is this machine's own: a loopback address, or one a socket can be bound to
/// here (unless the kernel lets sockets bind any address: then loopback alone is known).
fn own_address(ip: std::net::IpAddr) -> bool {
    if ip.is_loopback() {
        return true;
    }
    let any_binds = [
        "/proc/sys/net/ipv4/ip_nonlocal_bind",
        "/proc/sys/net/ipv6/ip_nonlocal_bind",
    ]
    .iter()
    .any(|p| std::fs::read_to_string(p).is_ok_and(|v| v.trim() != "0"));
    !any_binds && std::net::UdpSocket::bind(std::net::SocketAddr::new(ip, 0)).is_ok()
}

/// Refuses a cell whose fio jobs would hold more memory than a host can spare, as on this
/// machine (`job_memory`), from the memory each host's agent said it has.
fn memory_of_hosts(
    exp: &Experiment,
    specs: &[&HostSpec],
    checked: &[check::HostCheck],
) -> Result<()> {
    for (spec, checked) in specs.iter().zip(checked) {
        let hello = checked.hello.as_ref();
        let machine = describe(exp, spec);
        crate::experiment::job_memory::check_on(
            exp,
            &crate::experiment::job_memory::Memory {
                total_kib: hello.and_then(|h| h.mem_total_kib),
                available_kib: hello.and_then(|h| h.mem_available_kib),
                cpus: hello.and_then(|h| h.cpus_online),
                machine: &machine,
                meminfo: &format!("the /proc/meminfo of {machine}"),
            },
            0,
        )?;
    }
    Ok(())
}

/// Why the hosts cannot run as listed, if two of them are one running kernel (the same boot
/// id: two names of one machine, `h` and `root@h`, or two network namespaces of it) driving
/// one device: both parts would run fio on it at once, and the second's server failed to
/// start only once the first run began. Devices are machine-wide, whatever the namespace.
fn one_device_each(
    exp: &Experiment,
    specs: &[&HostSpec],
    checked: &[check::HostCheck],
) -> Result<Option<String>> {
    let mut seen: Vec<(&HostSpec, &str, String)> = Vec::new();
    for (spec, c) in specs.iter().zip(checked) {
        let Some(id) = c.hello.as_ref().and_then(|h| h.boot_id.as_deref()) else {
            continue;
        };
        let device = host_device(exp, spec)?;
        if let Some((other, ..)) = seen.iter().find(|(_, i, d)| *i == id && *d == device) {
            return Ok(Some(format!(
                "{} and {} are one running kernel (the same boot id) and both drive /dev/{device}: \
                 name each machine's device once",
                describe(exp, other),
                describe(exp, spec)
            )));
        }
        seen.push((spec, id, device));
    }
    Ok(None)
}

/// Why `trace = true` cannot record as asked, if it cannot: a kernel has one block tracer,
/// which records one trace at once, and two of the hosts, or a host and this machine with
/// `local_devices` to trace, are one running kernel (the same boot id: network namespaces, or
/// two names of one machine). Every run would otherwise fail one host's part with "tracer busy".
fn one_tracer_each(
    exp: &Experiment,
    specs: &[&HostSpec],
    checked: &[check::HostCheck],
    here: Option<&str>,
) -> Option<String> {
    let boot_ids: Vec<(&HostSpec, &str)> = specs
        .iter()
        .zip(checked)
        .filter_map(|(s, c)| Some((*s, c.hello.as_ref()?.boot_id.as_deref()?)))
        .collect();
    for (i, (a, id)) in boot_ids.iter().enumerate() {
        if let Some((b, _)) = boot_ids[..i].iter().find(|(_, other)| other == id) {
            return Some(format!(
                "{} and {} are one running kernel (the same boot id), whose one block tracer \
                 records one trace at once: with trace = true each host must be a machine of \
                 its own",
                describe(exp, b),
                describe(exp, a)
            ));
        }
        if !exp.target.local_devices.is_empty() && here == Some(*id) {
            return Some(format!(
                "{} is this machine (the same boot id): its trace and that of local_devices \
                 would need its one block tracer at once; with trace = true, drop \
                 local_devices or this host",
                describe(exp, a)
            ));
        }
    }
    None
}

/// One host's session, model and plan.
fn model(
    exp: &Experiment,
    spec: &HostSpec,
    options: &SshOptions,
    skew_s: f64,
) -> Result<Controlled> {
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
    let mut plan = super::plan(exp, &machine, std::slice::from_ref(&device), false)
        .with_context(|| format!("{who}: the experiment does not fit that host"))?;
    plan.stacked = super::stacked_devices(&machine, std::slice::from_ref(&device));
    Ok(Controlled {
        spec: spec.clone(),
        device,
        machine,
        plan,
        connection,
        part: None,
        gone: None,
        skew_s,
    })
}

/// Starts the fio server of each host whose `[[target.host]]` says `serve`, through its agent:
/// confined to the host's device, which it may write only when the experiment `writes`.
/// Returns a line per server for the progress; fails naming the host.
pub(crate) fn serve(
    exp: &Experiment,
    hosts: &mut [Controlled],
    writes: bool,
) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    for c in hosts.iter_mut() {
        if let Some(listen) = c.spec.serve.clone() {
            let request = Request::FioServe {
                listen,
                device: c.device.clone(),
                writes,
            };
            c.connection.request(&request).with_context(|| {
                format!("{}: cannot start its fio server", describe(exp, &c.spec))
            })?;
        }
        notes.push(server_note(&c.spec, &c.device, writes));
    }
    Ok(notes)
}

/// What the progress says of a host's fio server: confined by its agent, or the user's own.
fn server_note(spec: &HostSpec, device: &str, writes: bool) -> String {
    let who = spec.ssh.as_deref().unwrap_or(&spec.fio);
    match &spec.serve {
        Some(listen) => format!(
            "{who}: fio server on {listen}, started by its agent for this run, confined to \
             /dev/{device} ({})",
            if writes {
                "reads and writes"
            } else {
                "reads only"
            }
        ),
        None => format!(
            "{who}: the fio server at {} is yours, and unconfined: it runs any job that reaches \
             its port; `serve = true` has the host's agent start a confined one for the run",
            spec.fio
        ),
    }
}

/// The devices controlled hosts drive, each once: each host's own, else [target] device.
/// `--device` names this machine's device and is refused here: the hosts' jobs are built from
/// the file (`host_device`), and a device checked for writing that no job drives would let
/// the job's own device go unchecked.
pub(crate) fn controlled_devices(exp: &Experiment, override_: Option<&str>) -> Result<Vec<String>> {
    if let Some(d) = override_ {
        bail!(
            "--device {d}: controlled hosts drive the device their [[target.host]] names \
             (`device = \"...\"`), else [target] device; name it there"
        );
    }
    let mut out: Vec<String> = Vec::new();
    for spec in &exp.target.host_specs {
        let d = host_device(exp, spec)?;
        if !out.contains(&d) {
            out.push(d);
        }
    }
    Ok(out)
}

/// The fio servers whose job drives `device`: a controlled host's own, else every one.
pub(crate) fn driving(exp: &Experiment, device: &str) -> Vec<String> {
    exp.target
        .host_specs
        .iter()
        .filter(|s| !exp.target.controlled() || host_device(exp, s).is_ok_and(|d| d == device))
        .map(|s| s.fio.clone())
        .collect()
}

/// Refuses two hosts whose fio addresses reach one server, however written ("10.0.0.1" and
/// "ip:10.0.0.1,8765", or a name and its address): one host's job would run on the other's
/// server, on a device nobody named for that host, and each host's part would be credited
/// with both jobs. An address that does not resolve, or not within `RESOLVE_WITHIN` (names are
/// looked up all at once), is left to fio's client to report.
pub(crate) fn distinct_servers(exp: &Experiment) -> Result<()> {
    const RESOLVE_WITHIN: Duration = Duration::from_secs(5);
    let specs = &exp.target.host_specs;
    let (tx, rx) = std::sync::mpsc::channel();
    for (i, s) in specs.iter().enumerate() {
        let (tx, fio) = (tx.clone(), s.fio.clone());
        std::thread::spawn(move || {
            let resolved = crate::hosts::fio_server::socket_addresses(&fio).unwrap_or_default();
            let _ = tx.send((i, resolved));
        });
    }
    drop(tx);
    let mut reaches: Vec<std::collections::BTreeSet<String>> = specs
        .iter()
        .map(|s| [crate::experiment::file::fio_server_key(&s.fio)].into())
        .collect();
    let deadline = std::time::Instant::now() + RESOLVE_WITHIN;
    // An IPv4-mapped IPv6 address (`ip6:::ffff:10.0.0.1`) reaches the IPv4 server.
    let unmapped = |a: &std::net::SocketAddr| match a {
        std::net::SocketAddr::V6(v6) => v6.ip().to_ipv4_mapped().map_or(*a, |v4| {
            std::net::SocketAddr::new(std::net::IpAddr::V4(v4), a.port())
        }),
        _ => *a,
    };
    while let Ok((i, resolved)) =
        rx.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
    {
        reaches[i].extend(resolved.iter().map(|a| unmapped(a).to_string()));
    }
    for (i, a) in specs.iter().enumerate() {
        for (j, b) in specs.iter().enumerate().skip(i + 1) {
            if let Some(both) = reaches[i].intersection(&reaches[j]).next() {
                bail!(
                    "{} and {} name one fio server (`{}` and `{}` both reach {both}): each host \
                     needs a server of its own",
                    describe(exp, a),
                    describe(exp, b),
                    a.fio,
                    b.fio
                );
            }
        }
    }
    Ok(())
}

/// Refuses what fio's client mode alone cannot do: every server runs the same job, so a
/// host's own `device` (which only a controlled host's job uses) would be driven on every
/// host; and a host with `ssh` beside hosts without it would silently not be controlled.
pub(crate) fn uncontrolled_fit(exp: &Experiment) -> Result<()> {
    distinct_servers(exp)?;
    let specs = &exp.target.host_specs;
    if let (Some(with), Some(without)) = (
        specs.iter().find(|s| s.ssh.is_some()),
        specs.iter().find(|s| s.ssh.is_none()),
    ) {
        let remedy = if without.listed {
            format!(
                "move `{}` from `hosts` (fio servers only) to a [[target.host]] with \
                 `ssh = \"...\"`, or give no host `ssh`",
                without.fio
            )
        } else {
            "give every [[target.host]] `ssh = \"...\"`, or none".to_string()
        };
        bail!(
            "{} has `ssh` and {} has none: iolab controls all hosts or none; {remedy}",
            describe(exp, with),
            describe(exp, without)
        );
    }
    if let Some(s) = specs.iter().find(|s| s.device.is_some()) {
        bail!(
            "{}: a host's own `device` needs `ssh` (iolab then writes each host its own job); \
             without it every fio server runs one job: name the device in [target] device",
            describe(exp, s)
        );
    }
    Ok(())
}

/// What `iolab run --dry-run` says of one controlled host: its device, kernel and, per
/// cell, where fio runs there and what is set, or why the cell cannot run there.
pub(crate) fn plan_note(c: &Controlled, traced: bool) -> String {
    let mut out = format!(
        "host {}: /dev/{}, kernel {}",
        c.label(),
        c.device,
        c.machine.kernel.as_deref().unwrap_or("unknown")
    );
    let below = c.below();
    if !below.is_empty() {
        out += &format!(
            " (built from {}: sampled{} with it, metrics {}:DEVICE:dev_*)",
            crate::trace::capture::listed(&below),
            if traced { " and traced" } else { "" },
            c.label()
        );
    }
    match &c.spec.serve {
        Some(listen) => {
            out += &format!(", fio server on {listen} started by its agent for the run")
        }
        None => {
            out += &format!(
                ", fio server at {} yours and unconfined (`serve = true` confines it)",
                c.spec.fio
            )
        }
    }
    for cell in &c.plan.cells {
        let what = match &cell.not_applicable {
            Some(why) => format!("not applicable: {why}"),
            None => {
                let cpus = cell
                    .devices
                    .iter()
                    .find_map(|d| d.cpus.as_deref())
                    .map(crate::placement::cpus_text)
                    .unwrap_or_else(|| "any CPU".to_string());
                let sets: Vec<String> = cell
                    .writes
                    .iter()
                    .map(|w| format!("{} = {}", w.path, w.value))
                    .collect();
                if sets.is_empty() {
                    format!("fio on {cpus}")
                } else {
                    format!("fio on {cpus}; sets {}", sets.join(", "))
                }
            }
        };
        out += &format!("\n  {}: {what}", cell.key);
    }
    out
}

/// The kernel every controlled host runs, when they all run the same one.
pub(crate) fn common_kernel(hosts: &[Controlled]) -> Option<String> {
    let first = hosts.first()?.machine.kernel.clone()?;
    hosts
        .iter()
        .all(|c| c.machine.kernel.as_deref() == Some(first.as_str()))
        .then_some(first)
}

/// Stores one experiment per host, part of the aggregate `parent` (`new` is the aggregate's
/// record): the host's name, its kernel, its preflight findings (asked of its agent, sampled
/// for `preflight_sample`), its device and its own plan. Each host's runs go there.
pub(crate) fn store_parts(
    store: &mut Store,
    hosts: &mut [Controlled],
    new: &NewExperiment,
    parent: i64,
    preflight_sample: Duration,
) -> Result<()> {
    for c in hosts.iter_mut() {
        let id = store.create_experiment(&NewExperiment {
            host: c.label().to_string(),
            kernel: c.machine.kernel.clone().unwrap_or_default(),
            part_of: Some(parent),
            ..new.clone()
        })?;
        c.part = Some(id);
        let request = Request::Preflight {
            sample_ms: preflight_sample.as_millis() as u64,
        };
        let mut env: Vec<EnvironmentEntry> = match c.connection.request(&request) {
            Ok(v) => serde_json::from_value(v).unwrap_or_default(),
            Err(e) => {
                // Unanswered: the host is out of the experiment from the first run on.
                if c.connection.broken() {
                    c.gone = Some(format!("unreachable before the first run: {e:#}"));
                }
                vec![EnvironmentEntry {
                    key: "preflight".into(),
                    value: format!("not read: {e:#}"),
                    severity: None,
                    advice: None,
                }]
            }
        };
        lease(c);
        for (key, value) in [
            ("target", format!("/dev/{} on {}", c.device, c.label())),
            ("part_of", format!("experiment {parent}")),
            ("plan", serde_json::to_string(&c.plan.cells)?),
        ] {
            env.push(EnvironmentEntry {
                key: key.into(),
                value,
                severity: None,
                advice: None,
            });
        }
        store.add_environment(id, &env)?;
    }
    Ok(())
}

/// Stores each host's run in its own experiment, from the aggregate's record (cell, round,
/// times, tags) with the host's status, figures, tags and job file.
pub(crate) fn store_runs(
    store: &mut Store,
    hosts: &[Controlled],
    settled: Vec<Settled>,
    aggregate: &NewRun,
    job_files: &[(String, String)],
) -> Result<()> {
    for (c, s) in hosts.iter().zip(settled) {
        let Some(part) = c.part else { continue };
        let mut tags = aggregate.tags.clone();
        tags.push(("host".into(), c.label().to_string()));
        tags.push((
            "kernel".into(),
            c.machine.kernel.clone().unwrap_or_default(),
        ));
        store.insert_run(&NewRun {
            experiment_id: part,
            cell_key: aggregate.cell_key.clone(),
            cell_levels: aggregate.cell_levels.clone(),
            repetition: aggregate.repetition,
            warmup: aggregate.warmup,
            start_unix: aggregate.start_unix,
            end_unix: aggregate.end_unix,
            status: s.status,
            tags,
            metrics: s.metrics,
            samples: s.samples,
            sample_window: s.window,
            checks: (!s.checks.is_empty())
                .then(|| serde_json::to_value(&s.checks).ok())
                .flatten(),
            fio_command: aggregate.fio_command.clone(),
            job_file: job_files
                .iter()
                .find(|(server, _)| *server == c.spec.fio)
                .map(|(_, text)| text.clone()),
            ..Default::default()
        })?;
    }
    Ok(())
}

/// Where each host's part of one run stands: `None` while it goes on, else how it ended
/// (not applicable there, failed, or the host gone), in the order of the hosts.
pub(crate) type Parts = Vec<Option<RunStatus>>;

/// A failure of `c`'s part of a run; when its session broke, the host leaves the experiment
/// (`gone`) and every later run of it is failed with the reason.
fn failed(c: &mut Controlled, run: usize, why: String) -> RunStatus {
    if c.gone.is_none() && c.connection.broken() {
        // `why` names the host already.
        c.gone = Some(format!("unreachable since run {run}: {why}"));
    }
    RunStatus::Failed(why)
}

/// How long a host's agent waits for the next request before it takes the connection for
/// lost (`lease`): between runs, fio's start and its server's one-second wait, a trace's
/// analysis, this machine storing the run; during a run the lease is renewed (every
/// [`LEASE_RENEW`]), whatever the run's length. A cut this machine's ssh notices may reach
/// the host only hours later (TCP keepalive), with its knobs changed and its device locked.
const LEASE: Duration = Duration::from_secs(600);
const LEASE_RENEW: Duration = Duration::from_secs(60);

/// Asks `c`'s agent to restore and end when no request comes within [`LEASE`]. A host that
/// cannot take one runs without.
fn lease(c: &mut Controlled) {
    if c.gone.is_some() {
        return;
    }
    let ms = LEASE.as_millis() as u64;
    if c.connection
        .request(&Request::Lease { ms: Some(ms) })
        .is_err()
        && c.connection.broken()
    {
        c.gone = Some("unreachable before the first run: lease unanswered".to_string());
    }
}

/// Runs `work` (fio, as long as it takes) while every host still in the experiment has its
/// lease renewed.
pub(crate) fn renewing_leases<T>(hosts: &mut [Controlled], work: impl FnOnce() -> T) -> T {
    let sessions = hosts
        .iter_mut()
        .filter(|c| c.gone.is_none())
        .map(|c| &mut c.connection)
        .collect();
    crate::hosts::ssh::while_renewing(sessions, LEASE.as_millis() as u64, LEASE_RENEW, work)
}

/// Sets cell `cell`'s knobs on every host still in the experiment, through its agent, as its
/// own plan resolved them on its own model (the agent journals each write; `bye` or `iolab
/// restore` puts them back). Like the local loop, the next cell's writes overwrite these.
/// `run` numbers the run for messages.
pub(crate) fn apply(exp: &Experiment, hosts: &mut [Controlled], cell: usize, run: usize) -> Parts {
    let mut parts = Vec::with_capacity(hosts.len());
    for c in hosts.iter_mut() {
        let who = describe(exp, &c.spec);
        if let Some(gone) = &c.gone {
            parts.push(Some(RunStatus::Failed(gone.clone())));
            continue;
        }
        let planned = &c.plan.cells[cell];
        if let Some(why) = &planned.not_applicable {
            parts.push(Some(RunStatus::NotApplicable(format!("{who}: {why}"))));
            continue;
        }
        let mut part = None;
        if !planned.writes.is_empty() {
            let writes = planned
                .writes
                .iter()
                .map(|w| KnobWrite {
                    path: w.path.clone(),
                    value: w.value.clone(),
                })
                .collect();
            if let Err(e) = c.connection.request(&Request::SetAll { writes }) {
                let why = format!("{who}: cannot set the cell's knobs: {e:#}");
                part = Some(failed(c, run, why));
            }
        }
        parts.push(part);
    }
    parts
}

/// One fio job file per host whose part goes on, for cell `cell`: each host's own device and
/// the CPUs its own plan placed the cell on, keyed by the host's fio server address.
pub(crate) fn jobs(
    exp: &Experiment,
    hosts: &[Controlled],
    matrix_cell: &crate::experiment::Cell,
    cell: usize,
    parts: &Parts,
) -> Result<Vec<(String, String)>> {
    hosts
        .iter()
        .zip(parts)
        .filter(|(_, p)| p.is_none())
        .map(|(c, _)| {
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

/// Starts the sampler of every host whose part goes on, on its device, reading every
/// `interval`.
pub(crate) fn sample_start(
    exp: &Experiment,
    hosts: &mut [Controlled],
    cadence: crate::sample::Cadence,
    parts: &mut Parts,
    run: usize,
) {
    let ms = |d: Duration| (d.as_millis() as u64).max(1);
    for (c, part) in hosts.iter_mut().zip(parts.iter_mut()) {
        if part.is_some() {
            continue;
        }
        let request = Request::SampleStart {
            devices: vec![c.device.clone()],
            below: c.below(),
            interval_ms: ms(cadence.max),
            first_ms: (cadence.first != cadence.max).then(|| ms(cadence.first)),
        };
        if let Err(e) = c.connection.request(&request) {
            let why = format!("{}: sample_start: {e:#}", describe(exp, &c.spec));
            *part = Some(failed(c, run, why));
        }
    }
}

/// Stops the sampler of every host whose part goes on and returns its answer (`None` for
/// the others). Each host is told how long fio measured there (`report`, fio's client
/// output, has each host's runtime but not when it ran), so its figures cover that interval
/// and not fio's start-up: connecting to the servers alone took over a second in the lab.
pub(crate) fn sample_stop(
    exp: &Experiment,
    hosts: &mut [Controlled],
    parts: &mut Parts,
    run: usize,
    report: Option<&crate::workload::FioReport>,
) -> Vec<Option<serde_json::Value>> {
    let mut out = Vec::with_capacity(hosts.len());
    for (c, part) in hosts.iter_mut().zip(parts.iter_mut()) {
        if part.is_some() {
            out.push(None);
            continue;
        }
        let measured_ms = report.and_then(|r| measured_ms(r, fio_server(&c.spec.fio)));
        match c.connection.request(&Request::SampleStop { measured_ms }) {
            Ok(answer) => out.push(Some(answer)),
            Err(e) => {
                let why = format!("{}: sample_stop: {e:#}", describe(exp, &c.spec));
                *part = Some(failed(c, run, why));
                out.push(None);
            }
        }
    }
    out
}

/// Where the hosts' sampler windows lie together, on this machine's wall clock (ns since the
/// epoch): each host's window, placed by its device's I/O, moved by that host's skew. `None`
/// when no host placed one.
pub(crate) fn measured_span_unix_ns(
    hosts: &[Controlled],
    answers: &[Option<serde_json::Value>],
) -> Option<(f64, f64)> {
    let skews: Vec<f64> = hosts.iter().map(|c| c.skew_s).collect();
    span_of_windows(&skews, answers)
}

/// [`measured_span_unix_ns`] of hosts with these skews.
fn span_of_windows(skews_s: &[f64], answers: &[Option<serde_json::Value>]) -> Option<(f64, f64)> {
    skews_s
        .iter()
        .zip(answers)
        .filter_map(|(skew_s, answer)| {
            let a = answer.as_ref()?;
            let w = &a["window"];
            if w["basis"].as_str() != Some(super::align::DEVICE_IO_END) {
                return None;
            }
            let zero = a["started_unix_ns"].as_f64()? - skew_s * 1e9;
            Some((
                zero + w["start_s"].as_f64()? * 1e9,
                zero + w["end_s"].as_f64()? * 1e9,
            ))
        })
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
}

/// Starts a block trace of its device on every host whose part goes on; a host that cannot
/// record (tracer busy, no tracefs) fails its part with why: a trace asked for and missing
/// would leave that host's trace_* figures out of its cell.
pub(crate) fn trace_start(
    exp: &Experiment,
    hosts: &mut [Controlled],
    parts: &mut Parts,
    run: usize,
) {
    for (c, part) in hosts.iter_mut().zip(parts.iter_mut()) {
        if part.is_some() {
            continue;
        }
        let request = Request::TraceStart {
            device: c.device.clone(),
            below: c.below(),
            // None: the host sizes its own from its memory, as this machine would.
            buffer_kb: exp.trace_settings.buffer_kb,
        };
        if let Err(e) = c.connection.request(&request) {
            let why = format!("{}: trace_start: {e:#}", describe(exp, &c.spec));
            *part = Some(failed(c, run, why));
            // Its sampler started for this run; the part is over, so it stops now (or the
            // next run's sample_start would find it running).
            if c.gone.is_none() {
                let _ = c
                    .connection
                    .request(&Request::SampleStop { measured_ms: None });
            }
        }
    }
}

/// What a host's trace of one run gave: its `trace_*` metrics, and the MB its bios completed
/// within fio's measured interval there with that interval's uncertainty in percent.
#[derive(Debug, Clone, Default)]
pub(crate) struct HostTrace {
    pub(crate) metrics: Vec<(String, f64)>,
    pub(crate) in_window: Option<(f64, f64)>,
}

/// Stops every host's trace and returns what it gave (nothing for hosts whose part ended
/// before).
pub(crate) fn trace_stop(
    exp: &Experiment,
    hosts: &mut [Controlled],
    parts: &mut Parts,
    run: usize,
) -> Vec<HostTrace> {
    let mut out = Vec::with_capacity(hosts.len());
    for (c, part) in hosts.iter_mut().zip(parts.iter_mut()) {
        if part.is_some() {
            out.push(HostTrace::default());
            continue;
        }
        match c.connection.request(&Request::TraceStop) {
            Ok(answer) => out.push(HostTrace {
                metrics: [
                    figures(&answer["metrics"], Source::Trace),
                    below_trace_figures(&answer["metrics"], &c.below()),
                ]
                .concat(),
                in_window: answer["in_window"][0]
                    .as_f64()
                    .zip(answer["in_window"][1].as_f64()),
            }),
            Err(e) => {
                let why = format!("{}: trace_stop: {e:#}", describe(exp, &c.spec));
                *part = Some(failed(c, run, why));
                out.push(HostTrace::default());
            }
        }
    }
    out
}

/// What each host measured during a run: its `sample_stop` answer and its trace.
pub(crate) type Measured = (Vec<Option<serde_json::Value>>, Vec<HostTrace>);

/// One host's part of one run, settled: how it ended and its own figures (its fio jobs'
/// metrics, then its sampler's system and device figures, unprefixed), and the same sampler
/// figures prefixed with the host for the aggregate run.
pub(crate) struct Settled {
    pub(crate) status: RunStatus,
    pub(crate) metrics: Vec<(String, f64)>,
    pub(crate) prefixed: Vec<(String, f64)>,
    /// The host's sampler series (CPU shares, interrupts, its device), as a local run's.
    pub(crate) samples: Vec<crate::store::SampleSeries>,
    /// What the host's sampler figures were taken over (its answer's `window`).
    pub(crate) window: Option<serde_json::Value>,
    /// The cross-checks of the host's part, as a local run's (`host_checks`).
    pub(crate) checks: Vec<Check>,
}

/// Each host's part of a run after fio ended: its own jobs found in fio's report by the
/// server's address (fio names each client's jobs with it), the host's sampler figures from
/// its `sample_stop` answer. A host fio reported nothing for failed, with what fio said of
/// it; when its agent does not answer either, it leaves the experiment.
pub(crate) fn settle(
    exp: &Experiment,
    hosts: &mut [Controlled],
    parts: Parts,
    (answers, traces): Measured,
    (outcome, polled): (Option<&crate::workload::FioOutcome>, bool),
    run: usize,
) -> Vec<Settled> {
    let mut out = Vec::with_capacity(hosts.len());
    let addresses: Vec<String> = hosts
        .iter()
        .map(|c| fio_server(&c.spec.fio).0.to_string())
        .collect();
    let each = hosts
        .iter_mut()
        .zip(parts)
        .zip(answers.into_iter().zip(traces));
    for ((c, part), (answer, traced)) in each {
        if let Some(status) = part {
            out.push(Settled {
                status,
                metrics: Vec::new(),
                prefixed: Vec::new(),
                samples: Vec::new(),
                window: None,
                checks: Vec::new(),
            });
            continue;
        }
        let server = fio_server(&c.spec.fio);
        let report = outcome.and_then(|o| o.report.as_ref());
        let own = report.map(|r| r.of_client(server));
        let mut sampled = answer
            .as_ref()
            .map(|a| sampler_figures((&c.device, &c.below()), a))
            .unwrap_or_default();
        sampled.extend(traced.metrics);
        let prefixed = prefixed(c.label(), sampled.clone());
        let status = match &own {
            Some(r) if !r.jobs.is_empty() && r.jobs.iter().all(|j| j.error == 0) => RunStatus::Ok,
            Some(r) if !r.jobs.is_empty() => {
                let errors: Vec<String> = r.jobs.iter().map(|j| j.error.to_string()).collect();
                RunStatus::Failed(format!(
                    "{}: fio's jobs there ended with error {}",
                    describe(exp, &c.spec),
                    errors.join(", ")
                ))
            }
            _ => {
                let shared = addresses.iter().filter(|a| *a == server.0).count() > 1;
                let said = outcome
                    .map(|o| fio_said_of(o, server, shared))
                    .unwrap_or_default();
                let why = format!(
                    "{}: fio reported nothing from the server at {}{}",
                    describe(exp, &c.spec),
                    c.spec.fio,
                    if said.is_empty() {
                        String::new()
                    } else {
                        format!(" (fio said: {said})")
                    }
                );
                // Its agent tells a dead host from a server that alone failed.
                if c.connection.request(&Request::Hello).is_err() {
                    failed(c, run, why)
                } else {
                    RunStatus::Failed(why)
                }
            }
        };
        // The sampler's and the trace's figures, by name, are what the checks compare.
        let checks = match (&status, &own) {
            (RunStatus::Ok, Some(r)) => host_checks(
                (&c.device, &c.machine),
                (r, polled),
                answer.as_ref(),
                &sampled,
                traced.in_window,
                exp.trace_settings.buffer_kb,
            ),
            _ => Vec::new(),
        };
        let mut metrics = match (&status, own) {
            (RunStatus::Ok, Some(r)) => r.metrics(),
            _ => Vec::new(),
        };
        if status == RunStatus::Ok {
            metrics.extend(sampled);
        }
        metrics.retain(|(_, v)| v.is_finite());
        let (samples, window) = match (&status, &answer) {
            (RunStatus::Ok, Some(a)) => (
                sampler_series(&c.device, a),
                Some(a["window"].clone()).filter(|w| !w.is_null()),
            ),
            _ => (Vec::new(), None),
        };
        out.push(Settled {
            status,
            metrics,
            prefixed,
            samples,
            window,
            checks,
        });
    }
    out
}

/// The cross-checks of one host's part, as a local run has them: its fio jobs' percentiles
/// against their `json+` bins; their bytes against the host's diskstats over the window its
/// agent placed (judged where the host's model says the device holds no data); and against
/// the bytes of the host's block trace when one was recorded, with `ramp_time` those
/// within fio's measured interval as the host placed it (`in_window`: MB, uncertainty in
/// percent). `figures` are the host's sampler and trace figures by name.
fn host_checks(
    (device, machine): (&str, &Machine),
    (report, polled): (&FioReport, bool),
    answer: Option<&serde_json::Value>,
    figures: &[(String, f64)],
    in_window: Option<(f64, f64)>,
    buffer_kb: Option<u64>,
) -> Vec<Check> {
    let mut out = checks::percentiles_vs_bins(report);
    if let Some(a) = answer {
        let sampled = &a["summary"]["devices"][device];
        let dev: BTreeMap<&'static str, f64> = [
            metrics::DEV_RMB_PER_S,
            metrics::DEV_WMB_PER_S,
            metrics::DEV_IRQ_PER_S,
        ]
        .iter()
        .filter_map(|m| Some((m.name, sampled[m.name].as_f64()?)))
        .collect();
        let devices = BTreeMap::from([(device.to_string(), dev)]);
        let owned = |name: &str| machine.device(name).is_some_and(|d| !d.holds_data);
        let uncertain: BTreeMap<String, f64> = a["window"]["uncertain_mb_per_s"][device]
            .as_f64()
            .map(|u| (device.to_string(), u))
            .into_iter()
            .collect();
        out.extend(checks::bytes_vs_diskstats(
            report, &devices, &owned, &uncertain,
        ));
        if polled {
            out.extend(checks::polled_io_vs_interrupts(report, &devices));
        }
    }
    let get = |name: &str| figures.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
    if let Some(completed_mb) = get(metrics::TRACE_COMPLETED_MB.name) {
        let lost = get(metrics::TRACE_EVENTS_LOST.name).unwrap_or(0.0);
        let trace = checks::TraceBytes {
            completed_mb,
            in_window,
        };
        out.push(checks::trace_vs_fio(
            report,
            device,
            trace,
            (lost, buffer_kb),
        ));
    }
    out
}

/// The aggregate run's status given its hosts' parts: not applicable or failed when any
/// host's part was (a sum over fewer hosts is not the experiment's figure), naming them.
pub(crate) fn aggregate_status(settled: &[Settled]) -> Option<RunStatus> {
    let reasons = |pick: fn(&RunStatus) -> Option<&String>| {
        settled
            .iter()
            .filter_map(|s| pick(&s.status).cloned())
            .collect::<Vec<_>>()
    };
    let not_applicable = reasons(|s| match s {
        RunStatus::NotApplicable(w) => Some(w),
        _ => None,
    });
    let failed = reasons(|s| match s {
        RunStatus::Failed(w) => Some(w),
        _ => None,
    });
    if !failed.is_empty() {
        Some(RunStatus::Failed(failed.join("; ")))
    } else if !not_applicable.is_empty() {
        Some(RunStatus::NotApplicable(not_applicable.join("; ")))
    } else {
        None
    }
}

/// How long fio measured on `server`: the longest runtime of its jobs in any direction
/// (`ramp_time` left out, as fio leaves it out of every figure); `None` when fio reported
/// no time for it.
fn measured_ms(report: &crate::workload::FioReport, server: (&str, u16)) -> Option<u64> {
    longest_measured_ms(&report.of_client(server))
}

/// How long fio measured on any host: the longest runtime of all jobs in `report`.
pub(crate) fn longest_measured_ms(report: &crate::workload::FioReport) -> Option<u64> {
    report
        .jobs
        .iter()
        .flat_map(|j| [&j.read, &j.write, &j.trim])
        .map(|d| d.runtime_ms)
        .max()
        .filter(|&ms| ms > 0)
}

/// The address and port of fio's server address ("ip:10.0.0.1,8765" -> ("10.0.0.1", 8765)),
/// as fio's client names the server's jobs in its report (`hostname`, `port`).
fn fio_server(address: &str) -> (&str, u16) {
    crate::experiment::file::fio_endpoint(address)
        .unwrap_or((address, crate::experiment::file::FIO_PORT))
}

/// The lines fio's client printed about `server` ("fio: failed to connect to H:8765",
/// "client: host=H disconnected", "client <H>: timeout on SEND_ETA"), joined; the JSON
/// report's own lines (indented) are not messages.
/// Where another host's server has the same address (`shared`: port forwards), only lines
/// that name the port too ("failed to connect to H:PORT") are this server's.
fn fio_said_of(
    outcome: &crate::workload::FioOutcome,
    (server, port): (&str, u16),
    shared: bool,
) -> String {
    let with_port = [format!("{server}:{port}"), format!("{server},{port}")];
    let names = |line: &str| {
        if with_port.iter().any(|p| line.contains(p.as_str())) {
            return true;
        }
        !shared
            && line.match_indices(server).any(|(i, _)| {
                let after = line[i + server.len()..].chars().next();
                !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '.')
            })
    };
    let mut said: Vec<&str> = outcome
        .stdout
        .lines()
        .chain(outcome.stderr.lines())
        .filter(|l| !l.starts_with(|c: char| c.is_whitespace() || c == '{' || c == '"'))
        .filter(|l| names(l))
        .map(str::trim)
        .collect();
    said.dedup();
    said.join("; ")
}

/// Says bye to every host still in the experiment (each restores what its agent set) and
/// takes it off the list of touched hosts. Returns the hosts that may still be changed,
/// with why: gone mid-run, or their bye not answered.
pub(crate) fn finish(
    exp: &Experiment,
    hosts: &mut [Controlled],
    touched: &mut crate::hosts::touched::Touched,
) -> Vec<String> {
    // Every host is told at once: each agent stops its fio server and restores inside its
    // bye, which takes up to a few seconds; one after another, a run's end took their sum.
    let byes: Vec<Option<Result<serde_json::Value>>> = std::thread::scope(|s| {
        let asked: Vec<_> = hosts
            .iter_mut()
            .map(|c| {
                let connection = &mut c.connection;
                c.gone
                    .is_none()
                    .then(|| s.spawn(move || connection.request(&Request::Bye)))
            })
            .collect();
        asked
            .into_iter()
            .map(|bye| {
                bye.map(|b| {
                    b.join()
                        .unwrap_or_else(|_| Err(anyhow!("the session's thread panicked")))
                })
            })
            .collect()
    });
    let mut left = Vec::new();
    for (c, bye) in hosts.iter().zip(byes) {
        let Some(bye) = bye else {
            left.extend(c.gone.clone());
            continue;
        };
        match bye {
            Ok(_) => {
                if let Err(e) = touched.done(c.label()) {
                    left.push(format!("{}: {e:#}", describe(exp, &c.spec)));
                }
            }
            Err(e) => left.push(format!("{}: bye: {e:#}", describe(exp, &c.spec))),
        }
    }
    left
}

/// The series of a host's run from its `sample_stop` answer's intervals, stored as a local
/// run stores its own; none when the answer holds none this iolab can read.
fn sampler_series(device: &str, answer: &serde_json::Value) -> Vec<crate::store::SampleSeries> {
    let Ok(intervals) = serde_json::from_value(answer["intervals"].clone()) else {
        return Vec::new();
    };
    super::stored::series(&crate::sample::SampleRun {
        readings: Vec::new(),
        devices: vec![device.to_string()],
        device_irqs: Vec::new(),
        intervals,
        summary: None,
        errors: Vec::new(),
        started_unix_ns: answer["started_unix_ns"].as_f64().unwrap_or(0.0),
    })
}

/// The sampler's figures for a host's run, from its `sample_stop` answer: the system's and
/// those of `device`, and of the devices `below` it as `DEVICE:dev_*`, under the names a local
/// run stores them; none when the sampler had too few readings for a summary.
fn sampler_figures(
    (device, below): (&str, &[String]),
    answer: &serde_json::Value,
) -> Vec<(String, f64)> {
    let summary = &answer["summary"];
    let mut out = figures(&summary["system"], Source::Sampler);
    out.extend(figures(&summary["devices"][device], Source::Sampler));
    for b in below {
        out.extend(prefixed(
            b,
            figures(&summary["devices"][b], Source::Sampler),
        ));
    }
    out
}

/// The `DEVICE:trace_*` figures of the devices `below` a host's device in its `trace_stop`
/// answer: only of those devices, and only the registry's trace metrics.
fn below_trace_figures(metrics: &serde_json::Value, below: &[String]) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for b in below {
        let own: serde_json::Map<String, serde_json::Value> = metrics
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| {
                let name = k.strip_prefix(b.as_str())?.strip_prefix(':')?;
                Some((name.to_string(), v.clone()))
            })
            .collect();
        out.extend(prefixed(
            b,
            figures(&serde_json::Value::Object(own), Source::Trace),
        ));
    }
    out
}

/// `figures` named `PREFIX:NAME`: a host's in the aggregate, a device's below a host's device.
fn prefixed(prefix: &str, figures: Vec<(String, f64)>) -> Vec<(String, f64)> {
    figures
        .into_iter()
        .map(|(k, v)| (format!("{prefix}:{k}"), v))
        .collect()
}

/// The finite numbers of an agent's answer object whose names are the registry's metrics of
/// `source`. An answer is another machine's word: a name of fio's (`read_iops`) would be
/// stored after, and so in place of, the figure fio gave.
fn figures(v: &serde_json::Value, source: Source) -> Vec<(String, f64)> {
    v.as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| metrics::exact(k).is_some_and(|m| m.source == source && !k.contains(':')))
        .filter_map(|(k, v)| Some((k.clone(), v.as_f64().filter(|v| v.is_finite())?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{
        aggregate_status, below_trace_figures, controlled_devices, figures, fio_server,
        host_checks, host_device, sampler_figures, span_of_windows, uncontrolled_fit, Settled,
        Source,
    };
    use crate::experiment::file::parse;
    use crate::store::RunStatus;

    fn exp(devices: [&str; 2], factors: &str) -> crate::experiment::Experiment {
        let mut text = "name = \"n\"\n".to_string();
        for (i, d) in devices.iter().enumerate() {
            text += &format!("[[target.host]]\nssh = \"h{i}\"\nfio = \"10.0.0.{i}\"\n{d}");
        }
        text += &format!("[factors]\n{factors}");
        parse("x.toml", &text).unwrap()
    }

    /// A name and its address reach one server: the file cannot tell, the resolver can.
    #[test]
    fn two_hosts_that_reach_one_fio_server_are_refused() {
        let text = "name = \"n\"\n[target]\ndevice = \"sdb\"\n\
                    [[target.host]]\nssh = \"a\"\nfio = \"localhost,9911\"\n\
                    [[target.host]]\nssh = \"b\"\nfio = \"127.0.0.1,9911\"\n";
        let e = parse("x.toml", text).unwrap();
        let err = super::distinct_servers(&e).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "host a (x.toml line 4) and host b (x.toml line 7) name one fio server \
                 (`localhost,9911` and `127.0.0.1,9911` both reach 127.0.0.1:9911)"
            ),
            "{err}"
        );
        let mapped = parse(
            "x.toml",
            &text.replace("localhost,9911", "ip6:::ffff:127.0.0.1,9911"),
        )
        .unwrap();
        let err = super::distinct_servers(&mapped).unwrap_err().to_string();
        assert!(err.contains("both reach 127.0.0.1:9911"), "{err}");
        let apart = exp(
            ["device = \"sda\"\n", "device = \"sdb\"\n"],
            "bs = [\"4k\"]\n",
        );
        super::distinct_servers(&apart).unwrap();
    }

    #[test]
    fn the_progress_says_whose_fio_server_each_host_runs() {
        let e = exp(
            ["device = \"sda\"\nserve = true\n", "device = \"sdb\"\n"],
            "bs = [\"4k\"]\n",
        );
        let specs = &e.target.host_specs;
        assert_eq!(
            super::server_note(&specs[0], "sda", false),
            "h0: fio server on 10.0.0.0, started by its agent for this run, confined to \
             /dev/sda (reads only)"
        );
        let yours = super::server_note(&specs[1], "sdb", true);
        assert!(
            yours.starts_with("h1: the fio server at 10.0.0.1 is yours, and unconfined")
                && yours.contains("`serve = true`"),
            "{yours}"
        );
    }

    /// `hosts check`'s findings of two hosts, h0 and h1, each answering a hello that `set`
    /// fills in.
    fn checked_hosts(
        set: impl Fn(usize, &mut crate::hosts::facts::Hello),
    ) -> Vec<crate::hosts::check::HostCheck> {
        (0..2)
            .map(|i| {
                let mut hello = crate::hosts::facts::Hello {
                    iolab_version: "0.1.0".into(),
                    protocol: 5,
                    fio_version: Some("fio-3.33".into()),
                    kernel: None,
                    hostname: None,
                    boot_id: None,
                    landlock_abi: None,
                    mem_total_kib: None,
                    mem_available_kib: None,
                    cpus_online: None,
                    net_ns: None,
                    clock_unix: 0.0,
                };
                set(i, &mut hello);
                crate::hosts::check::HostCheck {
                    host: format!("h{i}"),
                    error: None,
                    hello: Some(hello),
                    skew: None,
                    iolab: None,
                    flags: Vec::new(),
                }
            })
            .collect()
    }

    /// A host to `serve` whose kernel has no Landlock is named before any is modelled; one
    /// with Landlock, or not serving, is not.
    #[test]
    fn serving_needs_landlock_on_the_host() {
        let e = exp(
            [
                "device = \"sda\"\nserve = true\n",
                "device = \"sdb\"\nserve = true\n",
            ],
            "bs = [\"4k\"]\n",
        );
        let checked = |abi: [Option<i64>; 2]| {
            checked_hosts(|i, hello| {
                hello.kernel = Some(format!("5.10.0-{i}"));
                hello.landlock_abi = abi[i];
            })
        };
        let specs: Vec<&crate::experiment::file::HostSpec> = e.target.host_specs.iter().collect();
        let problems = super::without_landlock(&e, &specs, &checked([None, Some(2)]));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("host h0 (x.toml line 2): `serve` starts a fio server")
                && problems[0].contains("its kernel (5.10.0-0) has none"),
            "{problems:?}"
        );
        assert!(super::without_landlock(&e, &specs, &checked([Some(1), Some(2)])).is_empty());
        let unserved = exp(
            ["device = \"sda\"\n", "device = \"sdb\"\n"],
            "bs = [\"4k\"]\n",
        );
        let specs: Vec<&crate::experiment::file::HostSpec> =
            unserved.target.host_specs.iter().collect();
        assert!(super::without_landlock(&unserved, &specs, &checked([None, None])).is_empty());
    }

    /// The memory a cell's jobs hold is checked against each host's, from its hello: a host
    /// that cannot spare it is named; one that can, passes.
    #[test]
    fn a_host_that_cannot_spare_the_jobs_memory_is_named() {
        let e = exp(
            ["device = \"sda\"\n"; 2],
            "bs = [\"4k\", \"64m\"]\niodepth = [32]\n",
        );
        let specs: Vec<&crate::experiment::file::HostSpec> = e.target.host_specs.iter().collect();
        // 8 GiB each; h1 has 1 GiB available, less than the 64 MiB x 32 of the second cell.
        let checked = checked_hosts(|i, hello| {
            hello.mem_total_kib = Some(8 << 20);
            hello.mem_available_kib = Some(if i == 0 { 6 << 20 } else { 1 << 20 });
        });
        let why = super::memory_of_hosts(&e, &specs, &checked)
            .unwrap_err()
            .to_string();
        assert!(
            why.starts_with("cell `bs=64m,iodepth=32`: it would hold 2.0 GiB of memory")
                && why.contains("but host h1 (x.toml line 6) has 1.0 GiB available"),
            "{why}"
        );
        let small = exp(
            ["device = \"sda\"\n"; 2],
            "bs = [\"4k\", \"1m\"]\niodepth = [32]\n",
        );
        let specs: Vec<&crate::experiment::file::HostSpec> =
            small.target.host_specs.iter().collect();
        super::memory_of_hosts(&small, &specs, &checked).unwrap();
    }

    /// Two hosts on one kernel, or a host that is this machine beside local devices, cannot
    /// both record a trace: refused, naming them; distinct kernels or no boot id pass.
    #[test]
    fn traced_hosts_are_each_a_kernel_of_their_own() {
        let checked = |ids: [Option<&str>; 2]| {
            checked_hosts(|i, hello| hello.boot_id = ids[i].map(str::to_string))
        };
        let e = exp(["device = \"sda\"\n"; 2], "bs = [\"4k\"]\n");
        let specs: Vec<&crate::experiment::file::HostSpec> = e.target.host_specs.iter().collect();
        let why = super::one_tracer_each(&e, &specs, &checked([Some("b1"), Some("b1")]), None)
            .expect("refused");
        assert!(
            why.starts_with(
                "host h0 (x.toml line 2) and host h1 (x.toml line 6) are one running kernel"
            ),
            "{why}"
        );
        for ok in [[Some("b1"), Some("b2")], [None, None]] {
            assert_eq!(
                super::one_tracer_each(&e, &specs, &checked(ok), Some("b1")),
                None
            );
        }
        let mut local = e.clone();
        local.target.local_devices = vec!["dm-0".into()];
        let ids = checked([Some("b2"), Some("b1")]);
        let why = super::one_tracer_each(&local, &specs, &ids, Some("b1")).expect("refused");
        assert!(
            why.starts_with("host h1 (x.toml line 6) is this machine"),
            "{why}"
        );
        assert_eq!(
            super::one_tracer_each(&local, &specs, &ids, Some("b3")),
            None
        );
    }

    /// Two names of one machine driving one device are refused before anything starts; one
    /// machine's two devices, or one device name on two machines, pass.
    #[test]
    fn one_machines_device_is_driven_by_one_host_entry() {
        let checked = |ids: [Option<&str>; 2]| {
            checked_hosts(|i, hello| hello.boot_id = ids[i].map(str::to_string))
        };
        let same = exp(["device = \"sdb\"\n"; 2], "bs = [\"4k\"]\n");
        let specs: Vec<&crate::experiment::file::HostSpec> =
            same.target.host_specs.iter().collect();
        let why = super::one_device_each(&same, &specs, &checked([Some("b1"), Some("b1")]))
            .unwrap()
            .expect("refused");
        assert!(
            why.starts_with(
                "host h0 (x.toml line 2) and host h1 (x.toml line 6) are one running kernel \
                 (the same boot id) and both drive /dev/sdb"
            ),
            "{why}"
        );
        for ids in [[Some("b1"), Some("b2")], [None, None]] {
            assert_eq!(
                super::one_device_each(&same, &specs, &checked(ids)).unwrap(),
                None
            );
        }
        let two = exp(
            ["device = \"sdb\"\n", "device = \"sdc\"\n"],
            "bs = [\"4k\"]\n",
        );
        let specs: Vec<&crate::experiment::file::HostSpec> = two.target.host_specs.iter().collect();
        assert_eq!(
            super::one_device_each(&two, &specs, &checked([Some("b1"), Some("b1")])).unwrap(),
            None
        );
    }

    #[test]
    fn each_host_drives_its_own_device() {
        let same = exp(["device = \"loop5\"\n"; 2], "bs = [\"4k\"]\n");
        assert_eq!(controlled_devices(&same, None).unwrap(), ["loop5"]);
        assert_eq!(
            host_device(&same, &same.target.host_specs[1]).unwrap(),
            "loop5"
        );
        let differ = exp(
            ["device = \"loop5\"\n", "device = \"/dev/loop6\"\n"],
            "bs = [\"4k\"]\n",
        );
        assert_eq!(
            controlled_devices(&differ, None).unwrap(),
            ["loop5", "loop6"]
        );
    }

    /// A run's hosts are sent their byes at once, and its sessions hung up together when
    /// dropped: each stand-in agent waits up to 3 s for the other's to come too, and says
    /// whether it did. One after another, the first waited alone, and a run's end took the
    /// hosts' times added up.
    #[test]
    fn a_runs_hosts_end_together() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let meet = |step: &str, i: usize| {
            format!(
                "touch {d}/{step}{i}; n=0; \
                 while [ $n -lt 30 ] && ! {{ [ -e {d}/{step}0 ] && [ -e {d}/{step}1 ]; }}; do \
                 sleep 0.1; n=$((n+1)); done; \
                 if [ $n -lt 30 ]; then echo together; else echo alone; fi >{d}/{step}-said{i}"
            )
        };
        let agent = |i: usize| {
            format!(
                "read bye; {}; echo '{{\"line\":1,\"ok\":true,\"op\":\"bye\",\"result\":{{}}}}'; \
                 cat >/dev/null; {}",
                meet("bye", i),
                meet("hangup", i)
            )
        };
        let exp = exp(["device = \"sdb\"\n"; 2], "bs = [\"4k\"]\n");
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/machines/scsi-hba");
        let machine =
            crate::model::Machine::read(&crate::sys::SysRoot::at(fixture).unwrap()).unwrap();
        let plan = crate::experiment::run::plan(&exp, &machine, &["sdb".into()], false).unwrap();
        let mut hosts = super::Sessions(
            (0..2)
                .map(|i| super::Controlled {
                    spec: exp.target.host_specs[i].clone(),
                    device: "sdb".into(),
                    machine: machine.clone(),
                    plan: plan.clone(),
                    connection: crate::hosts::ssh::stand_in(&agent(i), 5000),
                    part: None,
                    gone: None,
                    skew_s: 0.0,
                })
                .collect(),
        );
        let listed = ["h0", "h1"].map(|h| crate::hosts::touched::TouchedHost {
            ssh: h.into(),
            remote_iolab: "iolab".into(),
            ssh_options: None,
        });
        let mut touched =
            crate::hosts::touched::Touched::begin(&dir.path().join("state"), listed.to_vec())
                .unwrap();
        let left = super::finish(&exp, &mut hosts, &mut touched);
        assert!(left.is_empty(), "{left:?}");
        drop(hosts);
        for step in ["bye", "hangup"] {
            for i in 0..2 {
                let said = std::fs::read_to_string(dir.path().join(format!("{step}-said{i}")));
                assert_eq!(said.unwrap().trim(), "together", "{step} of host {i}");
            }
        }
    }

    /// The devices checked for writing are those the hosts' jobs drive: a host without its
    /// own device drives [target] device, and `--device` (this machine's) is refused rather
    /// than checked in place of theirs.
    #[test]
    fn the_devices_checked_are_the_ones_each_host_drives() {
        let text = "name = \"n\"\n[target]\ndevice = \"sdb\"\n\
                    [[target.host]]\nssh = \"a\"\nfio = \"10.0.0.1\"\ndevice = \"sda\"\n\
                    [[target.host]]\nssh = \"b\"\nfio = \"10.0.0.2\"\n";
        let e = parse("x.toml", text).unwrap();
        assert_eq!(controlled_devices(&e, None).unwrap(), ["sda", "sdb"]);
        let refused = controlled_devices(&e, Some("sdb")).unwrap_err().to_string();
        assert!(refused.contains("--device sdb"), "{refused}");
    }

    #[test]
    fn client_mode_alone_refuses_per_host_devices_and_half_controlled_hosts() {
        let per_host = parse(
            "x.toml",
            "name = \"n\"\n[[target.host]]\nfio = \"10.0.0.1\"\ndevice = \"sda\"\n\
             [[target.host]]\nfio = \"10.0.0.2\"\ndevice = \"sdb\"\n",
        )
        .unwrap();
        let e = uncontrolled_fit(&per_host).unwrap_err().to_string();
        assert!(e.contains("own `device` needs `ssh`"), "{e}");
        let half = parse(
            "x.toml",
            "name = \"n\"\n[target]\ndevice = \"sdb\"\n[[target.host]]\nfio = \"10.0.0.1\"\n\
             ssh = \"a\"\n[[target.host]]\nfio = \"10.0.0.2\"\n",
        )
        .unwrap();
        let e = uncontrolled_fit(&half).unwrap_err().to_string();
        assert!(
            e.contains("all hosts or none; give every [[target.host]] `ssh"),
            "{e}"
        );
        // A server of the string form cannot be given `ssh` where it is named.
        let mixed = parse(
            "x.toml",
            "name = \"n\"\n[target]\ndevice = \"sdb\"\nhosts = [\"10.0.0.2\"]\n\
             [[target.host]]\nfio = \"10.0.0.1\"\nssh = \"a\"\n",
        )
        .unwrap();
        let e = uncontrolled_fit(&mixed).unwrap_err().to_string();
        assert!(
            e.contains("move `10.0.0.2` from `hosts` (fio servers only) to a [[target.host]]"),
            "{e}"
        );
        let plain = parse(
            "x.toml",
            "name = \"n\"\n[target]\ndevice = \"sdb\"\nhosts = [\"10.0.0.1\", \"10.0.0.2\"]\n",
        )
        .unwrap();
        uncontrolled_fit(&plain).unwrap();
    }

    #[test]
    fn a_hosts_sampler_figures_are_its_own_and_its_devices() {
        let answer = serde_json::json!({"summary": {
            "system": {"usr_pct": 12.5, "irq_per_s": 100.0},
            "devices": {"loop5": {"dev_r_per_s": 2000.0}, "loop6": {"dev_r_per_s": 1.0}}
        }});
        let mut m = sampler_figures(("loop5", &[]), &answer);
        m.sort_by(|a, b| a.0.cmp(&b.0));
        let want = [
            ("dev_r_per_s", 2000.0),
            ("irq_per_s", 100.0),
            ("usr_pct", 12.5),
        ];
        assert_eq!(
            m,
            want.map(|(k, v)| (k.to_string(), v)).to_vec(),
            "the other device's figures stay out"
        );
        // A device below it (asked for by name) is prefixed with its name.
        let mut m = sampler_figures(("loop5", &["loop6".to_string()]), &answer);
        m.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(m[2], ("loop6:dev_r_per_s".to_string(), 1.0), "{m:?}");
        assert_eq!(m.len(), 4, "{m:?}");
        assert!(sampler_figures(("loop5", &[]), &serde_json::json!({"summary": null})).is_empty());
        // A name of fio's would replace fio's own figure in the store; any name not the
        // sampler's, or prefixed, is no figure of the sampler's.
        let hostile = serde_json::json!({"summary": {
            "system": {"usr_pct": 12.5, "read_iops": 9.9e9, "read_clat_p99_us": 0.001,
                       "trace_q2c_mean_us": 1.0, "x:usr_pct": 1.0, "made_up": 3.0},
            "devices": {"loop5": {"dev_r_per_s": 2000.0, "write_bw_mbs": 1e9}}
        }});
        let mut m = sampler_figures(("loop5", &[]), &hostile);
        m.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            m,
            [
                ("dev_r_per_s".to_string(), 2000.0),
                ("usr_pct".to_string(), 12.5)
            ]
        );
        let trace = serde_json::json!({"trace_q2c_mean_us": 80.0, "trace_events": 10.0,
                                       "read_iops": 1.0, "usr_pct": 2.0});
        let mut t = figures(&trace, Source::Trace);
        t.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            t,
            [
                ("trace_events".to_string(), 10.0),
                ("trace_q2c_mean_us".to_string(), 80.0)
            ]
        );
        // The devices below: only those asked for, only trace metrics, prefixed once.
        let trace = serde_json::json!({"trace_q2c_mean_us": 80.0, "sda:trace_q2c_mean_us": 40.0,
            "sda:read_iops": 1.0, "sda:x:trace_events": 1.0, "sdz:trace_events": 5.0,
            "sdab:trace_events": 6.0});
        let below = ["sda".to_string(), "sdb".to_string()];
        assert_eq!(
            below_trace_figures(&trace, &below),
            [("sda:trace_q2c_mean_us".to_string(), 40.0)]
        );
    }

    #[test]
    fn the_hosts_windows_meet_on_this_machines_clock() {
        let answer = |started_s: f64, basis: &str, start_s: f64, end_s: f64| {
            Some(serde_json::json!({"started_unix_ns": started_s * 1e9,
                "window": {"basis": basis, "start_s": start_s, "end_s": end_s}}))
        };
        let placed = crate::experiment::run::align::DEVICE_IO_END;
        let answers = [
            // Started at 100 s on a clock 0.5 s ahead: measured 101.0-102.0 here.
            answer(100.0, placed, 1.5, 2.5),
            // Measured 101.2-102.3 on a clock in step.
            answer(101.0, placed, 0.2, 1.3),
            // Over its whole span: says nothing of when fio measured.
            answer(90.0, "whole sampled span", 0.0, 30.0),
            None,
        ];
        let (s, e) = span_of_windows(&[0.5, 0.0, 0.0, 0.0], &answers).unwrap();
        assert!((s / 1e9 - 101.0).abs() < 1e-6, "{s}");
        assert!((e / 1e9 - 102.3).abs() < 1e-6, "{e}");
        assert_eq!(span_of_windows(&[0.0], &answers[2..3]), None);
    }

    #[test]
    fn the_aggregate_fails_when_any_hosts_part_did_and_says_which() {
        let part = |status| Settled {
            status,
            metrics: Vec::new(),
            prefixed: Vec::new(),
            samples: Vec::new(),
            window: None,
            checks: Vec::new(),
        };
        let ok = || part(RunStatus::Ok);
        assert_eq!(aggregate_status(&[ok(), ok()]), None);
        let na = part(RunStatus::NotApplicable("h1: one cache domain".into()));
        assert_eq!(
            aggregate_status(&[ok(), na]),
            Some(RunStatus::NotApplicable("h1: one cache domain".into()))
        );
        let gone = part(RunStatus::Failed("h2: the connection closed".into()));
        let na = part(RunStatus::NotApplicable("h1: far".into()));
        assert_eq!(
            aggregate_status(&[na, gone, ok()]),
            Some(RunStatus::Failed("h2: the connection closed".into()))
        );
        assert_eq!(fio_server("10.0.0.1,8766"), ("10.0.0.1", 8766));
        assert_eq!(fio_server("lab1"), ("lab1", 8765));
        // fio names the server without the `ip:` its address was given with.
        assert_eq!(fio_server("ip:10.0.0.1,8765"), ("10.0.0.1", 8765));
    }

    #[test]
    fn what_fio_said_of_a_server_is_its_own_lines_only() {
        let outcome = crate::workload::FioOutcome {
            stdout: "client <10.0.0.2>: timeout on SEND_ETA\nclient <10.0.0.22>: other\n{\n  \
                     \"hostname\" : \"10.0.0.2\",\n}\n"
                .into(),
            stderr: "fio: connect: Connection refused\nfio: failed to connect to 10.0.0.2:8765\n"
                .into(),
            ..crate::workload::FioOutcome::quiet_success()
        };
        assert_eq!(
            super::fio_said_of(&outcome, ("10.0.0.2", 8765), false),
            "client <10.0.0.2>: timeout on SEND_ETA; fio: failed to connect to 10.0.0.2:8765"
        );
        // Servers behind one address: a line without the port may be another's.
        assert_eq!(
            super::fio_said_of(&outcome, ("10.0.0.2", 8765), true),
            "fio: failed to connect to 10.0.0.2:8765"
        );
        assert_eq!(super::fio_said_of(&outcome, ("10.0.0.2", 8766), true), "");
    }

    /// A host's part is checked as a local run is: its fio bytes against the diskstats its
    /// agent measured (judged on a device that holds no data there), its percentiles against
    /// their bins, and its trace's bytes (after a ramp, within the interval it placed).
    #[test]
    fn a_hosts_part_has_the_checks_of_a_local_run() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/machines/scsi-hba");
        let machine = crate::model::Machine::read(&crate::sys::SysRoot::at(dir).unwrap()).unwrap();
        // 100 MB over 2 s of 4 KiB direct reads on sdb (no data there) and sda (mounted).
        let report = |dev: &str, ramp: &str| {
            crate::workload::fio_json::parse(&format!(
                r#"{{"jobs": [{{"jobname": "j", "job options": {{"filename": "/dev/{dev}",
                     "direct": "1"{ramp}}},
                     "read": {{"iops": 12207, "bw_bytes": 50000000, "total_ios": 24414,
                       "io_bytes": 100000000,
                       "clat_ns": {{"N": 5, "percentile": {{"50.000000": 1000}},
                         "bins": {{"1000": 5}}}}}},
                     "write": {{}}}}]}}"#
            ))
            .unwrap()
        };
        let answer = |dev: &str, mb: f64| {
            serde_json::json!({"summary": {"devices": {dev: {
                "dev_rmb_per_s": mb, "dev_wmb_per_s": 0.0, "dev_r_per_s": 12000.0}}}})
        };
        let traced = |mb: f64| vec![("trace_completed_mb".to_string(), mb)];
        let verdicts = |checks: &[crate::experiment::run::checks::Check]| {
            checks
                .iter()
                .map(|c| format!("{} {}", c.check, c.verdict))
                .collect::<Vec<_>>()
        };
        let c = host_checks(
            ("sdb", &machine),
            (&report("sdb", ""), false),
            Some(&answer("sdb", 49.5)),
            &traced(100.2),
            None,
            None,
        );
        assert_eq!(
            verdicts(&c),
            [
                "json_plus_percentile ok",
                "fio_bytes_vs_diskstats ok",
                "trace_bytes_vs_fio ok"
            ]
        );
        // The host's diskstats saw 10% less than fio counted; its trace 5% less.
        let c = host_checks(
            ("sdb", &machine),
            (&report("sdb", ""), false),
            Some(&answer("sdb", 45.0)),
            &traced(95.0),
            None,
            None,
        );
        assert_eq!(
            verdicts(&c)[1..],
            [
                "fio_bytes_vs_diskstats disagrees",
                "trace_bytes_vs_fio disagrees"
            ]
        );
        assert_eq!((c[1].fio, c[1].other), (50.0, 45.0));
        // sda holds data there: shown, not judged. After a ramp the trace is judged by its
        // bytes within the interval the host placed (to within 2% here), else not.
        let ramped = report("sda", r#", "ramp_time": "1s""#);
        let c = host_checks(
            ("sda", &machine),
            (&ramped, false),
            Some(&answer("sda", 45.0)),
            &traced(150.0),
            Some((98.5, 2.0)),
            None,
        );
        assert_eq!(
            verdicts(&c)[1..],
            ["fio_bytes_vs_diskstats not judged", "trace_bytes_vs_fio ok"]
        );
        assert_eq!((c[2].other, c[2].tolerance_pct), (98.5, 3.0));
        let c = host_checks(
            ("sda", &machine),
            (&ramped, false),
            None,
            &traced(150.0),
            None,
            None,
        );
        assert_eq!(verdicts(&c)[1..], ["trace_bytes_vs_fio not judged"]);
        // Without an answer or a trace, only the percentiles.
        let c = host_checks(
            ("sdb", &machine),
            (&report("sdb", ""), false),
            None,
            &[],
            None,
            None,
        );
        assert_eq!(verdicts(&c), ["json_plus_percentile ok"]);
        // A polled part whose device took an interrupt per I/O did not poll.
        let mut interrupts = answer("sdb", 49.5);
        interrupts["summary"]["devices"]["sdb"]["dev_irq_per_s"] = 12000.0.into();
        let c = host_checks(
            ("sdb", &machine),
            (&report("sdb", ""), true),
            Some(&interrupts),
            &[],
            None,
            None,
        );
        assert_eq!(
            verdicts(&c)[1..],
            [
                "fio_bytes_vs_diskstats ok",
                "polled_io_vs_interrupts disagrees"
            ]
        );
    }
}

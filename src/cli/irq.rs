//! `iolab irq ...`: interrupt rates, placement plans, applying and rolling back, the daemon.
//! Argument parsing only; the work is in `crate::irq`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::irq::{self, commands, daemon, plan, top};
use crate::knobs::signals::Interrupt;
use crate::sys::SysRoot;

/// Interrupts: rates per CPU, a topology-aware placement, apply with rollback, a daemon.
///
/// Heavy interrupts that pile onto one CPU are invisible in /proc/interrupts' counts since
/// boot. `top` shows rates; `plan` measures and proposes moves (heavy interrupts spread across
/// packages, then cores, then SMT siblings, within each one's allowed CPUs and its device's
/// node; managed, pinned and light ones left alone; nothing moved once balanced); `apply`
/// writes the plan through a journal; `rollback` puts every affinity back; `daemon` keeps
/// the load balanced. When pinned masks make the pile-up (one CPU, or one core's threads,
/// written into every NIC's smp_affinity), `plan` says so and how much less the busiest CPU
/// would carry unpinned; `--unpin all|IRQ,...` moves them, `--ban-cpus LIST` keeps CPUs free.
#[derive(Debug, clap::Args)]
pub(crate) struct IrqArgs {
    #[command(subcommand)]
    pub command: IrqCommand,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum IrqCommand {
    Top(TopArgs),
    Plan(PlanArgs),
    Apply(ApplyArgs),
    Rollback(RollbackArgs),
    Daemon(DaemonArgs),
}

/// Interrupts per second per IRQ and CPU, refreshed every interval (Ctrl-C stops).
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("One JSON object per refresh, one per line")))]
pub(crate) struct TopArgs {
    /// Time between refreshes (e.g. 1s, 500ms).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = super::inspect::parse_interval)]
    pub interval: Duration,
    /// Stop after this many refreshes.
    #[arg(short = 'n', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Rows shown per refresh (busiest first).
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: u64,
    /// Also show the per-CPU summary rows (timer, IPIs: LOC, RES, CAL, ...).
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
}

/// What to measure and how to plan (shared by plan, apply and daemon).
#[derive(Debug, clap::Args)]
pub(crate) struct PlanningArgs {
    /// Interrupts per second from which an interrupt counts as heavy (light ones never move).
    #[arg(long, value_name = "RATE", default_value_t = 1000.0, value_parser = parse_heavy)]
    pub heavy: f64,
    /// Move nothing unless the busiest package + core + CPU load drops by this many percent.
    #[arg(long, value_name = "PCT", default_value_t = 10.0, value_parser = parse_min_gain)]
    pub min_gain: f64,
    /// Allow placing an interrupt on another NUMA node than its device's.
    #[arg(long)]
    pub any_node: bool,
    /// Move pinned interrupts anyway: `all`, or IRQ numbers such as 40,41. A pin is an
    /// affinity of one CPU or of one core's SMT threads (a user's or a start-up script's);
    /// unless named here, an interrupt pinned to one CPU stays there and one pinned to a
    /// core's threads stays on them, and `plan` says when pins pile heavy interrupts up and
    /// how much less the busiest CPU would carry without them. Any other affinity is kept
    /// whether named or not (the plan moves within it). `iolab irq rollback` restores the
    /// pins. Managed interrupts (a queue's, placed by its driver) cannot be moved: `all`
    /// leaves them, and naming one is refused.
    #[arg(long, value_name = "all|IRQ,...", value_parser = parse_unpin)]
    pub unpin: Option<plan::Unpin>,
    /// Keep these CPUs free of moved interrupts (a list such as 0,2-3, like irqbalance's
    /// IRQBALANCE_BANNED_CPULIST); heavy movable interrupts on them are moved off.
    #[arg(long, value_name = "LIST")]
    pub ban_cpus: Option<String>,
}

/// `all`, or a list of IRQ numbers (`40,41` or `40-43`).
fn parse_unpin(text: &str) -> Result<plan::Unpin, String> {
    if text.trim() == "all" {
        return Ok(plan::Unpin::All);
    }
    match irq_numbers(text) {
        Some(irqs) if !irqs.is_empty() => Ok(plan::Unpin::Irqs(irqs)),
        _ => Err(format!(
            "`{text}` is neither `all` nor a list of IRQ numbers (e.g. 40,41 or 40-43)"
        )),
    }
}

/// `40,41` or `40-43`: IRQ numbers, which unlike CPU numbers have no small upper bound (a
/// range is kept to 65,536 numbers, more than a machine has interrupts).
fn irq_numbers(text: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let number = |t: &str| t.trim().parse::<u32>().ok();
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => (number(part)?, number(part)?),
        };
        if lo > hi || hi - lo >= 1 << 16 {
            return None;
        }
        out.extend(lo..=hi);
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// `--heavy`: interrupts per second, above 0 (at 0, interrupts that never fired counted as
/// heavy and were moved for nothing).
fn parse_heavy(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(rate) if rate > 0.0 && rate.is_finite() => Ok(rate),
        _ => Err("a rate above 0 interrupts per second, e.g. 1000".into()),
    }
}

/// `--min-gain`: a percentage from 0 to under 100.
fn parse_min_gain(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(pct) if (0.0..100.0).contains(&pct) => Ok(pct),
        _ => Err("a percentage from 0 to under 100, e.g. 10".into()),
    }
}

/// `--ban-cpus`: a non-empty CPU list (`0,2-3`), or none. Checked here, not by clap, so the
/// value is echoed escaped.
fn banned_cpus(text: Option<&str>) -> anyhow::Result<Vec<u32>> {
    let Some(text) = text else {
        return Ok(Vec::new());
    };
    match crate::sys::parse::cpulist(text) {
        Ok(cpus) if !cpus.is_empty() => Ok(cpus),
        _ => Err(super::usage(format!(
            "--ban-cpus: `{text}` is not a CPU list (e.g. 0,2-3)"
        ))),
    }
}

impl PlanningArgs {
    fn options(&self) -> anyhow::Result<plan::Options> {
        Ok(plan::Options {
            heavy: self.heavy,
            min_gain_pct: self.min_gain,
            any_node: self.any_node,
            unpin: self.unpin.clone().unwrap_or_default(),
            banned: banned_cpus(self.ban_cpus.as_deref())?,
        })
    }
}

/// Measure interrupt rates and propose a placement (writes nothing).
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("Print the plan as JSON (`irq apply --plan` reads it)")))]
pub(crate) struct PlanArgs {
    /// How long to measure the load (not with --root: a snapshot's two readings fix it).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = super::inspect::parse_interval,
          conflicts_with = "root")]
    pub over: Duration,
    /// Plan for a snapshot made by `iolab snapshot` (its two readings give the rates).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    #[command(flatten)]
    pub planning: PlanningArgs,
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
}

/// Measure, plan and write the placement, journaled (`iolab irq rollback` undoes it).
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("Print what was done as JSON")))]
pub(crate) struct ApplyArgs {
    /// How long to measure the load.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = super::inspect::parse_interval)]
    pub over: Duration,
    /// Apply a plan saved by `iolab irq plan --json` instead of measuring now (so without
    /// the options that say how to measure and plan).
    #[arg(long, value_name = "FILE",
          conflicts_with_all = ["over", "heavy", "min_gain", "any_node", "unpin", "ban_cpus"])]
    pub plan: Option<PathBuf>,
    #[command(flatten)]
    pub planning: PlanningArgs,
    /// Apply even though irqbalance is running (it will likely move them again).
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
}

/// Put every interrupt iolab moved back to the affinity it had before.
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("Print what was done as JSON")))]
pub(crate) struct RollbackArgs {
    /// Only a placement a daemon without --keep left when it was killed or crashed; one made
    /// by `irq apply`, or kept by a daemon with --keep, stays (`left_in_effect` in the JSON).
    /// For a service manager's clean-up after the daemon (iolab-irq.service's ExecStopPost=).
    #[arg(long)]
    pub after_daemon: bool,
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
}

/// Keep interrupts balanced: measure, plan, apply, repeat.
///
/// The interval between looks adapts (see --min-interval, --max-interval). On
/// Ctrl-C/SIGTERM every affinity iolab changed is put back, unless --keep; so without --keep
/// it does not start while a placement of `irq apply` is in effect (it exits 3 then, having
/// changed nothing; the packaged service is not started again). Interrupts of a
/// disk or NIC an experiment is measuring, and ones another iolab is moving, are left alone
/// (logged) until it is done.
#[derive(Debug, clap::Args)]
pub(crate) struct DaemonArgs {
    /// Shortest time between looks (after a move).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = super::inspect::parse_interval)]
    pub min_interval: Duration,
    /// Longest time between looks (reached by doubling while balanced).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = super::inspect::parse_interval)]
    pub max_interval: Duration,
    /// Stop after this many looks.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub cycles: Option<u64>,
    /// Leave the placement in effect on exit (`iolab irq rollback` undoes it later).
    #[arg(long)]
    pub keep: bool,
    #[command(flatten)]
    pub planning: PlanningArgs,
    /// Run even though irqbalance is running (the two would fight).
    #[arg(long)]
    pub force: bool,
    /// Write the figures of every look to FILE in the Prometheus text format (for
    /// node_exporter's textfile collector: e.g. /var/lib/prometheus/node-exporter/iolab.prom).
    /// The packaged iolab-irq.service may write nowhere else: a drop-in that adds this option
    /// must add the file's directory to ReadWritePaths= too.
    #[arg(long, value_name = "FILE")]
    pub metrics_file: Option<std::path::PathBuf>,
    /// Serve the same figures over HTTP at http://ADDR/metrics (e.g. 127.0.0.1:9464). The
    /// figures are not secret, but nothing listens unless you name an address. Up to 16
    /// clients are answered at once, each given 2 s to send its request; more are closed.
    /// The packaged iolab-irq.service opens no network socket: a drop-in that adds this
    /// option must also say RestrictAddressFamilies=AF_INET AF_INET6.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
}

pub(super) fn run(args: IrqArgs) -> anyhow::Result<()> {
    match args.command {
        IrqCommand::Top(a) => top_cmd(a),
        IrqCommand::Plan(a) => plan_cmd(a),
        IrqCommand::Apply(a) => apply_cmd(a),
        IrqCommand::Rollback(a) => rollback_cmd(a),
        IrqCommand::Daemon(a) => daemon_cmd(a),
    }
}

/// Sleeps, returning false when Ctrl-C or SIGTERM arrived.
fn waiter() -> anyhow::Result<impl Fn(Duration) -> bool> {
    let interrupt = Interrupt::install().context("cannot install signal handlers")?;
    Ok(move |d| interrupt.sleep(d))
}

fn top_cmd(a: TopArgs) -> anyhow::Result<()> {
    let watch = top::Watch {
        interval: a.interval,
        count: a.count,
        all: a.all,
        limit: usize::try_from(a.limit).unwrap_or(usize::MAX),
    };
    top::watch(&SysRoot::live(), &watch, &waiter()?, &mut |shown| {
        crate::output::print_item(shown, a.out)
    })
}

fn plan_cmd(a: PlanArgs) -> anyhow::Result<()> {
    let options = a.planning.options()?;
    let root = match &a.root {
        Some(dir) => SysRoot::machine_root(dir)?,
        None => SysRoot::live(),
    };
    let wait = waiter()?;
    let Some((planned, _)) = commands::plan_now(&root, a.over, &wait, options)? else {
        bail!("interrupted before the measurement ended");
    };
    crate::output::print(&planned, a.out)
}

fn apply_cmd(a: ApplyArgs) -> anyhow::Result<()> {
    let source = match a.plan {
        Some(file) => commands::PlanSource::File(file),
        None => commands::PlanSource::Measure {
            over: a.over,
            options: a.planning.options()?,
        },
    };
    let wait = waiter()?;
    let done = commands::apply_plan(
        &SysRoot::live(),
        &irq::apply::journal_dir(),
        source,
        &wait,
        a.force,
    )?;
    crate::output::print(&done, a.out)
}

fn rollback_cmd(a: RollbackArgs) -> anyhow::Result<()> {
    crate::output::print(&commands::rollback(a.after_daemon)?, a.out)
}

fn daemon_cmd(a: DaemonArgs) -> anyhow::Result<()> {
    if a.min_interval > a.max_interval {
        return Err(super::usage(
            "--min-interval must not be longer than --max-interval",
        ));
    }
    let root = SysRoot::live();
    commands::refuse_beside_irqbalance(&root, a.force)?;
    let settings = daemon::Settings {
        plan: a.planning.options()?,
        min_interval: a.min_interval,
        max_interval: a.max_interval,
        cycles: a.cycles,
        keep: a.keep,
    };
    let mut log = daemon::stderr_log();
    let outlets =
        irq::metrics::Outlets::open(a.metrics_file.clone(), a.listen.as_deref(), &mut log)?;
    let wait = waiter()?;
    daemon::run(
        &root,
        &irq::apply::journal_dir(),
        &settings,
        &wait,
        &mut log,
        &mut |f| outlets.publish(f),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heavy_must_be_above_zero() {
        for bad in ["0", "-1", "nan", "inf", "x"] {
            assert!(parse_heavy(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_heavy("0.5"), Ok(0.5));
        assert_eq!(parse_heavy("1000"), Ok(1000.0));
    }
}

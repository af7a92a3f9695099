//! `iolab inspect`: the machine model, as a tree for people or JSON for scripts.

use crate::model::Machine;
use crate::output::OutputArgs;
use crate::sys::SysRoot;
use std::path::PathBuf;
use std::time::Duration;

/// Show the machine's CPUs, NUMA nodes, block devices, queues and interrupts.
///
/// With `--root DIR` it shows a snapshot made by `iolab snapshot`, including interrupt and
/// CPU rates from the snapshot's two readings. On the live machine, `--interval` takes a
/// second reading to show rates.
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("Print the model as one JSON document")))]
pub(crate) struct InspectArgs {
    /// Read a snapshot directory made by `iolab snapshot` instead of this machine.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    #[command(flatten)]
    pub out: OutputArgs,
    /// On the live machine, read the counters twice this far apart and show rates
    /// (e.g. 1s, 500ms, 2).
    #[arg(long, value_name = "DURATION", value_parser = parse_interval)]
    pub interval: Option<Duration>,
}

pub(crate) fn parse_interval(text: &str) -> Result<Duration, String> {
    let d = crate::sys::parse::duration::duration(text)?;
    if d.is_zero() {
        return Err("the interval must be longer than zero".to_string());
    }
    Ok(d)
}

pub(super) fn run(args: InspectArgs) -> anyhow::Result<()> {
    let root = match &args.root {
        Some(dir) => SysRoot::machine_root(dir)?,
        None => SysRoot::live(),
    };
    // Two options that contradict each other: a usage error (exit 2), like `irq plan --over`.
    if args.root.is_some() && args.interval.is_some() {
        return Err(super::usage(
            "--interval measures the live machine; a snapshot (--root) carries its own \
             second reading",
        ));
    }
    let machine = Machine::observe(&root, args.interval)?;
    for w in &machine.warnings {
        say!(
            "iolab: warning: {}",
            crate::report::format::terminal_safe_lines(w)
        );
    }
    crate::output::print(&machine, args.out)
}

//! `iolab preflight`: print what on this machine makes I/O numbers noisy, with advice — the
//! same findings `iolab run` records with every experiment.

use std::path::PathBuf;
use std::time::Duration;

/// Check the machine for sources of noise.
///
/// Looks at the CPU frequency governor, turbo, C-states, SMT, irqbalance, THP, swap, load,
/// busy processes and virtualisation.
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("Print the findings as JSON")))]
pub(crate) struct PreflightArgs {
    /// Read a snapshot directory made by `iolab snapshot` instead of this machine.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// How long to watch per-process CPU use, in milliseconds (1 to 60000; this machine
    /// only: a snapshot holds no processes).
    #[arg(long, value_name = "MS", default_value_t = 200, conflicts_with = "root",
          value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub sample_ms: u64,
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
}

pub(super) fn run(args: PreflightArgs) -> anyhow::Result<()> {
    let root = match &args.root {
        Some(dir) => crate::sys::SysRoot::machine_root(dir)?,
        None => crate::sys::SysRoot::live(),
    };
    let findings = crate::preflight::collect(&root, Duration::from_millis(args.sample_ms));
    crate::output::print(&findings, args.out)
}

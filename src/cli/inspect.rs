//! `iolab inspect`: the machine model, as a tree for people or JSON for scripts.

use std::path::PathBuf;

/// Show the machine's CPUs, NUMA nodes, block devices, queues and interrupts.
#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// Read a snapshot directory made by `iolab snapshot` instead of this machine.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Print the model as one JSON document.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: InspectArgs) -> anyhow::Result<()> {
    let root = match &args.root {
        Some(dir) => crate::sys::SysRoot::at(dir)?,
        None => crate::sys::SysRoot::live(),
    };
    anyhow::bail!(
        "inspect is not built yet (root {root:?}, json {})",
        args.json
    )
}

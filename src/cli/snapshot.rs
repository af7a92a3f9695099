//! `iolab snapshot`: capture this machine into a directory for `--root`.

use std::path::PathBuf;
use std::time::Duration;

/// Capture the files the machine model reads into DIR, plus a second reading of the
/// interrupt, CPU and disk counters after the interval, for `iolab inspect --root DIR`
/// (and every other command that takes --root) on any machine.
#[derive(Debug, clap::Args)]
pub(crate) struct SnapshotArgs {
    /// The directory to create (must not exist, or be empty).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: PathBuf,
    /// Time between the two readings of the counters (e.g. 5s, 500ms, 2).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = super::inspect::parse_interval)]
    pub interval: Duration,
    /// Snapshot another machine root (e.g. an earlier snapshot) instead of this machine.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
}

pub(super) fn run(args: SnapshotArgs) -> anyhow::Result<()> {
    let source = match &args.root {
        Some(dir) => crate::sys::SysRoot::machine_root(dir)?,
        None => crate::sys::SysRoot::live(),
    };
    let meta = crate::snapshot::capture(&source, &args.output, args.interval)?;
    for f in &meta.unreadable {
        eprintln!(
            "iolab: warning: {}: could not be read; left out of the snapshot",
            crate::report::format::terminal_safe(f)
        );
    }
    crate::output::stdout(&format!(
        "snapshot of {} (Linux {}) in {}: {} files, {} bytes, readings {:.3} s apart\n",
        meta.hostname.as_deref().unwrap_or("?"),
        meta.kernel.as_deref().unwrap_or("?"),
        args.output.display(),
        meta.files,
        meta.bytes,
        meta.interval_ns as f64 / 1e9
    ))
}

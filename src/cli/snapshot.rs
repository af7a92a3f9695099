//! `iolab snapshot`: capture this machine into a directory for `--root`.

use std::path::PathBuf;
use std::time::Duration;

/// Save what the machine model reads, to inspect this machine elsewhere (--root).
///
/// Captures the files the machine model reads into -o DIR, plus a second reading of the
/// interrupt, CPU and disk counters after the interval, for `iolab inspect --root DIR`
/// (and every other command that takes --root) on any machine.
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("Print the snapshot's directory and its snapshot.json as JSON")))]
pub(crate) struct SnapshotArgs {
    /// The directory to create (must not exist, or be empty).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: PathBuf,
    /// Time between the two readings of the counters (e.g. 5s, 500ms, 2) [default: 5s]. A
    /// --root snapshot is copied with the readings it holds, as they were taken (one
    /// without a second reading stays without rates).
    #[arg(long, value_name = "DURATION", value_parser = super::inspect::parse_interval)]
    pub interval: Option<Duration>,
    /// Snapshot another machine root (e.g. an earlier snapshot) instead of this machine.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
}

pub(super) fn run(args: SnapshotArgs) -> anyhow::Result<()> {
    let source = match &args.root {
        Some(dir) => crate::sys::SysRoot::machine_root(dir)?,
        None => crate::sys::SysRoot::live(),
    };
    if let (Some(dir), Some(_)) = (&args.root, args.interval) {
        let held = if crate::snapshot::has_second_reading(&source) {
            "holds its two readings of the counters, which are copied as they were taken"
        } else {
            "holds one reading of the counters, and files that do not change read again \
             would make up rates of 0"
        };
        return Err(super::usage(format!(
            "--interval: {} {held}; leave out --interval",
            dir.display()
        )));
    }
    let interval = args.interval.unwrap_or(Duration::from_secs(5));
    let captured = crate::snapshot::take(&source, &args.output, interval)?;
    crate::output::print(&captured, args.out)
}

//! The command line: clap structs that describe arguments, and one call per command into the
//! module that does the work. Nothing here reads /proc or computes anything; it only parses,
//! validates, dispatches and turns errors into a message and an exit code.

use clap::{Parser, Subcommand};

mod compare;
mod emit;
mod import;
mod inspect;
mod irq;
mod plot;
mod preflight;
mod report;
mod restore;
mod run;
mod runs;
mod show;
mod snapshot;
mod trace;

/// iolab: a Linux I/O-path performance lab.
///
/// Inspect the machine's CPUs, devices, queues and interrupts; run fio experiment matrices
/// across kernel knobs and CPU placements; compare results with confidence intervals; analyse
/// block traces; plan interrupt placement.
#[derive(Debug, Parser)]
#[command(
    name = "iolab",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Inspect(inspect::InspectArgs),
    Snapshot(snapshot::SnapshotArgs),
    Preflight(preflight::PreflightArgs),
    Run(run::RunArgs),
    Runs(runs::RunsArgs),
    Show(show::ShowArgs),
    Compare(compare::CompareArgs),
    Plot(plot::PlotArgs),
    Report(report::ReportArgs),
    Import(import::ImportArgs),
    Trace(trace::TraceArgs),
    Irq(irq::IrqArgs),
    Restore(restore::RestoreArgs),
}

/// Runs the command line and returns the process exit code: 0 success, 1 failure,
/// 2 bad usage (clap's own convention), 128 + N when stopped by signal N (130: Ctrl-C).
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = e.exit_code();
            let _ = e.print();
            return code;
        }
    };
    match run(cli) {
        Ok(()) => 0,
        Err(e) => {
            // Errors quote names from files and the database: escaped like any other text.
            eprintln!(
                "iolab: error: {}",
                crate::report::format::terminal_safe_lines(&format!("{e:#}"))
            );
            e.downcast_ref::<run::Stopped>()
                .map_or(1, run::Stopped::exit_code)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Inspect(args) => inspect::run(args),
        Command::Snapshot(args) => snapshot::run(args),
        Command::Preflight(args) => preflight::run(args),
        Command::Run(args) => run::run(args),
        Command::Runs(args) => runs::run(args),
        Command::Show(args) => show::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Plot(args) => plot::run(args),
        Command::Report(args) => report::run(args),
        Command::Import(args) => import::run(args),
        Command::Trace(args) => trace::run(args),
        Command::Irq(args) => irq::run(args),
        Command::Restore(args) => restore::run(args),
    }
}

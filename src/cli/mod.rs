//! The command line: clap structs that describe arguments, and one call per command into the
//! module that does the work. Nothing here reads /proc or computes anything; it only parses,
//! validates, dispatches and turns errors into a message and an exit code.

use clap::{Parser, Subcommand};

mod agent;
mod compare;
mod generate;
mod hosts;
mod import;
mod inspect;
mod irq;
mod metrics;
mod plot;
mod preflight;
mod progress;
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
    version = env!("IOLAB_VERSION"),
    propagate_version = true,
    max_term_width = 100
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
    Metrics(metrics::MetricsArgs),
    Irq(irq::IrqArgs),
    Restore(restore::RestoreArgs),
    Hosts(hosts::HostsArgs),
    Agent(agent::AgentArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    ///
    /// For bash: `iolab completions bash > /etc/bash_completion.d/iolab` (the Debian
    /// package installs them for bash, zsh and fish).
    Completions(generate::CompletionsArgs),
    /// Write the man pages (iolab.1 and one per command) into a directory.
    ///
    /// The Debian package ships them; built from source, `iolab man -o /usr/local/share/man/man1`
    /// puts them where `man iolab-run` finds them.
    Man(generate::ManArgs),
}

/// Runs the command line and returns the process exit code: 0 success, 1 failure,
/// 2 bad usage (clap's own convention), 128 + N when stopped by signal N (130: Ctrl-C).
pub fn main() -> i32 {
    // What iolab writes (journals and markers it later acts on as root, reports) is never
    // writable by others, whatever umask it was started with; a stricter one stays.
    // SAFETY: umask only swaps the process's file mode mask.
    unsafe { libc::umask(libc::umask(0o022) | 0o022) };
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
            say!(
                "iolab: error: {}",
                crate::report::format::terminal_safe_lines(&error_text(&e))
            );
            if e.downcast_ref::<Usage>().is_some() {
                return 2;
            }
            if e.downcast_ref::<crate::irq::daemon::Refused>().is_some() {
                return crate::irq::daemon::Refused::EXIT_STATUS;
            }
            e.downcast_ref::<run::Stopped>()
                .map_or(1, run::Stopped::exit_code)
        }
    }
}

/// A command line that cannot mean anything, found after clap parsed it (a value clap cannot
/// check alone, or two options that contradict each other). It exits 2 like clap's own usage
/// errors, so a script can tell misuse from a command that failed; unlike clap, the message
/// goes through iolab's printer, which escapes what the user typed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Usage(pub String);

/// `Err(usage(...))?` in a command: the error for a misused command line.
pub(crate) fn usage(message: impl Into<String>) -> anyhow::Error {
    Usage(message.into()).into()
}

/// `--metric`s (show, compare, report) in the order given, each once: a metric named twice
/// is one measurement, and compared twice it counted twice in the family's adjustment and
/// in the across-cells summary.
pub(crate) fn metrics_once(mut names: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(n.clone()));
    names
}

/// `--tag NAME=VALUE`s (run, import): each well formed, each name once (a run has one value
/// per tag; the last of two would otherwise win unseen).
pub(crate) fn parse_tags(texts: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    let mut tags: Vec<(String, String)> = Vec::new();
    for text in texts {
        let (name, value) = crate::store::tags::parse_tag(text).map_err(usage)?;
        if let Some((_, earlier)) = tags.iter().find(|(n, _)| *n == name) {
            return Err(usage(format!(
                "--tag {name} is given twice ({name}={earlier} and {name}={value}): a run \
                 has one value per tag"
            )));
        }
        tags.push((name, value));
    }
    Ok(tags)
}

/// The error and its causes, joined by ": " like `{:#}`, but each cause at most once: many
/// errors (ours, rusqlite's, std's) already include their source in their own message, and
/// "database is locked: database is locked" helps nobody.
pub(crate) fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if part.is_empty() || text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
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
        Command::Metrics(args) => metrics::run(args),
        Command::Irq(args) => irq::run(args),
        Command::Restore(args) => restore::run(args),
        Command::Hosts(args) => hosts::run(args),
        Command::Agent(args) => agent::run(args),
        Command::Completions(args) => generate::completions(args),
        Command::Man(args) => generate::man(args),
    }
}

#[cfg(test)]
mod error_text_tests {
    #[derive(Debug, thiserror::Error)]
    #[error("{path}: {source}")]
    struct Wrapped {
        path: String,
        source: std::io::Error,
    }

    #[test]
    fn each_cause_is_printed_once() {
        let io = std::io::Error::from_raw_os_error(2);
        let e = anyhow::Error::new(Wrapped {
            path: "/x/y".into(),
            source: io,
        })
        .context("reading the plan");
        let text = super::error_text(&e);
        assert_eq!(
            text,
            "reading the plan: /x/y: No such file or directory (os error 2)"
        );
        let plain = anyhow::anyhow!("database is locked").context("r.db");
        assert_eq!(super::error_text(&plain), "r.db: database is locked");
    }
}

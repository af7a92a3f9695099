//! `iolab trace ...`: record block traces through tracefs, analyse them like btt (and
//! beyond), compare two traces. Argument parsing only; the work is in `crate::trace`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use crate::experiment::file::{BUFFER_KB_MAX, BUFFER_KB_MIN};
use crate::sys::parse::duration;
use crate::trace;

/// Block traces: record, analyse, compare, plot.
#[derive(Debug, clap::Args)]
pub(crate) struct TraceArgs {
    #[command(subcommand)]
    pub command: TraceCommand,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum TraceCommand {
    Record(RecordArgs),
    Analyze(AnalyzeArgs),
    Compare(CompareArgs),
    Plot(PlotArgs),
    Export(ExportArgs),
}

/// Write a trace as plain NAME.blktrace.N files, which blkparse and btt read.
///
/// The trace may be an experiment's compressed NAME.blktrace.N.gz files, or any trace. Files
/// of an earlier trace of the same name in DIR numbered above the ones written are removed,
/// and said (blkparse and btt would read them with these).
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("Print the files written as JSON ({\"files\": [...]}, and \"removed\": [...] when files of an earlier trace were)")))]
pub(crate) struct ExportArgs {
    /// Trace base name (NAME.blktrace.N[.gz]) or one file, such as blkparse -d's merged one
    /// (written as FILE.blktrace.N, without a .gz ending, one file per CPU with that CPU's
    /// records, as blkparse reads them); - reads standard input (written as stdin.blktrace.N).
    #[arg(value_name = "NAME|FILE")]
    pub input: PathBuf,
    /// Directory for the plain files.
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: PathBuf,
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
}

/// Draw a trace as SVG charts.
///
/// Sectors over time (reads, writes and discards coloured), latency, queue and driver depth,
/// throughput, IOPS and seeks per second over time, latency histogram with reads, writes and
/// discards apart (SVG files); with --with, several traces on one sector-vs-time chart.
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("Print the files written as JSON ({\"files\": [...]}, and \"removed\": [...] when charts of an earlier plot were)")))]
pub(crate) struct PlotArgs {
    /// Trace base names (NAME.blktrace.N) or files.
    #[arg(required = true, value_name = "NAME|FILE")]
    pub inputs: Vec<PathBuf>,
    /// Directory for the SVG files. Charts the previous plot there wrote that this one does
    /// not draw (an overlay, PNGs) are removed, and said; other files stay (the charts written
    /// are listed in DIR/.iolab-plot).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "DIR",
        default_value = "trace-plots"
    )]
    pub output: PathBuf,
    /// Device to draw, as MAJOR,MINOR or the name of a block device here, e.g. sdb
    /// (default: the busiest).
    #[arg(long, value_name = "DEV")]
    pub dev: Option<String>,
    /// Another trace (base name or file) to draw on the same sector-vs-time chart
    /// (sectors-overlay.svg), each from its own start; repeat for more (up to 9, ten traces
    /// in all, one colour each). --dev picks the device in each of them too.
    #[arg(long = "with", value_name = "NAME|FILE")]
    pub with: Vec<PathBuf>,
    /// Legend label of each trace on that chart, one per trace, in order: the main trace
    /// first, then each --with (none: the names given).
    #[arg(long = "label", value_name = "TEXT")]
    pub labels: Vec<String>,
    /// Also write a PNG copy of each chart (2x scale, rendered inside iolab).
    #[arg(long)]
    pub png: bool,
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
}

/// Record block devices' events through tracefs, as files blkparse and btt read.
///
/// The events go into NAME.blktrace.CPU files, one per CPU, as blktrace writes them.
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help(
    "Print what was recorded as JSON on standard output (files, events, events lost, the \
     command's exit); COMMAND's own standard output then goes to standard error"
)))]
pub(crate) struct RecordArgs {
    /// Device to trace (e.g. loop0 or /dev/loop0); repeat it to record several devices
    /// together (`-d sdb -d sdc`): one set of files, which the analysis takes apart by device.
    /// A disk and its partitions share one kernel trace: record the disk, or one partition.
    #[arg(short = 'd', long = "device", value_name = "DEV", required = true)]
    pub device: Vec<String>,
    /// Base name of the output files (NAME.blktrace.N). They replace a recording of that
    /// name: its files this one does not overwrite (higher CPUs, .gz copies) are removed.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "NAME",
        default_value = "trace"
    )]
    pub output: PathBuf,
    /// Stop after this long, e.g. 10s, 500ms, 2m or 10 (default: until Ctrl-C, or until
    /// COMMAND exits); at most 30 days. A COMMAND still running then gets SIGTERM, with its
    /// process group (SIGKILL 2 s later), then so does what it started out of that group
    /// (SIGKILL 2 s later again); the recording has ended by then.
    #[arg(long, value_name = "DURATION", value_parser = parse_record_duration)]
    pub duration: Option<Duration>,
    /// The kernel's trace buffer per CPU while recording, in KiB, from 64 to 1048576
    /// (default: a 32nd of this machine's memory over its online CPUs, 8 to 64 MiB each).
    /// Events that come faster than they are read fill it, and the rest are lost.
    #[arg(long, value_name = "KB", value_parser = clap::value_parser!(u64).range(BUFFER_KB_MIN..=BUFFER_KB_MAX))]
    pub buffer_kb: Option<u64>,
    /// Command to run while recording; recording stops when it exits, and iolab exits 1
    /// when it failed. It runs in a process group of its own: Ctrl-C stops the recording,
    /// which then ends the command as --duration does. A command that reads the terminal (a
    /// shell, a pager, a prompt) is given it when it first tries, as a shell's `fg` does: from
    /// then on Ctrl-C goes to the command, and its end ends the recording. What the command
    /// started is ended with it, even out of its group (`setsid`, a shell's jobs, a daemon:
    /// iolab is their subreaper), and so is what it leaves running when it exits; each is
    /// named on standard error.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
}

/// Analyse traces: btt's sections, percentiles, per-request view, timeline, findings.
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("Print the analysis as one JSON document")))]
pub(crate) struct AnalyzeArgs {
    /// Trace base names (NAME.blktrace.N) or files (merged or raw tracefs captures, plain or
    /// gzip); - reads one from standard input (e.g. `zcat t.bin.gz | iolab trace analyze -`).
    /// Several are analysed as one trace (one recording's files, or devices recorded apart at
    /// the same time); a file named twice, or recordings of different times, are refused.
    #[arg(required = true, value_name = "NAME|FILE")]
    pub inputs: Vec<PathBuf>,
    /// Timeline bucket width, e.g. 1s, 100ms or 2 (from 1ms to 30 days; the timeline may
    /// have at most 100000 buckets).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_bucket)]
    pub interval: Duration,
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
}

/// Put two traces side by side with the changes and the findings that differ.
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("Print as JSON")))]
pub(crate) struct CompareArgs {
    /// The baseline trace (base name or file; - for standard input).
    pub a: PathBuf,
    /// The trace to compare with it (base name or file; - for standard input).
    pub b: PathBuf,
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
}

pub(super) fn run(args: TraceArgs) -> anyhow::Result<()> {
    match args.command {
        TraceCommand::Record(a) => record(a),
        TraceCommand::Analyze(a) => analyze(a),
        TraceCommand::Compare(a) => compare(a),
        TraceCommand::Export(a) => {
            let exported = trace::keep::export(&a.input, &a.output)?;
            let wrote = Wrote::of(&exported.files).removing(
                &exported.earlier_removed,
                "a file of an earlier trace of this name, which blkparse, btt and `iolab \
                 trace analyze` would read with these",
                a.out.json,
            );
            for why in &exported.earlier_left {
                say!(
                    "iolab: WARNING: {}: it would be read with the files exported; remove it",
                    crate::report::format::terminal_safe(why)
                );
            }
            crate::output::print(&wrote, a.out)
        }
        TraceCommand::Plot(a) => {
            let mut files = Vec::new();
            for p in trace::plot::plot(&a.inputs, &a.output, a.dev.as_deref(), &a.with, &a.labels)?
            {
                if a.png {
                    let png = trace::plot::to_png(&p)?;
                    files.extend([p, png]);
                } else {
                    files.push(p);
                }
            }
            let wrote = Wrote::of(&files).removing(
                &trace::plot::remove_earlier(&a.output, &files),
                "an earlier plot's chart, not drawn this time",
                a.out.json,
            );
            crate::output::print(&wrote, a.out)
        }
    }
}

/// The files `plot` or `export` wrote: a path per line, or `{"files": [...]}`; and the
/// files of an earlier plot or export that they removed, said on standard error
/// (`"removed"` in JSON), so that the paths on standard output stay the files written.
#[derive(serde::Serialize)]
struct Wrote {
    files: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    removed: Vec<String>,
}

impl Wrote {
    fn of(paths: &[PathBuf]) -> Wrote {
        Wrote {
            files: paths.iter().map(|p| p.display().to_string()).collect(),
            removed: Vec::new(),
        }
    }

    /// With the files `removed`, each said on standard error with `why` (unless `json`).
    fn removing(mut self, removed: &[PathBuf], why: &str, json: bool) -> Wrote {
        self.removed = removed.iter().map(|p| p.display().to_string()).collect();
        if !json {
            for r in &self.removed {
                let r = crate::report::format::terminal_safe(r);
                say!("iolab: removed {r}: {why}");
            }
        }
        self
    }
}

impl crate::output::Render for Wrote {
    fn text(&self) -> String {
        self.files.iter().map(|f| format!("{f}\n")).collect()
    }
}

/// A recording lasts longer than zero and at most `duration::MAX`.
fn parse_record_duration(text: &str) -> Result<Duration, String> {
    duration::duration_in(text, Duration::from_millis(1), duration::MAX)
}

/// Timeline buckets narrower than 1 ms say nothing a reader could see and would make the
/// timeline of an ordinary trace enormous.
fn parse_bucket(text: &str) -> Result<Duration, String> {
    duration::duration_in(text, Duration::from_millis(1), duration::MAX)
}

fn options(interval: Duration) -> anyhow::Result<trace::analyze::Options> {
    Ok(trace::analyze::Options {
        // At most 30 days, about 2.6e15 ns: fits u64.
        interval_ns: u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX),
        ..Default::default()
    })
}

/// Standard input named twice, or a file named twice as it is written, is a command line
/// that cannot mean anything: a usage error. (Other names of one file are found as the trace
/// is opened.)
fn named_once<'a>(names: impl IntoIterator<Item = &'a Path> + Clone) -> anyhow::Result<()> {
    trace::stream::stdin_once(names.clone()).map_err(|e| crate::cli::usage(e.to_string()))?;
    let mut seen = std::collections::BTreeSet::new();
    match names.into_iter().find(|n| !seen.insert(*n)) {
        Some(twice) => Err(crate::cli::usage(format!(
            "{}: named twice; its records would count twice",
            twice.display()
        ))),
        None => Ok(()),
    }
}

fn analyze(args: AnalyzeArgs) -> anyhow::Result<()> {
    named_once(args.inputs.iter().map(PathBuf::as_path))?;
    for note in trace::merge::unread_cpu_files(&args.inputs) {
        say!(
            "note: {}",
            crate::report::format::terminal_safe_lines(&note)
        );
    }
    let report = trace::analyze::analyze_paths(&args.inputs, options(args.interval)?)?;
    crate::output::print(&trace::diagnose::Diagnosed::of(report), args.out)
}

fn compare(args: CompareArgs) -> anyhow::Result<()> {
    // A trace compared with itself is allowed (it shows no change); standard input twice is
    // not one trace read twice but nothing.
    trace::stream::stdin_once([args.a.as_path(), args.b.as_path()])
        .map_err(|e| crate::cli::usage(e.to_string()))?;
    // The comparison reads no timeline: none is built, so no span is too long for one.
    let opts = trace::analyze::Options {
        timeline: false,
        ..Default::default()
    };
    let a = trace::analyze::analyze_paths(std::slice::from_ref(&args.a), opts.clone())
        .with_context(|| format!("analysing {}", args.a.display()))?;
    let b = trace::analyze::analyze_paths(std::slice::from_ref(&args.b), opts)
        .with_context(|| format!("analysing {}", args.b.display()))?;
    let named = trace::compare::Named {
        comparison: trace::compare::compare(&a, &b),
        names: (args.a.display().to_string(), args.b.display().to_string()),
    };
    crate::output::print(&named, args.out)
}

fn record(args: RecordArgs) -> anyhow::Result<()> {
    let cfg = trace::capture::Config {
        devices: args.device,
        output: args.output,
        duration: args.duration,
        buffer_kb: args
            .buffer_kb
            .unwrap_or_else(crate::experiment::run::trace::auto_buffer_kb),
        // A command's own output (fio's progress) owns the terminal.
        status_line: args.command.is_empty()
            && std::io::IsTerminal::is_terminal(&std::io::stderr()),
        command: args.command,
        command_stdout_to_stderr: args.out.json,
        state_dir: crate::knobs::state_dir(),
    };
    if cfg.duration.is_none() && cfg.command.is_empty() && !cfg.status_line {
        say!(
            "recording {}; press Ctrl-C to stop",
            trace::capture::listed(&cfg.devices)
        );
    }
    let summary = trace::capture::record(&cfg)?;
    // The text goes to standard error either way: standard output may be the command's.
    say_part!("{}", trace::capture::render(&summary));
    if args.out.json {
        let json = serde_json::to_string_pretty(&trace::capture::Recorded::of(&summary))?;
        crate::output::stdout(&(json + "\n"))?;
    }
    // A script's `iolab trace record -- fio ... && iolab trace analyze` must see fio fail.
    if let Some(st) = summary.command_failed() {
        anyhow::bail!("the command failed ({st}); its recording is complete");
    }
    Ok(())
}

//! `iolab plot ID --kind ... -o FILE.svg|FILE.png`: one chart of one experiment.

use std::path::PathBuf;

use crate::analysis::plots::{write_chart, Kind, PlotRequest};
use crate::store;

/// Draw one chart of an experiment as SVG or PNG.
///
/// Kinds: bars (mean per cell with 95% CI whiskers), lines (a metric against a numeric factor
/// such as bs, one line per level of the other factors), latency (completion-latency CDF per
/// cell from fio json+ histograms merged across repetitions), heatmap (interrupts/s per CPU
/// over the whole sampled time of one run, fio's measured interval between two lines), cpu
/// (per-CPU time breakdown over one run's measured interval), over-time (a metric per second
/// over fio's measured interval, one line per run of a cell: throughput, latency, device
/// completions), irq-over-time (interrupts per second on each CPU for one run).
///
/// A whisker of a metric never measured below 0 (IOPS, MB/s, latency) that would reach
/// below 0, as a wide interval from a few noisy runs can, is cut at the axis and has no cap
/// there; `iolab show` and --json give the whole interval.
///
/// The output's extension picks the format: .svg stays sharp when zoomed and is what
/// `iolab report` inlines; .png is the same chart rasterised at 2x with a font built into
/// iolab, for mail, chat and trackers that do not show SVG.
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("Print what was written as JSON")))]
pub(crate) struct PlotArgs {
    /// Experiment id (see `iolab runs`).
    #[arg(value_name = "ID")]
    pub experiment: i64,
    /// What to draw.
    #[arg(long, value_enum)]
    pub kind: Kind,
    /// Output file: .svg or .png.
    #[arg(short = 'o', long = "output", value_name = "FILE.svg|FILE.png")]
    pub output: PathBuf,
    /// bars, lines, over-time: the metric (default: the first headline one measured);
    /// latency: read_... or write_... picks the direction.
    #[arg(long, value_name = "M")]
    pub metric: Option<String>,
    /// lines: the numeric factor on the x axis (default: the first numeric factor).
    #[arg(long, value_name = "FACTOR")]
    pub x: Option<String>,
    /// bars: factor that colours the bars; lines: factor that makes one line per level (any
    /// other factor but --x must then have one level; without --by, one line per combination).
    #[arg(long, value_name = "FACTOR")]
    pub by: Option<String>,
    /// heatmap, cpu, irq-over-time: the run to draw (default: the first successful run with
    /// samples; irq-over-time: the first of the chosen cell).
    #[arg(long, value_name = "RUN_ID")]
    pub run: Option<i64>,
    /// heatmap: only this IRQ (e.g. 45 or LOC; default: all interrupts summed).
    #[arg(long, value_name = "IRQ")]
    pub irq: Option<String>,
    /// lines: also draw this experiment on the same axes (repeatable), e.g. the same block-size
    /// sweep on another kernel; lines are labelled by the tag that tells the experiments apart.
    #[arg(long, value_name = "ID")]
    pub with: Vec<i64>,
    /// over-time, irq-over-time: the cell, by its key as `runs` lists it or its levels
    /// (e.g. scheduler=none,bs=4k or none/4k;
    /// default: the first cell with per-second series).
    #[arg(long, value_name = "CELL")]
    pub cell: Option<String>,
    /// One controlled host's own runs instead of the hosts' aggregate (its ssh name).
    #[arg(long, value_name = "HOST", conflicts_with = "by_host")]
    pub host: Option<String>,
    /// lines: one line per controlled host (each host's own runs) instead of the aggregate.
    #[arg(long, conflicts_with = "with")]
    pub by_host: bool,
    /// Results database (default: $IOLAB_DB, else iolab.db in the current directory).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
}

/// An option given to a kind that does not read it is refused, not ignored.
fn check_options(args: &PlotArgs) -> anyhow::Result<()> {
    use Kind::*;
    let options: [(&str, bool, &[Kind]); 7] = [
        (
            "--metric",
            args.metric.is_some(),
            &[Bars, Lines, Latency, OverTime],
        ),
        ("--x", args.x.is_some(), &[Lines]),
        ("--with", !args.with.is_empty(), &[Lines]),
        ("--by", args.by.is_some(), &[Bars, Lines]),
        ("--run", args.run.is_some(), &[Heatmap, Cpu, IrqOverTime]),
        ("--irq", args.irq.is_some(), &[Heatmap]),
        ("--cell", args.cell.is_some(), &[OverTime, IrqOverTime]),
    ];
    let name = |k: &Kind| {
        clap::ValueEnum::to_possible_value(k).map_or(String::new(), |v| v.get_name().to_string())
    };
    for (option, given, kinds) in options {
        if given && !kinds.contains(&args.kind) {
            let kinds: Vec<String> = kinds.iter().map(name).collect();
            return Err(super::usage(format!(
                "{option} does nothing for --kind {}: it is for {}",
                name(&args.kind),
                kinds.join(", ")
            )));
        }
    }
    // An experiment drawn twice is one line over another, which reads as "no change".
    let mut drawn = vec![args.experiment];
    for id in &args.with {
        if drawn.contains(id) {
            return Err(super::usage(format!(
                "--with {id}: experiment {id} is already on the chart; --with names other \
                 experiments to draw beside {}",
                args.experiment
            )));
        }
        drawn.push(*id);
    }
    Ok(())
}

pub(super) fn run(mut args: PlotArgs) -> anyhow::Result<()> {
    check_options(&args)?;
    crate::analysis::plots::is_png(&args.output).map_err(super::usage)?;
    let db = store::resolve_db_path(args.db.as_deref());
    if let Some(h) = &args.host {
        args.experiment = store::Store::open_existing(&db)?.part_on_host(args.experiment, h)?;
    }
    if args.by_host {
        if !matches!(args.kind, Kind::Lines) {
            return Err(super::usage(
                "--by-host draws one line per host: it needs --kind lines",
            ));
        }
        let parts = store::Store::open_existing(&db)?.parts(args.experiment)?;
        let Some((first, rest)) = parts.split_first() else {
            anyhow::bail!(
                "experiment {} has no runs of single hosts (only a run on controlled hosts \
                 stores each host's own)",
                args.experiment
            );
        };
        args.experiment = first.id;
        args.with = rest.iter().map(|p| p.id).collect();
    }
    let req = PlotRequest {
        kind: args.kind,
        metric: args.metric,
        x: args.x,
        by: args.by,
        run: args.run,
        irq: args.irq,
        with: args.with,
        cell: args.cell,
    };
    let written = write_chart(&db, args.experiment, &req, &args.output)?;
    crate::output::print(&written, args.out)
}

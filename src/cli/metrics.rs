//! `iolab metrics`: the metric registry (`crate::metrics`) as a table, JSON or Markdown.

/// List every metric iolab stores: unit, which way is better, source, meaning.
///
/// Names not listed (a `command` engine's) take the first naming rule (`*_us`, ...) they match.
/// `--markdown` prints docs/metrics.md.
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("Print the registry as JSON").conflicts_with("markdown")))]
pub(crate) struct MetricsArgs {
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
    /// Print the registry as Markdown (docs/metrics.md).
    #[arg(long)]
    pub markdown: bool,
}

pub(super) fn run(args: MetricsArgs) -> anyhow::Result<()> {
    use crate::metrics::render;
    if args.markdown {
        return crate::output::stdout(&render::markdown());
    }
    crate::output::print(&render::Listing(render::rows()), args.out)
}

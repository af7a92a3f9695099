//! `iolab metrics`: the metric registry (`crate::metrics`) as a table, JSON or Markdown.

/// List every metric iolab stores: unit, which way is better, source, meaning.
///
/// Names not listed (a `command` engine's) take the first naming rule (`*_us`, ...) they match.
/// `--markdown` prints docs/metrics.md.
#[derive(Debug, clap::Args)]
pub struct MetricsArgs {
    /// Print the registry as JSON.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print the registry as Markdown (docs/metrics.md).
    #[arg(long)]
    pub markdown: bool,
}

pub fn run(args: MetricsArgs) -> anyhow::Result<()> {
    use crate::metrics::render;
    let text = if args.json {
        render::json()
    } else if args.markdown {
        render::markdown()
    } else {
        render::text()
    };
    crate::output::stdout(&text)
}

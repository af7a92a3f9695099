//! The registry as people read it: a text table for `iolab metrics`, the same rows as JSON,
//! and the Markdown of docs/metrics.md (a test compares the file with `markdown()`).

use serde::Serialize;

use super::{registry, Metric};
use crate::stats::direction::Direction;

/// One metric as printed: the name (or pattern) and the rest in words.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Row {
    pub name: String,
    /// True for a naming rule (`*_us`), false for a stored name.
    pub pattern: bool,
    pub unit: Option<&'static str>,
    /// `higher`, `lower`, `none` (a change is only `changed`), or null: state it (`--better`).
    pub better: Option<&'static str>,
    pub source: &'static str,
    pub description: String,
}

fn better(d: Option<Direction>) -> Option<&'static str> {
    d.map(|d| match d {
        Direction::HigherIsBetter => "higher",
        Direction::LowerIsBetter => "lower",
        Direction::NoDirection => "none",
    })
}

fn row(m: &Metric) -> Row {
    Row {
        name: m.shown(),
        pattern: m.exact_name().is_none(),
        unit: m.unit,
        better: better(m.direction),
        source: m.source.name(),
        description: m.description.to_string(),
    }
}

pub(crate) fn rows() -> Vec<Row> {
    registry().iter().map(row).collect()
}

const NOTES: &[&str] = &[
    "A name is looked up as listed first, else as the name after its last `:`: a per-device \
     `DEVICE:dev_*` or `DEVICE:trace_*` (several targets, or devices stacked under one), and in \
     a run across hosts a host's `HOST:NAME`, this machine's `local:NAME` and its own devices' \
     `local:DEVICE:dev_*` (`[target] local_devices`). Other names (a `command` engine's, which \
     the experiment file chooses) take the first naming rule (`*suffix`) they match.",
    "better: `higher` or `lower` is better; `none`: `compare` says `changed`, never better or \
     worse; `-`: neither, so a comparison must be told (`--better METRIC=higher|lower|none`).",
    "Latency percentiles from a histogram are their bucket's value, not the sample's: fio's \
     `*_clat_p50_us`, `*_clat_p99_us` and `*_clat_p999_us` within 0.4 to 0.8% (64 buckets per \
     power of two), the trace's `trace_q2c_p50_us`, `trace_q2c_p99_us` and `trace_d2c_p99_us` \
     within 0.2 to 0.4% (128). Their CIs in `show` and a cell's CI in `compare` hold what the \
     buckets leave open.",
    "The sampler's CPU shares (`usr_pct` to `steal_pct`) come from /proc/stat's ticks of 10 \
     ms: over a run of fewer than 20 ticks, all CPUs together (0.1 s on two CPUs), they would \
     be coarser than 5%, and are left out.",
];

/// The text table: name, unit, better, source and description, one metric a line.
pub(crate) fn text() -> String {
    let rows = rows();
    let cell = |s: Option<&str>| s.unwrap_or("-").to_string();
    let lines: Vec<[String; 5]> = std::iter::once([
        "metric".to_string(),
        "unit".into(),
        "better".into(),
        "source".into(),
        "description".into(),
    ])
    .chain(rows.iter().map(|r| {
        [
            r.name.clone(),
            cell(r.unit),
            cell(r.better),
            r.source.to_string(),
            r.description.clone(),
        ]
    }))
    .collect();
    let width = |c: usize| lines.iter().map(|l| l[c].len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..4).map(width).collect();
    let mut out = String::new();
    for l in &lines {
        for (c, w) in widths.iter().enumerate() {
            out.push_str(&format!("{:<w$}  ", l[c]));
        }
        out.push_str(&l[4]);
        out.push('\n');
    }
    for n in NOTES {
        out.push('\n');
        out.push_str(&crate::report::table::wrap(
            n,
            crate::report::table::MAX_WIDTH,
        ));
    }
    out
}

/// The registry as `iolab metrics` prints it: `text()` for people, the rows as JSON.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub(crate) struct Listing(pub Vec<Row>);

impl crate::output::Render for Listing {
    fn text(&self) -> String {
        text()
    }
}

/// docs/metrics.md.
pub(crate) fn markdown() -> String {
    let mut out = String::from(
        "# Metrics\n\n\
         <!-- Generated from src/metrics/mod.rs by `iolab metrics --markdown`; \
         edit the registry, not this file. -->\n\n\
         Every metric iolab stores per run, with its unit, which way is better, and where it \
         comes from (see docs/architecture.md for how each is measured).\n\n",
    );
    for n in NOTES {
        out.push_str(n);
        out.push_str("\n\n");
    }
    out.push_str("| metric | unit | better | source | description |\n|---|---|---|---|---|\n");
    for r in rows() {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            r.name,
            r.unit.unwrap_or("-"),
            r.better.unwrap_or("-"),
            r.source,
            r.description.replace('|', "\\|"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/metrics.md is what the registry renders: change the registry, then run
    /// `iolab metrics --markdown > docs/metrics.md`.
    #[test]
    fn docs_metrics_md_is_the_rendered_registry() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/metrics.md");
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == markdown(),
            "{} differs from the registry: run `iolab metrics --markdown > docs/metrics.md`",
            path.display()
        );
    }

    #[test]
    fn every_entry_is_printed_in_every_form() {
        let n = registry().len();
        let text = text();
        assert_eq!(text.lines().take_while(|l| !l.is_empty()).count(), n + 1);
        assert!(text.contains("read_clat_p99_us"));
        let json =
            crate::output::format(&Listing(rows()), crate::output::OutputArgs { json: true });
        let doc: serde_json::Value = serde_json::from_str(&json.unwrap()).unwrap();
        assert_eq!(doc.as_array().unwrap().len(), n);
        assert_eq!(doc[0]["name"], "read_iops");
        assert_eq!(doc[0]["better"], "higher");
        assert_eq!(
            markdown().lines().filter(|l| l.starts_with("| `")).count(),
            n
        );
    }
}

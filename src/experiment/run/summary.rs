//! The table printed when an experiment ends: per cell, IOPS, MB/s, mean and p99 completion
//! latency (a network engine's or a command's own figures in their place), %usr/%sys and
//! interrupts/s (across hosts, the hosts' mean) as mean ± stddev over
//! the repetitions that succeeded, then the cells that could not run here with their reasons.
//! It is a quick look, not the analysis: `iolab show ID` and `iolab compare` carry the
//! confidence intervals.

use serde::Serialize;

use crate::metrics::{self, Metric};
use crate::report::format::number;
use crate::report::table::{Cell as TableCell, Column, Table};

/// What happened to one cell over the whole experiment.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CellResult {
    pub(crate) index: usize,
    pub key: String,
    /// Metrics of each successful repetition, in run order (in JSON, one object per run:
    /// `{"read_iops": ..., ...}`, what a script looks up by name).
    #[serde(serialize_with = "runs_as_objects")]
    pub runs: Vec<Vec<(String, f64)>>,
    /// Set when the cell cannot be realised here.
    pub not_applicable: Option<String>,
    /// Reasons of failed repetitions.
    pub failures: Vec<String>,
    /// The adaptive rule stopped at `max` runs before reaching its precision target.
    pub(crate) capped: bool,
}

fn runs_as_objects<S: serde::Serializer>(
    runs: &[Vec<(String, f64)>],
    s: S,
) -> Result<S::Ok, S::Error> {
    struct Run<'a>(&'a [(String, f64)]);
    impl Serialize for Run<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_map(self.0.iter().map(|(name, value)| (name, value)))
        }
    }
    s.collect_seq(runs.iter().map(|r| Run(r)))
}

/// Total IOPS and MB/s over both directions; latencies from the direction that did most of
/// the I/O (for a mixed workload, the dominant one is the figure people quote). Keyed by the
/// column ids below: a metric's name where a column is one metric, else the column's own id.
pub(crate) fn headline(figures: &[(String, f64)]) -> Vec<(&'static str, f64)> {
    let get = |m: &Metric| figures.iter().find(|(k, _)| k == m.name).map(|(_, v)| *v);
    // Reads, writes and trims; the latency columns are the busiest direction's.
    let fio = [&metrics::FIO_READ, &metrics::FIO_WRITE, &metrics::FIO_TRIM];
    let iops = fio.map(|d| get(&d.iops));
    let dir = fio
        .iter()
        .zip(&iops)
        .fold((fio[0], 0.0), |(best, most), (d, v)| match v {
            Some(v) if *v > most => (*d, *v),
            _ => (best, most),
        })
        .0;
    let mut out = Vec::new();
    // Only fio's runs have I/O figures: a network engine's or a command's own take their
    // place (a 0 here would read as a workload that did nothing).
    if iops.iter().any(Option::is_some) {
        out.push((IOPS, iops.iter().flatten().sum()));
        out.push((MB_S, fio.iter().filter_map(|d| get(&d.bw_mbs)).sum()));
    }
    for (m, _, _) in &ENGINE_COLUMNS {
        if let Some(v) = get(m) {
            out.push((m.name, v));
        }
    }
    for (id, m) in [
        (CLAT_MEAN_US, &dir.clat_mean_us),
        (CLAT_P99_US, &dir.clat_p99_us),
    ] {
        if let Some(v) = get(m) {
            out.push((id, v));
        }
    }
    for m in metrics::MACHINE {
        if let Some((v, _)) = system_figure(figures, m) {
            out.push((m.name, v));
        }
    }
    if let Some(v) = get(&metrics::DEV_IRQ_PER_IO) {
        out.push((metrics::DEV_IRQ_PER_IO.name, v));
    }
    out
}

/// One of the machine's figures of a run, and whether it is the hosts' mean. A run across
/// hosts has no machine of its own: each host's figure comes prefixed with the host
/// (`HOST:usr_pct`), and the summary shows their mean. The driving machine's own
/// (`local:usr_pct`) is not one of them.
fn system_figure(figures: &[(String, f64)], m: &Metric) -> Option<(f64, bool)> {
    if let Some((_, v)) = figures.iter().find(|(k, _)| k == m.name) {
        return Some((*v, false));
    }
    let suffix = format!(":{}", m.name);
    let values: Vec<f64> = figures
        .iter()
        .filter(|(k, _)| k.ends_with(&suffix) && !k.starts_with(super::stored::LOCAL))
        .map(|(_, v)| *v)
        .collect();
    (!values.is_empty()).then(|| (values.iter().sum::<f64>() / values.len() as f64, true))
}

/// The columns that combine metrics: both directions' IOPS and MB/s, and the dominant
/// direction's latencies.
const IOPS: &str = "iops";
const MB_S: &str = "mb_s";
const CLAT_MEAN_US: &str = "clat_mean_us";
const CLAT_P99_US: &str = "clat_p99_us";

/// (column id, heading, unit). `ints/s` is all of the machine's interrupts (vmstat's `in`,
/// as case 3 read it); `ints/IO` the target device's own per I/O, which tells polling (0)
/// from interrupts where the machine's other interrupts blur the first.
const COLUMNS: [(&str, &str, Option<&str>); 8] = [
    (IOPS, "IOPS", None),
    (MB_S, "MB/s", None),
    (CLAT_MEAN_US, "clat mean", Some("us")),
    (CLAT_P99_US, "clat p99", Some("us")),
    (metrics::USR_PCT.name, "usr", Some("%")),
    (metrics::SYS_PCT.name, "sys", Some("%")),
    (metrics::IRQ_PER_S.name, "ints/s", None),
    (metrics::DEV_IRQ_PER_IO.name, "ints/IO", None),
];

/// The network engines' headline figures (`workload::net`), shown when the runs have them:
/// (metric, heading, unit).
const ENGINE_COLUMNS: [(Metric, &str, Option<&str>); 6] = [
    (metrics::NET_RECEIVED_MBIT_PER_S, "received", Some("Mb/s")),
    (metrics::NET_RETRANSMITS, "retransmits", None),
    (metrics::RR_TRANS_PER_S, "trans/s", None),
    (metrics::RR_LAT_P99_US, "lat p99", Some("us")),
    (metrics::TP_MSG_PER_S, "msg/s", None),
    (metrics::TP_MB_PER_S, "MB/s", None),
];

/// `mean +-stddev` (the mean alone of one value); in JSON the values' whole summary, so a
/// script reads the numbers the text rounds, its CI as `show` draws it for the column.
fn stat_cell(id: &str, values: &[f64]) -> TableCell {
    // The p99 column is fio's, of the dominant direction: its values are fio's buckets.
    let resolution = match id {
        CLAT_P99_US => Some(crate::stats::Resolution::FIO_NS_AS_US),
        _ => metrics::resolution(id),
    };
    let summary = match resolution {
        Some(r) => crate::stats::summarize_buckets(values, &r),
        None => crate::stats::summarize(values),
    };
    let Ok(summary) = summary else {
        return TableCell::Missing;
    };
    let text = match summary.stddev {
        Some(sd) => format!("{} +-{}", number(summary.mean), number(sd)),
        None => number(summary.mean),
    };
    TableCell::Stat {
        summary: Box::new(summary),
        text,
    }
}

/// The summary table (cells that ran) and the notes under it (not applicable, failures,
/// capped cells). `runs_fio`: the workload is fio's, not a program engine's (whose runs, if
/// none succeeded, have no figures to tell it by).
pub(crate) fn table(cells: &[CellResult], runs_fio: bool) -> Table {
    let heads: Vec<Vec<Vec<(&str, f64)>>> = cells
        .iter()
        .map(|c| c.runs.iter().map(|m| headline(m)).collect())
        .collect();
    let any = |id: &str| {
        heads
            .iter()
            .flatten()
            .any(|h| h.iter().any(|(k, _)| *k == id))
    };
    // fio's columns as always, unless every run is a network engine's; an engine's columns
    // when some run has them; the machine's (usr, sys, ints/s) when some run has them (runs
    // on fio servers iolab does not control have none).
    let engine_only = (any_run(cells) || !runs_fio) && !any(IOPS);
    let engine_columns = ENGINE_COLUMNS.map(|(m, heading, unit)| (m.name, heading, unit));
    // A command's own metrics, each a column of its own.
    let own: std::collections::BTreeSet<&str> = cells
        .iter()
        .flat_map(|c| c.runs.iter().flatten())
        .map(|(name, _)| name.as_str())
        .filter(|name| metrics::workload_own(name))
        .collect();
    let own_columns: Vec<(&str, &str, Option<&str>)> = own
        .iter()
        .map(|name| (*name, *name, metrics::lookup(name).and_then(|m| m.unit)))
        .collect();
    let shown: Vec<(&str, &str, Option<&str>)> = COLUMNS[..4]
        .iter()
        .filter(|_| !engine_only)
        .chain(engine_columns.iter().filter(|(id, _, _)| any(id)))
        .chain(&own_columns)
        .chain(COLUMNS[4..].iter().filter(|(id, _, _)| any(id)))
        .copied()
        .collect();
    let mut columns = vec![Column::label("cell"), Column::number("n", None)];
    columns.extend(
        shown
            .iter()
            .map(|(_, name, unit)| Column::number(name, *unit)),
    );
    let mut t = Table::new(columns);
    for (c, heads) in cells.iter().zip(&heads) {
        if c.not_applicable.is_some() {
            continue;
        }
        let mut row = vec![
            TableCell::text(&c.key),
            // A number in JSON, as in `show`'s tables; a count in the text.
            TableCell::Number {
                value: c.runs.len() as f64,
                text: c.runs.len().to_string(),
            },
        ];
        for (id, _, _) in &shown {
            let values: Vec<f64> = if own.contains(id) {
                c.runs
                    .iter()
                    .filter_map(|r| r.iter().find(|(k, _)| k == id).map(|(_, v)| *v))
                    .collect()
            } else {
                heads
                    .iter()
                    .filter_map(|h| h.iter().find(|(k, _)| k == id).map(|(_, v)| *v))
                    .collect()
            };
            row.push(stat_cell(id, &values));
        }
        t.push(row);
    }
    t.notes
        .push("mean +-stddev over the repetitions that succeeded".to_string());
    if shown
        .iter()
        .any(|(id, _, _)| *id == metrics::DEV_IRQ_PER_IO.name)
    {
        t.notes.push(
            "ints/s: all of the machine's interrupts; ints/IO: the device's own, per I/O (0 \
             where it polls)"
                .to_string(),
        );
    }
    let across_hosts = cells.iter().flat_map(|c| &c.runs).any(|r| {
        metrics::MACHINE
            .iter()
            .any(|m| system_figure(r, m).is_some_and(|(_, mean)| mean))
    });
    if across_hosts {
        t.notes
            .push("usr, sys and ints/s of a run across hosts: the mean of the hosts'".to_string());
    }
    for c in cells {
        if let Some(why) = &c.not_applicable {
            t.notes.push(format!("not applicable: {}: {why}", c.key));
        }
        if !c.failures.is_empty() {
            t.notes.push(format!(
                "failed: {}: {} run(s), first: {}",
                c.key,
                c.failures.len(),
                c.failures[0]
            ));
        }
        if c.capped {
            t.notes.push(format!(
                "capped: {}: reached the maximum repetitions before the target precision",
                c.key
            ));
        }
    }
    t
}

fn any_run(cells: &[CellResult]) -> bool {
    cells.iter().any(|c| !c.runs.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pairs: &[(&str, f64)]) -> Vec<(String, f64)> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn a_trim_workloads_headline_is_its_trims() {
        let h = headline(&m(&[
            ("read_iops", 0.0),
            ("write_iops", 0.0),
            ("trim_iops", 54750.0),
            ("read_bw_mbs", 0.0),
            ("write_bw_mbs", 0.0),
            ("trim_bw_mbs", 3588.0),
            ("trim_clat_mean_us", 70.0),
        ]));
        assert_eq!(
            h,
            vec![(IOPS, 54750.0), (MB_S, 3588.0), (CLAT_MEAN_US, 70.0)]
        );
    }

    #[test]
    fn headline_sums_directions_and_takes_the_dominant_latency() {
        let h = headline(&m(&[
            ("read_iops", 100.0),
            ("write_iops", 300.0),
            ("read_bw_mbs", 1.0),
            ("write_bw_mbs", 2.0),
            ("read_clat_mean_us", 5.0),
            ("write_clat_mean_us", 7.0),
            ("sys_pct", 3.0),
        ]));
        assert_eq!(
            h,
            vec![
                ("iops", 400.0),
                ("mb_s", 3.0),
                ("clat_mean_us", 7.0),
                ("sys_pct", 3.0)
            ]
        );
    }

    #[test]
    fn a_run_across_hosts_shows_the_mean_of_the_hosts_system_figures() {
        let h = headline(&m(&[
            ("read_iops", 100.0),
            ("a:usr_pct", 10.0),
            ("b:10.0.0.2:usr_pct", 30.0),
            ("local:usr_pct", 90.0),
            ("a:irq_per_s", 500.0),
        ]));
        assert_eq!(
            h,
            vec![
                ("iops", 100.0),
                ("mb_s", 0.0),
                ("usr_pct", 20.0),
                ("irq_per_s", 500.0)
            ]
        );
        let cell = CellResult {
            key: "all".into(),
            runs: vec![m(&[("read_iops", 100.0), ("a:sys_pct", 4.0)])],
            ..CellResult::default()
        };
        let t = table(&[cell], true);
        assert!(
            t.notes.iter().any(|n| n.contains("mean of the hosts")),
            "{:?}",
            t.notes
        );
    }

    /// A program engine's experiment none of whose runs succeeded has no figures to tell
    /// its engine by: fio's columns (IOPS, MB/s, clat) are not shown for it, fio's are for
    /// fio's.
    #[test]
    fn a_program_engines_failed_runs_get_no_fio_columns() {
        let failed = || CellResult {
            key: "parallel=1".into(),
            failures: vec!["iperf3 reported: unable to connect to server".into()],
            ..CellResult::default()
        };
        let text = table(&[failed()], false).render_text(200);
        assert!(!text.contains("IOPS") && !text.contains("clat"), "{text}");
        assert!(text.contains("unable to connect"), "{text}");
        let text = table(&[failed()], true).render_text(200);
        assert!(text.contains("IOPS"), "{text}");
    }

    /// A command's runs have no I/O figures: no IOPS or MB/s of 0, its own metrics instead.
    #[test]
    fn a_commands_own_metrics_are_its_columns() {
        let cell = CellResult {
            key: "bs=4k".into(),
            runs: vec![
                m(&[("rate_mb_per_s", 400.0), ("copy_s", 0.5), ("usr_pct", 2.0)]),
                m(&[("rate_mb_per_s", 410.0), ("copy_s", 0.4), ("usr_pct", 4.0)]),
            ],
            ..CellResult::default()
        };
        let text = table(&[cell], true).render_text(200);
        let head = text.lines().next().unwrap();
        assert!(
            !head.contains("IOPS") && !head.contains("MB/s  clat"),
            "{text}"
        );
        assert!(
            head.contains("copy_s") && head.contains("rate_mb_per_s [MB/s]"),
            "{text}"
        );
        assert!(text.contains("0.4500 +-0.07071"), "{text}");
        assert!(text.contains("405.0 +-7.071"), "{text}");
    }

    #[test]
    fn table_shows_mean_and_stddev_and_lists_cells_that_did_not_run() {
        let cells = vec![
            CellResult {
                index: 0,
                key: "rq_affinity=1".into(),
                runs: vec![
                    m(&[("read_iops", 1000.0), ("usr_pct", 1.0)]),
                    m(&[("read_iops", 1200.0), ("usr_pct", 3.0)]),
                ],
                ..Default::default()
            },
            CellResult {
                index: 1,
                key: "placement=far".into(),
                not_applicable: Some("no other node".into()),
                ..Default::default()
            },
        ];
        let text = table(&cells, true).render_text(200);
        assert!(text.contains("rq_affinity=1"), "{text}");
        assert!(text.contains("rq_affinity=1  2  1,100 +-141.4"), "{text}");
        assert!(text.contains("2.000 +-1.414"), "{text}");
        // In JSON, the numbers themselves.
        let json = serde_json::to_value(table(&cells, true)).unwrap();
        let row = &json["rows"][0];
        assert_eq!(row["cell"], "rq_affinity=1");
        assert_eq!(row["n"], 2.0);
        assert_eq!(row["IOPS"]["mean"], 1100.0);
        assert!((row["IOPS"]["stddev"].as_f64().unwrap() - 141.421356).abs() < 1e-6);
        assert_eq!(row["IOPS"]["n"], 2);
        assert!(!text.contains("placement=far  "), "{text}");
        assert!(
            text.contains("not applicable: placement=far: no other node"),
            "{text}"
        );
        // usr was sampled, sys and ints/s were not: their columns are left out.
        assert!(
            text.contains("usr [%]") && !text.contains("sys [%]"),
            "{text}"
        );
        assert!(!text.contains("ints/s"), "{text}");
    }

    /// Polling against interrupts (case 3): the machine's interrupts hardly fall where the
    /// device's own stop, so the device's per I/O stands beside them, and says which is which.
    #[test]
    fn the_devices_own_interrupts_per_io_stand_beside_the_machines() {
        let cell = |key: &str, dev: f64| CellResult {
            key: key.into(),
            runs: vec![m(&[
                ("read_iops", 1000.0),
                ("irq_per_s", 2500.0),
                ("dev_irq_per_io", dev),
            ])],
            ..Default::default()
        };
        let text =
            table(&[cell("hipri=false", 0.5), cell("hipri=true", 0.0)], true).render_text(200);
        assert!(
            text.contains("ints/s") && text.contains("ints/IO"),
            "{text}"
        );
        assert!(text.contains("0.5000"), "{text}");
        assert!(
            text.contains("ints/IO: the device's own, per I/O (0 where it polls)"),
            "{text}"
        );
    }
}

#[cfg(test)]
mod engine_tests {
    use super::*;

    #[test]
    fn network_runs_show_their_own_figures_instead_of_io() {
        let cell = CellResult {
            key: "base".into(),
            runs: vec![vec![
                ("rr_trans_per_s".to_string(), 29000.0),
                ("rr_lat_p99_us".to_string(), 16.0),
                ("usr_pct".to_string(), 3.0),
            ]],
            ..Default::default()
        };
        let text = table(&[cell], true).render_text(200);
        assert!(
            text.contains("trans/s") && text.contains("29,000"),
            "{text}"
        );
        assert!(
            !text.contains("IOPS") && !text.contains("received"),
            "{text}"
        );
    }
}

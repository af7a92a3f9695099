//! The metric registry: every metric iolab stores, with its unit, its better direction, where
//! it comes from and what it means, in one table. `show`/`compare`/plots take units and
//! directions from here, experiment files are checked against it, `iolab metrics` prints it
//! and docs/metrics.md is rendered from it, so adding a metric is one entry here (plus the
//! code that measures it) and the reference cannot drift from what the code knows.
//!
//! A name is looked up exactly first (`PREFIX:name` as its `name`: a device's, a host's,
//! this machine's while it drove hosts), then against the naming rules: suffix patterns that
//! give a user-named metric (a `command` engine's) a unit and a direction. Every exact entry follows those rules too (a test holds them to it), except
//! `idle_pct`, the one share where more is better.

pub mod render;

use std::sync::OnceLock;

use serde::Serialize;

use crate::stats::direction::Direction;

/// Where a metric's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// fio's JSON report, summed over jobs (`workload::fio_json`).
    Fio,
    /// The sampler's /proc and /sys counters over the measured interval (`sample`).
    Sampler,
    /// The run's block trace, analysed (`experiment::run::trace`).
    Trace,
    /// A network engine's own output, iperf3's or sockperf's (`workload::net`).
    Engine,
    /// A `command` engine's output, under names the experiment file chooses.
    Command,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Fio => "fio",
            Source::Sampler => "sampler",
            Source::Trace => "trace",
            Source::Engine => "engine",
            Source::Command => "command",
        }
    }
}

/// How an entry matches names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Name {
    /// One stored name.
    Exact(String),
    /// Any name ending so (a naming rule for names not listed).
    Suffix(&'static str),
    /// Any name containing this (`await`).
    Contains(&'static str),
}

impl Name {
    fn matches(&self, name: &str) -> bool {
        match self {
            Name::Exact(n) => n == name,
            Name::Suffix(s) => name.ends_with(s),
            Name::Contains(s) => name.contains(s),
        }
    }

    /// As the reference shows it: `read_iops`, `*_us`, `*await*`.
    pub fn shown(&self) -> String {
        match self {
            Name::Exact(n) => n.clone(),
            Name::Suffix(s) => format!("*{s}"),
            Name::Contains(s) => format!("*{s}*"),
        }
    }
}

/// One metric, or one naming rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metric {
    pub name: Name,
    /// Shown in headers (`read_iops [IO/s]`); `None` for counts and ratios.
    pub unit: Option<&'static str>,
    /// `None`: neither work nor a cost; a comparison must be told (`--better`).
    pub direction: Option<Direction>,
    pub source: Source,
    pub description: String,
}

impl Metric {
    pub fn exact_name(&self) -> Option<&str> {
        match &self.name {
            Name::Exact(n) => Some(n),
            _ => None,
        }
    }
}

use Direction::{HigherIsBetter as Higher, LowerIsBetter as Lower, NoDirection};

const US: Option<&str> = Some("us");

/// fio's figures per direction: (suffix, unit, direction, description with `{dir}`).
const FIO_PER_DIRECTION: &[(&str, Option<&str>, Direction, &str)] = &[
    (
        "iops",
        Some("IO/s"),
        Higher,
        "{dir} I/Os completed per second, summed over jobs",
    ),
    (
        "bw_mbs",
        Some("MB/s"),
        Higher,
        "{dir} bandwidth, 10^6 bytes/s, summed over jobs",
    ),
    (
        "clat_mean_us",
        US,
        Lower,
        "mean {dir} completion latency (fio's clat), weighted by each job's completions",
    ),
    (
        "clat_p50_us",
        US,
        Lower,
        "median {dir} completion latency, merged from the jobs' json+ bins when there are several",
    ),
    (
        "clat_p99_us",
        US,
        Lower,
        "99th percentile of {dir} completion latency, merged like p50",
    ),
    (
        "clat_p999_us",
        US,
        Lower,
        "99.9th percentile of {dir} completion latency, merged like p50",
    ),
    (
        "clat_min_us",
        US,
        Lower,
        "shortest {dir} completion latency of any job",
    ),
    (
        "clat_max_us",
        US,
        Lower,
        "longest {dir} completion latency of any job",
    ),
    (
        "clat_stddev_us",
        US,
        Lower,
        "standard deviation of {dir} completion latency, pooled over jobs",
    ),
];

type Row = (
    &'static str,
    Option<&'static str>,
    Option<Direction>,
    &'static str,
);

const FIO_CPU: &[Row] = &[
    (
        "fio_usr_pct",
        Some("%"),
        Some(Lower),
        "CPU share of fio's own threads in user mode, summed over jobs",
    ),
    (
        "fio_sys_pct",
        Some("%"),
        Some(Lower),
        "CPU share of fio's own threads in the kernel, summed over jobs",
    ),
];

const SAMPLER: &[Row] = &[
    ("usr_pct", Some("%"), Some(Lower), "system-wide CPU share in user mode (nice included)"),
    ("sys_pct", Some("%"), Some(Lower), "system-wide CPU share in the kernel"),
    ("irq_pct", Some("%"), Some(Lower), "system-wide CPU share in hard interrupt handlers"),
    ("softirq_pct", Some("%"), Some(Lower), "system-wide CPU share in softirqs"),
    ("iowait_pct", Some("%"), Some(Lower), "system-wide CPU share idle with I/O outstanding"),
    ("idle_pct", Some("%"), Some(Higher), "system-wide CPU share idle: headroom, so more is better"),
    ("irq_per_s", Some("1/s"), Some(Lower), "all interrupts per second, machine-wide (overhead, not work)"),
    ("dev_irq_per_s", Some("1/s"), Some(Lower), "the target device's interrupts per second (its IRQs in /proc/interrupts)"),
    ("nic_irq_per_s", Some("1/s"), Some(Lower), "the target NIC's interrupts per second (`[target] nic`; its IRQs in /proc/interrupts)"),
    ("dev_r_per_s", Some("1/s"), Some(Higher), "reads the device completed per second (diskstats)"),
    ("dev_w_per_s", Some("1/s"), Some(Higher), "writes the device completed per second"),
    ("dev_rrqm_per_s", Some("1/s"), Some(NoDirection), "read requests merged into others per second: more merges are not better in themselves"),
    ("dev_wrqm_per_s", Some("1/s"), Some(NoDirection), "write requests merged into others per second"),
    ("dev_irq_per_io", None, Some(Lower), "device interrupts per completed I/O: about 1 with one interrupt per completion, less with coalescing, 0 when polled; absent without device IRQs (loop)"),
    ("dev_rmb_per_s", Some("MB/s"), Some(Higher), "MB read from the device per second"),
    ("dev_wmb_per_s", Some("MB/s"), Some(Higher), "MB written to the device per second"),
    ("dev_avg_rq_kb", Some("KiB"), None, "mean request size at the device"),
    ("dev_avg_qu_sz", Some("requests"), None, "mean number of requests in the device's queue"),
    ("dev_r_await_ms", Some("ms"), Some(Lower), "mean time a read spent queued and served"),
    ("dev_w_await_ms", Some("ms"), Some(Lower), "mean time a write spent queued and served"),
    ("dev_util_pct", Some("%"), Some(Lower), "share of the interval the device was busy (not summed over several devices)"),
];

const ENGINES: &[Row] = &[
    (
        "net_sent_mbit_per_s",
        Some("Mb/s"),
        Some(Higher),
        "iperf3: 10^6 bits/s sent over the whole run",
    ),
    (
        "net_received_mbit_per_s",
        Some("Mb/s"),
        Some(Higher),
        "iperf3: 10^6 bits/s received over the whole run",
    ),
    (
        "net_retransmits",
        None,
        Some(Lower),
        "iperf3: TCP retransmits, the sender's",
    ),
    (
        "net_interval_min_mbit_per_s",
        Some("Mb/s"),
        Some(Higher),
        "iperf3: the slowest one-second interval",
    ),
    (
        "net_interval_max_mbit_per_s",
        Some("Mb/s"),
        Some(Higher),
        "iperf3: the fastest one-second interval",
    ),
    (
        "net_client_cpu_pct",
        Some("%"),
        Some(Lower),
        "iperf3: the client's CPU use",
    ),
    (
        "net_server_cpu_pct",
        Some("%"),
        Some(Lower),
        "iperf3: the server's CPU use",
    ),
    (
        "rr_trans_per_s",
        Some("1/s"),
        Some(Higher),
        "sockperf ping-pong: replies received per second of the valid duration",
    ),
    (
        "rr_lat_mean_us",
        US,
        Some(Lower),
        "sockperf ping-pong: mean latency (half the round trip)",
    ),
    (
        "rr_lat_p50_us",
        US,
        Some(Lower),
        "sockperf ping-pong: median latency",
    ),
    (
        "rr_lat_p99_us",
        US,
        Some(Lower),
        "sockperf ping-pong: 99th percentile latency",
    ),
    (
        "rr_lat_p999_us",
        US,
        Some(Lower),
        "sockperf ping-pong: 99.9th percentile latency",
    ),
    (
        "rr_lat_max_us",
        US,
        Some(Lower),
        "sockperf ping-pong: longest latency",
    ),
    (
        "tp_msg_per_s",
        Some("1/s"),
        Some(Higher),
        "sockperf throughput: messages per second",
    ),
    (
        "tp_mb_per_s",
        Some("MB/s"),
        Some(Higher),
        "sockperf throughput: MB per second",
    ),
];

const TRACE: &[Row] = &[
    ("trace_events", None, None, "events in the block trace"),
    ("trace_events_lost", None, None, "tracefs overrun + dropped + lost in trace_pipe; non-zero means the counts are short"),
    ("trace_q2c_count", None, None, "bios queued and completed on the target"),
    ("trace_q2c_mean_us", US, Some(Lower), "mean time from queue to completion (btt Q2C, per bio)"),
    ("trace_q2c_p50_us", US, Some(Lower), "median Q2C"),
    ("trace_q2c_p99_us", US, Some(Lower), "99th percentile Q2C"),
    ("trace_q2c_max_us", US, Some(Lower), "longest Q2C"),
    ("trace_d2c_mean_us", US, Some(Lower), "mean time from dispatch to completion (btt D2C): the device's share"),
    ("trace_d2c_p99_us", US, Some(Lower), "99th percentile D2C"),
    ("trace_i2d_pct", Some("%"), Some(Lower), "share of the summed Q2C between insert and dispatch, i.e. in the I/O scheduler (btt's I2D overhead)"),
    ("trace_merge_ratio", None, None, "bios per dispatched request (btt's Q/D)"),
    ("trace_request_kb_mean", None, None, "mean dispatched request size, KiB"),
    ("trace_dispatch_depth_mean", None, None, "requests in the driver at each dispatch, the one dispatched included"),
    ("trace_sleeps", None, None, "request allocations that slept (S events)"),
];

/// The naming rules, in the order they are tried (the first that matches decides).
const RULES: &[(Name, Option<&str>, Option<Direction>, &str)] = &[
    (
        Name::Suffix("rqm_per_s"),
        Some("1/s"),
        Some(NoDirection),
        "merges per second",
    ),
    (
        Name::Suffix("_us"),
        US,
        Some(Lower),
        "a latency in microseconds",
    ),
    (
        Name::Suffix("_ms"),
        Some("ms"),
        Some(Lower),
        "a latency in milliseconds",
    ),
    (
        Name::Suffix("_pct"),
        Some("%"),
        Some(Lower),
        "a share (a CPU cost)",
    ),
    (Name::Contains("await"), None, Some(Lower), "a wait"),
    (
        Name::Suffix("irq_per_s"),
        Some("1/s"),
        Some(Lower),
        "interrupts per second (overhead)",
    ),
    (Name::Suffix("_per_io"), None, Some(Lower), "a cost per I/O"),
    (
        Name::Suffix("retransmits"),
        None,
        Some(Lower),
        "retransmissions",
    ),
    (
        Name::Suffix("_iops"),
        Some("IO/s"),
        Some(Higher),
        "I/Os per second",
    ),
    (
        Name::Suffix("_mbit_per_s"),
        Some("Mb/s"),
        Some(Higher),
        "10^6 bits per second",
    ),
    (
        Name::Suffix("_bw_mbs"),
        Some("MB/s"),
        Some(Higher),
        "10^6 bytes per second",
    ),
    (
        Name::Suffix("mb_per_s"),
        Some("MB/s"),
        Some(Higher),
        "10^6 bytes per second",
    ),
    (
        Name::Suffix("_per_s"),
        Some("1/s"),
        Some(Higher),
        "work per second",
    ),
    (Name::Suffix("_mbs"), None, Some(Higher), "bandwidth"),
    (Name::Suffix("_kb"), Some("KiB"), None, "a size in KiB"),
    (
        Name::Suffix("_qu_sz"),
        Some("requests"),
        None,
        "a queue size",
    ),
];

/// The whole table: fio's, the sampler's, the network engines', a trace's, then the naming
/// rules for user-named metrics.
pub fn registry() -> &'static [Metric] {
    static TABLE: OnceLock<Vec<Metric>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = Vec::new();
        for dir in ["read", "write", "trim"] {
            for (suffix, unit, direction, text) in FIO_PER_DIRECTION {
                t.push(Metric {
                    name: Name::Exact(format!("{dir}_{suffix}")),
                    unit: *unit,
                    direction: Some(*direction),
                    source: Source::Fio,
                    description: text.replace("{dir}", dir),
                });
            }
        }
        for (rows, source) in [
            (FIO_CPU, Source::Fio),
            (SAMPLER, Source::Sampler),
            (ENGINES, Source::Engine),
            (TRACE, Source::Trace),
        ] {
            t.extend(rows.iter().map(|(name, unit, direction, text)| Metric {
                name: Name::Exact(name.to_string()),
                unit: *unit,
                direction: *direction,
                source,
                description: text.to_string(),
            }));
        }
        t.extend(RULES.iter().map(|(name, unit, direction, text)| Metric {
            name: name.clone(),
            unit: *unit,
            direction: *direction,
            source: Source::Command,
            description: format!("a name not listed: {text}"),
        }));
        t
    })
}

/// The entry listing `name` itself, if any; a prefixed name as the metric after its last
/// `:` (`DEVICE:dev_r_per_s`, a controlled host's `lab1:usr_pct`, this machine's
/// `local:idle_pct` while it drove hosts).
pub fn exact(name: &str) -> Option<&'static Metric> {
    let listed = |n: &str| {
        registry()
            .iter()
            .find(|m| matches!(&m.name, Name::Exact(e) if e == n))
    };
    listed(name).or_else(|| match name.rsplit_once(':') {
        Some((prefix, m)) if !prefix.is_empty() => listed(m),
        _ => None,
    })
}

/// The entry for `name`: its own, else the first naming rule it follows.
pub fn lookup(name: &str) -> Option<&'static Metric> {
    exact(name).or_else(|| rule(name))
}

fn rule(name: &str) -> Option<&'static Metric> {
    registry()
        .iter()
        .filter(|m| m.exact_name().is_none())
        .find(|m| m.name.matches(name))
}

/// The listed names from one source, in table order.
pub fn names(source: Source) -> impl Iterator<Item = &'static str> {
    registry()
        .iter()
        .filter(move |m| m.source == source)
        .filter_map(Metric::exact_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The naming rules describe the listed metrics too, so a user reading a name can tell
    /// its unit and direction; `idle_pct` is the one exception the docs state.
    #[test]
    fn listed_metrics_follow_the_naming_rules() {
        for m in registry() {
            let Some(name) = m.exact_name() else { continue };
            let by_rule = rule(name);
            let (unit, direction) = by_rule.map_or((None, None), |r| (r.unit, r.direction));
            assert_eq!(m.unit, unit, "{name}");
            if name == "idle_pct" {
                assert_eq!(direction, Some(Direction::LowerIsBetter));
                assert_eq!(m.direction, Some(Direction::HigherIsBetter));
            } else {
                assert_eq!(m.direction, direction, "{name}");
            }
        }
    }

    #[test]
    fn names_are_listed_once_and_device_names_resolve() {
        let listed: Vec<&str> = registry().iter().filter_map(Metric::exact_name).collect();
        let mut unique = listed.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), listed.len());
        assert_eq!(
            exact("sdb:dev_r_per_s").unwrap().exact_name(),
            Some("dev_r_per_s")
        );
        // A controlled host's figures and this machine's while it drove them.
        assert_eq!(exact("lab1:usr_pct").unwrap().exact_name(), Some("usr_pct"));
        assert_eq!(
            exact("local:idle_pct").unwrap().direction,
            Some(Direction::HigherIsBetter)
        );
        assert!(exact("lab1:nosuch_pct").is_none());
        assert!(exact(":dev_r_per_s").is_none());
        assert_eq!(lookup("copy_s"), None);
        assert_eq!(lookup("ops_per_s").unwrap().source, Source::Command);
        assert_eq!(names(Source::Trace).count(), TRACE.len());
    }

    /// The default metrics of `show` and `compare` are all listed.
    #[test]
    fn headline_metrics_are_listed() {
        for m in crate::analysis::metrics::HEADLINE {
            assert!(exact(m).is_some(), "{m}");
        }
    }
}

//! The metric registry: every metric iolab stores, with its unit, its better direction, where
//! it comes from and what it means, in one table. `show`/`compare`/plots take units and
//! directions from here, experiment files are checked against it, `iolab metrics` prints it
//! and docs/metrics.md is rendered from it, so adding a metric is one entry here (plus the
//! code that measures it) and the reference cannot drift from what the code knows.
//!
//! Each listed metric is also a constant (`READ_IOPS`, `DEV_R_PER_S`, ...) and the code that
//! records, combines or picks metrics names them through these (`metrics::READ_IOPS.name`),
//! so a metric is renamed here or nowhere, and a recorder cannot store a name this table does
//! not list (a test runs every recorder on its fixtures and looks each name up). The macros
//! below declare each group's constants and its list at once, so a constant cannot be left
//! out of the table.
//!
//! A name is looked up exactly first (`PREFIX:name` as its `name`: a device's, a host's,
//! this machine's while it drove hosts), then against the naming rules: suffix patterns that
//! give a user-named metric (a `command` engine's) a unit and a direction. Every exact entry
//! follows those rules too (a test holds them to it), except `idle_pct`, the one share where
//! more is better.

pub(crate) mod render;

use std::sync::OnceLock;

use crate::stats::direction::Direction;
use crate::stats::Resolution;

/// Where a metric's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
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
    pub(crate) fn name(self) -> &'static str {
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Match {
    /// The stored name itself.
    Exact,
    /// Any name ending so (a naming rule for names not listed).
    Suffix,
    /// Any name containing this (`await`).
    Contains,
}

/// How several target devices' `dev_*` figures become the run's own `dev_*`
/// (`experiment::run::stored::aggregate`); each device's own are stored as `DEVICE:dev_*`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Across {
    /// Added up (rates, merges, MB/s, the queue size, interrupts): a sum means something.
    Sum,
    /// Averaged over the devices, each weighted by the sum of these figures of its own (its
    /// I/Os), so a device that did little does not pull the mean.
    WeightedMean(&'static [&'static str]),
    /// Recomputed from the summed figures: the first over the sum of the others.
    Ratio(&'static str, &'static [&'static str]),
    /// Not combined: busy time does not add up across devices.
    Apart,
}

/// One metric, or one naming rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metric {
    /// The stored name; for a naming rule, the suffix or the part it looks for.
    pub(crate) name: &'static str,
    pub(crate) matching: Match,
    /// Shown in headers (`read_iops [IO/s]`); `None` for counts and ratios.
    pub(crate) unit: Option<&'static str>,
    /// `None`: neither work nor a cost; a comparison must be told (`--better`).
    pub direction: Option<Direction>,
    pub(crate) source: Source,
    pub(crate) description: &'static str,
    /// A device's figure (`dev_*`): how several target devices' combine. `None` elsewhere.
    pub(crate) across_devices: Option<Across>,
}

impl Metric {
    fn matches(&self, name: &str) -> bool {
        match self.matching {
            Match::Exact => self.name == name,
            Match::Suffix => name.ends_with(self.name),
            Match::Contains => name.contains(self.name),
        }
    }

    /// The stored name, for a listed metric (not a naming rule).
    pub(crate) fn exact_name(&self) -> Option<&'static str> {
        (self.matching == Match::Exact).then_some(self.name)
    }

    /// As the reference shows it: `read_iops`, `*_us`, `*await*`.
    pub(crate) fn shown(&self) -> String {
        match self.matching {
            Match::Exact => self.name.to_string(),
            Match::Suffix => format!("*{}", self.name),
            Match::Contains => format!("*{}*", self.name),
        }
    }
}

use Direction::{HigherIsBetter as Higher, LowerIsBetter as Lower, NoDirection};

/// Declares one constant per listed metric of a group and the group's list, in that order.
/// A row: `CONST: name, unit, direction, description[, how devices combine];`.
macro_rules! listed {
    ($(#[$doc:meta])* $group:ident, $source:ident;
     $($id:ident: $name:expr, $unit:expr, $dir:expr, $text:expr $(, $across:expr)?;)*) => {
        $(
            pub const $id: Metric = Metric {
                name: $name,
                matching: Match::Exact,
                unit: $unit,
                direction: $dir,
                source: Source::$source,
                description: $text,
                across_devices: listed!(@across $($across)?),
            };
        )*
        $(#[$doc])*
        pub const $group: &[Metric] = &[$($id),*];
    };
    (@across) => { None };
    (@across $across:expr) => { Some($across) };
}

/// fio's figures for one direction, summed over jobs (`workload::fio_json`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FioDirection {
    pub(crate) iops: Metric,
    pub(crate) bw_mbs: Metric,
    pub(crate) clat_mean_us: Metric,
    pub(crate) clat_p50_us: Metric,
    pub(crate) clat_p99_us: Metric,
    pub(crate) clat_p999_us: Metric,
    pub(crate) clat_min_us: Metric,
    pub(crate) clat_max_us: Metric,
    pub(crate) clat_stddev_us: Metric,
}

/// One direction's constants, its list and its `FioDirection`, names and descriptions made
/// from the direction's name.
macro_rules! fio_direction {
    ($all:ident, $group:ident, $dir:literal:
     $iops:ident, $bw:ident, $mean:ident, $p50:ident, $p99:ident, $p999:ident,
     $min:ident, $max:ident, $sd:ident) => {
        listed! {
            $group, Fio;
            $iops: concat!($dir, "_iops"), Some("IO/s"), Some(Higher),
                concat!($dir, " I/Os completed per second, summed over jobs");
            $bw: concat!($dir, "_bw_mbs"), Some("MB/s"), Some(Higher),
                concat!($dir, " bandwidth, 10^6 bytes/s, summed over jobs");
            $mean: concat!($dir, "_clat_mean_us"), US, Some(Lower),
                concat!("mean ", $dir, " completion latency (fio's clat), weighted by each ",
                    "job's completions");
            $p50: concat!($dir, "_clat_p50_us"), US, Some(Lower),
                concat!("median ", $dir, " completion latency, merged from the jobs' json+ ",
                    "bins when there are several");
            $p99: concat!($dir, "_clat_p99_us"), US, Some(Lower),
                concat!("99th percentile of ", $dir, " completion latency, merged like p50");
            $p999: concat!($dir, "_clat_p999_us"), US, Some(Lower),
                concat!("99.9th percentile of ", $dir, " completion latency, merged like p50");
            $min: concat!($dir, "_clat_min_us"), US, Some(Lower),
                concat!("shortest ", $dir, " completion latency of any job");
            $max: concat!($dir, "_clat_max_us"), US, Some(Lower),
                concat!("longest ", $dir, " completion latency of any job");
            $sd: concat!($dir, "_clat_stddev_us"), US, Some(Lower),
                concat!("standard deviation of ", $dir, " completion latency, pooled over jobs");
        }
        pub const $all: FioDirection = FioDirection {
            iops: $iops,
            bw_mbs: $bw,
            clat_mean_us: $mean,
            clat_p50_us: $p50,
            clat_p99_us: $p99,
            clat_p999_us: $p999,
            clat_min_us: $min,
            clat_max_us: $max,
            clat_stddev_us: $sd,
        };
    };
}

const US: Option<&str> = Some("us");
const PCT: Option<&str> = Some("%");
const PER_S: Option<&str> = Some("1/s");
const MB_S: Option<&str> = Some("MB/s");
const MBIT_S: Option<&str> = Some("Mb/s");

fio_direction!(FIO_READ, FIO_READ_LIST, "read":
    READ_IOPS, READ_BW_MBS, READ_CLAT_MEAN_US, READ_CLAT_P50_US, READ_CLAT_P99_US,
    READ_CLAT_P999_US, READ_CLAT_MIN_US, READ_CLAT_MAX_US, READ_CLAT_STDDEV_US);
fio_direction!(FIO_WRITE, FIO_WRITE_LIST, "write":
    WRITE_IOPS, WRITE_BW_MBS, WRITE_CLAT_MEAN_US, WRITE_CLAT_P50_US, WRITE_CLAT_P99_US,
    WRITE_CLAT_P999_US, WRITE_CLAT_MIN_US, WRITE_CLAT_MAX_US, WRITE_CLAT_STDDEV_US);
fio_direction!(FIO_TRIM, FIO_TRIM_LIST, "trim":
    TRIM_IOPS, TRIM_BW_MBS, TRIM_CLAT_MEAN_US, TRIM_CLAT_P50_US, TRIM_CLAT_P99_US,
    TRIM_CLAT_P999_US, TRIM_CLAT_MIN_US, TRIM_CLAT_MAX_US, TRIM_CLAT_STDDEV_US);

listed! {
    FIO_CPU, Fio;
    FIO_USR_PCT: "fio_usr_pct", PCT, Some(Lower),
        "CPU share of fio's own threads in user mode, summed over jobs (a group_reporting group's members each count)";
    FIO_SYS_PCT: "fio_sys_pct", PCT, Some(Lower),
        "CPU share of fio's own threads in the kernel, summed over jobs (a group_reporting group's members each count)";
}

/// The I/Os a device completed, its weight in the means over several devices.
const DEV_IOS: &[&str] = &[DEV_R_PER_S.name, DEV_W_PER_S.name];

listed! {
    SAMPLER, Sampler;
    USR_PCT: "usr_pct", PCT, Some(Lower), "system-wide CPU share in user mode (nice included)";
    SYS_PCT: "sys_pct", PCT, Some(Lower), "system-wide CPU share in the kernel";
    IRQ_PCT: "irq_pct", PCT, Some(Lower), "system-wide CPU share in hard interrupt handlers";
    SOFTIRQ_PCT: "softirq_pct", PCT, Some(Lower), "system-wide CPU share in softirqs";
    IOWAIT_PCT: "iowait_pct", PCT, Some(Lower), "system-wide CPU share idle with I/O outstanding";
    IDLE_PCT: "idle_pct", PCT, Some(Higher),
        "system-wide CPU share idle: headroom, so more is better";
    STEAL_PCT: "steal_pct", PCT, Some(Lower),
        "system-wide CPU share stolen: a guest's CPUs ready to run while the host ran something \
         else (0 on bare metal)";
    IRQ_PER_S: "irq_per_s", PER_S, Some(Lower),
        "all interrupts per second, machine-wide (overhead, not work)";
    DEV_IRQ_PER_S: "dev_irq_per_s", PER_S, Some(Lower),
        "the target device's interrupts per second (its IRQs in /proc/interrupts)", Across::Sum;
    NIC_IRQ_PER_S: "nic_irq_per_s", PER_S, Some(Lower),
        "the target NIC's interrupts per second (`[target] nic`; its IRQs in /proc/interrupts)";
    NIC_RX_MB_PER_S: "nic_rx_mb_per_s", MB_S, Some(Higher),
        "MB the target NIC received per second, headers and all traffic included (its \
         statistics in /sys/class/net)";
    NIC_TX_MB_PER_S: "nic_tx_mb_per_s", MB_S, Some(Higher),
        "MB the target NIC sent per second, headers and all traffic included";
    NIC_RX_PKTS_PER_S: "nic_rx_pkts_per_s", PER_S, Some(Higher),
        "packets the target NIC received per second";
    NIC_TX_PKTS_PER_S: "nic_tx_pkts_per_s", PER_S, Some(Higher),
        "packets the target NIC sent per second";
    DEV_R_PER_S: "dev_r_per_s", PER_S, Some(Higher),
        "reads the device completed per second (diskstats)", Across::Sum;
    DEV_W_PER_S: "dev_w_per_s", PER_S, Some(Higher),
        "writes the device completed per second", Across::Sum;
    DEV_RRQM_PER_S: "dev_rrqm_per_s", PER_S, Some(NoDirection),
        "read requests merged into others per second: more merges are not better in themselves",
        Across::Sum;
    DEV_WRQM_PER_S: "dev_wrqm_per_s", PER_S, Some(NoDirection),
        "write requests merged into others per second", Across::Sum;
    DEV_IRQ_PER_IO: "dev_irq_per_io", None, Some(Lower),
        "device interrupts per completed I/O: about 1 with one interrupt per completion, less \
         with coalescing, 0 when polled; absent without device IRQs (loop)",
        Across::Ratio(DEV_IRQ_PER_S.name, DEV_IOS);
    DEV_RMB_PER_S: "dev_rmb_per_s", MB_S, Some(Higher), "MB read from the device per second",
        Across::Sum;
    DEV_WMB_PER_S: "dev_wmb_per_s", MB_S, Some(Higher), "MB written to the device per second",
        Across::Sum;
    DEV_AVG_RQ_KB: "dev_avg_rq_kb", Some("KiB"), None, "mean request size at the device",
        Across::WeightedMean(DEV_IOS);
    DEV_AVG_QU_SZ: "dev_avg_qu_sz", Some("requests"), None,
        "mean number of requests in the device's queue", Across::Sum;
    DEV_R_AWAIT_MS: "dev_r_await_ms", Some("ms"), Some(Lower),
        "mean time a read spent queued and served", Across::WeightedMean(&[DEV_R_PER_S.name]);
    DEV_W_AWAIT_MS: "dev_w_await_ms", Some("ms"), Some(Lower),
        "mean time a write spent queued and served", Across::WeightedMean(&[DEV_W_PER_S.name]);
    DEV_UTIL_PCT: "dev_util_pct", PCT, Some(Lower),
        "share of the interval the device was busy (not summed over several devices)",
        Across::Apart;
}

listed! {
    ENGINES, Engine;
    NET_SENT_MBIT_PER_S: "net_sent_mbit_per_s", MBIT_S, Some(Higher),
        "iperf3: 10^6 bits/s sent over the whole run";
    NET_RECEIVED_MBIT_PER_S: "net_received_mbit_per_s", MBIT_S, Some(Higher),
        "iperf3: 10^6 bits/s received over the whole run";
    NET_RETRANSMITS: "net_retransmits", None, Some(Lower), "iperf3: TCP retransmits, the sender's";
    NET_INTERVAL_MIN_MBIT_PER_S: "net_interval_min_mbit_per_s", MBIT_S, Some(Higher),
        "iperf3: the slowest one-second interval";
    NET_INTERVAL_MAX_MBIT_PER_S: "net_interval_max_mbit_per_s", MBIT_S, Some(Higher),
        "iperf3: the fastest one-second interval";
    NET_CLIENT_CPU_PCT: "net_client_cpu_pct", PCT, Some(Lower), "iperf3: the client's CPU use";
    NET_SERVER_CPU_PCT: "net_server_cpu_pct", PCT, Some(Lower), "iperf3: the server's CPU use";
    RR_TRANS_PER_S: "rr_trans_per_s", PER_S, Some(Higher),
        "sockperf ping-pong: replies received per second of the valid duration";
    RR_LAT_MEAN_US: "rr_lat_mean_us", US, Some(Lower),
        "sockperf ping-pong: mean latency (half the round trip)";
    RR_LAT_P50_US: "rr_lat_p50_us", US, Some(Lower), "sockperf ping-pong: median latency";
    RR_LAT_P99_US: "rr_lat_p99_us", US, Some(Lower), "sockperf ping-pong: 99th percentile latency";
    RR_LAT_P999_US: "rr_lat_p999_us", US, Some(Lower),
        "sockperf ping-pong: 99.9th percentile latency";
    RR_LAT_MAX_US: "rr_lat_max_us", US, Some(Lower), "sockperf ping-pong: longest latency";
    TP_MSG_PER_S: "tp_msg_per_s", PER_S, Some(Higher), "sockperf throughput: messages per second";
    TP_MB_PER_S: "tp_mb_per_s", MB_S, Some(Higher), "sockperf throughput: MB per second";
}

listed! {
    TRACE, Trace;
    TRACE_EVENTS: "trace_events", None, None, "events in the block trace";
    TRACE_EVENTS_LOST: "trace_events_lost", None, None,
        "events the kernel overwrote or dropped while recording; non-zero means the counts are short";
    TRACE_Q2C_COUNT: "trace_q2c_count", None, None,
        "bios queued and completed on the target, as issued (a bio the block layer split counts once)";
    TRACE_COMPLETED_MB: "trace_completed_mb", Some("MB"), None,
        "MB (10^6 bytes) of the bios completed on the target in the trace, each as queued; reads and writes (a discard moves no data)";
    TRACE_Q2C_MEAN_US: "trace_q2c_mean_us", US, Some(Lower),
        "mean time from queue to completion per bio as issued: btt's Q2C, except that a bio the block layer split counts once, from its Q to its last part's C (btt counts each part; `trace analyze` shows both, by direction)";
    TRACE_Q2C_P50_US: "trace_q2c_p50_us", US, Some(Lower), "median Q2C per bio as issued";
    TRACE_Q2C_P99_US: "trace_q2c_p99_us", US, Some(Lower),
        "99th percentile Q2C per bio as issued";
    TRACE_Q2C_MAX_US: "trace_q2c_max_us", US, Some(Lower), "longest Q2C per bio as issued";
    TRACE_D2C_MEAN_US: "trace_d2c_mean_us", US, Some(Lower),
        "mean time from dispatch to completion (btt D2C): the device's share, per request (each part of a split bio is one)";
    TRACE_D2C_P99_US: "trace_d2c_p99_us", US, Some(Lower), "99th percentile D2C";
    TRACE_I2D_PCT: "trace_i2d_pct", PCT, Some(Lower),
        "share of btt's summed Q2C (each part of a split bio counted) between insert and dispatch: in the I/O scheduler, a plug \
         or waiting for the driver (btt's I2D overhead)";
    TRACE_MERGE_RATIO: "trace_merge_ratio", None, None, "bios per dispatched request (btt's Q/D)";
    TRACE_REQUEST_KB_MEAN: "trace_request_kb_mean", Some("KiB"), None,
        "mean dispatched request size";
    TRACE_DISPATCH_DEPTH_MEAN: "trace_dispatch_depth_mean", None, None,
        "requests in the driver at each dispatch, the one dispatched included";
    TRACE_SLEEPS: "trace_sleeps", None, None, "request allocations that slept (S events; Linux before 5.11 only: later kernels show waiting for a request as Q2G, which `trace analyze` points out past 10% of Q2C)";
}

/// A naming rule: names that are not listed and match take its unit and direction.
macro_rules! rules {
    ($($matching:ident $name:literal, $unit:expr, $dir:expr, $text:literal;)*) => {
        /// The naming rules, in the order they are tried (the first that matches decides).
        const RULES: &[Metric] = &[$(Metric {
            name: $name,
            matching: Match::$matching,
            unit: $unit,
            direction: $dir,
            source: Source::Command,
            description: concat!("a name not listed: ", $text),
            across_devices: None,
        }),*];
    };
}

rules! {
    Suffix "rqm_per_s", PER_S, Some(NoDirection), "merges per second";
    Suffix "_us", US, Some(Lower), "a latency in microseconds";
    Suffix "_ms", Some("ms"), Some(Lower), "a latency in milliseconds";
    Suffix "_pct", PCT, Some(Lower), "a share (a CPU cost)";
    Contains "await", None, Some(Lower), "a wait";
    Suffix "irq_per_s", PER_S, Some(Lower), "interrupts per second (overhead)";
    Suffix "_per_io", None, Some(Lower), "a cost per I/O";
    Suffix "retransmits", None, Some(Lower), "retransmissions";
    Suffix "_iops", Some("IO/s"), Some(Higher), "I/Os per second";
    Suffix "mbit_per_s", MBIT_S, Some(Higher), "10^6 bits per second";
    Suffix "_bw_mbs", MB_S, Some(Higher), "10^6 bytes per second";
    Suffix "mb_per_s", MB_S, Some(Higher), "10^6 bytes per second";
    Suffix "_per_s", PER_S, Some(Higher), "work per second";
    Suffix "_mbs", None, Some(Higher), "bandwidth";
    Suffix "_kb", Some("KiB"), None, "a size in KiB";
    Suffix "_kb_mean", Some("KiB"), None, "a mean size in KiB";
    Suffix "_mb", Some("MB"), None, "an amount in 10^6 bytes";
    Suffix "_qu_sz", Some("requests"), None, "a queue size";
}

/// The machine's own figures among the headline ones: a run across hosts keeps them per host
/// (`HOST:usr_pct`) and for the machine that drove the hosts (`local:usr_pct`).
pub(crate) const MACHINE: [&Metric; 3] = [&USR_PCT, &SYS_PCT, &IRQ_PER_S];

/// The default metrics of `show` and `compare`, in display order: the figures the cases'
/// authors posted (IOPS, MB/s, mean and p99 completion latency, %usr/%sys, interrupts/s).
/// `analysis::metrics::choose` keeps those a set of runs measured and not all zero.
pub(crate) const HEADLINE: &[Metric] = &[
    // The network engines' (`workload::net`); absent from fio's runs, so not shown there.
    NET_RECEIVED_MBIT_PER_S,
    NET_RETRANSMITS,
    RR_TRANS_PER_S,
    RR_LAT_MEAN_US,
    RR_LAT_P99_US,
    TP_MSG_PER_S,
    READ_IOPS,
    WRITE_IOPS,
    READ_BW_MBS,
    WRITE_BW_MBS,
    READ_CLAT_MEAN_US,
    READ_CLAT_P99_US,
    WRITE_CLAT_MEAN_US,
    WRITE_CLAT_P99_US,
    // A trim workload's; all 0 or absent elsewhere, so not shown there.
    TRIM_IOPS,
    TRIM_BW_MBS,
    TRIM_CLAT_MEAN_US,
    TRIM_CLAT_P99_US,
    USR_PCT,
    SYS_PCT,
    IRQ_PER_S,
    // A NIC target's own interrupts (`[target] nic`): the figure an interrupt experiment
    // on a NIC is about; absent elsewhere.
    NIC_IRQ_PER_S,
    // The device's side of fio's figures (the lab's nvme0n1 had them stored, but `show`
    // printed none: they were not headline metrics).
    DEV_R_PER_S,
    DEV_W_PER_S,
    DEV_IRQ_PER_IO,
    // Where the time went, from a block trace of each run (`trace = true`): the share spent
    // in the I/O scheduler, case 1's finding (absent without traces, 0 under `none`).
    TRACE_I2D_PCT,
];

/// The whole table: fio's, the sampler's, the network engines', a trace's, then the naming
/// rules for user-named metrics.
pub(crate) fn registry() -> &'static [Metric] {
    static TABLE: OnceLock<Vec<Metric>> = OnceLock::new();
    TABLE.get_or_init(|| {
        [
            FIO_READ_LIST,
            FIO_WRITE_LIST,
            FIO_TRIM_LIST,
            FIO_CPU,
            SAMPLER,
            ENGINES,
            TRACE,
            RULES,
        ]
        .concat()
    })
}

/// The entry listing `name` itself, if any; a prefixed name as the metric after its last
/// `:` (`DEVICE:dev_r_per_s`, a controlled host's `lab1:usr_pct`, this machine's
/// `local:idle_pct` while it drove hosts).
pub fn exact(name: &str) -> Option<&'static Metric> {
    let listed = |n: &str| {
        registry()
            .iter()
            .find(|m| m.matching == Match::Exact && m.name == n)
    };
    listed(name).or_else(|| match name.rsplit_once(':') {
        Some((prefix, m)) if !prefix.is_empty() => listed(m),
        _ => None,
    })
}

/// The entry for `name`: its own, else the first naming rule it follows.
pub(crate) fn lookup(name: &str) -> Option<&'static Metric> {
    exact(name).or_else(|| rule(name))
}

fn rule(name: &str) -> Option<&'static Metric> {
    registry()
        .iter()
        .filter(|m| m.matching != Match::Exact)
        .find(|m| m.matches(name))
}

/// Whether `name` is a workload's own metric, not one iolab lists: a command engine's (its
/// patterns' named groups, its JSON paths' names). A host's prefixed figure is not.
pub(crate) fn workload_own(name: &str) -> bool {
    !name.contains(':') && exact(name).is_none()
}

/// Which way is better for `name`: its own entry's direction, else the naming rule its name
/// follows. `None` for names that are neither work done nor a cost (`dev_avg_rq_kb`,
/// `dev_avg_qu_sz`, a trace's counts) or follow no rule, where the caller must state one.
///
/// Work done (`_iops`, `_bw_mbs`, `_mb_per_s`, `_per_s`) is better higher; latencies, CPU
/// shares (except `idle_pct`), interrupt rates, costs per I/O and retransmits are better
/// lower; merges (`*rqm_per_s`) have no direction: more merges mean fewer, larger requests,
/// which says nothing on its own, so `compare` reports `changed`.
pub(crate) fn direction(name: &str) -> Option<Direction> {
    lookup(name).and_then(|m| m.direction)
}

/// How finely `name` was measured, where its values are latency histogram buckets'
/// representatives: fio's completion-latency percentiles and the trace's. Their CIs are
/// never narrower than those buckets (`stats::resolution`). `None`: values as measured.
pub(crate) fn resolution(name: &str) -> Option<Resolution> {
    let m = exact(name)?;
    let fio = [FIO_READ, FIO_WRITE, FIO_TRIM]
        .iter()
        .flat_map(|d| [d.clat_p50_us, d.clat_p99_us, d.clat_p999_us]);
    if fio.into_iter().any(|p| p.name == m.name) {
        return Some(Resolution::FIO_NS_AS_US);
    }
    [TRACE_Q2C_P50_US, TRACE_Q2C_P99_US, TRACE_D2C_P99_US]
        .iter()
        .any(|p| p.name == m.name)
        .then_some(Resolution::TRACE_NS_AS_US)
}

/// The listed names from one source, in table order.
#[cfg(test)]
pub(crate) fn names(source: Source) -> impl Iterator<Item = &'static str> {
    registry()
        .iter()
        .filter(move |m| m.source == source)
        .filter_map(Metric::exact_name)
}

/// The listed metrics whose several devices' figures combine (`dev_*`), in table order.
pub(crate) fn across_devices() -> impl Iterator<Item = (&'static Metric, Across)> {
    registry()
        .iter()
        .filter_map(|m| Some((m, m.across_devices?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fio's and the trace's percentiles are histogram buckets' values, under any prefix;
    /// means, extremes and sockperf's percentiles (computed from its samples) are not.
    #[test]
    fn the_percentiles_read_from_a_histogram_have_its_resolution() {
        for name in [
            "read_clat_p50_us",
            "write_clat_p99_us",
            "trim_clat_p999_us",
            "db7:read_clat_p99_us",
        ] {
            assert_eq!(resolution(name), Some(Resolution::FIO_NS_AS_US), "{name}");
        }
        for name in [
            "trace_q2c_p50_us",
            "trace_q2c_p99_us",
            "sdb:trace_d2c_p99_us",
        ] {
            assert_eq!(resolution(name), Some(Resolution::TRACE_NS_AS_US), "{name}");
        }
        for name in [
            "read_clat_mean_us",
            "read_clat_max_us",
            "trace_q2c_max_us",
            "rr_lat_p99_us",
            "read_iops",
            "my_p99_us",
        ] {
            assert_eq!(resolution(name), None, "{name}");
        }
    }

    /// The naming rules describe the listed metrics too, so a user reading a name can tell
    /// its unit and direction; `idle_pct` is the one exception the docs state.
    #[test]
    fn listed_metrics_follow_the_naming_rules() {
        for m in registry() {
            let Some(name) = m.exact_name() else { continue };
            let by_rule = rule(name);
            let (unit, direction) = by_rule.map_or((None, None), |r| (r.unit, r.direction));
            assert_eq!(m.unit, unit, "{name}");
            if name == IDLE_PCT.name {
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
            listed.len(),
            3 * 9 + FIO_CPU.len() + SAMPLER.len() + 15 + TRACE.len()
        );
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
        assert!(exact("_us").is_none(), "a rule's suffix is not a name");
        assert_eq!(lookup("copy_s"), None);
        assert_eq!(lookup("ops_per_s").unwrap().source, Source::Command);
        assert_eq!(names(Source::Trace).count(), TRACE.len());
        assert_eq!(FIO_WRITE.clat_p999_us.name, "write_clat_p999_us");
        assert_eq!(
            TRIM_CLAT_STDDEV_US.description,
            "standard deviation of trim completion latency, pooled over jobs"
        );
    }

    /// Only a device's figures say how devices combine, and a weighted mean or a ratio is
    /// made of figures that are summed.
    #[test]
    fn device_figures_say_how_devices_combine() {
        for (m, across) in across_devices() {
            assert!(m.name.starts_with("dev_"), "{}", m.name);
            let parts: &[&str] = match across {
                Across::WeightedMean(w) => w,
                Across::Ratio(of, per) => {
                    assert_eq!(exact(of).unwrap().across_devices, Some(Across::Sum));
                    per
                }
                Across::Sum | Across::Apart => &[],
            };
            for p in parts {
                assert_eq!(exact(p).unwrap().across_devices, Some(Across::Sum), "{p}");
            }
        }
        for m in SAMPLER.iter().filter(|m| m.name.starts_with("dev_")) {
            assert!(m.across_devices.is_some(), "{}", m.name);
        }
    }

    #[test]
    fn documented_metrics_have_the_documented_direction() {
        use Direction::*;
        for m in [
            "read_iops",
            "write_bw_mbs",
            "dev_r_per_s",
            "dev_rmb_per_s",
            "idle_pct",
        ] {
            assert_eq!(direction(m), Some(HigherIsBetter), "{m}");
        }
        for m in [
            "read_clat_p99_us",
            "write_clat_stddev_us",
            "sys_pct",
            "fio_usr_pct",
            "dev_r_await_ms",
            "irq_per_s",
            "dev_irq_per_s",
            "dev_irq_per_io",
            "sdb:dev_irq_per_io",
        ] {
            assert_eq!(direction(m), Some(LowerIsBetter), "{m}");
        }
        for m in ["dev_rrqm_per_s", "dev_wrqm_per_s", "sdb:dev_wrqm_per_s"] {
            assert_eq!(direction(m), Some(NoDirection), "{m}");
        }
        assert_eq!(direction("dev_avg_rq_kb"), None);
        // The network engines'.
        for m in ["net_received_mbit_per_s", "rr_trans_per_s", "tp_msg_per_s"] {
            assert_eq!(direction(m), Some(HigherIsBetter), "{m}");
        }
        for m in ["net_retransmits", "rr_lat_p99_us", "net_client_cpu_pct"] {
            assert_eq!(direction(m), Some(LowerIsBetter), "{m}");
        }
        assert_eq!(direction("dev_avg_qu_sz"), None);
    }

    /// A traced run's latencies and the share spent in the scheduler are costs; counts,
    /// sizes, depths and the merge ratio are descriptions whose better side depends on the
    /// workload (case 1's collapsed dispatch depth was bad, a deep queue on a slow disk is
    /// too), so a comparison must name its direction.
    #[test]
    fn trace_metrics_have_their_documented_direction() {
        for m in [
            "trace_q2c_mean_us",
            "trace_q2c_p50_us",
            "trace_q2c_p99_us",
            "trace_q2c_max_us",
            "trace_d2c_mean_us",
            "trace_d2c_p99_us",
            "trace_i2d_pct",
        ] {
            assert_eq!(direction(m), Some(Direction::LowerIsBetter), "{m}");
        }
        for m in [
            "trace_events",
            "trace_events_lost",
            "trace_q2c_count",
            "trace_merge_ratio",
            "trace_request_kb_mean",
            "trace_dispatch_depth_mean",
            "trace_sleeps",
        ] {
            assert_eq!(direction(m), None, "{m}");
        }
        // A figure with a unit says it: the table headers print it.
        assert_eq!(lookup("trace_completed_mb").unwrap().unit, Some("MB"));
        assert_eq!(lookup("trace_request_kb_mean").unwrap().unit, Some("KiB"));
    }

    /// The default metrics of `show` and `compare` are listed, each once.
    #[test]
    fn headline_metrics_are_listed() {
        for m in HEADLINE {
            assert_eq!(exact(m.name), Some(m), "{}", m.name);
        }
        let mut names: Vec<&str> = HEADLINE.iter().map(|m| m.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), HEADLINE.len());
    }
}

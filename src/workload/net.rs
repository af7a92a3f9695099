//! The network engines. `iperf3` measures streams (its JSON output, `-J`: Mb/s each way,
//! retransmits, the figures of each one-second interval); `sockperf` measures request and
//! response (`ping-pong`: transactions/s and latency percentiles; `throughput`: messages/s
//! and MB/s), the role netperf TCP_RR plays in case 2 of docs/cases.md (netperf is in
//! Debian's non-free section). The client runs here with the cell's placement, optionally in
//! a network namespace; the server is either at an address the user started it on, or one
//! iolab starts for each run in a network namespace it is told (`server_netns`), pinned to
//! `server_cpus` when given.

use std::time::Duration;

use super::engine::{Engine, Figures, Invocation, Server};
use crate::metrics;

/// Where the client and server run, shared by both engines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NetSpec {
    /// The server's address.
    pub(crate) server: String,
    pub(crate) port: u16,
    /// The client's network namespace.
    pub(crate) netns: Option<String>,
    /// When set iolab starts the server there (`ip netns exec`), bound to `server`.
    pub(crate) server_netns: Option<String>,
    /// CPUs the server iolab starts is pinned to (`server_cpus`, with `server_netns`).
    pub(crate) server_cpus: Option<Vec<u32>>,
    /// The engine's options from its table, as text.
    pub(crate) options: Vec<(String, String)>,
}

impl NetSpec {
    /// The client's invocation (unpinned; the cell pins it) with the server iolab starts.
    fn invocation(
        &self,
        argv: Vec<String>,
        server: Option<Server>,
        o: &[(String, String)],
    ) -> Invocation {
        Invocation {
            cell_key: String::new(),
            argv,
            netns: self.netns.clone(),
            cpus: None,
            server,
            time_limit: time_limit(o),
        }
    }
}

/// An option an engine takes, and what its values may be.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Bool,
    Int(i64, i64),
    /// A size or rate in the program's own notation (`1G`, `100M`).
    Size,
    Choice(&'static [&'static str]),
}

pub(crate) fn check_option(table: &[(&str, Kind)], name: &str, value: &str) -> Result<(), String> {
    let (_, kind) = table
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| format!("`{name}` is not an option of this engine"))?;
    let ok = match kind {
        Kind::Bool => matches!(value, "true" | "false"),
        Kind::Int(lo, hi) => value.parse::<i64>().is_ok_and(|v| v >= *lo && v <= *hi),
        Kind::Size => {
            let digits = value.trim_end_matches(|c: char| "kKmMgGtT".contains(c));
            !digits.is_empty() && digits.parse::<f64>().is_ok_and(|v| v >= 0.0)
        }
        Kind::Choice(c) => c.contains(&value),
    };
    if ok {
        return Ok(());
    }
    Err(match kind {
        Kind::Bool => format!("`{name}` is true or false, not `{value}`"),
        Kind::Int(lo, hi) => format!("`{name}` is a whole number from {lo} to {hi}, not `{value}`"),
        Kind::Size => format!("`{name}` is a number with an optional K, M, G or T, not `{value}`"),
        Kind::Choice(c) => format!("`{name}` is one of {}, not `{value}`", c.join(", ")),
    })
}

fn get<'a>(opts: &'a [(String, String)], name: &str) -> Option<&'a str> {
    opts.iter()
        .rev()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn is_true(opts: &[(String, String)], name: &str) -> bool {
    get(opts, name) == Some("true")
}

/// The seconds a run lasts (`time`, default 10) plus the slack the time limit allows.
fn seconds(opts: &[(String, String)]) -> f64 {
    get(opts, "time")
        .and_then(|t| t.parse().ok())
        .unwrap_or(10.0)
}

/// How long the client runs: `time`, after iperf3's `omit` warm-up when there is one.
fn run_seconds(opts: &[(String, String)]) -> f64 {
    let omit: f64 = get(opts, "omit")
        .and_then(|t| t.parse().ok())
        .unwrap_or(0.0);
    seconds(opts) + omit
}

fn time_limit(opts: &[(String, String)]) -> Duration {
    Duration::from_secs_f64(run_seconds(opts) * 2.0 + 30.0)
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Iperf3(pub NetSpec);

pub(crate) const IPERF3_OPTIONS: &[(&str, Kind)] = &[
    ("time", Kind::Int(1, 86_400)),
    ("parallel", Kind::Int(1, 128)),
    ("reverse", Kind::Bool),
    ("udp", Kind::Bool),
    ("bitrate", Kind::Size),
    ("length", Kind::Size),
    ("window", Kind::Size),
    ("omit", Kind::Int(0, 3600)),
    ("zerocopy", Kind::Bool),
];

impl Engine for Iperf3 {
    fn name(&self) -> &'static str {
        "iperf3"
    }
    fn base_options(&self) -> &[(String, String)] {
        &self.0.options
    }
    fn option_table(&self) -> &'static [(&'static str, Kind)] {
        IPERF3_OPTIONS
    }

    fn invocation(&self, o: &[(String, String)]) -> Option<Invocation> {
        let n = &self.0;
        let port = n.port.to_string();
        let mut argv = strings(&["iperf3", "-c", &n.server, "-p", &port, "-J", "-i", "1"]);
        argv.extend(strings(&["-t", &format!("{}", seconds(o))]));
        for (opt, flag) in [("parallel", "-P"), ("bitrate", "-b"), ("length", "-l")] {
            if let Some(v) = get(o, opt) {
                argv.extend(strings(&[flag, v]));
            }
        }
        for (opt, flag) in [("window", "-w"), ("omit", "-O")] {
            if let Some(v) = get(o, opt) {
                argv.extend(strings(&[flag, v]));
            }
        }
        for (opt, flag) in [("reverse", "-R"), ("udp", "-u"), ("zerocopy", "-Z")] {
            if is_true(o, opt) {
                argv.push(flag.to_string());
            }
        }
        // `-1`: the server serves this one client and exits.
        let server = n.server_netns.as_ref().map(|ns| Server {
            netns: ns.clone(),
            argv: strings(&["iperf3", "-s", "-1", "-B", &n.server, "-p", &port]),
            port: n.port,
            udp: false,
            cpus: n.server_cpus.clone(),
        });
        Some(n.invocation(argv, server, o))
    }

    fn nominal_seconds(&self, o: &[(String, String)]) -> Option<f64> {
        Some(run_seconds(o))
    }

    fn metrics(&self, stdout: &str, _: &str) -> Result<Figures, String> {
        iperf3_figures(stdout)
    }

    fn primary_metric(&self) -> Option<String> {
        Some(metrics::NET_RECEIVED_MBIT_PER_S.name.into())
    }
}

/// iperf3's `-J` output as metrics and the per-interval series.
pub(crate) fn iperf3_figures(stdout: &str) -> Result<Figures, String> {
    let doc: serde_json::Value =
        serde_json::from_str(stdout.trim()).map_err(|e| format!("output is not JSON: {e}"))?;
    if let Some(e) = doc.get("error").and_then(|e| e.as_str()) {
        return Err(format!("iperf3 reported: {e}"));
    }
    let num = |v: &serde_json::Value, path: &str| {
        super::engine::json_path(v, path)
            .and_then(serde_json::Value::as_f64)
            .filter(|x| x.is_finite() && *x >= 0.0)
    };
    let need = |path: &str| num(&doc, path).ok_or_else(|| format!("no number at `{path}`"));
    // UDP runs report one `sum`; TCP ones `sum_sent` and `sum_received`.
    let (sent, received) = match num(&doc, "end.sum_sent.bits_per_second") {
        Some(s) => (s, need("end.sum_received.bits_per_second")?),
        None => {
            let s = need("end.sum.bits_per_second")?;
            (s, s)
        }
    };
    let mut out = vec![
        (metrics::NET_SENT_MBIT_PER_S.name.to_string(), sent / 1e6),
        (
            metrics::NET_RECEIVED_MBIT_PER_S.name.to_string(),
            received / 1e6,
        ),
    ];
    if let Some(r) = num(&doc, "end.sum_sent.retransmits") {
        out.push((metrics::NET_RETRANSMITS.name.to_string(), r));
    }
    let (mut t, mut v) = (Vec::new(), Vec::new());
    // The intervals of `omit`'s warm-up are reported too, flagged, on a clock of their own
    // (the measured ones start again at 0); the end sums leave them out, so do these.
    for i in doc
        .get("intervals")
        .and_then(|i| i.as_array())
        .into_iter()
        .flatten()
        .filter(|i| {
            super::engine::json_path(i, "sum.omitted") != Some(&serde_json::Value::Bool(true))
        })
    {
        if let (Some(end), Some(bps)) = (num(i, "sum.end"), num(i, "sum.bits_per_second")) {
            t.push(end);
            v.push(bps / 1e6);
        }
    }
    if !v.is_empty() {
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(0.0, f64::max);
        out.push((metrics::NET_INTERVAL_MIN_MBIT_PER_S.name.to_string(), min));
        out.push((metrics::NET_INTERVAL_MAX_MBIT_PER_S.name.to_string(), max));
    }
    for (name, path) in [
        (
            metrics::NET_CLIENT_CPU_PCT.name,
            "end.cpu_utilization_percent.host_total",
        ),
        (
            metrics::NET_SERVER_CPU_PCT.name,
            "end.cpu_utilization_percent.remote_total",
        ),
    ] {
        if let Some(x) = num(&doc, path) {
            out.push((name.into(), x));
        }
    }
    let series = if v.is_empty() {
        Vec::new()
    } else {
        vec![("iperf3/mbit_per_s".to_string(), t, v)]
    };
    Ok(Figures {
        metrics: out,
        series,
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sockperf(pub NetSpec);

pub(crate) const SOCKPERF_OPTIONS: &[(&str, Kind)] = &[
    ("mode", Kind::Choice(&["ping-pong", "throughput"])),
    ("time", Kind::Int(1, 86_400)),
    ("msg_size", Kind::Int(14, 65_000)),
    ("tcp", Kind::Bool),
    ("mps", Kind::Int(1, 100_000_000)),
];

impl Engine for Sockperf {
    fn name(&self) -> &'static str {
        "sockperf"
    }
    fn base_options(&self) -> &[(String, String)] {
        &self.0.options
    }
    fn option_table(&self) -> &'static [(&'static str, Kind)] {
        SOCKPERF_OPTIONS
    }

    fn invocation(&self, o: &[(String, String)]) -> Option<Invocation> {
        let n = &self.0;
        let port = n.port.to_string();
        let mode = get(o, "mode").unwrap_or("ping-pong");
        let secs = format!("{}", seconds(o));
        let mut argv = strings(&["sockperf", mode, "-i", &n.server, "-p", &port, "-t", &secs]);
        if let Some(m) = get(o, "msg_size") {
            argv.extend(strings(&["-m", m]));
        }
        if let Some(m) = get(o, "mps") {
            argv.push(format!("--mps={m}"));
        }
        let tcp = is_true(o, "tcp");
        if tcp {
            argv.push("--tcp".into());
        }
        let server = n.server_netns.as_ref().map(|ns| {
            let mut argv = strings(&["sockperf", "server", "-i", &n.server, "-p", &port]);
            if tcp {
                argv.push("--tcp".into());
            }
            Server {
                netns: ns.clone(),
                argv,
                port: n.port,
                udp: !tcp,
                cpus: n.server_cpus.clone(),
            }
        });
        Some(n.invocation(argv, server, o))
    }

    fn nominal_seconds(&self, o: &[(String, String)]) -> Option<f64> {
        Some(seconds(o))
    }

    fn metrics(&self, stdout: &str, stderr: &str) -> Result<Figures, String> {
        sockperf_figures(&format!("{stdout}\n{stderr}"))
    }

    fn primary_metric(&self) -> Option<String> {
        match get(&self.0.options, "mode") {
            Some("throughput") => Some(metrics::TP_MSG_PER_S.name.into()),
            _ => Some(metrics::RR_TRANS_PER_S.name.into()),
        }
    }
}

/// Removes terminal colour sequences (sockperf colours some lines even into a pipe).
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The number after `key` in `line` (`key=12.5`, `key 12.5`, `key is 12.5`).
fn after(line: &str, key: &str) -> Option<f64> {
    let rest = &line[line.find(key)? + key.len()..];
    let rest = rest
        .trim_start_matches([' ', '='])
        .trim_start_matches("is ");
    let n: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    n.parse().ok().filter(|v: &f64| v.is_finite())
}

/// sockperf's text output as metrics: ping-pong's valid-duration transactions/s (replies per
/// second; each is one request and its response) and latency (sockperf's, half the round
/// trip, in µs), or throughput's message rate and bandwidth.
pub(crate) fn sockperf_figures(output: &str) -> Result<Figures, String> {
    let text = plain(output);
    let mut out = Vec::new();
    if let Some(line) = text.lines().find(|l| l.contains("[Valid Duration]")) {
        let secs = after(line, "RunTime").ok_or("no RunTime in [Valid Duration]")?;
        let got = after(line, "ReceivedMessages").ok_or("no ReceivedMessages")?;
        if secs <= 0.0 {
            return Err("[Valid Duration] RunTime is 0".into());
        }
        out.push((metrics::RR_TRANS_PER_S.name.to_string(), got / secs));
        let mean = text
            .lines()
            .find_map(|l| after(l, "Summary: Latency"))
            .ok_or("no `Summary: Latency` line")?;
        out.push((metrics::RR_LAT_MEAN_US.name.to_string(), mean));
        for (name, key) in [
            (metrics::RR_LAT_P50_US.name, "percentile 50.000"),
            (metrics::RR_LAT_P99_US.name, "percentile 99.000"),
            (metrics::RR_LAT_P999_US.name, "percentile 99.900"),
            (metrics::RR_LAT_MAX_US.name, "<MAX> observation"),
        ] {
            if let Some(v) = text.lines().find_map(|l| after(l, key)) {
                out.push((name.into(), v));
            }
        }
    } else if let Some(rate) = text.lines().find_map(|l| after(l, "Summary: Message Rate")) {
        out.push((metrics::TP_MSG_PER_S.name.to_string(), rate));
        // sockperf's "MBps" are MiB/s (2^20 bytes: 124,552 msg/s of 1400 bytes it calls
        // 166.295 MBps); iolab's MB/s are 10^6 bytes.
        if let Some(bw) = text.lines().find_map(|l| after(l, "Summary: BandWidth")) {
            out.push((metrics::TP_MB_PER_S.name.to_string(), bw * 1.048576));
        }
    } else {
        return Err("neither a [Valid Duration] nor a `Summary: Message Rate` line".into());
    }
    Ok(Figures {
        metrics: out,
        series: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let p = format!(
            "{}/tests/fixtures/engines/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(p).unwrap()
    }

    fn get(f: &Figures, name: &str) -> f64 {
        f.metrics.iter().find(|(n, _)| n == name).unwrap().1
    }

    #[test]
    fn iperf3_json_gives_mbits_retransmits_and_intervals() {
        let f = iperf3_figures(&fixture("iperf3.json")).unwrap();
        assert!((get(&f, "net_sent_mbit_per_s") - 11099.051669).abs() < 1e-3);
        assert!((get(&f, "net_received_mbit_per_s") - 11073.435753).abs() < 1e-3);
        assert_eq!(get(&f, "net_retransmits"), 0.0);
        assert!((get(&f, "net_interval_max_mbit_per_s") - 12959.021808).abs() < 1e-3);
        assert_eq!(f.series[0].1.len(), 2);
        for (n, _) in &f.metrics {
            let listed = crate::metrics::exact(n).map(|m| (m.source, &m.description[..7]));
            assert_eq!(
                listed,
                Some((crate::metrics::Source::Engine, "iperf3:")),
                "{n}"
            );
        }
        // With `omit`, its intervals are not the run's: `iperf3 -J -t 2 -O 1 -i 0.5 -b 1G`
        // over loopback reported two omitted half-seconds, then four measured from 0 again.
        let f = iperf3_figures(&fixture("iperf3-omit.json")).unwrap();
        let (_, t, v) = &f.series[0];
        assert_eq!(t, &[0.500014, 0.999982, 1.500002, 1.999987]);
        assert!((v[0] - 1002.3).abs() < 0.1, "{v:?}");
        assert!((get(&f, "net_interval_min_mbit_per_s") - 998.3).abs() < 0.1);
        let e = iperf3_figures(r#"{"error": "unable to connect to server"}"#).unwrap_err();
        assert!(e.contains("unable to connect"), "{e}");
    }

    /// Every figure sockperf gives is in the metric registry as the engine's.
    fn listed_as_sockperf(f: &Figures) {
        for (n, _) in &f.metrics {
            let listed = crate::metrics::exact(n).map(|m| (m.source, &m.description[..8]));
            assert_eq!(
                listed,
                Some((crate::metrics::Source::Engine, "sockperf")),
                "{n}"
            );
        }
    }

    #[test]
    fn sockperf_ping_pong_and_throughput() {
        let f = sockperf_figures(&fixture("sockperf-ping-pong.txt")).unwrap();
        assert!((get(&f, "rr_trans_per_s") - 45314.0 / 1.552).abs() < 1e-6);
        listed_as_sockperf(&f);
        assert_eq!(get(&f, "rr_lat_mean_us"), 17.108);
        assert_eq!(get(&f, "rr_lat_p50_us"), 8.340);
        assert_eq!(get(&f, "rr_lat_p99_us"), 16.305);
        assert_eq!(get(&f, "rr_lat_max_us"), 2761.599);
        let f = sockperf_figures(&fixture("sockperf-throughput.txt")).unwrap();
        assert_eq!(get(&f, "tp_msg_per_s"), 124552.0);
        // 124,552 messages of 1400 bytes a second: 174.37 MB/s, which sockperf gives as
        // 166.295 "MBps" (MiB/s).
        assert!((get(&f, "tp_mb_per_s") - 124552.0 * 1400.0 / 1e6).abs() < 0.01);
        listed_as_sockperf(&f);
        assert!(sockperf_figures("sockperf: error").is_err());
    }

    #[test]
    fn options_become_arguments_and_a_server_in_its_namespace() {
        let net = NetSpec {
            server: "10.1.0.2".into(),
            port: 5202,
            netns: Some("a".into()),
            server_netns: Some("b".into()),
            server_cpus: None,
            options: vec![("time".into(), "3".into())],
        };
        let inv = Iperf3(net.clone())
            .invocation(&[
                ("time".into(), "3".into()),
                ("parallel".into(), "4".into()),
                ("reverse".into(), "true".into()),
            ])
            .unwrap();
        assert_eq!(
            inv.command_line("/d"),
            "server: ip netns exec b iperf3 -s -1 -B 10.1.0.2 -p 5202 ; client: ip netns exec \
             a iperf3 -c 10.1.0.2 -p 5202 -J -i 1 -t 3 -P 4 -R"
        );
        // `omit`'s warm-up comes before `time`: a run takes both, and is given time for both.
        let warmed = [("time".into(), "10".into()), ("omit".into(), "60".into())];
        let inv = Iperf3(net.clone()).invocation(&warmed).unwrap();
        assert_eq!(inv.time_limit, Duration::from_secs(70 * 2 + 30));
        assert_eq!(Iperf3(net.clone()).nominal_seconds(&warmed), Some(70.0));
        let inv = Sockperf(net)
            .invocation(&[("msg_size".into(), "64".into())])
            .unwrap();
        assert!(inv.server.as_ref().unwrap().udp);
        assert_eq!(
            super::super::process::command_line(&inv.argv),
            "sockperf ping-pong -i 10.1.0.2 -p 5202 -t 10 -m 64"
        );
        assert!(check_option(IPERF3_OPTIONS, "parallel", "0").is_err());
        assert!(check_option(IPERF3_OPTIONS, "bitrate", "10M").is_ok());
        assert!(check_option(SOCKPERF_OPTIONS, "mode", "rr")
            .unwrap_err()
            .contains("ping-pong"));
    }
}

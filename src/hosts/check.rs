//! `iolab hosts check`: before a run on several hosts, connect to each, say which iolab, fio
//! and kernel it runs, and measure how far its clock is from this machine's. fio versions that
//! differ (from this machine's fio, the client of every fio server) and clocks further apart
//! than a threshold are flagged: per-host samples and traces are only comparable when their
//! clocks agree, and fio's client/server protocol changes between versions.
//!
//! The skew is measured like NTP does it: the host's clock in its `hello` answer against the
//! midpoint of this machine's clock before the request and after the answer; the true skew
//! lies within half the round trip of that estimate. The shortest of a few round trips is
//! kept, as the one least disturbed by scheduling.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::facts::{self, Hello};
use super::protocol::Request;
use super::ssh::{Connection, SshOptions};
use crate::report::format::{display_width, pad_right, terminal_safe};
use crate::store::time::now_unix;
use crate::sys::SysRoot;

/// Hellos per host; the one with the shortest round trip measures the skew.
const TRIES: usize = 3;

/// A host's clock against this machine's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Skew {
    /// Host clock minus this machine's (seconds): positive = the host is ahead.
    pub skew_s: f64,
    pub round_trip_s: f64,
    /// The true skew lies within this of `skew_s` (half the round trip).
    pub uncertainty_s: f64,
}

/// The skew from this machine's clock at `sent` and `received` and the host's `remote`.
pub(crate) fn skew(sent: f64, received: f64, remote: f64) -> Skew {
    let round_trip_s = (received - sent).max(0.0);
    Skew {
        skew_s: remote - (sent + received) / 2.0,
        round_trip_s,
        uncertainty_s: round_trip_s / 2.0,
    }
}

/// One host's line of the check.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct HostCheck {
    pub host: String,
    /// Why the host could not be checked.
    pub error: Option<String>,
    pub hello: Option<Hello>,
    pub skew: Option<Skew>,
    /// The iolab that answered there: the one asked for, or the copy `--copy-binary` made.
    pub iolab: Option<String>,
    /// What is wrong with this host, one sentence each.
    pub flags: Vec<String>,
}

/// The whole check.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    /// This machine, the reference.
    pub local: Hello,
    pub max_skew_s: f64,
    pub hosts: Vec<HostCheck>,
}

impl Report {
    /// Hosts unreachable or flagged.
    pub(crate) fn problems(&self) -> usize {
        self.hosts
            .iter()
            .map(|h| h.flags.len() + usize::from(h.error.is_some()))
            .sum()
    }
}

/// Connects to every host at once and checks each.
pub(crate) fn check(hosts: &[String], options: &SshOptions, max_skew: Duration) -> Report {
    let local = facts::hello(&SysRoot::live(), facts::fio_version());
    let mut checked: Vec<HostCheck> = std::thread::scope(|s| {
        let running: Vec<_> = hosts
            .iter()
            .map(|h| s.spawn(move || measure(h, options)))
            .collect();
        running
            .into_iter()
            .zip(hosts)
            .map(|(t, h)| {
                t.join().unwrap_or_else(|_| HostCheck {
                    host: h.clone(),
                    error: Some("the check of this host failed unexpectedly".into()),
                    hello: None,
                    skew: None,
                    iolab: None,
                    flags: Vec::new(),
                })
            })
            .collect()
    });
    let max_skew_s = max_skew.as_secs_f64();
    for h in &mut checked {
        h.flags = flags(&local, h, max_skew_s);
    }
    Report {
        local,
        max_skew_s,
        hosts: checked,
    }
}

/// Connects, says hello a few times, and says bye.
fn measure(host: &str, options: &SshOptions) -> HostCheck {
    let mut out = HostCheck {
        host: host.to_string(),
        error: None,
        hello: None,
        skew: None,
        iolab: None,
        flags: Vec::new(),
    };
    let attempt = || -> anyhow::Result<(Hello, Skew, String)> {
        let mut conn = Connection::open(host, options)?;
        let mut best: Option<(Hello, Skew)> = None;
        for _ in 0..TRIES {
            let sent = now_unix();
            let value = conn.request(&Request::Hello)?;
            let received = now_unix();
            let hello: Hello = serde_json::from_value(value)
                .map_err(|e| anyhow::anyhow!("{host}: a hello answer iolab cannot read: {e}"))?;
            let s = skew(sent, received, hello.clock_unix);
            if best
                .as_ref()
                .is_none_or(|(_, b)| s.round_trip_s < b.round_trip_s)
            {
                best = Some((hello, s));
            }
        }
        let iolab = conn.remote_iolab().to_string();
        conn.close()?;
        let (hello, s) = best.ok_or_else(|| anyhow::anyhow!("{host}: no hello answered"))?;
        Ok((hello, s, iolab))
    };
    match attempt() {
        Ok((hello, s, iolab)) => {
            out.hello = Some(hello);
            out.skew = Some(s);
            out.iolab = Some(iolab);
        }
        Err(e) => {
            // The transport's messages name the host; the row already does.
            let text = crate::cli::error_text(&e);
            let own = text.strip_prefix(&format!("{host}: ")).unwrap_or(&text);
            out.error = Some(own.to_string());
        }
    }
    out
}

/// What differs on `host` from this machine (`local`), beyond what may.
pub(crate) fn flags(local: &Hello, host: &HostCheck, max_skew_s: f64) -> Vec<String> {
    let mut flags = Vec::new();
    let Some(hello) = &host.hello else {
        return flags;
    };
    match (&local.fio_version, &hello.fio_version) {
        (_, None) => flags.push("no fio there (install fio to run workloads on it)".into()),
        (Some(ours), Some(theirs)) if ours != theirs => flags.push(format!(
            "fio {theirs} differs from this machine's {ours} (fio's client/server protocol \
             changes between versions: install the same fio on every host)"
        )),
        _ => {}
    }
    if hello.iolab_version != local.iolab_version {
        flags.push(format!(
            "iolab {} differs from this machine's {} (same protocol; results may differ)",
            hello.iolab_version, local.iolab_version
        ));
    }
    if let Some(s) = host.skew {
        if s.uncertainty_s > max_skew_s {
            // To the microsecond, as --max-skew may be: "took 0.000 s" read as no time at all.
            flags.push(format!(
                "clock skew unknown within {max_skew_s} s: the round trip took {} s",
                (s.round_trip_s * 1e6).round() / 1e6
            ));
        } else if s.skew_s.abs() - s.uncertainty_s > max_skew_s {
            flags.push(format!(
                "clock {:.3} s {} this machine's, more than {max_skew_s} s (synchronise the \
                 clocks, e.g. with chrony)",
                s.skew_s.abs(),
                if s.skew_s > 0.0 { "ahead of" } else { "behind" }
            ));
        }
    }
    flags
}

impl crate::output::Render for Report {
    fn text(&self) -> String {
        render(self)
    }
}

/// The check as aligned text: one row per machine, then the problems.
pub(crate) fn render(report: &Report) -> String {
    let safe = |s: &str| terminal_safe(s).into_owned();
    let text = |v: &Option<String>| safe(v.as_deref().unwrap_or("-"));
    let landlock = |h: &Hello| {
        h.landlock_abi
            .map_or("none".to_string(), |a| format!("ABI {a}"))
    };
    let mut rows = vec![[
        "host".to_string(),
        "iolab".to_string(),
        "fio".to_string(),
        "kernel".to_string(),
        "landlock".to_string(),
        "clock skew".to_string(),
    ]];
    rows.push([
        "(this machine)".to_string(),
        safe(&report.local.iolab_version),
        text(&report.local.fio_version),
        text(&report.local.kernel),
        landlock(&report.local),
        "reference".to_string(),
    ]);
    for h in &report.hosts {
        let host = safe(&h.host);
        match (&h.hello, &h.skew) {
            (Some(hello), Some(s)) => rows.push([
                host,
                safe(&hello.iolab_version),
                text(&hello.fio_version),
                text(&hello.kernel),
                landlock(hello),
                format!(
                    "{:+.4} s +- {:.4} (round trip {:.4} s)",
                    s.skew_s, s.uncertainty_s, s.round_trip_s
                ),
            ]),
            // Unreachable, another protocol, a name refused: the problems below say which.
            _ => rows.push([
                host,
                "no answer (see below)".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ]),
        }
    }
    let widths: Vec<usize> = (0..6)
        .map(|c| rows.iter().map(|r| display_width(&r[c])).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            let _ = write!(line, "{}  ", pad_right(cell, widths[c]));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let problems: Vec<String> = report
        .hosts
        .iter()
        .flat_map(|h| {
            h.error
                .iter()
                .chain(&h.flags)
                .map(move |p| format!("  {}: {}", terminal_safe(&h.host), terminal_safe(p)))
        })
        .collect();
    if problems.is_empty() {
        let _ = writeln!(
            out,
            "ok: every host answered, fio versions agree, clocks within {} s",
            report.max_skew_s
        );
    } else {
        out.push_str("problems:\n");
        for p in problems {
            out.push_str(&p);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(fio: Option<&str>, clock: f64) -> Hello {
        Hello {
            iolab_version: "0.1.0".into(),
            protocol: 1,
            fio_version: fio.map(str::to_string),
            kernel: Some("6.1.0".into()),
            hostname: Some("h".into()),
            boot_id: None,
            landlock_abi: Some(2),
            mem_total_kib: None,
            mem_available_kib: None,
            cpus_online: None,
            net_ns: None,
            clock_unix: clock,
        }
    }

    fn host(fio: Option<&str>, s: Skew) -> HostCheck {
        HostCheck {
            host: "h1".into(),
            error: None,
            hello: Some(hello(fio, 0.0)),
            skew: Some(s),
            iolab: None,
            flags: vec![],
        }
    }

    #[test]
    fn skew_is_against_the_midpoint_of_the_round_trip() {
        let s = skew(100.0, 100.2, 100.5);
        assert!((s.skew_s - 0.4).abs() < 1e-9, "{s:?}");
        assert!((s.round_trip_s - 0.2).abs() < 1e-9);
        assert!((s.uncertainty_s - 0.1).abs() < 1e-9);
        let behind = skew(100.0, 100.0, 98.0);
        assert_eq!(behind.skew_s, -2.0);
    }

    #[test]
    fn fio_differences_and_large_skews_are_flagged() {
        let local = hello(Some("fio-3.33"), 0.0);
        let same = host(Some("fio-3.33"), skew(0.0, 0.002, 0.003));
        assert!(flags(&local, &same, 0.05).is_empty());
        let other_fio = host(Some("fio-3.28"), skew(0.0, 0.002, 0.001));
        let f = flags(&local, &other_fio, 0.05);
        assert_eq!(f.len(), 1);
        assert!(f[0].starts_with("fio fio-3.28 differs from this machine's fio-3.33"));
        let no_fio = host(None, skew(0.0, 0.002, 0.001));
        assert!(flags(&local, &no_fio, 0.05)[0].starts_with("no fio"));
        // 0.3 s ahead with 0.01 s of uncertainty: over 0.05 for sure.
        let ahead = host(Some("fio-3.33"), skew(0.0, 0.02, 0.31));
        let f = flags(&local, &ahead, 0.05);
        assert!(f[0].starts_with("clock 0.300 s ahead of"), "{f:?}");
        // 0.06 s behind, but the round trip allows 0.05: not surely over.
        let edge = host(Some("fio-3.33"), skew(0.0, 0.04, -0.04));
        assert!(flags(&local, &edge, 0.05).is_empty());
        let slow = host(Some("fio-3.33"), skew(0.0, 0.5, 0.25));
        assert!(flags(&local, &slow, 0.05)[0].contains("round trip took 0.5 s"));
        // Below a millisecond, as --max-skew 1us asks: it said "took 0.000 s".
        let near = host(Some("fio-3.33"), skew(0.0, 0.000215, 0.0001));
        let f = flags(&local, &near, 0.000001);
        assert!(f[0].contains("round trip took 0.000215 s"), "{f:?}");
    }

    #[test]
    fn the_text_lists_every_host_and_every_problem() {
        let mut ok = host(Some("fio-3.33"), skew(0.0, 0.002, 0.0015));
        ok.host = "10.0.0.2".into();
        let down = HostCheck {
            host: "gone".into(),
            error: Some("gone: the connection closed".into()),
            hello: None,
            skew: None,
            iolab: None,
            flags: vec![],
        };
        let report = Report {
            local: hello(Some("fio-3.33"), 0.0),
            max_skew_s: 0.05,
            hosts: vec![ok, down],
        };
        assert_eq!(report.problems(), 1);
        let text = render(&report);
        assert!(text.contains("(this machine)  0.1.0"), "{text}");
        assert!(
            text.contains("+0.0005 s +- 0.0010 (round trip 0.0020 s)"),
            "{text}"
        );
        assert!(
            text.contains("gone            no answer (see below)"),
            "{text}"
        );
        assert!(
            text.contains("problems:\n  gone: gone: the connection closed"),
            "{text}"
        );
    }
}

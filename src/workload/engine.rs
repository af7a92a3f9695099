//! The workload engines behind one trait, `Engine`: fio (`fio_engine`), `command` (any
//! program, metrics by regular expression or JSON path), `iperf3` (streams) and `sockperf`
//! (request/response). The run loop asks the engine for a cell's nominal time, its primary
//! metric, its metrics and series, and what to run: a program engine turns a cell's options
//! into an `Invocation` the runner (`FioRunner::run_program`) starts with the cell's
//! placement, for real or replayed; fio's run is a job file with a section per target device
//! (`runner`). What fio has more (status reports that place its measured window, json+
//! histograms and the cross-checks on them) sits behind trait methods whose defaults say
//! "none", so the loop is the same for all engines and tested without running anything.

use std::time::Duration;

use super::command::CommandEngine;
use super::net::{Iperf3, Sockperf};
use super::process::command_line;
use super::runner::{FioStatus, RawOutput};

/// Which engine an experiment uses (`engine = "..."`), with its table.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) enum EngineSpec {
    #[default]
    Fio,
    Command(CommandEngine),
    Iperf3(Iperf3),
    Sockperf(Sockperf),
}

/// The names `engine` accepts.
pub(crate) const ENGINE_NAMES: &[&str] = &["fio", "command", "iperf3", "sockperf"];

impl EngineSpec {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            EngineSpec::Fio => "fio",
            EngineSpec::Command(_) => "command",
            EngineSpec::Iperf3(_) => "iperf3",
            EngineSpec::Sockperf(_) => "sockperf",
        }
    }

    /// The engine.
    pub(crate) fn engine(&self) -> &dyn Engine {
        match self {
            EngineSpec::Fio => &super::fio_engine::Fio,
            EngineSpec::Command(c) => c,
            EngineSpec::Iperf3(e) => e,
            EngineSpec::Sockperf(e) => e,
        }
    }

    /// The engine when it runs a program per cell (`invocation`); `None` for fio.
    pub(crate) fn program(&self) -> Option<&dyn Engine> {
        Some(self.engine()).filter(|e| !e.runs_job_file())
    }

    /// The network namespaces a network engine's client and server run in, when set.
    pub(crate) fn namespaces(&self) -> Vec<&str> {
        let net = match self {
            EngineSpec::Iperf3(e) => &e.0,
            EngineSpec::Sockperf(e) => &e.0,
            EngineSpec::Fio | EngineSpec::Command(_) => return Vec::new(),
        };
        [&net.netns, &net.server_netns]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect()
    }
}

/// A workload engine: options in, what to run out; output in, metrics out. Pure.
pub trait Engine {
    fn name(&self) -> &'static str;
    /// The options a factor may vary, with the table's values (text) as the base.
    fn base_options(&self) -> &[(String, String)];
    /// The engine's fixed options and their kinds, when it has such a list.
    fn option_table(&self) -> &'static [(&'static str, super::net::Kind)] {
        &[]
    }
    /// Whether `name` is an option a factor may vary.
    fn is_option(&self, name: &str) -> bool {
        self.option_table().iter().any(|(n, _)| *n == name)
    }
    /// Checks one option value (the table's or a factor level's).
    fn check_option(&self, name: &str, value: &str) -> Result<(), String> {
        super::net::check_option(self.option_table(), name, value)
    }
    /// What to run for one cell, its options being the base with the cell's levels applied;
    /// `None` when the engine runs a job file instead (`runs_job_file`).
    fn invocation(&self, options: &[(String, String)]) -> Option<Invocation>;
    /// How long one run should take, when the options say.
    fn nominal_seconds(&self, options: &[(String, String)]) -> Option<f64>;
    /// The metrics in the program's output.
    fn metrics(&self, stdout: &str, stderr: &str) -> Result<Figures, String>;
    /// The metric adaptive repetitions judge when the file names none (`None`: total IOPS,
    /// `read_iops + write_iops`).
    fn primary_metric(&self) -> Option<String>;

    // What fio has more; the defaults say the engine has none of it.

    /// Runs as a job file with a section per target device (fio), not as an `Invocation`.
    fn runs_job_file(&self) -> bool {
        false
    }
    /// Prints status reports that say when it measured (fio's `--status-interval`), so the
    /// sampler's window is its measured span rather than the whole run.
    fn reports_measured_window(&self) -> bool {
        false
    }
    /// Its output carries latency histograms (fio's json+) that can be checked against its
    /// percentiles and the sampler's device counts (`run::checks`).
    fn checks_its_output(&self) -> bool {
        false
    }
}

/// What a program's output says: metrics, and per-interval series (`kind` "engine").
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    pub(crate) metrics: Vec<(String, f64)>,
    /// (key, seconds at the end of each interval, values).
    pub(crate) series: Vec<(String, Vec<f64>, Vec<f64>)>,
}

/// A server iolab starts before the client and stops after it, in a network namespace.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Server {
    pub(crate) netns: String,
    pub(crate) argv: Vec<String>,
    /// Where it listens: the client starts once a socket there is open.
    pub(crate) port: u16,
    pub(crate) udp: bool,
    /// CPUs the server is pinned to (`server_cpus`), else wherever the scheduler puts it.
    pub(crate) cpus: Option<Vec<u32>>,
}

/// One run of a program engine.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Invocation {
    pub cell_key: String,
    /// The program and its arguments; `{dir}` stands for the run's private directory.
    pub argv: Vec<String>,
    /// The network namespace the client runs in (`ip netns exec`).
    pub netns: Option<String>,
    /// CPUs the client is pinned to.
    pub cpus: Option<Vec<u32>>,
    pub server: Option<Server>,
    /// Killed past this.
    pub time_limit: Duration,
}

/// Runs `argv` inside `netns` when given.
pub(crate) fn in_netns(netns: Option<&str>, argv: &[String]) -> Vec<String> {
    match netns {
        Some(ns) => ["ip", "netns", "exec", ns]
            .iter()
            .map(|s| s.to_string())
            .chain(argv.iter().cloned())
            .collect(),
        None => argv.to_vec(),
    }
}

impl Invocation {
    /// The client's argv as started, in `dir`.
    pub(crate) fn client_argv(&self, dir: &str) -> Vec<String> {
        let argv: Vec<String> = self.argv.iter().map(|a| a.replace("{dir}", dir)).collect();
        in_netns(self.netns.as_deref(), &argv)
    }

    /// What is run, for the store and `--dry-run`: the server (when iolab starts one), the
    /// client with its CPUs.
    pub(crate) fn command_line(&self, dir: &str) -> String {
        let mut out = String::new();
        if let Some(s) = &self.server {
            let pin = s.cpus.as_ref().map_or(String::new(), |c| {
                format!("taskset -c {} ", crate::sys::parse::format_cpulist(c))
            });
            out.push_str(&format!(
                "server: {pin}{} ; client: ",
                command_line(&in_netns(Some(&s.netns), &s.argv))
            ));
        }
        if let Some(c) = &self.cpus {
            out.push_str(&format!(
                "taskset -c {} ",
                crate::sys::parse::format_cpulist(c)
            ));
        }
        out.push_str(&command_line(&self.client_argv(dir)));
        out
    }
}

/// A program engine's run as the runner saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgramRun {
    pub command_line: String,
    pub raw: RawOutput,
    pub elapsed: Duration,
}

/// What a program's run means: the same for real and replayed runs.
pub fn classify(engine: &dyn Engine, raw: &RawOutput) -> (FioStatus, Option<Figures>) {
    let name = engine.name();
    let said = super::process::said("it", &raw.stderr);
    if raw.cancelled {
        return (FioStatus::Cancelled, None);
    }
    if let Some(limit) = raw.timed_out {
        let reason = format!(
            "{name} did not finish within {} s and was killed",
            limit.as_secs()
        );
        return (FioStatus::Crash { reason }, None);
    }
    if let Some(reason) = super::process::too_much_output(name, raw) {
        return (FioStatus::Crash { reason }, None);
    }
    if let Some(sig) = raw.signal {
        let reason = format!("{name} was killed by signal {sig}{said}");
        return (FioStatus::Crash { reason }, None);
    }
    if raw.exit_code != Some(0) {
        let message = format!(
            "{name} exited with status {}{said}",
            raw.exit_code.map_or("?".to_string(), |c| c.to_string())
        );
        return (
            FioStatus::FioError {
                errno: None,
                message,
            },
            None,
        );
    }
    match engine.metrics(&raw.stdout, &raw.stderr) {
        Ok(f) => (FioStatus::Success, Some(f)),
        Err(e) => (
            FioStatus::Crash {
                reason: format!("{name} gave no usable result: {e}{said}"),
            },
            None,
        ),
    }
}

/// The value at a JSON path: `a.b[0].c` (or `a.b.0.c`).
pub(crate) fn json_path<'a>(v: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    let mut cur = v;
    for part in path.split('.') {
        let (key, indices) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            cur = match (cur, key.parse::<usize>()) {
                (serde_json::Value::Array(a), Ok(i)) => a.get(i)?,
                _ => cur.get(key)?,
            };
        }
        for idx in indices.split('[').filter(|s| !s.is_empty()) {
            cur = cur.get(idx.strip_suffix(']')?.parse::<usize>().ok()?)?;
        }
    }
    Some(cur)
}

/// Whether `path` is a JSON path `json_path` reads.
pub(crate) fn is_json_path(path: &str) -> bool {
    !path.is_empty()
        && path.split('.').all(|part| {
            let key = part.split('[').next().unwrap_or("");
            let idx_ok = part.split('[').skip(1).all(|i| {
                i.strip_suffix(']')
                    .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
            });
            (!key.is_empty() || part.starts_with('[')) && idx_ok
        })
}

/// A metric name as iolab stores them: lower case, digits and `_`, starting with a letter.
pub(crate) fn is_metric_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_paths() {
        let v: serde_json::Value =
            serde_json::from_str(r#"{"a": {"b": [{"c": 1.5}, {"c": 2}]}, "n": [[7]]}"#).unwrap();
        assert_eq!(json_path(&v, "a.b[1].c"), Some(&serde_json::json!(2)));
        assert_eq!(json_path(&v, "a.b.0.c"), Some(&serde_json::json!(1.5)));
        assert_eq!(json_path(&v, "n[0][0]"), Some(&serde_json::json!(7)));
        assert_eq!(json_path(&v, "a.x"), None);
        assert!(is_json_path("a.b[1].c") && is_json_path("x"));
        assert!(!is_json_path("a..b") && !is_json_path("a[x]") && !is_json_path(""));
    }

    #[test]
    fn the_command_line_says_server_cpus_and_namespace() {
        let inv = Invocation {
            cell_key: "base".into(),
            argv: vec!["iperf3".into(), "-c".into(), "10.0.0.2".into()],
            netns: Some("a".into()),
            cpus: Some(vec![0, 1]),
            server: Some(Server {
                netns: "b".into(),
                argv: vec!["iperf3".into(), "-s".into()],
                port: 5201,
                udp: false,
                cpus: Some(vec![3]),
            }),
            time_limit: Duration::from_secs(1),
        };
        assert_eq!(
            inv.command_line("/d"),
            "server: taskset -c 3 ip netns exec b iperf3 -s ; client: taskset -c 0-1 ip netns \
             exec a iperf3 -c 10.0.0.2"
        );
    }
}

//! The agent's wire format, and nothing else: one JSON object per line each way. The agent
//! speaks first with a greeting that carries the protocol version, then answers each request
//! line with exactly one answer line, in order. Kept apart from the agent and the transport so
//! both ends share one definition and the codec is tested without a process or a network.
//! Parsing does no I/O and never panics: a line that is not a request becomes an error that
//! names the line, which the agent sends back as an answer.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Bumped whenever a request or answer changes shape; both ends must agree exactly.
pub const PROTOCOL_VERSION: u32 = 6;

/// Lines longer than this are refused without being parsed (a runaway writer, not a request).
pub(crate) const MAX_LINE: usize = 1 << 20;

/// The agent's first line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Greeting {
    /// Always "iolab-agent": tells a greeting from whatever a shell printed first.
    pub(crate) agent: String,
    pub(crate) protocol: u32,
    /// iolab's version with its commit.
    pub(crate) version: String,
}

impl Greeting {
    pub(crate) fn ours() -> Greeting {
        Greeting {
            agent: "iolab-agent".to_string(),
            protocol: PROTOCOL_VERSION,
            version: env!("IOLAB_VERSION").to_string(),
        }
    }
}

/// One request, tagged by `op`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Versions, kernel, hostname and the host's clock.
    Hello,
    /// The machine model, as `iolab inspect --json` prints it.
    Inspect,
    /// Set one knob (a live path of a kind iolab changes) through the agent's journal.
    Set { path: String, value: String },
    /// Set a cell's knobs in order, each checked to hold once all are written: one a later
    /// write changed is written again, once (`Journal::set_all`).
    SetAll { writes: Vec<KnobWrite> },
    /// Put back every knob the agent changed, newest first.
    Restore,
    /// Start the sampler on these devices (kernel names), reading every `interval_ms`.
    SampleStart {
        #[serde(default)]
        devices: Vec<String>,
        /// Devices stacked below those (what a dm or md device is built from, disks or
        /// partitions): watched too, but not locked, as nothing is set on them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        below: Vec<String>,
        interval_ms: u64,
        /// For a run of unknown length: read every `first_ms` at first, slowing down to
        /// `interval_ms` (`sample::Cadence`); absent, every `interval_ms` throughout.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first_ms: Option<u64>,
    },
    /// Stop the sampler and answer with what it measured: over the last `measured_ms` before
    /// I/O on its device stopped when given (fio's runtime on this host), else over
    /// everything it watched.
    SampleStop {
        #[serde(default)]
        measured_ms: Option<u64>,
    },
    /// Start recording a block trace of this device (kernel name) and the devices stacked
    /// `below` it through tracefs, with a trace buffer of `buffer_kb` KiB per CPU (the default
    /// when not given).
    TraceStart {
        device: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        below: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        buffer_kb: Option<u64>,
    },
    /// Stop the trace, analyse it there and answer with its `trace_*` metrics; the files go.
    TraceStop,
    /// The host's preflight findings (governor, SMT, load, ...), as an experiment stores them
    /// in its environment; `sample_ms` is how long it watches the load (0: not at all).
    Preflight {
        #[serde(default)]
        sample_ms: u64,
    },
    /// From now on, a request must come within `ms` of the last one's answer, or the agent
    /// takes the connection for lost: it restores what it set and ends. A network cut that
    /// the controller's ssh notices may reach this end only hours later (TCP keepalive),
    /// leaving the knobs changed and the devices locked meanwhile. Absent `ms`: no limit.
    Lease {
        #[serde(default)]
        ms: Option<u64>,
    },
    /// Start a fio server on `listen` (this host's own address, "10.0.0.1,8765") for jobs on
    /// `device` (kernel name), which it may write only when `writes`; confined, and stopped
    /// when the session ends (`hosts::fio_server`).
    FioServe {
        listen: String,
        device: String,
        #[serde(default)]
        writes: bool,
    },
    /// Restore and end the session.
    Bye,
}

/// One knob of a `set_all`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnobWrite {
    pub path: String,
    pub value: String,
}

/// The agent's answer to one request line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// The request line's number (1 = the first line the agent read).
    pub line: usize,
    pub ok: bool,
    /// The request's op when the line was understood.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) op: Option<String>,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub(crate) result: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Answer {
    pub(crate) fn ok(line: usize, op: &str, result: Value) -> Answer {
        Answer {
            line,
            ok: true,
            op: Some(op.to_string()),
            result,
            error: None,
        }
    }

    pub(crate) fn error(line: usize, op: Option<&str>, error: String) -> Answer {
        Answer {
            line,
            ok: false,
            op: op.map(str::to_string),
            result: Value::Null,
            error: Some(error),
        }
    }
}

/// The `result` of the ops whose answer is not a type of its own elsewhere (`hello`: the
/// host's facts, `inspect`: the machine model, `restore` and `bye`: a `RestoreReport`,
/// `preflight`: environment entries). The controller (`experiment::run::hosts`) reads them by
/// these names. On the wire their keys are sorted: an answer's `result` is a JSON value.
pub(crate) mod results {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use serde::Serialize;

    /// `set`: the knob written, its value before and after, and the journal that holds it.
    #[derive(Debug, Serialize)]
    pub(crate) struct KnobSet {
        pub(crate) path: String,
        pub(crate) old: String,
        pub(crate) new: String,
        pub(crate) journal: PathBuf,
    }

    /// `set_all`: the knobs written again (a later write had changed them), and the journal.
    #[derive(Debug, Serialize)]
    pub(crate) struct KnobsSet {
        pub(crate) again: Vec<String>,
        pub(crate) journal: PathBuf,
    }

    /// `sample_start`: what the sampler watches, and how often it reads.
    #[derive(Debug, Serialize)]
    pub(crate) struct SamplerStarted<'a> {
        pub(crate) devices: &'a [String],
        pub(crate) interval_ms: u64,
    }

    /// `sample_stop`: what the sampler measured (its readings are counted, not sent).
    #[derive(Debug, Serialize)]
    pub(crate) struct Sampled<'a> {
        pub(crate) devices: &'a [String],
        pub(crate) started_unix_ns: f64,
        pub(crate) readings: usize,
        pub(crate) intervals: &'a [crate::sample::Interval],
        pub(crate) summary: &'a Option<crate::sample::Summary>,
        /// What `summary` was taken over, stored with the host's run as its `sample_window`.
        pub(crate) window: &'a crate::experiment::run::align::WindowRecord,
        pub(crate) errors: &'a [String],
    }

    /// `trace_start`: the devices being recorded.
    #[derive(Debug, Serialize)]
    pub(crate) struct TraceStarted {
        pub(crate) device: String,
        /// The devices below it recorded with it (one that cannot be traced is left out).
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub(crate) below: Vec<String>,
    }

    /// `trace_stop`: the trace's `trace_*` metrics (a non-finite figure is null).
    #[derive(Debug, Serialize)]
    pub(crate) struct TraceFigures {
        pub(crate) metrics: BTreeMap<String, f64>,
        /// The MB the trace's bios completed within fio's measured interval as this host's
        /// last `sample_stop` placed it, and how much of that interval its ends may be off
        /// by, in percent; absent when no interval was placed.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub(crate) in_window: Option<(f64, f64)>,
    }

    /// `fio_serve`: the server started, and for what.
    #[derive(Debug, Serialize)]
    pub(crate) struct FioServed<'a> {
        pub(crate) listen: &'a str,
        pub(crate) device: &'a str,
        pub(crate) writes: bool,
        pub(crate) pid: u32,
    }

    /// `bye`: what the session's restore did.
    #[derive(Debug, Serialize)]
    pub(crate) struct Bye {
        pub(crate) restored: crate::knobs::RestoreReport,
    }
}

impl Request {
    /// The op name as it appears on the wire.
    pub(crate) fn op(&self) -> &'static str {
        match self {
            Request::Hello => "hello",
            Request::Inspect => "inspect",
            Request::Set { .. } => "set",
            Request::SetAll { .. } => "set_all",
            Request::Restore => "restore",
            Request::SampleStart { .. } => "sample_start",
            Request::SampleStop { .. } => "sample_stop",
            Request::TraceStart { .. } => "trace_start",
            Request::TraceStop => "trace_stop",
            Request::Preflight { .. } => "preflight",
            Request::Lease { .. } => "lease",
            Request::FioServe { .. } => "fio_serve",
            Request::Bye => "bye",
        }
    }
}

/// At most this much of a bad line is quoted back in an error.
const QUOTE: usize = 80;

fn quoted(text: &str) -> String {
    let mut q: String = text.chars().take(QUOTE).collect();
    if q.len() < text.len() {
        q.push_str("...");
    }
    format!("{q:?}")
}

/// Reads request line number `line` (without its newline). The error names the line, quotes
/// its start and lists what is understood.
pub(crate) fn parse_request(line: usize, text: &str) -> Result<Request, String> {
    const OPS: &str = "hello, inspect, set, set_all, restore, sample_start, sample_stop, \
                       trace_start, trace_stop, preflight, lease, fio_serve, bye";
    if text.len() > MAX_LINE {
        return Err(format!(
            "request line {line}: {} bytes, more than the {MAX_LINE} a request may have",
            text.len()
        ));
    }
    let value: Value = serde_json::from_str(text).map_err(|e| {
        format!(
            "request line {line}: not JSON ({e}): {}; send one JSON object per line, \
             e.g. {{\"op\":\"hello\"}}",
            quoted(text)
        )
    })?;
    let op = match value.get("op") {
        Some(Value::String(op)) => op.clone(),
        _ => {
            return Err(format!(
                "request line {line}: no \"op\" string in {}; ops: {OPS}",
                quoted(text)
            ))
        }
    };
    // serde lets an op without fields (`bye`) through with any fields beside its tag, which
    // `deny_unknown_fields` refuses for every other op: a field sent in vain is a mistake of
    // the sender's, said as the others are.
    let request = serde_json::from_value::<Request>(value.clone());
    let bare = matches!(
        request,
        Ok(Request::Hello
            | Request::Inspect
            | Request::Restore
            | Request::TraceStop
            | Request::Bye)
    );
    let mut fields = value.as_object().into_iter().flat_map(|o| o.keys());
    if let Some(extra) = fields.find(|k| *k != "op").filter(|_| bare) {
        return Err(format!(
            "request line {line}: op {op:?}: unknown field `{extra}`, op {op:?} takes none"
        ));
    }
    request.map_err(|e| {
        if e.to_string().starts_with("unknown variant") {
            format!("request line {line}: unknown op {op:?}; ops: {OPS}")
        } else {
            format!("request line {line}: op {op:?}: {e}")
        }
    })
}

/// One line to send (no newline).
pub(crate) fn encode<T: Serialize>(message: &T) -> String {
    // Serialising these plain structs cannot fail (string keys, no maps with other keys).
    serde_json::to_string(message).unwrap_or_else(|e| {
        format!("{{\"ok\":false,\"line\":0,\"error\":\"cannot encode an answer: {e}\"}}")
    })
}

/// Reads the agent's first line. The error says what came instead.
pub(crate) fn parse_greeting(text: &str) -> Result<Greeting, String> {
    serde_json::from_str::<Greeting>(text)
        .ok()
        .filter(|g| g.agent == "iolab-agent")
        .ok_or_else(|| {
            format!(
                "expected the iolab agent's greeting, got {}",
                quoted(text.trim_end())
            )
        })
}

/// Reads an answer line.
pub(crate) fn parse_answer(text: &str) -> Result<Answer, String> {
    serde_json::from_str(text)
        .map_err(|e| format!("not an agent answer ({e}): {}", quoted(text.trim_end())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip() {
        let all = [
            Request::Hello,
            Request::Inspect,
            Request::Set {
                path: "/sys/block/loop0/queue/nr_requests".into(),
                value: "64".into(),
            },
            Request::SetAll {
                writes: vec![KnobWrite {
                    path: "/sys/block/loop0/queue/scheduler".into(),
                    value: "none".into(),
                }],
            },
            Request::Restore,
            Request::SampleStart {
                devices: vec!["loop0".into()],
                below: vec![],
                interval_ms: 1000,
                first_ms: Some(20),
            },
            Request::SampleStart {
                devices: vec!["dm-0".into()],
                below: vec!["loop1".into(), "sdb2".into()],
                interval_ms: 1000,
                first_ms: None,
            },
            Request::SampleStop { measured_ms: None },
            Request::SampleStop {
                measured_ms: Some(2000),
            },
            Request::TraceStart {
                device: "loop0".into(),
                below: vec![],
                buffer_kb: Some(65536),
            },
            Request::TraceStart {
                device: "dm-0".into(),
                below: vec!["loop1".into()],
                buffer_kb: None,
            },
            Request::Bye,
        ];
        for (i, r) in all.iter().enumerate() {
            let line = encode(r);
            assert!(line.contains(&format!("\"op\":\"{}\"", r.op())), "{line}");
            assert_eq!(&parse_request(i + 1, &line).unwrap(), r);
        }
    }

    #[test]
    fn a_bare_op_parses() {
        assert_eq!(parse_request(1, r#"{"op":"hello"}"#), Ok(Request::Hello));
        assert_eq!(
            parse_request(1, r#"{"op":"sample_stop"}"#),
            Ok(Request::SampleStop { measured_ms: None })
        );
        // From an iolab that sent no buffer size: the agent's default.
        assert_eq!(
            parse_request(1, r#"{"op":"trace_start","device":"sdb"}"#),
            Ok(Request::TraceStart {
                device: "sdb".into(),
                below: vec![],
                buffer_kb: None
            })
        );
        assert_eq!(
            parse_request(2, r#"{"op":"sample_start","interval_ms":5}"#),
            Ok(Request::SampleStart {
                devices: vec![],
                below: vec![],
                interval_ms: 5,
                first_ms: None,
            })
        );
    }

    #[test]
    fn malformed_lines_are_errors_naming_the_line() {
        let e = parse_request(7, "not json at all").unwrap_err();
        assert!(e.starts_with("request line 7: not JSON"), "{e}");
        assert!(e.contains("\"not json at all\""), "{e}");
        let e = parse_request(3, r#"{"op":"reboot"}"#).unwrap_err();
        assert!(
            e.starts_with("request line 3: unknown op \"reboot\""),
            "{e}"
        );
        // The list names every op there is, as serde knows them.
        let ops = e.rsplit("ops: ").next().unwrap().replace(", ", "`, `");
        let serde = serde_json::from_str::<Request>(r#"{"op":"reboot"}"#).unwrap_err();
        assert!(
            serde.to_string().contains(&format!("one of `{ops}`")),
            "{serde} / {ops}"
        );
        let e = parse_request(4, r#"{"path":"x"}"#).unwrap_err();
        assert!(e.starts_with("request line 4: no \"op\""), "{e}");
        let e = parse_request(5, r#"{"op":"set","path":"/sys/x"}"#).unwrap_err();
        assert!(e.starts_with("request line 5: op \"set\""), "{e}");
        assert!(e.contains("value"), "{e}");
        let e =
            parse_request(6, r#"{"op":"set","path":"/sys/x","value":"1","extra":1}"#).unwrap_err();
        assert!(e.contains("extra"), "{e}");
        // Ops without fields too.
        for op in ["hello", "inspect", "restore", "trace_stop", "bye"] {
            let e = parse_request(8, &format!(r#"{{"op":"{op}","device":"sdb"}}"#)).unwrap_err();
            assert_eq!(
                e,
                format!(
                    "request line 8: op \"{op}\": unknown field `device`, op \"{op}\" takes none"
                )
            );
        }
        let e = parse_request(8, r#"[1,2]"#).unwrap_err();
        assert!(e.starts_with("request line 8"), "{e}");
    }

    #[test]
    fn long_lines_are_quoted_short_and_huge_ones_refused() {
        let long = "x".repeat(500);
        let e = parse_request(1, &long).unwrap_err();
        assert!(e.len() < 300, "{e}");
        assert!(e.contains("...\""), "{e}");
        let huge = " ".repeat(MAX_LINE + 1);
        let e = parse_request(2, &huge).unwrap_err();
        assert!(e.contains("more than"), "{e}");
    }

    #[test]
    fn greeting_and_answers_round_trip() {
        let g = Greeting::ours();
        assert_eq!(parse_greeting(&encode(&g)), Ok(g.clone()));
        assert_eq!(g.protocol, PROTOCOL_VERSION);
        let e = parse_greeting("Welcome to host7!\n").unwrap_err();
        assert!(e.contains("\"Welcome to host7!\""), "{e}");
        let e = parse_greeting(r#"{"agent":"other","protocol":1,"version":"x"}"#).unwrap_err();
        assert!(e.contains("expected the iolab agent's greeting"), "{e}");
        let a = Answer::ok(3, "hello", serde_json::json!({"x": 1}));
        assert_eq!(parse_answer(&encode(&a)), Ok(a));
        let b = Answer::error(4, None, "request line 4: bad".into());
        let line = encode(&b);
        assert!(!line.contains("result"), "{line}");
        assert_eq!(parse_answer(&line), Ok(b));
        assert!(parse_answer("garbage").is_err());
    }
}

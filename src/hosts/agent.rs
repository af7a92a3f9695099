//! `iolab agent`: iolab controlled by another iolab, over whatever carries stdin and stdout
//! (in practice `ssh HOST -- iolab agent`). It greets with the protocol version, then answers
//! one request line with one answer line (`protocol`). Knobs go through the same `Journal` as
//! `iolab run` (kinds allow-list, machine-wide locks, the host's usual state directory), so a
//! killed agent leaves a journal `iolab restore` replays on that host.
//!
//! A controller that vanishes must never leave a host's knobs changed: when the input closes
//! (the SSH connection died, or the controller closed it), when a write of an answer fails,
//! or on SIGHUP/SIGTERM/SIGINT, the agent restores its journal and stops its sampler before
//! it exits. Requests are read on their own thread so a signal is noticed while the main
//! thread waits for the next line. Nothing a request says can make the agent panic: every
//! failure is an answer with `ok: false` that names the request line.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

use super::facts;
use super::protocol::{self, results, Answer, Greeting, Request};
use crate::experiment::file::{BUFFER_KB_MAX, BUFFER_KB_MIN};
use crate::experiment::run::align;
use crate::knobs::{Journal, RestoreReport};
use crate::sample::{self, SamplerHandle, Watch};
use crate::sys::lock::Resource;
use crate::sys::SysRoot;

/// Why the session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The controller said `bye`.
    Bye,
    /// The input closed (or could not be read) without a `bye`.
    InputClosed,
    /// An answer could not be written: nobody is listening any more.
    OutputClosed,
    /// A signal arrived (its number).
    Signal(i32),
    /// No request came within the lease (`Request::Lease`): the connection is taken for lost.
    LeaseExpired,
}

/// How the session ended and whether the knobs came back (an error says which did not).
#[derive(Debug)]
pub(crate) struct Outcome {
    #[allow(dead_code)] // only the tests read it; `iolab agent` needs restore_error alone
    pub ended: Ended,
    pub restore_error: Option<String>,
}

/// One line from the input thread: its text, or why it is not text.
enum Incoming {
    Line(Result<String, String>),
    Closed,
}

/// What the session has changed or started on this host.
struct Session {
    root: SysRoot,
    journal: Option<Journal>,
    sampler: Option<SamplerHandle>,
    trace: Option<super::agent_trace::AgentTrace>,
    /// fio's measured interval as the last `sample_stop` placed it, on the monotonic clock,
    /// for the trace stopped after it to count its bytes over.
    window: Option<align::TraceWindow>,
    /// `fio --version`, asked once.
    fio: Option<Option<String>>,
    /// How long after an answer the next request must come (`Request::Lease`).
    lease: Option<Duration>,
    /// The fio server started for this session (`Request::FioServe`).
    fio_server: Option<super::fio_server::Served>,
}

/// Serves requests from `input` to `output` until `bye`, the input's end, a failed write or
/// `signal()` naming a signal that arrived (`knobs::signals::Interrupt`); then restores every knob the session set.
pub(crate) fn serve(
    input: impl Read + Send + 'static,
    mut output: impl Write,
    signal: &dyn Fn() -> Option<i32>,
) -> Outcome {
    let mut session = Session {
        root: SysRoot::live(),
        journal: None,
        sampler: None,
        trace: None,
        window: None,
        fio: None,
        lease: None,
        fio_server: None,
    };
    let lines = spawn_reader(input);
    let ended = if send(&mut output, &protocol::encode(&Greeting::ours())) {
        session.serve_lines(&lines, &mut output, signal)
    } else {
        Ended::OutputClosed
    };
    let restore_error = session.finish().err();
    Outcome {
        ended,
        restore_error,
    }
}

/// Reads lines on a thread of their own (a blocking read would hide a signal).
fn spawn_reader(input: impl Read + Send + 'static) -> mpsc::Receiver<Incoming> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(input);
        loop {
            let mut buf = Vec::new();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => {
                    let _ = tx.send(Incoming::Closed);
                    return;
                }
                Ok(_) => {
                    while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                        buf.pop();
                    }
                    let line = String::from_utf8(buf).map_err(|e| e.utf8_error().to_string());
                    if tx.send(Incoming::Line(line)).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

/// Writes one line and flushes; false when the other end is gone.
fn send(output: &mut impl Write, line: &str) -> bool {
    writeln!(output, "{line}")
        .and_then(|()| output.flush())
        .is_ok()
}

impl Session {
    fn serve_lines(
        &mut self,
        lines: &mpsc::Receiver<Incoming>,
        output: &mut impl Write,
        signal: &dyn Fn() -> Option<i32>,
    ) -> Ended {
        let mut number = 0;
        let mut deadline: Option<std::time::Instant> = None;
        loop {
            if let Some(sig) = signal() {
                return Ended::Signal(sig);
            }
            let text = match lines.recv_timeout(Duration::from_millis(50)) {
                Err(mpsc::RecvTimeoutError::Timeout)
                    if deadline.is_some_and(|d| std::time::Instant::now() >= d) =>
                {
                    return Ended::LeaseExpired
                }
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) | Ok(Incoming::Closed) => {
                    return Ended::InputClosed
                }
                Ok(Incoming::Line(text)) => text,
            };
            number += 1;
            let request = text
                .map_err(|why| format!("request line {number}: not UTF-8 text ({why})"))
                .and_then(|t| protocol::parse_request(number, &t));
            let (answer, bye) = match request {
                Err(e) => (Answer::error(number, None, e), false),
                Ok(r) => {
                    let op = r.op();
                    let bye = r == Request::Bye;
                    let answer = match self.handle(r) {
                        Ok(result) => Answer::ok(number, op, result),
                        Err(e) => {
                            Answer::error(number, Some(op), format!("request line {number}: {e}"))
                        }
                    };
                    (answer, bye)
                }
            };
            if !send(output, &protocol::encode(&answer)) {
                return Ended::OutputClosed;
            }
            deadline = self.lease.map(|d| std::time::Instant::now() + d);
            if bye {
                return Ended::Bye;
            }
        }
    }

    fn handle(&mut self, request: Request) -> Result<Value, String> {
        match request {
            Request::Hello => {
                let fio = self.fio.get_or_insert_with(facts::fio_version).clone();
                json_of(&facts::hello(&self.root, fio))
            }
            Request::Inspect => {
                let machine = crate::model::Machine::read(&self.root).map_err(|e| e.to_string())?;
                json_of(&machine)
            }
            Request::Set { path, value } => self.set(path, value),
            Request::SetAll { writes } => self.set_all(&writes),
            Request::Restore => json_of(&self.restore()?),
            Request::Lease { ms } => {
                self.lease = ms.map(Duration::from_millis);
                Ok(serde_json::json!({ "lease_ms": ms }))
            }
            Request::SampleStart {
                devices,
                below,
                interval_ms,
                first_ms,
            } => self.sample_start((&devices, &below), interval_ms, first_ms),
            Request::SampleStop { measured_ms } => self.sample_stop(measured_ms),
            Request::TraceStart {
                device,
                below,
                buffer_kb,
            } => self.trace_start(device, below, buffer_kb),
            Request::TraceStop => self.trace_stop(),
            Request::Preflight { sample_ms } => {
                let sample = Duration::from_millis(sample_ms.min(10_000));
                let findings = crate::preflight::collect(&self.root, sample);
                json_of(&crate::preflight::to_environment(&findings))
            }
            Request::FioServe {
                listen,
                device,
                writes,
            } => self.fio_serve(&listen, &device, writes),
            Request::Bye => {
                // The server stops before the knobs its jobs ran under come back.
                self.fio_server = None;
                let restored = self.restore()?;
                json_of(&results::Bye { restored })
            }
        }
    }

    /// Sets one knob through the journal, and says what it was.
    fn set(&mut self, path: String, value: String) -> Result<Value, String> {
        // Said here in the agent's words; the journal checks again before writing.
        crate::knobs::kinds::classify(&path)
            .map_err(|why| format!("{path}: not a knob iolab sets: {why}"))?;
        let journal = self.journal()?;
        let old = journal.set(&path, &value).map_err(|e| e.to_string())?;
        json_of(&results::KnobSet {
            old,
            new: value,
            journal: journal.path(),
            path,
        })
    }

    /// Sets several knobs at once (all of them are checked before any is written).
    fn set_all(&mut self, writes: &[super::protocol::KnobWrite]) -> Result<Value, String> {
        for w in writes {
            crate::knobs::kinds::classify(&w.path)
                .map_err(|why| format!("{}: not a knob iolab sets: {why}", w.path))?;
        }
        let journal = self.journal()?;
        let again = journal
            .set_all(writes.iter().map(|w| (w.path.as_str(), w.value.as_str())))
            .map_err(|e| e.to_string())?;
        json_of(&results::KnobsSet {
            again,
            journal: journal.path(),
        })
    }

    /// Stops the sampler and sums its readings over the window fio measured in (placed here,
    /// where the readings are; kept for the trace's figures).
    fn sample_stop(&mut self, measured_ms: Option<u64>) -> Result<Value, String> {
        let handle = self
            .sampler
            .take()
            .ok_or("no sampler is running: send sample_start first")?;
        let run = handle.stop();
        let aligned = match measured_ms {
            Some(ms) => align::align_to_activity(&run, ms),
            None => align::whole(&run, "fio reported no runtime for this host".into()),
        };
        self.window = align::activity_window_on_monotonic(
            &run,
            &aligned.window,
            None,
            crate::sys::realtime_minus_monotonic_ns(),
        );
        json_of(&results::Sampled {
            devices: &run.devices,
            started_unix_ns: run.started_unix_ns,
            readings: run.readings.len(),
            intervals: &run.intervals,
            summary: &aligned.summary,
            window: &aligned.window,
            errors: &run.errors,
        })
    }

    /// Starts recording `device` (locked) and the devices stacked `below` it.
    fn trace_start(
        &mut self,
        device: String,
        below: Vec<String>,
        buffer_kb: Option<u64>,
    ) -> Result<Value, String> {
        if self.trace.is_some() {
            return Err("a trace is already recording: send trace_stop first".into());
        }
        // Within what an experiment file may ask for: the kernel takes it on every CPU.
        let buffer_kb = buffer_kb
            .map(|kb| kb.clamp(BUFFER_KB_MIN, BUFFER_KB_MAX))
            .unwrap_or_else(crate::experiment::run::trace::auto_buffer_kb);
        self.lock_devices(std::slice::from_ref(&device))?;
        let t = super::agent_trace::AgentTrace::start(
            &crate::knobs::state_dir(),
            (&device, &below),
            buffer_kb,
        )?;
        let below = t.below();
        self.trace = Some(t);
        json_of(&results::TraceStarted { device, below })
    }

    /// Stops the recording and analyses it here, over the sampler's window when there was one.
    fn trace_stop(&mut self) -> Result<Value, String> {
        let t = self
            .trace
            .take()
            .ok_or("no trace is recording: send trace_start first")?;
        let window = self.window.take();
        let analysed = t.stop(window.map(|w| (w.start_ns, w.end_ns)))?;
        json_of(&results::TraceFigures {
            metrics: analysed.metrics.into_iter().collect(),
            in_window: analysed
                .devices
                .first()
                .copied()
                .flatten()
                .and_then(|c| c.in_window_mb)
                .zip(window.map(|w| w.uncertainty_pct)),
        })
    }

    /// Starts the sampler on `devices` (locked, as a run sets their knobs) and the devices
    /// stacked `below` them (only read).
    fn sample_start(
        &mut self,
        (devices, below): (&[String], &[String]),
        interval_ms: u64,
        first_ms: Option<u64>,
    ) -> Result<Value, String> {
        if self.sampler.is_some() {
            return Err("a sampler is already running: send sample_stop first".into());
        }
        // A new run: the last one's interval says nothing of it.
        self.window = None;
        if interval_ms == 0 || first_ms == Some(0) {
            return Err("interval_ms and first_ms must be at least 1".into());
        }
        let machine = crate::model::Machine::read(&self.root).map_err(|e| e.to_string())?;
        let mut watches = Vec::new();
        for d in devices {
            if machine.device(d).is_none() {
                return Err(format!(
                    "no block device {d:?} on this host (`iolab inspect` lists them)"
                ));
            }
            watches.push(Watch::of(&machine, d));
        }
        for d in below {
            known_below(&machine, d)?;
            watches.push(Watch::of(&machine, d));
        }
        self.lock_devices(devices)?;
        let cadence = sample::Cadence {
            first: Duration::from_millis(first_ms.unwrap_or(interval_ms)),
            max: Duration::from_millis(interval_ms),
        };
        let handle = sample::start(&self.root, &watches, cadence).map_err(|e| e.to_string())?;
        self.sampler = Some(handle);
        json_of(&results::SamplerStarted {
            devices,
            interval_ms,
        })
    }

    fn fio_serve(&mut self, listen: &str, device: &str, writes: bool) -> Result<Value, String> {
        if let Some(s) = &self.fio_server {
            return Err(format!(
                "a fio server is already running for this session (on {}, pid {})",
                s.listen,
                s.pid()
            ));
        }
        // Its jobs drive the device: no other iolab may, while the session lasts.
        self.lock_devices(&[device.to_string()])?;
        let served = super::fio_server::start(listen, device, writes)?;
        let answer = json_of(&results::FioServed {
            listen: &served.listen,
            device: &served.device,
            writes: served.writes,
            pid: served.pid(),
        });
        self.fio_server = Some(served);
        answer
    }

    /// The session's journal, begun at its first use.
    fn journal(&mut self) -> Result<&mut Journal, String> {
        if self.journal.is_none() {
            self.journal = Some(Journal::begin().map_err(|e| e.to_string())?);
        }
        Ok(self.journal.as_mut().expect("begun above"))
    }

    /// Holds the machine-wide locks of the devices this session drives until it ends, as a
    /// run on this host holds its own: another iolab, here or controlling this host, cannot
    /// drive or change them meanwhile (a controller varying only fio options sets no knob,
    /// which would have taken them).
    fn lock_devices(&mut self, devices: &[String]) -> Result<(), String> {
        // A lock file is named after its device, and stays: none for a name the controller
        // made up (a newline, an escape sequence, a device this host does not have).
        for d in devices {
            let plain = crate::target::remote_device_name(d).is_ok_and(|n| n == *d);
            if !plain || !self.root.exists(&format!("/sys/block/{d}")) {
                return Err(format!(
                    "no block device {d:?} on this host (`iolab inspect` lists them)"
                ));
            }
        }
        let resources = devices.iter().map(|d| Resource::Device(d.clone()));
        self.journal()?.lock(resources).map_err(|e| e.to_string())
    }

    /// Puts back what this session set (nothing set: an empty report). The journal stays,
    /// empty, with the session's locks, until the session ends.
    fn restore(&mut self) -> Result<RestoreReport, String> {
        let Some(journal) = self.journal.as_mut() else {
            return Ok(RestoreReport::default());
        };
        // On failure what is left stays in the journal: a later restore (or the exit) tries
        // again.
        journal.restore().map_err(|e| e.to_string())
    }

    /// The end of the session, however it came: the sampler stops, the knobs come back.
    fn finish(&mut self) -> Result<(), String> {
        self.fio_server = None;
        if let Some(handle) = self.sampler.take() {
            drop(handle.stop());
        }
        // Stops the recording and removes its files.
        self.trace = None;
        self.restore().map(drop)
    }
}

fn json_of<T: serde::Serialize>(value: &T) -> Result<Value, String> {
    serde_json::to_value(value).map_err(|e| format!("cannot encode the answer: {e}"))
}

/// Refuses a device to watch or record below a target unless this host's model has it, as a
/// disk or a partition: the name comes from the controller, and goes into sysfs paths.
pub(super) fn known_below(machine: &crate::model::Machine, name: &str) -> Result<(), String> {
    let known = machine.device(name).is_some()
        || machine
            .devices
            .iter()
            .any(|d| d.partitions.iter().any(|p| p.name == name));
    if known {
        Ok(())
    } else {
        Err(format!(
            "no block device or partition {name:?} on this host (`iolab inspect` lists them)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer the test reads back after the session.
    #[derive(Clone, Default)]
    struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn session(input: &'static [u8]) -> (Outcome, Vec<String>) {
        let out = Shared::default();
        let outcome = serve(input, out.clone(), &|| None);
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        (outcome, text.lines().map(str::to_string).collect())
    }

    #[test]
    fn greets_answers_each_line_and_ends_on_bye() {
        let (outcome, lines) = session(
            b"{\"op\":\"hello\"}\nnot json\n{\"op\":\"fly\"}\n\xff\n{\"op\":\"bye\"}\nhello\n",
        );
        assert_eq!(outcome.ended, Ended::Bye);
        assert!(outcome.restore_error.is_none());
        let greeting = protocol::parse_greeting(&lines[0]).unwrap();
        assert_eq!(greeting.protocol, protocol::PROTOCOL_VERSION);
        let answers: Vec<Answer> = lines[1..]
            .iter()
            .map(|l| protocol::parse_answer(l).unwrap())
            .collect();
        // Nothing is read after bye.
        assert_eq!(answers.len(), 5, "{lines:?}");
        assert!(answers[0].ok);
        let hello: facts::Hello = serde_json::from_value(answers[0].result.clone()).unwrap();
        let now = crate::store::time::now_unix();
        assert!((now - hello.clock_unix).abs() < 60.0, "{hello:?}");
        for (a, line, what) in [
            (&answers[1], 2, "not JSON"),
            (&answers[2], 3, "unknown op \"fly\""),
            (&answers[3], 4, "not UTF-8"),
        ] {
            assert!(!a.ok);
            assert_eq!(a.line, line);
            let e = a.error.as_deref().unwrap();
            assert!(e.starts_with(&format!("request line {line}: ")), "{e}");
            assert!(e.contains(what), "{e}");
        }
        assert!(answers[4].ok && answers[4].op.as_deref() == Some("bye"));
    }

    /// Input that gives `text`, then stays open with nothing more: a controller cut off
    /// without the connection closing.
    struct Silent(&'static [u8]);

    impl Read for Silent {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0.is_empty() {
                // The reader thread waits here for good, as on a dead connection.
                loop {
                    std::thread::park();
                }
            }
            let n = buf.len().min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    /// With a lease, a session whose controller falls silent ends and restores on its own;
    /// without one it waits (here, for the test's limit).
    #[test]
    fn a_lease_ends_a_session_whose_controller_fell_silent() {
        let out = Shared::default();
        let started = std::time::Instant::now();
        let outcome = serve(
            Silent(b"{\"op\":\"lease\",\"ms\":300}\n"),
            out.clone(),
            &|| None,
        );
        let took = started.elapsed();
        assert_eq!(outcome.ended, Ended::LeaseExpired);
        assert!(outcome.restore_error.is_none());
        assert!(took >= Duration::from_millis(300), "{took:?}");
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let answer = protocol::parse_answer(text.lines().nth(1).unwrap()).unwrap();
        assert!(answer.ok && answer.result["lease_ms"] == 300, "{text}");
        // Ended by a lease of none: only the signal (standing in for the wait) ends it.
        let asked = std::time::Instant::now();
        let outcome = serve(
            Silent(b"{\"op\":\"lease\",\"ms\":50}\n{\"op\":\"lease\"}\n"),
            Shared::default(),
            &|| (asked.elapsed() > Duration::from_millis(500)).then_some(15),
        );
        assert_eq!(outcome.ended, Ended::Signal(15));
    }

    #[test]
    fn the_input_closing_ends_the_session_and_errors_are_answers() {
        let (outcome, lines) = session(
            b"{\"op\":\"sample_stop\"}\n{\"op\":\"sample_start\",\"devices\":[\"no-such-disk\"],\"interval_ms\":10}\n{\"op\":\"restore\"}\n",
        );
        assert_eq!(outcome.ended, Ended::InputClosed);
        let answers: Vec<Answer> = lines[1..]
            .iter()
            .map(|l| protocol::parse_answer(l).unwrap())
            .collect();
        assert_eq!(answers.len(), 3);
        assert!(answers[0]
            .error
            .as_deref()
            .unwrap()
            .contains("no sampler is running"));
        assert!(answers[1]
            .error
            .as_deref()
            .unwrap()
            .contains("\"no-such-disk\""));
        assert!(answers[2].ok, "{:?}", answers[2]);
    }

    #[test]
    fn set_refuses_files_that_are_not_knobs_before_any_journal() {
        let (_, lines) = session(
            b"{\"op\":\"set\",\"path\":\"/etc/passwd\",\"value\":\"x\"}\n\
              {\"op\":\"set_all\",\"writes\":[{\"path\":\"/etc/passwd\",\"value\":\"x\"}]}\n",
        );
        for (i, line) in lines[1..].iter().enumerate() {
            let e = protocol::parse_answer(line).unwrap().error.unwrap();
            let want = format!(
                "request line {}: /etc/passwd: not a knob iolab sets: ",
                i + 1
            );
            assert!(e.starts_with(&want), "{e}");
        }
        assert_eq!(lines.len(), 3);
    }
}

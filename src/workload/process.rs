//! Running a program the way iolab runs every workload: in its own process group (so a
//! cancel or a time limit stops the program and everything it forked), told by the kernel to
//! stop when iolab dies, optionally pinned to CPUs, with its output collected. fio and the
//! program engines (`command`, `iperf3`, `sockperf`) share it, so Ctrl-C means the same for
//! all of them.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::exec_once::ExecOnce;
use super::runner::{CancelToken, RawOutput, POLL};

/// When to stop a program that has not stopped by itself.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// Killed if it runs longer than this.
    pub time_limit: Option<Duration>,
    /// How long it gets to finish after SIGTERM before SIGKILL.
    pub grace: Duration,
    pub cancel: CancelToken,
}

/// Kills the program's whole process group if the run is abandoned (panic, early return).
pub(crate) struct GroupGuard {
    pub child: std::process::Child,
    done: bool,
}

impl GroupGuard {
    pub(crate) fn signal(&self, sig: i32) {
        // The program was started as a process-group leader, so its pid is the group id.
        let pgid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) with a negative pid signals a process group; no memory is touched.
        unsafe {
            libc::kill(-pgid, sig);
        }
    }

    /// Stops the group: SIGTERM, then SIGKILL after `grace`; waits for the leader.
    pub(crate) fn stop(mut self, grace: Duration) {
        self.signal(libc::SIGTERM);
        let start = Instant::now();
        while start.elapsed() < grace {
            if let Ok(Some(_)) = self.child.try_wait() {
                self.done = true;
                // Its children may outlive it: they are in the group too.
                self.signal(libc::SIGKILL);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Drop kills the group and reaps the leader.
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if !self.done {
            self.signal(libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// Starts `cmd` as the leader of a new process group with piped output, pinned to `cpus`
/// when given (the affinity is inherited by whatever it execs, `ip netns exec` included).
pub(crate) fn spawn_group(cmd: Command, cpus: Option<&[u32]>) -> Result<GroupGuard> {
    spawn_group_with(cmd, cpus, Stdio::null(), None)
}

/// [`spawn_group`] with `stdin` as the program's standard input; started by `once`, after
/// every other preparation, when given (a program that may start no other).
fn spawn_group_with(
    mut cmd: Command,
    cpus: Option<&[u32]>,
    stdin: Stdio,
    once: Option<ExecOnce>,
) -> Result<GroupGuard> {
    cmd.stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // Built before the fork: the child may not allocate.
    let set = cpus.map(|cpus| {
        // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET only write inside it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_ZERO(&mut set);
            for &c in cpus {
                if (c as usize) < libc::CPU_SETSIZE as usize {
                    libc::CPU_SET(c as usize, &mut set);
                }
            }
            set
        }
    });
    // The program runs in its own process group (so a terminal's Ctrl-C reaches iolab first
    // and iolab decides), which also means nothing stops it if iolab is SIGKILLed. Ask the
    // kernel to send it SIGTERM when the thread that started it dies. Its SIGTERM handler may
    // print to a pipe nobody reads any more: with SIGPIPE at its default it would die there
    // and orphan its children (fio's job processes).
    // SAFETY: prctl, signal and sched_setaffinity are async-signal-safe and touch no memory
    // of the parent.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
            if let Some(set) = &set {
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    if let Some(once) = once {
        once.apply_to(&mut cmd);
    }
    let program = cmd.get_program().to_string_lossy().into_owned();
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot start {program}"))?;
    Ok(GroupGuard { child, done: false })
}

/// Runs `cmd` to its end (or until cancelled or over its time limit) and collects its output.
pub(crate) fn run(cmd: Command, cpus: Option<&[u32]>, limits: &Limits) -> Result<RawOutput> {
    run_fed(cmd, cpus, limits, None, None)
}

/// [`run`], with `input` written to the program's standard input (then closed) when given,
/// and started by `once` when given (`exec_once`: it may then start no other program).
pub(crate) fn run_fed(
    cmd: Command,
    cpus: Option<&[u32]>,
    limits: &Limits,
    input: Option<&[u8]>,
    once: Option<ExecOnce>,
) -> Result<RawOutput> {
    let stdin = match input {
        Some(_) => Stdio::piped(),
        None => Stdio::null(),
    };
    let mut guard = spawn_group_with(cmd, cpus, stdin, once)?;
    // Written from a thread: a program that prints before it reads must not block us both.
    let writer = input.map(|bytes| {
        let (bytes, pipe) = (bytes.to_vec(), guard.child.stdin.take());
        std::thread::spawn(move || {
            if let Some(mut p) = pipe {
                let _ = std::io::Write::write_all(&mut p, &bytes);
            }
        })
    });
    let stdout = reader_thread(guard.child.stdout.take());
    let stderr = reader_thread(guard.child.stderr.take());
    let start = Instant::now();
    let mut raw = RawOutput::default();
    let mut term_sent: Option<Instant> = None;
    let status = loop {
        if let Some(status) = guard.child.try_wait()? {
            break status;
        }
        let over_time = limits.time_limit.filter(|&l| start.elapsed() > l);
        if term_sent.is_none() && (limits.cancel.is_cancelled() || over_time.is_some()) {
            raw.cancelled = limits.cancel.is_cancelled();
            raw.timed_out = over_time;
            guard.signal(libc::SIGTERM);
            term_sent = Some(Instant::now());
        }
        if term_sent.is_some_and(|t| t.elapsed() > limits.grace) {
            guard.signal(libc::SIGKILL);
        }
        std::thread::sleep(POLL);
    };
    guard.done = true;
    if let Some(w) = writer {
        let _ = w.join();
    }
    raw.exit_code = status.code();
    raw.signal = status.signal();
    let stdout = stdout.join().unwrap_or_default();
    raw.stdout = stdout.text;
    raw.stdout_left_out = stdout.left_out;
    raw.stderr = stderr.join().unwrap_or_default().text;
    Ok(raw)
}

/// The most of one pipe's output kept. fio's JSON for many jobs and hosts is a few MiB; a
/// program (or a fio server sending text to its client) that prints without end must not
/// take the machine's memory.
pub(crate) const OUTPUT_KEPT: u64 = 64 << 20;

/// A pipe's output as read by [`reader_thread`]: its first [`OUTPUT_KEPT`] bytes, and how
/// many more it held.
#[derive(Debug, Default)]
pub(crate) struct Captured {
    pub text: String,
    pub left_out: u64,
}

/// Reads a pipe to its end on a thread of its own, keeping its first [`OUTPUT_KEPT`] bytes.
/// The rest is read and counted, so the program never blocks on a full pipe.
pub(crate) fn reader_thread<R: Read + Send + 'static>(
    pipe: Option<R>,
) -> std::thread::JoinHandle<Captured> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let mut left_out = 0;
        if let Some(mut p) = pipe {
            let _ = (&mut p).take(OUTPUT_KEPT).read_to_end(&mut bytes);
            left_out = std::io::copy(&mut p, &mut std::io::sink()).unwrap_or(0);
        }
        Captured {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            left_out,
        }
    })
}

/// What `Command::output` gives, but with at most [`OUTPUT_KEPT`] bytes of each stream kept:
/// for a program on another host, whose output iolab does not control.
pub(crate) fn output_kept(
    cmd: &mut Command,
) -> std::io::Result<(std::process::ExitStatus, Captured, Captured)> {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let stdout = reader_thread(child.stdout.take());
    let stderr = reader_thread(child.stderr.take());
    let status = child.wait()?;
    let join = |h: std::thread::JoinHandle<Captured>| h.join().unwrap_or_default();
    Ok((status, join(stdout), join(stderr)))
}

/// Keeps the last `limit` bytes a pipe gives in `into`, from a thread of its own, until the
/// pipe ends: what a long-lived program said last, for messages, in bounded memory.
pub(crate) fn keep_tail<R: Read + Send + 'static>(
    mut pipe: R,
    into: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    limit: usize,
) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = pipe.read(&mut buf) {
            let Ok(mut kept) = into.lock() else { return };
            kept.extend_from_slice(&buf[..n]);
            let excess = kept.len().saturating_sub(limit);
            kept.drain(..excess);
        }
    });
}

/// The message for output beyond [`OUTPUT_KEPT`], or `None` when all of it was kept: such a
/// run is not judged from the part that was read.
pub(crate) fn too_much_output(program: &str, raw: &RawOutput) -> Option<String> {
    (raw.stdout_left_out > 0).then(|| {
        format!(
            "{program} printed more than {} MiB on its standard output ({} bytes more were \
             read and left out), so its result cannot be read whole",
            OUTPUT_KEPT >> 20,
            raw.stdout_left_out
        )
    })
}

/// A command line as a shell would take it back.
pub(crate) fn shell_quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=./:,+@%".contains(c))
    {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// `argv` joined into one shell-quoted line.
pub(crate) fn command_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `; WHO said: ...` with the last three non-empty lines of a program's stderr, or nothing.
pub(crate) fn said(who: &str, stderr: &str) -> String {
    let plain = without_colours(stderr);
    let lines: Vec<&str> = plain.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return String::new();
    }
    let tail = &lines[lines.len().saturating_sub(3)..];
    format!("; {who} said: {}", tail.join(" | "))
}

/// `text` without its terminal colour codes (sockperf colours its banner and notes even into
/// a pipe): escaped for the terminal, they would show as `\u{1b}[2;35m` among the words.
/// Any other control character stays, for the escaping to show.
fn without_colours(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('\u{1b}') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            // Parameters and intermediates, then one final byte (ECMA-48 CSI).
            for c in chars.by_ref() {
                if ('\u{40}'..='\u{7e}').contains(&c) {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sockperf's coloured lines, as it printed them failing to bind.
    #[test]
    fn what_a_program_said_is_told_without_its_colours() {
        let stderr = "sockperf: \u{1b}[2;35m== version #3.7-no.git == \u{1b}[0m\n\
                      sockperf: ERROR: bind\u{7}\n";
        assert_eq!(
            said("the server", stderr),
            "; the server said: sockperf: == version #3.7-no.git ==  | sockperf: ERROR: \
             bind\u{7}"
        );
    }

    /// A program that prints more than is kept is read to its end, so it finishes, but its
    /// run is not judged from the part kept.
    #[test]
    fn output_past_what_is_kept_is_counted_and_fails_the_run() {
        let mut cmd = Command::new("head");
        cmd.args(["-c", "70000000", "/dev/zero"]);
        let limits = Limits {
            time_limit: Some(Duration::from_secs(60)),
            grace: Duration::from_secs(1),
            cancel: CancelToken::new(),
        };
        let raw = run(cmd, None, &limits).unwrap();
        assert_eq!(raw.exit_code, Some(0));
        assert_eq!(raw.stdout.len() as u64, OUTPUT_KEPT);
        assert_eq!(raw.stdout_left_out, 70_000_000 - OUTPUT_KEPT);
        let why = too_much_output("head", &raw).unwrap();
        assert!(why.starts_with("head printed more than 64 MiB"), "{why}");
        let job = crate::workload::JobBuilder::new("j")
            .base([("rw", "read")])
            .filename("/dev/loop0")
            .build()
            .unwrap();
        let (status, _) = crate::workload::runner::classify(&job, &raw);
        assert!(
            matches!(&status, crate::workload::FioStatus::Crash { reason } if reason.starts_with("fio printed more than 64 MiB")),
            "{status:?}"
        );
    }
}

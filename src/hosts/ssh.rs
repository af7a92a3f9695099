//! The control channel to another host: the OpenSSH client running `iolab agent` there.
//! iolab adds no transport and handles no password: `ssh -T -o BatchMode=yes` uses the user's
//! keys, agent and `~/.ssh/config` as they are (extra options, such as `-F FILE`, come from
//! `$IOLAB_SSH`, split at whitespace), and a host that would ask for a password fails at once.
//! The agent's greeting is checked before anything else is sent: another protocol version is
//! refused with what to do. `--copy-binary` copies this very binary into a directory iolab
//! owns on the host (`/var/lib/iolab/bin`) through `ssh HOST 'cat > ...'` when the host lacks
//! iolab or runs another protocol; nothing is copied unless asked.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use serde_json::Value;

use super::protocol::{self, Greeting, Request, PROTOCOL_VERSION};
use crate::workload::process::{keep_tail, output_kept, OUTPUT_KEPT};

/// How much of ssh's standard error is kept for messages: its last bytes.
const SSH_SAID_KEPT: usize = 16 * 1024;

/// How long a session's end waits for its agent: the agent gives its fio server 3 s to stop
/// before killing it, then restores its knobs.
const AGENT_ENDS_WITHIN: Duration = Duration::from_secs(5);

/// Where `--copy-binary` puts iolab on a host by default.
pub(crate) const REMOTE_DIR: &str = "/var/lib/iolab/bin";

/// How to reach hosts.
#[derive(Debug, Clone)]
pub struct SshOptions {
    /// Options put before the host on every ssh command line (`$IOLAB_SSH`).
    pub extra: Vec<String>,
    /// The iolab to run on the host: a name on its PATH or a path.
    pub remote_iolab: String,
    /// Where `copy_binary` puts this binary on the host.
    pub remote_dir: String,
    /// Copy this binary to a host that lacks iolab or speaks another protocol.
    pub copy_binary: bool,
    /// How long to wait for the greeting (connecting, authenticating, starting the agent).
    pub connect_timeout: Duration,
    /// How long to wait for one answer.
    pub answer_timeout: Duration,
}

impl Default for SshOptions {
    fn default() -> SshOptions {
        SshOptions {
            extra: from_env(),
            remote_iolab: "iolab".to_string(),
            remote_dir: REMOTE_DIR.to_string(),
            copy_binary: false,
            connect_timeout: Duration::from_secs(30),
            answer_timeout: Duration::from_secs(120),
        }
    }
}

/// `$IOLAB_SSH` split at whitespace (no shell quoting: a path with spaces belongs in an ssh
/// config file, named with `-F`).
pub(crate) fn from_env() -> Vec<String> {
    std::env::var("IOLAB_SSH")
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Why `dest` is not an SSH destination iolab passes to ssh, if it is not: an allow-list of
/// what destinations are made of (`user@host`, `host:port`, `[v6]`, `ssh://...`, an ssh config
/// name). A leading `-` would be read as an option; spaces and controls would be split or
/// hidden; shell characters would reach a `ProxyCommand` through `%r` and `%h` on an ssh
/// that does not refuse them itself.
pub(crate) fn destination_problem(dest: &str) -> Option<String> {
    if dest.is_empty() {
        return Some("an empty SSH destination".to_string());
    }
    if dest.starts_with('-') {
        return Some(format!("`{dest}` would be read by ssh as an option"));
    }
    if dest.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some(format!(
            "`{dest}` is not an SSH destination (no spaces: put options in an ssh config file)"
        ));
    }
    if let Some(c) = dest
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "._-@:[]%/".contains(*c)))
    {
        return Some(format!(
            "`{dest}` is not an SSH destination ({c:?} is none of letters, digits and . _ - @ \
             : [ ] % /; name the host in an ssh config file)"
        ));
    }
    None
}

/// `destination_problem` as an error naming the destination.
fn check_destination(dest: &str) -> anyhow::Result<()> {
    match destination_problem(dest) {
        Some(why) => bail!("{why}"),
        None => Ok(()),
    }
}

/// Quotes `text` for the remote shell.
pub(crate) fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The ssh command line for `remote` (a shell command) on `host`.
pub(crate) fn command(options: &SshOptions, host: &str, remote: &str) -> Command {
    let mut cmd = Command::new("ssh");
    cmd.arg("-T")
        .args(["-o", "BatchMode=yes"])
        .args(&options.extra)
        .args(keepalive(options, host))
        .arg(host)
        .arg("--")
        .arg(remote);
    cmd
}

/// Keepalives for a host the user's ssh configuration sets none for: a host cut off
/// without a reset (a link down, a firewall) then ends the session in about 30 s, where an
/// answer awaited from it took the whole answer timeout (120 s). On the command line they
/// would beat the user's own in a config file, so `ssh -G` is asked first what ssh would use
/// for `host` (a `serveraliveinterval` of 0 is none); it connects to nothing.
fn keepalive(options: &SshOptions, host: &str) -> &'static [&'static str] {
    const OURS: &[&str] = &[
        "-o",
        "ServerAliveInterval=10",
        "-o",
        "ServerAliveCountMax=3",
    ];
    if destination_problem(host).is_some() {
        return OURS;
    }
    let theirs = Command::new("ssh")
        .arg("-G")
        .args(&options.extra)
        .arg(host)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .is_some_and(|o| {
            String::from_utf8_lossy(&o.stdout).lines().any(|l| {
                l.strip_prefix("serveraliveinterval ")
                    .is_some_and(|v| v.trim() != "0")
            })
        });
    if theirs {
        &[]
    } else {
        OURS
    }
}

/// An open agent session on one host.
pub struct Connection {
    host: String,
    child: Child,
    stdin: Option<ChildStdin>,
    /// The agent's lines as read; an error once its output has ended, saying why.
    lines: mpsc::Receiver<Result<String, String>>,
    /// The last of what ssh (and the remote side, through it) wrote on standard error.
    stderr: Arc<Mutex<Vec<u8>>>,
    answer_timeout: Duration,
    /// The session failed under a request (closed, or no answer in time): the host is
    /// unreachable, not merely refusing one request.
    broken: bool,
    /// Request lines sent: the agent numbers its answers by the line they answer.
    sent: usize,
    /// The iolab running the agent there: the one asked for, or the copy `--copy-binary` made.
    iolab: String,
}

/// Why a connection did not come up.
#[derive(Debug)]
enum Failure {
    /// The host has no such iolab (the remote shell said 127).
    Missing(String),
    /// The agent speaks another protocol.
    Mismatch(Greeting),
    Other(anyhow::Error),
}

impl Connection {
    /// Connects to `host`, copying this binary there first when asked and needed.
    pub fn open(host: &str, options: &SshOptions) -> anyhow::Result<Connection> {
        check_destination(host)?;
        match Connection::start(host, options, &options.remote_iolab) {
            Ok(c) => Ok(c),
            Err(Failure::Other(e)) => Err(e),
            Err(f) if options.copy_binary => {
                let why = match f {
                    Failure::Missing(_) => "has no iolab".to_string(),
                    Failure::Mismatch(g) => format!("runs protocol {}", g.protocol),
                    Failure::Other(_) => unreachable!("handled above"),
                };
                let copied = copy_binary(host, options)
                    .with_context(|| format!("{host}: {why}; copying this iolab there failed"))?;
                Connection::start(host, options, &copied)
                    .map_err(|f| f.into_error(host, &copied, &options.remote_dir))
            }
            Err(f) => Err(f.into_error(host, &options.remote_iolab, &options.remote_dir)),
        }
    }

    fn start(host: &str, options: &SshOptions, iolab: &str) -> Result<Connection, Failure> {
        let remote = format!("{} agent", shell_quote(iolab));
        let child = command(options, host, &remote)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                Failure::Other(anyhow!(
                    "cannot run ssh ({e}); install the OpenSSH client (Debian: openssh-client)"
                ))
            })?;
        Connection::attach(host, child, options, iolab)
    }

    /// A session over `child`'s pipes (ssh's, or a test's stand-in) with `iolab`'s agent,
    /// once it has greeted.
    fn attach(
        host: &str,
        mut child: Child,
        options: &SshOptions,
        iolab: &str,
    ) -> Result<Connection, Failure> {
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped");
        let stderr_pipe = child.stderr.take().expect("piped");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        keep_tail(stderr_pipe, Arc::clone(&stderr), SSH_SAID_KEPT);
        // Bounded: an agent that writes unasked waits on its pipe instead of filling memory.
        let (tx, lines) = mpsc::sync_channel(16);
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let line = read_answer(&mut reader, OUTPUT_KEPT);
                let end = line.is_err();
                if tx.send(line).is_err() || end {
                    return;
                }
            }
        });
        let mut conn = Connection {
            host: host.to_string(),
            child,
            stdin,
            lines,
            stderr,
            answer_timeout: options.answer_timeout,
            broken: false,
            sent: 0,
            iolab: iolab.to_string(),
        };
        let first = match conn.next_line(options.connect_timeout) {
            Ok(line) => line,
            Err(e) => {
                // ssh ends at once when the remote command is not found: tell that apart.
                let code = conn.wait_briefly();
                return Err(if code == Some(127) {
                    Failure::Missing(conn.ssh_said())
                } else {
                    Failure::Other(e)
                });
            }
        };
        let greeting =
            protocol::parse_greeting(&first).map_err(|e| Failure::Other(anyhow!("{host}: {e}")))?;
        if greeting.protocol != PROTOCOL_VERSION {
            return Err(Failure::Mismatch(greeting));
        }
        Ok(conn)
    }

    /// The iolab the agent runs as on the host (what `iolab restore` must run there too).
    pub(crate) fn remote_iolab(&self) -> &str {
        &self.iolab
    }

    /// The local ssh process (a test cuts the connection by killing it).
    pub fn ssh_pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends one request and waits for its answer; an agent error is an error naming the host.
    pub fn request(&mut self, request: &Request) -> anyhow::Result<Value> {
        let answer = self.exchange(&protocol::encode(request))?;
        if answer.ok {
            Ok(answer.result)
        } else {
            bail!(
                "{}: {}",
                self.host,
                answer
                    .error
                    .as_deref()
                    .unwrap_or("the agent failed without saying why")
            )
        }
    }

    /// True once a request found the session closed or unanswered: nothing more will get
    /// through (an agent that refused a request leaves it false).
    pub(crate) fn broken(&self) -> bool {
        self.broken
    }

    /// Sends one raw line (a test sends malformed ones) and returns the agent's answer.
    pub fn exchange(&mut self, line: &str) -> anyhow::Result<protocol::Answer> {
        let answer = self.exchange_once(line);
        if answer.is_err() {
            self.broken = true;
        }
        answer
    }

    fn exchange_once(&mut self, line: &str) -> anyhow::Result<protocol::Answer> {
        let host = self.host.clone();
        // An answer that came late would be taken as the next request's, and every one after
        // would be shifted by one: a session that failed once is not used again.
        if self.broken {
            bail!("{host}: the session failed earlier; nothing more is sent on it");
        }
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| anyhow!("{host}: the session was closed"))?;
        if let Err(e) = writeln!(stdin, "{line}").and_then(|()| stdin.flush()) {
            // A broken pipe is ssh gone, which is how a closed connection shows from here.
            let why = match e.kind() {
                std::io::ErrorKind::BrokenPipe => "the connection closed".to_string(),
                _ => e.to_string(),
            };
            return Err(anyhow!(
                "{host}: cannot send to the agent: {why}{}",
                self.ssh_said_suffix()
            ));
        }
        self.sent += 1;
        let text = self.next_line(self.answer_timeout)?;
        let answer = protocol::parse_answer(&text).map_err(|e| anyhow!("{host}: {e}"))?;
        let op = serde_json::from_str::<Value>(line)
            .ok()
            .and_then(|v| v["op"].as_str().map(str::to_string));
        let same_op = match (&op, &answer.op) {
            (Some(sent), Some(answered)) => sent == answered,
            _ => true,
        };
        if answer.line != self.sent || !same_op {
            bail!(
                "{host}: the agent answered request line {} ({}) to request line {} ({}); the \
                 session is out of step",
                answer.line,
                answer.op.as_deref().unwrap_or("?"),
                self.sent,
                op.as_deref().unwrap_or("?")
            );
        }
        Ok(answer)
    }

    fn next_line(&mut self, timeout: Duration) -> anyhow::Result<String> {
        match self.lines.recv_timeout(timeout) {
            Ok(Ok(line)) => Ok(line),
            Ok(Err(why)) => {
                // Let ssh finish writing why it stopped.
                self.wait_briefly();
                Err(anyhow!("{}: {why}{}", self.host, self.ssh_said_suffix()))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                self.wait_briefly();
                Err(anyhow!(
                    "{}: the connection closed{}",
                    self.host,
                    self.ssh_said_suffix()
                ))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Err(anyhow!(
                "{}: no answer within {:?}{}; is the host reachable (`ssh {} true`)?",
                self.host,
                timeout,
                self.ssh_said_suffix(),
                self.host
            )),
        }
    }

    /// Tells the agent the session is over (its input closes): it stops its fio server,
    /// restores and exits, while the caller goes on; dropping the connection waits for that.
    pub(crate) fn hang_up(&mut self) {
        self.stdin = None;
    }

    /// ssh's exit code once it has ended (within a second), else None.
    fn wait_briefly(&mut self) -> Option<i32> {
        self.wait_within(Duration::from_secs(1))
    }

    /// ssh's exit code once it has ended (within `limit`), else None.
    fn wait_within(&mut self, limit: Duration) -> Option<i32> {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if let Ok(Some(status)) = self.child.try_wait() {
                // The stderr thread may still be reading ssh's last words.
                std::thread::sleep(Duration::from_millis(20));
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    fn ssh_said(&self) -> String {
        self.stderr.lock().map(|s| ssh_text(&s)).unwrap_or_default()
    }

    fn ssh_said_suffix(&self) -> String {
        match self.ssh_said() {
            s if s.is_empty() => String::new(),
            s => format!(" (ssh said: {})", s.replace('\n', "; ")),
        }
    }

    /// Says `bye` (the agent restores what it set) and waits for ssh to end.
    pub fn close(mut self) -> anyhow::Result<Value> {
        let result = self.request(&Request::Bye);
        self.stdin = None;
        self.wait_briefly();
        result
    }
}

/// One line of the agent's output, without its newline; `Err` says why there are no more: the
/// output ended, or the host sent a line longer than `max` bytes, more than any answer has
/// (the largest, a machine model, is a few MiB), or one that is not text.
fn read_answer<R: BufRead>(r: &mut R, max: u64) -> Result<String, String> {
    let mut line = Vec::new();
    match Read::take(r, max + 1).read_until(b'\n', &mut line) {
        Ok(0) => return Err("the connection closed".into()),
        Ok(_) => {}
        Err(e) => return Err(format!("the connection failed: {e}")),
    }
    if line.last() == Some(&b'\n') {
        line.pop();
    } else if line.len() as u64 > max {
        return Err(format!(
            "the agent sent a line of more than {max} bytes, more than any answer has; the \
             connection is dropped"
        ));
    }
    String::from_utf8(line).map_err(|_| "the agent sent a line that is not UTF-8 text".into())
}

/// A session with a stand-in agent: `sh -c SCRIPT` after the agent's greeting, answering
/// within `answer_ms` (tests here and of the run's hosts).
#[cfg(test)]
pub(crate) fn stand_in(script: &str, answer_ms: u64) -> Connection {
    let greeting = serde_json::to_string(&protocol::Greeting::ours()).unwrap();
    let child = std::process::Command::new("sh")
        .args(["-c", &format!("echo '{greeting}'; {script}")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let options = SshOptions {
        answer_timeout: Duration::from_millis(answer_ms),
        ..SshOptions::default()
    };
    Connection::attach("fake", child, &options, "iolab")
        .map_err(|f| f.into_error("fake", "iolab", REMOTE_DIR))
        .unwrap()
}

/// Hangs up every session before any is waited for (when they are dropped): their agents stop
/// and restore at the same time, and the last ends within one agent's time, not their sum.
pub(crate) fn end_together<'a>(sessions: impl IntoIterator<Item = &'a mut Connection>) {
    for session in sessions {
        session.hang_up();
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Closing the agent's input makes it stop its fio server, restore and exit; ssh
        // follows. Until then the agent holds its host's locks, which would refuse the next
        // run started there: a live session is given the time the agent may take.
        self.hang_up();
        let limit = if self.broken {
            Duration::from_secs(1)
        } else {
            AGENT_ENDS_WITHIN
        };
        if self.wait_within(limit).is_none() && self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Failure {
    fn into_error(self, host: &str, iolab: &str, dir: &str) -> anyhow::Error {
        match self {
            Failure::Missing(said) => anyhow!(
                "{host}: no `{iolab}` there (ssh said: {}); install iolab on {host}, or pass \
                 --copy-binary to copy this one into {dir} there",
                said.replace('\n', "; ")
            ),
            Failure::Mismatch(g) => anyhow!(
                "{host}: its iolab ({}) speaks agent protocol {}, this one ({}) speaks {}; \
                 install the same iolab version on both, or pass --copy-binary to copy this \
                 one into {dir} there",
                g.version,
                g.protocol,
                env!("IOLAB_VERSION"),
                PROTOCOL_VERSION
            ),
            Failure::Other(e) => e,
        }
    }
}

/// A shell function, run on the host, that fails (saying why) unless directory $1 and every
/// directory above it belong to root or the ssh user and no one else can write to them (an
/// ancestor may be shared if sticky, as /tmp is: no one can then rename what is in it; so may
/// $1 itself when $2 says it is only the ancestor of the directory to make). The binary
/// copied there runs as root (an agent, and `iolab restore` later): anyone who could replace
/// it would run their own program as root.
const SAFE_DIR: &str = "safe_dir() { \
    me=$(id -u) && p=$(cd \"$1\" && pwd -P) && top=$p || return 1; \
    [ -n \"$2\" ] && top=; \
    while :; do \
        set -- $(stat -c '%u %a' \"$p\") || return 1; \
        if [ \"$1\" != 0 ] && [ \"$1\" != \"$me\" ]; then \
            echo \"$p belongs to user id $1, so its owner could replace iolab there\" >&2; return 1; fi; \
        if [ $((0$2 & 022)) != 0 ] && { [ \"$p\" = \"$top\" ] || [ $((0$2 & 01000)) = 0 ]; }; then \
            echo \"$p can be written by others (mode $2), who could replace iolab there\" >&2; return 1; fi; \
        [ \"$p\" = / ] && return 0; p=$(dirname \"$p\"); \
    done; }";

/// Copies this binary to `options.remote_dir/iolab` on `host` (through a temporary name, so
/// a running agent's file is never overwritten in place, and removed if the copy fails) and
/// returns the remote path. The directory must be the ssh user's own (`SAFE_DIR`).
pub(crate) fn copy_binary(host: &str, options: &SshOptions) -> anyhow::Result<String> {
    check_destination(host)?;
    let exe = std::env::current_exe().context("cannot find this iolab's own file")?;
    let binary = std::fs::File::open(&exe).with_context(|| format!("{}", exe.display()))?;
    let (target, remote) = install_script(&options.remote_dir);
    let (status, _, said) = output_kept(command(options, host, &remote).stdin(binary))
        .context("cannot run ssh; install the OpenSSH client (Debian: openssh-client)")?;
    if !status.success() {
        bail!(
            "ssh {host} 'cat > {target}' failed ({status}): {}",
            said.text.trim()
        );
    }
    Ok(target)
}

/// What ssh wrote to its standard error, in lines: ssh ends its own with "\r\n" (its
/// terminal habit), whose "\r" was shown escaped.
fn ssh_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .replace("\r\n", "\n")
        .replace('\r', "")
        .trim()
        .to_string()
}

/// The path iolab is installed at in `remote_dir`, and the shell command that installs it
/// there from its standard input.
fn install_script(remote_dir: &str) -> (String, String) {
    let dir = shell_quote(remote_dir);
    let target = format!("{remote_dir}/iolab");
    let tmp = shell_quote(&format!("{target}.copy-$$"));
    // `$$` expands remotely; the quotes keep the directory literal.
    let tmp = tmp.replace("$$", "'$$'");
    // The nearest existing directory is checked before anything is made below it, so a
    // refused destination leaves no new directory behind.
    let script = format!(
        "{SAFE_DIR}; umask 022 && a={dir} && while [ ! -e \"$a\" ]; do a=$(dirname \"$a\"); done && \
         safe_dir \"$a\" above && mkdir -p {dir} && safe_dir {dir} && \
         {{ cat > {tmp} && chmod 755 {tmp} && mv -f {tmp} {} || {{ rm -f {tmp}; exit 1; }}; }}",
        shell_quote(&target)
    );
    (target, script)
}

/// Runs `work` while another thread asks each session's agent, every `every`, to take the
/// connection for lost after `ms` without a request (`lease`): a run of any length keeps
/// its hosts, and hosts whose controller fell silent restore themselves within `ms`. A
/// session that fails to answer is left to the next request to find broken.
pub(crate) fn while_renewing<T>(
    sessions: Vec<&mut Connection>,
    ms: u64,
    every: Duration,
    work: impl FnOnce() -> T,
) -> T {
    if sessions.is_empty() {
        return work();
    }
    let (stop, stopped) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut sessions = sessions;
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                for c in sessions.iter_mut().filter(|c| !c.broken()) {
                    let _ = c.request(&Request::Lease { ms: Some(ms) });
                }
            }
        });
        let out = work();
        drop(stop);
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_ssh_said_is_read_in_lines_without_its_carriage_returns() {
        let said = b"No ED25519 host key is known for h.\r\nHost key verification failed.\r\n";
        assert_eq!(
            ssh_text(said),
            "No ED25519 host key is known for h.\nHost key verification failed."
        );
    }

    /// The install script, run here as ssh would run it there: it installs into a directory
    /// of the user's own; refuses one others can write to or another user owns (the copy runs
    /// as root: its owner could replace it); and leaves no partial copy when the copy fails.
    #[test]
    fn the_binary_is_installed_only_where_no_one_else_can_replace_it() {
        use std::os::unix::fs::{chown, PermissionsExt};
        let base = tempfile::tempdir().unwrap();
        let run = |dir: &std::path::Path, input: std::fs::File| {
            let (target, script) = install_script(&dir.display().to_string());
            let out = std::process::Command::new("sh")
                .args(["-c", &script])
                .stdin(input)
                .output()
                .unwrap();
            let left: Vec<String> = std::fs::read_dir(dir)
                .map(|d| {
                    d.flatten()
                        .map(|e| e.file_name().to_string_lossy().into())
                        .collect()
                })
                .unwrap_or_default();
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
                target,
                left,
            )
        };
        let payload = base.path().join("payload");
        std::fs::write(&payload, "#!/bin/sh\n").unwrap();
        let open = || std::fs::File::open(&payload).unwrap();

        let own = base.path().join("own/bin");
        let (ok, said, target, _) = run(&own, open());
        assert!(ok, "{said}");
        assert_eq!(std::fs::read(&target).unwrap(), b"#!/bin/sh\n");
        let mode = std::fs::metadata(&target).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);

        let shared = base.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let (ok, said, _, left) = run(&shared, open());
        assert!(
            !ok && said.contains("can be written by others (mode 777)"),
            "{said}"
        );
        assert!(left.is_empty(), "{left:?}");
        // Below a shared directory, too, unless it is sticky (as /tmp is); and nothing is
        // made there first.
        let (ok, said, _, left) = run(&shared.join("sub/bin"), open());
        assert!(
            !ok && said.contains("shared can be written by others"),
            "{said}"
        );
        assert!(!shared.join("sub").exists(), "{left:?}");
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let (ok, said, _, _) = run(&shared.join("sub2"), open());
        assert!(ok, "{said}");

        if crate::sys::is_root() {
            let foreign = base.path().join("foreign");
            std::fs::create_dir(&foreign).unwrap();
            chown(&foreign, Some(65534), None).unwrap();
            let (ok, said, _, left) = run(&foreign, open());
            assert!(!ok && said.contains("belongs to user id 65534"), "{said}");
            assert!(left.is_empty(), "{left:?}");
        }

        // A copy that fails (its input cannot be read) leaves nothing behind.
        let failing = base.path().join("failing");
        let (ok, _, _, left) = run(&failing, std::fs::File::open(base.path()).unwrap());
        assert!(!ok);
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn the_command_line_is_batch_mode_with_the_users_options() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("cfg");
        std::fs::write(&cfg, "Host *\n  Port 22\n").unwrap();
        let cfg = cfg.display().to_string();
        let options = SshOptions {
            extra: vec!["-F".into(), cfg.clone()],
            ..SshOptions::default()
        };
        let cmd = command(&options, "h1", "'iolab' agent");
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy()).collect();
        assert_eq!(cmd.get_program(), "ssh");
        assert_eq!(
            args,
            [
                "-T",
                "-o",
                "BatchMode=yes",
                "-F",
                cfg.as_str(),
                "-o",
                "ServerAliveInterval=10",
                "-o",
                "ServerAliveCountMax=3",
                "h1",
                "--",
                "'iolab' agent"
            ]
        );
        // Keepalives of the user's own, in the config file: theirs stand.
        std::fs::write(&cfg, "Host *\n  ServerAliveInterval 60\n").unwrap();
        let cmd = command(&options, "h1", "'iolab' agent");
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy()).collect();
        assert!(!args.iter().any(|a| a.contains("ServerAlive")), "{args:?}");
    }

    /// An agent whose connection is gone is said to be so, not shown as an OS error code.
    #[test]
    fn a_request_to_a_gone_agent_says_the_connection_closed() {
        let mut c = stand_in("exec 0<&-; exit 0", 2000);
        // Its end reaches the pipe a moment after the greeting.
        std::thread::sleep(Duration::from_millis(300));
        let e = c.request(&Request::Preflight { sample_ms: 1 }).unwrap_err();
        let said = format!("{e:#}");
        assert!(said.contains("the connection closed"), "{said}");
        assert!(!said.contains("os error"), "{said}");
    }

    /// An answer that comes after its request timed out is not taken as the next request's:
    /// the session is not used again. (It was, and every answer after was one behind: a
    /// refused write read as done.)
    #[test]
    fn a_late_answer_is_never_taken_for_the_next_requests() {
        let mut c = stand_in(
            "read a; sleep 0.6; echo '{\"line\":1,\"ok\":true,\"op\":\"preflight\"}'; \
             read b; echo '{\"line\":2,\"ok\":false,\"op\":\"set\",\"error\":\"refused\"}'; \
             sleep 2",
            200,
        );
        let first = c.request(&Request::Preflight { sample_ms: 1 }).unwrap_err();
        assert!(first.to_string().contains("no answer within"), "{first}");
        assert!(c.broken());
        let set = Request::Set {
            path: "/sys/block/sdz/queue/nr_requests".into(),
            value: "8".into(),
        };
        let second = c.request(&set).unwrap_err().to_string();
        assert!(second.contains("failed earlier"), "{second}");
    }

    /// While the work goes on, each session's lease is renewed every interval; after it,
    /// no more.
    #[test]
    fn leases_are_renewed_while_the_work_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("requests");
        let agent = format!(
            "n=0; while read l; do n=$((n+1)); echo \"$l\" >>{}; \
             echo '{{\"line\":'$n',\"ok\":true,\"op\":\"lease\",\"result\":{{}}}}'; done",
            log.display()
        );
        let (mut a, mut b) = (stand_in(&agent, 2000), stand_in(&agent, 2000));
        let every = Duration::from_millis(100);
        let out = while_renewing(vec![&mut a, &mut b], 600_000, every, || {
            std::thread::sleep(every * 3 + every / 2);
            7
        });
        assert_eq!(out, 7);
        // Each request is logged before it is answered: this is all that was sent.
        let sent = std::fs::read_to_string(&log).unwrap();
        let leases: Vec<&str> = sent.lines().collect();
        // About three rounds of two sessions (a loaded machine may fit fewer).
        assert!(
            leases.len() >= 4 && leases.len().is_multiple_of(2) && leases.len() <= 6,
            "{sent}"
        );
        assert!(
            leases.iter().all(|l| *l == r#"{"op":"lease","ms":600000}"#),
            "{sent}"
        );
        std::thread::sleep(every * 3);
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            sent,
            "renewed after the work"
        );
        assert!(!a.broken() && !b.broken());
    }

    #[test]
    fn an_answer_to_another_line_or_op_is_an_error() {
        let mut c = stand_in(
            "read a; echo '{\"line\":2,\"ok\":true,\"op\":\"hello\"}'; sleep 2",
            2000,
        );
        let e = c.request(&Request::Hello).unwrap_err().to_string();
        assert!(
            e.contains("answered request line 2 (hello) to request line 1"),
            "{e}"
        );
        let mut c = stand_in(
            "read a; echo '{\"line\":1,\"ok\":true,\"op\":\"inspect\"}'; sleep 2",
            2000,
        );
        let e = c.request(&Request::Hello).unwrap_err().to_string();
        assert!(e.contains("(inspect) to request line 1 (hello)"), "{e}");
        let mut c = stand_in(
            "read a; echo '{\"line\":1,\"ok\":true,\"op\":\"hello\",\"result\":{}}'; sleep 2",
            2000,
        );
        c.request(&Request::Hello).unwrap();
    }

    /// A line that never ends is refused once it passes the largest an answer may be, having
    /// read no more than that; what ssh says on standard error is kept to its last 16 KiB.
    #[test]
    fn an_endless_answer_and_endless_errors_are_cut_short() {
        /// Endless 'a's, failing the test once more than `limit` bytes were read.
        struct Endless(u64, u64);
        impl Read for Endless {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                assert!(self.0 <= self.1, "read {} bytes, past the cap", self.0);
                buf.fill(b'a');
                self.0 += buf.len() as u64;
                Ok(buf.len())
            }
        }
        let mut endless = BufReader::new(Endless(0, 1 << 20));
        let e = read_answer(&mut endless, 1000).unwrap_err();
        assert!(e.contains("a line of more than 1000 bytes"), "{e}");
        assert_eq!(
            read_answer(&mut "{}\nrest".as_bytes(), 1000).as_deref(),
            Ok("{}")
        );
        let mut c = stand_in(
            "read a; head -c 1000000 /dev/zero | tr '\\0' e >&2; \
             head -c 70000000 /dev/zero | tr '\\0' a; sleep 2",
            20_000,
        );
        let e = c.request(&Request::Hello).unwrap_err().to_string();
        assert!(
            e.contains(&format!("a line of more than {OUTPUT_KEPT} bytes")),
            "{}",
            &e[..200.min(e.len())]
        );
        // The last 16 KiB, and the closing parenthesis.
        let said = e.split("ssh said: ").nth(1).unwrap_or_default();
        assert!(
            said.starts_with("eee") && said.len() <= 16 * 1024 + 1,
            "{}",
            said.len()
        );
        assert!(c.broken());
    }

    #[test]
    fn destinations_are_what_ssh_destinations_are_made_of() {
        for ok in [
            "lab1",
            "root@10.0.0.1",
            "h:2222",
            "[fe80::1%eth0]",
            "ssh://u@h:22",
        ] {
            assert_eq!(destination_problem(ok), None, "{ok}");
        }
        for bad in [
            "",
            "-oProxyCommand=x",
            "a b",
            "u$(id)@h",
            "h;reboot",
            "`x`",
            "h'",
            "\u{1b}h",
        ] {
            assert!(destination_problem(bad).is_some(), "{bad:?}");
        }
        let e = Connection::open("u$(touch /tmp/x)@h", &SshOptions::default())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("is not an SSH destination"), "{e}");
    }

    #[test]
    fn remote_words_are_quoted_for_the_shell() {
        assert_eq!(shell_quote("/opt/io lab"), "'/opt/io lab'");
        assert_eq!(shell_quote("a'b"), r"'a'\''b'");
    }
}

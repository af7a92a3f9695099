//! A network engine's server, started by iolab for one run inside the network namespace the
//! experiment names (`ip netns exec NS iperf3 -s ...`). The client starts only once the
//! server listens: read from the server's own /proc/PID/net table (the sockets of its
//! namespace), not from its output, which differs between programs and versions. Stopped
//! with its whole process group when the run ends, however it ends.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use super::engine::{in_netns, Server};
use super::process::{reader_thread, spawn_group, Captured, GroupGuard};
use super::runner::CancelToken;

/// How long a server gets to start listening.
pub(crate) const READY_WITHIN: Duration = Duration::from_secs(10);

/// A running server; stopped on drop.
pub(crate) struct Running {
    guard: Option<GroupGuard>,
    out: Option<std::thread::JoinHandle<Captured>>,
    err: Option<std::thread::JoinHandle<Captured>>,
}

impl Running {
    /// Stops the server; what it printed.
    pub(crate) fn stop(mut self) -> String {
        self.finish()
    }

    fn finish(&mut self) -> String {
        if let Some(g) = self.guard.take() {
            g.stop(Duration::from_secs(2));
        }
        let join = |h: Option<std::thread::JoinHandle<Captured>>| {
            h.and_then(|h| h.join().ok()).unwrap_or_default().text
        };
        format!("{}{}", join(self.out.take()), join(self.err.take()))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Whether a /proc/net/{tcp,tcp6,udp,udp6} table has a socket on `port` in `state` (TCP
/// LISTEN is 0A; an unconnected UDP socket is 07).
pub(crate) fn listening(table: &str, port: u16, state: &str) -> bool {
    let want = format!("{port:04X}");
    table.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 3 && f[1].rsplit(':').next() == Some(want.as_str()) && f[3] == state
    })
}

/// Starts `server` in `cwd` and waits until it listens.
pub(crate) fn start(
    server: &Server,
    cwd: &std::path::Path,
    cancel: &CancelToken,
) -> Result<Running> {
    let argv = in_netns(Some(&server.netns), &server.argv);
    let mut cmd = std::process::Command::new(&argv[0]);
    cmd.args(&argv[1..]).current_dir(cwd);
    let mut guard = spawn_group(cmd, server.cpus.as_deref())?;
    let out = reader_thread(guard.child.stdout.take());
    let err = reader_thread(guard.child.stderr.take());
    let pid = guard.child.id();
    let mut running = Running {
        guard: Some(guard),
        out: Some(out),
        err: Some(err),
    };
    let (tables, state) = if server.udp {
        (["udp", "udp6"], "07")
    } else {
        (["tcp", "tcp6"], "0A")
    };
    let start = Instant::now();
    loop {
        // `ip netns exec` execs the server: the pid is the server's, in its namespace.
        let up = tables.iter().any(|t| {
            std::fs::read_to_string(format!("/proc/{pid}/net/{t}"))
                .is_ok_and(|text| listening(&text, server.port, state))
        });
        if up {
            return Ok(running);
        }
        let exited = running
            .guard
            .as_mut()
            .is_some_and(|g| matches!(g.child.try_wait(), Ok(Some(_))));
        if exited || start.elapsed() > READY_WITHIN || cancel.is_cancelled() {
            let said = running.finish();
            let line = super::process::command_line(&argv);
            if exited {
                bail!(
                    "the server `{line}` exited before it listened on port {}: {}; check the \
                     namespace `{}` and the address (ip netns list; ip -n {} addr)",
                    server.port,
                    said.trim(),
                    server.netns,
                    server.netns
                );
            }
            bail!(
                "the server `{line}` did not listen on port {} within {} s{}",
                server.port,
                READY_WITHIN.as_secs(),
                if said.trim().is_empty() {
                    String::new()
                } else {
                    format!(": {}", said.trim())
                }
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_listening_sockets() {
        let t = "  sl  local_address rem_address   st\n   \
                 0: 0200E70A:14B3 00000000:0000 0A 00000000:00000000\n   \
                 1: 0100007F:0016 0100007F:9C40 01 00000000:00000000\n";
        assert!(listening(t, 5299, "0A"));
        assert!(!listening(t, 22, "0A"));
        assert!(!listening(t, 5299, "07"));
    }
}

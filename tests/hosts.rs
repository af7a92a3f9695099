//! Lab hosts over SSH (`iolab hosts`, `iolab agent`), on "hosts" made of network namespaces:
//! each has its own veth pair, a /24 of its own and an sshd (Debian's openssh-server) bound to
//! its address, with host keys, an authorized root key and the client's ssh config generated
//! in a temp dir (the client gets `-F` through `IOLAB_SSH`, so ~/.ssh is never read or
//! touched). Every namespace, veth, sshd and file is removed when the `Lab` drops, also when
//! a test fails.
//!
//! Network namespaces share this machine's filesystem and /sys: every "host" sees the same
//! devices, the same iolab binary and the same clock. So each test uses a scratch loop device
//! of its own, each host gets its own state directory (sshd's `SetEnv IOLAB_STATE_DIR`), and
//! a skew near 0 is what the clock check must find.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use iolab::hosts::protocol::Request;
use iolab::hosts::ssh::{Connection, SshOptions};

use crate::common::{self, Scratch};

const SSHD: &str = "/usr/sbin/sshd";

/// Namespaces made by this process so far (names and subnets stay unique across tests).
static MADE: AtomicUsize = AtomicUsize::new(0);

/// One namespace with its sshd.
struct Host {
    ns: String,
    veth: String,
    addr: String,
    sshd: Option<Child>,
    state: PathBuf,
    /// sshd's config and log, to start it again after `kill`.
    sshd_config: PathBuf,
    sshd_log: PathBuf,
}

/// A few hosts and the client's ssh config.
struct Lab {
    hosts: Vec<Host>,
    config: PathBuf,
    // Last: the files go after the processes and namespaces that use them.
    dir: tempfile::TempDir,
}

fn run(cmd: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn keygen(path: &Path) -> String {
    run(
        "ssh-keygen",
        &[
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-f",
            path.to_str().unwrap(),
        ],
    )
    .expect("ssh-keygen");
    std::fs::read_to_string(path.with_extension("pub"))
        .unwrap()
        .trim()
        .to_string()
}

impl Lab {
    /// `n` hosts, or None (with a skip message) when this machine cannot make them.
    fn new(n: usize) -> Option<Lab> {
        if !common::root_or_skip() {
            return None;
        }
        if !Path::new(SSHD).exists() {
            common::skip("needs sshd (Debian: openssh-server; scripts/deps installs it)");
            return None;
        }
        if run("ip", &["netns", "list"]).is_err() {
            common::skip("needs `ip netns` (iproute2) and network namespaces");
            return None;
        }
        // sshd's privilege separation directory (the package's service makes it at boot).
        std::fs::create_dir_all("/run/sshd").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let host_pub = keygen(&d.join("host_ed25519"));
        let client_pub = keygen(&d.join("id_ed25519"));
        std::fs::write(d.join("authorized_keys"), format!("{client_pub}\n")).unwrap();
        let config = d.join("ssh_config");
        std::fs::write(
            &config,
            format!(
                "Host *\n  User root\n  IdentityFile {0}/id_ed25519\n  IdentitiesOnly yes\n  \
                 UserKnownHostsFile {0}/known_hosts\n  GlobalKnownHostsFile /dev/null\n  \
                 StrictHostKeyChecking yes\n  ConnectTimeout 10\n  LogLevel ERROR\n",
                d.display()
            ),
        )
        .unwrap();
        let mut lab = Lab {
            hosts: Vec::new(),
            config,
            dir,
        };
        let mut known = String::new();
        for _ in 0..n {
            let host = lab.add_host();
            known += &format!("{} {host_pub}\n", host.addr);
            lab.hosts.push(host);
        }
        std::fs::write(lab.dir.path().join("known_hosts"), known).unwrap();
        for h in &lab.hosts {
            wait_for_port(&h.addr);
        }
        Some(lab)
    }

    /// A namespace with its veth pair, addresses and sshd. Pushed by the caller at once, so
    /// a failure after this returns still cleans it up.
    fn add_host(&mut self) -> Host {
        let pid = std::process::id();
        // 10.B.N.0/24: B from the pid (200..249), N from the counter; a subnet in use on this
        // machine (another test process, another lab) is passed over.
        let b = 200 + pid % 50;
        let n = loop {
            let n = MADE.fetch_add(1, Ordering::SeqCst) % 250 + 1;
            let used = Command::new("ip")
                .args([
                    "-4",
                    "-o",
                    "addr",
                    "show",
                    "to",
                    &format!("10.{b}.{n}.0/24"),
                ])
                .output()
                .map(|o| !o.stdout.is_empty())
                .unwrap_or(true);
            if !used {
                break n;
            }
        };
        let ns = format!("iolab-hosts-{pid}-{n}");
        let veth = format!("ilh{pid:x}n{n}");
        let peer = format!("{veth}p");
        let d = self.dir.path();
        let state = d.join(format!("state-{n}"));
        let mut host = Host {
            ns: ns.clone(),
            veth: veth.clone(),
            addr: format!("10.{b}.{n}.2"),
            sshd: None,
            state: state.clone(),
            sshd_config: d.join(format!("sshd_config-{n}")),
            sshd_log: d.join(format!("sshd-{n}.log")),
        };
        let setup = || -> Result<(), String> {
            run("ip", &["netns", "add", &ns])?;
            run(
                "ip",
                &["link", "add", &veth, "type", "veth", "peer", "name", &peer],
            )?;
            run("ip", &["link", "set", &peer, "netns", &ns])?;
            run(
                "ip",
                &["addr", "add", &format!("10.{b}.{n}.1/24"), "dev", &veth],
            )?;
            run("ip", &["link", "set", &veth, "up"])?;
            run(
                "ip",
                &[
                    "-n",
                    &ns,
                    "addr",
                    "add",
                    &format!("10.{b}.{n}.2/24"),
                    "dev",
                    &peer,
                ],
            )?;
            run("ip", &["-n", &ns, "link", "set", &peer, "up"])?;
            run("ip", &["-n", &ns, "link", "set", "lo", "up"])
        };
        if let Err(e) = setup() {
            drop(host);
            panic!("making namespace {ns}: {e}");
        }
        std::fs::write(
            &host.sshd_config,
            format!(
                "ListenAddress {addr}:22\nHostKey {d}/host_ed25519\nPidFile none\n\
                 AuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
                 StrictModes no\nSetEnv IOLAB_STATE_DIR={state}\n",
                addr = host.addr,
                d = d.display(),
                state = state.display()
            ),
        )
        .unwrap();
        host.start_sshd();
        host
    }

    /// Client options that use this lab's ssh config and the iolab under test.
    fn options(&self) -> SshOptions {
        SshOptions {
            extra: vec!["-F".into(), self.config.display().to_string()],
            remote_iolab: iolab_binary(),
            connect_timeout: Duration::from_secs(20),
            answer_timeout: Duration::from_secs(60),
            ..SshOptions::default()
        }
    }

    /// `iolab hosts check ...` with this lab's ssh config.
    fn iolab(&self) -> Command {
        let mut cmd = common::iolab();
        cmd.env("IOLAB_SSH", format!("-F {}", self.config.display()));
        cmd
    }

    /// `iolab hosts check ARGS`: whether it succeeded, and its stdout and stderr.
    fn check(&self, args: &[&str]) -> (bool, String) {
        let out = self
            .iolab()
            .args(["hosts", "check"])
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    }

    fn addrs(&self) -> Vec<String> {
        self.hosts.iter().map(|h| h.addr.clone()).collect()
    }
}

impl Host {
    fn start_sshd(&mut self) {
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(&self.sshd_log)
            .unwrap();
        self.sshd = Some(
            Command::new("ip")
                .args(["netns", "exec", &self.ns, SSHD, "-D", "-e", "-f"])
                .arg(&self.sshd_config)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("start sshd"),
        );
    }

    /// The host dies: every process in its namespace (sshd, the sessions and agents it
    /// forked, a fio server) is killed outright, as a crash or power loss would.
    fn kill(&mut self) {
        kill_namespace(&self.ns);
        if let Some(mut sshd) = self.sshd.take() {
            let _ = sshd.wait();
        }
    }
}

/// SIGKILLs every process whose network namespace is `ns`. All are stopped first: killed one
/// by one, the agent could see its session end and restore before its own SIGKILL lands,
/// which a host that loses power does not do.
fn kill_namespace(ns: &str) {
    let out = Command::new("ip")
        .args(["netns", "pids", ns])
        .output()
        .unwrap();
    let pids: Vec<i32> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    for signal in [libc::SIGSTOP, libc::SIGKILL] {
        for &pid in &pids {
            unsafe {
                libc::kill(pid, signal);
            }
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if let Some(mut sshd) = self.sshd.take() {
            let _ = sshd.kill();
            let _ = sshd.wait();
        }
        // Sessions sshd forked (an agent still restoring) die with the namespace's links;
        // deleting one end of the veth pair deletes both.
        let _ = run("ip", &["link", "del", &self.veth]);
        let _ = run("ip", &["netns", "del", &self.ns]);
    }
}

fn iolab_binary() -> String {
    assert_cmd::cargo::cargo_bin("iolab").display().to_string()
}

/// Waits until sshd accepts connections at `addr`.
fn wait_for_port(addr: &str) {
    let end = Instant::now() + Duration::from_secs(15);
    let sock: std::net::SocketAddr = format!("{addr}:22").parse().unwrap();
    while Instant::now() < end {
        if std::net::TcpStream::connect_timeout(&sock, Duration::from_millis(200)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("sshd at {addr} did not come up within 15 s");
}

fn attr(dev: &str, name: &str) -> String {
    std::fs::read_to_string(format!("/sys/block/{dev}/queue/{name}"))
        .unwrap()
        .trim()
        .to_string()
}

/// Polls until the attribute reads `want` (true) or `limit` passes (false).
fn becomes(dev: &str, name: &str, want: &str, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    loop {
        if attr(dev, name) == want {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn hosts_check_reports_versions_and_a_skew_within_the_round_trip() {
    let Some(lab) = Lab::new(3) else { return };
    let out = lab
        .iolab()
        .args([
            "hosts",
            "check",
            "--json",
            "--remote-iolab",
            &iolab_binary(),
        ])
        .args(lab.addrs())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let local = &doc["local"];
    let hosts = doc["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 3);
    for (h, addr) in hosts.iter().zip(lab.addrs()) {
        assert_eq!(h["host"], addr.as_str());
        assert!(h["error"].is_null(), "{h}");
        assert_eq!(h["flags"].as_array().unwrap().len(), 0, "{h}");
        // One machine: the same versions and kernel everywhere...
        for key in ["iolab_version", "fio_version", "kernel", "protocol"] {
            assert_eq!(h["hello"][key], local[key], "{key}: {h}");
        }
        assert!(local["fio_version"]
            .as_str()
            .is_some_and(|v| v.starts_with("fio-")));
        // ... and one clock: the estimate is within half the round trip of 0.
        let skew = h["skew"]["skew_s"].as_f64().unwrap();
        let within = h["skew"]["uncertainty_s"].as_f64().unwrap();
        let rtt = h["skew"]["round_trip_s"].as_f64().unwrap();
        assert!(rtt > 0.0 && (within - rtt / 2.0).abs() < 1e-9, "{h}");
        assert!(
            skew.abs() <= within + 1e-6,
            "skew {skew} beyond ±{within}: {h}"
        );
    }
    // Each host's agent ran in its own state directory and left no journal.
    for h in &lab.hosts {
        assert!(!h.state.join("journal.json").exists());
    }
}

/// An agent session on the lab's first host that has raised `dev`'s read_ahead_kb by 64 (and
/// journaled it there): the session, and the value before and after.
fn agent_raises_read_ahead(lab: &Lab, dev: &str) -> (Connection, String, String) {
    let before = attr(dev, "read_ahead_kb");
    let changed = (before.parse::<u64>().unwrap() + 64).to_string();
    let mut conn = Connection::open(&lab.hosts[0].addr, &lab.options()).expect("connect");
    let answer = conn
        .request(&Request::Set {
            path: format!("/sys/block/{dev}/queue/read_ahead_kb"),
            value: changed.clone(),
        })
        .expect("set");
    assert_eq!(answer["old"], before.as_str());
    (conn, before, changed)
}

#[test]
fn a_cut_connection_puts_the_agents_knob_back() {
    let Some(scratch) = Scratch::new(16 << 20) else {
        return;
    };
    let Some(lab) = Lab::new(1) else { return };
    let dev = scratch.name().to_string();
    let path = format!("/sys/block/{dev}/queue/read_ahead_kb");
    let (conn, before, changed) = agent_raises_read_ahead(&lab, &dev);
    assert_eq!(attr(&dev, "read_ahead_kb"), changed);
    let journal = lab.hosts[0].state.join("journal.json");
    assert!(
        journal.exists(),
        "the agent journals in its host's state dir"
    );
    // The controller vanishes: its ssh is killed, sshd closes the agent's input.
    unsafe {
        libc::kill(conn.ssh_pid() as i32, libc::SIGKILL);
    }
    assert!(
        becomes(&dev, "read_ahead_kb", &before, Duration::from_secs(20)),
        "{path} still {} after the connection was cut",
        attr(&dev, "read_ahead_kb")
    );
    let end = Instant::now() + Duration::from_secs(5);
    while journal.exists() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!journal.exists(), "the restored journal is removed");
}

/// A cell's knobs reach a host in one `set_all`: `nr_requests` written before the scheduler
/// (whose switch resets it) is written again there and holds; `bye` puts both back.
#[test]
fn set_all_on_a_host_writes_again_a_knob_a_later_write_changed() {
    let Some(scratch) = Scratch::new(16 << 20) else {
        return;
    };
    let Some(lab) = Lab::new(1) else { return };
    let dev = scratch.name().to_string();
    let knob = |name: &str| iolab::knobs::queue_attr_path(&dev, name);
    let read = |name: &str| iolab::knobs::read_attr(&knob(name)).unwrap();
    let (sched_before, nr_before) = (read("scheduler"), read("nr_requests"));
    let sched = crate::common::other_scheduler(&dev);
    let nr = (nr_before.parse::<u64>().unwrap() / 2).max(4).to_string();
    let mut conn = Connection::open(&lab.hosts[0].addr, &lab.options()).expect("connect");
    let write = |name: &str, value: &str| iolab::hosts::protocol::KnobWrite {
        path: knob(name),
        value: value.to_string(),
    };
    let answer = conn
        .request(&Request::SetAll {
            writes: vec![write("nr_requests", &nr), write("scheduler", &sched)],
        })
        .expect("set_all");
    assert_eq!(answer["again"], serde_json::json!([knob("nr_requests")]));
    assert_eq!((read("nr_requests"), read("scheduler")), (nr, sched));
    conn.request(&Request::Bye).expect("bye");
    assert_eq!(
        (read("nr_requests"), read("scheduler")),
        (nr_before, sched_before)
    );
}

#[test]
fn a_malformed_request_over_ssh_is_answered_with_an_error_and_the_session_goes_on() {
    let Some(scratch) = Scratch::new(16 << 20) else {
        return;
    };
    let Some(lab) = Lab::new(1) else { return };
    let mut conn = Connection::open(&lab.hosts[0].addr, &lab.options()).expect("connect");
    let bad = conn.exchange("{\"op\": \"hello\"").unwrap();
    assert!(!bad.ok);
    assert_eq!(bad.line, 1);
    let e = bad.error.unwrap();
    assert!(e.starts_with("request line 1: not JSON"), "{e}");
    let unknown = conn.exchange("{\"op\":\"format_disk\"}").unwrap();
    assert!(unknown
        .error
        .unwrap()
        .contains("unknown op \"format_disk\""));
    let hello = conn.request(&Request::Hello).expect("hello after errors");
    assert_eq!(hello["protocol"], iolab::hosts::protocol::PROTOCOL_VERSION);
    // The other ops answer over the same session: the model, and the sampler over a window.
    let dev = scratch.name().to_string();
    let model = conn.request(&Request::Inspect).expect("inspect");
    let devices = model["devices"].as_array().expect("the model's devices");
    assert!(
        devices.iter().any(|d| d["name"] == dev.as_str()),
        "{dev} in the model"
    );
    let no_sampler = conn
        .request(&Request::SampleStop { measured_ms: None })
        .unwrap_err()
        .to_string();
    assert!(no_sampler.contains("no sampler is running"), "{no_sampler}");
    // A device below that the host lacks (its name goes into sysfs paths) is refused.
    let below = conn
        .request(&Request::SampleStart {
            devices: vec![dev.clone()],
            below: vec!["../../x".into()],
            interval_ms: 5000,
            first_ms: None,
        })
        .unwrap_err()
        .to_string();
    assert!(
        below.contains("no block device or partition \"../../x\""),
        "{below}"
    );
    // A run of unknown length: read every 10 ms at first, on the way to every 5 s.
    conn.request(&Request::SampleStart {
        devices: vec![dev.clone()],
        below: vec![],
        interval_ms: 5000,
        first_ms: Some(10),
    })
    .expect("sample_start");
    std::fs::read(scratch.path()).ok();
    std::thread::sleep(Duration::from_millis(300));
    let sampled = conn
        .request(&Request::SampleStop { measured_ms: None })
        .expect("sample_stop");
    assert!(sampled["readings"].as_u64().unwrap() >= 10, "{sampled}");
    assert!(
        sampled["summary"]["devices"][&dev]["dev_util_pct"].is_number(),
        "{sampled}"
    );
    assert!(
        sampled["summary"]["system"]["idle_pct"].is_number(),
        "{sampled}"
    );
    // No runtime from fio: the whole span, and the window says why in this mode's words.
    assert_eq!(
        sampled["window"]["basis"], "whole sampled span",
        "{sampled}"
    );
    assert_eq!(
        sampled["window"]["note"], "fio reported no runtime for this host",
        "{sampled}"
    );
    conn.close().expect("bye");
}

#[test]
fn a_protocol_mismatch_is_refused_and_copy_binary_installs_this_iolab() {
    let Some(lab) = Lab::new(1) else { return };
    let d = lab.dir.path();
    // An "iolab" from the future: it greets with another protocol.
    let fake = d.join("iolab-future");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho '{\"agent\":\"iolab-agent\",\"protocol\":999,\"version\":\"9.0.0\"}'\n\
         cat > /dev/null\n",
    )
    .unwrap();
    let exec = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&fake, exec).unwrap();
    let host = lab.hosts[0].addr.as_str();
    let fake = fake.to_str().unwrap();
    let (ok, text) = lab.check(&["--remote-iolab", fake, host]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("speaks agent protocol 999")
            && text.contains("install the same iolab version on both, or pass --copy-binary"),
        "{text}"
    );
    // A host without that iolab: said so, with the way out.
    let (ok, text) = lab.check(&["--remote-iolab", "/nonexistent/iolab", host]);
    assert!(!ok, "{text}");
    assert!(
        text.contains(&format!("{host}: no `/nonexistent/iolab` there"))
            && text.contains("pass --copy-binary"),
        "{text}"
    );
    // Asked to, iolab copies itself into the directory it owns on the host and uses that.
    let bin = d.join("remote-bin");
    let bin_arg = bin.to_str().unwrap();
    let (ok, text) = lab.check(&[
        "--copy-binary",
        "--remote-dir",
        bin_arg,
        "--remote-iolab",
        fake,
        host,
    ]);
    assert!(ok, "{text}");
    assert_eq!(
        std::fs::read(bin.join("iolab")).unwrap(),
        std::fs::read(iolab_binary()).unwrap()
    );
    assert!(text.contains("ok: every host answered"), "{text}");
    // The session says it runs the copy: what a run records for `iolab restore` to run there.
    let (ok, text) = lab.check(&[
        "--json",
        "--copy-binary",
        "--remote-dir",
        bin_arg,
        "--remote-iolab",
        fake,
        host,
    ]);
    assert!(ok, "{text}");
    let report: serde_json::Value = serde_json::from_str(&text).expect(&text);
    assert_eq!(
        report["hosts"][0]["iolab"],
        bin.join("iolab").to_str().unwrap()
    );
}

/// The agent run directly (no ssh), for what happens to it on this host, with its greeting.
fn local_agent(state: &Path) -> (Child, std::io::BufReader<std::process::ChildStdout>, String) {
    let mut child = common::iolab()
        .arg("agent")
        .env("IOLAB_STATE_DIR", state)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut greeting = String::new();
    std::io::BufRead::read_line(&mut out, &mut greeting).unwrap();
    (child, out, greeting)
}

fn ask(child: &mut Child, out: &mut impl std::io::BufRead, line: &str) -> String {
    use std::io::Write;
    let stdin = child.stdin.as_mut().unwrap();
    writeln!(stdin, "{line}").unwrap();
    stdin.flush().unwrap();
    let mut answer = String::new();
    out.read_line(&mut answer).unwrap();
    answer
}

#[test]
fn restore_replays_what_a_killed_agent_left_and_a_hangup_restores_at_once() {
    if !common::root_or_skip() {
        return;
    }
    let Some(scratch) = Scratch::new(16 << 20) else {
        return;
    };
    let dev = scratch.name().to_string();
    let before = attr(&dev, "read_ahead_kb");
    let changed = (before.parse::<u64>().unwrap() + 32).to_string();
    let set = format!(
        "{{\"op\":\"set\",\"path\":\"/sys/block/{dev}/queue/read_ahead_kb\",\"value\":\"{changed}\"}}"
    );
    let state = tempfile::tempdir().unwrap();
    for signal in [libc::SIGKILL, libc::SIGHUP] {
        let (mut child, mut out, greeting) = local_agent(state.path());
        let protocol = iolab::hosts::protocol::PROTOCOL_VERSION;
        assert!(
            greeting.contains(&format!("\"protocol\":{protocol}")),
            "{greeting}"
        );
        let answer = ask(&mut child, &mut out, &set);
        assert!(answer.contains("\"ok\":true"), "{answer}");
        assert_eq!(attr(&dev, "read_ahead_kb"), changed);
        unsafe {
            libc::kill(child.id() as i32, signal);
        }
        let end = Instant::now() + Duration::from_secs(20);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > end {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the agent did not end within 20 s of signal {signal}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if signal == libc::SIGKILL {
            // Killed outright: the knob stays changed, journaled, until `iolab restore`.
            assert_eq!(attr(&dev, "read_ahead_kb"), changed);
            let r = common::restore_in(state.path());
            let text = String::from_utf8_lossy(&r.stdout);
            assert!(r.status.success(), "{text}");
            assert!(text.contains("read_ahead_kb"), "{text}");
        }
        assert_eq!(attr(&dev, "read_ahead_kb"), before, "after signal {signal}");
        assert!(!state.path().join("journal.json").exists());
    }
}

/// A device the host does not have is refused before its lock is taken: a lock file is named
/// after it and stays, so a name the controller made up (a newline, an escape sequence)
/// would be left on the host.
#[test]
fn an_agent_takes_no_lock_for_a_device_its_host_does_not_have() {
    if !common::root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let (mut child, mut out, _) = local_agent(state.path());
    let locks = Path::new("/run/lock/iolab");
    for name in ["nosuchdisk9", "bb evil\\nname", "bb-\\u001b[31mred"] {
        for request in [
            format!(
                "{{\"op\":\"fio_serve\",\"listen\":\"127.0.0.1,18774\",\"device\":\"{name}\"}}"
            ),
            format!("{{\"op\":\"trace_start\",\"device\":\"{name}\"}}"),
        ] {
            let answer = ask(&mut child, &mut out, &request);
            assert!(
                answer.contains("\"ok\":false") && answer.contains("no block device"),
                "{answer}"
            );
        }
    }
    let _ = ask(&mut child, &mut out, "{\"op\":\"bye\"}");
    let _ = child.wait();
    let left: Vec<String> = std::fs::read_dir(locks)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        !left
            .iter()
            .any(|n| n.contains("nosuchdisk9") || n.contains("bb")),
        "{left:?}"
    );
}

/// The device an agent samples is its session's until the session ends, as a local run's is:
/// another iolab cannot take it meanwhile, even with no knob of it set (a controller varying
/// only fio options), and a `restore` between runs keeps it.
#[test]
fn an_agents_device_is_locked_for_its_session() {
    if !common::root_or_skip() {
        return;
    }
    let Some(scratch) = Scratch::new(16 << 20) else {
        return;
    };
    let dev = scratch.name().to_string();
    let state = tempfile::tempdir().unwrap();
    let (mut child, mut out, _) = local_agent(state.path());
    let take = || {
        iolab::sys::lock::acquire(
            &iolab::sys::SysRoot::live(),
            iolab::sys::lock::Resource::Device(dev.clone()),
        )
    };
    drop(take().expect("free before the session samples it"));
    let start = format!("{{\"op\":\"sample_start\",\"devices\":[\"{dev}\"],\"interval_ms\":50}}");
    for (line, what) in [
        (start.as_str(), "sample_start"),
        ("{\"op\":\"sample_stop\"}", "sample_stop"),
        ("{\"op\":\"restore\"}", "restore"),
    ] {
        let answer = ask(&mut child, &mut out, line);
        assert!(answer.contains("\"ok\":true"), "{what}: {answer}");
        let held = take().map(drop).unwrap_err().to_string();
        assert!(held.contains("another iolab"), "after {what}: {held}");
    }
    let answer = ask(&mut child, &mut out, "{\"op\":\"bye\"}");
    assert!(answer.contains("\"ok\":true"), "{answer}");
    child.wait().unwrap();
    drop(take().expect("free once the session ended"));
}

/// A host whose agent was killed outright keeps its knob changed, journaled in its own state
/// dir; `iolab restore --host` runs that host's restore over ssh and puts the knob back. An
/// unreachable host fails the command and says which.
#[test]
fn restore_host_puts_back_what_a_killed_remote_agent_left() {
    let Some(scratch) = Scratch::new(16 << 20) else {
        return;
    };
    let Some(lab) = Lab::new(1) else { return };
    let dev = scratch.name().to_string();
    let before = attr(&dev, "read_ahead_kb");
    let changed = (before.parse::<u64>().unwrap() + 128).to_string();
    let mut conn = Connection::open(&lab.hosts[0].addr, &lab.options()).expect("connect");
    conn.request(&Request::Set {
        path: format!("/sys/block/{dev}/queue/read_ahead_kb"),
        value: changed.clone(),
    })
    .expect("set");
    let journal = lab.hosts[0].state.join("journal.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&journal).unwrap()).unwrap();
    let agent = doc["pid"]
        .as_i64()
        .expect("the journal names the agent's pid");
    unsafe {
        libc::kill(agent as i32, libc::SIGKILL);
    }
    drop(conn);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        attr(&dev, "read_ahead_kb"),
        changed,
        "a killed agent restores nothing"
    );
    let addr = lab.hosts[0].addr.clone();
    let out = lab
        .iolab()
        .args([
            "restore",
            "--host",
            &addr,
            "--remote-iolab",
            &iolab_binary(),
        ])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!("== {addr}")) && text.contains("read_ahead_kb"),
        "{text}"
    );
    assert_eq!(attr(&dev, "read_ahead_kb"), before);
    assert!(!journal.exists(), "{text}");
    // A host that does not answer: the command fails and names it.
    let out = lab
        .iolab()
        .args([
            "restore",
            "--json",
            "--host",
            "10.255.255.1",
            "--remote-iolab",
            &iolab_binary(),
        ])
        .args(["--host", &addr])
        .env(
            "IOLAB_SSH",
            format!("-F {} -o ConnectTimeout=2", lab.config.display()),
        )
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        text.contains("restore did not finish on 10.255.255.1:"),
        "{text}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc[0]["ok"], false);
    assert_eq!(doc[1]["ok"], true, "{doc}");
    assert!(
        doc[1]["output"]["knobs"].is_null(),
        "nothing left to restore: {doc}"
    );
}

/// A host listed by a run whose agent there still runs (cut off, within its lease) holds its
/// knobs: `iolab restore` here put back nothing there and took the host off the list, so the
/// knob was forgotten if that agent was then killed. Now the host stays listed until the
/// agent has ended.
#[test]
fn a_listed_host_whose_agent_still_runs_stays_listed() {
    let Some(scratch) = Scratch::new(16 << 20) else {
        return;
    };
    let Some(lab) = Lab::new(1) else { return };
    let dev = scratch.name().to_string();
    let addr = lab.hosts[0].addr.clone();
    let (conn, before, changed) = agent_raises_read_ahead(&lab, &dev);
    let state = tempfile::tempdir().unwrap();
    std::fs::write(
        state.path().join("hosts.json"),
        format!(
            r#"[{{"ssh": "{addr}", "remote_iolab": "{}"}}]"#,
            iolab_binary()
        ),
    )
    .unwrap();
    let restore = || {
        let out = lab
            .iolab()
            .env("IOLAB_STATE_DIR", state.path())
            .arg("restore")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
    };
    let said = restore();
    assert!(
        said.contains(&format!("host {addr}: ")) && said.contains("it stays listed"),
        "{said}"
    );
    assert!(!said.contains("restored over ssh"), "{said}");
    let listed = iolab::hosts::touched::read(state.path()).unwrap();
    assert_eq!(listed.len(), 1, "{said}");
    assert_eq!(attr(&dev, "read_ahead_kb"), changed);
    // The agent ends (its session closes) and puts its knob back; then the host leaves.
    drop(conn);
    assert!(
        becomes(&dev, "read_ahead_kb", &before, Duration::from_secs(20)),
        "the agent did not restore"
    );
    let end = Instant::now() + Duration::from_secs(10);
    while lab.hosts[0].state.join("journal.json").exists() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    let said = restore();
    assert!(
        said.contains(&format!("host {addr}: restored over ssh")),
        "{said}"
    );
    assert!(iolab::hosts::touched::read(state.path())
        .unwrap()
        .is_empty());
}

/// A name ssh would read as an option is refused before any host is reached (it was tried,
/// and the command said to run it again "once the host answers").
#[test]
fn restore_refuses_a_host_name_ssh_would_misread() {
    let out = Command::new(iolab_binary())
        .args(["restore", "--host=-oProxyCommand=touch /tmp/x"])
        .env("IOLAB_STATE_DIR", tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("--host -oProxyCommand=touch /tmp/x: ") && !text.contains("once the host"),
        "{text}"
    );
}

/// An experiment on `hosts` (ssh destination, device), each host's fio server on port 8765.
fn controlled_experiment(
    hosts: &[(String, String)],
    factors: &str,
) -> iolab::experiment::Experiment {
    anchored_experiment(hosts, factors, "")
}

/// As `controlled_experiment`, with `target` ([target] lines) ahead of the hosts.
fn anchored_experiment(
    hosts: &[(String, String)],
    factors: &str,
    target: &str,
) -> iolab::experiment::Experiment {
    // Direct I/O for a whole second: every read fio counts is one the device completes.
    let head = "name = \"hosts\"\n[workload]\nrw = \"randread\"\ndirect = 1\n\
                time_based = 1\nruntime = \"1s\"\n"
        .to_string()
        + target;
    hosts_experiment("hosts.toml", &head, hosts, factors)
}

/// `head` (name, workload, [target]), then `hosts` (ssh destination, device) with their fio
/// servers on port 8765, then the factors.
fn hosts_experiment(
    name: &str,
    head: &str,
    hosts: &[(String, String)],
    factors: &str,
) -> iolab::experiment::Experiment {
    let mut text = head.to_string();
    for (ssh, device) in hosts {
        text += &format!(
            "[[target.host]]\nssh = \"{ssh}\"\nfio = \"{ssh},8765\"\ndevice = \"{device}\"\n"
        );
    }
    text += &format!("[factors]\n{factors}");
    iolab::experiment::file::parse(name, &text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn controlled_hosts_are_checked_and_modelled_before_the_first_run() {
    use iolab::experiment::run::hosts::{connect, MAX_SKEW};
    let Some(lab) = Lab::new(3) else { return };
    // All "hosts" share this machine's /sys: each drives a scratch device of its own.
    let scratches: Vec<Scratch> = (0..3).filter_map(|_| Scratch::new(16 << 20)).collect();
    if scratches.len() < 3 {
        return;
    }
    let hosts: Vec<(String, String)> = lab
        .addrs()
        .into_iter()
        .zip(&scratches)
        .map(|(a, s)| (a, s.name().to_string()))
        .collect();
    let factors = "read_ahead_kb = [128, 256]\nplacement = [\"on\", \"far\"]\n";
    let exp = controlled_experiment(&hosts, factors);
    let controlled = connect(&exp, &lab.options(), MAX_SKEW).expect("every host is ready");
    assert_eq!(controlled.len(), 3);

    // `iolab run --dry-run` shows each host's own plan: its device, and per cell the CPUs
    // fio gets there and what is set, or why the cell cannot run there.
    let anchored = anchored_experiment(&hosts, factors, "[target]\nanchor_cpu = 0\n");
    let file = lab.dir.path().join("hosts.toml");
    std::fs::write(&file, &anchored.text).unwrap();
    let out = lab
        .iolab()
        .args(["run", "--dry-run", "--remote-iolab", &iolab_binary()])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (addr, dev) in &hosts {
        assert!(text.contains(&format!("host {addr}: /dev/{dev}")), "{text}");
    }
    // The cells list leaves placement to each host's plan: it said "unpinned" of cells every
    // host pins.
    assert!(!text.contains("unpinned"), "{text}");
    assert!(
        text.contains("fio on each host as its note below says"),
        "{text}"
    );
    // No host of this 2-CPU machine has anything farther than `near`: the aggregate's `far`
    // cells are not applicable, as the run records them, and left out of the estimate.
    assert!(
        text.contains("placement=far\n        not applicable: on no host"),
        "{text}"
    );
    assert!(
        text.contains("of them in cells that can run here"),
        "{text}"
    );
    for (_, dev) in &hosts {
        let want = format!(
            "read_ahead_kb=128,placement=on: fio on CPU 0; sets \
             /sys/block/{dev}/queue/read_ahead_kb = 128"
        );
        assert!(text.contains(&want), "{want} in {text}");
    }
    // The same plans in the JSON, for scripts: each host's device and its cells' CPUs.
    let out = lab
        .iolab()
        .args([
            "run",
            "--dry-run",
            "--json",
            "--remote-iolab",
            &iolab_binary(),
        ])
        .arg(&file)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    let plans = json["hosts"]
        .as_array()
        .unwrap_or_else(|| panic!("hosts: {json}"));
    assert_eq!(plans.len(), hosts.len(), "{json}");
    for (p, (addr, dev)) in plans.iter().zip(&hosts) {
        assert_eq!(p["host"], addr.as_str(), "{p}");
        assert_eq!(p["plan"]["devices"][0]["name"], dev.as_str(), "{p}");
        let cells = p["plan"]["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 4, "{p}");
        let on = cells
            .iter()
            .find(|c| c["key"] == "read_ahead_kb=128,placement=on");
        assert_eq!(on.unwrap()["cpus"], serde_json::json!([0]), "{p}");
    }
    for (c, (addr, dev)) in controlled.iter().zip(&hosts) {
        assert_eq!(c.spec.ssh.as_deref(), Some(addr.as_str()));
        assert_eq!(&c.device, dev);
        // The model came from the host's agent and the plan resolved on its device.
        assert!(c.machine.device(dev).is_some(), "{dev} in {addr}'s model");
        assert_eq!(c.plan.cells.len(), 4, "{addr}");
        assert_eq!(c.plan.devices[0].name, *dev);
    }
    drop(controlled);
    // The agents said bye: no journal left on any host.
    for h in &lab.hosts {
        assert!(!h.state.join("journal.json").exists());
    }

    // These hosts are network namespaces of one kernel, with one block tracer: a traced
    // experiment across them is refused before anything runs, naming two of them.
    let traced = anchored_experiment(&hosts, factors, "");
    let traced =
        iolab::experiment::file::parse("traced.toml", &format!("trace = true\n{}", traced.text))
            .unwrap();
    // Why `connect` refuses `exp`.
    let refusal = |exp: &iolab::experiment::Experiment| {
        let err = connect(exp, &lab.options(), MAX_SKEW).err();
        format!("{:#}", err.expect("refused"))
    };
    let text = refusal(&traced);
    assert!(
        text.contains(&format!("host {} (traced.toml line", hosts[0].0))
            && text.contains("are one running kernel (the same boot id)"),
        "{text}"
    );

    // Two of them (one kernel) driving one device are refused before anything runs: each
    // part would run fio on it at once.
    let shared: Vec<(String, String)> = hosts[..2]
        .iter()
        .map(|(addr, _)| (addr.clone(), hosts[0].1.clone()))
        .collect();
    let text = refusal(&controlled_experiment(&shared, factors));
    assert!(
        text.contains(&format!("host {} (hosts.toml line", hosts[0].0))
            && text.contains(&format!(
                "are one running kernel (the same boot id) and both drive /dev/{}",
                hosts[0].1
            )),
        "{text}"
    );

    // A host that cannot be reached refuses the whole run, naming it.
    let mut broken = hosts.clone();
    broken.push(("nosuchhost.invalid".into(), hosts[0].1.clone()));
    let text = refusal(&controlled_experiment(&broken, factors));
    assert!(text.contains("the hosts are not ready"), "{text}");
    assert!(text.contains("nosuchhost.invalid"), "{text}");

    // Jobs that would pin more memory than a host can spare (1 TiB each: fio caps that at
    // the host's RAM less 128 MiB, still too much) are refused, naming the first host, from
    // the memory its agent said it has.
    let text = refusal(&controlled_experiment(&hosts, "lockmem = [\"1t\"]\n"));
    assert!(
        text.contains(&format!("but host {} (hosts.toml line", hosts[0].0))
            && text.contains("pinned by lockmem"),
        "{text}"
    );

    // A device the host does not have is refused with the host and its line.
    let mut missing = hosts.clone();
    missing[1].1 = "nosuchdev9".into();
    let text = refusal(&controlled_experiment(&missing, factors));
    assert!(
        text.contains(&format!("host {} (hosts.toml line 11)", hosts[1].0))
            && text.contains("/dev/nosuchdev9: no such block device on ")
            && !text.contains(" here ")
            && !text.contains(" there:"),
        "{text}"
    );
}

/// `fio --server` in each namespace on its address, port 8765; killed on drop.
struct FioServers(Vec<Child>);

impl FioServers {
    fn start(lab: &Lab) -> FioServers {
        let mut servers = FioServers(Vec::new());
        for h in &lab.hosts {
            // `ip netns exec` execs fio: the child's pid is fio's.
            let child = Command::new("ip")
                .args(["netns", "exec", &h.ns, "fio"])
                .arg(format!("--server=ip:{},8765", h.addr))
                .current_dir(lab.dir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start fio --server");
            servers.0.push(child);
        }
        for h in &lab.hosts {
            let sock: std::net::SocketAddr = format!("{}:8765", h.addr).parse().unwrap();
            let end = Instant::now() + Duration::from_secs(15);
            while std::net::TcpStream::connect_timeout(&sock, Duration::from_millis(200)).is_err() {
                assert!(
                    Instant::now() < end,
                    "fio server at {} not listening",
                    h.addr
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        servers
    }
}

impl Drop for FioServers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Real fio, noting each scratch device's `read_ahead_kb` as each run starts: what the
/// hosts' agents had set for the cell.
struct Watching {
    fio: iolab::workload::RealFio,
    devices: Vec<String>,
    seen: std::sync::Mutex<Vec<(String, Vec<String>)>>,
}

impl iolab::workload::FioRunner for Watching {
    fn run(&self, job: &iolab::workload::JobSpec) -> anyhow::Result<iolab::workload::FioOutcome> {
        let now = self
            .devices
            .iter()
            .map(|d| attr(d, "read_ahead_kb"))
            .collect();
        self.seen.lock().unwrap().push((job.cell_key.clone(), now));
        // One job file per host: its own device, pinned where its own plan placed the cell.
        assert_eq!(job.per_host.len(), self.devices.len());
        for ((_, text), dev) in job.per_host.iter().zip(&self.devices) {
            assert!(text.contains(&format!("filename=/dev/{dev}\n")), "{text}");
            assert!(text.contains("cpus_allowed="), "{text}");
        }
        self.fio.run(job)
    }
}

struct Quiet;

impl iolab::experiment::run::Progress for Quiet {
    fn message(&mut self, _: &str) {}
    fn run_started(&mut self, _: &iolab::experiment::run::Step) {}
}

/// `n` hosts, fio, and a scratch loop device per host ("hosts" share this machine's /sys);
/// None, with a skip message, when this machine cannot make them.
fn fio_lab(n: usize) -> Option<(Lab, Vec<Scratch>)> {
    let lab = Lab::new(n)?;
    if Command::new("fio").arg("--version").output().is_err() {
        common::skip("needs fio");
        return None;
    }
    let scratches: Vec<Scratch> = (0..n).filter_map(|_| Scratch::new(16 << 20)).collect();
    (scratches.len() == n).then_some((lab, scratches))
}

/// Settings for a run on `lab`'s hosts: database and state directory under `dir`, a fast
/// sampler, no preflight sampling, the lab's ssh config.
fn lab_settings(lab: &Lab, dir: &Path) -> iolab::experiment::run::Settings {
    let mut settings = iolab::experiment::run::Settings::live(dir.join("r.db"));
    settings.state_dir = dir.join("state");
    settings.sample_interval = Duration::from_millis(100);
    settings.preflight_sample = Duration::ZERO;
    settings.ssh = lab.options();
    settings
}

/// What a run's sampler figures were taken over (`null` when nothing was recorded).
fn sample_window(store: &iolab::store::Store, experiment: i64, run: i64) -> serde_json::Value {
    store
        .run_bases(experiment)
        .unwrap()
        .into_iter()
        .find(|b| b.run_id == run)
        .and_then(|b| b.sample_window)
        .unwrap_or_default()
}

/// One stored metric of one run.
fn metric(store: &iolab::store::Store, run: i64, name: &str) -> Option<f64> {
    store
        .run_metrics(run)
        .unwrap()
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
}

#[test]
fn controlled_hosts_run_knobs_placement_and_sampling_on_each_host() {
    use iolab::experiment::run as runloop;
    let Some((lab, scratches)) = fio_lab(3) else {
        return;
    };
    let devices: Vec<String> = scratches.iter().map(|s| s.name().to_string()).collect();
    let before: Vec<String> = devices.iter().map(|d| attr(d, "read_ahead_kb")).collect();
    let hosts: Vec<(String, String)> = lab.addrs().into_iter().zip(devices.clone()).collect();
    let _servers = FioServers::start(&lab);
    let factors = "read_ahead_kb = [256, 512]\nplacement = [\"on\", \"near\"]\n";
    // Loop devices take no interrupt: placement is relative to CPU 0 on every host. The
    // "hosts" are namespaces of this machine: the first two hosts' devices are this
    // machine's too, sampled here as a hypervisor's volumes behind its guests would be.
    let target = format!(
        "[target]\nanchor_cpu = 0\nlocal_devices = [\"{}\", \"/dev/{}\"]\n",
        devices[0], devices[1]
    );
    let exp = anchored_experiment(&hosts, factors, &target);
    let state = tempfile::tempdir().unwrap();
    let settings = lab_settings(&lab, state.path());
    let runner = Watching {
        fio: iolab::workload::RealFio {
            time_limit: Some(Duration::from_secs(120)),
            clients: exp.target.hosts.clone(),
            ..Default::default()
        },
        devices: devices.clone(),
        seen: Default::default(),
    };
    let cancel = iolab::workload::CancelToken::new();
    let outcome = runloop::run(&exp, &settings, &runner, &cancel, &mut Quiet).expect("the run");
    assert_eq!(outcome.failed_runs, 0, "{:?}", outcome.cells);
    // During each cell every host's device had the cell's read_ahead_kb.
    let seen = runner.seen.lock().unwrap();
    assert!(seen.len() >= 4, "{seen:?}");
    for (key, values) in seen.iter() {
        let want = if key.contains("read_ahead_kb=256") {
            "256"
        } else {
            "512"
        };
        assert!(values.iter().all(|v| v == want), "{key}: {values:?}");
    }
    // Every knob is back on every host, and no agent journal is left.
    let after: Vec<String> = devices.iter().map(|d| attr(d, "read_ahead_kb")).collect();
    assert_eq!(after, before);
    for h in &lab.hosts {
        assert!(!h.state.join("journal.json").exists(), "{}", h.addr);
    }
    // Each host's sampler figures are stored with each run, under the host's name.
    for cell in &outcome.cells {
        assert!(!cell.runs.is_empty(), "{}", cell.key);
        for run in &cell.runs {
            for (addr, _) in &hosts {
                let reads = run
                    .iter()
                    .find(|(k, _)| *k == format!("{addr}:dev_r_per_s"))
                    .map(|(_, v)| *v);
                assert!(reads.is_some_and(|r| r > 0.0), "{addr} in {run:?}");
                // The summary's usr, sys and ints/s of the run are the mean of these.
                for m in ["usr_pct", "sys_pct", "irq_per_s"] {
                    let key = format!("{addr}:{m}");
                    assert!(run.iter().any(|(k, _)| *k == key), "{key} in {run:?}");
                }
            }
        }
    }
    assert!(
        !settings.state_dir.join("hosts.json").exists(),
        "every host said bye: none is left listed for `iolab restore`"
    );

    // Each host's own runs form an experiment of their own, part of the aggregate's: its
    // name, its kernel, its fio figures and its sampler's, one run per aggregate run.
    let store = iolab::store::Store::open_existing(&settings.db_path).unwrap();
    let id = outcome.experiment_id;
    let parts = store.parts(id).unwrap();
    let names: Vec<&str> = parts.iter().map(|p| p.host.as_str()).collect();
    let addrs: Vec<&str> = hosts.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(names, addrs);
    assert_eq!(
        outcome.host_parts,
        parts
            .iter()
            .map(|p| (p.host.clone(), p.id))
            .collect::<Vec<_>>()
    );
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let aggregate: Vec<_> = store
        .runs(id)
        .unwrap()
        .into_iter()
        .filter(|r| !r.warmup)
        .collect();
    let mut own: Vec<Vec<i64>> = Vec::new();
    for (p, (_, dev)) in parts.iter().zip(&hosts) {
        assert_eq!(p.part_of, Some(id));
        assert_eq!(p.kernel, kernel.trim());
        assert_eq!(p.runs_ok as usize, aggregate.len(), "{}", p.host);
        let runs: Vec<_> = store
            .runs(p.id)
            .unwrap()
            .into_iter()
            .filter(|r| !r.warmup)
            .collect();
        for (r, a) in runs.iter().zip(&aggregate) {
            assert_eq!((&r.cell_key, r.repetition), (&a.cell_key, a.repetition));
            // The host's device figures cover fio's measured second there, not fio's
            // start-up as well (over a second of connecting, which left them 40% low). The
            // window is placed to within about half a 20 ms reading interval, and with three
            // hosts on two CPUs the I/O comes in bursts: 10 ms of one is a few percent.
            let fio = metric(&store, r.id, "read_iops").unwrap();
            let device = metric(&store, r.id, "dev_r_per_s").unwrap();
            assert!(
                (device / fio - 1.0).abs() < 0.1,
                "{}: the device completed {device:.0} reads/s, fio read {fio:.0} IOPS",
                p.host
            );
            let window = sample_window(&store, p.id, r.id);
            assert_eq!(window["basis"], "end of device I/O", "{window}");
            let tags = store.run_tags(r.id).unwrap();
            assert!(
                tags.contains(&("host".to_string(), p.host.clone())),
                "{tags:?}"
            );
            // Its sampler's series too, its own device's among them.
            let samples = store.samples(r.id).unwrap();
            assert!(
                samples
                    .iter()
                    .any(|x| x.key == format!("{dev}/r_per_s") && !x.values.is_empty()),
                "{}: {:?}",
                p.host,
                samples.iter().map(|x| &x.key).collect::<Vec<_>>()
            );
        }
        own.push(runs.iter().map(|r| r.id).collect());
    }
    // This machine's own figures (`local:*`) are taken over the hosts' windows together:
    // each host measured for a second, at about the same time.
    for (i, a) in aggregate.iter().enumerate() {
        let w = sample_window(&store, id, a.id);
        assert_eq!(w["basis"], "hosts' windows", "{w}");
        let len = w["end_s"].as_f64().unwrap() - w["start_s"].as_f64().unwrap();
        assert!((0.9..1.5).contains(&len), "{w}");
        assert!(metric(&store, a.id, "local:usr_pct").is_some());
        // The devices named in `local_devices`, over those windows together (a host's own
        // second inside up to 1.5 s): each saw its host's reads, and no more.
        for (dev, host_runs) in devices.iter().zip(&own).take(2) {
            let here = metric(&store, a.id, &format!("local:{dev}:dev_r_per_s"));
            let there = metric(&store, host_runs[i], "dev_r_per_s").unwrap();
            assert!(
                here.is_some_and(|r| r > 0.5 * there && r < 1.1 * there),
                "run {}: {dev} here {here:?}/s, on its host {there:.0}/s",
                a.id
            );
        }
        let unnamed = format!("local:{}:dev_r_per_s", devices[2]);
        assert_eq!(metric(&store, a.id, &unnamed), None);
    }
    for (i, a) in aggregate.iter().enumerate() {
        // The aggregate's IOPS are the hosts' summed, run by run.
        let total = metric(&store, a.id, "read_iops").unwrap();
        let sum: f64 = own
            .iter()
            .map(|r| metric(&store, r[i], "read_iops").unwrap())
            .sum();
        assert!(
            (sum - total).abs() <= 1e-9 * total.max(1.0),
            "run {}: hosts {sum} vs aggregate {total}",
            a.id
        );
        assert!(sum > 0.0);
        // This machine drove them and was sampled as a whole meanwhile.
        assert!(
            metric(&store, a.id, "local:usr_pct").is_some(),
            "run {}",
            a.id
        );
    }

    // show, compare and plot take one host's runs, or the hosts as series.
    let db = settings.db_path.display().to_string();
    let out = common::iolab()
        .args([
            "show",
            &id.to_string(),
            "--host",
            addrs[1],
            "--json",
            "--db",
            &db,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(&format!("\"id\": {}", parts[1].id)), "{text}");
    let out = common::iolab()
        .args(["show", &id.to_string(), "--host", "nosuchhost", "--db", &db])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains(addrs[0]), "{err}");
    // `--host` takes each side's runs on that host: here both sides are its part, which
    // compare refuses as a group against itself, naming the part.
    let out = common::iolab()
        .args([
            "compare",
            &id.to_string(),
            &id.to_string(),
            "--host",
            addrs[2],
            "--db",
            &db,
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let part = parts[2].id;
    assert!(
        !out.status.success() && err.contains(&format!("{part} and {part} select the same")),
        "{err}"
    );
    let svg = state.path().join("hosts.svg");
    let out = common::iolab()
        .args([
            "plot",
            &id.to_string(),
            "--kind",
            "lines",
            "--by-host",
            "--x",
            "read_ahead_kb",
        ])
        .args(["--by", "placement", "-o"])
        .arg(&svg)
        .args(["--db", &db])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let drawn = std::fs::read_to_string(&svg).unwrap();
    for a in &addrs {
        assert!(drawn.contains(a), "{a} is a series of the chart");
    }
}

/// Real fio; just before the `at`-th run starts, `disrupt` runs: a host dies, or is cut off.
struct Disrupted {
    fio: iolab::workload::RealFio,
    at: usize,
    disrupt: Box<dyn Fn() + Send + Sync>,
    runs: std::sync::Mutex<usize>,
}

impl Disrupted {
    fn new(at: usize, disrupt: impl Fn() + Send + Sync + 'static) -> Disrupted {
        Disrupted {
            fio: iolab::workload::RealFio {
                time_limit: Some(Duration::from_secs(120)),
                ..Default::default()
            },
            at,
            disrupt: Box::new(disrupt),
            runs: Default::default(),
        }
    }
}

impl iolab::workload::FioRunner for Disrupted {
    fn run(&self, job: &iolab::workload::JobSpec) -> anyhow::Result<iolab::workload::FioOutcome> {
        let mut runs = self.runs.lock().unwrap();
        *runs += 1;
        if *runs == self.at {
            (self.disrupt)();
        }
        drop(runs);
        self.fio.run(job)
    }
}

#[test]
fn a_host_that_dies_mid_run_fails_only_its_runs_and_restore_puts_it_back_later() {
    use iolab::experiment::run as runloop;
    let Some((mut lab, scratches)) = fio_lab(3) else {
        return;
    };
    let devices: Vec<String> = scratches.iter().map(|s| s.name().to_string()).collect();
    // A loop device keeps its queue settings across attachments: start from a value no cell
    // sets, so the dead host's knob is seen to stay changed.
    for d in &devices {
        std::fs::write(format!("/sys/block/{d}/queue/read_ahead_kb"), "128").unwrap();
    }
    let before: Vec<String> = devices.iter().map(|d| attr(d, "read_ahead_kb")).collect();
    let hosts: Vec<(String, String)> = lab.addrs().into_iter().zip(devices.clone()).collect();
    let servers = FioServers::start(&lab);
    let exp = hosts_experiment(
        "dies.toml",
        "name = \"dies\"\nrepetitions = 3\nwarmup = false\n[workload]\nrw = \"randread\"\n\
         runtime = \"1s\"\n",
        &hosts,
        "read_ahead_kb = [256, 512]\n",
    );
    let state = tempfile::tempdir().unwrap();
    let settings = lab_settings(&lab, state.path());
    // At the third run the third host dies: every process in its namespace (sshd, its agent,
    // its fio server) is SIGKILLed just before fio starts.
    let ns = lab.hosts[2].ns.clone();
    let runner = Disrupted::new(3, move || kill_namespace(&ns));
    let cancel = iolab::workload::CancelToken::new();
    let outcome = runloop::run(&exp, &settings, &runner, &cancel, &mut Quiet).expect("the run");
    drop(servers);

    // The two hosts that lived have every run; the dead one its first two, then failures
    // that say it is gone; the aggregate of every run after the death failed with it.
    let store = iolab::store::Store::open_existing(&settings.db_path).unwrap();
    let parts = store.parts(outcome.experiment_id).unwrap();
    assert_eq!(parts.len(), 3);
    for p in &parts[..2] {
        assert_eq!((p.runs_ok, p.runs_failed), (6, 0), "{}", p.host);
    }
    let dead = &parts[2];
    assert_eq!((dead.runs_ok, dead.runs_failed), (2, 4), "{}", dead.host);
    let reasons: Vec<String> = store
        .runs(dead.id)
        .unwrap()
        .into_iter()
        .filter_map(|r| match r.status {
            iolab::store::RunStatus::Failed(why) => Some(why),
            _ => None,
        })
        .collect();
    // Its sampler's session or fio's connection, whichever noticed first.
    assert!(reasons[0].contains(&hosts[2].0), "{reasons:?}");
    for why in &reasons[1..] {
        assert!(why.contains("unreachable since run 3"), "{why}");
    }
    assert_eq!(outcome.failed_runs, 4);
    // The living hosts are back as they were; the dead one kept its knob and its journal,
    // and this machine listed it for `iolab restore`, which a new run asks for first.
    for i in 0..2 {
        assert_eq!(attr(&devices[i], "read_ahead_kb"), before[i]);
        assert!(!lab.hosts[i].state.join("journal.json").exists());
    }
    assert_ne!(attr(&devices[2], "read_ahead_kb"), before[2]);
    assert!(lab.hosts[2].state.join("journal.json").exists());
    assert_eq!(outcome.hosts_left.len(), 1, "{:?}", outcome.hosts_left);
    assert!(outcome.hosts_left[0].contains(&hosts[2].0));
    let listed = iolab::hosts::touched::read(&settings.state_dir).unwrap();
    assert_eq!(
        listed.iter().map(|h| h.ssh.as_str()).collect::<Vec<_>>(),
        [hosts[2].0.as_str()]
    );
    let again = runloop::run(&exp, &settings, &runner, &cancel, &mut Quiet).expect_err("refused");
    assert!(format!("{again:#}").contains("iolab restore"), "{again:#}");

    // Once the host is back, `iolab restore` here restores it there.
    lab.hosts[2].kill();
    lab.hosts[2].start_sshd();
    wait_for_port(&hosts[2].0);
    let out = lab
        .iolab()
        .env("IOLAB_STATE_DIR", &settings.state_dir)
        .arg("restore")
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains(&format!("host {}: restored over ssh", hosts[2].0)),
        "{said}"
    );
    assert_eq!(attr(&devices[2], "read_ahead_kb"), before[2]);
    assert!(!lab.hosts[2].state.join("journal.json").exists());
    assert!(iolab::hosts::touched::read(&settings.state_dir)
        .unwrap()
        .is_empty());
}

#[test]
fn a_controlled_host_records_a_trace_of_its_own_device_and_sends_back_its_figures() {
    use iolab::experiment::run as runloop;
    // One host: the namespaces share this machine's tracer, which records one trace at once.
    let Some((lab, scratches)) = fio_lab(1) else {
        return;
    };
    let dev = scratches[0].name().to_string();
    let addr = lab.addrs()[0].clone();
    let _servers = FioServers::start(&lab);
    // 3 s measured: at 1 s, on a loaded machine, where fio's interval lies between the
    // agent's samples was known to within more than 8% of its bytes, and the diskstats check
    // was (rightly) not judged. At 20,000 reads a second: unthrottled, with the other tests
    // busy on both CPUs, the tracer's reader once fell behind and the kernel dropped 257,000
    // events (the check said so, rightly).
    let text = format!(
        "name = \"traced\"\nrepetitions = 2\nwarmup = false\ntrace = true\n[workload]\n\
         rw = \"randread\"\ndirect = 1\nramp_time = \"1s\"\nruntime = \"3s\"\n\
         rate_iops = 20000\ntime_based = true\n[[target.host]]\nssh = \"{addr}\"\n\
         fio = \"{addr},8765\"\ndevice = \"{dev}\"\n[factors]\nread_ahead_kb = [256]\n"
    );
    let exp = iolab::experiment::file::parse("traced.toml", &text).unwrap();
    let state = tempfile::tempdir().unwrap();
    let settings = lab_settings(&lab, state.path());
    let runner = iolab::workload::RealFio {
        time_limit: Some(Duration::from_secs(120)),
        ..Default::default()
    };
    let cancel = iolab::workload::CancelToken::new();
    let _turn = crate::trace::recording_turn();
    let outcome = runloop::run(&exp, &settings, &runner, &cancel, &mut Quiet).expect("the run");
    assert_eq!(outcome.failed_runs, 0, "{:?}", outcome.cells);
    let store = iolab::store::Store::open_existing(&settings.db_path).unwrap();
    let part = &store.parts(outcome.experiment_id).unwrap()[0];
    let own = store.runs(part.id).unwrap();
    let aggregate = store.runs(outcome.experiment_id).unwrap();
    assert_eq!(own.len(), 2);
    for (r, a) in own.iter().zip(&aggregate) {
        // The host's own run has the trace's figures; the aggregate has them under its name.
        let ios = metric(&store, r.id, "trace_q2c_count")
            .unwrap_or_else(|| panic!("{:?}", store.run_metrics(r.id).unwrap()));
        let reads = metric(&store, r.id, "read_iops").unwrap();
        assert!(ios > 0.0 && reads > 0.0, "{ios} {reads}");
        assert_eq!(
            metric(&store, a.id, &format!("{addr}:trace_q2c_count")),
            Some(ios)
        );
        // The host's part is cross-checked as a local run is (its trace over fio's
        // interval as the host placed it, after the ramp), and the aggregate run lists the
        // host's checks under its name.
        let basis = |experiment: i64, run: i64| {
            let bases = store.run_bases(experiment).unwrap();
            let b = bases.into_iter().find(|b| b.run_id == run).unwrap();
            b.checks
                .unwrap_or_else(|| panic!("run {run} has no checks"))
        };
        let checks = basis(part.id, r.id);
        for name in [
            "trace_bytes_vs_fio",
            "json_plus_percentile",
            "fio_bytes_vs_diskstats",
        ] {
            let v = crate::common::verdict_of(&checks, name);
            assert!(v.starts_with("ok:"), "{v}");
        }

        let traced = crate::common::verdict_of(&checks, "trace_bytes_vs_fio");
        assert!(
            traced.contains("within fio's measured interval"),
            "{traced}"
        );
        let aggregate = basis(outcome.experiment_id, a.id);
        let v = crate::common::verdict_of(&aggregate, "trace_bytes_vs_fio");
        assert!(v.contains(&format!("\"{addr}: trace of {dev}\"")), "{v}");
    }
    // Nothing of the traces is left on the host (its state directory) or here.
    let left: Vec<_> = std::fs::read_dir(&lab.hosts[0].state)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        !left
            .iter()
            .any(|n| n.to_string_lossy().starts_with("agent-trace")),
        "{left:?}"
    );
    assert!(!iolab::experiment::run::trace::traces_dir(&settings.db_path).exists());
}

/// `serve = true`: each host's agent starts its fio server for the run, on the host's own
/// address, confined to its device (here written: the workload writes, and each device is
/// named destructive), and stops it when the run ends. No fio server is started by hand.
#[test]
fn agents_serve_fio_for_the_run_and_stop_it_after() {
    use iolab::experiment::run as runloop;
    let Some((lab, scratches)) = fio_lab(2) else {
        return;
    };
    let devices: Vec<String> = scratches.iter().map(|s| s.name().to_string()).collect();
    let addrs = lab.addrs();
    let mut text = "name = \"served\"\nrepetitions = 2\nwarmup = false\n[workload]\n\
                    rw = \"randrw\"\ndirect = 1\nruntime = \"1s\"\ntime_based = true\n"
        .to_string();
    for (addr, dev) in addrs.iter().zip(&devices) {
        text += &format!(
            "[[target.host]]\nssh = \"{addr}\"\nfio = \"{addr},8765\"\ndevice = \"{dev}\"\n\
             serve = true\n"
        );
    }
    text += "[factors]\nbs = [\"4k\"]\n";
    let exp = iolab::experiment::file::parse("served.toml", &text).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut settings = lab_settings(&lab, state.path());
    settings.destructive_devices = devices.clone();
    let runner = iolab::workload::RealFio {
        time_limit: Some(Duration::from_secs(120)),
        ..Default::default()
    };
    let cancel = iolab::workload::CancelToken::new();
    let outcome = runloop::run(&exp, &settings, &runner, &cancel, &mut Quiet).expect("the run");
    assert_eq!(outcome.failed_runs, 0, "{:?}", outcome.cells);
    let store = iolab::store::Store::open_existing(&settings.db_path).unwrap();
    let parts = store.parts(outcome.experiment_id).unwrap();
    assert_eq!(parts.len(), 2);
    for part in &parts {
        let runs = store.runs(part.id).unwrap();
        assert_eq!(runs.len(), 2, "{}", part.host);
        for r in &runs {
            for m in ["read_iops", "write_iops"] {
                let v = metric(&store, r.id, m);
                assert!(v.is_some_and(|v| v > 0.0), "{} {m}: {v:?}", part.host);
            }
        }
    }
    // The servers went with their sessions.
    for addr in &addrs {
        let sock: std::net::SocketAddr = format!("{addr}:8765").parse().unwrap();
        assert!(
            std::net::TcpStream::connect_timeout(&sock, Duration::from_millis(500)).is_err(),
            "a fio server still listens on {addr}"
        );
    }
    // A server that cannot start (on an address its host does not have) stops the run
    // before its first cell: nothing was set on any host, so no list of hosts to restore is
    // left to refuse the next run. The last host's fails, after the first host's agent
    // started its own server.
    let at = text.rfind("serve = true").unwrap();
    let mut foreign = text.clone();
    foreign.replace_range(
        at..at + "serve = true".len(),
        "serve = \"10.254.254.254,8765\"",
    );
    let refused = iolab::experiment::file::parse("served.toml", &foreign).unwrap();
    let err = runloop::run(&refused, &settings, &runner, &cancel, &mut Quiet)
        .expect_err("refused: the server cannot bind");
    assert!(
        format!("{err:#}").contains("cannot start its fio server"),
        "{err:#}"
    );
    assert!(
        !settings.state_dir.join("hosts.json").exists(),
        "a run refused before its first cell left its list of hosts"
    );
    // An address of this machine's own, served on a host in another network namespace: this
    // machine's fio client would reach whatever listens here (a server of anyone's,
    // unconfined), not the host's agent's. Refused before any host is touched.
    let loopback = text.replacen(
        &format!("fio = \"{},8765\"", addrs[0]),
        "fio = \"127.0.0.1,18796\"",
        1,
    );
    assert_ne!(loopback, text);
    let refused = iolab::experiment::file::parse("served.toml", &loopback).unwrap();
    let err = runloop::run(&refused, &settings, &runner, &cancel, &mut Quiet)
        .expect_err("refused: the client would not reach the host's server");
    assert!(
        format!("{err:#}").contains("127.0.0.1 is an address of this machine"),
        "{err:#}"
    );
    assert!(!settings.state_dir.join("hosts.json").exists());
    // The refused run ended only once its agents had: the next run starts at once, not
    // refused by the first host's agent still stopping its server.
    let outcome = runloop::run(&exp, &settings, &runner, &cancel, &mut Quiet)
        .expect("a run right after a refused one");
    assert_eq!(outcome.failed_runs, 0, "{:?}", outcome.cells);
}

/// A TCP forwarder from a port of 127.0.0.1 to `to`, for as long as the test runs: a host
/// reached through a port forward, as QEMU guests are.
fn forward(to: String) -> u16 {
    use std::net::{TcpListener, TcpStream};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(&to) else {
                continue;
            };
            let pipe = |mut from: TcpStream, mut into: TcpStream| {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut into);
                    let _ = into.shutdown(std::net::Shutdown::Write);
                });
            };
            pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
            pipe(server, client);
        }
    });
    port
}

/// Hosts reached through port forwards on one address (`fio = "127.0.0.1,PORT"`, `serve` on
/// each host's own address): fio names every server 127.0.0.1 and tells them apart by port.
/// Matched by address alone, each host's part held every host's jobs and stored their sum.
#[test]
fn hosts_behind_one_address_each_keep_their_own_figures() {
    use iolab::experiment::run as runloop;
    let Some((lab, scratches)) = fio_lab(2) else {
        return;
    };
    let mut text = "name = \"forwarded\"\nwarmup = false\n[workload]\nrw = \"randread\"\n\
                    direct = 1\nruntime = \"1s\"\ntime_based = true\n"
        .to_string();
    for (addr, s) in lab.addrs().iter().zip(&scratches) {
        let port = forward(format!("{addr}:8765"));
        text += &format!(
            "[[target.host]]\nssh = \"{addr}\"\nfio = \"127.0.0.1,{port}\"\ndevice = \"{}\"\n\
             serve = \"{addr},8765\"\n",
            s.name()
        );
    }
    text += "[factors]\nbs = [\"4k\"]\n";
    let exp = iolab::experiment::file::parse("forwarded.toml", &text).unwrap();
    let state = tempfile::tempdir().unwrap();
    let settings = lab_settings(&lab, state.path());
    let runner = iolab::workload::RealFio {
        time_limit: Some(Duration::from_secs(120)),
        ..Default::default()
    };
    let cancel = iolab::workload::CancelToken::new();
    let outcome = runloop::run(&exp, &settings, &runner, &cancel, &mut Quiet).expect("the run");
    assert_eq!(outcome.failed_runs, 0, "{:?}", outcome.cells);
    let store = iolab::store::Store::open_existing(&settings.db_path).unwrap();
    // Each run's IOPS, in the order the runs were made.
    let iops = |experiment: i64| -> Vec<f64> {
        let mut runs = store.runs(experiment).unwrap();
        runs.sort_by_key(|r| r.id);
        runs.iter()
            .map(|r| metric(&store, r.id, "read_iops").unwrap())
            .collect()
    };
    let all = iops(outcome.experiment_id);
    let parts: Vec<Vec<f64>> = store
        .parts(outcome.experiment_id)
        .unwrap()
        .iter()
        .map(|p| iops(p.id))
        .collect();
    assert_eq!(parts.len(), 2);
    for (run, &total) in all.iter().enumerate() {
        let mine: Vec<f64> = parts.iter().map(|p| p[run]).collect();
        assert!(
            mine.iter().all(|&p| p > 0.0 && p < total),
            "{mine:?} of {total}"
        );
        let sum: f64 = mine.iter().sum();
        assert!(
            (sum - total).abs() <= total * 1e-6,
            "{mine:?} add up to {sum}, not {total}"
        );
    }
}

/// A host cut off mid-run without a reset: fio's client waited for its server until iolab's
/// time limit killed it, and the other host's figures of that run were lost with fio's
/// output ("fio reported nothing from the server"). Now fio drops the silent server (its ETA
/// request goes unanswered) and reports the others.
#[test]
fn a_host_cut_off_mid_run_costs_the_other_host_nothing() {
    use iolab::experiment::run as runloop;
    let Some((lab, scratches)) = fio_lab(2) else {
        return;
    };
    let hosts: Vec<(String, String)> = lab
        .addrs()
        .into_iter()
        .zip(scratches.iter().map(|s| s.name().to_string()))
        .collect();
    let servers = FioServers::start(&lab);
    let exp = hosts_experiment(
        "cut.toml",
        "name = \"cut\"\nrepetitions = 2\nwarmup = false\n[workload]\nrw = \"randread\"\n\
         direct = 1\nruntime = \"3s\"\ntime_based = true\n",
        &hosts,
        "bs = [\"4k\"]\n",
    );
    let state = tempfile::tempdir().unwrap();
    let settings = lab_settings(&lab, state.path());
    // 1.5 s into the first run the second host's link goes down: no reset reaches anyone, as
    // with a pulled cable or a firewall.
    let veth = lab.hosts[1].veth.clone();
    let runner = Disrupted::new(1, move || {
        let veth = veth.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1500));
            let _ = run("ip", &["link", "set", &veth, "down"]);
        });
    });
    let cancel = iolab::workload::CancelToken::new();
    let outcome = runloop::run(&exp, &settings, &runner, &cancel, &mut Quiet).expect("the run");
    kill_namespace(&lab.hosts[1].ns);
    drop(servers);
    let store = iolab::store::Store::open_existing(&settings.db_path).unwrap();
    let parts = store.parts(outcome.experiment_id).unwrap();
    assert_eq!(parts.len(), 2);
    let reasons = |id: i64| -> Vec<String> {
        store
            .runs(id)
            .unwrap()
            .into_iter()
            .filter_map(|r| match r.status {
                iolab::store::RunStatus::Failed(why) => Some(why),
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        (parts[0].runs_ok, parts[0].runs_failed),
        (2, 0),
        "{}: {:?}",
        parts[0].host,
        reasons(parts[0].id)
    );
    assert_eq!(parts[1].runs_ok, 0, "{}", parts[1].host);
    let cut = reasons(parts[1].id);
    assert!(cut[0].contains(&hosts[1].0), "{cut:?}");
}

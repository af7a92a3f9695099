//! The program engines: `iperf3` and `sockperf` end to end over a veth pair between two
//! network namespaces this test makes (and removes, also when it fails), with iolab starting
//! the server in one and the client in the other; `command` with a regular-expression metric
//! and with a JSON metric; the refusal of `command` without `allow_exec`; and the run loop
//! with replayed engine outputs, exactly.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use iolab::experiment::run::{self as runloop, Quiet, Settings};
use iolab::experiment::{self, Experiment};
use iolab::store::{RunStatus, Store};
use iolab::sys::SysRoot;
use iolab::workload::{CancelToken, Canned, RealFio, ReplayFio};

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn exp(text: &str) -> Experiment {
    experiment::parse("t.toml", text).unwrap_or_else(|e| panic!("{e}"))
}

fn has(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs `ip ARGS`, which must succeed.
fn ip(args: &str) {
    let ok = Command::new("sh")
        .args(["-c", &format!("ip {args}")])
        .status()
        .unwrap()
        .success();
    assert!(ok, "ip {args}");
}

/// Two network namespaces joined by a veth pair, 10.231.X.1 and .2; deleted on drop.
struct NetPair {
    a: String,
    b: String,
}

impl NetPair {
    fn new(tag: &str, subnet: u8) -> NetPair {
        let pid = std::process::id();
        let pair = NetPair {
            a: format!("iolabt-{tag}a-{pid}"),
            b: format!("iolabt-{tag}b-{pid}"),
        };
        let (va, vb) = (format!("ilv{tag}a{pid}"), format!("ilv{tag}b{pid}"));
        let (va, vb) = (&va[..va.len().min(15)], &vb[..vb.len().min(15)]);
        ip(&format!("netns add {}", pair.a));
        ip(&format!("netns add {}", pair.b));
        ip(&format!(
            "link add {va} netns {} type veth peer name {vb} netns {}",
            pair.a, pair.b
        ));
        for (ns, dev, host) in [(&pair.a, va, 1), (&pair.b, vb, 2)] {
            ip(&format!(
                "-n {ns} addr add 10.231.{subnet}.{host}/30 dev {dev}"
            ));
            ip(&format!("-n {ns} link set {dev} up"));
            ip(&format!("-n {ns} link set lo up"));
        }
        pair
    }
}

impl Drop for NetPair {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of the veth pair, and with it the other.
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// Runs `e` on this machine (a scratch loop device as the target) with the real runner.
fn run_live(e: &Experiment) -> (runloop::Outcome, Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Settings::live(dir.path().join("r.db"));
    s.state_dir = dir.path().join("state");
    s.sample_interval = Duration::from_millis(200);
    s.preflight_sample = Duration::ZERO;
    let runner = RealFio {
        work_dir: dir.path().join("state/fio"),
        ..RealFio::default()
    };
    let out = runloop::run(e, &s, &runner, &CancelToken::new(), &mut Quiet).unwrap();
    let store = Store::open(dir.path().join("r.db")).unwrap();
    (out, store, dir)
}

fn metric(out: &runloop::Outcome, cell: usize, name: &str) -> f64 {
    out.cells[cell].runs[0]
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no {name} in {:?}", out.cells[cell]))
        .1
}

fn ok_runs(out: &runloop::Outcome) {
    for c in &out.cells {
        assert!(c.failures.is_empty(), "{:?}", c.failures);
        assert!(!c.runs.is_empty(), "{c:?}");
    }
}

/// Namespaces for a test of `program`, or `None` (skipped) without root, it or `ip`.
fn net_or_skip(program: &str, tag: &str, subnet: u8) -> Option<NetPair> {
    if !crate::common::root_or_skip() {
        return None;
    }
    if !has(program) || !has("ip") {
        crate::common::skip(&format!("needs {program} and ip (scripts/deps)"));
        return None;
    }
    Some(NetPair::new(tag, subnet))
}

#[test]
fn iperf3_over_a_veth_pair_between_namespaces() {
    let Some(net) = net_or_skip("iperf3", "i", 1) else {
        return;
    };
    let e = exp(&format!(
        "name = \"i\"\nrepetitions = 1\nengine = \"iperf3\"\n[iperf3]\nserver = \"10.231.1.2\"\n\
         port = 5399\nnetns = \"{}\"\nserver_netns = \"{}\"\ntime = 1\n\
         [factors]\nparallel = [1, 2]\nplacement = [\"0\"]\n",
        net.a, net.b
    ));
    let (out, store, _dir) = run_live(&e);
    ok_runs(&out);
    for cell in 0..2 {
        assert!(metric(&out, cell, "net_received_mbit_per_s") > 0.0);
        assert!(metric(&out, cell, "net_sent_mbit_per_s") > 0.0);
        // The sampler ran around the program.
        assert!(metric(&out, cell, "idle_pct") >= 0.0);
    }
    let runs = store.runs(out.experiment_id).unwrap();
    let texts = store.run_texts(runs[0].id).unwrap().unwrap();
    let cmd = texts.fio_command.unwrap_or_default();
    assert!(cmd.contains("taskset -c 0") && cmd.contains("-P "), "{cmd}");
    assert!(
        cmd.contains(&format!("ip netns exec {} iperf3 -s", net.b)),
        "{cmd}"
    );
}

/// One veth pair from this namespace (10.231.X.1, where iolab can see it as a NIC) into a
/// new namespace (10.231.X.2); deleted on drop.
struct RootVeth {
    nic: String,
    ns: String,
}

impl RootVeth {
    fn new(tag: &str, subnet: u8) -> RootVeth {
        let pid = std::process::id();
        let v = RootVeth {
            nic: format!("ilr{tag}{pid}").chars().take(15).collect(),
            ns: format!("iolabt-r{tag}-{pid}"),
        };
        let peer: String = format!("ilp{tag}{pid}").chars().take(15).collect();
        for args in [
            format!("netns add {}", v.ns),
            format!(
                "link add {} type veth peer name {peer} netns {}",
                v.nic, v.ns
            ),
            format!("addr add 10.231.{subnet}.1/30 dev {}", v.nic),
            format!("link set {} up", v.nic),
            format!("-n {} addr add 10.231.{subnet}.2/30 dev {peer}", v.ns),
            format!("-n {} link set {peer} up", v.ns),
            format!("-n {} link set lo up", v.ns),
        ] {
            ip(&args);
        }
        v
    }
}

impl Drop for RootVeth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.nic]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

/// `[target] nic`: the run drives no block device (no scratch device is made or sampled),
/// the environment names the NIC, and placements relative to its interrupts are not
/// applicable on a veth, which takes none, while an explicit CPU list runs.
#[test]
fn a_nic_target_runs_without_a_block_device() {
    if !crate::common::root_or_skip() {
        return;
    }
    if !has("iperf3") || !has("ip") {
        crate::common::skip("needs iperf3 and ip (scripts/deps)");
        return;
    }
    let v = RootVeth::new("n", 4);
    let e = exp(&format!(
        "name = \"n\"\nrepetitions = 1\nengine = \"iperf3\"\n[target]\nnic = \"{}\"\n\
         [iperf3]\nserver = \"10.231.4.2\"\nport = 5398\nserver_netns = \"{}\"\ntime = 1\n\
         [factors]\nplacement = [\"0\", \"on\"]\n",
        v.nic, v.ns
    ));
    let loops_before = std::fs::read_dir("/sys/block").unwrap().count();
    let (out, store, _dir) = run_live(&e);
    assert_eq!(out.plan.nic.as_deref(), Some(v.nic.as_str()));
    assert!(!out.plan.scratch);
    assert!(out.cells[0].failures.is_empty(), "{:?}", out.cells[0]);
    assert!(metric(&out, 0, "net_received_mbit_per_s") > 0.0);
    // The NIC's own counters: the client's data leaves through it, only ACKs come back.
    let (tx, rx) = (
        metric(&out, 0, "nic_tx_mb_per_s"),
        metric(&out, 0, "nic_rx_mb_per_s"),
    );
    assert!(tx > 10.0 * rx && rx > 0.0, "tx {tx} MB/s, rx {rx} MB/s");
    assert!(
        metric(&out, 0, "nic_tx_pkts_per_s") > 0.0 && metric(&out, 0, "nic_rx_pkts_per_s") > 0.0
    );
    // Averaged over the sampled span, which holds iperf3's whole run: about what it sent, and
    // not more (headers add a few per cent).
    let sent = metric(&out, 0, "net_sent_mbit_per_s") / 8.0;
    assert!(
        (0.4 * sent..=1.1 * sent).contains(&tx),
        "the NIC sent {tx} MB/s, iperf3 {sent} MB/s"
    );
    let names: Vec<&str> = out.cells[0].runs[0]
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("dev_") || *n == "nic_irq_per_s"),
        "a veth has no block statistics and no interrupts: {names:?}"
    );
    let why = out.plan.cells[1].not_applicable.clone().unwrap_or_default();
    assert!(why.contains("placement on"), "{why}");
    assert_eq!(
        std::fs::read_dir("/sys/block").unwrap().count(),
        loops_before
    );
    let runs = store.runs(out.experiment_id).unwrap();
    let env = store.environment(out.experiment_id).unwrap();
    assert!(
        env.iter()
            .any(|x| x.key == "target" && x.value == format!("NIC {}", v.nic)),
        "{env:?}"
    );
    assert!(!runs.is_empty());
    // The NIC's throughput second by second, under its own name.
    let tx = format!("{}:nic_tx_mb_per_s", v.nic);
    let ran = runs.iter().find(|r| r.status == RunStatus::Ok).unwrap();
    let per_second: Vec<f64> = store
        .series(ran.id)
        .unwrap()
        .into_iter()
        .filter(|p| p.name == tx)
        .map(|p| p.value)
        .collect();
    assert!(
        !per_second.is_empty() && per_second.iter().all(|v| *v > 0.0),
        "{tx}: {per_second:?}"
    );
}

/// `[prepare] fstrim`: before every run the file system on the target is trimmed, so the
/// blocks a run wrote and deleted are discarded before the next (a loop device over a
/// /dev/shm file frees them in the file). A mount point of a file system elsewhere is refused.
#[test]
fn fstrim_trims_the_targets_file_system_before_every_run() {
    if !crate::common::root_or_skip() {
        return;
    }
    if !has("mkfs.ext4") {
        crate::common::skip("needs mkfs.ext4 (e2fsprogs)");
        return;
    }
    let Some(scratch) = crate::common::Scratch::new(64 << 20) else {
        return;
    };
    let mnt = tempfile::tempdir().unwrap();
    let sh = |c: &str| {
        let ok = Command::new("sh")
            .args(["-c", c])
            .status()
            .unwrap()
            .success();
        assert!(ok, "{c}");
    };
    // No journal: its blocks, written round by round, would count as the runs' own.
    sh(&format!(
        "mkfs.ext4 -q -O ^has_journal -E nodiscard {}",
        scratch.path()
    ));
    sh(&format!(
        "mount {} {}",
        scratch.path(),
        mnt.path().display()
    ));
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mnt.path().to_path_buf());
    let backing = scratch.dev.backing_file().display().to_string();
    let m = mnt.path().display().to_string();
    let text = format!(
        "name = \"t\"\nrepetitions = 3\nallow_exec = true\nengine = \"command\"\n\
         [target]\ndevice = \"{dev}\"\n[prepare]\nfstrim = \"{m}\"\n[command]\nprogram = \"sh\"\n\
         args = [\"-c\", \"sync; echo start $(du -k {backing} | cut -f1); \
         dd if=/dev/zero of={m}/f bs=1M count=16 conv=fsync 2>/dev/null; \
         echo written $(du -k {backing} | cut -f1); rm {m}/f; sync\"]\n\
         regex = ['start (?P<start_kib>[0-9]+)', 'written (?P<written_kib>[0-9]+)']\n",
        dev = scratch.name()
    );
    let (out, _store, _dir) = run_live(&exp(&text));
    ok_runs(&out);
    let runs = &out.cells[0].runs;
    assert_eq!(runs.len(), 3);
    let get = |r: &Vec<(String, f64)>, n: &str| r.iter().find(|(k, _)| k == n).unwrap().1;
    let first = get(&runs[0], "start_kib");
    for r in runs {
        // Each run wrote 16 MiB into the file system, and the file grew by about that...
        assert!(
            get(r, "written_kib") - get(r, "start_kib") > 12_000.0,
            "{runs:?}"
        );
        // ...which the trim before the next run discarded (without it: +16 MiB a run; the
        // margin is half that, for metadata the file system writes on its own).
        assert!((get(r, "start_kib") - first).abs() < 8_000.0, "{runs:?}");
    }

    // A mount point of a file system that is not on the target is refused before anything.
    let elsewhere = text.replace(&format!("fstrim = \"{m}\""), "fstrim = \"/\"");
    let dir = tempfile::tempdir().unwrap();
    let mut s = Settings::live(dir.path().join("r.db"));
    s.state_dir = dir.path().join("state");
    let err = runloop::run(
        &exp(&elsewhere),
        &s,
        &RealFio::default(),
        &CancelToken::new(),
        &mut Quiet,
    )
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("fstrim = \"/\"") && err.contains("no file system on the target"),
        "{err}"
    );
    assert!(!dir.path().join("r.db").exists());
    // A dry run says so too (it planned the trim), and of the default target, which is a
    // new scratch device: it holds no file system.
    let err = runloop::dry_run(&exp(&elsewhere), &s, &RealFio::default())
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(err.contains("no file system on the target"), "{err}");
    let scratch_target = text.replace(&format!("device = \"{}\"\n", scratch.name()), "");
    for refused in [
        runloop::dry_run(&exp(&scratch_target), &s, &RealFio::default()).map(|_| ()),
        runloop::run(
            &exp(&scratch_target),
            &s,
            &RealFio::default(),
            &CancelToken::new(),
            &mut Quiet,
        )
        .map(|_| ()),
    ] {
        let err = refused.unwrap_err().to_string();
        assert!(
            err.contains("the default target is a new scratch device"),
            "{err}"
        );
    }
    assert!(!dir.path().join("r.db").exists());
}

/// `server_cpus` pins the server iolab starts (`spawn_group` sets its affinity before exec,
/// as for the client); the stored command line says where. A server pinned to a CPU that
/// is not there would not start: the run fails, naming the pin.
#[test]
fn iperf3_server_cpus_pins_the_server_iolab_starts() {
    let Some(net) = net_or_skip("iperf3", "p", 3) else {
        return;
    };
    let e = exp(&format!(
        "name = \"p\"\nrepetitions = 1\nengine = \"iperf3\"\n[iperf3]\nserver = \"10.231.3.2\"\n\
         port = 5398\nnetns = \"{}\"\nserver_netns = \"{}\"\nserver_cpus = \"1\"\ntime = 1\n",
        net.a, net.b
    ));
    let (out, store, _dir) = run_live(&e);
    ok_runs(&out);
    assert!(metric(&out, 0, "net_received_mbit_per_s") > 0.0);
    let runs = store.runs(out.experiment_id).unwrap();
    let cmd = store
        .run_texts(runs[0].id)
        .unwrap()
        .unwrap()
        .fio_command
        .unwrap_or_default();
    assert!(
        cmd.starts_with(&format!(
            "server: taskset -c 1 ip netns exec {} iperf3 -s",
            net.b
        )),
        "{cmd}"
    );
}

#[test]
fn sockperf_ping_pong_over_a_veth_pair_between_namespaces() {
    let Some(net) = net_or_skip("sockperf", "s", 2) else {
        return;
    };
    let e = exp(&format!(
        "name = \"s\"\nrepetitions = 1\nengine = \"sockperf\"\n[sockperf]\n\
         server = \"10.231.2.2\"\nport = 11399\nnetns = \"{}\"\nserver_netns = \"{}\"\n\
         time = 1\ntcp = true\n[factors]\nmsg_size = [64, 1024]\n",
        net.a, net.b
    ));
    let (out, _store, _dir) = run_live(&e);
    ok_runs(&out);
    for cell in 0..2 {
        assert!(metric(&out, cell, "rr_trans_per_s") > 0.0);
        let (p50, p99) = (
            metric(&out, cell, "rr_lat_p50_us"),
            metric(&out, cell, "rr_lat_p99_us"),
        );
        assert!(p50 > 0.0 && p99 >= p50, "{p50} {p99}");
    }
}

#[test]
fn a_command_with_a_regex_metric_and_one_with_a_json_metric() {
    if !crate::common::root_or_skip() {
        return;
    }
    // dd prints its figures on stderr; the count varies by factor, over a base value in
    // `vars` that each cell's level replaces.
    let e = exp(
        "name = \"dd\"\nrepetitions = 1\nallow_exec = true\nengine = \"command\"\n\
         [command]\nprogram = \"dd\"\nargs = [\"if=/dev/zero\", \"of={dir}/x\", \"bs=4k\", \
         \"count={count}\"]\noutput = \"stderr\"\nvars = { count = \"1\" }\n\
         regex = '(?P<copied_bytes>[0-9]+) bytes'\n[factors]\ncount = [3, 5]\n",
    );
    let (out, store, _d) = run_live(&e);
    ok_runs(&out);
    assert_eq!(metric(&out, 0, "copied_bytes"), 3.0 * 4096.0);
    assert_eq!(metric(&out, 1, "copied_bytes"), 5.0 * 4096.0);
    // What it measured is what `show` shows by default, and the closing table has no IOPS
    // or MB/s of 0 for a program that reported none.
    let db = _d.path().join("r.db");
    let show = |extra: &[&str]| {
        let id = out.experiment_id.to_string();
        let mut args = vec!["show", id.as_str(), "--db", db.to_str().unwrap()];
        args.extend(extra);
        crate::common::stdout_of(crate::common::iolab().args(&args))
    };
    let shown = show(&[]);
    assert!(shown.contains("copied_bytes per cell"), "{shown}");
    let summary = show(&["--summary"]);
    let head = summary.lines().next().unwrap_or("");
    assert!(
        head.contains("copied_bytes") && !head.contains("IOPS"),
        "{summary}"
    );
    // A program says nothing of when it measured: its sampler figures are over the whole
    // span, and the stored window says so in the engine's words, not fio's.
    let basis = store.run_bases(out.experiment_id).unwrap().pop().unwrap();
    let window = basis.sample_window.unwrap();
    assert_eq!(window["basis"], "whole sampled span", "{window}");
    assert_eq!(
        window["note"], "the command engine reports no measured interval",
        "{window}"
    );
    let e = exp(
        "name = \"j\"\nrepetitions = 1\nallow_exec = true\nengine = \"command\"\n\
         [command]\nprogram = \"sh\"\nargs = [\"-c\", 'echo \"{\\\"r\\\": [{\\\"ops\\\": $((6*7))}]}\"']\n\
         json = { ops_per_s = \"r[0].ops\" }\n",
    );
    let (out, _s, _d) = run_live(&e);
    ok_runs(&out);
    assert_eq!(metric(&out, 0, "ops_per_s"), 42.0);
}

#[test]
fn command_needs_allow_exec_at_the_engine_line() {
    let text = "name = \"n\"\nengine = \"command\"\n[command]\nprogram = \"dd\"\n\
                regex = '(?P<x>1)'\n";
    let e = experiment::parse("t.toml", text).unwrap_err().to_string();
    assert!(
        e.contains("t.toml:2:") && e.contains("allow_exec = true"),
        "{e}"
    );
    let ok = format!("allow_exec = true\n{text}");
    assert!(experiment::parse("t.toml", &ok).is_ok());
    // fio's options do not go with another engine, and a table needs its engine.
    let e = experiment::parse(
        "t.toml",
        "name = \"n\"\nengine = \"iperf3\"\n[iperf3]\nserver = \"h\"\nparalel = 2\n\
         [factors]\nbs = [\"4k\"]\n[sockperf]\nserver = \"h\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("t.toml:5:1: unknown key `paralel`"), "{e}");
    assert!(e.contains("t.toml:8:2: [sockperf] configures"), "{e}");
    let e = experiment::parse(
        "t.toml",
        "name = \"n\"\nengine = \"iperf3\"\n[iperf3]\nserver = \"h\"\n\
         [factors]\nbs = [\"4k\"]\nparallel = [0]\n[workload]\nrw = \"read\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("t.toml:6:1: factor `bs` is a fio option"), "{e}");
    assert!(
        e.contains("t.toml:7:13: `parallel` is a whole number from 1"),
        "{e}"
    );
    assert!(
        e.contains("t.toml:9:1: [workload] holds fio options"),
        "{e}"
    );
    // The server's CPUs pin the server iolab starts: a list, and only with `server_netns`.
    let e = experiment::parse(
        "t.toml",
        "name = \"n\"\nengine = \"iperf3\"\n[iperf3]\nserver = \"h\"\nserver_cpus = \"x\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("t.toml:5:15: `x` is not a CPU list"), "{e}");
    let e = experiment::parse(
        "t.toml",
        "name = \"n\"\nengine = \"iperf3\"\n[iperf3]\nserver = \"h\"\nserver_cpus = \"0\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("iolab starts none without `server_netns`"),
        "{e}"
    );
}

/// A writable copy of the `thisvm` fixture machine, as in tests/run.rs.
fn fixture_settings(dir: &tempfile::TempDir) -> Settings {
    let ok = Command::new("cp")
        .arg("-a")
        .arg(manifest().join("tests/fixtures/machines/thisvm"))
        .arg(dir.path().join("root"))
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let mut s = Settings::live(dir.path().join("r.db"));
    s.root = SysRoot::at(dir.path().join("root")).unwrap();
    s.state_dir = dir.path().join("state");
    s.sample_interval = Duration::from_millis(5);
    s.preflight_sample = Duration::ZERO;
    s
}

#[test]
fn replayed_engine_runs_are_stored_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let settings = fixture_settings(&dir);
    let e = exp(
        "name = \"r\"\nseed = 4\nrepetitions = 2\nengine = \"iperf3\"\n[target]\n\
         device = \"loop3\"\n[iperf3]\nserver = \"10.0.0.2\"\ntime = 2\n[factors]\n\
         parallel = [1, 8]\nrq_affinity = [2]\n",
    );
    let json =
        std::fs::read_to_string(manifest().join("tests/fixtures/engines/iperf3.json")).unwrap();
    let replay = ReplayFio::by_cell([
        (
            "parallel=1,rq_affinity=2".to_string(),
            vec![Canned::exited(&json, "", 0)],
        ),
        (
            "parallel=8,rq_affinity=2".to_string(),
            vec![
                Canned::exited("", "iperf3: error - unable to connect", 1),
                Canned::exited(&json, "", 0),
            ],
        ),
    ]);
    let out = runloop::run(&e, &settings, &replay, &CancelToken::new(), &mut Quiet).unwrap();
    assert_eq!(out.primary_metric, "net_received_mbit_per_s");
    assert_eq!(out.cells[0].runs.len(), 2);
    assert_eq!(out.cells[1].runs.len(), 1);
    assert!(out.cells[1].failures[0].contains("iperf3 exited with status 1"));
    assert!((metric(&out, 0, "net_received_mbit_per_s") - 11073.435753).abs() < 1e-3);
    // The knob was set through the journal and put back.
    assert!(out
        .knob_changes
        .iter()
        .any(|w| w.path.ends_with("loop3/queue/rq_affinity") && w.new == "2"));
    let calls = replay.program_calls();
    assert_eq!(calls.len(), 4);
    for c in &calls {
        let p = if c.cell_key.starts_with("parallel=8") {
            "8"
        } else {
            "1"
        };
        assert!(
            c.argv.windows(2).any(|w| w[0] == "-P" && w[1] == p),
            "{c:?}"
        );
        assert!(c.server.is_none(), "the user's server: iolab starts none");
    }
    let store = Store::open(&settings.db_path).unwrap();
    let runs = store.runs(out.experiment_id).unwrap();
    assert_eq!(runs.iter().filter(|r| r.status == RunStatus::Ok).count(), 3);
    // The report neither tries nor misses fio's figures (a latency CDF, IOPS per second),
    // which a program engine's runs have not, and draws iperf3's own intervals over time.
    let page = dir.path().join("page.html");
    let summary: serde_json::Value =
        serde_json::from_str(&crate::common::stdout_of(crate::common::iolab().args([
            "report",
            &out.experiment_id.to_string(),
            "--db",
            settings.db_path.to_str().unwrap(),
            "-o",
            page.to_str().unwrap(),
            "--json",
        ])))
        .unwrap();
    let missing = summary["missing_figures"].to_string();
    assert!(
        !missing.contains("CDF") && !missing.contains("iops"),
        "{summary}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("iperf3/mbit_per_s per second, cell parallel=1,rq_affinity=2"),
        "{summary}"
    );
    assert!(
        html.contains("iperf3/mbit_per_s [Mb/s]"),
        "the series' unit"
    );
    // The dry run shows each cell's command line.
    let plan = runloop::dry_run(&e, &settings, &RealFio::default()).unwrap();
    let cmd = plan.cells[1].command.clone().unwrap();
    assert!(
        cmd.starts_with("iperf3 -c 10.0.0.2 -p 5201 -J") && cmd.contains("-P 8"),
        "{cmd}"
    );
}

/// A `command` engine running `sh`, reading the metric `regex`, given `limit_s` seconds: to
/// judge a run's output as the engine would.
fn sh_engine(regex: &str, limit_s: u64) -> iolab::workload::command::CommandEngine {
    iolab::workload::command::CommandEngine {
        program: "sh".into(),
        args: Vec::new(),
        regex: vec![regex.into()],
        json: Vec::new(),
        from_stderr: false,
        time_limit: Duration::from_secs(limit_s),
        vars: Vec::new(),
    }
}

/// A runner of program engines with its state under `dir`, giving a program 1 s after
/// SIGTERM.
fn program_runner(dir: &std::path::Path) -> RealFio {
    RealFio {
        work_dir: dir.join("state/fio"),
        grace: Duration::from_secs(1),
        ..RealFio::default()
    }
}

/// `sh -c script` as a program engine's run, pinned to CPU 0, given `limit`.
fn shell(script: &str, limit: Duration) -> iolab::workload::Invocation {
    iolab::workload::Invocation {
        cell_key: "base".into(),
        argv: vec!["sh".into(), "-c".into(), script.into()],
        netns: None,
        cpus: Some(vec![0]),
        server: None,
        time_limit: limit,
    }
}

/// The processes running (not zombies) whose command line holds `sleep MARKER`: a program
/// may run in a PID namespace of its own, where the pids it sees are not this machine's.
fn sleeping(marker: &str) -> Vec<String> {
    let wanted = format!("sleep\0{marker}\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&wanted))
                && std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| {
                    s.rsplit(')')
                        .next()
                        .and_then(|r| r.split_whitespace().next())
                        != Some("Z")
                })
        })
        .collect()
}

/// Waits up to 10 s for `sleep MARKER` to run.
fn started(marker: &str) {
    let t = std::time::Instant::now();
    while sleeping(marker).is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "sleep {marker} never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether no `sleep MARKER` is left within 5 s.
fn none_left(marker: &str) -> bool {
    let t = std::time::Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        if sleeping(marker).is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Ctrl-C (the cancel token) stops a program engine's program and what it forked.
#[test]
fn cancelling_stops_the_program_and_its_children() {
    use iolab::workload::FioRunner;
    let dir = tempfile::tempdir().unwrap();
    let cancel = CancelToken::new();
    let runner = RealFio {
        work_dir: dir.path().join("state/fio"),
        cancel: cancel.clone(),
        grace: Duration::from_secs(1),
        ..RealFio::default()
    };
    let inv = shell("sleep 300.101 & wait", Duration::from_secs(600));
    let cancel2 = cancel.clone();
    let watcher = std::thread::spawn(move || {
        started("300.101");
        cancel2.cancel();
    });
    let ran = runner.run_program(&inv).unwrap();
    watcher.join().unwrap();
    assert!(ran.raw.cancelled);
    assert!(ran.elapsed < Duration::from_secs(60), "{:?}", ran.elapsed);
    assert!(
        none_left("300.101"),
        "the program's child outlived the cancel"
    );
    assert!(
        ran.command_line.starts_with("taskset -c 0 sh -c"),
        "{}",
        ran.command_line
    );
}

/// A program past its time limit is killed with its children and the run fails saying so.
#[test]
fn a_program_past_its_time_limit_is_killed_with_its_children() {
    use iolab::workload::FioRunner;
    let dir = tempfile::tempdir().unwrap();
    let runner = program_runner(dir.path());
    let ran = runner
        .run_program(&shell("sleep 300.102 & wait", Duration::from_secs(1)))
        .unwrap();
    assert_eq!(ran.raw.timed_out, Some(Duration::from_secs(1)));
    // The child (sleep 300) holds the output pipes: only a group kill ends the run early.
    assert!(ran.elapsed < Duration::from_secs(120), "{:?}", ran.elapsed);
    assert!(none_left("300.102"));
    let (status, _) = iolab::workload::engine::classify(&sh_engine("(?P<x>1)", 1), &ran.raw);
    assert!(
        matches!(&status, iolab::workload::FioStatus::Crash { reason } if reason.contains("did not finish within 1 s")),
        "{status:?}"
    );
}

/// What a program started ends with it, also what left its process group: a `setsid` child
/// and a plain background one outlived a run that ended well (loading the machine through
/// the next runs), and a `setsid` child holding the output pipes kept a run past its time
/// limit waiting for it (1 min 17 s for a 1 s limit). The program runs in a PID namespace of
/// its own, which needs root.
#[test]
fn a_program_leaves_nothing_running_however_it_ends() {
    use iolab::workload::FioRunner;
    if !crate::common::root_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let runner = program_runner(dir.path());
    let ran = runner
        .run_program(&shell(
            "setsid sleep 300.103 >/dev/null 2>&1 & sleep 300.104 >/dev/null 2>&1 & \
             sleep 0.2; echo x_per_s=1",
            Duration::from_secs(60),
        ))
        .unwrap();
    let engine = sh_engine("x_per_s=(?P<x_per_s>[0-9]+)", 60);
    let (status, figures) = iolab::workload::engine::classify(&engine, &ran.raw);
    assert!(
        matches!(status, iolab::workload::FioStatus::Success),
        "{status:?}"
    );
    assert!(figures.is_some());
    assert!(ran.elapsed < Duration::from_secs(30), "{:?}", ran.elapsed);
    assert!(none_left("300.103"), "the setsid child outlived the run");
    assert!(
        none_left("300.104"),
        "the background child outlived the run"
    );
    let ran = runner
        .run_program(&shell(
            "setsid sleep 300.105 & sleep 300.106",
            Duration::from_secs(1),
        ))
        .unwrap();
    assert_eq!(ran.raw.timed_out, Some(Duration::from_secs(1)));
    assert!(ran.elapsed < Duration::from_secs(30), "{:?}", ran.elapsed);
    assert!(none_left("300.105") && none_left("300.106"));
}

//! Knobs on real devices (root only): every change comes back after a normal end, an error,
//! SIGTERM/SIGINT, and — through `iolab restore` — after SIGKILL. The devices are scratch loop
//! devices over /dev/shm created here; the only other thing touched is a write of an IRQ's
//! *current* affinity, which the kernel refuses for managed IRQs.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use iolab::knobs::{self, queue_attr_path, Journal, KnobError};
use iolab::target::ScratchDevice;

use crate::common::root_or_skip;

fn get(dev: &str, attr: &str) -> String {
    knobs::read_attr(&queue_attr_path(dev, attr)).unwrap()
}

/// Values different from the device's current ones, for the four knobs the issue names.
fn changes(dev: &str) -> Vec<(&'static str, String)> {
    let other_sched = crate::common::other_scheduler(dev);
    let rq = if get(dev, "rq_affinity") == "2" {
        "1"
    } else {
        "2"
    };
    let nr: u32 = get(dev, "nr_requests").parse().unwrap();
    let ra: u32 = get(dev, "read_ahead_kb").parse().unwrap();
    vec![
        ("scheduler", other_sched),
        ("rq_affinity", rq.to_string()),
        ("nr_requests", (nr / 2).max(4).to_string()),
        ("read_ahead_kb", (ra + 64).to_string()),
    ]
}

fn snapshot(dev: &str) -> Vec<(String, String)> {
    ["scheduler", "rq_affinity", "nr_requests", "read_ahead_kb"]
        .iter()
        .map(|a| (a.to_string(), get(dev, a)))
        .collect()
}

#[test]
fn queue_knobs_change_and_come_back_in_reverse_order() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let dev = ScratchDevice::create_in(state.path(), 16 << 20).unwrap();
    // A user's own tuning, which a scheduler switch would silently reset to the default.
    std::fs::write(queue_attr_path(dev.name(), "nr_requests"), "64").unwrap();
    let before = snapshot(dev.name());
    let wanted = changes(dev.name());
    {
        let mut j = Journal::begin_in(state.path()).unwrap();
        for (attr, value) in &wanted {
            // Not `before`: switching the scheduler resets nr_requests to the new default.
            let just_before = get(dev.name(), attr);
            let old = j.set(&queue_attr_path(dev.name(), attr), value).unwrap();
            assert_eq!(old, just_before);
            assert_eq!(&get(dev.name(), attr), value, "{attr} did not take");
        }
        // Changing one knob twice still ends at the original.
        j.set(&queue_attr_path(dev.name(), "read_ahead_kb"), "8")
            .unwrap();
        assert!(Journal::check_clean_in(state.path()).is_err());
        let report = j.restore().unwrap();
        // 5 writes + nr_requests and wbt_lat_usec journaled as side effects of the scheduler,
        // and read_ahead_kb as one of each of the 3 writes of other queue attributes.
        let side_effects = ["nr_requests", "wbt_lat_usec"]
            .iter()
            .filter(|a| Path::new(&queue_attr_path(dev.name(), a)).exists())
            .count();
        assert_eq!(report.restored.len(), 5 + side_effects + 3);
        assert_eq!(report.restored[0].new, "8");
    }
    assert_eq!(snapshot(dev.name()), before);
    Journal::check_clean_in(state.path()).unwrap();
}

/// A knob a later write changes is written again: here nr_requests, written before the
/// scheduler (whose switch resets it), still holds when `set_all` returns, and restore
/// puts everything back.
#[test]
fn set_all_writes_again_a_knob_a_later_write_changed() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let dev = ScratchDevice::create_in(state.path(), 16 << 20).unwrap();
    let before = snapshot(dev.name());
    let wanted = changes(dev.name());
    let value = |attr: &str| wanted.iter().find(|(a, _)| *a == attr).unwrap().1.clone();
    let (nr, sched) = (value("nr_requests"), value("scheduler"));
    let nr_path = queue_attr_path(dev.name(), "nr_requests");
    let sched_path = queue_attr_path(dev.name(), "scheduler");
    {
        let mut j = Journal::begin_in(state.path()).unwrap();
        let again = j
            .set_all([
                (nr_path.as_str(), nr.as_str()),
                (sched_path.as_str(), sched.as_str()),
            ])
            .unwrap();
        assert_eq!(again, [nr_path.as_str()]);
        assert_eq!(get(dev.name(), "nr_requests"), nr);
        assert_eq!(get(dev.name(), "scheduler"), sched);
        j.restore().unwrap();
    }
    assert_eq!(snapshot(dev.name()), before);
    Journal::check_clean_in(state.path()).unwrap();
}

#[test]
fn a_rejected_value_names_file_value_and_choices_and_is_not_journaled() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let dev = ScratchDevice::create_in(state.path(), 16 << 20).unwrap();
    let before = snapshot(dev.name());
    let mut j = Journal::begin_in(state.path()).unwrap();
    let path = queue_attr_path(dev.name(), "scheduler");
    let err = j.set(&path, "no-such-elevator").unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(&path) && msg.contains("no-such-elevator") && msg.contains("choices:"),
        "{msg}"
    );
    assert!(j.entries().is_empty());
    let err = j
        .set(&queue_attr_path(dev.name(), "rq_affinity"), "fast")
        .unwrap_err();
    assert!(matches!(err, KnobError::Write { .. }), "{err}");
    drop(j);
    assert_eq!(snapshot(dev.name()), before);
}

/// Switching the elevator away discards its own settings (`queue/iosched/*`): a user's tuned
/// fifo_batch came back as the default after a run. They are journaled with the switch and
/// put back after the elevator; and an iosched setting is a knob a cell may set itself.
#[test]
fn an_elevators_own_settings_come_back_with_it() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let dev = ScratchDevice::create_in(state.path(), 16 << 20).unwrap();
    let sched = queue_attr_path(dev.name(), "scheduler");
    let fifo = queue_attr_path(dev.name(), "iosched/fifo_batch");
    if std::fs::write(&sched, "mq-deadline").is_err() {
        crate::common::skip("no mq-deadline elevator here");
        return;
    }
    std::fs::write(&fifo, "7").unwrap();
    let mut j = Journal::begin_in(state.path()).unwrap();
    j.set(&sched, "none").unwrap();
    assert!(
        !Path::new(&fifo).exists(),
        "the elevator's settings outlived it"
    );
    j.restore().unwrap();
    assert_eq!(knobs::read_attr(&sched).unwrap(), "mq-deadline");
    assert_eq!(knobs::read_attr(&fifo).unwrap(), "7");
    drop(j);
    let mut j = Journal::begin_in(state.path()).unwrap();
    j.set(&fifo, "9").unwrap();
    j.restore().unwrap();
    assert_eq!(knobs::read_attr(&fifo).unwrap(), "7");
}

/// A value the kernel takes but keeps as another is no level a cell can run at: results
/// stored under it would be another level's. read_ahead_kb is kept in whole pages (5 reads
/// 4) and mq-deadline keeps a fifo_batch below 0 as 0: a cell's writes (`set_all`) fail
/// naming both values, and the knob is put back like any other.
#[test]
fn a_value_the_kernel_keeps_as_another_fails_a_cells_knobs() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let dev = ScratchDevice::create_in(state.path(), 16 << 20).unwrap();
    let ra = queue_attr_path(dev.name(), "read_ahead_kb");
    let before = knobs::read_attr(&ra).unwrap();
    let mut j = Journal::begin_in(state.path()).unwrap();
    let msg = j.set_all([(ra.as_str(), "5")]).unwrap_err().to_string();
    assert!(
        msg.contains("wrote \"5\", but the kernel keeps \"4\" (it clamps or rounds"),
        "{msg}"
    );
    // Kept as written: no error.
    j.set_all([(ra.as_str(), "8")]).unwrap();
    j.restore().unwrap();
    assert_eq!(knobs::read_attr(&ra).unwrap(), before);
    drop(j);
    let sched = queue_attr_path(dev.name(), "scheduler");
    let fifo = queue_attr_path(dev.name(), "iosched/fifo_batch");
    let sched_before = knobs::read_attr(&sched).unwrap();
    let mut j = Journal::begin_in(state.path()).unwrap();
    if j.set(&sched, "mq-deadline").is_err() {
        crate::common::skip("no mq-deadline elevator here");
        return;
    }
    let msg = j
        .set_all([(sched.as_str(), "mq-deadline"), (fifo.as_str(), "-8")])
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("wrote \"-8\", but the kernel keeps \"0\""),
        "{msg}"
    );
    j.restore().unwrap();
    assert_eq!(knobs::read_attr(&sched).unwrap(), sched_before);
}

/// A value the kernel prints but will not take back is found before the knob changes: a
/// loop device's discard_max_bytes reads 4294966784, no multiple of its 4096-byte
/// granularity, so once changed it could never be put back (restore failed every time and
/// the device stayed blocked for every later run).
#[test]
fn a_knob_whose_value_cannot_be_written_back_is_refused_before_it_changes() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    // A loop device of its own: one of the low numbers keeps whatever an earlier user set
    // (this very value, once changed, never goes back).
    let dev = FreshLoop::new(&state.path().join("fresh.img"));
    let path = queue_attr_path(&dev.name, "discard_max_bytes");
    let old = knobs::read_attr(&path).unwrap();
    let granularity: u64 = get(&dev.name, "discard_granularity").parse().unwrap();
    if granularity == 0 || old.parse::<u64>().unwrap() % granularity == 0 {
        crate::common::skip(&format!(
            "a new loop device's discard_max_bytes {old} is written back whole here",
        ));
        return;
    }
    let mut j = Journal::begin_in(state.path()).unwrap();
    let msg = j.set(&path, "4096").unwrap_err().to_string();
    assert!(msg.contains("the kernel refuses its own value"), "{msg}");
    assert!(j.entries().is_empty(), "{:?}", j.entries());
    drop(j);
    assert_eq!(knobs::read_attr(&path).unwrap(), old);
}

/// A loop device made for one test (`LOOP_CTL_ADD` of a number nothing else uses) over a
/// file of its own, with the kernel's default queue; detached and removed when dropped.
struct FreshLoop {
    name: String,
    number: libc::c_ulong,
}

impl FreshLoop {
    fn new(file: &Path) -> FreshLoop {
        const LOOP_CTL_ADD: libc::c_ulong = 0x4C80;
        std::fs::File::create(file)
            .unwrap()
            .set_len(16 << 20)
            .unwrap();
        let control = std::fs::File::open("/dev/loop-control").unwrap();
        let base = 700 + libc::c_ulong::from(std::process::id() % 200);
        let number = (base..base + 100)
            .find(|n| {
                use std::os::fd::AsRawFd;
                // SAFETY: LOOP_CTL_ADD takes the device number by value.
                unsafe { libc::ioctl(control.as_raw_fd(), LOOP_CTL_ADD, *n) >= 0 }
            })
            .expect("no free loop device number to add");
        let name = format!("loop{number}");
        let attached = Command::new("losetup")
            .arg(format!("/dev/{name}"))
            .arg(file)
            .status()
            .unwrap();
        let fresh = FreshLoop { name, number };
        assert!(attached.success(), "losetup /dev/{}", fresh.name);
        fresh
    }
}

impl Drop for FreshLoop {
    fn drop(&mut self) {
        const LOOP_CTL_REMOVE: libc::c_ulong = 0x4C81;
        let _ = Command::new("losetup")
            .args(["-d", &format!("/dev/{}", self.name)])
            .status();
        if let Ok(control) = std::fs::File::open("/dev/loop-control") {
            use std::os::fd::AsRawFd;
            // SAFETY: LOOP_CTL_REMOVE takes the device number by value.
            unsafe { libc::ioctl(control.as_raw_fd(), LOOP_CTL_REMOVE, self.number) };
        }
    }
}

#[test]
fn a_managed_irq_refuses_a_move_with_a_clear_error() {
    if !root_or_skip() {
        return;
    }
    // vda's request-queue IRQ here is kernel-managed. Writing its current affinity changes
    // nothing even where it is allowed.
    let Some(irq) = std::fs::read_to_string("/proc/interrupts")
        .unwrap()
        .lines()
        .find(|l| l.trim_end().ends_with("-req.0"))
        .and_then(|l| {
            l.trim_start()
                .split(':')
                .next()
                .and_then(|n| n.parse::<u32>().ok())
        })
    else {
        crate::common::skip("no virtio request-queue IRQ here");
        return;
    };
    let state = tempfile::tempdir().unwrap();
    let path = knobs::irq_affinity_path(irq);
    let current = knobs::read_attr(&path).unwrap();
    let probe = knobs::probe_rewrite(&path);
    let mut j = Journal::begin_in(state.path()).unwrap();
    match j.set(&path, &current) {
        Ok(_) => {
            assert!(probe.is_ok());
            eprintln!("note: IRQ {irq} is not managed on this machine")
        }
        Err(e) => {
            assert!(
                probe.is_err(),
                "the probe must find what the real write finds"
            );
            let msg = e.to_string();
            assert!(
                msg.contains(&path) && msg.contains("managed by the kernel"),
                "{msg}"
            );
            assert!(j.entries().is_empty());
        }
    }
    j.restore().unwrap();
    assert_eq!(knobs::read_attr(&path).unwrap(), current);
}

/// Child process for the kill tests: changes the knobs of the device named in IOLAB_TEST_DEV,
/// says READY, then (mode "wait-signal") waits for SIGINT/SIGTERM and exits normally so the
/// journal restores, or (mode "sleep") just sleeps until killed. Does nothing in a normal run.
#[test]
fn helper_process_knobs() {
    let Ok(mode) = std::env::var("IOLAB_TEST_HELPER") else {
        return;
    };
    let dev = std::env::var("IOLAB_TEST_DEV").unwrap();
    let interrupt = knobs::signals::Interrupt::install().unwrap();
    let mut j = Journal::begin().unwrap();
    for (attr, value) in changes(&dev) {
        j.set(&queue_attr_path(&dev, attr), &value).unwrap();
    }
    println!("READY");
    std::io::stdout().flush().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        if mode == "wait-signal" && interrupt.is_set() {
            println!("GOT {:?}", interrupt.signal());
            return; // `j` drops here: the knobs come back
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn spawn_helper(mode: &str, dev: &str, state: &Path) -> (Child, impl Iterator<Item = String>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "knobs::helper_process_knobs",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("IOLAB_TEST_HELPER", mode)
        .env("IOLAB_TEST_DEV", dev)
        .env("IOLAB_STATE_DIR", state)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok);
    assert!(
        lines.by_ref().any(|l| l.contains("READY")),
        "helper never got ready"
    );
    (child, lines)
}

#[test]
fn after_sigkill_run_is_refused_and_restore_undoes_everything() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let dev = ScratchDevice::create_in(state.path(), 16 << 20).unwrap();
    let before = snapshot(dev.name());
    let (mut child, _) = spawn_helper("sleep", dev.name(), state.path());
    child.kill().unwrap();
    child.wait().unwrap();
    assert_ne!(
        snapshot(dev.name()),
        before,
        "the killed process left its changes"
    );
    let err = Journal::check_clean_in(state.path()).unwrap_err();
    assert!(
        err.to_string().contains("run `iolab restore` first"),
        "{err}"
    );
    // A dry run says the run would stop there (it planned on without a word).
    let file = state.path().join("e.toml");
    std::fs::write(&file, "name = \"e\"\n[workload]\nrw = \"randread\"\n").unwrap();
    let out = assert_cmd::Command::cargo_bin("iolab")
        .unwrap()
        .env("IOLAB_STATE_DIR", state.path())
        .args(["run", file.to_str().unwrap(), "--dry-run"])
        .args(["--db", state.path().join("e.db").to_str().unwrap()])
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("the run would stop before it starts") && said.contains("iolab restore"),
        "{said}"
    );

    let out = assert_cmd::Command::cargo_bin("iolab")
        .unwrap()
        .env("IOLAB_STATE_DIR", state.path())
        .args(["restore", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let side_effects = ["nr_requests", "wbt_lat_usec"]
        .iter()
        .filter(|a| Path::new(&queue_attr_path(dev.name(), a)).exists())
        .count();
    let restored = doc["knobs"]["restored"].as_array().unwrap();
    // read_ahead_kb is journaled with each of the 3 writes of other queue attributes.
    assert_eq!(restored.len(), 4 + side_effects + 3, "{doc}");
    assert_eq!(
        restored[0]["path"],
        queue_attr_path(dev.name(), "read_ahead_kb"),
        "newest first"
    );
    assert_eq!(snapshot(dev.name()), before);
    Journal::check_clean_in(state.path()).unwrap();
    assert!(Journal::leftover_in(state.path()).is_none());
    let out = assert_cmd::Command::cargo_bin("iolab")
        .unwrap()
        .env("IOLAB_STATE_DIR", state.path())
        .arg("restore")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to restore"));
}

#[test]
fn sigterm_ctrl_c_and_ctrl_backslash_restore_before_exit() {
    if !root_or_skip() {
        return;
    }
    for signals in [
        vec![libc::SIGTERM],
        vec![libc::SIGINT, libc::SIGINT, libc::SIGINT],
        // Ctrl-\: it killed iolab with the knobs still changed.
        vec![libc::SIGQUIT],
    ] {
        let state = tempfile::tempdir().unwrap();
        let dev = ScratchDevice::create_in(state.path(), 16 << 20).unwrap();
        let before = snapshot(dev.name());
        let (mut child, mut rest) = spawn_helper("wait-signal", dev.name(), state.path());
        assert_ne!(snapshot(dev.name()), before);
        for s in &signals {
            // SAFETY: sending a signal to our own child process.
            unsafe { libc::kill(child.id() as i32, *s) };
        }
        let status = child.wait().unwrap();
        assert!(status.success(), "{status:?} after {signals:?}");
        assert!(rest.any(|l| l.contains("GOT Some")));
        assert_eq!(snapshot(dev.name()), before, "after {signals:?}");
        Journal::check_clean_in(state.path()).unwrap();
    }
}

/// The live path of the FIFO "knob" under the fake root of the FIFO test.
const FIFO_KNOB: &str = "/sys/block/fifo0/queue/scheduler";

/// Child for `a_second_signal_during_restore_does_not_abort_it`: its one "knob" is a FIFO in a
/// fake root, so both the journaled read and the restoring write block until the parent takes
/// part, which lets the parent send signals while the restore is in progress.
#[test]
fn helper_process_fifo_knob() {
    let Ok(root) = std::env::var("IOLAB_TEST_FIFO_ROOT") else {
        return;
    };
    let interrupt = knobs::signals::Interrupt::install().unwrap();
    let root = iolab::sys::SysRoot::at(root).unwrap();
    let mut j = Journal::begin_at(&knobs::state_dir(), &root).unwrap();
    j.set(FIFO_KNOB, "new").unwrap();
    println!("READY");
    std::io::stdout().flush().unwrap();
    while !interrupt.is_set() {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    println!("RESTORING");
    std::io::stdout().flush().unwrap();
    drop(j); // blocks in open(2) of the FIFO until the parent reads
    println!("RESTORED");
}

#[test]
fn a_second_signal_during_restore_does_not_abort_it() {
    let state = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let fifo = root.path().join(FIFO_KNOB.trim_start_matches('/'));
    std::fs::create_dir_all(fifo.parent().unwrap()).unwrap();
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: plain mkfifo(3) on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "knobs::helper_process_fifo_knob",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("IOLAB_TEST_FIFO_ROOT", root.path())
        .env("IOLAB_STATE_DIR", state.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Watchdog: if anything goes wrong, unblock every opener of the FIFO so the test fails
    // instead of hanging.
    let watchdog_fifo = fifo.clone();
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(30));
        let _ = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(watchdog_fifo);
    });
    // The child's journaled read of the current value, then its write of the new one.
    std::fs::write(&fifo, "old\n").unwrap();
    assert_eq!(std::fs::read_to_string(&fifo).unwrap(), "new");
    let mut lines = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok);
    assert!(lines.by_ref().any(|l| l.contains("READY")));
    let journal = std::fs::read_to_string(state.path().join("journal.json")).unwrap();
    assert!(journal.contains("\"old\": \"old\""), "{journal}");

    let pid = child.id() as i32;
    // SAFETY: signals to our own child.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    assert!(lines.by_ref().any(|l| l.contains("RESTORING")));
    std::thread::sleep(std::time::Duration::from_millis(100));
    for _ in 0..2 {
        unsafe { libc::kill(pid, libc::SIGINT) };
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "the child died during its restore"
    );
    assert_eq!(std::fs::read_to_string(&fifo).unwrap(), "old");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(lines.any(|l| l.contains("RESTORED")));
    Journal::check_clean_in(state.path()).unwrap();
}

#[test]
fn restore_refuses_forged_journal_entries_and_restores_the_rest() {
    let state = tempfile::tempdir().unwrap();
    let fake = tempfile::tempdir().unwrap();
    let queue = fake.path().join("sys/block/loop0/queue");
    std::fs::create_dir_all(&queue).unwrap();
    std::fs::write(queue.join("nr_requests"), "32").unwrap();
    // Files the forged entries aim at: one outside any knob kind, one behind a symlink that
    // leaves the fake root.
    let victim = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(victim.path(), "keep").unwrap();
    std::os::unix::fs::symlink(victim.path(), queue.join("scheduler")).unwrap();
    let entry = |path: &str, old: &str| serde_json::json!({ "path": path, "old": old, "new": "x", "time_unix": 0.0 });
    let journal = serde_json::json!({
        "pid": 1,
        "started_unix": 0.0,
        "root": fake.path().canonicalize().unwrap(),
        "entries": [
            entry("/sys/block/loop0/queue/nr_requests", "64"),
            entry(&victim.path().display().to_string(), "pwned"),
            entry("/etc/hostname", "pwned"),
            entry("/sys/block/loop0/queue/scheduler", "pwned"),
        ],
    });
    let path = state.path().join("journal.json");
    std::fs::write(&path, journal.to_string()).unwrap();
    let hostname = std::fs::read("/etc/hostname").ok();

    let out = crate::common::restore_in(state.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stdout}");
    assert!(stderr.contains("3 journal entr(y/ies) refused"), "{stderr}");
    assert!(
        stdout.contains("restored /sys/block/loop0/queue/nr_requests = 64"),
        "{stdout}"
    );
    for forged in [
        victim.path().display().to_string(),
        "/etc/hostname".into(),
        "/sys/block/loop0/queue/scheduler".into(),
    ] {
        assert!(
            stdout.contains(&format!("refused  {forged} = pwned (not written:")),
            "{stdout}"
        );
    }
    assert!(stdout.contains("outside"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(queue.join("nr_requests")).unwrap(),
        "64"
    );
    assert_eq!(std::fs::read_to_string(victim.path()).unwrap(), "keep");
    assert_eq!(std::fs::read("/etc/hostname").ok(), hostname);
    // The journal is done with: refused entries would be refused every time.
    assert!(!path.exists());
}

/// `iolab restore` acts as root on what it finds in the state directory: it writes journaled
/// values back and stops processes working in a killed run's directory. Neither happens from
/// a state directory others could write to, nor under a journal's root others could change.
#[test]
fn restore_acts_on_nothing_others_could_have_written() {
    use std::os::unix::fs::PermissionsExt;
    let mode =
        |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    let state = tempfile::tempdir().unwrap();
    // A journal whose root, a tree of files, others may write to.
    let fake = tempfile::tempdir().unwrap();
    let root = fake.path().canonicalize().unwrap();
    let queue = root.join("sys/block/loop0/queue");
    std::fs::create_dir_all(&queue).unwrap();
    std::fs::write(queue.join("nr_requests"), "32").unwrap();
    mode(&root, 0o777);
    let entry = serde_json::json!({ "path": "/sys/block/loop0/queue/nr_requests", "old": "64", "new": "x", "time_unix": 0.0 });
    let journal = state.path().join("journal.json");
    std::fs::write(
        &journal,
        serde_json::json!({"pid": 1, "started_unix": 0.0, "root": root, "entries": [entry]})
            .to_string(),
    )
    .unwrap();
    let out = crate::common::restore_in(state.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("the root its changes lie under")
            && stdout.contains("writable by others (mode 777)"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(queue.join("nr_requests")).unwrap(),
        "32"
    );
    assert!(journal.exists());
    // Once nobody else may change it, the journal is the fixture's own and is replayed.
    mode(&root, 0o700);
    assert!(crate::common::restore_in(state.path()).status.success());
    assert_eq!(
        std::fs::read_to_string(queue.join("nr_requests")).unwrap(),
        "64"
    );

    // A process working in what looks like a killed run's directory, in a state directory
    // others may write to: they could have put it there, or linked it to anywhere.
    let run = state.path().join("fio/run-999999999-0");
    std::fs::create_dir_all(&run).unwrap();
    let mut worker = std::process::Command::new("sleep")
        .arg("60")
        .current_dir(&run)
        .spawn()
        .unwrap();
    mode(state.path(), 0o777);
    let out = crate::common::restore_in(state.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("not used as iolab's state directory")
            && stderr.contains("writable by others (mode 777)"),
        "{stderr}"
    );
    assert!(worker.try_wait().unwrap().is_none() && run.exists());
    // A journal others may write to, in iolab's own directory (left by an iolab started with
    // umask 000, or put there before the directory was made private): not acted on.
    mode(state.path(), 0o700);
    let entry = serde_json::json!({ "path": "/sys/block/loop0/queue/nr_requests", "old": "64", "new": "x", "time_unix": 0.0 });
    std::fs::write(
        &journal,
        serde_json::json!({"pid": 1, "started_unix": 0.0, "root": root, "entries": [entry]})
            .to_string(),
    )
    .unwrap();
    std::fs::write(queue.join("nr_requests"), "32").unwrap();
    mode(&journal, 0o666);
    let out = crate::common::restore_in(state.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("writable by others (mode 666): not read"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(queue.join("nr_requests")).unwrap(),
        "32"
    );
    std::fs::remove_file(&journal).unwrap();
    // iolab's own, it is swept, and what worked in it stopped.
    mode(state.path(), 0o700);
    assert!(crate::common::restore_in(state.path()).status.success());
    assert!(!run.exists());
    let status = worker.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
}

/// A knob that no longer takes its old value (here its file became a directory) keeps its
/// entry and fails the command, but the rest is undone: the other knobs, and the tracefs
/// settings of a killed recording, which have their own journal.
#[test]
fn a_knob_that_cannot_be_put_back_does_not_stop_the_rest_of_restore() {
    let state = tempfile::tempdir().unwrap();
    let fake = tempfile::tempdir().unwrap();
    let root = fake.path().canonicalize().unwrap();
    for dev in ["loop0", "loop1"] {
        let queue = root.join(format!("sys/block/{dev}/queue"));
        std::fs::create_dir_all(&queue).unwrap();
        std::fs::write(queue.join("nr_requests"), "32").unwrap();
    }
    let stuck = root.join("sys/block/loop1/queue/nr_requests");
    std::fs::remove_file(&stuck).unwrap();
    std::fs::create_dir(&stuck).unwrap();
    let tracing = root.join("sys/kernel/tracing");
    std::fs::create_dir_all(&tracing).unwrap();
    std::fs::write(tracing.join("current_tracer"), "blk").unwrap();
    let entry = |path: &str, old: &str| serde_json::json!({ "path": path, "old": old, "new": "x", "time_unix": 0.0 });
    let journal = |entries: Vec<serde_json::Value>| {
        serde_json::json!({"pid": 1, "started_unix": 0.0, "root": root, "entries": entries})
            .to_string()
    };
    let knobs = state.path().join("journal.json");
    std::fs::write(
        &knobs,
        journal(vec![
            entry("/sys/block/loop0/queue/nr_requests", "64"),
            entry("/sys/block/loop1/queue/nr_requests", "64"),
        ]),
    )
    .unwrap();
    std::fs::create_dir(state.path().join("tracer")).unwrap();
    std::fs::write(
        state.path().join("tracer/journal.json"),
        journal(vec![entry("/sys/kernel/tracing/current_tracer", "nop")]),
    )
    .unwrap();

    let out = crate::common::restore_in(state.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("1 other problem(s)"), "{stderr}");
    assert!(
        stdout.contains("problem  knobs: ") && stdout.contains("loop1/queue/nr_requests"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("journal {} kept", knobs.display())),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("sys/block/loop0/queue/nr_requests")).unwrap(),
        "64"
    );
    assert_eq!(
        std::fs::read_to_string(tracing.join("current_tracer")).unwrap(),
        "nop"
    );
    let left: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&knobs).unwrap()).unwrap();
    let left = left["entries"].as_array().unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["path"], "/sys/block/loop1/queue/nr_requests");
}

#[test]
fn an_unreadable_journal_says_what_to_do() {
    let state = tempfile::tempdir().unwrap();
    let path = state.path().join("journal.json");
    for bytes in [&b"{\"pid\": 1, \xff\xfe}"[..], &b"{\"pid\": 1,\n oops"[..]] {
        std::fs::write(&path, bytes).unwrap();
        let out = crate::common::restore_in(state.path());
        // A problem among the others (listed on stdout), and the command fails.
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!("{}:", path.display()))
                && stderr.contains("restore the knobs it lists by hand")
                && stderr.contains(&format!("then delete {}", path.display())),
            "{stderr}"
        );
        // Nothing was removed: the user still has the list.
        assert!(path.exists());
    }
}

/// One change of every system-control kind, under a fixture root (see `system_controls`).
const SYSTEM_CHANGES: &[(&str, &str)] = &[
    ("/proc/sys/vm/dirty_ratio", "5"),
    ("/sys/module/nvme/parameters/sgl_threshold", "0"),
    (
        "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
        "performance",
    ),
    (
        "/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
        "performance",
    ),
    ("/sys/devices/system/cpu/intel_pstate/no_turbo", "1"),
    ("/sys/devices/system/cpu/smt/control", "off"),
    ("/sys/devices/system/cpu/cpu1/cpuidle/state2/disable", "1"),
];

/// Sets `SYSTEM_CHANGES` under the root in IOLAB_TEST_SYSTEM_ROOT, says READY and waits to be
/// killed (a no-op when run as a plain test).
#[test]
fn helper_process_system_knobs() {
    let Ok(root) = std::env::var("IOLAB_TEST_SYSTEM_ROOT") else {
        return;
    };
    let root = iolab::sys::SysRoot::at(root).unwrap();
    let mut j = Journal::begin_at(&knobs::state_dir(), &root).unwrap();
    for (path, value) in SYSTEM_CHANGES {
        j.set(path, value).unwrap();
    }
    println!("READY");
    std::io::stdout().flush().unwrap();
    std::thread::sleep(std::time::Duration::from_secs(30));
}

/// Sysctls, module parameters, governors, boost, SMT and idle states stay changed when the
/// process that set them is killed, and `iolab restore` puts every one back.
#[test]
fn system_controls_survive_sigkill_and_restore_puts_them_back() {
    let root = tempfile::tempdir().unwrap();
    let mut files = crate::common::system_controls(root.path());
    let param = root.path().join("sys/module/nvme/parameters/sgl_threshold");
    std::fs::create_dir_all(param.parent().unwrap()).unwrap();
    std::fs::write(&param, "32768\n").unwrap();
    files.push((
        "sys/module/nvme/parameters/sgl_threshold".into(),
        "32768".into(),
    ));
    let read = |rel: &str| knobs::read_attr(root.path().join(rel).to_str().unwrap()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "knobs::helper_process_system_knobs",
            "--nocapture",
        ])
        .env("IOLAB_TEST_SYSTEM_ROOT", root.path())
        .env("IOLAB_STATE_DIR", state.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let ready = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .any(|l| l.contains("READY"));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(ready, "the helper never set its knobs");
    for (path, value) in SYSTEM_CHANGES {
        assert_eq!(
            read(path.trim_start_matches('/')),
            *value,
            "{path} left changed"
        );
    }
    let out = crate::common::restore_in(state.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (rel, value) in &files {
        assert_eq!(&read(rel), value, "{rel} put back");
    }
}

/// Switching SMT off gives an interrupt pinned to a CPU it takes offline every online CPU as
/// its mask, and switching it on leaves that (seen on 6.1): the journal records such masks
/// before the switch, and restore puts them back after SMT. On the two-node fixture, CPU 9 is
/// CPU 1's second thread.
#[test]
fn switching_smt_off_journals_the_interrupt_masks_it_breaks() {
    let dir = tempfile::tempdir().unwrap();
    assert!(Command::new("cp")
        .arg("-a")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/machines/two-node-nvme/."),)
        .arg(dir.path())
        .status()
        .unwrap()
        .success());
    let file = |p: &str| dir.path().join(p.trim_start_matches('/'));
    let (smt, mask) = (
        "/sys/devices/system/cpu/smt/control",
        "/proc/irq/35/smp_affinity_list",
    );
    std::fs::create_dir_all(file(smt).parent().unwrap()).unwrap();
    std::fs::write(file(smt), "on\n").unwrap();
    std::fs::write(file(mask), "9\n").unwrap();
    let state = tempfile::tempdir().unwrap();
    let root = iolab::sys::SysRoot::at(dir.path()).unwrap();
    let mut j = Journal::begin_at(state.path(), &root).unwrap();
    j.set(smt, "off").unwrap();
    let paths: Vec<&str> = j.entries().iter().map(|e| e.path.as_str()).collect();
    assert!(paths.contains(&mask), "{paths:?}");
    assert_eq!(paths.last(), Some(&smt));
    // What the kernel does to it, as CPU 9 goes offline.
    std::fs::write(file(mask), "0-7\n").unwrap();
    j.restore().unwrap();
    let read = |p: &str| std::fs::read_to_string(file(p)).unwrap();
    assert_eq!((read(smt).trim(), read(mask).trim()), ("on", "9"));
}

/// A temporary directory holding `NAME`, a directory anyone may write to (mode 0777), and
/// `e.toml`, a 1 s random-read experiment with `top` (lines) at its top.
fn open_dir_and_experiment(name: &str, top: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let open = dir.path().join(name);
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let exp = dir.path().join("e.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"x\"\n{top}[workload]\nrw = \"randread\"\nbs = \"4k\"\nruntime = \"1s\"\n"
        ),
    )
    .unwrap();
    (dir, open, exp)
}

/// A run refuses a state directory others could write to before anything is made: no
/// scratch device, no marker, no journal in it. Its dry run, which makes nothing, warns.
#[test]
fn a_run_refuses_a_state_directory_others_could_write_to() {
    let (dir, state, exp) = open_dir_and_experiment("state", "");
    for dry in [true, false] {
        let mut cmd = crate::common::iolab();
        cmd.env("IOLAB_STATE_DIR", &state)
            .arg("run")
            .arg(&exp)
            .arg("--db")
            .arg(dir.path().join("r.db"));
        if dry {
            cmd.arg("--dry-run");
        }
        let out = cmd.output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(if dry { 0 } else { 1 }), "{said}");
        assert!(
            said.contains("not used as iolab's state directory")
                && said.contains("writable by others (mode 777)"),
            "{said}"
        );
        if dry {
            assert!(
                said.contains("the run would stop before it starts: not used"),
                "{said}"
            );
        }
        assert_eq!(std::fs::read_dir(&state).unwrap().count(), 0);
    }
}

/// Traces are kept beside the database, in directories iolab makes during the runs: a
/// database where another user could replace them (a directory anyone may write to, or
/// another user's home) is refused before anything is touched, not at the first trace.
#[test]
fn traces_beside_a_database_others_could_move_are_refused_before_the_run() {
    let (dir, shared, exp) = open_dir_and_experiment("shared", "trace = true\n");
    let out = crate::common::iolab()
        .env("IOLAB_STATE_DIR", dir.path().join("state"))
        .arg("run")
        .arg(&exp)
        .arg("--db")
        .arg(shared.join("r.db"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("traces and fio logs are kept beside the database")
            && stderr.contains("is writable by others and not sticky (mode 777)"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_dir(&shared).unwrap().count(), 0);
}

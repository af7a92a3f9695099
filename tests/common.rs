//! Helpers for the tests that need root and real devices: one way to skip without root, and
//! one scratch device (iolab's own `ScratchDevice`, a loop device over a file in /dev/shm)
//! that is detached and deleted on drop, also when the test fails.

use iolab::target::ScratchDevice;

/// Says why a test cannot run here and lets it return early. On a laptop that is a note on
/// stderr; under CI (`CI=true`) a missing prerequisite is a failure, so a CI machine that lacks
/// root, fio, btt or a loop device can never come out green.
pub fn skip(reason: &str) {
    if std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0") {
        panic!("prerequisite missing under CI: {reason}");
    }
    eprintln!("skipped: {reason}");
}

/// True as root; otherwise says the test is skipped. CI runs as root, so these tests run there.
pub fn root_or_skip() -> bool {
    if !iolab::sys::is_root() {
        skip("needs root");
        return false;
    }
    true
}

/// A scratch loop device with its own state directory (for the leak marker).
pub struct Scratch {
    // Declared first so the device is detached before its state directory goes away.
    pub dev: ScratchDevice,
    _state: tempfile::TempDir,
}

impl Scratch {
    /// A blank device of `bytes`, or None (with a message) when it cannot be made here.
    pub fn new(bytes: u64) -> Option<Scratch> {
        let state = tempfile::tempdir().ok()?;
        match ScratchDevice::create_in(state.path(), bytes) {
            Ok(dev) => Some(Scratch { dev, _state: state }),
            Err(e) => {
                skip(&format!("no scratch device: {e}"));
                None
            }
        }
    }

    /// The kernel name, e.g. `loop3`.
    pub fn name(&self) -> &str {
        self.dev.name()
    }

    /// The device node, e.g. `/dev/loop3`.
    pub fn path(&self) -> String {
        self.dev.dev_path()
    }
}

/// What a command did within a time limit: its exit code (`None` after a signal), output,
/// and whether it had to be killed for running too long.
pub struct Bounded {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
}

/// Runs `cmd` (stdin closed), killing it after `limit`: a test about hangs must not hang.
pub fn run_within(cmd: &mut std::process::Command, limit: std::time::Duration) -> Bounded {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the command");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let start = std::time::Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for the command") {
            break s;
        }
        if start.elapsed() > limit {
            timed_out = true;
            let _ = child.kill();
            break child.wait().expect("wait for the killed command");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    Bounded {
        code: status.code(),
        signal: status.signal(),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        timed_out,
    }
}

/// The built `iolab` binary as a plain `std::process::Command`.
pub fn iolab() -> std::process::Command {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("iolab"))
}

/// Runs `cmd`, fails the test with its stderr unless it succeeded, and returns its stdout.
pub fn stdout_of(cmd: &mut std::process::Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes the experiment `text` to `dir/NAME.toml` and runs it into the database `db` with
/// its state in `dir/state`; the run must succeed. Returns its stderr.
pub fn run_experiment(
    dir: &std::path::Path,
    db: &std::path::Path,
    name: &str,
    text: &str,
) -> String {
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, text).unwrap();
    let out = iolab()
        .args(["run", "--db"])
        .arg(db)
        .arg(&file)
        .env("IOLAB_STATE_DIR", dir.join("state"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

/// The verdict of the cross-check `name` among a run's stored `checks` (fails the test when
/// the run has none of that name).
pub fn verdict_of(checks: &serde_json::Value, name: &str) -> String {
    let check = checks
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["check"] == name)
        .unwrap_or_else(|| panic!("no {name} among {checks}"));
    format!("{}: {}", check["verdict"].as_str().unwrap_or("?"), check)
}

/// `iolab restore` with `state` as its state directory.
pub fn restore_in(state: &std::path::Path) -> std::process::Output {
    iolab()
        .env("IOLAB_STATE_DIR", state)
        .arg("restore")
        .output()
        .unwrap()
}

/// Gives the fixture machine under `root` (CPUs 0 and 1) the system controls that
/// `cpu.*` and `sysctl.*` factors change, as plain files: a sysctl, governors, boost, SMT and
/// three idle states per CPU. Returns every file written with its value.
pub fn system_controls(root: &std::path::Path) -> Vec<(String, String)> {
    let mut files = vec![
        ("proc/sys/vm/dirty_ratio".to_string(), "20".to_string()),
        (
            "sys/devices/system/cpu/intel_pstate/no_turbo".to_string(),
            "0".to_string(),
        ),
        (
            "sys/devices/system/cpu/smt/control".to_string(),
            "on".to_string(),
        ),
    ];
    for cpu in 0..2 {
        let c = format!("sys/devices/system/cpu/cpu{cpu}");
        files.push((format!("{c}/cpufreq/scaling_governor"), "powersave".into()));
        files.push((
            format!("{c}/cpufreq/scaling_available_governors"),
            "performance powersave".into(),
        ));
        for k in 0..3 {
            files.push((format!("{c}/cpuidle/state{k}/disable"), "0".into()));
        }
    }
    for (rel, value) in &files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{value}\n")).unwrap();
    }
    files
}

/// Adds network interface `name` to the fixture tree at `root`, on the PCI function at
/// `pci` (a directory under `root`, made if missing), as the kernel lists one: the class
/// link and the interface's `device` link. Its interrupts are the ones the tree already
/// names after it.
pub fn add_nic(root: &std::path::Path, name: &str, pci: &str) {
    use std::os::unix::fs::symlink;
    let pci = root.join(pci);
    let dir = pci.join("net").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    symlink(&pci, dir.join("device")).unwrap();
    std::fs::create_dir_all(root.join("sys/class/net")).unwrap();
    symlink(&dir, root.join("sys/class/net").join(name)).unwrap();
}

/// A scheduler `dev` offers other than its current one (a loop device offers several).
pub fn other_scheduler(dev: &str) -> String {
    let path = iolab::knobs::queue_attr_path(dev, "scheduler");
    let current = iolab::knobs::read_attr(&path).unwrap();
    std::fs::read_to_string(&path)
        .unwrap()
        .split_whitespace()
        .map(|s| s.trim_matches(|c| c == '[' || c == ']'))
        .find(|s| *s != current)
        .expect("a loop device offers at least two schedulers")
        .to_string()
}

/// The fields of one CSV line as iolab writes them (RFC 4180: a field holding a comma or a
/// quote is in double quotes, a quote in it doubled).
pub fn csv_fields(line: &str) -> Vec<String> {
    let (mut fields, mut field, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.trim_end_matches(['\r', '\n']).chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut field)),
            _ => field.push(c),
        }
    }
    fields.push(field);
    fields
}

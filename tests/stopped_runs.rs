//! A test run that is stopped or killed leaves the machine as it found it: `scripts/guarded`
//! (what scripts/test runs its tests under) stops a step and everything it started on
//! SIGTERM, removes what it left and puts back the knobs it changed; `scripts/leftovers`
//! removes only what dead processes made, never what a running one still uses.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::root_or_skip;

/// Held by the tests that run scripts/leftovers: one run's leftovers would take the other's
/// dead step's device before its own run could.
static LEFTOVERS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(name)
}

/// Whether a network namespace of that exact name exists.
fn namespace(name: &str) -> bool {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.split_whitespace().next() == Some(name))
}

fn loops_over(file: &str) -> String {
    let out = Command::new("losetup").args(["-j", file]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The file a loop device is over ("" when detached), as its driver names it (a deleted one
/// marked " (deleted)").
fn backing_file(dev: &str) -> String {
    let name = dev.trim_start_matches("/dev/");
    std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file"))
        .unwrap_or_default()
        .trim_end()
        .to_string()
}

/// A process id that was in use a moment ago and is not now.
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// A stand-in for the tests' `iolab restore`, in `dir`, that says which state directory it
/// was run on ("default" for iolab's own).
fn restore_stand_in(dir: &Path) -> String {
    let path = dir.join("restore");
    std::fs::write(
        &path,
        "#!/bin/sh\necho \"restore-called ${IOLAB_STATE_DIR:-default}\" >&2\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// Its status, its output, and SIGINT and SIGQUIT not ignored: tests send them to what they
/// start, and a shell's background command (without job control) starts with them ignored;
/// here scripts/guarded itself is started so.
#[test]
fn a_guarded_step_that_ends_by_itself_gives_its_status() {
    let mut guarded = Command::new(script("guarded"));
    guarded.args([
        "/dev/null",
        "sh",
        "-c",
        "grep SigIgn /proc/self/status; exit 3",
    ]);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        guarded.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            libc::signal(libc::SIGQUIT, libc::SIG_IGN);
            Ok(())
        })
    };
    let out = guarded.output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let ignored = stdout.trim().trim_start_matches("SigIgn:").trim();
    let ignored = u64::from_str_radix(ignored, 16).unwrap();
    for signal in [libc::SIGINT, libc::SIGQUIT] {
        assert_eq!(ignored & (1 << (signal - 1)), 0, "{signal}: {stdout}");
    }
}

/// The step makes what a test makes (an image in /dev/shm with a loop device over it whose
/// scheduler and read-ahead it changes, a network namespace with a process in it, a process
/// whose parent has gone) and waits;
/// SIGTERM to scripts/guarded must leave none of it.
#[test]
fn a_stopped_step_is_stopped_and_what_it_made_and_changed_is_put_back() {
    if !root_or_skip() {
        return;
    }
    let _alone = LEFTOVERS.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    // The listing of settings to put back is written by the step, once it knows its device:
    // scripts/guarded reads it when stopped.
    let step = format!(
        r#"set -e
img=/dev/shm/iolab-test-guarded-$$.img
truncate -s 16M "$img"
dev=$(losetup -f --show "$img")
echo "$img $dev" > {d}/made
q=/sys/block/${{dev#/dev/}}/queue
printf '%s\n' "$q/scheduler=$(cat $q/scheduler)" "$q/read_ahead_kb=$(cat $q/read_ahead_kb)" > {d}/state
in_use=$(sed 's/.*\[\(.*\)\].*/\1/' $q/scheduler)
other=$(tr -d '[]' < $q/scheduler | tr ' ' '\n' | grep -vx "$in_use" | grep . | head -n 1)
echo "$other" > $q/scheduler
echo 4321 > $q/read_ahead_kb
ip netns add iolabt-guarded-$$
ip netns exec iolabt-guarded-$$ sleep 300 &
echo "iolabt-guarded-$$ $! $other" >> {d}/made
(sleep 300 & echo $! > {d}/orphan)
touch {d}/ready
exec sleep 300"#
    );
    // The run's temporary directory, with what killed tests left there: a state directory
    // with a knob journal, and one with only a tracefs journal.
    let tests_tmp = dir.path().join("tests-tmp");
    let knobs_state = tests_tmp.join(".tmpA/state");
    let tracer_state = tests_tmp.join(".tmpB/state");
    std::fs::create_dir_all(&knobs_state).unwrap();
    std::fs::create_dir_all(tracer_state.join("tracer")).unwrap();
    std::fs::write(knobs_state.join("journal.json"), "{}").unwrap();
    std::fs::write(tracer_state.join("tracer/journal.json"), "{}").unwrap();
    let mut guard = Command::new(script("guarded"))
        .arg(dir.path().join("state"))
        .args(["bash", "-c", &step])
        // Not iolab's scratch devices: tests beside this one leave some on purpose.
        .env("LEFTOVERS", "")
        // Not `iolab restore` on iolab's own state directory, for the same reason: its calls
        // are seen in the output.
        .env("IOLAB_RESTORE", restore_stand_in(dir.path()))
        .env("IOLAB_TESTS_TMP", &tests_tmp)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !dir.path().join("ready").exists() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the step never got ready"
        );
        if let Some(status) = guard.try_wait().unwrap() {
            panic!("the step failed: {status}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let made = std::fs::read_to_string(dir.path().join("made")).unwrap();
    let made: Vec<&str> = made.split_whitespace().collect();
    let [img, dev, ns, in_ns, other] = made[..] else {
        panic!("{made:?}")
    };
    let state = std::fs::read_to_string(dir.path().join("state")).unwrap();
    let queue = format!("/sys/block/{}/queue", dev.trim_start_matches("/dev/"));
    assert!(!other.is_empty() && state.contains(&format!("{queue}/scheduler=")));
    assert!(loops_over(img).contains(dev) && namespace(ns));

    // SAFETY: a signal to our own child.
    unsafe { libc::kill(guard.id() as i32, libc::SIGTERM) };
    let out = guard.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{stderr}");

    // Nothing of the step is left, and its device has the settings it had.
    assert_eq!(loops_over(img), "", "{stderr}");
    assert!(!Path::new(img).exists(), "{stderr}");
    assert!(!namespace(ns), "{stderr}");
    assert!(!Path::new(&format!("/proc/{in_ns}")).exists(), "{stderr}");
    // Started by the step and left by its parent: no longer below the step, but in its group.
    let orphan = std::fs::read_to_string(dir.path().join("orphan")).unwrap();
    assert!(
        !Path::new(&format!("/proc/{}", orphan.trim())).exists(),
        "{stderr}"
    );
    for line in state.lines() {
        let (path, was) = line.split_once('=').unwrap();
        let now = std::fs::read_to_string(path).unwrap();
        assert_eq!(now.trim_end(), was.trim_end(), "{path}: {stderr}");
    }
    // Put back while the device is still the step's: a detached loop device keeps its knobs,
    // and a test beside this one may attach it at once and read them as its own.
    // And `iolab restore` first, which puts back its journals' exact values.
    // Each killed test's own state directory is restored too, after iolab's own.
    let restored = stderr.find("restore-called default");
    for state in [&knobs_state, &tracer_state] {
        let at = stderr.find(&format!("restore-called {}\n", state.display()));
        assert!(
            matches!((restored, at), (Some(r), Some(a)) if r < a),
            "{}: {stderr}",
            state.display()
        );
    }
    let restored = stderr.rfind("restore-called");
    let put_back = stderr.find(&format!("put back {queue}/scheduler"));
    let detached = stderr.find(&format!("detached {dev} "));
    assert!(
        matches!((restored, put_back, detached), (Some(r), Some(p), Some(d)) if r < p && p < d),
        "{stderr}"
    );
}

/// Attaches a loop device over a file, as a test does.
fn attach(file: &str) -> String {
    let out = Command::new("losetup")
        .args(["-f", "--show", file])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Puts away whatever the assertions leave: loop devices only while still over the file they
/// were attached to (one detached already may be another test's by now), then files and
/// namespaces.
struct Cleanup {
    loops: Vec<(String, String)>,
    paths: Vec<String>,
    namespaces: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for (dev, file) in &self.loops {
            if backing_file(dev).trim_end_matches(" (deleted)") == file {
                let _ = Command::new("losetup").args(["-d", dev]).status();
            }
        }
        let _ = Command::new("rm").arg("-rf").args(&self.paths).status();
        for ns in &self.namespaces {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// What a live process made stays (this test binary's own image, device and namespace, as
/// every test names them); what a dead one made goes, but not a loop device over another file
/// that had its name.
#[test]
fn leftovers_of_a_dead_process_go_and_those_of_a_live_one_stay() {
    if !root_or_skip() {
        return;
    }
    let _alone = LEFTOVERS.lock().unwrap_or_else(|e| e.into_inner());
    let me = std::process::id();
    let live_img = format!("/dev/shm/iolab-test-leftovers-{me}.img");
    let live_ns = format!("iolabt-leftovers-{me}");
    let dead = dead_pid();
    let dead_img = format!("/dev/shm/iolab-test-leftovers-{dead}.img");
    let renamed_img = format!("/dev/shm/iolab-test-leftovers2-{dead}.img");
    let dead_ns = format!("iolabt-leftovers-{dead}");
    let dead_dir = format!("/dev/shm/iolab-lab-out-{dead}.x1");
    // Left without --scratch: tests beside this one leave such files for `iolab restore`.
    let dead_scratch = format!("/dev/shm/iolab-scratch-{dead}-0.img");
    // Test runs' temporary directories (where leftovers looks: its $TMPDIR is ours), one with
    // a killed test's state directory in it.
    let tmp = std::env::temp_dir();
    let live_run = tmp.join(format!("iolab-tests-{me}-leftovers"));
    let dead_run = tmp.join(format!("iolab-tests-{dead}-leftovers"));
    let dead_state = dead_run.join(".tmpA/state");
    let mut cleanup = Cleanup {
        loops: Vec::new(),
        paths: vec![
            live_img.clone(),
            dead_img.clone(),
            renamed_img.clone(),
            dead_dir.clone(),
            dead_scratch.clone(),
            live_run.display().to_string(),
            dead_run.display().to_string(),
        ],
        namespaces: vec![live_ns.clone(), dead_ns.clone()],
    };
    std::fs::write(&dead_scratch, "left").unwrap();
    std::fs::create_dir_all(&live_run).unwrap();
    std::fs::create_dir_all(&dead_state).unwrap();
    std::fs::write(dead_state.join("journal.json"), "{}").unwrap();
    let stand_in_dir = tempfile::tempdir().unwrap();
    for img in [&live_img, &dead_img, &renamed_img] {
        std::fs::File::create(img)
            .unwrap()
            .set_len(16 << 20)
            .unwrap();
        let dev = attach(img);
        cleanup.loops.push((dev, img.to_string()));
    }
    let [live_dev, dead_dev, renamed_dev] = [0, 1, 2].map(|i| cleanup.loops[i].0.clone());
    // The file under the last device goes, and another takes its name: the device is over a
    // file that is not this one, as with another /dev/shm's file seen from a container.
    std::fs::remove_file(&renamed_img).unwrap();
    std::fs::write(&renamed_img, "another").unwrap();
    std::fs::create_dir(&dead_dir).unwrap();
    for ns in [&live_ns, &dead_ns] {
        assert!(Command::new("ip")
            .args(["netns", "add", ns])
            .status()
            .unwrap()
            .success());
    }

    let out = Command::new(script("leftovers"))
        .env("IOLAB_RESTORE", restore_stand_in(stand_in_dir.path()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("restore-called {}\n", dead_state.display())),
        "{stderr}"
    );
    assert!(!dead_run.exists() && live_run.exists(), "{stderr}");
    assert!(loops_over(&live_img).contains(&live_dev), "{stderr}");
    assert!(namespace(&live_ns), "{stderr}");
    assert_eq!(loops_over(&dead_img), "", "{stderr}");
    assert!(
        stderr.contains(&format!("detached {dead_dev} ")),
        "{stderr}"
    );
    assert!(
        !stderr.contains(&format!("detached {renamed_dev} ")),
        "{stderr}"
    );
    assert!(backing_file(&renamed_dev).contains(&renamed_img));
    for gone in [&dead_img, &renamed_img, &dead_dir] {
        assert!(!Path::new(gone).exists(), "{gone}: {stderr}");
    }
    assert!(Path::new(&dead_scratch).exists(), "{stderr}");
    assert!(!namespace(&dead_ns), "{stderr}");
    assert!(
        stderr.contains(&format!("deleted network namespace {dead_ns}")),
        "{stderr}"
    );
}

/// Unmounts a directory when dropped (before the `Cleanup` declared ahead of it detaches).
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A dead process's loop device that something mounts stays attached (`losetup -d` would
/// only mark it to go when closed, and whoever mounted it may be using it), and the run says
/// so and fails; once unmounted, the next run detaches it.
#[test]
fn leftovers_leave_a_dead_process_device_that_is_mounted() {
    if !root_or_skip() {
        return;
    }
    let _alone = LEFTOVERS.lock().unwrap_or_else(|e| e.into_inner());
    let img = format!("/dev/shm/iolab-test-mounted-{}.img", dead_pid());
    let mut cleanup = Cleanup {
        loops: Vec::new(),
        paths: vec![img.clone()],
        namespaces: Vec::new(),
    };
    std::fs::File::create(&img)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let dev = attach(&img);
    cleanup.loops.push((dev.clone(), img.clone()));
    let mkfs = Command::new("mkfs.ext2")
        .args(["-q", &dev])
        .output()
        .expect("mkfs.ext2 (e2fsprogs)");
    assert!(mkfs.status.success(), "{mkfs:?}");
    let dir = tempfile::tempdir().unwrap();
    assert!(Command::new("mount")
        .arg(&dev)
        .arg(dir.path())
        .status()
        .unwrap()
        .success());
    let mounted = Mounted(dir.path().to_path_buf());

    let out = Command::new(script("leftovers")).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("left {dev} (over {img}")) && stderr.contains("mounted or held"),
        "{stderr}"
    );
    assert!(backing_file(&dev).starts_with(&img), "{stderr}");
    assert!(
        std::fs::read_to_string("/proc/mounts")
            .unwrap()
            .lines()
            .any(|l| l.split_whitespace().next() == Some(dev.as_str())),
        "{stderr}"
    );

    drop(mounted);
    let out = Command::new(script("leftovers")).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("detached {dev} ")), "{stderr}");
    assert_eq!(backing_file(&dev), "", "{stderr}");
}

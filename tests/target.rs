//! Scratch targets and the "holds data" refusal on real loop devices (root only). The only
//! thing ever written is the scratch devices these tests create over files in /dev/shm; vda
//! is only read.

use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use iolab::target::{self, Reason, ScratchDevice, Signature, TargetError};

use crate::common::root_or_skip;

fn loop_exists(name: &str) -> bool {
    Path::new(&format!("/sys/block/{name}/loop/backing_file")).exists()
}

#[test]
fn a_blank_scratch_device_accepts_writes_and_vanishes_on_drop() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let dev = ScratchDevice::create_in(state.path(), 64 << 20).unwrap();
    let name = dev.name().to_string();
    let file = dev.backing_file().to_path_buf();
    assert!(name.starts_with("loop"), "{name}");
    assert!(loop_exists(&name));
    assert!(file.starts_with("/dev/shm"));
    let size: u64 = std::fs::read_to_string(format!("/sys/block/{name}/size"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(size * 512, 64 << 20);
    assert_eq!(
        target::holds_data(&iolab::sys::SysRoot::live(), &name).unwrap(),
        vec![]
    );
    target::check_write_allowed(&name, true, None).unwrap();
    target::check_write_allowed(&dev.dev_path(), true, None).unwrap();
    drop(dev);
    assert!(
        !loop_exists(&name)
            || !std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file"))
                .unwrap()
                .contains(file.to_str().unwrap())
    );
    assert!(!file.exists());
    assert_eq!(
        std::fs::read_dir(state.path().join("scratch"))
            .unwrap()
            .count(),
        0
    );
}

/// A loop device's scheduler, nr_requests and read_ahead_kb (which it keeps when detached).
fn queue(name: &str) -> [String; 3] {
    ["scheduler", "nr_requests", "read_ahead_kb"].map(|k| {
        iolab::knobs::current_choice(
            &std::fs::read_to_string(format!("/sys/block/{name}/queue/{k}")).unwrap(),
        )
    })
}

/// Changes all three of `queue`'s settings, as a user or a test writing to /sys might.
fn change_queue(name: &str) {
    let path = |k: &str| format!("/sys/block/{name}/queue/{k}");
    let [sched, requests, ahead] = queue(name);
    let listed = std::fs::read_to_string(path("scheduler")).unwrap();
    let other = listed
        .split_whitespace()
        .map(|s| s.trim_matches(['[', ']']))
        .find(|s| *s != sched)
        .expect("a second scheduler")
        .to_string();
    std::fs::write(path("scheduler"), &other).unwrap();
    let requests = if requests == "48" { "40" } else { "48" };
    std::fs::write(path("nr_requests"), requests).unwrap();
    let ahead = if ahead == "512" { "256" } else { "512" };
    std::fs::write(path("read_ahead_kb"), ahead).unwrap();
    assert_eq!(queue(name), [other, requests.into(), ahead.into()]);
}

/// A loop device keeps its queue settings when detached: the scratch device puts back what
/// it found, so whatever changed them in between does not reach the next user of the device.
#[test]
fn a_dropped_scratch_device_leaves_its_loop_queue_as_it_found_it() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let dev = ScratchDevice::create_in(state.path(), 16 << 20).unwrap();
    let name = dev.name().to_string();
    let found = queue(&name);
    change_queue(&name);
    drop(dev);
    assert_eq!(queue(&name), found);
}

#[test]
fn impossible_scratch_sizes_are_refused_before_anything_is_created() {
    let state = tempfile::tempdir().unwrap();
    let err = ScratchDevice::create_in(state.path(), 1000).unwrap_err();
    assert!(err.to_string().contains("at least 1 MiB"), "{err}");
    let err = ScratchDevice::create_in(state.path(), 1 << 62).unwrap_err();
    assert!(matches!(err, TargetError::NoRoom { .. }), "{err}");
    assert!(err.to_string().contains("/dev/shm"), "{err}");
    assert!(!state.path().join("scratch").exists());
}

#[test]
fn a_scratch_device_is_removed_when_its_owner_panics() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_path_buf();
    let seen = std::thread::spawn(move || {
        let dev = ScratchDevice::create_in(&dir, 8 << 20).unwrap();
        let file = dev.backing_file().to_path_buf();
        std::panic::panic_any(file);
    })
    .join()
    .unwrap_err();
    let file = seen.downcast_ref::<std::path::PathBuf>().unwrap();
    assert!(!file.exists(), "{} left behind", file.display());
}

#[test]
fn an_ext4_device_is_refused_for_writes_unless_named_as_destructive() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let dev = formatted(state.path(), &["mkfs.ext4", "-q", "-F"]);
    let reasons = target::holds_data(&iolab::sys::SysRoot::live(), dev.name()).unwrap();
    // iolab's own reading and blkid's agree.
    assert_eq!(
        reasons,
        vec![
            Reason::Signature {
                signature: Signature::Ext
            },
            Reason::Probed {
                what: "TYPE=ext4".into()
            }
        ]
    );
    let err = target::check_write_allowed(dev.name(), true, None).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(dev.name())
            && msg.contains("ext2/3/4")
            && msg.contains("--destructive-device"),
        "{msg}"
    );
    // Reads are always fine; naming another device does not unlock this one.
    target::check_write_allowed(dev.name(), false, None).unwrap();
    assert!(target::check_write_allowed(dev.name(), true, Some("loop999")).is_err());
    target::check_write_allowed(dev.name(), true, Some(&dev.dev_path())).unwrap();
}

/// A 32 MiB scratch device in `state` made into a file system by `mkfs` (the program and its
/// options; the device is added last).
fn formatted(state: &Path, mkfs: &[&str]) -> ScratchDevice {
    let dev = ScratchDevice::create_in(state, 32 << 20).unwrap();
    let out = Command::new(mkfs[0])
        .args(&mkfs[1..])
        .arg(dev.dev_path())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", mkfs[0]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dev
}

/// Unmounts on drop, so a failing assertion never leaves a mount behind.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_mounted_device_is_refused_even_when_named_by_path() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let dev = formatted(state.path(), &["mkfs.ext4", "-q", "-F"]);
    let mnt = tempfile::tempdir().unwrap();
    let out = Command::new("mount")
        .arg(dev.dev_path())
        .arg(mnt.path())
        .output()
        .unwrap();
    if !out.status.success() {
        crate::common::skip(&format!(
            "cannot mount ext4 here: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
        return;
    }
    let _guard = Mounted(mnt.path().to_path_buf());
    let reasons = target::holds_data(&iolab::sys::SysRoot::live(), &dev.dev_path()).unwrap();
    let mounted = Reason::Mounted {
        device: dev.name().to_string(),
        mount_point: mnt.path().display().to_string(),
    };
    assert!(reasons.contains(&mounted), "{reasons:?}");
    let msg = target::check_write_allowed(&dev.dev_path(), true, None)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("is mounted on"), "{msg}");
}

/// A format iolab's own list lacks is found by blkid's probe: a minix file system was
/// destroyed by a write workload, with no --destructive-device.
#[test]
fn a_format_only_blkid_knows_is_refused() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let dev = formatted(state.path(), &["mkfs.minix", "-3"]);
    let reasons = target::holds_data(&iolab::sys::SysRoot::live(), dev.name()).unwrap();
    assert_eq!(
        reasons,
        [Reason::Probed {
            what: "TYPE=minix".into()
        }]
    );
    let msg = target::check_write_allowed(dev.name(), true, None)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("blkid finds TYPE=minix on it"), "{msg}");
}

/// Detaches a loop device on drop.
struct Looped(String);

impl Drop for Looped {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

/// A file system reached through a second loop device over the target (at an offset, so the
/// target's own first MiB is blank) was overwritten while mounted: a loop device is no holder
/// of what it reads, and the mount is of the loop device. Its backing file says.
#[test]
fn a_loop_device_built_on_the_target_is_refused() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let dev = ScratchDevice::create_in(state.path(), 32 << 20).unwrap();
    let out = Command::new("losetup")
        .args(["-f", "--show", "-o", "1048576", &dev.dev_path()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let upper = Looped(String::from_utf8_lossy(&out.stdout).trim().to_string());
    let upper_name = upper.0.trim_start_matches("/dev/").to_string();
    let reasons = target::holds_data(&iolab::sys::SysRoot::live(), dev.name()).unwrap();
    assert_eq!(
        reasons,
        [Reason::LoopedBy {
            device: dev.name().to_string(),
            looped: upper_name.clone()
        }]
    );
    let msg = target::check_write_allowed(dev.name(), true, None)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains(&format!(
            "loop device {upper_name} is built on {}",
            dev.name()
        )),
        "{msg}"
    );
}

/// A file system mounted only in another mount namespace (a container's, a service's with
/// PrivateMounts) is in no mount table iolab reads; the kernel still refuses an exclusive
/// open of its device.
#[test]
fn a_device_mounted_in_another_mount_namespace_is_refused() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let dev = formatted(state.path(), &["mkfs.ext4", "-q", "-F"]);
    let mnt = tempfile::tempdir().unwrap();
    // The mount lives as long as the namespace's only process: killed below (or when this
    // test's process ends), it goes with it.
    let mut holder = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount {} {} && echo mounted && exec sleep 120",
            dev.dev_path(),
            mnt.path().display()
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unshare (util-linux)");
    let mut line = String::new();
    BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let reasons = target::holds_data(&iolab::sys::SysRoot::live(), dev.name());
    let _ = holder.kill();
    let _ = holder.wait();
    if line.trim() != "mounted" {
        crate::common::skip("cannot mount in a new mount namespace here");
        return;
    }
    let reasons = reasons.unwrap();
    assert!(
        reasons.contains(&Reason::Claimed {
            device: dev.name().to_string()
        }),
        "{reasons:?}"
    );
    assert!(
        !reasons.iter().any(|r| matches!(r, Reason::Mounted { .. })),
        "the mount was visible here after all: {reasons:?}"
    );
}

#[test]
fn swap_signatures_agree_with_blkid() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let dev = ScratchDevice::create_in(state.path(), 16 << 20).unwrap();
    let out = Command::new("mkswap").arg(dev.dev_path()).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ours = target::read_signatures(&dev.dev_path()).unwrap();
    assert_eq!(ours, vec![Signature::Swap]);
    let blkid = Command::new("blkid")
        .args(["-p", "-o", "value", "-s", "TYPE"])
        .arg(dev.dev_path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&blkid.stdout).trim(), "swap");
    // wipefs removes what blkid sees; then we must see nothing either.
    let wipe = Command::new("wipefs")
        .args(["-a", "-q"])
        .arg(dev.dev_path())
        .output()
        .unwrap();
    assert!(
        wipe.status.success(),
        "{}",
        String::from_utf8_lossy(&wipe.stderr)
    );
    assert_eq!(target::read_signatures(&dev.dev_path()).unwrap(), vec![]);
}

#[test]
fn a_gpt_header_is_refused() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let dev = ScratchDevice::create_in(state.path(), 8 << 20).unwrap();
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(dev.dev_path())
            .unwrap();
        f.seek(SeekFrom::Start(512)).unwrap();
        f.write_all(b"EFI PART").unwrap();
        f.sync_all().unwrap();
    }
    let err = target::check_write_allowed(dev.name(), true, None).unwrap_err();
    assert!(
        matches!(&err, TargetError::HoldsData { reasons, .. } if reasons == &vec![Reason::Signature { signature: Signature::Gpt }]),
        "{err}"
    );
}

/// A loop device with partition scanning, over an image with a one-partition MBR.
struct PartitionedLoop {
    name: String,
    file: std::path::PathBuf,
}

impl Drop for PartitionedLoop {
    fn drop(&mut self) {
        let _ = Command::new("losetup")
            .args(["-d", &format!("/dev/{}", self.name)])
            .status();
        let _ = std::fs::remove_file(&self.file);
    }
}

#[test]
fn a_device_with_partitions_is_refused() {
    if !root_or_skip() {
        return;
    }
    let file = std::path::PathBuf::from(format!(
        "/dev/shm/iolab-test-parts-{}.img",
        std::process::id()
    ));
    let mut img = vec![0u8; 8 << 20];
    let entry = 446;
    img[entry + 4] = 0x83;
    img[entry + 8..entry + 12].copy_from_slice(&2048u32.to_le_bytes());
    img[entry + 12..entry + 16].copy_from_slice(&8192u32.to_le_bytes());
    img[510] = 0x55;
    img[511] = 0xAA;
    std::fs::write(&file, &img).unwrap();
    let out = Command::new("losetup")
        .args(["-f", "--show", "-P"])
        .arg(&file)
        .output()
        .unwrap();
    let name = String::from_utf8_lossy(&out.stdout)
        .trim()
        .trim_start_matches("/dev/")
        .to_string();
    let guard = PartitionedLoop { name, file };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let part = format!("{}p1", guard.name);
    for _ in 0..50 {
        if Path::new(&format!("/sys/class/block/{part}")).exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let reasons = target::holds_data(&iolab::sys::SysRoot::live(), &guard.name).unwrap();
    assert!(
        reasons.contains(&Reason::Signature {
            signature: Signature::Mbr
        }),
        "{reasons:?}"
    );
    assert!(target::check_write_allowed(&guard.name, true, None).is_err());
    // Kernels built without CONFIG_MSDOS_PARTITION (this CI's) never create loopNp1; the
    // partition branch is then covered by the fixture-tree unit test only.
    if Path::new(&format!("/sys/class/block/{part}")).exists() {
        assert!(
            reasons.contains(&Reason::Partitions {
                names: vec![part.clone()]
            }),
            "{reasons:?}"
        );
    } else {
        eprintln!("note: kernel created no partition device; partition check not exercised live");
    }
}

#[test]
fn vda_is_refused_for_writes_and_allowed_for_reads() {
    if !root_or_skip() || !Path::new("/sys/block/vda").exists() {
        crate::common::skip("needs root and vda");
        return;
    }
    // Only reads vda: the mount table, holders, swaps and its first and last bytes.
    let err = target::check_write_allowed("vda", true, None).unwrap_err();
    let TargetError::HoldsData { reasons, .. } = &err else {
        panic!("{err}")
    };
    assert!(
        reasons
            .iter()
            .any(|r| matches!(r, Reason::Mounted { .. } | Reason::Partitions { .. })),
        "{reasons:?}"
    );
    // Some sandboxes refuse even a read-only open of the root disk; that too counts as data.
    assert!(
        reasons
            .iter()
            .any(|r| matches!(r, Reason::Signature { .. } | Reason::Unreadable { .. })),
        "{reasons:?}"
    );
    target::check_write_allowed("/dev/vda", false, None).unwrap();
}

/// A directory of links under /dev, removed with its links however the test ends.
struct DevLinks(std::path::PathBuf);

impl Drop for DevLinks {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `device = "/dev/disk/by-id/..."` in a file is the device the link points to, as
/// `--device` with the same link is: the file keeps device names without "/dev/", and the
/// link was looked up under that shorter name and not found.
#[test]
fn a_device_named_in_the_file_by_a_dev_link_is_the_device_it_points_to() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let dev = ScratchDevice::create_in(state.path(), 16 << 20).unwrap();
    let links = DevLinks(Path::new("/dev").join(format!("iolab-test-{}", std::process::id())));
    std::fs::create_dir_all(links.0.join("by-id")).unwrap();
    let link = links.0.join("by-id/scratch");
    std::os::unix::fs::symlink(dev.dev_path(), &link).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("link.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"link\"\n[target]\ndevice = \"{}\"\n[workload]\nrw = \"randread\"\n\
             runtime = \"1s\"\ntime_based = true\n",
            link.display()
        ),
    )
    .unwrap();
    let out = crate::common::iolab()
        .arg("run")
        .arg(&file)
        .args(["--dry-run", "--json"])
        .env("IOLAB_STATE_DIR", state.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["devices"][0]["name"], dev.name(), "{plan}");
}

#[test]
fn an_unknown_device_is_a_clear_error() {
    let err = target::check_write_allowed("nosuchdisk9", true, None).unwrap_err();
    assert!(
        err.to_string()
            .contains("/dev/nosuchdisk9: no such block device"),
        "{err}"
    );
    // A file under /dev is named as written, not by what follows "/dev/".
    let err = target::check_write_allowed("shm/x.img", true, None).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/dev/shm/x.img: no such block device"),
        "{err}"
    );
}

/// Child process for the signal tests below; does nothing in a normal run. With
/// IOLAB_TEST_HELPER=scratch it creates a scratch device and sleeps until killed; with
/// "scratch-signal" it waits for SIGINT/SIGTERM and then returns, so the guard cleans up;
/// "scratch-signal-after-line" reads a line first (its parent makes files meanwhile).
#[test]
fn helper_process_scratch() {
    let mode = std::env::var("IOLAB_TEST_HELPER").unwrap_or_default();
    if !mode.starts_with("scratch") {
        return;
    }
    let interrupt = iolab::knobs::signals::Interrupt::install().unwrap();
    if mode.ends_with("-after-line") {
        std::io::stdin().read_line(&mut String::new()).unwrap();
    }
    let dev = ScratchDevice::create(8 << 20).unwrap();
    println!("READY {} {}", dev.name(), dev.backing_file().display());
    std::io::stdout().flush().unwrap();
    let waited_out = interrupt.sleep(std::time::Duration::from_secs(60));
    assert!(!waited_out || mode == "scratch");
}

fn spawn_scratch_helper(mode: &str, state: &Path) -> (std::process::Child, String, String) {
    spawn_scratch_helper_after(mode, state, |_| {})
}

/// `spawn_scratch_helper`; in a `...-after-line` mode, `before(pid)` runs before the child
/// makes its device.
fn spawn_scratch_helper_after(
    mode: &str,
    state: &Path,
    before: impl FnOnce(u32),
) -> (std::process::Child, String, String) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "target::helper_process_scratch",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("IOLAB_TEST_HELPER", mode)
        .env("IOLAB_STATE_DIR", state)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    before(child.id());
    writeln!(child.stdin.take().unwrap()).unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // libtest prints "test NAME ... " before the helper's own output, on the same line.
    let ready = lines
        .find_map(|l| {
            l.ok()
                .and_then(|l| l.find("READY ").map(|i| l[i..].to_string()))
        })
        .expect("child ready");
    // Keep reading so the child's later output never hits a closed pipe.
    std::thread::spawn(move || lines.for_each(drop));
    let parts: Vec<&str> = ready.split(' ').collect();
    (child, parts[1].to_string(), parts[2].to_string())
}

fn still_backed(name: &str, file: &str) -> bool {
    std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file"))
        .map(|b| b.contains(file))
        .unwrap_or(false)
}

#[test]
fn sigterm_removes_the_scratch_device_before_exit() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let (mut child, name, file) = spawn_scratch_helper("scratch-signal", state.path());
    assert!(still_backed(&name, &file));
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!still_backed(&name, &file), "{name} still attached");
    assert!(!Path::new(&file).exists());
}

#[test]
fn a_scratch_device_leaked_by_sigkill_is_removed_by_restore() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let (mut child, name, file) = spawn_scratch_helper("scratch", state.path());
    let found = queue(&name);
    child.kill().unwrap(); // SIGKILL: no guard runs
    child.wait().unwrap();
    assert!(loop_exists(&name) && Path::new(&file).exists());
    change_queue(&name);

    let out = assert_cmd::Command::cargo_bin("iolab")
        .unwrap()
        .env("IOLAB_STATE_DIR", state.path())
        .arg("restore")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("removed scratch device {name}")),
        "{text}"
    );
    assert!(!Path::new(&file).exists());
    assert!(!still_backed(&name, &file), "{name} still backed by {file}");
    // The queue settings the marker recorded at attach time are back.
    assert_eq!(queue(&name), found);
}

/// A loop device iolab did not make: over a file in /dev/shm not named like its scratch
/// files, detached and deleted on drop.
struct ForeignLoop {
    name: String,
    file: std::path::PathBuf,
}

impl ForeignLoop {
    fn new(file_name: &str) -> Option<ForeignLoop> {
        let file = Path::new("/dev/shm").join(file_name);
        std::fs::File::create(&file)
            .and_then(|f| f.set_len(4 << 20))
            .ok()?;
        let out = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&file)
            .output()
            .ok()?;
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !out.status.success() || !dev.starts_with("/dev/loop") {
            let _ = std::fs::remove_file(&file);
            crate::common::skip("losetup could not attach a loop device");
            return None;
        }
        Some(ForeignLoop {
            name: dev.trim_start_matches("/dev/").to_string(),
            file,
        })
    }
}

impl Drop for ForeignLoop {
    fn drop(&mut self) {
        let _ = Command::new("losetup")
            .args(["--detach", &format!("/dev/{}", self.name)])
            .status();
        let _ = std::fs::remove_file(&self.file);
    }
}

/// A pid no process has right now (a child that has exited and been reaped).
fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

#[test]
fn a_forged_scratch_marker_detaches_and_deletes_nothing_iolab_did_not_make() {
    if !root_or_skip() {
        return;
    }
    let Some(foreign) = ForeignLoop::new(&format!("not-iolab-{}.img", std::process::id())) else {
        return;
    };
    // A real scratch device of a live iolab (this test), and a marker that claims its file
    // for a dead pid.
    let live_state = tempfile::tempdir().unwrap();
    let live = ScratchDevice::create_in(live_state.path(), 8 << 20).unwrap();
    let state = tempfile::tempdir().unwrap();
    let markers = state.path().join("scratch");
    std::fs::create_dir_all(&markers).unwrap();
    let pid = dead_pid();
    let forged = [
        (
            foreign.file.display().to_string(),
            Some(foreign.name.clone()),
        ),
        (
            live.backing_file().display().to_string(),
            Some(live.name().to_string()),
        ),
        ("/etc/hostname".to_string(), None),
    ];
    for (i, (file, device)) in forged.iter().enumerate() {
        let marker = serde_json::json!({ "pid": pid, "backing_file": file, "device": device });
        std::fs::write(markers.join(format!("forged-{i}.json")), marker.to_string()).unwrap();
    }
    let hostname = std::fs::read("/etc/hostname").ok();

    let out = crate::common::restore_in(state.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(still_backed(
        &foreign.name,
        &foreign.file.display().to_string()
    ));
    assert!(foreign.file.exists());
    assert!(still_backed(
        live.name(),
        &live.backing_file().display().to_string()
    ));
    assert!(live.backing_file().exists());
    assert_eq!(std::fs::read("/etc/hostname").ok(), hostname);
    assert!(!stdout.contains("removed scratch device"), "{stdout}");
    for (file, _) in &forged {
        assert!(
            stdout.contains(&format!(
                "names {file} (pid {pid}), which is not a scratch file"
            )),
            "{stdout}"
        );
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("3 other problem(s)"), "{stderr}");
    // The forged markers are gone; a second restore has nothing to say about them.
    assert_eq!(std::fs::read_dir(&markers).unwrap().count(), 0);
    assert!(crate::common::restore_in(state.path()).status.success());
}

/// A file already under the name a scratch device would take (another user's, made to stop
/// runs) is left alone, and the next name is taken.
#[test]
fn a_scratch_file_name_taken_already_is_left_alone_and_the_next_one_used() {
    if !root_or_skip() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    // Its first name, taken by a file of another user's.
    let mut theirs = String::new();
    let (mut child, name, file) =
        spawn_scratch_helper_after("scratch-signal-after-line", state.path(), |pid| {
            theirs = format!("/dev/shm/iolab-scratch-{pid}-0.img");
            std::fs::write(&theirs, "theirs").unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        });
    assert_eq!(file, format!("/dev/shm/iolab-scratch-{}-1.img", child.id()));
    assert!(still_backed(&name, &file));
    // SAFETY: a signal to our own child, which then removes its device.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    assert!(!still_backed(&name, &file) && !Path::new(&file).exists());
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "theirs");
    std::fs::remove_file(&theirs).unwrap();
}

/// A marker whose iolab seems gone (its start time is not its pid's) while another iolab
/// holds the device: the device is that one's, and restore leaves it attached, with its file
/// and the marker, saying why (a forged marker once had a live run's device detached).
#[test]
fn a_scratch_device_another_iolab_holds_is_left_to_it_by_restore() {
    if !root_or_skip() {
        return;
    }
    let live_state = tempfile::tempdir().unwrap();
    let (mut child, name, file) = spawn_scratch_helper("scratch-signal", live_state.path());
    let held = iolab::sys::lock::acquire(
        &iolab::sys::SysRoot::live(),
        iolab::sys::lock::Resource::Device(name.clone()),
    )
    .unwrap();
    let state = tempfile::tempdir().unwrap();
    let markers = state.path().join("scratch");
    std::fs::create_dir_all(&markers).unwrap();
    let marker = markers.join("claim.json");
    let text = serde_json::json!({
        "pid": child.id(), "started": 1, "backing_file": file, "device": name,
    });
    std::fs::write(&marker, text.to_string()).unwrap();

    let out = crate::common::restore_in(state.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "/dev/{name}: left attached, with its file and marker"
        )),
        "{stdout}"
    );
    assert!(still_backed(&name, &file) && Path::new(&file).exists());
    assert!(marker.exists());
    drop(held);
    // SAFETY: a signal to our own child, which then removes its device.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    assert!(!still_backed(&name, &file));
}

#[test]
fn a_corrupt_scratch_marker_is_reported_and_moved_aside() {
    let state = tempfile::tempdir().unwrap();
    let markers = state.path().join("scratch");
    std::fs::create_dir_all(&markers).unwrap();
    let marker = markers.join("iolab-scratch-1-0.json");
    std::fs::write(&marker, b"{\"pid\": 1, \"backing_f\xff").unwrap();
    let out = crate::common::restore_in(state.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stdout.contains(&format!("{}: unreadable scratch marker", marker.display()))
            && stdout.contains("losetup -d"),
        "{stdout}"
    );
    assert!(!marker.exists());
    assert!(markers.join("iolab-scratch-1-0.json.corrupt").exists());
    // Said once: the next restore is clean.
    let out = crate::common::restore_in(state.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

//! `iolab snapshot` end to end: a real capture of this machine is small, self-contained
//! (relative links that resolve inside it), free of secrets, and reads back with rates; a
//! snapshot of a snapshot reproduces the same model.

use crate::inspect::{inspect_json, machines};
use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

fn iolab() -> Command {
    Command::cargo_bin("iolab").unwrap()
}

fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let ft = e.file_type().unwrap();
        out.push(e.path());
        if ft.is_dir() {
            walk(&e.path(), out);
        }
    }
}

#[test]
fn live_snapshot_is_small_self_contained_and_reads_back_with_rates() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("snap");
    let out = iolab()
        .args(["snapshot", "--interval", "300ms", "-o"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("snapshot.json")).unwrap()).unwrap();
    assert!(meta["interval_ns"].as_u64().unwrap() >= 300_000_000);
    assert_eq!(
        meta["kernel"].as_str().unwrap(),
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap()
            .trim()
    );
    assert!(meta["hostname"].is_string() && meta["captured_at"].is_string());
    for f in ["interrupts", "stat", "diskstats"] {
        assert!(dir.join("later/proc").join(f).is_file(), "{f}");
    }
    // What a plan made from the snapshot reads beside the model (lockmem's check).
    assert!(dir.join("proc/meminfo").is_file());
    // preflight tells of the snapshot what it tells of this machine (a VM's had read as bare
    // metal without deep C-states), all but what only a live machine shows.
    let findings = |extra: &[&std::ffi::OsStr]| -> Vec<(String, String)> {
        let out = crate::common::stdout_of(
            crate::common::iolab()
                .args(["preflight", "--json"])
                .args(extra),
        );
        let all: Vec<Value> = serde_json::from_str(&out).unwrap();
        all.iter()
            .map(|f| {
                (
                    f["key"].as_str().unwrap().to_string(),
                    f["value"].to_string(),
                )
            })
            .filter(|(k, _)| {
                !["loadavg", "busy_processes", "fio_confinement", "cpu.steal"].contains(&k.as_str())
            })
            .collect()
    };
    // A snapshot holds no processes and no kernel command line: those are said unknown.
    let only_live = ["irqbalance", "iolab_irq_daemon", "cstate.limits"];
    let live: Vec<_> = findings(&[])
        .into_iter()
        .filter(|(k, _)| !only_live.contains(&k.as_str()))
        .collect();
    assert!(live.iter().any(|(k, _)| k == "cstate.deepest"), "{live:?}");
    let (unknown, known): (Vec<_>, Vec<_>) = findings(&["--root".as_ref(), dir.as_os_str()])
        .into_iter()
        .partition(|(k, _)| only_live.contains(&k.as_str()));
    assert_eq!(known, live);
    assert_eq!(unknown.len(), only_live.len(), "{unknown:?}");
    assert!(
        unknown.iter().all(|(_, v)| v.starts_with("\"not recorded")),
        "{unknown:?}"
    );

    let mut paths = Vec::new();
    walk(&dir, &mut paths);
    let mut bytes = 0;
    for p in &paths {
        let meta = std::fs::symlink_metadata(p).unwrap();
        let rel = p.strip_prefix(&dir).unwrap().display().to_string();
        assert!(
            !rel.ends_with("environ") && !rel.ends_with("cmdline") && !rel.contains("/proc/1"),
            "{rel} should not be in a snapshot"
        );
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(p).unwrap();
            assert!(target.is_relative(), "{rel} -> {}", target.display());
        } else if meta.is_file() {
            bytes += meta.len();
        }
    }
    assert!(bytes < 1_000_000, "snapshot holds {bytes} bytes");
    let mountinfo = std::fs::read_to_string(dir.join("proc/self/mountinfo")).unwrap();
    assert!(
        !mountinfo.contains("relatime"),
        "mount options kept:\n{mountinfo}"
    );
    // sysfs links resolve inside the snapshot.
    let vda = dir.join("sys/block/vda");
    if vda.exists() {
        let real = vda.canonicalize().unwrap();
        assert!(
            real.starts_with(dir.canonicalize().unwrap()),
            "{}",
            real.display()
        );
    }

    let (snap, _) = inspect_json(&dir);
    let live: Value =
        serde_json::from_slice(&iolab().args(["inspect", "--json"]).output().unwrap().stdout)
            .unwrap();
    assert_eq!(snap["cpus"], live["cpus"]);
    assert_eq!(snap["nodes"], live["nodes"]);
    let names = |m: &Value| -> Vec<Value> {
        m["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].clone())
            .collect()
    };
    assert_eq!(names(&snap), names(&live));
    assert!(snap["rates"]["interval_ns"].as_u64().unwrap() >= 300_000_000);
    let with_rate = snap["irqs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i.get("rate").is_some())
        .count();
    assert!(with_rate > 0);
    for i in snap["irqs"].as_array().unwrap() {
        let live_irq = live["irqs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["irq"] == i["irq"]);
        if let Some(l) = live_irq {
            assert_eq!(
                i["managed"], l["managed"],
                "managed flag of IRQ {}",
                i["irq"]
            );
        }
    }
}

/// Drops what legitimately differs between two captures of the same tree.
fn without_rates(mut m: Value) -> Value {
    m.as_object_mut().unwrap().remove("rates");
    for irq in m["irqs"].as_array_mut().unwrap() {
        irq.as_object_mut().unwrap().remove("rate");
    }
    m
}

/// `iolab snapshot --root FIXTURE -o DIR` with `extra` arguments; its standard output.
fn snapshot_of_fixture(name: &str, dir: &Path, extra: &[&str]) -> String {
    snapshot_of(&machines().join(name), dir, extra)
}

/// `iolab snapshot --root MACHINE -o DIR` with `extra` arguments; its standard output.
/// A root is copied with the readings it holds (two, or one), and refuses an interval.
fn snapshot_of(machine: &Path, dir: &Path, extra: &[&str]) -> String {
    let mut cmd = crate::common::iolab();
    cmd.arg("snapshot");
    let refused = crate::common::iolab()
        .args(["snapshot", "--interval", "10ms", "--root"])
        .arg(machine)
        .arg("-o")
        .arg(dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        refused.status.code() == Some(2) && err.contains("leave out --interval"),
        "{err}"
    );
    assert!(!dir.exists());
    crate::common::stdout_of(
        cmd.arg("--root")
            .arg(machine)
            .arg("-o")
            .arg(dir)
            .args(extra),
    )
}

#[test]
fn snapshot_of_a_fixture_reproduces_its_model() {
    for name in ["two-node-nvme", "scsi-hba"] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("copy");
        snapshot_of_fixture(name, &dir, &[]);
        let (original, _) = inspect_json(&machines().join(name));
        let (copy, _) = inspect_json(&dir);
        // A snapshot's second reading is kept, not taken again of files that do not change
        // (every rate read 0: IRQ 160's 100,000/s went); one without stays without rates
        // (a made-up second reading showed every rate as a measured 0).
        assert_eq!(
            original["rates"].is_object(),
            machines().join(name).join("later").is_dir(),
            "{name}"
        );
        assert_eq!(copy, original, "{name}");
        assert!(!dir.join("later").exists() || original["rates"].is_object());
    }
    // A copy was taken when its source was.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("copy");
    snapshot_of_fixture("two-node-nvme", &dir, &[]);
    let meta = |d: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(d.join("snapshot.json")).unwrap()).unwrap()
    };
    let (was, copy) = (meta(&machines().join("two-node-nvme")), meta(&dir));
    for key in [
        "captured_at",
        "captured_at_unix_ms",
        "interval_ns",
        "requested_interval_ns",
    ] {
        assert_eq!(copy[key], was[key], "{key}");
    }
}

/// The kernel's module index (a megabyte of driver aliases on a distribution kernel) is kept
/// only as far as it names schedulers' modules: the copy is small and still offers the same
/// schedulers on demand.
#[test]
fn a_snapshot_keeps_only_the_scheduler_lines_of_the_module_index() {
    let tmp = tempfile::tempdir().unwrap();
    let machine = tmp.path().join("machine");
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(machines().join("two-node-nvme"))
        .arg(&machine)
        .status()
        .unwrap();
    assert!(copied.success());
    let index = machine.join("lib/modules/6.8.0-45-generic");
    std::fs::create_dir_all(&index).unwrap();
    let mut alias = String::new();
    for i in 0..20_000 {
        alias += &format!("alias pci:v0000{i:04X}d*sv*sd*bc*sc*i* some_driver_{i}\n");
    }
    alias += "alias bfq-iosched bfq\nalias fs-ext4 ext4\n";
    std::fs::write(index.join("modules.alias"), &alias).unwrap();
    std::fs::write(
        index.join("modules.dep"),
        "kernel/block/kyber-iosched.ko.zst:\nkernel/fs/ext4/ext4.ko.zst: kernel/lib/crc16.ko.zst\n",
    )
    .unwrap();
    let dir = tmp.path().join("copy");
    snapshot_of(&machine, &dir, &[]);
    let kept = |file: &str| {
        std::fs::read_to_string(dir.join("lib/modules/6.8.0-45-generic").join(file)).unwrap()
    };
    assert_eq!(kept("modules.alias"), "alias bfq-iosched bfq\n");
    assert_eq!(kept("modules.dep"), "kernel/block/kyber-iosched.ko.zst:\n");
    let (original, _) = inspect_json(&machine);
    let (copy, _) = inspect_json(&dir);
    assert_eq!(
        original["schedulers_on_demand"],
        serde_json::json!(["bfq", "kyber"])
    );
    assert_eq!(without_rates(copy), without_rates(original));
}

/// `--json` prints the directory and what snapshot.json holds, the same figures the text
/// line gives.
#[test]
fn json_names_the_directory_and_holds_snapshot_json() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("copy");
    let out = snapshot_of_fixture("scsi-hba", &dir, &["--json"]);
    let printed: Value = serde_json::from_str(&out).unwrap();
    let stored: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("snapshot.json")).unwrap()).unwrap();
    assert_eq!(printed["directory"], dir.display().to_string());
    assert!(printed["files"].as_u64().unwrap() > 10, "{printed}");
    for key in [
        "files",
        "bytes",
        "interval_ns",
        "hostname",
        "kernel",
        "captured_at",
    ] {
        assert_eq!(printed[key], stored[key], "{key}");
    }
    // The files and bytes are those on disk besides snapshot.json (a file read twice was
    // counted twice, and the printed bytes held snapshot.json's, the stored ones not).
    fn walk(dir: &std::path::Path, found: &mut (u64, u64)) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let kind = e.file_type().unwrap();
            if kind.is_dir() {
                walk(&e.path(), found);
            } else if kind.is_file() && e.file_name() != "snapshot.json" {
                found.0 += 1;
                found.1 += e.metadata().unwrap().len();
            }
        }
    }
    let mut on_disk = (0, 0);
    walk(&dir, &mut on_disk);
    assert_eq!(
        (
            printed["files"].as_u64().unwrap(),
            printed["bytes"].as_u64().unwrap()
        ),
        on_disk
    );
}

#[test]
fn refuses_a_non_empty_directory_and_bad_intervals() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("precious"), "x").unwrap();
    let out = iolab()
        .args(["snapshot", "--interval", "10ms", "-o"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not empty") && err.contains(&tmp.path().display().to_string()),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("precious")).unwrap(),
        "x"
    );

    for bad in ["fast", "0", "-1s"] {
        let out = iolab()
            .args(["snapshot", "-o"])
            .arg(tmp.path().join("new"))
            .args(["--interval", bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(!tmp.path().join("new").exists());
    }

    // A file is not overwritten, and the message says a snapshot is a directory.
    let out = iolab()
        .args(["snapshot", "--interval", "10ms", "-o"])
        .arg(tmp.path().join("precious"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("exists and is not a directory"), "{err}");
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("precious")).unwrap(),
        "x"
    );
}

/// `irq plan --root` of a snapshot whose second reading is there but broken says what is
/// broken, not that the snapshot has no second reading.
#[test]
fn a_broken_second_reading_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = |dir: &Path| {
        let out = iolab()
            .args(["irq", "plan", "--root"])
            .arg(dir)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let no_stat = tmp.path().join("no-stat");
    snapshot_of_fixture("two-node-nvme", &no_stat, &[]);
    assert_eq!(plan(&no_stat).0, Some(0));
    std::fs::remove_file(no_stat.join("later/proc/stat")).unwrap();
    let (code, err) = plan(&no_stat);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("the snapshot's rates cannot be read") && err.contains("later/proc/stat"),
        "{err}"
    );
    let bad_meta = tmp.path().join("bad-meta");
    snapshot_of_fixture("two-node-nvme", &bad_meta, &[]);
    std::fs::write(bad_meta.join("snapshot.json"), "garbage").unwrap();
    let (code, err) = plan(&bad_meta);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("the snapshot's rates cannot be read") && err.contains("snapshot.json"),
        "{err}"
    );
}

#[test]
fn extra_readers_add_their_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("snap");
    let source = iolab::sys::SysRoot::at(machines().join("scsi-hba")).unwrap();
    let extra = |root: &iolab::sys::SysRoot| -> anyhow::Result<()> {
        root.read("/proc/sys/kernel/hostname")?;
        root.list("/sys/devices/system/cpu/cpu3")?;
        Ok(())
    };
    let meta = iolab::snapshot::capture_with(
        &source,
        &dir,
        std::time::Duration::from_millis(5),
        &[&extra],
    )
    .unwrap();
    assert_eq!(meta.hostname.as_deref(), Some("storage-hba"));
    assert!(dir.join("sys/devices/system/cpu/cpu3/topology").is_dir());
    assert!(dir.join("proc/sys/kernel/hostname").is_file());
    // Of one reading, the copy holds one.
    assert!(!dir.join("later").exists());
    assert_eq!(meta.interval_ns, 0);
}

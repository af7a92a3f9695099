//! `iolab inspect` end to end: the model of each fixture machine (insta snapshots of the
//! JSON, plus the facts each fixture exists to check), the live machine against what the
//! kernel says, and bad input.

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

pub fn machines() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/machines")
}

fn iolab() -> Command {
    Command::cargo_bin("iolab").unwrap()
}

/// Runs `inspect --json` on a fixture (or any root) and returns the document and stderr.
pub fn inspect_json(root: &Path) -> (Value, String) {
    let out = iolab()
        .args(["inspect", "--json", "--root"])
        .arg(root)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "inspect failed: {stderr}");
    (serde_json::from_slice(&out.stdout).unwrap(), stderr)
}

fn device<'a>(m: &'a Value, name: &str) -> &'a Value {
    m["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == name)
        .unwrap_or_else(|| panic!("no device {name}"))
}

fn irq(m: &Value, n: u64) -> &Value {
    m["irqs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["irq"] == n)
        .unwrap_or_else(|| panic!("no irq {n}"))
}

fn numbers(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

#[test]
fn fixture_models_are_stable() {
    for name in ["thisvm", "two-node-nvme", "scsi-hba"] {
        let (json, stderr) = inspect_json(&machines().join(name));
        assert!(!stderr.contains("panicked"), "{stderr}");
        insta::assert_json_snapshot!(format!("inspect_json_{name}"), json);
    }
}

#[test]
fn fixture_trees_are_stable() {
    for name in ["two-node-nvme", "scsi-hba"] {
        let out = iolab()
            .args(["inspect", "--root"])
            .arg(machines().join(name))
            .output()
            .unwrap();
        assert!(out.status.success());
        insta::assert_snapshot!(
            format!("inspect_tree_{name}"),
            String::from_utf8(out.stdout).unwrap()
        );
    }
}

#[test]
fn two_node_box_topology_queues_and_managed_irqs() {
    let (m, _) = inspect_json(&machines().join("two-node-nvme"));
    assert_eq!(numbers(&m["online"]), (0..15).collect::<Vec<u64>>());
    let cpu9 = &m["cpus"].as_array().unwrap()[9];
    assert_eq!(cpu9["cpu"], 9);
    assert_eq!(
        (cpu9["core"].as_u64(), cpu9["package"].as_u64()),
        (Some(1), Some(0))
    );
    assert_eq!(numbers(&cpu9["siblings"]), vec![1, 9]);
    // CPU 15 is offline: CPU 7 has no sibling left.
    assert_eq!(numbers(&m["cpus"][7]["siblings"]), vec![7]);
    assert_eq!(m["cpus"][12]["node"], 1);
    assert_eq!(m["nodes"][1]["distances"][0]["distance"], 21);

    let nvme0 = device(&m, "nvme0n1");
    assert_eq!(nvme0["node"], 0);
    assert_eq!(nvme0["pci"], "0000:3d:00.0");
    // The admin queue (nvme0q0) and the NIC's vectors do not serve the disk.
    assert_eq!(numbers(&nvme0["irqs"]), (121..=128).collect::<Vec<u64>>());
    assert_eq!(nvme0["queues"][2]["irq"], 123);
    assert_eq!(numbers(&nvme0["queues"][2]["cpus"]), vec![2, 10]);
    assert_eq!(nvme0["knobs"]["scheduler"], "none");
    assert_eq!(nvme0["holds_data"], true, "holder dm-0 is mounted");
    let nvme1 = device(&m, "nvme1n1");
    assert_eq!(nvme1["node"], 1);
    assert_eq!(nvme1["queues"][1]["irq"], 142);
    // NVMe multipath: the head takes controller, IRQs and queues from its hidden path; the
    // poll queue has no interrupt even though the driver names its vectors.
    let head = device(&m, "nvme2n1");
    assert_eq!(head["paths"][0], "nvme2c2n1");
    assert_eq!(head["pci"], "0000:c2:00.0");
    assert_eq!(numbers(&head["irqs"]), vec![181, 182]);
    assert_eq!(head["queues"][1]["irq"], 182);
    assert_eq!(head["queues"][2]["irq"], Value::Null);
    assert_eq!(device(&m, "nvme2c2n1")["hidden"], true);
    assert_eq!(numbers(&irq(&m, 163)["hint"]), vec![7]);
    assert!(irq(&m, 123).get("hint").is_none());
    assert_eq!(
        numbers(&m["default_irq_affinity"]),
        (0..15).collect::<Vec<u64>>()
    );
    // On / near / far from the CPU that takes the interrupt (case 0).
    let sda = &device(&m, "sda")["placement"];
    assert_eq!(numbers(&sda["on"]), vec![2]);
    // Near shares the LLC but not the core: CPU 10, the IRQ CPU's SMT sibling, is left out.
    assert_eq!(numbers(&sda["near"]), vec![0, 1, 3, 8, 9, 11]);
    assert_eq!(numbers(&sda["far"]), vec![4, 5, 6, 7, 12, 13, 14]);
    // Managed per-queue vectors are local to their queue's CPUs: nothing is far.
    let p = &nvme1["placement"];
    assert_eq!(numbers(&p["on"]), vec![0, 2, 4, 6]);
    assert!(numbers(&p["far"]).is_empty());
    assert!(device(&m, "dm-0").get("placement").is_none());
    // What the dm device is built from (`slaves`): where a run on it samples below.
    assert_eq!(device(&m, "dm-0")["slaves"], serde_json::json!(["nvme0n1"]));
    assert!(device(&m, "nvme0n1").get("slaves").is_none());
    assert_eq!(irq(&m, 123)["managed"], true);
    assert_eq!(irq(&m, 120)["managed"], false);
    assert_eq!(irq(&m, 160)["managed"], false);
    assert_eq!(irq(&m, 160)["name"], "eth0-TxRx-0");
    // Rates from the second reading, 2 s later.
    assert_eq!(irq(&m, 160)["rate"]["total"], 100000.0);
    assert_eq!(irq(&m, 122)["rate"]["per_cpu"]["1"], 15000.0);
    assert_eq!(m["rates"]["cpu_interrupts_per_s"]["4"], 100000.0);
    let loc = m["irqs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["irq"] == "LOC")
        .unwrap();
    assert_eq!(loc["name"], "Local timer interrupts");
    assert_eq!(loc["counts"]["14"], 100014);
}

#[test]
fn hba_box_scsi_paths_holders_swap_and_affinity_matched_queues() {
    let (m, _) = inspect_json(&machines().join("scsi-hba"));
    // No NUMA directories: one node with every CPU.
    assert_eq!(m["nodes"].as_array().unwrap().len(), 1);
    assert_eq!(
        numbers(&m["nodes"][0]["cpus"]),
        (0..8).collect::<Vec<u64>>()
    );
    let sda = device(&m, "sda");
    assert_eq!(sda["pci"], "0000:03:00.0");
    assert_eq!(sda["controller_driver"], "mpt3sas");
    assert_eq!(sda["driver"], "sd");
    assert_eq!(numbers(&sda["irqs"]), (50..=57).collect::<Vec<u64>>());
    assert_eq!(
        sda["queues"][0]["irq"],
        Value::Null,
        "8 vectors, 1 queue: no single IRQ"
    );
    let reasons: Vec<&str> = sda["data_reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert!(reasons.contains(&"swap on sda2"), "{reasons:?}");
    assert!(reasons.contains(&"mounted at /boot (ext4)"), "{reasons:?}");
    let sdb = device(&m, "sdb");
    assert_eq!(sdb["holds_data"], false);
    assert_eq!(sdb["knobs"]["scheduler"], "bfq");
    assert_eq!(sdb["rotational"], true);
    let sdc = device(&m, "sdc");
    assert_eq!(sdc["holds_data"], true);
    assert_eq!(numbers(&sdc["irqs"]), vec![30]);
    assert_eq!(sdc["queues"][0]["irq"], 30);
    let sdd = device(&m, "sdd");
    for q in 0..4 {
        assert_eq!(sdd["queues"][q]["irq"], 70 + q as u64);
    }
    assert!(
        m.get("rates").is_none(),
        "no second reading in this fixture"
    );
}

#[test]
fn live_machine_matches_the_kernel() {
    let out = iolab().args(["inspect", "--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let expected = iolab::sys::parse::cpulist(&online).unwrap();
    assert_eq!(m["cpus"].as_array().unwrap().len(), expected.len());
    if !Path::new("/sys/block/vda").exists() {
        crate::common::skip("vda checks: no vda on this machine");
        return;
    }
    let sched = std::fs::read_to_string("/sys/block/vda/queue/scheduler").unwrap();
    let current = sched
        .split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
        .unwrap_or("none");
    let vda = device(&m, "vda");
    assert_eq!(vda["knobs"]["scheduler"], current);
    // vda's request IRQ, found independently: the virtio device above the disk names it.
    let virtio = std::fs::read_link("/sys/block/vda/device").unwrap();
    let virtio = virtio.file_name().unwrap().to_string_lossy().into_owned();
    let interrupts = std::fs::read_to_string("/proc/interrupts").unwrap();
    let line = interrupts
        .lines()
        .find(|l| l.contains(&format!("{virtio}-req.0")))
        .expect("vda's request IRQ in /proc/interrupts");
    let number: u64 = line.split(':').next().unwrap().trim().parse().unwrap();
    assert!(numbers(&vda["irqs"]).contains(&number), "{vda}");
    assert_eq!(vda["queues"][0]["irq"], number);
    let mode = std::fs::metadata(format!("/proc/irq/{number}/smp_affinity"))
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()))
        .unwrap();
    assert_eq!(irq(&m, number)["managed"], mode & 0o222 == 0);
    assert_eq!(vda["holds_data"], true, "vda is the root disk");
    let effective =
        std::fs::read_to_string(format!("/proc/irq/{number}/effective_affinity_list")).unwrap();
    let effective = iolab::sys::parse::cpulist(&effective).unwrap();
    let on: Vec<u32> = numbers(&vda["placement"]["on"])
        .into_iter()
        .map(|c| c as u32)
        .collect();
    assert_eq!(on, effective, "vda's single IRQ decides where \"on\" is");
}

#[test]
fn live_interval_gives_rates() {
    let out = iolab()
        .args(["inspect", "--json", "--interval", "200ms"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ns = m["rates"]["interval_ns"].as_u64().unwrap();
    assert!(ns >= 200_000_000, "{ns}");
    let loc = m["irqs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["irq"] == "LOC");
    assert!(loc.unwrap()["rate"]["total"].as_f64().unwrap() >= 0.0);
}

/// `--interval` with `--root` contradict each other: a usage error, exit 2, as for `irq plan
/// --over` (it exited 1, like a machine that could not be read).
#[test]
fn an_interval_of_a_snapshot_is_a_usage_error() {
    let out = iolab()
        .args(["inspect", "--interval", "1s", "--root"])
        .arg(machines().join("two-node-nvme"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--interval measures the live machine"),
        "{err}"
    );
}

/// A copy of a fixture in a temp dir that a test may damage.
fn scratch_copy(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(machines().join(name))
        .arg(dir.path().join("m"))
        .status()
        .unwrap();
    assert!(status.success());
    dir
}

fn inspect_raw(root: &Path) -> (Option<i32>, String, String) {
    let out = iolab()
        .args(["inspect", "--json", "--root"])
        .arg(root)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn truncated_interrupts_is_an_error_naming_file_and_line() {
    let dir = scratch_copy("scsi-hba");
    let root = dir.path().join("m");
    let text = std::fs::read_to_string(root.join("proc/interrupts")).unwrap();
    let cut = text.find(" 50:").unwrap() + 12;
    std::fs::write(root.join("proc/interrupts"), &text[..cut]).unwrap();
    let (code, _, err) = inspect_raw(&root);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("proc/interrupts:4:"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn missing_required_file_is_an_error_naming_it() {
    let dir = scratch_copy("scsi-hba");
    let root = dir.path().join("m");
    std::fs::remove_file(root.join("sys/devices/system/cpu/online")).unwrap();
    let (code, _, err) = inspect_raw(&root);
    assert_eq!(code, Some(1));
    assert!(err.contains("sys/devices/system/cpu/online"), "{err}");
}

#[test]
fn missing_or_garbage_optional_files_degrade_with_warnings() {
    let dir = scratch_copy("two-node-nvme");
    let root = dir.path().join("m");
    std::fs::remove_file(root.join("proc/self/mountinfo")).unwrap();
    std::fs::write(root.join("later/proc/diskstats"), "259 0 nvme0n1 garbage\n").unwrap();
    std::fs::write(root.join("proc/irq/121/smp_affinity_list"), "zz\n").unwrap();
    let (code, out, err) = inspect_raw(&root);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("proc/self/mountinfo"), "{err}");
    assert!(err.contains("later/proc/diskstats:1:"), "{err}");
    assert!(err.contains("proc/irq/121/smp_affinity_list"), "{err}");
    let m: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(irq(&m, 121)["affinity"], Value::Null);
    assert!(m.get("rates").is_none());
    assert_eq!(m["warnings"].as_array().unwrap().len(), 3);
}

#[test]
fn a_root_that_is_a_file_is_a_clear_error() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let (code, _, err) = inspect_raw(file.path());
    assert_eq!(code, Some(1));
    assert!(err.contains(&file.path().display().to_string()), "{err}");
    assert!(err.contains("not a directory"), "{err}");
}

#[test]
fn live_loop_device_is_modelled_with_its_backing_file() {
    if !iolab::sys::is_root() {
        crate::common::skip("needs root");
        return;
    }
    let Some(scratch) = crate::common::Scratch::new(8 << 20) else {
        return;
    };
    let out = iolab().args(["inspect", "--json"]).output().unwrap();
    assert!(out.status.success());
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    let dev = device(&m, scratch.name());
    assert_eq!(
        dev["backing_file"],
        scratch.dev.backing_file().display().to_string()
    );
    assert_eq!(dev["size_bytes"], 8u64 << 20);
    assert_eq!(dev["holds_data"], false);
    assert_eq!(dev["kind"], "loop");
    let sched =
        std::fs::read_to_string(format!("/sys/block/{}/queue/scheduler", scratch.name())).unwrap();
    assert!(
        sched.contains(&format!(
            "[{}]",
            dev["knobs"]["scheduler"].as_str().unwrap()
        )) || sched.trim() == dev["knobs"]["scheduler"]
    );
    assert!(!dev["queues"].as_array().unwrap().is_empty());
    assert!(
        numbers(&dev["irqs"]).is_empty(),
        "a loop device has no interrupts"
    );
}

#[test]
fn the_json_model_reads_back_as_a_machine() {
    for name in ["thisvm", "two-node-nvme", "scsi-hba"] {
        let (json, _) = inspect_json(&machines().join(name));
        let machine: iolab::model::Machine = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(&machine).unwrap(), json, "{name}");
    }
}

/// Debian's 6.1 kernel (NO_HZ_FULL built in, no `nohz_full=` given) prints `(null)` in
/// /sys/devices/system/cpu/nohz_full, as the lab guests show (tests/lab.rs): that is no CPU,
/// read without a warning; a garbled list there is still a warning.
#[test]
fn a_null_nohz_full_reads_as_no_cpu_without_a_warning() {
    let dir = scratch_copy("thisvm");
    let root = dir.path().join("m");
    let file = root.join("sys/devices/system/cpu/nohz_full");
    std::fs::write(&file, "(null)\n").unwrap();
    let (code, out, err) = inspect_raw(&root);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("nohz_full"), "{err}");
    let m: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(m["nohz_full"], serde_json::json!([]));
    assert!(m["warnings"].as_array().unwrap().is_empty(), "{out}");
    std::fs::write(&file, "1-x\n").unwrap();
    let (code, _, err) = inspect_raw(&root);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("cpu/nohz_full:1:"), "{err}");
}

/// Debian's 6.1 creates `smp_affinity` 0644 even for kernel-managed NVMe queue vectors (the
/// lab's cells4 shows it, and that a write there fails): the queue ↔ IRQ spread still marks
/// them managed, while the admin vector and the NIC's stay movable.
#[test]
fn managed_queue_vectors_are_known_without_a_read_only_mode() {
    let dir = scratch_copy("two-node-nvme");
    let root = dir.path().join("m");
    let modes = root.join("file-modes");
    let text = std::fs::read_to_string(&modes).unwrap();
    assert!(text.contains("444 /proc/irq/123/smp_affinity"), "{text}");
    std::fs::write(&modes, text.replace("444 /proc/irq/", "644 /proc/irq/")).unwrap();
    let (code, out, err) = inspect_raw(&root);
    assert_eq!(code, Some(0), "{err}");
    let m: Value = serde_json::from_str(&out).unwrap();
    for n in [121, 122, 123, 141, 142] {
        assert_eq!(irq(&m, n)["managed"], true, "{}", irq(&m, n));
    }
    assert_eq!(irq(&m, 120)["managed"], false);
    assert_eq!(irq(&m, 160)["managed"], false);
}

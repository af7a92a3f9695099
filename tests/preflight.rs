//! `iolab preflight` end to end over a fixture machine (a powersave governor, turbo on and
//! irqbalance running), and on the live machine.

use assert_cmd::Command;

const NOISY: &str = "tests/fixtures/preflight/noisy";

#[test]
fn warns_about_a_noisy_fixture_machine() {
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["preflight", "--root", NOISY])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    for want in [
        "  kernel            6.1.0-13-amd64",
        "! cpufreq.governor  powersave",
        "set the performance governor",
        "! turbo             on (intel_pstate)",
        "! irqbalance        running (pid 77)",
        "  virtualization    none detected",
        "3 warning(s)",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
}

#[test]
fn prints_json_with_severity_and_advice() {
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["preflight", "--json", "--root", NOISY])
        .output()
        .unwrap();
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gov = doc
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["key"] == "cpufreq.governor")
        .unwrap();
    assert_eq!(gov["severity"], "warn");
    assert!(gov["advice"].as_str().unwrap().contains("performance"));
}

#[test]
fn runs_on_the_live_machine() {
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["preflight", "--json", "--sample-ms", "50"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let keys: Vec<&str> = doc
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["key"].as_str().unwrap())
        .collect();
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let kernel = doc
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["key"] == "kernel")
        .unwrap();
    assert_eq!(kernel["value"], release.trim());
    for k in [
        "cpu.online",
        "loadavg",
        "irqbalance",
        "busy_processes",
        "thp",
        "swap",
        "fio_confinement",
    ] {
        assert!(keys.contains(&k), "{k} missing from {keys:?}");
    }
}

/// A running `iolab irq daemon` is found by its command line (a stand-in here: a shell named
/// iolab, with `irq daemon` among its arguments), and `iolab irq top` is not one.
#[test]
fn finds_a_running_iolab_irq_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("iolab");
    // A link: the kernel names a process after the path it was started by. (A copy could
    // not be run while another test's child, forked during the copy, held it open for writing.)
    std::os::unix::fs::symlink("/bin/sh", &fake).unwrap();
    let start = |args: &[&str]| {
        std::process::Command::new(&fake)
            .args(["-c", "sleep 20; :"])
            .args(args)
            .spawn()
            .unwrap()
    };
    let mut daemon = start(&["irq", "daemon"]);
    let mut top = start(&["irq", "top"]);
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["preflight", "--json", "--sample-ms", "1"])
        .output()
        .unwrap();
    for p in [&mut daemon, &mut top] {
        let _ = p.kill();
        let _ = p.wait();
    }
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let found = doc
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["key"] == "iolab_irq_daemon")
        .unwrap();
    assert_eq!(found["severity"], "warn", "{found}");
    let value = found["value"].as_str().unwrap();
    assert!(value.contains(&daemon.id().to_string()), "{value}");
    assert!(!value.contains(&top.id().to_string()), "{value}");
}

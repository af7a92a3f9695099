//! `iolab irq` end to end: a plan for a synthetic pile-up (eight heavy NIC queues on one CPU
//! of a two-node box), the placement written into a fixture tree and rolled back through the
//! journal, bad input, and — as root — `top`, `apply`/`rollback` and `daemon` on this machine.

use crate::common::root_or_skip;
use crate::inspect::machines;
use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

fn iolab() -> Command {
    Command::cargo_bin("iolab").unwrap()
}

/// The PCI function of the two-node fixture's eth0 (its interrupts name it).
const ETH0_PCI: &str = "sys/devices/pci0000:80/0000:80:02.0/0000:af:00.0";

/// A copy of the two-node fixture, to change.
fn two_node() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ok = std::process::Command::new("cp")
        .arg("-a")
        .arg(machines().join("two-node-nvme/."))
        .arg(dir.path())
        .status()
        .unwrap()
        .success();
    assert!(ok);
    dir
}

/// A copy of the two-node fixture where, in the second reading, each of eth0's eight queue
/// interrupts took 100,000 more on CPU 4 (the snapshot's 2 s: 50,000/s each, 150,000/s for
/// queue 0 which already grew in the fixture).
fn pileup() -> tempfile::TempDir {
    let dir = two_node();
    let later = dir.path().join("later/proc/interrupts");
    let text = std::fs::read_to_string(&later).unwrap();
    let out: Vec<String> = text
        .lines()
        .map(|l| {
            if !l.contains("eth0-TxRx-") {
                return l.to_string();
            }
            let mut t: Vec<String> = l.split_whitespace().map(String::from).collect();
            let cpu4: u64 = t[5].parse().unwrap();
            t[5] = (cpu4 + 100_000).to_string();
            t.join(" ")
        })
        .collect();
    std::fs::write(&later, out.join("\n") + "\n").unwrap();
    dir
}

/// `irq plan`'s text view of a snapshot.
fn plan_text(root: &Path) -> String {
    let out = iolab()
        .args(["irq", "plan", "--root"])
        .arg(root)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

fn plan_json(root: &Path, extra: &[&str]) -> Value {
    let out = iolab()
        .args(["irq", "plan", "--json", "--root"])
        .arg(root)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_pileup_is_spread_over_the_nics_node_and_never_onto_an_isolated_cpu() {
    let root = pileup();
    let p = plan_json(root.path(), &[]);
    let moves = p["moves"].as_array().unwrap();
    // Queue 0 (150,000/s) and four of the 50,000/s ones leave CPU 4, each for a CPU of its
    // own; three stay: the busiest CPU carries 150,000/s, as with seven moves (queue 0
    // staying), which move as much.
    assert_eq!(moves.len(), 5, "{p:#}");
    let node1 = [4u64, 5, 6, 7, 12, 13];
    let mut targets: Vec<u64> = moves.iter().map(|m| m["to"].as_u64().unwrap()).collect();
    for m in moves {
        assert!((160..=167).contains(&m["irq"].as_u64().unwrap()), "{m}");
        assert_eq!(m["from"], serde_json::json!([4]));
    }
    assert!(moves.iter().any(|m| m["irq"] == 160), "{p:#}");
    assert!(
        targets.iter().all(|t| node1.contains(t) && *t != 4),
        "{targets:?}"
    );
    targets.sort();
    targets.dedup();
    assert_eq!(targets.len(), 5, "{targets:?}");
    assert_eq!(p["peaks_before"]["cpu"].as_f64().unwrap(), 500_000.0);
    assert_eq!(p["peaks_after"]["cpu"].as_f64().unwrap(), 150_000.0);
    let kept = p["kept"].as_array().unwrap();
    let why = |irq: u64| {
        kept.iter()
            .find(|k| k["irq"] == irq)
            .map(|k| k["why"].as_str().unwrap().to_string())
            .unwrap_or_default()
    };
    let stayed: Vec<u64> = (161..=167)
        .filter(|&irq| why(irq) == "already well placed")
        .collect();
    assert_eq!(stayed.len(), 3, "{p:#}");
    assert_eq!(why(122), "managed by the kernel");

    // The text view says the same.
    let text = plan_text(root.path());
    assert!(text.contains("eth0-TxRx-0"), "{text}");
    assert!(text.contains("managed by the kernel"), "{text}");
    assert!(
        text.contains("busiest: now CPU at 500000/s, core at "),
        "{text}"
    );
    assert!(text.contains("/s a CPU, package at "), "{text}");
    // Fit for a mail: ASCII only.
    assert!(text.is_ascii(), "{text}");

    // Their affinity (node 1's CPUs, as the driver set it) fences them even off the node.
    let anywhere = plan_json(root.path(), &["--any-node"]);
    assert_eq!(anywhere["moves"], p["moves"]);
    // With a threshold above every rate nothing is heavy, so nothing moves.
    let light = plan_json(root.path(), &["--heavy", "1000000"]);
    assert!(light["moves"].as_array().unwrap().is_empty());
}

/// `pileup()` with each of eth0's eight queue interrupts pinned to CPU 4 (where they fire).
fn pinned_pileup() -> tempfile::TempDir {
    let dir = pileup();
    for irq in 160..=167 {
        let path = dir.path().join(format!("proc/irq/{irq}/smp_affinity_list"));
        std::fs::write(path, "4\n").unwrap();
    }
    dir
}

/// A plan saved before the interrupts were pinned is held to the pins it finds: each move off
/// the pinned CPU is refused with the way out, none while the machine is as planned.
#[test]
fn a_saved_plan_is_held_to_pins_made_since() {
    use iolab::irq::apply;
    let root_dir = pileup();
    let p: iolab::irq::plan::Plan =
        serde_json::from_value(plan_json(root_dir.path(), &[])).unwrap();
    assert!(!p.moves.is_empty());
    let root = iolab::sys::SysRoot::at(root_dir.path()).unwrap();
    let read = || iolab::model::Machine::read(&root).unwrap();
    assert!(apply::against_options(&p, &read(), &Default::default()).is_empty());
    for irq in 160..=167 {
        let path = root_dir
            .path()
            .join(format!("proc/irq/{irq}/smp_affinity_list"));
        std::fs::write(path, "4\n").unwrap();
    }
    let problems = apply::against_options(&p, &read(), &Default::default());
    let off_cpu4 = p.moves.iter().filter(|m| m.to != 4).count();
    assert_eq!(problems.len(), off_cpu4, "{problems:?}");
    assert!(
        problems
            .iter()
            .all(|e| e.contains("may run only on CPUs 4 here now") && e.contains("--unpin")),
        "{problems:?}"
    );
}

/// The daemon leaves an interrupt alone while another iolab holds a disk or a network
/// interface it serves (an experiment measuring it), seen in /proc/locks without taking the
/// lock.
#[test]
fn an_interrupt_of_a_device_another_iolab_holds_is_left_alone() {
    use iolab::sys::lock::Resource;
    let dir = two_node();
    crate::common::add_nic(dir.path(), "eth0", ETH0_PCI);
    let root = iolab::sys::SysRoot::at(dir.path()).unwrap();
    let m = iolab::model::Machine::read(&root).unwrap();
    // sda's interrupt and eth0's first queue's.
    let cases = [
        (35, "ahci", Resource::Device("sda".into()), "block-sda.lock"),
        (
            160,
            "eth0-TxRx-0",
            Resource::Nic("eth0".into()),
            "net-eth0.lock",
        ),
    ];
    for (irq, name, resource, file) in cases {
        let (Resource::Device(device) | Resource::Nic(device)) = resource.clone() else {
            unreachable!()
        };
        let mv = iolab::irq::plan::Move {
            irq,
            name: name.into(),
            rate: 1.0,
            from: vec![2],
            to: 5,
        };
        let elsewhere = || iolab::irq::apply::in_use_elsewhere(&root, &m, &mv);
        assert_eq!(elsewhere(), None);
        drop(iolab::sys::lock::acquire(&root, resource.clone()).unwrap());
        // Held by mine: not another's.
        let mine = iolab::sys::lock::acquire(&root, resource).unwrap();
        assert_eq!(elsewhere(), None);
        drop(mine);
        let file = dir.path().join("run/lock/iolab").join(file);
        // -o: the lock stays with flock itself, not the sleep it runs, so killing it frees it.
        let mut holder = std::process::Command::new("flock")
            .arg("-o")
            .arg(&file)
            .args(["sleep", "10"])
            .spawn()
            .unwrap();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let said = loop {
            if let Some(s) = elsewhere() {
                break s;
            }
            assert!(std::time::Instant::now() < end, "the holder never showed");
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let _ = holder.kill();
        let _ = holder.wait();
        let expected =
            format!("left IRQ {irq} where it is: it serves {device}, which another iolab (pid ");
        assert!(said.starts_with(&expected), "{said}");
        // Free once flock's child, forked holding the same open file, has closed it (-o).
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while elsewhere().is_some() {
            assert!(
                std::time::Instant::now() < end,
                "the lock outlived its holder"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// What `irq apply --plan` prints for `plan`, saved to a file (it must succeed).
fn apply_saved_plan(plan: &serde_json::Value) -> String {
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("plan.json");
    std::fs::write(&file, plan.to_string()).unwrap();
    let done = iolab()
        .args(["irq", "apply", "--force", "--plan"])
        .arg(&file)
        .env("IOLAB_STATE_DIR", state.path())
        .assert()
        .success();
    String::from_utf8(done.get_output().stdout.clone()).unwrap()
}

#[test]
fn a_pileup_made_by_pins_is_named_with_its_gain_and_unpin_moves_it() {
    let root = pinned_pileup();
    let p = plan_json(root.path(), &[]);
    assert!(p["moves"].as_array().unwrap().is_empty(), "{p:#}");
    let pin = &p["pinned"];
    assert_eq!(
        pin["irqs"],
        serde_json::json!((160..=167).collect::<Vec<_>>())
    );
    assert_eq!(pin["cpus"], serde_json::json!([4]));
    assert_eq!(pin["busiest_cpu"].as_f64().unwrap(), 500_000.0);
    // Unpinned, the plan spreads them as in the test above: queue 0 alone is the busiest.
    let unpinned = pin["busiest_cpu_unpinned"].as_f64().unwrap();
    assert!(unpinned <= 200_000.0, "{p:#}");
    let gain = pin["gain_pct"].as_f64().unwrap();
    assert!(
        (gain - (500_000.0 - unpinned) / 5_000.0).abs() < 1e-6,
        "{p:#}"
    );
    let text = plan_text(root.path());
    assert!(
        text.contains("nothing to move: the heavy interrupts are pinned (see below)")
            && text.contains("8 heavy interrupts are pinned to CPU 4")
            && text.contains(&format!("would carry {gain:.0}% less"))
            && text.contains("--unpin all"),
        "{text}"
    );

    // `irq apply` of that plan moves nothing and says why in the same words, pins and all.
    assert_eq!(
        apply_saved_plan(&p),
        format!(
            "nothing to move: the heavy interrupts are pinned\n{}",
            text.split_once("pinned: ")
                .map(|(_, pins)| format!("pinned: {pins}"))
                .unwrap()
        )
    );
    // With nothing heavy, neither says the interrupts are balanced.
    let light = plan_json(root.path(), &["--heavy", "1000000"]);
    assert_eq!(
        apply_saved_plan(&light),
        "nothing to move: no movable interrupt is heavy\n"
    );

    // --unpin all: moved as if they had never been pinned, and nothing is reported pinned.
    let all = plan_json(root.path(), &["--unpin", "all"]);
    let free = plan_json(pileup().path(), &[]);
    assert_eq!(all["moves"], free["moves"]);
    assert!(all["pinned"].is_null(), "{all:#}");
    // --unpin IRQ: only that one moves (one of eight is a small gain: asked for any gain).
    let one = plan_json(root.path(), &["--unpin", "163", "--min-gain", "0"]);
    let moved: Vec<u64> = one["moves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["irq"].as_u64().unwrap())
        .collect();
    assert_eq!(moved, vec![163], "{one:#}");
    // --ban-cpus: no interrupt is moved onto a banned CPU.
    let banned = plan_json(root.path(), &["--unpin", "all", "--ban-cpus", "5-6"]);
    let moves = banned["moves"].as_array().unwrap();
    // Five do it (three stay on CPU 4, as busy as queue 0 alone): a move more would lower
    // the peaks by less than --min-gain of its rate.
    assert!(moves.len() >= 5, "{banned:#}");
    for m in moves {
        assert!(![5, 6].contains(&m["to"].as_u64().unwrap()), "{m}");
    }
    assert_eq!(banned["options"]["banned"], serde_json::json!([5, 6]));
    // Every CPU banned: nothing could move, which is said rather than planned.
    let cpus = std::fs::read_dir(root.path().join("sys/devices/system/cpu"))
        .unwrap()
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            name.strip_prefix("cpu")
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        })
        .count();
    let out = iolab()
        .args(["irq", "plan", "--root"])
        .arg(root.path())
        .args(["--ban-cpus", &format!("0-{}", cpus - 1)])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is every CPU here"), "{err}");
}

#[test]
fn a_placement_written_into_a_tree_comes_back_through_the_journal() {
    use iolab::irq::{apply, inputs, plan};
    let root_dir = pileup();
    let state = tempfile::tempdir().unwrap();
    let root = iolab::sys::SysRoot::at(root_dir.path()).unwrap();
    let m = iolab::model::Machine::read(&root).unwrap();
    let p = plan::plan(
        &inputs::sources(&m, &Default::default()),
        &inputs::slots(&m),
        plan::Options::default(),
    );
    apply::check(&p.moves, &m, &inputs::slots(&m)).unwrap();
    let file = |irq: u32| {
        root_dir
            .path()
            .join(format!("proc/irq/{irq}/smp_affinity_list"))
    };
    let original = std::fs::read_to_string(file(161)).unwrap();
    // While another iolab holds IRQ 161, applying stops there and says who holds it.
    {
        let other = iolab::sys::lock::acquire(&root, iolab::sys::lock::Resource::Irq(161)).unwrap();
        let mut j = iolab::knobs::Journal::resume_at(state.path(), &root).unwrap();
        let err = format!(
            "{:#}",
            apply::apply(&root, &m, &p.moves, &mut j).unwrap_err()
        );
        assert!(
            err.contains(&format!(
                "IRQ 161 is being changed by another iolab (pid {}",
                std::process::id()
            )),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(file(161)).unwrap(), original);
        // The moves made before 161 go back with their journal.
        drop(j);
        let mut j = iolab::knobs::Journal::resume_at(state.path(), &root).unwrap();
        // The daemon's way: every other move is made, 161 stays, and says why.
        let (done, left) = apply::apply_each(&root, &m, &p.moves, &mut j);
        assert_eq!(done.len() + left.len(), p.moves.len(), "{done:?} {left:?}");
        assert_eq!(left.len(), 1, "{left:?}");
        assert!(
            left[0].starts_with("left IRQ 161 (eth0-TxRx-1) where it is: ")
                && left[0].contains("being changed by another iolab"),
            "{left:?}"
        );
        assert_eq!(std::fs::read_to_string(file(161)).unwrap(), original);
        drop(j); // puts back every move made
        drop(other);
    }
    let mut j = iolab::knobs::Journal::resume_at(state.path(), &root).unwrap();
    let done = apply::apply(&root, &m, &p.moves, &mut j).unwrap();
    j.keep();
    assert_eq!(done.len(), p.moves.len());
    let to161 = p.moves.iter().find(|m| m.irq == 161).unwrap().to;
    assert_eq!(
        std::fs::read_to_string(file(161)).unwrap(),
        to161.to_string()
    );
    // The journal remembers the affinity before iolab: a second plan is not fenced by it.
    let before = apply::before_iolab(state.path()).unwrap();
    assert_eq!(
        before[&161],
        iolab::sys::parse::cpulist(original.trim()).unwrap()
    );
    // Pinned by someone else since iolab's move: that pin is judged as it is, a pin.
    let pinned = (to161 + 1) % 4;
    std::fs::write(file(161), pinned.to_string()).unwrap();
    assert!(!apply::before_iolab(state.path())
        .unwrap()
        .contains_key(&161));
    std::fs::write(file(161), to161.to_string()).unwrap();
    // Applying the same plan again writes nothing.
    let mut j = iolab::knobs::Journal::resume_at(state.path(), &root).unwrap();
    assert!(apply::apply(&root, &m, &p.moves, &mut j)
        .unwrap()
        .is_empty());
    j.keep();
    // Pinned by someone else after the placement: rollback leaves that pin, and says so.
    std::fs::write(file(161), pinned.to_string()).unwrap();
    let report = apply::rollback(state.path(), &root, false)
        .unwrap()
        .unwrap();
    // An interrupt delivered to fewer CPUs than its mask goes back in two writes (its CPU,
    // then its mask): one file for each interrupt moved but 161.
    let files: std::collections::BTreeSet<&str> =
        report.restored.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(files.len(), p.moves.len() - 1);
    assert!(!files.iter().any(|f| f.contains("/161/")), "{files:?}");
    assert_eq!(
        std::fs::read_to_string(file(161)).unwrap(),
        pinned.to_string()
    );
    let json = serde_json::to_value(&report).unwrap();
    let left = &json["changed_since"][0];
    assert_eq!(left["now"], pinned.to_string(), "{json}");
    assert_eq!(left["entries"][0]["new"], to161.to_string(), "{json}");
    assert!(apply::rollback(state.path(), &root, false)
        .unwrap()
        .is_none());
}

#[test]
fn a_plan_cannot_move_a_managed_interrupt_or_use_an_isolated_cpu() {
    use iolab::irq::{apply, inputs, plan::Move};
    let root = iolab::sys::SysRoot::at(machines().join("two-node-nvme")).unwrap();
    let m = iolab::model::Machine::read(&root).unwrap();
    let mv = |irq, to| Move {
        irq,
        name: m.irq(irq).map(|i| i.name.clone()).unwrap_or_default(),
        rate: 0.0,
        from: vec![],
        to,
    };
    let err = apply::check(
        &[mv(121, 1), mv(161, 14), mv(9999, 1)],
        &m,
        &inputs::slots(&m),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("IRQ 121 (nvme0q1) is managed"), "{err}");
    assert!(err.contains("CPU 14 is offline or isolated"), "{err}");
    assert!(err.contains("IRQ 9999 does not exist"), "{err}");
    // Numbers differ between boots: a move whose name is not the interrupt's is refused.
    let named = |irq, name: &str| Move {
        name: name.to_string(),
        ..mv(irq, 1)
    };
    let err = apply::check(
        &[named(161, "nvme0q41"), mv(162, 1)],
        &m,
        &inputs::slots(&m),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("IRQ 161 is"), "{err}");
    assert!(err.contains("not \"nvme0q41\" as the plan says"), "{err}");
    assert!(!err.contains("IRQ 162"), "{err}");
}

#[test]
fn bad_input_is_refused_with_a_reason() {
    let cases: &[(&[&str], &str)] = &[
        (&["irq", "plan", "--heavy=-1"], "--heavy"),
        (&["irq", "plan", "--min-gain", "100"], "--min-gain"),
        (
            &["irq", "plan", "--root", "/nonexistent/snap"],
            "/nonexistent/snap",
        ),
        (
            &[
                "irq",
                "daemon",
                "--min-interval",
                "10s",
                "--max-interval",
                "1s",
            ],
            "--min-interval",
        ),
        (&["irq", "top", "--interval", "0"], "longer than zero"),
        (&["irq", "plan", "--unpin", "some"], "neither `all` nor"),
        (&["irq", "plan", "--ban-cpus", "x"], "not a CPU list"),
    ];
    for (args, says) in cases {
        let out = iolab().args(*args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    // Names that do not exist on the machine planned for.
    let root = pileup();
    for (args, says) in [
        (["--unpin", "999"], "--unpin: no IRQ 999 here"),
        // IRQ numbers are not CPU numbers: past the kernel's last CPU number (8191) too.
        (["--unpin", "9999"], "--unpin: no IRQ 9999 here"),
        (
            ["--ban-cpus", "99"],
            "--ban-cpus: CPU 99 does not exist here",
        ),
    ] {
        let out = iolab()
            .args(["irq", "plan", "--root"])
            .arg(root.path())
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // A usage error, as a list that cannot be read is (`--ban-cpus x`).
        assert!(
            out.status.code() == Some(2) && stderr.contains(says),
            "{args:?}: {:?} {stderr}",
            out.status
        );
    }
    // Said before measuring, not after the hour asked for, and a metrics file that cannot be
    // written at the start, as a bad --listen is (these read this machine only).
    let state = tempfile::tempdir().unwrap();
    let (missing, dir_path) = (
        state.path().join("missing/iolab.prom"),
        state.path().display().to_string(),
    );
    let daemon = [
        "irq",
        "daemon",
        "--force",
        "--min-interval",
        "1h",
        "--max-interval",
        "2h",
    ];
    let cases: [(Vec<&str>, i32, &str); 4] = [
        (
            vec!["irq", "plan", "--over", "1h", "--unpin", "99999"],
            2,
            "--unpin: no IRQ 99999 here",
        ),
        (
            [&daemon[..], &["--unpin", "99999"]].concat(),
            2,
            "--unpin: no IRQ 99999 here",
        ),
        (
            [&daemon[..], &["--metrics-file", missing.to_str().unwrap()]].concat(),
            1,
            "--metrics-file",
        ),
        (
            [&daemon[..], &["--metrics-file", &dir_path]].concat(),
            1,
            "--metrics-file",
        ),
    ];
    for (args, code, says) in cases {
        let out = iolab()
            .args(&args)
            .env("IOLAB_STATE_DIR", state.path())
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code() == Some(code) && stderr.contains(says),
            "{args:?}: {:?} {stderr}",
            out.status
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("plan.json");
    std::fs::write(&bad, "{\"moves\": 3}").unwrap();
    let out = iolab()
        .args(["irq", "apply", "--force", "--plan"])
        .arg(&bad)
        .env("IOLAB_STATE_DIR", dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not a plan written by `iolab irq plan --json`"),
        "{stderr}"
    );
}

/// `irq top | head -1`: once the reader has gone, top ends (it wrote into the closed pipe,
/// ignoring the error, for as long as it was let run).
#[test]
fn top_ends_when_its_reader_goes_away() {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_iolab"))
        .args(["irq", "top", "--json", "--interval", "100ms"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(serde_json::from_str::<Value>(&first).is_ok(), "{first}");
    // The reader is dropped here: the next refresh finds the pipe closed.
    let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}

#[test]
fn top_shows_every_cpu_once_per_refresh() {
    let out = iolab()
        .args([
            "irq",
            "top",
            "--json",
            "--all",
            "-n",
            "2",
            "--interval",
            "200ms",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let frames: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(frames.len(), 2);
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let cpus = iolab::sys::parse::cpulist(online.trim()).unwrap();
    for f in &frames {
        assert_eq!(f["cpu_totals"].as_object().unwrap().len(), cpus.len());
        let s = f["interval_s"].as_f64().unwrap();
        assert!((0.19..1.0).contains(&s), "{s}");
        // The local timer ticks on some CPU in any 200 ms.
        assert!(f["rows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["irq"] == "LOC"));
    }
}

/// An interrupt of this machine whose affinity can be written and allows several CPUs.
/// A movable interrupt: its number, affinity list, a CPU to move it to and its name.
fn movable_irq() -> Option<(u32, String, u32, String)> {
    let m = iolab::model::Machine::read(&iolab::sys::SysRoot::live()).ok()?;
    m.irqs.iter().find_map(|i| {
        let n = i.number()?;
        let allowed = i.affinity.as_ref()?;
        let eff = i.effective.as_ref()?.first().copied()?;
        let other = allowed.iter().copied().find(|c| *c != eff)?;
        let text = std::fs::read_to_string(format!("/proc/irq/{n}/smp_affinity_list")).ok()?;
        (!i.managed).then(|| (n, text.trim().to_string(), other, i.name.clone()))
    })
}

/// Writes the affinity back if the test stops half-way.
struct PutBack(u32, String);

impl Drop for PutBack {
    fn drop(&mut self) {
        let _ = std::fs::write(format!("/proc/irq/{}/smp_affinity_list", self.0), &self.1);
    }
}

/// The tests that move this machine's interrupts take turns: each compares the affinities
/// with those it found first, and a daemon or apply of one refuses to start beside another's.
fn live_irqs_turn() -> std::sync::MutexGuard<'static, ()> {
    static LIVE_IRQS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LIVE_IRQS.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn apply_and_rollback_move_a_live_interrupt_and_put_it_back() {
    if !root_or_skip() {
        return;
    }
    let _turn = live_irqs_turn();
    let Some((irq, original, to, name)) = movable_irq() else {
        crate::common::skip("no movable interrupt with two allowed CPUs here");
        return;
    };
    let _guard = PutBack(irq, original.clone());
    let state = tempfile::tempdir().unwrap();
    // A real plan from this machine, with one move added by hand.
    let out = iolab()
        .args(["irq", "plan", "--json", "--over", "200ms"])
        .env("IOLAB_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut p: Value = serde_json::from_slice(&out.stdout).unwrap();
    let file = state.path().join("plan.json");
    let affinity = || {
        std::fs::read_to_string(format!("/proc/irq/{irq}/smp_affinity_list"))
            .unwrap()
            .trim()
            .to_string()
    };
    // `irq apply` of `p`, saved to the plan file.
    let apply = |p: &Value| {
        std::fs::write(&file, p.to_string()).unwrap();
        iolab()
            .args(["irq", "apply", "--force", "--plan"])
            .arg(&file)
            .env("IOLAB_STATE_DIR", state.path())
            .output()
            .unwrap()
    };
    // `irq apply` of `p` is refused saying `says`, and nothing moves.
    let refused = |p: &Value, says: &str| {
        let out = apply(p);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
        assert_eq!(affinity(), original, "a refused plan moved the interrupt");
        assert!(iolab::knobs::pending(&state.path().join("irq"))
            .unwrap()
            .is_empty());
    };
    // A plan made elsewhere (another boot, another machine) names another interrupt under
    // this number: the whole plan is refused.
    p["moves"] = serde_json::json!([
        { "irq": irq, "name": "something-else", "rate": 0.0, "from": [], "to": to }
    ]);
    refused(
        &p,
        &format!("IRQ {irq} is {name:?} here, not \"something-else\""),
    );
    p["moves"] =
        serde_json::json!([{ "irq": irq, "name": name, "rate": 0.0, "from": [], "to": to }]);
    // A saved plan is held to its own options on the machine as it is: a move to a CPU it
    // bans (or, alike, one the interrupt is no longer allowed on) is refused.
    p["options"]["banned"] = serde_json::json!([to]);
    refused(
        &p,
        &format!("IRQ {irq}: the plan moves it to CPU {to}, which its own --ban-cpus bans"),
    );
    p["options"]["banned"] = serde_json::json!([]);
    let out = apply(&p);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(&format!("moved IRQ {irq}")), "{stdout}");
    assert_eq!(affinity(), to.to_string());

    // `restore` leaves a placement alone and says how to undo it.
    let out = iolab()
        .arg("restore")
        .env("IOLAB_STATE_DIR", state.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        // One interrupt moved: two journal entries (its old CPU, then its old mask).
        stdout.contains(
            "the affinity of 1 interrupt(s) set by `iolab irq apply` (or by an `iolab irq \
             daemon --keep`, or one still running) stays in effect; `iolab irq rollback` puts \
             it back"
        ),
        "{stdout}"
    );
    assert_eq!(affinity(), to.to_string());

    let out = iolab()
        .args(["irq", "rollback", "--json"])
        .env("IOLAB_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Back to the CPU it was delivered to, then to its mask: one file, the mask written last.
    let restored = report["restored"].as_array().unwrap();
    assert!(
        restored.iter().all(|e| e["path"] == restored[0]["path"]),
        "{report}"
    );
    assert_eq!(restored.last().unwrap()["old"], original, "{report}");
    assert_eq!(affinity(), original);

    // Once more, read as text: the line names the interrupt as `apply` did.
    let again = iolab()
        .args(["irq", "apply", "--force", "--plan"])
        .arg(&file)
        .env("IOLAB_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert!(again.status.success());
    let out = iolab()
        .args(["irq", "rollback"])
        .env("IOLAB_STATE_DIR", state.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with(&format!(
            "restored /proc/irq/{irq}/smp_affinity_list = {original} ({name}; was {to}"
        )),
        "{stdout}"
    );
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert_eq!(affinity(), original);
    // With nothing left to roll back, JSON still has the report's fields, empty.
    let out = iolab()
        .args(["irq", "rollback", "--json"])
        .env("IOLAB_STATE_DIR", state.path())
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["restored"], serde_json::json!([]), "{report}");
}

/// A daemon without --keep puts its placements back when it stops; killed, it cannot, and
/// `iolab restore` does it (it left them in effect, for `irq rollback` alone to undo).
#[test]
fn a_killed_daemons_placements_are_put_back_by_restore() {
    if !root_or_skip() {
        return;
    }
    let _turn = live_irqs_turn();
    let affinities = || -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = std::fs::read_dir("/proc/irq")
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let f = e.path().join("smp_affinity_list");
                Some((f.display().to_string(), std::fs::read_to_string(&f).ok()?))
            })
            .collect();
        v.sort();
        v
    };
    let before = affinities();
    // Should the test fail half-way, the machine still gets its affinities back.
    struct PutBack(Vec<(String, String)>);
    impl Drop for PutBack {
        fn drop(&mut self) {
            for (file, value) in &self.0 {
                if std::fs::read_to_string(file).is_ok_and(|now| now != *value) {
                    let _ = std::fs::write(file, value.trim());
                }
            }
        }
    }
    let _put_back = PutBack(before.clone());
    let state = tempfile::tempdir().unwrap();
    let mut daemon = std::process::Command::new(env!("CARGO_BIN_EXE_iolab"))
        .args([
            "irq",
            "daemon",
            "--force",
            "--heavy",
            "0.001",
            "--min-gain",
            "0",
            // Whatever fires on CPU 0 must leave it: a move without any load to balance (an
            // idle machine's interrupts fire a few times a second, none heavy enough to
            // balance).
            "--ban-cpus",
            "0",
        ])
        .args(["--min-interval", "100ms", "--max-interval", "300ms"])
        .env("IOLAB_STATE_DIR", state.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let journal = state.path().join("irq");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    // A move is journaled before it is written: wait for both, or the kill can fall
    // between them (a journal that lists a move not in effect, which restore handles, but
    // which this test does not set out to show).
    while (iolab::knobs::pending(&journal)
        .unwrap_or_default()
        .is_empty()
        || affinities() == before)
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    if iolab::knobs::pending(&journal).unwrap().is_empty() {
        crate::common::skip("the daemon moved no interrupt here in 20 s");
        return;
    }
    assert_ne!(
        affinities(),
        before,
        "the journal lists moves, none is in effect"
    );
    let out = iolab()
        .arg("restore")
        .env("IOLAB_STATE_DIR", state.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("interrupt placements of a killed `iolab irq daemon` put back"),
        "{stdout}"
    );
    assert!(
        iolab::knobs::pending(&journal).unwrap().is_empty(),
        "{stdout}"
    );
    assert_eq!(affinities(), before, "{stdout}");
}

#[test]
fn the_daemon_looks_and_puts_everything_back_on_exit() {
    if !root_or_skip() {
        return;
    }
    let _turn = live_irqs_turn();
    let state = tempfile::tempdir().unwrap();
    let out = iolab()
        .args([
            "irq",
            "daemon",
            "--force",
            "--cycles",
            "3",
            "--min-interval",
            "100ms",
            "--max-interval",
            "300ms",
        ])
        .env("IOLAB_STATE_DIR", state.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("next look in"), "{stderr}");
    assert!(stderr.contains("(busiest CPU at "), "{stderr}");
    assert!(stderr.contains("put back"), "{stderr}");
    assert!(iolab::knobs::pending(&state.path().join("irq"))
        .unwrap()
        .is_empty());
}

/// For dashboards and the service manager: the daemon writes its figures as a node_exporter
/// textfile and serves them over HTTP while it runs; under systemd (JOURNAL_STREAM set) its
/// lines carry sd-daemon priorities instead of a clock.
#[test]
fn the_daemon_publishes_its_figures_and_logs_for_the_journal() {
    use std::io::{BufRead, BufReader, Read, Write};
    if !root_or_skip() {
        return;
    }
    let _turn = live_irqs_turn();
    let state = tempfile::tempdir().unwrap();
    let prom = state.path().join("iolab.prom");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_iolab"))
        .args([
            "irq",
            "daemon",
            "--force",
            "--cycles",
            "5",
            "--min-interval",
            "100ms",
            "--max-interval",
            "1s",
            "--listen",
            "127.0.0.1:0",
            "--metrics-file",
        ])
        .arg(&prom)
        .env("IOLAB_STATE_DIR", state.path())
        .env("JOURNAL_STREAM", "8:12345")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut log = Vec::new();
    let mut addr = None;
    let mut served = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(rest) = line.split("serving metrics on http://").nth(1) {
            addr = Some(rest.trim_end_matches("/metrics").to_string());
        }
        let looked = line.contains("next look in");
        log.push(line);
        if looked && served.is_none() {
            let mut s = std::net::TcpStream::connect(addr.clone().unwrap()).unwrap();
            s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
            let mut body = String::new();
            s.read_to_string(&mut body).unwrap();
            served = Some(body);
        }
    }
    assert!(child.wait().unwrap().success(), "{log:?}");
    let served = served.expect("the daemon never said it looked");
    assert!(served.starts_with("HTTP/1.0 200 OK"), "{served}");
    for text in [served.as_str(), &std::fs::read_to_string(&prom).unwrap()] {
        assert!(
            text.contains("# TYPE iolab_irq_cpu_interrupts_per_second gauge"),
            "{text}"
        );
        assert!(
            text.contains("iolab_irq_cpu_interrupts_per_second{cpu=\"0\"}"),
            "{text}"
        );
        assert!(text.contains("iolab_irq_moves_total 0"), "{text}");
    }
    assert!(
        log.iter()
            .all(|l| l.starts_with("<5>") || l.starts_with("<6>")),
        "{log:?}"
    );
    // Nothing was heavy on the fixture machine, so nothing moved and nothing comes back.
    assert!(
        log.iter()
            .any(|l| l == "<5>nothing to put back: no interrupt was moved"),
        "{log:?}"
    );
}

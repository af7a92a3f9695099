//! What the user reads: names with control characters printed escaped, tags that can be
//! selected again (one rule for run, import and compare), imports that refuse damaged or
//! endless files naming the file and the JSON path, `--root` and snapshot errors that name
//! the right directory, and a dry run that names no device someone else uses.

use std::path::Path;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use iolab::store::{NewExperiment, NewRun, Store};
use serde_json::{json, Value};

const EXAMPLE: &str = "examples/rq_affinity_placement.toml";
const FIO_JSON: &str = "tests/fixtures/fio/randread_1job_json.out";

fn iolab(args: &[&str]) -> (bool, String, String) {
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(args)
        .env_remove("IOLAB_DB")
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Raw characters a terminal would act on; none may reach the text output.
fn assert_no_raw_controls(what: &str, text: &str) {
    for c in ['\0', '\u{202e}', '\u{2066}', '\u{1b}', '\u{7f}', '\u{85}'] {
        assert!(!text.contains(c), "{what} printed {c:?} raw:\n{text:?}");
    }
}

const EVIL_NAME: &str = "evil\u{202e}txt.exe\0end";

/// An experiment whose name, host, kernel, cell, tag and failure reason carry controls.
fn evil_db(dir: &Path) -> String {
    let path = dir.join("evil.db");
    let mut db = Store::open(&path).unwrap();
    // Two alike, for `compare 1 2`.
    for seed in [1, 2] {
        let id = db
            .create_experiment(&NewExperiment {
                name: EVIL_NAME.into(),
                file_text: "[factors]\nrq_affinity = [\"1\"]\n".into(),
                seed,
                planned_order: Value::Null,
                host: "host\u{1b}[31m".into(),
                kernel: "6.1\u{2066}".into(),
                part_of: None,
            })
            .unwrap();
        for rep in 1..=3 {
            db.insert_run(&NewRun {
                experiment_id: id,
                cell_key: "rq_affinity=1".into(),
                cell_levels: json!({ "rq_affinity": "1" }),
                repetition: rep,
                start_unix: 1000.0,
                end_unix: 1010.0,
                tags: vec![("variant".into(), "v\u{7f}\u{85}".into())],
                metrics: vec![
                    ("read_iops".into(), 1000.0 + f64::from(rep)),
                    // A controlled host's figure: `show` and `compare` name the host in a hint.
                    ("ev\u{1b}]0;HOSTHINT\u{7}:sys_pct".into(), 3.0),
                ],
                ..Default::default()
            })
            .unwrap();
        }
        db.insert_run(&NewRun {
            experiment_id: id,
            cell_key: "rq_affinity=1\u{202e}".into(),
            cell_levels: json!({ "rq_affinity": "1" }),
            repetition: 4,
            status: iolab::store::RunStatus::Failed("fio job `j\u{202e}` failed\0".into()),
            ..Default::default()
        })
        .unwrap();
    }
    path.display().to_string()
}

#[test]
fn names_with_control_characters_are_printed_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let db = evil_db(dir.path());
    for args in [
        vec!["runs", "--db", &db],
        vec!["runs", "1", "--db", &db],
        vec!["show", "1", "--db", &db],
        vec!["show", "1", "--csv", "--db", &db],
        vec!["compare", "1", "2", "--db", &db],
    ] {
        let (ok, out, err) = iolab(&args);
        assert!(ok, "{args:?}: {err}");
        assert_no_raw_controls(&format!("{args:?}"), &out);
        assert!(
            args.contains(&"--csv") || out.contains("\\u{"),
            "{args:?}:\n{out}"
        );
    }
    // A figure only a host has: the error names the host's form of it, escaped.
    let (ok, _, err) = iolab(&["show", "1", "--metric", "sys_pct", "--db", &db]);
    assert!(!ok);
    assert_no_raw_controls("show's host hint", &err);
    let (_, out, _) = iolab(&["runs", "--db", &db]);
    assert!(out.contains("host\\u{1b}[31m / 6.1\\u{2066}"), "{out}");
    let (_, out, _) = iolab(&["runs", "1", "--db", &db]);
    assert!(out.contains("\"evil\\u{202e}txt.exe\\u{0}end\""), "{out}");
    assert!(
        out.contains("failed: fio job `j\\u{202e}` failed\\u{0}"),
        "{out}"
    );
    // JSON keeps the exact text.
    let (ok, out, err) = iolab(&["show", "1", "--json", "--db", &db]);
    assert!(ok, "{err}");
    assert!(out.contains(r#""evil\u202etxt.exe\u0000end""#) || out.contains("\\u0000"));
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["experiment"]["name"], EVIL_NAME, "{out}");
    // Errors quote names too.
    let (ok, _, err) = iolab(&["compare", "variant=nope\u{202e}", "1", "--db", &db]);
    assert!(!ok);
    assert_no_raw_controls("compare's error", &err);
}

#[test]
fn tags_follow_one_rule_in_run_import_and_compare() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db").display().to_string();
    // The selector keyword, control characters, ',' and empty values: refused by all three.
    for tag in [
        "experiment=99",
        "variant=a,b",
        "variant=",
        "Variant=x",
        "variant=x\u{202e}",
    ] {
        let (ok, _, err) = iolab(&["run", EXAMPLE, "--dry-run", "--tag", tag]);
        assert!(!ok, "run accepted --tag {tag:?}");
        assert!(err.contains("tag"), "{err}");
        assert_no_raw_controls("run's error", &err);
        let (ok, _, err) = iolab(&["import", "--db", &db, "--tag", tag, FIO_JSON]);
        assert!(!ok, "import accepted --tag {tag:?}");
        assert!(err.contains("tag"), "{err}");
        assert_no_raw_controls("import's error", &err);
    }
    let (_, _, err) = iolab(&["run", EXAMPLE, "--dry-run", "--tag", "experiment=99"]);
    assert!(
        err.contains("reserved") && err.contains("experiment id"),
        "{err}"
    );
    // iolab sets host and kernel on a run of this machine; a factor name would hide the factor.
    for (tag, why) in [
        ("host=x", "host name"),
        ("kernel=6.6", "running kernel"),
        ("rq_affinity=1", "is a factor of"),
        ("placement=on", "is a factor of"),
    ] {
        let (ok, _, err) = iolab(&["run", EXAMPLE, "--dry-run", "--tag", tag]);
        assert!(!ok, "run accepted --tag {tag}");
        assert!(err.contains(why), "--tag {tag}: {err}");
    }
    let (ok, _, err) = iolab(&["run", EXAMPLE, "--dry-run", "--tag", "variant=stock"]);
    assert!(ok || !err.contains("tag"), "{err}");
    // Import lets the user say host and kernel (a file cannot), and compare selects them.
    let (ok, _, err) = iolab(&[
        "import",
        "--db",
        &db,
        "--tag",
        "kernel=6.1",
        "--tag",
        "variant=a.b",
        FIO_JSON,
    ]);
    assert!(ok, "{err}");
    // Both select the one imported run: accepted as selectors, then refused as one group.
    let (ok, _, err) = iolab(&["compare", "variant=a.b", "kernel=6.1", "--db", &db]);
    assert!(!ok && err.contains("select the same run:"), "{err}");
    let (ok, _, err) = iolab(&["compare", "Variant=a.b", "kernel=6.1", "--db", &db]);
    assert!(!ok && err.contains("lowercase"), "{err}");
}

#[test]
fn import_of_an_endless_file_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("z.db").display().to_string();
    let start = Instant::now();
    let (ok, _, err) = iolab(&["import", "--db", &db, "/dev/zero"]);
    assert!(!ok);
    // Takes 0.1-0.3 s here (64 MiB read, then refused); without the limit it never ends.
    // The bound leaves room for a loaded 2-core machine running the suite in parallel.
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    assert!(err.contains("/dev/zero: larger than"), "{err}");
}

#[test]
fn import_refuses_damaged_files_naming_the_file_and_json_path() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.db").display().to_string();
    let text = std::fs::read_to_string(FIO_JSON).unwrap();
    let good: Value = serde_json::from_str(&text).unwrap();
    let damaged = |edit: &dyn Fn(&mut Value)| {
        let mut v = good.clone();
        edit(&mut v);
        v
    };
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "read_oops",
            damaged(&|v| v["jobs"][0]["read"] = json!("oops")),
            "jobs[0].read: expected an object",
        ),
        (
            "no_directions",
            damaged(&|v| {
                let job = v["jobs"][0].as_object_mut().unwrap();
                job.remove("read");
                job.remove("write");
            }),
            "jobs[0].read: missing",
        ),
        (
            "negative_iops",
            damaged(&|v| v["jobs"][0]["read"]["iops"] = json!(-1e308)),
            "jobs[0].read.iops: -1",
        ),
        (
            "nan_latency",
            damaged(&|v| v["jobs"][0]["read"]["clat_ns"]["mean"] = json!("NaN")),
            "jobs[0].read.clat_ns.mean: NaN is not a finite number",
        ),
        (
            "absurd_bw",
            damaged(&|v| v["jobs"][0]["read"]["bw_bytes"] = json!(1e300)),
            "jobs[0].read.bw_bytes: ",
        ),
    ];
    for (name, doc, expected) in cases {
        let file = dir.path().join(format!("{name}.json"));
        std::fs::write(&file, doc.to_string()).unwrap();
        let (ok, _, err) = iolab(&["import", "--db", &db, &file.display().to_string()]);
        assert!(!ok, "{name} was imported");
        assert!(
            err.contains(&format!("{}: {expected}", file.display())),
            "{name}: {err}"
        );
    }
    // Nothing was stored by any of them: every file is read before the database is opened,
    // so not even an empty one was created.
    assert!(!Path::new(&db).exists(), "a failed import created {db}");
    let (ok, _, err) = iolab(&["runs", "--db", &db]);
    assert!(!ok && err.contains("no results database here"), "{err}");
}

#[test]
fn inspect_root_that_is_not_a_snapshot_says_so() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("proc")).unwrap();
    let shown = dir.path().display().to_string();
    for cmd in [
        vec!["inspect", "--root", &shown],
        vec!["irq", "plan", "--root", &shown],
    ] {
        let (ok, _, err) = iolab(&cmd);
        assert!(!ok);
        assert!(
            err.contains(&format!(
                "{shown} is not a snapshot or machine root (no sys/devices/system/cpu/); \
                 `iolab snapshot -o DIR` makes one (DIR new or empty)"
            )),
            "{cmd:?}: {err}"
        );
    }
}

/// A read-only tmpfs, unmounted on drop (also when the test fails). Mode 0755: a tmpfs root is
/// 1777 by default, a directory others may write to, which iolab refuses to fill.
struct ReadOnlyMount(tempfile::TempDir);

impl ReadOnlyMount {
    fn new() -> Option<ReadOnlyMount> {
        let dir = tempfile::tempdir().ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "ro,size=1m,mode=0755", "iolab-test-ro"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(ReadOnlyMount(dir))
    }
}

impl Drop for ReadOnlyMount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.0.path())
            .status();
    }
}

#[test]
fn snapshot_into_a_read_only_directory_names_the_destination() {
    if !crate::common::root_or_skip() {
        return;
    }
    let Some(ro) = ReadOnlyMount::new() else {
        crate::common::skip("cannot mount a read-only tmpfs");
        return;
    };
    let dest = ro.0.path().display().to_string();
    let (ok, _, err) = iolab(&["snapshot", "-o", &dest, "--interval", "10ms"]);
    assert!(!ok);
    assert!(
        err.contains(&format!("{dest}: cannot write the snapshot there")),
        "{err}"
    );
    assert!(!err.contains("/sys/") && !err.contains("/proc/"), "{err}");
}

#[test]
fn dry_run_on_the_default_target_names_no_existing_loop_device() {
    if !crate::common::root_or_skip() {
        return;
    }
    // Someone's loop device: it must not be offered as the scratch target's stand-in.
    let Some(theirs) = crate::common::Scratch::new(1 << 20) else {
        return;
    };
    let (ok, out, err) = iolab(&["run", EXAMPLE, "--dry-run"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("target: 1 new scratch loop device(s) (created when the run starts"),
        "{out}"
    );
    assert!(!out.contains("/dev/loop"), "{out}");
    assert!(!out.contains("/sys/block/loop"), "{out}");
    assert!(!out.contains(&format!("{} ", theirs.name())), "{out}");
    let (ok, out, err) = iolab(&["run", EXAMPLE, "--dry-run", "--json"]);
    assert!(ok, "{err}");
    let plan: Value = serde_json::from_str(&out).unwrap();
    let name = plan["devices"][0]["name"].as_str().unwrap();
    assert!(
        !Path::new("/sys/block").join(name).exists(),
        "{name} is a real device"
    );
}

#[test]
fn machine_names_from_a_snapshot_are_printed_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("m");
    let copied = std::process::Command::new("cp")
        .args(["-a", "tests/fixtures/machines/thisvm"])
        .arg(&root)
        .status()
        .unwrap();
    assert!(copied.success());
    for rel in [
        "proc/interrupts",
        "later/proc/interrupts",
        "sys/kernel/irq/36/actions",
    ] {
        let p = root.join(rel);
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains("virtio1-req.0"), "{rel}");
        std::fs::write(&p, text.replace("virtio1-req.0", "virtio1-req\u{202e}.0")).unwrap();
    }
    std::fs::write(
        root.join("proc/sys/kernel/hostname"),
        "vm\u{1b}]0;owned\u{7}\n",
    )
    .unwrap();
    let shown = root.display().to_string();
    for cmd in [
        vec!["inspect", "--root", &shown],
        vec!["irq", "plan", "--root", &shown, "--heavy", "0.001"],
    ] {
        let (ok, out, err) = iolab(&cmd);
        assert!(ok, "{cmd:?}: {err}");
        assert_no_raw_controls(&format!("{cmd:?}"), &out);
        assert!(!out.contains('\u{7}'), "{out}");
    }
    let (_, out, _) = iolab(&["inspect", "--root", &shown]);
    assert!(out.contains("vm\\u{1b}]0;owned\\u{7}"), "{out}");
    assert!(out.contains("virtio1-req\\u{202e}.0"), "{out}");
    let (_, out, _) = iolab(&["inspect", "--root", &shown, "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["hostname"], "vm\u{1b}]0;owned\u{7}");
}

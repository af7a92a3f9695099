//! `import`, `show`, `compare`, `plot` and `report` end to end through the binary, on a
//! database built in the test (fio fixtures imported, and a realistic 3x3 experiment stored
//! through the store API). Text and JSON outputs are snapshot-tested.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::{json, Value};

use crate::answers_db;

fn iolab(db: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .env_remove("IOLAB_DB")
        .arg(args[0])
        .arg("--db")
        .arg(db)
        .args(&args[1..])
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn ok(db: &Path, args: &[&str]) -> String {
    let (success, stdout, stderr) = iolab(db, args);
    assert!(success, "iolab {args:?} failed: {stderr}");
    stdout
}

fn err(db: &Path, args: &[&str]) -> String {
    let (success, _, stderr) = iolab(db, args);
    assert!(!success, "iolab {args:?} should have failed");
    stderr
}

/// `iolab report 1 -o PAGE --json` on `db`: its summary.
fn report_json(db: &Path, page: &Path) -> Value {
    serde_json::from_str(&ok(
        db,
        &["report", "1", "-o", page.to_str().unwrap(), "--json"],
    ))
    .unwrap()
}

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fio")
        .join(name)
        .display()
        .to_string()
}

/// The one-job fio fixture written to `dir/name` as another run's output: its read IOPS, its
/// end `at` seconds later (so no two outputs are one), and `edits` (text, replacement) of its
/// job options.
fn fio_output(dir: &Path, name: &str, iops: &str, at: u32, edits: &[(&str, &str)]) -> String {
    let mut text = std::fs::read_to_string(fixture("randread_1job_json.out"))
        .unwrap()
        .replace("\"iops\" : 137647.176412", &format!("\"iops\" : {iops}"))
        .replace("1795313598", &(1795313598 + at).to_string());
    for (from, to) in edits {
        text = text.replace(from, to);
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// An experiment record with nothing but a name, for runs a test stores itself.
fn bare_experiment(name: &str) -> iolab::store::NewExperiment {
    iolab::store::NewExperiment {
        name: name.into(),
        file_text: String::new(),
        seed: 1,
        planned_order: serde_json::json!([]),
        host: "h".into(),
        kernel: "6.1".into(),
        part_of: None,
    }
}

fn two_kernels() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    answers_db::two_kernels(&db, 5, true);
    (dir, db)
}

fn assert_mail_friendly(text: &str) {
    for line in text.lines() {
        assert!(line.is_ascii(), "not ASCII: {line}");
        assert!(line.len() <= 80, "wider than 80: {line}");
    }
}

/// Timestamps and paths change between runs; snapshots keep the rest.
fn redact(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, x) in map.iter_mut() {
                if k == "created_unix" || k == "file" {
                    *x = Value::String("[redacted]".into());
                } else {
                    redact(x);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        _ => {}
    }
}

/// A write job's fio output holds reads too, at 0 I/Os: the report draws the writes' latency
/// CDF, not the reads' (which has no I/Os).
#[test]
fn a_write_jobs_report_draws_the_writes_latency_cdf() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    let file = fixture("write_1job_jsonplus.out");
    ok(&db, &["import", file.as_str()]);
    let page = dir.path().join("w.html");
    let summary = report_json(&db, &page);
    assert!(
        summary["figures"]
            .to_string()
            .contains("completion latency CDF"),
        "{summary}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("write completion latency"), "no writes' CDF");
}

/// Imported outputs of a sweep are not taken for repetitions of one configuration: each fio
/// option whose value differs between them is a factor, also when a later import brings the
/// difference (the runs there move to their cells). A device name differing is no factor.
#[test]
fn an_imported_sweep_has_a_cell_per_option_value() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.db");
    let output = |name: &str, iodepth: &str, iops: &str, device: &str, at: u32| {
        let depth = format!("\"iodepth\" : \"{iodepth}\"");
        let edits = [
            ("\"iodepth\" : \"16\"", depth.as_str()),
            ("/dev/loop0", device),
        ];
        fio_output(dir.path(), name, iops, at, &edits)
    };
    let qd16 = [
        output("a.json", "16", "137647.0", "/dev/loop0", 0),
        output("b.json", "16", "137000.0", "/dev/loop0", 10),
    ];
    let qd1 = [
        output("c.json", "1", "20000.0", "/dev/loop0", 20),
        output("d.json", "1", "21000.0", "/dev/loop0", 30),
    ];
    let elsewhere = output("e.json", "1", "20500.0", "/dev/loop7", 40);
    let import = |files: &[&str]| -> Value {
        let mut args = vec!["import", "--experiment", "sweep", "--json"];
        args.extend(files);
        serde_json::from_str(&ok(&db, &args)).unwrap()
    };
    let first = import(&[&qd16[0], &qd16[1]]);
    assert_eq!(first["factors"], json!([]), "{first}");
    // Named out of the order they ran: stored in the order they ran.
    let second = import(&[&qd1[1], &qd1[0]]);
    assert_eq!(second["factors"], json!(["iodepth"]), "{second}");
    assert_eq!(second["regrouped"], 2, "{second}");
    let keys = |db: &Path| -> Vec<String> {
        let store = iolab::store::Store::open_existing(db).unwrap();
        store
            .runs(1)
            .unwrap()
            .into_iter()
            .map(|r| r.cell_key)
            .collect()
    };
    assert_eq!(
        keys(&db),
        ["iodepth=16", "iodepth=16", "iodepth=1", "iodepth=1"]
    );
    let third = import(&[&elsewhere]);
    assert_eq!(third["places"], json!(["filename"]), "{third}");
    assert_eq!(third["regrouped"], 0, "{third}");
    // Each cell counts its own repetitions; run ids follow the time each ran.
    let store = iolab::store::Store::open_existing(&db).unwrap();
    let runs = store.runs(1).unwrap();
    let reps: Vec<(&str, u32)> = runs
        .iter()
        .map(|r| (r.cell_key.as_str(), r.repetition))
        .collect();
    assert_eq!(
        reps,
        [
            ("iodepth=16", 1),
            ("iodepth=16", 2),
            ("iodepth=1", 1),
            ("iodepth=1", 2),
            ("iodepth=1", 3)
        ]
    );
    assert!(runs
        .windows(2)
        .all(|w| w[0].id < w[1].id && w[0].start_unix < w[1].start_unix));
    drop(store);
    let shown = ok(&db, &["show", "1", "--metric", "read_iops"]);
    assert!(shown.contains("factors: iodepth (1, 16)"), "{shown}");
    // Three runs at depth 1, two at 16: the cells' own means, not one of all five.
    let summary: Value = serde_json::from_str(&ok(&db, &["show", "1", "--json"])).unwrap();
    let text = summary.to_string();
    assert!(
        text.contains("20500"),
        "depth 1's mean of 20000, 21000, 20500: {text}"
    );
    assert!(text.contains("137323.5"), "depth 16's mean: {text}");

    // Merged elsewhere before the second import, and again after: the runs merged before
    // take their new cells there, and are not copied twice.
    let (there, here) = (dir.path().join("there.db"), dir.path().join("here.db"));
    let into = |db: &Path, files: &[&str]| {
        let mut args = vec!["import"];
        args.extend(files);
        ok(db, &args);
    };
    into(&there, &["--experiment", "sweep", &qd16[0], &qd16[1]]);
    into(&here, &[there.to_str().unwrap()]);
    into(&there, &["--experiment", "sweep", &qd1[0], &qd1[1]]);
    into(&here, &[there.to_str().unwrap()]);
    assert_eq!(
        keys(&here),
        ["iodepth=16", "iodepth=16", "iodepth=1", "iodepth=1"]
    );
}

/// Two experiments of one file run on two devices compare cell by cell, by the words on,
/// near and far; compare says the targets differ. Two scratch devices are one kind of target.
#[test]
fn compare_says_when_the_sides_ran_on_different_targets() {
    let (_dir, db) = two_kernels();
    let set_target = |id: i64, target: &str| {
        let mut store = iolab::store::Store::open_existing(&db).unwrap();
        store
            .add_environment(
                id,
                &[iolab::store::EnvironmentEntry {
                    key: "target".into(),
                    value: target.into(),
                    severity: None,
                    advice: None,
                }],
            )
            .unwrap();
    };
    set_target(1, "/dev/sda");
    set_target(2, "/dev/nvme0n1");
    let args = ["compare", "1", "2", "--metric", "read_iops"];
    let text = ok(&db, &args);
    assert!(
        text.contains("warning: the baseline ran on /dev/sda and the candidate on /dev/nvme0n1"),
        "{text}"
    );
    set_target(1, "/dev/loop0 (scratch, 1073741824 bytes each)");
    set_target(2, "/dev/loop3 (scratch, 1073741824 bytes each)");
    let text = ok(&db, &args);
    assert!(!text.contains("ran on"), "{text}");
}

/// Each run stores its device's queue settings. Two kernels whose default schedulers differ
/// measure the schedulers too (seeds/001): `show` lists the settings, and `compare` names
/// those that held on each side and differ between them.
#[test]
fn compare_names_queue_settings_the_two_sides_ran_under_apart() {
    let (_dir, db) = two_kernels();
    let set = |experiment: i64, scheduler: &str| {
        let env = format!(
            r#"{{"queues": {{"loop{experiment}": {{"scheduler": "{scheduler}",
                "nr_requests": "64", "read_ahead_kb": "128"}}}}}}"#
        );
        rusqlite::Connection::open(&db)
            .unwrap()
            .execute(
                "UPDATE runs SET environment = ?1 WHERE experiment_id = ?2",
                rusqlite::params![env, experiment],
            )
            .unwrap();
    };
    set(1, "mq-deadline");
    set(2, "none");
    let text = ok(&db, &["compare", "1", "2", "--metric", "read_iops"]);
    let flat = text.replace("\n  ", " ");
    assert!(
        flat.contains(
            "warning: the baseline's and the candidate's device queues were set apart where \
             no selector says so (scheduler mq-deadline against none)"
        ),
        "{text}"
    );
    assert_mail_friendly(&text);
    let show = ok(&db, &["show", "1"]);
    assert!(
        show.replace("\n  ", " ").contains(
            "queue of loop1 at run start: scheduler mq-deadline, nr_requests 64, read_ahead_kb \
             128\n"
        ),
        "{show}"
    );
    assert_mail_friendly(&show);
    set(2, "mq-deadline");
    let text = ok(&db, &["compare", "1", "2", "--metric", "read_iops"]);
    assert!(!text.contains("queues were set apart"), "{text}");
}

/// One fio output imported into two experiments under the same tags would count twice on a
/// side of a comparison: compare says which runs hold the same output.
#[test]
fn compare_names_runs_of_one_side_that_hold_one_fio_output() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.db");
    let output = |name: &str, iops: &str, at: u32| fio_output(dir.path(), name, iops, at, &[]);
    let (a, b) = (
        output("a.json", "1000.0", 0),
        output("b.json", "1100.0", 10),
    );
    let (c, d) = (output("c.json", "900.0", 20), output("d.json", "950.0", 30));
    ok(
        &db,
        &[
            "import",
            "--tag",
            "variant=x",
            "--experiment",
            "one",
            &a,
            &b,
        ],
    );
    ok(
        &db,
        &["import", "--tag", "variant=x", "--experiment", "two", &a],
    );
    ok(
        &db,
        &[
            "import",
            "--tag",
            "variant=y",
            "--experiment",
            "three",
            &c,
            &d,
        ],
    );
    let args = ["compare", "variant=x", "variant=y", "--metric", "read_iops"];
    let text = ok(&db, &args);
    assert!(
        text.contains("warning: variant=x: runs 1 and 3 hold the same fio output"),
        "{text}"
    );
    assert!(!text.contains("variant=y: runs"), "{text}");
    let json: Value = serde_json::from_str(&ok(&db, &[&args[..], &["--json"]].concat())).unwrap();
    assert!(
        json["warnings"].to_string().contains("runs 1 and 3"),
        "{json}"
    );
    assert!(!text.contains("share measurements"), "{text}");
    // The same output imported under each side's tag: the sides share it.
    ok(
        &db,
        &[
            "import",
            "--tag",
            "variant=z",
            "--experiment",
            "four",
            &c,
            &b,
        ],
    );
    let text = ok(
        &db,
        &["compare", "variant=y", "variant=z", "--metric", "read_iops"],
    );
    assert!(
        text.contains("run 4 of variant=y and run 7 of variant=z hold the same fio output"),
        "{text}"
    );
}

/// One fio output imported twice would be two repetitions with no spread: a file given twice,
/// or one already in the experiment `--experiment` adds to, is refused and nothing stored.
/// Another experiment may hold it (the same output under other tags).
#[test]
fn a_fio_output_is_not_stored_twice_in_one_experiment() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.db");
    let (a, b) = (
        fixture("randread_1job_json.out"),
        fixture("randread_2jobs_jsonplus.out"),
    );
    let e = err(&db, &["import", &a, &b, &a]);
    assert!(
        e.contains("1 of 3 files cannot be imported") && e.contains(&format!("{a}: named twice")),
        "{e}"
    );
    assert!(!db.exists(), "a refused import stored something");
    // The same output under two names.
    let copy = dir.path().join("copy.json");
    std::fs::copy(&a, &copy).unwrap();
    let e = err(&db, &["import", &a, copy.to_str().unwrap()]);
    assert!(e.contains("holds the same fio output as"), "{e}");
    assert!(!db.exists(), "a refused import stored something");
    ok(&db, &["import", "--experiment", "nightly", &a]);
    let e = err(&db, &["import", "--experiment", "nightly", &b, &a]);
    assert!(
        e.contains("is stored already in experiment 1, as run 1"),
        "{e}"
    );
    let store = iolab::store::Store::open_existing(&db).unwrap();
    assert_eq!(store.runs(1).unwrap().len(), 1);
    ok(&db, &["import", "--experiment", "nightly", &b]);
    ok(&db, &["import", "--experiment", "other", &a]);
    assert_eq!(store.runs(1).unwrap().len(), 2);
    // One measurement in other bytes: rewritten compactly, behind another first line, or its
    // status-interval reports cut away to the last. It was stored again each time.
    let text = std::fs::read_to_string(&a).unwrap();
    let doc: Value = serde_json::from_str(&text[text.find('{').unwrap()..]).unwrap();
    let compact = dir.path().join("compact.json");
    std::fs::write(&compact, doc.to_string()).unwrap();
    let prefixed = dir.path().join("prefixed.json");
    std::fs::write(&prefixed, format!("fio-3.33\n{text}")).unwrap();
    for other in [&compact, &prefixed] {
        let e = err(
            &db,
            &["import", "--experiment", "nightly", other.to_str().unwrap()],
        );
        assert!(
            e.contains("is stored already in experiment 1, as run 1"),
            "{e}"
        );
    }
    let e = err(&db, &["import", &a, compact.to_str().unwrap()]);
    assert!(e.contains("hold one measurement"), "{e}");
    let interval = fixture("status_interval_json.out");
    let whole = std::fs::read_to_string(&interval).unwrap();
    let last = &whole[whole.rfind("\n{").unwrap() + 1..];
    let cut = dir.path().join("last-report.json");
    std::fs::write(&cut, last).unwrap();
    let e = err(&db, &["import", &interval, cut.to_str().unwrap()]);
    assert!(e.contains("hold one measurement"), "{e}");
    assert_eq!(store.runs(1).unwrap().len(), 2);
}

/// `--experiment` names one imported experiment: by a name no other shares, else by its id.
/// Imports without it are named after their first file, so names rarely repeat.
#[test]
fn import_adds_to_the_one_experiment_named_or_says_which_are() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.db");
    let (a, b, c) = (
        fixture("randread_1job_json.out"),
        fixture("randread_2jobs_jsonplus.out"),
        fixture("randrw_2jobs_json.out"),
    );
    let name = |args: &[&str]| -> String {
        let out: Value = serde_json::from_str(&ok(&db, args)).unwrap();
        out["experiment_name"].as_str().unwrap().to_string()
    };
    assert_eq!(
        name(&["import", "--json", &a, &b]),
        "import of randread_1job_json.out and 1 more"
    );
    assert_eq!(
        name(&["import", "--json", &b]),
        "import of randread_2jobs_jsonplus.out"
    );
    // A run experiment is never added to, by id either.
    let mut store = iolab::store::Store::open_existing(&db).unwrap();
    store
        .create_experiment(&bare_experiment("measured"))
        .unwrap();
    drop(store);
    let e = err(&db, &["import", "--experiment", "3", &c]);
    assert!(
        e.contains("experiment 3 \"measured\" is not an imported one"),
        "{e}"
    );
    // Nor by name, and no new one takes its name.
    let e = err(&db, &["import", "--experiment", "measured", &c]);
    assert!(
        e.contains("experiment 3 is named \"measured\" and is not an imported one"),
        "{e}"
    );
    ok(&db, &["import", "--experiment", "same", &a]);
    ok(&db, &["import", "--experiment", "same", &b]);
    // Imported experiments can share a name: imports of files named alike, or a merge.
    let other = dir.path().join("o.db");
    ok(&other, &["import", "--experiment", "same", &c]);
    ok(&db, &["import", other.to_str().unwrap()]);
    let e = err(&db, &["import", "--experiment", "same", &c]);
    assert!(
        e.contains("imported experiments 4, 5 are all named \"same\"")
            && e.contains("--experiment 4"),
        "{e}"
    );
    let out: Value =
        serde_json::from_str(&ok(&db, &["import", "--json", "--experiment", "5", &a])).unwrap();
    assert_eq!(out["experiment_id"], 5, "{out}");
    // A number is an id: a mistyped one makes no experiment named by it.
    let e = err(&db, &["import", "--experiment", "99", &a]);
    assert!(e.contains("no experiment 99 (ids: 1, 2, 3, 4, 5)"), "{e}");
    // A blank name would list as nothing.
    let e = err(&db, &["import", "--experiment", " ", &a]);
    assert!(e.contains("needs a name that is not blank"), "{e}");
    let store = iolab::store::Store::open_existing(&db).unwrap();
    assert_eq!(store.runs(4).unwrap().len(), 2);
    assert_eq!(store.runs(5).unwrap().len(), 2);
}

/// A file holding several fio runs' outputs, appended one after another, is a run each (the
/// last alone was kept before); one run's `--status-interval` documents stay one run.
#[test]
fn import_stores_each_fio_run_of_a_file_that_holds_several() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("i.db");
    let one = std::fs::read_to_string(fixture("randrw_2jobs_json.out")).unwrap();
    let doc: Value = serde_json::from_str(&one).unwrap();
    let stamp = doc["timestamp_ms"].as_u64().unwrap();
    // The second run began when the first ended (its timestamp 2 s after its start) and ran
    // as long, at other figures.
    let second = one
        .replace(
            &format!("\"timestamp_ms\" : {stamp}"),
            &format!("\"timestamp_ms\" : {}", stamp + 3_000),
        )
        .replace("\"iops\" : ", "\"iops\" : 2");
    let all = dir.path().join("all.json");
    std::fs::write(&all, format!("{one}{second}")).unwrap();
    let all = all.to_str().unwrap();
    let args = [
        "import",
        "--json",
        all,
        &fixture("status_interval_json.out"),
    ];
    let out: Value = serde_json::from_str(&ok(&db, &args)).unwrap();
    let runs = out["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3, "{out}");
    assert_eq!(
        (
            runs[0]["run_in_file"].clone(),
            runs[1]["run_in_file"].clone()
        ),
        (serde_json::json!(1), serde_json::json!(2)),
        "{out}"
    );
    assert!(runs[2].get("run_in_file").is_none(), "{out}");
    assert_eq!(
        out["experiment_name"], "import of all.json and 1 more",
        "{out}"
    );
    let store = iolab::store::Store::open_existing(&db).unwrap();
    let ids: Vec<i64> = runs.iter().map(|r| r["run_id"].as_i64().unwrap()).collect();
    let iops = store.metric_values(&ids[..2], "read_iops").unwrap();
    assert!(iops[0].1 != iops[1].1, "{iops:?}");
    let text = ok(&db, &["import", "--experiment", "again", all]);
    assert!(
        text.contains("all.json: the outputs of 2 fio runs, one after another: a run each"),
        "{text}"
    );
}

#[test]
fn import_stores_one_run_per_file_with_unknown_host_and_kernel_unless_tagged() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("i.db");
    let files = [
        fixture("randread_1job_json.out"),
        fixture("randread_2jobs_jsonplus.out"),
        fixture("hipri_loop_jsonplus.out"),
    ];
    let mut args = vec!["import", "--tag", "variant=old", "--json"];
    args.extend(files.iter().map(String::as_str));
    let out: Value = serde_json::from_str(&ok(&db, &args)).unwrap();
    assert_eq!(out["runs"].as_array().unwrap().len(), 3);
    assert_eq!(out["runs"][2]["status"], "failed");
    assert!(out["runs"][2]["reason"].as_str().unwrap().contains("95"));
    let store = iolab::store::Store::open_existing(&db).unwrap();
    let run = out["runs"][0]["run_id"].as_i64().unwrap();
    let tags = store.run_tags(run).unwrap();
    assert!(
        tags.contains(&("host".into(), "unknown".into())),
        "{tags:?}"
    );
    assert!(
        tags.contains(&("kernel".into(), "unknown".into())),
        "{tags:?}"
    );
    assert!(tags.contains(&("variant".into(), "old".into())), "{tags:?}");
    let iops = store.metric_values(&[run], "read_iops").unwrap();
    assert!(iops[0].1 > 1000.0, "{iops:?}");
    // No seed ordered imported runs: the headers do not show one.
    for args in [["show", "1"], ["runs", "1"]] {
        let first = ok(&db, &args).lines().next().unwrap().to_string();
        assert!(
            first.ends_with("(imported)") || first.contains("(imported), unknown"),
            "{first}"
        );
        assert!(!first.contains("seed"), "{first}");
    }

    // Tagged: a second experiment for kernel 6.6. Its outputs differ in numjobs only; the
    // first's in iodepth too (its failed hipri run): each configuration still meets its own,
    // the one-job output the one-job output, whichever experiment set the option apart.
    ok(
        &db,
        &[
            "import",
            "--tag",
            "kernel=6.6",
            "--experiment",
            "new kernel",
            &fixture("randread_1job_json.out"),
            &fixture("randread_2jobs_jsonplus.out"),
        ],
    );
    let store = iolab::store::Store::open_existing(&db).unwrap();
    assert_eq!(store.tag_values("kernel").unwrap(), ["6.6", "unknown"]);
    let text = ok(
        &db,
        &[
            "compare",
            "kernel=unknown",
            "kernel=6.6",
            "--metric",
            "read_iops",
        ],
    );
    assert!(text.contains("cells:     iodepth/numjobs"), "{text}");
    for (cell, iops) in [("16/2 ", "163,950"), ("16/default ", "137,647")] {
        let row = text.lines().find(|l| l.starts_with(cell)).unwrap_or("");
        assert!(
            row.contains(iops) && row.contains("~ (n)"),
            "{cell}: {text}"
        );
    }
    assert!(
        text.contains("iodepth=8,numjobs=default (only in\n  kernel=unknown)"),
        "{text}"
    );

    // Client mode names the host it ran on; that is used when --tag host is not given.
    let client: Value = serde_json::from_str(&ok(
        &db,
        &[
            "import",
            "--json",
            &fixture("client_randread_2jobs_json.out"),
        ],
    ))
    .unwrap();
    let run = client["runs"][0]["run_id"].as_i64().unwrap();
    let tags = store.run_tags(run).unwrap();
    assert!(
        tags.contains(&("host".into(), "127.0.0.1".into())),
        "{tags:?}"
    );

    // One bad file: nothing stored, the error names it.
    let before = store.experiments().unwrap().len();
    let bad = dir.path().join("broken.json");
    std::fs::write(&bad, "{ \"jobs\": [ {").unwrap();
    let e = err(
        &db,
        &[
            "import",
            &fixture("randread_1job_json.out"),
            bad.to_str().unwrap(),
        ],
    );
    assert!(e.contains("broken.json"), "{e}");
    assert_eq!(store.experiments().unwrap().len(), before);
}

#[test]
fn show_prints_pivot_tables_with_na_failed_and_outliers() {
    // Six repetitions: outliers are only marked in cells of 6 or more runs.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    answers_db::two_kernels(&db, 6, true);
    let text = ok(
        &db,
        &["show", "1", "--metric", "read_iops", "--metric", "sys_pct"],
    );
    assert_mail_friendly(&text);
    assert!(text.contains("rq_affinity \\ placement"), "{text}");
    assert!(text.contains("n/a[1]"), "{text}");
    assert!(text.contains("failed runs, not in the numbers"), "{text}");
    assert!(text.contains('*'), "outlier mark missing: {text}");
    insta::assert_snapshot!("show_text", text);

    let swapped = ok(
        &db,
        &["show", "1", "--metric", "read_iops", "--rows", "placement"],
    );
    assert!(swapped.contains("placement \\ rq_affinity"), "{swapped}");

    let mut json: Value = serde_json::from_str(&ok(&db, &["show", "1", "--json"])).unwrap();
    redact(&mut json);
    let cells = json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 9);
    let far = cells
        .iter()
        .find(|c| c["cell"] == "rq_affinity=0,placement=far")
        .unwrap();
    assert!(far["not_applicable"].as_str().unwrap().contains("NUMA"));
    let near = cells
        .iter()
        .find(|c| c["cell"] == "rq_affinity=0,placement=near")
        .unwrap();
    assert_eq!(
        near["metrics"]["read_iops"]["outlier_runs"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    insta::assert_json_snapshot!("show_json_cells", json["cells"]);

    // The same slow run among five: too few runs for the modified z-score to mean much.
    let (_dir5, db5) = two_kernels();
    let five: Value = serde_json::from_str(&ok(&db5, &["show", "1", "--json"])).unwrap();
    let near = five["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cell"] == "rq_affinity=0,placement=near")
        .unwrap();
    assert_eq!(near["metrics"]["read_iops"]["n"], 5, "{near}");
    assert_eq!(
        near["metrics"]["read_iops"]["outlier_runs"],
        serde_json::json!([])
    );

    // The summary's runs are objects a script reads by metric name.
    let summary: Value =
        serde_json::from_str(&ok(&db, &["show", "1", "--summary", "--json"])).unwrap();
    let on = summary["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == "rq_affinity=0,placement=on")
        .unwrap_or_else(|| panic!("{summary}"));
    let runs = on["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 6, "{on}");
    assert!(runs[0]["read_iops"].as_f64().unwrap() > 0.0, "{on}");
    // And the table's figures, mean and stddev as numbers: the IOPS column's mean is the
    // mean of the runs' read and write IOPS.
    let row = summary["summary"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["cell"] == "rq_affinity=0,placement=on")
        .unwrap_or_else(|| panic!("{summary}"));
    let iops: Vec<f64> = runs
        .iter()
        .map(|r| r["read_iops"].as_f64().unwrap() + r["write_iops"].as_f64().unwrap_or(0.0))
        .collect();
    let mean = iops.iter().sum::<f64>() / iops.len() as f64;
    assert!(
        (row["IOPS"]["mean"].as_f64().unwrap() - mean).abs() < 1e-9 * mean,
        "{row}"
    );
    assert!(row["IOPS"]["stddev"].as_f64().unwrap() > 0.0, "{row}");

    let csv = ok(&db, &["show", "1", "--csv", "--metric", "read_iops"]);
    assert_eq!(csv.lines().count(), 1 + 9, "{csv}");
    assert!(
        csv.starts_with("cell,rq_affinity,placement,metric,"),
        "{csv}"
    );
}

#[test]
fn show_errors_name_what_exists() {
    let (_dir, db) = two_kernels();
    // A name nothing stored and iolab does not list is unknown (a typo), not without values;
    // a listed one these runs lack says so.
    let e = err(&db, &["show", "1", "--metric", "read_iopz"]);
    assert!(
        e.contains("no run here stored a metric named \"read_iopz\", and iolab records none")
            && e.contains("(did you mean `read_iops`?)"),
        "{e}"
    );
    let e = err(&db, &["show", "1", "--metric", "trace_q2c_mean_us"]);
    assert!(
        e.contains("metric \"trace_q2c_mean_us\" has no values in experiment 1"),
        "{e}"
    );
    let e = err(&db, &["show", "1", "--rows", "bs"]);
    assert!(e.contains("rq_affinity") && e.contains("placement"), "{e}");
    let e = err(&db, &["show", "9"]);
    assert!(e.contains('9'), "{e}");
}

/// Case 1 compares kernels: on one machine rebooted, or, as here, on two machines, where
/// every change is also the machines' difference. compare says so above the tables, and
/// names each side's hosts in JSON; not when both sides ran on one host, nor when the
/// selectors pick hosts themselves. A side whose cells pool several machines' runs (a factor
/// level picked across both hosts' experiments) is called out too.
#[test]
fn kernels_compared_across_two_machines_are_called_out() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let mut store = iolab::store::Store::open(&db).unwrap();
    for (host, kernel, seed) in [("db7", "6.1", 1), ("db8", "6.6", 2)] {
        answers_db::add_experiment(
            &mut store,
            &answers_db::Spec {
                name: "rq_affinity x placement",
                host,
                kernel,
                variant: "stock",
                reps: 3,
                rq2_factor: 1.0,
                seed,
                rich: false,
            },
        );
    }
    drop(store);
    let args = [
        "compare",
        "kernel=6.1",
        "kernel=6.6",
        "--metric",
        "read_iops",
    ];
    let text = ok(&db, &args);
    assert_mail_friendly(&text);
    assert!(
        text.contains("warning: the baseline ran on db7 and the candidate on db8"),
        "{text}"
    );
    let json: Value = serde_json::from_str(&ok(&db, &[&args[..], &["--json"]].concat())).unwrap();
    assert_eq!(json["baseline"]["hosts"], serde_json::json!(["db7"]));
    assert_eq!(json["candidate"]["hosts"], serde_json::json!(["db8"]));
    // A script reading JSON or CSV is told too: in the document, and beside the CSV.
    let warned = |w: &str| w.contains("the baseline ran on db7 and the candidate on db8");
    assert!(
        json["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| warned(w.as_str().unwrap())),
        "{json}"
    );
    let (success, csv, stderr) = iolab(&db, &[&args[..], &["--csv"]].concat());
    assert!(success && warned(&stderr) && !warned(&csv), "{stderr}");
    let hosts = ok(
        &db,
        &["compare", "host=db7", "host=db8", "--metric", "read_iops"],
    );
    assert!(!hosts.contains("warning:"), "{hosts}");
    let pooled = ok(
        &db,
        &[
            "compare",
            "rq_affinity=1",
            "rq_affinity=2",
            "--metric",
            "read_iops",
        ],
    );
    for side in ["baseline", "candidate"] {
        assert!(
            pooled.contains(&format!(
                "warning: the {side}'s runs come from 2 hosts (db7, db8)"
            )),
            "{pooled}"
        );
    }
    let one = ok(
        &db,
        &[
            "compare",
            "rq_affinity=1,host=db7",
            "rq_affinity=2,host=db7",
            "--metric",
            "read_iops",
        ],
    );
    assert!(!one.contains("warning:"), "{one}");
    let (_dir, same) = two_kernels();
    let text = ok(&same, &args);
    assert!(!text.contains("warning:"), "{text}");
}

/// A factor level may hold a comma (`cpus_allowed = ["0", "0,1"]`): compare selects it written
/// as tables print it, in double quotes, and says how when the quotes are missing.
#[test]
fn a_level_holding_a_comma_is_selected_in_quotes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let mut store = iolab::store::Store::open(&db).unwrap();
    let id = store.create_experiment(&bare_experiment("cpus")).unwrap();
    for (level, key, iops) in [
        ("0", "cpus_allowed=0", 100.0),
        ("0,1", "cpus_allowed=\"0,1\"", 150.0),
    ] {
        for rep in 1..=3 {
            store
                .insert_run(&iolab::store::NewRun {
                    experiment_id: id,
                    cell_key: key.into(),
                    cell_levels: serde_json::json!({ "cpus_allowed": level }),
                    repetition: rep,
                    metrics: vec![("read_iops".into(), iops + f64::from(rep))],
                    ..Default::default()
                })
                .unwrap();
        }
    }
    drop(store);
    let args = [
        "compare",
        "cpus_allowed=0",
        "cpus_allowed=\"0,1\"",
        "--metric",
        "read_iops",
        "--json",
    ];
    let json: Value = serde_json::from_str(&ok(&db, &args)).unwrap();
    assert_eq!(json["candidate"]["runs_ok"], 3, "{json}");
    let e = err(&db, &["compare", "cpus_allowed=0", "cpus_allowed=0,1"]);
    assert!(
        e.contains(r#"goes in double quotes, as tables print it"#),
        "{e}"
    );
    let e = err(&db, &["compare", "cpus_allowed=0", "cpus_allowed=1"]);
    assert!(e.contains(r#"its levels: 0, "0,1""#), "{e}");
    // One factor: `--rows` of it is the plain table, a row per level.
    let shown = ok(&db, &["show", "1", "--rows", "cpus_allowed"]);
    assert!(
        shown.contains("factors: cpus_allowed (0, \"0,1\")") && shown.contains("\n0,1 "),
        "{shown}"
    );
    let e = err(
        &db,
        &["show", "1", "--rows", "cpus_allowed", "--cols", "bs"],
    );
    assert!(e.contains("needs two factors") || e.contains("bs"), "{e}");
}

/// Sides that share runs are not independent: the same runs on both sides are refused, some
/// shared runs named with a warning (and in `--json`).
#[test]
fn compare_refuses_a_group_against_itself_and_names_shared_runs() {
    let (_dir, db) = two_kernels();
    let e = err(
        &db,
        &["compare", "1", "kernel=6.1", "--metric", "read_iops"],
    );
    assert!(
        e.contains("1 and kernel=6.1 select the same 29 runs: a group compared with itself"),
        "{e}"
    );
    let args = ["compare", "1", "rq_affinity=2", "--metric", "read_iops"];
    let text = ok(&db, &args);
    assert!(
        text.contains("warning: 10 runs are on both sides (7, 8, 16, 17, 25, 26, 34, 35, 43, 44):"),
        "{text}"
    );
    let json: Value = serde_json::from_str(&ok(&db, &[&args[..], &["--json"]].concat())).unwrap();
    assert_eq!(
        json["shared_runs"],
        serde_json::json!([7, 8, 16, 17, 25, 26, 34, 35, 43, 44])
    );
    // Past ten, the ids are cut short.
    let text = ok(
        &db,
        &["compare", "1", "placement=on", "--metric", "read_iops"],
    );
    assert!(
        text.contains(
            "warning: 14 runs are on both sides (1, 4, 7, 10, 16, 19, 22, 25, 28, 31, ...):"
        ),
        "{text}"
    );
    let plain = ok(
        &db,
        &["compare", "1", "2", "--metric", "read_iops", "--json"],
    );
    assert!(!plain.contains("shared_runs"), "{plain}");
}

#[test]
fn compare_finds_the_regression_and_leaves_noise_alone() {
    let (_dir, db) = two_kernels();
    let text = ok(
        &db,
        &[
            "compare",
            "kernel=6.1",
            "kernel=6.6",
            "--metric",
            "read_iops",
        ],
    );
    assert_mail_friendly(&text);
    insta::assert_snapshot!("compare_text", text);
    let json: Value = serde_json::from_str(&ok(
        &db,
        &[
            "compare",
            "1",
            "2",
            "--metric",
            "read_iops",
            "--metric",
            "sys_pct",
            "--json",
        ],
    ))
    .unwrap();
    let cmps = json["comparisons"].as_array().unwrap();
    // 6 measurable cells (far is n/a) x 2 metrics.
    assert_eq!(cmps.len(), 12);
    for c in cmps {
        for key in ["cell", "metric", "change_pct", "ci_low_pct", "ci_high_pct"] {
            assert!(c.get(key).is_some(), "{key}");
        }
        for key in ["p_mannwhitney", "p_welch", "verdict"] {
            assert!(c.get(key).is_some(), "{key}");
        }
        for side in ["baseline", "candidate"] {
            for key in ["n", "mean", "median", "stddev"] {
                assert!(c[side].get(key).is_some(), "{side}.{key}");
            }
        }
        let regressed = c["verdict"] == "regressed";
        let rq2_iops =
            c["metric"] == "read_iops" && c["cell"].as_str().unwrap().starts_with("rq_affinity=2");
        assert_eq!(regressed, rq2_iops, "{c}");
    }
    insta::assert_json_snapshot!("compare_json_first", cmps[0]);
    let csv = ok(
        &db,
        &["compare", "1", "2", "--csv", "--metric", "read_iops"],
    );
    // 6 cells and their geomean row.
    assert_eq!(csv.lines().count(), 1 + 6 + 1, "{csv}");
    // The CI is two numbers a spreadsheet can use, those of the JSON.
    let header = crate::common::csv_fields(csv.lines().next().unwrap());
    let at = |name: &str| header.iter().position(|h| h == name).expect(name);
    let (low, high) = (at("95% CI low"), at("95% CI high"));
    let first = crate::common::csv_fields(csv.lines().nth(1).unwrap());
    assert_eq!(first[0], "rq_affinity=0,placement=on", "{csv}");
    let json_first = cmps.iter().find(|c| c["metric"] == "read_iops").unwrap();
    // (serde_json's parser may be a unit in the last place off.)
    let same = |csv: &str, key: &str| {
        let json = json_first[key].as_f64().unwrap();
        (csv.parse::<f64>().unwrap() - json).abs() <= 1e-12 * json.abs()
    };
    assert!(same(&first[low], "ci_low_pct"), "{csv}\n{json_first}");
    assert!(same(&first[high], "ci_high_pct"), "{csv}\n{json_first}");
    let geomean = csv.lines().last().unwrap();
    assert!(geomean.starts_with("geomean,read_iops,"), "{csv}");
    assert!(geomean.contains(",0/2/4,"), "{csv}");
    assert_eq!(json["across_cells"].as_array().unwrap().len(), 2, "{json}");
}

/// A change every run shows (4 runs a side, none overlapping) stays significant beside
/// metrics whose runs are all one value: those are no test, and are not in the family. Counted
/// (Mann-Whitney gives them p = 1), they turned it into `~` at 4 runs a side where 3 runs a
/// side, with Welch's t, which gives them no p, called it improved.
#[test]
fn metrics_of_one_value_throughout_do_not_weaken_a_real_change() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db_arg = db.to_str().unwrap();
    for (side, values) in [
        ("c", ["100000", "100100", "99900", "100050"]),
        ("d", ["100500", "100600", "100400", "100550"]),
    ] {
        let files: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(i, iops)| {
                let at = if side == "c" { 20 } else { 30 } + i as u32;
                fio_output(dir.path(), &format!("{side}{i}.json"), iops, at, &[])
            })
            .collect();
        let mut args = vec!["import", "--db", db_arg, "--tag"];
        let tag = format!("variant={side}");
        args.push(&tag);
        args.extend(files.iter().map(String::as_str));
        Command::cargo_bin("iolab")
            .unwrap()
            .args(&args)
            .assert()
            .success();
    }
    let json: Value = serde_json::from_str(&ok(
        &db,
        &[
            "compare",
            "variant=c",
            "variant=d",
            "--min-effect",
            "0.1",
            "--json",
        ],
    ))
    .unwrap();
    let cmps = json["comparisons"].as_array().unwrap();
    let iops = cmps.iter().find(|c| c["metric"] == "read_iops").unwrap();
    assert_eq!(iops["verdict"], "improved", "{iops}");
    // Only the IOPS vary: the latencies and the bandwidth of the fixture are one value.
    assert_eq!(json["family_size"], 1, "{json}");
    let text = ok(
        &db,
        &["compare", "variant=c", "variant=d", "--min-effect", "0.1"],
    );
    assert!(text.contains("adjusted over 1\n  comparison;"), "{text}");
    assert!(text.contains("not counted in the adjustment"), "{text}");
    assert_eq!(text.matches("\np: two-sided").count(), 1, "{text}");
    // A metric named twice is one measurement: compared once, counted once.
    let twice: Value = serde_json::from_str(&ok(
        &db,
        &[
            "compare",
            "variant=c",
            "variant=d",
            "--metric",
            "read_iops",
            "--metric",
            "read_iops",
            "--json",
        ],
    ))
    .unwrap();
    assert_eq!(twice["comparisons"].as_array().unwrap().len(), 1, "{twice}");
    assert_eq!(twice["family_size"], 1, "{twice}");
    // CSV has the same columns whatever the rows hold: with one run on a side (no interval)
    // as with intervals of a change.
    let one = fio_output(dir.path(), "e0.json", "100200", 40, &[]);
    Command::cargo_bin("iolab")
        .unwrap()
        .args(["import", "--db", db_arg, "--tag", "variant=e", &one])
        .assert()
        .success();
    let header = |b: &str| {
        let csv = ok(&db, &["compare", "variant=c", b, "--csv"]);
        csv.lines().next().unwrap().to_string()
    };
    let (two_sided, one_run) = (header("variant=d"), header("variant=e"));
    assert!(
        two_sided.contains(",95% CI low,95% CI high,95% CI of,"),
        "{two_sided}"
    );
    assert_eq!(two_sided, one_run);
}

/// A cell whose runs failed for different reasons says each reason, with its count.
#[test]
fn show_names_every_reason_runs_of_a_cell_failed_for() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db_arg = db.to_str().unwrap();
    let good = fio_output(dir.path(), "ok.json", "1000", 0, &[]);
    let eio = fio_output(
        dir.path(),
        "eio.json",
        "1000",
        10,
        &[("\"error\" : 0", "\"error\" : 5")],
    );
    let idle = fio_output(
        dir.path(),
        "idle.json",
        "0",
        20,
        &[
            ("\"io_bytes\" : 1128169472", "\"io_bytes\" : 0"),
            ("\"io_kbytes\" : 1101728", "\"io_kbytes\" : 0"),
            ("\"total_ios\" : 275432", "\"total_ios\" : 0"),
            ("\"N\" : 275432", "\"N\" : 0"),
        ],
    );
    Command::cargo_bin("iolab")
        .unwrap()
        .args(["import", "--db", db_arg, &good, &eio, &idle])
        .assert()
        .success();
    let text = ok(&db, &["show", "1"]);
    assert!(text.contains("base: 2 (1: "), "{text}");
    assert!(text.contains("; 1: "), "{text}");
}

#[test]
fn compare_takes_the_better_direction_from_the_user() {
    let (_dir, db) = two_kernels();
    let verdicts = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["compare", "1", "2", "--metric", "read_iops", "--json"];
        args.extend_from_slice(extra);
        let json: Value = serde_json::from_str(&ok(&db, &args)).unwrap();
        json["comparisons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["verdict"].as_str().unwrap().to_string())
            .collect()
    };
    let named = verdicts(&[]);
    let flipped = verdicts(&["--better", "read_iops=lower"]);
    assert!(named.iter().any(|v| v == "regressed"), "{named:?}");
    let swap = |v: &String| match v.as_str() {
        "regressed" => "improved".to_string(),
        "improved" => "regressed".to_string(),
        other => other.to_string(),
    };
    assert_eq!(flipped, named.iter().map(swap).collect::<Vec<_>>());
    let e = err(
        &db,
        &["compare", "1", "2", "--better", "read_iops=sideways"],
    );
    assert!(e.contains("expected higher, lower or none"), "{e}");
    // A direction for a metric the comparison does not show (a typo, or a --metric left
    // out) is refused, not ignored.
    let e = err(
        &db,
        &[
            "compare",
            "1",
            "2",
            "--metric",
            "read_iops",
            "--better",
            "read_ipos=lower",
        ],
    );
    assert!(
        e.contains(
            "--better read_ipos=...: the comparison shows no metric read_ipos (it shows read_iops;"
        ),
        "{e}"
    );
    // A metric with no better side is refused, and the error names the ways out.
    let e = err(&db, &["compare", "1", "2", "--metric", "dev_avg_rq_kb"]);
    assert!(e.contains("--better dev_avg_rq_kb=none"), "{e}");
    let json: Value = serde_json::from_str(&ok(
        &db,
        &[
            "compare",
            "1",
            "2",
            "--metric",
            "dev_avg_rq_kb",
            "--better",
            "dev_avg_rq_kb=none",
            "--json",
        ],
    ))
    .unwrap();
    assert!(
        json["comparisons"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["verdict"] == "~"),
        "{json}"
    );
}

/// Sleeps that appear with the regression (0 in every baseline run) are called regressed
/// from the difference of the medians; cells at 0 on both sides stay `~`.
#[test]
fn compare_calls_a_count_that_appears_from_zero_a_change() {
    let (_dir, db) = two_kernels();
    let args = [
        "compare",
        "kernel=6.1",
        "kernel=6.6",
        "--metric",
        "trace_sleeps",
        "--better",
        "trace_sleeps=lower",
    ];
    let text = ok(&db, &args);
    assert_mail_friendly(&text);
    // Cells read `RQ/PLACEMENT` (the `far` cells are not applicable here).
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(['0', '1', '2']) && l.contains('/'))
        .collect();
    assert_eq!(rows.len(), 6, "{text}");
    for line in rows {
        if line.starts_with("2/") {
            assert!(
                line.contains("from 0") && line.contains("regressed"),
                "{text}"
            );
        } else {
            // Both medians 0: no change, and not `from 0`.
            assert!(line.contains(" ~ ") && !line.contains("from 0"), "{text}");
        }
    }
    assert!(text.contains("from 0: the baseline median is 0"), "{text}");
    let json: Value = serde_json::from_str(&ok(&db, &[&args[..], &["--json"]].concat())).unwrap();
    let rows = json["comparisons"].as_array().unwrap();
    let near = rows
        .iter()
        .find(|c| c["cell"] == "rq_affinity=2,placement=near")
        .unwrap_or_else(|| panic!("{json}"));
    assert_eq!(near["difference"], 13.0, "{near}");
    assert!(near["difference_ci_low"].as_f64().unwrap() > 0.0, "{near}");
}

#[test]
fn compare_takes_factor_levels_and_matches_the_other_factors() {
    let (_dir, db) = two_kernels();
    let json: Value = serde_json::from_str(&ok(
        &db,
        &[
            "compare",
            "experiment=1,rq_affinity=0",
            "experiment=1,rq_affinity=1",
            "--metric",
            "read_iops",
            "--json",
        ],
    ))
    .unwrap();
    let cells: Vec<&str> = json["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cell"].as_str().unwrap())
        .collect();
    // rq_affinity is what is compared, so cells are placements; far is not applicable.
    assert_eq!(cells, ["placement=on", "placement=near"], "{json}");
    let e = err(&db, &["compare", "rq_affinity=7", "rq_affinity=1"]);
    assert!(e.contains("no level \"7\"") && e.contains("0, 1, 2"), "{e}");
}

#[test]
fn compare_errors_name_what_exists() {
    let (_dir, db) = two_kernels();
    let e = err(&db, &["compare", "kernel=6.1", "kernel=6.2"]);
    assert!(e.contains("6.1") && e.contains("6.6"), "{e}");
    let e = err(&db, &["compare", "kernal=6.1", "kernel=6.6"]);
    assert!(e.contains("kernel") && e.contains("variant"), "{e}");
    let e = err(&db, &["compare", "1", "2", "--metric", "read_iopz"]);
    assert!(e.contains("read_iops"), "{e}");
    let e = err(&db, &["compare", "1", "7"]);
    assert!(e.contains("experiments: 1, 2"), "{e}");
    let e = err(&db, &["compare", "kernel=6.1,variant=backport", "2"]);
    assert!(e.contains("selects no runs"), "{e}");
    let e = err(&db, &["compare", "kernel", "2"]);
    assert!(e.contains("NAME=VALUE"), "{e}");
    // What cannot be a selector, or options that contradict each other, is a usage error
    // (exit 2); a selector of what is not stored fails (exit 1): scripts tell them apart.
    let code = |args: &[&str]| {
        Command::cargo_bin("iolab")
            .unwrap()
            .env_remove("IOLAB_DB")
            .arg(args[0])
            .arg("--db")
            .arg(&db)
            .args(&args[1..])
            .output()
            .unwrap()
            .status
            .code()
    };
    for bad in ["kernel", "", "kernel=6.1,", "experiment=abc", "Kernel=6.1"] {
        assert_eq!(code(&["compare", bad, "2"]), Some(2), "{bad:?}");
    }
    assert_eq!(code(&["compare", "kernel=6.2", "2"]), Some(1));
    assert_eq!(code(&["compare", "1", "7"]), Some(1));
    assert_eq!(
        code(&["show", "1", "--rows", "placement", "--cols", "placement"]),
        Some(2)
    );
}

#[test]
fn plot_writes_each_kind_as_svg_or_png() {
    let (dir, db) = two_kernels();
    for (kind, expect) in [
        ("bars", "read_iops per rq_affinity/placement"),
        ("lines", "read_iops vs rq_affinity"),
        ("latency", "read completion latency"),
        ("heatmap", "all interrupts per CPU"),
        ("cpu", "CPU time per CPU"),
    ] {
        let out = dir.path().join(format!("{kind}.svg"));
        ok(
            &db,
            &["plot", "1", "--kind", kind, "-o", out.to_str().unwrap()],
        );
        let svg = std::fs::read_to_string(&out).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{kind}: {e}"));
        let texts: String = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .collect::<Vec<_>>()
            .join("|");
        assert!(texts.contains(expect), "{kind}: {texts}");
        if kind == "bars" {
            // A cell not applicable here is marked as `show` marks it; the title says what
            // the colours follow.
            assert!(texts.contains("0/far: n/a"), "{texts}");
            assert!(texts.contains("coloured by rq_affinity"), "{texts}");
        }
    }
    // Two kernels on one chart (case 4's stock vs backport), told apart by their tag.
    let both = dir.path().join("both.svg");
    ok(
        &db,
        &[
            "plot",
            "1",
            "--kind",
            "lines",
            "--with",
            "2",
            "-o",
            both.to_str().unwrap(),
        ],
    );
    let svg = std::fs::read_to_string(&both).unwrap();
    assert!(svg.contains("variant=stock placement=on"), "legend");
    assert!(svg.contains("variant=backport placement=near"), "legend");
    // --with is for lines; an option the kind does not read is refused, not silently ignored.
    for (option, says) in [
        (["--with", "2"], "lines"),
        (
            ["--run", "3"],
            "--run does nothing for --kind bars: it is for heatmap, cpu, irq-over-time",
        ),
    ] {
        let out = both.to_str().unwrap();
        let e = err(
            &db,
            &[&["plot", "1", "--kind", "bars", "-o", out][..], &option].concat(),
        );
        assert!(e.contains(says), "{e}");
    }

    // Per-second series: one line per run of the chosen cell, and one per CPU.
    let texts_of = |path: &Path| -> Vec<String> {
        let svg = std::fs::read_to_string(path).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text().map(|t| t.trim().to_string()))
            .collect()
    };
    let over = dir.path().join("over.svg");
    ok(
        &db,
        &[
            "plot",
            "1",
            "--kind",
            "over-time",
            "-o",
            over.to_str().unwrap(),
        ],
    );
    let texts = texts_of(&over);
    let runs = texts.iter().filter(|t| t.starts_with("run ")).count();
    assert_eq!(runs, 5, "one legend entry per run of the cell: {texts:?}");
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("read_iops per second, cell")),
        "{texts:?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.contains("seconds since the run's measured interval")),
        "{texts:?}"
    );
    let irq = dir.path().join("irq-over.svg");
    ok(
        &db,
        &[
            "plot",
            "1",
            "--kind",
            "irq-over-time",
            "-o",
            irq.to_str().unwrap(),
        ],
    );
    let texts = texts_of(&irq);
    for cpu in ["CPU 0", "CPU 1"] {
        assert!(texts.iter().any(|t| t == cpu), "{cpu}: {texts:?}");
    }
    let e = err(
        &db,
        &[
            "plot",
            "1",
            "--kind",
            "over-time",
            "--cell",
            "nope",
            "-o",
            over.to_str().unwrap(),
        ],
    );
    assert!(
        e.contains("no cell \"nope\"") && e.contains("its cells:"),
        "{e}"
    );
    // A cell that is not applicable here is said to be, not to lack a series ("stored: none").
    let e = err(
        &db,
        &[
            "plot",
            "1",
            "--kind",
            "over-time",
            "--cell",
            "rq_affinity=0,placement=far",
            "-o",
            over.to_str().unwrap(),
        ],
    );
    assert!(
        e.contains("cell rq_affinity=0,placement=far is not applicable here: no CPU on another"),
        "{e}"
    );
    let e = err(
        &db,
        &[
            "plot",
            "1",
            "--kind",
            "over-time",
            "--metric",
            "write_iops",
            "-o",
            over.to_str().unwrap(),
        ],
    );
    assert!(e.contains("stored: cpu0:irq_per_s"), "{e}");

    // Only IRQ 45, which lands on cpu0.
    let out = dir.path().join("irq45.svg");
    ok(
        &db,
        &[
            "plot",
            "1",
            "--kind",
            "heatmap",
            "--irq",
            "45",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    let e = err(
        &db,
        &[
            "plot",
            "1",
            "--kind",
            "heatmap",
            "--irq",
            "99",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert!(e.contains("45") && e.contains("LOC"), "{e}");
    // A run that never ran says so, not only that it has no series.
    let store = iolab::store::Store::open_existing(&db).unwrap();
    let na = store
        .runs(1)
        .unwrap()
        .into_iter()
        .find(|r| matches!(r.status, iolab::store::RunStatus::NotApplicable(_)))
        .unwrap()
        .id
        .to_string();
    let e = err(
        &db,
        &[
            "plot",
            "1",
            "--kind",
            "heatmap",
            "--run",
            &na,
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert!(
        e.contains(&format!(
            "run {na} has no sampled irq series: it was not applicable ("
        )),
        "{e}"
    );
    // .png is the same chart rasterised at 2x: IHDR holds twice the SVG's width and height.
    let png = dir.path().join("bars.png");
    ok(
        &db,
        &["plot", "1", "--kind", "bars", "-o", png.to_str().unwrap()],
    );
    let svg = std::fs::read_to_string(dir.path().join("bars.svg")).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let svg_px = |a: &str| {
        doc.root_element()
            .attribute(a)
            .unwrap()
            .parse::<u32>()
            .unwrap()
    };
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    assert_eq!(
        (be(16), be(20)),
        (2 * svg_px("width"), 2 * svg_px("height"))
    );
    assert!(
        bytes.len() > 10_000,
        "a chart, not a blank page: {}",
        bytes.len()
    );
    let gif = dir.path().join("bars.gif");
    let e = err(
        &db,
        &["plot", "1", "--kind", "bars", "-o", gif.to_str().unwrap()],
    );
    assert!(e.contains(".svg or .png"), "{e}");
    assert!(!gif.exists());
    let e = err(
        &db,
        &[
            "plot",
            "1",
            "--kind",
            "lines",
            "--x",
            "placement",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert!(e.contains("on, near, far"), "{e}");
}

#[test]
fn plots_of_imported_runs_say_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("i.db");
    ok(
        &db,
        &[
            "import",
            &fixture("randread_1job_json.out"),
            &fixture("write_1job_jsonplus.out"),
        ],
    );
    let out = dir.path().join("x.svg");
    let e = err(
        &db,
        &[
            "plot",
            "1",
            "--kind",
            "heatmap",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert!(e.contains("imported"), "{e}");
    // json+ bins of the write run make a latency CDF; the plain json run has none.
    ok(
        &db,
        &[
            "plot",
            "1",
            "--kind",
            "latency",
            "--metric",
            "write_iops",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    // Reads alone: no write latency, said as such (not blamed on the output format); and
    // plain json runs alone: json+ named.
    let reads = dir.path().join("reads.db");
    ok(&reads, &["import", &fixture("randread_2jobs_jsonplus.out")]);
    let latency = |db: &std::path::Path, metric: &str| {
        err(
            db,
            &[
                "plot",
                "1",
                "--kind",
                "latency",
                "--metric",
                metric,
                "-o",
                out.to_str().unwrap(),
            ],
        )
    };
    let e = latency(&reads, "write_iops");
    assert!(
        e.contains("no run did write I/O, so there is no write latency") && !e.contains("json+"),
        "{e}"
    );
    let plain = dir.path().join("plain.db");
    ok(&plain, &["import", &fixture("randread_1job_json.out")]);
    let e = latency(&plain, "read_iops");
    assert!(e.contains("--output-format=json+"), "{e}");
    // One run, no factor: one bar, titled for what it is (no CI is drawn).
    let one = dir.path().join("one.db");
    ok(&one, &["import", &fixture("randread_1job_json.out")]);
    let bars = dir.path().join("bars.svg");
    ok(
        &one,
        &["plot", "1", "--kind", "bars", "-o", bars.to_str().unwrap()],
    );
    let svg = std::fs::read_to_string(&bars).unwrap();
    assert!(
        svg.contains("read_iops of all runs: mean (no CI: one run per cell)"),
        "{svg}"
    );
}

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|b| {
        std::process::Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// A metric asked for that is neither work done nor a cost (the mean request size) is
/// compared for change alone on the page; it refused the whole page, with advice (`--better`)
/// that `report` does not take.
#[test]
fn report_compares_an_undirected_metric_for_change_alone() {
    let (dir, db) = two_kernels();
    let html_path = dir.path().join("report.html");
    let summary: Value = serde_json::from_str(&ok(
        &db,
        &[
            "report",
            "1",
            "-o",
            html_path.to_str().unwrap(),
            "--metric",
            "dev_avg_rq_kb",
            "--json",
        ],
    ))
    .unwrap();
    assert!(summary["comparisons"].as_u64().unwrap() > 0, "{summary}");
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.contains("dev_avg_rq_kb"), "the metric is on the page");
    assert!(
        !html.contains(">improved") && !html.contains(">regressed"),
        "an undirected metric got a verdict"
    );
    // A cell that does not exist is an error naming the cells, not two charts left out.
    let e = err(
        &db,
        &[
            "report",
            "1",
            "-o",
            html_path.to_str().unwrap(),
            "--cell",
            "nosuch",
        ],
    );
    assert!(e.contains("has no cell \"nosuch\"; its cells:"), "{e}");
}

#[test]
fn report_is_one_offline_page_that_chromium_renders() {
    let (dir, db) = two_kernels();
    let html_path = dir.path().join("report.html");
    let summary = report_json(&db, &html_path);
    assert!(summary["comparisons"].as_u64().unwrap() > 0, "{summary}");
    assert_eq!(
        summary["missing_figures"].as_array().unwrap().len(),
        0,
        "{summary}"
    );
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    // One geomean row per compared pair of levels and metric, with the cells' verdicts.
    for pair in [
        "rq_affinity: 0 -&gt; 1",
        "rq_affinity: 0 -&gt; 2",
        "placement: on -&gt; near",
    ] {
        assert!(
            html.contains(&format!("{pair}: geomean")),
            "{pair} geomean missing"
        );
    }
    assert!(html.contains("t interval on the log ratios across cells"));
    for forbidden in ["<script", "<link", "@import", "url(", "src="] {
        assert!(!html.contains(forbidden), "{forbidden} in the page");
    }
    // The only URL is SVG's namespace, which is a name, not a fetch.
    let urls = html.matches("http").count();
    assert_eq!(
        urls,
        html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
    );

    let Some(browser) = chromium() else {
        panic!("chromium is not installed; scripts/deps installs it");
    };
    let open = |page: &std::path::Path, extra: &[&str]| {
        std::process::Command::new(browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--window-size=1200,4000",
            ])
            .args(extra)
            .arg(format!("file://{}", page.display()))
            .output()
            .unwrap()
    };
    let run = |extra: &[&str]| open(&html_path, extra);
    let out = run(&["--dump-dom"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8(out.stdout).unwrap();
    for id in [
        "environment",
        "preflight",
        "results",
        "comparisons",
        "plots",
    ] {
        assert!(
            dom.contains(&format!("id=\"{id}\"")),
            "section {id} not rendered"
        );
    }
    assert!(dom.contains("powersave"), "preflight finding missing");
    assert!(
        dom.contains("rq_affinity \\ placement"),
        "pivot table missing"
    );
    assert!(
        dom.contains("class=\"num na\"") || dom.contains("class=\"na\""),
        "n/a cell missing"
    );
    assert_eq!(
        dom.matches("<svg").count(),
        summary["figures"].as_array().unwrap().len(),
        "every chart is inline SVG"
    );
    let shot = dir.path().join("report.png");
    let out = run(&[&format!("--screenshot={}", shot.display())]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    // A blank 1200x4000 page compresses to a few KB; tables and charts take far more.
    assert!(
        png.len() > 100_000,
        "screenshot is only {} bytes",
        png.len()
    );
    if let Ok(keep) = std::env::var("IOLAB_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }

    // A long line in a preformatted block (a sampling basis across fio servers runs to 200
    // characters) wraps within the page instead of widening it past the window: the page,
    // with such a line added, is measured in an iframe of a wrapper page (srcdoc: same
    // origin) 1000 pixels wide.
    let long = format!("<pre>{}</pre>", "the figures rest on ".repeat(30));
    let page = html.replacen("<body>", &format!("<body>{long}"), 1);
    let attr = page.replace('&', "&amp;").replace('"', "&quot;");
    let wrapper = dir.path().join("wrapper.html");
    std::fs::write(
        &wrapper,
        format!(
            "<html><body><iframe id=\"f\" width=\"1000\" height=\"600\" srcdoc=\"{attr}\">\
             </iframe><script>f.onload = () => {{ const d = f.contentDocument.documentElement; \
             document.title = 'overflow ' + (d.scrollWidth - d.clientWidth); }};</script>\
             </body></html>"
        ),
    )
    .unwrap();
    let out = open(&wrapper, &["--virtual-time-budget=10000", "--dump-dom"]);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("<title>overflow 0</title>"),
        "the page is wider than its window: {}",
        dom.lines()
            .find(|l| l.contains("<title>"))
            .unwrap_or("no title")
    );
}

/// The whole path on real data: `iolab run` (real fio on a scratch loop device, the real
/// sampler) stores runs that `show`, `compare`, every `plot` kind and `report` read — so the
/// keys the run loop writes and the ones the answers read cannot drift apart unnoticed.
#[test]
fn real_runs_from_iolab_run_feed_show_compare_plot_and_report() {
    if !iolab::sys::is_root() {
        crate::common::skip("needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("real.db");
    let file = dir.path().join("e.toml");
    std::fs::write(
        &file,
        "name = \"answers e2e\"\nseed = 3\nrepetitions = 2\n\
         [target]\ndevice = \"default\"\nsize = \"64M\"\n\
         [workload]\nrw = \"randread\"\nbs = \"4k\"\nioengine = \"libaio\"\niodepth = 4\n\
         direct = 1\nruntime = \"1s\"\ntime_based = true\n\
         [factors]\nscheduler = [\"none\", \"mq-deadline\"]\n",
    )
    .unwrap();
    for variant in ["a", "b"] {
        let out = Command::cargo_bin("iolab")
            .unwrap()
            .args(["run", "--tag", &format!("variant={variant}"), "--db"])
            .arg(&db)
            .arg(&file)
            .env("IOLAB_STATE_DIR", dir.path().join("state"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let json: Value = serde_json::from_str(&ok(&db, &["show", "1", "--json"])).unwrap();
    let cells = json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{json}");
    for c in cells {
        assert_eq!(c["metrics"]["read_iops"]["n"], 2, "{c}");
        assert!(
            c["metrics"]["read_iops"]["mean"].as_f64().unwrap() > 100.0,
            "{c}"
        );
        assert!(
            c["metrics"]["sys_pct"]["n"] == 2,
            "sampler metrics missing: {c}"
        );
    }
    let cmp: Value = serde_json::from_str(&ok(
        &db,
        &[
            "compare",
            "variant=a",
            "variant=b",
            "--metric",
            "read_iops",
            "--json",
        ],
    ))
    .unwrap();
    assert_eq!(cmp["comparisons"].as_array().unwrap().len(), 2, "{cmp}");
    for kind in ["bars", "latency", "heatmap", "cpu"] {
        let out = dir.path().join(format!("{kind}.svg"));
        ok(
            &db,
            &["plot", "1", "--kind", kind, "-o", out.to_str().unwrap()],
        );
        roxmltree::Document::parse(&std::fs::read_to_string(&out).unwrap()).unwrap();
    }
    // The sampler runs longer than fio: the heatmap marks the interval the figures come from.
    let heat = std::fs::read_to_string(dir.path().join("heatmap.svg")).unwrap();
    assert!(
        heat.contains("between the black lines: the measured interval"),
        "no measured interval on the heatmap"
    );
    let cpu = std::fs::read_to_string(dir.path().join("cpu.svg")).unwrap();
    assert!(cpu.contains("mean over the measured interval"), "{cpu}");
    let html = dir.path().join("r.html");
    let summary = report_json(&db, &html);
    // No numeric factor here, so no lines chart; everything else is drawn from real data.
    assert_eq!(
        summary["missing_figures"],
        serde_json::json!([]),
        "{summary}"
    );
}

/// Six cells (bs x iodepth), 3 runs each, the candidate `ratios[i]` times the baseline in
/// cell i; runs at `spread` times the cell's level (the middle one 1, so each side's median is
/// the level).
fn three_run_experiments(db: &Path, ratios: &[f64; 6], spread: [f64; 3]) {
    let file = "name = \"bs x iodepth\"\nrepetitions = 3\n\n[workload]\nrw = \"randread\"\n\n\
                [factors]\nbs = [\"4k\", \"64k\"]\niodepth = [1, 8, 32]\n";
    let mut store = iolab::store::Store::open(db).unwrap();
    for (kernel, candidate) in [("6.1", false), ("6.6", true)] {
        let id = store
            .create_experiment(&iolab::store::NewExperiment {
                name: "bs x iodepth".into(),
                file_text: file.into(),
                seed: 1,
                planned_order: serde_json::json!([]),
                host: "lab1".into(),
                kernel: kernel.into(),
                part_of: None,
            })
            .unwrap();
        let mut t = 1_795_300_000.0;
        for (i, (bs, depth)) in ["4k", "64k"]
            .iter()
            .flat_map(|bs| [1, 8, 32].map(|d| (bs, d)))
            .enumerate()
        {
            let level = 10_000.0 * (i + 1) as f64 * if candidate { ratios[i] } else { 1.0 };
            for (rep, spread) in spread.iter().enumerate() {
                store
                    .insert_run(&iolab::store::NewRun {
                        experiment_id: id,
                        cell_key: format!("bs={bs},iodepth={depth}"),
                        cell_levels: serde_json::json!({"bs": bs, "iodepth": depth}),
                        repetition: rep as u32 + 1,
                        start_unix: t,
                        end_unix: t + 2.0,
                        metrics: vec![("read_iops".into(), level * spread)],
                        ..Default::default()
                    })
                    .unwrap();
                t += 3.0;
            }
        }
        store.set_experiment_status(id, "done").unwrap();
    }
}

/// Runs that do not vary on either side leave Welch's t without a p: `~`, and the legend
/// says why (none of the other reasons holds).
#[test]
fn compare_says_why_constant_sides_are_not_decided() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("constant.db");
    three_run_experiments(&db, &[0.8; 6], [1.0; 3]);
    let text = ok(&db, &["compare", "1", "2", "--metric", "read_iops"]);
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(text.contains("-20.0%"), "{text}");
    assert!(
        flat.contains("p -: neither side varies, so Welch's t has no p and cannot decide"),
        "{text}"
    );
    // No row has a p: no legend explains one (it read as if other tables' were unadjusted).
    assert!(!flat.contains("p: two-sided"), "{text}");
}

#[test]
fn compare_decides_at_three_runs_and_sums_up_across_cells() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("three.db");
    let ratios = [0.80, 0.85, 0.90, 0.85, 0.80, 0.90];
    three_run_experiments(&db, &ratios, [0.99, 1.0, 1.01]);
    let args = ["compare", "1", "2", "--metric", "read_iops"];
    let text = ok(&db, &args);
    assert_mail_friendly(&text);
    let json: Value = serde_json::from_str(&ok(&db, &[&args[..], &["--json"]].concat())).unwrap();
    let cmps = json["comparisons"].as_array().unwrap();
    assert_eq!(cmps.len(), 6, "{json}");
    for (c, r) in cmps.iter().zip(ratios) {
        // 3 vs 3: the exact Mann-Whitney test cannot go below 0.1; Welch's t decides.
        assert_eq!(c["test"], "welch", "{c}");
        assert_eq!(c["verdict"], "regressed", "{c}");
        assert!(c["p_adjusted"].as_f64().unwrap() < 0.05, "{c}");
        let change = c["change_pct"].as_f64().unwrap();
        assert!((change - 100.0 * (r - 1.0)).abs() < 1e-9, "{c}");
    }
    // By hand: geomean = (0.8 * 0.85 * 0.9)^(1/3) (each ratio twice); the CI is the t
    // interval of the six log ratios, t(0.975, 5) = 2.570581835636314.
    let logs: Vec<f64> = ratios.iter().map(|r: &f64| r.ln()).collect();
    let mean = logs.iter().sum::<f64>() / 6.0;
    let sd = (logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / 5.0).sqrt();
    let half = 2.570_581_835_636_314 * sd / 6f64.sqrt();
    let geomean = (0.8f64 * 0.85 * 0.9).powf(1.0 / 3.0);
    assert!((mean.exp() - geomean).abs() < 1e-12);
    let across = &json["across_cells"][0];
    assert_eq!(across["metric"], "read_iops");
    let pct = |x: f64| 100.0 * (x - 1.0);
    let close = |key: &str, want: f64| {
        let got = across[key].as_f64().unwrap();
        assert!(
            (got - want).abs() < 1e-9,
            "{key}: {got} vs {want}: {across}"
        );
    };
    close("change_pct", pct(geomean));
    close("ci_low_pct", pct((mean - half).exp()));
    close("ci_high_pct", pct((mean + half).exp()));
    // Baseline levels 10k..60k: geomean (6!)^(1/6) * 10k.
    close("geomean_baseline", 10_000.0 * 720f64.powf(1.0 / 6.0));
    assert_eq!(
        (
            &across["improved"],
            &across["regressed"],
            &across["unchanged"]
        ),
        (&Value::from(0), &Value::from(6), &Value::from(0))
    );
    assert_eq!(across["ci_method"], iolab::stats::across::CI_METHOD);
    let geomean_line = text.lines().find(|l| l.starts_with("geomean")).unwrap();
    assert!(
        geomean_line.contains(&format!("{:+.1}%", pct(geomean))),
        "{text}"
    );
    assert!(geomean_line.contains("0/6/0"), "{text}");
    insta::assert_snapshot!("compare_three_runs_text", text);
    let csv = ok(&db, &[&args[..], &["--csv"]].concat());
    assert!(
        csv.lines().nth(1).unwrap().contains(",regressed,Welch,"),
        "{csv}"
    );
    assert!(
        csv.lines()
            .last()
            .unwrap()
            .starts_with("geomean,read_iops,"),
        "{csv}"
    );
}

/// A run across hosts keeps usr/sys/interrupts per host (`HOST:sys_pct`, `local:sys_pct`):
/// `show` and `compare` say where, and each named metric answers.
#[test]
fn show_and_compare_say_where_a_hosts_runs_keep_their_system_figures() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hosts.db");
    for (kernel, scale) in [("6.1", 1.0), ("6.6", 1.1)] {
        let runs: Vec<Vec<(String, f64)>> = (1..=3u32)
            .map(|rep| {
                let f = scale * (1.0 + rep as f64 / 100.0);
                vec![
                    ("read_iops".into(), 20_000.0 * f),
                    ("lab1:sys_pct".into(), 12.0 * f),
                    ("lab2:sys_pct".into(), 14.0 * f),
                    ("lab1:usr_pct".into(), 3.0 * f),
                    ("local:sys_pct".into(), 1.0 * f),
                ]
            })
            .collect();
        hosts_experiment(&db, "lab1+lab2", kernel, &runs);
    }
    let hint = "usr_pct, sys_pct and irq_per_s are per host here, as HOST:NAME with HOST one of \
                lab1, lab2, local";
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let shown = flat(&ok(&db, &["show", "1"]));
    assert!(shown.contains(hint), "{shown}");
    assert!(shown.contains("e.g. `--metric lab1:sys_pct`"), "{shown}");
    let compared = flat(&ok(&db, &["compare", "1", "2"]));
    assert!(compared.contains(hint), "{compared}");
    let page = dir.path().join("report.html");
    ok(&db, &["report", "1", "-o", page.to_str().unwrap()]);
    let page = std::fs::read_to_string(&page).unwrap();
    assert!(page.contains(hint), "{page}");
    // The metric named in the hint answers; asked for, the hint has nothing to add.
    let named = ok(&db, &["show", "1", "--metric", "lab2:sys_pct"]);
    assert!(named.contains("lab2:sys_pct [%]"), "{named}");
    assert!(!named.contains("per host here"), "{named}");

    // Runs on fio servers iolab does not control carry this machine's figures only: the hint
    // names them and offers no `--host`, which would find no runs of single hosts.
    let id = hosts_experiment(
        &db,
        "10.0.0.1,8765+10.0.0.2,8765",
        "unknown",
        &[vec![
            ("read_iops".into(), 20_000.0),
            ("local:sys_pct".into(), 1.0),
        ]],
    );
    let servers = flat(&ok(&db, &["show", &id.to_string()]));
    assert!(
        servers.contains(
            "usr_pct, sys_pct and irq_per_s were sampled on this machine only, which drove the \
             fio servers: `--metric local:sys_pct`"
        ),
        "{servers}"
    );
    assert!(!servers.contains("--host"), "{servers}");
}

/// A finished experiment of one cell (`bs=4k`) on `host`, one run per entry of `runs` with
/// those metrics; its id.
fn hosts_experiment(db: &Path, host: &str, kernel: &str, runs: &[Vec<(String, f64)>]) -> i64 {
    let mut store = iolab::store::Store::open(db).unwrap();
    let id = store
        .create_experiment(&iolab::store::NewExperiment {
            name: "hosts".into(),
            file_text: "[factors]\nbs = [\"4k\"]\n".into(),
            seed: 1,
            planned_order: serde_json::json!([]),
            host: host.into(),
            kernel: kernel.into(),
            part_of: None,
        })
        .unwrap();
    for (rep, metrics) in (1..).zip(runs) {
        store
            .insert_run(&iolab::store::NewRun {
                experiment_id: id,
                cell_key: "bs=4k".into(),
                cell_levels: serde_json::json!({"bs": "4k"}),
                repetition: rep,
                start_unix: 1_795_300_000.0 + 10.0 * f64::from(rep),
                end_unix: 1_795_300_005.0 + 10.0 * f64::from(rep),
                metrics: metrics.clone(),
                ..Default::default()
            })
            .unwrap();
    }
    store.set_experiment_status(id, "done").unwrap();
    id
}

/// A chart or report is written as a file of this user's, never through a link another user
/// left where it goes (in /tmp, root would otherwise overwrite the file the link names).
#[test]
fn a_report_or_chart_is_not_written_through_a_link() {
    let (dir, db) = two_kernels();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep\n").unwrap();
    for (name, args) in [
        ("page.html", vec!["report", "1"]),
        ("chart.svg", vec!["plot", "1", "--kind", "bars"]),
    ] {
        let link = dir.path().join(name);
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let out = [&args[..], &["-o", link.to_str().unwrap()]].concat();
        let stderr = err(&db, &out);
        assert!(
            stderr.contains(&format!(
                "{} is a symbolic link: iolab does not write through one",
                link.display()
            )),
            "{stderr}"
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
        std::fs::remove_file(&link).unwrap();
        ok(&db, &out);
        assert!(std::fs::metadata(&link).unwrap().len() > 1000);
    }
}

/// Three experiments whose five runs each print one of fio's p99 buckets, every run alike:
/// 1,056.768 us, the next bucket up (1,073.152) and the one after (1,089.536).
fn db_of_p99_buckets(dir: &Path) -> PathBuf {
    use iolab::store::{NewExperiment, NewRun, Store};
    let db = dir.join("buckets.db");
    let mut store = Store::open(&db).unwrap();
    for (i, p99) in [1056.768, 1073.152, 1089.536].into_iter().enumerate() {
        let id = store
            .create_experiment(&NewExperiment {
                name: format!("p99 bucket {i}"),
                file_text: "name = \"p\"\n[workload]\nrw = \"randread\"\n".into(),
                seed: 1,
                planned_order: json!([]),
                host: "db7".into(),
                kernel: "6.12".into(),
                part_of: None,
            })
            .unwrap();
        for rep in 1..=5 {
            let at = f64::from(100 * i as u32 + 10 * rep);
            store
                .insert_run(&NewRun {
                    experiment_id: id,
                    cell_key: String::new(),
                    cell_levels: json!({}),
                    repetition: rep,
                    start_unix: 1_795_300_000.0 + at,
                    end_unix: 1_795_300_004.0 + at,
                    metrics: vec![
                        ("read_iops".into(), 1000.0 + f64::from(rep)),
                        ("read_clat_p99_us".into(), p99),
                    ],
                    ..Default::default()
                })
                .unwrap();
        }
        store.set_experiment_status(id, "done").unwrap();
    }
    db
}

/// fio prints a percentile as the middle of its bucket. Runs that all print one bucket have
/// no spread, yet their true p99 lies anywhere in it: `show` draws the CI over the bucket,
/// and `compare` calls runs one bucket apart `~` (their true change may be nothing) and
/// runs two buckets apart a regression.
#[test]
fn percentiles_from_fios_buckets_are_as_precise_as_the_buckets() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_of_p99_buckets(dir.path());
    let shown: Value = serde_json::from_str(&ok(
        &db,
        &["show", "1", "--metric", "read_clat_p99_us", "--json"],
    ))
    .unwrap();
    let text = shown.to_string();
    assert!(
        text.contains(r#""ci_mean":{"high":1064.96,"low":1048.576}"#),
        "{text}"
    );
    let shown = ok(&db, &["show", "1", "--metric", "read_clat_p99_us"]);
    assert!(
        shown.contains("CI with the latency histogram's buckets in base:"),
        "{shown}"
    );
    let compare = |b: &str, c: &str| -> Value {
        let out = ok(
            &db,
            &["compare", b, c, "--metric", "read_clat_p99_us", "--json"],
        );
        let v: Value = serde_json::from_str(&out).unwrap();
        v["comparisons"][0].clone()
    };
    let next = compare("1", "2");
    assert_eq!(next["verdict"], "~", "{next}");
    assert_eq!(next["ci_low_pct"], 0.0, "{next}");
    assert_eq!(next["ci_widened_to_buckets"], true, "{next}");
    let after = compare("1", "3");
    assert_eq!(after["verdict"], "regressed", "{after}");
    let text = ok(&db, &["compare", "1", "2", "--metric", "read_clat_p99_us"]);
    assert!(
        text.contains("95% CI with the latency histogram's buckets in base:"),
        "{text}"
    );
    // IOPS are values as measured: no bucket in their CI.
    let iops = ok(&db, &["show", "1", "--metric", "read_iops"]);
    assert!(!iops.contains("buckets"), "{iops}");
}

/// `plot --kind lines --by F` draws one line per level of F: with a third factor varying,
/// each line joined that factor's cells at one x into a zig-zag. Refused, naming it; without
/// `--by`, one line per combination.
#[test]
fn lines_by_a_factor_refuse_to_join_the_cells_of_another() {
    use iolab::store::NewRun;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("three.db");
    let (mut store, id) = store_with_experiment(
        &db,
        "[factors]\nnr_requests = [32, 256]\nscheduler = [\"none\", \"bfq\"]\n\
         read_ahead_kb = [0, 512]\n",
    );
    for rep in 1..=2 {
        for nr in [32, 256] {
            for sched in ["none", "bfq"] {
                for ra in [0, 512] {
                    let key = format!("nr_requests={nr},scheduler={sched},read_ahead_kb={ra}");
                    store
                        .insert_run(&NewRun {
                            experiment_id: id,
                            cell_key: key,
                            cell_levels: json!({"nr_requests": nr.to_string(),
                                "scheduler": sched, "read_ahead_kb": ra.to_string()}),
                            repetition: rep,
                            metrics: vec![(
                                "read_iops".into(),
                                1000.0 + f64::from(nr + ra) + f64::from(rep),
                            )],
                            ..Default::default()
                        })
                        .unwrap();
                }
            }
        }
    }
    drop(store);
    let svg = dir.path().join("l.svg");
    let plot = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["plot", "1", "--kind", "lines", "--x", "nr_requests"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--metric", "read_iops", "-o", svg.to_str().unwrap()]);
        args.into_iter().map(String::from).collect()
    };
    let args = plot(&["--by", "scheduler"]);
    let e = err(&db, &args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        e.contains(
            "--by scheduler draws one line per level, but experiment 1 also varies \
             read_ahead_kb (0, 512)"
        ),
        "{e}"
    );
    assert!(!svg.exists());
    let args = plot(&[]);
    ok(&db, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let drawn = std::fs::read_to_string(&svg).unwrap();
    for line in [
        "scheduler=none read_ahead_kb=0",
        "scheduler=bfq read_ahead_kb=512",
    ] {
        assert!(drawn.contains(line), "{line}");
    }
}

/// An experiment none of whose runs succeeded: every view says so with why, rather than
/// that some series is missing (`plot --kind heatmap` said "no sampled irq series (imported
/// fio outputs carry none)"), and the report lists the reasons.
#[test]
fn an_experiment_whose_runs_all_failed_says_so_and_why_everywhere() {
    use iolab::store::{NewRun, RunStatus};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("failed.db");
    let (mut store, id) = store_with_experiment(&db, "[factors]\nread_ahead_kb = [5, 6]\n");
    for (ra, why) in [
        (
            "5",
            "wrote \"5\" to read_ahead_kb, but the kernel keeps \"4\"",
        ),
        (
            "6",
            "wrote \"6\" to read_ahead_kb, but the kernel keeps \"4\"",
        ),
        (
            "6",
            "wrote \"6\" to read_ahead_kb, but the kernel keeps \"4\"",
        ),
    ] {
        store
            .insert_run(&NewRun {
                experiment_id: id,
                cell_key: format!("read_ahead_kb={ra}"),
                cell_levels: json!({ "read_ahead_kb": ra }),
                repetition: 1,
                status: RunStatus::Failed(why.into()),
                ..Default::default()
            })
            .unwrap();
    }
    drop(store);
    let svg = dir.path().join("p.svg");
    for kind in ["heatmap", "over-time", "latency", "bars", "cpu"] {
        let e = err(
            &db,
            &["plot", "1", "--kind", kind, "-o", svg.to_str().unwrap()],
        );
        assert!(
            e.contains(
                "experiment 1 has no successful runs (3 failed, 0 not applicable); most often: \
                 wrote \"6\" to read_ahead_kb, but the kernel keeps \"4\" (2 runs)"
            ),
            "{kind}: {e}"
        );
    }
    let e = err(&db, &["show", "1"]);
    assert!(e.contains("most often: wrote \"6\""), "{e}");
    let page = dir.path().join("r.html");
    ok(&db, &["report", "1", "-o", page.to_str().unwrap()]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<li>wrote &quot;6&quot; to read_ahead_kb, but the kernel keeps &quot;4&quot; (2 runs)</li>"),
        "{html}"
    );
}

/// A new database at `db` holding one experiment of `file_text`, for runs a test adds.
fn store_with_experiment(db: &Path, file_text: &str) -> (iolab::store::Store, i64) {
    let mut store = iolab::store::Store::open(db).unwrap();
    let id = store
        .create_experiment(&iolab::store::NewExperiment {
            name: "t".into(),
            file_text: file_text.into(),
            seed: 1,
            planned_order: json!([]),
            host: "h".into(),
            kernel: "k".into(),
            part_of: None,
        })
        .unwrap();
    (store, id)
}

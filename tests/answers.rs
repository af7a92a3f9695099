//! `import`, `show`, `compare`, `plot` and `report` end to end through the binary, on a
//! database built in the test (fio fixtures imported, and a realistic 3x3 experiment stored
//! through the store API). Text and JSON outputs are snapshot-tested.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

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

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fio")
        .join(name)
        .display()
        .to_string()
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

    // Tagged: a second experiment for kernel 6.6; then both compare as one cell each.
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
    assert!(text.contains("all"), "{text}");
    assert!(text.contains("~ (n)"), "{text}");

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
    let (_dir, db) = two_kernels();
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
        .find(|c| c["cell"] == "rq_affinity=0 placement=far")
        .unwrap();
    assert!(far["not_applicable"].as_str().unwrap().contains("NUMA"));
    let near = cells
        .iter()
        .find(|c| c["cell"] == "rq_affinity=0 placement=near")
        .unwrap();
    assert_eq!(
        near["metrics"]["read_iops"]["outlier_runs"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    insta::assert_json_snapshot!("show_json_cells", json["cells"]);

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
    let e = err(&db, &["show", "1", "--metric", "read_iopz"]);
    assert!(e.contains("read_iopz") && e.contains("read_iops"), "{e}");
    let e = err(&db, &["show", "1", "--rows", "bs"]);
    assert!(e.contains("rq_affinity") && e.contains("placement"), "{e}");
    let e = err(&db, &["show", "9"]);
    assert!(e.contains('9'), "{e}");
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
    assert_eq!(csv.lines().count(), 1 + 6, "{csv}");
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
}

//! The results database: creation and migration, per-run commits, selection by tag, metric
//! queries at scale, and `iolab runs` over a real file.

use assert_cmd::Command;
use iolab::store::{
    EnvironmentEntry, NewExperiment, NewRun, RunStatus, SampleSeries, Store, StoreError,
};
use serde_json::json;

fn experiment() -> NewExperiment {
    NewExperiment {
        name: "rq-affinity".into(),
        file_text: "[target]\ndevice = \"loop0\"\n".into(),
        seed: 42,
        planned_order: json!([["rq_affinity=1", 0], ["rq_affinity=2", 0]]),
        host: "box1".into(),
        kernel: "6.1.0".into(),
        part_of: None,
    }
}

fn run(exp: i64, cell: &str, rep: u32, iops: f64) -> NewRun {
    NewRun {
        experiment_id: exp,
        cell_key: cell.into(),
        cell_levels: json!({ "rq_affinity": cell }),
        repetition: rep,
        start_unix: 1000.0,
        end_unix: 1010.5,
        fio_json: Some("{\"jobs\":[]}".into()),
        fio_command: Some("fio --output-format=json+ job.fio".into()),
        job_file: Some("[job]\nrw=randread\n".into()),
        metrics: vec![("read_iops".into(), iops), ("usr_pct".into(), 3.5)],
        ..Default::default()
    }
}

#[test]
fn creates_migrates_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let db = Store::open(&path).unwrap();
    assert_eq!(
        db.schema_version().unwrap(),
        iolab::store::MIGRATIONS.len() as i64
    );
    drop(db);
    let db = Store::open(&path).unwrap();
    assert!(db.experiments().unwrap().is_empty());
}

#[test]
fn refuses_a_newer_schema_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 999).unwrap();
        conn.pragma_update(None, "application_id", 0x696f_6c62)
            .unwrap();
    }
    let err = Store::open(&path).unwrap_err();
    assert!(
        matches!(err, StoreError::TooNew { found: 999, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("future.db"), "{err}");
}

/// A results file handed over with a view or a trigger in it (iolab makes none) is refused,
/// not read: a view over an endless recursive query in place of a table hung `show`.
#[test]
fn a_database_with_views_or_triggers_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (name, sql) in [
        (
            "view.db",
            "DROP TABLE run_tags; CREATE VIEW run_tags AS WITH RECURSIVE n(i) AS \
             (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT i AS run_id, 'k' AS key, \
             'v' AS value FROM n;",
        ),
        (
            "trigger.db",
            "CREATE TRIGGER t AFTER INSERT ON runs BEGIN DELETE FROM runs; END;",
        ),
    ] {
        let path = dir.path().join(name);
        drop(Store::open(&path).unwrap());
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(sql).unwrap();
        drop(conn);
        let err = Store::open_existing(&path).unwrap_err();
        assert!(
            err.to_string().contains("not an iolab results database"),
            "{name}: {err}"
        );
    }
}

#[test]
fn another_programs_database_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("places.sqlite");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE bookmarks (url TEXT);")
            .unwrap();
    }
    let err = Store::open(&path).unwrap_err();
    assert!(
        err.to_string().contains("not an iolab results database"),
        "{err}"
    );
    let conn = rusqlite::Connection::open(&path).unwrap();
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 1, "no iolab tables were added");
}

#[test]
fn a_file_that_is_not_a_database_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.db");
    std::fs::write(&path, b"this is not sqlite, just some text long enough to be a header......................................................").unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(err.to_string().contains("notes.db"), "{err}");
}

#[test]
fn stores_runs_with_automatic_and_user_tags() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = Store::open(dir.path().join("r.db")).unwrap();
    let e = db.create_experiment(&experiment()).unwrap();
    let mut a = run(e, "rq_affinity=1", 0, 100.0);
    a.tags = vec![("variant".into(), "backports".into())];
    let a = db.insert_run(&a).unwrap();
    let mut b = run(e, "rq_affinity=2", 0, 200.0);
    b.tags = vec![
        ("variant".into(), "stock".into()),
        ("host".into(), "guest7".into()),
    ];
    let b = db.insert_run(&b).unwrap();
    let mut na = run(e, "hipri=1", 0, 0.0);
    na.status = RunStatus::NotApplicable("loop devices cannot poll (fio error 95)".into());
    na.metrics.clear();
    let na = db.insert_run(&na).unwrap();
    let mut warm = run(e, "rq_affinity=1", 0, 1.0);
    warm.warmup = true;
    db.insert_run(&warm).unwrap();

    assert_eq!(db.select_runs(&[]).unwrap(), vec![a, b, na]);
    assert_eq!(
        db.select_runs(&[("kernel", "6.1.0")]).unwrap(),
        vec![a, b, na]
    );
    assert_eq!(db.select_runs(&[("host", "box1")]).unwrap(), vec![a, na]);
    assert_eq!(
        db.select_runs(&[("host", "guest7"), ("variant", "stock")])
            .unwrap(),
        vec![b]
    );
    assert!(db.select_runs(&[("variant", "nope")]).unwrap().is_empty());
    assert_eq!(
        db.tag_values("variant").unwrap(),
        vec!["backports", "stock"]
    );
    assert_eq!(db.tag_values("host").unwrap(), vec!["box1", "guest7"]);
    assert_eq!(
        db.metric_values(&[a, b, na], "read_iops").unwrap(),
        vec![(a, 100.0), (b, 200.0)]
    );
    assert_eq!(db.metric_names().unwrap(), vec!["read_iops", "usr_pct"]);

    let runs = db.runs(e).unwrap();
    assert_eq!(runs.len(), 4);
    assert_eq!(
        runs[2].status,
        RunStatus::NotApplicable("loop devices cannot poll (fio error 95)".into())
    );
    assert!(runs[3].warmup);
    assert_eq!(
        runs[0].cell_levels,
        json!({ "rq_affinity": "rq_affinity=1" })
    );
    let texts = db.run_texts(a).unwrap().unwrap();
    assert_eq!(texts.job_file.as_deref(), Some("[job]\nrw=randread\n"));

    let exps = db.experiments().unwrap();
    assert_eq!((exps[0].runs_ok, exps[0].runs_not_applicable), (2, 1));
    db.set_experiment_status(e, "done").unwrap();
    assert_eq!(db.experiment(e).unwrap().status, "done");
    let (text, order) = db.experiment_texts(e).unwrap();
    assert!(text.contains("loop0"));
    assert_eq!(order, experiment().planned_order);
}

#[test]
fn a_run_for_an_unknown_experiment_is_refused_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = Store::open(dir.path().join("r.db")).unwrap();
    let err = db.insert_run(&run(77, "x", 0, 1.0)).unwrap_err();
    assert!(
        matches!(err, StoreError::NoExperiment { id: 77, .. }),
        "{err}"
    );
    assert!(db.select_runs(&[]).unwrap().is_empty());
}

#[test]
fn each_run_is_visible_to_another_reader_as_soon_as_it_is_inserted() {
    // What "a crash loses at most the run in progress" needs: the insert is committed on return.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let mut writer = Store::open(&path).unwrap();
    let e = writer.create_experiment(&experiment()).unwrap();
    let id = writer.insert_run(&run(e, "c", 0, 5.0)).unwrap();
    let reader = Store::open(&path).unwrap();
    assert_eq!(
        reader.metric_values(&[id], "read_iops").unwrap(),
        vec![(id, 5.0)]
    );
    std::mem::forget(writer); // no orderly close: the data must already be on disk
    let again = Store::open(&path).unwrap();
    assert_eq!(again.select_runs(&[]).unwrap(), vec![id]);
}

#[test]
fn samples_and_environment_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = Store::open(dir.path().join("r.db")).unwrap();
    let e = db.create_experiment(&experiment()).unwrap();
    let mut r = run(e, "c", 0, 1.0);
    let series = SampleSeries {
        kind: "irq".into(),
        key: "45/cpu1".into(),
        t_offsets: vec![1.0, 2.0, 3.001],
        values: vec![1200.0, 1180.5, 0.0],
    };
    r.samples = vec![series.clone()];
    let id = db.insert_run(&r).unwrap();
    assert_eq!(db.samples(id).unwrap(), vec![series]);
    let env = vec![EnvironmentEntry {
        key: "cpufreq.governor".into(),
        value: "powersave".into(),
        severity: Some("warn".into()),
        advice: Some("set performance".into()),
    }];
    db.add_environment(e, &env).unwrap();
    assert_eq!(db.environment(e).unwrap(), env);
    db.add_metrics(id, &[("read_iops".into(), 9.0), ("nan".into(), f64::NAN)])
        .unwrap();
    assert_eq!(
        db.metric_values(&[id], "read_iops").unwrap(),
        vec![(id, 9.0)]
    );
    assert!(db.metric_values(&[id], "nan").unwrap().is_empty());
    db.add_tags(id, &[("variant".into(), "x".into())]).unwrap();
    assert!(db
        .run_tags(id)
        .unwrap()
        .contains(&("variant".into(), "x".into())));
}

#[test]
fn selecting_a_metric_over_ten_thousand_runs_is_fast() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = Store::open(dir.path().join("big.db")).unwrap();
    let e = db.create_experiment(&experiment()).unwrap();
    for i in 0..10_000u32 {
        let mut r = run(e, if i % 2 == 0 { "a" } else { "b" }, i / 2, i as f64);
        r.fio_json = None;
        r.tags = vec![(
            "variant".into(),
            if i % 2 == 0 { "stock" } else { "backports" }.into(),
        )];
        for m in ["read_bw_mbs", "read_clat_p99_us", "sys_pct", "irq_per_s"] {
            r.metrics.push((m.into(), i as f64 * 0.5));
        }
        db.insert_run(&r).unwrap();
    }
    let t0 = std::time::Instant::now();
    let ids = db
        .select_runs(&[("variant", "stock"), ("kernel", "6.1.0")])
        .unwrap();
    let values = db.metric_values(&ids, "read_iops").unwrap();
    let all = db.select_runs(&[]).unwrap();
    let p99 = db.metric_values(&all, "read_clat_p99_us").unwrap();
    let names = db.metric_names().unwrap();
    let elapsed = t0.elapsed();
    assert_eq!(ids.len(), 5_000);
    assert_eq!(values.len(), 5_000);
    assert_eq!(values[1].1, 2.0);
    assert_eq!(p99.len(), 10_000);
    assert_eq!(names.len(), 6);
    // Debug build on a shared 2-core machine: still far below the "few seconds" budget.
    assert!(elapsed.as_secs_f64() < 1.5, "queries took {elapsed:?}");
}

#[test]
fn runs_command_lists_experiments_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    {
        let mut db = Store::open(&path).unwrap();
        let e = db.create_experiment(&experiment()).unwrap();
        db.insert_run(&run(e, "rq_affinity=1", 0, 1.0)).unwrap();
        let mut na = run(e, "hipri=1", 0, 1.0);
        na.status = RunStatus::NotApplicable("cannot poll".into());
        db.insert_run(&na).unwrap();
    }
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["runs", "--db"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("rq-affinity") && text.contains("box1 / 6.1.0"),
        "{text}"
    );

    let out = Command::cargo_bin("iolab")
        .unwrap()
        .env("IOLAB_DB", &path)
        .args(["runs", "1", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["runs"].as_array().unwrap().len(), 2);
    assert_eq!(doc["runs"][1]["status"], "not_applicable");
    assert_eq!(doc["runs"][1]["reason"], "cannot poll");
    assert_eq!(doc["experiment"]["runs_ok"], 1);

    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["runs", "9", "--db"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no experiment with id 9"));
}

#[test]
fn runs_command_on_a_missing_database_says_so_without_creating_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("none.db");
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["runs", "--db"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("none.db") && err.contains("--db"), "{err}");
    assert!(!path.exists());
}

#[test]
fn sampled_series_cost_about_sixteen_bytes_per_reading() {
    // The size argument in store/schema.rs, measured: 40 runs x 100 series x 60 one-second
    // readings = 240,000 readings.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("samples.db");
    let mut db = Store::open(&path).unwrap();
    let e = db.create_experiment(&experiment()).unwrap();
    let t: Vec<f64> = (1..=60).map(|s| s as f64 + 0.0003 * s as f64).collect();
    for r in 0..40u32 {
        let mut run = run(e, "c", r, 1.0);
        run.samples = (0..100)
            .map(|k| SampleSeries {
                kind: "irq".into(),
                key: format!("{}/cpu{}", 24 + k / 2, k % 2),
                t_offsets: t.clone(),
                values: t.iter().map(|x| x * 1000.0 + k as f64).collect(),
            })
            .collect();
        db.insert_run(&run).unwrap();
    }
    drop(db); // last connection: checkpoints the WAL into the main file
    let bytes = std::fs::metadata(&path).unwrap().len() as f64;
    let per_reading = bytes / 240_000.0;
    eprintln!("{per_reading:.1} bytes per reading");
    assert!(per_reading < 20.0, "{per_reading:.1} bytes per reading");
    let db = Store::open(&path).unwrap();
    let back = db.samples(db.select_runs(&[]).unwrap()[7]).unwrap();
    assert_eq!(back.len(), 100);
    assert_eq!(back.iter().map(|s| s.values.len()).sum::<usize>(), 6000);
}

fn fio_fixture() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/fio/client_randread_2jobs_json.out"
    )
    .to_string()
}

/// The names in `dir`, sorted.
fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn two_processes_creating_one_new_database_at_once_both_succeed() {
    let fixture = fio_fixture();
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("new.db");
        let start = || {
            crate::common::iolab()
                .args(["import", "--db", db.to_str().unwrap(), &fixture])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (start(), start());
        for child in [a, b] {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let store = Store::open_existing(&db).unwrap();
        assert_eq!(store.experiments().unwrap().len(), 2, "round {round}");
        drop(store);
        assert_eq!(names_in(dir.path()), ["new.db"], "round {round}");
    }
}

/// A command kept waiting by another process's lock says so, then goes on when it is free.
#[test]
fn a_command_waiting_for_a_locked_database_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    drop(Store::open(&db).unwrap());
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let child = crate::common::iolab()
        .args(["import", "--db", db.to_str().unwrap(), &fio_fixture()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    conn.execute_batch("COMMIT").unwrap();
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert_eq!(
        said.matches("waiting for the results database, locked by another process")
            .count(),
        1,
        "{said}"
    );
}

#[test]
fn a_finished_run_waits_out_a_database_locked_for_longer_than_the_old_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let mut db = Store::open(&path).unwrap();
    let e = db.create_experiment(&experiment()).unwrap();
    // Another program holds the write lock for 7 s (the old busy timeout was 5 s).
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let holder = {
        let path = path.clone();
        std::thread::spawn(move || {
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
            locked_tx.send(()).unwrap();
            std::thread::sleep(std::time::Duration::from_secs(7));
            conn.execute_batch("COMMIT").unwrap();
        })
    };
    locked_rx.recv().unwrap();
    let started = std::time::Instant::now();
    let id = db.insert_run(&run(e, "1", 0, 100.0)).unwrap();
    assert!(started.elapsed().as_secs_f64() > 6.0);
    holder.join().unwrap();
    assert_eq!(db.runs(e).unwrap().len(), 1);
    assert!(id > 0);
}

#[test]
fn commands_leave_nothing_beside_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db_arg = db.to_str().unwrap();
    let fixture = fio_fixture();
    for args in [
        vec!["import", "--db", db_arg, &fixture],
        vec!["runs", "--db", db_arg],
        vec!["runs", "1", "--db", db_arg],
        vec!["show", "1", "--db", db_arg],
    ] {
        let r = crate::common::run_within(
            crate::common::iolab().args(&args),
            std::time::Duration::from_secs(30),
        );
        assert_eq!(r.code, Some(0), "{args:?}: {}", r.stderr);
        assert_eq!(names_in(dir.path()), ["r.db"], "after {args:?}");
    }
}

/// A tmpfs mounted on a temporary directory, remounted read-only on request, unmounted on
/// drop (also when the test fails).
struct Mount {
    dir: tempfile::TempDir,
}

impl Mount {
    fn new() -> Option<Mount> {
        let dir = tempfile::tempdir().ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=16m", "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Mount { dir })
    }

    fn read_only(&self) {
        let ok = std::process::Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(self.dir.path())
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
    }
}

#[test]
fn a_database_on_read_only_media_is_readable_and_writes_say_why_not() {
    if !crate::common::root_or_skip() {
        return;
    }
    let Some(mount) = Mount::new() else {
        crate::common::skip("cannot mount a tmpfs");
        return;
    };
    let db = mount.dir.path().join("archive.db");
    let db_arg = db.to_str().unwrap();
    let fixture = fio_fixture();
    let run = |args: &[&str]| {
        crate::common::run_within(
            crate::common::iolab().args(args),
            std::time::Duration::from_secs(30),
        )
    };
    // Twice: two experiments to compare.
    for _ in 0..2 {
        assert_eq!(run(&["import", "--db", db_arg, &fixture]).code, Some(0));
    }
    mount.read_only();
    for args in [
        vec!["runs", "--db", db_arg],
        vec!["runs", "1", "--db", db_arg],
        vec!["show", "1", "--db", db_arg],
        vec!["compare", "experiment=1", "experiment=2", "--db", db_arg],
    ] {
        let r = run(&args);
        assert_eq!(r.code, Some(0), "{args:?}: {}", r.stderr);
        assert!(!r.stdout.is_empty(), "{args:?}");
    }
    assert_eq!(names_in(mount.dir.path()), ["archive.db"]);
    let r = run(&["import", "--db", db_arg, &fixture]);
    assert_eq!(r.code, Some(1));
    assert!(
        r.stderr.contains(db_arg)
            && r.stderr.contains("cannot be written")
            && r.stderr.contains("is read-only"),
        "{}",
        r.stderr
    );
}

/// A hosts experiment's parts are each as their own runs went: the aggregate failed (a host
/// died before any run of all hosts completed) while the others' own runs all measured.
#[test]
fn each_hosts_part_is_marked_by_its_own_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path().join("h.db")).unwrap();
    let aggregate = store.create_experiment(&experiment()).unwrap();
    let part = |store: &mut Store, host: &str| {
        store
            .create_experiment(&NewExperiment {
                host: host.into(),
                part_of: Some(aggregate),
                ..experiment()
            })
            .unwrap()
    };
    let (lived, died, idle) = (
        part(&mut store, "h1"),
        part(&mut store, "h2"),
        part(&mut store, "h3"),
    );
    let failed = |exp| NewRun {
        status: RunStatus::Failed("unreachable".into()),
        ..run(exp, "1", 0, 0.0)
    };
    store.insert_run(&failed(aggregate)).unwrap();
    store.insert_run(&run(lived, "1", 0, 50.0)).unwrap();
    store.insert_run(&failed(died)).unwrap();
    store
        .insert_run(&NewRun {
            warmup: true,
            ..run(died, "1", 0, 9.0)
        })
        .unwrap();
    store.set_experiment_status(aggregate, "failed").unwrap();
    store.set_part_statuses_by_runs(aggregate).unwrap();
    let status = |id| {
        store
            .experiments()
            .unwrap()
            .into_iter()
            .find(|e| e.id == id)
            .unwrap()
            .status
    };
    assert_eq!(status(aggregate), "failed");
    assert_eq!(status(lived), "done");
    // Its warm-up measured, but no run that counts.
    assert_eq!(status(died), "failed");
    // Nothing tried, nothing failed.
    assert_eq!(status(idle), "done");
    // `--host` on a host's own part: it already is that host's runs, and the message says so
    // (it said only a run on controlled hosts stores each host's own).
    drop(store);
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["show", &lived.to_string(), "--host", "h1", "--db"])
        .arg(dir.path().join("h.db"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "experiment {lived} is already host h1's own runs (part of experiment {aggregate}); \
             drop --host"
        )),
        "{err}"
    );
}

/// Case 1 on two machines: each ran the experiment into its own database; `import` of one
/// into the other copies every experiment with everything kept about its runs, under new ids,
/// adds `--tag`s, points traces at where they are, skips what is already there, and `compare`
/// then sets the two kernels side by side.
#[test]
fn importing_another_database_merges_its_experiments_whole_and_once() {
    let there_dir = tempfile::tempdir().unwrap();
    let here_dir = tempfile::tempdir().unwrap();
    let there = there_dir.path().join("box2.db");
    let here = here_dir.path().join("box1.db");
    let mut src = crate::answers_db::two_kernels(&there, 3, true);
    // A hosts experiment with a part, and a traced run (its trace named relative to box2.db).
    let parent = src.create_experiment(&experiment()).unwrap();
    let part = src
        .create_experiment(&NewExperiment {
            host: "guest1".into(),
            part_of: Some(parent),
            ..experiment()
        })
        .unwrap();
    src.insert_run(&NewRun {
        trace: Some("traces/run-1".into()),
        ..run(parent, "1", 0, 100.0)
    })
    .unwrap();
    src.insert_run(&run(part, "1", 0, 50.0)).unwrap();
    src.set_experiment_status(parent, "done").unwrap();
    // One still running there: left out, since a copy now would stay incomplete.
    let running = src
        .create_experiment(&NewExperiment {
            name: "still going".into(),
            ..experiment()
        })
        .unwrap();
    src.insert_run(&run(running, "1", 0, 10.0)).unwrap();
    drop(src);
    // This file already holds an experiment, so every id moves.
    let mut dest = Store::open(&here).unwrap();
    dest.create_experiment(&experiment()).unwrap();
    drop(dest);

    let import = |extra: &[&str]| {
        let out = crate::common::stdout_of(
            crate::common::iolab()
                .args(["import", "--db", here.to_str().unwrap(), "--json"])
                .args(extra)
                .arg(&there),
        );
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    let first = import(&["--tag", "site=lab2"]);
    let merged = first["sources"][0]["merged"].as_array().unwrap().clone();
    let left_out = &first["sources"][0]["skipped"];
    assert_eq!(left_out.as_array().unwrap().len(), 1, "{first}");
    assert_eq!(left_out[0]["from"], running, "{first}");
    assert!(
        left_out[0]["why"]
            .as_str()
            .unwrap()
            .starts_with("still running there"),
        "{first}"
    );
    let ids: Vec<(i64, i64)> = merged
        .iter()
        .map(|m| (m["from"].as_i64().unwrap(), m["to"].as_i64().unwrap()))
        .collect();
    assert_eq!(ids, [(1, 2), (2, 3), (3, 4)], "{first}");
    assert_eq!(merged[2]["parts"], json!([5]), "{first}");

    let (src, dest) = (
        Store::open_existing(&there).unwrap(),
        Store::open_existing(&here).unwrap(),
    );
    for (from, to) in ids.iter().copied().chain([(part, 5)]) {
        // The same experiment but for its ids (a part's parent is the merged one) and the
        // tag the merge added to its runs.
        let without_ids = |e: iolab::store::Experiment| {
            let mut v = serde_json::to_value(e).unwrap();
            let parent = v.as_object_mut().unwrap().remove("part_of");
            v["id"] = json!(null);
            if let Some(tags) = v.get_mut("tags").and_then(|t| t.as_array_mut()) {
                tags.retain(|t| t != "site=lab2");
                if tags.is_empty() {
                    v.as_object_mut().unwrap().remove("tags");
                }
            }
            (v, parent.is_some())
        };
        let (a, b) = (src.experiment(from).unwrap(), dest.experiment(to).unwrap());
        assert_eq!(b.part_of, (from == part).then_some(4));
        assert_eq!(without_ids(a), without_ids(b));
        assert_eq!(
            src.environment(from).unwrap(),
            dest.environment(to).unwrap()
        );
        let (ra, rb) = (src.runs(from).unwrap(), dest.runs(to).unwrap());
        assert_eq!(ra.len(), rb.len());
        let basis = |s: &Store, id| {
            let b = s.run_bases(id).unwrap();
            b.into_iter()
                .map(|b| (b.sample_window, b.checks, b.environment))
                .collect::<Vec<_>>()
        };
        assert_eq!(basis(&src, from), basis(&dest, to));
        for (x, y) in ra.iter().zip(&rb) {
            assert_eq!(
                (&x.cell_key, &x.cell_levels, x.repetition, &x.status),
                (&y.cell_key, &y.cell_levels, y.repetition, &y.status)
            );
            assert_eq!(
                src.run_metrics(x.id).unwrap(),
                dest.run_metrics(y.id).unwrap()
            );
            assert_eq!(src.samples(x.id).unwrap(), dest.samples(y.id).unwrap());
            assert_eq!(src.series(x.id).unwrap(), dest.series(y.id).unwrap());
            let (ta, tb) = (src.run_texts(x.id).unwrap(), dest.run_texts(y.id).unwrap());
            let (ta, tb) = (ta.unwrap(), tb.unwrap());
            assert_eq!(
                (&ta.fio_json, &ta.fio_command, &ta.job_file),
                (&tb.fio_json, &tb.fio_command, &tb.job_file)
            );
            // Every tag kept, and the one given added.
            let mut want = src.run_tags(x.id).unwrap();
            want.push(("site".into(), "lab2".into()));
            want.sort();
            let mut got = dest.run_tags(y.id).unwrap();
            got.sort();
            assert_eq!(got, want);
            // The trace is where it was: under box2.db's directory.
            if let Some(t) = ta.trace {
                let at = iolab::store::trace_location(&here, tb.trace.as_deref().unwrap());
                assert_eq!(at, iolab::store::trace_location(&there, &t));
                assert!(at.starts_with(there_dir.path().canonicalize().unwrap()));
            }
        }
    }
    drop((src, dest));

    let experiments_here = || {
        Store::open_existing(&here)
            .unwrap()
            .experiments()
            .unwrap()
            .len()
    };
    // The same file again: nothing added, each experiment named as already there.
    let again = import(&[]);
    assert_eq!(again["sources"][0]["merged"], json!([]), "{again}");
    assert_eq!(
        again["sources"][0]["skipped"],
        json!([
            {"from": 1, "here": 2, "name": "rq_affinity x placement",
             "why": "already here as experiment 2"},
            {"from": 2, "here": 3, "name": "rq_affinity x placement",
             "why": "already here as experiment 3"},
            {"from": 3, "here": 4, "name": "rq-affinity", "why": "already here as experiment 4"},
            left_out[0],
        ]),
        "{again}"
    );
    assert_eq!(experiments_here(), 5);

    // A run added there since (as `import --experiment` adds one) follows, alone, into the
    // copy here; the next merge finds nothing new again.
    let runs_here = |id| Store::open_existing(&here).unwrap().runs(id).unwrap().len();
    let before = runs_here(4);
    let mut src = Store::open_existing(&there).unwrap();
    src.insert_run(&NewRun {
        start_unix: 2000.0,
        end_unix: 2010.0,
        ..run(3, "1", 2, 120.0)
    })
    .unwrap();
    drop(src);
    let grown = import(&[]);
    assert_eq!(
        grown["sources"][0]["grown"],
        json!([{"from": 3, "to": 4, "name": "rq-affinity", "runs": 1}]),
        "{grown}"
    );
    assert_eq!(
        grown["sources"][0]["skipped"].as_array().unwrap().len(),
        3,
        "{grown}"
    );
    assert_eq!(runs_here(4), before + 1);
    assert_eq!(experiments_here(), 5);
    let text = crate::common::stdout_of(
        crate::common::iolab()
            .args(["import", "--db", here.to_str().unwrap()])
            .arg(&there),
    );
    assert!(text.contains(", 4 left out"), "{text}");
    assert_eq!(runs_here(4), before + 1);

    // Refused, with what to do: fio outputs beside a database, --experiment, the file
    // itself, and an SQLite file that is not iolab's.
    let foreign = here_dir.path().join("other.sqlite");
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE t (x);")
        .unwrap();
    let json_out = here_dir.path().join("fio.json");
    std::fs::write(&json_out, "{}").unwrap();
    for (args, says) in [
        (
            vec![there.as_path(), json_out.as_path()],
            "import fio outputs and databases apart",
        ),
        (vec![here.as_path()], "the database the runs would go into"),
        (
            vec![foreign.as_path()],
            "not an iolab results database (import reads fio outputs and iolab databases)",
        ),
    ] {
        let out = Command::cargo_bin("iolab")
            .unwrap()
            .args(["import", "--db", here.to_str().unwrap()])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{says}: {err}");
    }
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args([
            "import",
            "--db",
            here.to_str().unwrap(),
            "--experiment",
            "x",
        ])
        .arg(&there)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("keep their own names"));
    assert_eq!(experiments_here(), 5);

    // The kernels compare here as they did there.
    let compare = |db: &std::path::Path| {
        crate::common::stdout_of(
            crate::common::iolab()
                .args([
                    "compare",
                    "kernel=6.1",
                    "kernel=6.6",
                    "--metric",
                    "read_iops",
                ])
                .args(["--csv", "--db", db.to_str().unwrap()]),
        )
    };
    assert_eq!(compare(&here), compare(&there));
}

/// A tag named like a factor of other experiments (an import's `--tag rq_affinity=huh`) hid
/// that factor from every selector: `rq_affinity=1` was read as the tag, which no run had.
/// A value the tag has selects by the tag; any other, the factor's level.
#[test]
fn a_tag_named_like_a_factor_leaves_the_factors_levels_selectable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let mut db = Store::open(&path).unwrap();
    let e = db.create_experiment(&experiment()).unwrap();
    for rep in 0..3 {
        for (cell, iops) in [("1", 100.0), ("2", 200.0)] {
            db.insert_run(&run(e, cell, rep, iops + f64::from(rep)))
                .unwrap();
        }
    }
    let other = db.create_experiment(&experiment()).unwrap();
    let mut tagged = run(other, "x", 0, 5.0);
    tagged.cell_levels = json!({});
    tagged.tags = vec![("rq_affinity".into(), "huh".into())];
    db.insert_run(&tagged).unwrap();
    drop(db);
    let compare = |a: &str, b: &str| {
        Command::cargo_bin("iolab")
            .unwrap()
            .args(["compare", "--db", path.to_str().unwrap(), a, b])
            .args(["--metric", "read_iops", "--json"])
            .output()
            .unwrap()
    };
    let out = compare("rq_affinity=1", "rq_affinity=2");
    assert!(out.status.success(), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(json.to_string().contains("read_iops"), "{json}");
    let out = compare("rq_affinity=1", "rq_affinity=7");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("factor rq_affinity has no level \"7\""),
        "{err}"
    );
    // A tag whose value is also a level (`--tag rq_affinity=1` on an import): the selector
    // takes both, the tagged runs and those at that level; it read the tag alone, and no
    // cell of the import's matched the other side's.
    let mut db = Store::open(&path).unwrap();
    let imported = db.create_experiment(&experiment()).unwrap();
    let mut tagged = run(imported, "y", 0, 7.0);
    tagged.cell_levels = json!({});
    tagged.tags = vec![("rq_affinity".into(), "1".into())];
    db.insert_run(&tagged).unwrap();
    drop(db);
    let out = compare("rq_affinity=1", "rq_affinity=2");
    assert!(out.status.success(), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["baseline"]["runs"], 4, "{json}");
}

/// Cells are keyed without the factors either selector fixes: where only one side fixes one,
/// each cell of the other pools that factor's levels, and the comparison says so.
#[test]
fn a_factor_fixed_on_one_side_only_is_said_to_be_pooled_on_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let mut db = Store::open(&path).unwrap();
    for _ in 0..2 {
        let e = db.create_experiment(&experiment()).unwrap();
        for rep in 0..3 {
            for sched in ["none", "mq-deadline"] {
                for rq in ["1", "2"] {
                    let mut r = run(e, rq, rep, 100.0 + f64::from(rep));
                    r.cell_key = format!("scheduler={sched},rq_affinity={rq}");
                    r.cell_levels = json!({ "scheduler": sched, "rq_affinity": rq });
                    db.insert_run(&r).unwrap();
                }
            }
        }
    }
    drop(db);
    let warnings = |a: &str, b: &str| {
        let out = Command::cargo_bin("iolab")
            .unwrap()
            .args(["compare", "--db", path.to_str().unwrap(), a, b])
            .args(["--metric", "read_iops", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        json["warnings"].to_string()
    };
    let w = warnings("2", "experiment=1,scheduler=none");
    assert!(
        w.contains("each cell of experiment 2 pools the levels of scheduler (mq-deadline, none)"),
        "{w}"
    );
    let w = warnings("experiment=2,scheduler=none", "experiment=1,scheduler=none");
    assert!(!w.contains("pools"), "{w}");
}

/// A tag reused across experiments of different workloads pools them into one cell: the
/// comparison names the cell and what its jobs differ in. The same job on another device
/// is the same workload, and an import's fio output counts by its job options.
#[test]
fn a_cell_pooling_different_fio_jobs_is_said_to() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let mut db = Store::open(&path).unwrap();
    let job = |device: &str, rw: &str| format!("[rr]\nfilename={device}\nrw={rw}\nbs=4k\n");
    // (kernel, job file, fio output): the last stands for an import (no job file).
    let experiments = [
        ("6.1.0", Some(job("/dev/loop0", "randread")), None),
        ("6.1.0", Some(job("/dev/loop1", "read")), None),
        ("6.2.0", Some(job("/dev/loop2", "randread")), None),
        (
            "6.2.0",
            None,
            Some(
                r#"{"jobs": [{"job options": {"name": "seq", "filename": "/dev/sdb", "rw": "randread", "blocksize": "4k"}}]}"#,
            ),
        ),
    ];
    // Two more of 6.1.0 at a level the other side lacks: a cell not compared, said as such,
    // not warned of.
    let more = [
        ("6.1.0", Some(job("/dev/loop0", "randwrite")), None),
        ("6.1.0", Some(job("/dev/loop0", "write")), None),
    ];
    for (i, (kernel, job_file, output)) in experiments.into_iter().chain(more).enumerate() {
        let mut e = experiment();
        e.kernel = kernel.into();
        let e = db.create_experiment(&e).unwrap();
        for rep in 0..3 {
            let mut r = run(e, "1", rep, 100.0 + f64::from(rep));
            r.cell_key = "base".into();
            r.cell_levels = json!({});
            if i >= 4 {
                r.cell_key = "bs=64k".into();
                r.cell_levels = json!({ "bs": "64k" });
            }
            r.job_file = job_file.clone();
            r.fio_json = output.map(str::to_string);
            db.insert_run(&r).unwrap();
        }
    }
    drop(db);
    let compare = |a: &str, b: &str| compare_read_iops(&path, a, b);
    let text = compare("kernel=6.1.0", "kernel=6.2.0");
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(
            "warning: kernel=6.1.0: cell bs=- pools runs of different fio jobs (they differ in \
             rw: randread, read)"
        ),
        "{text}"
    );
    assert!(
        flat.contains("not compared (no matching cell): bs=64k"),
        "{text}"
    );
    // The other side pools one workload on two devices, one of them imported.
    assert_eq!(flat.matches("different fio jobs").count(), 1, "{text}");
    let text = compare("experiment=1", "kernel=6.2.0");
    assert!(!text.contains("different fio jobs"), "{text}");
}

/// What `iolab ARGS --db DB` prints, having succeeded.
fn stdout_ok(db: &std::path::Path, args: &[&str]) -> String {
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(args)
        .args(["--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// An experiment stopped early: `show`, its JSON and the report say what the plan had that
/// was never run, so a level none of whose runs came is not silently missing from the tables.
#[test]
fn a_cell_never_run_is_named_by_show_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let mut db = Store::open(&path).unwrap();
    let mut e = experiment();
    let planned =
        |cell: usize, round: u32| json!({ "cell": cell, "round": round, "warmup": false });
    e.planned_order = json!({
        "cells": ["rq_affinity=1", "rq_affinity=2"],
        "runs": [
            { "cell": 0, "round": 1, "warmup": true },
            planned(0, 1), planned(1, 1), planned(0, 2), planned(1, 2),
        ],
        "adaptive": false,
    });
    let id = db.create_experiment(&e).unwrap();
    let mut stored = run(id, "1", 1, 100.0);
    stored.cell_key = "rq_affinity=1".into();
    db.insert_run(&stored).unwrap();
    db.set_experiment_status(id, "interrupted").unwrap();
    drop(db);
    let iolab = |args: &[&str]| stdout_ok(&path, args);
    let text = iolab(&["show", "1"]);
    let said = "stopped early: 1 of 4 planned runs stored; never run, so in no table: \
                rq_affinity=2";
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains(said), "{text}");
    let json: serde_json::Value = serde_json::from_str(&iolab(&["show", "1", "--json"])).unwrap();
    assert_eq!(
        json["not_run"],
        json!({ "runs_planned": 4, "runs_stored": 1, "cells": ["rq_affinity=2"] })
    );
    let page = dir.path().join("r.html");
    iolab(&["report", "1", "-o", page.to_str().unwrap()]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<th>not run</th><td>stopped early: 1 of 4"),
        "report"
    );
}

/// The tags runs carry are shown where the experiments are (`runs`, `runs N`, `show`), and
/// in their JSON: what `compare` selects them by. Host and kernel, shown as such, are not
/// repeated.
#[test]
fn run_tags_are_shown_with_their_experiment() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let mut db = Store::open(&path).unwrap();
    let id = db.create_experiment(&experiment()).unwrap();
    for (rep, variant) in [(1, "stock"), (2, "backport")] {
        let mut r = run(id, "1", rep, 100.0);
        r.tags = vec![("variant".into(), variant.into())];
        db.insert_run(&r).unwrap();
    }
    db.create_experiment(&experiment()).unwrap();
    drop(db);
    let iolab = |args: &[&str]| stdout_ok(&path, args);
    let listed = iolab(&["runs"]);
    let first = listed.lines().nth(1).unwrap();
    assert!(
        first.ends_with("box1 / 6.1.0  tags: variant=backport, variant=stock"),
        "{listed}"
    );
    assert!(!listed.lines().nth(2).unwrap().contains("tags"), "{listed}");
    assert!(iolab(&["runs", "1"])
        .lines()
        .next()
        .unwrap()
        .ends_with("tags: variant=backport, variant=stock"));
    let json: serde_json::Value = serde_json::from_str(&iolab(&["runs", "--json"])).unwrap();
    let experiments = json
        .as_array()
        .or(json["experiments"].as_array())
        .unwrap()
        .clone();
    assert_eq!(
        experiments[0]["tags"],
        json!(["variant=backport", "variant=stock"])
    );
    assert!(experiments[1].get("tags").is_none(), "{json}");
    assert!(iolab(&["show", "1"]).contains("\ntags: variant=backport, variant=stock\n"));
}

/// A placement is fio's CPU pinning (`cpus_allowed`): comparing two placements compares two
/// pinnings, which is what was asked, not a difference of jobs to warn of. Another option's
/// difference still is.
#[test]
fn comparing_placements_does_not_warn_of_their_cpu_pinning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let mut db = Store::open(&path).unwrap();
    let e = db.create_experiment(&experiment()).unwrap();
    for (place, cpus, bs) in [("on", "0", "4k"), ("near", "1", "4k"), ("far", "1", "8k")] {
        for rep in 0..3 {
            let mut r = run(e, "1", rep, 100.0 + f64::from(rep));
            r.cell_key = format!("placement={place}");
            r.cell_levels = json!({ "placement": place });
            r.job_file = Some(format!(
                "[rr]\nfilename=/dev/loop0\nrw=randread\nbs={bs}\ncpus_allowed={cpus}\n"
            ));
            db.insert_run(&r).unwrap();
        }
    }
    drop(db);
    let compare = |a: &str, b: &str| compare_read_iops(&path, a, b);
    let text = compare("placement=on", "placement=near");
    assert!(!text.contains("different fio jobs"), "{text}");
    let text = compare("placement=on", "placement=far");
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("different fio jobs (bs: 4k against 8k)"),
        "{text}"
    );
}

/// Two imported runs of two cells that ended in one second of fio's whole-second clock (jobs
/// on two devices at once): merged one after the other into another database, the second
/// was taken for the first already there, never came, and gave the first its cell.
#[test]
fn a_grown_imported_experiment_merges_each_run_of_the_same_second() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/fio/randread_1job_json.out"),
    )
    .unwrap();
    let mut other: serde_json::Value = serde_json::from_str(&fixture).unwrap();
    other["jobs"][0]["job options"]["bs"] = json!("8k");
    other["jobs"][0]["job options"]["filename"] = json!("/dev/loop1");
    let (a, b) = (dir.path().join("a4k.json"), dir.path().join("b8k.json"));
    std::fs::write(&a, &fixture).unwrap();
    std::fs::write(&b, serde_json::to_string_pretty(&other).unwrap()).unwrap();
    let (src, dst) = (dir.path().join("S.db"), dir.path().join("D.db"));
    let import = |db: &std::path::Path, args: &[&std::path::Path]| {
        let out = Command::cargo_bin("iolab")
            .unwrap()
            .args(["import", "--db"])
            .arg(db)
            .args(["--experiment", "e"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    let merge = || {
        let out = Command::cargo_bin("iolab")
            .unwrap()
            .args(["import", "--db"])
            .arg(&dst)
            .arg(&src)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    import(&src, &[&a]);
    merge();
    import(&src, &[&b]);
    merge();
    let store = Store::open_existing(&dst).unwrap();
    let id = store.experiments().unwrap()[0].id;
    let mut cells: Vec<String> = store
        .runs(id)
        .unwrap()
        .iter()
        .map(|r| r.cell_key.clone())
        .collect();
    cells.sort();
    assert_eq!(cells, ["bs=4k", "bs=8k"]);
}

/// Jobs in several reporting groups may have run one after another (`stonewall`), which
/// fio's JSON does not tell from `new_group`: their summed rates come with a warning, and
/// jobs of one group with none.
#[test]
fn jobs_in_several_reporting_groups_are_imported_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/fio/randrw_2jobs_json.out"),
    )
    .unwrap();
    let start = fixture.find('{').unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&fixture[start..]).unwrap();
    let together = dir.path().join("together.json");
    std::fs::write(&together, serde_json::to_string(&doc).unwrap()).unwrap();
    doc["jobs"][1]["groupid"] = json!(1);
    let phases = dir.path().join("phases.json");
    std::fs::write(&phases, serde_json::to_string(&doc).unwrap()).unwrap();
    let import = |file: &std::path::Path| -> serde_json::Value {
        let out = Command::cargo_bin("iolab")
            .unwrap()
            .args(["import", "--json", "--db"])
            .arg(file.with_extension("db"))
            .arg(file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(import(&together)["warnings"], json!([]));
    let warned = import(&phases)["warnings"].to_string();
    assert!(
        warned.contains("its jobs are in 2 reporting groups (new_group or stonewall)"),
        "{warned}"
    );
}

/// A trim workload (fio 3.33, `--rw=randtrim --bs=64k` on a loop device): `show` shows its
/// trims and `--summary` counts them (it printed IOPS 0 and MB/s 0, and `show` refused,
/// listing read_iops, all 0, as a metric present).
#[test]
fn a_trim_workloads_figures_are_shown() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fio/randtrim_1job_json.out");
    let run = |args: &[&str]| {
        let out = Command::cargo_bin("iolab")
            .unwrap()
            .args(args)
            .arg("--db")
            .arg(&db)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    run(&["import", fixture.to_str().unwrap()]);
    let shown = run(&["show", "1"]);
    assert!(shown.contains("trim_iops"), "{shown}");
    let summary: serde_json::Value =
        serde_json::from_str(&run(&["show", "1", "--summary", "--json"])).unwrap();
    let row = &summary["summary"]["rows"][0];
    assert_eq!(row["IOPS"]["mean"], json!(24483.516484), "{row}");
    assert_eq!(row["MB/s"]["mean"], json!(1604.551736), "{row}");
}

/// `--db` naming a directory says so (it said SQLite could not open the file, and to check
/// that its directory exists).
#[test]
fn a_database_that_is_a_directory_is_said_to_be_one() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fio/randread_1job_json.out");
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .arg("import")
        .arg(&fixture)
        .arg("--db")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("it is a directory; name a file in it"),
        "{err}"
    );
}

/// What `iolab compare A B --metric read_iops` prints on the database at `db`, having succeeded.
fn compare_read_iops(db: &std::path::Path, a: &str, b: &str) -> String {
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["compare", "--db"])
        .arg(db)
        .args([a, b, "--metric", "read_iops"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

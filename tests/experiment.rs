//! Experiment files: the shipped examples parse, fit this machine's time budget and produce
//! job files fio accepts; malformed files give every error with file:line:column and what is
//! allowed (snapshot); and, with root, one example's cells run on a scratch loop device.

use std::path::{Path, PathBuf};

use iolab::experiment::{self, Planner, TargetDevice};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_example_parses_targets_scratch_and_runs_in_minutes() {
    let files = examples();
    assert!(files.len() >= 4, "{files:?}");
    for path in files {
        let exp = experiment::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            exp.target.device,
            TargetDevice::Scratch,
            "{}",
            path.display()
        );
        assert!(
            exp.workload_writes().is_none(),
            "{}: examples only read",
            path.display()
        );
        let planner = Planner::new(&exp);
        let seconds: f64 = Planner::fixed_plan(&exp)
            .iter()
            .map(|run| {
                planner.cells()[run.cell]
                    .nominal_seconds(&exp)
                    .unwrap_or_else(|| panic!("{}: not time based", path.display()))
            })
            .sum();
        assert!(
            seconds <= 240.0,
            "{}: {seconds} s of fio is too long for a 2-CPU VM",
            path.display()
        );
        for cell in planner.cells() {
            assert!(
                cell.writes(&exp).is_none(),
                "{}: {}",
                path.display(),
                cell.key
            );
        }
    }
}

#[test]
fn the_seeds_questions_are_covered() {
    let load = |name: &str| experiment::load(&root().join("examples").join(name)).unwrap();
    let affinity = load("rq_affinity_placement.toml");
    assert!(affinity.factor("rq_affinity").is_some() && affinity.factor("placement").is_some());
    assert!(load("polling.toml").factor("hipri").is_some());
    assert_eq!(
        load("block_size_sweep.toml")
            .factor("bs")
            .unwrap()
            .levels
            .len(),
        4
    );
    let sched = load("scheduler_seq_read.toml");
    let labels: Vec<&str> = sched
        .factor("scheduler")
        .unwrap()
        .levels
        .iter()
        .map(|l| l.label.as_str())
        .collect();
    assert_eq!(labels, ["none", "mq-deadline"]);
}

fn fio_available() -> bool {
    std::process::Command::new("fio")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// fio accepts the job file of every cell of every example.
#[test]
fn fio_accepts_every_cell_of_every_example() {
    if !fio_available() {
        crate::common::skip("fio not on PATH");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for path in examples() {
        let exp = experiment::load(&path).unwrap();
        for cell in experiment::cells(&exp) {
            let cpus = cell.placement().map(|_| &[0u32][..]);
            let job = cell.job(&exp, "/dev/null", cpus).unwrap();
            let file = dir.path().join("cell.fio");
            std::fs::write(&file, job.job_file()).unwrap();
            let out = std::process::Command::new("fio")
                .arg("--parse-only")
                .arg(&file)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{} {}: {}",
                path.display(),
                cell.key,
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

fn fixture(name: &str) -> PathBuf {
    root().join("tests/fixtures/experiments").join(name)
}

/// Messages name the file relative to the repository so the snapshot is stable.
fn errors_of(name: &str) -> String {
    let text = std::fs::read_to_string(fixture(name)).unwrap();
    experiment::parse(&format!("tests/fixtures/experiments/{name}"), &text)
        .unwrap_err()
        .to_string()
}

#[test]
fn malformed_file_reports_every_problem() {
    insta::assert_snapshot!("many_mistakes", errors_of("many_mistakes.toml"));
}

#[test]
fn toml_syntax_error_has_line_and_column() {
    let e = errors_of("syntax_error.toml");
    assert!(
        e.starts_with("tests/fixtures/experiments/syntax_error.toml:3:"),
        "{e}"
    );
}

#[test]
fn unreadable_file_names_the_path() {
    let e = experiment::load(Path::new("/nonexistent/x.toml")).unwrap_err();
    assert!(e.to_string().starts_with("/nonexistent/x.toml:"), "{e}");
}

#[test]
fn minimal_file_gets_defaults() {
    let e = experiment::load(&fixture("valid_minimal.toml")).unwrap();
    assert_eq!(experiment::cells(&e).len(), 1);
    assert_eq!(Planner::fixed_plan(&e).len(), 3);
}

mod on_a_loop_device {
    //! The polling example's cells through `RealFio` on a scratch loop device: the
    //! interrupt-driven cells run, the polled ones come back not applicable (error 95).

    use std::time::Duration;

    use iolab::experiment;
    use iolab::workload::{FioRunner, FioStatus, RealFio};

    use crate::common::Scratch;

    fn scratch() -> Option<Scratch> {
        Scratch::new(64 << 20)
    }

    fn short(mut exp: experiment::Experiment) -> experiment::Experiment {
        // Shorter runs: this checks the plumbing, not the numbers.
        for (n, v) in exp.workload.iter_mut() {
            if n == "runtime" {
                *v = "1s".to_string();
            } else if n == "ramp_time" {
                *v = "0".to_string();
            }
        }
        exp
    }

    fn fio() -> (RealFio, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let fio = RealFio {
            work_dir: dir.path().to_path_buf(),
            time_limit: Some(Duration::from_secs(30)),
            ..RealFio::default()
        };
        (fio, dir)
    }

    #[test]
    fn polling_example_cells_on_loop() {
        if !iolab::sys::is_root() || !super::fio_available() {
            crate::common::skip("needs root and fio");
            return;
        }
        let Some(dev) = scratch() else {
            crate::common::skip("no loop device");
            return;
        };
        let exp = short(experiment::load(&super::root().join("examples/polling.toml")).unwrap());
        let (fio, _dir) = fio();
        let mut seen = (0, 0);
        for cell in experiment::cells(&exp) {
            let job = cell.job(&exp, &dev.path(), None).unwrap();
            let out = fio.run(&job).unwrap();
            match (cell.polling(), &out.status) {
                (Some(false), FioStatus::Success) => {
                    let m: std::collections::BTreeMap<String, f64> =
                        out.report.unwrap().metrics().into_iter().collect();
                    assert!(m["read_iops"] > 0.0, "{}: {m:?}", cell.key);
                    seen.0 += 1;
                }
                (Some(true), FioStatus::NotApplicable { errno: 95, .. }) => seen.1 += 1,
                (p, s) => panic!("{}: polling {p:?} gave {s:?}\n{}", cell.key, out.stderr),
            }
        }
        assert_eq!(seen, (2, 2));
    }

    /// The first and last cell of every example run on a 1 GiB scratch device (the examples'
    /// default size), with fio's figures in range. Knobs and placement are the run loop's
    /// job; here fio runs unpinned under the device's current settings.
    #[test]
    fn every_examples_first_and_last_cell_run() {
        if !iolab::sys::is_root() || !super::fio_available() {
            crate::common::skip("needs root and fio");
            return;
        }
        let Some(dev) = Scratch::new(1 << 30) else {
            crate::common::skip("no loop device");
            return;
        };
        let (fio, _dir) = fio();
        for path in super::examples() {
            let exp = short(experiment::load(&path).unwrap());
            let cells = experiment::cells(&exp);
            for cell in [&cells[0], &cells[cells.len() - 1]] {
                let out = fio
                    .run(&cell.job(&exp, &dev.path(), None).unwrap())
                    .unwrap();
                if cell.polling() == Some(true) {
                    assert!(matches!(out.status, FioStatus::NotApplicable { .. }));
                    continue;
                }
                assert_eq!(
                    out.status,
                    FioStatus::Success,
                    "{} {}: {}",
                    path.display(),
                    cell.key,
                    out.stderr
                );
                let m: std::collections::BTreeMap<String, f64> =
                    out.report.unwrap().metrics().into_iter().collect();
                assert!(
                    m["read_bw_mbs"] > 1.0,
                    "{} {}: {m:?}",
                    path.display(),
                    cell.key
                );
                assert_eq!(m["write_iops"], 0.0);
            }
        }
    }
}

/// An experiment file with one factor per entry of `levels`, each with that many valid
/// levels (block sizes), written into `dir`.
fn matrix_file(dir: &Path, levels: &[usize], repetitions: u32) -> PathBuf {
    let mut text = format!(
        "name = \"matrix\"\nrepetitions = {repetitions}\n[workload]\nrw = \"read\"\n[factors]\n"
    );
    // Sizes that hold no memory (bs times iodepth would: `job_memory`).
    let names = ["bs", "offset", "size", "io_size", "offset_increment"];
    for (name, n) in names.iter().zip(levels) {
        let values: Vec<String> = (1..=*n).map(|i| format!("\"{}k\"", i * 4)).collect();
        text += &format!("{name} = [{}]\n", values.join(", "));
    }
    let path = dir.join("matrix.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A dry run, bounded: 10,000 cells take fio about 2 s to parse, a debug build 4 s in all.
fn dry_run(path: &Path) -> crate::common::Bounded {
    crate::common::run_within(
        crate::common::iolab().args(["run", path.to_str().unwrap(), "--dry-run"]),
        std::time::Duration::from_secs(30),
    )
}

/// Case 0 planned here for another machine: `run --dry-run --root SNAPSHOT` resolves on, near
/// and far from that machine's topology and interrupts, checks writes against its devices,
/// and says whose plan it is; without --dry-run, --root is refused before anything runs.
#[test]
fn a_dry_run_plans_against_another_machines_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = root().join("tests/fixtures/machines/two-node-nvme");
    let file = |rw: &str| {
        let path = dir.path().join(format!("{rw}.toml"));
        std::fs::write(
            &path,
            format!(
                "name = \"case 0\"\n[target]\ndevice = \"nvme0n1\"\n[workload]\nrw = \"{rw}\"\n\
                 runtime = \"1s\"\ntime_based = 1\n[factors]\nplacement = [\"on\", \"near\", \"far\"]\n"
            ),
        )
        .unwrap();
        path
    };
    let dry = |path: &Path, extra: &[&str]| {
        crate::common::run_within(
            crate::common::iolab()
                .args(["run", path.to_str().unwrap(), "--root"])
                .arg(&snapshot)
                .args(extra),
            std::time::Duration::from_secs(30),
        )
    };
    let r = dry(&file("read"), &["--dry-run"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    for said in [
        "fio on CPUs 0-7: CPUs 0-7 take the device's interrupts",
        "fio on CPUs 8-14: CPUs 8-14 share the last-level cache of interrupt CPUs 0-7",
        "nothing here is farther than `near`: interrupt CPUs 0-7 are in every NUMA node",
        "(host db-2node, kernel 6.8.0-45-generic), not this machine",
        "checked for file system signatures only when the experiment runs there",
    ] {
        assert!(r.stdout.contains(said), "{said}:\n{}", r.stdout);
    }
    assert!(!r.stdout.contains("no cell can run here"), "{}", r.stdout);
    // Cells none of which can run there: said once, plainly, beside the reasons.
    let nowhere = dir.path().join("nowhere.toml");
    std::fs::write(
        &nowhere,
        "name = \"nowhere\"\n[target]\ndevice = \"nvme0n1\"\n[workload]\nrw = \"read\"\n\
         runtime = \"1s\"\n[factors]\nplacement = [\"node:3\", \"99\"]\n",
    )
    .unwrap();
    let r = dry(&nowhere, &["--dry-run"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout
            .contains("warning: no cell can run here: all 2 are not applicable (each says why)"),
        "{}",
        r.stdout
    );
    let r = dry(&file("write"), &["--dry-run"]);
    assert_ne!(r.code, Some(0));
    assert!(
        r.stderr.contains(
            "refusing to write to /dev/nvme0n1: it may hold data (dm-0 is built on nvme0n1)"
        ),
        "{}",
        r.stderr
    );
    let r = dry(
        &file("read"),
        &["--db", dir.path().join("r.db").to_str().unwrap()],
    );
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("--dry-run"), "{}", r.stderr);
    assert!(!dir.path().join("r.db").exists());
}

/// A network engine on the default target is told how to make the interface its target; fio
/// on the default target is not.
#[test]
fn a_network_experiment_on_the_default_target_hears_of_nic() {
    let example = root().join("examples/network_rr_placement.toml");
    let r = dry_run(&example);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let hint = "note: sockperf does not use the scratch block device: `[target] nic = \"IFACE\"`";
    assert!(r.stdout.contains(hint), "{}", r.stdout);
    let r = dry_run(&root().join("examples/block_size_sweep.toml"));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!r.stdout.contains("does not use"), "{}", r.stdout);
}

/// Network namespaces the machine does not have are found before the runs, which would each
/// fail in turn: the dry run warns, the run refuses before it touches anything.
#[test]
fn a_network_experiment_in_namespaces_that_do_not_exist_stops_before_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("net.toml");
    let text = std::fs::read_to_string(root().join("examples/network_rr_placement.toml"))
        .unwrap()
        .replace("\"iolab-cli\"", "\"iolab-test-no-such-ns-1\"")
        .replace("\"iolab-srv\"", "\"iolab-test-no-such-ns-2\"");
    std::fs::write(&file, text).unwrap();
    let why = "names network namespace(s) this machine does not have: iolab-test-no-such-ns-1, \
               iolab-test-no-such-ns-2";
    let r = dry_run(&file);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout
            .contains("warning: the run would stop before it starts")
            && r.stdout.contains(why),
        "{}",
        r.stdout
    );
    if !iolab::sys::is_root() {
        return crate::common::skip("the run itself needs root");
    }
    let r = crate::common::run_within(
        crate::common::iolab()
            .args(["run", file.to_str().unwrap(), "--db"])
            .arg(dir.path().join("r.db"))
            .env("IOLAB_STATE_DIR", dir.path().join("state")),
        std::time::Duration::from_secs(30),
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains(why), "{}", r.stderr);
    assert!(!r.stderr.contains("target: scratch device"), "{}", r.stderr);
}

/// Without fio on PATH a run stops before it makes a scratch device or a database, saying how
/// to get fio; a dry run still shows the plan and says fio could not check it.
#[test]
fn without_fio_a_run_stops_before_anything_is_touched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.toml");
    std::fs::write(
        &path,
        "name = \"e\"\n[workload]\nrw = \"read\"\nruntime = \"1s\"\ntime_based = 1\n",
    )
    .unwrap();
    let db = dir.path().join("r.db");
    let iolab = |extra: &[&str]| {
        let mut cmd = crate::common::iolab();
        cmd.args(["run", path.to_str().unwrap(), "--db", db.to_str().unwrap()])
            .args(extra)
            .env("PATH", "/nonexistent");
        crate::common::run_within(&mut cmd, std::time::Duration::from_secs(30))
    };
    let r = iolab(&[]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("cannot start fio: No such file or directory")
            && r.stderr.contains("install it (Debian: apt-get install fio")
            && r.stderr.ends_with("nothing was touched\n"),
        "{}",
        r.stderr
    );
    assert!(!db.exists());
    assert!(!r.stdout.contains("scratch device"), "{}", r.stdout);
    let r = iolab(&["--dry-run"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout
            .contains("note: fio could not check the cells' jobs (cannot start fio"),
        "{}",
        r.stdout
    );
}

/// A value fio refuses (its ranges, which iolab's allow-list does not know) stops a dry run
/// and a run alike before anything is made, set or stored, naming the cell and fio's words.
#[test]
fn a_value_fio_refuses_stops_the_run_before_anything_is_touched() {
    if !fio_available() {
        crate::common::skip("fio not on PATH");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        "name = \"bad\"\n[workload]\nrw = \"randrw\"\nruntime = \"1s\"\ntime_based = 1\n\
         [factors]\nrwmixread = [50, 150]\nbs = [\"4k\", \"8k\"]\n",
    )
    .unwrap();
    let expected = "fio refuses cell `rwmixread=150,bs=4k`: rwmixread: max value out of range: \
                    150 (100 max)";
    let r = dry_run(&path);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains(expected), "{}", r.stderr);
    let db = dir.path().join("r.db");
    let r = crate::common::run_within(
        crate::common::iolab().args(["run", path.to_str().unwrap(), "--db", db.to_str().unwrap()]),
        std::time::Duration::from_secs(30),
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains(expected), "{}", r.stderr);
    assert!(!db.exists(), "nothing is stored");
    assert!(!r.stdout.contains("scratch device"), "{}", r.stdout);
}

#[test]
fn huge_matrices_are_refused_at_once_with_the_numbers_and_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    // 1e8 cells in a 3 KB file: refused from the level counts, instantly, in little memory.
    let path = matrix_file(dir.path(), &[100, 100, 100, 100], 3);
    assert!(std::fs::metadata(&path).unwrap().len() < 4000);
    let started = std::time::Instant::now();
    let r = dry_run(&path);
    assert!(!r.timed_out && started.elapsed().as_secs() < 5);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "(100 x 100 x 100 x 100) make 100000000 cells, more than the limit \
             of 10000"
        ),
        "{}",
        r.stderr
    );
    assert!(r.stdout.is_empty(), "{}", r.stdout.len());
    let r = dry_run(&matrix_file(dir.path(), &[1000, 1000], 3));
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("make 1000000 cells"), "{}", r.stderr);
    // Levels per factor are bounded too.
    let r = dry_run(&matrix_file(dir.path(), &[1001], 1));
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("has 1001 levels, more than the limit of 1000"),
        "{}",
        r.stderr
    );
    // Cells within the limit but too many runs with the repetitions.
    let r = dry_run(&matrix_file(dir.path(), &[100, 100], 11));
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("10000 cells (100 x 100) x up to 11 repetitions make 110000 runs"),
        "{}",
        r.stderr
    );
    // At the limit, the plan is made.
    let r = dry_run(&matrix_file(dir.path(), &[100, 100], 10));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
}

#[test]
fn runtimes_that_are_not_durations_are_refused_with_the_range() {
    let dir = tempfile::tempdir().unwrap();
    for bad in [
        "-4s",
        "inf",
        "nan",
        "100000000000d",
        "100000000000000000000000000d",
    ] {
        for (key, line) in [("runtime", "runtime"), ("ramp_time", "ramp_time")] {
            let path = dir.path().join("rt.toml");
            std::fs::write(
                &path,
                format!(
                    "name = \"rt\"\n[workload]\nrw = \"read\"\ntime_based = true\n\
                     runtime = \"4s\"\n{line} = \"{bad}\"\n"
                )
                .replace("runtime = \"4s\"\nruntime", "runtime"),
            )
            .unwrap();
            let r = dry_run(&path);
            assert_eq!(r.code, Some(1), "{key} = {bad}: {}", r.stderr);
            assert!(
                r.stderr.contains("rt.toml:") && r.stderr.contains(&format!("`{key}`")),
                "{key} = {bad}: {}",
                r.stderr
            );
            assert!(
                r.stderr.contains("0 to 30d") || r.stderr.contains("0s to 30d"),
                "{key} = {bad}: {}",
                r.stderr
            );
        }
        // As a factor's level too.
        let path = dir.path().join("lv.toml");
        std::fs::write(
            &path,
            format!(
                "name = \"lv\"\n[workload]\nrw = \"read\"\ntime_based = true\n[factors]\n\
                 runtime = [\"1s\", \"{bad}\"]\n"
            ),
        )
        .unwrap();
        let r = dry_run(&path);
        assert_eq!(r.code, Some(1), "level {bad}: {}", r.stderr);
        assert!(r.stderr.contains("lv.toml:6:"), "{}", r.stderr);
    }
}

/// An adaptive metric of a direction a cell does not do (fio reports 0, the cell would run
/// `max` times) stops the plan; one every cell measures plans.
#[test]
fn an_adaptive_metric_no_cell_measures_is_refused_before_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ad.toml");
    let file = |metric: &str| {
        format!(
            "name = \"ad\"\nrepetitions = {{ target_ci = 0.05, metric = \"{metric}\" }}\n\
             [workload]\nbs = \"4k\"\n[factors]\nrw = [\"randread\", \"randwrite\"]\n"
        )
    };
    std::fs::write(&path, file("read_iops")).unwrap();
    let r = dry_run(&path);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains("cell rw=randwrite does no read I/O"),
        "{}",
        r.stderr
    );
    std::fs::write(&path, file("dev_util_pct")).unwrap();
    let r = dry_run(&path);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
}

/// An option written in [workload] or an engine's table that a factor sets in every cell runs
/// nowhere: the plan says so, and still plans.
#[test]
fn an_option_every_cell_replaces_is_named_in_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let fio = dir.path().join("fio.toml");
    std::fs::write(
        &fio,
        "name = \"f\"\n[workload]\nrw = \"read\"\nblocksize = \"4k\"\n\
         [factors]\nbs = [\"64k\", \"1m\"]\n",
    )
    .unwrap();
    let sockperf = dir.path().join("sockperf.toml");
    std::fs::write(
        &sockperf,
        "name = \"s\"\nengine = \"sockperf\"\n[sockperf]\nserver = \"10.0.0.1\"\n\
         msg_size = 64\n[factors]\nmsg_size = [128, 1024]\n",
    )
    .unwrap();
    for (file, expected) in [
        (
            &fio,
            "warning: `blocksize = 4k` in [workload] is replaced in every cell by the factor \
             `bs` (64k, 1m; line 6)",
        ),
        (
            &sockperf,
            "warning: `msg_size = 64` in [sockperf] is replaced in every cell by the factor \
             `msg_size` (128, 1024; line 7)",
        ),
    ] {
        let out = crate::common::stdout_of(crate::common::iolab().args([
            "run",
            file.to_str().unwrap(),
            "--dry-run",
        ]));
        assert!(out.contains(expected), "{out}");
        assert!(out.contains("cells (2)"), "{out}");
    }
}

/// Knob levels that put a device's data at risk (no cache flushes, short request timeouts)
/// are judged like writes: refused on a device that holds data; harmless knobs are not.
#[test]
fn knob_levels_that_risk_data_are_refused_on_a_device_that_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = root().join("tests/fixtures/machines/two-node-nvme");
    let plan = |factor: &str| {
        let path = dir.path().join("k.toml");
        std::fs::write(
            &path,
            format!(
                "name = \"k\"\n[target]\ndevice = \"nvme0n1\"\n[workload]\nrw = \"read\"\n\
                 runtime = \"1s\"\n[factors]\n{factor}\n"
            ),
        )
        .unwrap();
        crate::common::run_within(
            crate::common::iolab()
                .args(["run", "--dry-run", path.to_str().unwrap(), "--root"])
                .arg(&snapshot),
            std::time::Duration::from_secs(30),
        )
    };
    for (factor, why) in [
        (
            "write_cache = [\"write back\", \"write through\"]",
            "cell write_cache=\"write through\" puts the data on its device at risk: \
             write_cache = \"write through\" stops the kernel's cache flushes",
        ),
        (
            "io_timeout = [1000]",
            "cell io_timeout=1000 puts the data on its device at risk: an io_timeout below \
             the kernel's 30 s",
        ),
        (
            "\"queue/stable_writes\" = [0]",
            "stable_writes = 0 lets pages change while they are written",
        ),
        (
            "\"queue/some_new_attribute\" = [1]",
            "queue/some_new_attribute is not one of the queue settings iolab knows",
        ),
    ] {
        let r = plan(factor);
        assert_eq!(r.code, Some(1), "{factor}: {}", r.stdout);
        assert!(
            r.stderr.contains(why) && r.stderr.contains("dm-0 is built on nvme0n1"),
            "{factor}: {}",
            r.stderr
        );
    }
    for harmless in [
        "write_cache = [\"write back\"]",
        "io_timeout = [60000]",
        "read_ahead_kb = [0, 512]",
        "scheduler = [\"mq-deadline\"]\n\"queue/iosched/fifo_batch\" = [8]",
    ] {
        let r = plan(harmless);
        assert_eq!(r.code, Some(0), "{harmless}: {}", r.stderr);
    }
}

/// `--device` in place of a file's scratch target: the plan says the keys that size scratch
/// devices go unused (a file naming a device with them is refused), with their lines.
#[test]
fn a_device_given_for_a_scratch_target_says_its_size_goes_unused() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = root().join("tests/fixtures/machines/two-node-nvme");
    let path = dir.path().join("s.toml");
    std::fs::write(
        &path,
        "name = \"s\"\n[target]\nsize = \"2G\"\ncount = 2\n[workload]\nrw = \"read\"\n\
         runtime = \"1s\"\ntime_based = 1\n",
    )
    .unwrap();
    let out = crate::common::run_within(
        crate::common::iolab()
            .args([
                "run",
                path.to_str().unwrap(),
                "--dry-run",
                "--device",
                "nvme0n1",
                "--root",
            ])
            .arg(&snapshot),
        std::time::Duration::from_secs(30),
    );
    let text = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(out.code, Some(0), "{text}");
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let file = path.display().to_string();
    assert!(
        flat.contains(&format!(
            "--device nvme0n1 replaces the file's scratch target, so `count` ({file}:4) and \
             `size` ({file}:3) go unused (they size scratch devices only)"
        )),
        "{text}"
    );
}

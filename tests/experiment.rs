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

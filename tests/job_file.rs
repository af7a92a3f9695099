//! `[workload] job = "my.fio"`: a user's fio job file as the workload, through the CLI. As
//! root, end to end on a scratch loop device with a factor overriding one of the file's
//! options; everywhere, the refusals (an exec option, a `filename` outside the target, an
//! include leaving the job file's directory by name or by a symbolic link, a bad line), each
//! at both files' lines.

use std::path::Path;
use std::process::{Command, Output};

use iolab::store::{RunStatus, Store};

use crate::common::{root_or_skip, Scratch};

fn iolab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_iolab"))
}

/// Writes `x.toml` and `j.fio` into `dir` and runs `iolab run` on them (no dry run: a refusal
/// must come before anything is made).
fn run(dir: &Path, toml: &str, job: &str) -> Output {
    std::fs::write(dir.join("x.toml"), toml).unwrap();
    std::fs::write(dir.join("j.fio"), job).unwrap();
    iolab()
        .args([
            "run",
            "--sample-ms",
            "250",
            "--job-env",
            "IOLAB_TEST_RUNTIME",
            "--db",
        ])
        .arg(dir.join("r.db"))
        .arg(dir.join("x.toml"))
        .env("IOLAB_STATE_DIR", dir.join("state"))
        .env("IOLAB_TEST_RUNTIME", "1s")
        .output()
        .unwrap()
}

/// A job file reads only the environment variables the person running names with
/// --job-env: one handed over with an experiment copied a token into the stored results.
#[test]
fn a_job_file_reads_only_the_environment_it_is_let_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("x.toml"),
        "name = \"env\"\n[workload]\njob = \"j.fio\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("j.fio"),
        "[j]\nrw=randread\ndescription=${IOLAB_TEST_TOKEN}\n",
    )
    .unwrap();
    let dry_run = |extra: &[&str]| {
        iolab()
            .args(["run", "--dry-run", "--json"])
            .args(extra)
            .arg(dir.path().join("x.toml"))
            .env("IOLAB_TEST_TOKEN", "s3cr3t-token")
            .output()
            .unwrap()
    };
    let out = dry_run(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "`${IOLAB_TEST_TOKEN}` would read iolab's environment variable \
                      IOLAB_TEST_TOKEN: let it with `iolab run --job-env IOLAB_TEST_TOKEN`"
        ),
        "{err}"
    );
    assert!(!err.contains("s3cr3t") && out.stdout.is_empty(), "{err}");
    // Let, it is read; another name does not let it.
    let out = dry_run(&["--job-env", "IOLAB_TEST_TOKEN"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(dry_run(&["--job-env", "HOME"]).status.code(), Some(1));
}

#[test]
fn a_job_file_runs_on_a_scratch_device_with_a_factor_overriding_its_block_size() {
    if !root_or_skip() {
        return;
    }
    let Some(scratch) = Scratch::new(64 << 20) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dev = scratch.path();
    let toml = format!(
        "name = \"job file\"\nseed = 3\nrepetitions = 1\n[target]\ndevice = \"{}\"\n\
         anchor_cpu = 0\n[workload]\njob = \"j.fio\"\n[factors]\nbs = [\"4k\", \"16k\"]\n",
        scratch.name()
    );
    let job = format!(
        "; someone's existing job file\n[global]\nioengine=psync\ndirect=1\nsize=16m\n\
         time_based\nruntime=${{IOLAB_TEST_RUNTIME}}\n\n[randread]\nfilename={dev}\n\
         rw=randread\nbs=64k ; the factor overrides this\n"
    );
    let out = run(dir.path(), &toml, &job);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");

    let db = Store::open_existing(dir.path().join("r.db")).unwrap();
    let runs = db.runs(1).unwrap();
    assert_eq!(runs.len(), 2, "{runs:?}");
    for r in &runs {
        assert_eq!(r.status, RunStatus::Ok, "{}", r.cell_key);
        let bs = if r.cell_key.contains("bs=16k") {
            "16k"
        } else {
            "4k"
        };
        let texts = db.run_texts(r.id).unwrap().unwrap();
        let job = texts.job_file.unwrap();
        // The file's options, its valueless `time_based`, the expanded runtime, the factor's
        // block size instead of the file's, and the target iolab set.
        for line in [
            format!("filename={dev}\n"),
            "ioengine=psync\n".to_string(),
            "time_based\n".to_string(),
            "runtime=1s\n".to_string(),
            "rw=randread\n".to_string(),
            format!("bs={bs}\n"),
        ] {
            assert!(job.contains(&line), "{line:?} missing in\n{job}");
        }
        assert!(!job.contains("bs=64k"), "{job}");
        // fio itself ran with the factor's block size.
        let json = texts.fio_json.unwrap();
        assert!(json.contains(&format!("\"bs\" : \"{bs}\"")), "{json}");
        let iops = db.metric_values(&[r.id], "read_iops").unwrap();
        assert!(iops.len() == 1 && iops[0].1 > 0.0, "{iops:?}");
    }
    assert_eq!(
        runs.iter()
            .filter(|r| r.cell_key.contains("bs=16k"))
            .count(),
        1
    );
    // The job file's own text is kept with the experiment's.
    let (text, _) = db.experiment_texts(1).unwrap();
    let shown = dir.path().join("j.fio");
    assert!(
        text.contains(&format!(
            "# job file {}, as read:\n#   ; someone's",
            shown.display()
        )),
        "{text}"
    );
}

#[test]
fn job_files_that_break_the_rules_are_refused_at_both_files_lines() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let toml = "name = \"refused\"\n[workload]\njob = \"j.fio\"\n";
    let x = dir.path().join("x.toml").display().to_string();
    let j = dir.path().join("j.fio").display().to_string();
    // A link beside the job file to a file elsewhere, whose command must not run either.
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("other.fio");
    std::fs::write(&target, format!("exec_prerun=touch {}\n", marker.display())).unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join("linked.fio")).unwrap();
    let linked = dir.path().join("linked.fio").display().to_string();
    for (job, want) in [
        (
            format!(
                "[global]\nrw=read\n[r]\nexec_prerun=touch {}\n",
                marker.display()
            ),
            format!("{x}:3:7: job file {j}:4: `exec_prerun` makes fio run a shell command"),
        ),
        (
            "[r]\nfilename=/dev/vda\n".to_string(),
            format!("{x}:3:7: job file {j}:2: `filename=/dev/vda` names /dev/vda outside"),
        ),
        (
            "[r]\ninclude ../elsewhere.fio\n".to_string(),
            format!("{x}:3:7: job file {j}:2: `include ../elsewhere.fio` reaches outside"),
        ),
        (
            "[r]\ninclude linked.fio\n".to_string(),
            format!(
                "{x}:3:7: job file {j}:2: cannot read included file {linked}: a symbolic link \
                 leads it to"
            ),
        ),
        (
            "[r]\nrw=read\n[broken\n".to_string(),
            format!("{x}:3:7: job file {j}:3: `[broken` is not a section header"),
        ),
    ] {
        let out = run(dir.path(), toml, &job);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(&want), "missing {want:?} in:\n{stderr}");
        assert!(!marker.exists(), "the refused command ran");
        assert!(!dir.path().join("r.db").exists(), "something ran");
    }
}

/// The shipped example reads its job file and the file that includes, in fio's order.
#[test]
fn the_example_job_file_is_read_with_its_include() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exp = iolab::experiment::load(&root.join("examples/job_file.toml")).unwrap();
    let names: Vec<&str> = exp.workload.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "size",
            "ramp_time",
            "ioengine",
            "direct",
            "time_based",
            "runtime",
            "rw",
            "bs"
        ]
    );
    for file in ["fio/randread.fio", "fio/common.fio"] {
        let path = root.join("examples").join(file);
        assert!(
            exp.text
                .contains(&format!("# job file {}, as read:", path.display())),
            "{}",
            exp.text
        );
    }
}

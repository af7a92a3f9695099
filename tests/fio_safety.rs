//! What fio may do under iolab: the allow-list against the installed fio's own option list, the
//! two holes found by hand (`mem=mmap:PATH` truncated a file, `write_*_log` wrote anywhere)
//! refused before anything runs, and the logs a user may ask for confined to iolab's own
//! directories.

use std::path::Path;
use std::process::Command;

use iolab::workload::options::{self, OptionPolicy, Rule, Shape};

fn iolab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_iolab"))
}

fn fio(args: &[&str]) -> Option<String> {
    let out = Command::new("fio").args(args).output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Option names from a `fio --cmdhelp=all` / `--enghelp=ENGINE` listing.
fn listed(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(name, _)| name.trim().to_string())
        .filter(|n| !n.is_empty() && !n.contains(' '))
        .collect()
}

/// Every option the installed fio has is known to iolab's allow-list (so its catalogue is not
/// stale), and none of them lets a value name a file: a path in every form fio might read one
/// is refused, whatever the option (a job description, which fio only prints, excepted).
#[test]
fn every_option_of_the_installed_fio_is_ruled_and_none_takes_a_path() {
    let Some(all) = fio(&["--cmdhelp=all"]) else {
        crate::common::skip("fio not on PATH");
        return;
    };
    let mut names = listed(&all);
    for engine in ["io_uring", "libaio", "pvsync2", "mmap", "sg", "exec"] {
        names.extend(listed(&fio(&[&format!("--enghelp={engine}")]).unwrap()));
    }
    assert!(names.len() > 200, "fio listed only {} options", names.len());
    let policy = OptionPolicy::default();
    let mut unknown = Vec::new();
    for name in &names {
        if !options::is_fio_option(name) {
            unknown.push(name.clone());
            continue;
        }
        assert!(options::rule(name).is_some(), "`{name}` has no rule");
        if options::rule(name) == Some(Rule::Value(Shape::Text)) {
            assert_eq!(name, "description", "only a description may be free text");
            continue;
        }
        for value in [
            "/tmp/iolab-probe",
            "iolab-dir/../../probe",
            "mmap:/tmp/iolab-probe",
            "'/tmp/iolab-probe'",
            "external:/tmp/iolab-probe.so",
            "$HOME/probe",
        ] {
            assert!(
                options::check_option(name, value, &policy).is_err(),
                "{name}={value} is allowed"
            );
        }
    }
    assert!(
        unknown.is_empty(),
        "fio has options iolab's catalogue lacks (run scripts/fio-catalogue): {unknown:?}"
    );
}

/// A read-only experiment naming a file through `mem`/`iomem`/`write_*_log`: refused before
/// anything runs, in the dry run too, and the file is untouched.
#[test]
fn options_that_would_write_a_file_are_refused_and_the_file_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, vec![7u8; 1 << 20]).unwrap();
    for (option, value) in [
        ("mem", format!("mmap:{}", victim.display())),
        ("iomem", format!("mmapshared:{}", victim.display())),
        ("write_bw_log", victim.display().to_string()),
        ("write_lat_log", "../victim".to_string()),
        ("buffer_pattern", format!("'{}'", victim.display())),
    ] {
        let file = dir.path().join("e.toml");
        std::fs::write(
            &file,
            format!(
                "name = \"ro\"\n[workload]\nrw = \"randread\"\nruntime = \"1s\"\n\
                 time_based = true\n{option} = {value:?}\n"
            ),
        )
        .unwrap();
        for err in refused_both_ways(&file, dir.path(), None) {
            assert!(err.contains(&format!("`{option}`")), "{option}: {err}");
            assert!(err.contains("e.toml:6:"), "{option}: {err}");
        }
        assert_eq!(std::fs::read(&victim).unwrap(), vec![7u8; 1 << 20]);
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        left.iter()
            .all(|n| ["victim", "e.toml"].contains(&n.as_str())),
        "{left:?}"
    );
}

/// Runs the experiment `file` as a dry run, then as a run, with its state and database in
/// `dir` (and `path` as PATH when given): both must be refused (exit 1) with nothing stored.
/// Returns what each printed on standard error.
fn refused_both_ways(file: &Path, dir: &Path, path: Option<&str>) -> Vec<String> {
    [true, false]
        .into_iter()
        .map(|dry| {
            let mut cmd = iolab();
            cmd.arg("run").arg(file).arg("--db").arg(dir.join("r.db"));
            if dry {
                cmd.arg("--dry-run");
            }
            cmd.env("IOLAB_STATE_DIR", dir.join("state"));
            if let Some(path) = path {
                cmd.env("PATH", path);
            }
            let out = cmd.output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            assert_eq!(out.status.code(), Some(1), "dry run {dry}: {err}");
            assert!(!dir.join("r.db").exists(), "dry run {dry}: something ran");
            err
        })
        .collect()
}

/// Holes found in review, closed before anything runs: with unknown options allowed, an
/// option named `include` made fio splice in a job file iolab never checked (its
/// `exec_prerun` ran as root), as did a value longer than fio reads whole; and a fio keyword with arithmetic (`$ncpus-1`) made fio start
/// `bc` through a shell, in a dry run too (fio's own parse check). A `bc` on PATH that leaves
/// a mark shows whether one started.
#[test]
fn an_include_or_keyword_arithmetic_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let evil = dir.path().join("evil.fio");
    std::fs::write(&evil, format!("exec_prerun=touch {}\n", marker.display())).unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let bc = bin.join("bc");
    std::fs::write(
        &bc,
        format!("#!/bin/sh\ntouch {}\necho 1\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&bc, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for (lines, want) in [
        (
            format!(
                "allow_unknown_fio_options = true\n[workload]\nrw = \"randread\"\n\
                 include = {:?}\n",
                evil.display().to_string()
            ),
            "`include` makes fio read the named job file's options without iolab checking them",
        ),
        // fio reads a job file in 8 KiB pieces: the rest of a longer line was a line of its
        // own, unchecked (an `include` ran the file's exec_prerun; `ioengine=external:`
        // loaded a library as root).
        (
            format!(
                "[workload]\nrw = \"randread\"\ndescription = \"{}include {}\"\n",
                "A".repeat(8191 - "description=".len()),
                evil.display()
            ),
            "`description=VALUE` must be at most 4096 bytes",
        ),
        (
            "[workload]\nrw = \"randread\"\nnumjobs = \"$ncpus-1\"\n".to_string(),
            "`numjobs` makes fio run `bc` through a shell",
        ),
        (
            "[workload]\nrw = \"randread\"\n[factors]\niodepth = [\"1\", \"$ncpus*2\"]\n"
                .to_string(),
            "`iodepth` makes fio run `bc` through a shell",
        ),
    ] {
        let file = dir.path().join("e.toml");
        std::fs::write(&file, format!("name = \"x\"\n{lines}")).unwrap();
        for err in refused_both_ways(&file, dir.path(), Some(&path)) {
            assert!(err.contains(want), "{lines}: missing {want:?} in {err}");
            assert!(!marker.exists(), "{lines}: a program ran");
        }
    }
}

/// Logs asked for by a plain name are written by fio in the run's own directory and kept
/// beside the database; nothing lands in the directory iolab was started from, and the run's
/// private directory is gone afterwards.
#[test]
fn fio_logs_are_confined_to_iolabs_directories() {
    if !crate::common::root_or_skip() {
        return;
    }
    if fio(&["--version"]).is_none() {
        crate::common::skip("fio not on PATH");
        return;
    }
    let Some(scratch) = crate::common::Scratch::new(32 << 20) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("cwd");
    let results = dir.path().join("results");
    let state = dir.path().join("state");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(&results).unwrap();
    let file = cwd.join("logs.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"logs\"\nrepetitions = 1\n[target]\ndevice = \"{}\"\n[workload]\n\
             rw = \"randread\"\nioengine = \"psync\"\ndirect = 1\nsize = \"8m\"\n\
             runtime = \"1s\"\ntime_based = true\nwrite_lat_log = \"lat\"\n\
             write_bw_log = \"bw\"\nlog_avg_msec = 100\n",
            scratch.name()
        ),
    )
    .unwrap();
    let db = results.join("r.db");
    let out = iolab()
        .current_dir(&cwd)
        .args(["run", "logs.toml", "--db"])
        .arg(&db)
        .env("IOLAB_STATE_DIR", &state)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("fio logs: kept in"), "{err}");
    let kept = results.join("r.db.fio-logs/experiment-1/cell0-round1");
    let logs = names(&kept);
    for want in ["lat_lat.1.log", "lat_clat.1.log", "bw_bw.1.log"] {
        assert!(logs.contains(&want.to_string()), "{want} missing: {logs:?}");
    }
    assert!(std::fs::metadata(kept.join("bw_bw.1.log")).unwrap().len() > 0);
    assert_eq!(names(&cwd), vec!["logs.toml".to_string()]);
    let runs = state.join("fio");
    assert!(
        names(&runs).is_empty(),
        "left in {}: {:?}",
        runs.display(),
        names(&runs)
    );

    // Beside a database in a directory shared with others, a log directory another user made
    // first (here a link to theirs) is not taken: fio, whose writes it bounds, would write
    // wherever it points.
    let victim = dir.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::os::unix::fs::symlink(&victim, results.join("p.db.fio-logs")).unwrap();
    let out = iolab()
        .current_dir(&cwd)
        .args(["run", "logs.toml", "--db"])
        .arg(results.join("p.db"))
        .env("IOLAB_STATE_DIR", &state)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("p.db.fio-logs is not a directory: iolab writes there"),
        "{err}"
    );
    assert!(names(&victim).is_empty(), "{:?}", names(&victim));
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// fio's jobs hold memory that nothing limits for root: `lockmem` pins it, per job, and each
/// job's I/O buffers (the largest block size times iodepth) are filled as it reads. More than
/// the machine can spare would have the kernel kill processes to find it. Refused before
/// anything runs, on this machine (fio's own cap on lockmem, RAM less 128 MiB, is still too
/// much) and, in a plan made from a snapshot, against that machine's memory, per cell.
#[test]
fn holding_more_memory_than_the_machine_can_spare_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("e.toml");
    std::fs::write(
        &file,
        "name = \"pin\"\n[workload]\nrw = \"read\"\nruntime = \"1s\"\nlockmem = \"1t\"\n",
    )
    .unwrap();
    for err in refused_both_ways(&file, dir.path(), None) {
        assert!(
            err.contains("the workload: it would hold")
                && err.contains("pinned by lockmem; 4.0 KiB of I/O buffers")
                && err.contains("but this machine has")
                && err.contains("lower lockmem, the block size, iodepth or numjobs"),
            "{err}"
        );
    }
    // A snapshot of a machine with 8 GiB, 4 GiB of it available: 3.2 GiB can be spared.
    let snapshot = fixture_copy("two-node-nvme", dir.path());
    let plan = |options: &str, jobs: &str| {
        std::fs::write(
            &file,
            format!(
                "name = \"pin\"\n[target]\ndevice = \"nvme0n1\"\n[workload]\nrw = \"read\"\n\
                 runtime = \"1s\"\n{options}\n[factors]\nnumjobs = [{jobs}]\n"
            ),
        )
        .unwrap();
        plan_on(&snapshot, &file)
    };
    let pins = "lockmem = \"1g\"";
    let (ok, err) = plan(pins, "1, 4");
    assert!(
        !ok && err.contains("the snapshot's proc/meminfo cannot be read to check"),
        "{err}"
    );
    // Without lockmem there is nothing to refuse on unknown memory.
    let (ok, err) = plan("", "1, 4");
    assert!(ok, "{err}");
    std::fs::write(
        snapshot.join("proc/meminfo"),
        "MemTotal:        8388608 kB\nMemFree:         1048576 kB\nMemAvailable:    4194304 kB\n",
    )
    .unwrap();
    let (ok, err) = plan(pins, "1, 4");
    assert!(!ok, "{err}");
    assert!(
        err.contains(
            "cell `numjobs=4`: it would hold 4.0 GiB of memory (4.0 GiB pinned by \
             lockmem; 16.0 KiB of I/O buffers: the largest block size times iodepth, per job), \
             but the snapshot's machine has 4.0 GiB available and keeps a tenth of its 8.0 GiB \
             free, so it can spare 3.2 GiB"
        ),
        "{err}"
    );
    let (ok, err) = plan(pins, "1, 3");
    assert!(ok, "{err}");
    let (ok, err) = plan("bs = \"4k,64m\"\niodepth = 32", "1, 2");
    assert!(!ok, "{err}");
    assert!(
        err.contains(
            "cell `numjobs=2`: it would hold 4.0 GiB of memory (4.0 GiB of I/O \
             buffers: the largest block size times iodepth, per job)"
        ) && err.contains("lower the block size, iodepth or numjobs"),
        "{err}"
    );
    // The scratch device's file lies in /dev/shm: what a workload writes there stays in
    // memory, so its size counts when a cell writes (a read of the sparse file takes none).
    // Planned on a machine with loop devices, with the same memory.
    let with_loops = fixture_copy("thisvm", dir.path());
    std::fs::copy(
        snapshot.join("proc/meminfo"),
        with_loops.join("proc/meminfo"),
    )
    .unwrap();
    let scratch = |rw: &str| {
        std::fs::write(
            &file,
            format!(
                "name = \"shm\"\n[target]\nsize = \"4G\"\n[workload]\nruntime = \"1s\"\n\
                 rw = {rw}\n"
            ),
        )
        .unwrap();
        plan_on(&with_loops, &file)
    };
    let (ok, err) = scratch("\"write\"");
    assert!(!ok, "{err}");
    assert!(
        err.contains(
            "the workload: it would hold 4.0 GiB of memory (4.0 KiB of I/O buffers: the largest \
             block size times iodepth, per job; 4.0 GiB of scratch devices in /dev/shm, which \
             the workload writes)"
        ) && err.contains("lower the block size, iodepth, numjobs or [target] size"),
        "{err}"
    );
    let (ok, err) = scratch("\"read\"");
    assert!(ok, "{err}");
    // Cells of reads and writes: the cell that fills the scratch devices is named, not the
    // first cell checked (a read, which blamed the workload's writes on itself).
    let (ok, err) = scratch("\"read\"\n[factors]\nrw = [\"read\", \"write\"]");
    assert!(!ok, "{err}");
    assert!(
        err.contains("4.0 GiB of scratch devices in /dev/shm, which cell `rw=write` fills"),
        "{err}"
    );
}

/// A writable copy of the fixture machine `name` in `dir`.
fn fixture_copy(name: &str, dir: &Path) -> std::path::PathBuf {
    let to = dir.join(name);
    let copied = Command::new("cp")
        .arg("-a")
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/machines")
                .join(name),
        )
        .arg(&to)
        .status()
        .unwrap();
    assert!(copied.success());
    to
}

/// `iolab run --dry-run --root ROOT FILE`: whether it planned, and what it said on stderr.
fn plan_on(root: &Path, file: &Path) -> (bool, String) {
    let out = iolab()
        .args(["run", "--dry-run", "--root"])
        .arg(root)
        .arg(file)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

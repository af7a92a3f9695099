use assert_cmd::Command;

#[test]
fn help_lists_commands() {
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    // Every command is listed with a description, and its own --help teaches its usage.
    for cmd in [
        "inspect",
        "snapshot",
        "preflight",
        "run",
        "runs",
        "show",
        "compare",
        "plot",
        "report",
        "import",
        "trace",
        "irq",
        "metrics",
        "restore",
    ] {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(cmd))
            .unwrap_or_else(|| panic!("`{cmd}` is not listed in --help:\n{text}"));
        assert!(
            line.split_whitespace().count() > 2,
            "`{cmd}` has no description: {line}"
        );
        let sub = Command::cargo_bin("iolab")
            .unwrap()
            .args([cmd, "--help"])
            .output()
            .unwrap();
        assert!(sub.status.success(), "iolab {cmd} --help failed");
        let help = String::from_utf8(sub.stdout).unwrap();
        assert!(help.contains(&format!("Usage: iolab {cmd}")), "{help}");
    }
}

#[test]
fn a_missing_root_is_a_clear_error() {
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["inspect", "--root", "/no/such/iolab/root"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("/no/such/iolab/root is not a snapshot or machine root (no such directory)"),
        "{err}"
    );
}

/// A command line that cannot mean anything exits 2, as clap's own usage errors do, whether
/// clap or iolab finds the fault, so a script tells misuse from a command that failed; and
/// the message says what is wrong. None of these reads or writes anything first.
#[test]
fn misuse_exits_2_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/scheduler_seq_read.toml"
    );
    let cases: &[(&[&str], &str)] = &[
        (
            &["compare", "1", "2", "--min-effect=-5", "--db", db],
            "a percentage of 0 or more",
        ),
        (
            &[
                "report",
                "1",
                "-o",
                "r.html",
                "--min-effect",
                "x",
                "--db",
                db,
            ],
            "a percentage",
        ),
        (
            &["report", "1", "-o", "r.txt", "--db", db],
            "the report is an HTML page",
        ),
        (
            &["plot", "1", "--kind", "bars", "-o", "p.txt", "--db", db],
            "must end in .svg or .png",
        ),
        (
            &[
                "plot", "1", "--kind", "bars", "-o", "p.svg", "--with", "2", "--db", db,
            ],
            "--with does nothing for --kind bars",
        ),
        (
            &[
                "plot", "1", "--kind", "lines", "-o", "p.svg", "--with", "1", "--db", db,
            ],
            "experiment 1 is already on the chart",
        ),
        (
            &[
                "plot", "1", "--kind", "lines", "-o", "p.svg", "--with", "2", "--with", "2",
                "--db", db,
            ],
            "experiment 2 is already on the chart",
        ),
        (&["irq", "plan", "--heavy=-1"], "a rate above 0"),
        (&["irq", "plan", "--heavy", "0"], "a rate above 0"),
        (&["irq", "plan", "--min-gain", "100"], "from 0 to under 100"),
        (
            &["irq", "plan", "--ban-cpus", "x"],
            "--ban-cpus: `x` is not a CPU list",
        ),
        (
            &["irq", "plan", "--root", "/", "--over", "1s"],
            "cannot be used with",
        ),
        (
            &["irq", "apply", "--plan", "p.json", "--heavy", "5"],
            "cannot be used with",
        ),
        (&["irq", "top", "-n", "0"], "0 is not in 1.."),
        (&["irq", "top", "--limit", "0"], "0 is not in 1.."),
        (
            &[
                "irq",
                "daemon",
                "--min-interval",
                "5s",
                "--max-interval",
                "2s",
            ],
            "--min-interval must not be longer",
        ),
        (
            &["import", "x.json", "--tag", "BAD", "--db", db],
            "is not NAME=VALUE",
        ),
        (
            &[
                "import", "x.json", "--tag", "a=1", "--tag", "a=2", "--db", db,
            ],
            "--tag a is given twice (a=1 and a=2)",
        ),
        (
            &[
                "run",
                example,
                "--dry-run",
                "--tag",
                "v=1",
                "--tag",
                "v=2",
                "--db",
                db,
            ],
            "--tag v is given twice",
        ),
        (
            &["run", example, "--dry-run", "--tag", "kernel=6", "--db", db],
            "this machine's running kernel",
        ),
        (
            &["run", example, "--dry-run", "--copy-binary", "--db", db],
            "--copy-binary acts on the hosts of [[target.host]] tables",
        ),
        (
            &["hosts", "check", "h1", "--remote-dir", "rel/bin"],
            "`rel/bin` is relative",
        ),
        (
            &[
                "run",
                example,
                "--dry-run",
                "--tag",
                "scheduler=x",
                "--db",
                db,
            ],
            "scheduler is a factor of",
        ),
    ];
    for (args, why) in cases {
        let out = Command::cargo_bin("iolab")
            .unwrap()
            .current_dir(dir.path())
            .args(*args)
            .timeout(std::time::Duration::from_secs(20))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
    assert!(
        !dir.path().join("r.db").exists(),
        "a refused command created the database"
    );
}

#[test]
fn each_cause_of_an_error_is_printed_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-plan.json");
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["irq", "apply", "--plan", missing.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    assert!(err.contains("no-such-plan.json"), "{err}");
}

#[test]
fn sampling_times_are_bounded() {
    for args in [
        vec!["preflight", "--sample-ms", "18446744073709551615"],
        vec!["preflight", "--sample-ms", "0"],
        vec!["run", "x.toml", "--sample-ms", "99999999999"],
    ] {
        let out = Command::cargo_bin("iolab")
            .unwrap()
            .args(&args)
            .timeout(std::time::Duration::from_secs(10))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains("--sample-ms"), "{err}");
    }
}

/// What would stop a run at the end of its preparations stops it before anything is made (a
/// results file that cannot be written), and its dry run too where the plan itself is wrong
/// (a --destructive-device that names no target, a device that does not exist: the message
/// lists those that do).
#[test]
fn a_run_and_its_dry_run_refuse_what_would_stop_it_later() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_db = dir.path().join("notes.db");
    std::fs::write(&not_a_db, "not sqlite\n").unwrap();
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/scheduler_seq_read.toml"
    );
    let gone = dir.path().join("gone/r.db");
    let (gone, here, not_a_db) = (
        gone.to_str().unwrap(),
        dir.path().to_str().unwrap(),
        not_a_db.to_str().unwrap(),
    );
    let ok_db = dir.path().join("r.db");
    let ok_db = ok_db.to_str().unwrap();
    let scsi_hba = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/machines/scsi-hba"
    );
    // A dry run plans all the same (results may not be storable where one plans, on a
    // read-only root) and says the run would stop; the run stops before it makes anything.
    for (db, why) in [
        (gone, "the database cannot be written: its directory"),
        (here, "it is a directory; name a file in it"),
        (not_a_db, "notes.db"),
    ] {
        let out = Command::cargo_bin("iolab")
            .unwrap()
            .args(["run", example, "--dry-run", "--db", db])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{db}: {text}");
        assert!(
            text.contains("warning: the run would stop before it starts: ") && text.contains(why),
            "{db}: {text}"
        );
        // Scripts read it apart from the warnings: the plan is there, and why it would stop.
        let out = Command::cargo_bin("iolab")
            .unwrap()
            .args(["run", example, "--dry-run", "--json", "--db", db])
            .output()
            .unwrap();
        let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let stops = plan["would_stop"].as_array().expect("would_stop");
        assert!(
            stops.iter().any(|s| s.as_str().unwrap().contains(why)),
            "{db}: {plan}"
        );
        assert!(!plan.to_string().contains("would stop before"), "{plan}");
    }
    // A plan that would run has none.
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["run", example, "--dry-run", "--json", "--db", ok_db])
        .output()
        .unwrap();
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(plan.get("would_stop").is_none(), "{plan}");
    let cases: &[(&[&str], &str)] = &[
        (
            &["--db", gone],
            "the database cannot be written: its directory",
        ),
        (
            &[
                "--dry-run",
                "--db",
                ok_db,
                "--destructive-device",
                "/dev/nosuch",
            ],
            "--destructive-device /dev/nosuch: the run's target is a scratch device",
        ),
        (
            &["--db", ok_db, "--destructive-device", "/dev/nosuch"],
            "--destructive-device /dev/nosuch: the run's target is a scratch device",
        ),
        (
            &[
                "--dry-run",
                "--db",
                ok_db,
                "--device",
                "nosuch9",
                "--destructive-device",
                "nosuch8",
            ],
            "the run's target is nosuch9, not nosuch8",
        ),
        (
            &["--dry-run", "--db", ok_db, "--device", "nosuch9"],
            "/dev/nosuch9: no such block device on ",
        ),
        // A snapshot without a loop device: the fix is --device there, not `modprobe loop`.
        (
            &["--dry-run", "--db", ok_db, "--root", scsi_hba],
            "the machine read from --root has no loop device to model the scratch target on: \
             name one of its devices with --device",
        ),
    ];
    for (extra, why) in cases {
        let out = Command::cargo_bin("iolab")
            .unwrap()
            .args(["run", example])
            .args(*extra)
            .env("IOLAB_STATE_DIR", dir.path().join("state"))
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {err}");
        assert!(err.contains(why), "{extra:?}: {err}");
        // Refused before a scratch device was made, or anything written.
        assert!(!err.contains("target: scratch device"), "{extra:?}: {err}");
        assert!(!dir.path().join("r.db").exists(), "{extra:?}");
    }
}

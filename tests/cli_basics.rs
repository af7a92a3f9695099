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
    assert!(err.contains("/no/such/iolab/root"), "{err}");
}

#[test]
fn each_cause_of_an_error_is_printed_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-root");
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["inspect", "--root", missing.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    assert!(err.contains("no-such-root"), "{err}");
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

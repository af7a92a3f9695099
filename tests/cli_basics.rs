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
    assert!(text.contains("inspect"), "{text}");
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

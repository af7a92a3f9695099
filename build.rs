//! Puts the commit iolab was built from into `--version` (`iolab 0.1.0 (commit 1a2b3c4d5e6f)`),
//! where the source is a git checkout and git is installed; a build from a source tarball
//! says the version alone.

use std::process::Command;

fn main() {
    let version = env!("CARGO_PKG_VERSION");
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let text = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(commit) => format!("{version} (commit {commit})"),
        None => version.to_string(),
    };
    println!("cargo:rustc-env=IOLAB_VERSION={text}");
    // Rebuild the version text when HEAD moves (a commit, a checkout), not on every edit.
    // Only paths that exist are watched: cargo takes a missing one as changed on every build,
    // and a repository whose refs were never packed has no `packed-refs`. The branch's
    // directory is watched rather than its file, so a commit after `git gc` (which packs the
    // branch and removes its file) is seen too. `--git-path` finds each where git keeps it,
    // in a linked worktree too.
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some((dir, _)) = branch.rsplit_once('/') {
            watched.push(dir.to_string());
        }
    }
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
            if std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}

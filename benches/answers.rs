//! How long `show`, `compare` and `report` take on a database of 10,000 runs (issue 4 asks
//! for "well under a few seconds"). Builds the database once through the store API (two
//! 3x3 experiments, two kernels, ~556 repetitions per cell: 10,008 runs with 9 metrics each),
//! then runs the real `iolab` binary several times per command and prints min/median/max
//! wall-clock times, and the mean CPU time per run (user + system, all threads).
//!
//! `cargo bench --bench answers` (release build). Options after `--`:
//! `--reps N` (repetitions per cell, default 556), `--keep DIR` (build the database in DIR
//! and keep it), `--rounds N` (timed runs per command, default 5), `--rich` (store samples and fio json+
//! output with every run, as the tests do).

#[path = "../tests/answers_db.rs"]
mod answers_db;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// CPU seconds (user + system) used so far by finished child processes: unlike wall-clock
/// time, it does not grow when other work shares the machine's cores.
fn children_cpu_s() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes into the struct we pass.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn main() {
    let mut reps = 556u32;
    let mut rounds = 5usize;
    let mut keep: Option<PathBuf> = None;
    let mut rich = false;
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if !argv.iter().any(|a| a == "--bench") {
        // `cargo test --all-targets` runs this without --bench (and unoptimised): a smoke
        // run on a small database that checks every command works, not a measurement.
        reps = 3;
        rounds = 1;
    }
    let mut args = argv.into_iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--reps" => reps = args.next().and_then(|v| v.parse().ok()).expect("--reps N"),
            "--rounds" => {
                rounds = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--rounds N")
            }
            "--rich" => rich = true,
            "--keep" => keep = Some(PathBuf::from(args.next().expect("--keep DIR"))),
            _ => {} // --bench: passed by cargo bench
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = keep.unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("bench.db");
    let _ = std::fs::remove_file(&db);
    let t = Instant::now();
    let store = answers_db::two_kernels(&db, reps, rich);
    let runs = store.select_runs(&[]).unwrap().len();
    drop(store);
    println!(
        "built {} with {runs} runs in {:.1} s",
        db.display(),
        t.elapsed().as_secs_f64()
    );
    let bin = env!("CARGO_BIN_EXE_iolab");
    let report = dir.join("report.html");
    let report_s = report.to_str().unwrap();
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("show 1 (default metrics)", vec!["show", "1"]),
        ("show 1 --json", vec!["show", "1", "--json"]),
        ("compare 1 2 (default metrics)", vec!["compare", "1", "2"]),
        (
            "compare kernel=6.1 kernel=6.6",
            vec![
                "compare",
                "kernel=6.1",
                "kernel=6.6",
                "--metric",
                "read_iops",
            ],
        ),
        (
            "report 1 -o report.html",
            vec!["report", "1", "-o", report_s],
        ),
    ];
    println!(
        "{:<34} {:>8} {:>8} {:>8} {:>8}",
        "command", "min s", "median s", "max s", "cpu s"
    );
    for (name, argv) in cases {
        let mut times: Vec<Duration> = Vec::new();
        let cpu0 = children_cpu_s();
        for _ in 0..rounds {
            let t = Instant::now();
            let out = Command::new(bin)
                .args(&argv)
                .arg("--db")
                .arg(&db)
                .output()
                .unwrap();
            times.push(t.elapsed());
            assert!(
                out.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let cpu = (children_cpu_s() - cpu0) / rounds as f64;
        times.sort();
        println!(
            "{:<34} {:>8.3} {:>8.3} {:>8.3} {:>8.3}",
            name,
            times[0].as_secs_f64(),
            times[times.len() / 2].as_secs_f64(),
            times[times.len() - 1].as_secs_f64(),
            cpu
        );
    }
}

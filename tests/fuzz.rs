//! Bad input never panics, hangs or exhausts memory: a seeded pseudo-random mutator (a
//! xorshift, so every failure is reproducible from the printed case) over the example
//! experiment files and over command lines, each case run through the built binary with a
//! time limit. Errors are fine; exit code 101 (a Rust panic), death by a signal (an abort on
//! allocation failure, a crash) or running past the limit fail the test. Values aimed at the
//! bugs of issue #10: durations, intervals, sizes, level counts, numbers like -1, 0, nan, inf,
//! 1e30, huge strings, unicode and NUL bytes.

use std::path::PathBuf;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(10);

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Values for flags and keys. No valid duration in here is longer than 10 ms, so a flag that
/// sleeps for its value (`irq top --interval`) cannot make a case slow by being accepted.
fn values() -> Vec<String> {
    let mut v: Vec<String> = [
        "-1",
        "0",
        "nan",
        "NaN",
        "inf",
        "-inf",
        "infinity",
        "1e30",
        "1e-9",
        "1e400",
        "2e10",
        "18446744073709551616",
        "-9223372036854775809",
        "4294967296",
        "1ms",
        "10ms",
        "0.01",
        "5e-3",
        "31d",
        "100000000000d",
        "100000000000000000000000000d",
        "-4s",
        "",
        " ",
        "\u{663}s",
        "5 s",
        "ünïcødé",
        "\u{202e}abc",
        "x=y",
        "=",
        "a=",
        "0x10",
        "1k",
        "1P",
        "99999999999999999999G",
        "-5G",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push("9".repeat(5000));
    v.push("x".repeat(100_000));
    v
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs one case; panics with the case when iolab panicked, died by a signal or hung.
fn check(case: &str, args: &[&str]) {
    let r = crate::common::run_within(crate::common::iolab().args(args), LIMIT);
    let short: String = case.chars().take(300).collect();
    assert!(!r.timed_out, "case {short}: still running after {LIMIT:?}");
    assert_eq!(
        r.signal, None,
        "case {short}: killed by signal\n{}",
        r.stderr
    );
    assert_ne!(r.code, Some(101), "case {short}: panicked\n{}", r.stderr);
    assert!(
        !r.stderr.contains("panicked"),
        "case {short}: panicked\n{}",
        r.stderr
    );
}

/// One mutation of an experiment file's bytes.
fn mutate(rng: &mut Rng, text: &str, values: &[String]) -> Vec<u8> {
    let lines: Vec<&str> = text.lines().collect();
    match rng.below(6) {
        // A value replaced by a nasty one, quoted or bare.
        0 | 1 => {
            let at = rng.below(lines.len());
            let mut out = String::new();
            for (i, line) in lines.iter().enumerate() {
                match line.split_once('=') {
                    Some((key, _)) if i == at => {
                        let v = rng.pick(values);
                        if rng.below(2) == 0 {
                            out += &format!("{key}= \"{}\"\n", v.replace(['\\', '"'], ""));
                        } else {
                            out += &format!("{key}= {v}\n");
                        }
                    }
                    _ => out += &format!("{line}\n"),
                }
            }
            out.into_bytes()
        }
        // fio time options with bad times.
        2 => {
            let key = *rng.pick(&["runtime", "ramp_time"]);
            let v = rng.pick(values).replace('"', "");
            let text = text.replace("[workload]", &format!("[workload]\n{key} = \"{v}\""));
            text.replace("runtime = ", "# runtime = ").into_bytes()
        }
        // Many factors with many levels: the matrix explodes.
        3 => {
            let factors = 1 + rng.below(5);
            let levels = 1 + rng.below(2000);
            let mut out: String = text
                .lines()
                .take_while(|l| !l.starts_with("[factors]"))
                .map(|l| format!("{l}\n"))
                .collect();
            out += "[factors]\n";
            for name in ["bs", "iodepth", "numjobs", "offset", "size"]
                .iter()
                .take(factors)
            {
                let list: Vec<String> = (1..=levels).map(|i| format!("\"{i}k\"")).collect();
                out += &format!("{name} = [{}]\n", list.join(","));
            }
            out.into_bytes()
        }
        // Random bytes, including NUL, invalid UTF-8 and TOML punctuation.
        4 => {
            let mut bytes = text.as_bytes().to_vec();
            let alphabet = b"\0\xff\xc3=[]{}\"'\n#.-+eE0123456789,";
            for _ in 0..1 + rng.below(8) {
                let at = rng.below(bytes.len());
                bytes[at] = *rng.pick(alphabet);
            }
            bytes
        }
        // Cut anywhere.
        _ => text.as_bytes()[..rng.below(text.len() + 1)].to_vec(),
    }
}

#[test]
fn mutated_experiment_files_and_command_lines_never_panic_hang_or_abort() {
    let started = std::time::Instant::now();
    let values = values();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let dir = tempfile::tempdir().unwrap();
    let examples: Vec<(PathBuf, String)> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect();
    assert!(examples.len() >= 4);

    // Experiment files through `run --dry-run`.
    let file = dir.path().join("case.toml");
    let unused_db = dir.path().join("unused.db");
    for case in 0..200 {
        let (path, text) = rng.pick(&examples);
        let bytes = mutate(&mut rng, text, &values);
        std::fs::write(&file, &bytes).unwrap();
        let shown = format!(
            "experiment #{case} from {}: {}",
            path.display(),
            String::from_utf8_lossy(&bytes)
        );
        check(
            &shown,
            &[
                "run",
                file.to_str().unwrap(),
                "--dry-run",
                "--db",
                unused_db.to_str().unwrap(),
            ],
        );
    }
    assert!(!unused_db.exists(), "a dry run created the database");

    // Command lines, against a small database and the fixture trace and machines.
    let db = dir.path().join("r.db");
    let fio = root().join("tests/fixtures/fio/client_randread_2jobs_json.out");
    let fio = fio.to_str().unwrap().to_string();
    let db_s = db.to_str().unwrap().to_string();
    check("setup import", &["import", "--db", &db_s, &fio]);
    assert!(db.exists());
    let trace = root().join("tests/fixtures/trace/fx.bin");
    let trace = trace.to_str().unwrap().to_string();
    let machine = root().join("tests/fixtures/machines/two-node-nvme");
    let machine = machine.to_str().unwrap().to_string();
    let example = examples[0].0.to_str().unwrap().to_string();
    let out = dir.path().join("out");
    let out = out.to_str().unwrap().to_string();
    let svg = format!("{out}.svg");
    let templates: Vec<Vec<&str>> = vec![
        vec!["trace", "analyze", &trace, "--interval", "V"],
        vec!["trace", "record", "-d", "nosuchdisk0", "--duration", "V"],
        vec!["trace", "record", "-d", "V", "--duration", "V"],
        vec!["trace", "record", "-d", "nosuchdisk0", "--buffer-kb", "V"],
        vec!["show", "V", "--db", &db_s],
        vec!["show", "1", "--db", &db_s, "--metric", "V"],
        vec!["show", "1", "--db", &db_s, "--rows", "V", "--cols", "V"],
        vec!["runs", "V", "--db", &db_s],
        vec!["compare", "V", "experiment=1", "--db", &db_s],
        vec![
            "compare",
            "experiment=1",
            "experiment=1",
            "--db",
            &db_s,
            "--min-effect",
            "V",
        ],
        vec![
            "compare",
            "experiment=1",
            "V",
            "--db",
            &db_s,
            "--better",
            "V",
        ],
        vec!["plot", "1", "--db", &db_s, "--kind", "V", "-o", &svg],
        vec!["plot", "V", "--db", &db_s, "--kind", "bars", "-o", &svg],
        vec!["run", &example, "--dry-run", "--tag", "V"],
        vec!["run", &example, "--dry-run", "--sample-ms", "V"],
        vec!["run", &example, "--dry-run", "--device", "V"],
        vec!["import", "--db", &db_s, "--tag", "V", &fio],
        vec!["inspect", "--root", &machine, "--interval", "V"],
        vec!["irq", "plan", "--root", &machine, "--over", "V"],
        vec![
            "irq",
            "plan",
            "--root",
            &machine,
            "--heavy",
            "V",
            "--min-gain",
            "V",
        ],
        vec!["irq", "top", "--interval", "V", "-n", "V"],
        vec!["snapshot", "-o", &out, "--interval", "V"],
    ];
    for case in 0..150 {
        let template = rng.pick(&templates);
        let args: Vec<String> = template
            .iter()
            .map(|a| {
                if *a == "V" {
                    rng.pick(&values).clone()
                } else {
                    a.to_string()
                }
            })
            .collect();
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.chars().take(40).collect::<String>())
            .collect();
        check(&format!("command #{case}: {shown:?}"), &refs);
        let _ = std::fs::remove_dir_all(&out);
    }
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "the fuzz cases took {:?}",
        started.elapsed()
    );
}

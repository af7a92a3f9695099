//! What watching costs: fio's IOPS under `iolab run` (sampler thread, knob journal, store)
//! against the very same fio job run alone, on one scratch loop device, in interleaved pairs
//! whose order is shuffled so drift on a busy machine lands on both sides. Prints both sets,
//! and the change with its confidence interval from `stats::compare` (the issue asks for
//! "within 1%": the interval should sit inside -1%..+1%).
//!
//! Needs root and fio. `cargo bench --bench sampler_overhead [-- PAIRS [RUNTIME_S]]`
//! (defaults: 10 pairs of 3 s runs, about 1.5 minutes; under `cargo test`, 2 pairs of 1 s).

use std::path::PathBuf;
use std::process::Command;

use iolab::experiment::{self, plan::SplitMix64};
use iolab::stats::{compare, CompareOptions};
use iolab::workload::{FioRunner, FioStatus, RealFio};

fn main() {
    if !iolab::sys::is_root() {
        eprintln!("sampler_overhead: needs root (it creates a scratch loop device)");
        return;
    }
    let argv: Vec<String> = std::env::args().skip(1).collect();
    // `cargo test --all-targets` runs this without --bench: a smoke run that checks the
    // plumbing, not a measurement.
    let smoke = !argv.iter().any(|a| a == "--bench");
    let args: Vec<&String> = argv.iter().filter(|a| *a != "--bench").collect();
    let (default_pairs, default_runtime) = if smoke { (2, 1) } else { (10, 3) };
    let pairs: usize = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(default_pairs);
    let runtime: u32 = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default_runtime);

    let work = tempfile::tempdir().expect("temp dir");
    let state = work.path().join("state");
    let dev = iolab::target::ScratchDevice::create_in(&state, 256 << 20).expect("scratch device");
    let text = format!(
        "name = \"sampler overhead\"\nrepetitions = 1\n[target]\ndevice = \"{}\"\n\
         [workload]\nrw = \"randread\"\nbs = \"4k\"\nioengine = \"psync\"\ndirect = 1\n\
         ramp_time = \"1s\"\nruntime = \"{runtime}s\"\ntime_based = true\n",
        dev.name()
    );
    let file = work.path().join("overhead.toml");
    std::fs::write(&file, &text).expect("experiment file");
    let exp = experiment::parse("overhead.toml", &text).expect("valid experiment");
    let job = experiment::cells(&exp)[0]
        .job(&exp, &dev.dev_path(), None)
        .expect("job");
    let iolab = PathBuf::from(env!("CARGO_BIN_EXE_iolab"));

    let alone_once = || -> f64 {
        let out = RealFio::default().run(&job).expect("fio runs");
        assert_eq!(out.status, FioStatus::Success, "{}", out.stderr);
        out.report
            .expect("fio report")
            .total(iolab::workload::Dir::Read)
            .iops
    };
    let mut db_n = 0;
    let mut under_once = || -> f64 {
        db_n += 1;
        let out = Command::new(&iolab)
            .args(["run", "--json", "--db"])
            .arg(work.path().join(format!("r{db_n}.db")))
            .arg(&file)
            .env("IOLAB_STATE_DIR", &state)
            .output()
            .expect("iolab runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        doc["cells"][0]["runs"][0]
            .as_array()
            .and_then(|m| {
                m.iter()
                    .find(|p| p[0] == "read_iops")
                    .and_then(|p| p[1].as_f64())
            })
            .expect("read_iops in the run")
    };

    let mut rng = SplitMix64::new(0x5eed);
    let (mut alone, mut under) = (Vec::new(), Vec::new());
    for i in 0..pairs {
        let iolab_first = rng.below(2) == 0;
        for first in [true, false] {
            if first == iolab_first {
                under.push(under_once());
            } else {
                alone.push(alone_once());
            }
        }
        eprintln!(
            "pair {}/{pairs}: fio alone {:.0} IOPS, under iolab {:.0} IOPS",
            i + 1,
            alone[i],
            under[i]
        );
    }
    let c = compare(
        &alone,
        &under,
        &CompareOptions::for_metric("read_iops").expect("known metric"),
    )
    .expect("comparison");
    let fmt = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!("fio alone   (IOPS): {}", fmt(&alone));
    println!("under iolab (IOPS): {}", fmt(&under));
    println!(
        "median alone {:.0}, under iolab {:.0}; change {} (95% CI {} .. {}), verdict {}",
        c.baseline.median,
        c.candidate.median,
        c.change_pct.map_or("n/a".into(), |p| format!("{p:+.2}%")),
        c.ci_low_pct.map_or("n/a".into(), |p| format!("{p:+.2}%")),
        c.ci_high_pct.map_or("n/a".into(), |p| format!("{p:+.2}%")),
        c.verdict.as_str()
    );
    println!("{}", c.explanation);

    // The direct cost, immune to a noisy neighbour: CPU time of one reading of
    // /proc/interrupts, /proc/stat and /proc/diskstats, as the sampler thread takes it.
    let mut reader =
        iolab::sample::Reader::new(iolab::sys::SysRoot::live(), vec![dev.name().to_string()]);
    let n = 500;
    let cpu0 = thread_cpu_ns();
    for i in 0..n {
        reader.read(i).expect("reading");
    }
    let per_reading_us = (thread_cpu_ns() - cpu0) as f64 / n as f64 / 1e3;
    println!(
        "one sampler reading: {per_reading_us:.0} us of CPU; at the default 1 s interval that is \
         {:.3}% of one CPU",
        per_reading_us / 1e6 * 100.0
    );
}

/// CPU time this thread has used, in ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe {
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

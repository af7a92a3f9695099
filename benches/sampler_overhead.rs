//! What watching costs: fio's IOPS under `iolab run` (sampler thread, knob journal, store)
//! against the very same fio job run alone, on one scratch loop device, in interleaved pairs
//! whose order within each pair is shuffled. The change is judged per pair (the log of each
//! pair's ratio, Student's t interval), because on a shared VM most of the noise is drift that
//! moves both members of a pair; the issue asks for "within 1%": the interval must sit inside
//! -1%..+1%. The unpaired comparison of the same runs is printed too, for contrast.
//!
//! It also measures the cost directly: iolab's own CPU time (all its threads, not fio's)
//! while it runs fio, and one sampler reading's CPU time.
//!
//! The job is 4k random reads through io_uring at depth 32, one job per CPU: every CPU is
//! busy, so whatever CPU iolab takes is taken from fio (the worst case for overhead), and the
//! IOPS are unimodal (a single psync job on a loop device lands in one of two modes, depending
//! on where the scheduler puts fio relative to the loop worker, which swamps a 1% question).
//!
//! Needs root and fio. `cargo bench --bench sampler_overhead [-- PAIRS [RUNTIME_S]]`
//! (defaults: 40 pairs of 10 s runs, about 16 minutes; under `cargo test`, 2 pairs of 1 s).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use iolab::experiment::{self, plan::SplitMix64};
use iolab::stats::{compare, paired_change, CompareOptions};
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
    let (default_pairs, default_runtime) = if smoke { (2, 1) } else { (40, 10) };
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
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let text = format!(
        "name = \"sampler overhead\"\nrepetitions = 1\n[target]\ndevice = \"{}\"\n\
         [workload]\nrw = \"randread\"\nbs = \"4k\"\nioengine = \"io_uring\"\n\
         iodepth = 32\nnumjobs = {cpus}\ndirect = 1\n\
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
    // iolab's own CPU ticks (utime + stime of all its threads; fio is a separate process)
    // and the wall time they were spent in.
    let (mut iolab_ticks, mut iolab_wall) = (0u64, Duration::ZERO);
    let mut under_once = || -> f64 {
        db_n += 1;
        let started = Instant::now();
        let mut child = Command::new(&iolab)
            .args(["run", "--json", "--db"])
            .arg(work.path().join(format!("r{db_n}.db")))
            .arg(&file)
            .env("IOLAB_STATE_DIR", &state)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("iolab starts");
        // Its counters vanish when it exits: keep the last look, taken every half second
        // (a look costs this bench, not iolab, a few microseconds).
        let stat = format!("/proc/{}/stat", child.id());
        let mut last = 0;
        while child.try_wait().expect("wait").is_none() {
            if let Some(t) = process_cpu_ticks(&stat) {
                last = t;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        iolab_ticks += last;
        iolab_wall += started.elapsed();
        let out = child.wait_with_output().expect("iolab output");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        doc["cells"][0]["runs"][0]["read_iops"]
            .as_f64()
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
            "pair {}/{pairs}: fio alone {:.0} IOPS, under iolab {:.0} IOPS ({} first)",
            i + 1,
            alone[i],
            under[i],
            if iolab_first { "iolab" } else { "fio alone" }
        );
    }
    let fmt = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!("fio alone   (IOPS): {}", fmt(&alone));
    println!("under iolab (IOPS): {}", fmt(&under));
    let pct = |p: Option<f64>| p.map_or("n/a".into(), |p| format!("{p:+.2}%"));
    let c = compare(
        &alone,
        &under,
        &CompareOptions::new(
            iolab::metrics::READ_IOPS
                .direction
                .expect("read_iops has a direction"),
        ),
    )
    .expect("comparison");
    println!(
        "unpaired: median alone {:.0}, under iolab {:.0}; change {} (95% CI {} .. {})",
        c.baseline.median,
        c.candidate.median,
        pct(c.change_pct),
        pct(c.ci_low_pct),
        pct(c.ci_high_pct),
    );
    let p = paired_change(&alone, &under, 0.95).expect("paired change");
    println!(
        "paired over {} pairs: change {:+.2}% (95% CI {:+.2}% .. {:+.2}%): {}",
        p.pairs,
        p.change_pct,
        p.ci_low_pct,
        p.ci_high_pct,
        if p.within(1.0) {
            "within 1% of fio alone"
        } else {
            "NOT shown to be within 1% (more pairs, or a quieter machine)"
        }
    );
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    println!(
        "iolab's own CPU while running fio: {:.2} s over {:.0} s of runs = {:.3}% of one CPU \
         (tick resolution {:.0} ms)",
        iolab_ticks as f64 / hz,
        iolab_wall.as_secs_f64(),
        iolab_ticks as f64 / hz / iolab_wall.as_secs_f64() * 100.0,
        1000.0 / hz
    );

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

/// utime + stime, in clock ticks, of every thread of the process whose `stat` file this is.
fn process_cpu_ticks(stat: &str) -> Option<u64> {
    let text = std::fs::read_to_string(stat).ok()?;
    // Fields after the parenthesised command name, which may itself hold spaces.
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
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

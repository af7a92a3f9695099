//! fio output parsing against real fio 3.33 outputs captured on a scratch loop device over
//! /dev/shm (json and json+, read/write/randrw, numjobs=2, a hipri run failing with error 95,
//! a status-interval run, and a client/server run over 127.0.0.1).

use std::collections::BTreeMap;
use std::path::PathBuf;

use iolab::workload::fio_json::{self, Dir, PercentileSource};

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fio")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn metrics(name: &str) -> BTreeMap<String, f64> {
    fio_json::parse(&fixture(name))
        .unwrap()
        .metrics()
        .into_iter()
        .collect()
}

#[test]
fn single_job_json_gives_fios_own_figures() {
    let r = fio_json::parse(&fixture("randread_1job_json.out")).unwrap();
    assert_eq!(r.version.as_deref(), Some("fio-3.33"));
    assert_eq!(r.jobs.len(), 1);
    assert!(r.first_error().is_none());
    let m: BTreeMap<String, f64> = r.metrics().into_iter().collect();
    assert_eq!(m["read_iops"], 137647.176412);
    assert_eq!(m["read_bw_mbs"], 563.802834);
    assert!((m["read_clat_mean_us"] - 111.916424776).abs() < 1e-9);
    assert_eq!(m["read_clat_p50_us"], 67.072);
    assert_eq!(m["read_clat_p99_us"], 1728.512);
    assert_eq!(m["read_clat_p999_us"], 4685.824);
    assert_eq!(m["read_clat_max_us"], 8296.644);
    assert_eq!(m["write_iops"], 0.0);
    assert!(!m.contains_key("write_clat_mean_us"));
    assert_eq!(m["fio_usr_pct"], 8.65);
    assert_eq!(m["fio_sys_pct"], 43.2);
    let c = r.total(Dir::Read).clat.unwrap();
    assert_eq!(c.percentile_source, PercentileSource::SingleJob);
}

/// The percentile rule applied to fio's own bins must reproduce every percentile fio printed:
/// this is what makes merged percentiles trustworthy.
#[test]
fn percentiles_from_bins_reproduce_fio_exactly() {
    for name in [
        "randread_2jobs_jsonplus.out",
        "randrw_2jobs_jsonplus.out",
        "write_1job_jsonplus.out",
        "client_randread_2jobs_jsonplus.out",
    ] {
        let r = fio_json::parse(&fixture(name)).unwrap();
        let mut checked = 0;
        for job in &r.jobs {
            for dir in [&job.read, &job.write] {
                let Some(bins) = &dir.clat.bins else { continue };
                for &(pct, ns) in &dir.clat.percentiles {
                    let ours = iolab::stats::histogram::percentile_of(bins, pct).unwrap();
                    assert_eq!(ours as f64, ns, "{name} {} p{pct}", job.name);
                    checked += 1;
                }
            }
        }
        assert!(checked >= 17, "{name}: only {checked} percentiles checked");
    }
}

#[test]
fn two_jobs_with_bins_merge_exactly_and_sum_throughput() {
    let r = fio_json::parse(&fixture("randread_2jobs_jsonplus.out")).unwrap();
    assert_eq!(r.jobs.len(), 2);
    let t = r.total(Dir::Read);
    let iops: f64 = r.jobs.iter().map(|j| j.read.iops).sum();
    assert_eq!(t.iops, iops);
    let c = t.clat.unwrap();
    assert_eq!(c.percentile_source, PercentileSource::MergedBins);
    let n: u64 = r.jobs.iter().map(|j| j.read.clat.samples).sum();
    assert_eq!(c.samples, n);
    let bins_total: u64 = r
        .jobs
        .iter()
        .flat_map(|j| j.read.clat.bins.as_ref().unwrap().values())
        .sum();
    assert_eq!(bins_total, n, "every completion is in a bin");
    // The merged median lies between the two jobs' medians.
    let p50 = |j: &fio_json::JobResult| {
        j.read
            .clat
            .percentiles
            .iter()
            .find(|p| p.0 == 50.0)
            .unwrap()
            .1
    };
    let (lo, hi) = (
        p50(&r.jobs[0]).min(p50(&r.jobs[1])),
        p50(&r.jobs[0]).max(p50(&r.jobs[1])),
    );
    assert!(c.percentiles[0].1 >= lo && c.percentiles[0].1 <= hi);
}

#[test]
fn two_jobs_without_bins_give_no_percentiles() {
    let m = metrics("randrw_2jobs_json.out");
    assert!(m["read_iops"] > 0.0 && m["write_iops"] > 0.0);
    assert!(m.contains_key("write_clat_mean_us"));
    assert!(!m.keys().any(|k| k.contains("_p50_") || k.contains("_p99")));
}

#[test]
fn randrw_jsonplus_metrics_snapshot() {
    let m: Vec<(String, f64)> = fio_json::parse(&fixture("randrw_2jobs_jsonplus.out"))
        .unwrap()
        .metrics();
    insta::assert_json_snapshot!("randrw_2jobs_jsonplus_metrics", m);
}

#[test]
fn write_only_job_has_write_latencies_and_zero_reads() {
    let m = metrics("write_1job_jsonplus.out");
    assert_eq!(m["read_iops"], 0.0);
    assert!(m["write_bw_mbs"] > 0.0);
    assert!(m["write_clat_p99_us"] >= m["write_clat_p50_us"]);
    assert!(!m.contains_key("read_clat_mean_us"));
}

#[test]
fn hipri_on_loop_reports_errno_95_after_a_warning_line() {
    let r = fio_json::parse(&fixture("hipri_loop_jsonplus.out")).unwrap();
    assert!(r.preamble.contains("err=95"), "{}", r.preamble);
    assert_eq!(r.first_error(), Some(("poll", 95)));
}

#[test]
fn status_interval_output_keeps_the_final_document() {
    let text = fixture("status_interval_json.out");
    let r = fio_json::parse(&text).unwrap();
    assert_eq!(r.documents, 4);
    // The documents are cumulative: the last one holds the most I/O.
    let first = fio_json::parse(
        text.split_inclusive('\n')
            .take(271)
            .collect::<String>()
            .as_str(),
    )
    .unwrap();
    assert!(r.jobs[0].read.total_ios > first.jobs[0].read.total_ios);
}

#[test]
fn client_mode_separates_all_clients_and_names_hosts() {
    for name in [
        "client_randread_2jobs_jsonplus.out",
        "client_randread_2jobs_json.out",
    ] {
        let r = fio_json::parse(&fixture(name)).unwrap();
        assert!(r.client_mode);
        assert_eq!(r.jobs.len(), 2, "{name}");
        assert!(r
            .jobs
            .iter()
            .all(|j| j.hostname.as_deref() == Some("127.0.0.1")));
        let all = r.all_clients.as_ref().expect("All clients entry");
        let summed = r.total(Dir::Read).iops;
        // fio's own sum is computed differently (from totals over its runtime): within 0.1%.
        assert!(
            (summed - all.read.iops).abs() / all.read.iops < 1e-3,
            "{summed} vs {}",
            all.read.iops
        );
    }
    let r = fio_json::parse(&fixture("client_randread_2jobs_jsonplus.out")).unwrap();
    let c = r.total(Dir::Read).clat.unwrap();
    assert_eq!(c.percentile_source, PercentileSource::MergedBins);
}

fn fio_available() -> bool {
    std::process::Command::new("fio")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// fio itself accepts the job files iolab writes (placement, polling on and off, overrides).
#[test]
fn fio_parses_generated_job_files() {
    use iolab::workload::JobBuilder;
    if !fio_available() {
        crate::common::skip("fio not on PATH");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let jobs = [
        JobBuilder::new("plain")
            .base([
                ("rw", "randread"),
                ("bs", "4k"),
                ("time_based", "1"),
                ("runtime", "1"),
            ])
            .filename("/dev/null"),
        JobBuilder::new("pinned polled")
            .base([("rw", "randread"), ("numjobs", "2")])
            .set("readwrite", "read")
            .filename("/dev/null")
            .cpus(&[0], true)
            .polling(true),
        JobBuilder::new("not polled")
            .base([("rw", "randread")])
            .filename("/dev/null")
            .polling(false),
    ];
    for (i, builder) in jobs.into_iter().enumerate() {
        let spec = builder.build().unwrap();
        let path = dir.path().join(format!("{i}.fio"));
        std::fs::write(&path, spec.job_file()).unwrap();
        let out = std::process::Command::new("fio")
            .arg("--parse-only")
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "fio rejected:\n{}\n{}",
            spec.job_file(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

mod real_fio {
    //! `RealFio` against real fio: on a file in a temp dir (no root needed) for cancellation
    //! and time limits, and on a scratch loop device over /dev/shm (root) for success and the
    //! not-applicable classification of polling on a device that cannot poll.

    use std::path::Path;
    use std::time::{Duration, Instant};

    use iolab::workload::{FioRunner, FioStatus, JobBuilder, RealFio};

    use super::fio_available;

    fn file_job(dir: &Path, runtime: &str) -> iolab::workload::JobSpec {
        JobBuilder::new("file")
            .cell_key("cell")
            .base([
                ("rw", "randread"),
                ("bs", "4k"),
                ("size", "8m"),
                ("ioengine", "psync"),
                ("time_based", "1"),
                ("runtime", runtime),
            ])
            .filename(dir.join("data").to_str().unwrap())
            .build()
            .unwrap()
    }

    #[test]
    fn cancel_stops_fio_gracefully_with_its_results() {
        if !fio_available() {
            crate::common::skip("fio not on PATH");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let fio = RealFio {
            work_dir: dir.path().to_path_buf(),
            ..RealFio::default()
        };
        let cancel = fio.cancel.clone();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1500));
            cancel.cancel();
        });
        let start = Instant::now();
        let out = fio.run(&file_job(dir.path(), "60")).unwrap();
        canceller.join().unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(out.status, FioStatus::Cancelled);
        assert!(out
            .command_line
            .contains("--output-format=json+ --eta=never"));
        assert!(out.job_file.contains("runtime=60"));
        // The job file is removed; only fio's data file stays in the directory.
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(left, ["data"]);
    }

    #[test]
    fn time_limit_kills_a_run_that_overstays() {
        if !fio_available() {
            crate::common::skip("fio not on PATH");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let fio = RealFio {
            work_dir: dir.path().to_path_buf(),
            time_limit: Some(Duration::from_secs(1)),
            ..RealFio::default()
        };
        let out = fio.run(&file_job(dir.path(), "60")).unwrap();
        match out.status {
            FioStatus::Crash { reason } => assert!(reason.contains("within 1 s"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_missing_fio_binary_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let fio = RealFio {
            program: "/nonexistent/fio".into(),
            work_dir: dir.path().to_path_buf(),
            ..RealFio::default()
        };
        let e = fio.run(&file_job(dir.path(), "1")).unwrap_err();
        assert!(format!("{e:#}").contains("/nonexistent/fio"));
    }

    #[test]
    fn loop_device_reads_succeed_and_polling_is_not_applicable() {
        if !iolab::sys::is_root() || !fio_available() {
            crate::common::skip("needs root and fio");
            return;
        }
        let Some(scratch) = crate::common::Scratch::new(64 << 20) else {
            crate::common::skip("no loop device available");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let fio = RealFio {
            work_dir: dir.path().to_path_buf(),
            time_limit: Some(Duration::from_secs(30)),
            ..RealFio::default()
        };
        let base = [
            ("rw", "randread"),
            ("bs", "4k"),
            ("direct", "1"),
            ("iodepth", "8"),
            ("time_based", "1"),
            ("runtime", "1"),
        ];
        let job = |polling: bool| {
            JobBuilder::new("loop")
                .base(base)
                .filename(&scratch.path())
                .cpus(&[0], false)
                .polling(polling)
                .build()
                .unwrap()
        };
        let ok = fio.run(&job(false)).unwrap();
        assert_eq!(ok.status, FioStatus::Success, "{}", ok.stderr);
        let m: std::collections::BTreeMap<String, f64> =
            ok.report.unwrap().metrics().into_iter().collect();
        assert!(m["read_iops"] > 100.0, "{m:?}");
        assert!(m.contains_key("read_clat_p99_us"));
        let polled = fio.run(&job(true)).unwrap();
        match polled.status {
            FioStatus::NotApplicable { errno: 95, reason } => {
                assert!(reason.contains("cannot poll"))
            }
            other => panic!("{other:?}\n{}", polled.stderr),
        }
    }
}

/// Replaying the real outputs classifies them as the real runner would.
#[test]
fn replay_of_real_outputs_is_classified() {
    use iolab::workload::{Canned, FioRunner, FioStatus, JobBuilder, ReplayFio};
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fio");
    let replay = ReplayFio::in_order([
        Canned::from_files(&dir.join("randread_2jobs_jsonplus"), 0).unwrap(),
        Canned::from_files(&dir.join("hipri_loop_jsonplus"), 1).unwrap(),
    ]);
    let job = |polling| {
        JobBuilder::new("rr")
            .base([("rw", "randread")])
            .filename("/dev/loop0")
            .polling(polling)
            .build()
            .unwrap()
    };
    let ok = replay.run(&job(false)).unwrap();
    assert_eq!(ok.status, FioStatus::Success);
    assert_eq!(ok.report.unwrap().jobs.len(), 2);
    let na = replay.run(&job(true)).unwrap();
    assert!(matches!(
        na.status,
        FioStatus::NotApplicable { errno: 95, .. }
    ));
    assert!(na.stderr.contains("Operation not supported"));
}

//! The metric names a run produces (the registry, `crate::metrics`), so an experiment file that
//! names a metric (the adaptive repetitions' `metric`) is checked before anything runs.

use std::sync::OnceLock;

use crate::experiment::{Experiment, Repetitions};
use crate::metrics::{FIO_READ_LIST, FIO_TRIM_LIST, FIO_WRITE_LIST};
use crate::workload::options;

/// Every listed metric name, in the registry's order: fio's (per direction), the sampler's,
/// the network engines', then a traced run's. A `command`'s are the file's own.
pub(crate) fn known() -> &'static [String] {
    static KNOWN: OnceLock<Vec<String>> = OnceLock::new();
    KNOWN.get_or_init(|| {
        crate::metrics::registry()
            .iter()
            .filter_map(crate::metrics::Metric::exact_name)
            .map(str::to_string)
            .collect()
    })
}

/// A known name, or a device's own `dev_*` or `trace_*` figure, `DEVICE:dev_*` (several
/// target devices, or devices stacked under one).
pub(crate) fn is_known(name: &str) -> bool {
    crate::metrics::exact(name).is_some()
}

/// Refuses an adaptive `metric` that is one direction's fio figure when a cell does no I/O
/// that way (`read_iops` of a `randwrite`): fio reports it as 0 there, a CI of zeros never
/// narrows, and the cell would run `max` times for nothing.
pub(crate) fn check_adaptive(exp: &Experiment) -> Result<(), String> {
    let Repetitions::Adaptive {
        metric: Some(metric),
        ..
    } = &exp.repetitions
    else {
        return Ok(());
    };
    if !exp.engine.engine().runs_job_file() {
        return Ok(());
    }
    let lists = [FIO_READ_LIST, FIO_WRITE_LIST, FIO_TRIM_LIST];
    let Some(way) = lists
        .iter()
        .position(|list| list.iter().any(|m| m.name == metric))
    else {
        return Ok(());
    };
    let cells = crate::experiment::plan::cells(exp);
    let without: Vec<String> = cells
        .iter()
        .filter(|cell| {
            let opts = cell.fio_options(exp);
            options::directions(opts.iter().map(|(n, v)| (n.as_str(), v.as_str())))
                .is_some_and(|d| !d[way])
        })
        .map(|cell| format!("cell {}", cell.key))
        .collect();
    let direction = ["read", "write", "trim"][way];
    let which = match without.len() {
        0 => return Ok(()),
        1 if cells.len() == 1 => "the workload does no".to_string(),
        n if n == cells.len() => "no cell does".to_string(),
        1 => format!("{} does no", without[0]),
        _ => format!("{} do no", crate::trace::capture::listed(&without)),
    };
    Err(format!(
        "repetitions: metric `{metric}` is a {direction} figure, and {which} {direction} I/O: \
         fio reports 0 there, whose confidence interval never narrows, so each such cell would \
         run its maximum of repetitions; name a figure every cell measures (without `metric`, \
         the total IOPS decides)"
    ))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::metrics::{names, Source};
    use crate::workload::fio_json;

    fn fixtures(area: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(area)
    }

    fn read(path: PathBuf) -> String {
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn adaptive(metric: &str, workload: &str, factors: &str) -> Result<(), String> {
        let text = format!(
            "name = \"t\"\nrepetitions = {{ target_ci = 0.05, metric = \"{metric}\" }}\n\
             [workload]\n{workload}\n[factors]\n{factors}\n"
        );
        check_adaptive(&crate::experiment::parse("t.toml", &text).unwrap())
    }

    #[test]
    fn an_adaptive_metric_of_a_direction_a_cell_does_not_do_is_refused() {
        let e = adaptive("write_iops", "rw = \"randread\"", "bs = [\"4k\", \"8k\"]").unwrap_err();
        assert!(
            e.contains("`write_iops` is a write figure, and no cell does write I/O"),
            "{e}"
        );
        let e = adaptive(
            "read_clat_p99_us",
            "bs = \"4k\"",
            "rw = [\"randread\", \"randwrite\"]",
        )
        .unwrap_err();
        assert!(e.contains("and cell rw=randwrite does no read I/O"), "{e}");
        assert!(!e.contains("rw=randread"), "{e}");
        // Figures every cell has, a mix, a verifying writer, another engine's figures.
        assert!(adaptive("read_iops", "rw = \"randrw\"", "bs = [\"4k\"]").is_ok());
        assert!(adaptive(
            "read_iops",
            "rw = \"write\"\nverify = \"crc32c\"",
            "bs = [\"4k\"]"
        )
        .is_ok());
        assert!(adaptive("dev_r_per_s", "rw = \"write\"", "bs = [\"4k\"]").is_ok());
        assert!(adaptive(
            "write_iops",
            "rw = \"randrw\"\nrwmixread = 100",
            "bs = [\"4k\"]"
        )
        .is_err());
    }

    /// Looks every recorded name up exactly and says which listed names of `source` no
    /// recorder gave: a name the registry does not know fails, and so does an entry nothing
    /// records (a metric renamed in the recorder and not here).
    fn check(source: Source, recorded: &BTreeSet<String>, never: &[&str]) {
        for name in recorded {
            assert!(is_known(name), "{name} is recorded but not in the registry");
        }
        let missing: Vec<&str> = names(source)
            .filter(|n| !recorded.contains(*n) && !never.contains(n))
            .collect();
        assert!(
            missing.is_empty(),
            "{source:?}: no recorder gave {missing:?}"
        );
    }

    /// fio's parser on every fixture, plus a report with all three directions.
    #[test]
    fn fio_records_only_listed_names() {
        let mut recorded = BTreeSet::new();
        let mut outputs: Vec<String> = std::fs::read_dir(fixtures("fio"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "out"))
            .map(read)
            .collect();
        assert!(outputs.len() >= 8);
        let pct = r#""percentile": {"50.000000": 1, "99.000000": 2, "99.900000": 3}"#;
        outputs.push(format!(
            r#"{{"jobs": [{{"jobname": "a", "usr_cpu": 1, "sys_cpu": 2,
            "read": {{"iops": 1, "total_ios": 3, "clat_ns": {{"N": 3, "mean": 1, {pct}}}}},
            "write": {{"iops": 1, "total_ios": 3, "clat_ns": {{"N": 3, "mean": 1}}}},
            "trim": {{"iops": 1, "total_ios": 3, "clat_ns": {{"N": 3, "mean": 1, {pct}}}}}}}]}}"#
        ));
        for text in &outputs {
            let report = fio_json::parse(text).unwrap();
            recorded.extend(report.metrics().into_iter().map(|(n, _)| n));
        }
        check(Source::Fio, &recorded, &[]);
        assert!(!is_known("read_iop"));
    }

    /// The sampler's summary of two real readings, as one target, as several (summed), with
    /// a device stacked under the target, and with a NIC as the target.
    #[test]
    fn the_sampler_records_only_listed_names() {
        use crate::sample::{summary, Reader};
        use crate::sys::SysRoot;
        let devices = vec!["nvme0n1".to_string(), "nvme1n1".to_string()];
        let machine = fixtures("machines").join("two-node-nvme");
        let reading = |root: PathBuf, at: u64| {
            Reader::new(SysRoot::at(root).unwrap(), devices.clone())
                .read(at)
                .unwrap()
        };
        let mut readings = [
            reading(machine.clone(), 0),
            reading(machine.join("later"), 2_000_000_000),
        ];
        // The fixture has no network interface: counters as a NIC target's would be.
        for (r, n) in readings.iter_mut().zip([1, 2]) {
            r.nics[0] = Some(crate::sample::reading::NicCounters {
                rx_bytes: 1000 * n,
                tx_bytes: 2000 * n,
                rx_packets: n,
                tx_packets: 2 * n,
            });
        }
        let summary = summary(&readings, &devices, &[vec![121, 122], vec![]]).unwrap();
        // Per second over the 2 s between the readings, MB of 10^6 bytes.
        let nic = &summary.devices["nvme0n1"];
        assert_eq!(nic["nic_rx_mb_per_s"], 1000.0 / 2.0 / 1e6);
        assert_eq!(nic["nic_tx_mb_per_s"], 2000.0 / 2.0 / 1e6);
        assert_eq!(nic["nic_rx_pkts_per_s"], 0.5);
        assert_eq!(nic["nic_tx_pkts_per_s"], 1.0);
        assert!(!summary.devices["nvme1n1"].contains_key("nic_rx_mb_per_s"));
        let outcome = crate::workload::FioOutcome::quiet_success();
        let stored = crate::experiment::run::stored::metrics;
        let mut recorded = BTreeSet::new();
        for (targets, stacked) in [
            (&devices[..1], &[][..]),
            (&devices[..], &[][..]),
            (&devices[..1], &devices[1..]),
        ] {
            let m = stored(&outcome, Some(&summary), targets, stacked);
            recorded.extend(m.into_iter().map(|(n, _)| n));
        }
        let mut nic = stored(&outcome, Some(&summary), &devices[..1], &[]);
        crate::experiment::run::stored::name_as_nic(&mut nic, &mut []);
        recorded.extend(nic.into_iter().map(|(n, _)| n));
        assert!(recorded.contains("nvme1n1:dev_r_per_s"), "{recorded:?}");
        // The fixture's devices did no writes: there is no write await to average.
        check(Source::Sampler, &recorded, &["dev_w_await_ms"]);
    }

    /// A block trace's analysis, for the traced device, for another one, and for both.
    #[test]
    fn a_trace_records_only_listed_names() {
        use crate::trace::analyze;
        let report =
            analyze::analyze_paths(&[fixtures("trace").join("fx")], analyze::Options::default())
                .unwrap();
        let summary = crate::trace::capture::Summary {
            devices: vec!["loop0".into()],
            files: Vec::new(),
            earlier_removed: Vec::new(),
            earlier_left: Vec::new(),
            events_per_cpu: Default::default(),
            events_per_device: Default::default(),
            processes: 0,
            overrun: 0,
            dropped: 0,
            missed: 0,
            foreign: 0,
            elapsed: std::time::Duration::ZERO,
            stopped_by: String::new(),
            command_status: None,
        };
        let mut recorded = BTreeSet::new();
        use crate::experiment::run::trace::{metrics, Traced};
        let (loop0, sda) = (Traced::new("loop0", "7:0"), Traced::new("sda", "8:0"));
        // One device, another, and both (the traced one's figures also as `loop0:...`).
        for devices in [vec![loop0.clone()], vec![sda.clone()], vec![loop0, sda]] {
            let m = metrics(&report, &devices, &summary);
            recorded.extend(m.into_iter().map(|(n, _)| n));
        }
        check(Source::Trace, &recorded, &[]);
    }

    /// iperf3's and sockperf's outputs.
    #[test]
    fn the_network_engines_record_only_listed_names() {
        use crate::workload::net::{iperf3_figures, sockperf_figures};
        let dir = fixtures("engines");
        let mut recorded = BTreeSet::new();
        for figures in [
            iperf3_figures(&read(dir.join("iperf3.json"))),
            sockperf_figures(&read(dir.join("sockperf-ping-pong.txt"))),
            sockperf_figures(&read(dir.join("sockperf-throughput.txt"))),
        ] {
            recorded.extend(figures.unwrap().metrics.into_iter().map(|(n, _)| n));
        }
        check(Source::Engine, &recorded, &[]);
    }
}

//! The metric names a run produces (docs/architecture.md), so an experiment file that names a
//! metric (the adaptive repetitions' `metric`) is checked before anything runs.

use std::sync::OnceLock;

/// From the sampler: system-wide figures over the run, and the target device's.
const SAMPLER_METRICS: &[&str] = &[
    "usr_pct",
    "sys_pct",
    "irq_pct",
    "softirq_pct",
    "iowait_pct",
    "idle_pct",
    "irq_per_s",
    "dev_irq_per_s",
    "dev_r_per_s",
    "dev_w_per_s",
    "dev_rrqm_per_s",
    "dev_wrqm_per_s",
    "dev_irq_per_io",
    "dev_rmb_per_s",
    "dev_wmb_per_s",
    "dev_avg_rq_kb",
    "dev_avg_qu_sz",
    "dev_r_await_ms",
    "dev_w_await_ms",
    "dev_util_pct",
];

/// Every metric name: fio's (per direction), the sampler's, the network engines', then a
/// traced run's.
pub fn known() -> &'static [String] {
    static KNOWN: OnceLock<Vec<String>> = OnceLock::new();
    KNOWN.get_or_init(|| {
        let mut names = Vec::new();
        for dir in ["read", "write", "trim"] {
            for suffix in [
                "iops",
                "bw_mbs",
                "clat_mean_us",
                "clat_p50_us",
                "clat_p99_us",
                "clat_p999_us",
                "clat_min_us",
                "clat_max_us",
                "clat_stddev_us",
            ] {
                names.push(format!("{dir}_{suffix}"));
            }
        }
        names.push("fio_usr_pct".to_string());
        names.push("fio_sys_pct".to_string());
        names.extend(SAMPLER_METRICS.iter().map(|s| s.to_string()));
        // The network engines' (`workload::net`); a `command`'s are the file's own.
        for list in [
            crate::workload::net::IPERF3_METRICS,
            crate::workload::net::SOCKPERF_METRICS,
        ] {
            names.extend(list.iter().map(|s| s.to_string()));
        }
        names.extend(
            super::run::trace::METRIC_NAMES
                .iter()
                .map(|s| s.to_string()),
        );
        names
    })
}

/// A known name, or a device's own `dev_*` figure, `DEVICE:dev_*` (several target devices,
/// or devices stacked under one).
pub fn is_known(name: &str) -> bool {
    let bare = match name.split_once(':') {
        Some((dev, m)) if !dev.is_empty() && m.starts_with("dev_") => m,
        _ => name,
    };
    known().iter().any(|k| k == bare)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::fio_json;

    /// Every name fio's parser emits is known here, so the two lists cannot drift apart.
    #[test]
    fn fio_metrics_are_all_known() {
        let out = r#"{"jobs": [{"jobname": "a", "usr_cpu": 1, "sys_cpu": 2,
            "read": {"iops": 1, "total_ios": 3, "clat_ns": {"N": 3, "mean": 1,
                     "percentile": {"50.000000": 1, "99.000000": 2, "99.900000": 3}}},
            "write": {"iops": 1, "total_ios": 3, "clat_ns": {"N": 3, "mean": 1}},
            "trim": {"iops": 1, "total_ios": 3, "clat_ns": {"N": 3, "mean": 1}}}]}"#;
        let metrics = fio_json::parse(out).unwrap().metrics();
        assert!(metrics.len() > 20);
        for (name, _) in metrics {
            assert!(is_known(&name), "{name}");
        }
        assert!(is_known("dev_util_pct"));
        assert!(!is_known("read_iop"));
    }
}

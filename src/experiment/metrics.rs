//! The metric names a run produces (the registry, `crate::metrics`), so an experiment file that
//! names a metric (the adaptive repetitions' `metric`) is checked before anything runs.

use std::sync::OnceLock;

/// Every listed metric name, in the registry's order: fio's (per direction), the sampler's,
/// the network engines', then a traced run's. A `command`'s are the file's own.
pub fn known() -> &'static [String] {
    static KNOWN: OnceLock<Vec<String>> = OnceLock::new();
    KNOWN.get_or_init(|| {
        crate::metrics::registry()
            .iter()
            .filter_map(crate::metrics::Metric::exact_name)
            .map(str::to_string)
            .collect()
    })
}

/// A known name, or a device's own `dev_*` figure, `DEVICE:dev_*` (several target devices,
/// or devices stacked under one).
pub fn is_known(name: &str) -> bool {
    crate::metrics::exact(name).is_some()
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

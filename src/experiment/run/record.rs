//! What one run leaves in the store: fio's metrics plus the sampler's summary under the
//! metric names of docs/architecture.md, and the sampler's time series. Pure functions over
//! the runner's and the sampler's results, so the mapping is tested without running anything.

use crate::sample::{SampleRun, Summary};
use crate::store::SampleSeries;
use crate::workload::FioOutcome;

/// fio's metrics (summed over jobs) followed by the sampler's system-wide figures and the
/// target device's iostat-like figures.
pub fn metrics(
    outcome: &FioOutcome,
    summary: Option<&Summary>,
    device: &str,
) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = outcome
        .report
        .as_ref()
        .map(|r| r.metrics())
        .unwrap_or_default();
    if let Some(summary) = summary {
        out.extend(summary.system.iter().map(|(k, v)| (k.to_string(), *v)));
        if let Some(dev) = summary.devices.get(device) {
            out.extend(dev.iter().map(|(k, v)| (k.to_string(), *v)));
        }
    }
    out.retain(|(_, v)| v.is_finite());
    out
}

/// One series per measured quantity, `t_offsets` at the end of each sampling interval:
/// `cpu` (`all/usr_pct`, `cpu1/sys_pct`, ...), `irq` (`45/cpu1` interrupts/s of IRQ 45 on
/// CPU 1, for each IRQ that fired during the run; `all` for the total) and `disk`
/// (`loop3/r_per_s`, ...).
pub fn series(samples: &SampleRun) -> Vec<SampleSeries> {
    use std::collections::BTreeMap;
    type Points = (Vec<f64>, Vec<f64>);
    let mut by_key: BTreeMap<(&'static str, String), Points> = BTreeMap::new();
    let mut push = |kind: &'static str, key: String, t: f64, v: f64| {
        if v.is_finite() {
            let e = by_key.entry((kind, key)).or_default();
            e.0.push(t);
            e.1.push(v);
        }
    };
    for iv in &samples.intervals {
        let t = iv.end_ns as f64 / 1e9;
        let shares = iv
            .all_cpus
            .iter()
            .map(|c| ("all".to_string(), c))
            .chain(iv.cpus.iter().map(|(n, c)| (format!("cpu{n}"), c)));
        for (who, c) in shares {
            for (name, v) in [
                ("usr_pct", c.usr_pct + c.nice_pct),
                ("sys_pct", c.sys_pct),
                ("irq_pct", c.irq_pct),
                ("softirq_pct", c.softirq_pct),
                ("iowait_pct", c.iowait_pct),
                ("idle_pct", c.idle_pct),
            ] {
                push("cpu", format!("{who}/{name}"), t, v);
            }
        }
        if let Some(v) = iv.irq_per_s {
            push("irq", "all".to_string(), t, v);
        }
        for (dev, rates) in &iv.disks {
            let Some(r) = rates else { continue };
            for (name, v) in [
                ("r_per_s", Some(r.r_per_s)),
                ("w_per_s", Some(r.w_per_s)),
                ("rmb_per_s", Some(r.rmb_per_s)),
                ("wmb_per_s", Some(r.wmb_per_s)),
                ("avg_rq_kb", r.avg_rq_kb),
                ("avg_qu_sz", Some(r.avg_qu_sz)),
                ("r_await_ms", r.r_await_ms),
                ("w_await_ms", r.w_await_ms),
                ("util_pct", Some(r.util_pct)),
            ] {
                if let Some(v) = v {
                    push("disk", format!("{dev}/{name}"), t, v);
                }
            }
        }
    }
    // Interrupt lines that never fired during the run would be hundreds of zero series on a
    // big machine; keep the ones that did.
    let fired: std::collections::BTreeSet<String> = samples
        .intervals
        .iter()
        .flat_map(|iv| iv.irqs.iter())
        .filter(|r| r.total.is_some_and(|t| t > 0.0))
        .map(|r| r.irq.to_string())
        .collect();
    for iv in &samples.intervals {
        let t = iv.end_ns as f64 / 1e9;
        for r in iv
            .irqs
            .iter()
            .filter(|r| fired.contains(&r.irq.to_string()))
        {
            for (cpu, v) in &r.per_cpu {
                if let Some(v) = v {
                    push("irq", format!("{}/cpu{cpu}", r.irq), t, *v);
                }
            }
        }
    }
    by_key
        .into_iter()
        .map(|((kind, key), (t_offsets, values))| SampleSeries {
            kind: kind.to_string(),
            key,
            t_offsets,
            values,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{interval, summary, Reader};
    use crate::sys::SysRoot;

    fn fixture(name: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/machines")
            .join(name)
    }

    /// Two real readings 2 s apart from a fixture machine.
    fn sample_run() -> SampleRun {
        let devices = vec!["nvme0n1".to_string()];
        let a = Reader::new(
            SysRoot::at(fixture("two-node-nvme")).unwrap(),
            devices.clone(),
        )
        .read(0)
        .unwrap();
        let b = Reader::new(
            SysRoot::at(fixture("two-node-nvme/later")).unwrap(),
            devices.clone(),
        )
        .read(2_000_000_000)
        .unwrap();
        let readings = vec![a, b];
        SampleRun {
            intervals: vec![interval(&readings[0], &readings[1], &devices)],
            summary: summary(&readings, &devices, &[vec![]]),
            readings,
            devices,
            errors: Vec::new(),
            started_unix_ns: 0.0,
        }
    }

    #[test]
    fn sampler_figures_join_fio_metrics_under_their_stable_names() {
        let s = sample_run();
        let outcome = FioOutcome {
            command_line: String::new(),
            job_file: String::new(),
            stdout: String::new(),
            stderr: String::new(),
            exit_code: Some(0),
            signal: None,
            elapsed: std::time::Duration::ZERO,
            status: crate::workload::FioStatus::Success,
            report: None,
        };
        let m = metrics(&outcome, s.summary.as_ref(), "nvme0n1");
        let names: Vec<&str> = m.iter().map(|(n, _)| n.as_str()).collect();
        for n in [
            "usr_pct",
            "sys_pct",
            "irq_per_s",
            "dev_r_per_s",
            "dev_util_pct",
        ] {
            assert!(names.contains(&n), "{n} missing from {names:?}");
        }
        assert!(names
            .iter()
            .all(|n| crate::experiment::metrics::is_known(n)));
    }

    #[test]
    fn series_cover_cpus_disks_and_fired_irqs_only() {
        let s = sample_run();
        let series = series(&s);
        let keys: Vec<String> = series
            .iter()
            .map(|s| format!("{}:{}", s.kind, s.key))
            .collect();
        assert!(keys.contains(&"cpu:all/sys_pct".to_string()), "{keys:?}");
        assert!(
            keys.contains(&"disk:nvme0n1/r_per_s".to_string()),
            "{keys:?}"
        );
        assert!(keys.contains(&"irq:all".to_string()));
        for s in &series {
            assert_eq!(s.t_offsets, vec![2.0], "{}", s.key);
            assert_eq!(s.values.len(), 1);
            if s.kind == "irq" && s.key != "all" {
                let irq = s.key.split('/').next().unwrap();
                let fired = series
                    .iter()
                    .filter(|x| x.kind == "irq" && x.key.starts_with(&format!("{irq}/")))
                    .any(|x| x.values[0] > 0.0);
                assert!(fired, "IRQ {irq} never fired but has series");
            }
        }
    }
}

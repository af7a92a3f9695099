//! What one run leaves in the store: fio's metrics plus the sampler's summary under the
//! metric names of docs/architecture.md, and the sampler's time series. Pure functions over
//! the runner's and the sampler's results, so the mapping is tested without running anything.

use std::collections::BTreeMap;

use crate::metrics::{self, Across};
use crate::sample::{SampleRun, Summary};
use crate::store::SampleSeries;
use crate::workload::FioOutcome;

/// fio's metrics (summed over jobs) followed by the sampler's system-wide figures and the
/// devices' iostat-like figures. With one target and nothing under it, `dev_*` describe that
/// device. With several targets, `dev_*` are over all of them (`aggregate`) and
/// each target's and each stacked device's figures are also stored as `DEVICE:dev_*`.
pub(crate) fn metrics(
    outcome: &FioOutcome,
    summary: Option<&Summary>,
    targets: &[String],
    stacked: &[String],
) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = outcome
        .report
        .as_ref()
        .map(|r| r.metrics())
        .unwrap_or_default();
    sampler_metrics(&mut out, summary, targets, stacked);
    out
}

/// Appends the sampler's system-wide and device figures to a workload's metrics (any
/// engine's) and drops figures that are not finite.
pub(crate) fn sampler_metrics(
    out: &mut Vec<(String, f64)>,
    summary: Option<&Summary>,
    targets: &[String],
    stacked: &[String],
) {
    if let Some(summary) = summary {
        out.extend(summary.system.iter().map(|(k, v)| (k.to_string(), *v)));
        let of = |d: &String| summary.devices.get(d);
        match targets {
            [one] => {
                if let Some(dev) = of(one) {
                    out.extend(dev.iter().map(|(k, v)| (k.to_string(), *v)));
                }
            }
            many => {
                let figures: Vec<_> = many.iter().filter_map(of).collect();
                out.extend(
                    aggregate(&figures)
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v)),
                );
            }
        }
        if targets.len() > 1 || !stacked.is_empty() {
            for d in targets.iter().chain(stacked) {
                if let Some(dev) = of(d) {
                    out.extend(dev.iter().map(|(k, v)| (format!("{d}:{k}"), *v)));
                }
            }
        }
    }
    out.retain(|(_, v)| v.is_finite());
}

/// The prefix of this machine's own figures in a run across hosts (see [`local_metrics`]).
pub(crate) const LOCAL: &str = "local:";

/// This machine's system-wide figures while it drove fio on other hosts, as `local:NAME`
/// (`local:usr_pct`, `local:irq_per_s`): apart from the hosts' own and from the aggregate's.
/// Its own devices sampled then (`[target] local_devices`) as `local:DEVICE:NAME`.
pub(crate) fn local_metrics(summary: Option<&Summary>) -> Vec<(String, f64)> {
    let Some(s) = summary else {
        return Vec::new();
    };
    let system = s.system.iter().map(|(k, v)| (format!("{LOCAL}{k}"), *v));
    let devices = s.devices.iter().flat_map(|(device, figures)| {
        figures
            .iter()
            .map(move |(k, v)| (format!("{LOCAL}{device}:{k}"), *v))
    });
    system
        .chain(devices)
        .filter(|(_, v)| v.is_finite())
        .collect()
}

/// With a NIC as the target (`[target] nic`) the "device" interrupts are the NIC's: their
/// rate is `nic_irq_per_s` and their per-CPU series `cpuN:nic_irq_per_s`.
pub(crate) fn name_as_nic(metrics: &mut [(String, f64)], series: &mut [crate::store::SeriesPoint]) {
    for (name, _) in metrics.iter_mut() {
        if name == metrics::DEV_IRQ_PER_S.name {
            *name = metrics::NIC_IRQ_PER_S.name.to_string();
        }
    }
    let dev = format!(":{}", super::per_second::DEVICE_IRQ_SERIES);
    for p in series.iter_mut() {
        if let Some(cpu) = p.name.strip_suffix(&dev) {
            p.name = format!("{cpu}:{}", metrics::NIC_IRQ_PER_S.name);
        }
    }
}

/// Several devices' `dev_*` figures as one, each as the registry says
/// (`metrics::Across`): rates and the queue size summed (a sum means something), request
/// size and await averaged over the I/Os, interrupts per I/O over the sums. `dev_util_pct`
/// is left out: busy time does not add up across devices.
pub(crate) fn aggregate(devices: &[&BTreeMap<&'static str, f64>]) -> BTreeMap<&'static str, f64> {
    // Summed over the devices, when every one has it.
    let sum = |k: &str| -> Option<f64> {
        let vals: Vec<f64> = devices.iter().filter_map(|d| d.get(k).copied()).collect();
        (vals.len() == devices.len() && !vals.is_empty()).then(|| vals.iter().sum())
    };
    let get = |d: &BTreeMap<&'static str, f64>, k: &str| d.get(k).copied().unwrap_or(0.0);
    let mut out = BTreeMap::new();
    for (m, across) in metrics::across_devices() {
        let value = match across {
            Across::Sum => sum(m.name),
            Across::WeightedMean(weights) => {
                let (mut num, mut den) = (0.0, 0.0);
                for d in devices {
                    if let Some(v) = d.get(m.name) {
                        let w: f64 = weights.iter().map(|k| get(d, k)).sum();
                        num += v * w;
                        den += w;
                    }
                }
                (den > 0.0).then(|| num / den)
            }
            Across::Ratio(of, per) => {
                let total: f64 = per.iter().map(|k| sum(k).unwrap_or(0.0)).sum();
                sum(of).filter(|_| total > 0.0).map(|v| v / total)
            }
            Across::Apart => None,
        };
        if let Some(v) = value {
            out.insert(m.name, v);
        }
    }
    out
}

/// One series per measured quantity, `t_offsets` at the end of each sampling interval:
/// `cpu` (`all/usr_pct`, `cpu1/sys_pct`, ...), `irq` (`45/cpu1` interrupts/s of IRQ 45 on
/// CPU 1, for each IRQ that fired during the run; `all` for the total) and `disk`
/// (`loop3/r_per_s`, ...).
pub(crate) fn series(samples: &SampleRun) -> Vec<SampleSeries> {
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
                (metrics::USR_PCT, c.usr_pct + c.nice_pct),
                (metrics::SYS_PCT, c.sys_pct),
                (metrics::IRQ_PCT, c.irq_pct),
                (metrics::SOFTIRQ_PCT, c.softirq_pct),
                (metrics::IOWAIT_PCT, c.iowait_pct),
                (metrics::IDLE_PCT, c.idle_pct),
                (metrics::STEAL_PCT, c.steal_pct),
            ] {
                push("cpu", format!("{who}/{}", name.name), t, v);
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
            device_irqs: vec![vec![]],
            errors: Vec::new(),
            started_unix_ns: 0.0,
        }
    }

    /// A fio run that succeeded without a JSON report: only the sampler's figures count.
    fn no_report() -> FioOutcome {
        FioOutcome::quiet_success()
    }

    #[test]
    fn sampler_figures_join_fio_metrics_under_their_stable_names() {
        let s = sample_run();
        let outcome = no_report();
        let m = metrics(&outcome, s.summary.as_ref(), &["nvme0n1".to_string()], &[]);
        let names: Vec<&str> = m.iter().map(|(n, _)| n.as_str()).collect();
        for n in [
            "usr_pct",
            "sys_pct",
            "steal_pct",
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
    fn several_devices_are_summed_where_a_sum_means_something_and_kept_apart() {
        use std::collections::BTreeMap;
        let dev = |r: f64, await_ms: f64, irq: f64| {
            BTreeMap::from([
                ("dev_r_per_s", r),
                ("dev_w_per_s", 0.0),
                ("dev_r_await_ms", await_ms),
                ("dev_avg_rq_kb", 4.0),
                ("dev_util_pct", 90.0),
                ("dev_irq_per_s", irq),
            ])
        };
        let (a, b) = (dev(1000.0, 1.0, 1000.0), dev(3000.0, 3.0, 1500.0));
        let all = aggregate(&[&a, &b]);
        assert_eq!(all["dev_r_per_s"], 4000.0);
        assert_eq!(all["dev_irq_per_s"], 2500.0);
        assert_eq!(all["dev_irq_per_io"], 2500.0 / 4000.0);
        assert_eq!(all["dev_r_await_ms"], (1000.0 + 9000.0) / 4000.0);
        assert_eq!(all["dev_avg_rq_kb"], 4.0);
        assert!(
            !all.contains_key("dev_util_pct"),
            "busy time does not add up"
        );

        let summary = crate::sample::Summary {
            whole: sample_run().summary.unwrap().whole,
            system: BTreeMap::new(),
            devices: BTreeMap::from([
                ("sdb".to_string(), a.clone()),
                ("sdc".to_string(), b.clone()),
                ("sdd".to_string(), dev(50.0, 1.0, 0.0)),
            ]),
        };
        let outcome = no_report();
        let names = |t: &[&str], s: &[&str]| {
            let t: Vec<String> = t.iter().map(|x| x.to_string()).collect();
            let s: Vec<String> = s.iter().map(|x| x.to_string()).collect();
            metrics(&outcome, Some(&summary), &t, &s)
        };
        let m = names(&["sdb", "sdc"], &[]);
        let get = |m: &[(String, f64)], k: &str| m.iter().find(|(n, _)| n == k).map(|x| x.1);
        assert_eq!(get(&m, "dev_r_per_s"), Some(4000.0));
        assert_eq!(get(&m, "sdc:dev_r_per_s"), Some(3000.0));
        assert_eq!(get(&m, "sdb:dev_util_pct"), Some(90.0));
        // One target with a disk under it: dev_* are the target's, the disk's apart.
        let m = names(&["sdb"], &["sdd"]);
        assert_eq!(get(&m, "dev_r_per_s"), Some(1000.0));
        assert_eq!(get(&m, "sdd:dev_r_per_s"), Some(50.0));
        assert!(
            m.iter()
                .all(|(n, _)| crate::experiment::metrics::is_known(n)),
            "{m:?}"
        );
    }

    #[test]
    fn series_cover_cpus_disks_and_fired_irqs_only() {
        let mut s = sample_run();
        // A guest's CPU 0 lost 5% of its time to the host.
        let cpu0 = &mut s.intervals[0].cpus[0].1;
        cpu0.idle_pct -= 5.0;
        cpu0.steal_pct += 5.0;
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
        // Each CPU's shares add up to its whole time: steal too (a guest's lost time).
        let cpu0: f64 = series
            .iter()
            .filter(|s| s.kind == "cpu" && s.key.starts_with("cpu0/"))
            .map(|s| s.values[0])
            .sum();
        assert!((cpu0 - 100.0).abs() < 1e-9, "{cpu0}");
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

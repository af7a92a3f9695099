//! Which metrics to show when the user names none, their units, and their values for a set
//! of runs. Defaults are a command workload's own metrics, then the registry's `HEADLINE`
//! metrics (the figures the cases' authors posted: IOPS, MB/s, mean and p99 completion
//! latency, %usr/%sys, interrupts/s), kept only when the runs measured them and not all zero
//! (a read workload's `write_iops` is a true 0 and says nothing).

use std::collections::HashMap;

use anyhow::bail;

use crate::store::Store;

/// The unit shown in headers, from the metric registry (its entry or its name's rule).
pub(crate) fn unit(metric: &str) -> Option<&'static str> {
    crate::metrics::lookup(metric).and_then(|m| m.unit)
}

/// One metric's values by run id.
pub(crate) type Values = HashMap<i64, f64>;

pub(crate) fn values(store: &Store, run_ids: &[i64], metric: &str) -> anyhow::Result<Values> {
    Ok(store.metric_values(run_ids, metric)?.into_iter().collect())
}

/// The metrics to use and their values: the requested ones (each must have values in every
/// group given, else an error naming the metrics that do), or the headline metrics present
/// and not all zero.
pub(crate) fn choose(
    store: &Store,
    groups: &[(&str, &[i64])],
    requested: &[String],
) -> anyhow::Result<Vec<(String, Vec<Values>)>> {
    let load = |m: &str| -> anyhow::Result<Vec<Values>> {
        groups
            .iter()
            .map(|(_, ids)| values(store, ids, m))
            .collect()
    };
    let mut out = Vec::new();
    if requested.is_empty() {
        // A command's own figures (its patterns' groups, its JSON paths) are what its
        // experiment measures: they come first, zeros too.
        for m in present(store, groups)? {
            if crate::metrics::workload_own(&m) {
                let v = load(&m)?;
                out.push((m, v));
            }
        }
        for m in crate::metrics::HEADLINE.iter().map(|m| m.name) {
            let v = load(m)?;
            if v.iter().all(|g| !g.is_empty())
                && v.iter().flat_map(|g| g.values()).any(|x| *x != 0.0)
            {
                out.push((m.to_string(), v));
            }
        }
        if out.is_empty() {
            bail!(
                "none of the default metrics has a value other than 0 in {}; metrics \
                 present: {}",
                describe(groups),
                present(store, groups)?.join(", ")
            );
        }
        return Ok(out);
    }
    for m in requested {
        let v = load(m)?;
        if let Some(((label, _), _)) = groups.iter().zip(&v).find(|(_, g)| g.is_empty()) {
            let have = present(store, groups)?;
            let hint = crate::suggest::closest(m, have.iter().map(String::as_str))
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            // A name nothing here stored and iolab does not list is a typo or another tool's,
            // not a metric these runs lack.
            let unknown = crate::metrics::exact(m).is_none() && !store.metric_names()?.contains(m);
            let what = if unknown {
                format!("no run here stored a metric named {m:?}, and iolab records none by that name (`iolab metrics` lists them)")
            } else {
                format!("metric {m:?} has no values in {label}")
            };
            bail!(
                "{what}{hint}; metrics present{}: {}",
                if groups.len() > 1 {
                    " in every group"
                } else {
                    ""
                },
                if have.is_empty() {
                    "none (no successful runs)".to_string()
                } else {
                    have.join(", ")
                }
            );
        }
        out.push((m.clone(), v));
    }
    Ok(out)
}

fn describe(groups: &[(&str, &[i64])]) -> String {
    groups
        .iter()
        .map(|(l, _)| *l)
        .collect::<Vec<_>>()
        .join(" and ")
}

/// The machine figures a run across hosts keeps per host (`HOST:sys_pct`, and `local:sys_pct`
/// for the machine that drove the hosts) have no plain name, so the default metrics leave them
/// out; this line says where they are. None when the user named the metrics, when the runs
/// have such figures of their own (among the `chosen` defaults), or no per-host ones.
pub(crate) fn per_host_hint(
    store: &Store,
    groups: &[(&str, &[i64])],
    requested: &[String],
    chosen: &[(String, Vec<Values>)],
) -> anyhow::Result<Option<String>> {
    let system = crate::metrics::MACHINE;
    if !requested.is_empty()
        || chosen
            .iter()
            .any(|(m, _)| system.iter().any(|s| s.name == m))
    {
        return Ok(None);
    }
    // The hosts named in one run's figures (`HOST:usr_pct`), kept where every group has them.
    let Some(first) = groups.first().and_then(|(_, ids)| ids.first()) else {
        return Ok(None);
    };
    let mut hosts: Vec<String> = Vec::new();
    for (name, _) in store.run_metrics(*first)? {
        let Some(host) = system
            .iter()
            .find_map(|s| name.strip_suffix(s.name)?.strip_suffix(':'))
        else {
            continue;
        };
        if !hosts.iter().any(|h| h == host) && in_every_group(store, groups, &name)? {
            hosts.push(host.to_string());
        }
    }
    // This machine last: it drove the hosts and is not one of them.
    let local = crate::experiment::run::stored::LOCAL.trim_end_matches(':');
    hosts.sort_by_key(|h| (h == local, h.clone()));
    let Some(example) = hosts.first() else {
        return Ok(None);
    };
    // Runs on fio servers iolab does not control: only this machine was sampled, and no
    // host has runs of its own for `--host`.
    if example == local {
        return Ok(Some(format!(
            "usr_pct, sys_pct and irq_per_s were sampled on this machine only, which drove \
             the fio servers: `--metric {local}:sys_pct`"
        )));
    }
    Ok(Some(format!(
        "usr_pct, sys_pct and irq_per_s are per host here, as HOST:NAME with HOST one of {} \
         (local: this machine, which drove the hosts): e.g. `--metric {example}:sys_pct`, or \
         `--host {example}` for that host's own runs",
        hosts.join(", ")
    )))
}

/// Metric names with values in every group (for error messages; not on the fast path).
pub(crate) fn present(store: &Store, groups: &[(&str, &[i64])]) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for name in store.metric_names()? {
        if in_every_group(store, groups, &name)? {
            out.push(name);
        }
    }
    Ok(out)
}

fn in_every_group(store: &Store, groups: &[(&str, &[i64])], name: &str) -> anyhow::Result<bool> {
    for (_, ids) in groups {
        if store.metric_values(ids, name)?.is_empty() {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_follow_the_documented_names() {
        assert_eq!(unit("read_iops"), Some("IO/s"));
        assert_eq!(unit("write_bw_mbs"), Some("MB/s"));
        assert_eq!(unit("net_received_mbit_per_s"), Some("Mb/s"));
        assert_eq!(unit("read_clat_p99_us"), Some("us"));
        assert_eq!(unit("dev_r_await_ms"), Some("ms"));
        assert_eq!(unit("sys_pct"), Some("%"));
        assert_eq!(unit("irq_per_s"), Some("1/s"));
        assert_eq!(unit("dev_rmb_per_s"), Some("MB/s"));
        assert_eq!(unit("dev_avg_rq_kb"), Some("KiB"));
        assert_eq!(unit("mystery"), None);
    }
}

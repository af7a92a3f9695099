//! Which way is "better" for a metric, read from the metric registry (`crate::metrics`), so
//! `compare` can say improved/regressed without a second table that drifts from the list.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    HigherIsBetter,
    LowerIsBetter,
    /// A change is reported as `changed`, never as better or worse: the metric describes
    /// what happened (merges) and its good side depends on the workload.
    NoDirection,
}

impl Direction {
    /// The direction of a metric, from the registry (`crate::metrics`): its own entry, else
    /// the naming rule its name follows. `None` for names that are neither work done nor a
    /// cost (`dev_avg_rq_kb`, `dev_avg_qu_sz`, a trace's counts) or follow no rule, where
    /// the caller must state a direction.
    ///
    /// Work done (`_iops`, `_bw_mbs`, `_mb_per_s`, `_per_s`) is better higher; latencies,
    /// CPU shares (except `idle_pct`), interrupt rates, costs per I/O and retransmits are
    /// better lower; merges (`*rqm_per_s`) have no direction: more merges mean fewer, larger
    /// requests, which says nothing on its own, so `compare` reports `changed`.
    pub fn for_metric(name: &str) -> Option<Direction> {
        crate::metrics::lookup(name).and_then(|m| m.direction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Direction::*;

    #[test]
    fn documented_metrics_have_the_documented_direction() {
        for m in [
            "read_iops",
            "write_bw_mbs",
            "dev_r_per_s",
            "dev_rmb_per_s",
            "idle_pct",
        ] {
            assert_eq!(Direction::for_metric(m), Some(HigherIsBetter), "{m}");
        }
        for m in [
            "read_clat_p99_us",
            "write_clat_stddev_us",
            "sys_pct",
            "fio_usr_pct",
            "dev_r_await_ms",
            "irq_per_s",
            "dev_irq_per_s",
            "dev_irq_per_io",
            "sdb:dev_irq_per_io",
        ] {
            assert_eq!(Direction::for_metric(m), Some(LowerIsBetter), "{m}");
        }
        for m in ["dev_rrqm_per_s", "dev_wrqm_per_s", "sdb:dev_wrqm_per_s"] {
            assert_eq!(Direction::for_metric(m), Some(NoDirection), "{m}");
        }
        assert_eq!(Direction::for_metric("dev_avg_rq_kb"), None);
        // The network engines'.
        for m in ["net_received_mbit_per_s", "rr_trans_per_s", "tp_msg_per_s"] {
            assert_eq!(Direction::for_metric(m), Some(HigherIsBetter), "{m}");
        }
        for m in ["net_retransmits", "rr_lat_p99_us", "net_client_cpu_pct"] {
            assert_eq!(Direction::for_metric(m), Some(LowerIsBetter), "{m}");
        }
        assert_eq!(Direction::for_metric("dev_avg_qu_sz"), None);
    }

    /// A traced run's latencies and the share spent in the scheduler are costs; counts,
    /// sizes, depths and the merge ratio are descriptions whose better side depends on the
    /// workload (case 1's collapsed dispatch depth was bad, a deep queue on a slow disk is
    /// too), so a comparison must name its direction.
    #[test]
    fn trace_metrics_have_their_documented_direction() {
        for m in [
            "trace_q2c_mean_us",
            "trace_q2c_p50_us",
            "trace_q2c_p99_us",
            "trace_q2c_max_us",
            "trace_d2c_mean_us",
            "trace_d2c_p99_us",
            "trace_i2d_pct",
        ] {
            assert_eq!(Direction::for_metric(m), Some(LowerIsBetter), "{m}");
        }
        for m in [
            "trace_events",
            "trace_events_lost",
            "trace_q2c_count",
            "trace_merge_ratio",
            "trace_request_kb_mean",
            "trace_dispatch_depth_mean",
            "trace_sleeps",
        ] {
            assert_eq!(Direction::for_metric(m), None, "{m}");
        }
    }
}

//! Which way is "better" for a metric. The statistics only take a direction; which metric
//! has which is the metric registry's business (`metrics::direction`), so the statistics
//! know nothing of metric names.

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

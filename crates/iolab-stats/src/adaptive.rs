//! The stopping rule for adaptive repetitions (`repetitions = { target_ci, max }`).
//!
//! It stops on **precision**, never on p-values: peeking at a test after every round and
//! stopping at the first "significant" result inflates false positives, while stopping when
//! every cell's 95% CI of the mean is narrow enough does not bias any comparison. Cells that
//! are already precise stop early, so machine time goes where the noise is; cells that hit
//! `max` are reported as capped, not silently accepted.

use serde::Serialize;

use super::error::StatsError;
use super::summary::summarize;

#[derive(Debug, Clone, PartialEq)]
pub struct AdaptiveRule {
    /// Target relative half-width of the 95% CI of the mean (0.02 = ±2%).
    pub target_ci: f64,
    /// Runs never exceed this per cell.
    pub max: usize,
    /// Runs always reach this per cell before the CI is trusted (a CI from 2 values is
    /// itself too noisy to stop on); defaults to 3.
    pub min: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum CellStatus {
    /// Below `min` runs, or no CI yet.
    NeedsMore { rel_half_width: Option<f64> },
    /// The CI is within the target.
    Precise { rel_half_width: f64 },
    /// `max` reached without reaching the target; reported to the user.
    Capped { rel_half_width: Option<f64> },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellProgress {
    pub cell: usize,
    pub n: usize,
    pub status: CellStatus,
    /// Rough total runs the cell needs at its current spread: n * (width / target)^2.
    pub projected_runs: Option<usize>,
}

impl AdaptiveRule {
    pub fn new(target_ci: f64, max: usize) -> Result<Self, StatsError> {
        if !(target_ci > 0.0 && target_ci.is_finite()) {
            return Err(StatsError::InvalidParameter {
                name: "target_ci",
                reason: format!("{target_ci} must be a positive fraction such as 0.02"),
            });
        }
        if max < 2 {
            return Err(StatsError::InvalidParameter {
                name: "max",
                reason: format!("{max} runs cannot give a confidence interval; use >= 2"),
            });
        }
        Ok(AdaptiveRule {
            target_ci,
            max,
            min: 3.min(max),
        })
    }

    /// Status of every cell, given the samples measured so far (index = cell id).
    /// A cell whose values contain NaN is an error naming the cell.
    pub fn assess(&self, cells: &[&[f64]]) -> Result<Vec<CellProgress>, StatsError> {
        cells
            .iter()
            .enumerate()
            .map(|(cell, values)| self.assess_cell(cell, values))
            .collect()
    }

    /// Cells that need another run in the next interleaved round; empty means stop.
    pub fn cells_needing_runs(&self, cells: &[&[f64]]) -> Result<Vec<usize>, StatsError> {
        Ok(self
            .assess(cells)?
            .into_iter()
            .filter(|p| matches!(p.status, CellStatus::NeedsMore { .. }))
            .map(|p| p.cell)
            .collect())
    }

    fn assess_cell(&self, cell: usize, values: &[f64]) -> Result<CellProgress, StatsError> {
        let n = values.len();
        let width = if n == 0 {
            None
        } else {
            summarize(values)
                .map_err(|e| StatsError::InvalidParameter {
                    name: "cells",
                    reason: format!("cell {cell}: {e}"),
                })?
                .ci_mean_rel_half_width()
        };
        let projected_runs = width.map(|w| {
            let ratio = w / self.target_ci;
            ((n as f64) * ratio * ratio).ceil().max(n as f64) as usize
        });
        let status = match width {
            _ if n >= self.max => CellStatus::Capped {
                rel_half_width: width,
            },
            Some(w) if n >= self.min && w <= self.target_ci => {
                CellStatus::Precise { rel_half_width: w }
            }
            _ => CellStatus::NeedsMore {
                rel_half_width: width,
            },
        };
        let status = match status {
            CellStatus::Capped {
                rel_half_width: Some(w),
            } if w <= self.target_ci => CellStatus::Precise { rel_half_width: w },
            s => s,
        };
        Ok(CellProgress {
            cell,
            n,
            status,
            projected_runs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precise_cells_stop_noisy_cells_continue() {
        let rule = AdaptiveRule::new(0.02, 10).unwrap();
        let quiet = [100.0, 100.5, 99.5, 100.2];
        let noisy = [100.0, 140.0, 70.0, 120.0];
        let empty: [f64; 0] = [];
        let need = rule.cells_needing_runs(&[&quiet, &noisy, &empty]).unwrap();
        assert_eq!(need, vec![1, 2]);
        let p = rule.assess(&[&noisy]).unwrap();
        assert!(p[0].projected_runs.unwrap() > 10);
    }

    #[test]
    fn min_runs_before_trusting_a_ci() {
        let rule = AdaptiveRule::new(0.5, 10).unwrap();
        assert_eq!(rule.cells_needing_runs(&[&[1.0, 1.0]]).unwrap(), vec![0]);
    }

    #[test]
    fn max_caps_and_is_reported() {
        let rule = AdaptiveRule::new(0.001, 4).unwrap();
        let p = rule.assess(&[&[1.0, 2.0, 3.0, 4.0]]).unwrap();
        assert!(matches!(p[0].status, CellStatus::Capped { .. }));
        assert!(rule
            .cells_needing_runs(&[&[1.0, 2.0, 3.0, 4.0]])
            .unwrap()
            .is_empty());
    }

    #[test]
    fn bad_parameters_and_nan() {
        assert!(AdaptiveRule::new(0.0, 10).is_err());
        assert!(AdaptiveRule::new(0.02, 1).is_err());
        let rule = AdaptiveRule::new(0.02, 10).unwrap();
        let err = rule.assess(&[&[1.0], &[f64::NAN]]).unwrap_err();
        assert!(err.to_string().contains("cell 1"), "{err}");
    }
}

//! One answer across cells, like benchstat's geomean row: an experiment of six cells that
//! all lost 15% should say "-15% overall", not leave the reader to average six lines.
//!
//! The summary is the geometric mean of the cells' ratios of medians (candidate/baseline,
//! the same ratio each cell's `change` column shows), which treats +x% and -x% alike and
//! does not let the cell with the largest numbers dominate. Its CI is Student's t interval
//! on the cells' log ratios (cells - 1 degrees of freedom, [`super::paired_change`] with
//! cells as pairs), mapped back to percent: it covers the typical change over cells like
//! these, and because each cell's ratio carries that cell's run-to-run noise, the noise is
//! in the interval too. It is not a bootstrap over cells: with the 2 to 10 cells of a real
//! experiment, resampling cells gives intervals that are too narrow (a bootstrap of 3
//! values has 10 distinct resamples). With one cell with a ratio there is no interval.
//! Alongside it, how many cells improved, regressed or showed no difference (after the
//! family's Benjamini–Hochberg adjustment).

use serde::Serialize;

use super::compare::{Comparison, Verdict};
use super::paired::paired_change;

/// How the CI of the geometric mean is computed (stated in JSON and table notes).
pub const CI_METHOD: &str = "t interval on the log ratios across cells";

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AcrossCells {
    /// Cells compared (every verdict counted below).
    pub cells: usize,
    /// Cells whose baseline and candidate medians are both > 0, the ones in the geomean.
    pub cells_in_geomean: usize,
    /// Geometric means of the baseline and candidate medians over those cells.
    pub geomean_baseline: Option<f64>,
    pub geomean_candidate: Option<f64>,
    /// 100 * (geomean of candidate/baseline - 1).
    pub change_pct: Option<f64>,
    pub ci_low_pct: Option<f64>,
    pub ci_high_pct: Option<f64>,
    pub ci_level: f64,
    pub ci_method: &'static str,
    pub improved: usize,
    pub regressed: usize,
    /// Verdict `~`, whatever the reason (too few runs included).
    pub unchanged: usize,
    /// Verdict `changed`: a real change of a metric without a better side (merges).
    pub changed: usize,
}

/// Summarises the comparisons of one metric over cells at confidence `level` (0.95).
pub fn across_cells(cells: &[&Comparison], level: f64) -> AcrossCells {
    let count = |v: Verdict| cells.iter().filter(|c| c.verdict == v).count();
    let (base, cand): (Vec<f64>, Vec<f64>) = cells
        .iter()
        .map(|c| (c.baseline.median, c.candidate.median))
        .filter(|&(b, c)| b > 0.0 && c > 0.0)
        .unzip();
    let geomean = |v: &[f64]| {
        (!v.is_empty()).then(|| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp())
    };
    let (gb, gc) = (geomean(&base), geomean(&cand));
    let interval = (base.len() >= 2)
        .then(|| paired_change(&base, &cand, level).ok())
        .flatten();
    AcrossCells {
        cells: cells.len(),
        cells_in_geomean: base.len(),
        geomean_baseline: gb,
        geomean_candidate: gc,
        change_pct: interval
            .map(|i| i.change_pct)
            .or_else(|| Some(100.0 * (gc? / gb? - 1.0))),
        ci_low_pct: interval.map(|i| i.ci_low_pct),
        ci_high_pct: interval.map(|i| i.ci_high_pct),
        ci_level: level,
        ci_method: CI_METHOD,
        improved: count(Verdict::Improved),
        regressed: count(Verdict::Regressed),
        unchanged: count(Verdict::NoDifference),
        changed: count(Verdict::Changed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{compare, CompareOptions};
    use crate::Direction;

    fn cmp(b: &[f64], c: &[f64]) -> Comparison {
        compare(b, c, &CompareOptions::new(Direction::HigherIsBetter)).unwrap()
    }

    #[test]
    fn geomean_of_ratios_with_a_t_interval_on_logs() {
        // Medians 100 -> 90 (ratio 0.9) and 1000 -> 800 (0.8): geomean sqrt(0.72).
        let a = cmp(&[99.0, 100.0, 101.0], &[89.0, 90.0, 91.0]);
        let b = cmp(&[990.0, 1000.0, 1010.0], &[790.0, 800.0, 810.0]);
        let s = across_cells(&[&a, &b], 0.95);
        let g = 0.72f64.sqrt();
        assert!(
            (s.change_pct.unwrap() - 100.0 * (g - 1.0)).abs() < 1e-9,
            "{s:?}"
        );
        assert!((s.geomean_baseline.unwrap() - (100.0f64 * 1000.0).sqrt()).abs() < 1e-9);
        assert!((s.geomean_candidate.unwrap() - (90.0f64 * 800.0).sqrt()).abs() < 1e-9);
        // Two log ratios ln 0.9, ln 0.8: sd = |ln(0.9/0.8)| / sqrt 2, t(0.975, 1) = 12.706.
        let half = 12.706_204_736_174_694 * (0.9f64 / 0.8).ln().abs() / 2.0;
        let lo = 100.0 * ((g.ln() - half).exp() - 1.0);
        assert!((s.ci_low_pct.unwrap() - lo).abs() < 1e-6, "{s:?}");
        assert_eq!((s.improved, s.regressed, s.unchanged), (0, 2, 0));
    }

    #[test]
    fn cells_without_a_ratio_are_counted_but_not_averaged() {
        let a = cmp(&[99.0, 100.0, 101.0], &[89.0, 90.0, 91.0]);
        let zero = cmp(&[0.0, 0.0, 0.0], &[0.0, 0.0, 0.0]);
        let s = across_cells(&[&a, &zero], 0.95);
        assert_eq!((s.cells, s.cells_in_geomean), (2, 1));
        assert!((s.change_pct.unwrap() - -10.0).abs() < 1e-9);
        assert_eq!((s.ci_low_pct, s.ci_high_pct), (None, None));
        assert_eq!(s.unchanged, 1);
        let none = across_cells(&[&zero], 0.95);
        assert_eq!(none.change_pct, None);
    }
}

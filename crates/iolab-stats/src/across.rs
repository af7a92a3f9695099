//! One answer across cells, like benchstat's geomean row: an experiment of six cells that
//! all lost 15% should say "-15% overall", not leave the reader to average six lines.
//!
//! The summary is the geometric mean of the cells' ratios of medians (candidate/baseline,
//! the same ratio each cell's `change` column shows), which treats +x% and -x% alike and
//! does not let the cell with the largest numbers dominate. Its CI is Student's t interval
//! on the cells' log ratios (cells - 1 degrees of freedom, [`super::paired_change`] with
//! cells as pairs), mapped back to percent: it covers the typical change over cells like
//! these, and because each cell's ratio carries that cell's run-to-run noise, the noise is
//! mostly in the interval too. Not always: a percentile fio reports in histogram buckets
//! gives identical medians on both sides of every cell, and the t interval was [+0.0, +0.0]
//! beside cells whose own intervals spanned -60% to +300%. So it is never narrower than the
//! cells' own intervals allow the mean of their log ratios: the root of the sum of their
//! squared half-widths (on the log scale) over the number of cells, as for a mean of
//! independent estimates; with a cell of no interval and no spread at all, there is none.
//! It is not a bootstrap over cells: with the 2 to 10 cells of a real
//! experiment, resampling cells gives intervals that are too narrow (a bootstrap of 3
//! values has 10 distinct resamples). With one cell with a ratio there is no interval.
//! Alongside it, how many cells improved, regressed or showed no difference (after the
//! family's Benjamini–Hochberg adjustment).

use serde::Serialize;

use super::compare::{Comparison, Verdict};
use super::paired::paired_change;

/// How the CI of the geometric mean is computed (stated in JSON and table notes).
pub const CI_METHOD: &str =
    "t interval on the log ratios across cells, no narrower than the cells' own intervals allow";

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
    let in_geomean: Vec<&&Comparison> = cells
        .iter()
        .filter(|c| c.baseline.median > 0.0 && c.candidate.median > 0.0)
        .collect();
    let (base, cand): (Vec<f64>, Vec<f64>) = in_geomean
        .iter()
        .map(|c| (c.baseline.median, c.candidate.median))
        .unzip();
    let geomean = |v: &[f64]| {
        (!v.is_empty()).then(|| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp())
    };
    let (gb, gc) = (geomean(&base), geomean(&cand));
    let interval = (base.len() >= 2)
        .then(|| paired_change(&base, &cand, level).ok())
        .flatten();
    let log_half = |low_pct: f64, high_pct: f64| {
        let (low, high) = (1.0 + low_pct / 100.0, 1.0 + high_pct / 100.0);
        (low > 0.0 && high.is_finite()).then(|| (high.ln() - low.ln()) / 2.0)
    };
    // The cells' own intervals, as a bound on the mean of their log ratios.
    let halves: Option<Vec<f64>> = in_geomean
        .iter()
        .map(|c| log_half(c.ci_low_pct?, c.ci_high_pct?))
        .collect();
    let within = halves.map(|h| h.iter().map(|x| x * x).sum::<f64>().sqrt() / h.len() as f64);
    let bounds = interval.and_then(|i| {
        let across = log_half(i.ci_low_pct, i.ci_high_pct)?;
        let half = match within {
            Some(w) => across.max(w),
            None if across > 0.0 => across,
            None => return None,
        };
        let center = (1.0 + i.change_pct / 100.0).ln();
        let pct = |log: f64| 100.0 * (log.exp() - 1.0);
        Some((pct(center - half), pct(center + half)))
    });
    AcrossCells {
        cells: cells.len(),
        cells_in_geomean: base.len(),
        geomean_baseline: gb,
        geomean_candidate: gc,
        change_pct: interval
            .map(|i| i.change_pct)
            .or_else(|| Some(100.0 * (gc? / gb? - 1.0))),
        ci_low_pct: bounds.map(|b| b.0),
        ci_high_pct: bounds.map(|b| b.1),
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

    /// Identical medians on both sides of every cell (a percentile in fio's histogram
    /// buckets) give log ratios of no spread: the interval is then the cells' own, not
    /// [+0.0, +0.0]; without theirs, there is none.
    #[test]
    fn an_interval_is_never_narrower_than_the_cells_own_allow() {
        let spread = [90.0, 100.0, 100.0, 100.0, 100.0, 110.0];
        let a = cmp(&spread, &spread);
        let b = cmp(&spread.map(|x| 2.0 * x), &spread.map(|x| 2.0 * x));
        let (lo, hi) = (a.ci_low_pct.unwrap(), a.ci_high_pct.unwrap());
        assert!(lo < 0.0 && hi > 0.0, "{a:?}");
        let s = across_cells(&[&a, &b], 0.95);
        assert_eq!(s.change_pct, Some(0.0));
        let half = |c: &Comparison| {
            ((1.0 + c.ci_high_pct.unwrap() / 100.0).ln()
                - (1.0 + c.ci_low_pct.unwrap() / 100.0).ln())
                / 2.0
        };
        let expected = (half(&a).powi(2) + half(&b).powi(2)).sqrt() / 2.0;
        let got = (1.0 + s.ci_high_pct.unwrap() / 100.0).ln();
        assert!((got - expected).abs() < 1e-12, "{s:?}");
        assert!(s.ci_low_pct.unwrap() < 0.0, "{s:?}");
        // One run a side: no cell interval, and no spread across cells: no interval.
        let c = cmp(&[100.0], &[100.0]);
        let s = across_cells(&[&c, &c], 0.95);
        assert_eq!((s.ci_low_pct, s.ci_high_pct), (None, None), "{s:?}");
        assert_eq!(s.change_pct, Some(0.0));
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

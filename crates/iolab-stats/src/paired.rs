//! The change between two conditions measured in pairs (A then B, or B then A, close in
//! time). Pairing cancels drift that moves both members of a pair, which on a shared VM is
//! most of the noise: the unpaired comparison of the same runs can be several times wider.
//! The change is taken on the log of each pair's ratio, so +x% and -x% are symmetric and the
//! interval maps back to a percentage exactly.

use serde::Serialize;

use super::distributions::t_quantile;
use super::error::{check_finite, StatsError};
use super::summary::{mean, sample_stddev};

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PairedChange {
    pub pairs: usize,
    /// Geometric mean of candidate/baseline, minus 1, in percent.
    pub change_pct: f64,
    /// Student's t interval of the mean log ratio, mapped back to percent.
    pub ci_low_pct: f64,
    pub ci_high_pct: f64,
}

impl PairedChange {
    /// True when the whole interval lies within ±`bound_pct`.
    pub fn within(&self, bound_pct: f64) -> bool {
        self.ci_low_pct >= -bound_pct && self.ci_high_pct <= bound_pct
    }
}

/// The change from `baseline[i]` to `candidate[i]` over all pairs, with a two-sided
/// `level` confidence interval. Values must be positive (rates, throughputs).
pub fn paired_change(
    baseline: &[f64],
    candidate: &[f64],
    level: f64,
) -> Result<PairedChange, StatsError> {
    check_finite(baseline, "baseline")?;
    check_finite(candidate, "candidate")?;
    if baseline.len() != candidate.len() {
        return Err(StatsError::InvalidParameter {
            name: "pairs",
            reason: format!(
                "{} baseline values but {} candidate values",
                baseline.len(),
                candidate.len()
            ),
        });
    }
    if !(level > 0.0 && level < 1.0) {
        return Err(StatsError::InvalidParameter {
            name: "level",
            reason: format!("{level} is not between 0 and 1"),
        });
    }
    if let Some(v) = baseline.iter().chain(candidate).find(|v| **v <= 0.0) {
        return Err(StatsError::InvalidParameter {
            name: "values",
            reason: format!("{v} is not positive; a ratio needs positive values"),
        });
    }
    let logs: Vec<f64> = baseline
        .iter()
        .zip(candidate)
        // Apart, so a ratio beyond f64's range (5e-324 against 1) still has its log.
        .map(|(b, c)| c.ln() - b.ln())
        .collect();
    let n = logs.len();
    let m = mean(&logs);
    let sd = sample_stddev(&logs, m).ok_or_else(|| StatsError::InvalidParameter {
        name: "pairs",
        reason: format!("{n} pair(s); an interval needs at least 2"),
    })?;
    let t = t_quantile(0.5 + level / 2.0, (n - 1) as f64).ok_or_else(|| {
        StatsError::InvalidParameter {
            name: "level",
            reason: format!(
                "no t quantile for {level} with {} degrees of freedom",
                n - 1
            ),
        }
    })?;
    let half = t * sd / (n as f64).sqrt();
    let pct = |x: f64| (x.exp() - 1.0) * 100.0;
    Ok(PairedChange {
        pairs: n,
        change_pct: pct(m),
        ci_low_pct: pct(m - half),
        ci_high_pct: pct(m + half),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_a_t_interval_on_log_ratios() {
        // scipy: d = log(c/b); m = d.mean(); h = t.ppf(0.975, 3) * d.std(ddof=1) / 2
        // b = [100, 200, 50, 80], c = [101, 198, 51, 80.8]
        // m = 0.0074132, h = 0.0199453 -> +0.7441% [-1.2454%, +2.7736%] (scipy 1.17.1)
        let c = paired_change(
            &[100.0, 200.0, 50.0, 80.0],
            &[101.0, 198.0, 51.0, 80.8],
            0.95,
        )
        .unwrap();
        assert_eq!(c.pairs, 4);
        assert!((c.change_pct - 0.7441).abs() < 1e-3, "{c:?}");
        assert!((c.ci_low_pct - -1.2454).abs() < 1e-3, "{c:?}");
        assert!((c.ci_high_pct - 2.7736).abs() < 1e-3, "{c:?}");
        assert!(!c.within(1.0));
        assert!(c.within(3.0));
    }

    #[test]
    fn drift_shared_by_a_pair_cancels() {
        // Each pair moves together by up to 40%, the candidate is always 0.5% lower.
        let base = [100.0, 140.0, 70.0, 120.0, 90.0];
        let cand: Vec<f64> = base.iter().map(|b| b * 0.995).collect();
        let c = paired_change(&base, &cand, 0.95).unwrap();
        assert!((c.change_pct - -0.5).abs() < 1e-9);
        assert!(c.ci_high_pct - c.ci_low_pct < 1e-9);
    }

    #[test]
    fn ratios_beyond_f64s_range_still_have_a_change() {
        // The ratio 1 / 5e-324 is beyond f64: its log is not. (The interval's top, e^hundreds,
        // is beyond f64 too, and says so as infinity, not NaN.)
        let c = paired_change(&[5e-324, 1.0], &[1.0, 1.0], 0.95).unwrap();
        assert!(
            c.change_pct.is_finite() && c.ci_low_pct.is_finite(),
            "{c:?}"
        );
        assert!(!c.ci_high_pct.is_nan(), "{c:?}");
    }

    #[test]
    fn rejects_what_has_no_answer() {
        assert!(paired_change(&[1.0, 2.0], &[1.0], 0.95).is_err());
        assert!(paired_change(&[1.0], &[1.0], 0.95).is_err());
        assert!(paired_change(&[1.0, 0.0], &[1.0, 1.0], 0.95).is_err());
        assert!(paired_change(&[1.0, 2.0], &[1.0, 2.0], 1.5).is_err());
        assert!(paired_change(&[], &[], 0.95).is_err());
    }
}

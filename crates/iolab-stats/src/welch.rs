//! Welch's unequal-variance t-test (what mmtests marks its tables with). Reported next to
//! Mann–Whitney because readers of kernel mailing lists expect it; the verdict itself rests
//! on the rank test and the bootstrap CI, which do not assume normality.

use serde::Serialize;

use super::distributions::t_two_sided_p;
use super::error::{check_finite, StatsError};
use super::summary::{mean, sample_stddev};

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Welch {
    /// t = (mean(a) - mean(b)) / sqrt(s_a^2/n_a + s_b^2/n_b), as scipy's `ttest_ind(a, b)`.
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// Welch's t-test of `a` against `b`. `Ok(None)` when it is undefined: a group with fewer
/// than 2 values, or both groups without any variance (scipy returns NaN there).
pub fn welch_t_test(a: &[f64], b: &[f64]) -> Result<Option<Welch>, StatsError> {
    check_finite(a, "first group")?;
    check_finite(b, "second group")?;
    let (ma, mb) = (mean(a), mean(b));
    let (Some(sa), Some(sb)) = (sample_stddev(a, ma), sample_stddev(b, mb)) else {
        return Ok(None);
    };
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (va, vb) = (sa * sa / na, sb * sb / nb);
    if va + vb == 0.0 {
        return Ok(None);
    }
    let t = (ma - mb) / (va + vb).sqrt();
    let df = (va + vb).powi(2) / (va * va / (na - 1.0) + vb * vb / (nb - 1.0));
    Ok(t_two_sided_p(t, df).map(|p| Welch { t, df, p }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undefined_cases_are_none() {
        assert_eq!(welch_t_test(&[1.0], &[1.0, 2.0]).unwrap(), None);
        assert_eq!(welch_t_test(&[1.0, 1.0], &[2.0, 2.0]).unwrap(), None);
    }

    #[test]
    fn one_constant_group_still_works() {
        let w = welch_t_test(&[1.0, 1.0, 1.0], &[2.0, 3.0, 4.0])
            .unwrap()
            .unwrap();
        assert!((w.df - 2.0).abs() < 1e-12);
        assert!(w.p > 0.0 && w.p < 0.1);
    }
}

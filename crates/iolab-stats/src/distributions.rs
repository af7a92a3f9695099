//! Thin, panic-free wrappers over the few distributions the tests need (Student t, normal,
//! binomial). statrs asserts on out-of-domain arguments; these return `None` instead, so a
//! degenerate sample (n = 1, zero variance) becomes "no value" rather than a crash. Student's
//! t is computed in [`super::student_t`] (its quantile decides verdicts at small n).

use statrs::distribution::{ContinuousCDF, Normal};

pub use super::student_t::t_quantile;

/// Two-sided p-value of a t statistic: P(|T| >= |t|).
pub fn t_two_sided_p(t: f64, df: f64) -> Option<f64> {
    super::student_t::t_two_sided_sf(t, df).map(|p| p.min(1.0))
}

/// Upper tail of the standard normal, P(Z > z); defined for ±infinity.
pub fn normal_sf(z: f64) -> Option<f64> {
    if z.is_nan() {
        return None;
    }
    Some(Normal::standard().sf(z))
}

/// P(B <= k) for B ~ Binomial(n, 1/2).
pub fn binomial_half_cdf(k: usize, n: usize) -> f64 {
    binomial_half_cdfs(n).nth(k.min(n)).unwrap_or(1.0)
}

/// P(B <= 0), P(B <= 1), ... for B ~ Binomial(n, 1/2), accumulated term by term in O(1)
/// each. The pmf is formed in log space, so 2^-n underflowing for n > 1074 only makes the
/// far tail terms 0 (their true size) instead of zeroing the whole sum.
pub fn binomial_half_cdfs(n: usize) -> impl Iterator<Item = f64> {
    let ln_half_n = n as f64 * 0.5f64.ln();
    let mut ln_c = 0.0f64; // ln C(n, i)
    let mut sum = 0.0f64;
    (0..=n).map(move |i| {
        sum += (ln_c + ln_half_n).exp();
        ln_c += ((n - i) as f64).ln() - ((i + 1) as f64).ln();
        sum.min(1.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantile_matches_tables() {
        // t_{0.975, 4} = 2.776445 (standard tables).
        assert!((t_quantile(0.975, 4.0).unwrap() - 2.776445105).abs() < 1e-6);
        assert_eq!(t_quantile(0.975, 0.0), None);
        assert_eq!(t_quantile(f64::NAN, 3.0), None);
    }

    #[test]
    fn binomial_half_cdf_small_and_large() {
        assert!((binomial_half_cdf(0, 6) - 1.0 / 64.0).abs() < 1e-15);
        assert!((binomial_half_cdf(2, 4) - 11.0 / 16.0).abs() < 1e-15);
        assert!((binomial_half_cdf(1100, 2000) - 1.0).abs() < 1e-3);
        assert!((binomial_half_cdf(1000, 2000) - 0.5089).abs() < 1e-3);
    }
}

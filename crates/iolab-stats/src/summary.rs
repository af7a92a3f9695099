//! Descriptive statistics for one cell's sample vector: location, spread, confidence
//! intervals of the mean and the median, and outliers flagged (never dropped).
//!
//! Why both CIs: the mean's Student-t interval exists from n = 2 and is what the adaptive
//! rule tightens; the median's distribution-free interval makes no normality assumption,
//! which matters on this kind of machine (bimodal runs, CV of 30-45%), but needs n >= 6.

use serde::Serialize;

use super::distributions::{binomial_half_cdfs, t_quantile};
use super::error::{check_finite, StatsError};
use super::order::{mad, median_of_sorted, sorted};
use super::resolution::Resolution;

/// Confidence level used for every interval in a summary.
pub const CONFIDENCE: f64 = 0.95;

/// Modified z-score above which a value is flagged (Iglewicz & Hoaglin; hyperfine uses it).
pub const OUTLIER_Z: f64 = 3.5;

/// Fewer values than this are never marked. The modified z-score divides by the MAD, which
/// with few values rests on one or two gaps: at n = 3 the MAD is the smaller of the two
/// gaps around the median, so the farther run is flagged whenever one gap is 5.2 times the
/// other. On normally distributed runs (40,000 simulated samples per n, no true outlier)
/// the share of samples with a mark is 28% at n = 3, 17% at 4, 20% at 5, then 15% at 6,
/// 13.5% at 8, 12% at 10 and 8% at 50: below 6 a mark says more about the MAD than about
/// the run. 6 is also where the median the score is centred on first has a 95%
/// distribution-free CI (see `ci_median`), the size benchstat asks for.
pub const OUTLIER_MIN_N: usize = 6;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

impl Interval {
    pub fn half_width(&self) -> f64 {
        (self.high - self.low) / 2.0
    }
    pub fn contains(&self, x: f64) -> bool {
        self.low <= x && x <= self.high
    }
}

/// The distribution-free CI of the median is a pair of order statistics, so its coverage
/// is not exactly 95%; the achieved level is reported with it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MedianInterval {
    pub low: f64,
    pub high: f64,
    /// 1-based ranks of the order statistics that bound the interval.
    pub rank_low: usize,
    pub rank_high: usize,
    /// Exact coverage of [x_(rank_low), x_(rank_high)] for a continuous distribution (for
    /// histogram buckets' values, of the two values' buckets' outer edges).
    pub confidence: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub median: f64,
    /// Sample standard deviation (n - 1 in the denominator); `None` for n = 1.
    pub stddev: Option<f64>,
    /// stddev / |mean|; `None` when the stddev is undefined or the mean is zero.
    pub cv: Option<f64>,
    pub min: f64,
    pub max: f64,
    /// 95% Student-t CI of the mean; `None` for n < 2.
    pub ci_mean: Option<Interval>,
    /// 95% distribution-free CI of the median; `None` for n < 6, where even [min, max]
    /// covers the median with less than 95% probability.
    pub ci_median: Option<MedianInterval>,
    /// Indices (into the input, in input order) of values flagged as outliers.
    pub outliers: Vec<usize>,
    /// The CIs hold what the values' histogram buckets leave open ([`summarize_buckets`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ci_widened_to_buckets: bool,
}

impl Summary {
    /// Half-width of the mean's CI relative to |mean| (0.02 = ±2%); the number the
    /// adaptive repetition rule and the `±x%` in tables use.
    pub fn ci_mean_rel_half_width(&self) -> Option<f64> {
        let ci = self.ci_mean?;
        (self.mean != 0.0).then(|| ci.half_width() / self.mean.abs())
    }
}

/// Summarises `values`. Errors on empty input or a NaN/infinite value (naming its index).
pub fn summarize(values: &[f64]) -> Result<Summary, StatsError> {
    check_finite(values, "sample")?;
    let n = values.len();
    let s = sorted(values);
    let mean = mean(values);
    let median = median_of_sorted(&s).expect("non-empty");
    let stddev = sample_stddev(values, mean);
    let cv = stddev.and_then(|sd| (mean != 0.0).then(|| sd / mean.abs()));
    let ci_mean = stddev.and_then(|sd| {
        let t = t_quantile(0.5 + CONFIDENCE / 2.0, (n - 1) as f64)?;
        let half = t * sd / (n as f64).sqrt();
        Some(Interval {
            low: mean - half,
            high: mean + half,
        })
    });
    Ok(Summary {
        n,
        mean,
        median,
        stddev,
        cv,
        min: s[0],
        max: s[n - 1],
        ci_mean,
        ci_median: median_ci(&s, CONFIDENCE),
        outliers: outliers(values, median),
        ci_widened_to_buckets: false,
    })
}

/// [`summarize`] for values that are histogram buckets' representatives (latency
/// percentiles): each CI then also holds what the buckets leave open, as runs that all
/// print one bucket's value still leave the true value anywhere in it.
pub fn summarize_buckets(values: &[f64], r: &Resolution) -> Result<Summary, StatsError> {
    let mut s = summarize(values)?;
    // The true mean lies as far from the measured one as the mean of the buckets' edges.
    let (low, high) = r.edges(values);
    let (below, above) = (s.mean - mean(&low), mean(&high) - s.mean);
    if let Some(ci) = s.ci_mean.as_mut() {
        s.ci_widened_to_buckets = below > 0.0 || above > 0.0;
        (ci.low, ci.high) = (ci.low - below, ci.high + above);
    }
    // The median's CI is two of the values: the true ones lie anywhere in their buckets.
    if let Some(ci) = s.ci_median.as_mut() {
        (ci.low, ci.high) = (r.bucket(ci.low).0, r.bucket(ci.high).1);
    }
    Ok(s)
}

pub(crate) fn mean(values: &[f64]) -> f64 {
    // Two-pass mean: a shifted sum keeps precision for large, close values (IOPS ~ 1e6).
    let first = values[0];
    first + values.iter().map(|v| v - first).sum::<f64>() / values.len() as f64
}

pub(crate) fn sample_stddev(values: &[f64], mean: f64) -> Option<f64> {
    let n = values.len();
    if n < 2 {
        return None;
    }
    let ss: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
    Some((ss / (n - 1) as f64).sqrt())
}

/// The classic order-statistic interval: [x_(k), x_(n-k+1)] covers the median with
/// probability 1 - 2 P(B <= k-1), B ~ Binomial(n, 1/2). Takes the largest k (narrowest
/// interval) whose coverage is still >= `level`.
pub fn median_ci(sorted: &[f64], level: f64) -> Option<MedianInterval> {
    let n = sorted.len();
    let mut best = None;
    // The k-th entry is P(B <= k-1), so coverage(k) = 1 - 2 * cdfs[k-1].
    for (k, cdf) in (1..=n.div_ceil(2)).zip(binomial_half_cdfs(n)) {
        let c = 1.0 - 2.0 * cdf;
        if c >= level {
            best = Some((k, c));
        } else {
            break;
        }
    }
    let (k, confidence) = best?;
    Some(MedianInterval {
        low: sorted[k - 1],
        high: sorted[n - k],
        rank_low: k,
        rank_high: n - k + 1,
        confidence,
    })
}

/// Modified z-score M_i = 0.6745 (x_i - median) / MAD; |M_i| > 3.5 is an outlier; nothing
/// is marked among fewer than [`OUTLIER_MIN_N`] values.
/// When more than half the values are identical the MAD is 0 and the score is undefined;
/// then the mean absolute deviation scaled by 1.253314 (its ratio to sigma under normality,
/// as in IBM's formulation of the rule) stands in, and if that is 0 too all values are
/// equal and none is an outlier.
pub fn outliers(values: &[f64], median: f64) -> Vec<usize> {
    if values.len() < OUTLIER_MIN_N {
        return Vec::new();
    }
    let Some(mad) = mad(values, median) else {
        return Vec::new();
    };
    let score: Box<dyn Fn(f64) -> f64> = if mad > 0.0 {
        Box::new(move |x| 0.6745 * (x - median) / mad)
    } else {
        let mean_ad = values.iter().map(|v| (v - median).abs()).sum::<f64>() / values.len() as f64;
        if mean_ad == 0.0 {
            return Vec::new();
        }
        Box::new(move |x| (x - median) / (1.253314 * mean_ad))
    };
    values
        .iter()
        .enumerate()
        .filter(|(_, &x)| score(x).abs() > OUTLIER_Z)
        .map(|(i, _)| i)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Six runs that all printed fio's bucket of 1,056,768 ns: their spread says nothing,
    /// the bucket says the true p99 is anywhere from 1,048.576 to 1,064.96 us.
    #[test]
    fn runs_in_one_bucket_have_the_buckets_width_as_their_ci() {
        let r = Resolution::FIO_NS_AS_US;
        let runs = [1056.768; 6];
        let s = summarize_buckets(&runs, &r).unwrap();
        let ci = s.ci_mean.unwrap();
        assert_eq!((ci.low, ci.high), (1048.576, 1064.96));
        assert!(s.ci_widened_to_buckets);
        let m = s.ci_median.unwrap();
        assert_eq!((m.low, m.high), (1048.576, 1064.96));
        // Elsewhere the interval also grows by how far, on average, the buckets' edges lie
        // from the values.
        let spread = [1056.768, 1089.536, 1122.304, 1056.768, 1155.072, 1089.536];
        let (plain, bucketed) = (
            summarize(&spread).unwrap(),
            summarize_buckets(&spread, &r).unwrap(),
        );
        let (low, high) = r.edges(&spread);
        let (p, b) = (plain.ci_mean.unwrap(), bucketed.ci_mean.unwrap());
        assert!((b.low - (p.low - (plain.mean - mean(&low)))).abs() < 1e-9);
        assert!((b.high - (p.high + (mean(&high) - plain.mean))).abs() < 1e-9);
        // Below 128 ns fio's values are exact: nothing to add.
        let exact = [0.1, 0.11, 0.12];
        let bucketed = summarize_buckets(&exact, &r).unwrap();
        assert_eq!(bucketed.ci_mean, summarize(&exact).unwrap().ci_mean);
        assert!(!bucketed.ci_widened_to_buckets);
        assert_eq!(summarize_buckets(&[1056.768], &r).unwrap().ci_mean, None);
    }

    #[test]
    fn single_value_has_no_spread_or_ci() {
        let s = summarize(&[5.0]).unwrap();
        assert_eq!(
            (s.n, s.mean, s.median, s.min, s.max),
            (1, 5.0, 5.0, 5.0, 5.0)
        );
        assert_eq!(s.stddev, None);
        assert_eq!(s.ci_mean, None);
        assert_eq!(s.ci_median, None);
    }

    #[test]
    fn empty_and_nan_are_errors_that_say_what() {
        assert!(matches!(summarize(&[]), Err(StatsError::Empty { .. })));
        let err = summarize(&[1.0, f64::NAN]).unwrap_err();
        assert!(err.to_string().contains("value 1"), "{err}");
    }

    #[test]
    fn median_ci_needs_six_values() {
        assert!(summarize(&[1.0, 2.0, 3.0, 4.0, 5.0])
            .unwrap()
            .ci_median
            .is_none());
        let ci = summarize(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
            .unwrap()
            .ci_median
            .unwrap();
        assert_eq!((ci.low, ci.high), (1.0, 6.0));
        assert!((ci.confidence - (1.0 - 2.0 / 64.0)).abs() < 1e-12);
    }

    #[test]
    fn median_ci_of_a_large_sample_is_fast_and_narrow() {
        let values: Vec<f64> = (0..100_000).map(|i| i as f64).collect();
        let ci = summarize(&values).unwrap().ci_median.unwrap();
        // Normal approximation: ranks n/2 -+ 1.96 sqrt(n)/2 = 50,000 -+ 310.
        assert!((ci.rank_low as i64 - 49_690).abs() <= 2, "{ci:?}");
        assert!(ci.confidence >= 0.95 && ci.confidence < 0.951);
    }

    #[test]
    fn outlier_is_flagged_not_dropped() {
        let s = summarize(&[10.0, 10.2, 9.9, 10.1, 10.0, 30.0]).unwrap();
        assert_eq!(s.outliers, vec![5]);
        assert_eq!(s.n, 6);
        assert_eq!(s.max, 30.0);
    }

    #[test]
    fn no_marks_below_six_runs() {
        // At n = 3 the far run's modified z-score is 0.6745 * 9 / 1 = 6.1 > 3.5: it used
        // to be marked although 3 runs cannot tell a far run from a wide spread.
        let three = [100.0, 101.0, 110.0];
        let median = 101.0;
        let z = 0.6745 * (110.0 - median) / 1.0;
        assert!(z > OUTLIER_Z);
        assert!(summarize(&three).unwrap().outliers.is_empty());
        let five = [10.0, 10.2, 9.9, 10.1, 30.0];
        assert!(summarize(&five).unwrap().outliers.is_empty());
        // The same far run among six is marked.
        let six = [10.0, 10.2, 9.9, 10.1, 10.0, 30.0];
        assert_eq!(summarize(&six).unwrap().outliers, vec![5]);
    }

    #[test]
    fn zero_mad_falls_back_to_mean_absolute_deviation() {
        let s = summarize(&[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 50.0]).unwrap();
        assert_eq!(s.outliers, vec![7]);
        assert!(summarize(&[2.0; 4]).unwrap().outliers.is_empty());
    }
}

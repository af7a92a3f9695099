//! Order statistics: sorting finite values, medians and quantiles. Kept apart because the
//! summary, the outlier rule, the bootstrap and the latency percentiles all need the same
//! definition of "median" (the mean of the two middle values for even n, as numpy does).

/// Sorts a copy of `values` ascending. Callers have already rejected NaN, so the total order
/// used here only matters for robustness: NaN sorts last instead of panicking.
pub fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// Median of an ascending slice; `None` when empty.
pub fn median_of_sorted(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// Median of a scratch buffer, reordering it: two selections instead of a sort, O(n) rather
/// than O(n log n) — the bootstrap takes thousands of medians of resamples, and on cells with
/// hundreds of runs the sort dominated `compare`. Same value as [`median_of_sorted`].
pub fn median_in_place(buf: &mut [f64]) -> Option<f64> {
    let n = buf.len();
    if n == 0 {
        return None;
    }
    let (left, &mut upper, _) = buf.select_nth_unstable_by(n / 2, f64::total_cmp);
    if n % 2 == 1 {
        return Some(upper);
    }
    let lower = left.iter().copied().max_by(f64::total_cmp)?;
    Some((lower + upper) / 2.0)
}

/// Median of any slice (copies and sorts).
pub fn median(values: &[f64]) -> Option<f64> {
    median_of_sorted(&sorted(values))
}

/// Quantile `q` in [0, 1] of an ascending slice by linear interpolation between order
/// statistics (Hyndman & Fan type 7, numpy's default), so values match `numpy.quantile`.
pub fn quantile_of_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let h = (sorted.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    Some(sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo]))
}

/// Median absolute deviation from the median (unscaled), `None` when empty.
pub fn mad(values: &[f64], median: f64) -> Option<f64> {
    let deviations: Vec<f64> = values.iter().map(|v| (v - median).abs()).collect();
    self::median(&deviations)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_in_place_agrees_with_sorting() {
        let mut x: u64 = 7;
        for n in 1..60 {
            let v: Vec<f64> = (0..n)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((x >> 33) % 17) as f64 // many ties
                })
                .collect();
            let mut buf = v.clone();
            assert_eq!(median_in_place(&mut buf), median(&v), "n = {n}");
        }
        assert_eq!(median_in_place(&mut []), None);
    }

    #[test]
    fn median_even_and_odd() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn quantile_interpolates_like_numpy() {
        let s = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile_of_sorted(&s, 0.25), Some(1.75));
        assert_eq!(quantile_of_sorted(&s, 1.0), Some(4.0));
        assert_eq!(quantile_of_sorted(&s, 1.5), None);
    }

    #[test]
    fn mad_of_symmetric_data() {
        assert_eq!(mad(&[1.0, 2.0, 3.0, 4.0, 100.0], 3.0), Some(1.0));
    }
}

//! The Mann–Whitney U test: does one group tend to give larger values than the other?
//! Rank-based, so it needs no normality (bimodal fio runs are common here) and agrees with
//! the median-based change the comparison reports.
//!
//! Method choice follows scipy's `mannwhitneyu(method="auto")` exactly, so the fixtures can
//! be checked against it: the exact null distribution when at least one group has <= 8
//! values and there are no ties; otherwise the normal approximation with the tie-corrected
//! variance and a continuity correction of 0.5. The two-sided p-value is
//! 2 * P(U >= max(U1, U2)), clipped to 1.

use serde::Serialize;

use super::distributions::normal_sf;
use super::error::{check_finite, StatsError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MwuMethod {
    /// scipy's rule: exact when min(n1, n2) <= 8 and no ties, else asymptotic.
    Auto,
    Exact,
    Asymptotic,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MannWhitney {
    /// U of the first group (scipy's `statistic`): pairs (a, b) with a > b, ties count 1/2.
    pub u1: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// The method actually used (never `Auto`).
    pub method: MwuMethod,
    pub ties: bool,
}

/// Two-sided Mann–Whitney U test of `a` against `b`.
pub fn mann_whitney_u(a: &[f64], b: &[f64], method: MwuMethod) -> Result<MannWhitney, StatsError> {
    check_finite(a, "first group")?;
    check_finite(b, "second group")?;
    let (n1, n2) = (a.len(), b.len());
    let (ranks, tie_sizes) = average_ranks(a.iter().chain(b).copied().collect());
    let r1: f64 = ranks[..n1].iter().sum();
    let u1 = r1 - (n1 * (n1 + 1)) as f64 / 2.0;
    let u2 = (n1 * n2) as f64 - u1;
    let u = u1.max(u2);
    let ties = tie_sizes.iter().any(|&t| t > 1);
    let method = match method {
        MwuMethod::Auto if (n1 > 8 && n2 > 8) || ties => MwuMethod::Asymptotic,
        MwuMethod::Auto => MwuMethod::Exact,
        m => m,
    };
    let one_sided = match method {
        // scipy casts U to an integer here; with ties (only reachable when Exact is forced)
        // that truncation makes the p-value conservative. Same here.
        MwuMethod::Exact => exact_sf(u.trunc() as usize, n1, n2),
        _ => asymptotic_sf(u, n1, n2, &tie_sizes),
    };
    Ok(MannWhitney {
        u1,
        p: (2.0 * one_sided).clamp(0.0, 1.0),
        method,
        ties,
    })
}

/// The smallest two-sided p-value the exact test can give for these group sizes: both
/// groups completely separated, 2 / C(n1 + n2, n1). With 3 vs 3 it is 0.1, so no
/// difference can ever be significant at 5%.
pub fn min_two_sided_p(n1: usize, n2: usize) -> f64 {
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    (2.0 / binomial(n1 + n2, n1)).min(1.0)
}

fn binomial(n: usize, k: usize) -> f64 {
    let k = k.min(n - k);
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

/// Ranks 1..=n with ties given their average rank; also returns the size of each tie group.
fn average_ranks(values: Vec<f64>) -> (Vec<f64>, Vec<usize>) {
    let n = values.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| values[i].total_cmp(&values[j]));
    let mut ranks = vec![0.0; n];
    let mut tie_sizes = Vec::new();
    let mut start = 0;
    while start < n {
        let mut end = start + 1;
        while end < n && values[order[end]] == values[order[start]] {
            end += 1;
        }
        let avg = (start + 1 + end) as f64 / 2.0; // mean of ranks start+1..=end
        for &i in &order[start..end] {
            ranks[i] = avg;
        }
        tie_sizes.push(end - start);
        start = end;
    }
    (ranks, tie_sizes)
}

fn asymptotic_sf(u: f64, n1: usize, n2: usize, tie_sizes: &[usize]) -> f64 {
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let n = n1f + n2f;
    let mu = n1f * n2f / 2.0;
    let tie_term: f64 = tie_sizes.iter().map(|&t| (t * t * t - t) as f64).sum();
    let var = n1f * n2f / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    let numerator = u - mu - 0.5;
    // All values tied: the variance is 0 and U equals its mean; scipy gets z = -inf, p = 1.
    let z = if var > 0.0 {
        numerator / var.sqrt()
    } else {
        f64::NEG_INFINITY
    };
    normal_sf(z).unwrap_or(1.0)
}

/// P(U >= u) under H0 without ties. The number of arrangements giving each U value is the
/// coefficient list of the Gaussian binomial [n1+n2 choose m]_q with m = min(n1, n2); it is
/// built by the additive recurrence [j+i choose i] = [j+i-1 choose i-1] + q^i [j-1+i choose i]
/// so every step adds non-negative numbers (no cancellation in f64).
fn exact_sf(u: usize, n1: usize, n2: usize) -> f64 {
    let counts = u_distribution_counts(n1.min(n2), n1.max(n2));
    let total: f64 = counts.iter().sum();
    if u >= counts.len() {
        return 0.0;
    }
    counts[u..].iter().sum::<f64>() / total
}

/// Counts of arrangements with U = 0..=m*n for groups of sizes m <= n.
fn u_distribution_counts(m: usize, n: usize) -> Vec<f64> {
    // polys[i] = [i + j choose i]_q for the current j; starts at j = 0 where each is 1.
    let mut polys: Vec<Vec<f64>> = vec![vec![1.0]; m + 1];
    for j in 1..=n {
        for i in 1..=m {
            // new polys[i] = new polys[i-1] + q^i * old polys[i]; degree i*j.
            let mut next = vec![0.0; i * j + 1];
            for (k, c) in polys[i - 1].iter().enumerate() {
                next[k] += c;
            }
            for (k, c) in polys[i].iter().enumerate() {
                next[k + i] += c;
            }
            polys[i] = next;
        }
    }
    polys.pop().unwrap_or_else(|| vec![1.0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distribution_of_u_for_two_by_two() {
        // Arrangements of 2+2: U = 0,1,2,2,3,4 -> counts 1,1,2,1,1.
        assert_eq!(u_distribution_counts(2, 2), vec![1.0, 1.0, 2.0, 1.0, 1.0]);
    }

    #[test]
    fn three_per_side_can_never_reach_five_percent() {
        let r = mann_whitney_u(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0], MwuMethod::Auto).unwrap();
        assert_eq!(r.method, MwuMethod::Exact);
        assert!((r.p - 0.1).abs() < 1e-12);
        assert!((min_two_sided_p(3, 3) - 0.1).abs() < 1e-12);
        assert!((min_two_sided_p(4, 4) - 2.0 / 70.0).abs() < 1e-12);
    }

    #[test]
    fn ties_switch_to_the_normal_approximation() {
        let r = mann_whitney_u(&[1.0, 2.0, 2.0], &[2.0, 3.0, 4.0], MwuMethod::Auto).unwrap();
        assert_eq!(r.method, MwuMethod::Asymptotic);
        assert!(r.ties);
        let all_same = mann_whitney_u(&[1.0; 4], &[1.0; 5], MwuMethod::Auto).unwrap();
        assert_eq!(all_same.p, 1.0);
    }

    #[test]
    fn empty_group_is_an_error() {
        assert!(mann_whitney_u(&[], &[1.0], MwuMethod::Auto).is_err());
    }
}

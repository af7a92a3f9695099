//! The Mann–Whitney U test: does one group tend to give larger values than the other?
//! Rank-based, so it needs no normality (bimodal fio runs are common here) and agrees with
//! the median-based change the comparison reports.
//!
//! Method choice `Auto` follows scipy's `mannwhitneyu(method="auto")` exactly, so the
//! fixtures can be checked against it: the exact null distribution when at least one group
//! has <= 8 values and there are no ties; otherwise the normal approximation with the
//! tie-corrected variance and a continuity correction of 0.5. The two-sided p-value is
//! 2 * P(U >= max(U1, U2)), clipped to 1.
//!
//! With ties at those sizes the normal approximation is far too small (two groups of four,
//! each constant, give 0.013 where no arrangement of eight values can be rarer than 2 in 70,
//! 0.029), and ties are common here: fio's percentiles are histogram bin edges, and counts
//! are often 0. `AutoExact`, what comparisons use, takes instead the exact null distribution
//! *given the ties* (`Conditional`): every way of splitting the pooled values into the two
//! groups is equally likely, and p is twice the share of splits whose U is at most (or at
//! least, the smaller) the observed one. It is counted, not enumerated, over the sums of the
//! pooled midranks.

use serde::Serialize;

use super::distributions::normal_sf;
use super::error::{check_finite, StatsError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MwuMethod {
    /// scipy's rule: exact when min(n1, n2) <= 8 and no ties, else asymptotic.
    Auto,
    /// scipy's rule, except that ties where the exact test would run use `Conditional`.
    AutoExact,
    Exact,
    /// Exact, conditional on the ties (a permutation test on the midranks).
    Conditional,
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
        MwuMethod::AutoExact if ties && (n1 <= 8 || n2 <= 8) && exact_is_cheap(n1, n2) => {
            MwuMethod::Conditional
        }
        MwuMethod::AutoExact => return mann_whitney_u(a, b, MwuMethod::Auto),
        MwuMethod::Auto if (n1 > 8 && n2 > 8) || ties => MwuMethod::Asymptotic,
        // A small group beside a huge one (8 vs 160,000): the exact counts would take the
        // O(m^2 n^2) path, hours; the normal approximation is exact to far below alpha there.
        MwuMethod::Auto if !exact_is_cheap(n1, n2) => MwuMethod::Asymptotic,
        MwuMethod::Auto => MwuMethod::Exact,
        m => m,
    };
    let p = match method {
        // scipy casts U to an integer here; with ties (only reachable when Exact is forced)
        // that truncation makes the p-value conservative. Same here.
        MwuMethod::Exact => 2.0 * exact_sf(u.trunc() as usize, n1, n2),
        MwuMethod::Conditional => conditional_p(&ranks, n1),
        _ => 2.0 * asymptotic_sf(u, n1, n2, &tie_sizes),
    };
    Ok(MannWhitney {
        u1,
        p: p.clamp(0.0, 1.0),
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

/// The two-sided p of the first `n1` of the pooled midranks `ranks` being the first group:
/// twice the smaller tail, the share of all C(N, n1) choices of n1 midranks whose sum is at
/// most (or at least) theirs (U differs from that sum by a constant), as the exact test
/// without ties doubles its tail; so separated groups give 2 / C(N, n1) as there. Doubled,
/// midranks are integers, so sums are counted exactly by size and value (at most
/// N * n1 * 2N steps).
fn conditional_p(ranks: &[f64], n1: usize) -> f64 {
    let doubled: Vec<usize> = ranks.iter().map(|r| (2.0 * r).round() as usize).collect();
    let max_sum: usize = doubled.iter().sum();
    // ways[k][s]: choices of k of the values seen so far with doubled sum s.
    let mut ways = vec![vec![0u128; max_sum + 1]; n1 + 1];
    ways[0][0] = 1;
    for (seen, &w) in doubled.iter().enumerate() {
        for k in (1..=n1.min(seen + 1)).rev() {
            let (lower, upper) = ways.split_at_mut(k);
            for s in (w..=max_sum).rev() {
                upper[0][s] += lower[k - 1][s - w];
            }
        }
    }
    let observed: usize = doubled[..n1].iter().sum();
    let total: u128 = ways[n1].iter().sum();
    let below: u128 = ways[n1][..=observed].iter().sum();
    let above: u128 = ways[n1][observed..].iter().sum();
    (2.0 * below.min(above) as f64 / total as f64).min(1.0)
}

/// P(U >= u) under H0 without ties, from the exact counts of arrangements per U value.
fn exact_sf(u: usize, n1: usize, n2: usize) -> f64 {
    let counts = u_distribution_counts(n1.min(n2), n1.max(n2));
    let total: f64 = counts.iter().sum();
    if u >= counts.len() {
        return 0.0;
    }
    counts[u..].iter().sum::<f64>() / total
}

/// Counts of arrangements with U = 0..=m*n for groups of sizes m <= n: the coefficients of
/// the Gaussian binomial [m+n choose m]_q.
///
/// When C(m+n, m) fits comfortably in an i128 (always for m <= 8, the sizes scipy's `auto`
/// sends here, up to n ~ 10^5) they are computed exactly in integers as
/// prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i), in O(m^2 n). Otherwise (only when `Exact` is
/// forced on two large groups) the additive recurrence
/// [j+i choose i] = [j+i-1 choose i-1] + q^i [j-1+i choose i] runs in f64: O(m^2 n^2), but
/// every step adds non-negative numbers, so there is no cancellation.
fn u_distribution_counts(m: usize, n: usize) -> Vec<f64> {
    if exact_is_cheap(m, n) {
        u_counts_exact(m, n).into_iter().map(|c| c as f64).collect()
    } else {
        u_counts_additive(m, n)
    }
}

/// Whether the exact counts of groups of `m` and `n` fit the integer product (see
/// [`u_distribution_counts`]).
fn exact_is_cheap(m: usize, n: usize) -> bool {
    ln_binomial(m + n, m.min(n)) < 37.0 * std::f64::consts::LN_10
}

fn ln_binomial(n: usize, k: usize) -> f64 {
    (0..k.min(n - k))
        .map(|i| ((n - i) as f64 / (i + 1) as f64).ln())
        .sum()
}

fn u_counts_exact(m: usize, n: usize) -> Vec<i128> {
    // The product before each division reaches degree i*n + i, hence the extra m slots.
    let mut poly = vec![0i128; m * n + m + 1];
    poly[0] = 1;
    let mut degree = 0;
    for i in 1..=m {
        // multiply by (1 - q^(n+i)); downwards, so every source term is still unmodified
        let shift = n + i;
        for j in (shift..=degree + shift).rev() {
            poly[j] -= poly[j - shift];
        }
        // divide by (1 - q^i): a running sum with stride i (exact: the quotient is a
        // polynomial, so the top i coefficients come out 0)
        for j in i..=degree + shift {
            poly[j] += poly[j - i];
        }
        degree += n;
    }
    poly.truncate(m * n + 1);
    poly
}

fn u_counts_additive(m: usize, n: usize) -> Vec<f64> {
    // polys[i] = [i + j choose i]_q for the current j; starts at j = 0 where each is 1.
    let mut polys: Vec<Vec<f64>> = vec![vec![1.0]; m + 1];
    for j in 1..=n {
        for i in 1..=m {
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
    fn a_small_group_beside_a_huge_one_takes_the_normal_approximation() {
        // Exact counts there would take hours (8 vs 160,000); the approximation, a moment.
        let big: Vec<f64> = (0..160_000).map(f64::from).collect();
        let small: Vec<f64> = (0..8).map(|i| f64::from(i) * 20_000.0 + 0.5).collect();
        let r = mann_whitney_u(&small, &big, MwuMethod::Auto).unwrap();
        assert_eq!(r.method, MwuMethod::Asymptotic);
        assert!(r.p > 0.5, "{r:?}");
        // Where the counts fit, auto stays exact.
        let r = mann_whitney_u(&small, &big[..1000], MwuMethod::Auto).unwrap();
        assert_eq!(r.method, MwuMethod::Exact);
    }

    /// With ties at small sizes the p-value is exact given the ties: completely separated
    /// groups give 2 / C(N, n1), the least any split can give (the normal approximation gave
    /// 0.013, 0.014 and 0.003 for the first three).
    #[test]
    fn tied_small_groups_get_the_exact_conditional_p() {
        let p = |a: &[f64], b: &[f64]| {
            let r = mann_whitney_u(a, b, MwuMethod::AutoExact).unwrap();
            assert_eq!(r.method, MwuMethod::Conditional);
            r.p
        };
        let close = |got: f64, want: f64| assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        close(p(&[2.0; 4], &[3.0; 4]), 2.0 / 70.0);
        close(p(&[2.0; 3], &[3.0; 5]), 2.0 / 56.0);
        close(p(&[2.0; 2], &[3.0; 9]), 2.0 / 55.0);
        close(p(&[0.0; 4], &[10.0, 12.0, 11.0, 13.0]), 2.0 / 70.0);
        // Without ties it is the exact test's p; past the exact test's sizes, scipy's rule.
        let (a, b) = ([1.0, 4.0, 6.0, 9.0], [2.0, 3.0, 5.0, 7.0, 8.0]);
        let exact = mann_whitney_u(&a, &b, MwuMethod::Exact).unwrap();
        let auto = mann_whitney_u(&a, &b, MwuMethod::AutoExact).unwrap();
        assert_eq!((auto.method, auto.p), (MwuMethod::Exact, exact.p));
        close(
            conditional_p(&average_ranks([&a[..], &b[..]].concat()).0, 4),
            exact.p,
        );
        let big: Vec<f64> = (0..20).map(|i| f64::from(i / 2)).collect();
        let r = mann_whitney_u(&big[..10], &big[10..], MwuMethod::AutoExact).unwrap();
        assert_eq!(r.method, MwuMethod::Asymptotic);
    }

    /// The counted distribution agrees with every split enumerated, ties and all.
    #[test]
    fn conditional_p_is_the_share_of_splits_as_extreme() {
        let pooled = [1.0, 2.0, 1.0, 2.0, 3.0, 5.0, 3.0, 2.0, 4.0, 3.0];
        let n1 = 4;
        let ranks = average_ranks(pooled.to_vec()).0;
        let observed = ranks[..n1].iter().sum::<f64>();
        let (mut below, mut above, mut all) = (0, 0, 0);
        for mask in 0u32..1 << pooled.len() {
            if mask.count_ones() as usize != n1 {
                continue;
            }
            let sum: f64 = (0..pooled.len())
                .filter(|i| mask >> i & 1 == 1)
                .map(|i| ranks[i])
                .sum();
            all += 1;
            below += usize::from(sum <= observed + 1e-9);
            above += usize::from(sum >= observed - 1e-9);
        }
        let want = (2.0 * below.min(above) as f64 / all as f64).min(1.0);
        assert!(want < 0.2, "{want}");
        assert!((conditional_p(&ranks, n1) - want).abs() < 1e-12);
    }

    #[test]
    fn distribution_of_u_for_two_by_two() {
        // Arrangements of 2+2: U = 0,1,2,2,3,4 -> counts 1,1,2,1,1.
        assert_eq!(u_distribution_counts(2, 2), vec![1.0, 1.0, 2.0, 1.0, 1.0]);
    }

    #[test]
    fn integer_and_additive_counts_agree() {
        for (m, n) in [(1, 1), (1, 7), (3, 5), (8, 8), (6, 20), (10, 12)] {
            let exact: Vec<f64> = u_counts_exact(m, n).into_iter().map(|c| c as f64).collect();
            assert_eq!(exact, u_counts_additive(m, n), "m={m} n={n}");
        }
    }

    #[test]
    fn exact_with_one_small_group_is_fast() {
        // 8 vs 10,000 without ties: scipy's auto rule picks the exact test here.
        let a: Vec<f64> = (0..8).map(|i| i as f64 * 1250.0 + 0.5).collect();
        let b: Vec<f64> = (0..10_000).map(|i| i as f64).collect();
        let start = std::time::Instant::now();
        let r = mann_whitney_u(&a, &b, MwuMethod::Auto).unwrap();
        assert_eq!(r.method, MwuMethod::Exact);
        assert!(r.p > 0.5, "{r:?}");
        assert!(start.elapsed().as_secs_f64() < 5.0);
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

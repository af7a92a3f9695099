//! Baseline vs candidate for one cell and metric: how large is the change, how sure are we,
//! and is it an improvement, a regression or noise (`~`)?
//!
//! The change is the relative change of the **medians**, not the means: runs on these
//! machines are often bimodal or carry a slow outlier (CV of 30-45% was measured here), and
//! one such run moves a mean of 5 by 10% while the median does not move; the median also
//! matches what the Mann–Whitney test asks (does one group tend to be larger?). Its 95% CI
//! is a percentile bootstrap of the ratio of medians with a recorded seed, so the same data
//! give the same interval everywhere.
//!
//! Which test gives the p-value depends only on the group sizes, never on the data:
//! - **Mann–Whitney U** where it can decide, i.e. where even completely separated groups
//!   reach p < alpha (the exact two-sided minimum is 2 / C(n1 + n2, n1): 4 or more runs per
//!   side at alpha = 0.05). It needs no normality, which matters with bimodal runs. Its p is
//!   exact at these sizes, given the ties where values tie (`MwuMethod::AutoExact`): the
//!   normal approximation scipy falls back to there would call 4 constant runs against 4
//!   others p = 0.013, below what any 4 vs 4 split can give (2/70).
//! - **Welch's t** on the runs where the rank test cannot (3 vs 3, the cases' repetitions:
//!   its smallest p is 0.1), as long as each side has 2 runs. It assumes roughly normal
//!   runs; its Welch–Satterthwaite degrees of freedom (as low as 2 at 3 vs 3) keep it
//!   cautious when one side is much noisier.
//! - no test with a single run on a side: the verdict is `~ (n)`.
//!
//! A verdict other than `~` then needs all of: a CI that excludes zero, a change of at least
//! `min_effect`, and the deciding test's p-value (BH-adjusted when a family of comparisons
//! is adjusted) below alpha. "Significant" is not "large" and "large" is not "significant":
//! both are required. At 3 runs per side the bootstrap CI runs from the smallest to the
//! largest cross ratio of medians (each extreme is drawn in 7% of resamples, above the 2.5%
//! cut), so a verdict there also needs the two groups not to overlap.
//!
//! Where the baseline median is 0 (a count that was 0 and appeared, like the request
//! allocation sleeps of the cases' kernel regression), no relative change exists. The
//! comparison then stands on the **difference** of the medians, in the metric's unit, with
//! its bootstrap CI: a verdict needs that CI to exclude zero and the test's p below alpha;
//! the minimum effect, a relative size, does not apply (any change from 0 is unbounded).
//! The same holds where the baseline median is not 0 but over a tenth of its resampled
//! medians are (retransmits of 0, 0, 1, 2, 3): the ratio then has no CI, so the difference's CI stands in
//! for it, and the relative change must still reach the minimum effect.

use serde::Serialize;

use super::bootstrap::{
    median_difference_ci, median_ratio_ci, relative_change, BootstrapCi, DEFAULT_RESAMPLES,
    DEFAULT_SEED,
};
use super::direction::Direction;
use super::error::StatsError;
use super::fdr::benjamini_hochberg;
use super::mann_whitney::{mann_whitney_u, min_two_sided_p, MwuMethod};
use super::resolution::Resolution;
use super::summary::{summarize, Summary};
use super::welch::welch_t_test;

#[derive(Debug, Clone, PartialEq)]
pub struct CompareOptions {
    /// Changes smaller than this fraction are `~` even when significant (0.01 = 1%).
    pub min_effect: f64,
    /// Significance level and 1 - CI level.
    pub alpha: f64,
    pub direction: Direction,
    pub seed: u64,
    pub resamples: usize,
    pub mwu_method: MwuMethod,
    /// Where the values are histogram buckets' representatives (latency percentiles): the
    /// CI of the change is then never narrower than the buckets allow.
    pub resolution: Option<Resolution>,
}

impl CompareOptions {
    pub fn new(direction: Direction) -> Self {
        CompareOptions {
            min_effect: 0.01,
            alpha: 0.05,
            direction,
            seed: DEFAULT_SEED,
            resamples: DEFAULT_RESAMPLES,
            mwu_method: MwuMethod::AutoExact,
            resolution: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Verdict {
    #[serde(rename = "improved")]
    Improved,
    #[serde(rename = "regressed")]
    Regressed,
    #[serde(rename = "~")]
    NoDifference,
    /// A real change of a metric without a better side ([`Direction::NoDirection`]).
    #[serde(rename = "changed")]
    Changed,
}

impl Verdict {
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::NoDifference => "~",
            Verdict::Changed => "changed",
        }
    }
}

/// Why a comparison got its verdict; the first condition that failed, in the order checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictReason {
    /// A single run on a side: no test can decide.
    TooFewSamples,
    /// Welch's t decides at these sizes, but neither group varies, so it is undefined.
    NoVariance,
    /// Neither a CI of the relative change nor one of the difference could be drawn (no
    /// resamples).
    NoRelativeChange,
    CiIncludesZero,
    BelowMinEffect,
    NotSignificant,
    /// All conditions hold; the verdict is improved or regressed.
    Significant,
}

/// The test whose p-value decides a comparison (see the module notes for the rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Test {
    #[serde(rename = "mann-whitney")]
    MannWhitney,
    #[serde(rename = "welch")]
    Welch,
}

impl Test {
    /// The short name tables show in their `test` column.
    pub fn as_str(&self) -> &'static str {
        match self {
            Test::MannWhitney => "MW",
            Test::Welch => "Welch",
        }
    }

    /// The test for groups of `n1` and `n2` runs at level `alpha`; `None` with one run on a
    /// side. Depends on the sizes only, so choosing it cannot bias the p-value.
    pub fn for_sizes(n1: usize, n2: usize, alpha: f64) -> Option<Test> {
        // One run is no sample of a side's spread, however many the other side has (1 vs 40
        // could reach p < 0.05 by ranks alone).
        if n1 < 2 || n2 < 2 {
            None
        } else if min_two_sided_p(n1, n2) < alpha {
            Some(Test::MannWhitney)
        } else if n1 >= 2 && n2 >= 2 {
            Some(Test::Welch)
        } else {
            None
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub baseline: Summary,
    pub candidate: Summary,
    /// 100 * the relative change of the medians ([`relative_change`]: a rise is positive
    /// for a negative baseline too); `None` for a zero baseline median.
    pub change_pct: Option<f64>,
    pub ci_low_pct: Option<f64>,
    pub ci_high_pct: Option<f64>,
    /// Where the relative change has no CI (the baseline median is 0, or over a tenth of its
    /// resampled medians are): median(candidate) - median(baseline) in the metric's unit, with its
    /// bootstrap CI. The verdict is then decided on these.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub difference: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub difference_ci_low: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub difference_ci_high: Option<f64>,
    /// The CI was widened to what the histogram's buckets allow (see [`Resolution`]): the
    /// runs fell into too few buckets for their spread to show how precise the medians are.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ci_widened_to_buckets: bool,
    pub p_mannwhitney: f64,
    pub mannwhitney_method: MwuMethod,
    /// `None` when undefined (a group with n < 2, or no variance in either group).
    pub p_welch: Option<f64>,
    /// The test that decides ([`Test::for_sizes`]); `None` with a single run on a side.
    pub test: Option<Test>,
    /// That test's two-sided p-value; `None` without a test, or when Welch's t is undefined
    /// (neither group varies).
    pub p_test: Option<f64>,
    /// Benjamini–Hochberg adjusted `p_test`, set by [`adjust_family`].
    pub p_adjusted: Option<f64>,
    pub verdict: Verdict,
    pub reason: VerdictReason,
    /// A sentence for humans saying why (shown under tables and in JSON).
    pub explanation: String,
    pub direction: Direction,
    pub min_effect_pct: f64,
    pub alpha: f64,
    pub seed: u64,
    pub resamples: usize,
}

/// Compares two groups of one metric. Errors when a group is empty or holds NaN.
pub fn compare(
    baseline: &[f64],
    candidate: &[f64],
    opts: &CompareOptions,
) -> Result<Comparison, StatsError> {
    if !(opts.alpha > 0.0 && opts.alpha < 1.0) {
        return Err(StatsError::InvalidParameter {
            name: "alpha",
            reason: format!("{} is not in (0, 1)", opts.alpha),
        });
    }
    if opts.min_effect.is_nan() || opts.min_effect < 0.0 {
        return Err(StatsError::InvalidParameter {
            name: "min_effect",
            reason: format!("{} is negative or NaN", opts.min_effect),
        });
    }
    let base = summarize(baseline).map_err(|e| rename(e, "baseline"))?;
    let cand = summarize(candidate).map_err(|e| rename(e, "candidate"))?;
    let mwu = mann_whitney_u(candidate, baseline, opts.mwu_method)?;
    let welch = welch_t_test(candidate, baseline)?;
    let change = relative_change(base.median, cand.median);
    let test = Test::for_sizes(base.n, cand.n, opts.alpha);
    let p_test = match test {
        Some(Test::MannWhitney) => Some(mwu.p),
        Some(Test::Welch) => welch.map(|w| w.p),
        None => None,
    };
    // A single run on a side has no spread to resample: no interval is drawn.
    let sampled = base.n >= 2 && cand.n >= 2;
    let ci = sampled
        .then(|| {
            median_ratio_ci(
                baseline,
                candidate,
                1.0 - opts.alpha,
                opts.seed,
                opts.resamples,
            )
        })
        .flatten();
    // Without a CI of the relative change, the difference of the medians stands in for it.
    let difference_ci = (sampled && ci.is_none()).then(|| {
        median_difference_ci(
            baseline,
            candidate,
            1.0 - opts.alpha,
            opts.seed,
            opts.resamples,
        )
    });
    let mut ci = ci.map(|ci| (ci.low, ci.high));
    let mut difference_ci = difference_ci.map(|d| d.map(|ci| (ci.low, ci.high)));
    let mut ci_widened_to_buckets = false;
    if let (Some(r), true) = (&opts.resolution, sampled) {
        // The same resamples drawn over the buckets' edges: the low end pairs the baseline's
        // high edges with the candidate's low ones, the high end the reverse, so that in
        // every resample the change lies between the two, as the true values' would.
        let ((b_low, b_high), (c_low, c_high)) = (r.edges(baseline), r.edges(candidate));
        let level = 1.0 - opts.alpha;
        let (seed, resamples) = (opts.seed, opts.resamples);
        let over_edges = |ci: &mut (f64, f64), draw: Draw| {
            let low = draw(&b_high, &c_low, level, seed, resamples);
            let high = draw(&b_low, &c_high, level, seed, resamples);
            match (low, high) {
                (Some(low), Some(high)) => widen(ci, (low.low, high.high)),
                _ => false,
            }
        };
        if let Some(ci) = ci.as_mut() {
            ci_widened_to_buckets |= over_edges(ci, median_ratio_ci);
        }
        if let Some(Some(ci)) = difference_ci.as_mut() {
            ci_widened_to_buckets |= over_edges(ci, median_difference_ci);
        }
    }
    let mut c = Comparison {
        change_pct: change.map(|c| 100.0 * c),
        ci_low_pct: ci.map(|ci| 100.0 * ci.0),
        ci_high_pct: ci.map(|ci| 100.0 * ci.1),
        difference: difference_ci.map(|_| cand.median - base.median),
        difference_ci_low: difference_ci.flatten().map(|ci| ci.0),
        difference_ci_high: difference_ci.flatten().map(|ci| ci.1),
        ci_widened_to_buckets,
        p_mannwhitney: mwu.p,
        mannwhitney_method: mwu.method,
        p_welch: welch.map(|w| w.p),
        test,
        p_test,
        p_adjusted: None,
        verdict: Verdict::NoDifference,
        reason: VerdictReason::NotSignificant,
        explanation: String::new(),
        direction: opts.direction,
        // Rounded past any digit a user types: 100 * 0.07 is 7.000000000000001, which the
        // legend printed.
        min_effect_pct: (100.0 * opts.min_effect * 1e9).round() / 1e9,
        alpha: opts.alpha,
        seed: opts.seed,
        resamples: opts.resamples,
        baseline: base,
        candidate: cand,
    };
    decide(&mut c);
    Ok(c)
}

/// A bootstrap CI of the medians' ratio or difference: (baseline, candidate, level, seed,
/// resamples).
type Draw = fn(&[f64], &[f64], f64, u64, usize) -> Option<BootstrapCi>;

/// Stretches `ci` to cover `bounds`; whether it had to.
fn widen(ci: &mut (f64, f64), bounds: (f64, f64)) -> bool {
    let wider = (ci.0.min(bounds.0), ci.1.max(bounds.1));
    let widened = wider != *ci;
    *ci = wider;
    widened
}

fn rename(e: StatsError, group: &str) -> StatsError {
    match e {
        StatsError::Empty { .. } => StatsError::Empty {
            what: format!("the {group} group"),
        },
        StatsError::NonFinite { index, value, .. } => StatsError::NonFinite {
            what: format!("the {group} group"),
            index,
            value,
        },
        other => other,
    }
}

impl Comparison {
    /// Whether this comparison counts in a Benjamini–Hochberg family: it has a p-value (not
    /// one run on a side, nor Welch's t on groups that do not vary), and its groups are not
    /// one value throughout. Such groups carry no evidence either way; Mann-Whitney gives
    /// them p = 1 where Welch's t gives none, and counting them made a change significant
    /// at 3 runs a side `~` at 4 (the same unchanged metrics, now with a p, doubled the
    /// family).
    pub fn in_family(&self) -> bool {
        let (b, c) = (&self.baseline, &self.candidate);
        let one_value = b.min == b.max && c.min == c.max && b.min == c.min;
        self.p_test.is_some() && !one_value
    }
}

/// Applies Benjamini–Hochberg to the deciding p-values of a family of comparisons (all
/// cells × metrics shown together) and re-decides every verdict on the adjusted p. Only
/// comparisons [`in_family`](Comparison::in_family) count; the others keep their own p.
pub fn adjust_family(comparisons: &mut [Comparison]) {
    let ps: Vec<f64> = comparisons
        .iter()
        .map(|c| match c.p_test {
            Some(p) if c.in_family() => p,
            _ => f64::NAN,
        })
        .collect();
    for (c, q) in comparisons.iter_mut().zip(benjamini_hochberg(&ps)) {
        c.p_adjusted = (!q.is_nan()).then_some(q);
        decide(c);
    }
}

fn decide(c: &mut Comparison) {
    let (n1, n2) = (c.baseline.n, c.candidate.n);
    let p = c.p_adjusted.or(c.p_test);
    let (reason, explanation) = match (c.test, p) {
        (None, _) => (
            VerdictReason::TooFewSamples,
            format!(
                "n = {n1} vs {n2}: no test can decide with a single run on a side; Welch's \
                 t needs 2 per side (3 or more to find less than a large change), \
                 Mann-Whitney 4, a median CI 6"
            ),
        ),
        (Some(_), None) => (
            VerdictReason::NoVariance,
            format!(
                "n = {n1} vs {n2} and neither group varies, so Welch's t is undefined (and \
                 Mann-Whitney does not decide at these sizes: its exact p cannot go below {})",
                c.alpha
            ),
        ),
        (Some(test), Some(p)) => decide_on(c, test, p),
    };
    c.verdict = match reason {
        VerdictReason::Significant => {
            let up = c.difference.or(c.change_pct).unwrap_or(0.0) > 0.0;
            match (up, c.direction) {
                (_, Direction::NoDirection) => Verdict::Changed,
                (true, Direction::HigherIsBetter) | (false, Direction::LowerIsBetter) => {
                    Verdict::Improved
                }
                _ => Verdict::Regressed,
            }
        }
        _ => Verdict::NoDifference,
    };
    c.reason = reason;
    c.explanation = explanation;
}

/// The checks after a test exists: CI, minimum effect, then `test`'s (adjusted) `p`.
fn decide_on(c: &Comparison, test: Test, p: f64) -> (VerdictReason, String) {
    let name = match test {
        Test::MannWhitney => "Mann-Whitney",
        Test::Welch => "Welch's t",
    };
    let adjusted = if c.p_adjusted.is_some() {
        "BH-adjusted "
    } else {
        ""
    };
    let (Some(change), Some(lo), Some(hi)) = (c.change_pct, c.ci_low_pct, c.ci_high_pct) else {
        return decide_on_difference(c, name, adjusted, p);
    };
    if lo <= 0.0 && hi >= 0.0 {
        (
            VerdictReason::CiIncludesZero,
            format!(
                "the CI [{}%, {}%]{} includes 0",
                bound(lo),
                bound(hi),
                widened_note(c)
            ),
        )
    } else if change.abs() < c.min_effect_pct {
        below_min_effect(change, c.min_effect_pct)
    } else if p >= c.alpha {
        (
            VerdictReason::NotSignificant,
            format!("{adjusted}{name} p = {p:.3} >= {}", c.alpha),
        )
    } else {
        (
            VerdictReason::Significant,
            format!(
                "{change:+.1}% [{}%, {}%]{}, {adjusted}{name} p = {p:.3}",
                bound(lo),
                bound(hi),
                widened_note(c).trim_end_matches(',')
            ),
        )
    }
}

/// A CI bound in percent with one decimal, or the digits that keep its sign where one
/// decimal would round it to zero (`[-6.0%, -0.0%]` read as a CI holding 0).
fn bound(x: f64) -> String {
    if x != 0.0 && x.abs() < 0.0005 {
        format!("{x:+.0e}")
    } else if x != 0.0 && x.abs() < 0.05 {
        format!("{x:+.3}")
    } else {
        format!("{:+.1}", x + 0.0)
    }
}

/// Said after a CI the buckets widened, so that a reader does not look for it in the runs.
fn widened_note(c: &Comparison) -> &'static str {
    if c.ci_widened_to_buckets {
        ", over the latency histogram's buckets' edges,"
    } else {
        ""
    }
}

/// The verdict reason both paths give for a relative change under the minimum effect.
fn below_min_effect(change_pct: f64, min_effect_pct: f64) -> (VerdictReason, String) {
    (
        VerdictReason::BelowMinEffect,
        format!("|{change_pct:+.2}%| is below the minimum effect of {min_effect_pct}%"),
    )
}

/// [`decide_on`] where the relative change has no CI: the difference's CI, the minimum effect
/// where a relative change exists, then `p`.
fn decide_on_difference(
    c: &Comparison,
    name: &str,
    adjusted: &str,
    p: f64,
) -> (VerdictReason, String) {
    let (Some(d), Some(lo), Some(hi)) = (c.difference, c.difference_ci_low, c.difference_ci_high)
    else {
        return (
            VerdictReason::NoRelativeChange,
            "no CI of the change could be drawn".to_string(),
        );
    };
    let why = if c.change_pct.is_none() {
        "the baseline median is 0, so the difference of the medians decides"
    } else {
        "over a tenth of the resampled baseline medians are 0, so the relative change has no \
         CI and the difference of the medians decides"
    };
    if lo <= 0.0 && hi >= 0.0 {
        (
            VerdictReason::CiIncludesZero,
            format!(
                "{why}: its CI [{lo:+}, {hi:+}]{} includes 0",
                widened_note(c)
            ),
        )
    } else if let Some(change) = c.change_pct.filter(|x| x.abs() < c.min_effect_pct) {
        below_min_effect(change, c.min_effect_pct)
    } else if p >= c.alpha {
        (
            VerdictReason::NotSignificant,
            format!(
                "{why}: {d:+} [{lo:+}, {hi:+}], but {adjusted}{name} p = {p:.3} >= {}",
                c.alpha
            ),
        )
    } else {
        (
            VerdictReason::Significant,
            format!(
                "{why}: {d:+} [{lo:+}, {hi:+}]{}, {adjusted}{name} p = {p:.3}",
                widened_note(c).trim_end_matches(',')
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> CompareOptions {
        CompareOptions::new(Direction::HigherIsBetter)
    }

    /// fio prints a percentile as its bucket's middle, so runs whose true p99s differ by a
    /// hair print values a bucket (1.55% here) apart, every run alike: a CI of no width
    /// called that a regression. The buckets say the change may be anything from 0 to 3.1%.
    #[test]
    fn runs_a_bucket_apart_are_not_a_change_when_the_values_are_buckets() {
        let mut o = CompareOptions::new(Direction::LowerIsBetter);
        let (base, next) = ([1056.768; 5], [1073.152; 5]);
        let plain = compare(&base, &next, &o).unwrap();
        assert_eq!(plain.verdict, Verdict::Regressed);
        assert_eq!(plain.ci_low_pct, plain.ci_high_pct);
        o.resolution = Some(Resolution::FIO_NS_AS_US);
        let c = compare(&base, &next, &o).unwrap();
        assert_eq!(c.reason, VerdictReason::CiIncludesZero);
        assert_eq!(c.ci_low_pct, Some(0.0));
        assert!((c.ci_high_pct.unwrap() - 100.0 * (1081.344 / 1048.576 - 1.0)).abs() < 1e-9);
        assert!(c.ci_widened_to_buckets);
        assert!(c.explanation.contains("buckets"), "{}", c.explanation);
        // Two buckets apart, the change is real whichever values the buckets hold.
        let c = compare(&base, &[1089.536; 5], &o).unwrap();
        assert_eq!(c.verdict, Verdict::Regressed);
        assert!((c.ci_low_pct.unwrap() - 100.0 * (1081.344 / 1064.96 - 1.0)).abs() < 1e-9);
        // Two runs a bucket up and three two buckets up: half the resamples take the
        // nearer bucket, whose change may be nothing; the CI drawn over the edges says so.
        let mixed = [1073.152, 1073.152, 1089.536, 1089.536, 1089.536];
        let c = compare(&base, &mixed, &o).unwrap();
        assert_eq!(c.ci_low_pct, Some(0.0));
        assert_eq!(c.verdict, Verdict::NoDifference);
        // Values below 128 ns are exact: the CI is the runs' own.
        let (fast, faster) = ([0.1, 0.11, 0.12, 0.1], [0.05, 0.06, 0.05, 0.055]);
        let c = compare(&fast, &faster, &o).unwrap();
        o.resolution = None;
        assert!(!c.ci_widened_to_buckets);
        assert_eq!(c, compare(&fast, &faster, &o).unwrap());
    }

    /// A minimum effect is said as typed (7%, not 7.000000000000001%), and a CI bound that
    /// one decimal would round to zero keeps its sign's digits.
    #[test]
    fn the_explanations_say_the_numbers_as_a_reader_would_check_them() {
        let mut o = opts();
        o.min_effect = 0.07;
        let c = compare(&[100.0, 101.0, 99.0], &[100.0, 101.0, 99.5], &o).unwrap();
        assert_eq!(c.min_effect_pct, 7.0);
        assert_eq!(bound(-0.01), "-0.010");
        assert_eq!(bound(-0.0), "+0.0");
        assert_eq!(bound(-6.04), "-6.0");
        assert_eq!(bound(-0.0001), "-1e-4");
    }

    #[test]
    fn clear_improvement_and_regression() {
        let b = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2];
        let c = [110.0, 111.0, 109.0, 110.5, 109.5, 110.2];
        let r = compare(&b, &c, &opts()).unwrap();
        assert_eq!(r.verdict, Verdict::Improved, "{}", r.explanation);
        assert!((r.change_pct.unwrap() - 10.0).abs() < 0.2);
        let lower = CompareOptions::new(Direction::LowerIsBetter);
        assert_eq!(compare(&b, &c, &lower).unwrap().verdict, Verdict::Regressed);
    }

    /// Ties at 4 vs 4 (p99s are histogram bin edges): Mann-Whitney's p is exact given the
    /// ties, never below what separated groups can give (2/70; the normal approximation said
    /// 0.013).
    #[test]
    fn tied_runs_get_an_exact_mann_whitney_p() {
        let b = [1728.5, 1728.5, 1744.9, 1728.5];
        let c = [1761.3, 1761.3, 1761.3, 1777.7];
        let r = compare(&b, &c, &opts()).unwrap();
        assert_eq!(r.test, Some(Test::MannWhitney));
        assert_eq!(r.mannwhitney_method, MwuMethod::Conditional);
        assert!(
            (r.p_mannwhitney - 2.0 / 70.0).abs() < 1e-12,
            "{}",
            r.p_mannwhitney
        );
    }

    /// Merges went up 10% or down 10%: a real change either way, never a better or worse.
    #[test]
    fn a_metric_without_direction_changes_without_a_verdict() {
        let b = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2];
        let c = [110.0, 111.0, 109.0, 110.5, 109.5, 110.2];
        let none = CompareOptions::new(Direction::NoDirection);
        for (x, y) in [(&b, &c), (&c, &b)] {
            let r = compare(x, y, &none).unwrap();
            assert_eq!(r.verdict, Verdict::Changed, "{}", r.explanation);
            assert_eq!(r.verdict.as_str(), "changed");
        }
        let same = compare(&b, &b, &none).unwrap();
        assert_eq!(same.verdict, Verdict::NoDifference);
    }

    #[test]
    fn three_per_side_with_a_clear_15_pct_drop_is_decided_by_welch() {
        // The cases' set-up: 3 runs per side, -15%, runs within +-2%. The exact Mann-Whitney
        // test cannot go below p = 0.1 here; before Welch decided, this was `~ (n)`.
        let r = compare(&[100.0, 102.0, 98.0], &[85.0, 86.5, 84.0], &opts()).unwrap();
        assert_eq!(r.test, Some(Test::Welch));
        assert!((r.p_mannwhitney - 0.1).abs() < 1e-12);
        assert_eq!(r.p_test, r.p_welch);
        assert!(r.p_test.unwrap() < 0.01, "{r:?}");
        assert_eq!(r.verdict, Verdict::Regressed, "{}", r.explanation);
        assert!(r.explanation.contains("Welch"), "{}", r.explanation);
        assert!((r.change_pct.unwrap() - -15.0).abs() < 1e-9);
    }

    #[test]
    fn three_per_side_with_heavy_overlap_stays_noise() {
        let r = compare(&[100.0, 90.0, 110.0], &[95.0, 105.0, 86.0], &opts()).unwrap();
        assert_eq!(r.test, Some(Test::Welch));
        assert_eq!(r.verdict, Verdict::NoDifference);
        assert_eq!(r.reason, VerdictReason::CiIncludesZero, "{}", r.explanation);
        assert!(r.p_test.unwrap() > 0.5, "{r:?}");
    }

    #[test]
    fn the_test_follows_the_group_sizes() {
        assert_eq!(Test::for_sizes(3, 3, 0.05), Some(Test::Welch));
        assert_eq!(Test::for_sizes(2, 4, 0.05), Some(Test::Welch));
        // 2 vs 9: 2 / C(11, 2) = 0.036.
        assert_eq!(Test::for_sizes(2, 9, 0.05), Some(Test::MannWhitney));
        assert_eq!(Test::for_sizes(4, 4, 0.05), Some(Test::MannWhitney));
        // 3 vs 5: 2 / C(8, 3) = 0.036 < 0.05, the rank test can decide.
        assert_eq!(Test::for_sizes(3, 5, 0.05), Some(Test::MannWhitney));
        assert_eq!(Test::for_sizes(4, 4, 0.01), Some(Test::Welch));
        assert_eq!(Test::for_sizes(1, 20, 0.05), None);
        let four = compare(&[1.0, 1.1, 1.2, 1.3], &[5.0, 5.1, 5.2, 5.3], &opts()).unwrap();
        assert_eq!(four.test, Some(Test::MannWhitney));
        assert_eq!(four.p_test, Some(four.p_mannwhitney));
        assert_eq!(four.verdict, Verdict::Improved, "{}", four.explanation);
    }

    #[test]
    fn one_run_on_a_side_says_too_few() {
        let r = compare(&[1.0], &[5.0, 5.1, 5.2], &opts()).unwrap();
        assert_eq!((r.test, r.p_test), (None, None));
        assert_eq!(r.reason, VerdictReason::TooFewSamples);
        assert!(r.explanation.contains("n = 1 vs 3"), "{}", r.explanation);
        // However many runs the other side has: 1 vs 40 separated by ranks alone would
        // reach p < 0.05, yet one run says nothing of its side's spread. No interval either.
        let many: Vec<f64> = (50..90).map(f64::from).collect();
        let r = compare(&[100.0], &many, &opts()).unwrap();
        assert_eq!((r.test, r.verdict), (None, Verdict::NoDifference));
        assert_eq!(
            (r.ci_low_pct, r.ci_high_pct, r.difference),
            (None, None, None)
        );
        assert!(r.change_pct.is_some());
    }

    #[test]
    fn a_negative_baseline_keeps_the_direction_of_the_change() {
        // From about -10 to about -5: a rise of half the baseline's size.
        let base = [-10.2, -10.0, -9.9, -10.1, -10.05];
        let cand = [-5.1, -5.0, -4.9, -5.05, -5.0];
        let r = compare(&base, &cand, &opts()).unwrap();
        // Medians -10.05 and -5.0: +5.05 on a baseline of size 10.05.
        assert!(
            (r.change_pct.unwrap() - 505.0 / 10.05).abs() < 1e-9,
            "{r:?}"
        );
        assert!(r.ci_low_pct.unwrap() > 0.0, "{r:?}");
        assert_eq!(r.verdict, Verdict::Improved, "{}", r.explanation);
        let lower = CompareOptions::new(Direction::LowerIsBetter);
        assert_eq!(
            compare(&base, &cand, &lower).unwrap().verdict,
            Verdict::Regressed
        );
    }

    #[test]
    fn constant_groups_at_small_n_have_no_test() {
        let r = compare(&[2.0; 3], &[3.0; 3], &opts()).unwrap();
        assert_eq!(r.test, Some(Test::Welch));
        assert_eq!(r.p_test, None);
        assert_eq!(r.reason, VerdictReason::NoVariance, "{}", r.explanation);
        let mut family = vec![r];
        adjust_family(&mut family);
        assert_eq!(family[0].p_adjusted, None);
        assert_eq!(family[0].reason, VerdictReason::NoVariance);
    }

    #[test]
    fn bh_adjustment_applies_to_welch_decided_cells() {
        let b = [100.0, 103.0, 97.0];
        let c = [107.0, 110.0, 105.0];
        let mut family = vec![compare(&b, &c, &opts()).unwrap()];
        let p = family[0].p_test.unwrap();
        assert!(p < 0.05 && p * 6.0 > 0.05, "{p}");
        assert_eq!(
            family[0].verdict,
            Verdict::Improved,
            "{}",
            family[0].explanation
        );
        for _ in 0..5 {
            family.push(compare(&b, &b, &opts()).unwrap());
        }
        // A cell without a test is not a member of the family.
        family.push(compare(&[100.0], &b, &opts()).unwrap());
        adjust_family(&mut family);
        assert!((family[0].p_adjusted.unwrap() - (p * 6.0).min(1.0)).abs() < 1e-12);
        assert_eq!(family[0].reason, VerdictReason::NotSignificant);
        assert!(family[0].explanation.contains("BH-adjusted Welch"));
        assert_eq!(family[6].p_adjusted, None);
    }

    /// Groups of one value throughout (a latency bucket every run fell in) are no test: with
    /// 4 runs a side Mann-Whitney gives them p = 1, and counted they halved the evidence of
    /// a real change, which 3 runs a side (Welch, no p for them) called significant.
    #[test]
    fn groups_of_one_value_throughout_are_not_in_the_family() {
        let b = [1000.0, 1001.0, 999.0, 1000.5];
        let c = [1050.0, 1051.0, 1049.0, 1050.5];
        let same = [16.384; 4];
        let mut family = vec![
            compare(&b, &c, &opts()).unwrap(),
            compare(&same, &same, &opts()).unwrap(),
            compare(&same, &same, &opts()).unwrap(),
        ];
        let p = family[0].p_test.unwrap();
        assert_eq!(family[1].p_test, Some(1.0));
        assert!(family[0].in_family() && !family[1].in_family());
        adjust_family(&mut family);
        assert!((family[0].p_adjusted.unwrap() - p).abs() < 1e-12);
        assert_eq!(
            family[0].verdict,
            Verdict::Improved,
            "{}",
            family[0].explanation
        );
        assert_eq!(family[1].p_adjusted, None);
        assert_eq!(family[1].verdict, Verdict::NoDifference);
        // One value on each side, different values: a change, and in the family.
        let other = [20.48; 4];
        assert!(compare(&same, &other, &opts()).unwrap().in_family());
    }

    #[test]
    fn small_effect_is_noise_even_if_significant() {
        let b: Vec<f64> = (0..20).map(|i| 1000.0 + i as f64 * 0.01).collect();
        let c: Vec<f64> = b.iter().map(|x| x * 1.005).collect();
        let r = compare(&b, &c, &opts()).unwrap();
        assert_eq!(r.reason, VerdictReason::BelowMinEffect, "{}", r.explanation);
    }

    #[test]
    fn bh_adjustment_can_remove_a_verdict() {
        let b = [100.0, 101.0, 99.0, 100.5];
        let c = [103.0, 104.0, 102.0, 103.5];
        let mut family = vec![compare(&b, &c, &opts()).unwrap()];
        for _ in 0..5 {
            family.push(compare(&b, &b, &opts()).unwrap());
        }
        assert_eq!(
            family[0].verdict,
            Verdict::Improved,
            "{}",
            family[0].explanation
        );
        adjust_family(&mut family);
        assert_eq!(family[0].reason, VerdictReason::NotSignificant);
    }

    #[test]
    fn empty_group_names_the_group() {
        let err = compare(&[1.0], &[], &opts()).unwrap_err();
        assert_eq!(err.to_string(), "no values in the candidate group");
    }

    #[test]
    fn a_change_from_zero_is_decided_on_the_difference() {
        // Sleeps that appeared: 0 in every baseline run, 3-6 in the candidate's.
        let c = [4.0, 6.0, 3.0, 5.0, 5.0];
        let r = compare(
            &[0.0; 5],
            &c,
            &CompareOptions::new(Direction::LowerIsBetter),
        )
        .unwrap();
        assert_eq!(r.verdict, Verdict::Regressed, "{}", r.explanation);
        assert_eq!((r.change_pct, r.ci_low_pct), (None, None));
        assert_eq!(r.difference, Some(5.0));
        assert!(r.difference_ci_low.unwrap() >= 3.0, "{r:?}");
        assert!(
            r.explanation.contains("difference of the medians"),
            "{}",
            r.explanation
        );
        // Gone again: a relative change of -100% exists, so the difference stays unset.
        let back = compare(
            &c,
            &[0.0; 5],
            &CompareOptions::new(Direction::LowerIsBetter),
        )
        .unwrap();
        assert_eq!(back.verdict, Verdict::Improved);
        assert_eq!(back.difference, None);
        // A zero median on both sides is no change, whatever a few runs did.
        let noise = compare(
            &[0.0, 0.0, 0.0, 1.0, 0.0],
            &[0.0, 2.0, 0.0, 0.0, 0.0],
            &opts(),
        )
        .unwrap();
        assert_eq!(
            noise.verdict,
            Verdict::NoDifference,
            "{}",
            noise.explanation
        );
        // Too few runs to test still says so.
        let one = compare(&[0.0], &[5.0], &opts()).unwrap();
        assert_eq!(one.reason, VerdictReason::TooFewSamples);
    }

    #[test]
    fn a_baseline_mostly_zero_in_resamples_is_decided_on_the_difference() {
        // Retransmits: a median of 2, but a resampled median of 0 in about a third of draws,
        // so the ratio has no CI.
        let b = [0.0, 0.0, 2.0, 3.0, 4.0];
        let lower = CompareOptions::new(Direction::LowerIsBetter);
        let r = compare(&b, &[50.0, 60.0, 55.0, 70.0, 65.0], &lower).unwrap();
        assert_eq!((r.ci_low_pct, r.ci_high_pct), (None, None), "{r:?}");
        assert!((r.change_pct.unwrap() - 2900.0).abs() < 1e-9, "{r:?}");
        assert_eq!(r.difference, Some(58.0));
        assert_eq!(r.verdict, Verdict::Regressed, "{}", r.explanation);
        assert!(
            r.explanation.contains("over a tenth of the resampled"),
            "{}",
            r.explanation
        );
        // The minimum effect (here 3000%) still applies to the relative change.
        let mut strict = lower.clone();
        strict.min_effect = 30.0;
        let big = compare(&b, &[50.0, 60.0, 55.0, 70.0, 65.0], &strict).unwrap();
        assert_eq!(
            big.reason,
            VerdictReason::BelowMinEffect,
            "{}",
            big.explanation
        );
        // And overlapping groups stay noise.
        let same = compare(&b, &[0.0, 0.0, 3.0, 2.0, 4.0], &lower).unwrap();
        assert_eq!(same.verdict, Verdict::NoDifference, "{}", same.explanation);
    }
}

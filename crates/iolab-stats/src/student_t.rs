//! Student's t distribution, computed here: the CDF through the regularized incomplete beta
//! function and the quantile by a safeguarded Newton iteration on it.
//!
//! Why our own: the verdict at the cases' n (3 vs 3 runs) rests on Welch's t with
//! non-integer Welch–Satterthwaite degrees of freedom, and a verdict must not depend on a
//! crate's numerical choices or panic on a degenerate argument. Every routine returns
//! `None` outside its domain. Accuracy: better than 1e-12 relative on the reference values
//! from scipy (`tests/fixtures/stats/reference.json`, `t_cdf` and `t_quantiles`).
//!
//! Method: for T with `df` = v degrees of freedom, P(|T| >= |t|) = I_x(v/2, 1/2) with
//! x = v / (v + t^2) (Abramowitz & Stegun 26.7.1 with 26.5.27). I_x(a, b) is evaluated
//! from its continued fraction (A&S 26.5.8) by the modified Lentz method, on whichever
//! side of the mean a/(a+b) converges fast (I_x(a, b) = 1 - I_{1-x}(b, a)); 1 - x is passed
//! separately as t^2 / (v + t^2), so small t loses no digits to cancellation.

/// ln Γ(x) for x > 0: Stirling's series with terms to x^-13 (error below 1e-16 for
/// x >= 10), after shifting small arguments up with Γ(x) = Γ(x + k) / (x (x+1) ... (x+k-1)).
pub fn ln_gamma(x: f64) -> Option<f64> {
    if !(x > 0.0 && x.is_finite()) {
        return None;
    }
    let mut z = x;
    let mut product = 1.0f64;
    while z < STIRLING_FROM {
        product *= z;
        z += 1.0;
    }
    Some((z - 0.5) * z.ln() - z + HALF_LN_2PI + stirling_series(z) - product.ln())
}

const STIRLING_FROM: f64 = 10.0;
const HALF_LN_2PI: f64 = 0.918_938_533_204_672_8;

/// ln Γ(z) - ((z - 1/2) ln z - z + ln(2 pi)/2) for z >= 10: the sum of
/// B_2k / (2k (2k - 1) z^(2k - 1)) for k = 1..7.
fn stirling_series(z: f64) -> f64 {
    const C: [f64; 7] = [
        1.0 / 12.0,
        -1.0 / 360.0,
        1.0 / 1260.0,
        -1.0 / 1680.0,
        1.0 / 1188.0,
        -691.0 / 360_360.0,
        1.0 / 156.0,
    ];
    let inv = 1.0 / z;
    let inv2 = inv * inv;
    let mut power = inv;
    let mut series = 0.0;
    for c in C {
        series += c * power;
        power *= inv2;
    }
    series
}

/// ln B(a, b) = ln Γ(a) + ln Γ(b) - ln Γ(a + b). When the larger argument is big (the t
/// distribution with many degrees of freedom: a = df/2, b = 1/2), ln Γ(a) and ln Γ(a + b)
/// are large and nearly equal; their difference is then formed from Stirling's series
/// directly, -(a - 1/2) ln(1 + b/a) - b ln(a + b) + b + s(a) - s(a + b), which cancels nothing.
fn ln_beta(a: f64, b: f64) -> Option<f64> {
    let (big, small) = if a >= b { (a, b) } else { (b, a) };
    if !(small > 0.0 && big.is_finite()) {
        return None;
    }
    if big < STIRLING_FROM {
        return Some(ln_gamma(a)? + ln_gamma(b)? - ln_gamma(a + b)?);
    }
    let sum = big + small;
    let difference =
        -(big - 0.5) * (small / big).ln_1p() - small * sum.ln() + small + stirling_series(big)
            - stirling_series(sum);
    Some(ln_gamma(small)? + difference)
}

/// The regularized incomplete beta function I_x(a, b), with `y` = 1 - x given separately
/// (callers that know it exactly pass it; it decides the side and feeds the prefactor).
pub fn incomplete_beta(a: f64, b: f64, x: f64, y: f64) -> Option<f64> {
    if !(a > 0.0 && b > 0.0 && (0.0..=1.0).contains(&x) && (0.0..=1.0).contains(&y)) {
        return None;
    }
    if x == 0.0 {
        return Some(0.0);
    }
    if y == 0.0 {
        return Some(1.0);
    }
    // x^a y^b / (a B(a, b)), in logs: the powers underflow long before the ratio does.
    // ln x near 1 comes from y (ln(1 - y)): with a ~ 10^5, a * ln x amplifies the rounding
    // of x itself a hundred-thousandfold.
    let ln = |u: f64, one_minus_u: f64| {
        if u > 0.5 {
            (-one_minus_u).ln_1p()
        } else {
            u.ln()
        }
    };
    let front = |a: f64, b: f64, x: f64, y: f64| -> Option<f64> {
        Some((a * ln(x, y) + b * ln(y, x) - ln_beta(a, b)?).exp() / a)
    };
    // The continued fraction converges quickly for x < (a + 1) / (a + b + 2).
    if x < (a + 1.0) / (a + b + 2.0) {
        Some((front(a, b, x, y)? * continued_fraction(a, b, x)?).clamp(0.0, 1.0))
    } else {
        Some((1.0 - front(b, a, y, x)? * continued_fraction(b, a, y)?).clamp(0.0, 1.0))
    }
}

/// The continued fraction 1 / (1 + d1 / (1 + d2 / (1 + ...))) of A&S 26.5.8, by the
/// modified Lentz method. Its terms are d_{2m+1} = -(a+m)(a+b+m) x / ((a+2m)(a+2m+1)) and
/// d_{2m} = m(b-m) x / ((a+2m-1)(a+2m)). It needs about sqrt(max(a, b)) steps; the cap
/// covers a = 10^8.
fn continued_fraction(a: f64, b: f64, x: f64) -> Option<f64> {
    const TINY: f64 = 1e-300;
    const EPS: f64 = 1e-16;
    let guard = |v: f64| if v.abs() < TINY { TINY } else { v };
    let mut c = 1.0;
    let mut d = 1.0 / guard(1.0 - (a + b) * x / (a + 1.0));
    let mut f = d;
    for m in 1..200_000u32 {
        let m = f64::from(m);
        let even = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        d = 1.0 / guard(1.0 + even * d);
        c = guard(1.0 + even / c);
        f *= c * d;
        let odd = -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
        d = 1.0 / guard(1.0 + odd * d);
        c = guard(1.0 + odd / c);
        let step = c * d;
        f *= step;
        if (step - 1.0).abs() < EPS {
            return Some(f);
        }
    }
    None
}

/// P(|T| >= |t|) for T ~ Student's t with `df` degrees of freedom (df may be fractional).
pub fn t_two_sided_sf(t: f64, df: f64) -> Option<f64> {
    if t.is_nan() || df.is_nan() || df <= 0.0 {
        return None;
    }
    if t.is_infinite() {
        return Some(0.0);
    }
    if df.is_infinite() {
        return super::distributions::normal_sf(t.abs()).map(|q| 2.0 * q);
    }
    let t2 = t * t;
    // x = df / (df + t^2) and 1 - x = t^2 / (df + t^2), each without cancellation.
    let (x, y) = if t2 < df {
        let r = t2 / df;
        (1.0 / (1.0 + r), r / (1.0 + r))
    } else {
        let r = df / t2;
        (r / (1.0 + r), 1.0 / (1.0 + r))
    };
    incomplete_beta(df / 2.0, 0.5, x, y)
}

/// P(T <= t).
pub fn t_cdf(t: f64, df: f64) -> Option<f64> {
    let tail = t_two_sided_sf(t, df)? / 2.0;
    Some(if t > 0.0 { 1.0 - tail } else { tail })
}

/// The density of T at t, for the Newton steps of [`t_quantile`].
fn t_pdf(t: f64, df: f64) -> Option<f64> {
    let ln = -0.5 * (df + 1.0) * (t * t / df).ln_1p() - 0.5 * df.ln() - ln_beta(df / 2.0, 0.5)?;
    Some(ln.exp())
}

/// The `p` quantile of Student's t with `df` degrees of freedom: the t with P(T <= t) = p.
///
/// Solved on the upper tail q = min(p, 1 - p), which is where the digits are: Newton steps
/// on P(T >= t) = q from a normal-ish start, kept inside a bracket that shrinks with every
/// step (bisection whenever Newton would leave it), until the bracket is a few ulps wide.
pub fn t_quantile(p: f64, df: f64) -> Option<f64> {
    if !(p > 0.0 && p < 1.0 && df > 0.0) || df.is_nan() {
        return None;
    }
    if p == 0.5 {
        return Some(0.0);
    }
    let q = p.min(1.0 - p);
    let upper = |t: f64| t_two_sided_sf(t, df).map(|s| s / 2.0);
    // Bracket [lo, hi] with upper(lo) >= q > upper(hi).
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while upper(hi)? > q {
        lo = hi;
        hi *= 2.0;
        if !hi.is_finite() {
            return None;
        }
    }
    let mut t = 0.5 * (lo + hi);
    for _ in 0..200 {
        let f = upper(t)? - q;
        // Converged: the tail is right to the last digits (relative to q, not to 1).
        if f.abs() <= 1e-15 * q {
            break;
        }
        if f > 0.0 {
            lo = t;
        } else {
            hi = t;
        }
        // d upper / dt = -pdf(t)
        let newton = t + f / t_pdf(t, df)?;
        if newton == t {
            break;
        }
        t = if newton > lo && newton < hi {
            newton
        } else {
            0.5 * (lo + hi)
        };
        if hi - lo <= 4.0 * f64::EPSILON * hi {
            break;
        }
    }
    t.is_finite().then_some(if p > 0.5 { t } else { -t })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_gamma_known_values() {
        // Γ(1) = Γ(2) = 1, Γ(1/2) = sqrt(pi), Γ(10) = 9!, Γ(100.5) from tables.
        assert!(ln_gamma(1.0).unwrap().abs() < 1e-14);
        assert!(ln_gamma(2.0).unwrap().abs() < 1e-14);
        let half = 0.5 * std::f64::consts::PI.ln();
        assert!((ln_gamma(0.5).unwrap() - half).abs() < 1e-14);
        assert!((ln_gamma(10.0).unwrap() - 362_880f64.ln()).abs() < 1e-13);
        assert_eq!(ln_gamma(0.0), None);
        assert_eq!(ln_gamma(-1.0), None);
    }

    #[test]
    fn closed_forms_for_one_and_two_degrees_of_freedom() {
        // df = 1 is Cauchy: F(t) = 1/2 + atan(t)/pi; df = 2: F(t) = 1/2 + t / (2 sqrt(2 + t^2)).
        for t in [-30.0, -2.5, -0.3, 0.0, 0.01, 1.0, 4.0, 100.0] {
            let cauchy = 0.5 + f64::atan(t) / std::f64::consts::PI;
            assert!((t_cdf(t, 1.0).unwrap() - cauchy).abs() < 1e-14, "t = {t}");
            let two = 0.5 + t / (2.0 * (2.0 + t * t).sqrt());
            assert!((t_cdf(t, 2.0).unwrap() - two).abs() < 1e-14, "t = {t}");
        }
    }

    #[test]
    fn quantile_inverts_the_cdf() {
        for df in [0.7, 1.0, 2.3, 4.0, 17.5, 300.0, 1e5] {
            for p in [1e-6, 0.01, 0.2, 0.5, 0.9, 0.975, 0.999_999] {
                let t = t_quantile(p, df).unwrap();
                let back = t_cdf(t, df).unwrap();
                assert!(
                    (back - p).abs() <= 1e-12 * p.max(1e-3),
                    "df {df} p {p}: {back}"
                );
            }
        }
    }

    #[test]
    fn out_of_domain_is_none() {
        assert_eq!(t_quantile(0.0, 3.0), None);
        assert_eq!(t_quantile(0.5, -1.0), None);
        assert_eq!(t_quantile(f64::NAN, 3.0), None);
        assert_eq!(t_cdf(1.0, 0.0), None);
        assert_eq!(t_cdf(f64::NAN, 3.0), None);
        assert_eq!(t_two_sided_sf(f64::INFINITY, 3.0), Some(0.0));
        assert_eq!(incomplete_beta(1.0, 1.0, 1.5, -0.5), None);
    }
}

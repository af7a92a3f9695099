#!/usr/bin/env python3
"""Reference values for iolab's statistics, computed with scipy/numpy.

Writes tests/fixtures/stats/reference.json, which tests/stats.rs compares against with a
tolerance. CI does not need scipy: only the committed JSON is read there.

Regenerate (the versions used are recorded in the JSON):
    python3 -m venv /tmp/statsvenv && /tmp/statsvenv/bin/pip install scipy numpy
    /tmp/statsvenv/bin/python scripts/make-stats-fixtures.py

The input vectors are fixed below or drawn from a seeded numpy generator and rounded, so
the JSON is reproducible; they imitate what iolab measures (IOPS around 70k, latencies in
us, %sys), including the awkward cases: n = 1, n = 3 per side, ties, all-equal values,
bimodal runs and a far outlier.
"""
import json
import pathlib
import sys

import numpy as np
import scipy
from scipy import stats

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "stats" / "reference.json"

rng = np.random.default_rng(20261122)


def rounded(x, digits=1):
    return [round(float(v), digits) for v in x]


SAMPLES = {
    "single": [69112.0],
    "two": [69112.0, 70210.0],
    "iops_5": rounded(rng.normal(69000, 900, 5)),
    "iops_6": rounded(rng.normal(69000, 900, 6)),
    "iops_10_outlier": rounded(rng.normal(69000, 500, 9)) + [52000.0],
    "lat_us_bimodal_12": rounded(
        np.concatenate([rng.normal(95, 3, 7), rng.normal(160, 5, 5)]), 2),
    "sys_pct_ties": [12.5, 12.5, 13.0, 12.5, 14.0, 12.5, 13.0, 12.5],
    "all_equal": [4.0] * 7,
    "mostly_equal_one_far": [1.0] * 7 + [50.0],
    "large_30": rounded(rng.lognormal(np.log(260), 0.15, 30), 2),
    "tiny_values": [1e-6, 1.2e-6, 0.9e-6, 1.1e-6, 1.05e-6, 0.95e-6],
    # large n: the binomial tail of the median CI underflows 2^-n; own generator so the
    # vectors above stay the same
    "large_2000": rounded(np.random.default_rng(7).gamma(4.0, 25.0, 2000), 3),
}

PAIRS = {
    "three_vs_three_separated": ([100.0, 101.0, 102.0], [110.0, 111.0, 112.0]),
    "four_vs_four_separated": ([100.0, 101.0, 102.0, 103.0], [110.0, 111.0, 112.0, 113.0]),
    "five_vs_seven_overlap": (rounded(rng.normal(100, 5, 5), 2), rounded(rng.normal(104, 5, 7), 2)),
    "eight_vs_twenty_exact": (rounded(rng.normal(260, 20, 8), 2), rounded(rng.normal(145, 30, 20), 2)),
    "nine_vs_nine_asymptotic": (rounded(rng.normal(69000, 900, 9)), rounded(rng.normal(70500, 900, 9))),
    "ties_small": ([12.5, 12.5, 13.0, 14.0], [13.0, 13.5, 13.5, 15.0, 12.5]),
    "ties_large": (rounded(rng.normal(20, 2, 15), 0), rounded(rng.normal(21, 2, 18), 0)),
    "identical_groups": ([5.0, 6.0, 7.0, 8.0], [5.0, 6.0, 7.0, 8.0]),
    "all_tied": ([3.0] * 5, [3.0] * 6),
    "bimodal_6_vs_6": ([95.0, 97.0, 160.0, 96.0, 158.0, 94.0], [150.0, 161.0, 99.0, 155.0, 163.0, 157.0]),
    "noisy_39pct_6_vs_6": (rounded(rng.normal(100, 40, 6), 1), rounded(rng.normal(139, 50, 6), 1)),
    "large_40_vs_40": (rounded(rng.normal(1000, 50, 40), 3), rounded(rng.normal(1020, 50, 40), 3)),
    "exact_one_small_side": ([3.1, 2.7, 3.9], rounded(rng.normal(3.5, 0.4, 25), 3)),
    # exact in integers with one small side and a long other side (scipy's auto: exact)
    "eight_vs_300_exact": (rounded(rng.normal(50, 5, 8), 6), rounded(rng.normal(53, 5, 300), 6)),
    # exact only when forced; C(140, 70) overflows i128, so iolab's f64 recurrence runs
    "seventy_vs_seventy": (rounded(rng.normal(10, 1, 70), 6), rounded(rng.normal(10.4, 1, 70), 6)),
}


def summary(x):
    x = np.asarray(x, dtype=float)
    n = len(x)
    med = float(np.median(x))
    out = {"n": n, "mean": float(np.mean(x)), "median": med,
           "min": float(np.min(x)), "max": float(np.max(x))}
    if n >= 2:
        sd = float(np.std(x, ddof=1))
        out["stddev"] = sd
        out["cv"] = sd / abs(out["mean"]) if out["mean"] != 0 else None
        if sd == 0:  # scipy gives NaN for a zero scale; the interval is the point itself
            lo = hi = np.mean(x)
        else:
            lo, hi = stats.t.interval(0.95, n - 1, loc=np.mean(x), scale=stats.sem(x))
        out["ci_mean"] = [float(lo), float(hi)]
    else:
        out["stddev"] = None
        out["cv"] = None
        out["ci_mean"] = None
    # Order-statistic CI of the median: largest k with 1 - 2*P(B <= k-1) >= 0.95.
    best = None
    for k in range(1, (n + 1) // 2 + 1):
        cover = 1 - 2 * stats.binom.cdf(k - 1, n, 0.5)
        if cover >= 0.95:
            best = (k, float(cover))
        else:
            break
    if best:
        k, cover = best
        s = np.sort(x)
        out["ci_median"] = {"low": float(s[k - 1]), "high": float(s[n - k]),
                            "rank_low": k, "rank_high": n - k + 1, "confidence": cover}
    else:
        out["ci_median"] = None
    # Modified z-score outliers (Iglewicz & Hoaglin); mean-absolute-deviation fallback when MAD = 0.
    mad = float(np.median(np.abs(x - med)))
    if mad > 0:
        z = 0.6745 * (x - med) / mad
    else:
        mean_ad = float(np.mean(np.abs(x - med)))
        z = np.zeros(n) if mean_ad == 0 else (x - med) / (1.253314 * mean_ad)
    # No marks below 6 values (iolab's OUTLIER_MIN_N: the score is unstable there).
    out["outliers"] = [] if n < 6 else [int(i) for i in np.nonzero(np.abs(z) > 3.5)[0]]
    return out


def pair(baseline, candidate):
    b = np.asarray(baseline, float)
    c = np.asarray(candidate, float)
    out = {"baseline": list(baseline), "candidate": list(candidate)}
    # iolab tests candidate against baseline: statistic is U of the candidate.
    for method in ("auto", "exact", "asymptotic"):
        has_ties = len(np.unique(np.concatenate([b, c]))) < len(b) + len(c)
        if method == "exact" and has_ties:
            continue
        r = stats.mannwhitneyu(c, b, alternative="two-sided", method=method)
        out[f"mwu_{method}"] = {"u1": float(r.statistic), "p": float(r.pvalue)}
    t = stats.ttest_ind(c, b, equal_var=False)
    out["welch"] = None if np.isnan(t.pvalue) else {
        "t": float(t.statistic), "df": float(t.df), "p": float(t.pvalue)}
    mb, mc = float(np.median(b)), float(np.median(c))
    out["change_pct"] = None if mb == 0 else 100 * (mc / mb - 1)
    # scipy's own percentile bootstrap of the same ratio; different random resamples, so
    # the Rust side compares with a loose tolerance (a sanity check, not an exact match).
    if mb != 0 and len(b) >= 2 and len(c) >= 2 and np.std(b) + np.std(c) > 0:
        res = stats.bootstrap(
            (b, c), lambda x, y, axis: np.median(y, axis=axis) / np.median(x, axis=axis) - 1,
            method="percentile", n_resamples=20000, vectorized=True, paired=False,
            rng=np.random.default_rng(1))
        out["bootstrap_ci_pct"] = [100 * float(res.confidence_interval.low),
                                   100 * float(res.confidence_interval.high)]
    else:
        out["bootstrap_ci_pct"] = None
    return out


BH_P = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216, 0.222, 0.251,
        0.269, 0.275, 0.34, 0.341, 0.384, 0.569, 0.594, 0.696, 0.762, 0.94, 0.942, 0.975,
        0.986, 1.0, 0.001]


def histogram_case():
    # Three fio-like runs with log-spaced bucket values; merged by summing counts.
    keys = sorted({int(v) for v in np.geomspace(800, 2_000_000, 300).round(-1)})
    runs = []
    for shift in (0.0, 0.15, -0.1):
        lat = np.exp(rng.normal(np.log(20_000) + shift, 0.6, 5000))
        idx = np.clip(np.searchsorted(keys, lat), 0, len(keys) - 1)
        counts = np.bincount(idx, minlength=len(keys))
        runs.append({str(keys[i]): int(cnt) for i, cnt in enumerate(counts) if cnt})
    merged = {}
    for r in runs:
        for k, v in r.items():
            merged[int(k)] = merged.get(int(k), 0) + v
    ks = np.array(sorted(merged))
    cum = np.cumsum([merged[k] for k in ks])
    total = int(cum[-1])
    pcts = [1, 5, 10, 50, 90, 95, 99, 99.5, 99.9, 99.99, 100]
    # fio: first bucket whose cumulative count >= p/100 * total
    values = {str(p): int(ks[np.argmax(cum >= p / 100 * total)]) for p in pcts}
    return {"runs": runs, "total": total, "percentiles_ns": values}


def main():
    ref = {
        "generated_by": "scripts/make-stats-fixtures.py",
        "command": "/tmp/statsvenv/bin/python scripts/make-stats-fixtures.py",
        "python": sys.version.split()[0],
        "scipy": scipy.__version__,
        "numpy": np.__version__,
        "samples": {name: {"values": v, **summary(v)} for name, v in SAMPLES.items()},
        "pairs": {name: pair(b, c) for name, (b, c) in PAIRS.items()},
        "benjamini_hochberg": {"p": BH_P, "adjusted": [
            float(q) for q in stats.false_discovery_control(BH_P, method="bh")]},
        "t_quantiles": [{"p": p, "df": df, "q": float(stats.t.ppf(p, df))}
                        for p in (0.9, 0.975, 0.995) for df in (1, 2, 3, 5, 9, 29, 100, 1000)]
        + [{"p": p, "df": df, "q": float(stats.t.ppf(p, df))}
           for p in (1e-6, 0.05, 0.3) for df in (1.5, 2.31, 4.7, 29.5)],
        # Welch's df is fractional; tails down to 1e-12 and t near 0 both matter.
        "t_cdf": [{"t": t, "df": df, "cdf": float(stats.t.cdf(t, df)),
                   "two_sided_p": float(2 * stats.t.sf(abs(t), df))}
                  for df in (1, 2, 2.31, 3, 4.7, 9, 29.5, 100, 1e4)
                  for t in (-12.0, -4.3, -1.5, -0.1, 0.0, 1e-4, 0.3, 1.0, 2.1, 4.3, 30.0)],
        "histogram": histogram_case(),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(ref, indent=1, allow_nan=False) + "\n")
    print(f"wrote {OUT} (scipy {scipy.__version__}, numpy {np.__version__})")


if __name__ == "__main__":
    main()

//! iolab's statistics against reference values computed by scipy/numpy
//! (`scripts/make-stats-fixtures.py` wrote `tests/fixtures/stats/reference.json`; the scipy
//! version used is recorded in it). Only the committed JSON is read, so CI needs no Python.

use iolab::stats::compare::{compare, CompareOptions};
use iolab::stats::distributions::t_quantile;
use iolab::stats::student_t::{t_cdf, t_two_sided_sf};
use iolab::stats::{
    benjamini_hochberg, mann_whitney_u, summarize, welch_t_test, Direction, LatencyHistogram,
    MwuMethod,
};
use serde_json::Value;

fn reference() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/stats/reference.json"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The reference pairs; a reference with none would let every loop over them pass.
fn pairs(r: &Value) -> &serde_json::Map<String, Value> {
    nonempty_map(r["pairs"].as_object().unwrap())
}

fn nonempty_map(m: &serde_json::Map<String, Value>) -> &serde_json::Map<String, Value> {
    assert!(!m.is_empty(), "the reference is empty here");
    m
}

fn nonempty(v: &[Value]) -> &[Value] {
    assert!(!v.is_empty(), "the reference is empty here");
    v
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_f64().expect("number"))
        .collect()
}

#[track_caller]
fn close(what: &str, ours: f64, theirs: f64, rel: f64) {
    let tol = rel * theirs.abs().max(1e-300);
    assert!(
        (ours - theirs).abs() <= tol,
        "{what}: ours {ours} vs scipy {theirs} (tolerance {tol})"
    );
}

#[track_caller]
fn close_opt(what: &str, ours: Option<f64>, theirs: &Value, rel: f64) {
    match (ours, theirs.as_f64()) {
        (Some(a), Some(b)) => close(what, a, b, rel),
        (None, None) => {}
        (a, _) => panic!("{what}: ours {a:?} vs scipy {theirs}"),
    }
}

#[test]
fn fixture_records_where_it_came_from() {
    let r = reference();
    assert!(r["scipy"].as_str().is_some_and(|v| !v.is_empty()));
    assert!(r["command"]
        .as_str()
        .unwrap()
        .contains("make-stats-fixtures.py"));
}

#[test]
fn summaries_match_numpy_and_scipy() {
    let r = reference();
    let samples = r["samples"].as_object().unwrap();
    assert!(samples.len() >= 10);
    for (name, s) in samples {
        let values = floats(&s["values"]);
        let ours = summarize(&values).unwrap();
        assert_eq!(ours.n as u64, s["n"].as_u64().unwrap(), "{name}");
        close(
            &format!("{name} mean"),
            ours.mean,
            s["mean"].as_f64().unwrap(),
            1e-12,
        );
        close(
            &format!("{name} median"),
            ours.median,
            s["median"].as_f64().unwrap(),
            1e-12,
        );
        assert_eq!(ours.min, s["min"].as_f64().unwrap(), "{name}");
        assert_eq!(ours.max, s["max"].as_f64().unwrap(), "{name}");
        close_opt(&format!("{name} stddev"), ours.stddev, &s["stddev"], 1e-9);
        close_opt(&format!("{name} cv"), ours.cv, &s["cv"], 1e-9);
        match (&ours.ci_mean, &s["ci_mean"]) {
            (Some(ci), Value::Array(b)) => {
                close(
                    &format!("{name} ci_mean low"),
                    ci.low,
                    b[0].as_f64().unwrap(),
                    1e-9,
                );
                close(
                    &format!("{name} ci_mean high"),
                    ci.high,
                    b[1].as_f64().unwrap(),
                    1e-9,
                );
            }
            (None, Value::Null) => {}
            (o, t) => panic!("{name} ci_mean: ours {o:?} vs scipy {t}"),
        }
        match (&ours.ci_median, &s["ci_median"]) {
            (Some(ci), Value::Object(t)) => {
                assert_eq!(ci.low, t["low"].as_f64().unwrap(), "{name}");
                assert_eq!(ci.high, t["high"].as_f64().unwrap(), "{name}");
                assert_eq!(
                    ci.rank_low as u64,
                    t["rank_low"].as_u64().unwrap(),
                    "{name}"
                );
                close(
                    &format!("{name} median conf"),
                    ci.confidence,
                    t["confidence"].as_f64().unwrap(),
                    1e-12,
                );
            }
            (None, Value::Null) => {}
            (o, t) => panic!("{name} ci_median: ours {o:?} vs scipy {t}"),
        }
        let expected: Vec<usize> = s["outliers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(ours.outliers, expected, "{name} outliers");
    }
}

#[test]
fn mann_whitney_matches_scipy_in_every_method() {
    let r = reference();
    let mut checked = 0;
    for (name, p) in pairs(&r) {
        let (b, c) = (floats(&p["baseline"]), floats(&p["candidate"]));
        for (key, method) in [
            ("mwu_auto", MwuMethod::Auto),
            ("mwu_exact", MwuMethod::Exact),
            ("mwu_asymptotic", MwuMethod::Asymptotic),
        ] {
            let Some(t) = p.get(key) else { continue };
            let ours = mann_whitney_u(&c, &b, method).unwrap();
            close(
                &format!("{name} {key} U"),
                ours.u1,
                t["u1"].as_f64().unwrap(),
                1e-12,
            );
            close(
                &format!("{name} {key} p"),
                ours.p,
                t["p"].as_f64().unwrap(),
                1e-9,
            );
            checked += 1;
        }
    }
    assert!(checked >= 30, "only {checked} reference p-values");
}

#[test]
fn welch_matches_scipy() {
    let r = reference();
    for (name, p) in pairs(&r) {
        let (b, c) = (floats(&p["baseline"]), floats(&p["candidate"]));
        let ours = welch_t_test(&c, &b).unwrap();
        match (ours, &p["welch"]) {
            (Some(w), Value::Object(t)) => {
                close(&format!("{name} t"), w.t, t["t"].as_f64().unwrap(), 1e-9);
                close(&format!("{name} df"), w.df, t["df"].as_f64().unwrap(), 1e-9);
                close(&format!("{name} p"), w.p, t["p"].as_f64().unwrap(), 1e-7);
            }
            (None, Value::Null) => {}
            (o, t) => panic!("{name} welch: ours {o:?} vs scipy {t}"),
        }
    }
}

#[test]
fn change_and_bootstrap_ci_agree_with_scipy_bootstrap() {
    // Different random resamples: the bounds must agree to a fraction of the CI's width.
    let r = reference();
    for (name, p) in pairs(&r) {
        let (b, c) = (floats(&p["baseline"]), floats(&p["candidate"]));
        let ours = compare(&b, &c, &CompareOptions::new(Direction::HigherIsBetter)).unwrap();
        close_opt(
            &format!("{name} change"),
            ours.change_pct,
            &p["change_pct"],
            1e-9,
        );
        let Value::Array(ci) = &p["bootstrap_ci_pct"] else {
            continue;
        };
        let (lo, hi) = (ci[0].as_f64().unwrap(), ci[1].as_f64().unwrap());
        let slack = 0.2 * (hi - lo) + 0.5;
        let (ol, oh) = (ours.ci_low_pct.unwrap(), ours.ci_high_pct.unwrap());
        assert!(
            (ol - lo).abs() <= slack && (oh - hi).abs() <= slack,
            "{name}: ours [{ol:.2}, {oh:.2}] vs scipy [{lo:.2}, {hi:.2}]"
        );
    }
}

#[test]
fn benjamini_hochberg_matches_scipy() {
    let r = reference();
    let bh = &r["benjamini_hochberg"];
    let ours = benjamini_hochberg(&floats(&bh["p"]));
    let theirs = floats(&bh["adjusted"]);
    assert!(!theirs.is_empty(), "the reference has no adjusted p-values");
    assert_eq!(ours.len(), theirs.len(), "one adjusted p-value per p-value");
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        close(&format!("q[{i}]"), *a, b, 1e-12);
    }
}

#[test]
fn t_quantiles_match_scipy() {
    let r = reference();
    for t in nonempty(r["t_quantiles"].as_array().unwrap()) {
        let (p, df) = (t["p"].as_f64().unwrap(), t["df"].as_f64().unwrap());
        let ours = t_quantile(p, df).unwrap();
        close(
            &format!("t({p}, {df})"),
            ours,
            t["q"].as_f64().unwrap(),
            1e-9,
        );
    }
}

#[test]
fn t_cdf_and_tails_match_scipy() {
    // The brief asks for 1e-6; the computation here holds far tighter, and a looser check
    // would hide a lost digit in the tails that decide small-n verdicts.
    let r = reference();
    let cases = nonempty(r["t_cdf"].as_array().unwrap());
    assert!(cases.len() >= 90, "only {} reference points", cases.len());
    for c in cases {
        let (t, df) = (c["t"].as_f64().unwrap(), c["df"].as_f64().unwrap());
        let cdf = t_cdf(t, df).unwrap();
        let theirs = c["cdf"].as_f64().unwrap();
        assert!(
            (cdf - theirs).abs() <= 1e-13,
            "cdf({t}, {df}): ours {cdf} vs scipy {theirs}"
        );
        let p = c["two_sided_p"].as_f64().unwrap();
        close(
            &format!("p({t}, {df})"),
            t_two_sided_sf(t, df).unwrap(),
            p,
            1e-10,
        );
    }
}

#[test]
fn fio_histograms_merge_exactly_and_percentiles_match() {
    let r = reference();
    let h = &r["histogram"];
    let runs: Vec<LatencyHistogram> = h["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let bins: std::collections::BTreeMap<u64, u64> =
                serde_json::from_value(b.clone()).unwrap();
            LatencyHistogram::from_pairs(bins)
        })
        .collect();
    let merged = LatencyHistogram::merged(&runs);
    assert_eq!(merged.total(), h["total"].as_u64().unwrap());
    for (p, ns) in nonempty_map(h["percentiles_ns"].as_object().unwrap()) {
        let p: f64 = p.parse().unwrap();
        assert_eq!(merged.percentile(p), ns.as_u64(), "p{p}");
    }
}

#[test]
fn verdicts_on_the_reference_pairs() {
    use iolab::stats::compare::VerdictReason::*;
    use iolab::stats::Verdict::*;
    let r = reference();
    let expected = [
        // 3 vs 3: the exact rank test's floor is p = 0.1; Welch's t decides.
        ("three_vs_three_separated", Improved, Significant),
        ("four_vs_four_separated", Improved, Significant),
        ("bimodal_6_vs_6", NoDifference, CiIncludesZero),
        ("identical_groups", NoDifference, CiIncludesZero),
        ("all_tied", NoDifference, CiIncludesZero),
        ("eight_vs_twenty_exact", Regressed, Significant),
        ("noisy_39pct_6_vs_6", Improved, Significant),
    ];
    for (name, verdict, reason) in expected {
        let p = &r["pairs"][name];
        let (b, c) = (floats(&p["baseline"]), floats(&p["candidate"]));
        let ours = compare(&b, &c, &CompareOptions::new(Direction::HigherIsBetter)).unwrap();
        assert_eq!(
            (ours.verdict, ours.reason),
            (verdict, reason),
            "{name}: {}",
            ours.explanation
        );
    }
}

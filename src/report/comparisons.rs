//! The `compare` table: per cell (and metric), baseline and candidate medians, the change
//! with its CI, the p-value, the test that gave it and the verdict, and a `geomean` row per
//! metric across the cells, with a legend saying what each column means so a reader of the
//! mailing-list post does not have to guess.

use crate::stats::across::AcrossCells;
use crate::stats::compare::{Test, VerdictReason};
use crate::stats::Comparison;

use super::format::{p_value, signed_pair, signed_pct};
use super::table::{Cell, Column, Table};

/// One row; in `compare --json` the full [`Comparison`] (baseline and candidate summaries,
/// `change_pct`, `ci_low_pct`, `ci_high_pct`, `p_mannwhitney`, `p_welch`, `p_adjusted`,
/// `verdict`, `reason`, seed...) with `cell` and `metric`. `test` names the test that decided
/// (`mann-whitney`, `welch`, or null with one run on a side) and `p_test` its p-value.
#[derive(serde::Serialize)]
pub(crate) struct ComparisonRow<'a> {
    /// The cell's factor levels, e.g. `bs=4k rw=randread`.
    pub cell: String,
    /// Shown as a column only when some row names a metric (mixed-metric tables).
    pub metric: Option<String>,
    #[serde(flatten)]
    pub comparison: &'a Comparison,
}

/// The table of one family of comparisons (the tests' shorthand).
#[cfg(test)]
pub(crate) fn comparison_table(
    title: &str,
    unit: Option<&str>,
    rows: &[ComparisonRow<'_>],
) -> Table {
    let family = rows.iter().filter(|r| r.comparison.in_family()).count();
    comparison_table_in_family(title, unit, rows, family)
}

/// Builds one table out of a family of comparisons (several metrics compared at once, or
/// just these rows): `family` is how many comparisons the Benjamini-Hochberg adjustment
/// covered, so the legend states it truthfully. `unit` is the unit of the medians
/// (single-metric tables only); it is shown once in the title line so the eight columns
/// still fit 80 characters.
pub(crate) fn comparison_table_in_family(
    title: &str,
    unit: Option<&str>,
    rows: &[ComparisonRow<'_>],
    family: usize,
) -> Table {
    let with_metric = rows.iter().any(|r| r.metric.is_some());
    let mut columns = vec![Column::label("cell")];
    if with_metric {
        columns.push(Column::label("metric"));
    }
    columns.extend([
        Column::number("baseline", None),
        Column::number("candidate", None),
        Column::number("change", None),
        Column::interval("95% CI"),
        Column::number("p", None),
        Column::label("verdict"),
    ]);
    // One test for every row (3 vs 3 runs: Welch's t everywhere) is said once in the text's
    // legend: a column repeating it would push the table past 80 characters.
    let tests: Vec<Test> = rows.iter().filter_map(|r| r.comparison.test).collect();
    let one_test = tests
        .first()
        .copied()
        .filter(|t| tests.iter().all(|x| x == t));
    // After the verdict, so that a table split to fit 80 columns keeps the verdict next to
    // its p-value.
    let mut test = Column::label("test");
    test.text_hidden = one_test.is_some();
    columns.push(test);
    // After the verdict: when a table must split to fit 80 columns, the reference p-value
    // moves to the second block, not the verdict.
    columns.push(Column::number("Welch p", None));
    let mut table = Table::new(columns);
    table.title = Some(match unit {
        Some(u) => format!("{title} [{u}]"),
        None => title.to_string(),
    });
    let mut too_few = None;
    for r in rows {
        let c = r.comparison;
        let mut row = vec![Cell::text(&r.cell)];
        if with_metric {
            row.push(Cell::text(r.metric.clone().unwrap_or_default()));
        }
        row.push(Cell::number(c.baseline.median));
        row.push(Cell::number(c.candidate.median));
        // A change under the minimum effect must not print as reaching it.
        let below = (c.reason == VerdictReason::BelowMinEffect).then_some(c.min_effect_pct);
        row.extend(match c.difference {
            Some(d) => difference_cells(
                c.change_pct,
                below,
                d,
                c.difference_ci_low,
                c.difference_ci_high,
            ),
            None => change_cells(c.change_pct, below, c.ci_low_pct, c.ci_high_pct),
        });
        row.push(match c.p_adjusted.or(c.p_test) {
            Some(p) => Cell::Number {
                value: p,
                text: p_value(p),
            },
            None => Cell::Missing,
        });
        let mut verdict = c.verdict.as_str().to_string();
        if c.reason == VerdictReason::TooFewSamples {
            verdict.push_str(" (n)");
            too_few = Some(c.explanation.clone());
        }
        row.push(Cell::text(verdict));
        row.push(c.test.map_or(Cell::Missing, |t| Cell::text(t.as_str())));
        row.push(match c.p_welch {
            Some(w) => Cell::Number {
                value: w,
                text: p_value(w),
            },
            None => Cell::Missing,
        });
        table.push(row);
    }
    // Tables of one family share one legend: a table of rows left out of the adjustment
    // (runs all one value) is still part of an adjusted family.
    let adjusted = family > 0 && rows.iter().any(|r| r.comparison.p_test.is_some());
    table.notes.push(format!(
        "baseline, candidate: medians; change: of the medians, 95% CI by bootstrap (seed {})",
        rows.first().map_or(0, |r| r.comparison.seed)
    ));
    let alpha = rows.first().map_or(0.05, |r| r.comparison.alpha);
    let adjustment = if adjusted {
        format!(
            ", Benjamini-Hochberg adjusted over {family} comparison{}",
            if family == 1 { "" } else { "s" }
        )
    } else {
        String::new()
    };
    // A table without a p-value (every row's sides constant) explains no p: its legend would
    // contradict the adjusted one of the tables beside it.
    let any_p = rows.iter().any(|r| r.comparison.p_test.is_some());
    let p_legend = match one_test {
        None => format!(
            "p: two-sided, of the test named in `test`{adjustment}; MW = Mann-Whitney U where \
             its smallest possible p is below {alpha} (e.g. 4 vs 4 or 3 vs 5 runs), else Welch \
             = Welch's t on the runs (e.g. 3 vs 3); Welch p column: Welch's t p, unadjusted, for \
             reference"
        ),
        Some(Test::Welch) => format!(
            "p: two-sided, of Welch's t on the runs in every row{adjustment} (Mann-Whitney U \
             needs more runs for its p to reach {alpha}: e.g. 4 vs 4 or 3 vs 5); Welch p \
             column: Welch's t p, unadjusted, for reference"
        ),
        Some(Test::MannWhitney) => format!(
            "p: two-sided, of Mann-Whitney U in every row{adjustment}; Welch p column: Welch's \
             t p, unadjusted, for reference"
        ),
    };
    if any_p {
        table.notes.push(p_legend);
    }
    if rows
        .iter()
        .any(|r| r.comparison.p_test.is_some() && !r.comparison.in_family())
    {
        table.notes.push(
            "p of a row whose runs are all one value, on both sides: no evidence either way, \
             so not counted in the adjustment"
                .to_string(),
        );
    }
    if let Some(min_effect) = rows.first().map(|r| r.comparison.min_effect_pct) {
        let constant = rows
            .iter()
            .any(|r| r.comparison.reason == VerdictReason::NoVariance);
        // Apart, so that the legend is word for word the same in every table and is said
        // once where several are printed together.
        table.notes.push(format!(
            "~: no difference shown (CI includes 0, |change| < {min_effect}%, or p >= {})",
            rows[0].comparison.alpha,
        ));
        if constant {
            table
                .notes
                .push("p -: neither side varies, so Welch's t has no p and cannot decide".into());
        }
    }
    // A percentile bootstrap of very few runs under-covers: at 2 vs 2 and 3 vs 3 its interval
    // is the range of the cross ratios, which misses a true change of 0 whenever the sides do
    // not overlap, 2 / C(n1 + n2, n1) of the time (a simulation of this method gave 93% at
    // 4 vs 4 and 96% at 6 vs 6). The verdict's own test keeps its level.
    if rows.iter().any(|r| {
        let fewer = r.comparison.baseline.n.min(r.comparison.candidate.n);
        (2..=4).contains(&fewer)
    }) {
        table.notes.push(
            "95% CI with 4 or fewer runs on a side: nominal; a bootstrap of so few runs holds \
             the true change less often (at 2 vs 2 and 3 vs 3 its interval is the range of \
             the runs' ratios, which misses a change of 0 in 1 of 3 and 1 of 10 cases); the \
             verdict also needs the test's p, which keeps its level"
                .to_string(),
        );
    }
    // Rows whose CI is of the difference: beside a relative change (`abs`), from a baseline
    // of 0 (`from 0`), or between two medians of 0 (`-`).
    let by_difference = |from_zero: bool, both_zero: bool| {
        rows.iter().any(|r| {
            let c = r.comparison;
            c.difference.is_some_and(|d| (d == 0.0) == both_zero)
                && c.change_pct.is_none() == from_zero
        })
    };
    if by_difference(false, false) || by_difference(false, true) {
        table.notes.push(
            "abs: over a tenth of the resampled baseline medians are 0, so the relative change \
             has no CI; the 95% CI is of the difference of the medians, in the metric's unit"
                .to_string(),
        );
    }
    if by_difference(true, false) {
        table.notes.push(
            "from 0: the baseline median is 0, so no relative change exists; the 95% CI is \
             of the difference of the medians, in the metric's unit, and no minimum effect \
             applies"
                .to_string(),
        );
    }
    if by_difference(true, true) {
        table.notes.push(
            "change -: both medians are 0, so there is no change to show; the 95% CI is of \
             the difference of the medians, in the metric's unit"
                .to_string(),
        );
    }
    let bucketed: Vec<String> = rows
        .iter()
        .filter(|r| r.comparison.ci_widened_to_buckets)
        .map(|r| match &r.metric {
            Some(m) if with_metric => format!("{} {m}", r.cell),
            _ => r.cell.clone(),
        })
        .collect();
    if !bucketed.is_empty() {
        table.notes.push(format!(
            "95% CI with the latency histogram's buckets in {}: each run's value stands for a \
             bucket the true value may lie anywhere in, so the interval is drawn over the \
             buckets' edges too (runs one bucket apart may differ by nothing)",
            bucketed.join("; ")
        ));
    }
    if let Some(why) = too_few {
        table.notes.push(format!("(n): {why}"));
    }
    table
}

/// A relative change's CI, in percent, both ends with the same decimals. Past +10,000% an
/// end says only that: a CI that wide (a geometric mean over two cells, whose t has one
/// degree of freedom) tells nothing more, and its ten digits made the table unreadable;
/// `--json` has the number.
fn ci_text(low: f64, high: f64) -> String {
    let (lo, hi) = signed_pair(low, high);
    let capped = |x: f64, text: String| {
        if x > 10_000.0 {
            ">+10,000".to_string()
        } else {
            text
        }
    };
    format!("[{}, {}]", capped(low, lo), capped(high, hi))
}

/// The `change` and `95% CI` cells: a signed percentage and `[low, high]`.
fn change_cells(
    change: Option<f64>,
    below: Option<f64>,
    low: Option<f64>,
    high: Option<f64>,
) -> [Cell; 2] {
    [
        match change {
            Some(x) => Cell::Number {
                value: x,
                text: change_text(x, below),
            },
            None => Cell::Missing,
        },
        match (low, high) {
            (Some(lo), Some(hi)) => Cell::Interval {
                low: lo,
                high: hi,
                difference: false,
                text: ci_text(lo, hi),
            },
            _ => Cell::Missing,
        },
    ]
}

/// A relative change in percent as tables print it, with as many more decimals (up to four)
/// as it takes not to round a change that is `below` the minimum effect up to it (else
/// `+<1%`): `+1.0%` beside a `~` that says the change is under 1% read as a contradiction.
fn change_text(x: f64, below: Option<f64>) -> String {
    let rounds_up = |m: &f64| {
        format!("{:.1}", x.abs())
            .parse::<f64>()
            .is_ok_and(|v| v >= *m)
    };
    let Some(min_effect) = below.filter(rounds_up) else {
        return signed_pct(x);
    };
    let sign = if x < 0.0 { "-" } else { "+" };
    (2..=4)
        .map(|decimals| format!("{:.*}", decimals, x.abs()))
        .find(|shown| shown.parse::<f64>().is_ok_and(|v| v < min_effect))
        .map_or(format!("{sign}<{min_effect}%"), |shown| {
            format!("{sign}{shown}%")
        })
}

/// The `change` and `95% CI` cells where the difference `d` of the medians stands in for the
/// relative change's CI. The change: the relative one where it exists, else `from 0` (`-` when
/// both medians are 0). The CI in the metric's unit with two significant digits, so the row
/// still fits 80 columns, marked `abs` beside a relative change so it is not read as percent.
fn difference_cells(
    change: Option<f64>,
    below: Option<f64>,
    d: f64,
    low: Option<f64>,
    high: Option<f64>,
) -> [Cell; 2] {
    let [relative, _] = change_cells(change, below, None, None);
    let (Some(lo), Some(hi)) = (low, high) else {
        return [relative, Cell::Missing];
    };
    let ci = format!("[{}, {}]", signed_two_digits(lo), signed_two_digits(hi));
    let interval = |text| Cell::Interval {
        low: lo,
        high: hi,
        difference: true,
        text,
    };
    match change {
        Some(_) => [relative, interval(format!("{ci} abs"))],
        None if d == 0.0 => [Cell::Missing, interval(ci)],
        None => [Cell::text("from 0"), interval(ci)],
    }
}

/// `+0.16`, `-3.2`, `+12345`: two significant digits below 100, whole numbers above; an
/// exponent below a millionth, where six decimals would say `+0.000000`.
fn signed_two_digits(x: f64) -> String {
    if x == 0.0 {
        // -0.0 too: a bound of "-0" read as below zero.
        return "0".into();
    }
    if !x.is_finite() {
        return format!("{x}");
    }
    if x.abs() < 1e-6 {
        return format!("{x:+.1e}");
    }
    let decimals = (1 - x.abs().log10().floor() as i32).clamp(0, 6) as usize;
    format!("{x:+.decimals$}")
}

/// The `geomean` row of a comparison table (same columns as [`comparison_table_in_family`]
/// built with or without a metric column): geometric means of the medians, the geomean
/// change with its CI, and in the verdict column the cells improved/regressed/~.
pub(crate) fn across_row(label: &str, metric: Option<&str>, s: &AcrossCells) -> Vec<Cell> {
    let mut row = vec![Cell::text(label)];
    if let Some(m) = metric {
        row.push(Cell::text(m));
    }
    let number = |v: Option<f64>| v.map_or(Cell::Missing, Cell::number);
    row.push(number(s.geomean_baseline));
    row.push(number(s.geomean_candidate));
    row.extend(change_cells(
        s.change_pct,
        None,
        s.ci_low_pct,
        s.ci_high_pct,
    ));
    row.push(Cell::Missing); // p: the geomean is summarised, not tested
                             // A metric without a better side has only changed and unchanged cells.
    row.push(Cell::text(if s.changed > 0 {
        format!("{} changed/{} ~", s.changed, s.unchanged)
    } else {
        format!("{}/{}/{}", s.improved, s.regressed, s.unchanged)
    }));
    // The test and Welch columns, when the table has them, stay empty (`Table::push`).
    row
}

/// The legend line for tables that carry [`across_row`]s.
pub(crate) fn across_note(level: f64) -> String {
    format!(
        "geomean: over the cells, geometric means of the medians and of candidate/baseline; \
         {:.0}% CI: {} (cells - 1 degrees of freedom); verdict: cells \
         improved/regressed/~",
        100.0 * level,
        crate::stats::across::CI_METHOD
    )
}

#[cfg(test)]
mod tests {
    use super::{ci_text, signed_two_digits};

    #[test]
    fn a_difference_bound_near_zero_keeps_its_sign_and_digits() {
        assert_eq!(signed_two_digits(-0.0), "0");
        assert_eq!(signed_two_digits(1e-7), "+1.0e-7");
        assert_eq!(signed_two_digits(-0.0123), "-0.012");
        assert_eq!(signed_two_digits(12345.0), "+12345");
    }

    #[test]
    fn a_ci_bound_past_ten_thousand_percent_is_said_as_such() {
        assert_eq!(ci_text(-31.04, 8_929.4), "[-31.0, +8,929]");
        assert_eq!(ci_text(10_000.0, 1_019_758_498.1), "[+10,000, >+10,000]");
    }

    /// Both ends with the decimals the finer needs: `[-0.1, -0.01]` showed -0.0505 as twice
    /// what it was beside -0.0101.
    #[test]
    fn both_ends_of_an_interval_have_the_same_decimals() {
        assert_eq!(ci_text(-0.0505, -0.0101), "[-0.05, -0.01]");
        assert_eq!(ci_text(-2.5, 0.004), "[-2.500, +0.004]");
        assert_eq!(ci_text(-2.5, 3.0), "[-2.5, +3.0]");
        assert_eq!(ci_text(0.0, 0.0), "[+0.0, +0.0]");
    }

    use super::*;
    use crate::report::table::MAX_WIDTH;
    use crate::stats::compare::{adjust_family, compare, CompareOptions};
    use crate::stats::Direction;

    /// A table with a side that does not vary says why beside the `~` legend, not inside
    /// it: the legend stays word for word that of the other tables, so `compare` prints it
    /// once (it printed two legends, one longer).
    #[test]
    fn the_legend_is_the_same_whether_or_not_a_side_varies() {
        let opts = CompareOptions::new(Direction::HigherIsBetter);
        let varying = compare(&[1.0, 1.1, 0.9], &[1.2, 1.3, 1.1], &opts).unwrap();
        let constant = compare(&[2.0, 2.0, 2.0], &[2.0, 2.0, 2.0], &opts).unwrap();
        let table = |c: &Comparison| {
            let row = ComparisonRow {
                cell: "base".into(),
                metric: None,
                comparison: c,
            };
            comparison_table("m", None, &[row])
        };
        let (a, b) = (table(&varying), table(&constant));
        let legend = |t: &Table| t.notes.iter().find(|n| n.starts_with("~:")).cloned();
        assert!(legend(&a).is_some());
        assert_eq!(legend(&a), legend(&b));
        assert!(b
            .notes
            .iter()
            .any(|n| n.starts_with("p -: neither side varies")));
        let both = crate::analysis::compare::render_tables(&[a, b]);
        assert_eq!(both.matches("~: no difference shown").count(), 1, "{both}");
    }

    /// A change of 0.996% under a 1% minimum effect printed `+1.0%` in its `~` row.
    #[test]
    fn a_change_below_the_minimum_effect_never_prints_as_reaching_it() {
        assert_eq!(change_text(0.996, Some(1.0)), "+0.996%");
        assert_eq!(change_text(-0.99994, Some(1.0)), "-0.9999%");
        assert_eq!(change_text(0.999996, Some(1.0)), "+<1%");
        assert_eq!(change_text(0.94, Some(1.0)), "+0.9%");
        assert_eq!(change_text(0.003, Some(1.0)), "+0.003%");
        assert_eq!(change_text(0.996, None), "+1.0%");
        let opts = CompareOptions::new(Direction::HigherIsBetter);
        let base = [1000.0, 1000.5, 999.5, 1000.2, 999.8];
        let cand: Vec<f64> = base.iter().map(|x| x * 1.00996).collect();
        let c = compare(&base, &cand, &opts).unwrap();
        assert_eq!(c.reason, VerdictReason::BelowMinEffect);
        let row = ComparisonRow {
            cell: "base".into(),
            metric: None,
            comparison: &c,
        };
        let text = comparison_table("m", None, &[row]).render_text(MAX_WIDTH);
        assert!(text.contains("+0.996%"), "{text}");
    }

    #[test]
    fn kernel_regression_table_like_seeds_001() {
        let opts = CompareOptions::new(Direction::HigherIsBetter);
        let mut cmps = vec![
            compare(
                &[260.1, 258.3, 262.0, 259.5, 261.2, 260.7],
                &[145.2, 147.9, 144.1, 146.3, 150.0, 143.8],
                &opts,
            )
            .unwrap(),
            compare(
                &[255.0, 259.0, 262.0, 258.1],
                &[257.0, 260.0, 263.5, 256.2],
                &opts,
            )
            .unwrap(),
            // The cases' 3 runs per side: Welch's t decides.
            compare(&[240.0, 250.0, 245.0], &[260.0, 270.0, 265.0], &opts).unwrap(),
            // One run on a side: no test.
            compare(&[251.0], &[249.0, 252.0, 250.5], &opts).unwrap(),
        ];
        adjust_family(&mut cmps);
        let labels = [
            "sched=mq-deadline",
            "sched=none",
            "sched=bfq",
            "sched=kyber",
        ];
        let rows: Vec<ComparisonRow> = cmps
            .iter()
            .zip(labels)
            .map(|(c, l)| ComparisonRow {
                cell: l.into(),
                metric: None,
                comparison: c,
            })
            .collect();
        let mut t = comparison_table("read_bw_mbs: kernel=6.1 vs kernel=6.6", Some("MB/s"), &rows);
        let refs: Vec<&Comparison> = cmps.iter().collect();
        t.push(across_row(
            "geomean",
            None,
            &crate::stats::across_cells(&refs, 0.95),
        ));
        t.notes.push(across_note(0.95));
        let text = t.render_text(MAX_WIDTH);
        assert!(text.contains("regressed"));
        assert!(text.contains("~ (n)"));
        let bfq: String = text
            .lines()
            .filter(|l| l.starts_with("sched=bfq"))
            .collect();
        assert!(bfq.contains("Welch") && bfq.contains("improved"), "{text}");
        let geomean = text.lines().find(|l| l.starts_with("geomean")).unwrap();
        assert!(geomean.contains("1/1/2"), "{text}");
        assert!(
            text.lines().all(|l| l.len() <= MAX_WIDTH && l.is_ascii()),
            "{text}"
        );
        insta::assert_snapshot!(text);
        let json = serde_json::to_value(&rows).unwrap();
        let first = &json[0];
        for key in ["cell", "metric", "change_pct", "ci_low_pct", "ci_high_pct"] {
            assert!(first.get(key).is_some(), "{key} missing in {first}");
        }
        for key in ["p_mannwhitney", "p_welch", "test", "p_test", "verdict"] {
            assert!(first.get(key).is_some(), "{key} missing in {first}");
        }
        assert_eq!(json[2]["test"], "welch");
        for key in ["n", "mean", "median", "stddev"] {
            assert!(
                first["baseline"].get(key).is_some(),
                "baseline.{key} missing"
            );
            assert!(
                first["candidate"].get(key).is_some(),
                "candidate.{key} missing"
            );
        }
        assert_eq!(first["verdict"], "regressed");
        assert_eq!(json[1]["verdict"], "~");
        insta::assert_json_snapshot!(json[0]);
    }

    /// 3 vs 3 runs in every cell: Welch's t decides each row, the text says so once instead
    /// of in a column (so the table fits 80 characters in one block), and CSV keeps the column.
    #[test]
    fn one_test_for_every_row_is_named_in_the_legend_not_a_column() {
        let opts = CompareOptions::new(Direction::HigherIsBetter);
        let mut cmps = vec![
            compare(&[240.0, 250.0, 245.0], &[260.0, 270.0, 265.0], &opts).unwrap(),
            compare(
                &[17306.0, 17100.0, 17800.0],
                &[13688.0, 13000.0, 14400.0],
                &opts,
            )
            .unwrap(),
        ];
        adjust_family(&mut cmps);
        let rows: Vec<ComparisonRow> = cmps
            .iter()
            .zip(["4k/1", "4k/32"])
            .map(|(c, l)| ComparisonRow {
                cell: l.into(),
                metric: None,
                comparison: c,
            })
            .collect();
        let t = comparison_table("read_iops: A -> B", Some("IO/s"), &rows);
        let text = t.render_text(MAX_WIDTH);
        let header = text.lines().nth(1).unwrap();
        assert!(header.ends_with("verdict    Welch p"), "{text}");
        let body: Vec<&str> = text.lines().skip(3).take(2).collect();
        assert!(body.iter().all(|l| !l.contains("Welch")), "{text}");
        assert!(text.contains("p: two-sided, of Welch's t on the runs in every row"));
        assert!(text.lines().all(|l| l.len() <= MAX_WIDTH), "{text}");
        assert!(
            t.to_csv().lines().next().unwrap().contains(",test,"),
            "{}",
            t.to_csv()
        );
    }

    /// The cases' "request allocation sleeps appeared": a count that was 0 in every baseline
    /// run gets a verdict from the difference of the medians, and the row says so.
    #[test]
    fn a_change_from_zero_shows_the_difference_and_its_ci() {
        let opts = CompareOptions::new(Direction::LowerIsBetter);
        let c = compare(&[0.0; 5], &[120.0, 95.0, 140.0, 110.0, 131.0], &opts).unwrap();
        let rows = [ComparisonRow {
            cell: "scheduler=none".into(),
            metric: None,
            comparison: &c,
        }];
        let text = comparison_table("trace_sleeps: kernel=6.1 -> kernel=6.6", None, &rows)
            .render_text(MAX_WIDTH);
        let row = text
            .lines()
            .find(|l| l.starts_with("scheduler=none"))
            .unwrap();
        assert!(
            row.contains("from 0") && row.contains("[+95, +140]"),
            "{text}"
        );
        assert!(row.contains("regressed"), "{text}");
        assert!(text.contains("from 0: the baseline median is 0"), "{text}");
        assert!(text.lines().all(|l| l.len() <= MAX_WIDTH), "{text}");
        let json = serde_json::to_value(&rows).unwrap();
        assert_eq!(json[0]["difference"], 120.0);
        assert!(json[0]["change_pct"].is_null(), "{json}");
        // Most resampled baseline medians 0 (retransmits): the relative change with the
        // difference's CI, marked.
        let c = compare(
            &[0.0, 0.0, 2.0, 3.0, 4.0],
            &[50.0, 60.0, 55.0, 70.0, 65.0],
            &opts,
        )
        .unwrap();
        let rows = [ComparisonRow {
            cell: "placement=far".into(),
            metric: None,
            comparison: &c,
        }];
        let text = comparison_table("net_retransmits", None, &rows).render_text(MAX_WIDTH);
        let row = text
            .lines()
            .find(|l| l.starts_with("placement=far"))
            .unwrap();
        assert!(
            row.contains("+2,900%") && row.contains("[+48, +68] abs"),
            "{text}"
        );
        assert!(row.contains("regressed"), "{text}");
        assert!(
            text.contains("abs: over a tenth of the resampled baseline medians are 0"),
            "{text}"
        );
        assert!(!text.contains("from 0:"), "{text}");
        // Both sides all 0 (no I2D without a scheduler): no `from 0` in the row, so none in
        // the legend either, which says what the `-` is instead.
        let c = compare(&[0.0; 3], &[0.0; 3], &opts).unwrap();
        let rows = [ComparisonRow {
            cell: "none/on".into(),
            metric: None,
            comparison: &c,
        }];
        let text = comparison_table("trace_i2d_pct", None, &rows).render_text(MAX_WIDTH);
        assert!(!text.contains("from 0"), "{text}");
        assert!(text.contains("change -: both medians are 0"), "{text}");
        assert_eq!(signed_two_digits(0.16213), "+0.16");
        assert_eq!(signed_two_digits(-3.21), "-3.2");
        assert_eq!(signed_two_digits(12345.6), "+12346");
    }
}

//! Pivot tables: one metric, the levels of one factor in rows and of another in columns,
//! as in case 0's "r/s: rq=0/1 x QAF on/near/far" tables, but with each cell's
//! precision and outliers shown instead of a bare mean.

use crate::stats::Summary;

use super::format::number;
use super::table::{Cell, Column, Table};

/// What to pivot: names and levels in display order; `unit` goes into the title.
#[derive(Debug, Clone)]
pub(crate) struct PivotSpec<'a> {
    pub metric: &'a str,
    pub unit: Option<&'a str>,
    pub row_factor: &'a str,
    pub row_levels: &'a [String],
    pub col_factor: &'a str,
    pub col_levels: &'a [String],
}

/// Cell text: the mean, then `+-x%` (half-width of the 95% CI of the mean relative to the
/// mean) when n >= 2, then `*` when the cell has outliers. Plain ASCII (`+-`, not a
/// plus-minus sign) so it survives any mail client.
pub(crate) fn cell_text(s: &Summary) -> String {
    let mut t = number(s.mean);
    if let Some(w) = s.ci_mean_rel_half_width() {
        t.push_str(&format!(" +-{:.1}%", 100.0 * w));
    }
    t.push(if s.outliers.is_empty() { ' ' } else { '*' });
    t
}

/// What one pivot position holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PivotCell<'s> {
    Measured(&'s Summary),
    /// The combination cannot be realised on the machine (shown `n/a`, reason in a footnote).
    NotApplicable(String),
    /// Every run of the combination failed (shown `failed`, reason in a footnote).
    Failed(String),
    /// The combination was not run (shown `-`).
    NotRun,
}

/// The table with every position measured or not run (the tests' shorthand).
#[cfg(test)]
pub(crate) fn pivot<'s>(
    spec: &PivotSpec<'_>,
    cell: impl Fn(&str, &str) -> Option<&'s Summary>,
) -> Table {
    pivot_cells(spec, |r, c| {
        cell(r, c).map_or(PivotCell::NotRun, PivotCell::Measured)
    })
}

/// Builds the table; `cell(row_level, col_level)` says what is at each position: a summary,
/// not run (shown as `-`), or not applicable or failed, marked as such (`n/a[1]`,
/// `failed[2]`) with their reasons numbered in footnotes, never shown as numbers.
pub(crate) fn pivot_cells<'s>(
    spec: &PivotSpec<'_>,
    cell: impl Fn(&str, &str) -> PivotCell<'s>,
) -> Table {
    let mut columns = vec![Column::label(&format!(
        "{} \\ {}",
        spec.row_factor, spec.col_factor
    ))];
    columns.extend(spec.col_levels.iter().map(|l| Column::number(l, None)));
    let mut table = Table::new(columns);
    table.title = Some(match spec.unit {
        Some(u) => format!("{} [{u}]: mean +-95% CI", spec.metric),
        None => format!("{}: mean +-95% CI", spec.metric),
    });
    let mut ns = Vec::new();
    let mut any_outliers = false;
    let mut reasons: Vec<(&'static str, String)> = Vec::new();
    let mut mark = |kind: &'static str, why: String| {
        let i = match reasons.iter().position(|(k, r)| *k == kind && *r == why) {
            Some(i) => i,
            None => {
                reasons.push((kind, why));
                reasons.len() - 1
            }
        };
        Cell::text(format!("{kind}[{}]", i + 1))
    };
    for r in spec.row_levels {
        let mut row = vec![Cell::text(r)];
        for c in spec.col_levels {
            row.push(match cell(r, c) {
                PivotCell::Measured(s) => {
                    ns.push(s.n);
                    any_outliers |= !s.outliers.is_empty();
                    Cell::Stat {
                        summary: Box::new(s.clone()),
                        text: cell_text(s),
                    }
                }
                PivotCell::NotApplicable(why) => mark("n/a", why),
                PivotCell::Failed(why) => mark("failed", why),
                PivotCell::NotRun => Cell::Missing,
            });
        }
        table.push(row);
    }
    let (lo, hi) = (ns.iter().min(), ns.iter().max());
    match (lo, hi) {
        (Some(lo), Some(hi)) if lo == hi => table.notes.push(format!("n = {lo} runs per cell")),
        (Some(lo), Some(hi)) => table.notes.push(format!("n = {lo}..{hi} runs per cell")),
        _ => table.notes.push("no cells measured".into()),
    }
    table
        .notes
        .push("+-: half-width of the 95% CI of the mean, in % of the mean".into());
    if any_outliers {
        table.notes.push(
            "*: cell has outliers (modified z-score > 3.5, cells of 6+ runs); kept in the numbers"
                .into(),
        );
    }
    for (i, (kind, why)) in reasons.iter().enumerate() {
        let what = if *kind == "n/a" {
            "not applicable on this machine"
        } else {
            "every run failed"
        };
        table
            .notes
            .push(format!("[{}] {kind}: {what}: {why}", i + 1));
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::table::MAX_WIDTH;
    use crate::stats::summarize;

    #[test]
    fn affinity_matrix_like_seeds_000() {
        let rows = vec!["rq=0".to_string(), "rq=1".to_string()];
        let cols = vec!["on".to_string(), "near".to_string(), "far".to_string()];
        let data = [
            summarize(&[69112.0, 69500.0, 68800.0, 69300.0, 69000.0]).unwrap(),
            // Six runs: fewer are never marked (OUTLIER_MIN_N).
            summarize(&[70210.0, 70100.0, 70400.0, 70300.0, 70250.0, 55000.0]).unwrap(),
            summarize(&[66050.0, 65000.0, 67000.0, 66500.0, 66100.0]).unwrap(),
            summarize(&[69000.0, 69100.0, 68900.0, 69050.0, 68950.0]).unwrap(),
            summarize(&[71000.0, 70000.0, 72000.0, 71500.0, 70500.0]).unwrap(),
        ];
        let spec = PivotSpec {
            metric: "read_iops",
            unit: Some("IO/s"),
            row_factor: "rq_affinity",
            row_levels: &rows,
            col_factor: "placement",
            col_levels: &cols,
        };
        let t = pivot(&spec, |r, c| {
            let i = rows.iter().position(|x| x == r)? * 3 + cols.iter().position(|x| x == c)?;
            data.get(i)
        });
        let text = t.render_text(MAX_WIDTH);
        assert!(text.contains("67,710 +-")); // the outlier cell keeps its outlier, marked
        assert!(text.contains('*'));
        assert!(text.lines().all(|l| l.len() <= MAX_WIDTH && l.is_ascii()));
        insta::assert_snapshot!(text);
        insta::assert_snapshot!(t.to_csv());
    }
}

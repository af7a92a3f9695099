//! A plain-text table that fits a mailing-list post, plus CSV and JSON of the same table.
//!
//! One `Table` value feeds all three emitters so `show`, `compare` and `report` print the
//! same facts in every format. Columns are aligned (numbers right, labels left) by the width
//! each character takes on a terminal, units sit in the headers, and a table wider than the
//! limit (80 columns) is split into blocks that repeat the first column, the way people cut
//! tables for email by hand.

use std::collections::BTreeMap;

use crate::stats::Summary;

// Cells hold names from files and the database (experiments, tags, devices, jobs): the text
// form escapes what a terminal would act on; CSV and JSON keep the exact text.
use super::format::{
    display_width as width_of, terminal_safe as safe, terminal_safe_lines as safe_lines,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    Right,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Column {
    pub name: String,
    /// Shown in brackets after the name: `read_iops [IO/s]`.
    pub unit: Option<String>,
    pub align: Align,
    /// Left out of the text form (its one value said in a note, to stay within 80
    /// characters); CSV and JSON keep it, so scripts see the same columns every time.
    pub text_hidden: bool,
    /// Holds confidence intervals: in CSV always three columns (low, high, and whether it
    /// bounds a change or a difference), whatever its rows hold, so that scripts find the
    /// same columns in every output.
    pub interval: bool,
}

impl Column {
    pub(crate) fn label(name: &str) -> Self {
        Column {
            name: name.into(),
            unit: None,
            align: Align::Left,
            text_hidden: false,
            interval: false,
        }
    }
    pub(crate) fn number(name: &str, unit: Option<&str>) -> Self {
        Column {
            name: name.into(),
            unit: unit.map(Into::into),
            align: Align::Right,
            text_hidden: false,
            interval: false,
        }
    }
    /// A column of [`Cell::Interval`]s (or none where a row has no interval).
    pub(crate) fn interval(name: &str) -> Self {
        Column {
            interval: true,
            ..Column::number(name, None)
        }
    }
    fn header(&self) -> String {
        match &self.unit {
            Some(u) => format!("{} [{u}]", self.name),
            None => self.name.clone(),
        }
    }
}

/// One table cell. `Number` and `Stat` keep the value so CSV/JSON carry full precision
/// while the text shows the formatted form.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    Text(String),
    Number {
        value: f64,
        text: String,
    },
    /// A summarised cell: text like `69,112 +-1.2%*`; CSV gets mean, CI and n columns,
    /// JSON the whole summary.
    Stat {
        summary: Box<Summary>,
        text: String,
    },
    /// A confidence interval: text like `[-7.0, -2.9]`; CSV gets low and high columns (and
    /// what they bound where some are of a difference), JSON `{"low", "high"}`.
    Interval {
        low: f64,
        high: f64,
        /// Of the difference of the medians, in the metric's unit (else of a change in %).
        difference: bool,
        text: String,
    },
    Missing,
}

impl Cell {
    pub(crate) fn text(s: impl Into<String>) -> Self {
        Cell::Text(s.into())
    }
    pub(crate) fn number(value: f64) -> Self {
        Cell::Number {
            value,
            text: super::format::number(value),
        }
    }
    /// An interval of the difference of medians (in the metric's unit, not a change in %).
    fn is_difference(&self) -> bool {
        matches!(
            self,
            Cell::Interval {
                difference: true,
                ..
            }
        )
    }
    pub(crate) fn shown(&self) -> &str {
        match self {
            Cell::Text(t)
            | Cell::Number { text: t, .. }
            | Cell::Stat { text: t, .. }
            | Cell::Interval { text: t, .. } => t,
            Cell::Missing => "-",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Table {
    pub title: Option<String>,
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<Cell>>,
    /// Footnotes printed under the text table (legend for marks, method names).
    pub notes: Vec<String>,
}

/// The width people expect a mail-friendly table to fit in.
pub(crate) const MAX_WIDTH: usize = 80;
const GAP: &str = "  ";

impl Table {
    pub(crate) fn new(columns: Vec<Column>) -> Self {
        Table {
            columns,
            ..Default::default()
        }
    }

    /// Adds a row; a short row is padded with `Missing`, extra cells are an error in the
    /// caller and are dropped rather than breaking the layout.
    pub(crate) fn push(&mut self, mut row: Vec<Cell>) {
        row.resize(self.columns.len(), Cell::Missing);
        self.rows.push(row);
    }

    /// Renders the table as text no wider than `max_width` where possible: when it is
    /// wider, the columns after the first are split into blocks, each repeating column 1.
    pub(crate) fn render_text(&self, max_width: usize) -> String {
        let widths: Vec<usize> = (0..self.columns.len())
            .map(|c| {
                self.rows
                    .iter()
                    .map(|r| width_of(&safe(r[c].shown())))
                    .chain([width_of(&safe(&self.columns[c].header()))])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        if let Some(t) = &self.title {
            out.push_str(&safe_lines(t));
            out.push('\n');
        }
        let shown: Vec<usize> = (0..self.columns.len())
            .filter(|&c| !self.columns[c].text_hidden)
            .collect();
        let shown_widths: Vec<usize> = shown.iter().map(|&c| widths[c]).collect();
        let blocks = column_blocks(&shown_widths, max_width);
        let blocks = blocks
            .iter()
            .map(|b| b.iter().map(|&i| shown[i]).collect::<Vec<usize>>());
        for (i, block) in blocks.enumerate() {
            if i > 0 {
                out.push('\n');
            }
            let line = |cells: Vec<String>| cells.join(GAP).trim_end().to_string() + "\n";
            out.push_str(&line(
                block
                    .iter()
                    .map(|&c| {
                        let h = self.columns[c].header();
                        pad(&safe(&h), widths[c], self.columns[c].align)
                    })
                    .collect(),
            ));
            out.push_str(&line(
                block.iter().map(|&c| "-".repeat(widths[c])).collect(),
            ));
            for row in &self.rows {
                out.push_str(&line(
                    block
                        .iter()
                        .map(|&c| pad(&safe(row[c].shown()), widths[c], self.columns[c].align))
                        .collect(),
                ));
            }
        }
        for n in &self.notes {
            out.push_str(&wrap(&safe_lines(n), max_width));
        }
        out
    }

    /// RFC 4180 CSV with a header row. Numbers at full precision; a `Stat` column becomes
    /// four: mean, CI low, CI high and n; an `Interval` column two, low and high, and a third
    /// saying `change` or `difference` where some of its intervals are of a difference.
    pub(crate) fn to_csv(&self) -> String {
        let mut header = Vec::new();
        // The columns each table column becomes: suffixes of its header, none for one column.
        let split: Vec<&[&str]> = (0..self.columns.len())
            .map(|c| {
                let mut cells = self.rows.iter().map(|r| &r[c]);
                if self.columns[c].interval {
                    &["low", "high", "of"][..]
                } else if cells.clone().any(|x| matches!(x, Cell::Stat { .. })) {
                    &["mean", "ci_low", "ci_high", "n"][..]
                } else if cells.clone().any(Cell::is_difference) {
                    &["low", "high", "of"][..]
                } else if cells.any(|x| matches!(x, Cell::Interval { .. })) {
                    &["low", "high"][..]
                } else {
                    &[][..]
                }
            })
            .collect();
        for (col, suffixes) in self.columns.iter().zip(&split) {
            let h = col.header();
            if suffixes.is_empty() {
                header.push(h);
            } else {
                header.extend(suffixes.iter().map(|x| format!("{h} {x}")));
            }
        }
        let mut out = csv_line(&header);
        for row in &self.rows {
            let mut fields = Vec::new();
            for (c, cell) in row.iter().enumerate() {
                match cell {
                    Cell::Stat { summary, .. } => {
                        let ci = summary.ci_mean;
                        fields.push(summary.mean.to_string());
                        fields.push(ci.map(|i| i.low.to_string()).unwrap_or_default());
                        fields.push(ci.map(|i| i.high.to_string()).unwrap_or_default());
                        fields.push(summary.n.to_string());
                    }
                    Cell::Interval {
                        low,
                        high,
                        difference,
                        ..
                    } => {
                        fields.push(low.to_string());
                        fields.push(high.to_string());
                        if split[c].len() == 3 {
                            let of = if *difference { "difference" } else { "change" };
                            fields.push(of.to_string());
                        }
                    }
                    _ if !split[c].is_empty() => {
                        fields.extend(std::iter::repeat_n(String::new(), split[c].len()))
                    }
                    Cell::Number { value, .. } => fields.push(value.to_string()),
                    Cell::Text(t) => fields.push(t.clone()),
                    Cell::Missing => fields.push(String::new()),
                }
            }
            out.push_str(&csv_line(&fields));
        }
        out
    }
}

/// A table in a command's JSON: `{"title", "columns": [{"name", "unit"}], "rows": [{column
/// name: value}], "notes"}`; numbers are JSON numbers (non-finite ones null), `Stat` cells the
/// whole summary. Scripts have always seen its objects with their keys sorted (it was built
/// with `json!`): `sorted_keys` keeps it byte for byte.
impl serde::Serialize for Table {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let doc = TableDoc {
            title: self.title.as_deref(),
            columns: self
                .columns
                .iter()
                .map(|c| ColumnDoc {
                    name: &c.name,
                    unit: c.unit.as_deref(),
                })
                .collect(),
            // A row is keyed by its columns' names, which only the table knows: a map.
            rows: self
                .rows
                .iter()
                .map(|row| {
                    self.columns
                        .iter()
                        .zip(row)
                        .map(|(col, cell)| (col.name.as_str(), CellDoc::of(cell)))
                        .collect()
                })
                .collect(),
            notes: &self.notes,
        };
        crate::output::sorted_keys(&doc, s)
    }
}

#[derive(serde::Serialize)]
struct TableDoc<'a> {
    title: Option<&'a str>,
    columns: Vec<ColumnDoc<'a>>,
    rows: Vec<BTreeMap<&'a str, CellDoc<'a>>>,
    notes: &'a [String],
}

#[derive(serde::Serialize)]
struct ColumnDoc<'a> {
    name: &'a str,
    unit: Option<&'a str>,
}

/// One cell's JSON value.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum CellDoc<'a> {
    Text(&'a str),
    /// serde_json writes a non-finite number as null.
    Number(f64),
    Stat(&'a Summary),
    Interval {
        low: f64,
        high: f64,
    },
    Missing,
}

impl<'a> CellDoc<'a> {
    fn of(cell: &'a Cell) -> Self {
        match cell {
            Cell::Text(t) => CellDoc::Text(t),
            Cell::Number { value, .. } => CellDoc::Number(*value),
            Cell::Stat { summary, .. } => CellDoc::Stat(summary),
            Cell::Interval { low, high, .. } => CellDoc::Interval {
                low: *low,
                high: *high,
            },
            Cell::Missing => CellDoc::Missing,
        }
    }
}

/// Word-wraps a footnote to `width`, indenting continuation lines by two spaces.
pub(crate) fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.trim().is_empty() && width_of(&line) + 1 + width_of(word) > width {
            out.push_str(line.trim_end());
            out.push('\n');
            line = "  ".to_string();
        } else if !line.trim().is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

fn pad(s: &str, width: usize, align: Align) -> String {
    let fill = " ".repeat(width.saturating_sub(width_of(s)));
    match align {
        Align::Left => format!("{s}{fill}"),
        Align::Right => format!("{fill}{s}"),
    }
}

/// Groups column indices into blocks that fit `max_width`; column 0 is in every block.
/// A single column wider than the limit still gets its own block (it cannot be cut).
fn column_blocks(widths: &[usize], max_width: usize) -> Vec<Vec<usize>> {
    if widths.is_empty() {
        return vec![];
    }
    let mut blocks = vec![vec![0]];
    let mut used = widths[0];
    for (c, &w) in widths.iter().enumerate().skip(1) {
        let last = blocks.last_mut().expect("non-empty");
        if last.len() > 1 && used + GAP.len() + w > max_width {
            blocks.push(vec![0, c]);
            used = widths[0] + GAP.len() + w;
        } else {
            last.push(c);
            used += GAP.len() + w;
        }
    }
    blocks
}

fn csv_line(fields: &[String]) -> String {
    let quoted: Vec<String> = fields
        .iter()
        .map(|f| {
            let f = &spreadsheet_safe(f);
            if f.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", f.replace('"', "\"\""))
            } else {
                f.to_string()
            }
        })
        .collect();
    quoted.join(",") + "\r\n"
}

/// A CSV field no spreadsheet takes for a formula, and with no control characters for the
/// terminal it may be printed to: text starting with `=`, `+`, `-` or `@` (a factor level or
/// name from someone's database, `=HYPERLINK(...)`) gets a leading `'`, as spreadsheets
/// themselves mark text; numbers stay as they are.
fn spreadsheet_safe(field: &str) -> std::borrow::Cow<'_, str> {
    let field = crate::report::format::terminal_safe(field);
    let formula = field.starts_with(['=', '+', '-', '@']) && field.parse::<f64>().is_err();
    if formula {
        std::borrow::Cow::Owned(format!("'{field}"))
    } else {
        field
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_never_formulas_or_terminal_controls() {
        assert_eq!(
            csv_line(&[
                "=HYPERLINK(\"http://x/\",\"click\")".into(),
                "@SUM(A1)".into(),
                "+1+1".into(),
                "-12.5".into(),
                "-inf".into(),
                "a\u{1b}[2Jb".into(),
                "plain".into(),
            ]),
            "\"'=HYPERLINK(\"\"http://x/\"\",\"\"click\"\")\",'@SUM(A1),'+1+1,-12.5,-inf,\
             a\\u{1b}[2Jb,plain\r\n"
        );
    }

    fn sample() -> Table {
        let mut t = Table::new(vec![
            Column::label("device"),
            Column::number("read", Some("IO/s")),
            Column::number("sys", Some("%")),
        ]);
        t.title = Some("two devices".into());
        t.push(vec![
            Cell::text("loop0"),
            Cell::number(69112.0),
            Cell::number(12.5),
        ]);
        t.push(vec![Cell::text("vda, \"virtio\""), Cell::number(1234.5)]);
        t.notes.push("- = not measured".into());
        t
    }

    #[test]
    fn text_is_aligned_ascii_and_trimmed() {
        let text = sample().render_text(MAX_WIDTH);
        insta::assert_snapshot!(text);
        assert!(text.is_ascii());
        assert!(text.lines().all(|l| !l.ends_with(' ')));
    }

    /// Names from files may be in any script: a column lines up by the width each character
    /// takes on a terminal (two for CJK, one for an accented letter), not by its bytes.
    #[test]
    fn columns_line_up_by_display_width() {
        let mut t = Table::new(vec![Column::label("variant"), Column::number("iops", None)]);
        for name in ["ext4", "日本語", "ünïcode"] {
            t.push(vec![Cell::text(name), Cell::number(1.0)]);
        }
        let text = t.render_text(MAX_WIDTH);
        let ends: Vec<usize> = text.lines().map(width_of).collect();
        assert!(ends.iter().all(|&w| w == ends[0]), "{text}");
        assert!(text.contains("日本語   "), "{text}");
    }

    #[test]
    fn wide_tables_split_into_blocks_repeating_the_first_column() {
        let mut cols = vec![Column::label("bs")];
        for i in 0..8 {
            cols.push(Column::number(&format!("variant-{i}"), Some("MB/s")));
        }
        let mut t = Table::new(cols);
        for bs in ["4k", "64k"] {
            let mut row = vec![Cell::text(bs)];
            row.extend((0..8).map(|i| Cell::number(100.0 * i as f64 + 0.5)));
            t.push(row);
        }
        let text = t.render_text(MAX_WIDTH);
        assert!(text.lines().all(|l| l.len() <= MAX_WIDTH), "{text}");
        assert_eq!(text.matches("bs ").count(), 2, "{text}");
        insta::assert_snapshot!(text);
    }

    #[test]
    fn an_interval_column_has_the_same_csv_columns_whatever_its_rows_hold() {
        let mut t = Table::new(vec![Column::label("cell"), Column::interval("95% CI")]);
        t.push(vec![Cell::text("a"), Cell::Missing]);
        assert_eq!(
            t.to_csv(),
            "cell,95% CI low,95% CI high,95% CI of\r\na,,,\r\n"
        );
        t.push(vec![
            Cell::text("b"),
            Cell::Interval {
                low: -1.5,
                high: 2.0,
                difference: false,
                text: "[-1.5, +2.0]".into(),
            },
        ]);
        assert!(
            t.to_csv().ends_with("b,-1.5,2,change\r\n"),
            "{}",
            t.to_csv()
        );
    }

    #[test]
    fn csv_quotes_and_keeps_precision() {
        insta::assert_snapshot!(sample().to_csv());
    }

    #[test]
    fn an_interval_is_two_numbers_in_csv_and_json_and_says_what_it_bounds() {
        let interval = |low, high, difference| Cell::Interval {
            low,
            high,
            difference,
            text: format!("[{low}, {high}]"),
        };
        let mut t = Table::new(vec![Column::label("cell"), Column::number("95% CI", None)]);
        t.push(vec![Cell::text("a"), interval(-7.25, -2.5, false)]);
        t.push(vec![Cell::text("b")]);
        assert_eq!(
            t.to_csv(),
            "cell,95% CI low,95% CI high\r\na,-7.25,-2.5\r\nb,,\r\n"
        );
        t.push(vec![Cell::text("c"), interval(0.5, 3.0, true)]);
        assert_eq!(
            t.to_csv(),
            "cell,95% CI low,95% CI high,95% CI of\r\na,-7.25,-2.5,change\r\nb,,,\r\n\
             c,0.5,3,difference\r\n"
        );
        assert!(t.render_text(MAX_WIDTH).contains("[-7.25, -2.5]"));
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(
            json["rows"][0]["95% CI"],
            serde_json::json!({"low": -7.25, "high": -2.5})
        );
    }

    #[test]
    fn json_has_typed_values() {
        insta::assert_json_snapshot!(sample());
    }
}

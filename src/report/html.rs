//! One self-contained HTML page: inline CSS, inline SVG, no scripts, no fonts or images from
//! anywhere — so a report mailed as an attachment or opened on an air-gapped lab machine
//! looks the same as on the machine that made it. The same `Table` values that feed the text
//! and CSV outputs are rendered here, so the page and the terminal never disagree.

use super::table::{Align, Cell, Column, Table};

/// Escapes text for HTML element content and attribute values. Controls and bidi overrides
/// are shown as `\u{..}`, as in the terminal: a browser reorders text by them too.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if super::format::needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// A CSS class for cells whose meaning is a word: verdicts, n/a, failed. Never for a
/// label (a cell's name, a level), whose words are the user's: a cell named "regressed..."
/// is not a verdict.
fn cell_class(column: &Column, text: &str) -> Option<&'static str> {
    if column.align == Align::Left && column.name != "verdict" {
        return None;
    }
    let t = text.trim();
    if t.starts_with("improved") {
        Some("improved")
    } else if t.starts_with("regressed") {
        Some("regressed")
    } else if t.starts_with("n/a") {
        Some("na")
    } else if t.starts_with("failed") {
        Some("failed")
    } else {
        None
    }
}

/// A `<table>` with the title as caption, units in the headers and the notes underneath.
pub(crate) fn table(t: &Table, class: &str) -> String {
    let mut out = format!("<table class=\"{}\">\n", escape(class));
    if let Some(title) = &t.title {
        out.push_str(&format!("<caption>{}</caption>\n", escape(title)));
    }
    out.push_str("<thead><tr>");
    for c in &t.columns {
        let head = match &c.unit {
            Some(u) => format!("{} [{u}]", c.name),
            None => c.name.clone(),
        };
        let align = if c.align == Align::Right {
            " class=\"num\""
        } else {
            ""
        };
        out.push_str(&format!("<th{align}>{}</th>", escape(&head)));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in &t.rows {
        out.push_str("<tr>");
        for (c, cell) in t.columns.iter().zip(row) {
            let text = cell.shown();
            let mut classes = Vec::new();
            if c.align == Align::Right {
                classes.push("num");
            }
            if let Some(k) = cell_class(c, text) {
                classes.push(k);
            }
            if let Cell::Stat { summary, .. } = cell {
                if !summary.outliers.is_empty() {
                    classes.push("outliers");
                }
            }
            let class = if classes.is_empty() {
                String::new()
            } else {
                format!(" class=\"{}\"", classes.join(" "))
            };
            out.push_str(&format!("<td{class}>{}</td>", escape(text.trim_end())));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
    if !t.notes.is_empty() {
        out.push_str("<ul class=\"notes\">\n");
        for n in &t.notes {
            out.push_str(&format!("<li>{}</li>\n", escape(n)));
        }
        out.push_str("</ul>\n");
    }
    out
}

/// A chart: the SVG inline in a `<figure>` (any XML declaration dropped: it is not allowed
/// inside HTML).
pub(crate) fn figure(svg: &str, caption: &str) -> String {
    let body = match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => svg,
    };
    format!(
        "<figure>\n{body}\n<figcaption>{}</figcaption>\n</figure>\n",
        escape(caption)
    )
}

const STYLE: &str = r#"
body { font-family: sans-serif; margin: 2em auto; max-width: 1100px; color: #222;
       line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.6em; border-bottom: 2px solid #0072B2; padding-bottom: .2em; }
h2 { font-size: 1.3em; margin-top: 2em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.1em; }
table { border-collapse: collapse; margin: 1em 0 .3em; font-size: .9em; }
caption { text-align: left; font-weight: bold; padding-bottom: .3em; }
th, td { border: 1px solid #ccc; padding: .2em .6em; }
th { background: #eef3f8; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.improved { background: #d8f0e0; font-weight: bold; }
td.regressed { background: #f8d8d8; font-weight: bold; }
td.na, td.failed { color: #777; font-style: italic; }
td.outliers { text-decoration: underline dotted; }
tr.warn td { background: #fff4d6; }
tr.bad td { background: #f8d8d8; }
ul.notes { font-size: .8em; color: #555; margin-top: 0; }
figure { margin: 1.5em 0; }
figure svg { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .85em; color: #555; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; }
p.missing { color: #777; font-style: italic; }
footer { margin-top: 3em; font-size: .8em; color: #777; }
"#;

/// The whole page around `body` (already HTML).
pub(crate) fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        escape(title)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_escape_text_and_mark_verdicts() {
        let mut t = Table::new(vec![Column::label("cell"), Column::label("verdict")]);
        t.title = Some("a <b> & c".into());
        t.push(vec![Cell::text("x<y"), Cell::text("regressed")]);
        t.push(vec![Cell::text("regressed-on-purpose"), Cell::text("~")]);
        t.notes.push("n = 5".into());
        let html = table(&t, "cmp");
        assert!(
            html.contains("<caption>a &lt;b&gt; &amp; c</caption>"),
            "{html}"
        );
        assert!(html.contains("<td>x&lt;y</td>"), "{html}");
        assert!(
            html.contains("<td class=\"regressed\">regressed</td>"),
            "{html}"
        );
        assert!(html.contains("<td>regressed-on-purpose</td>"), "{html}");
        assert!(html.contains("<li>n = 5</li>"), "{html}");
        // A name that would reorder what the page shows is shown as the terminal shows it.
        assert_eq!(escape("exp\u{202e}1\u{7}"), "exp\\u{202e}1\\u{7}");
    }

    #[test]
    fn pages_are_self_contained() {
        let p = page("t", &figure("<?xml version=\"1.0\"?><svg></svg>", "c"));
        assert!(!p.contains("<?xml"));
        assert!(!p.contains("<script") && !p.contains("http://") && !p.contains("https://"));
    }
}

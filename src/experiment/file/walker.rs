//! What every table's parser shares: the walker that carries the file's text and collects
//! diagnostics (each with line and column), the typed readers of TOML values that report a
//! wrong type or range, and the error types. The tables' parsers are `impl Walker` blocks in
//! their own files.

use std::ops::Range;
use std::path::Path;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use crate::workload::job_file::JobSource;
use crate::workload::EngineSpec;

/// One problem in an experiment file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Diagnostic {
    pub(crate) line: usize,
    pub(crate) column: usize,
    pub(crate) message: String,
    /// What would have been accepted.
    pub(crate) allowed: Option<String>,
}

/// Everything wrong with an experiment file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ExperimentError {
    pub(crate) source_name: String,
    pub(crate) diagnostics: Vec<Diagnostic>,
}

impl std::fmt::Display for ExperimentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            // Line 0: about the whole file (unreadable, or a conflict of two tables), which
            // no position would help find.
            if d.line == 0 {
                write!(f, "{}: {}", self.source_name, d.message)?;
            } else {
                write!(
                    f,
                    "{}:{}:{}: {}",
                    self.source_name, d.line, d.column, d.message
                )?;
            }
            if let Some(allowed) = &d.allowed {
                write!(f, "\n    allowed: {allowed}")?;
            }
        }
        Ok(())
    }
}

pub(super) type Value<'i> = Spanned<DeValue<'i>>;

/// Factor names whose dotted keys TOML turns into nested tables.
pub(super) const SYSTEM_PREFIXES: &[&str] = &["sysctl", "module", "cpu"];

/// A table's entries, with the nested tables TOML makes of dotted keys under the system
/// prefixes (`sysctl.vm.dirty_ratio = ..`) walked back into one dotted name each; every entry
/// has the span of its whole key. `text` is the file's: a dotted key's span starts where its
/// line does, since TOML gives the prefix (`sysctl`) the span of its first use only.
pub(super) fn flat_entries<'a, 'i>(
    text: &str,
    table: &'a DeTable<'i>,
) -> Vec<(String, Range<usize>, &'a Value<'i>)> {
    fn walk<'a, 'i>(
        text: &str,
        prefix: &str,
        table: &'a DeTable<'i>,
        out: &mut Vec<(String, Range<usize>, &'a Value<'i>)>,
    ) {
        for (key, value) in table.iter() {
            let name = format!("{prefix}.{}", key.get_ref());
            match value.get_ref() {
                DeValue::Table(inner) => walk(text, &name, inner, out),
                _ => {
                    let at = key.span().start.min(text.len());
                    let line = text[..at].rfind('\n').map_or(0, |i| i + 1);
                    out.push((name, line..key.span().end, value))
                }
            }
        }
    }
    let mut out = Vec::new();
    for (key, value) in table.iter() {
        let name = key.get_ref().to_string();
        match value.get_ref() {
            DeValue::Table(inner) if SYSTEM_PREFIXES.contains(&name.as_str()) => {
                walk(text, &name, inner, &mut out)
            }
            _ => out.push((name, key.span(), value)),
        }
    }
    out
}

pub(super) struct Walker<'t> {
    pub(super) text: &'t str,
    pub(super) diags: Vec<Diagnostic>,
    /// What the file says that is allowed but likely not meant (the plan prints them).
    pub(super) warnings: Vec<String>,
    /// Where a `[workload] job` file and its environment come from.
    pub(super) files: &'t dyn JobSource,
    /// The experiment file's directory, which a relative job path starts from.
    pub(super) dir: &'t Path,
    /// The file's engine, read before the factors (which may vary its options).
    pub(super) engine: EngineSpec,
    /// The line of the engine's table, for problems found after it was read.
    pub(super) engine_line: usize,
    /// A program engine the file names whose table has errors (`engine` is then fio's): its
    /// options cannot be told from unknown names until the table is right, so factors and
    /// a `nic` target are not judged against fio in its place.
    pub(super) engine_broken: bool,
}

/// A TOML scalar in fio's text form: booleans become 1/0, integers decimal.
pub(super) fn scalar_text(v: &DeValue) -> Option<String> {
    match v {
        DeValue::String(s) => Some(s.to_string()),
        DeValue::Integer(i) => integer(i).map(|n| n.to_string()),
        DeValue::Float(f) => Some(f.as_str().to_string()),
        DeValue::Boolean(b) => Some(if *b { "1" } else { "0" }.to_string()),
        _ => None,
    }
}

pub(super) fn integer(i: &toml::de::DeInteger) -> Option<i64> {
    i64::from_str_radix(&i.as_str().replace('_', ""), i.radix()).ok()
}

pub(super) fn type_name(v: &DeValue) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// Parses `2G`, `512M`, `64k`, `1GiB`, `1073741824` (binary units, as fio does).
pub(crate) fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let number: u64 = t[..digits_end].parse().ok()?;
    let unit = t[digits_end..].trim().to_ascii_lowercase();
    let shift = match unit.trim_end_matches("ib").trim_end_matches('b') {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return None,
    };
    number.checked_mul(1u64 << shift)
}

impl Walker<'_> {
    /// The span of line `line`'s start (1-based), for problems about a whole table.
    pub(super) fn line_start(&self, line: usize) -> Range<usize> {
        let start = self
            .text
            .split_inclusive('\n')
            .take(line.saturating_sub(1))
            .map(str::len)
            .sum();
        start..start
    }

    pub(super) fn position(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line, column)
    }

    pub(super) fn error(&mut self, span: Range<usize>, message: String, allowed: Option<String>) {
        let (line, column) = self.position(span.start);
        self.diags.push(Diagnostic {
            line,
            column,
            message,
            allowed,
        });
    }

    pub(super) fn unknown_key(
        &mut self,
        span: Range<usize>,
        key: &str,
        place: &str,
        allowed: &[&str],
    ) {
        let hint = crate::suggest::closest(key, allowed.iter().copied())
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_default();
        self.error(
            span,
            format!("unknown key `{key}` in {place}{hint}"),
            Some(allowed.join(", ")),
        );
    }

    pub(super) fn expected(&mut self, v: &Value, what: &str, key: &str) {
        self.error(
            v.span(),
            format!("`{key}` must be {what}, not {}", type_name(v.get_ref())),
            None,
        );
    }

    pub(super) fn string(&mut self, v: &Value, key: &str) -> Option<String> {
        match v.get_ref() {
            DeValue::String(s) => Some(s.to_string()),
            _ => {
                self.expected(v, "a string", key);
                None
            }
        }
    }

    pub(super) fn nonempty_string(&mut self, v: &Value, key: &str) -> Option<String> {
        let s = self.string(v, key)?;
        if s.trim().is_empty() {
            self.error(v.span(), format!("`{key}` must not be empty"), None);
            return None;
        }
        Some(s)
    }

    pub(super) fn boolean(&mut self, v: &Value) -> Option<bool> {
        match v.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            other => {
                let (line, column) = self.position(v.span().start);
                // Report once even though policy flags are read twice.
                let message = format!("expected true or false, not {}", type_name(other));
                if !self
                    .diags
                    .iter()
                    .any(|d| d.line == line && d.column == column)
                {
                    self.diags.push(Diagnostic {
                        line,
                        column,
                        message,
                        allowed: Some("true, false".to_string()),
                    });
                }
                None
            }
        }
    }

    pub(super) fn integer_in(&mut self, v: &Value, key: &str, lo: i64, hi: i64) -> Option<i64> {
        let allowed = if hi == i64::MAX {
            format!("an integer >= {lo}")
        } else {
            format!("an integer from {lo} to {hi}")
        };
        match v.get_ref() {
            DeValue::Integer(i) => match integer(i) {
                Some(n) if (lo..=hi).contains(&n) => Some(n),
                _ => {
                    self.error(v.span(), format!("`{key}` is out of range"), Some(allowed));
                    None
                }
            },
            other => {
                self.error(
                    v.span(),
                    format!("`{key}` must be an integer, not {}", type_name(other)),
                    Some(allowed),
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("512MiB"), Some(512 << 20));
        assert_eq!(parse_size("64k"), Some(64 << 10));
        assert_eq!(parse_size("100"), Some(100));
        assert_eq!(parse_size("1.5G"), None);
        assert_eq!(parse_size("G"), None);
        assert_eq!(parse_size("99999999999T"), None);
    }

    #[test]
    fn a_position_is_printed_only_where_there_is_one() {
        let diag = |line, column, message: &str| Diagnostic {
            line,
            column,
            message: message.into(),
            allowed: None,
        };
        let e = ExperimentError {
            source_name: "x.toml".into(),
            diagnostics: vec![
                diag(0, 0, "cannot read the experiment file"),
                diag(3, 7, "`rw` is not a fio option"),
            ],
        };
        assert_eq!(
            e.to_string(),
            "x.toml: cannot read the experiment file\nx.toml:3:7: `rw` is not a fio option"
        );
    }
}

//! The `command` engine: any program (dd, a tiobench-like tool, an in-house benchmark), its
//! metrics read from its output by regular expressions (each named capture group is a metric)
//! or from its JSON output by paths. A factor varies a `{NAME}` placeholder in the program or
//! its arguments; `{dir}` is the run's private directory. It runs arbitrary programs, so the
//! experiment file must say `allow_exec = true` (checked where the file is parsed).

use std::time::Duration;

use regex::Regex;

use super::engine::{json_path, Engine, Figures, Invocation};

/// `[command]` as validated.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandEngine {
    pub program: String,
    pub args: Vec<String>,
    /// Patterns whose named groups are metrics (checked to compile, with valid group names).
    pub regex: Vec<String>,
    /// (metric, JSON path) read from the output parsed as JSON.
    pub json: Vec<(String, String)>,
    /// Read the metrics from stderr instead of stdout (dd prints its figures there).
    pub from_stderr: bool,
    pub time_limit: Duration,
    /// Base values of the placeholders (`[command] vars`).
    pub vars: Vec<(String, String)>,
}

/// The `{NAME}` placeholders of a text, `{dir}` left out.
pub(crate) fn placeholders(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find('{') {
        rest = &rest[i + 1..];
        if let Some(j) = rest.find('}') {
            let name = &rest[..j];
            if !name.is_empty()
                && name != "dir"
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
            {
                out.push(name.to_string());
            }
        }
    }
    out
}

/// `text` with each `{NAME}` replaced by NAME's value in `options`, the last one given (a
/// cell's factor level comes after the `vars` base value it replaces). One pass: a value is
/// never searched for placeholders itself, and a name without a value (`{dir}`) stays.
fn fill(text: &str, options: &[(String, String)]) -> String {
    let value = |name: &str| {
        options
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        match rest[1..]
            .find('}')
            .and_then(|j| Some((j, value(&rest[1..=j])?)))
        {
            Some((j, v)) => {
                out.push_str(v);
                rest = &rest[j + 2..];
            }
            None => {
                out.push('{');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

impl CommandEngine {
    /// Every placeholder in the program and its arguments, in order, once each.
    pub(crate) fn all_placeholders(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for t in std::iter::once(&self.program).chain(&self.args) {
            for p in placeholders(t) {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out
    }
}

/// Why a pattern cannot serve: it does not compile, or names no group / a bad metric.
pub(crate) fn check_regex(pattern: &str) -> Result<(), String> {
    let re = Regex::new(pattern).map_err(|e| format!("not a regular expression: {e}"))?;
    let names: Vec<&str> = re.capture_names().flatten().collect();
    if names.is_empty() {
        return Err("has no named group; name each figure: (?P<mb_per_s>[0-9.]+)".into());
    }
    for n in names {
        if !super::engine::is_metric_name(n) {
            return Err(format!(
                "group `{n}` is not a metric name (lower case letters, digits and _)"
            ));
        }
    }
    Ok(())
}

fn number(v: &serde_json::Value) -> Option<f64> {
    match v {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|x: &f64| x.is_finite())
}

impl Engine for CommandEngine {
    fn name(&self) -> &'static str {
        "command"
    }

    fn base_options(&self) -> &[(String, String)] {
        &self.vars
    }

    fn is_option(&self, name: &str) -> bool {
        self.all_placeholders().iter().any(|p| p == name)
    }

    fn check_option(&self, _name: &str, _value: &str) -> Result<(), String> {
        Ok(())
    }

    fn invocation(&self, options: &[(String, String)]) -> Option<Invocation> {
        Some(Invocation {
            cell_key: String::new(),
            argv: std::iter::once(&self.program)
                .chain(&self.args)
                .map(|a| fill(a, options))
                .collect(),
            netns: None,
            cpus: None,
            server: None,
            time_limit: self.time_limit,
        })
    }

    fn nominal_seconds(&self, _: &[(String, String)]) -> Option<f64> {
        None
    }

    fn metrics(&self, stdout: &str, stderr: &str) -> Result<Figures, String> {
        let (text, stream) = if self.from_stderr {
            (stderr, "stderr")
        } else {
            (stdout, "stdout")
        };
        let mut metrics = Vec::new();
        for pattern in &self.regex {
            let re = Regex::new(pattern).map_err(|e| e.to_string())?;
            let caps = re
                .captures(text)
                .ok_or_else(|| format!("pattern `{pattern}` matched nothing in its {stream}"))?;
            for name in re.capture_names().flatten() {
                let m = caps.name(name).ok_or_else(|| {
                    format!("group `{name}` of `{pattern}` took no part in the match")
                })?;
                let v: f64 = m
                    .as_str()
                    .trim()
                    .parse()
                    .ok()
                    .filter(|v: &f64| v.is_finite())
                    .ok_or_else(|| {
                        format!("group `{name}` matched `{}`, not a number", m.as_str())
                    })?;
                metrics.push((name.to_string(), v));
            }
        }
        if !self.json.is_empty() {
            let doc: serde_json::Value = serde_json::from_str(text.trim())
                .map_err(|e| format!("its {stream} is not JSON: {e}"))?;
            for (name, path) in &self.json {
                let v = json_path(&doc, path)
                    .ok_or_else(|| format!("its JSON has nothing at `{path}` (metric {name})"))?;
                let n = number(v)
                    .ok_or_else(|| format!("`{path}` is {v}, not a number (metric {name})"))?;
                metrics.push((name.clone(), n));
            }
        }
        Ok(Figures {
            metrics,
            series: Vec::new(),
        })
    }

    fn primary_metric(&self) -> Option<String> {
        self.regex
            .iter()
            .filter_map(|p| Regex::new(p).ok())
            .find_map(|re| re.capture_names().flatten().next().map(str::to_string))
            .or_else(|| self.json.first().map(|(n, _)| n.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(regex: &[&str], json: &[(&str, &str)]) -> CommandEngine {
        CommandEngine {
            program: "dd".into(),
            args: vec!["bs={bs}".into(), "of={dir}/x".into()],
            regex: regex.iter().map(|s| s.to_string()).collect(),
            json: json
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            from_stderr: false,
            time_limit: Duration::from_secs(5),
            vars: vec![("bs".into(), "1M".into())],
        }
    }

    #[test]
    fn named_groups_are_metrics() {
        let e = engine(
            &[r"copied, (?P<secs>[0-9.]+) s, (?P<copy_mb_per_s>[0-9.]+) MB/s"],
            &[],
        );
        let out = "104857600 bytes (105 MB, 100 MiB) copied, 0.05 s, 2.1 GB/s\n\
                   104857600 bytes copied, 0.25 s, 419.4 MB/s\n";
        let f = e.metrics(out, "").unwrap();
        assert_eq!(
            f.metrics,
            vec![("secs".into(), 0.25), ("copy_mb_per_s".into(), 419.4)]
        );
        let err = e.metrics("nothing", "").unwrap_err();
        assert!(err.contains("matched nothing in its stdout"), "{err}");
        assert_eq!(e.primary_metric().as_deref(), Some("secs"));
    }

    #[test]
    fn json_paths_are_metrics() {
        let e = engine(&[], &[("ops_per_s", "result.ops[1]")]);
        let f = e.metrics(r#"{"result": {"ops": [1, "2.5"]}}"#, "").unwrap();
        assert_eq!(f.metrics, vec![("ops_per_s".into(), 2.5)]);
        assert!(e
            .metrics(r#"{"result": {}}"#, "")
            .unwrap_err()
            .contains("result.ops[1]"));
        assert!(e.metrics("text", "").unwrap_err().contains("not JSON"));
    }

    #[test]
    fn patterns_are_checked() {
        assert!(check_regex("(?P<a_per_s>\\d+)").is_ok());
        assert!(check_regex("(\\d+)")
            .unwrap_err()
            .contains("no named group"));
        assert!(check_regex("(?P<Bad>\\d+)")
            .unwrap_err()
            .contains("not a metric"));
        assert!(check_regex("(").unwrap_err().contains("not a regular"));
    }

    #[test]
    fn placeholders_take_the_cells_values() {
        let e = engine(&[], &[]);
        assert!(e.is_option("bs") && !e.is_option("dir"));
        // A cell's level comes after the base value it replaces; a value is not searched.
        let inv = e
            .invocation(&[("bs".into(), "1M".into()), ("bs".into(), "{bs}4k".into())])
            .unwrap();
        assert_eq!(inv.argv, ["dd", "bs={bs}4k", "of={dir}/x"]);
        let inv = e.invocation(&[("bs".into(), "4k".into())]).unwrap();
        assert_eq!(inv.argv, ["dd", "bs=4k", "of={dir}/x"]);
        assert_eq!(inv.client_argv("/r"), ["dd", "bs=4k", "of=/r/x"]);
    }
}

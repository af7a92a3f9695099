//! `trace = true|false` or a `[trace]` table: whether measured runs are traced, which
//! traces are kept on disk, and how much the kernel may buffer while recording.

use toml::de::DeValue;

use super::{integer, parse_size, Value, Walker};

/// Which measured runs keep their trace files (every traced run is analysed and its `trace_*`
/// metrics stored either way): traces take 15-175 MB per run, compressed a few times less.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum KeepRuns {
    #[default]
    All,
    /// The first traced run of each cell.
    First,
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct TraceSettings {
    pub runs: KeepRuns,
    /// Most bytes the kept (compressed) traces of one experiment may take: a trace that would
    /// pass it is removed, and so is every later one.
    pub max_bytes: Option<u64>,
    /// The kernel's trace buffer per CPU while recording, KiB (`[trace] buffer_kb`): events
    /// that arrive faster than they are read fill it, and the rest are lost. `None`: sized
    /// from the recording machine's memory (`run::trace::auto_buffer_kb`).
    pub buffer_kb: Option<u64>,
}

/// The least buffer the automatic size gives, KiB per CPU (`run::trace::auto_buffer_kb`).
pub(crate) const DEFAULT_BUFFER_KB: u64 = 8192;
/// The buffer sizes allowed (`[trace] buffer_kb`, `trace record --buffer-kb`), KiB per CPU:
/// at most 1 GiB.
pub(crate) const BUFFER_KB_MIN: u64 = 64;
pub(crate) const BUFFER_KB_MAX: u64 = 1 << 20;

pub(super) const TRACE_KEYS: &[&str] = &["keep", "keep_max", "buffer_kb"];

impl Walker<'_> {
    /// `trace = true|false`, or a `[trace]` table (tracing on) with what to keep and the
    /// buffer to record with.
    pub(super) fn trace(&mut self, v: &Value) -> (bool, TraceSettings) {
        let mut settings = TraceSettings::default();
        let DeValue::Table(table) = v.get_ref() else {
            return (self.boolean(v).unwrap_or(false), settings);
        };
        for (key, value) in table.iter() {
            match key.get_ref().as_ref() {
                "keep" => {
                    let runs = match value.get_ref() {
                        DeValue::String(s) => match s.as_ref() {
                            "all" => Some(KeepRuns::All),
                            "first" => Some(KeepRuns::First),
                            "none" => Some(KeepRuns::None),
                            _ => None,
                        },
                        _ => None,
                    };
                    match runs {
                        Some(r) => settings.runs = r,
                        None => self.error(
                            value.span(),
                            "`keep` says which runs keep their trace files".to_string(),
                            Some(
                                "\"all\", \"first\" (the first run of each cell) or \"none\""
                                    .to_string(),
                            ),
                        ),
                    }
                }
                "keep_max" => {
                    let text = match value.get_ref() {
                        DeValue::String(s) => Some(s.to_string()),
                        DeValue::Integer(i) => integer(i).map(|n| n.to_string()),
                        _ => None,
                    };
                    match text.as_deref().and_then(parse_size) {
                        Some(bytes) => settings.max_bytes = Some(bytes),
                        None => self.error(
                            value.span(),
                            "`keep_max` is not a size".to_string(),
                            Some(
                                "a size such as \"500M\" or \"2G\", or bytes: the most the \
                                 kept (compressed) traces may take"
                                    .to_string(),
                            ),
                        ),
                    }
                }
                "buffer_kb" => {
                    // KiB per CPU: the kernel takes it from RAM on every CPU at once.
                    let (lo, hi) = (BUFFER_KB_MIN as i64, BUFFER_KB_MAX as i64);
                    if let Some(kb) = self.integer_in(value, "buffer_kb", lo, hi) {
                        settings.buffer_kb = Some(kb as u64);
                    }
                }
                other => self.unknown_key(key.span(), other, "[trace]", TRACE_KEYS),
            }
        }
        (true, settings)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::*;
    use super::*;

    #[test]
    fn trace_is_a_top_level_flag() {
        assert!(!parse("x.toml", GOOD).unwrap().trace);
        assert!(
            parse("x.toml", "name = \"n\"\ntrace = true\n")
                .unwrap()
                .trace
        );
        let text = errors("name = \"n\"\ntrace = 1\n").join("\n");
        assert!(
            text.contains("x.toml:2:9: expected true or false, not an integer"),
            "{text}"
        );
        let text = errors("name = \"n\"\ntraces = true\n").join("\n");
        assert!(text.contains("(did you mean `trace`?)"), "{text}");
    }

    #[test]
    fn a_trace_table_turns_tracing_on_and_caps_what_is_kept() {
        let e = parse("x.toml", "name = \"n\"\ntrace = true\n").unwrap();
        assert_eq!(e.trace_settings, TraceSettings::default());
        assert_eq!(e.trace_settings.runs, KeepRuns::All);
        let e = parse(
            "x.toml",
            "name = \"n\"\n[trace]\nkeep = \"first\"\nkeep_max = \"500M\"\n",
        )
        .unwrap();
        assert!(e.trace);
        assert_eq!(
            e.trace_settings,
            TraceSettings {
                runs: KeepRuns::First,
                max_bytes: Some(500 << 20),
                buffer_kb: None,
            }
        );
        let e = parse("x.toml", "name = \"n\"\n[trace]\nbuffer_kb = 65536\n").unwrap();
        assert_eq!(e.trace_settings.buffer_kb, Some(65536));
        for bad in ["32", "2000000", "\"64M\""] {
            let text = errors(&format!("name = \"n\"\n[trace]\nbuffer_kb = {bad}\n")).join("\n");
            assert!(text.contains("x.toml:3:13: `buffer_kb`"), "{text}");
        }
        let e = parse("x.toml", "name = \"n\"\ntrace = { keep = \"none\" }\n").unwrap();
        assert!(e.trace);
        assert_eq!(e.trace_settings.runs, KeepRuns::None);
        let e = parse("x.toml", "name = \"n\"\n[trace]\nkeep_max = 1000\n").unwrap();
        assert_eq!(e.trace_settings.max_bytes, Some(1000));
        // Every mistake, each at its line and column.
        let text =
            errors("name = \"n\"\n[trace]\nkeep = \"some\"\nkeep_max = \"lots\"\nkeeps = 1\n")
                .join("\n");
        assert!(
            text.contains("x.toml:3:8: `keep` says which runs keep their trace files"),
            "{text}"
        );
        assert!(text.contains("\"all\", \"first\""), "{text}");
        assert!(
            text.contains("x.toml:4:12: `keep_max` is not a size"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:5:1: unknown key `keeps` in [trace] (did you mean `keep`?)"),
            "{text}"
        );
        let text = errors("name = \"n\"\n[trace]\nkeep = 1\n").join("\n");
        assert!(text.contains("x.toml:3:8: `keep`"), "{text}");
    }
}

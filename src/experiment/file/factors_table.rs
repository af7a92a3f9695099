//! `[factors]`: what the experiment varies, each factor's kind (a queue knob, a system knob,
//! a fio option, placement, polling, the IRQ CPU) and its levels, and the limit on the size of
//! the matrix they make.

use std::ops::Range;

use toml::de::DeValue;

use super::{
    engine_table, flat_entries, integer, scalar_text, type_name, Diagnostic, Repetitions, Value,
    Walker,
};
use crate::experiment::factor::{
    Factor, FactorKind, IrqPlacement, Level, LevelValue, Pinning, IRQ_ALLOWED, PLACEMENT_ALLOWED,
};
use crate::experiment::queue_knobs;
use crate::experiment::system_knobs::{self, SystemKnob};
use crate::workload::options::{self, OptionPolicy};

/// Most levels one factor may list.
pub(super) const MAX_LEVELS: usize = 1000;
/// Most cells (combinations of levels) one experiment may have: every cell is planned,
/// shown and stored, and 10,000 cells of even a one-second run take most of a day per round.
pub(super) const MAX_CELLS: u64 = 10_000;
/// Most measured runs (cells x the most rounds the repetitions allow) one experiment may ask
/// for.
pub(super) const MAX_RUNS: u64 = 100_000;

pub(super) const SPECIAL_FACTORS: &[&str] = &["placement", "hipri", "polling", "irq_cpu"];

impl Walker<'_> {
    pub(super) fn factors(&mut self, v: &Value, policy: &OptionPolicy) -> Vec<Factor> {
        let DeValue::Table(table) = v.get_ref() else {
            self.expected(v, "a table ([factors])", "factors");
            return Vec::new();
        };
        let mut factors: Vec<Factor> = Vec::new();
        let entries = flat_entries(self.text, table);
        for (name, key_span, value) in entries {
            let Some(kind) = self.factor_kind(key_span.clone(), &name, policy) else {
                continue;
            };
            if kind == FactorKind::Polling && factors.iter().any(|f| f.kind == kind) {
                self.error(
                    key_span.clone(),
                    "`hipri` and `polling` are the same factor; keep one".to_string(),
                    None,
                );
                continue;
            }
            let DeValue::Array(items) = value.get_ref() else {
                self.error(
                    value.span(),
                    format!("the levels of `{name}` must be a list, e.g. {name} = [a, b]"),
                    None,
                );
                continue;
            };
            if items.is_empty() {
                self.error(
                    value.span(),
                    format!("`{name}` has no levels; give at least one"),
                    None,
                );
                continue;
            }
            if items.len() > MAX_LEVELS {
                self.error(
                    value.span(),
                    format!(
                        "`{name}` has {} levels, more than the limit of {MAX_LEVELS} per factor",
                        items.len()
                    ),
                    Some(format!("at most {MAX_LEVELS} levels per factor")),
                );
                continue;
            }
            let mut levels: Vec<Level> = Vec::new();
            for item in items.iter() {
                let Some(level) = self.level(item, &name, &kind, policy) else {
                    continue;
                };
                if levels.iter().any(|l| l.label == level.label) {
                    self.error(
                        item.span(),
                        format!("level `{}` of `{name}` is listed twice", level.label),
                        None,
                    );
                    continue;
                }
                // fio reads a number's unit in any case: `4k` and `4K` are one level.
                let same_number = |l: &Level| {
                    matches!(kind, FactorKind::Fio { .. })
                        && level.label.starts_with(|c: char| c.is_ascii_digit())
                        && l.label.eq_ignore_ascii_case(&level.label)
                };
                if let Some(first) = levels.iter().find(|l| same_number(l)) {
                    self.error(
                        item.span(),
                        format!(
                            "level `{}` of `{name}` is `{}` to fio (units are read in any \
                             case), listed before",
                            level.label, first.label
                        ),
                        None,
                    );
                    continue;
                }
                levels.push(level);
            }
            if levels.len() == items.len() {
                factors.push(Factor {
                    name,
                    kind,
                    levels,
                    line: self.position(key_span.clone().start).0,
                });
            }
        }
        // Placements are resolved against the CPUs online when the experiment starts.
        let placed = factors
            .iter()
            .any(|f| matches!(f.kind, FactorKind::Placement | FactorKind::IrqAffinity));
        for f in &factors {
            if matches!(&f.kind, FactorKind::System(k) if k.changes_cpus()) && placed {
                self.diags.push(Diagnostic {
                    line: f.line,
                    column: 1,
                    message: format!(
                        "`{}` takes CPUs offline, but placement and irq_cpu are resolved \
                         against the CPUs online at the start",
                        f.name
                    ),
                    allowed: Some("vary it in an experiment of its own".to_string()),
                });
            }
        }
        factors
    }

    pub(super) fn factor_kind(
        &mut self,
        span: Range<usize>,
        name: &str,
        policy: &OptionPolicy,
    ) -> Option<FactorKind> {
        if let Some(e) = self.engine.program() {
            if e.is_option(name) {
                return Some(FactorKind::Engine {
                    option: name.to_string(),
                });
            }
        }
        match name {
            "placement" => return Some(FactorKind::Placement),
            "hipri" | "polling" => return Some(FactorKind::Polling),
            "irq_cpu" => return Some(FactorKind::IrqAffinity),
            _ => {}
        }
        match SystemKnob::parse(name) {
            Some(Ok(knob)) => return Some(FactorKind::System(knob)),
            Some(Err(why)) => {
                self.error(span, why, Some(system_knobs::NAMES.join(", ")));
                return None;
            }
            None => {}
        }
        let attribute = name.strip_prefix("queue/").unwrap_or(name);
        if let Some(knob) = queue_knobs::find(attribute) {
            return Some(FactorKind::QueueKnob {
                attribute: knob.attribute.to_string(),
            });
        }
        if name.starts_with("queue/") {
            if queue_knobs::is_valid_attribute_path(attribute) {
                return Some(FactorKind::QueueKnob {
                    attribute: attribute.to_string(),
                });
            }
            self.error(
                span,
                format!("`{name}` is not a queue attribute path"),
                Some("queue/NAME or queue/iosched/NAME in lower case".to_string()),
            );
            return None;
        }
        if options::is_fio_option(name) || (policy.allow_unknown && !name.is_empty()) {
            return Some(FactorKind::Fio {
                option: name.to_string(),
            });
        }
        if self.engine_broken {
            return None;
        }
        let knobs = queue_knobs::names();
        let hint = crate::suggest::closest(name, SPECIAL_FACTORS.iter().chain(&knobs).copied())
            .or_else(|| options::suggest(name))
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_default();
        self.error(
            span,
            format!("unknown factor `{name}`{hint}"),
            Some(format!(
                "a queue knob ({}), queue/ATTRIBUTE, placement, hipri, irq_cpu, a system \
                 control ({}), or a fio option (bs, iodepth, numjobs, rw, ...)",
                knobs.join(", "),
                system_knobs::NAMES.join(", ")
            )),
        );
        None
    }

    /// One level of a factor, checked as its kind's values are.
    pub(super) fn level(
        &mut self,
        item: &Value,
        factor: &str,
        kind: &FactorKind,
        policy: &OptionPolicy,
    ) -> Option<Level> {
        match kind {
            FactorKind::Engine { option } => self.engine_level(item, factor, option),
            FactorKind::Polling => self.polling_level(item, factor),
            FactorKind::Placement | FactorKind::IrqAffinity => {
                self.placement_level(item, *kind == FactorKind::Placement)
            }
            FactorKind::System(knob) => self.system_level(item, factor, knob),
            FactorKind::QueueKnob { attribute } => self.queue_knob_level(item, factor, attribute),
            FactorKind::Fio { option } => self.fio_level(item, option, policy),
        }
    }

    /// A level of a program engine's option: whatever the program says it takes.
    fn engine_level(&mut self, item: &Value, factor: &str, option: &str) -> Option<Level> {
        let Some(text) = engine_table::option_text(item.get_ref()) else {
            self.expected(item, "a string, number or boolean", factor);
            return None;
        };
        if let Some(Err(e)) = self.engine.program().map(|e| e.check_option(option, &text)) {
            self.error(item.span(), e, None);
            return None;
        }
        Some(Level {
            label: text.clone(),
            value: LevelValue::Fio(text),
        })
    }

    /// A level of `hipri`: polled or not.
    fn polling_level(&mut self, item: &Value, factor: &str) -> Option<Level> {
        match item.get_ref() {
            DeValue::Boolean(b) => Some(Level {
                label: b.to_string(),
                value: LevelValue::Polling(*b),
            }),
            other => {
                self.error(
                    item.span(),
                    format!(
                        "`{factor}` levels are true or false, not {}",
                        type_name(other)
                    ),
                    Some("true, false".to_string()),
                );
                None
            }
        }
    }

    /// A level of `placement` (where fio runs) or `irq_cpu` (where the interrupt goes): a
    /// name (on, near, far, ...), a CPU, or a list of CPUs.
    fn placement_level(&mut self, item: &Value, placement: bool) -> Option<Level> {
        let v = item.get_ref();
        let allowed = if placement {
            PLACEMENT_ALLOWED
        } else {
            IRQ_ALLOWED
        };
        let text = match v {
            DeValue::String(s) => Some(s.to_string()),
            DeValue::Integer(i) => integer(i).map(|n| n.to_string()),
            DeValue::Array(cpus) => {
                let nums: Option<Vec<String>> = cpus
                    .iter()
                    .map(|c| match c.get_ref() {
                        DeValue::Integer(i) => {
                            integer(i).filter(|n| *n >= 0).map(|n| n.to_string())
                        }
                        _ => None,
                    })
                    .collect();
                nums.filter(|n| !n.is_empty()).map(|n| n.join(","))
            }
            _ => None,
        };
        let parsed = match text {
            Some(t) if placement => Pinning::parse(&t).map(LevelValue::Placement),
            Some(t) => IrqPlacement::parse(&t).map(LevelValue::Irq),
            None => Err(format!("{} is not a placement", type_name(v))),
        };
        match parsed {
            Ok(value) => {
                let label = match &value {
                    LevelValue::Placement(p) => p.to_string(),
                    LevelValue::Irq(p) => p.to_string(),
                    _ => unreachable!("placement levels only"),
                };
                Some(Level { label, value })
            }
            Err(e) => {
                self.error(item.span(), e, Some(allowed.to_string()));
                None
            }
        }
    }

    /// A level of a system control (governor, turbo, ...), checked against its values.
    fn system_level(&mut self, item: &Value, factor: &str, knob: &SystemKnob) -> Option<Level> {
        let text = self.knob_text(item, factor, true)?;
        match knob.check(&text) {
            Ok(value) => Some(Level {
                label: value.clone(),
                value: LevelValue::Knob(value),
            }),
            Err(allowed) => {
                self.error(
                    item.span(),
                    format!("not a value of `{factor}`"),
                    Some(allowed),
                );
                None
            }
        }
    }

    /// A knob's level as the text to write: a string or an integer (or, with `booleans`, a
    /// boolean as `true`/`false`), on one line; else an error saying what it is instead.
    fn knob_text(&mut self, item: &Value, factor: &str, booleans: bool) -> Option<String> {
        let v = item.get_ref();
        let text = match v {
            DeValue::String(s) => Some(s.to_string()),
            DeValue::Integer(i) => integer(i).map(|n| n.to_string()),
            DeValue::Boolean(b) if booleans => Some(b.to_string()),
            _ => None,
        };
        let what = match &text {
            Some(t) if t.contains(['\n', '\r', '\0']) => "a string of more than one line",
            Some(_) => return text,
            None => type_name(v),
        };
        let kinds = if booleans {
            "strings, integers or booleans"
        } else {
            "strings or integers"
        };
        self.error(
            item.span(),
            format!("`{factor}` levels are {kinds} of one line, not {what}"),
            None,
        );
        None
    }

    /// A level of a queue attribute: checked against the values of a knob iolab knows, one
    /// line of text for any other attribute.
    fn queue_knob_level(&mut self, item: &Value, factor: &str, attribute: &str) -> Option<Level> {
        let text = self.knob_text(item, factor, false)?;
        match queue_knobs::find(attribute) {
            Some(knob) => match knob.check(&text) {
                Ok(value) => Some(Level {
                    label: value.clone(),
                    value: LevelValue::Knob(value),
                }),
                Err(allowed) => {
                    self.error(
                        item.span(),
                        format!("`{text}` is not a value of `{factor}`"),
                        Some(allowed),
                    );
                    None
                }
            },
            // Every I/O scheduler's setting is an integer (a time, a depth, a switch).
            None if attribute.starts_with("iosched/") && text.trim().parse::<i64>().is_err() => {
                self.error(
                    item.span(),
                    format!("`{text}` is not a value of `{factor}`"),
                    Some("an integer: every I/O scheduler setting takes one".to_string()),
                );
                None
            }
            None => Some(Level {
                label: text.clone(),
                value: LevelValue::Knob(text),
            }),
        }
    }

    /// A level of a fio option: one value, allowed as the workload's options are.
    fn fio_level(&mut self, item: &Value, option: &str, policy: &OptionPolicy) -> Option<Level> {
        let Some(text) = scalar_text(item.get_ref()) else {
            self.error(
                item.span(),
                format!(
                    "a level of fio option `{option}` is one value, not {}",
                    type_name(item.get_ref())
                ),
                Some("a string, integer, float or boolean".to_string()),
            );
            return None;
        };
        let before = self.diags.len();
        self.fio_option(item.span(), option, &text, policy);
        (self.diags.len() == before).then(|| Level {
            label: text.clone(),
            value: LevelValue::Fio(text),
        })
    }

    /// Refuses a matrix too large to plan, before anything is allocated per cell: the
    /// product of the level counts is computed with checked multiplication.
    pub(super) fn matrix_size(
        &mut self,
        span: Range<usize>,
        factors: &[Factor],
        reps: &Repetitions,
    ) {
        let cells = factors
            .iter()
            .try_fold(1u64, |n, f| n.checked_mul(f.levels.len() as u64));
        let counts = factors
            .iter()
            .map(|f| f.levels.len().to_string())
            .collect::<Vec<_>>()
            .join(" x ");
        let Some(cells) = cells.filter(|c| *c <= MAX_CELLS) else {
            let n = cells.map_or("more than 2^64".to_string(), |c| c.to_string());
            self.error(
                span,
                format!("the factors' levels ({counts}) make {n} cells, more than the limit of {MAX_CELLS}"),
                Some(format!("at most {MAX_CELLS} cells: fewer factors or fewer levels")),
            );
            return;
        };
        let rounds = u64::from(reps.max_rounds());
        let runs = cells.saturating_mul(rounds);
        if runs > MAX_RUNS {
            self.error(
                span,
                format!(
                    "{cells} cells ({counts}) x up to {rounds} repetitions make {runs} runs, more \
                     than the limit of {MAX_RUNS}"
                ),
                Some(format!(
                    "at most {MAX_RUNS} runs: fewer cells or fewer repetitions"
                )),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;

    #[test]
    fn impossible_levels_are_refused_with_the_allowed_values() {
        let errs = errors(
            "name = \"n\"\n[factors]\nrq_affinity = [0, 3]\nplacement = [\"on\", \"nearby\"]\n\
             scheduler = [\"cfq\"]\nhipri = [\"yes\"]\nbs = []\nnomerges = 1\n\
             \"queue/iosched/fifo_batch\" = [8, \"x\"]\n",
        );
        let text = errs.join("\n");
        assert!(
            text.contains("x.toml:3:19: `3` is not a value of `rq_affinity`"),
            "{text}"
        );
        assert!(text.contains("takes \"0\", \"1\", \"2\""), "{text}");
        assert!(
            text.contains("x.toml:4:20: `nearby` is not a placement"),
            "{text}"
        );
        assert!(text.contains("\"on\", \"near\", \"far\""), "{text}");
        assert!(
            text.contains("x.toml:5:14: `cfq` is not a value of `scheduler`"),
            "{text}"
        );
        assert!(
            text.contains("\"none\", \"mq-deadline\", \"kyber\", \"bfq\""),
            "{text}"
        );
        assert!(
            text.contains("x.toml:6:10: `hipri` levels are true or false"),
            "{text}"
        );
        assert!(text.contains("x.toml:7:6: `bs` has no levels"), "{text}");
        assert!(
            text.contains("x.toml:8:12: the levels of `nomerges` must be a list"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:9:34: `x` is not a value of `queue/iosched/fifo_batch`"),
            "{text}"
        );
    }

    #[test]
    fn a_knob_level_that_is_not_one_line_of_text_says_what_it_is() {
        let errs = errors(
            "name = \"n\"\n[factors]\nread_ahead_kb = [\"128\\n256\", 1.5]\n\
             \"cpu.governor\" = [[\"performance\"]]\n",
        );
        let text = errs.join("\n");
        assert!(
            text.contains(
                "x.toml:3:18: `read_ahead_kb` levels are strings or integers of one line, not \
                 a string of more than one line"
            ),
            "{text}"
        );
        assert!(
            text.contains("x.toml:3:30: `read_ahead_kb` levels are strings or integers of one line, not a float"),
            "{text}"
        );
        assert!(
            text.contains(
                "x.toml:4:19: `cpu.governor` levels are strings, integers or booleans of one line, \
                 not an array"
            ),
            "{text}"
        );
    }

    #[test]
    fn duplicate_levels_and_bad_attribute_paths() {
        let text = errors("name = \"n\"\n[factors]\nbs = [\"4k\", \"4k\"]\n\"queue/../x\" = [1]\n")
            .join("\n");
        assert!(
            text.contains("x.toml:3:13: level `4k` of `bs` is listed twice"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:4:1: `queue/../x` is not a queue attribute path"),
            "{text}"
        );
        let text =
            errors("name = \"n\"\n[factors]\nbs = [\"4k\", \"4K\", \"1m\", \"1M\"]\n").join("\n");
        assert!(
            text.contains(
                "x.toml:3:13: level `4K` of `bs` is `4k` to fio (units are read in any case), \
                 listed before"
            ),
            "{text}"
        );
        assert!(text.contains("x.toml:3:25: level `1M`"), "{text}");
    }
}

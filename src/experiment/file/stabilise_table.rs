//! `[stabilise]`: machine-wide controls set once for the whole experiment.

use toml::de::DeValue;

use super::{flat_entries, scalar_text, Value, Walker};
use crate::experiment::system_knobs::{self, SystemKnob};

/// `[stabilise]`: machine-wide controls set before the first run and put back after the last.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Stabilise {
    /// `preflight = true`: what preflight advises where this machine has it (the performance
    /// governor, boost off, no idle state deeper than C1).
    pub advice: bool,
    /// Controls named in the table, with their normalised values, in file order.
    pub settings: Vec<(SystemKnob, String)>,
}

impl Walker<'_> {
    pub(super) fn stabilise(&mut self, v: &Value) -> Stabilise {
        let mut st = Stabilise::default();
        let DeValue::Table(table) = v.get_ref() else {
            self.expected(v, "a table ([stabilise])", "stabilise");
            return st;
        };
        let entries = flat_entries(self.text, table);
        for (name, span, value) in entries {
            if name == "preflight" {
                st.advice = self.boolean(value).unwrap_or(false);
                continue;
            }
            let knob = match SystemKnob::parse(&name) {
                Some(Ok(k)) => k,
                Some(Err(why)) => {
                    self.error(span, why, None);
                    continue;
                }
                None => {
                    let mut allowed = vec!["preflight"];
                    allowed.extend(system_knobs::NAMES);
                    self.unknown_key(span, &name, "[stabilise]", &allowed);
                    continue;
                }
            };
            match scalar_text(value.get_ref()).map(|t| knob.check(&t)) {
                Some(Ok(level)) => st.settings.push((knob, level)),
                Some(Err(allowed)) => self.error(
                    value.span(),
                    format!("not a value of `{name}`"),
                    Some(allowed),
                ),
                None => self.expected(value, "a string, integer or boolean", &name),
            }
        }
        st
    }
}

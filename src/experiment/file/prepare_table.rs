//! `[prepare]`: the steps before every measured run (sync, drop caches, settle).

use toml::de::DeValue;

use super::{Value, Walker};
use crate::experiment::prepare::Prepare;

pub(super) const PREPARE_KEYS: &[&str] = &["sync", "drop_caches", "settle"];

impl Walker<'_> {
    pub(super) fn prepare(&mut self, v: &Value) -> Prepare {
        let mut p = Prepare::default();
        let DeValue::Table(table) = v.get_ref() else {
            self.expected(v, "a table ([prepare])", "prepare");
            return p;
        };
        for (key, value) in table.iter() {
            match key.get_ref().as_ref() {
                "sync" => p.sync = self.boolean(value).unwrap_or(false),
                "drop_caches" => p.drop_caches = self.boolean(value).unwrap_or(false),
                "settle" => {
                    let text = self.string(value, "settle");
                    match text.map(|t| crate::sys::parse::duration::duration(&t)) {
                        Some(Ok(d)) => p.settle = Some(d),
                        Some(Err(e)) => self.error(value.span(), e, None),
                        None => {}
                    }
                }
                other => self.unknown_key(key.span(), other, "[prepare]", PREPARE_KEYS),
            }
        }
        p
    }
}

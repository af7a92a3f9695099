//! `[prepare]`: the steps before every measured run (sync, drop caches, fstrim, settle).

use toml::de::DeValue;

use super::{Value, Walker};
use crate::experiment::prepare::Prepare;

pub(super) const PREPARE_KEYS: &[&str] = &["sync", "drop_caches", "fstrim", "settle"];

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
                "fstrim" => {
                    // Which file system it is, and that it is on the target, is checked when
                    // the run starts (the mounts are the machine's, not the file's).
                    if let Some(t) = self.string(value, "fstrim") {
                        let path = std::path::PathBuf::from(&t);
                        let plain = path.is_absolute()
                            && path
                                .components()
                                .all(|c| c != std::path::Component::ParentDir);
                        if plain {
                            p.fstrim = Some(path);
                        } else {
                            self.error(
                                value.span(),
                                format!("`fstrim = \"{t}\"` is not an absolute path"),
                                Some("the mount point of a file system on the target, e.g. \"/mnt/bench\"".to_string()),
                            );
                        }
                    }
                }
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

//! Block queue attributes that list their alternatives: `scheduler` prints every available
//! elevator with the current one in brackets (`none [mq-deadline] kyber bfq`), `write_cache`
//! prints a phrase (`write back`). A device without an elevator choice prints `none`.

/// A knob whose text names the current value among the allowed ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Choice {
    pub current: Option<String>,
    pub allowed: Vec<String>,
}

/// Parses `none [mq-deadline] kyber bfq`. A single word without brackets is both the only
/// choice and the current one (older kernels print `none` for devices without blk-mq).
pub(crate) fn bracketed_choice(text: &str) -> Choice {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut current = None;
    let mut allowed = Vec::with_capacity(words.len());
    for w in &words {
        match w.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
            Some(inner) => {
                current = Some(inner.to_string());
                allowed.push(inner.to_string());
            }
            None => allowed.push(w.to_string()),
        }
    }
    if current.is_none() && allowed.len() == 1 {
        current = allowed.first().cloned();
    }
    Choice { current, allowed }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bracketed_is_current() {
        let c = bracketed_choice("none [mq-deadline] kyber bfq \n");
        assert_eq!(c.current.as_deref(), Some("mq-deadline"));
        assert_eq!(c.allowed, vec!["none", "mq-deadline", "kyber", "bfq"]);
        let c = bracketed_choice("[none] mq-deadline\n");
        assert_eq!(c.current.as_deref(), Some("none"));
        let c = bracketed_choice("none\n");
        assert_eq!(c.current.as_deref(), Some("none"));
        assert_eq!(c.allowed, vec!["none"]);
        let c = bracketed_choice("");
        assert_eq!(c.current, None);
        assert!(c.allowed.is_empty());
    }
}

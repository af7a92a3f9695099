//! Run tags (`--tag NAME=VALUE`): one rule for `run`, `import` and `compare`'s selectors.
//!
//! A tag is only worth storing if `compare` can select it again, so the rule is the selector
//! syntax read backwards: a name is lowercase letters, digits, `_`, `-` and `.` (no `=` or
//! `,`, which the selector syntax uses); a value is non-empty and holds no `,` (a selector
//! joins its parts with `,`) and no control character (it is printed in tables). Some names
//! are reserved: `experiment` is the selector keyword for an experiment id, so a tag of that
//! name could never be selected; `host` and `kernel` are set by iolab itself where it knows
//! them (see [`check_reserved`]).

/// What a tag name may hold, for messages.
pub(crate) const NAME_RULE: &str = "lowercase letters, digits, '_', '-' and '.'";

/// The selector keyword `compare` reads as an experiment id.
pub(crate) const EXPERIMENT: &str = "experiment";

/// Checks a tag name against [`NAME_RULE`] and the `experiment` keyword.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-.".contains(&b))
    {
        return Err(format!(
            "tag name \"{}\" is not allowed: use {NAME_RULE} (e.g. variant=stock)",
            crate::report::format::terminal_safe(name)
        ));
    }
    if name == EXPERIMENT {
        return Err(format!(
            "tag name {EXPERIMENT:?} is reserved: compare reads `{EXPERIMENT}=N` as an experiment \
             id, so such a tag could never be selected; use another name (e.g. trial=N)"
        ));
    }
    Ok(())
}

/// Checks a tag value: non-empty, no ',', no control characters.
pub(crate) fn check_value(name: &str, value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err(format!("tag {name}= has no value: write {name}=VALUE"));
    }
    if value.contains(',') {
        return Err(format!(
            "tag value \"{}\" of {name} holds ',', which compare's selectors use to join \
             parts; use another separator (e.g. '+' or '_')",
            crate::report::format::terminal_safe(value)
        ));
    }
    check_printable(name, value)
}

/// Refuses a value with a control character: tags and levels are printed in tables.
pub(crate) fn check_printable(name: &str, value: &str) -> Result<(), String> {
    if value.chars().any(is_unsafe_char) {
        return Err(format!(
            "tag value \"{}\" of {name} holds a control character; tags are printed in \
             tables, use printable text",
            crate::report::format::terminal_safe(value)
        ));
    }
    Ok(())
}

fn is_unsafe_char(c: char) -> bool {
    crate::report::format::needs_escape(c)
}

/// Parses `NAME=VALUE` by the module's rule (the name is trimmed, the value is kept exact).
pub(crate) fn parse_tag(text: &str) -> Result<(String, String), String> {
    let Some((name, value)) = text.split_once('=') else {
        return Err(format!(
            "tag \"{}\" is not NAME=VALUE (e.g. variant=stock)",
            crate::report::format::terminal_safe(text)
        ));
    };
    let name = name.trim();
    check_name(name)?;
    check_value(name, value)?;
    Ok((name.to_string(), value.to_string()))
}

/// Refuses tags whose name is in `reserved` (name, why), all at once.
pub(crate) fn check_reserved(
    tags: &[(String, String)],
    reserved: &[(&str, &str)],
) -> Result<(), String> {
    let refused: Vec<String> = tags
        .iter()
        .filter_map(|(n, _)| {
            reserved
                .iter()
                .find(|(r, _)| r == n)
                .map(|(r, why)| format!("--tag {r}=...: {why}"))
        })
        .collect();
    if refused.is_empty() {
        Ok(())
    } else {
        Err(refused.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_values_and_the_keyword() {
        assert_eq!(
            parse_tag("kernel=6.1.0-13").unwrap(),
            ("kernel".into(), "6.1.0-13".into())
        );
        assert_eq!(
            parse_tag(" a.b_c-1=x y").unwrap(),
            ("a.b_c-1".into(), "x y".into())
        );
        for bad in [
            "kernel",
            "=x",
            "a b=x",
            "Kernel=x",
            "a=x,y",
            "a=",
            "experiment=1",
            "a=x\u{202e}y",
            "a=x\0",
            "é=1",
        ] {
            assert!(parse_tag(bad).is_err(), "{bad:?} was accepted");
        }
        let e = parse_tag("experiment=99").unwrap_err();
        assert!(e.contains("reserved"), "{e}");
    }

    #[test]
    fn messages_show_controls_escaped_once() {
        let e = parse_tag("v=a\u{202e}b").unwrap_err();
        assert!(e.contains("\"a\\u{202e}b\""), "{e}");
    }

    #[test]
    fn reserved_names_are_refused_with_the_reason() {
        let tags = vec![("host".to_string(), "a".to_string())];
        let e = check_reserved(&tags, &[("host", "iolab sets it")]).unwrap_err();
        assert!(e.contains("--tag host=...: iolab sets it"), "{e}");
        assert!(check_reserved(&tags, &[("kernel", "x")]).is_ok());
    }
}

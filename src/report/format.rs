//! Number formatting shared by tables and chart labels: enough significant digits to see a
//! 1% change, thousands separators so 69112 reads as 69,112, and ASCII only so the text
//! survives any mail client.

/// Four significant digits, no decimals from 1000 up, commas between thousands. At most six
/// decimals, so below 0.001 fewer digits show (a stddev of 0.0000193 is `0.000019`, beside
/// means of a few units that is what a reader needs), and below 0.000001 an exponent.
/// Non-finite values print as `nan`/`inf` rather than panicking.
pub(crate) fn number(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}").to_lowercase();
    }
    if x == 0.0 {
        return "0".into();
    }
    // The magnitude once rounded to four significant digits: 0.99996 shows as 1.000, not as
    // 1.0000 beside other cells' 1.000.
    let magnitude = format!("{:.3e}", x.abs())
        .split_once('e')
        .and_then(|(_, e)| e.parse::<i32>().ok())
        .unwrap_or(0);
    if magnitude < -6 {
        // Six decimals would show it as 0.000000.
        return format!("{x:.1e}");
    }
    if magnitude > 15 {
        // Past a double's 15-16 significant digits, the rest would be noise (1e300 printed
        // as 301 of them).
        return format!("{x:.3e}");
    }
    let decimals = (3 - magnitude).clamp(0, 6) as usize;
    let text = format!("{:.*}", decimals, x.abs());
    let (int_part, frac) = match text.split_once('.') {
        Some((i, f)) => (i.to_string(), Some(f.to_string())),
        None => (text, None),
    };
    let mut grouped = String::new();
    for (i, ch) in int_part.chars().enumerate() {
        if i > 0 && (int_part.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    let sign = if x < 0.0 && text_is_nonzero(&grouped, &frac) {
        "-"
    } else {
        ""
    };
    match frac {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

fn text_is_nonzero(int_part: &str, frac: &Option<String>) -> bool {
    int_part.chars().any(|c| c.is_ascii_digit() && c != '0')
        || frac.as_ref().is_some_and(|f| f.chars().any(|c| c != '0'))
}

/// Like [`number`] without trailing zeros (`100`, `2.5`, `1,000`), for axis ticks.
pub(crate) fn short(x: f64) -> String {
    let t = number(x);
    if let Some((mantissa, exponent)) = t.split_once('e') {
        let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
        format!("{mantissa}e{exponent}")
    } else if t.contains('.') {
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        t
    }
}

/// Tick labels on a log axis: only 1-2-5 values are labelled, the others stay blank, so
/// the labels do not overlap where decades are narrow.
pub(crate) fn log_tick(x: f64) -> String {
    if x.is_nan() || x <= 0.0 || x.is_infinite() {
        return String::new();
    }
    let mantissa = x / 10f64.powf(x.log10().floor());
    if [1.0, 2.0, 5.0, 10.0]
        .iter()
        .any(|m| (mantissa - m).abs() < 1e-6 * m)
    {
        short(x)
    } else {
        String::new()
    }
}

/// A signed percentage: `+12.3%`, `-0.4%`, `+1,117%`; see [`signed`].
pub(crate) fn signed_pct(x: f64) -> String {
    format!("{}%", signed(x))
}

/// A signed number of percent: one decimal below 1,000, whole and grouped from there
/// (`+1,117`, as a table's other numbers). One that one decimal would round to zero keeps
/// the digits that show its sign is real: a CI bound of -0.01% printed `-0.0` read as a CI
/// holding 0.
pub(crate) fn signed(x: f64) -> String {
    signed_to(x, decimals_for(x))
}

/// Both ends of an interval with the decimals the finer one needs: `[-0.1, -0.01]` read the
/// low end as twice what it was (-0.0505).
pub(crate) fn signed_pair(low: f64, high: f64) -> (String, String) {
    let decimals = decimals_for(low).max(decimals_for(high));
    (signed_to(low, decimals), signed_to(high, decimals))
}

/// The decimals [`signed`] gives `x`: one, or up to three for one that one would round to 0.
fn decimals_for(x: f64) -> usize {
    if x.is_finite() && x != 0.0 && x.abs() < 0.05 {
        (-x.abs().log10()).ceil().clamp(2.0, 3.0) as usize
    } else {
        1
    }
}

fn signed_to(x: f64, decimals: usize) -> String {
    let sign = if x < 0.0 { "-" } else { "+" };
    if !x.is_finite() {
        return format!("{x}").to_lowercase();
    }
    if x.abs() >= 999.95 {
        return format!("{sign}{}", number(x.abs()));
    }
    let text = format!("{:.*}", decimals, x.abs());
    if x != 0.0 && text.trim_end_matches(['0', '.']).is_empty() {
        // Smaller still than three decimals show: said as such.
        return format!("{sign}<0.001");
    }
    format!("{sign}{text}")
}

/// A p-value with 3 decimals, or `<0.001`; with 4 where 3 would round one below 0.05 (the
/// level a verdict needs) up to `0.050`, printed beside a verdict it seemed to miss.
pub(crate) fn p_value(p: f64) -> String {
    if p < 0.001 {
        "<0.001".into()
    } else if (0.0495..0.05).contains(&p) {
        format!("{p:.4}")
    } else {
        format!("{p:.3}")
    }
}

/// True for characters that must not reach a terminal raw: C0 and C1 controls, DEL, and the
/// Unicode bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069), which can
/// reorder what a table shows ("Trojan Source").
pub(crate) fn needs_escape(c: char) -> bool {
    c.is_control()
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// Untrusted text (names from files, the database, tags, devices, fio jobs, IRQ actions) made
/// safe for a terminal: every character [`needs_escape`] finds is written as `\u{..}`; the rest
/// is unchanged. Text renderers call this; JSON output keeps the exact text (serde escapes).
pub(crate) fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs_escape(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Like [`terminal_safe`] for text of several lines: each line is made safe, the line breaks
/// stay (titles and notes that iolab itself writes over several lines).
pub(crate) fn terminal_safe_lines(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c != '\n' && needs_escape(c)) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        text.split('\n')
            .map(|l| terminal_safe(l).into_owned())
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// The columns `s` takes on a terminal: a CJK character two, a combining mark none (names
/// from files and the database may hold either, and a column padded by characters or bytes
/// would not line up).
pub(crate) fn display_width(s: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(s)
}

/// `s` followed by the spaces that make it `width` terminal columns wide (as `{:<width}`
/// would, counting columns rather than characters).
pub(crate) fn pad_right(s: &str, width: usize) -> String {
    format!("{s}{}", " ".repeat(width.saturating_sub(display_width(s))))
}

/// Names for a message: the first dozen joined by ", ", then how many more ("none" for none),
/// so a machine with hundreds of devices still gets a readable line.
pub(crate) fn some_names<S: AsRef<str>>(names: &[S]) -> String {
    const SHOWN: usize = 12;
    let shown: Vec<&str> = names.iter().take(SHOWN).map(AsRef::as_ref).collect();
    match names.len() {
        0 => "none".to_string(),
        n if n <= SHOWN => shown.join(", "),
        n => format!("{} and {} more", shown.join(", "), n - SHOWN),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_overrides_are_escaped() {
        assert_eq!(terminal_safe("plain name"), "plain name");
        assert_eq!(terminal_safe("a\0b"), "a\\u{0}b");
        assert_eq!(terminal_safe("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(
            terminal_safe("\u{1b}[31m\u{7f}\u{85}"),
            "\\u{1b}[31m\\u{7f}\\u{85}"
        );
        assert_eq!(
            terminal_safe("\u{2066}\u{2069}\u{202a}"),
            "\\u{2066}\\u{2069}\\u{202a}"
        );
        assert_eq!(terminal_safe("tab\there\n"), "tab\\u{9}here\\u{a}");
        assert_eq!(terminal_safe("ünïcode ok \u{2067}"), "ünïcode ok \\u{2067}");
        assert_eq!(terminal_safe_lines("a\nb\0"), "a\nb\\u{0}");
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(number(69112.4), "69,112");
        assert_eq!(number(1234567.0), "1,234,567");
        assert_eq!(number(145.34), "145.3");
        assert_eq!(number(12.534), "12.53");
        assert_eq!(number(0.012345), "0.01235");
        assert_eq!(number(-2500.0), "-2,500");
        assert_eq!(number(0.0), "0");
        assert_eq!(number(f64::NAN), "nan");
        // Rounded up to the next power of ten: the digits of that power (lab: 1.0000 beside
        // 1.000 in one column), and a value below six decimals in exponent form (+-0.000000).
        assert_eq!(number(0.99996), "1.000");
        assert_eq!(number(9999.7), "10,000");
        assert_eq!(number(0.00012344), "0.000123");
        assert_eq!(number(1.2e-7), "1.2e-7");
        assert_eq!(number(-3.0e-9), "-3.0e-9");
        assert_eq!(number(1e300), "1.000e300");
        assert_eq!(number(-2.5e16), "-2.500e16");
        assert_eq!(number(9.9e15), "9,900,000,000,000,000");
        assert_eq!(short(1e300), "1e300");
        assert_eq!(short(-3.0e-9), "-3e-9");
        assert_eq!(p_value(0.0004), "<0.001");
        assert_eq!(p_value(0.0497), "0.0497");
        assert_eq!(p_value(0.0503), "0.050");
        assert_eq!(p_value(0.0494), "0.049");
        assert_eq!(signed_pct(-0.04), "-0.04%");
        assert_eq!(signed_pct(-0.0), "+0.0%");
        assert_eq!(signed_pct(0.0031), "+0.003%");
        assert_eq!(signed_pct(-0.0001), "-<0.001%");
        assert_eq!(signed_pct(-0.06), "-0.1%");
        assert_eq!(signed_pct(12.34), "+12.3%");
        assert_eq!(signed_pct(1116.9), "+1,117%");
        assert_eq!(signed_pct(-999.96), "-1,000%");
        assert_eq!(short(100.0), "100");
        assert_eq!(short(2.5), "2.5");
        assert_eq!(short(1000.0), "1,000");
        assert_eq!(log_tick(20.0), "20");
        assert_eq!(log_tick(30.0), "");
        assert_eq!(log_tick(0.5), "0.5");
    }
}

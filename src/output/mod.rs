//! One output path for every command (issue #11): a command's library function returns a typed
//! result that implements [`Render`] (text for people) and `Serialize` (JSON for scripts), and
//! [`print`] writes it in the format [`OutputArgs`] picked. The CLI no longer branches on
//! `--json` or builds documents by hand, so a result prints the same way wherever it comes from.
//! Modelled on hyperfine's exporters: the result is data, the format is chosen in one place.

use serde::Serialize;

mod stdout;

pub(crate) use stdout::stdout;

/// A command's result: its text rendering; its JSON is its `Serialize`.
pub(crate) trait Render: Serialize {
    /// The text a person reads, with its trailing newline.
    fn text(&self) -> String;
}

/// A result that is also a table a spreadsheet reads (`show`, `compare`).
pub(crate) trait RenderCsv: Render {
    /// The CSV text: a header line, then one line per row.
    fn csv(&self) -> String;
}

/// The output-format flags of a command whose result is a table: JSON or CSV.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub(crate) struct TableOutputArgs {
    /// Print the result as JSON.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the result as CSV.
    #[arg(long)]
    pub csv: bool,
}

/// Writes a table result: JSON, CSV or text, as `out` says.
pub(crate) fn print_table(result: &impl RenderCsv, out: TableOutputArgs) -> anyhow::Result<()> {
    if out.csv {
        stdout(&result.csv())
    } else {
        print(result, OutputArgs { json: out.json })
    }
}

/// The output-format flags, flattened into each command's arguments (`#[command(flatten)]`).
/// A command whose `--json` means something more specific names it with
/// `#[command(mut_arg("json", |a| a.help("...")))]`, so `--help` keeps saying it.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub(crate) struct OutputArgs {
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Writes `result` to stdout: one pretty-printed JSON document, or its text.
pub(crate) fn print(result: &impl Render, out: OutputArgs) -> anyhow::Result<()> {
    stdout(&format(result, out)?)
}

/// The text [`print`] writes. Text is made safe for a terminal here, whatever its renderer
/// escaped already (escaping is idempotent): names and notes come from files, databases and
/// other machines, and one path that forgot is enough to let them clear a screen or forge
/// output.
pub(crate) fn format(result: &impl Render, out: OutputArgs) -> anyhow::Result<String> {
    Ok(if out.json {
        serde_json::to_string_pretty(result)? + "\n"
    } else {
        terminal_text(result)
    })
}

fn terminal_text(result: &impl Render) -> String {
    crate::report::format::terminal_safe_lines(&result.text()).into_owned()
}

/// Writes one item of a stream (`irq top`'s refreshes): with `--json` one compact JSON object
/// on its own line, so a script reads it line by line; else its text and a blank line.
/// `false` once nobody reads stdout (`irq top | head -1`), for the stream to end.
pub(crate) fn print_item(result: &impl Render, out: OutputArgs) -> anyhow::Result<bool> {
    stdout::still_read(&if out.json {
        serde_json::to_string(result)? + "\n"
    } else {
        terminal_text(result) + "\n"
    })
}

/// `serialize_with` for a field whose objects scripts have always seen with their keys sorted
/// (documents once built with `json!`, whose maps sort keys): keeps those documents
/// byte-identical now that they are typed.
pub(crate) fn sorted_keys<T: Serialize, S: serde::Serializer>(
    value: &T,
    s: S,
) -> Result<S::Ok, S::Error> {
    serde_json::to_value(value)
        .map_err(serde::ser::Error::custom)?
        .serialize(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Doc {
        #[serde(serialize_with = "sorted_keys")]
        inner: Inner,
    }
    #[derive(Serialize)]
    struct Inner {
        zeta: u8,
        alpha: u8,
    }
    impl Render for Doc {
        fn text(&self) -> String {
            format!("{} {}\n", self.inner.zeta, self.inner.alpha)
        }
    }

    #[test]
    fn text_and_json_come_from_one_result() {
        let d = Doc {
            inner: Inner { zeta: 1, alpha: 2 },
        };
        assert_eq!(format(&d, OutputArgs { json: false }).unwrap(), "1 2\n");
        assert_eq!(
            format(&d, OutputArgs { json: true }).unwrap(),
            "{\n  \"inner\": {\n    \"alpha\": 2,\n    \"zeta\": 1\n  }\n}\n"
        );
        // Without sorted_keys the declared order stays: that is what every other result prints.
        assert_eq!(
            serde_json::to_string(&Inner { zeta: 1, alpha: 2 }).unwrap(),
            "{\"zeta\":1,\"alpha\":2}"
        );
    }
}

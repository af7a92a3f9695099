//! Shell completions and man pages, generated from the same clap definitions the binary parses
//! with, so they can never disagree with it. `iolab completions SHELL` prints a completion
//! script (bash, zsh, fish, ...); the hidden `iolab man -o DIR` writes `iolab.1` and one page
//! per command (`iolab-run.1`, `iolab-trace-record.1`, ...), which `scripts/package` puts into
//! the Debian package.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, CommandFactory};

#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// Directory to write the pages into (created if needed).
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
}

pub(super) fn completions(args: CompletionsArgs) -> anyhow::Result<()> {
    let mut cmd = super::Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "iolab", &mut script);
    crate::output::stdout(&String::from_utf8_lossy(&script))
}

pub(super) fn man(args: ManArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.output)
        .with_context(|| format!("cannot create {}", args.output.display()))?;
    // Without clap's `help` subcommands: their pages are not written, so none may be named.
    let mut cmd = without_help_subcommands(super::Cli::command());
    cmd.build();
    for page in write_pages(&cmd, "iolab", &args.output)? {
        crate::output::stdout(&format!("{}\n", page.display()))?;
    }
    Ok(())
}

fn without_help_subcommands(cmd: clap::Command) -> clap::Command {
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    names
        .iter()
        .fold(cmd.disable_help_subcommand(true), |cmd, name| {
            cmd.mut_subcommand(name, without_help_subcommands)
        })
}

/// Writes the page of `cmd` as `name.1`, then one page per visible subcommand.
fn write_pages(cmd: &clap::Command, name: &str, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let page = cmd
        .clone()
        .name(name.to_string())
        .override_usage(synopsis(cmd));
    let mut text = Vec::new();
    clap_mangen::Man::new(page).render(&mut text)?;
    let text = unhyphenated(&text);
    let path = dir.join(format!("{name}.1"));
    crate::sys::own_dir::write_named_file(&path, &text).map_err(anyhow::Error::msg)?;
    written.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        written.extend(write_pages(
            sub,
            &format!("{name}-{}", sub.get_name()),
            dir,
        )?);
    }
    Ok(written)
}

/// The page set ragged-right and without hyphenation, as a command's page is read: justified,
/// a synopsis spread its words apart, and option names broke at a hyphen of their own
/// (`--destruc-tive-device`), which cannot be told from the name's. The synopsis breaks lines
/// between its words only: `[--device DEV]` stays whole.
fn unhyphenated(page: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(page).replace(WITHIN_WORD, "\\~");
    let mut out = String::with_capacity(text.len() + 16);
    for line in text.split_inclusive('\n') {
        out.push_str(line);
        if line.starts_with(".TH ") {
            out.push_str(".nh\n.ad l\n");
        }
    }
    out.into_bytes()
}

/// Joins the parts of one synopsis word (`[--device DEV]`) until the page is rendered, where
/// it becomes roff's unbreakable space: a line broke between `[--device` and `DEV]`.
const WITHIN_WORD: char = '\u{a0}';

/// The page's SYNOPSIS: every visible argument with its value's name (`[--over DURATION]`),
/// where clap_mangen's own names the options alone (`[--over]`), which reads as a flag.
fn synopsis(cmd: &clap::Command) -> String {
    let mut line = cmd.get_bin_name().unwrap_or(cmd.get_name()).to_string();
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let value = arg
            .get_value_names()
            .map(|names| names.join(&WITHIN_WORD.to_string()))
            .unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
        let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
        let many = matches!(arg.get_action(), clap::ArgAction::Append)
            || arg.get_num_args().is_some_and(|n| n.max_values() > 1);
        let mut word = if arg.is_positional() {
            let last = if arg.is_last_set() {
                format!("--{WITHIN_WORD}")
            } else {
                String::new()
            };
            format!("{last}<{value}>")
        } else {
            let name = match (arg.get_short(), arg.get_long()) {
                (Some(short), Some(long)) => format!("-{short}|--{long}"),
                (None, Some(long)) => format!("--{long}"),
                (Some(short), None) => format!("-{short}"),
                (None, None) => continue,
            };
            if takes_value {
                format!("{name}{WITHIN_WORD}{value}")
            } else {
                name
            }
        };
        if many {
            word.push_str("...");
        }
        if !arg.is_required_set() {
            word = format!("[{word}]");
        }
        line.push(' ');
        line.push_str(&word);
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        line.push_str(" <COMMAND>");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every page another names (`iolab-trace-record(1)`) is written: clap's `help`
    /// subcommands, which have none, are named nowhere.
    #[test]
    fn every_page_named_is_written() {
        let dir = tempfile::tempdir().unwrap();
        man(ManArgs {
            output: dir.path().to_path_buf(),
        })
        .unwrap();
        let written: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            written.contains(&"iolab-trace-record.1".to_string()),
            "{written:?}"
        );
        assert!(!written.iter().any(|p| p.contains("help")), "{written:?}");
        let named = regex::Regex::new(r"(iolab(?:\\-[a-z]+)*)\(1\)").unwrap();
        for page in &written {
            let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
            for c in named.captures_iter(&text) {
                let name = c[1].replace("\\-", "-");
                assert!(
                    written.contains(&format!("{name}.1")),
                    "{page} names {name}(1)"
                );
            }
        }
    }

    /// The synopsis named options without their values (`[--over]`, read as a flag), and
    /// justified, hyphenated text broke option names at hyphens of its own.
    #[test]
    fn a_synopsis_names_each_options_value_and_no_name_is_hyphenated() {
        let dir = tempfile::tempdir().unwrap();
        man(ManArgs {
            output: dir.path().to_path_buf(),
        })
        .unwrap();
        let page = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
        let daemon = page("iolab-irq-daemon.1");
        let synopsis = daemon
            .split(".SH SYNOPSIS\n")
            .nth(1)
            .and_then(|rest| rest.lines().next())
            .unwrap();
        for want in [
            "\\fBiolab irq daemon\\fR ",
            "[\\-\\-min\\-interval\\~DURATION]",
            "[\\-\\-keep]",
            "[\\-\\-unpin\\~all|IRQ,...]",
        ] {
            assert!(synopsis.contains(want), "{want:?} not in {synopsis}");
        }
        let record = page("iolab-trace-record.1");
        assert!(
            record.contains("\\-d|\\-\\-device\\~DEV... [")
                && record.contains("[\\-\\-\\~<COMMAND>...]"),
            "{record}"
        );
        assert!(page("iolab-irq.1").contains("[\\-V|\\-\\-version] <COMMAND>\n"));
        assert!(daemon.contains("\n.nh\n.ad l\n.SH NAME\n"), "{daemon}");
        // Lines break between the synopsis's words, never inside one: no space within [ ].
        let run = page("iolab-run.1");
        let synopsis = run.split(".SH SYNOPSIS\n").nth(1).unwrap();
        let synopsis = synopsis.lines().next().unwrap();
        let mut depth = 0;
        for c in synopsis.chars() {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                ' ' => assert_eq!(depth, 0, "a break inside a word: {synopsis}"),
                _ => {}
            }
        }
        assert!(synopsis.contains("[\\-\\-device\\~DEV]"), "{synopsis}");
    }

    /// A command's summary is its man page's NAME line (what `whatis` and `man -k` list) and
    /// its line in its parent's `--help`: one short line, the rest in the long help. The
    /// daemon's ran to 480 characters.
    #[test]
    fn every_command_summary_is_one_short_line() {
        fn check(cmd: &clap::Command, path: &str, long: &mut Vec<String>) {
            let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
            if about.is_empty() || about.chars().count() > 100 {
                long.push(format!("{path}: {} chars: {about}", about.chars().count()));
            }
            for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
                check(sub, &format!("{path} {}", sub.get_name()), long);
            }
        }
        let mut long = Vec::new();
        check(
            &without_help_subcommands(super::super::Cli::command()),
            "iolab",
            &mut long,
        );
        assert!(long.is_empty(), "{long:#?}");
    }
}

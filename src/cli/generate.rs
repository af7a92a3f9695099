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
    let mut cmd = super::Cli::command();
    cmd.build();
    for page in write_pages(&cmd, "iolab", &args.output)? {
        crate::output::stdout(&format!("{}\n", page.display()))?;
    }
    Ok(())
}

/// Writes the page of `cmd` as `name.1`, then one page per visible subcommand.
fn write_pages(cmd: &clap::Command, name: &str, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let page = cmd.clone().name(name.to_string());
    let mut text = Vec::new();
    clap_mangen::Man::new(page).render(&mut text)?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    written.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        written.extend(write_pages(
            sub,
            &format!("{name}-{}", sub.get_name()),
            dir,
        )?);
    }
    Ok(written)
}

//! `iolab hosts`: the other machines an experiment runs on, reached over SSH.

use std::time::Duration;

use crate::hosts::ssh::{SshOptions, REMOTE_DIR};

/// Check the hosts an experiment runs on: versions, fio and clock skew.
#[derive(Debug, clap::Args)]
pub(crate) struct HostsArgs {
    #[command(subcommand)]
    pub command: HostsCommand,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum HostsCommand {
    Check(CheckArgs),
}

/// Connect to each host over SSH and report its iolab, fio, kernel, Landlock and clock skew.
///
/// Runs `ssh -T -o BatchMode=yes HOST -- iolab agent` with your keys and ~/.ssh/config (more
/// ssh options from $IOLAB_SSH, e.g. `IOLAB_SSH="-F ./lab_ssh_config"`). The skew is the
/// host's clock against the midpoint of the round trip, give or take half of it. fio versions
/// that differ from this machine's and skews over --max-skew are flagged, and the command
/// then fails.
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("Print the check as JSON")))]
pub(crate) struct CheckArgs {
    /// Hosts as ssh knows them (names from ~/.ssh/config, user@address, ...).
    #[arg(required = true, value_name = "HOST")]
    pub hosts: Vec<String>,
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
    /// Flag clocks further than this from this machine's (e.g. 50ms, 1s).
    #[arg(long, value_name = "DURATION", default_value = "50ms", value_parser = parse_skew)]
    pub max_skew: Duration,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// How iolab is found, or put, on the hosts (`iolab hosts check`, `iolab run`).
#[derive(Debug, clap::Args)]
pub(crate) struct RemoteArgs {
    /// The iolab to run on the hosts: a name on their PATH or a path.
    #[arg(long, value_name = "PATH", default_value = "iolab")]
    pub remote_iolab: String,
    /// Copy this iolab binary to hosts that lack it or speak another protocol.
    #[arg(long)]
    pub copy_binary: bool,
    /// Where --copy-binary puts the binary on the hosts (an absolute path).
    #[arg(long, value_name = "DIR", default_value = REMOTE_DIR, value_parser = parse_remote_dir)]
    pub remote_dir: String,
}

/// A directory on the hosts: absolute, since a relative one lands in whatever directory the
/// ssh user's session starts in (its home), which nobody meant.
fn parse_remote_dir(text: &str) -> Result<String, String> {
    if text.starts_with('/') {
        Ok(text.to_string())
    } else {
        Err(format!(
            "`{text}` is relative: it would be taken from the ssh user's home on each host; \
             give an absolute path such as {REMOTE_DIR}"
        ))
    }
}

impl RemoteArgs {
    /// The first of these options given other than as its default: for a command whose
    /// experiment has no host to reach, where it would do nothing.
    pub(crate) fn given(&self) -> Option<&'static str> {
        if self.copy_binary {
            Some("--copy-binary")
        } else if self.remote_iolab != "iolab" {
            Some("--remote-iolab")
        } else if self.remote_dir != REMOTE_DIR {
            Some("--remote-dir")
        } else {
            None
        }
    }

    /// The ssh options these make (more from $IOLAB_SSH).
    pub(crate) fn options(&self) -> SshOptions {
        SshOptions {
            remote_iolab: self.remote_iolab.clone(),
            remote_dir: self.remote_dir.clone(),
            copy_binary: self.copy_binary,
            ..SshOptions::default()
        }
    }
}

fn parse_skew(text: &str) -> Result<Duration, String> {
    crate::sys::parse::duration::duration(text)
}

pub(super) fn run(args: HostsArgs) -> anyhow::Result<()> {
    match args.command {
        HostsCommand::Check(a) => check(a),
    }
}

fn check(args: CheckArgs) -> anyhow::Result<()> {
    let options = args.remote.options();
    let report = crate::hosts::check::check(&args.hosts, &options, args.max_skew);
    crate::output::print(&report, args.out)?;
    let problems = report.problems();
    if problems > 0 {
        anyhow::bail!("{problems} problem(s) with the hosts, listed above");
    }
    Ok(())
}

//! `iolab restore`: undo what a killed iolab left behind (`knobs::leftovers`), here or, with
//! `--host`, on other hosts over ssh.

/// Put back what a killed iolab left: knobs, tracefs settings, scratch devices.
///
/// Knobs and tracefs settings are put back and scratch devices removed; a scheduler module
/// the kernel loaded for one of its knobs (bfq, kyber) is unloaded again unless something
/// uses it.
#[derive(Debug, clap::Args)]
#[command(mut_arg("json", |a| a.help("Print what was done as JSON")))]
pub(crate) struct RestoreArgs {
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
    /// Restore on this host instead, over ssh (`ssh HOST -- iolab restore`), e.g. once a host
    /// cut off mid-experiment is back. Repeat for several; `$IOLAB_SSH` adds ssh options.
    #[arg(long = "host", value_name = "HOST")]
    pub hosts: Vec<String>,
    /// The iolab to run on the hosts: a name on their PATH, or a path.
    #[arg(long, value_name = "PATH", default_value = "iolab", requires = "hosts")]
    pub remote_iolab: String,
}

pub(super) fn run(args: RestoreArgs) -> anyhow::Result<()> {
    if !args.hosts.is_empty() {
        return on_hosts(&args);
    }
    let left = crate::knobs::leftovers::undo(&crate::knobs::state_dir())?;
    crate::output::print(&left, args.out)?;
    // Everything that could be done was done; a forged or unreadable entry still fails the
    // command, so a script notices.
    let (refused, problems) = left.failures();
    if refused + problems > 0 {
        anyhow::bail!(
            "{refused} journal entr(y/ies) refused and {problems} other problem(s), listed \
             above; nothing outside iolab's own knobs and scratch files was touched"
        );
    }
    Ok(())
}

/// `--host`: each host's own `iolab restore`, one after the other; fails when any did.
fn on_hosts(args: &RestoreArgs) -> anyhow::Result<()> {
    let options = crate::hosts::ssh::SshOptions {
        remote_iolab: args.remote_iolab.clone(),
        ..Default::default()
    };
    // A name ssh would misread is refused before any host is reached: it would never answer.
    if let Some((host, why)) = args
        .hosts
        .iter()
        .find_map(|h| crate::hosts::ssh::destination_problem(h).map(|why| (h, why)))
    {
        return Err(super::usage(format!("--host {host}: {why}")));
    }
    let mut done = Vec::new();
    for host in &args.hosts {
        done.push(crate::hosts::restore::restore(
            host,
            &options,
            args.out.json,
        )?);
    }
    let done = crate::hosts::restore::HostRestores(done);
    crate::output::print(&done, args.out)?;
    let failed = done.failed();
    if !failed.is_empty() {
        anyhow::bail!(
            "restore did not finish on {}: see above; run it again once the host answers",
            failed.join(", ")
        );
    }
    Ok(())
}

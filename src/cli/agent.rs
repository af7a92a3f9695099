//! `iolab agent`: iolab as another iolab's hands on this host (`hosts::agent`).

/// Answer JSON-line requests on stdin/stdout (for `iolab hosts`, over SSH).
///
/// Run by another iolab as `ssh HOST -- iolab agent`; not meant to be typed. It greets with
/// its protocol version, answers one JSON line per request line, and puts back every knob it
/// set when its input closes, on `bye` and on SIGHUP/SIGTERM/SIGINT. After a SIGKILL,
/// `iolab restore` on this host replays its journal.
#[derive(Debug, clap::Args)]
pub(crate) struct AgentArgs {}

pub(super) fn run(_args: AgentArgs) -> anyhow::Result<()> {
    let interrupt = crate::knobs::signals::Interrupt::install()?;
    let outcome =
        crate::hosts::agent::serve(std::io::stdin(), std::io::stdout(), &|| interrupt.signal());
    match outcome.restore_error {
        Some(e) => anyhow::bail!("{e}"),
        None => Ok(()),
    }
}

//! Writing a command's output to stdout without dying when the reader goes away: `iolab runs |
//! head` must not panic ("failed printing to stdout") — a closed pipe just ends the output.

use std::io::Write;

/// Writes `text` to stdout; a closed pipe is not an error.
pub(crate) fn stdout(text: &str) -> anyhow::Result<()> {
    still_read(text).map(|_| ())
}

/// Writes `text` to stdout; `false` when the reader has gone (a closed pipe), so a command
/// that prints until stopped (`irq top | head -1`) stops too.
pub(crate) fn still_read(text: &str) -> anyhow::Result<bool> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        other => Ok(other.map(|()| true)?),
    }
}

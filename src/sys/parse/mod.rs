//! Pure parsers for the text of /proc and /sys files. None of them does I/O: each takes the
//! text (as read through `SysRoot`) and returns values or a `ParseError` carrying the 1-based
//! line it is about, which the reader turns into an error naming the file. Keeping them pure
//! lets the sampler and the IRQ tools reuse them on buffers they already hold, and lets tests
//! feed them text pasted from real machines.

pub mod cpulist;
pub mod diskstats;
pub mod duration;
pub mod interrupts;
pub mod mountinfo;
pub mod queue;
pub mod stat;
pub mod swaps;

pub use cpulist::{cpulist, cpumask, format_cpulist};
pub use diskstats::diskstats;
pub use interrupts::interrupts;
pub use stat::stat;

/// What went wrong in a file's text, and on which line (1-based; 0 when the whole text is
/// at fault, e.g. it is empty).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl ParseError {
    pub fn new(line: usize, message: impl Into<String>) -> Self {
        ParseError {
            line,
            message: message.into(),
        }
    }
}

/// Parses one unsigned decimal field, naming it when it is not a number.
pub(crate) fn number(field: &str, what: &str, line: usize) -> Result<u64, ParseError> {
    field
        .parse::<u64>()
        .map_err(|_| ParseError::new(line, format!("{what}: expected a number, found {field:?}")))
}

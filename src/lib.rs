//! iolab: a Linux I/O-path performance lab.
//!
//! Data flows one way: rooted readers of /proc and /sys (`sys`) feed pure parsers and the
//! machine model; experiments drive fio and the sampler; results go to SQLite; statistics and
//! reports read them back. The CLI (`cli`) only parses arguments and calls one function per
//! command.

// Everything `pub` is reachable from outside the crate; internals say `pub(crate)`.
#![warn(unreachable_pub)]

/// `eprintln!` that cannot panic. Rust's own panics when stderr is a pipe whose reader went
/// away (`iolab run ... 2>&1 | head`), which stopped iolab between changing knobs and
/// recording what it did; a line nobody reads is dropped instead.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

/// `eprint!` that cannot panic (see `say!`).
macro_rules! say_part {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr().lock(), $($arg)*);
    }};
}

pub(crate) mod analysis;
pub mod cli;
pub mod experiment;
pub mod hosts;
pub mod irq;
pub mod knobs;
pub mod metrics;
pub mod model;
pub(crate) mod output;
pub(crate) mod placement;
pub(crate) mod preflight;
pub(crate) mod report;
pub mod sample;
pub mod snapshot;
/// The statistics, their own crate (crates/iolab-stats): every `crate::stats::...` path holds.
pub use iolab_stats as stats;
pub mod store;
pub(crate) mod suggest;
pub mod sys;
pub mod target;
pub mod trace;
pub mod workload;

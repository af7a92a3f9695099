//! Block traces read and analysed: blktrace's binary records (`blk_io_trace`, v7/v8, either
//! byte order), read from per-CPU files, one merged file or a raw tracefs stream (`stream`,
//! `merge`), and analysed with btt's definitions plus what btt lacks: percentiles,
//! per-process and per-direction views, a timeline (`analyze`). No Rust
//! crate offered this; it is its own crate because it needs nothing else of iolab, which
//! records traces through tracefs, draws them and diagnoses them around it (`iolab::trace`).

// Everything `pub` is reachable from outside the crate; internals say `pub(crate)`.
#![warn(unreachable_pub)]

pub mod analyze;
pub mod blk_io_trace;
pub mod merge;
pub mod stream;

//! Block traces: read blktrace records (v7/v8, either byte order, per-CPU files or one merged
//! file or a raw tracefs stream), record them through tracefs where relay blktrace is locked
//! out, and analyse them with btt's definitions plus what btt lacks (percentiles, per-request
//! view, timeline, diagnosis). Reading and analysing are their own crate
//! (`crates/iolab-blktrace`, re-exported here so every `trace::analyze::...` path holds);
//! this module adds what needs the rest of iolab: recording through tracefs (`capture`, with
//! `sys`'s machine-wide lock), comparison, diagnosis, kept traces, and charts drawn by
//! `report::plot` (one engine for every chart), with text made terminal-safe by `report`.

pub use iolab_blktrace::{analyze, blk_io_trace, merge, stream};
pub mod capture;
pub(crate) mod compare;
pub(crate) mod diagnose;
pub mod keep;
pub(crate) mod plot;
pub(crate) mod ring_buffer;
mod terminal;
pub(crate) mod tracefs_mount;

//! Block traces: read blktrace records (v7/v8, either byte order, per-CPU files or one merged
//! file or a raw tracefs stream), record them through tracefs where relay blktrace is locked
//! out, and analyse them with btt's definitions plus what btt lacks (percentiles, per-request
//! view, timeline, diagnosis). Depends on nothing else in iolab except `sys`, and `report`
//! for making text terminal-safe and for drawing its charts (`report::plot::Chart`, SVG and
//! PNG), so every chart iolab writes comes from one engine.

pub mod analyze;
pub mod blk_io_trace;
pub mod capture;
pub mod compare;
pub mod diagnose;
pub mod keep;
pub mod mapped;
pub mod merge;
pub mod plot;
pub mod stream;

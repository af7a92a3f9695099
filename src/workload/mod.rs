//! fio as iolab's workload engine: building job files from an experiment cell, running fio
//! (for real, or replaying canned outputs in tests), and reading its JSON into metrics.
//! Nothing here knows about knobs, the store or the sampler; the run loop joins them.

pub mod fio_json;
pub mod fio_series;
pub mod fio_window;
pub mod job;
pub mod options;

pub use fio_json::{parse as parse_fio_json, Dir, FioJsonError, FioReport, JobResult};
pub use job::{JobBuilder, JobError, JobSpec};
pub use options::{OptionPolicy, Refusal};
pub mod run_dir;
pub mod runner;

pub use runner::{CancelToken, Canned, FioOutcome, FioRunner, FioStatus, RealFio, ReplayFio};

//! iolab's workload engines behind one trait (`engine::Engine`): fio (building job files from
//! an experiment cell, running fio (for real, or replaying canned outputs in tests), and
//! reading its JSON into metrics), and the program engines (`command`, `iperf3`, `sockperf`).
//! Nothing here knows about knobs, the store or the sampler; the run loop joins them.

pub mod command;
pub(crate) mod confine;
pub mod engine;
pub(crate) mod exec_once;
pub mod fio_check;
pub(crate) mod fio_engine;
pub mod fio_json;
pub(crate) mod fio_runs;
pub(crate) mod fio_series;
pub(crate) mod fio_window;
pub(crate) mod job;
pub(crate) mod job_file;
pub(crate) mod net;
pub(crate) mod netserver;
pub mod options;
pub(crate) mod process;

pub(crate) use fio_json::FioReport;
pub use fio_json::{parse as parse_fio_json, Dir};
pub(crate) use job::JobError;
pub use job::{JobBuilder, JobSpec};
pub(crate) mod run_dir;
pub(crate) mod runner;

pub(crate) use engine::EngineSpec;
pub use engine::Invocation;
pub use runner::{CancelToken, Canned, FioOutcome, FioRunner, FioStatus, RealFio, ReplayFio};

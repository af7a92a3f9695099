//! iolab's workload engines behind one trait (`engine::Engine`): fio (building job files from
//! an experiment cell, running fio (for real, or replaying canned outputs in tests), and
//! reading its JSON into metrics), and the program engines (`command`, `iperf3`, `sockperf`).
//! Nothing here knows about knobs, the store or the sampler; the run loop joins them.

pub mod command;
pub mod engine;
pub mod fio_engine;
pub mod fio_json;
pub mod fio_series;
pub mod fio_window;
pub mod job;
pub mod job_file;
pub mod net;
pub mod netserver;
pub mod options;
pub mod process;

pub use fio_json::{parse as parse_fio_json, Dir, FioJsonError, FioReport, JobResult};
pub use job::{JobBuilder, JobError, JobSpec};
pub use options::{OptionPolicy, Refusal};
pub mod run_dir;
pub mod runner;

pub use engine::{Engine, EngineSpec, Invocation, ProgramRun};
pub use runner::{CancelToken, Canned, FioOutcome, FioRunner, FioStatus, RealFio, ReplayFio};

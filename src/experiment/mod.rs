//! Experiments: the TOML file that describes one (`file`), the factors it varies (`factor`),
//! the queue knobs it may touch (`queue_knobs`), and the plan that turns it into a shuffled,
//! interleaved list of runs (`plan`) — all pure — and the run loop (`run`), the one place
//! that executes a plan on the machine with the knobs, target, sampler, runner and store.

pub(crate) mod depth;
pub(crate) mod factor;
pub mod file;
pub(crate) mod job_check;
pub(crate) mod job_memory;
pub(crate) mod metrics;
pub mod plan;
pub(crate) mod prepare;
pub(crate) mod queue_knobs;
pub mod run;
pub(crate) mod system_knobs;

pub(crate) use factor::{Factor, FactorKind};
pub(crate) use file::Repetitions;
pub use file::{load, load_with_env, parse, Experiment, ExperimentError, TargetDevice};
pub(crate) use plan::Cell;
pub use plan::{cells, Planner};

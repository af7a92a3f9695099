//! Experiments: the TOML file that describes one (`file`), the factors it varies (`factor`),
//! the queue knobs it may touch (`queue_knobs`), and the plan that turns it into a shuffled,
//! interleaved list of runs (`plan`) — all pure — and the run loop (`run`), the one place
//! that executes a plan on the machine with the knobs, target, sampler, runner and store.

pub mod factor;
pub mod file;
pub mod metrics;
pub mod plan;
pub mod prepare;
pub mod queue_knobs;
pub mod run;
pub mod system_knobs;

pub use factor::{Factor, FactorKind, IrqPlacement, Level, LevelValue, Pinning};
pub use file::{load, parse, Experiment, ExperimentError, Repetitions, TargetDevice, TargetSpec};
pub use plan::{cells, Cell, PlannedRun, Planner};

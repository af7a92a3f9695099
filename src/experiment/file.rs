//! The experiment file (TOML): what to run, where, how often, and what to vary. Everything is
//! checked here, before anything runs: unknown keys, empty or duplicate levels, impossible knob
//! values, placements that are not placements, fio options that run code or bypass iolab's
//! checks. Every problem is reported at once, each with file:line:column and what is allowed,
//! because a user fixing a file wants the whole list, not one error per attempt. Whether this
//! machine can realise a level (a scheduler that is not loaded, no IRQ to be `on`) is decided
//! later, at plan time, by the machine model.
//!
//! ```toml
//! name = "rq_affinity vs placement"
//! seed = 42
//! repetitions = 5              # or { target_ci = 0.02, min = 3, max = 30 }
//! warmup = true                # one run per cell before its first, stored as a warm-up
//!                              # and left out of every figure
//! split_cpus = false           # true: one CPU of the placement per fio job clone
//! trace = true                 # record and analyse a block trace of each measured run
//! # [trace]                    # the same, with a cap on the traces kept (instead of trace = true)
//! # keep = "first"             # "all" (default), "first" run of each cell, or "none"
//! # keep_max = "500M"          # keep no more once the kept traces would pass this size
//! [target]
//! device = "default"           # a scratch loop device on /dev/shm; or "nvme0n1"
//! count = 1                    # how many scratch devices (driven at once)
//! # device = ["sdb", "sdc"]    # several named devices, driven at once by one fio run
//! size = "1G"
//! anchor_cpu = 0               # stands in for the interrupt CPU of a device without one
//! # hosts = ["10.0.0.1", "10.0.0.2,8765"]  # fio servers that all run the job at once
//! [workload]                   # plain fio options
//! # job = "my.fio"             # or a fio job file (workload/job_file.rs); options here override it
//! rw = "randread"
//! bs = "4k"
//! [factors]
//! rq_affinity = [0, 1, 2]
//! placement = ["on", "near", "far"]
//! ```
//!
//! One file per table under `file/`, each an `impl Walker` block beside the types it builds
//! and its unit tests; `walker` holds what they share.

use std::path::Path;

use crate::workload::job_file;

mod engine_table;
mod factors_table;
mod host_table;
mod prepare_table;
mod repetitions;
mod stabilise_table;
mod target_table;
#[cfg(test)]
mod test_support;
mod top_level;
mod trace_table;
mod walker;
mod workload_table;

pub(crate) use host_table::{
    fio_address_problem, fio_endpoint, fio_family, fio_server_key, HostSpec, IpFamily, FIO_PORT,
};
pub(crate) use repetitions::Repetitions;
pub(crate) use stabilise_table::Stabilise;
pub use target_table::TargetDevice;
pub(crate) use target_table::TargetSpec;
pub(crate) use top_level::parse_with;
pub use top_level::Experiment;
pub(crate) use trace_table::{
    KeepRuns, TraceSettings, BUFFER_KB_MAX, BUFFER_KB_MIN, DEFAULT_BUFFER_KB,
};
pub use walker::ExperimentError;
use walker::{flat_entries, integer, scalar_text, type_name, Value, Walker};
pub(crate) use walker::{parse_size, Diagnostic};

/// Reads and validates an experiment file; its job file may read no environment variable.
pub fn load(path: &Path) -> Result<Experiment, ExperimentError> {
    load_with_env(path, &[])
}

/// Reads and validates an experiment file whose job file may read the environment variables
/// `env` (`--job-env`).
pub fn load_with_env(path: &Path, env: &[String]) -> Result<Experiment, ExperimentError> {
    let source = path.display().to_string();
    let text = crate::sys::user_file::read_text(path).map_err(|e| ExperimentError {
        source_name: source.clone(),
        diagnostics: vec![Diagnostic {
            line: 0,
            column: 0,
            message: format!("cannot read the experiment file: {e}"),
            allowed: None,
        }],
    })?;
    parse_with(&source, &text, &job_file::Disk::beside(path, env))
}

/// Validates an experiment given as text; `source` names it in messages. Reads nothing: a
/// `[workload] job` file is refused (see `parse_with`).
pub fn parse(source: &str, text: &str) -> Result<Experiment, ExperimentError> {
    parse_with(source, text, &job_file::NoFiles)
}

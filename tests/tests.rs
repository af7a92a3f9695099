//! The one integration-test binary (one link on 2 cores). One module per area, through the
//! built `iolab` binary or the library; `common` holds the root check and scratch devices.

mod align;
mod answers;
mod answers_db;
mod cli_basics;
mod common;
mod engines;
mod experiment;
mod fio_client;
mod fio_safety;
mod fuzz;
mod hosts;
mod inspect;
mod irq;
mod job_file;
mod knobs;
mod lab;
mod messages;
mod preflight;
mod run;
mod snapshot;
mod stats;
mod stopped_runs;
mod store;
mod target;
mod trace;
mod workload;

//! The one integration-test binary (one link on 2 cores). Each module tests one command
//! end to end through the built `iolab` binary.

mod answers;
mod answers_db;
mod cli_basics;
mod common;
mod experiment;
mod inspect;
mod knobs;
mod preflight;
mod run;
mod snapshot;
mod stats;
mod store;
mod target;
mod trace;
mod workload;

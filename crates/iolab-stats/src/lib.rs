//! Statistics that decide whether a difference between measurements is real.
//!
//! A table of means is not an answer (case 0, case 4): every number iolab shows carries
//! its spread and a confidence interval, every comparison a p-value, an effect-size CI and a
//! verdict that says `~` when the data cannot tell. This crate works on plain `&[f64]`
//! vectors so the store, the commands and the tests can all feed it without a database; it
//! depends on nothing else of iolab (which way a metric is better comes from iolab's metric
//! registry, as a `Direction`), and iolab re-exports it as `iolab::stats`.
//! Reference values for every routine here come from scipy (see iolab's
//! `scripts/make-stats-fixtures.py`, `tests/fixtures/stats/` and `tests/stats.rs`).

// Everything `pub` is reachable from outside the crate; internals say `pub(crate)`.
#![warn(unreachable_pub)]

pub mod across;
pub mod adaptive;
pub mod bootstrap;
pub mod compare;
pub mod direction;
pub mod distributions;
pub mod error;
pub mod fdr;
pub mod histogram;
pub mod mann_whitney;
pub mod order;
pub mod paired;
pub mod resolution;
pub mod student_t;
pub mod summary;
pub mod welch;

pub use across::{across_cells, AcrossCells};
pub use adaptive::{AdaptiveRule, CellProgress, CellStatus};
pub use compare::{compare, CompareOptions, Comparison, Verdict};
pub use direction::Direction;
pub use error::StatsError;
pub use fdr::benjamini_hochberg;
pub use histogram::LatencyHistogram;
pub use mann_whitney::{mann_whitney_u, MannWhitney, MwuMethod};
pub use paired::{paired_change, PairedChange};
pub use resolution::Resolution;
pub use summary::{summarize, summarize_buckets, Summary};
pub use welch::{welch_t_test, Welch};

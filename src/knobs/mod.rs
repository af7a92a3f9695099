//! Changing kernel knobs safely: block-queue attributes (scheduler, rq_affinity, nr_requests,
//! read_ahead_kb, ...) and IRQ affinities are written only through a `Journal`, which records
//! each old value on disk first and puts everything back on drop, on error, on Ctrl-C/SIGTERM
//! (see `signals`) and, after a hard kill, through `iolab restore`.

mod attr;
mod journal;
pub mod signals;

pub use attr::{
    choices, current_choice, explain_write_error, probe_rewrite, read_attr, write_attr,
};
pub use journal::{pending, replay, state_dir, Journal, JournalEntry, RestoreReport};

/// Sysfs path of one block-queue attribute of a device ("loop0", "nr_requests").
pub fn queue_attr_path(device: &str, attr: &str) -> String {
    format!("/sys/block/{device}/queue/{attr}")
}

/// Path of an interrupt's CPU affinity list.
pub fn irq_affinity_path(irq: u32) -> String {
    format!("/proc/irq/{irq}/smp_affinity_list")
}

#[derive(Debug, thiserror::Error)]
pub enum KnobError {
    #[error("{path}: cannot read the current value: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: cannot write {value:?}: {why}")]
    Write {
        path: String,
        value: String,
        why: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    State {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: journal is not valid JSON ({message}); inspect it, restore the listed knobs by hand, then delete it")]
    Corrupt {
        path: String,
        line: usize,
        message: String,
    },
    #[error("{path}: {count} knob change(s) by an earlier iolab (pid {pid}) were never restored; run `iolab restore` first")]
    Unrestored {
        path: String,
        pid: u32,
        count: usize,
    },
    #[error("{path}: another iolab is changing knobs right now; wait for it to finish (or stop it) first")]
    Busy { path: String },
    #[error("some knobs could not be restored (they stay in the journal; fix the cause and run `iolab restore`):\n  {}", errors.join("\n  "))]
    RestoreFailed { errors: Vec<String> },
}

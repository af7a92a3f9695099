//! Changing kernel knobs safely: block-queue attributes (scheduler, rq_affinity, nr_requests,
//! read_ahead_kb, ...) and IRQ affinities are written only through a `Journal`, which records
//! each old value on disk first and puts everything back on drop, on error, on Ctrl-C/SIGTERM
//! (see `signals`) and, after a hard kill, through `iolab restore`.

mod attr;
pub(crate) mod disk_identity;
mod irq_move;
mod journal;
pub(crate) mod kinds;
pub(crate) mod leftovers;
mod linked;
mod sched_module;
pub mod signals;
mod smt;

pub(crate) use attr::write_attr;
pub use attr::{current_choice, probe_rewrite, read_attr};
pub(crate) use journal::{
    in_use, machine_locks, replay, replay_if, root_of, trusted_state_dir, undone_if_killed,
    JournalEntry, RestoreReport, TRACER_DIR,
};
pub use journal::{pending, pending_under, state_dir, Journal};

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
    #[error("{path}:{line}: the journal cannot be read ({message}); nothing was restored from it: restore the knobs it lists by hand (`cat -v {path}` shows them), then delete {path}")]
    Corrupt {
        path: String,
        line: usize,
        message: String,
    },
    #[error("{path}: {}", unrestored_text(*pid, *count))]
    Unrestored {
        path: String,
        pid: u32,
        count: usize,
    },
    #[error("{path}: another iolab{holder} is changing knobs (or recording a block trace) with this state directory right now; wait for it to finish (or stop it), or give this one a state directory of its own (IOLAB_STATE_DIR=DIR iolab ...): devices, interrupts and the tracer stay locked machine-wide whatever the state directory")]
    Busy { path: String, holder: String },
    #[error("{path}: refused: {why}; iolab writes nothing there (a journal entry naming it was forged or damaged)")]
    Refused { path: String, why: String },
    #[error("{path}: this journal holds changes under root {theirs}, not {ours}; restore it first (`iolab restore` or `iolab irq rollback`)")]
    OtherRoot {
        path: String,
        theirs: String,
        ours: String,
    },
    #[error("{path}: wrote {value:?}, but it reads {now:?} once the knobs written after it are in place, also when written again (the kernel changes it when one of them is written)")]
    Changed {
        path: String,
        value: String,
        now: String,
    },
    #[error("{path}: wrote {value:?}, but the kernel keeps {now:?} (it clamps or rounds what it is given): what would run is not the level asked for; use a value it keeps as written")]
    NotHeld {
        path: String,
        value: String,
        now: String,
    },
    #[error("not used as iolab's state directory: {why}. iolab trusts what it keeps there (it writes journaled values back, stops processes and detaches loop devices it finds named there), so it must be a directory of iolab's user that nobody else can write to or replace; choose another (IOLAB_STATE_DIR=DIR)")]
    UntrustedState { why: String },
    #[error(transparent)]
    Machine(#[from] crate::sys::lock::LockError),
    #[error("some knobs could not be restored (they stay in the journal; fix the cause and run `iolab restore`):\n  {}", errors.join("\n  "))]
    RestoreFailed { errors: Vec<String> },
}

/// What a journal left by a killed iolab holds, for the refusal to run beside it.
fn unrestored_text(pid: u32, count: usize) -> String {
    if count == 0 {
        format!(
            "an earlier iolab (pid {pid}) was killed before it finished (it had changed no knob \
             yet); run `iolab restore` first, which cleans up what it left"
        )
    } else {
        format!(
            "{count} knob change(s) by an earlier iolab (pid {pid}) were never restored; run \
             `iolab restore` first"
        )
    }
}

impl KnobError {
    /// The same error naming `shown` instead of the file it was about (a resolved sysfs path
    /// is not what the user asked for: `/sys/block/loop0/...` is).
    pub(crate) fn naming(self, shown: &str) -> KnobError {
        match self {
            KnobError::Read { source, .. } => KnobError::Read {
                path: shown.to_string(),
                source,
            },
            KnobError::Write {
                value, why, source, ..
            } => KnobError::Write {
                path: shown.to_string(),
                value,
                why,
                source,
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run killed before its first knob write left a journal of none: "0 knob change(s)
    /// were never restored" read as nothing to do.
    #[test]
    fn a_journal_of_no_change_says_what_restore_is_for() {
        let text = |count| {
            KnobError::Unrestored {
                path: "j".into(),
                pid: 7,
                count,
            }
            .to_string()
        };
        assert!(
            text(0).contains("(pid 7) was killed before it finished"),
            "{}",
            text(0)
        );
        assert!(!text(0).contains("0 knob"), "{}", text(0));
        assert!(text(3).contains("3 knob change(s) by an earlier iolab (pid 7)"));
    }
}

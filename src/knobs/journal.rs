//! The promise "knobs always come back" rests on this file. Before a knob is written, its old
//! value is added to a journal on disk (written to a temporary file, fsynced, renamed over the
//! old journal, directory fsynced), so that whatever happens next — an error, Ctrl-C, SIGTERM,
//! SIGKILL, a power cut — the machine's original settings are recorded somewhere durable.
//! A `Journal` restores in reverse order when it is dropped or `restore` is called; after a
//! hard kill, `iolab restore` replays the file (`replay`).
//!
//! The whole journal is rewritten atomically on every change instead of appended to: it holds
//! a handful of entries, and rewriting means a failed write can be taken back out (a knob the
//! kernel refused must not be "restored" later — a managed IRQ would refuse that too) and a
//! torn half-line can never exist. A lock file (flock) marks the journal as owned by a live
//! process, so `iolab restore` cannot undo knobs under a running experiment.
//!
//! Entries hold live paths (`/sys/block/loop0/queue/scheduler`) and the journal records the
//! root it writes under (a fixture tree in tests), so the journal maps paths itself. A journal
//! is only a file, so nothing in it is trusted: every path is checked against `kinds` when set
//! and again when restored, and an entry that fails is refused, named, and not written. The
//! journal also holds the machine-wide lock (`sys::lock`) of every device and IRQ it changes
//! until it has put them back.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::attr::{read_attr, retry_while_busy, write_attr, BUSY_PATIENCE};
use super::disk_identity;
use super::irq_move;
use super::kinds::{self, Located};
use super::linked::{dependents_of, elevator_settings, linked_restore, take_linked};
use super::sched_module;
use super::KnobError;
use crate::sys::lock::{self, MachineLock};
use crate::sys::SysRoot;

/// Where iolab keeps state that must survive a crash: `$IOLAB_STATE_DIR`, else /var/lib/iolab.
pub fn state_dir() -> PathBuf {
    match std::env::var_os("IOLAB_STATE_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from("/var/lib/iolab"),
    }
}

const JOURNAL: &str = "journal.json";
/// Where in the state directory a block trace recording journals the tracefs settings it
/// changes: apart from the knobs', since an experiment holds both journals at once.
pub(crate) const TRACER_DIR: &str = "tracer";
const LOCK: &str = "journal.lock";

/// One knob change: enough to undo it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// The live path (`/sys/block/loop0/queue/scheduler`), under the journal's root.
    pub path: String,
    pub old: String,
    pub new: String,
    pub(crate) time_unix: f64,
    /// The scheduler module the kernel loaded when this write selected a scheduler that was
    /// not loaded; restore unloads it again once the old scheduler is back (`sched_module`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) loaded_module: Option<String>,
    /// For an interrupt's affinity: the handlers it served when journaled
    /// (`irq_move::serving`). Restore leaves a number that serves none of them now alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) serving: Option<String>,
    /// For a block-queue knob: the disk it belonged to (`disk_identity`). Restore leaves a
    /// name that another disk has now alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) disk: Option<String>,
    /// An interrupt's first step back (its old CPU) that a restore is writing or wrote, its
    /// mask not yet back: kept until then, so that a restore cut short, which left the
    /// interrupt on that CPU, is finished by the next one. Without it, the old CPU read at
    /// restore is someone else's pin (on a 2-CPU machine, every value is some entry's).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) restoring: bool,
}

/// The file's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct JournalFile {
    pid: u32,
    started_unix: f64,
    /// The machine root the paths lie under; absent (journals before it was recorded) = "/".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    root: Option<String>,
    /// The kernel's boot id when the journal was begun on this machine (absent under a
    /// machine tree, and in journals before it was recorded): see [`from_earlier_boot`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    boot_id: Option<String>,
    /// An interrupt placement journal (`Journal::placements_only`), whose changes stay in
    /// effect after iolab exits: restore leaves an affinity someone changed since.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    placements: bool,
    /// Placements an `iolab irq daemon` without `--keep` made: they end with it, so when it
    /// was killed `iolab restore` puts them back (`Journal::undone_if_killed`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    undo_if_killed: bool,
    entries: Vec<JournalEntry>,
}

impl JournalFile {
    /// Everything but the entries, to write the entries left under.
    fn header(&self) -> JournalFile {
        JournalFile {
            pid: self.pid,
            started_unix: self.started_unix,
            root: self.root.clone(),
            boot_id: self.boot_id.clone(),
            placements: self.placements,
            undo_if_killed: self.undo_if_killed,
            entries: Vec::new(),
        }
    }
}

/// This boot's id, if the kernel says.
fn current_boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Whether a journal of this machine was written in an earlier boot. Its changes are gone
/// then: /sys and /proc are the running kernel's, so the reboot put every knob back, and its
/// IRQ numbers and device names may now be other things'. Nothing of it is to be written.
fn from_earlier_boot(file: &JournalFile) -> bool {
    file.root.is_none()
        && matches!((&file.boot_id, current_boot_id()), (Some(then), Some(now)) if *then != now)
}

/// An entry restore would not write, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RefusedEntry {
    pub(crate) entry: JournalEntry,
    pub(crate) why: String,
}

/// What a restore did.
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
pub struct RestoreReport {
    /// Knobs written back to their old value, in the order they were restored.
    pub restored: Vec<JournalEntry>,
    /// Knobs whose file no longer exists (the device went away): nothing left to restore.
    pub vanished: Vec<JournalEntry>,
    /// Entries naming a file iolab never changes (a forged or damaged journal): not written.
    pub(crate) refused: Vec<RefusedEntry>,
    /// Changes of a journal from an earlier boot: the reboot put them back, nothing written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) reset_by_reboot: Vec<JournalEntry>,
    /// Intermediate steps that could not be written but an older entry of the same file
    /// (restored after them) puts right: an interrupt's old CPU that went offline.
    pub(crate) superseded: Vec<JournalEntry>,
    /// Scheduler modules the kernel loaded for iolab's writes, unloaded again.
    pub(crate) modules_unloaded: Vec<String>,
    /// Those left loaded, and why.
    pub(crate) modules_kept: Vec<KeptModule>,
    /// Interrupt affinities of a placement journal that someone changed since iolab's last
    /// write (neither what iolab wrote nor what it found): left as they are, newest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) changed_since: Vec<ChangedSince>,
    /// Knobs someone else changed while iolab held them (they read neither what iolab set nor
    /// what it found): put back all the same, as every knob of an experiment is, and said.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) overridden: Vec<Overridden>,
    /// The CPUs each interrupt put back is delivered to once restored (its effective
    /// affinity), by affinity file.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) delivered: BTreeMap<String, String>,
}

/// A knob that read another value than iolab had set when it was put back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Overridden {
    pub(crate) path: String,
    /// What iolab had written.
    pub(crate) set: String,
    /// What it read instead, and replaced.
    pub(crate) found: String,
}

/// An affinity restore left alone: what it reads now, and the entries of its file, newest
/// first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ChangedSince {
    pub(crate) now: String,
    pub(crate) entries: Vec<JournalEntry>,
}

impl ChangedSince {
    /// "PATH = NOW: changed since iolab set NEW, not written (it was OLD before iolab)".
    pub(crate) fn describe(&self) -> String {
        let (newest, oldest) = (&self.entries[0], &self.entries[self.entries.len() - 1]);
        format!(
            "{} = {}: changed since iolab set {}, not written (it was {} before iolab)",
            newest.path, self.now, newest.new, oldest.old
        )
    }
}

/// A scheduler module restore left loaded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct KeptModule {
    pub(crate) module: String,
    pub(crate) why: String,
}

/// A live journal owned by this process: every knob change goes through `set`.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    root: SysRoot,
    file: JournalFile,
    _lock: File,
    /// Machine-wide locks of what this journal changes; released after the restore.
    held: Vec<MachineLock>,
    finished: bool,
    /// An interrupt moved again keeps only its first entries (`placements_only`).
    placements_only: bool,
}

impl Journal {
    /// Refuses to go on when a journal from an earlier run in `dir` was never restored (that
    /// run was killed): its knobs may still be changed, and a new run would record the changed
    /// values as the "originals".
    pub fn check_clean_in(dir: &Path) -> Result<(), KnobError> {
        // A journal whose owner is alive is not a leftover: say so instead of "run restore".
        if dir.join(JOURNAL).exists() && dir.join(LOCK).exists() {
            drop(take_lock(dir)?);
        }
        Self::unrestored(dir)
    }

    /// What [`Journal::check_clean_in`] would refuse, read only, for a dry run: nothing is
    /// locked (a run starting beside it must not find the lock taken) and nothing removed. A
    /// journal of a running iolab, or of an earlier boot, is no leftover.
    pub fn leftover_in(dir: &Path) -> Option<KnobError> {
        let path = dir.join(JOURNAL);
        let j = read_journal(&path).ok()??;
        if from_earlier_boot(&j) || crate::sys::process::still_running(j.pid, None) {
            return None;
        }
        Some(KnobError::Unrestored {
            path: path.display().to_string(),
            pid: j.pid,
            count: j.entries.len(),
        })
    }

    /// The pid of a running iolab whose journal is in `dir`, read only (for a dry run).
    pub fn live_owner_in(dir: &Path) -> Option<u32> {
        let j = read_journal(&dir.join(JOURNAL)).ok()??;
        (!from_earlier_boot(&j) && crate::sys::process::still_running(j.pid, None)).then_some(j.pid)
    }

    fn unrestored(dir: &Path) -> Result<(), KnobError> {
        let path = dir.join(JOURNAL);
        match read_journal(&path)? {
            None => Ok(()),
            Some(j) if from_earlier_boot(&j) => {
                remove_journal(dir)?;
                say!(
                    "iolab: note: {} listed {} change(s) made before the machine rebooted; the \
                     reboot put them back, so it was removed",
                    path.display(),
                    j.entries.len()
                );
                Ok(())
            }
            Some(j) => Err(KnobError::Unrestored {
                path: path.display().to_string(),
                pid: j.pid,
                count: j.entries.len(),
            }),
        }
    }

    /// Starts a journal for this machine in the default state directory.
    pub fn begin() -> Result<Journal, KnobError> {
        Journal::begin_in(&state_dir())
    }

    /// Starts a journal for this machine in `dir`.
    pub fn begin_in(dir: &Path) -> Result<Journal, KnobError> {
        Journal::begin_at(dir, &SysRoot::live())
    }

    /// Starts a journal in `dir` (created if needed) for knobs under `root`. Fails if an
    /// unrestored journal exists or another process holds the lock.
    pub fn begin_at(dir: &Path, root: &SysRoot) -> Result<Journal, KnobError> {
        let dir = &trusted_state_dir(dir)?;
        let lock = take_lock(dir)?;
        Self::unrestored(dir)?;
        let mut j = Journal {
            dir: dir.to_path_buf(),
            root: root.clone(),
            file: JournalFile {
                pid: std::process::id(),
                started_unix: crate::store::time::now_unix(),
                root: root_field(root),
                boot_id: root.is_live().then(current_boot_id).flatten(),
                placements: false,
                undo_if_killed: false,
                entries: Vec::new(),
            },
            _lock: lock,
            held: Vec::new(),
            finished: false,
            placements_only: false,
        };
        j.persist()?;
        Ok(j)
    }

    /// Takes over the journal in `dir` to add to it, keeping the entries an earlier process
    /// left there (a placement applied to stay, e.g. by `iolab irq apply`): a later restore
    /// then goes all the way back to the values before the first change. Fails if another
    /// live process holds the lock, or the journal was written for another root.
    pub fn resume_at(dir: &Path, root: &SysRoot) -> Result<Journal, KnobError> {
        let dir = &trusted_state_dir(dir)?;
        let lock = take_lock(dir)?;
        let path = dir.join(JOURNAL);
        // A placement kept from an earlier boot is gone with it.
        let earlier = read_journal(&path)?.filter(|e| !from_earlier_boot(e));
        if let Some(e) = &earlier {
            let theirs = e.root.as_deref().unwrap_or("/");
            if Path::new(theirs) != root.base() {
                return Err(KnobError::OtherRoot {
                    path: path.display().to_string(),
                    theirs: theirs.to_string(),
                    ours: root.base().display().to_string(),
                });
            }
        }
        let mut j = Journal {
            dir: dir.to_path_buf(),
            root: root.clone(),
            file: JournalFile {
                pid: std::process::id(),
                started_unix: earlier
                    .as_ref()
                    .map_or_else(crate::store::time::now_unix, |e| e.started_unix),
                root: root_field(root),
                boot_id: root.is_live().then(current_boot_id).flatten(),
                placements: earlier.as_ref().is_some_and(|e| e.placements),
                // Whoever takes the journal over says again (a later `irq apply` keeps all).
                undo_if_killed: false,
                entries: earlier.map(|e| e.entries).unwrap_or_default(),
            },
            _lock: lock,
            held: Vec::new(),
            finished: false,
            placements_only: false,
        };
        j.persist()?;
        Ok(j)
    }

    /// For the interrupt placement journal (`irq apply`, `irq daemon`), which records where
    /// interrupts were found, not each move: an interrupt moved again keeps only its first
    /// entries, the last taking the new value. The daemon moves some at every look; one
    /// entry per move grew its journal without end and made restore replay every placement
    /// in between, each waiting for the move to settle. An experiment's journal keeps every
    /// write (its run reports them).
    ///
    /// Its restore also leaves an affinity that someone changed since iolab's last write:
    /// the placement stays after iolab exits, and an administrator's later pin is theirs.
    pub(crate) fn placements_only(&mut self) {
        self.placements_only = true;
        self.file.placements = true;
    }

    /// Marks the placements as ending with their owner (a daemon without `--keep`): should it
    /// be killed, `iolab restore` puts them back instead of leaving them in effect.
    pub(crate) fn undone_if_killed(&mut self) -> Result<(), KnobError> {
        self.file.undo_if_killed = true;
        self.persist()
    }

    /// Hands the journal machine-wide locks its owner took up front (before creating
    /// anything); `set` takes any other it needs itself. They are released after the restore.
    pub(crate) fn hold(&mut self, locks: Vec<MachineLock>) {
        self.held.extend(locks);
    }

    /// Takes the machine-wide locks of `resources` this journal does not hold yet, until it
    /// ends: a device driven with no knob of its own set is still in use.
    pub(crate) fn lock(
        &mut self,
        resources: impl IntoIterator<Item = lock::Resource>,
    ) -> Result<(), KnobError> {
        let new: Vec<_> = resources
            .into_iter()
            .filter(|r| !self.held.iter().any(|l| l.resource() == r))
            .collect();
        if !new.is_empty() {
            self.held.extend(machine_locks(&self.root, &self.dir, new)?);
        }
        Ok(())
    }

    /// Ends this process's hold on the journal without restoring: the changes stay in effect
    /// and on disk, for a later `resume_at` + `restore`, or `replay`.
    pub fn keep(mut self) {
        self.finished = true;
    }

    /// The journal file's path.
    pub(crate) fn path(&self) -> PathBuf {
        self.dir.join(JOURNAL)
    }

    /// The changes made so far, oldest first.
    pub fn entries(&self) -> &[JournalEntry] {
        &self.file.entries
    }

    /// Sets the attribute at `path` (a live path of a kind in `kinds::KINDS`, mapped under the
    /// journal's root) to `value`, journaling the old value first. Returns the old value.
    /// Writing the value it already has is still journaled, so restore stays a plain reverse
    /// replay.
    pub fn set(&mut self, path: &str, value: &str) -> Result<String, KnobError> {
        let file = self.locate(path)?;
        let resource = kinds::classify(path)
            .map_err(|why| refused(path, why))?
            .resource;
        // Switching SMT off rewrites the masks of interrupts pinned to the CPUs it takes
        // offline: they are iolab's changes too, so their locks are taken as for a write.
        let broken = super::smt::masks_broken_by(&self.root, path, value);
        let mut resources = vec![resource];
        for p in &broken {
            resources.push(kinds::classify(p).map_err(|why| refused(p, why))?.resource);
        }
        self.lock(resources)?;
        let shown = self.shown(path);
        let old = read_attr(&file).map_err(|e| e.naming(&shown))?;
        let mark = self.file.entries.len();
        // Switching the elevator resets nr_requests to the new elevator's default (and bfq
        // turns writeback throttling off). Journal their current values *before* the scheduler
        // entry, so the reverse replay rewrites them after the old scheduler is back.
        let discarded = elevator_settings(&self.root, path);
        for dependent in dependents_of(path)
            .into_iter()
            .chain(discarded)
            .chain(broken)
        {
            let Ok(f) = self.locate(&dependent) else {
                continue;
            };
            if let Ok(now) = read_attr(&f) {
                self.file.entries.push(JournalEntry {
                    serving: irq_move::serving(&self.root, &dependent),
                    disk: disk_identity::of(&self.root, &dependent),
                    restoring: false,
                    path: dependent,
                    old: now.clone(),
                    new: now,
                    time_unix: crate::store::time::now_unix(),
                    loaded_module: None,
                });
            }
        }
        // A block-queue value the kernel prints but will not take back (a discard_max_bytes
        // that is no multiple of discard_granularity) would leave the knob changed for good:
        // found out by writing the value it has now, before changing it.
        // Not the scheduler: writing the elevator a queue has starts it afresh (resetting
        // nr_requests), and an elevator's name is taken back while its module is loaded.
        if path.contains("/queue/") && !path.ends_with("/scheduler") && self.root.is_live() {
            if let Err(e) = write_attr(&file, &old) {
                self.file.entries.truncate(mark);
                return Err(refused(
                    path,
                    format!(
                        "the kernel refuses its own value {old:?} written back ({e}), so iolab \
                         could not put it back after the run; leave this knob out"
                    ),
                ));
            }
        }
        // An interrupt is put back in two writes, replayed in reverse: first to the CPU it was
        // delivered to, then to its old mask. x86 keeps an interrupt's target when a new mask
        // still holds it, so the mask alone would leave it on the CPU iolab moved it to
        // (the second write waits for the first move to happen: `irq_move::settle`).
        // Only the first change of an interrupt needs it: restore ends with that one's entries.
        // The effective file is only read, so not a kind of knob: mapped under the root.
        let mut first = old.clone();
        let seen = self.file.entries.iter().any(|e| e.path == path);
        let serving = irq_move::serving(&self.root, path);
        // A placement journal's interrupt moved again: its first entries already put it back
        // where it was found (`placements_only`).
        if self.placements_only && seen && irq_move::effective_of(path).is_some() {
            self.file.entries.truncate(mark);
            let last = self
                .file
                .entries
                .iter()
                .rposition(|e| e.path == path)
                .expect("seen above");
            let before = std::mem::replace(&mut self.file.entries[last].new, value.to_string());
            self.finished = false;
            self.persist()?;
            if let Err(e) = settle_then_write(self.root.is_live(), Path::new(&file), value) {
                self.file.entries[last].new = before;
                self.persist()?;
                return Err(e.naming(&shown));
            }
            return Ok(old);
        }
        if let Some(effective) = irq_move::effective_of(path)
            .map(|(_, e)| e)
            .filter(|_| !seen)
            .map(|e| self.root.path(&e))
        {
            match read_attr(&effective.display().to_string()) {
                Ok(eff) if !eff.is_empty() && eff != old => {
                    self.file.entries.push(JournalEntry {
                        path: path.to_string(),
                        old: old.clone(),
                        new: old.clone(),
                        time_unix: crate::store::time::now_unix(),
                        loaded_module: None,
                        serving: serving.clone(),
                        disk: None,
                        restoring: false,
                    });
                    first = eff;
                }
                _ => {}
            }
        }
        // A journal used again after `restore` is live again: Drop must restore the new changes.
        self.finished = false;
        self.file.entries.push(JournalEntry {
            path: path.to_string(),
            old: first,
            new: value.to_string(),
            time_unix: crate::store::time::now_unix(),
            loaded_module: sched_module::loaded_by(&self.root, path, value),
            serving,
            disk: disk_identity::of(&self.root, path),
            restoring: false,
        });
        self.persist()?;
        if let Err(e) = settle_then_write(self.root.is_live(), Path::new(&file), value) {
            // The knob did not change: take the entries back so restore never tries to write
            // it, after putting back what the attempt (or the check above) may have reset.
            for dependent in self.file.entries[mark..]
                .iter()
                .rev()
                .filter(|d| d.path != path)
            {
                if let Ok(f) = self.locate(&dependent.path) {
                    let _ = write_attr(&f, &dependent.old);
                }
            }
            self.file.entries.truncate(mark);
            self.persist()?;
            return Err(e.naming(&shown));
        }
        self.record_what_it_reads(path)?;
        Ok(old)
    }

    /// Makes the newest entry of `path` hold what the knob reads after iolab's write, when
    /// that differs from what was written: the kernel may keep another value (tracefs keeps
    /// `buffer_size_kb` in whole pages: 65536 written reads 65538), and a restore that compared
    /// with the written one said someone had changed it meanwhile. Only a plain attribute (a
    /// read may not block), and not an interrupt (its mask reads back in another form, and the
    /// placement journal's entries hold what iolab wrote).
    fn record_what_it_reads(&mut self, path: &str) -> Result<(), KnobError> {
        let file = self.locate(path)?;
        if path.starts_with("/proc/irq/") || !Path::new(&file).is_file() {
            return Ok(());
        }
        let Ok(now) = read_attr(&file) else {
            return Ok(());
        };
        match self.file.entries.last_mut() {
            Some(e) if e.path == path && e.new.trim() != now.trim() => {
                e.new = now;
                self.persist()
            }
            _ => Ok(()),
        }
    }

    /// Sets each `(path, value)` in order, then checks that each still reads as it did right
    /// after its own write: a later write can change an earlier knob (switching the scheduler
    /// resets `nr_requests`; some kernels reset `read_ahead_kb` when a queue limit is
    /// written), and what runs must be what was asked for. A knob changed that way is
    /// written again, once. A value the kernel took but keeps as another (mq-deadline's
    /// `fifo_batch` of -8 reads 0, a `read_ahead_kb` of 5 reads 4) is an error: results
    /// stored under the level asked for would be another's. Returns the paths written again.
    pub fn set_all<'a>(
        &mut self,
        writes: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Vec<String>, KnobError> {
        let mut written: Vec<(&str, &str, String)> = Vec::new();
        for (path, value) in writes {
            self.set(path, value)?;
            // A knob written twice (an interrupt moved to its CPU, then given its mask) is
            // held to its last value.
            written.retain(|(p, _, _)| *p != path);
            let now = self.read(path)?;
            if !super::attr::keeps(path, value, &now) {
                return Err(KnobError::NotHeld {
                    path: self.shown(path),
                    value: value.to_string(),
                    now: super::current_choice(&now),
                });
            }
            written.push((path, value, now));
        }
        let mut again = Vec::new();
        for (path, value, after) in &written {
            if self.read(path)? != *after {
                self.set(path, value)?;
                again.push(path.to_string());
            }
        }
        for (path, value, after) in &written {
            let now = self.read(path)?;
            if now != *after {
                return Err(KnobError::Changed {
                    path: self.shown(path),
                    value: value.to_string(),
                    now,
                });
            }
        }
        Ok(again)
    }

    /// What the knob at a valid live path reads now (under the journal's root).
    fn read(&self, path: &str) -> Result<String, KnobError> {
        read_attr(&self.locate(path)?).map_err(|e| e.naming(&self.shown(path)))
    }

    /// The file behind a valid live path; a missing one is a read error naming it.
    fn locate(&self, path: &str) -> Result<String, KnobError> {
        match kinds::locate(self.root.base(), path).map_err(|why| refused(path, why))? {
            Located::File(f) => Ok(f.display().to_string()),
            Located::Missing => Err(KnobError::Read {
                path: self.shown(path),
                source: std::io::ErrorKind::NotFound.into(),
            }),
        }
    }

    /// How a path is named in messages: as is on this machine, else where it is on disk.
    fn shown(&self, path: &str) -> String {
        if self.root.is_live() {
            path.to_string()
        } else {
            self.root.path(path).display().to_string()
        }
    }

    /// Writes every old value back, newest first, and removes the journal. Each successful
    /// restore is persisted before the next, so a kill half-way leaves an exact journal.
    /// Safe to call more than once.
    pub fn restore(&mut self) -> Result<RestoreReport, KnobError> {
        let header = self.file.header();
        let leave_changed = self.file.placements;
        let report = restore_entries(
            &self.root,
            &mut self.file.entries,
            leave_changed,
            |entries| {
                write_journal(
                    &self.dir,
                    &JournalFile {
                        entries: entries.to_vec(),
                        ..header.clone()
                    },
                )
            },
        )?;
        remove_journal(&self.dir)?;
        self.finished = true;
        Ok(report)
    }

    fn persist(&mut self) -> Result<(), KnobError> {
        write_journal(&self.dir, &self.file)
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        if !self.finished {
            if let Err(e) = self.restore() {
                say!("iolab: error: restoring knobs: {e}; run `iolab restore` to retry");
            }
        }
        // Changes still in effect (kept on purpose, or not restorable): the lock files keep
        // naming this journal, so no other iolab takes these devices or IRQs over unawares.
        if !self.file.entries.is_empty() {
            self.held.iter_mut().for_each(MachineLock::keep_record);
        }
    }
}

/// Takes the machine-wide locks of `resources` for the journal in `dir`: refused while
/// another iolab holds one, and while an iolab that was killed holding one left its journal
/// (in whatever state directory) unrestored — its entries may hold the original values, and
/// changing the knob now would record the changed value as the original.
pub(crate) fn machine_locks(
    root: &SysRoot,
    dir: &Path,
    resources: impl IntoIterator<Item = lock::Resource>,
) -> Result<Vec<MachineLock>, KnobError> {
    // Canonical: the same state directory reached through a symbolic link is still ours.
    let ours = dir
        .canonicalize()
        .or_else(|_| std::path::absolute(dir))
        .map_or_else(|_| dir.join(JOURNAL), |d| d.join(JOURNAL));
    Ok(lock::acquire_all_noting(
        root,
        resources,
        Some(&ours),
        &stale_journal,
    )?)
}

/// Why a dead holder's journal `theirs` blocks the lock, if it does.
fn stale_journal(pid: u32, theirs: &Path) -> Option<String> {
    if theirs.file_name()? != JOURNAL {
        return None;
    }
    let dir = theirs.parent()?;
    let left = match read_journal(theirs) {
        Ok(Some(j)) if !j.entries.is_empty() && !from_earlier_boot(&j) => j.entries.len(),
        Ok(_) => return None,
        Err(e) => {
            return Some(format!(
                "an iolab (pid {pid}) that was killed left a journal behind: {e}"
            ))
        }
    };
    // The placement journal of `irq apply` lives in STATE/irq and is undone by rollback;
    // a trace recording's, in STATE/tracer, by restore.
    let (state, command) = match dir.file_name().and_then(|n| n.to_str()) {
        Some("irq") => (dir.parent().unwrap_or(dir), "irq rollback"),
        Some(TRACER_DIR) => (dir.parent().unwrap_or(dir), "restore"),
        _ => (dir, "restore"),
    };
    Some(format!(
        "an iolab (pid {pid}) that is gone left {left} change(s) in {} unrestored, perhaps \
         this one's original value; put them back first: `IOLAB_STATE_DIR={} iolab {command}`",
        theirs.display(),
        state.display()
    ))
}

/// Creates a state directory (or a journal's directory in it) if needed and returns it
/// resolved, if it can be trusted ([`trusted`]). Resolved, a journal stays where it began
/// even if a link on the way is pointed elsewhere meanwhile (which left a journal of changes
/// already put back, for a later `restore` to write over newer values).
pub(crate) fn trusted_state_dir(dir: &Path) -> Result<PathBuf, KnobError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .map_err(|source| KnobError::State {
            path: dir.display().to_string(),
            source,
        })?;
    trusted(dir)
}

/// `dir`, an existing state directory, resolved, if nobody but iolab's user (and root) can
/// write to it or replace it. iolab trusts what it finds there: `restore` writes journaled
/// values back, stops processes working in a killed run's directory and detaches scratch
/// devices. A directory another user could write to would let them choose all three.
pub(crate) fn trusted(dir: &Path) -> Result<PathBuf, KnobError> {
    let resolved = dir.canonicalize().map_err(|source| KnobError::State {
        path: dir.display().to_string(),
        source,
    })?;
    match crate::sys::own_dir::untrusted_path(&resolved) {
        Some(why) => Err(KnobError::UntrustedState { why }),
        None => Ok(resolved),
    }
}

/// The `root` field: omitted for this machine, so journals stay readable by older iolabs.
fn root_field(root: &SysRoot) -> Option<String> {
    (!root.is_live()).then(|| root.base().display().to_string())
}

fn refused(path: &str, why: String) -> KnobError {
    KnobError::Refused {
        path: path.to_string(),
        why,
    }
}

/// The changes recorded in `dir`'s journal, oldest first (none when there is no journal).
/// Reads without the lock: a snapshot for reporting, not for restoring.
pub fn pending(dir: &Path) -> Result<Vec<JournalEntry>, KnobError> {
    Ok(pending_under(dir)?.1)
}

/// Whether the journal in `dir` is of an owner that was to put its placements back when it
/// stopped (`Journal::undone_if_killed`), whether it made any or not.
pub(crate) fn undone_if_killed(dir: &Path) -> bool {
    read_journal(&dir.join(JOURNAL))
        .ok()
        .flatten()
        .is_some_and(|j| j.undo_if_killed)
}

/// [`pending`], with the machine root its paths lie under ("/" for the live machine).
pub fn pending_under(dir: &Path) -> Result<(PathBuf, Vec<JournalEntry>), KnobError> {
    Ok(read_journal(&dir.join(JOURNAL))?
        .filter(|j| !from_earlier_boot(j))
        .map(|j| (PathBuf::from(j.root.as_deref().unwrap_or("/")), j.entries))
        .unwrap_or_else(|| (PathBuf::from("/"), Vec::new())))
}

/// The machine root the journal in `dir` names, for `iolab restore` to replay it under: this
/// machine's, or a fixture tree (a test's) that nobody but iolab's user could have changed
/// or replaced. A forged journal would otherwise have restore write its values into files of
/// a tree its forger made, and follow the links they put there.
pub(crate) fn root_of(dir: &Path) -> Result<SysRoot, KnobError> {
    let (base, _) = pending_under(dir)?;
    if base == Path::new("/") {
        return Ok(SysRoot::live());
    }
    let path = dir.join(JOURNAL).display().to_string();
    let why = match base.canonicalize() {
        Ok(resolved) if resolved == base => crate::sys::own_dir::untrusted_path(&base),
        Ok(_) => Some(format!("{} is not a resolved path", base.display())),
        Err(e) => Some(format!("{}: {e}", base.display())),
    };
    match why {
        Some(why) => Err(refused(
            &path,
            format!("the root its changes lie under: {why}"),
        )),
        None => SysRoot::at(&base).map_err(|e| refused(&path, e.to_string())),
    }
}

/// Replays an unrestored journal left by a killed run (what `iolab restore` does). `Ok(None)`
/// when there is nothing to restore. Takes the machine-wide lock of every device and IRQ the
/// journal names first: they are not restored under another iolab that is changing them now.
/// Only a journal of `root` (the live machine, but for tests) is replayed.
pub(crate) fn replay(dir: &Path, root: &SysRoot) -> Result<Option<RestoreReport>, KnobError> {
    replay_if(dir, root, |_| true)
}

/// [`replay`], of a journal whose owner marked it undone if killed (`undone_if_killed`) only
/// when `wanted` says so for that mark; decided under the journal's lock, so a process that
/// takes the journal over meanwhile is not undone in its place. A journal of an earlier boot
/// is dropped either way.
pub(crate) fn replay_if(
    dir: &Path,
    root: &SysRoot,
    wanted: impl Fn(bool) -> bool,
) -> Result<Option<RestoreReport>, KnobError> {
    let path = dir.join(JOURNAL);
    if !path.exists() {
        return Ok(None);
    }
    let dir = &trusted(dir)?;
    let path = dir.join(JOURNAL);
    let _lock = take_lock(dir)?;
    let Some(mut file) = read_journal(&path)? else {
        return Ok(None);
    };
    // Nothing in it (a daemon killed before it moved anything): removed, nothing to say.
    if file.entries.is_empty() && wanted(file.undo_if_killed) {
        remove_journal(dir)?;
        return Ok(None);
    }
    if from_earlier_boot(&file) {
        remove_journal(dir)?;
        return Ok(Some(RestoreReport {
            reset_by_reboot: file.entries,
            ..RestoreReport::default()
        }));
    }
    if !wanted(file.undo_if_killed) {
        return Ok(None);
    }
    // Only the root the caller serves: a journal naming another (a test's fixture tree) is
    // not written back under it, nor a forged one under a tree its forger made.
    let theirs = file.root.as_deref().unwrap_or("/");
    if Path::new(theirs) != root.base() {
        return Err(refused(
            &path.display().to_string(),
            format!(
                "its changes lie under {theirs}, not under {}",
                root.base().display()
            ),
        ));
    }
    let mut held = machine_locks(
        root,
        dir,
        file.entries
            .iter()
            .filter_map(|e| kinds::classify(&e.path).ok())
            .map(|m| m.resource),
    )?;
    let header = file.header();
    let restored = restore_entries(root, &mut file.entries, header.placements, |entries| {
        write_journal(
            dir,
            &JournalFile {
                entries: entries.to_vec(),
                ..header.clone()
            },
        )
    });
    if restored.is_err() {
        // As a run's journal does: the lock files keep naming the journal while changes in
        // it are still in effect, so no other iolab records them as originals.
        held.iter_mut().for_each(MachineLock::keep_record);
    }
    let report = restored?;
    remove_journal(dir)?;
    Ok(Some(report))
}

/// Restores newest first, each entry only if it passes `kinds::locate` under `root`;
/// `save` persists what is still left after each step. Refused entries are dropped from the
/// journal (they would be refused every time) and reported. With `leave_changed` (a
/// placement journal), an interrupt's affinity that reads a value none of its entries holds
/// is someone else's since: its entries are dropped and reported, unwritten.
fn restore_entries(
    root: &SysRoot,
    entries: &mut Vec<JournalEntry>,
    leave_changed: bool,
    mut save: impl FnMut(&[JournalEntry]) -> Result<(), KnobError>,
) -> Result<RestoreReport, KnobError> {
    let mut report = RestoreReport::default();
    let mut failed: Vec<KnobError> = Vec::new();
    let mut kept: Vec<JournalEntry> = Vec::new();
    // Interrupts' first steps back (`JournalEntry::restoring`), kept while their masks are not.
    let mut stepping: Vec<JournalEntry> = Vec::new();
    let left = |entries: &[JournalEntry], stepping: &[JournalEntry], kept: &[JournalEntry]| {
        let mut left = entries.to_vec();
        left.extend(
            stepping
                .iter()
                .filter(|s| entries.iter().any(|e| e.path == s.path))
                .cloned(),
        );
        left.extend(kept.iter().rev().cloned());
        left
    };
    let mut unsaved = None;
    let mut judged = std::collections::HashSet::new();
    while let Some(mut entry) = entries.pop() {
        if let Some((path, value)) = linked_restore(&entry, entries) {
            // Every entry of both forms goes with this one write, which restores or keeps them.
            let group = take_linked(entry, entries);
            match kinds::locate(root.base(), &path) {
                Err(why) => group.into_iter().for_each(|entry| {
                    report.refused.push(RefusedEntry {
                        entry,
                        why: why.clone(),
                    })
                }),
                Ok(Located::Missing) => report.vanished.extend(group),
                Ok(Located::File(file)) => {
                    match retry_while_busy(
                        || write_attr(&file.display().to_string(), &value),
                        BUSY_PATIENCE,
                    ) {
                        Ok(()) => report.restored.extend(group),
                        Err(e) => {
                            failed.push(e.naming(&path));
                            kept.extend(group);
                        }
                    }
                }
            }
        } else {
            let newest_of_file = judged.insert(entry.path.clone());
            match kinds::locate(root.base(), &entry.path) {
                Err(why) => report.refused.push(RefusedEntry { entry, why }),
                Ok(Located::Missing) => report.vanished.push(entry),
                // The number serves other handlers now (a driver reloaded since): the
                // interrupt journaled is gone, and another's affinity is not iolab's to write.
                Ok(Located::File(_)) if !irq_move::still_serving(root, &entry) => {
                    report.vanished.push(entry)
                }
                // Another disk has the name now (a loop device re-attached): its knobs are
                // not iolab's to write.
                Ok(Located::File(_))
                    if !disk_identity::still_the_same(root, &entry.path, entry.disk.as_deref()) =>
                {
                    report.vanished.push(entry)
                }
                // Judged at its newest entry: the older ones of the file are steps of the
                // same restore (its old CPU, then its old mask).
                Ok(Located::File(file))
                    if leave_changed && newest_of_file && changed_since(&file, &entry, entries) =>
                {
                    let now = read_attr(&file.display().to_string()).unwrap_or_default();
                    // This file's older entries go with it, newest first.
                    let (older, rest): (Vec<_>, Vec<_>) =
                        entries.drain(..).partition(|e| e.path == entry.path);
                    *entries = rest;
                    let mut all = vec![entry];
                    all.extend(older.into_iter().rev());
                    report.changed_since.push(ChangedSince {
                        now: now.trim().to_string(),
                        entries: all,
                    });
                }
                Ok(Located::File(file)) => {
                    let live = root.is_live();
                    let someone_else = newest_of_file.then(|| overridden(&file, &entry)).flatten();
                    let step = irq_move::effective_of(&entry.path).is_some()
                        && entries.iter().any(|e| e.path == entry.path);
                    if step && !entry.restoring {
                        entry.restoring = true;
                        let mut now = left(entries, &stepping, &kept);
                        now.push(entry.clone());
                        // Unsaved, the mark is missing only if this restore is cut short
                        // too; the save after the write says why.
                        let _ = save(&now);
                    }
                    let written = match as_found(&file, &entry) {
                        true => Ok(()),
                        false => retry_while_busy(
                            || settle_then_write(live, &file, &entry.old),
                            BUSY_PATIENCE,
                        ),
                    };
                    match written {
                        Ok(()) => {
                            if let Some(module) = &entry.loaded_module {
                                match sched_module::unload(root, &entry, module) {
                                    Ok(true) => report.modules_unloaded.push(module.clone()),
                                    Ok(false) => {}
                                    Err(why) => report.modules_kept.push(KeptModule {
                                        module: module.clone(),
                                        why,
                                    }),
                                }
                            }
                            report.overridden.extend(someone_else);
                            if step {
                                stepping.push(entry.clone());
                            }
                            report.restored.push(entry)
                        }
                        Err(_) if entries.iter().any(|e| e.path == entry.path) => {
                            report.superseded.push(entry)
                        }
                        Err(e) => {
                            failed.push(e.naming(&entry.path));
                            kept.push(entry);
                        }
                    }
                }
            }
        }
        // A journal that cannot be rewritten now (a full or read-only disk) still lists every
        // change not yet put back, and some already put back, which a later restore writes
        // again to the same effect: putting the rest back matters more than the record.
        unsaved = save(&left(entries, &stepping, &kept)).err();
    }
    kept.reverse();
    *entries = kept;
    report.delivered = delivered_now(root, &report.restored);
    // With nothing left the caller removes the journal, stale or not.
    if let Some(e) = unsaved.filter(|_| !entries.is_empty()) {
        failed.push(e);
    }
    if failed.is_empty() {
        Ok(report)
    } else {
        Err(KnobError::RestoreFailed {
            errors: failed.iter().map(|e| e.to_string()).collect(),
        })
    }
}

/// Where each interrupt whose affinity was put back is delivered now (its effective
/// affinity, read under `root` once every write is done): the old CPU it was sent back to
/// first is where it was, but an interrupt moves only when it next fires, and one that did
/// not within `irq_move::settle`'s wait may be delivered elsewhere in its old mask.
fn delivered_now(root: &SysRoot, restored: &[JournalEntry]) -> BTreeMap<String, String> {
    restored
        .iter()
        .filter_map(|e| {
            let (_, effective) = irq_move::effective_of(&e.path)?;
            let now = root.attr(&effective)?;
            Some((e.path.clone(), now.trim().to_string()))
        })
        .collect()
}

/// Whether an interrupt's affinity file, at its newest entry `entry`, reads a value none of
/// its entries (`entry`, and the older ones among `older`) holds: not what iolab found, not
/// what it wrote, not the CPU a restore cut short had put it back on first. Changed by
/// someone else since. The old CPU of the newest entry is iolab's only when a restore began
/// to write it (`restoring`): else someone pinned the interrupt there.
fn changed_since(file: &Path, entry: &JournalEntry, older: &[JournalEntry]) -> bool {
    if irq_move::effective_of(&entry.path).is_none() {
        return false;
    }
    let Ok(now) = read_attr(&file.display().to_string()) else {
        return false;
    };
    let newest = [&entry.new]
        .into_iter()
        .chain(entry.restoring.then_some(&entry.old));
    !newest
        .chain(
            older
                .iter()
                .filter(|e| e.path == entry.path)
                .flat_map(|e| [&e.old, &e.new]),
        )
        .any(|v| irq_move::same_cpus(&entry.path, &now, v))
}

/// Whether an entry's knob already reads its old value and must not be written: only
/// `wbt_lat_usec`, which reads 0 both when bfq turned writeback throttling off and when a
/// user did. Writing 0 makes it the user's (the kernel then never turns it on again when
/// the scheduler changes), so a 0 that the old scheduler's return brought back is left as is.
/// The knob of `entry` (the newest of its file) when it reads neither what iolab set nor what
/// it found: someone changed it meanwhile. Not for a side effect journaled as found (`old ==
/// new`: the kernel's reset is expected there), nor an interrupt (its mask reads back in
/// another form than written).
fn overridden(file: &Path, entry: &JournalEntry) -> Option<Overridden> {
    // Only a plain attribute: a read may not block (a test's FIFO stands for a knob).
    if entry.old == entry.new || entry.path.starts_with("/proc/irq/") || !file.is_file() {
        return None;
    }
    let now = read_attr(&file.display().to_string()).ok()?;
    let now = now.trim();
    (now != entry.new.trim() && now != entry.old.trim()).then(|| Overridden {
        path: entry.path.clone(),
        set: entry.new.clone(),
        found: now.to_string(),
    })
}

fn as_found(file: &Path, entry: &JournalEntry) -> bool {
    entry.path.ends_with("/queue/wbt_lat_usec")
        && read_attr(&file.display().to_string()).is_ok_and(|now| now.trim() == entry.old.trim())
}

/// Writes a knob; on the live machine an interrupt's affinity is written only after a move
/// still pending from the previous write has happened (`irq_move::settle`): restoring writes an
/// interrupt's old CPU, then its old mask, and the second write would cancel the first move.
fn settle_then_write(live: bool, file: &Path, value: &str) -> Result<(), KnobError> {
    let file = file.display().to_string();
    if live {
        irq_move::settle(&file);
    }
    write_attr(&file, value)
}

fn read_journal(path: &Path) -> Result<Option<JournalFile>, KnobError> {
    let bytes = match crate::sys::own_dir::read_own_file(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(KnobError::State {
                path: path.display().to_string(),
                source,
            })
        }
    };
    let text = String::from_utf8(bytes).map_err(|e| KnobError::Corrupt {
        path: path.display().to_string(),
        line: 1 + e.as_bytes()[..e.utf8_error().valid_up_to()]
            .iter()
            .filter(|b| **b == b'\n')
            .count(),
        message: format!("not UTF-8 text: {}", e.utf8_error()),
    })?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| KnobError::Corrupt {
            path: path.display().to_string(),
            line: e.line(),
            message: e.to_string(),
        })
}

fn write_journal(dir: &Path, file: &JournalFile) -> Result<(), KnobError> {
    let path = dir.join(JOURNAL);
    let tmp = dir.join(format!("{JOURNAL}.tmp"));
    let state = |source| KnobError::State {
        path: tmp.display().to_string(),
        source,
    };
    let text = serde_json::to_string_pretty(file).expect("journal serialises");
    let mut f = File::create(&tmp).map_err(state)?;
    f.write_all(text.as_bytes()).map_err(state)?;
    f.write_all(b"\n").map_err(state)?;
    f.sync_all().map_err(state)?;
    drop(f);
    std::fs::rename(&tmp, &path).map_err(|source| KnobError::State {
        path: path.display().to_string(),
        source,
    })?;
    sync_dir(dir)
}

fn remove_journal(dir: &Path) -> Result<(), KnobError> {
    let path = dir.join(JOURNAL);
    match std::fs::remove_file(&path) {
        Ok(()) => sync_dir(dir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(KnobError::State {
            path: path.display().to_string(),
            source,
        }),
    }
}

/// Makes a rename or removal in `dir` durable.
fn sync_dir(dir: &Path) -> Result<(), KnobError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| KnobError::State {
            path: dir.display().to_string(),
            source,
        })
}

/// The pid of the process whose journal `dir` holds, as it wrote it.
fn holder(dir: &Path) -> Option<u32> {
    read_journal(&dir.join(JOURNAL))
        .ok()
        .flatten()
        .map(|j| j.pid)
}

/// The running iolab whose journal `dir` holds (its lock is taken), with its pid when its
/// journal names it: such a journal is its owner's, not a leftover.
pub(crate) fn in_use(dir: &Path) -> Option<Option<u32>> {
    if !dir.join(LOCK).exists() {
        return None;
    }
    match take_lock(dir) {
        Err(KnobError::Busy { .. }) => Some(holder(dir)),
        _ => None,
    }
}

/// Holds an exclusive flock on the state directory's lock file for as long as the returned
/// file lives; another holder means another iolab is changing knobs right now.
fn take_lock(dir: &Path) -> Result<File, KnobError> {
    let path = dir.join(LOCK);
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| KnobError::State {
            path: path.display().to_string(),
            source,
        })?;
    // SAFETY: flock on a file descriptor we own; no memory is involved.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(KnobError::Busy {
                path: path.display().to_string(),
                holder: holder(dir).map_or_else(String::new, |pid| format!(" (pid {pid})")),
            });
        }
        return Err(KnobError::State {
            path: path.display().to_string(),
            source: err,
        });
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixture root with queue attributes as plain files; knobs are named by live path.
    struct Fake {
        dir: tempfile::TempDir,
        root: SysRoot,
    }

    impl Fake {
        fn new() -> Fake {
            let dir = tempfile::tempdir().unwrap();
            let root = SysRoot::at(dir.path()).unwrap();
            Fake { dir, root }
        }

        /// Creates `/sys/block/DEV/queue/ATTR` holding `value`; returns the live path.
        fn knob(&self, dev: &str, attr: &str, value: &str) -> String {
            let live = format!("/sys/block/{dev}/queue/{attr}");
            let p = self.file(&live);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, value).unwrap();
            live
        }

        /// Creates interrupt `irq`'s affinity `mask`, delivered to `effective`; returns the
        /// live path of its `smp_affinity_list`.
        fn irq(&self, irq: u32, mask: &str, effective: &str) -> String {
            let dir = format!("/proc/irq/{irq}");
            std::fs::create_dir_all(self.file(&dir)).unwrap();
            std::fs::write(
                self.file(&format!("{dir}/effective_affinity_list")),
                effective,
            )
            .unwrap();
            let live = format!("{dir}/smp_affinity_list");
            std::fs::write(self.file(&live), mask).unwrap();
            live
        }

        fn file(&self, live: &str) -> PathBuf {
            self.dir.path().join(live.trim_start_matches('/'))
        }

        fn read(&self, live: &str) -> String {
            std::fs::read_to_string(self.file(live)).unwrap()
        }

        fn journal(&self, state: &Path) -> Journal {
            Journal::begin_at(state, &self.root).unwrap()
        }
    }

    /// After a killed `trace record`, restore said buffer_size_kb "read 65538, not the 65536
    /// iolab had set: someone changed it meanwhile": the kernel keeps it in whole pages. What
    /// the knob reads after iolab's write is what iolab set.
    #[test]
    fn a_value_the_kernel_keeps_otherwise_is_not_someone_elses_change() {
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let live = "/sys/kernel/tracing/buffer_size_kb";
        std::fs::create_dir_all(sys.file("/sys/kernel/tracing")).unwrap();
        std::fs::write(sys.file(live), "1408\n").unwrap();
        let mut j = sys.journal(state.path());
        j.set(live, "65536").unwrap();
        // The kernel's rounding at the write, made by hand here (a plain file keeps what
        // was written), then what `set` does after every write.
        std::fs::write(sys.file(live), "65538\n").unwrap();
        j.record_what_it_reads(live).unwrap();
        assert_eq!(j.entries()[0].new, "65538");
        let r = j.restore().unwrap();
        assert!(r.overridden.is_empty(), "{:?}", r.overridden);
        assert_eq!(sys.read(live), "1408");
    }

    #[test]
    fn restores_in_reverse_order_on_drop() {
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let sched = sys.knob("loop0", "scheduler", "[mq-deadline] none\n");
        let ra = sys.knob("loop0", "read_ahead_kb", "128\n");
        {
            let mut j = sys.journal(state.path());
            assert_eq!(j.set(&sched, "none").unwrap(), "mq-deadline");
            assert_eq!(j.set(&ra, "4").unwrap(), "128");
            // Plain files, unlike sysfs, keep what was written verbatim.
            std::fs::write(sys.file(&sched), "mq-deadline [none]\n").unwrap();
            assert_eq!(j.set(&sched, "kyber").unwrap(), "none");
            let on_disk = read_journal(&j.path()).unwrap().unwrap();
            // Each scheduler write journals read_ahead_kb first, which it may reset.
            assert_eq!(on_disk.entries.len(), 5);
            assert_eq!(on_disk.entries[0].path, ra, "live paths are journaled");
            assert_eq!(on_disk.entries[1].path, sched);
            assert_eq!(
                on_disk.root.as_deref(),
                Some(sys.root.base().to_str().unwrap())
            );
            assert!(matches!(
                Journal::unrestored(state.path()),
                Err(KnobError::Unrestored { count: 5, .. })
            ));
        }
        // Reverse order: kyber->none, 4->128, none->mq-deadline; the last write wins.
        assert_eq!(sys.read(&sched), "mq-deadline");
        assert_eq!(sys.read(&ra), "128");
        Journal::check_clean_in(state.path()).unwrap();
    }

    /// A state directory reached through a link pointed elsewhere mid-run: the journal stays
    /// where it began, and a normal end leaves none behind (a stale one listed changes
    /// already put back, for a later restore to write over newer values).
    #[test]
    fn a_journal_stays_where_it_began() {
        let sys = Fake::new();
        let nr = sys.knob("loop0", "nr_requests", "64\n");
        let top = tempfile::tempdir().unwrap();
        let (x, y, link) = (
            top.path().join("x"),
            top.path().join("y"),
            top.path().join("state"),
        );
        std::fs::create_dir(&x).unwrap();
        std::fs::create_dir(&y).unwrap();
        std::os::unix::fs::symlink(&x, &link).unwrap();
        let mut j = sys.journal(&link);
        j.set(&nr, "32").unwrap();
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(&y, &link).unwrap();
        drop(j);
        assert_eq!(sys.read(&nr), "64");
        for dir in [&x, &y] {
            assert!(!dir.join(JOURNAL).exists(), "{}", dir.display());
        }
    }

    /// A knob someone changes while iolab holds it is put back all the same (an experiment's
    /// knobs always come back) and the report says what it replaced; a side effect journaled
    /// as found (nr_requests reset by the scheduler switch) is not someone else's change.
    #[test]
    fn a_knob_changed_by_someone_else_is_put_back_and_said() {
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let sched = sys.knob("loop0", "scheduler", "[none] mq-deadline\n");
        let nr = sys.knob("loop0", "nr_requests", "64\n");
        let rq = sys.knob("loop0", "rq_affinity", "1\n");
        let mut j = sys.journal(state.path());
        j.set(&sched, "mq-deadline").unwrap();
        j.set(&rq, "2").unwrap();
        std::fs::write(sys.file(&nr), "256\n").unwrap();
        std::fs::write(sys.file(&sched), "kyber\n").unwrap();
        let report = j.restore().unwrap();
        assert_eq!(
            report.overridden,
            [Overridden {
                path: sched.clone(),
                set: "mq-deadline".into(),
                found: "kyber".into()
            }]
        );
        assert_eq!(sys.read(&sched), "none");
        assert_eq!(sys.read(&nr), "64");
        let notes = super::super::leftovers::restore_notes(&report);
        assert!(
            notes.contains("read kyber, not the mq-deadline iolab had set: someone changed it"),
            "{notes}"
        );
    }

    /// After a kill, a disk's name may be another disk's (a loop device re-attached to another
    /// file gets a new diskseq): restore leaves that one's knobs alone.
    #[test]
    fn restore_leaves_alone_a_disk_that_has_the_name_now() {
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let sched = sys.knob("loop1", "scheduler", "[mq-deadline] none\n");
        let seq = sys.file("/sys/block/loop1/diskseq");
        std::fs::write(&seq, "1896\n").unwrap();
        let mut j = sys.journal(state.path());
        j.set(&sched, "none").unwrap();
        assert_eq!(j.entries()[0].disk.as_deref(), Some("diskseq 1896"));
        // Killed (its locks taken back, as a killed process's go); loop1 re-attached to
        // another user's file, who chose kyber.
        let held = std::mem::take(&mut j.held);
        std::mem::forget(j);
        drop(held);
        std::fs::write(&seq, "2300\n").unwrap();
        std::fs::write(sys.file(&sched), "kyber\n").unwrap();
        let report = replay_unlocked_for_test(state.path());
        assert!(report.restored.is_empty(), "{report:?}");
        assert_eq!(report.vanished.len(), 1, "{report:?}");
        assert_eq!(sys.read(&sched), "kyber\n");
    }

    /// x86 keeps an interrupt where it is when a new mask still holds that CPU, so restore
    /// first sends it back to the CPU it was delivered to, then writes the old mask.
    #[test]
    fn an_interrupt_goes_back_to_its_cpu_before_its_mask() {
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let live = &sys.irq(30, "0-3\n", "2\n");
        let mut j = sys.journal(state.path());
        assert_eq!(j.set(live, "9").unwrap(), "0-3");
        let olds: Vec<&str> = j.entries().iter().map(|e| e.old.as_str()).collect();
        assert_eq!(olds, ["0-3", "2"]);
        let report = j.restore().unwrap();
        let written: Vec<&str> = report.restored.iter().map(|e| e.old.as_str()).collect();
        assert_eq!(written, ["2", "0-3"], "the CPU first, then the mask");
        assert_eq!(sys.read(live), "0-3");
        drop(j);
        // Where the interrupt already goes to its whole mask, one write is enough.
        std::fs::write(sys.file("/proc/irq/30/effective_affinity_list"), "0-3\n").unwrap();
        let mut j = sys.journal(state.path());
        j.set(live, "9").unwrap();
        assert_eq!(j.entries().len(), 1);
    }

    /// An interrupt number handed to another device since it was journaled (a driver reloaded
    /// within the boot) is left alone: that device's affinity is not iolab's to write. One
    /// that kept a handler it served (a shared line that gained another) is put back.
    #[test]
    fn an_interrupt_number_that_serves_another_device_now_is_left_alone() {
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let live = "/proc/irq/32/smp_affinity_list";
        let action = |name: &str| sys.file(&format!("/proc/irq/32/{name}"));
        std::fs::create_dir_all(action("eth0-TxRx-1")).unwrap();
        for (put_back, handlers) in [(false, ["mlx5_comp3", ""]), (true, ["eth0-TxRx-1", "usb1"])] {
            std::fs::write(sys.file(live), "4-7\n").unwrap();
            let mut j = sys.journal(state.path());
            j.set(live, "5").unwrap();
            assert_eq!(j.entries()[0].serving.as_deref(), Some("eth0-TxRx-1"));
            // The driver is reloaded: its handler goes, and the number serves what is now.
            std::fs::remove_dir(action("eth0-TxRx-1")).unwrap();
            for h in handlers.iter().filter(|h| !h.is_empty()) {
                std::fs::create_dir_all(action(h)).unwrap();
            }
            std::fs::write(sys.file(live), "12\n").unwrap();
            let report = j.restore().unwrap();
            if put_back {
                assert_eq!(report.restored.len(), 1);
                assert_eq!(sys.read(live), "4-7");
            } else {
                assert_eq!(report.vanished.len(), 1, "{report:?}");
                assert_eq!(
                    sys.read(live),
                    "12\n",
                    "another device's affinity was written"
                );
            }
            drop(j);
            for h in handlers.iter().filter(|h| !h.is_empty()) {
                std::fs::remove_dir(action(h)).unwrap();
            }
            std::fs::create_dir_all(action("eth0-TxRx-1")).unwrap();
        }
    }

    /// The daemon moves an interrupt again and again: its placement journal keeps the first
    /// change only, and restore writes what was found, not every placement in between.
    #[test]
    fn a_placement_journal_keeps_an_interrupt_moved_many_times_once() {
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let live = &sys.irq(31, "4-7\n", "4\n");
        let mut j = sys.journal(state.path());
        j.placements_only();
        for i in 0..20 {
            let to = if i % 2 == 0 { "5" } else { "6" };
            j.set(live, to).unwrap();
            assert_eq!(sys.read(live), to);
        }
        let olds: Vec<&str> = j.entries().iter().map(|e| e.old.as_str()).collect();
        assert_eq!(olds, ["4-7", "4"]);
        assert_eq!(j.entries()[1].new, "6");
        let on_disk = read_journal(&state.path().join(JOURNAL)).unwrap().unwrap();
        assert_eq!(on_disk.entries.len(), 2);
        let report = j.restore().unwrap();
        let written: Vec<&str> = report.restored.iter().map(|e| e.old.as_str()).collect();
        assert_eq!(written, ["4", "4-7"]);
        assert_eq!(sys.read(live), "4-7");
        drop(j);
        // An experiment's journal keeps every write, as its run reports them.
        let mut j = sys.journal(state.path());
        j.set(live, "5").unwrap();
        j.set(live, "6").unwrap();
        assert_eq!(j.entries().len(), 3);
    }

    /// A placement stays after iolab exits, so an administrator may pin an interrupt since:
    /// restore leaves a value none of the file's entries holds, and says so; the CPU it was
    /// delivered to before iolab's move too (iolab's own first step back only once a restore
    /// began it: on a 2-CPU machine every pin was some entry's value, and was overwritten).
    /// An experiment's journal puts everything back, as its run reports.
    #[test]
    fn a_placement_leaves_an_affinity_someone_changed_since() {
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let live = &sys.irq(33, "4-7\n", "4\n");
        // (placement journal, what someone writes after iolab's move, what restore leaves)
        for (placement, since, left) in [
            (true, "7", "7"),
            (true, "4", "4"),
            (true, "4,5,6,7", "4-7"),
            (false, "7", "4-7"),
        ] {
            std::fs::write(sys.file(live), "4-7\n").unwrap();
            let mut j = sys.journal(state.path());
            if placement {
                j.placements_only();
            }
            j.set(live, "5").unwrap();
            std::fs::write(sys.file(live), format!("{since}\n")).unwrap();
            let report = j.restore().unwrap();
            assert_eq!(sys.read(live).trim(), left, "{since}: {report:?}");
            let kept = !report.changed_since.is_empty();
            assert_eq!(kept, left == since, "{since}: {report:?}");
            if kept {
                let line = report.changed_since[0].describe();
                assert_eq!(
                    line,
                    format!(
                        "{live} = {since}: changed since iolab set 5, not written (it was 4-7 \
                         before iolab)"
                    )
                );
            }
            drop(j);
            Journal::check_clean_in(state.path()).unwrap();
        }
    }

    /// A restore marks an interrupt's first step back (its old CPU) in the journal before
    /// writing it, and keeps it there until the old mask is back: a restore cut short in
    /// between (killed while it waits for the move) left the interrupt on that CPU, and the
    /// next restore finishes the job rather than calling the CPU someone else's pin.
    #[test]
    fn a_restore_cut_short_after_its_first_step_is_finished_by_the_next() {
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let live = &sys.irq(33, "4-7\n", "4\n");
        let mut j = sys.journal(state.path());
        j.placements_only();
        j.set(live, "5").unwrap();
        let mut entries = j.entries().to_vec();
        let mut saves: Vec<(String, Vec<JournalEntry>)> = Vec::new();
        let report = restore_entries(&sys.root, &mut entries, true, |left| {
            saves.push((sys.read(live).trim().to_string(), left.to_vec()));
            Ok(())
        })
        .unwrap();
        assert!(report.changed_since.is_empty(), "{report:?}");
        assert_eq!(sys.read(live).trim(), "4-7");
        // Marked before the write; kept, marked, after it until the mask is back; then gone.
        let step = |left: &[JournalEntry]| left.iter().find(|e| e.old == "4").cloned();
        assert_eq!(saves[0].0, "5");
        assert!(step(&saves[0].1).is_some_and(|e| e.restoring), "{saves:?}");
        assert_eq!(saves[1].0, "4");
        assert!(step(&saves[1].1).is_some_and(|e| e.restoring), "{saves:?}");
        assert!(saves.last().unwrap().1.is_empty());
        // The journal as the cut-short restore saved it, the interrupt left on CPU 4.
        let mut cut_short = saves[1].1.clone();
        let report = restore_entries(&sys.root, &mut cut_short, true, |_| Ok(())).unwrap();
        assert!(report.changed_since.is_empty(), "{report:?}");
        assert_eq!(sys.read(live).trim(), "4-7");
        drop(j);
    }

    /// A daemon killed before it moved anything leaves a journal with no entries: restore and
    /// rollback remove it and have nothing to report (it stayed, and rollback printed nothing).
    #[test]
    fn an_empty_journal_left_by_a_kill_is_removed_quietly() {
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let mut j = sys.journal(state.path());
        j.placements_only();
        j.undone_if_killed().unwrap();
        // What the killed daemon's journal reads (its lock, held by this process, let go).
        let left = j.file.header();
        drop(j);
        write_journal(state.path(), &left).unwrap();
        assert!(undone_if_killed(state.path()));
        assert_eq!(replay(state.path(), &sys.root).unwrap(), None);
        assert!(!state.path().join(JOURNAL).exists());
    }

    #[test]
    fn a_forgotten_journal_is_replayed_and_removed() {
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let nr = sys.knob("loop0", "nr_requests", "256\n");
        let gone = sys.knob("loop1", "nr_requests", "1\n");
        let mut j = sys.journal(state.path());
        j.set(&nr, "32").unwrap();
        j.set(&gone, "0").unwrap();
        // What SIGKILL does: no drop, no restore. The journal's locks (its state-dir lock and
        // the machine-wide ones) leak with it, as a killed process's would not; take them back.
        let held = std::mem::take(&mut j.held);
        std::mem::forget(j);
        drop(held);
        std::fs::remove_dir_all(sys.file("/sys/block/loop1")).unwrap();
        let err = Journal::unrestored(state.path()).unwrap_err();
        assert!(err.to_string().contains("iolab restore"), "{err}");
        let report = replay_unlocked_for_test(state.path());
        assert_eq!(report.restored.len(), 1);
        assert_eq!(report.vanished.len(), 1);
        assert_eq!(sys.read(&nr), "256");
        assert!(read_journal(&state.path().join(JOURNAL)).unwrap().is_none());
    }

    /// `replay` without the state-dir lock (the forgotten journal's lock fd is still open in
    /// this process, and flock locks belong to the open file).
    fn replay_unlocked_for_test(dir: &Path) -> RestoreReport {
        let path = dir.join(JOURNAL);
        let mut file = read_journal(&path).unwrap().unwrap();
        let root = SysRoot::at(file.root.clone().unwrap()).unwrap();
        let r = restore_entries(&root, &mut file.entries, false, |_| Ok(())).unwrap();
        remove_journal(dir).unwrap();
        r
    }

    /// Selecting bfq where the kernel's index has it as a module and it is not loaded: the
    /// entry names the module, in the file too, so a replay after a kill unloads it as well;
    /// under a machine tree it is kept and the report says why. An entry that did not load
    /// one (the second selection) names none.
    #[test]
    fn a_scheduler_write_that_loads_a_module_journals_it_and_restore_reports_it() {
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let sched = sys.knob("sdb", "scheduler", "[mq-deadline] none\n");
        sched_module::tests::module_index(sys.dir.path(), false);
        let mut j = sys.journal(state.path());
        j.set(&sched, "bfq").unwrap();
        // The kernel loaded it: the next selection loads nothing.
        sched_module::tests::module_index(sys.dir.path(), true);
        j.set(&sched, "bfq").unwrap();
        let on_disk = read_journal(&j.path()).unwrap().unwrap();
        let loaded: Vec<Option<&str>> = on_disk
            .entries
            .iter()
            .map(|e| e.loaded_module.as_deref())
            .collect();
        assert_eq!(loaded, [Some("bfq"), None]);
        std::mem::forget(j);
        let r = replay_unlocked_for_test(state.path());
        assert_eq!(sys.read(&sched), "mq-deadline");
        assert!(r.modules_unloaded.is_empty());
        assert_eq!(r.modules_kept.len(), 1, "{r:?}");
        assert_eq!(r.modules_kept[0].module, "bfq");
        assert!(
            r.modules_kept[0].why.contains("not the live kernel"),
            "{r:?}"
        );
        let text = super::super::leftovers::restored_lines(&r, "gone", &Default::default());
        assert!(
            text.contains("kept     module bfq loaded, which the kernel loaded when iolab"),
            "{text}"
        );
    }

    #[test]
    fn a_journal_used_again_after_restore_restores_again() {
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let k = sys.knob("loop0", "rq_affinity", "1\n");
        {
            let mut j = sys.journal(state.path());
            j.set(&k, "2").unwrap();
            j.restore().unwrap();
            assert!(!j.path().exists());
            j.set(&k, "3").unwrap();
            assert!(j.path().exists(), "the second change is journaled on disk");
        }
        assert_eq!(sys.read(&k), "1");
    }

    #[test]
    fn a_refused_write_is_not_left_in_the_journal() {
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let ok = sys.knob("loop0", "rq_affinity", "1\n");
        let dir_not_file = "/sys/block/loop0/queue/adir";
        std::fs::create_dir(sys.file(dir_not_file)).unwrap();
        let mut j = sys.journal(state.path());
        j.set(&ok, "2").unwrap();
        // Reading a directory fails before anything is journaled.
        assert!(j.set(dir_not_file, "x").is_err());
        assert_eq!(j.entries().len(), 1);
        let report = j.restore().unwrap();
        assert_eq!(report.restored.len(), 1);
        assert_eq!(sys.read(&ok), "1");
    }

    #[test]
    fn a_scheduler_switch_also_journals_what_it_resets() {
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let sched = sys.knob("loop0", "scheduler", "[mq-deadline] none\n");
        let nr = sys.knob("loop0", "nr_requests", "64\n");
        let mut j = sys.journal(state.path());
        j.set(&sched, "none").unwrap();
        // What the kernel does on an elevator switch:
        std::fs::write(sys.file(&nr), "256").unwrap();
        let paths: Vec<&str> = j.entries().iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, vec![nr.as_str(), sched.as_str()]);
        j.restore().unwrap();
        assert_eq!(sys.read(&nr), "64");
        assert_eq!(sys.read(&sched), "mq-deadline");
    }

    /// A knob a cell writes twice (an interrupt moved to its CPU, then given back its mask)
    /// is held to its last value, not its first.
    #[test]
    fn set_all_holds_a_knob_written_twice_to_its_last_value() {
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let nr = sys.knob("loop0", "nr_requests", "64\n");
        let mut j = sys.journal(state.path());
        let again = j
            .set_all([(nr.as_str(), "32"), (nr.as_str(), "128")])
            .unwrap();
        assert!(again.is_empty(), "{again:?}");
        assert_eq!(sys.read(&nr), "128");
        j.restore().unwrap();
        assert_eq!(sys.read(&nr), "64");
    }

    /// As the kernels that reset read_ahead_kb on a queue-limit write did.
    #[test]
    fn a_queue_limit_write_also_journals_the_read_ahead() {
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let max = sys.knob("loop0", "max_sectors_kb", "1280\n");
        let ra = sys.knob("loop0", "read_ahead_kb", "4096\n");
        let mut j = sys.journal(state.path());
        j.set(&max, "64").unwrap();
        std::fs::write(sys.file(&ra), "128").unwrap();
        let paths: Vec<&str> = j.entries().iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, vec![ra.as_str(), max.as_str()]);
        j.restore().unwrap();
        assert_eq!(
            (sys.read(&max), sys.read(&ra)),
            ("1280".into(), "4096".into())
        );
    }

    #[test]
    fn a_second_journal_in_the_same_dir_is_refused_while_the_first_lives() {
        let state = tempfile::tempdir().unwrap();
        let _first = Journal::begin_in(state.path()).unwrap();
        let err = Journal::begin_in(state.path()).unwrap_err();
        assert!(matches!(err, KnobError::Busy { .. }), "{err}");
        // It names the holder, and the way to run beside it.
        let me = format!("another iolab (pid {})", std::process::id());
        assert!(err.to_string().contains(&me), "{err}");
        assert!(err.to_string().contains("IOLAB_STATE_DIR=DIR"), "{err}");
        assert_eq!(in_use(state.path()), Some(Some(std::process::id())));
        // A live owner is reported as busy, not as a leftover to restore.
        let err = Journal::check_clean_in(state.path()).unwrap_err();
        assert!(matches!(err, KnobError::Busy { .. }), "{err}");
    }

    #[test]
    fn a_second_journal_elsewhere_is_refused_on_the_same_device() {
        let sys = Fake::new();
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let k = sys.knob("loop0", "nr_requests", "64\n");
        let other = sys.knob("loop1", "nr_requests", "64\n");
        let mut first = sys.journal(a.path());
        first.set(&k, "32").unwrap();
        let mut second = sys.journal(b.path());
        let err = second.set(&k, "16").unwrap_err();
        assert!(matches!(err, KnobError::Machine(_)), "{err}");
        assert!(err.to_string().contains("/dev/loop0"), "{err}");
        assert!(second.entries().is_empty());
        second.set(&other, "16").unwrap();
        assert_eq!(sys.read(&k), "32");
        drop(first);
        assert_eq!(sys.read(&k), "64");
        second.set(&k, "8").unwrap();
    }

    #[test]
    fn a_killed_holders_unrestored_journal_blocks_the_device_from_any_state_dir() {
        let sys = Fake::new();
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let k = sys.knob("loop0", "nr_requests", "64\n");
        let mut first = sys.journal(a.path());
        first.set(&k, "32").unwrap();
        // SIGKILL: the flock goes with the process, the lock file's record and journal stay.
        let held = std::mem::take(&mut first.held);
        std::mem::forget(first);
        let lock_file = sys.dir.path().join("run/lock/iolab/block-loop0.lock");
        let record = std::fs::read_to_string(&lock_file).unwrap();
        assert!(record.contains("journal.json"), "{record}");
        drop(held); // releases the flock, and (unlike a kill) clears the record: put it back
        std::fs::write(&lock_file, &record).unwrap();
        let mut second = sys.journal(b.path());
        let err = second.set(&k, "16").unwrap_err().to_string();
        assert!(
            err.contains("/dev/loop0")
                && err.contains(&format!(
                    "IOLAB_STATE_DIR={} iolab restore",
                    a.path().display()
                )),
            "{err}"
        );
        assert_eq!(sys.read(&k), "32");
        // Once it is restored, the device is free again.
        replay_unlocked_for_test(a.path());
        assert_eq!(second.set(&k, "16").unwrap(), "64");
    }

    #[test]
    fn a_corrupt_journal_names_the_file_and_line_and_says_what_to_do() {
        let state = tempfile::tempdir().unwrap();
        let path = state.path().join(JOURNAL);
        std::fs::write(&path, "{\n  \"pid\": 1,\n  oops\n").unwrap();
        let err = Journal::check_clean_in(state.path()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("journal.json:3"), "{msg}");
        std::fs::write(&path, b"{\n\"pid\": 1,\n\xff\xfe\n").unwrap();
        let msg = replay(state.path(), &SysRoot::live())
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("journal.json:3")
                && msg.contains("not UTF-8")
                && msg.contains("restore the knobs it lists by hand")
                && msg.contains(&format!("then delete {}", path.display())),
            "{msg}"
        );
    }

    #[test]
    fn forged_entries_are_refused_and_the_valid_ones_restored() {
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let nr = sys.knob("loop0", "nr_requests", "32\n");
        // A file outside any kind, one the fake root links out to, and one under /tmp.
        let victim = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(victim.path(), "keep\n").unwrap();
        let link = "/sys/block/loop0/queue/scheduler";
        std::os::unix::fs::symlink(victim.path(), sys.file(link)).unwrap();
        let forged = [
            victim.path().display().to_string(),
            "/etc/hostname".to_string(),
            link.to_string(),
            "/sys/block/loop0/queue/../../../../etc/hostname".to_string(),
        ];
        let mut entries: Vec<JournalEntry> = forged
            .iter()
            .map(|p| JournalEntry {
                path: p.clone(),
                old: "pwned".into(),
                new: "x".into(),
                time_unix: 0.0,
                loaded_module: None,
                serving: None,
                disk: None,
                restoring: false,
            })
            .collect();
        entries.push(JournalEntry {
            path: nr.clone(),
            old: "64".into(),
            new: "32".into(),
            time_unix: 0.0,
            loaded_module: None,
            serving: None,
            disk: None,
            restoring: false,
        });
        let file = JournalFile {
            pid: 1,
            started_unix: 0.0,
            root: Some(sys.root.base().display().to_string()),
            boot_id: None,
            placements: false,
            undo_if_killed: false,
            entries,
        };
        write_journal(state.path(), &file).unwrap();
        let hostname = std::fs::read("/etc/hostname").ok();
        let report = replay(state.path(), &sys.root).unwrap().unwrap();
        assert_eq!(report.restored.len(), 1);
        assert_eq!(sys.read(&nr), "64");
        let refused: Vec<&str> = report
            .refused
            .iter()
            .map(|r| r.entry.path.as_str())
            .collect();
        assert_eq!(refused.len(), 4, "{refused:?}");
        assert!(report.refused.iter().any(|r| r.why.contains("outside")));
        assert_eq!(std::fs::read_to_string(victim.path()).unwrap(), "keep\n");
        assert_eq!(std::fs::read("/etc/hostname").ok(), hostname);
        assert!(!state.path().join(JOURNAL).exists());
        // And `set` refuses the same paths before writing anything.
        let mut j = sys.journal(state.path());
        for p in &forged {
            assert!(j.set(p, "x").is_err(), "{p}");
        }
        assert!(j.entries().is_empty());
        assert_eq!(std::fs::read_to_string(victim.path()).unwrap(), "keep\n");
    }

    /// An entry that changed `path` from `old` to "32".
    fn entry(path: &str, old: &str) -> JournalEntry {
        JournalEntry {
            path: path.to_string(),
            old: old.into(),
            new: "32".into(),
            time_unix: 0.0,
            loaded_module: None,
            serving: None,
            disk: None,
            restoring: false,
        }
    }

    /// A journal a killed run left in `state`, changing `paths` from `old` to "32".
    fn left_behind(sys: &Fake, state: &Path, paths: &[&str], old: &str) {
        let file = JournalFile {
            pid: 1,
            started_unix: 0.0,
            root: Some(sys.root.base().display().to_string()),
            boot_id: None,
            placements: false,
            undo_if_killed: false,
            entries: paths.iter().map(|p| entry(p, old)).collect(),
        };
        write_journal(state, &file).unwrap();
    }

    /// A journal is written back only under the root its replay serves: `iolab restore` (the
    /// live machine) does not write a forged journal's values into a tree its forger made.
    #[test]
    fn a_journal_naming_another_root_is_not_replayed() {
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let k = sys.knob("loop0", "nr_requests", "32\n");
        left_behind(&sys, state.path(), &[&k], "64");
        let err = replay(state.path(), &SysRoot::live())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!(
                "its changes lie under {}, not under /",
                sys.root.base().display()
            )) && err.contains("iolab writes nothing there"),
            "{err}"
        );
        assert_eq!(sys.read(&k), "32\n");
        assert!(!pending(state.path()).unwrap().is_empty());
        // Under its own root it is.
        replay(state.path(), &sys.root).unwrap().unwrap();
        assert_eq!(sys.read(&k), "64");
    }

    /// A state directory another user could write to is not trusted: nothing is replayed
    /// from it, and no journal begins in it.
    #[test]
    fn a_state_directory_others_could_write_to_is_not_used() {
        use std::os::unix::fs::PermissionsExt;
        let sys = Fake::new();
        let base = tempfile::tempdir().unwrap();
        let state = base.path().join("state");
        let k = sys.knob("loop0", "nr_requests", "32\n");
        trusted_state_dir(&state).unwrap();
        left_behind(&sys, &state, &[&k], "64");
        for mode in [0o777, 0o775] {
            std::fs::set_permissions(&state, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = replay(&state, &sys.root).unwrap_err().to_string();
            assert!(
                err.contains("not used as iolab's state directory")
                    && err.contains(&format!("writable by others (mode {mode:o})")),
                "{err}"
            );
            let err = Journal::begin_at(&state, &sys.root)
                .unwrap_err()
                .to_string();
            assert!(err.contains("not used as iolab's state directory"), "{err}");
            assert_eq!(sys.read(&k), "32\n");
        }
        // A directory above it that others may write to, and that is not sticky.
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = replay(&state, &sys.root).unwrap_err().to_string();
        assert!(
            err.contains("is writable by others and not sticky"),
            "{err}"
        );
        // Sticky, as /tmp: nobody may replace another's entries.
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        replay(&state, &sys.root).unwrap().unwrap();
        assert_eq!(sys.read(&k), "64");
        // Another user's (root can make one to test).
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&state, Some(65534), Some(65534)).unwrap();
            let err = Journal::begin_at(&state, &sys.root)
                .unwrap_err()
                .to_string();
            assert!(err.contains("owned by uid 65534"), "{err}");
        }
    }

    /// A knob that can no longer be written: its file became a directory.
    fn break_knob(sys: &Fake, live: &str) {
        std::fs::remove_file(sys.file(live)).unwrap();
        std::fs::create_dir(sys.file(live)).unwrap();
    }

    #[test]
    fn a_failed_replay_leaves_the_lock_records_naming_its_journal() {
        let sys = Fake::new();
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let ok = sys.knob("loop0", "nr_requests", "32\n");
        let stuck = sys.knob("loop1", "nr_requests", "32\n");
        left_behind(&sys, a.path(), &[&ok, &stuck], "64");
        break_knob(&sys, &stuck);
        let err = replay(a.path(), &sys.root).unwrap_err();
        assert!(matches!(err, KnobError::RestoreFailed { .. }), "{err}");
        assert_eq!(sys.read(&ok), "64");
        // Still in the journal, and still locked against another state directory: taking it
        // now would record the changed value as the original.
        assert_eq!(pending(a.path()).unwrap().len(), 1);
        let lock_file = sys.dir.path().join("run/lock/iolab/block-loop1.lock");
        let record = std::fs::read_to_string(&lock_file).unwrap();
        assert!(
            record.contains(&a.path().display().to_string()),
            "{record:?}"
        );
        let mut other = sys.journal(b.path());
        let refused = other.set(&stuck, "16").unwrap_err();
        assert!(refused.to_string().contains("iolab restore"), "{refused}");
    }

    #[test]
    fn a_wbt_latency_already_back_is_not_written() {
        // Under bfq wbt_lat_usec reads 0 (bfq turned throttling off); the experiment set it,
        // and the old scheduler's return reads 0 again: writing 0 would make it a user's 0.
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let wbt = sys.knob("loop0", "wbt_lat_usec", "0\n");
        let mut j = sys.journal(state.path());
        j.set(&wbt, "75000").unwrap();
        std::fs::write(sys.file(&wbt), "0\n").unwrap();
        let epoch = std::time::SystemTime::UNIX_EPOCH;
        let file = std::fs::File::options()
            .write(true)
            .open(sys.file(&wbt))
            .unwrap();
        file.set_modified(epoch).unwrap();
        drop(file);
        let report = j.restore().unwrap();
        assert_eq!(report.restored.len(), 1);
        let mtime = std::fs::metadata(sys.file(&wbt))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(mtime, epoch, "wbt_lat_usec was written");
        drop(j);
        // Any other knob, and a wbt latency not yet back, are written as always.
        let nr = sys.knob("loop0", "nr_requests", "64\n");
        let mut j = sys.journal(state.path());
        j.set(&nr, "32").unwrap();
        j.set(&wbt, "75000").unwrap();
        j.restore().unwrap();
        assert_eq!((sys.read(&nr), sys.read(&wbt)), ("64".into(), "0".into()));
    }

    #[test]
    fn a_state_directory_reached_through_a_link_is_still_the_journals_own() {
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let link = sys.dir.path().join("state-link");
        std::os::unix::fs::symlink(state.path(), &link).unwrap();
        let k = sys.knob("loop0", "nr_requests", "32\n");
        left_behind(&sys, state.path(), &[&k], "64");
        // The killed run's lock record names its journal by the directory's own path.
        let locks = sys.dir.path().join("run/lock/iolab");
        std::fs::create_dir_all(&locks).unwrap();
        let own = state.path().canonicalize().unwrap().join(JOURNAL);
        std::fs::write(
            locks.join("block-loop0.lock"),
            format!("1\n{}\n", own.display()),
        )
        .unwrap();
        let report = replay(&link, &sys.root).unwrap().unwrap();
        assert_eq!(report.restored.len(), 1);
        assert_eq!(sys.read(&k), "64");
    }

    #[test]
    fn a_journal_that_cannot_be_rewritten_does_not_stop_the_restore() {
        let sys = Fake::new();
        let knobs: Vec<String> = (0..4)
            .map(|i| sys.knob(&format!("loop{i}"), "nr_requests", "32\n"))
            .collect();
        let mut entries: Vec<JournalEntry> = knobs.iter().map(|p| entry(p, "64")).collect();
        break_knob(&sys, &knobs[1]);
        let full = || -> Result<(), KnobError> {
            Err(KnobError::State {
                path: "journal.json".into(),
                source: std::io::Error::from_raw_os_error(libc::ENOSPC),
            })
        };
        let err = restore_entries(&sys.root, &mut entries, false, |_| full()).unwrap_err();
        // Every other knob is back, the one that failed is still listed, and the message
        // says both what failed and that the journal could not be written.
        for (i, k) in knobs.iter().enumerate().filter(|&(i, _)| i != 1) {
            assert_eq!(sys.read(k), "64", "loop{i}");
        }
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].path, knobs[1]);
        let msg = err.to_string();
        assert!(
            msg.contains("loop1") && msg.contains("journal.json"),
            "{msg}"
        );
        // With nothing left, a journal that cannot be rewritten is no failure: it is removed.
        let mut entries = vec![entries.remove(0)];
        std::fs::remove_dir(sys.file(&knobs[1])).unwrap();
        std::fs::write(sys.file(&knobs[1]), "32\n").unwrap();
        restore_entries(&sys.root, &mut entries, false, |_| full()).unwrap();
        assert!(entries.is_empty());
    }

    /// `/proc/sys/vm/NAME` under the fixture root holding `value`; returns the live path.
    fn sysctl(sys: &Fake, name: &str, value: &str) -> String {
        let live = format!("/proc/sys/vm/{name}");
        let p = sys.file(&live);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, value).unwrap();
        live
    }

    /// A file that takes no write, to show restore leaves it alone.
    fn unwritable(sys: &Fake, live: &str) {
        break_knob(sys, live);
    }

    #[test]
    fn a_linked_sysctl_comes_back_through_the_form_that_was_in_use() {
        // A ratio in use (the default): the experiment writes bytes twice; the kernel sets
        // the ratio to 0 each time. Restore writes the ratio only: writing 0 to the bytes
        // form is refused by the kernel, and the ratio's write zeroes it.
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let ratio = sysctl(&sys, "dirty_ratio", "20\n");
        let bytes = sysctl(&sys, "dirty_bytes", "0\n");
        let mut j = sys.journal(state.path());
        for value in ["67108864", "134217728"] {
            j.set(&bytes, value).unwrap();
            std::fs::write(sys.file(&ratio), "0\n").unwrap();
        }
        let paths: Vec<&str> = j.entries().iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, [&ratio, &bytes, &ratio, &bytes]);
        unwritable(&sys, &bytes);
        let report = j.restore().unwrap();
        assert_eq!(sys.read(&ratio), "20");
        assert_eq!(report.restored.len(), 4);
        let lines = super::super::leftovers::restored_lines(&report, "", &Default::default());
        assert_eq!(lines.lines().count(), 2, "{lines}");

        // Bytes in use (the ratio reads 0): the experiment writes the ratio. Restore writes
        // the bytes back, and leaves the ratio's 0 to the kernel.
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let ratio = sysctl(&sys, "dirty_background_ratio", "0\n");
        let bytes = sysctl(&sys, "dirty_background_bytes", "1048576\n");
        let mut j = sys.journal(state.path());
        j.set(&ratio, "5").unwrap();
        std::fs::write(sys.file(&bytes), "0\n").unwrap();
        unwritable(&sys, &ratio);
        j.restore().unwrap();
        assert_eq!(sys.read(&bytes), "1048576");
        // Both forms are one setting: one lock.
        assert_eq!(
            kinds::classify(&ratio).unwrap().resource,
            kinds::classify(&bytes).unwrap().resource
        );
        assert_ne!(
            kinds::classify(&ratio).unwrap().resource,
            kinds::classify("/proc/sys/vm/dirty_ratio")
                .unwrap()
                .resource
        );
        assert!(kinds::classify("/proc/sys/vm/mmap_min_addr").is_err());

        // A tree with one form only: it comes back as it was.
        let sys = Fake::new();
        let state = tempfile::tempdir().unwrap();
        let bytes = sysctl(&sys, "dirty_bytes", "0\n");
        let mut j = sys.journal(state.path());
        j.set(&bytes, "1024").unwrap();
        j.restore().unwrap();
        assert_eq!(sys.read(&bytes), "0");
    }

    #[test]
    fn a_journal_from_an_earlier_boot_is_dropped_without_writing_anything() {
        let Some(now) = current_boot_id() else {
            return; // no boot id: nothing to tell boots apart by
        };
        // This machine's journal (no root) from another boot. Its entries name files that
        // do not exist, so a write, had one been tried, would show as `vanished`.
        let state = tempfile::tempdir().unwrap();
        let file = JournalFile {
            pid: 1,
            started_unix: 0.0,
            root: None,
            boot_id: Some("00000000-0000-0000-0000-000000000000".into()),
            placements: false,
            undo_if_killed: false,
            entries: vec![entry("/proc/irq/99999/smp_affinity_list", "0")],
        };
        write_journal(state.path(), &file).unwrap();
        assert!(pending(state.path()).unwrap().is_empty());
        let report = replay(state.path(), &SysRoot::live()).unwrap().unwrap();
        assert_eq!(report.reset_by_reboot.len(), 1);
        assert!(report.restored.is_empty() && report.vanished.is_empty());
        assert!(!state.path().join(JOURNAL).exists());
        // A run starting over one removes it and goes on.
        write_journal(state.path(), &file).unwrap();
        Journal::check_clean_in(state.path()).unwrap();
        assert!(!state.path().join(JOURNAL).exists());
        // The same boot's journal is not dropped.
        let this_boot = JournalFile {
            boot_id: Some(now),
            ..file
        };
        write_journal(state.path(), &this_boot).unwrap();
        assert!(Journal::check_clean_in(state.path()).is_err());
        assert_eq!(pending(state.path()).unwrap().len(), 1);
    }

    #[test]
    fn an_old_journal_without_a_root_is_this_machines() {
        let text = r#"{"pid": 5, "started_unix": 1.0, "entries": []}"#;
        let f: JournalFile = serde_json::from_str(text).unwrap();
        assert_eq!(f.root, None);
        assert!(!serde_json::to_string(&f).unwrap().contains("root"));
    }
}

//! Results live in one SQLite file so that years of runs can be selected, compared and
//! re-analysed without re-running anything. This module is the only code that speaks SQL: it
//! opens (creating or migrating) the file, records experiments and runs — each run in its own
//! transaction, so a crash loses at most the run in progress — and answers the queries `runs`,
//! `show` and `compare` need (runs by tag, one metric's values over many runs).

mod access;
pub(crate) mod listing;
mod merge;
mod schema;
mod series;
pub(crate) mod tags;
pub(crate) mod time;
pub use merge::{MergeReport, MergedExperiment, SkippedExperiment};
pub use series::SeriesPoint;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};
use serde::Serialize;

pub use schema::MIGRATIONS;

/// The database file used when neither `--db` nor `IOLAB_DB` names one.
pub(crate) const DEFAULT_DB: &str = "iolab.db";

/// Which database file a command uses: `--db` wins, then `IOLAB_DB`, then `iolab.db` in the
/// current directory. Every command resolves it here so they all agree.
pub(crate) fn resolve_db_path(cli_db: Option<&Path>) -> PathBuf {
    resolve_db_path_from(cli_db, std::env::var_os("IOLAB_DB").as_deref())
}

fn resolve_db_path_from(cli_db: Option<&Path>, env: Option<&std::ffi::OsStr>) -> PathBuf {
    if let Some(p) = cli_db {
        return p.to_path_buf();
    }
    match env {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => PathBuf::from(DEFAULT_DB),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite's own message is shown once: it is part of this message and deliberately not
    /// a `source`, which `{:#}` would print a second time.
    #[error("{path}: {cause}")]
    Sqlite {
        path: String,
        cause: rusqlite::Error,
    },
    #[error("{path}: the database cannot be written: {why}")]
    ReadOnly { path: String, why: String },
    #[error(
        "{path}: the database stayed locked by another process for more than {}s; try again \
         when it has finished (a running experiment, or a sqlite3 session in a transaction)",
        BUSY_TIMEOUT.as_secs()
    )]
    Busy { path: String },
    #[error("{path}: schema version {found} is newer than this iolab knows ({known}); use a newer iolab to read it")]
    TooNew {
        path: String,
        found: i64,
        known: i64,
    },
    #[error("{path}: no results database here (run an experiment first, or name one with --db or IOLAB_DB)")]
    Missing { path: String },
    #[error("{path}: no experiment with id {id}")]
    NoExperiment { path: String, id: i64 },
    #[error(
        "{path}: this SQLite file is not an iolab results database; name another file with --db"
    )]
    Foreign { path: String },
    #[error("{path}: {what}")]
    Invalid { path: String, what: String },
}

pub(crate) type Result<T> = std::result::Result<T, StoreError>;

/// How many times `insert_run` tries a run whose database stays locked.
pub(crate) const INSERT_ATTEMPTS: u32 = 3;

/// How long a command waits for another connection's lock before giving up.
pub(crate) const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

impl StoreError {
    /// SQLite's error about the file at `path`, with the cases people meet said plainly.
    pub(crate) fn from_sqlite(path: &str, e: rusqlite::Error) -> StoreError {
        use rusqlite::ErrorCode;
        let path = path.to_string();
        match e.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Busy { path },
            Some(ErrorCode::ReadOnly) => StoreError::ReadOnly {
                path,
                why: "SQLite refused to write to it (is the file or its directory read-only?)"
                    .into(),
            },
            Some(ErrorCode::SystemIoFailure) => {
                match access::network_filesystem(Path::new(&path)) {
                    Some(kind) => StoreError::Invalid {
                        what: format!(
                            "{e}: the file is on a network filesystem ({kind}), where SQLite's \
                         write-ahead log (iolab's, so that reading never blocks a running \
                         experiment) does not work; keep the database on a local disk (--db or \
                         IOLAB_DB)"
                        ),
                        path,
                    },
                    None => StoreError::Sqlite { path, cause: e },
                }
            }
            Some(ErrorCode::CannotOpen) => StoreError::Invalid {
                path,
                what: "SQLite cannot open the file; check that its directory exists and that \
                       iolab may read and write there"
                    .into(),
            },
            _ => StoreError::Sqlite { path, cause: e },
        }
    }

    /// True when another connection held the lock for longer than the busy timeout.
    pub(crate) fn is_busy(&self) -> bool {
        matches!(self, StoreError::Busy { .. })
    }
}

/// What the caller knows when an experiment starts.
#[derive(Debug, Clone, Default)]
pub struct NewExperiment {
    pub name: String,
    /// The experiment file's text, as read (so the run can be reproduced exactly).
    pub file_text: String,
    pub seed: u64,
    /// The shuffled run order, as JSON (whatever shape the plan uses).
    pub planned_order: serde_json::Value,
    pub host: String,
    pub kernel: String,
    /// The experiment this one is part of: a controlled host's own runs are an experiment
    /// of their own, part of the one that holds the hosts' aggregate.
    pub part_of: Option<i64>,
}

/// One finished run (or one that could not be run), with everything recorded about it.
/// `Store::insert_run` writes all of it in one transaction.
#[derive(Debug, Clone, Default)]
pub struct NewRun {
    pub experiment_id: i64,
    pub cell_key: String,
    /// Factor -> level, as a JSON object.
    pub cell_levels: serde_json::Value,
    pub repetition: u32,
    pub warmup: bool,
    pub start_unix: f64,
    pub end_unix: f64,
    pub status: RunStatus,
    pub fio_json: Option<String>,
    pub fio_command: Option<String>,
    pub job_file: Option<String>,
    /// The run's block trace: base name of its NAME.blktrace.CPU files, relative to the
    /// database's directory (see [`trace_location`]).
    pub trace: Option<String>,
    /// User tags (`--tag NAME=VALUE`); `host` and `kernel` come from the experiment unless set here.
    pub tags: Vec<(String, String)>,
    pub metrics: Vec<(String, f64)>,
    pub samples: Vec<SampleSeries>,
    /// The interval the sampler's metrics describe (`experiment::run::align`).
    pub sample_window: Option<serde_json::Value>,
    /// Cross-checks between fio's and the sampler's figures (`experiment::run::checks`).
    pub checks: Option<serde_json::Value>,
    /// Memory, versions and the kernel command line at the run's start.
    pub environment: Option<serde_json::Value>,
    /// Per-second series on the measured window's axis (`experiment::run::per_second`).
    pub series: Vec<SeriesPoint>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[serde(tag = "status", content = "reason", rename_all = "snake_case")]
pub enum RunStatus {
    #[default]
    Ok,
    Failed(String),
    /// The cell cannot be realised on this machine (e.g. the device cannot poll).
    NotApplicable(String),
}

impl RunStatus {
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Failed(_) => "failed",
            RunStatus::NotApplicable(_) => "not_applicable",
        }
    }

    pub(crate) fn reason(&self) -> Option<&str> {
        match self {
            RunStatus::Ok => None,
            RunStatus::Failed(r) | RunStatus::NotApplicable(r) => Some(r),
        }
    }

    fn from_columns(status: &str, reason: Option<String>) -> RunStatus {
        let reason = reason.unwrap_or_default();
        match status {
            "ok" => RunStatus::Ok,
            "not_applicable" => RunStatus::NotApplicable(reason),
            "failed" => RunStatus::Failed(reason),
            other => RunStatus::Failed(format!("unknown status {other:?}: {reason}")),
        }
    }
}

/// One sampled time series of one run: `t_offsets[i]` seconds after the run started, the
/// reading was `values[i]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SampleSeries {
    pub kind: String,
    pub key: String,
    pub t_offsets: Vec<f64>,
    pub values: Vec<f64>,
}

/// A stored experiment, with its run counts by status.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Experiment {
    pub id: i64,
    pub(crate) name: String,
    pub(crate) seed: u64,
    pub(crate) created_unix: f64,
    pub host: String,
    pub kernel: String,
    pub status: String,
    /// See `NewExperiment::part_of`; absent from JSON when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub part_of: Option<i64>,
    pub runs_ok: u64,
    pub runs_failed: u64,
    pub runs_not_applicable: u64,
    /// The tags its runs carry (`name=value`, sorted), but for the host and kernel above:
    /// what `compare` selects them by.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

impl Experiment {
    /// ", seed N" for the headers of `show` and `runs`; nothing for imported runs, which no
    /// seed ordered.
    pub(crate) fn seed_text(&self) -> String {
        if self.status == "imported" {
            String::new()
        } else {
            format!(", seed {}", self.seed)
        }
    }
}

/// A stored run (without its large texts; see `Store::run_texts`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    pub id: i64,
    pub(crate) experiment_id: i64,
    pub cell_key: String,
    pub cell_levels: serde_json::Value,
    pub repetition: u32,
    pub warmup: bool,
    pub start_unix: f64,
    pub end_unix: f64,
    #[serde(flatten)]
    pub status: RunStatus,
}

/// The large texts kept with a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunTexts {
    pub fio_json: Option<String>,
    pub fio_command: Option<String>,
    pub job_file: Option<String>,
    /// The run's block trace as stored (relative to the database's directory); resolve it
    /// with [`trace_location`].
    pub trace: Option<String>,
}

/// Where a run's fio options are read from ([`Store::job_texts`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum JobText {
    /// The job file iolab wrote for the run.
    JobFile(String),
    /// fio's JSON output (its `job options`), for a run stored without a job file.
    FioOutput(String),
}

/// What a run's figures rest on (schema version 3; absent for older runs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunBasis {
    pub run_id: i64,
    pub sample_window: Option<serde_json::Value>,
    pub checks: Option<serde_json::Value>,
    pub environment: Option<serde_json::Value>,
}

/// Where a stored trace name points: relative names are taken from the database's directory.
pub fn trace_location(db_path: &Path, stored: &str) -> PathBuf {
    let stored = Path::new(stored);
    if stored.is_absolute() {
        return stored.to_path_buf();
    }
    match db_path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(stored),
        _ => stored.to_path_buf(),
    }
}

/// One preflight finding as stored with an experiment.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct EnvironmentEntry {
    pub key: String,
    pub value: String,
    pub severity: Option<String>,
    pub advice: Option<String>,
}

/// An open results database.
pub struct Store {
    conn: Connection,
    path: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store({})", self.path)
    }
}

/// How many ids go into one `IN (...)` list: well under SQLite's variable limit.
const ID_CHUNK: usize = 500;

impl Store {
    /// Opens the database at `path` for writing, creating it if needed and migrating it to
    /// the current schema. Refuses a file written by a newer iolab, and says so when the file
    /// or its directory is read-only. Two processes creating the same new file at once both
    /// succeed: the schema is checked and created inside one `BEGIN IMMEDIATE` transaction.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        if let Some(why) = access::read_only_reason(path) {
            return Err(StoreError::ReadOnly { path: shown, why });
        }
        if path.is_dir() {
            return Err(StoreError::ReadOnly {
                path: shown,
                why: "it is a directory; name a file in it".into(),
            });
        }
        let conn =
            Connection::open(path).map_err(|source| StoreError::from_sqlite(&shown, source))?;
        let mut store = Store { conn, path: shown };
        store.configure()?;
        store.check_and_migrate()?;
        store.use_wal()?;
        Ok(store)
    }

    /// Checks, creating and changing nothing, that `open` would succeed: a run calls it before
    /// it touches the machine (it would otherwise stop at the end of its preparations), and
    /// its dry run to warn.
    pub fn check_writable(path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let read_only = |why: String| StoreError::ReadOnly {
            path: shown.clone(),
            why,
        };
        if let Some(why) = access::read_only_reason(path) {
            return Err(read_only(why));
        }
        if path.is_dir() {
            return Err(read_only("it is a directory; name a file in it".into()));
        }
        if path.exists() {
            // Ours and of a schema this iolab knows; an older one is upgraded by `open`.
            return Store::open_existing(path).map(drop);
        }
        let dir = access::directory(path);
        if !dir.is_dir() {
            return Err(read_only(format!(
                "its directory {} does not exist",
                dir.display()
            )));
        }
        Ok(())
    }

    /// Opens an existing database for reading commands, which change nothing in the file; a
    /// missing file is an error that says how to get one, instead of silently creating an
    /// empty database. A file of an older schema is read through an upgraded copy in memory:
    /// upgrading the file itself would lock out the older iolab that wrote it (another host's,
    /// or the next `iolab run` of a pinned version), for the sake of a `show`. Archived results
    /// on read-only media are read too ([`Store::open_immutable`]).
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Store> {
        use rusqlite::OpenFlags;
        let path = path.as_ref();
        if !path.exists() {
            return Err(StoreError::Missing {
                path: path.display().to_string(),
            });
        }
        let store = match access::read_only_reason(path) {
            Some(_) => Store::open_immutable(path)?,
            None => {
                let shown = path.display().to_string();
                // Read and write, as a writer's connection (a WAL file is read through its
                // shared memory, and a hot journal is rolled back), but never created.
                let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                let conn = Connection::open_with_flags(path, flags)
                    .map_err(|source| StoreError::from_sqlite(&shown, source))?;
                let mut store = Store { conn, path: shown };
                store.configure()?;
                store
            }
        };
        store.check_ours()?;
        let known = MIGRATIONS.len() as i64;
        let found = store.schema_version()?;
        if found > known {
            return Err(StoreError::TooNew {
                path: store.path.clone(),
                found,
                known,
            });
        }
        if found < known {
            return store.upgraded_in_memory();
        }
        Ok(store)
    }

    /// Opens a file that cannot be written here. In a read-only directory no journal can
    /// appear beside the file, so it is opened `immutable` (SQLite then needs no lock files,
    /// which it could not create; a WAL-mode file from an older iolab reads this way too).
    fn open_immutable(path: &Path) -> Result<Store> {
        use rusqlite::OpenFlags;
        let shown = path.display().to_string();
        let wrap = |source| StoreError::from_sqlite(&shown, source);
        // Immutable: SQLite takes no locks and creates no -shm/-wal/-journal files, which it
        // could not (read-only directory) or could not remove (read-only file). A file that
        // someone else is writing at that moment may read as of an earlier commit.
        let uri = access::file_uri(path, true);
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(uri, flags).map_err(wrap)?;
        conn.busy_handler(Some(wait_for_lock)).map_err(wrap)?;
        conn.execute_batch("PRAGMA trusted_schema = OFF;")
            .map_err(wrap)?;
        Ok(Store { conn, path: shown })
    }

    /// A copy of this file in memory, brought to the current schema; the file is left as it
    /// is. That costs the file's size in memory (a results database is megabytes; per-second
    /// series add about 16 bytes a reading), and only until a writer upgrades the file.
    fn upgraded_in_memory(self) -> Result<Store> {
        let wrap = |source| StoreError::from_sqlite(&self.path, source);
        let mut copy = Connection::open_in_memory().map_err(wrap)?;
        {
            use rusqlite::backup::{Backup, StepResult};
            let backup = Backup::new(&self.conn, &mut copy).map_err(wrap)?;
            // All pages in one step: one read transaction, so the copy is one commit's state.
            let started = std::time::Instant::now();
            while backup.step(-1).map_err(wrap)? != StepResult::Done {
                if started.elapsed() > BUSY_TIMEOUT {
                    return Err(StoreError::Invalid {
                        path: self.path.clone(),
                        what: "locked by another process for too long to be read".into(),
                    });
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
        let mut store = Store {
            conn: copy,
            path: self.path.clone(),
        };
        store.configure()?;
        store.check_and_migrate()?;
        Ok(store)
    }

    /// The file this store was opened from, as given.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |source| StoreError::from_sqlite(&self.path, source)
    }

    fn configure(&mut self) -> Result<()> {
        let path = self.path.clone();
        let wrap = |source| StoreError::from_sqlite(&path, source);
        // Long enough that a `show` in another terminal, another iolab creating the file, or
        // an admin's sqlite3 session holding the lock for a while never costs a finished run.
        self.conn.busy_handler(Some(wait_for_lock)).map_err(wrap)?;
        // trusted_schema off: nothing a file's schema defines may call functions with side
        // effects (the file may be someone else's).
        self.conn
            .execute_batch("PRAGMA foreign_keys = ON; PRAGMA trusted_schema = OFF;")
            .map_err(wrap)?;
        Ok(())
    }

    /// WAL: readers (a `show` in another terminal) never block the running experiment, and
    /// a commit is one sequential append with no fsync under NORMAL sync (durable against
    /// process crashes, the failure the per-run commit protects against); a rollback journal
    /// costs ~20 ms of fsyncs per run here, minutes for an import of thousands of runs.
    /// SQLite removes `-wal` and `-shm` when the last connection closes, which `Store`'s
    /// drop does; read-only opens are `immutable` and create neither.
    ///
    /// Switching a new file to WAL needs the file to itself; when another process is
    /// switching the same new file at that moment SQLite answers "locked" without waiting,
    /// so the switch is retried until it is done (by us or by the other) or the busy
    /// timeout has passed.
    fn use_wal(&mut self) -> Result<()> {
        let path = self.path.clone();
        let started = std::time::Instant::now();
        loop {
            let mode = self
                .conn
                .query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0));
            match mode {
                Ok(m) if m.eq_ignore_ascii_case("wal") || m.eq_ignore_ascii_case("memory") => break,
                Ok(m) => {
                    return Err(StoreError::Invalid {
                        path,
                        what: format!("could not switch to WAL journal mode (got {m})"),
                    })
                }
                Err(e) if busy(&e) && started.elapsed() < BUSY_TIMEOUT => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(e) => return Err(StoreError::from_sqlite(&path, e)),
            }
        }
        self.conn
            .execute_batch("PRAGMA synchronous = NORMAL;")
            .map_err(|e| StoreError::from_sqlite(&path, e))
    }

    /// The schema version of the open file.
    pub fn schema_version(&self) -> Result<i64> {
        self.conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(self.err())
    }

    /// Refuses files that belong to another program, before changing anything in them.
    fn check_ours(&self) -> Result<()> {
        check_ours_in(&self.conn).map_err(|e| self.ours_error(e))
    }

    fn ours_error(&self, e: Option<rusqlite::Error>) -> StoreError {
        match e {
            Some(source) => StoreError::from_sqlite(&self.path, source),
            None => StoreError::Foreign {
                path: self.path.clone(),
            },
        }
    }

    /// Checks the file is ours and brings it to the current schema, all inside one
    /// `BEGIN IMMEDIATE` transaction: a second process creating the same new file waits for
    /// the first (busy timeout), then finds the schema in place instead of creating it again
    /// or mistaking the first one's half-made tables for another program's.
    fn check_and_migrate(&mut self) -> Result<()> {
        let known = MIGRATIONS.len() as i64;
        let path = self.path.clone();
        let wrap = |source| StoreError::from_sqlite(&path, source);
        // Nothing to do (the usual case): no write lock taken.
        if self.schema_version()? == known {
            return self.check_ours();
        }
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(wrap)?;
        if let Err(e) = check_ours_in(&tx) {
            drop(tx);
            return Err(self.ours_error(e));
        }
        let found: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(wrap)?;
        if found > known {
            return Err(StoreError::TooNew {
                path: path.clone(),
                found,
                known,
            });
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            tx.execute_batch(sql).map_err(wrap)?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)
                .map_err(wrap)?;
        }
        tx.pragma_update(None, "application_id", schema::APPLICATION_ID)
            .map_err(wrap)?;
        tx.commit().map_err(wrap)?;
        Ok(())
    }

    /// Records a new experiment (status `running`) and returns its id.
    pub fn create_experiment(&mut self, e: &NewExperiment) -> Result<i64> {
        self.create_experiment_with_status(e, "running")
    }

    /// Like `create_experiment` with an explicit status (e.g. `imported` for `iolab import`).
    pub(crate) fn create_experiment_with_status(
        &mut self,
        e: &NewExperiment,
        status: &str,
    ) -> Result<i64> {
        insert_experiment(&self.conn, e, status).map_err(self.err())
    }

    /// Creates a `running` experiment and calls `then` with its id before the experiment is
    /// stored for good: if `then` fails, or the process dies before it returns, the
    /// experiment was never there. A run records itself in the state directory this way, so
    /// no SIGKILL can leave a `running` experiment that `iolab restore` knows nothing of.
    pub(crate) fn create_experiment_then<T, E: From<StoreError>>(
        &mut self,
        e: &NewExperiment,
        then: impl FnOnce(i64) -> std::result::Result<T, E>,
    ) -> std::result::Result<(i64, T), E> {
        let path = self.path.clone();
        let err = |source| StoreError::from_sqlite(&path, source);
        let tx = self.conn.transaction().map_err(err)?;
        let id = insert_experiment(&tx, e, "running").map_err(err)?;
        let value = then(id)?;
        tx.commit().map_err(err)?;
        Ok((id, value))
    }

    /// Marks an experiment `done`, `failed`, `interrupted`, ..., and the experiments that are
    /// part of it (its hosts' own) with it.
    pub fn set_experiment_status(&mut self, id: i64, status: &str) -> Result<()> {
        let n = self
            .conn
            .execute(
                "UPDATE experiments SET status = ?1 WHERE id = ?2 OR part_of = ?2",
                params![status, id],
            )
            .map_err(self.err())?;
        if n == 0 {
            return Err(StoreError::NoExperiment {
                path: self.path.clone(),
                id,
            });
        }
        Ok(())
    }

    /// Marks each host's own experiment of aggregate `id` by its own runs, as a run marks
    /// its experiment: `failed` when every run tried failed (no measured run is `ok`), else
    /// `done`. A host that left mid-run fails its own part, not the others', whose runs all
    /// went on.
    pub fn set_part_statuses_by_runs(&mut self, id: i64) -> Result<()> {
        let runs_of = |status: &str| {
            format!(
                "EXISTS (SELECT 1 FROM runs WHERE runs.experiment_id = experiments.id \
                 AND runs.warmup = 0 AND runs.status = '{status}')"
            )
        };
        self.conn
            .execute(
                &format!(
                    "UPDATE experiments SET status = CASE WHEN {} OR NOT {} THEN 'done' \
                     ELSE 'failed' END WHERE part_of = ?1",
                    runs_of("ok"),
                    runs_of("failed")
                ),
                params![id],
            )
            .map_err(self.err())?;
        Ok(())
    }

    /// Stores one run with its tags, metrics and samples in a single transaction, committed
    /// before returning. `host` and `kernel` tags are copied from the experiment unless the
    /// run's own tags set them (imported runs from other machines).
    ///
    /// A finished run is not lost to a busy database: each attempt waits up to
    /// `BUSY_TIMEOUT` for the lock, and a run still locked out is tried again, up to
    /// `INSERT_ATTEMPTS` times, before the error is returned.
    pub fn insert_run(&mut self, run: &NewRun) -> Result<i64> {
        let mut attempt = 1;
        loop {
            match self.insert_run_once(run) {
                Err(e) if e.is_busy() && attempt < INSERT_ATTEMPTS => attempt += 1,
                other => return other,
            }
        }
    }

    fn insert_run_once(&mut self, run: &NewRun) -> Result<i64> {
        let path = self.path.clone();
        let wrap = |source| StoreError::from_sqlite(&path, source);
        // IMMEDIATE: take the write lock first (waiting for it), so the transaction never
        // has to give up midway because another connection started writing after our read.
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(wrap)?;
        let exp: Option<(String, String)> = tx
            .query_row(
                "SELECT host, kernel FROM experiments WHERE id = ?1",
                [run.experiment_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(wrap)?;
        let Some((host, kernel)) = exp else {
            return Err(StoreError::NoExperiment {
                path,
                id: run.experiment_id,
            });
        };
        let levels = serde_json::to_string(&run.cell_levels).unwrap_or_else(|_| "null".into());
        tx.execute(
            "INSERT INTO runs (experiment_id, cell_key, cell_levels, repetition, warmup, start_unix,
                               end_unix, status, reason, fio_json, fio_command, job_file, trace,
                               sample_window, checks, environment)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
            params![
                run.experiment_id,
                run.cell_key,
                levels,
                run.repetition,
                run.warmup,
                run.start_unix,
                run.end_unix,
                run.status.as_str(),
                run.status.reason(),
                run.fio_json,
                run.fio_command,
                run.job_file,
                run.trace,
                run.sample_window.as_ref().map(|v| v.to_string()),
                run.checks.as_ref().map(|v| v.to_string()),
                run.environment.as_ref().map(|v| v.to_string()),
            ],
        )
        .map_err(wrap)?;
        let id = tx.last_insert_rowid();
        let has = |name: &str| run.tags.iter().any(|(n, _)| n == name);
        let mut tags: Vec<(String, String)> = Vec::new();
        if !has("host") {
            tags.push(("host".into(), host));
        }
        if !has("kernel") {
            tags.push(("kernel".into(), kernel));
        }
        tags.extend(run.tags.iter().cloned());
        insert_tags(&tx, id, &tags).map_err(wrap)?;
        insert_metrics(&tx, id, &run.metrics).map_err(wrap)?;
        insert_samples(&tx, id, &run.samples).map_err(wrap)?;
        series::insert(&tx, id, &run.series).map_err(wrap)?;
        tx.commit().map_err(wrap)?;
        Ok(id)
    }

    /// Adds or replaces tags on an existing run.
    pub fn add_tags(&mut self, run_id: i64, tags: &[(String, String)]) -> Result<()> {
        self.in_tx(|tx| insert_tags(tx, run_id, tags))
    }

    /// Adds or replaces metrics on an existing run.
    pub fn add_metrics(&mut self, run_id: i64, metrics: &[(String, f64)]) -> Result<()> {
        self.in_tx(|tx| insert_metrics(tx, run_id, metrics))
    }

    /// Records environment findings (preflight) for an experiment; a key given twice keeps the
    /// last value.
    pub fn add_environment(
        &mut self,
        experiment_id: i64,
        entries: &[EnvironmentEntry],
    ) -> Result<()> {
        self.in_tx(|tx| {
            let mut st = tx.prepare(
                "INSERT OR REPLACE INTO environment (experiment_id, key, value, severity, advice)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            for e in entries {
                st.execute(params![experiment_id, e.key, e.value, e.severity, e.advice])?;
            }
            Ok(())
        })
    }

    fn in_tx(&mut self, f: impl FnOnce(&Transaction<'_>) -> rusqlite::Result<()>) -> Result<()> {
        let path = self.path.clone();
        let wrap = |source| StoreError::from_sqlite(&path, source);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(wrap)?;
        f(&tx).map_err(wrap)?;
        tx.commit().map_err(wrap)
    }

    /// All experiments, oldest first, with run counts (warm-up runs not counted).
    pub fn experiments(&self) -> Result<Vec<Experiment>> {
        self.experiments_where("1", [])
    }

    fn experiments_where<P: rusqlite::Params + Copy>(
        &self,
        cond: &str,
        p: P,
    ) -> Result<Vec<Experiment>> {
        let sql = format!(
            "SELECT e.id, e.name, e.seed, e.created_unix, e.host, e.kernel, e.status, e.part_of,
                    COALESCE(SUM(r.status = 'ok'), 0),
                    COALESCE(SUM(r.status = 'failed'), 0),
                    COALESCE(SUM(r.status = 'not_applicable'), 0)
             FROM experiments e LEFT JOIN runs r ON r.experiment_id = e.id AND r.warmup = 0
             WHERE {cond} GROUP BY e.id ORDER BY e.id"
        );
        let mut st = self.conn.prepare(&sql).map_err(self.err())?;
        let rows = st
            .query_map(p, |r| {
                Ok(Experiment {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    seed: r.get::<_, i64>(2)? as u64,
                    created_unix: r.get(3)?,
                    host: r.get(4)?,
                    kernel: r.get(5)?,
                    status: r.get(6)?,
                    part_of: r.get(7)?,
                    runs_ok: r.get::<_, i64>(8)? as u64,
                    runs_failed: r.get::<_, i64>(9)? as u64,
                    runs_not_applicable: r.get::<_, i64>(10)? as u64,
                    tags: Vec::new(),
                })
            })
            .map_err(self.err())?;
        let mut exps = rows
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.err())?;
        drop(st);
        let sql = format!(
            "SELECT DISTINCT r.experiment_id, t.name, t.value FROM run_tags t
             JOIN runs r ON r.id = t.run_id JOIN experiments e ON e.id = r.experiment_id
             WHERE {cond} ORDER BY 1, 2, 3"
        );
        let mut st = self.conn.prepare(&sql).map_err(self.err())?;
        let mut rows = st.query(p).map_err(self.err())?;
        while let Some(row) = rows.next().map_err(self.err())? {
            let (id, name, value): (i64, String, String) = (
                row.get(0).map_err(self.err())?,
                row.get(1).map_err(self.err())?,
                row.get(2).map_err(self.err())?,
            );
            // Both ordered by id.
            let Ok(at) = exps.binary_search_by_key(&id, |e| e.id) else {
                continue;
            };
            let e = &mut exps[at];
            let said =
                (name == "host" && value == e.host) || (name == "kernel" && value == e.kernel);
            if !said {
                e.tags.push(format!("{name}={value}"));
            }
        }
        Ok(exps)
    }

    /// The experiments that are part of experiment `id` (its controlled hosts' own), by id.
    pub fn parts(&self, id: i64) -> Result<Vec<Experiment>> {
        self.experiments_where("e.part_of = ?1", [id])
    }

    /// The experiment holding host `host`'s own runs of experiment `id` (`--host`); an error
    /// that lists the hosts there are when `host` is not one of them.
    pub(crate) fn part_on_host(&self, id: i64, host: &str) -> anyhow::Result<i64> {
        let experiment = self.experiment(id)?;
        if let Some(whole) = experiment.part_of {
            anyhow::bail!(
                "experiment {id} is already host {}'s own runs (part of experiment {whole}); \
                 drop --host, or name experiment {whole} with it",
                experiment.host
            );
        }
        let parts = self.parts(id)?;
        if let Some(p) = parts.iter().find(|p| p.host == host) {
            return Ok(p.id);
        }
        if parts.is_empty() {
            anyhow::bail!(
                "experiment {id} has no runs of single hosts (only a run on controlled hosts, \
                 `[[target.host]] ssh = ...`, stores each host's own); drop --host"
            );
        }
        let names: Vec<&str> = parts.iter().map(|p| p.host.as_str()).collect();
        anyhow::bail!(
            "experiment {id} ran on no host {host:?}; its hosts are: {}",
            names.join(", ")
        )
    }

    /// One experiment by id.
    pub fn experiment(&self, id: i64) -> Result<Experiment> {
        self.experiments_where("e.id = ?1", [id])?
            .into_iter()
            .next()
            .ok_or_else(|| StoreError::NoExperiment {
                path: self.path.clone(),
                id,
            })
    }

    /// The experiment file's text and the planned order, as stored.
    pub fn experiment_texts(&self, id: i64) -> Result<(String, serde_json::Value)> {
        let row: Option<(String, String)> = self
            .conn
            .query_row(
                "SELECT file_text, planned_order FROM experiments WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(self.err())?;
        let (text, order) = row.ok_or_else(|| StoreError::NoExperiment {
            path: self.path.clone(),
            id,
        })?;
        Ok((
            text,
            serde_json::from_str(&order).unwrap_or(serde_json::Value::Null),
        ))
    }

    /// The runs of one experiment in the order they ran (warm-ups included, flagged).
    pub fn runs(&self, experiment_id: i64) -> Result<Vec<Run>> {
        let mut st = self
            .conn
            .prepare(
                "SELECT id, experiment_id, cell_key, cell_levels, repetition, warmup, start_unix,
                        end_unix, status, reason
                 FROM runs WHERE experiment_id = ?1 ORDER BY id",
            )
            .map_err(self.err())?;
        let rows = st
            .query_map([experiment_id], run_from_row)
            .map_err(self.err())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.err())
    }

    /// Of one experiment's runs with an analysed trace (a `trace_events` metric), how many
    /// there are and how many still name their trace files (`[trace] keep` may drop them).
    pub fn trace_counts(&self, experiment_id: i64) -> Result<(u64, u64)> {
        self.conn
            .query_row(
                "SELECT COUNT(*), COUNT(r.trace) FROM runs r
                 JOIN metrics m ON m.run_id = r.id AND m.name = 'trace_events'
                 WHERE r.experiment_id = ?1",
                [experiment_id],
                |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64)),
            )
            .map_err(self.err())
    }

    /// Where each run of one experiment kept its block trace (as stored: relative to the
    /// database's directory), by run id; runs without one are left out.
    pub(crate) fn run_traces(&self, experiment_id: i64) -> Result<HashMap<i64, String>> {
        let mut st = self
            .conn
            .prepare("SELECT id, trace FROM runs WHERE experiment_id = ?1 AND trace IS NOT NULL")
            .map_err(self.err())?;
        let rows = st
            .query_map([experiment_id], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(self.err())?;
        rows.collect::<rusqlite::Result<HashMap<_, _>>>()
            .map_err(self.err())
    }

    /// The run of `experiment_id` whose stored fio JSON is exactly `fio_json`, if any: an
    /// import of a file already stored there would count one measurement twice.
    /// Puts a run in another cell: an imported experiment's cells follow the fio options its
    /// outputs set apart, which a later import can add to.
    pub(crate) fn set_run_cell(
        &mut self,
        run_id: i64,
        cell_key: &str,
        cell_levels: &serde_json::Value,
    ) -> Result<()> {
        let levels = serde_json::to_string(cell_levels).unwrap_or_else(|_| "null".into());
        self.conn
            .execute(
                "UPDATE runs SET cell_key = ?1, cell_levels = ?2 WHERE id = ?3",
                params![cell_key, levels, run_id],
            )
            .map_err(self.err())?;
        Ok(())
    }

    /// The stored fio JSON, command line and job file of one run.
    pub fn run_texts(&self, run_id: i64) -> Result<Option<RunTexts>> {
        self.conn
            .query_row(
                "SELECT fio_json, fio_command, job_file, trace FROM runs WHERE id = ?1",
                [run_id],
                |r| {
                    Ok(RunTexts {
                        fio_json: r.get(0)?,
                        fio_command: r.get(1)?,
                        job_file: r.get(2)?,
                        trace: r.get(3)?,
                    })
                },
            )
            .optional()
            .map_err(self.err())
    }

    /// The window, checks and environment of every run of one experiment, by run id.
    pub fn run_bases(&self, experiment_id: i64) -> Result<Vec<RunBasis>> {
        self.bases(experiment_id, false)
    }

    /// The same of its measured runs that succeeded only: what `show` and `report` sum up
    /// beside tables of their metrics (a warm-up's or a failed run's are in none).
    pub fn measured_run_bases(&self, experiment_id: i64) -> Result<Vec<RunBasis>> {
        self.bases(experiment_id, true)
    }

    fn bases(&self, experiment_id: i64, measured_only: bool) -> Result<Vec<RunBasis>> {
        let mut st = self
            .conn
            .prepare(if measured_only {
                "SELECT id, sample_window, checks, environment FROM runs
                 WHERE experiment_id = ?1 AND warmup = 0 AND status = 'ok' ORDER BY id"
            } else {
                "SELECT id, sample_window, checks, environment FROM runs
                 WHERE experiment_id = ?1 ORDER BY id"
            })
            .map_err(self.err())?;
        let json = |t: Option<String>| t.and_then(|t| serde_json::from_str(&t).ok());
        let rows = st
            .query_map([experiment_id], |r| {
                Ok(RunBasis {
                    run_id: r.get(0)?,
                    sample_window: json(r.get(1)?),
                    checks: json(r.get(2)?),
                    environment: json(r.get(3)?),
                })
            })
            .map_err(self.err())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.err())
    }

    /// Ids of the non-warm-up runs that carry every given tag (name = value), ascending.
    /// No filters selects all non-warm-up runs.
    pub fn select_runs(&self, tags: &[(&str, &str)]) -> Result<Vec<i64>> {
        let mut sql = String::from("SELECT r.id FROM runs r WHERE r.warmup = 0");
        for i in 0..tags.len() {
            sql.push_str(&format!(
                " AND EXISTS (SELECT 1 FROM run_tags t WHERE t.run_id = r.id AND t.name = ?{} AND t.value = ?{})",
                2 * i + 1,
                2 * i + 2
            ));
        }
        sql.push_str(" ORDER BY r.id");
        let args: Vec<&str> = tags.iter().flat_map(|(n, v)| [*n, *v]).collect();
        let mut st = self.conn.prepare(&sql).map_err(self.err())?;
        let rows = st
            .query_map(rusqlite::params_from_iter(args), |r| r.get(0))
            .map_err(self.err())?;
        rows.collect::<rusqlite::Result<Vec<i64>>>()
            .map_err(self.err())
    }

    /// The groups of runs among `run_ids` that hold the same fio output (one measurement
    /// stored in several experiments, as imports may do), each sorted; none for runs whose
    /// outputs all differ.
    pub(crate) fn runs_with_one_output(&self, run_ids: &[i64]) -> Result<Vec<Vec<i64>>> {
        use std::hash::{Hash, Hasher};
        let mut by_hash: BTreeMap<u64, Vec<i64>> = BTreeMap::new();
        for chunk in run_ids.chunks(ID_CHUNK) {
            let marks = vec!["?"; chunk.len()].join(",");
            let sql = format!(
                "SELECT id, fio_json FROM runs WHERE fio_json IS NOT NULL AND id IN ({marks})"
            );
            let mut st = self.conn.prepare_cached(&sql).map_err(self.err())?;
            let mut rows = st
                .query(rusqlite::params_from_iter(chunk))
                .map_err(self.err())?;
            while let Some(row) = rows.next().map_err(self.err())? {
                let id: i64 = row.get(0).map_err(self.err())?;
                let text: &str = row
                    .get_ref(1)
                    .and_then(|v| v.as_str().map_err(Into::into))
                    .map_err(self.err())?;
                let mut h = std::collections::hash_map::DefaultHasher::new();
                text.hash(&mut h);
                by_hash.entry(h.finish()).or_default().push(id);
            }
        }
        let mut out = Vec::new();
        for mut ids in by_hash.into_values().filter(|ids| ids.len() > 1) {
            // Equal hashes of different texts are possible, if unlikely: the texts decide.
            let marks = vec!["?"; ids.len()].join(",");
            let distinct: i64 = self
                .conn
                .query_row(
                    &format!("SELECT count(DISTINCT fio_json) FROM runs WHERE id IN ({marks})"),
                    rusqlite::params_from_iter(&ids),
                    |r| r.get(0),
                )
                .map_err(self.err())?;
            if distinct == 1 {
                ids.sort_unstable();
                out.push(ids);
            }
        }
        out.sort();
        Ok(out)
    }

    /// What each of `run_ids` ran: its job file, or, for a run stored without one (an
    /// import), its fio output, whose job options say the same. Runs with neither are left
    /// out. The output is read only where there is no job file: it can be large.
    pub(crate) fn job_texts(&self, run_ids: &[i64]) -> Result<Vec<(i64, JobText)>> {
        let mut out = Vec::new();
        for chunk in run_ids.chunks(ID_CHUNK) {
            let marks = vec!["?"; chunk.len()].join(",");
            let sql = format!(
                "SELECT id, job_file, CASE WHEN job_file IS NULL THEN fio_json END FROM runs \
                 WHERE id IN ({marks}) AND (job_file IS NOT NULL OR fio_json IS NOT NULL)"
            );
            let mut st = self.conn.prepare_cached(&sql).map_err(self.err())?;
            let rows = st
                .query_map(rusqlite::params_from_iter(chunk), |r| {
                    let id: i64 = r.get(0)?;
                    let text = match r.get::<_, Option<String>>(1)? {
                        Some(job) => JobText::JobFile(job),
                        None => JobText::FioOutput(r.get(2)?),
                    };
                    Ok((id, text))
                })
                .map_err(self.err())?;
            for row in rows {
                out.push(row.map_err(self.err())?);
            }
        }
        Ok(out)
    }

    /// Every tag name present in the database, sorted (for errors that say what exists).
    pub(crate) fn tag_names(&self) -> Result<Vec<String>> {
        self.strings("SELECT DISTINCT name FROM run_tags ORDER BY name", [])
    }

    /// The tags of one run, by name.
    pub fn run_tags(&self, run_id: i64) -> Result<Vec<(String, String)>> {
        let mut st = self
            .conn
            .prepare("SELECT name, value FROM run_tags WHERE run_id = ?1 ORDER BY name")
            .map_err(self.err())?;
        let rows = st
            .query_map([run_id], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(self.err())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.err())
    }

    /// `(run id, value)` of one metric for the given runs, ascending by run id; runs without
    /// that metric are absent.
    pub fn metric_values(&self, run_ids: &[i64], metric: &str) -> Result<Vec<(i64, f64)>> {
        let mut out = Vec::with_capacity(run_ids.len());
        for chunk in run_ids.chunks(ID_CHUNK) {
            let marks = vec!["?"; chunk.len()].join(",");
            let sql =
                format!("SELECT run_id, value FROM metrics WHERE name = ? AND run_id IN ({marks})");
            let mut st = self.conn.prepare_cached(&sql).map_err(self.err())?;
            let mut args: Vec<rusqlite::types::Value> = vec![metric.to_string().into()];
            args.extend(chunk.iter().map(|&id| rusqlite::types::Value::Integer(id)));
            let rows = st
                .query_map(rusqlite::params_from_iter(args), |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .map_err(self.err())?;
            for row in rows {
                out.push(row.map_err(self.err())?);
            }
        }
        out.sort_by_key(|&(id, _)| id);
        Ok(out)
    }

    /// All metrics of one run, by name.
    pub fn run_metrics(&self, run_id: i64) -> Result<Vec<(String, f64)>> {
        let mut st = self
            .conn
            .prepare("SELECT name, value FROM metrics WHERE run_id = ?1 ORDER BY name")
            .map_err(self.err())?;
        let rows = st
            .query_map([run_id], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(self.err())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.err())
    }

    /// Every metric name present in the database, sorted.
    pub fn metric_names(&self) -> Result<Vec<String>> {
        self.strings("SELECT DISTINCT name FROM metrics ORDER BY name", [])
    }

    /// Every value a tag takes, sorted.
    pub fn tag_values(&self, name: &str) -> Result<Vec<String>> {
        self.strings(
            "SELECT DISTINCT value FROM run_tags WHERE name = ?1 ORDER BY value",
            [name],
        )
    }

    /// The sample series of one run.
    pub fn samples(&self, run_id: i64) -> Result<Vec<SampleSeries>> {
        let mut st = self
            .conn
            .prepare(
                "SELECT kind, key, t_offsets, vals FROM samples WHERE run_id = ?1 ORDER BY kind, key",
            )
            .map_err(self.err())?;
        let rows = st
            .query_map([run_id], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Vec<u8>>(2)?,
                    r.get::<_, Vec<u8>>(3)?,
                ))
            })
            .map_err(self.err())?;
        let mut out = Vec::new();
        for row in rows {
            let (kind, key, t, v) = row.map_err(self.err())?;
            let (Some(t_offsets), Some(values)) = (unpack_f64(&t), unpack_f64(&v)) else {
                return Err(StoreError::Invalid {
                    path: self.path.clone(),
                    what: format!("run {run_id}: sample series {kind}/{key} is not a whole number of f64 values"),
                });
            };
            out.push(SampleSeries {
                kind,
                key,
                t_offsets,
                values,
            });
        }
        Ok(out)
    }

    /// The environment findings recorded with an experiment, by key.
    pub fn environment(&self, experiment_id: i64) -> Result<Vec<EnvironmentEntry>> {
        let mut st = self
            .conn
            .prepare(
                "SELECT key, value, severity, advice FROM environment WHERE experiment_id = ?1 ORDER BY key",
            )
            .map_err(self.err())?;
        let rows = st
            .query_map([experiment_id], |r| {
                Ok(EnvironmentEntry {
                    key: r.get(0)?,
                    value: r.get(1)?,
                    severity: r.get(2)?,
                    advice: r.get(3)?,
                })
            })
            .map_err(self.err())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.err())
    }

    fn strings<P: rusqlite::Params>(&self, sql: &str, p: P) -> Result<Vec<String>> {
        let mut st = self.conn.prepare(sql).map_err(self.err())?;
        let rows = st.query_map(p, |r| r.get(0)).map_err(self.err())?;
        rows.collect::<rusqlite::Result<Vec<String>>>()
            .map_err(self.err())
    }
}

/// SQLite's busy handler: waits for another connection's lock up to `BUSY_TIMEOUT`, and says
/// so once a wait has lasted a second (a minute's silence looks like a hang).
fn wait_for_lock(attempt: i32) -> bool {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};
    static SAID: AtomicBool = AtomicBool::new(false);
    thread_local! {
        static SINCE: Cell<Option<Instant>> = const { Cell::new(None) };
    }
    let now = Instant::now();
    // Attempt 0 starts a new wait.
    let since = SINCE.with(|s| {
        if attempt == 0 || s.get().is_none() {
            s.set(Some(now));
        }
        s.get().unwrap_or(now)
    });
    let waited = now.duration_since(since);
    if waited >= BUSY_TIMEOUT {
        return false;
    }
    if waited >= Duration::from_secs(1) && !SAID.swap(true, Ordering::Relaxed) {
        eprintln!(
            "iolab: waiting for the results database, locked by another process (an iolab \
             writing to it, or a sqlite3 session in a transaction); giving up after {}s",
            BUSY_TIMEOUT.as_secs()
        );
    }
    // Short sleeps at first (most locks are a commit's milliseconds), then 20 ms.
    std::thread::sleep(Duration::from_millis((attempt as u64 + 1).min(20)));
    true
}

/// True for SQLite's "the file is locked by another connection" answers.
fn busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// `Ok` when the open file is empty or iolab's; `Err(None)` when it belongs to another
/// program; `Err(Some(e))` when SQLite failed.
fn check_ours_in(conn: &Connection) -> std::result::Result<(), Option<rusqlite::Error>> {
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let app_id: i32 = conn.query_row("PRAGMA application_id", [], |r| r.get(0))?;
    // iolab's schema has no views and no triggers: a file handed over with one (a view over
    // an endless recursive query in place of a table hung `show`) is not iolab's.
    let code: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type IN ('view', 'trigger')",
        [],
        |r| r.get(0),
    )?;
    let foreign = code > 0
        || if found == 0 {
            let objects: i64 =
                conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
            objects > 0
        } else {
            app_id != schema::APPLICATION_ID
        };
    if foreign {
        Err(None)
    } else {
        Ok(())
    }
}

fn run_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Run> {
    let levels: String = r.get(3)?;
    Ok(Run {
        id: r.get(0)?,
        experiment_id: r.get(1)?,
        cell_key: r.get(2)?,
        cell_levels: serde_json::from_str(&levels).unwrap_or(serde_json::Value::Null),
        repetition: r.get(4)?,
        warmup: r.get(5)?,
        start_unix: r.get(6)?,
        end_unix: r.get(7)?,
        status: RunStatus::from_columns(&r.get::<_, String>(8)?, r.get(9)?),
    })
}

fn insert_tags(
    tx: &Transaction<'_>,
    run_id: i64,
    tags: &[(String, String)],
) -> rusqlite::Result<()> {
    let mut st = tx.prepare_cached(
        "INSERT OR REPLACE INTO run_tags (run_id, name, value) VALUES (?1, ?2, ?3)",
    )?;
    for (n, v) in tags {
        st.execute(params![run_id, n, v])?;
    }
    Ok(())
}

fn insert_metrics(
    tx: &Transaction<'_>,
    run_id: i64,
    metrics: &[(String, f64)],
) -> rusqlite::Result<()> {
    let mut st = tx.prepare_cached(
        "INSERT OR REPLACE INTO metrics (run_id, name, value) VALUES (?1, ?2, ?3)",
    )?;
    for (n, v) in metrics {
        // SQLite stores NaN as NULL, which the NOT NULL column rejects: a metric that could not
        // be computed is simply absent.
        if v.is_finite() {
            st.execute(params![run_id, n, v])?;
        }
    }
    Ok(())
}

fn insert_samples(
    tx: &Transaction<'_>,
    run_id: i64,
    samples: &[SampleSeries],
) -> rusqlite::Result<()> {
    let mut st = tx.prepare_cached(
        "INSERT OR REPLACE INTO samples (run_id, kind, key, t_offsets, vals) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for s in samples {
        let n = s.t_offsets.len().min(s.values.len());
        st.execute(params![
            run_id,
            s.kind,
            s.key,
            pack_f64(&s.t_offsets[..n]),
            pack_f64(&s.values[..n])
        ])?;
    }
    Ok(())
}

fn pack_f64(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn unpack_f64(b: &[u8]) -> Option<Vec<f64>> {
    if !b.len().is_multiple_of(8) {
        return None;
    }
    Some(
        b.chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("chunk of 8")))
            .collect(),
    )
}

/// Inserts an experiment row with `status`; returns its id.
fn insert_experiment(
    conn: &rusqlite::Connection,
    e: &NewExperiment,
    status: &str,
) -> rusqlite::Result<i64> {
    let order = serde_json::to_string(&e.planned_order).unwrap_or_else(|_| "null".into());
    conn.execute(
        "INSERT INTO experiments (name, file_text, seed, planned_order, created_unix, host, kernel, status, part_of)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            e.name,
            e.file_text,
            e.seed as i64,
            order,
            time::now_unix(),
            e.host,
            e.kernel,
            status,
            e.part_of
        ],
    )?;
    Ok(conn.last_insert_rowid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_messages_appear_once_and_busy_says_what_to_do() {
        let failure = |code| {
            rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(code),
                Some("database is locked".into()),
            )
        };
        let e = StoreError::from_sqlite("r.db", failure(rusqlite::ffi::SQLITE_BUSY));
        assert!(e.is_busy());
        let text = format!("{:#}", anyhow::Error::new(e));
        assert!(
            text.starts_with("r.db: the database stayed locked"),
            "{text}"
        );
        assert!(text.contains("more than 60s"), "{text}");
        let e = StoreError::from_sqlite("r.db", failure(rusqlite::ffi::SQLITE_ERROR));
        let text = format!("{:#}", anyhow::Error::new(e));
        assert_eq!(text, "r.db: database is locked");
        let e = StoreError::from_sqlite("r.db", failure(rusqlite::ffi::SQLITE_READONLY));
        let text = format!("{:#}", anyhow::Error::new(e));
        assert!(
            text.contains("r.db: the database cannot be written"),
            "{text}"
        );
    }
    use std::ffi::OsStr;

    #[test]
    fn db_path_prefers_flag_then_env_then_default() {
        assert_eq!(
            resolve_db_path_from(Some(Path::new("a.db")), Some(OsStr::new("b.db"))),
            PathBuf::from("a.db")
        );
        assert_eq!(
            resolve_db_path_from(None, Some(OsStr::new("b.db"))),
            PathBuf::from("b.db")
        );
        assert_eq!(
            resolve_db_path_from(None, Some(OsStr::new(""))),
            PathBuf::from(DEFAULT_DB)
        );
        assert_eq!(resolve_db_path_from(None, None), PathBuf::from(DEFAULT_DB));
    }

    #[test]
    fn f64_packing_round_trips_and_rejects_ragged_blobs() {
        let v = vec![0.0, 1.5, -2.25, f64::MAX];
        assert_eq!(unpack_f64(&pack_f64(&v)).unwrap(), v);
        assert_eq!(unpack_f64(&[0u8; 7]), None);
    }

    #[test]
    fn status_round_trips_through_columns() {
        for s in [
            RunStatus::Ok,
            RunStatus::Failed("fio exit 1".into()),
            RunStatus::NotApplicable("cannot poll".into()),
        ] {
            let back = RunStatus::from_columns(s.as_str(), s.reason().map(String::from));
            assert_eq!(back, s);
        }
    }

    /// A database as an older iolab wrote it: schema `version`, one experiment, and one run
    /// with the value `extra` in the column `column` (one that version has).
    pub(super) fn older_file(path: &Path, version: usize, column: &str, extra: &str) {
        let conn = Connection::open(path).unwrap();
        for m in &MIGRATIONS[..version] {
            conn.execute_batch(m).unwrap();
        }
        conn.pragma_update(None, "user_version", version as i64)
            .unwrap();
        conn.pragma_update(None, "application_id", schema::APPLICATION_ID)
            .unwrap();
        conn.execute_batch(&format!(
            "INSERT INTO experiments VALUES (1, 'e', '', 0, '{{}}', 0, 'h', 'k', 'done');
             INSERT INTO runs (experiment_id, cell_key, cell_levels, repetition, start_unix,
                               end_unix, status, {column})
             VALUES (1, 'c', '{{}}', 1, 0, 1, 'ok', '{extra}');"
        ))
        .unwrap();
    }

    /// The first iolab's database, whose run has a job file.
    fn version_1_file(path: &Path) {
        older_file(path, 1, "job_file", "old job");
    }

    /// Reading commands change nothing in the file: an older one is read through an
    /// upgraded copy, so the iolab that wrote it can still write it.
    #[test]
    fn reading_an_older_file_leaves_it_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.db");
        version_1_file(&path);
        let before = std::fs::read(&path).unwrap();
        {
            let db = Store::open_existing(&path).unwrap();
            assert_eq!(db.schema_version().unwrap(), MIGRATIONS.len() as i64);
            let old = db.run_texts(1).unwrap().unwrap();
            assert_eq!(old.job_file.as_deref(), Some("old job"));
            assert_eq!(db.run_bases(1).unwrap()[0].environment, None);
            assert_eq!(db.path(), path.display().to_string());
        }
        // So is one on read-only media.
        let archived = Store::open_immutable(&path).unwrap();
        let archived = archived.upgraded_in_memory().unwrap();
        assert_eq!(
            archived.run_texts(1).unwrap().unwrap().job_file.as_deref(),
            Some("old job")
        );
        drop(archived);
        assert!(std::fs::read(&path).unwrap() == before, "the file changed");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["v1.db"]);
        // A writer's open still upgrades it.
        assert_eq!(
            Store::open(&path).unwrap().schema_version().unwrap(),
            MIGRATIONS.len() as i64
        );
    }

    #[test]
    fn a_version_1_file_gains_the_trace_column_and_keeps_its_runs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.db");
        version_1_file(&path);
        let mut db = Store::open(&path).unwrap();
        assert_eq!(db.schema_version().unwrap(), MIGRATIONS.len() as i64);
        let old = db.run_texts(1).unwrap().unwrap();
        assert_eq!(old.job_file.as_deref(), Some("old job"));
        assert_eq!(old.trace, None);
        // Version 3's columns exist and are empty for the old run.
        let bases = db.run_bases(1).unwrap();
        assert_eq!(bases.len(), 1);
        assert_eq!(bases[0].sample_window, None);
        assert_eq!(bases[0].environment, None);
        let id = db
            .insert_run(&NewRun {
                experiment_id: 1,
                cell_key: "c".into(),
                trace: Some("v1.db.traces/e1/run".into()),
                checks: Some(serde_json::json!([{"check": "x"}])),
                ..Default::default()
            })
            .unwrap();
        let stored = db.run_texts(id).unwrap().unwrap().trace.unwrap();
        let basis = db.run_bases(1).unwrap().pop().unwrap();
        assert_eq!(basis.run_id, id);
        assert_eq!(basis.checks.unwrap()[0]["check"], "x");
        assert_eq!(
            trace_location(&path, &stored),
            dir.path().join("v1.db.traces/e1/run")
        );
        assert_eq!(
            trace_location(Path::new("r.db"), "r.db.traces/x"),
            PathBuf::from("r.db.traces/x")
        );
        // A warm-up's basis is kept, and left out of the measured runs' (what `show` sums).
        let warmup = db
            .insert_run(&NewRun {
                experiment_id: 1,
                cell_key: "c".into(),
                warmup: true,
                ..Default::default()
            })
            .unwrap();
        // So is a failed run's: it has no metrics in the tables.
        let failed = db
            .insert_run(&NewRun {
                experiment_id: 1,
                cell_key: "c".into(),
                status: RunStatus::Failed("fio exited with 1".into()),
                ..Default::default()
            })
            .unwrap();
        let ids = |b: Vec<RunBasis>| b.iter().map(|b| b.run_id).collect::<Vec<_>>();
        assert_eq!(ids(db.run_bases(1).unwrap()), [1, id, warmup, failed]);
        assert_eq!(ids(db.measured_run_bases(1).unwrap()), [1, id]);
    }
}

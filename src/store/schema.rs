//! The database layout as an ordered list of migrations. The schema version lives in SQLite's
//! `PRAGMA user_version`: migration N (0-based) brings a file from version N to N+1. Old files
//! are upgraded in place; a file written by a newer iolab (a version beyond this list) is
//! refused rather than guessed at, so old binaries never corrupt newer results.
//!
//! Why samples are one row per (run, series) with packed arrays, not one row per reading: a
//! 60 s run sampled every second on a 2-CPU machine with ~30 IRQ lines already yields ~60
//! interrupt series, 12 per-CPU CPU series and ~10 device series, i.e. ~5,000 readings; on a
//! 64-CPU server with a few hundred IRQ lines that becomes ~1.5 million readings per run. As
//! rows (run id, offset, kind, key, value plus index) that is ~60 bytes each: gigabytes after a
//! few hundred runs, and every `show` pays for the index. Packed little-endian f64 arrays cost
//! 16 bytes per reading (offset + value), need no index beyond the run id, and a series is read
//! back whole anyway (plots, rates). Nobody queries "all readings where value > x" across runs.

/// Marks a SQLite file as iolab's (`PRAGMA application_id`, "iolb"), so iolab never adds its
/// tables to some other program's database given by mistake.
pub(crate) const APPLICATION_ID: i32 = 0x696f_6c62;

/// Each entry is applied in one transaction; never edit a shipped entry, append a new one.
pub const MIGRATIONS: &[&str] = &[
    // 1: the first layout.
    r#"
CREATE TABLE experiments (
    id            INTEGER PRIMARY KEY,
    name          TEXT NOT NULL,
    file_text     TEXT NOT NULL,
    seed          INTEGER NOT NULL,
    planned_order TEXT NOT NULL,          -- JSON
    created_unix  REAL NOT NULL,
    host          TEXT NOT NULL,
    kernel        TEXT NOT NULL,
    status        TEXT NOT NULL           -- running | done | failed | interrupted | imported
);

CREATE TABLE runs (
    id            INTEGER PRIMARY KEY,
    experiment_id INTEGER NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
    cell_key      TEXT NOT NULL,
    cell_levels   TEXT NOT NULL,          -- JSON object factor -> level
    repetition    INTEGER NOT NULL,
    warmup        INTEGER NOT NULL DEFAULT 0,
    start_unix    REAL NOT NULL,
    end_unix      REAL NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'not_applicable')),
    reason        TEXT,                   -- why failed / not applicable
    fio_json      TEXT,
    fio_command   TEXT,
    job_file      TEXT
);
CREATE INDEX runs_by_experiment ON runs(experiment_id, cell_key, repetition);

CREATE TABLE run_tags (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name   TEXT NOT NULL,
    value  TEXT NOT NULL,
    PRIMARY KEY (run_id, name)
) WITHOUT ROWID;
CREATE INDEX run_tags_by_value ON run_tags(name, value, run_id);

CREATE TABLE metrics (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name   TEXT NOT NULL,
    value  REAL NOT NULL,
    PRIMARY KEY (run_id, name)
) WITHOUT ROWID;
CREATE INDEX metrics_by_name ON metrics(name, run_id, value);

CREATE TABLE samples (
    run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    kind      TEXT NOT NULL,              -- e.g. irq, cpu, disk
    key       TEXT NOT NULL,              -- e.g. "45/cpu1", "cpu0/sys", "loop0/r_per_s"
    t_offsets BLOB NOT NULL,              -- f64 LE seconds since run start
    vals      BLOB NOT NULL,              -- f64 LE, same length
    PRIMARY KEY (run_id, kind, key)
) WITHOUT ROWID;

CREATE TABLE environment (
    experiment_id INTEGER NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
    key           TEXT NOT NULL,
    value         TEXT NOT NULL,
    severity      TEXT,
    advice        TEXT,
    PRIMARY KEY (experiment_id, key)
) WITHOUT ROWID;
"#,
    // 2: a run's block trace (`trace = true` experiments): the trace's base name
    // (NAME.blktrace.CPU files), relative to the database's directory so the two move together.
    r#"
ALTER TABLE runs ADD COLUMN trace TEXT;
"#,
    // 3: what a run's figures rest on (issue 12), each a JSON document: the interval the
    // sampler's metrics were taken over, the cross-checks between fio's and the sampler's
    // figures (both figures each), and the environment at the run's start (memory, versions,
    // kernel command line).
    r#"
ALTER TABLE runs ADD COLUMN sample_window TEXT;
ALTER TABLE runs ADD COLUMN checks TEXT;
ALTER TABLE runs ADD COLUMN environment TEXT;
"#,
    // 4: per-second series within a run (issue 12), on one time axis: seconds since the
    // measured window's start (`sample_window`). One row per second per series keeps them
    // small (a 60 s run with 2 CPUs and one device: ~10 series, 600 rows) and lets a plot
    // ask for one series of many runs without unpacking blobs. `t_s` is the end of the
    // second the value covers; the last one may be shorter (from the previous `t_s`).
    r#"
CREATE TABLE series (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name   TEXT NOT NULL,                 -- e.g. read_iops, loop3:dev_r_per_s, cpu1:irq_per_s
    t_s    REAL NOT NULL,
    value  REAL NOT NULL,
    PRIMARY KEY (run_id, name, t_s)
) WITHOUT ROWID;
"#,
    // 5: experiments run on controlled hosts (issue 14): each host's own runs form an
    // experiment of their own (its host, kernel, environment and samples) that is part of the
    // experiment holding the aggregate, so `show`, `compare`, `plot` and `report` take either.
    r#"
ALTER TABLE experiments ADD COLUMN part_of INTEGER REFERENCES experiments(id) ON DELETE CASCADE;
"#,
];

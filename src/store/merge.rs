//! Merging other iolab databases into this one (`iolab import OTHER.db`). The same experiment
//! run on two machines, or on one machine booted into two kernels with a database each, can
//! only be compared once its runs sit in one file; copying fio's JSON over (`import` of fio
//! outputs) would lose the samples, series, cross-checks and environment iolab kept with them.
//!
//! Rows are copied column by column as SQLite holds them, so a column a later migration adds
//! travels without this module knowing it; what must be known is which columns are ids, and
//! those are renumbered here (a test fails when a table appears that this module does not
//! copy). An experiment already in the file (same name, start, seed, host, kernel and file
//! text: the same database merged twice) is skipped and named, but for runs it gained since
//! (`import --experiment` adds to one), which are added. All sources go in one
//! transaction: a failure stores nothing.

use std::path::Path;

use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension, Transaction};
use serde::Serialize;

use super::{Result, Store, StoreError};

/// One experiment copied: its id there and here.
#[derive(Debug, Clone, Serialize)]
pub struct MergedExperiment {
    pub from: i64,
    pub to: i64,
    pub name: String,
    pub runs: u64,
    /// Ids here of the experiments that are its parts (one per controlled host), if any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<i64>,
}

/// One experiment of the source left out: this file already holds it (`here`), or it is
/// still running there, so a copy now would stay incomplete (and a later merge would find it
/// already here).
#[derive(Debug, Clone, Serialize)]
pub struct SkippedExperiment {
    pub from: i64,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub here: Option<i64>,
    pub why: String,
}

/// What one source database came to.
#[derive(Debug, Clone, Serialize)]
pub struct MergeReport {
    pub source: String,
    pub merged: Vec<MergedExperiment>,
    /// Experiments merged before that have runs since (`import --experiment` adds to one):
    /// those runs, added to the copy here (`to`; `runs` counts the added ones).
    pub grown: Vec<MergedExperiment>,
    pub skipped: Vec<SkippedExperiment>,
}

impl Store {
    /// Copies every experiment of each of `sources` (with its runs, parts, tags, metrics,
    /// samples, series and environment) into this database under new ids, adding `tags` to
    /// every copied run (replacing a run's own tag of the same name). A run's trace keeps
    /// pointing at its files: a name relative to the source's directory is made absolute
    /// unless this database sits in the same directory.
    pub fn merge_from(
        &mut self,
        sources: &[&Store],
        tags: &[(String, String)],
    ) -> Result<Vec<MergeReport>> {
        let here_dir = dir_of(Path::new(&self.path));
        let path = self.path.clone();
        let wrap = |source| StoreError::from_sqlite(&path, source);
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(wrap)?;
        let mut reports = Vec::new();
        for src in sources {
            let there_dir = dir_of(Path::new(&src.path));
            let traces = TraceNames {
                from: (here_dir != there_dir).then_some(there_dir),
            };
            let report = merge_one(&tx, &src.conn, &src.path, &traces, tags)
                .map_err(|e| StoreError::from_sqlite(&src.path, e))?;
            reports.push(report);
        }
        tx.commit().map_err(wrap)?;
        Ok(reports)
    }
}

/// The directory a database file is in, absolute where it can be made so.
fn dir_of(db: &Path) -> std::path::PathBuf {
    let dir = match db.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    std::fs::canonicalize(&dir)
        .or_else(|_| std::path::absolute(&dir))
        .unwrap_or(dir)
}

/// How a run's stored trace name is rewritten: relative names are relative to the source
/// database's directory (`from`, when it is not this one's).
struct TraceNames {
    from: Option<std::path::PathBuf>,
}

impl TraceNames {
    fn rewrite(&self, v: Value) -> Value {
        match (v, &self.from) {
            (Value::Text(name), Some(dir)) if !Path::new(&name).is_absolute() => {
                Value::Text(dir.join(name).display().to_string())
            }
            (v, _) => v,
        }
    }
}

fn merge_one(
    tx: &Transaction<'_>,
    src: &Connection,
    src_path: &str,
    traces: &TraceNames,
    tags: &[(String, String)],
) -> rusqlite::Result<MergeReport> {
    let mut report = MergeReport {
        source: src_path.to_string(),
        merged: Vec::new(),
        grown: Vec::new(),
        skipped: Vec::new(),
    };
    let tops: Vec<(i64, String, String)> = src
        .prepare("SELECT id, name, status FROM experiments WHERE part_of IS NULL ORDER BY id")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (from, name, status) in tops {
        if let Some(here) = already_here(tx, src, from)? {
            let added = copy_new_runs(tx, src, (from, status == "imported"), here, traces, tags)?;
            if added > 0 {
                report.grown.push(MergedExperiment {
                    from,
                    to: here,
                    name,
                    runs: added,
                    parts: Vec::new(),
                });
                continue;
            }
            report.skipped.push(SkippedExperiment {
                from,
                name,
                here: Some(here),
                why: format!("already here as experiment {here}"),
            });
            continue;
        }
        if status == "running" {
            report.skipped.push(SkippedExperiment {
                from,
                name,
                here: None,
                why: "still running there; merge it when it has finished (a run that was \
                      killed is marked interrupted by `iolab restore` on its machine)"
                    .into(),
            });
            continue;
        }
        let to = copy_experiment(tx, src, from, None, traces, tags)?;
        let parts: Vec<i64> = src
            .prepare("SELECT id FROM experiments WHERE part_of = ?1 ORDER BY id")?
            .query_map([from], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        let parts = parts
            .into_iter()
            .map(|p| copy_experiment(tx, src, p, Some(to), traces, tags))
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let runs = tx.query_row(
            "SELECT count(*) FROM runs WHERE experiment_id = ?1",
            [to],
            |r| r.get(0),
        )?;
        report.merged.push(MergedExperiment {
            from,
            to,
            name,
            runs,
            parts,
        });
    }
    Ok(report)
}

/// The experiment here that is source experiment `id` merged before, if any.
fn already_here(tx: &Transaction<'_>, src: &Connection, id: i64) -> rusqlite::Result<Option<i64>> {
    let key = "name, created_unix, seed, host, kernel, file_text";
    let row: Vec<Value> = src.query_row(
        &format!("SELECT {key} FROM experiments WHERE id = ?1"),
        [id],
        |r| (0..6).map(|i| r.get::<_, Value>(i)).collect(),
    )?;
    tx.query_row(
        "SELECT id FROM experiments WHERE part_of IS NULL AND name = ?1 AND created_unix = ?2 \
         AND seed = ?3 AND host = ?4 AND kernel = ?5 AND file_text = ?6 ORDER BY id LIMIT 1",
        rusqlite::params_from_iter(row),
        |r| r.get(0),
    )
    .map(Some)
    .or_else(|e| match e {
        rusqlite::Error::QueryReturnedNoRows => Ok(None),
        e => Err(e),
    })
}

/// Copies source experiment `id` (as a part of `part_of` here, if given) with its environment
/// and runs; returns its id here.
fn copy_experiment(
    tx: &Transaction<'_>,
    src: &Connection,
    id: i64,
    part_of: Option<i64>,
    traces: &TraceNames,
    tags: &[(String, String)],
) -> rusqlite::Result<i64> {
    let to = copy_rows(tx, src, "experiments", "id", id, &|col, v| match col {
        "part_of" => part_of.map_or(Value::Null, Value::Integer),
        _ => v,
    })?
    .pop()
    .ok_or(rusqlite::Error::QueryReturnedNoRows)?;
    copy_rows(
        tx,
        src,
        "environment",
        "experiment_id",
        id,
        &|col, v| match col {
            "experiment_id" => Value::Integer(to),
            _ => v,
        },
    )?;
    let runs: Vec<i64> = src
        .prepare("SELECT id FROM runs WHERE experiment_id = ?1 ORDER BY id")?
        .query_map([id], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for run in runs {
        copy_run(tx, src, run, to, traces, tags)?;
    }
    Ok(to)
}

/// What tells one run from the others of its experiment, in both databases. fio's output
/// is among them: two imported runs of two cells (each repetition 1) that ended in the same
/// second of fio's whole-second clock were taken for one, and the second never came.
const RUN_IDENTITY: &str = "repetition, warmup, start_unix, end_unix, fio_json, cell_key";
/// The columns of [`RUN_IDENTITY`] an imported experiment's runs are told apart by: their
/// cells change when a later import sets another fio option apart (`analysis::import_cells`),
/// and each has a repetition of its own.
const IMPORTED_IDENTITY_COLUMNS: usize = 5;

/// Copies the runs of source experiment `from` that its copy `to` here lacks (by
/// [`RUN_IDENTITY`]); returns how many. The runs of an imported one found here take the cells
/// they have there (regrouped there since they were merged).
fn copy_new_runs(
    tx: &Transaction<'_>,
    src: &Connection,
    (from, imported): (i64, bool),
    to: i64,
    traces: &TraceNames,
    tags: &[(String, String)],
) -> rusqlite::Result<u64> {
    let columns: Vec<&str> = RUN_IDENTITY.split(", ").collect();
    let columns = if imported {
        &columns[..IMPORTED_IDENTITY_COLUMNS]
    } else {
        &columns[..]
    };
    let runs: Vec<(i64, Vec<Value>, [Value; 2])> = src
        .prepare(&format!(
            "SELECT id, cell_key, cell_levels, {} FROM runs WHERE experiment_id = ?1 ORDER BY id",
            columns.join(", ")
        ))?
        .query_map([from], |r| {
            Ok((
                r.get(0)?,
                (3..3 + columns.len())
                    .map(|i| r.get(i))
                    .collect::<rusqlite::Result<_>>()?,
                [r.get(1)?, r.get(2)?],
            ))
        })?
        .collect::<rusqlite::Result<_>>()?;
    // IS, not =: a run of a program engine has no fio output (NULL), and NULL = NULL is not
    // true.
    let same: Vec<String> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{c} IS ?{}", i + 2))
        .collect();
    let mut here = tx.prepare_cached(&format!(
        "SELECT id FROM runs WHERE experiment_id = ?1 AND {}",
        same.join(" AND ")
    ))?;
    let mut regroup =
        tx.prepare_cached("UPDATE runs SET cell_key = ?1, cell_levels = ?2 WHERE id = ?3")?;
    let mut added = 0;
    for (run, identity, [key, levels]) in runs {
        let mut args = vec![Value::Integer(to)];
        args.extend(identity);
        let found: Option<i64> = here
            .query_row(rusqlite::params_from_iter(args), |r| r.get(0))
            .optional()?;
        match found {
            None => {
                copy_run(tx, src, run, to, traces, tags)?;
                added += 1;
            }
            Some(id) if imported => {
                regroup.execute(rusqlite::params![key, levels, id])?;
            }
            Some(_) => {}
        }
    }
    Ok(added)
}

/// Copies source run `run`, with its tags, metrics, samples and series, into experiment `to`
/// here, adding `tags`.
fn copy_run(
    tx: &Transaction<'_>,
    src: &Connection,
    run: i64,
    to: i64,
    traces: &TraceNames,
    tags: &[(String, String)],
) -> rusqlite::Result<()> {
    let new_run = copy_rows(tx, src, "runs", "id", run, &|col, v| match col {
        "experiment_id" => Value::Integer(to),
        "trace" => traces.rewrite(v),
        _ => v,
    })?
    .pop()
    .ok_or(rusqlite::Error::QueryReturnedNoRows)?;
    for table in ["run_tags", "metrics", "samples", "series"] {
        copy_rows(tx, src, table, "run_id", run, &|col, v| match col {
            "run_id" => Value::Integer(new_run),
            _ => v,
        })?;
    }
    for (name, value) in tags {
        tx.execute(
            "INSERT OR REPLACE INTO run_tags (run_id, name, value) VALUES (?1, ?2, ?3)",
            params![new_run, name, value],
        )?;
    }
    Ok(())
}

/// The columns of `table` in this database, in order.
fn columns(conn: &Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    conn.prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))?
        .query_map([], |r| r.get(0))?
        .collect()
}

/// Copies the rows of `table` whose `key` is `id` in the source, each value passed through
/// `fix` (by column name); an `id` column is left for SQLite to number. Returns the new rows'
/// ids.
fn copy_rows(
    tx: &Transaction<'_>,
    src: &Connection,
    table: &str,
    key: &str,
    id: i64,
    fix: &dyn Fn(&str, Value) -> Value,
) -> rusqlite::Result<Vec<i64>> {
    // The destination's columns: the source was brought to the same schema when it was
    // opened, so it has them all.
    let cols: Vec<String> = columns(tx, table)?
        .into_iter()
        .filter(|c| c != "id")
        .collect();
    let list = cols.join(", ");
    let marks = (1..=cols.len())
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut insert =
        tx.prepare_cached(&format!("INSERT INTO {table} ({list}) VALUES ({marks})"))?;
    let mut select = src.prepare_cached(&format!("SELECT {list} FROM {table} WHERE {key} = ?1"))?;
    let mut rows = select.query([id])?;
    let mut ids = Vec::new();
    while let Some(row) = rows.next()? {
        let values = cols
            .iter()
            .enumerate()
            .map(|(i, c)| Ok(fix(c, row.get::<_, Value>(i)?)))
            .collect::<rusqlite::Result<Vec<Value>>>()?;
        insert.execute(rusqlite::params_from_iter(values))?;
        ids.push(tx.last_insert_rowid());
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tables a merge copies, and the id columns it renumbers in each.
    const TABLES: &[(&str, &[&str])] = &[
        ("environment", &["experiment_id"]),
        ("experiments", &["id", "part_of"]),
        ("metrics", &["run_id"]),
        ("run_tags", &["run_id"]),
        ("runs", &["id", "experiment_id"]),
        ("samples", &["run_id"]),
        ("series", &["run_id"]),
    ];

    /// Every table of the schema is one a merge copies, with its id columns known: a
    /// migration that adds a table or an id column must teach the merge about it.
    #[test]
    fn the_merge_knows_every_table_and_id_column() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("m.db")).unwrap();
        let tables: Vec<String> = store
            .conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let known: Vec<&str> = TABLES.iter().map(|(t, _)| *t).collect();
        assert_eq!(tables, known);
        for (table, ids) in TABLES {
            let cols = columns(&store.conn, table).unwrap();
            let id_like: Vec<&str> = cols
                .iter()
                .map(String::as_str)
                .filter(|c| *c == "id" || c.ends_with("_id") || *c == "part_of")
                .collect();
            assert_eq!(&id_like, ids, "{table}");
        }
    }
}

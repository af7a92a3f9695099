//! Which experiment a run is writing, and where, recorded in the state directory while it runs.
//! A run killed with SIGKILL never sets its experiment's final status, so the experiment would
//! stay `running` forever; `iolab restore` only knows the state directory, not the database the
//! run used. So the run leaves a small record `STATE/runs/PID-ID.json` (database path and
//! experiment id), written before the experiment is stored for good (in the transaction that
//! creates it) and kept until its status is final, and `restore` marks every experiment whose
//! recording process is gone as `interrupted`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::store::Store;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    pid: u32,
    /// When that process started (`sys::process`): a pid reused since is not it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    started: Option<u64>,
    db_path: PathBuf,
    experiment_id: i64,
}

/// The record of one running experiment; `finish` removes it once its status is final.
#[derive(Debug)]
pub(crate) struct Registered {
    path: PathBuf,
}

fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("runs")
}

/// Records that this process is writing experiment `id` in `db_path`.
pub(crate) fn register(state_dir: &Path, db_path: &Path, id: i64) -> Result<Registered> {
    let dir = dir(state_dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!("{}-{id}.json", std::process::id()));
    let rec = Record {
        pid: std::process::id(),
        started: crate::sys::process::own_start(),
        // Absolute: `restore` may run from another directory.
        db_path: std::path::absolute(db_path).unwrap_or_else(|_| db_path.to_path_buf()),
        experiment_id: id,
    };
    std::fs::write(&path, serde_json::to_string(&rec)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(Registered { path })
}

impl Registered {
    /// The experiment's status is final: nothing left for `restore` to mark.
    pub(crate) fn finish(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One experiment `mark_abandoned` set to `interrupted`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Abandoned {
    pub db_path: PathBuf,
    pub experiment_id: i64,
}

/// Marks `interrupted` every experiment recorded in `state_dir` whose process is gone and whose
/// status is still `running`, and removes the records. A record that cannot be read, or whose
/// database is gone, is reported in `problems` (with what to do) and removed.
pub(crate) fn mark_abandoned(state_dir: &Path) -> Result<(Vec<Abandoned>, Vec<String>)> {
    let dir = dir(state_dir);
    let entries = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    let (mut marked, mut problems) = (Vec::new(), Vec::new());
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let rec = match crate::sys::own_dir::read_own_file(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Record>(&b).map_err(|e| e.to_string()))
        {
            Ok(r) => r,
            Err(why) => {
                problems.push(format!(
                    "{}: unreadable run record ({why}), removed; if an experiment still shows \
                     `running`, its run was killed",
                    path.display()
                ));
                let _ = std::fs::remove_file(&path);
                continue;
            }
        };
        if crate::sys::process::still_running(rec.pid, rec.started) {
            continue; // still running: it sets its own status
        }
        match mark(&rec) {
            Ok(true) => marked.push(Abandoned {
                db_path: rec.db_path.clone(),
                experiment_id: rec.experiment_id,
            }),
            Ok(false) => {}
            Err(e) => problems.push(format!(
                "{}: experiment {} in {} could not be marked interrupted ({e:#}); the record \
                 was removed",
                path.display(),
                rec.experiment_id,
                rec.db_path.display()
            )),
        }
        let _ = std::fs::remove_file(&path);
    }
    Ok((marked, problems))
}

/// The experiments of `db_path` recorded in `state_dir` whose process is gone, with its pid,
/// read only: what `mark_abandoned` would mark `interrupted`. `runs` and `show` say so beside
/// a status that still reads `running`.
pub(crate) fn abandoned_in(state_dir: &Path, db_path: &Path) -> Vec<(i64, u32)> {
    let Ok(entries) = std::fs::read_dir(dir(state_dir)) else {
        return Vec::new();
    };
    let db = std::path::absolute(db_path).unwrap_or_else(|_| db_path.to_path_buf());
    let mut out: Vec<(i64, u32)> = entries
        .flatten()
        .filter_map(|entry| {
            let bytes = crate::sys::own_dir::read_own_file(&entry.path()).ok()?;
            let rec: Record = serde_json::from_slice(&bytes).ok()?;
            (rec.db_path == db && !crate::sys::process::still_running(rec.pid, rec.started))
                .then_some((rec.experiment_id, rec.pid))
        })
        .collect();
    out.sort_unstable();
    out
}

/// The line saying an experiment still `running` lost its iolab, if `state_dir` knows.
pub(crate) fn abandoned_note(state_dir: &Path, db_path: &Path, id: i64) -> Option<String> {
    let (_, pid) = abandoned_in(state_dir, db_path)
        .into_iter()
        .find(|(e, _)| *e == id)?;
    Some(format!(
        "experiment {id} shows `running`, but the iolab that ran it (pid {pid}) is gone, killed: \
         `iolab restore` puts back what it changed and marks it interrupted"
    ))
}

fn mark(rec: &Record) -> Result<bool> {
    // A writer's open (`open_existing` reads an older file through a copy), of a file that
    // must already be there: a database moved or removed since is not made anew.
    if !rec.db_path.exists() {
        return Err(crate::store::StoreError::Missing {
            path: rec.db_path.display().to_string(),
        }
        .into());
    }
    let mut store = Store::open(&rec.db_path)?;
    match store.experiment(rec.experiment_id) {
        // Killed after recording itself, before its experiment was stored: nothing to mark.
        Err(crate::store::StoreError::NoExperiment { .. }) => return Ok(false),
        Err(e) => return Err(e.into()),
        Ok(e) if e.status != "running" => return Ok(false),
        Ok(_) => {}
    }
    store.set_experiment_status(rec.experiment_id, "interrupted")?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::NewExperiment;

    fn new_experiment() -> NewExperiment {
        NewExperiment {
            name: "e".into(),
            file_text: String::new(),
            seed: 1,
            planned_order: serde_json::json!([]),
            host: "h".into(),
            kernel: "k".into(),
            part_of: None,
        }
    }

    fn experiment(store: &mut Store) -> i64 {
        store.create_experiment(&new_experiment()).unwrap()
    }

    #[test]
    fn experiments_of_gone_runs_are_marked_interrupted_and_live_ones_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        let state = dir.path().join("state");
        let mut store = Store::open(&db).unwrap();
        let (killed, live, done) = (
            experiment(&mut store),
            experiment(&mut store),
            experiment(&mut store),
        );
        store.set_experiment_status(done, "done").unwrap();
        // This process stands for the live run; a reaped child's pid for the killed one.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let registered = register(&state, &db, live).unwrap();
        // Another process under the killed run's pid: this one, started at another time.
        let reused = (
            std::process::id(),
            crate::sys::process::own_start().map(|s| s + 1),
        );
        for ((pid, started), id) in [(reused, killed), ((gone, None), done)] {
            let rec = Record {
                pid,
                started,
                db_path: db.clone(),
                experiment_id: id,
            };
            std::fs::write(
                dir.path().join(format!("state/runs/{pid}-{id}-old.json")),
                serde_json::to_string(&rec).unwrap(),
            )
            .unwrap();
        }
        std::fs::write(state.join("runs/junk.json"), "{").unwrap();
        // Read only, what restore will mark (the done one's record too: its status is final,
        // which `runs` and `show` look at first).
        let mut want = vec![(killed, reused.0), (done, gone)];
        want.sort_unstable();
        assert_eq!(abandoned_in(&state, &db), want);
        let note = abandoned_note(&state, &db, killed).unwrap();
        assert!(note.contains(&format!("(pid {})", reused.0)), "{note}");
        assert!(abandoned_note(&state, &db, live).is_none());
        assert!(abandoned_in(&state, &dir.path().join("other.db")).is_empty());

        let (marked, problems) = mark_abandoned(&state).unwrap();
        assert_eq!(marked.len(), 1);
        assert_eq!(marked[0].experiment_id, killed);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("junk.json"), "{problems:?}");
        let store = Store::open_existing(&db).unwrap();
        assert_eq!(store.experiment(killed).unwrap().status, "interrupted");
        assert_eq!(store.experiment(live).unwrap().status, "running");
        assert_eq!(store.experiment(done).unwrap().status, "done");
        // Only the live run's record is left, until it finishes.
        assert_eq!(std::fs::read_dir(state.join("runs")).unwrap().count(), 1);
        registered.finish();
        assert_eq!(std::fs::read_dir(state.join("runs")).unwrap().count(), 0);
    }

    /// The record is written inside the transaction that creates the experiment: a run that
    /// fails (or is killed) between the two leaves no experiment, and its record is removed
    /// by `restore` without a word.
    #[test]
    fn a_run_stopped_before_its_experiment_was_stored_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        let state = dir.path().join("state");
        let mut store = Store::open(&db).unwrap();
        let new = new_experiment();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let stopped = store.create_experiment_then(&new, |id| -> Result<()> {
            register(&state, &db, id).unwrap();
            // As a process killed here would have left it: the record of a gone pid.
            let rec = Record {
                pid: gone,
                started: None,
                db_path: db.clone(),
                experiment_id: id,
            };
            let path = state.join(format!("runs/{gone}-{id}.json"));
            std::fs::write(path, serde_json::to_string(&rec).unwrap()).unwrap();
            anyhow::bail!("stopped")
        });
        assert!(stopped.is_err());
        assert!(store.experiments().unwrap().is_empty());
        drop(store);
        let (marked, problems) = mark_abandoned(&state).unwrap();
        assert!(marked.is_empty() && problems.is_empty(), "{problems:?}");
        // The record of this (live) process stays until it finishes.
        assert_eq!(std::fs::read_dir(state.join("runs")).unwrap().count(), 1);
        // Stored for good once the closure returns.
        let mut store = Store::open(&db).unwrap();
        let (id, registered) = store
            .create_experiment_then(&new, |id| register(&state, &db, id))
            .unwrap();
        assert_eq!(store.experiment(id).unwrap().status, "running");
        registered.finish();
    }
}

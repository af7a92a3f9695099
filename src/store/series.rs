//! Per-second series within a run (schema version 4): fio's throughput and latency and the
//! sampler's device and per-CPU interrupt rates, all on one axis, seconds since the run's
//! measured window began. Kept apart from the packed raw samples because these are derived,
//! small, and read by name across runs (a plot of one cell's throughput over time).

use rusqlite::params;

use super::{Result, Store};

/// One value of one series: `t_s` is the end of the interval it covers (seconds since the
/// measured window's start); the interval began at the series' previous `t_s`, or at 0.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SeriesPoint {
    pub name: String,
    pub t_s: f64,
    pub value: f64,
}

/// Inserts points inside the caller's transaction (a run and its series commit together);
/// non-finite points are left out (a bin without a value is absent, never NaN).
pub(super) fn insert(
    tx: &rusqlite::Transaction<'_>,
    run_id: i64,
    points: &[SeriesPoint],
) -> rusqlite::Result<()> {
    let mut st = tx.prepare(
        "INSERT OR REPLACE INTO series (run_id, name, t_s, value) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for p in points
        .iter()
        .filter(|p| p.t_s.is_finite() && p.value.is_finite())
    {
        st.execute(params![run_id, p.name, p.t_s, p.value])?;
    }
    Ok(())
}

impl Store {
    /// Adds (or replaces) a run's series points.
    #[cfg(test)]
    pub(crate) fn add_series(&mut self, run_id: i64, points: &[SeriesPoint]) -> Result<()> {
        self.in_tx(|tx| insert(tx, run_id, points))
    }

    /// A run's series, by name then time.
    pub fn series(&self, run_id: i64) -> Result<Vec<SeriesPoint>> {
        let mut st = self
            .conn
            .prepare("SELECT name, t_s, value FROM series WHERE run_id = ?1 ORDER BY name, t_s")
            .map_err(self.err())?;
        let rows = st
            .query_map([run_id], |r| {
                Ok(SeriesPoint {
                    name: r.get(0)?,
                    t_s: r.get(1)?,
                    value: r.get(2)?,
                })
            })
            .map_err(self.err())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.err())
    }
}

#[cfg(test)]
mod tests {
    use super::super::schema::MIGRATIONS;
    use super::*;

    /// A version 3 file (the layout before series) opens as version 4, keeps its runs, and
    /// takes series for them.
    #[test]
    fn a_version_3_file_gains_the_series_table_and_keeps_its_runs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v3.db");
        super::super::tests::older_file(&path, 3, "checks", "[]");
        let mut db = Store::open(&path).unwrap();
        assert_eq!(db.schema_version().unwrap(), MIGRATIONS.len() as i64);
        assert_eq!(db.experiment(1).unwrap().part_of, None);
        assert_eq!(db.runs(1).unwrap().len(), 1);
        assert!(db.series(1).unwrap().is_empty());
        let p = |name: &str, t_s: f64, value: f64| SeriesPoint {
            name: name.into(),
            t_s,
            value,
        };
        db.add_series(
            1,
            &[
                p("fio:read_iops", 2.0, 900.0),
                p("fio:read_iops", 1.0, 1000.0),
                p("cpu0:irq_per_s", 1.0, f64::NAN),
            ],
        )
        .unwrap();
        assert_eq!(
            db.series(1).unwrap(),
            vec![
                p("fio:read_iops", 1.0, 1000.0),
                p("fio:read_iops", 2.0, 900.0)
            ]
        );
    }
}

//! `iolab show ID --summary`: the table `iolab run` printed when the experiment ended (a row
//! per cell; IOPS, MB/s, latency, %usr/%sys and interrupts/s as mean +-stddev), again, from
//! the stored runs. It is the compact table people paste into a mail (case 3's "blocksize
//! IOPS ints/sec usr sys"); `show` without it carries the confidence intervals.

use serde::Serialize;

use crate::experiment::run::summary::{self, CellResult};
use crate::output::Render;
use crate::report::table::{Table, MAX_WIDTH};
use crate::store::Store;

/// The cells of one experiment as `iolab run` summed them up: in JSON each cell's runs, and
/// the table as `run --json` has it (`summary`: its rows' figures with mean and stddev).
#[derive(Debug, Serialize)]
pub(crate) struct RunSummary {
    pub experiment: i64,
    pub cells: Vec<CellResult>,
    #[serde(rename = "summary")]
    table: Table,
}

/// The summary of experiment `id` from its stored runs (warm-ups left out, as the run did).
pub(crate) fn of_experiment(store: &Store, id: i64) -> anyhow::Result<RunSummary> {
    let loaded = super::show::load(store, id)?;
    // The key the run loop gave the cell (`hipri=true,bs=4k`), from any of its runs.
    let key_of = |c: &super::cells::CellRuns| {
        let any =
            c.ok.iter()
                .chain(c.failed.iter().map(|(r, _)| r))
                .chain(c.not_applicable.iter().map(|(r, _)| r))
                .next();
        any.and_then(|id| loaded.runs.iter().find(|r| r.id == *id))
            .map(|r| r.cell_key.clone())
            .unwrap_or_else(|| c.label())
    };
    let mut cells = Vec::new();
    for (index, c) in loaded.cells.iter().enumerate() {
        let runs =
            c.ok.iter()
                .map(|&run| store.run_metrics(run))
                .collect::<Result<Vec<_>, _>>()?;
        cells.push(CellResult {
            index,
            key: key_of(c),
            runs,
            not_applicable: c.not_applicable.first().map(|(_, why)| why.clone()),
            failures: c.failed.iter().map(|(_, why)| why.clone()).collect(),
            capped: false,
        });
    }
    Ok(RunSummary {
        experiment: id,
        table: summary::table(&cells, loaded.runs_fio),
        cells,
    })
}

impl Render for RunSummary {
    fn text(&self) -> String {
        crate::report::format::terminal_safe_lines(&self.table.render_text(MAX_WIDTH)).into_owned()
    }
}
